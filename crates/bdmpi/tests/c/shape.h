/* A communicator's shape through BDMPI's queries (size, rank, lsize, lrank, nsize, nrank,
 * rrank), by the MPI_ names or the BDMPI_ ones; shared by tests/c/comm.c and
 * tests/c-vs-mpi/comms.c. The includer defines CHECK_OK. */
#ifndef SPILLWAY_TEST_SHAPE_H
#define SPILLWAY_TEST_SHAPE_H

typedef struct { int size, rank, lsize, lrank, nsize, nrank, rrank; } shape_t;

static shape_t query(BDMPI_Comm c, int mpi_names) {
    shape_t s;
    if (mpi_names) {
        CHECK_OK(MPI_Comm_size(c, &s.size));
        CHECK_OK(MPI_Comm_rank(c, &s.rank));
        CHECK_OK(MPI_Comm_lsize(c, &s.lsize));
        CHECK_OK(MPI_Comm_lrank(c, &s.lrank));
        CHECK_OK(MPI_Comm_nsize(c, &s.nsize));
        CHECK_OK(MPI_Comm_nrank(c, &s.nrank));
        CHECK_OK(MPI_Comm_rrank(c, &s.rrank));
    } else {
        CHECK_OK(BDMPI_Comm_size(c, &s.size));
        CHECK_OK(BDMPI_Comm_rank(c, &s.rank));
        CHECK_OK(BDMPI_Comm_lsize(c, &s.lsize));
        CHECK_OK(BDMPI_Comm_lrank(c, &s.lrank));
        CHECK_OK(BDMPI_Comm_nsize(c, &s.nsize));
        CHECK_OK(BDMPI_Comm_nrank(c, &s.nrank));
        CHECK_OK(BDMPI_Comm_rrank(c, &s.rrank));
    }
    return s;
}

#endif
