/* Bad use gets BDMPI's error codes (and a message naming the rank and the call, which the
 * harness checks on standard error); the program goes on working afterwards. */
#include <bdmpi.h>
#include <stdint.h>
#include "check.h"

int main(int argc, char **argv) {
    int r, p, x = 1, y = 0;
    BDMPI_Status st;
    CHECK_OK(BDMPI_Init(&argc, &argv));
    CHECK_OK(BDMPI_Comm_rank(BDMPI_COMM_WORLD, &r));
    CHECK_OK(BDMPI_Comm_size(BDMPI_COMM_WORLD, &p));
    check_rank = r;

    CHECK(BDMPI_Send(&x, 1, BDMPI_INT, 0, 1, BDMPI_COMM_NULL) == BDMPI_ERR_COMM, "NULL communicator");
    CHECK(BDMPI_Send(&x, 1, 12345, 0, 1, BDMPI_COMM_WORLD) == BDMPI_ERR_TYPE, "unknown datatype");
    CHECK(BDMPI_Send(&x, 1, BDMPI_INT, p, 1, BDMPI_COMM_WORLD) == BDMPI_ERR_RANK, "destination = size");
    CHECK(BDMPI_Send(&x, 1, BDMPI_INT, -7, 1, BDMPI_COMM_WORLD) == BDMPI_ERR_RANK, "negative destination");
    CHECK(BDMPI_Send(&x, 1, BDMPI_INT, 0, -3, BDMPI_COMM_WORLD) == BDMPI_ERR_TAG, "negative tag");
    CHECK(BDMPI_Send(&x, SIZE_MAX / 2, BDMPI_DOUBLE, 0, 1, BDMPI_COMM_WORLD) == BDMPI_ERR_COUNT, "overflowing count");
    CHECK(BDMPI_Send(NULL, 4, BDMPI_INT, 0, 1, BDMPI_COMM_WORLD) == BDMPI_ERR_BUFFER, "NULL buffer");
    CHECK(MPI_Send(&x, -1, MPI_INT, 0, 1, MPI_COMM_WORLD) == MPI_ERR_COUNT, "negative count");
    CHECK(BDMPI_Recv(&y, 1, BDMPI_INT, p + 3, 1, BDMPI_COMM_WORLD, &st) == BDMPI_ERR_RANK, "source out of range");
    CHECK(BDMPI_Bcast(&x, 1, BDMPI_INT, p, BDMPI_COMM_WORLD) == BDMPI_ERR_ROOT, "root = size");
    CHECK(BDMPI_Reduce(&x, &y, 1, BDMPI_INT, BDMPI_SUM, -1, BDMPI_COMM_WORLD) == BDMPI_ERR_ROOT, "negative root");
    CHECK(BDMPI_Allreduce(&x, &y, 1, BDMPI_INT, 999, BDMPI_COMM_WORLD) == BDMPI_ERR_OP, "unknown op");
    CHECK(MPI_Gather(&x, 1, MPI_INT, &y, 1, MPI_INT, -2, MPI_COMM_WORLD) == MPI_ERR_ROOT, "gather root");
    BDMPI_Request req = BDMPI_REQUEST_NULL;
    CHECK(BDMPI_Irecv(&y, 1, BDMPI_INT, 0, 1, BDMPI_COMM_WORLD, NULL) == BDMPI_ERR_ARG, "NULL request");
    CHECK(BDMPI_Wait(&req, &st) == BDMPI_SUCCESS, "waiting on a null request");
    CHECK(BDMPI_Init(&argc, &argv) != BDMPI_SUCCESS, "a second BDMPI_Init");

    /* still works */
    int sum = 0;
    CHECK_OK(BDMPI_Allreduce(&x, &sum, 1, BDMPI_INT, BDMPI_SUM, BDMPI_COMM_WORLD));
    CHECK(sum == p, "allreduce after the errors: %d", sum);
    CHECK_OK(BDMPI_Finalize());
    CHECK(BDMPI_Barrier(BDMPI_COMM_WORLD) != BDMPI_SUCCESS, "a call after BDMPI_Finalize");
    return finish();
}
