/*
 * bdmpi.h for plain MPI: lets a BDMPI program (BDMPI_* names with size_t counts, BDMPI's
 * status fields, the node communicators) compile as an ordinary MPI program, so that its
 * output under mpirun is the reference for the same program under spillway's bdmprun.
 * Used by scripts/bdmpi_suite.sh and scripts/bench_bdmpi.py.
 *
 * The whole job is one node: COMM_NODE and COMM_CWORLD are COMM_WORLD, the local rank is the
 * rank. BDMPI_Send is buffered (MPI_Bsend on a large attached buffer), as BDMPI's sends are:
 * programs such as pr1d send to every rank before receiving. Reductions accept
 * sendbuf == recvbuf (BDMPI allows it; MPI wants MPI_IN_PLACE). Statuses carry BDMPI's
 * fields (BDMPI_SOURCE, count in elements).
 */
#ifndef BDMPI_PLAIN_MPI_H
#define BDMPI_PLAIN_MPI_H
#include <mpi.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <unistd.h>

typedef struct {
    int MPI_SOURCE, MPI_TAG, MPI_ERROR;
    int BDMPI_SOURCE, BDMPI_TAG, BDMPI_ERROR;
    size_t count;
    MPI_Status s;
} shim_status_t;

#define BDMPI_SUCCESS MPI_SUCCESS
#define BDMPI_ANY_SOURCE MPI_ANY_SOURCE
#define BDMPI_ANY_TAG MPI_ANY_TAG
#define BDMPI_COMM_WORLD MPI_COMM_WORLD
#define BDMPI_COMM_SELF MPI_COMM_SELF
#define BDMPI_COMM_NODE MPI_COMM_WORLD
#define BDMPI_COMM_CWORLD MPI_COMM_WORLD
#define BDMPI_COMM_NULL MPI_COMM_NULL
#define BDMPI_STATUS_IGNORE ((shim_status_t *)0)
#define BDMPI_REQUEST_NULL MPI_REQUEST_NULL
typedef MPI_Comm BDMPI_Comm;
typedef MPI_Datatype BDMPI_Datatype;
typedef MPI_Op BDMPI_Op;
typedef MPI_Request BDMPI_Request;
typedef shim_status_t BDMPI_Status;

#define BDMPI_CHAR MPI_CHAR
#define BDMPI_BYTE MPI_BYTE
#define BDMPI_INT MPI_INT
#define BDMPI_LONG MPI_LONG
#define BDMPI_FLOAT MPI_FLOAT
#define BDMPI_DOUBLE MPI_DOUBLE
#define BDMPI_SIZE_T MPI_UNSIGNED_LONG
#define BDMPI_SSIZE_T MPI_LONG
#define BDMPI_2INT MPI_2INT
#define BDMPI_SUM MPI_SUM
#define BDMPI_PROD MPI_PROD
#define BDMPI_MIN MPI_MIN
#define BDMPI_MAX MPI_MAX
#define BDMPI_MAXLOC MPI_MAXLOC
#define BDMPI_MINLOC MPI_MINLOC

static inline void shim_fill(shim_status_t *st, MPI_Datatype t) {
    int c = 0;
    if (st == NULL) return;
    st->MPI_SOURCE = st->BDMPI_SOURCE = st->s.MPI_SOURCE;
    st->MPI_TAG = st->BDMPI_TAG = st->s.MPI_TAG;
    st->MPI_ERROR = st->BDMPI_ERROR = MPI_SUCCESS;
    MPI_Get_count(&st->s, t, &c);
    st->count = (size_t)c;
}

static inline MPI_Status *shim_raw(shim_status_t *st) { return st ? &st->s : MPI_STATUS_IGNORE; }

static inline int shim_Recv(void *b, int n, MPI_Datatype t, int src, int tag, MPI_Comm c,
                            shim_status_t *st) {
    int rc = MPI_Recv(b, n, t, src, tag, c, shim_raw(st));
    shim_fill(st, t);
    return rc;
}
static inline int shim_Probe(int src, int tag, MPI_Comm c, shim_status_t *st) {
    int rc = MPI_Probe(src, tag, c, shim_raw(st));
    shim_fill(st, MPI_BYTE);
    return rc;
}
static inline int shim_Wait(MPI_Request *r, shim_status_t *st) {
    int rc = MPI_Wait(r, shim_raw(st));
    shim_fill(st, MPI_BYTE);
    return rc;
}
static inline int shim_Get_count(shim_status_t *st, MPI_Datatype t, int *n) {
    return MPI_Get_count(&st->s, t, n);
}
static inline int shim_same(const void *a, const void *b) { return a == b; }
static inline int shim_Reduce(const void *s, void *r, int n, MPI_Datatype t, MPI_Op op, int root,
                              MPI_Comm c) {
    int me;
    MPI_Comm_rank(c, &me);
    if (shim_same(s, r)) return MPI_Reduce(me == root ? MPI_IN_PLACE : s, r, n, t, op, root, c);
    return MPI_Reduce(s, r, n, t, op, root, c);
}
static inline int shim_Allreduce(const void *s, void *r, int n, MPI_Datatype t, MPI_Op op,
                                 MPI_Comm c) {
    return MPI_Allreduce(shim_same(s, r) ? MPI_IN_PLACE : s, r, n, t, op, c);
}
#define MPI_Recv shim_Recv
#define MPI_Probe shim_Probe
#define MPI_Wait shim_Wait
#define MPI_Get_count shim_Get_count
#define MPI_Reduce shim_Reduce
#define MPI_Allreduce shim_Allreduce
#define MPI_Status shim_status_t
#undef MPI_STATUS_IGNORE
#define MPI_STATUS_IGNORE ((shim_status_t *)0)

