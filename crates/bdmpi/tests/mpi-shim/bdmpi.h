/*
 * bdmpi.h for plain MPI (spillway's own shim, not BDMPI's header): lets a program written
 * against BDMPI's API (crates/bdmpi/include/bdmpi.h) compile as an ordinary MPI program,
 *
 *     mpicc -I crates/bdmpi/tests/mpi-shim prog.c -o prog && mpirun -np N ./prog
 *
 * so that its output under mpirun is the reference for the same source linked with libbdmpi
 * and run under bdmprun. Used by crates/bdmpi/tests/against_mpi.rs (the programs of
 * crates/bdmpi/tests/c-vs-mpi) and by scripts/bench_bdmpi.py.
 *
 * Every function and name of our bdmpi.h is here, with BDMPI's semantics where they differ
 * from MPI's:
 *   - the whole job is one node: COMM_NODE and COMM_CWORLD are COMM_WORLD, the local rank and
 *     size are the rank and size, the node rank is 0 and the lowest rank of the node is 0;
 *   - sends are buffered (BDMPI_Send and MPI_Send are MPI_Bsend on a large attached buffer,
 *     the Isends MPI_Ibsend), as BDMPI's are: a program may send to every rank before it
 *     receives anything;
 *   - statuses carry BDMPI's fields; `count` is in elements of the receive's datatype after a
 *     receive or a wait on an Irecv (after a probe, ask Get_count);
 *   - the send and receive buffers of a collective may overlap or be the same (the send data
 *     is copied first when they do);
 *   - BDMPI's own calls: Reduce_init/Reduce_fine (MPI_Ireduce of a copy of the contribution,
 *     completed by Reduce_fine), Merge (gathered at the root and merged there), the node
 *     queries, the critical sections (no limit: always entered), Print_vm_info, and the
 *     storage-backed memory (plain memory: sbmalloc is calloc, load/unload and discard do
 *     nothing).
 * Error codes are MPI's; only BDMPI_SUCCESS (MPI_SUCCESS) is meant to be compared with.
 */
#ifndef BDMPI_PLAIN_MPI_H
#define BDMPI_PLAIN_MPI_H
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <unistd.h>

/* ---- types and constants ---------------------------------------------------------------- */

typedef struct {
    int MPI_SOURCE, MPI_TAG, MPI_ERROR;
    int BDMPI_SOURCE, BDMPI_TAG, BDMPI_ERROR;
    size_t count;
    MPI_Status s;
} shim_status_t;

typedef MPI_Comm BDMPI_Comm;
typedef MPI_Datatype BDMPI_Datatype;
typedef MPI_Op BDMPI_Op;
typedef MPI_Request BDMPI_Request;
typedef shim_status_t BDMPI_Status;

#define BDMPI_SUCCESS MPI_SUCCESS
#define BDMPI_ERR_UNKNOWN MPI_ERR_UNKNOWN
#define BDMPI_ERR_COMM MPI_ERR_COMM
#define BDMPI_ERR_ARG MPI_ERR_ARG
#define BDMPI_ERR_BUFFER MPI_ERR_BUFFER
#define BDMPI_ERR_COUNT MPI_ERR_COUNT
#define BDMPI_ERR_TYPE MPI_ERR_TYPE
#define BDMPI_ERR_TAG MPI_ERR_TAG
#define BDMPI_ERR_ROOT MPI_ERR_ROOT
#define BDMPI_ERR_RANK MPI_ERR_RANK
#define BDMPI_ERR_TRUNCATE MPI_ERR_TRUNCATE
#define BDMPI_ERR_OP MPI_ERR_OP
#define BDMPI_ANY_SOURCE MPI_ANY_SOURCE
#define BDMPI_ANY_TAG MPI_ANY_TAG
#define BDMPI_PROC_NULL MPI_PROC_NULL
#define BDMPI_COMM_WORLD MPI_COMM_WORLD
#define BDMPI_COMM_SELF MPI_COMM_SELF
#define BDMPI_COMM_NODE MPI_COMM_WORLD
#define BDMPI_COMM_CWORLD MPI_COMM_WORLD
#define BDMPI_COMM_NULL MPI_COMM_NULL
#define BDMPI_STATUS_IGNORE ((shim_status_t *)0)
#define BDMPI_REQUEST_NULL MPI_REQUEST_NULL

