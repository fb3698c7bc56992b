/* The cost of a call: one-way time of a ping-pong between ranks 0 and 1 for messages of 8 B
 * to 16 MiB, and of a call that returns at once (Iprobe with nothing to find), against BDMPI's
 * API (compiled with crates/bdmpi/tests/mpi-shim/bdmpi.h it is the same program under MPI).
 * Usage: pingpong. Rank 0 prints one line per size: bytes, microseconds one way, MB/s. */
#include <bdmpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    int r, p;
    BDMPI_Status st;
    BDMPI_Init(&argc, &argv);
    BDMPI_Comm_rank(BDMPI_COMM_WORLD, &r);
    BDMPI_Comm_size(BDMPI_COMM_WORLD, &p);
    char *buf = malloc((size_t)16 << 20);
    memset(buf, r, (size_t)16 << 20);
    for (size_t n = 8; n <= ((size_t)16 << 20); n *= 8) {
        int reps = n < 65536 ? 2000 : n < (1 << 20) ? 200 : 20;
        BDMPI_Barrier(BDMPI_COMM_WORLD);
        double t0 = BDMPI_Wtime();
        for (int i = 0; i < reps && p > 1; i++) {
            if (r == 0) {
                BDMPI_Send(buf, n, BDMPI_BYTE, 1, 1, BDMPI_COMM_WORLD);
                BDMPI_Recv(buf, n, BDMPI_BYTE, 1, 1, BDMPI_COMM_WORLD, &st);
            } else if (r == 1) {
                BDMPI_Recv(buf, n, BDMPI_BYTE, 0, 1, BDMPI_COMM_WORLD, &st);
                BDMPI_Send(buf, n, BDMPI_BYTE, 0, 1, BDMPI_COMM_WORLD);
            }
        }
        double us = (BDMPI_Wtime() - t0) / (2.0 * reps) * 1e6;
        if (r == 0) printf("pingpong %zu bytes %.2f us %.1f MB/s\n", n, us, n / us);
    }
    BDMPI_Barrier(BDMPI_COMM_WORLD);
    int flag;
    double t0 = BDMPI_Wtime();
    for (int i = 0; i < 20000; i++) BDMPI_Iprobe(BDMPI_ANY_SOURCE, 77, BDMPI_COMM_WORLD, &flag, &st);
    double us = (BDMPI_Wtime() - t0) / 20000 * 1e6;
    if (r == 0) printf("iprobe %.2f us\n", us);
    free(buf);
    BDMPI_Finalize();
    return 0;
}
