/*
 * bdmpi.h: BDMPI's C API, as implemented by spillway's libbdmpi.
 *
 * Written from BDMPI's documented interface (the "BDMPI" manual and the paper "MPI for Big
 * Data: New Tricks for an Old Dog", LaSalle & Karypis): the same function names, constants,
 * types and structure layouts, so that a program compiled against BDMPI's own header links
 * with this library unchanged, and a program compiled against this header links with either.
 *
 * Every BDMPI_* function takes counts as size_t; the MPI_* names take them as int, as the MPI
 * standard does. Run programs with `bdmprun [options] program [args]`.
 */
#ifndef BDMPI_H
#define BDMPI_H

#include <stddef.h>
#include <stdint.h>
#include <inttypes.h>
#include <sys/types.h>
#include <unistd.h>

#define BDMPI_VER_MAJOR 0
#define BDMPI_VER_MINOR 2
#define BDMPI_VER_SUBMINOR 4

/* Wild cards and the null process. */
#define BDMPI_ANY_SOURCE ((int)-1)
#define BDMPI_ANY_TAG ((int)-1)
#define BDMPI_PROC_NULL ((int)-2)

/* Return codes. */
#define BDMPI_SUCCESS ((int)1001)
#define BDMPI_INPROGRESS ((int)1002)
#define BDMPI_ERR_UNKNOWN ((int)1003)
#define BDMPI_ERR_COMM ((int)1004)
#define BDMPI_ERR_ARG ((int)1005)
#define BDMPI_ERR_BUFFER ((int)1006)
#define BDMPI_ERR_COUNT ((int)1007)
#define BDMPI_ERR_TYPE ((int)1008)
#define BDMPI_ERR_TAG ((int)1009)
#define BDMPI_ERR_ROOT ((int)1010)
#define BDMPI_ERR_RANK ((int)1011)
#define BDMPI_ERR_TRUNCATE ((int)1012)
#define BDMPI_ERR_OP ((int)1013)

/* Reduction operations. */
typedef int BDMPI_Op;
#define BDMPI_OP_NULL ((BDMPI_Op)-1)
#define BDMPI_MAX ((BDMPI_Op)1001)
#define BDMPI_MIN ((BDMPI_Op)1002)
#define BDMPI_SUM ((BDMPI_Op)1003)
#define BDMPI_PROD ((BDMPI_Op)1004)
#define BDMPI_LAND ((BDMPI_Op)1005)
#define BDMPI_BAND ((BDMPI_Op)1006)
#define BDMPI_LOR ((BDMPI_Op)1007)
#define BDMPI_BOR ((BDMPI_Op)1008)
#define BDMPI_LXOR ((BDMPI_Op)1009)
#define BDMPI_BXOR ((BDMPI_Op)1010)
#define BDMPI_MAXLOC ((BDMPI_Op)1011) /* on the pair types: largest value, then lowest loc */
#define BDMPI_MINLOC ((BDMPI_Op)1012) /* on the pair types: smallest value, then lowest loc */