#define BDMPI_DATATYPE_NULL MPI_DATATYPE_NULL
#define BDMPI_CHAR MPI_CHAR
#define BDMPI_SIGNED_CHAR MPI_SIGNED_CHAR
#define BDMPI_UNSIGNED_CHAR MPI_UNSIGNED_CHAR
#define BDMPI_BYTE MPI_BYTE
#define BDMPI_WCHAR MPI_WCHAR
#define BDMPI_SHORT MPI_SHORT
#define BDMPI_UNSIGNED_SHORT MPI_UNSIGNED_SHORT
#define BDMPI_INT MPI_INT
#define BDMPI_UNSIGNED MPI_UNSIGNED
#define BDMPI_LONG MPI_LONG
#define BDMPI_UNSIGNED_LONG MPI_UNSIGNED_LONG
#define BDMPI_LONG_LONG_INT MPI_LONG_LONG_INT
#define BDMPI_UNSIGNED_LONG_LONG MPI_UNSIGNED_LONG_LONG
#define BDMPI_INT8_T MPI_INT8_T
#define BDMPI_UINT8_T MPI_UINT8_T
#define BDMPI_INT16_T MPI_INT16_T
#define BDMPI_UINT16_T MPI_UINT16_T
#define BDMPI_INT32_T MPI_INT32_T
#define BDMPI_UINT32_T MPI_UINT32_T
#define BDMPI_INT64_T MPI_INT64_T
#define BDMPI_UINT64_T MPI_UINT64_T
#define BDMPI_SIZE_T MPI_UNSIGNED_LONG
#define BDMPI_SSIZE_T MPI_LONG
#define BDMPI_FLOAT MPI_FLOAT
#define BDMPI_DOUBLE MPI_DOUBLE
#define BDMPI_FLOAT_INT MPI_FLOAT_INT
#define BDMPI_DOUBLE_INT MPI_DOUBLE_INT
#define BDMPI_LONG_INT MPI_LONG_INT
#define BDMPI_SHORT_INT MPI_SHORT_INT
#define BDMPI_2INT MPI_2INT
#define MPI_SIZE_T MPI_UNSIGNED_LONG
#define MPI_SSIZE_T MPI_LONG

#define BDMPI_OP_NULL MPI_OP_NULL
#define BDMPI_MAX MPI_MAX
#define BDMPI_MIN MPI_MIN
#define BDMPI_SUM MPI_SUM
#define BDMPI_PROD MPI_PROD
#define BDMPI_LAND MPI_LAND
#define BDMPI_BAND MPI_BAND
#define BDMPI_LOR MPI_LOR
#define BDMPI_BOR MPI_BOR
#define BDMPI_LXOR MPI_LXOR
#define BDMPI_BXOR MPI_BXOR
#define BDMPI_MAXLOC MPI_MAXLOC
#define BDMPI_MINLOC MPI_MINLOC

/* ---- requests: what a wait needs to know (the datatype of an Irecv, the buffers of a
 * Reduce_init) ---------------------------------------------------------------------------- */

typedef struct {
    MPI_Request req; /* MPI_REQUEST_NULL: a free slot */
    MPI_Datatype type;
    void *send, *recv; /* Reduce_init's copies */
    size_t bytes;
} shim_pending_t;

#define SHIM_PENDING 256
static shim_pending_t shim_pending[SHIM_PENDING];

static inline shim_pending_t *shim_find(MPI_Request r) {
    if (r == MPI_REQUEST_NULL) return NULL;
    for (int i = 0; i < SHIM_PENDING; i++)
        if (shim_pending[i].req == r) return &shim_pending[i];
    return NULL;
}

static inline shim_pending_t *shim_add(MPI_Request r) {
    for (int i = 0; i < SHIM_PENDING; i++)
        if (shim_pending[i].req == MPI_REQUEST_NULL) {
            memset(&shim_pending[i], 0, sizeof shim_pending[i]);
            shim_pending[i].req = r;
            return &shim_pending[i];
        }
    fprintf(stderr, "mpi-shim: more than %d requests pending\n", SHIM_PENDING);
    MPI_Abort(MPI_COMM_WORLD, 1);
    return NULL;
}

static inline void shim_drop(shim_pending_t *e) {
    if (!e) return;
    memset(e, 0, sizeof *e);
    e->req = MPI_REQUEST_NULL;
}

static inline void shim_init_pending(void) {
    for (int i = 0; i < SHIM_PENDING; i++) shim_drop(&shim_pending[i]);
}

/* ---- statuses ---------------------------------------------------------------------------- */

static inline void shim_fill(shim_status_t *st, MPI_Datatype t) {
    int c = 0;
    if (st == NULL) return;
    st->MPI_SOURCE = st->BDMPI_SOURCE = st->s.MPI_SOURCE;
    st->MPI_TAG = st->BDMPI_TAG = st->s.MPI_TAG;
    st->MPI_ERROR = st->BDMPI_ERROR = MPI_SUCCESS;
    MPI_Get_count(&st->s, t, &c);
    st->count = c == MPI_UNDEFINED ? 0 : (size_t)c;
}

