/* BDMPI_Init/Finalize, the communicator queries on the four predefined communicators,
 * Comm_dup, Comm_split (with keys, colors and MPI_UNDEFINED) and Comm_free, through both the
 * BDMPI_ and the MPI_ names. Expected values follow from the layout the harness asked for. */
#include <bdmpi.h>
#include "check.h"

#include "shape.h"

static void expect(const char *what, shape_t got, shape_t want) {
    CHECK(got.size == want.size && got.rank == want.rank && got.lsize == want.lsize &&
              got.lrank == want.lrank && got.nsize == want.nsize && got.nrank == want.nrank &&
              got.rrank == want.rrank,
          "%s: got size %d rank %d lsize %d lrank %d nsize %d nrank %d rrank %d, "
          "want %d %d %d %d %d %d %d",
          what, got.size, got.rank, got.lsize, got.lrank, got.nsize, got.nrank, got.rrank,
          want.size, want.rank, want.lsize, want.lrank, want.nsize, want.nrank, want.rrank);
}

/* The shape of a communicator whose members are the global ranks `members[0..n)` in
 * communicator order, seen from global rank `me`: nodes are ordered by their lowest
 * communicator rank, as the library documents. */
static shape_t shape_of(const int *members, int n, int me, int ns) {
    shape_t s = {n, -1, 0, 0, 0, 0, -1};
    int mynode = me / ns, i, j;
    for (i = 0; i < n; i++) {
        if (members[i] == me) s.rank = i;
        if (members[i] / ns == mynode) {
            if (s.rrank < 0) s.rrank = i;
            s.lsize++;
        }
        int first = 1; /* is this the first member of its node? */
        for (j = 0; j < i; j++)
            if (members[j] / ns == members[i] / ns) first = 0;
        if (first) {
            if (members[i] / ns == mynode) s.nrank = s.nsize;
            s.nsize++;
        }
    }
    for (i = 0; i < s.rank; i++)
        if (members[i] / ns == mynode) s.lrank++;
    return s;
}