/* Datatypes. The pair types are struct { T val; int loc; } with C's layout. */
typedef int BDMPI_Datatype;
#define BDMPI_DATATYPE_NULL ((BDMPI_Datatype)-1)
#define BDMPI_CHAR ((BDMPI_Datatype)1001)
#define BDMPI_SIGNED_CHAR ((BDMPI_Datatype)1002)
#define BDMPI_UNSIGNED_CHAR ((BDMPI_Datatype)1003)
#define BDMPI_BYTE ((BDMPI_Datatype)1004)
#define BDMPI_WCHAR ((BDMPI_Datatype)1005)
#define BDMPI_SHORT ((BDMPI_Datatype)1006)
#define BDMPI_UNSIGNED_SHORT ((BDMPI_Datatype)1007)
#define BDMPI_INT ((BDMPI_Datatype)1008)
#define BDMPI_UNSIGNED ((BDMPI_Datatype)1009)
#define BDMPI_LONG ((BDMPI_Datatype)1010)
#define BDMPI_UNSIGNED_LONG ((BDMPI_Datatype)1011)
#define BDMPI_LONG_LONG_INT ((BDMPI_Datatype)1012)
#define BDMPI_UNSIGNED_LONG_LONG ((BDMPI_Datatype)1013)
#define BDMPI_INT8_T ((BDMPI_Datatype)1014)
#define BDMPI_UINT8_T ((BDMPI_Datatype)1015)
#define BDMPI_INT16_T ((BDMPI_Datatype)1016)
#define BDMPI_UINT16_T ((BDMPI_Datatype)1017)
#define BDMPI_INT32_T ((BDMPI_Datatype)1018)
#define BDMPI_UINT32_T ((BDMPI_Datatype)1019)
#define BDMPI_INT64_T ((BDMPI_Datatype)1020)
#define BDMPI_UINT64_T ((BDMPI_Datatype)1021)
#define BDMPI_SIZE_T ((BDMPI_Datatype)1022)
#define BDMPI_SSIZE_T ((BDMPI_Datatype)1023)
#define BDMPI_FLOAT ((BDMPI_Datatype)1024)
#define BDMPI_DOUBLE ((BDMPI_Datatype)1025)
#define BDMPI_FLOAT_INT ((BDMPI_Datatype)1026)
#define BDMPI_DOUBLE_INT ((BDMPI_Datatype)1027)
#define BDMPI_LONG_INT ((BDMPI_Datatype)1028)
#define BDMPI_SHORT_INT ((BDMPI_Datatype)1029)
#define BDMPI_2INT ((BDMPI_Datatype)1030)

/* A communicator as its member sees it. Programs use the handle only; the fields are filled
 * by the library. */
typedef struct {
    int mcomm; /* the node's id of the communicator */
    int size;  /* members */
    int rank;  /* the caller's rank */
    int lsize; /* members on the caller's node */
    int lrank; /* the caller's rank among them */
    int nsize; /* nodes holding members */
    int nrank; /* the caller's node among them */
    int rrank; /* the lowest rank on the caller's node */
    int copid; /* collective operations so far */
} bdscomm_t;

typedef bdscomm_t *BDMPI_Comm;

#define BDMPI_COMM_NULL NULL

/* The predefined communicators: all ranks, the caller alone, all ranks numbered cyclically
 * over the nodes, and the ranks of the caller's node. Set by BDMPI_Init. */
extern BDMPI_Comm BDMPI_COMM_WORLD;
extern BDMPI_Comm BDMPI_COMM_SELF;
extern BDMPI_Comm BDMPI_COMM_CWORLD;
extern BDMPI_Comm BDMPI_COMM_NODE;

/* The status of a receive or a probe; count is in elements of datatype. */
typedef struct {
    int MPI_SOURCE;
    int MPI_TAG;
    int MPI_ERROR;
    int BDMPI_SOURCE;
    int BDMPI_TAG;
    int BDMPI_ERROR;
    int dest;
    BDMPI_Datatype datatype;
    size_t count;
    BDMPI_Comm comm;
} BDMPI_Status;

#define BDMPI_STATUS_IGNORE ((BDMPI_Status *)1)

typedef enum {
    BDMPI_REQUEST_ISEND,
    BDMPI_REQUEST_IRECV,
    BDMPI_REQUEST_REDUCEI
} bdmp_request_et;

/* A pending operation; made by Isend, Irecv and Reduce_init, freed by Wait/Test (which set
 * the handle to BDMPI_REQUEST_NULL). */
typedef struct {
    bdmp_request_et type;
    int state;
    void *buf;
    BDMPI_Status status;
    int copid;
} bdrequest_t;

typedef bdrequest_t *BDMPI_Request;

#define BDMPI_REQUEST_NULL NULL

