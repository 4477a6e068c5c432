/* The PMPI shim's functions shared by its C bindings (arcoll_pmpi.c) and its
 * Fortran bindings (pmpi_fortran.c). Hidden: the shim exports only MPI's and
 * arcoll_mpi.h's names. */
#ifndef ARCOLL_MPI_PMPI_INT_H
#define ARCOLL_MPI_PMPI_INT_H

#include <mpi.h>

#pragma GCC visibility push(hidden)
int shim_init(int rc);
int shim_wait(MPI_Request *req, MPI_Status *st);
int shim_uniform(int kind, const void *site, const void *sbuf, int scount, MPI_Datatype stype,
                 void *rbuf, int rcount, MPI_Datatype rtype, MPI_Comm comm, MPI_Request *req);
int shim_test(MPI_Request *req, int *flag, MPI_Status *st);
int shim_some(int test, int n, MPI_Request *reqs, int *out, int *idx, MPI_Status *sts);
int shim_reduce(int kind, const void *site, const void *sbuf, void *rbuf, int count,
                MPI_Datatype type, MPI_Op op, MPI_Comm comm, MPI_Request *req);
void shim_poll_some(void);
int shim_finalize(void);
int shim_any(int n, MPI_Request *reqs, int *idx, int *flag, MPI_Status *st);
int shim_alltoallv(int kind, const void *site, const void *sbuf, const int *scounts,
                   const int *sdispls, MPI_Datatype stype, void *rbuf, const int *rcounts,
                   const int *rdispls, MPI_Datatype rtype, MPI_Comm comm, MPI_Request *req);
int shim_allgatherv(int kind, const void *site, const void *sbuf, int scount, MPI_Datatype stype,
                    void *rbuf, const int *rcounts, const int *displs, MPI_Datatype rtype,
                    MPI_Comm comm, MPI_Request *req);
int shim_all(int n, MPI_Request *reqs, int *flag, MPI_Status *sts);
#pragma GCC visibility pop

#endif
