/* Storage-backed memory: BDMPI_sbmalloc/sbrealloc/sbfree/sbload/sbloadall/sbunload/
 * sbunloadall/sbdiscard. The contents survive blocking calls, unloading and reloading under
 * every -sbma policy; with a storage-backed policy an unloaded allocation is out of memory
 * and a loaded one in memory (mincore, asked of the kernel directly; a few pages of slack,
 * since the kernel may keep a page it is still handing between its per-CPU lists). */
#define _GNU_SOURCE
#include <bdmpi.h>
#include <sys/mman.h>
#include <unistd.h>
#include "check.h"

static size_t resident(void *p, size_t len) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE), n = (len + page - 1) / page, k = 0;
    unsigned char *v = malloc(n);
    if (mincore(p, len, v) != 0) { free(v); return (size_t)-1; }
    for (size_t i = 0; i < n; i++) k += v[i] & 1;
    free(v);
    return k * page;
}

static unsigned long pattern(int r, size_t i) { return (unsigned long)r * 0x9E3779B97F4A7C15ul ^ i; }

static int verify(const unsigned long *a, size_t n, int r, const char *when) {
    for (size_t i = 0; i < n; i++)
        if (a[i] != pattern(r, i)) {
            CHECK(0, "%s: element %zu is %lx, want %lx", when, i, a[i], pattern(r, i));
            return 0;
        }
    return 1;
}

int main(int argc, char **argv) {
    int r, p;
    const char *policy = getenv("BDMPI_TEST_SBMA");
    int backed = policy && strcmp(policy, "none") != 0;
    CHECK_OK(MPI_Init(&argc, &argv));
    CHECK_OK(MPI_Comm_rank(MPI_COMM_WORLD, &r));
    CHECK_OK(MPI_Comm_size(MPI_COMM_WORLD, &p));
    check_rank = r;

    size_t n = (size_t)1 << 20; /* 8 MiB */
    unsigned long *a = BDMPI_sbmalloc(n * sizeof *a);
    CHECK(a != NULL, "sbmalloc");
    size_t nonzero = 0;
    for (size_t i = 0; i < n; i++) nonzero += a[i] != 0;
    CHECK(nonzero == 0, "new storage-backed memory has %zu non-zero elements", nonzero);
    for (size_t i = 0; i < n; i++) a[i] = pattern(r, i);
    char *small = BDMPI_sbmalloc(100); /* below a page: ordinary memory */
    memset(small, r, 100);

    /* blocking calls (every rank waits for the others) keep the contents */
    for (int k = 0; k < 3; k++) {
        CHECK_OK(MPI_Barrier(MPI_COMM_WORLD));
        int x = r, y;
        CHECK_OK(MPI_Sendrecv(&x, 1, MPI_INT, (r + 1) % p, 1, &y, 1, MPI_INT, (r + p - 1) % p, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        verify(a, n, r, "after blocking");
    }
    for (int i = 0; i < 100; i++) CHECK(small[i] == (char)r, "small allocation");

    /* explicit unload and load */
    size_t bytes = n * sizeof *a, slack = bytes / 64;
    BDMPI_sbunload(a);
    if (backed) CHECK(resident(a, bytes) <= slack, "after sbunload %zu bytes are resident", resident(a, bytes));
    BDMPI_sbload(a);
    if (backed) CHECK(resident(a, bytes) >= bytes - slack, "after sbload %zu bytes are resident", resident(a, bytes));
    verify(a, n, r, "after sbunload + sbload");
    BDMPI_sbunloadall();
    if (backed) CHECK(resident(a, bytes) <= slack, "after sbunloadall %zu bytes are resident", resident(a, bytes));
    verify(a, n, r, "after sbunloadall, read back by touching");
    BDMPI_sbloadall();

    /* realloc keeps the prefix, grows with zeros, shrinks */
    a = BDMPI_sbrealloc(a, 2 * n * sizeof *a);
    CHECK(a != NULL, "sbrealloc up");
    verify(a, n, r, "after growing");
    for (size_t i = n; i < 2 * n; i += 4096) CHECK(a[i] == 0, "grown part is zero at %zu", i);
    a = BDMPI_sbrealloc(a, n / 2 * sizeof *a);
    CHECK(a != NULL, "sbrealloc down");
    verify(a, n / 2, r, "after shrinking");

    /* discard: whole pages inside the range read as zeros afterwards, the rest is kept */
    size_t page = (size_t)sysconf(_SC_PAGESIZE), per = page / sizeof *a;
    BDMPI_sbdiscard(a + per, (ssize_t)(4 * page));
    if (backed) {
        for (size_t i = per; i < 5 * per; i += 97) CHECK(a[i] == 0, "discarded element %zu is %lx", i, a[i]);
        for (size_t i = 5 * per; i < n / 2; i += 101) CHECK(a[i] == pattern(r, i), "element %zu after the discarded range", i);
    }
    for (size_t i = 0; i < per; i++) CHECK(a[i] == pattern(r, i), "element %zu before the discarded range", i);

    /* memory from sbmalloc before a blocking call, freed after BDMPI_Finalize */
    unsigned long *b = BDMPI_sbrealloc(NULL, 3 * page);
    CHECK(b != NULL, "sbrealloc(NULL)");
    b[0] = 42;
    BDMPI_sbfree(small);
    CHECK_OK(MPI_Barrier(MPI_COMM_WORLD));
    CHECK(b[0] == 42, "after a barrier");
    CHECK_OK(MPI_Finalize());
    BDMPI_sbfree(a);
    BDMPI_sbfree(b);
    return finish();
}
