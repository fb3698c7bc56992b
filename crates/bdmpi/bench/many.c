/* Many ranks on one node: an allreduce and an all-to-all over every rank, checked against
 * formulas; then, while rank 0 holds the node (every other rank waits in a barrier), it writes
 * the file named by argv[1] and sleeps argv[2] seconds, so that a script can measure the
 * memory of the idle ranks.
 *
 * Usage: many [READY_FILE SECONDS] */
#include <bdmpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv) {
    int r, p, bad = 0;
    BDMPI_Init(&argc, &argv);
    BDMPI_Comm_rank(BDMPI_COMM_WORLD, &r);
    BDMPI_Comm_size(BDMPI_COMM_WORLD, &p);
    long mine = r + 1, sum = 0;
    BDMPI_Allreduce(&mine, &sum, 1, BDMPI_LONG, BDMPI_SUM, BDMPI_COMM_WORLD);
    if (sum != (long)p * (p + 1) / 2) bad = 1;
    int *out = malloc(sizeof(int) * p), *in = malloc(sizeof(int) * p);
    for (int i = 0; i < p; i++) out[i] = r * p + i;
    BDMPI_Alltoall(out, 1, BDMPI_INT, in, 1, BDMPI_INT, BDMPI_COMM_WORLD);
    for (int i = 0; i < p; i++)
        if (in[i] != i * p + r) bad = 1;
    free(out);
    free(in);
    int anybad = 0;
    BDMPI_Allreduce(&bad, &anybad, 1, BDMPI_INT, BDMPI_MAX, BDMPI_COMM_WORLD);
    if (argc == 3) {
        if (r == 0) {
            FILE *f = fopen(argv[1], "w");
            if (f) {
                fprintf(f, "%d\n", (int)getpid());
                fclose(f);
            }
            sleep((unsigned)atoi(argv[2]));
        }
        BDMPI_Barrier(BDMPI_COMM_WORLD);
    }
    if (r == 0) printf("%d ranks: allreduce and alltoall %s\n", p, anybad ? "WRONG" : "correct");
    BDMPI_Finalize();
    return anybad;
}