#ifdef __cplusplus
extern "C" {
#endif

/* Memory and critical sections. */
int BDMPI_Print_vm_info(char *hdr);
int BDMPI_mlockall(int flags);
int BDMPI_munlockall(void);
int BDMPI_mlock(const void *addr, size_t len);
int BDMPI_munlock(const void *addr, size_t len);
int BDMPI_Entercritical(void);
int BDMPI_Exitcritical(void);

/* Storage-backed memory: kept in a file under bdmprun's -wd and, as -sbma says, written out
 * and dropped from memory while the rank is blocked. */
void *BDMPI_sbmalloc(size_t size);
void *BDMPI_sbrealloc(void *oldptr, size_t size);
void BDMPI_sbfree(void *ptr);
void BDMPI_sbload(void *ptr);
void BDMPI_sbloadall(void);
void BDMPI_sbunload(void *ptr);
void BDMPI_sbunloadall(void);
void BDMPI_sbdiscard(void *ptr, ssize_t size);

int BDMPI_Init(int *argc, char **argv[]);
int BDMPI_Finalize(void);
int BDMPI_Comm_size(BDMPI_Comm comm, int *size);
int BDMPI_Comm_rank(BDMPI_Comm comm, int *rank);
int BDMPI_Comm_lsize(BDMPI_Comm comm, int *lsize);
int BDMPI_Comm_lrank(BDMPI_Comm comm, int *lrank);
int BDMPI_Comm_nsize(BDMPI_Comm comm, int *nsize);
int BDMPI_Comm_nrank(BDMPI_Comm comm, int *nrank);
int BDMPI_Comm_rrank(BDMPI_Comm comm, int *rrank);
int BDMPI_Comm_dup(BDMPI_Comm comm, BDMPI_Comm *newcomm);
int BDMPI_Comm_free(BDMPI_Comm *comm);
int BDMPI_Comm_split(BDMPI_Comm comm, int color, int key, BDMPI_Comm *newcomm);
int BDMPI_Send(void *buf, size_t count, BDMPI_Datatype datatype, int dest, int tag,
               BDMPI_Comm comm);
int BDMPI_Isend(void *buf, size_t count, BDMPI_Datatype datatype, int dest, int tag,
                BDMPI_Comm comm, BDMPI_Request *request);
int BDMPI_Recv(void *buf, size_t count, BDMPI_Datatype datatype, int source, int tag,
               BDMPI_Comm comm, BDMPI_Status *status);
int BDMPI_Irecv(void *buf, size_t count, BDMPI_Datatype datatype, int source, int tag,
                BDMPI_Comm comm, BDMPI_Request *request);
int BDMPI_Sendrecv(void *sendbuf, size_t sendcount, BDMPI_Datatype sendtype, int dest,
                   int sendtag, void *recvbuf, size_t recvcount, BDMPI_Datatype recvtype,
                   int source, int recvtag, BDMPI_Comm comm, BDMPI_Status *status);
int BDMPI_Test(BDMPI_Request *request, int *flag, BDMPI_Status *status);
int BDMPI_Wait(BDMPI_Request *request, BDMPI_Status *status);
int BDMPI_Waitall(int count, BDMPI_Request *request, BDMPI_Status *status);
int BDMPI_Get_count(BDMPI_Status *status, BDMPI_Datatype datatype, size_t *count);
int BDMPI_Barrier(BDMPI_Comm comm);
int BDMPI_Bcast(void *buf, size_t count, BDMPI_Datatype datatype, int root, BDMPI_Comm comm);
int BDMPI_Allgather(void *sendbuf, size_t sendcount, BDMPI_Datatype sendtype, void *recvbuf,
                    size_t recvcount, BDMPI_Datatype recvtype, BDMPI_Comm comm);
int BDMPI_Allgatherv(void *sendbuf, size_t sendcount, BDMPI_Datatype sendtype, void *recvbuf,
                     size_t *recvcounts, size_t *displs, BDMPI_Datatype recvtype,
                     BDMPI_Comm comm);
int BDMPI_Gather(void *sendbuf, size_t sendcount, BDMPI_Datatype sendtype, void *recvbuf,
                 size_t recvcount, BDMPI_Datatype recvtype, int root, BDMPI_Comm comm);
int BDMPI_Gatherv(void *sendbuf, size_t sendcount, BDMPI_Datatype sendtype, void *recvbuf,
                  size_t *recvcounts, size_t *displs, BDMPI_Datatype recvtype, int root,
                  BDMPI_Comm comm);
int BDMPI_Scatter(void *sendbuf, size_t sendcount, BDMPI_Datatype sendtype, void *recvbuf,
                  size_t recvcount, BDMPI_Datatype recvtype, int root, BDMPI_Comm comm);
int BDMPI_Scatterv(void *sendbuf, size_t *sendcounts, size_t *displs, BDMPI_Datatype sendtype,
                   void *recvbuf, size_t recvcount, BDMPI_Datatype recvtype, int root,
                   BDMPI_Comm comm);
int BDMPI_Alltoall(void *sendbuf, size_t sendcount, BDMPI_Datatype sendtype, void *recvbuf,
                   size_t recvcount, BDMPI_Datatype recvtype, BDMPI_Comm comm);
int BDMPI_Alltoallv(void *sendbuf, size_t *sendcounts, size_t *sdispls,
                    BDMPI_Datatype sendtype, void *recvbuf, size_t *recvcounts,
                    size_t *rdispls, BDMPI_Datatype recvtype, BDMPI_Comm comm);
int BDMPI_Reduce(void *sendbuf, void *recvbuf, size_t count, BDMPI_Datatype datatype,
                 BDMPI_Op op, int root, BDMPI_Comm comm);
/* A reduction in two halves: Reduce_init hands over the rank's contribution and returns at
 * once; Reduce_fine waits for all contributions and, at the root, receives the result. */
int BDMPI_Reduce_init(void *sendbuf, void *recvbuf, size_t count, BDMPI_Datatype datatype,
                      BDMPI_Op op, int root, BDMPI_Comm comm, BDMPI_Request *request);
int BDMPI_Reduce_fine(void *recvbuf, size_t count, BDMPI_Datatype datatype, BDMPI_Op op,
                      int root, BDMPI_Comm comm, BDMPI_Request *request);
int BDMPI_Allreduce(void *sendbuf, void *recvbuf, size_t count, BDMPI_Datatype datatype,
                    BDMPI_Op op, BDMPI_Comm comm);
/* A sparse reduction: every rank contributes (id, value) pairs sorted by id; the root receives
 * the union of the ids in increasing order, values with equal ids combined by op.
 * *r_recvcount is the root's capacity on entry and the number received on return. */
int BDMPI_Merge(void *sendbuf, int *sendids, size_t sendcount, void *recvbuf, int *recvids,
                size_t *r_recvcount, BDMPI_Datatype datatype, BDMPI_Op op, int root,
                BDMPI_Comm comm);
int BDMPI_Probe(int source, int tag, BDMPI_Comm comm, BDMPI_Status *status);
int BDMPI_Iprobe(int source, int tag, BDMPI_Comm comm, int *flag, BDMPI_Status *status);
int BDMPI_Scan(void *sendbuf, void *recvbuf, size_t count, BDMPI_Datatype datatype,
               BDMPI_Op op, BDMPI_Comm comm);
int BDMPI_Exscan(void *sendbuf, void *recvbuf, size_t count, BDMPI_Datatype datatype,
                 BDMPI_Op op, BDMPI_Comm comm);
double BDMPI_Wtime(void);

#ifdef __cplusplus
}
#endif