int main(int argc, char **argv) {
    int ns = test_ns(), nodes = test_nodes(), p = ns * nodes, r, i, n;
    CHECK_OK(MPI_Init(&argc, &argv));
    CHECK_OK(MPI_Comm_rank(MPI_COMM_WORLD, &r));
    check_rank = r;
    int node = r / ns, lrank = r % ns;

    for (int names = 0; names < 2; names++) {
        shape_t world = {p, r, ns, lrank, nodes, node, node * ns};
        expect("COMM_WORLD", query(BDMPI_COMM_WORLD, names), world);
        shape_t nd = {ns, lrank, ns, lrank, 1, 0, 0};
        expect("COMM_NODE", query(BDMPI_COMM_NODE, names), nd);
        shape_t self = {1, 0, 1, 0, 1, 0, 0};
        expect("COMM_SELF", query(MPI_COMM_SELF, names), self);
        shape_t cw = {p, lrank * nodes + node, ns, lrank, nodes, node, node};
        expect("COMM_CWORLD", query(BDMPI_COMM_CWORLD, names), cw);
    }
    CHECK(MPI_COMM_WORLD == BDMPI_COMM_WORLD, "MPI_COMM_WORLD is BDMPI_COMM_WORLD");

    /* dup: same shape, its own message space, freed to NULL */
    BDMPI_Comm dup = NULL;
    CHECK_OK(BDMPI_Comm_dup(BDMPI_COMM_WORLD, &dup));
    CHECK(dup != NULL && dup != BDMPI_COMM_WORLD, "dup is a new handle");
    shape_t world = {p, r, ns, lrank, nodes, node, node * ns};
    expect("dup of COMM_WORLD", query(dup, 0), world);
    int token = r, got = -1;
    BDMPI_Status st;
    /* a message on dup does not match a receive on COMM_WORLD */
    CHECK_OK(BDMPI_Send(&token, 1, BDMPI_INT, (r + 1) % p, 5, dup));
    int flag = 1;
    CHECK_OK(BDMPI_Barrier(dup));
    CHECK_OK(BDMPI_Iprobe(BDMPI_ANY_SOURCE, BDMPI_ANY_TAG, BDMPI_COMM_WORLD, &flag, &st));
    CHECK(flag == 0, "a message sent on a duplicate is visible on COMM_WORLD");
    CHECK_OK(BDMPI_Recv(&got, 1, BDMPI_INT, (r + p - 1) % p, 5, dup, &st));
    CHECK(got == (r + p - 1) % p, "got %d on dup", got);
    BDMPI_Comm stale = dup;
    CHECK_OK(MPI_Comm_free(&dup));
    CHECK(dup == NULL, "Comm_free sets the handle to NULL");
    CHECK(BDMPI_Comm_size(stale, &n) == BDMPI_ERR_COMM, "a freed handle is refused");
    BDMPI_Comm w = BDMPI_COMM_WORLD;
    CHECK(BDMPI_Comm_free(&w) == BDMPI_ERR_COMM, "COMM_WORLD cannot be freed");

    /* split by rank % 3 with keys that reverse the order */
    for (int names = 0; names < 2; names++) {
        BDMPI_Comm sub = NULL;
        int color = r % 3;
        if (names)
            CHECK_OK(MPI_Comm_split(MPI_COMM_WORLD, color, -r, &sub));
        else
            CHECK_OK(BDMPI_Comm_split(BDMPI_COMM_WORLD, color, -r, &sub));
        int members[4096];
        n = 0;
        for (i = p - 1; i >= 0; i--)
            if (i % 3 == color) members[n++] = i;
        expect("split(r % 3, -r)", query(sub, names), shape_of(members, n, r, ns));
        /* it works: the sum of the members' global ranks */
        long mine = r, sum = -1, want = 0;
        for (i = 0; i < n; i++) want += members[i];
        CHECK_OK(BDMPI_Allreduce(&mine, &sum, 1, BDMPI_LONG, BDMPI_SUM, sub));
        CHECK(sum == want, "allreduce on the split communicator: %ld, want %ld", sum, want);
        CHECK_OK(BDMPI_Comm_free(&sub));
    }

    /* MPI_UNDEFINED joins none */
    BDMPI_Comm evens = BDMPI_COMM_WORLD;
    CHECK_OK(MPI_Comm_split(MPI_COMM_WORLD, r % 2 ? MPI_UNDEFINED : 0, 0, &evens));
    if (r % 2) {
        CHECK(evens == NULL, "an odd rank joined no communicator");
    } else {
        int members[4096];
        n = 0;
        for (i = 0; i < p; i += 2) members[n++] = i;
        expect("even ranks", query(evens, 0), shape_of(members, n, r, ns));
        CHECK_OK(BDMPI_Barrier(evens));
        CHECK_OK(BDMPI_Comm_free(&evens));
    }

    /* split of the node communicator, then dup of the result */
    BDMPI_Comm half = NULL, half2 = NULL;
    CHECK_OK(BDMPI_Comm_split(BDMPI_COMM_NODE, lrank % 2, lrank, &half));
    CHECK_OK(BDMPI_Comm_dup(half, &half2));
    {
        int members[4096];
        n = 0;
        for (i = 0; i < ns; i++)
            if (i % 2 == lrank % 2) members[n++] = node * ns + i;
        expect("split of COMM_NODE", query(half2, 0), shape_of(members, n, r, ns));
    }
    CHECK_OK(BDMPI_Comm_free(&half2));
    CHECK_OK(BDMPI_Comm_free(&half));

    CHECK(BDMPI_Comm_split(BDMPI_COMM_WORLD, -5, 0, &half) == BDMPI_ERR_ARG,
          "a negative color other than MPI_UNDEFINED is refused");
    CHECK(BDMPI_Comm_size(NULL, &n) == BDMPI_ERR_COMM, "a NULL communicator is refused");

    CHECK_OK(BDMPI_Finalize());
    return finish();
}
