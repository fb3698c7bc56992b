/* BDMPI_Entercritical/Exitcritical: every rank enters once; at no time are more than -nc ranks
 * of a node inside (counted in memory shared by the node's ranks, outside the library). */
#define _GNU_SOURCE
#include <bdmpi.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include "check.h"

int main(int argc, char **argv) {
    int r, p, nc = env_int("BDMPI_TEST_NC", 1);
    CHECK_OK(BDMPI_Init(&argc, &argv));
    CHECK_OK(BDMPI_Comm_rank(BDMPI_COMM_WORLD, &r));
    CHECK_OK(BDMPI_Comm_size(BDMPI_COMM_WORLD, &p));
    check_rank = r;
    char name[64];
    snprintf(name, sizeof name, "/bdmpi-crit-%d", (int)getppid());
    int fd = shm_open(name, O_RDWR | O_CREAT, 0600);
    CHECK(fd >= 0 && ftruncate(fd, 4096) == 0, "shared memory");
    long *sh = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    CHECK_OK(BDMPI_Barrier(BDMPI_COMM_WORLD));
    for (int round = 0; round < 3; round++) {
        CHECK_OK(BDMPI_Entercritical());
        long inside = __atomic_add_fetch(&sh[0], 1, __ATOMIC_SEQ_CST);
        long m = __atomic_load_n(&sh[1], __ATOMIC_SEQ_CST);
        while (inside > m && !__atomic_compare_exchange_n(&sh[1], &m, inside, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {}
        __atomic_add_fetch(&sh[2], 1, __ATOMIC_SEQ_CST);
        struct timespec t = {0, 2000000};
        nanosleep(&t, NULL); /* stay a while, so that others would overlap */
        __atomic_sub_fetch(&sh[0], 1, __ATOMIC_SEQ_CST);
        CHECK_OK(BDMPI_Exitcritical());
    }
    CHECK(BDMPI_Exitcritical() == BDMPI_ERR_ARG, "leaving a critical section never entered");
    CHECK_OK(BDMPI_Barrier(BDMPI_COMM_WORLD));
    long most = __atomic_load_n(&sh[1], __ATOMIC_SEQ_CST), entries = __atomic_load_n(&sh[2], __ATOMIC_SEQ_CST);
    int ns = test_ns();
    CHECK(most >= 1 && most <= nc, "%ld ranks were inside at once with -nc %d", most, nc);
    CHECK(entries == 3L * ns, "%ld entries on this node, want %d", entries, 3 * ns);
    CHECK_OK(BDMPI_Barrier(BDMPI_COMM_WORLD));
    if (r % ns == 0) shm_unlink(name);
    CHECK_OK(BDMPI_Finalize());
    return finish();
}