#ifndef BDMPRUN
/* The MPI names. */
#define MPI_UNDEFINED (-32766)

#define MPI_ANY_SOURCE BDMPI_ANY_SOURCE
#define MPI_ANY_TAG BDMPI_ANY_TAG
#define MPI_PROC_NULL BDMPI_PROC_NULL

#define MPI_SUCCESS BDMPI_SUCCESS
#define MPI_INPROGRESS BDMPI_INPROGRESS
#define MPI_ERR_UNKNOWN BDMPI_ERR_UNKNOWN
#define MPI_ERR_COMM BDMPI_ERR_COMM
#define MPI_ERR_ARG BDMPI_ERR_ARG
#define MPI_ERR_BUFFER BDMPI_ERR_BUFFER
#define MPI_ERR_COUNT BDMPI_ERR_COUNT
#define MPI_ERR_TYPE BDMPI_ERR_TYPE
#define MPI_ERR_TAG BDMPI_ERR_TAG
#define MPI_ERR_ROOT BDMPI_ERR_ROOT
#define MPI_ERR_RANK BDMPI_ERR_RANK
#define MPI_ERR_TRUNCATE BDMPI_ERR_TRUNCATE
#define MPI_ERR_OP BDMPI_ERR_OP

typedef BDMPI_Op MPI_Op;
#define MPI_OP_NULL BDMPI_OP_NULL
#define MPI_MAX BDMPI_MAX
#define MPI_MIN BDMPI_MIN
#define MPI_SUM BDMPI_SUM
#define MPI_PROD BDMPI_PROD
#define MPI_LAND BDMPI_LAND
#define MPI_BAND BDMPI_BAND
#define MPI_LOR BDMPI_LOR
#define MPI_BOR BDMPI_BOR
#define MPI_LXOR BDMPI_LXOR
#define MPI_BXOR BDMPI_BXOR
#define MPI_MAXLOC BDMPI_MAXLOC
#define MPI_MINLOC BDMPI_MINLOC

