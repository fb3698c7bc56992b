/* Communicators, through both names: the queries (size, rank and BDMPI's lsize, lrank, nsize,
 * nrank, rrank) on COMM_WORLD, COMM_SELF, COMM_NODE and COMM_CWORLD; Comm_dup (its messages
 * are its own), Comm_split (colors, keys that reverse the order, equal keys that keep it,
 * MPI_UNDEFINED giving COMM_NULL, a split of a split and of COMM_NODE), communication on each,
 * and Comm_free. The job runs on one node (one bdmprun, or mpirun's processes), so COMM_NODE
 * and COMM_CWORLD hold every rank in COMM_WORLD's order. Prints every communicator's shape. */
#define _GNU_SOURCE
#include <bdmpi.h>
#include "conf.h"

#include "../c/shape.h"

/* Checks a communicator of `size` members in which the caller is `rank` (one node: the local
 * rank is the rank, one node numbered 0, whose lowest rank is 0), through both names, prints
 * it, and checks that it works: the sum of the members' world ranks, and a ring. */
static void check_comm(const char *name, BDMPI_Comm c, int size, int rank, long world_sum, int g) {
    for (int names = 0; names < 2; names++) {
        shape_t s = query(c, names);
        CHECK(s.size == size && s.rank == rank && s.lsize == size && s.lrank == rank &&
                  s.nsize == 1 && s.nrank == 0 && s.rrank == 0,
              "%s (names %d): size %d rank %d lsize %d lrank %d nsize %d nrank %d rrank %d; "
              "want size %d rank %d", name, names, s.size, s.rank, s.lsize, s.lrank, s.nsize,
              s.nrank, s.rrank, size, rank);
        if (names == 0)
            say("%s: size %d rank %d lsize %d lrank %d nsize %d nrank %d rrank %d", name, s.size,
                s.rank, s.lsize, s.lrank, s.nsize, s.nrank, s.rrank);
    }
    long mine = g, sum = -1;
    CHECK_OK(BDMPI_Allreduce(&mine, &sum, 1, BDMPI_LONG, BDMPI_SUM, c));
    CHECK(sum == world_sum, "%s: the members' world ranks sum to %ld, want %ld", name, sum, world_sum);
    int left = -1;
    CHECK_OK(MPI_Sendrecv(&g, 1, MPI_INT, (rank + 1) % size, 77, &left, 1, MPI_INT,
                          (rank + size - 1) % size, 77, c, MPI_STATUS_IGNORE));
    say("%s: sum %ld, left neighbour %d", name, sum, left);
}