static inline MPI_Status *shim_raw(shim_status_t *st) { return st ? &st->s : MPI_STATUS_IGNORE; }

static inline int shim_Get_count(shim_status_t *st, MPI_Datatype t, int *n) {
    return MPI_Get_count(&st->s, t, n);
}
static inline int BDMPI_Get_count(shim_status_t *st, MPI_Datatype t, size_t *n) {
    int c = 0, rc = MPI_Get_count(&st->s, t, &c);
    *n = (size_t)c;
    return rc;
}

/* ---- start and end ----------------------------------------------------------------------- */

static inline int shim_Init(int *argc, char ***argv) {
    int rc = MPI_Init(argc, argv);
    size_t size = (size_t)256 << 20;
    MPI_Buffer_attach(malloc(size), (int)size);
    shim_init_pending();
    return rc;
}
static inline int shim_Finalize(void) {
    void *b;
    int n;
    MPI_Buffer_detach(&b, &n);
    free(b);
    return MPI_Finalize();
}
static inline int BDMPI_Init(int *argc, char ***argv) { return shim_Init(argc, argv); }
static inline int BDMPI_Finalize(void) { return shim_Finalize(); }
static inline double BDMPI_Wtime(void) { return MPI_Wtime(); }

/* ---- communicators ----------------------------------------------------------------------- */

static inline int BDMPI_Comm_size(MPI_Comm c, int *r) { return MPI_Comm_size(c, r); }
static inline int BDMPI_Comm_rank(MPI_Comm c, int *r) { return MPI_Comm_rank(c, r); }
static inline int BDMPI_Comm_dup(MPI_Comm c, MPI_Comm *n) { return MPI_Comm_dup(c, n); }
static inline int BDMPI_Comm_free(MPI_Comm *c) { return MPI_Comm_free(c); }
static inline int BDMPI_Comm_split(MPI_Comm c, int color, int key, MPI_Comm *n) {
    return MPI_Comm_split(c, color, key, n);
}
static inline int BDMPI_Comm_lsize(MPI_Comm c, int *r) { return MPI_Comm_size(c, r); }
static inline int BDMPI_Comm_lrank(MPI_Comm c, int *r) { return MPI_Comm_rank(c, r); }
static inline int BDMPI_Comm_nsize(MPI_Comm c, int *r) { (void)c; *r = 1; return MPI_SUCCESS; }
static inline int BDMPI_Comm_nrank(MPI_Comm c, int *r) { (void)c; *r = 0; return MPI_SUCCESS; }
static inline int BDMPI_Comm_rrank(MPI_Comm c, int *r) { (void)c; *r = 0; return MPI_SUCCESS; }

/* ---- point to point ---------------------------------------------------------------------- */

static inline int shim_Send(const void *b, int n, MPI_Datatype t, int d, int tag, MPI_Comm c) {
    return MPI_Bsend(b, n, t, d, tag, c);
}
static inline int shim_Isend(const void *b, int n, MPI_Datatype t, int d, int tag, MPI_Comm c,
                             MPI_Request *r) {
    return MPI_Ibsend(b, n, t, d, tag, c, r);
}
static inline int shim_Recv(void *b, int n, MPI_Datatype t, int src, int tag, MPI_Comm c,
                            shim_status_t *st) {
    int rc = MPI_Recv(b, n, t, src, tag, c, shim_raw(st));
    shim_fill(st, t);
    return rc;
}
static inline int shim_Irecv(void *b, int n, MPI_Datatype t, int src, int tag, MPI_Comm c,
                             MPI_Request *r) {
    int rc = MPI_Irecv(b, n, t, src, tag, c, r);
    if (rc == MPI_SUCCESS) shim_add(*r)->type = t;
    return rc;
}
static inline int shim_Sendrecv(const void *sb, int sn, MPI_Datatype stype, int dest, int stag,
                                void *rb, int rn, MPI_Datatype rtype, int src, int rtag,
                                MPI_Comm c, shim_status_t *st) {
    int rc = MPI_Sendrecv(sb, sn, stype, dest, stag, rb, rn, rtype, src, rtag, c, shim_raw(st));
    shim_fill(st, rtype);
    return rc;
}
static inline int shim_Probe(int src, int tag, MPI_Comm c, shim_status_t *st) {
    int rc = MPI_Probe(src, tag, c, shim_raw(st));
    shim_fill(st, MPI_BYTE);
    return rc;
}
static inline int shim_Iprobe(int src, int tag, MPI_Comm c, int *f, shim_status_t *st) {
    int rc = MPI_Iprobe(src, tag, c, f, shim_raw(st));
    if (*f) shim_fill(st, MPI_BYTE);
    return rc;
}