typedef BDMPI_Datatype MPI_Datatype;
#define MPI_DATATYPE_NULL BDMPI_DATATYPE_NULL
#define MPI_CHAR BDMPI_CHAR
#define MPI_SIGNED_CHAR BDMPI_SIGNED_CHAR
#define MPI_UNSIGNED_CHAR BDMPI_UNSIGNED_CHAR
#define MPI_BYTE BDMPI_BYTE
#define MPI_WCHAR BDMPI_WCHAR
#define MPI_SHORT BDMPI_SHORT
#define MPI_UNSIGNED_SHORT BDMPI_UNSIGNED_SHORT
#define MPI_INT BDMPI_INT
#define MPI_UNSIGNED BDMPI_UNSIGNED
#define MPI_LONG BDMPI_LONG
#define MPI_UNSIGNED_LONG BDMPI_UNSIGNED_LONG
#define MPI_LONG_LONG_INT BDMPI_LONG_LONG_INT
#define MPI_UNSIGNED_LONG_LONG BDMPI_UNSIGNED_LONG_LONG
#define MPI_INT8_T BDMPI_INT8_T
#define MPI_UINT8_T BDMPI_UINT8_T
#define MPI_INT16_T BDMPI_INT16_T
#define MPI_UINT16_T BDMPI_UINT16_T
#define MPI_INT32_T BDMPI_INT32_T
#define MPI_UINT32_T BDMPI_UINT32_T
#define MPI_INT64_T BDMPI_INT64_T
#define MPI_UINT64_T BDMPI_UINT64_T
#define MPI_SIZE_T BDMPI_SIZE_T
#define MPI_SSIZE_T BDMPI_SSIZE_T
#define MPI_FLOAT BDMPI_FLOAT
#define MPI_DOUBLE BDMPI_DOUBLE
#define MPI_FLOAT_INT BDMPI_FLOAT_INT
#define MPI_DOUBLE_INT BDMPI_DOUBLE_INT
#define MPI_LONG_INT BDMPI_LONG_INT
#define MPI_SHORT_INT BDMPI_SHORT_INT
#define MPI_2INT BDMPI_2INT

typedef BDMPI_Comm MPI_Comm;
#define MPI_COMM_NULL BDMPI_COMM_NULL
#define MPI_COMM_WORLD BDMPI_COMM_WORLD
#define MPI_COMM_SELF BDMPI_COMM_SELF