static inline int BDMPI_Init(int *argc, char ***argv) {
    int rc = MPI_Init(argc, argv);
    size_t size = (size_t)256 << 20;
    MPI_Buffer_attach(malloc(size), (int)size);
    return rc;
}
static inline int BDMPI_Finalize(void) {
    void *b;
    int n;
    MPI_Buffer_detach(&b, &n);
    free(b);
    return MPI_Finalize();
}
#define BDMPI_Comm_size MPI_Comm_size
#define BDMPI_Comm_rank MPI_Comm_rank
#define BDMPI_Comm_dup MPI_Comm_dup
#define BDMPI_Comm_free MPI_Comm_free
#define BDMPI_Comm_split MPI_Comm_split
#define BDMPI_Barrier MPI_Barrier
static inline int BDMPI_Comm_lrank(MPI_Comm c, int *r) { return MPI_Comm_rank(c, r); }
static inline int BDMPI_Comm_lsize(MPI_Comm c, int *r) { return MPI_Comm_size(c, r); }
static inline int BDMPI_Comm_nrank(MPI_Comm c, int *r) { (void)c; *r = 0; return MPI_SUCCESS; }
static inline int BDMPI_Comm_nsize(MPI_Comm c, int *r) { (void)c; *r = 1; return MPI_SUCCESS; }
static inline int BDMPI_Comm_rrank(MPI_Comm c, int *r) { (void)c; *r = 0; return MPI_SUCCESS; }

static inline int BDMPI_Send(void *b, size_t n, MPI_Datatype t, int d, int tag, MPI_Comm c) {
    return MPI_Bsend(b, (int)n, t, d, tag, c);
}
static inline int BDMPI_Isend(void *b, size_t n, MPI_Datatype t, int d, int tag, MPI_Comm c,
                              MPI_Request *r) {
    return MPI_Ibsend(b, (int)n, t, d, tag, c, r);
}
static inline int BDMPI_Recv(void *b, size_t n, MPI_Datatype t, int s, int tag, MPI_Comm c,
                             shim_status_t *st) {
    return shim_Recv(b, (int)n, t, s, tag, c, st);
}
#define BDMPI_Probe shim_Probe
#define BDMPI_Wait shim_Wait
static inline int BDMPI_Bcast(void *b, size_t n, MPI_Datatype t, int root, MPI_Comm c) {
    return MPI_Bcast(b, (int)n, t, root, c);
}
static inline int BDMPI_Reduce(void *s, void *r, size_t n, MPI_Datatype t, MPI_Op op, int root,
                               MPI_Comm c) {
    return shim_Reduce(s, r, (int)n, t, op, root, c);
}
static inline int BDMPI_Allreduce(void *s, void *r, size_t n, MPI_Datatype t, MPI_Op op,
                                  MPI_Comm c) {
    return shim_Allreduce(s, r, (int)n, t, op, c);
}
static inline int BDMPI_Gather(void *s, size_t sn, MPI_Datatype st, void *r, size_t rn,
                               MPI_Datatype rt, int root, MPI_Comm c) {
    return MPI_Gather(s, (int)sn, st, r, (int)rn, rt, root, c);
}
static inline int BDMPI_Alltoall(void *s, size_t sn, MPI_Datatype st, void *r, size_t rn,
                                 MPI_Datatype rt, MPI_Comm c) {
    return MPI_Alltoall(s, (int)sn, st, r, (int)rn, rt, c);
}
static inline int *shim_ints(const size_t *v, int n) {
    int *o = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
    for (int i = 0; i < n; i++) o[i] = (int)v[i];
    return o;
}
static inline int BDMPI_Alltoallv(void *s, size_t *sc, size_t *sd, MPI_Datatype st, void *r,
                                  size_t *rc, size_t *rd, MPI_Datatype rt, MPI_Comm c) {
    int p;
    MPI_Comm_size(c, &p);
    int *a = shim_ints(sc, p), *b = shim_ints(sd, p), *e = shim_ints(rc, p), *f = shim_ints(rd, p);
    int rcode = MPI_Alltoallv(s, a, b, st, r, e, f, rt, c);
    free(a); free(b); free(e); free(f);
    return rcode;
}
/* Storage-backed memory: plain memory under MPI. */
#define BDMPI_sbmalloc malloc
#define BDMPI_sbrealloc realloc
#define BDMPI_sbfree free
static inline double BDMPI_Wtime(void) { return MPI_Wtime(); }
static inline int BDMPI_Iprobe(int src, int tag, MPI_Comm c, int *f, shim_status_t *st) {
    int rc = MPI_Iprobe(src, tag, c, f, shim_raw(st));
    if (*f) shim_fill(st, MPI_BYTE);
    return rc;
}
static inline int BDMPI_mlock(const void *a, size_t n) { return mlock(a, n); }
static inline int BDMPI_munlock(const void *a, size_t n) { return munlock(a, n); }
static inline int BDMPI_mlockall(int f) { return mlockall(f); }
static inline int BDMPI_munlockall(void) { return munlockall(); }
#endif