/* What a completed request leaves: the status in the Irecv's datatype; a Reduce_init's
 * result at the root (copied by Reduce_fine, not here). */
static inline void shim_completed(shim_pending_t *e, shim_status_t *st) {
    shim_fill(st, e ? e->type : MPI_BYTE);
    if (e && !e->send) shim_drop(e);
}
static inline int shim_Wait(MPI_Request *r, shim_status_t *st) {
    shim_pending_t *e = shim_find(*r);
    int rc = MPI_Wait(r, shim_raw(st));
    shim_completed(e, st);
    return rc;
}
static inline int shim_Test(MPI_Request *r, int *flag, shim_status_t *st) {
    shim_pending_t *e = shim_find(*r);
    int rc = MPI_Test(r, flag, shim_raw(st));
    if (*flag) shim_completed(e, st);
    return rc;
}
static inline int shim_Waitall(int n, MPI_Request *r, shim_status_t *st) {
    int rc = MPI_SUCCESS;
    for (int i = 0; i < n; i++) {
        int x = shim_Wait(&r[i], st ? &st[i] : NULL);
        if (x != MPI_SUCCESS) rc = x;
    }
    return rc;
}

static inline int BDMPI_Send(void *b, size_t n, MPI_Datatype t, int d, int tag, MPI_Comm c) {
    return shim_Send(b, (int)n, t, d, tag, c);
}
static inline int BDMPI_Isend(void *b, size_t n, MPI_Datatype t, int d, int tag, MPI_Comm c,
                              MPI_Request *r) {
    return shim_Isend(b, (int)n, t, d, tag, c, r);
}
static inline int BDMPI_Recv(void *b, size_t n, MPI_Datatype t, int s, int tag, MPI_Comm c,
                             shim_status_t *st) {
    return shim_Recv(b, (int)n, t, s, tag, c, st);
}
static inline int BDMPI_Irecv(void *b, size_t n, MPI_Datatype t, int s, int tag, MPI_Comm c,
                              MPI_Request *r) {
    return shim_Irecv(b, (int)n, t, s, tag, c, r);
}
static inline int BDMPI_Sendrecv(void *sb, size_t sn, MPI_Datatype stype, int dest, int stag,
                                 void *rb, size_t rn, MPI_Datatype rtype, int src, int rtag,
                                 MPI_Comm c, shim_status_t *st) {
    return shim_Sendrecv(sb, (int)sn, stype, dest, stag, rb, (int)rn, rtype, src, rtag, c, st);
}
static inline int BDMPI_Probe(int src, int tag, MPI_Comm c, shim_status_t *st) {
    return shim_Probe(src, tag, c, st);
}
static inline int BDMPI_Iprobe(int src, int tag, MPI_Comm c, int *f, shim_status_t *st) {
    return shim_Iprobe(src, tag, c, f, st);
}
static inline int BDMPI_Wait(MPI_Request *r, shim_status_t *st) { return shim_Wait(r, st); }
static inline int BDMPI_Test(MPI_Request *r, int *f, shim_status_t *st) {
    return shim_Test(r, f, st);
}
static inline int BDMPI_Waitall(int n, MPI_Request *r, shim_status_t *st) {
    return shim_Waitall(n, r, st);
}

/* ---- collectives ------------------------------------------------------------------------- */

static inline size_t shim_extent(MPI_Datatype t) {
    int s = 0;
    MPI_Type_size(t, &s);
    return (size_t)s;
}

/* The send data itself, or a copy of it when it overlaps the receive buffer (free with
 * shim_done). */
static inline const void *shim_apart(const void *s, size_t sbytes, const void *r,
                                     size_t rbytes) {
    const char *a = s, *b = r;
    if (!s || !r || sbytes == 0 || rbytes == 0 || a + sbytes <= b || b + rbytes <= a) return s;
    void *copy = malloc(sbytes);
    memcpy(copy, s, sbytes);
    return copy;
}
static inline void shim_done(const void *used, const void *given) {
    if (used != given) free((void *)used);
}

static inline int *shim_ints(const size_t *v, int n) {
    int *o = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
    for (int i = 0; i < n; i++) o[i] = (int)v[i];
    return o;
}
/* The bytes a v-collective's counts and displacements cover. */
static inline size_t shim_span(const int *counts, const int *displs, int n, MPI_Datatype t) {
    size_t end = 0;
    for (int i = 0; i < n; i++) {
        size_t e = ((size_t)displs[i] + (size_t)counts[i]) * shim_extent(t);
        if (counts[i] > 0 && e > end) end = e;
    }
    return end;
}
static inline int shim_me(MPI_Comm c) {
    int r;
    MPI_Comm_rank(c, &r);
    return r;
}
static inline int shim_size(MPI_Comm c) {
    int p;
    MPI_Comm_size(c, &p);
    return p;
}

