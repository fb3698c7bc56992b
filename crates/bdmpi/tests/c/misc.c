/* BDMPI_Wtime/MPI_Wtime, BDMPI_Print_vm_info, the mlock wrappers and Get_count's checks. */
#define _GNU_SOURCE
#include <bdmpi.h>
#include <sys/mman.h>
#include <time.h>
#include "check.h"

int main(int argc, char **argv) {
    int r;
    CHECK_OK(MPI_Init(&argc, &argv));
    CHECK_OK(MPI_Comm_rank(MPI_COMM_WORLD, &r));
    check_rank = r;

    struct timespec t0, t1, pause = {0, 20000000};
    double w0 = BDMPI_Wtime();
    clock_gettime(CLOCK_MONOTONIC, &t0);
    nanosleep(&pause, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double w1 = MPI_Wtime();
    double real = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
    CHECK(w1 - w0 >= real * 0.99 && w1 - w0 < real + 1.0, "Wtime advanced %g s over %g s", w1 - w0, real);

    char hdr[] = "vm";
    CHECK_OK(BDMPI_Print_vm_info(hdr));
    CHECK_OK(MPI_Print_vm_info(hdr));

    /* the wrappers do what mlock(2) does, whatever the limits allow */
    static char a[8192], b[8192];
    int want = mlock(b, sizeof b), got = BDMPI_mlock(a, sizeof a);
    CHECK(got == want, "BDMPI_mlock returned %d, mlock %d", got, want);
    CHECK(BDMPI_munlock(a, sizeof a) == munlock(b, sizeof b), "munlock");
    CHECK(BDMPI_munlockall() == 0, "munlockall");

    BDMPI_Status st;
    memset(&st, 0, sizeof st);
    st.datatype = BDMPI_INT;
    st.count = 6;
    size_t n = 0;
    int in = 0;
    CHECK_OK(BDMPI_Get_count(&st, BDMPI_SHORT, &n));
    CHECK(n == 12, "6 ints are %zu shorts", n);
    CHECK_OK(MPI_Get_count(&st, MPI_DOUBLE, &in));
    CHECK(in == 3, "6 ints are %d doubles", in);
    st.datatype = BDMPI_SHORT;
    st.count = 3;
    CHECK_OK(MPI_Get_count(&st, MPI_INT, &in));
    CHECK(in == MPI_UNDEFINED, "3 shorts are not whole ints: %d", in);
    CHECK_OK(BDMPI_Get_count(&st, BDMPI_INT, &n));
    CHECK(n == 1, "3 shorts hold %zu whole ints", n);
    CHECK(BDMPI_Get_count(BDMPI_STATUS_IGNORE, BDMPI_INT, &n) == BDMPI_ERR_ARG, "no status");
    CHECK(BDMPI_Get_count(&st, 77, &n) == BDMPI_ERR_TYPE, "a wrong datatype");

    CHECK_OK(MPI_Finalize());
    return finish();
}
