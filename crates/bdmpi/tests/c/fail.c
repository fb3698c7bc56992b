/* Ways a rank can end a job: argv[1] says which, argv[2] which rank does it.
 *   crash     the rank dies of SIGSEGV while the others wait for it
 *   noexit    the rank exits with status 0 without BDMPI_Finalize
 *   status    every rank finalizes; the rank exits with status 3
 *   deadlock  every rank waits for a message nobody sends
 *   abort     the rank calls abort() before BDMPI_Init
 *   hang      the rank computes forever (bdmprun is stopped by a signal) */
#include <unistd.h>
#include <bdmpi.h>
#include <signal.h>
#include "check.h"

int main(int argc, char **argv) {
    const char *what = argc > 1 ? argv[1] : "";
    int who = argc > 2 ? atoi(argv[2]) : 0, r, x = 0;
    if (strcmp(what, "abort") == 0 && atoi(getenv("BDMPI_RANK") ? getenv("BDMPI_RANK") : "-1") == who) abort();
    BDMPI_Init(&argc, &argv);
    BDMPI_Comm_rank(BDMPI_COMM_WORLD, &r);
    BDMPI_Barrier(BDMPI_COMM_WORLD);
    if (strcmp(what, "crash") == 0) {
        if (r == who) raise(SIGSEGV);
        BDMPI_Recv(&x, 1, BDMPI_INT, who, 1, BDMPI_COMM_WORLD, BDMPI_STATUS_IGNORE);
    } else if (strcmp(what, "noexit") == 0) {
        if (r == who) exit(0);
        BDMPI_Barrier(BDMPI_COMM_WORLD);
    } else if (strcmp(what, "hang") == 0) {
        if (r == who)
            for (;;) sleep(1);
        BDMPI_Barrier(BDMPI_COMM_WORLD);
    } else if (strcmp(what, "deadlock") == 0) {
        BDMPI_Recv(&x, 1, BDMPI_INT, BDMPI_ANY_SOURCE, 99, BDMPI_COMM_WORLD, BDMPI_STATUS_IGNORE);
    }
    BDMPI_Finalize();
    if (strcmp(what, "status") == 0 && r == who) return 3;
    return 0;
}