static inline int shim_Gather(const void *s, int sn, MPI_Datatype st, void *r, int rn,
                              MPI_Datatype rt, int root, MPI_Comm c) {
    size_t rb = shim_me(c) == root ? (size_t)rn * shim_size(c) * shim_extent(rt) : 0;
    const void *x = shim_apart(s, (size_t)sn * shim_extent(st), r, rb);
    int rc = MPI_Gather(x, sn, st, r, rn, rt, root, c);
    shim_done(x, s);
    return rc;
}
static inline int shim_Gatherv(const void *s, int sn, MPI_Datatype st, void *r, const int *rc_,
                               const int *rd, MPI_Datatype rt, int root, MPI_Comm c) {
    size_t rb = shim_me(c) == root ? shim_span(rc_, rd, shim_size(c), rt) : 0;
    const void *x = shim_apart(s, (size_t)sn * shim_extent(st), r, rb);
    int rc = MPI_Gatherv(x, sn, st, r, rc_, rd, rt, root, c);
    shim_done(x, s);
    return rc;
}
static inline int shim_Scatter(const void *s, int sn, MPI_Datatype st, void *r, int rn,
                               MPI_Datatype rt, int root, MPI_Comm c) {
    size_t sb = shim_me(c) == root ? (size_t)sn * shim_size(c) * shim_extent(st) : 0;
    const void *x = shim_apart(s, sb, r, (size_t)rn * shim_extent(rt));
    int rc = MPI_Scatter(x, sn, st, r, rn, rt, root, c);
    shim_done(x, s);
    return rc;
}
static inline int shim_Scatterv(const void *s, const int *sc, const int *sd, MPI_Datatype st,
                                void *r, int rn, MPI_Datatype rt, int root, MPI_Comm c) {
    size_t sb = shim_me(c) == root ? shim_span(sc, sd, shim_size(c), st) : 0;
    const void *x = shim_apart(s, sb, r, (size_t)rn * shim_extent(rt));
    int rc = MPI_Scatterv(x, sc, sd, st, r, rn, rt, root, c);
    shim_done(x, s);
    return rc;
}
static inline int shim_Allgather(const void *s, int sn, MPI_Datatype st, void *r, int rn,
                                 MPI_Datatype rt, MPI_Comm c) {
    const void *x = shim_apart(s, (size_t)sn * shim_extent(st), r,
                               (size_t)rn * shim_size(c) * shim_extent(rt));
    int rc = MPI_Allgather(x, sn, st, r, rn, rt, c);
    shim_done(x, s);
    return rc;
}
static inline int shim_Allgatherv(const void *s, int sn, MPI_Datatype st, void *r,
                                  const int *rc_, const int *rd, MPI_Datatype rt, MPI_Comm c) {
    const void *x = shim_apart(s, (size_t)sn * shim_extent(st), r,
                               shim_span(rc_, rd, shim_size(c), rt));
    int rc = MPI_Allgatherv(x, sn, st, r, rc_, rd, rt, c);
    shim_done(x, s);
    return rc;
}
static inline int shim_Alltoall(const void *s, int sn, MPI_Datatype st, void *r, int rn,
                                MPI_Datatype rt, MPI_Comm c) {
    size_t p = (size_t)shim_size(c);
    const void *x = shim_apart(s, (size_t)sn * p * shim_extent(st), r,
                               (size_t)rn * p * shim_extent(rt));
    int rc = MPI_Alltoall(x, sn, st, r, rn, rt, c);
    shim_done(x, s);
    return rc;
}
static inline int shim_Alltoallv(const void *s, const int *sc, const int *sd, MPI_Datatype st,
                                 void *r, const int *rc_, const int *rd, MPI_Datatype rt,
                                 MPI_Comm c) {
    int p = shim_size(c);
    const void *x = shim_apart(s, shim_span(sc, sd, p, st), r, shim_span(rc_, rd, p, rt));
    int rc = MPI_Alltoallv(x, sc, sd, st, r, rc_, rd, rt, c);
    shim_done(x, s);
    return rc;
}

