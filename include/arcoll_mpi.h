/*
 * libarcoll_mpi.so: a PMPI interposition library. Preloaded (LD_PRELOAD) or
 * linked before libmpi, it runs an unmodified MPI program's MPI_Alltoall(v),
 * MPI_Allgather(v), MPI_Reduce_scatter_block, MPI_Allreduce and their
 * nonblocking forms on arcoll wherever it can, from C and Fortran, gives the
 * communicators of MPI_Comm_split, _split_type, _create, _dup and
 * _dup_with_info a team split from their parent's, and hands every other call
 * to the MPI library (docs/embedding.md, "The PMPI shim").
 *
 * Programs need not include this header. It declares what the shim exports
 * besides the MPI functions: counters, which a test or a tool finds with
 * dlsym(RTLD_DEFAULT, "arcoll_mpi_stats") so as to run with or without it.
 */
#ifndef ARCOLL_MPI_H
#define ARCOLL_MPI_H

#ifdef __cplusplus
extern "C" {
#endif

typedef struct arcoll_mpi_stats {
    unsigned long long alltoall_arcoll;  /* MPI_Alltoall calls that arcoll ran */
    unsigned long long alltoall_mpi;     /* ... handed to PMPI_Alltoall */
    unsigned long long allgather_arcoll; /* MPI_Allgather calls that arcoll ran */
    unsigned long long allgather_mpi;    /* ... handed to PMPI_Allgather */
    unsigned long long comms_arcoll;     /* communicators on arcoll (own or shared context) */
    unsigned long long comms_mpi;        /* communicators left to MPI for good */
    unsigned long long comms_freed;      /* communicators on arcoll freed again */
    unsigned long long errors;           /* arcoll calls that failed (MPI error raised) */
    /* The same pair for the other collectives: ran on arcoll, handed to PMPI. */
    unsigned long long alltoallv_arcoll, alltoallv_mpi;
    unsigned long long allgatherv_arcoll, allgatherv_mpi;
    unsigned long long reduce_scatter_block_arcoll, reduce_scatter_block_mpi;
    unsigned long long allreduce_arcoll, allreduce_mpi;
    unsigned long long ialltoall_arcoll, ialltoall_mpi;
    unsigned long long iallgather_arcoll, iallgather_mpi;
    unsigned long long iallreduce_arcoll, iallreduce_mpi;
    unsigned long long ialltoallv_arcoll, ialltoallv_mpi;
    unsigned long long iallgatherv_arcoll, iallgatherv_mpi;
    unsigned long long ireduce_scatter_block_arcoll, ireduce_scatter_block_mpi;
    unsigned long long packed;   /* arcoll calls whose data went through a packed copy */
    unsigned long long fortran;  /* collective calls that came through a Fortran binding */
    unsigned long long requests; /* nonblocking arcoll calls completed (wait/test) */
    /* Contexts (arcoll_init) and the communicators that share them. */
    unsigned long long contexts;       /* arcoll contexts created */
    unsigned long long contexts_freed; /* ... finalized before MPI_Finalize (last user gone) */
    unsigned long long contexts_live;  /* ... alive now */
    unsigned long long comms_split;    /* communicators given a team by arcoll_team_split */
    unsigned long long teams_freed;    /* ... whose team arcoll_team_free released */
    unsigned long long split_fallback; /* team ranks differed from MPI's: own context instead */
    unsigned long long split_failed;   /* arcoll_team_split failed: the communicator uses MPI */
    /* Communicators whose team failed, whose later calls go to MPI (agreed by all ranks). */
    unsigned long long comms_failed;
} arcoll_mpi_stats_t;

/* This process's counters since MPI_Init. Returns 0. Call between MPI calls
 * (MPI_THREAD_SERIALIZED rules). */
int arcoll_mpi_stats(arcoll_mpi_stats_t *out);
typedef int (*arcoll_mpi_stats_fn)(arcoll_mpi_stats_t *out);

#ifdef __cplusplus
}
#endif
#endif /* ARCOLL_MPI_H */