int main(int argc, char **argv) {
    int g, p, i;
    CHECK_OK(MPI_Init(&argc, &argv));
    CHECK_OK(MPI_Comm_rank(MPI_COMM_WORLD, &g));
    CHECK_OK(MPI_Comm_size(MPI_COMM_WORLD, &p));
    conf_rank = g;
    long all = (long)p * (p - 1) / 2;

    check_comm("world", BDMPI_COMM_WORLD, p, g, all, g);
    check_comm("self", BDMPI_COMM_SELF, 1, 0, g, g);
    check_comm("node", BDMPI_COMM_NODE, p, g, all, g);
    check_comm("cworld", BDMPI_COMM_CWORLD, p, g, all, g);

    /* dup: its own message space */
    BDMPI_Comm dup = BDMPI_COMM_NULL, dup2 = BDMPI_COMM_NULL;
    CHECK_OK(BDMPI_Comm_dup(BDMPI_COMM_WORLD, &dup));
    CHECK_OK(MPI_Comm_dup(dup, &dup2));
    CHECK(dup != BDMPI_COMM_NULL && dup != BDMPI_COMM_WORLD && dup2 != dup, "new handles");
    check_comm("dup", dup, p, g, all, g);
    int token = 500 + g, got = -1, flag = 1;
    CHECK_OK(BDMPI_Send(&token, 1, BDMPI_INT, (g + 1) % p, 5, dup));
    CHECK_OK(BDMPI_Send(&token, 1, BDMPI_INT, (g + 1) % p, 5, dup2));
    CHECK_OK(BDMPI_Barrier(dup));
    CHECK_OK(BDMPI_Iprobe(BDMPI_ANY_SOURCE, BDMPI_ANY_TAG, BDMPI_COMM_WORLD, &flag, BDMPI_STATUS_IGNORE));
    CHECK(flag == 0, "a message sent on a duplicate shows on COMM_WORLD");
    CHECK_OK(BDMPI_Recv(&got, 1, BDMPI_INT, BDMPI_ANY_SOURCE, 5, dup2, BDMPI_STATUS_IGNORE));
    CHECK(got == 500 + (g + p - 1) % p, "dup2 got %d", got);
    got = -1;
    CHECK_OK(BDMPI_Recv(&got, 1, BDMPI_INT, BDMPI_ANY_SOURCE, 5, dup, BDMPI_STATUS_IGNORE));
    CHECK(got == 500 + (g + p - 1) % p, "dup got %d", got);
    say("dup: got %d", got);
    CHECK_OK(MPI_Comm_free(&dup2));
    CHECK_OK(BDMPI_Comm_free(&dup));
    CHECK(dup == BDMPI_COMM_NULL && dup2 == BDMPI_COMM_NULL, "Comm_free sets the handle to COMM_NULL");

    /* split by g % 3 with keys that reverse the order (BDMPI_ and MPI_ names) */
    for (int names = 0; names < 2; names++) {
        BDMPI_Comm sub = BDMPI_COMM_NULL;
        int color = g % 3, n = 0, rank = -1;
        long sum = 0;
        if (names)
            CHECK_OK(MPI_Comm_split(MPI_COMM_WORLD, color, -g, &sub));
        else
            CHECK_OK(BDMPI_Comm_split(BDMPI_COMM_WORLD, color, -g, &sub));
        for (i = p - 1; i >= 0; i--)
            if (i % 3 == color) {
                if (i == g) rank = n;
                n++;
                sum += i;
            }
        char name[32];
        snprintf(name, sizeof name, "split%d mod3=%d", names, color);
        check_comm(name, sub, n, rank, sum, g);

        /* a split of the split: equal keys keep the order */
        BDMPI_Comm subsub = BDMPI_COMM_NULL;
        int sr;
        CHECK_OK(BDMPI_Comm_rank(sub, &sr));
        CHECK_OK(BDMPI_Comm_split(sub, sr % 2, 7, &subsub));
        int m = 0, mr = -1, k = 0;
        long msum = 0;
        for (i = p - 1; i >= 0; i--)
            if (i % 3 == color) {
                if (k % 2 == sr % 2) {
                    if (i == g) mr = m;
                    m++;
                    msum += i;
                }
                k++;
            }
        snprintf(name, sizeof name, "split%d mod3=%d half=%d", names, color, sr % 2);
        check_comm(name, subsub, m, mr, msum, g);
        if (names)
            CHECK_OK(MPI_Comm_free(&subsub));
        else
            CHECK_OK(BDMPI_Comm_free(&subsub));
        CHECK_OK(BDMPI_Comm_free(&sub));
    }

    /* MPI_UNDEFINED joins none */
    BDMPI_Comm evens = BDMPI_COMM_WORLD;
    CHECK_OK(MPI_Comm_split(MPI_COMM_WORLD, g % 2 ? MPI_UNDEFINED : 0, 0, &evens));
    if (g % 2) {
        CHECK(evens == BDMPI_COMM_NULL, "an odd rank joined a communicator");
        say("evens: none");
    } else {
        long sum = 0;
        for (i = 0; i < p; i += 2) sum += i;
        check_comm("evens", evens, (p + 1) / 2, g / 2, sum, g);
        CHECK_OK(MPI_Comm_free(&evens));
    }

    /* a split of COMM_NODE and of COMM_SELF */
    BDMPI_Comm half = BDMPI_COMM_NULL, self2 = BDMPI_COMM_NULL;
    CHECK_OK(BDMPI_Comm_split(BDMPI_COMM_NODE, g < p / 2, g, &half));
    {
        int lo = g < p / 2, n = lo ? p / 2 : p - p / 2, rank = lo ? g : g - p / 2;
        long sum = 0;
        for (i = 0; i < p; i++)
            if ((i < p / 2) == lo) sum += i;
        check_comm(lo ? "node low" : "node high", half, n, rank, sum, g);
    }
    CHECK_OK(BDMPI_Comm_free(&half));
    CHECK_OK(MPI_Comm_split(MPI_COMM_SELF, 3, 0, &self2));
    check_comm("self split", self2, 1, 0, g, g);
    CHECK_OK(MPI_Comm_free(&self2));

    CHECK_OK(MPI_Finalize());
    return finish();
}