static inline int BDMPI_Barrier(MPI_Comm c) { return MPI_Barrier(c); }
static inline int BDMPI_Bcast(void *b, size_t n, MPI_Datatype t, int root, MPI_Comm c) {
    return MPI_Bcast(b, (int)n, t, root, c);
}
static inline int BDMPI_Gather(void *s, size_t sn, MPI_Datatype st, void *r, size_t rn,
                               MPI_Datatype rt, int root, MPI_Comm c) {
    return shim_Gather(s, (int)sn, st, r, (int)rn, rt, root, c);
}
static inline int BDMPI_Gatherv(void *s, size_t sn, MPI_Datatype st, void *r, size_t *rc,
                                size_t *rd, MPI_Datatype rt, int root, MPI_Comm c) {
    int p = shim_size(c), *a = shim_ints(rc, p), *b = shim_ints(rd, p);
    int code = shim_Gatherv(s, (int)sn, st, r, a, b, rt, root, c);
    free(a);
    free(b);
    return code;
}
static inline int BDMPI_Scatter(void *s, size_t sn, MPI_Datatype st, void *r, size_t rn,
                                MPI_Datatype rt, int root, MPI_Comm c) {
    return shim_Scatter(s, (int)sn, st, r, (int)rn, rt, root, c);
}
static inline int BDMPI_Scatterv(void *s, size_t *sc, size_t *sd, MPI_Datatype st, void *r,
                                 size_t rn, MPI_Datatype rt, int root, MPI_Comm c) {
    int p = shim_size(c), *a = shim_ints(sc, p), *b = shim_ints(sd, p);
    int code = shim_Scatterv(s, a, b, st, r, (int)rn, rt, root, c);
    free(a);
    free(b);
    return code;
}
static inline int BDMPI_Allgather(void *s, size_t sn, MPI_Datatype st, void *r, size_t rn,
                                  MPI_Datatype rt, MPI_Comm c) {
    return shim_Allgather(s, (int)sn, st, r, (int)rn, rt, c);
}
static inline int BDMPI_Allgatherv(void *s, size_t sn, MPI_Datatype st, void *r, size_t *rc,
                                   size_t *rd, MPI_Datatype rt, MPI_Comm c) {
    int p = shim_size(c), *a = shim_ints(rc, p), *b = shim_ints(rd, p);
    int code = shim_Allgatherv(s, (int)sn, st, r, a, b, rt, c);
    free(a);
    free(b);
    return code;
}
static inline int BDMPI_Alltoall(void *s, size_t sn, MPI_Datatype st, void *r, size_t rn,
                                 MPI_Datatype rt, MPI_Comm c) {
    return shim_Alltoall(s, (int)sn, st, r, (int)rn, rt, c);
}
static inline int BDMPI_Alltoallv(void *s, size_t *sc, size_t *sd, MPI_Datatype st, void *r,
                                  size_t *rc, size_t *rd, MPI_Datatype rt, MPI_Comm c) {
    int p = shim_size(c);
    int *a = shim_ints(sc, p), *b = shim_ints(sd, p), *e = shim_ints(rc, p), *f = shim_ints(rd, p);
    int code = shim_Alltoallv(s, a, b, st, r, e, f, rt, c);
    free(a);
    free(b);
    free(e);
    free(f);
    return code;
}

/* ---- reductions -------------------------------------------------------------------------- */

static inline int shim_Reduce(const void *s, void *r, int n, MPI_Datatype t, MPI_Op op, int root,
                              MPI_Comm c) {
    size_t bytes = (size_t)n * shim_extent(t);
    const void *x = shim_apart(s, bytes, r, shim_me(c) == root ? bytes : 0);
    int rc = MPI_Reduce(x, r, n, t, op, root, c);
    shim_done(x, s);
    return rc;
}
static inline int shim_Allreduce(const void *s, void *r, int n, MPI_Datatype t, MPI_Op op,
                                 MPI_Comm c) {
    size_t bytes = (size_t)n * shim_extent(t);
    const void *x = shim_apart(s, bytes, r, bytes);
    int rc = MPI_Allreduce(x, r, n, t, op, c);
    shim_done(x, s);
    return rc;
}
static inline int shim_Scan(const void *s, void *r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c) {
    size_t bytes = (size_t)n * shim_extent(t);
    const void *x = shim_apart(s, bytes, r, bytes);
    int rc = MPI_Scan(x, r, n, t, op, c);
    shim_done(x, s);
    return rc;
}
static inline int shim_Exscan(const void *s, void *r, int n, MPI_Datatype t, MPI_Op op,
                              MPI_Comm c) {
    size_t bytes = (size_t)n * shim_extent(t);
    const void *x = shim_apart(s, bytes, r, bytes);
    int rc = MPI_Exscan(x, r, n, t, op, c);
    shim_done(x, s);
    return rc;
}
static inline int BDMPI_Reduce(void *s, void *r, size_t n, MPI_Datatype t, MPI_Op op, int root,
                               MPI_Comm c) {
    return shim_Reduce(s, r, (int)n, t, op, root, c);
}
static inline int BDMPI_Allreduce(void *s, void *r, size_t n, MPI_Datatype t, MPI_Op op,
                                  MPI_Comm c) {
    return shim_Allreduce(s, r, (int)n, t, op, c);
}
static inline int BDMPI_Scan(void *s, void *r, size_t n, MPI_Datatype t, MPI_Op op, MPI_Comm c) {
    return shim_Scan(s, r, (int)n, t, op, c);
}
static inline int BDMPI_Exscan(void *s, void *r, size_t n, MPI_Datatype t, MPI_Op op,
                               MPI_Comm c) {
    return shim_Exscan(s, r, (int)n, t, op, c);
}