typedef BDMPI_Status MPI_Status;
#define MPI_STATUS_IGNORE BDMPI_STATUS_IGNORE

typedef BDMPI_Request MPI_Request;
#define MPI_REQUEST_NULL BDMPI_REQUEST_NULL

#ifdef __cplusplus
extern "C" {
#endif

int MPI_Print_vm_info(char *hdr);
int MPI_Comm_lsize(MPI_Comm comm, int *lsize);
int MPI_Comm_lrank(MPI_Comm comm, int *lrank);
int MPI_Comm_nsize(MPI_Comm comm, int *nsize);
int MPI_Comm_nrank(MPI_Comm comm, int *nrank);
int MPI_Comm_rrank(MPI_Comm comm, int *rrank);
int MPI_Reduce_init(void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                    int root, MPI_Comm comm, MPI_Request *request);
int MPI_Reduce_fine(void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root,
                    MPI_Comm comm, MPI_Request *request);
int MPI_Merge(void *sendbuf, int *sendids, int sendcount, void *recvbuf, int *recvids,
              int *r_recvcount, MPI_Datatype datatype, MPI_Op op, int root, MPI_Comm comm);

int MPI_Init(int *argc, char **argv[]);
int MPI_Finalize(void);
int MPI_Comm_size(MPI_Comm comm, int *size);
int MPI_Comm_rank(MPI_Comm comm, int *rank);
int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm);
int MPI_Comm_free(MPI_Comm *comm);
int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm);
int MPI_Send(void const *buf, int count, MPI_Datatype datatype, int dest, int tag,
             MPI_Comm comm);
int MPI_Isend(void const *buf, int count, MPI_Datatype datatype, int dest, int tag,
              MPI_Comm comm, MPI_Request *request);
int MPI_Recv(void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
             MPI_Status *status);
int MPI_Irecv(void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
              MPI_Request *request);
int MPI_Sendrecv(void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                 void *recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag,
                 MPI_Comm comm, MPI_Status *status);
int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status);
int MPI_Wait(MPI_Request *request, MPI_Status *status);
int MPI_Waitall(int count, MPI_Request *request, MPI_Status *status);
/* MPI_UNDEFINED when the message is not a whole number of elements (BDMPI_Get_count gives the
 * whole elements). */
int MPI_Get_count(MPI_Status *status, MPI_Datatype datatype, int *count);
int MPI_Barrier(MPI_Comm comm);
int MPI_Bcast(void *buf, int count, MPI_Datatype datatype, int root, MPI_Comm comm);
int MPI_Allgather(void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm);
int MPI_Allgatherv(void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                   int *recvcounts, int *displs, MPI_Datatype recvtype, MPI_Comm comm);
int MPI_Gather(void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
               int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm);
int MPI_Gatherv(void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                int *recvcounts, int *displs, MPI_Datatype recvtype, int root, MPI_Comm comm);
int MPI_Scatter(void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm);
int MPI_Scatterv(void *sendbuf, int *sendcounts, int *displs, MPI_Datatype sendtype,
                 void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm);
int MPI_Alltoall(void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                 int recvcount, MPI_Datatype recvtype, MPI_Comm comm);
int MPI_Alltoallv(void const *const sendbuf, int const *const sendcounts,
                  int const *const sdispls, MPI_Datatype sendtype, void *recvbuf,
                  int const *const recvcounts, int const *const rdispls,
                  MPI_Datatype recvtype, MPI_Comm comm);
int MPI_Reduce(void const *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
               int root, MPI_Comm comm);
int MPI_Allreduce(void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                  MPI_Comm comm);
int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status *status);
int MPI_Iprobe(int source, int tag, MPI_Comm comm, int *flag, MPI_Status *status);
int MPI_Scan(void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
             MPI_Comm comm);
int MPI_Exscan(void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
               MPI_Comm comm);
double MPI_Wtime(void);

#ifdef __cplusplus
}
#endif
#endif /* BDMPRUN */

#endif /* BDMPI_H */