/* Reduce_init: the contribution is copied and reduced into a buffer of the shim's with
 * MPI_Ireduce; Reduce_fine waits for it and copies the result out at the root. */
static inline int shim_Reduce_init(const void *s, void *r, int n, MPI_Datatype t, MPI_Op op,
                                   int root, MPI_Comm c, MPI_Request *req) {
    size_t bytes = (size_t)n * shim_extent(t);
    void *send = malloc(bytes ? bytes : 1), *recv = malloc(bytes ? bytes : 1);
    (void)r;
    memcpy(send, s, bytes);
    int rc = MPI_Ireduce(send, recv, n, t, op, root, c, req);
    shim_pending_t *e = shim_add(*req);
    e->send = send;
    e->recv = recv;
    e->bytes = bytes;
    return rc;
}
static inline int shim_Reduce_fine(void *r, int n, MPI_Datatype t, MPI_Op op, int root,
                                   MPI_Comm c, MPI_Request *req) {
    shim_pending_t *e = shim_find(*req);
    (void)n, (void)t, (void)op;
    if (!e || !e->send) return MPI_ERR_REQUEST;
    int rc = MPI_Wait(req, MPI_STATUS_IGNORE);
    if (shim_me(c) == root) memcpy(r, e->recv, e->bytes);
    free(e->send);
    free(e->recv);
    shim_drop(e);
    return rc;
}
static inline int BDMPI_Reduce_init(void *s, void *r, size_t n, MPI_Datatype t, MPI_Op op,
                                    int root, MPI_Comm c, MPI_Request *req) {
    return shim_Reduce_init(s, r, (int)n, t, op, root, c, req);
}
static inline int BDMPI_Reduce_fine(void *r, size_t n, MPI_Datatype t, MPI_Op op, int root,
                                    MPI_Comm c, MPI_Request *req) {
    return shim_Reduce_fine(r, (int)n, t, op, root, c, req);
}

/* Merge: the (id, value) lists are gathered at the root and merged there: every id once, in
 * increasing order, the values of equal ids combined by op in rank order. */
static inline int shim_merge(const void *sbuf, const int *sids, size_t scount, void *rbuf,
                             int *rids, size_t *r_rcount, MPI_Datatype t, MPI_Op op, int root,
                             MPI_Comm c) {
    int me = shim_me(c), p = shim_size(c), n = (int)scount, total = 0;
    size_t ts = shim_extent(t);
    int *counts = NULL, *displs = NULL, *ids = NULL, *at = NULL;
    char *vals = NULL;
    if (me == root) {
        counts = calloc((size_t)p, sizeof(int));
        displs = calloc((size_t)p, sizeof(int));
        at = calloc((size_t)p, sizeof(int));
    }
    MPI_Gather(&n, 1, MPI_INT, counts, 1, MPI_INT, root, c);
    if (me == root)
        for (int q = 0; q < p; q++) displs[q] = total, total += counts[q];
    if (me == root) {
        ids = malloc(sizeof(int) * (size_t)(total ? total : 1));
        vals = malloc(ts * (size_t)(total ? total : 1));
    }
    MPI_Gatherv(sids, n, MPI_INT, ids, counts, displs, MPI_INT, root, c);
    MPI_Gatherv(sbuf, n, t, vals, counts, displs, t, root, c);
    int rc = MPI_SUCCESS;
    if (me == root) {
        size_t out = 0, cap = *r_rcount;
        for (;;) {
            int best = -1;
            for (int q = 0; q < p; q++)
                if (at[q] < counts[q] && (best < 0 || ids[displs[q] + at[q]] < best))
                    best = ids[displs[q] + at[q]];
            if (best < 0) break;
            if (out == cap) {
                rc = MPI_ERR_TRUNCATE;
                break;
            }
            int first = 1;
            for (int q = 0; q < p; q++)
                if (at[q] < counts[q] && ids[displs[q] + at[q]] == best) {
                    const char *v = vals + ts * (size_t)(displs[q] + at[q]);
                    if (first)
                        memcpy((char *)rbuf + ts * out, v, ts);
                    else
                        MPI_Reduce_local(v, (char *)rbuf + ts * out, 1, t, op);
                    first = 0;
                    at[q]++;
                }
            rids[out++] = best;
        }
        *r_rcount = out;
    }
    free(counts);
    free(displs);
    free(at);
    free(ids);
    free(vals);
    return rc;
}
static inline int BDMPI_Merge(void *sbuf, int *sids, size_t scount, void *rbuf, int *rids,
                              size_t *r_rcount, MPI_Datatype t, MPI_Op op, int root, MPI_Comm c) {
    return shim_merge(sbuf, sids, scount, rbuf, rids, r_rcount, t, op, root, c);
}
static inline int shim_Merge(void *sbuf, int *sids, int scount, void *rbuf, int *rids,
                             int *r_rcount, MPI_Datatype t, MPI_Op op, int root, MPI_Comm c) {
    size_t n = shim_me(c) == root ? (size_t)*r_rcount : 0;
    int rc = shim_merge(sbuf, sids, (size_t)scount, rbuf, rids, &n, t, op, root, c);
    if (shim_me(c) == root) *r_rcount = (int)n;
    return rc;
}

/* ---- BDMPI's own calls ------------------------------------------------------------------- */

static inline int BDMPI_Entercritical(void) { return MPI_SUCCESS; }
static inline int BDMPI_Exitcritical(void) { return MPI_SUCCESS; }

static inline int BDMPI_Print_vm_info(char *hdr) {
    char line[256];
    unsigned long size = 0, rss = 0;
    FILE *f = fopen("/proc/self/status", "r");
    while (f && fgets(line, sizeof line, f)) {
        sscanf(line, "VmSize: %lu", &size);
        sscanf(line, "VmRSS: %lu", &rss);
    }
    if (f) fclose(f);
    printf("[%s:%06d] VmSize: %10lu VmRSS: %10lu\n", hdr ? hdr : "", (int)getpid(),
           size * 1024, rss * 1024);
    return MPI_SUCCESS;
}

static inline int BDMPI_mlock(const void *a, size_t n) { return mlock(a, n); }
static inline int BDMPI_munlock(const void *a, size_t n) { return munlock(a, n); }
static inline int BDMPI_mlockall(int f) { return mlockall(f); }
static inline int BDMPI_munlockall(void) { return munlockall(); }

/* Storage-backed memory: plain memory under MPI. */
static inline void *BDMPI_sbmalloc(size_t n) { return calloc(1, n ? n : 1); }
static inline void *BDMPI_sbrealloc(void *p, size_t n) { return realloc(p, n ? n : 1); }
static inline void BDMPI_sbfree(void *p) { free(p); }
static inline void BDMPI_sbload(void *p) { (void)p; }
static inline void BDMPI_sbloadall(void) {}
static inline void BDMPI_sbunload(void *p) { (void)p; }
static inline void BDMPI_sbunloadall(void) {}
static inline void BDMPI_sbdiscard(void *p, ssize_t n) { (void)p, (void)n; }

/* ---- the MPI names, with BDMPI's meaning ------------------------------------------------- */

#define MPI_Init shim_Init
#define MPI_Finalize shim_Finalize
#define MPI_Send shim_Send
#define MPI_Isend shim_Isend
#define MPI_Recv shim_Recv
#define MPI_Irecv shim_Irecv
#define MPI_Sendrecv shim_Sendrecv
#define MPI_Probe shim_Probe
#define MPI_Iprobe shim_Iprobe
#define MPI_Wait shim_Wait
#define MPI_Test shim_Test
#define MPI_Waitall shim_Waitall
#define MPI_Get_count shim_Get_count
#define MPI_Gather shim_Gather
#define MPI_Gatherv shim_Gatherv
#define MPI_Scatter shim_Scatter
#define MPI_Scatterv shim_Scatterv
#define MPI_Allgather shim_Allgather
#define MPI_Allgatherv shim_Allgatherv
#define MPI_Alltoall shim_Alltoall
#define MPI_Alltoallv shim_Alltoallv
#define MPI_Reduce shim_Reduce
#define MPI_Allreduce shim_Allreduce
#define MPI_Scan shim_Scan
#define MPI_Exscan shim_Exscan
#define MPI_Reduce_init shim_Reduce_init
#define MPI_Reduce_fine shim_Reduce_fine
#define MPI_Merge shim_Merge
#define MPI_Comm_lsize BDMPI_Comm_lsize
#define MPI_Comm_lrank BDMPI_Comm_lrank
#define MPI_Comm_nsize BDMPI_Comm_nsize
#define MPI_Comm_nrank BDMPI_Comm_nrank
#define MPI_Comm_rrank BDMPI_Comm_rrank
#define MPI_Print_vm_info BDMPI_Print_vm_info
#define MPI_Status shim_status_t
#undef MPI_STATUS_IGNORE
#define MPI_STATUS_IGNORE ((shim_status_t *)0)
#endif
