/* The PMPI shim's Fortran bindings (see the comment below): every Fortran
 * symbol of the calls the shim defines in C (arcoll_pmpi.c), brought to the
 * same functions. */
#include <mpi.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "arcoll.h"
#include "arcoll_mpi.h"
#include "arcoll_mpi_common.h"
#include "pmpi_int.h"

/*
 * Fortran. Open MPI's mpif.h and `use mpi` bindings are the symbols mpi_x_
 * (and mpi_x, mpi_x__, MPI_X for other compilers' name mangling) in
 * libmpi_mpifh, which call PMPI_X; the mpi_f08 module's mpi_x_f08_ call
 * ompi_x_f, the same functions under another name. Defining all of them here
 * (preloaded, they come first) brings every Fortran call to the C code above.
 * Handles are MPI_Fint; the sentinels MPI_IN_PLACE, MPI_BOTTOM and
 * MPI_STATUS(ES)_IGNORE are the addresses of Open MPI's Fortran common
 * blocks, which are weak here so that a C program without the Fortran
 * libraries still loads the shim.
 */
extern int mpi_fortran_in_place_ __attribute__((weak));
extern int mpi_fortran_bottom_ __attribute__((weak));
extern int mpi_fortran_status_ignore_ __attribute__((weak));
extern int mpi_fortran_statuses_ignore_ __attribute__((weak));

_Static_assert(sizeof(MPI_Fint) == sizeof(int), "Fortran count arrays are passed as int arrays");
#define SHIM_F_STATUS_SIZE ((int)(sizeof(MPI_Status) / sizeof(MPI_Fint)))

/* Every Fortran name of one function defined here as f_impl. */
#define SHIM_FORTRAN(impl, lower, upper, ompi, params)   \
    void lower params __attribute__((alias(#impl)));     \
    void lower##_ params __attribute__((alias(#impl)));  \
    void lower##__ params __attribute__((alias(#impl))); \
    void upper params __attribute__((alias(#impl)));     \
    void ompi params __attribute__((alias(#impl)))

static void *shim_fbuf(void *p)
{
    if (&mpi_fortran_in_place_ != NULL && p == (void *)&mpi_fortran_in_place_)
        return MPI_IN_PLACE;
    if (&mpi_fortran_bottom_ != NULL && p == (void *)&mpi_fortran_bottom_)
        return MPI_BOTTOM;
    return p;
}

static int shim_fstatus_ignored(const MPI_Fint *st)
{
    return (&mpi_fortran_status_ignore_ != NULL && st == &mpi_fortran_status_ignore_) ||
           (MPI_F_STATUS_IGNORE != NULL && st == MPI_F_STATUS_IGNORE);
}

static int shim_fstatuses_ignored(const MPI_Fint *st)
{
    return (&mpi_fortran_statuses_ignore_ != NULL && st == &mpi_fortran_statuses_ignore_) ||
           (MPI_F_STATUSES_IGNORE != NULL && st == MPI_F_STATUSES_IGNORE);
}

static void shim_fret(MPI_Fint *ierr, int rc)
{
    if (ierr != NULL)
        *ierr = (MPI_Fint)rc;
}

/* The collectives: kind, the caller's site, C arguments. */
static void shim_f_uniform(int kind, const void *site, void *sbuf, MPI_Fint *scount,
                           MPI_Fint *stype, void *rbuf, MPI_Fint *rcount, MPI_Fint *rtype,
                           MPI_Fint *comm, MPI_Fint *freq, MPI_Fint *ierr)
{
    MPI_Request req = MPI_REQUEST_NULL;
    int rc;

    amc_stats.fortran++;
    rc = shim_uniform(kind, site, shim_fbuf(sbuf), (int)*scount, PMPI_Type_f2c(*stype),
                      shim_fbuf(rbuf), (int)*rcount, PMPI_Type_f2c(*rtype), PMPI_Comm_f2c(*comm),
                      freq != NULL ? &req : NULL);
    if (freq != NULL && rc == MPI_SUCCESS)
        *freq = PMPI_Request_c2f(req);
    shim_fret(ierr, rc);
}

static void f_alltoall(void *sbuf, MPI_Fint *scount, MPI_Fint *stype, void *rbuf, MPI_Fint *rcount,
                       MPI_Fint *rtype, MPI_Fint *comm, MPI_Fint *ierr)
{
    shim_f_uniform(K_ALLTOALL, __builtin_return_address(0), sbuf, scount, stype, rbuf, rcount,
                   rtype, comm, NULL, ierr);
}
SHIM_FORTRAN(f_alltoall, mpi_alltoall, MPI_ALLTOALL, ompi_alltoall_f,
             (void *, MPI_Fint *, MPI_Fint *, void *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
              MPI_Fint *));

static void f_allgather(void *sbuf, MPI_Fint *scount, MPI_Fint *stype, void *rbuf, MPI_Fint *rcount,
                        MPI_Fint *rtype, MPI_Fint *comm, MPI_Fint *ierr)
{
    shim_f_uniform(K_ALLGATHER, __builtin_return_address(0), sbuf, scount, stype, rbuf, rcount,
                   rtype, comm, NULL, ierr);
}
SHIM_FORTRAN(f_allgather, mpi_allgather, MPI_ALLGATHER, ompi_allgather_f,
             (void *, MPI_Fint *, MPI_Fint *, void *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
              MPI_Fint *));

static void f_ialltoall(void *sbuf, MPI_Fint *scount, MPI_Fint *stype, void *rbuf, MPI_Fint *rcount,
                        MPI_Fint *rtype, MPI_Fint *comm, MPI_Fint *req, MPI_Fint *ierr)
{
    shim_f_uniform(AMC_NB + K_ALLTOALL, __builtin_return_address(0), sbuf, scount, stype, rbuf,
                   rcount, rtype, comm, req, ierr);
}
SHIM_FORTRAN(f_ialltoall, mpi_ialltoall, MPI_IALLTOALL, ompi_ialltoall_f,
             (void *, MPI_Fint *, MPI_Fint *, void *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
              MPI_Fint *, MPI_Fint *));

static void f_iallgather(void *sbuf, MPI_Fint *scount, MPI_Fint *stype, void *rbuf,
                         MPI_Fint *rcount, MPI_Fint *rtype, MPI_Fint *comm, MPI_Fint *req,
                         MPI_Fint *ierr)
{
    shim_f_uniform(AMC_NB + K_ALLGATHER, __builtin_return_address(0), sbuf, scount, stype, rbuf,
                   rcount, rtype, comm, req, ierr);
}
SHIM_FORTRAN(f_iallgather, mpi_iallgather, MPI_IALLGATHER, ompi_iallgather_f,
             (void *, MPI_Fint *, MPI_Fint *, void *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
              MPI_Fint *, MPI_Fint *));

static void shim_f_alltoallv(int kind, const void *site, void *sbuf, MPI_Fint *scounts,
                             MPI_Fint *sdispls, MPI_Fint *stype, void *rbuf, MPI_Fint *rcounts,
                             MPI_Fint *rdispls, MPI_Fint *rtype, MPI_Fint *comm, MPI_Fint *freq,
                             MPI_Fint *ierr)
{
    MPI_Request req = MPI_REQUEST_NULL;
    int rc;

    amc_stats.fortran++;
    rc = shim_alltoallv(kind, site, shim_fbuf(sbuf), scounts, sdispls, PMPI_Type_f2c(*stype),
                        shim_fbuf(rbuf), rcounts, rdispls, PMPI_Type_f2c(*rtype),
                        PMPI_Comm_f2c(*comm), freq != NULL ? &req : NULL);
    if (freq != NULL && rc == MPI_SUCCESS)
        *freq = PMPI_Request_c2f(req);
    shim_fret(ierr, rc);
}

static void f_alltoallv(void *sbuf, MPI_Fint *scounts, MPI_Fint *sdispls, MPI_Fint *stype,
                        void *rbuf, MPI_Fint *rcounts, MPI_Fint *rdispls, MPI_Fint *rtype,
                        MPI_Fint *comm, MPI_Fint *ierr)
{
    shim_f_alltoallv(K_ALLTOALLV, __builtin_return_address(0), sbuf, scounts, sdispls, stype, rbuf,
                     rcounts, rdispls, rtype, comm, NULL, ierr);
}
SHIM_FORTRAN(f_alltoallv, mpi_alltoallv, MPI_ALLTOALLV, ompi_alltoallv_f,
             (void *, MPI_Fint *, MPI_Fint *, MPI_Fint *, void *, MPI_Fint *, MPI_Fint *,
              MPI_Fint *, MPI_Fint *, MPI_Fint *));

static void f_ialltoallv(void *sbuf, MPI_Fint *scounts, MPI_Fint *sdispls, MPI_Fint *stype,
                         void *rbuf, MPI_Fint *rcounts, MPI_Fint *rdispls, MPI_Fint *rtype,
                         MPI_Fint *comm, MPI_Fint *req, MPI_Fint *ierr)
{
    shim_f_alltoallv(AMC_NB + K_ALLTOALLV, __builtin_return_address(0), sbuf, scounts, sdispls,
                     stype, rbuf, rcounts, rdispls, rtype, comm, req, ierr);
}
SHIM_FORTRAN(f_ialltoallv, mpi_ialltoallv, MPI_IALLTOALLV, ompi_ialltoallv_f,
             (void *, MPI_Fint *, MPI_Fint *, MPI_Fint *, void *, MPI_Fint *, MPI_Fint *,
              MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *));

static void shim_f_allgatherv(int kind, const void *site, void *sbuf, MPI_Fint *scount,
                              MPI_Fint *stype, void *rbuf, MPI_Fint *rcounts, MPI_Fint *displs,
                              MPI_Fint *rtype, MPI_Fint *comm, MPI_Fint *freq, MPI_Fint *ierr)
{
    MPI_Request req = MPI_REQUEST_NULL;
    int rc;

    amc_stats.fortran++;
    rc = shim_allgatherv(kind, site, shim_fbuf(sbuf), (int)*scount, PMPI_Type_f2c(*stype),
                         shim_fbuf(rbuf), rcounts, displs, PMPI_Type_f2c(*rtype),
                         PMPI_Comm_f2c(*comm), freq != NULL ? &req : NULL);
    if (freq != NULL && rc == MPI_SUCCESS)
        *freq = PMPI_Request_c2f(req);
    shim_fret(ierr, rc);
}

static void f_allgatherv(void *sbuf, MPI_Fint *scount, MPI_Fint *stype, void *rbuf,
                         MPI_Fint *rcounts, MPI_Fint *displs, MPI_Fint *rtype, MPI_Fint *comm,
                         MPI_Fint *ierr)
{
    shim_f_allgatherv(K_ALLGATHERV, __builtin_return_address(0), sbuf, scount, stype, rbuf, rcounts,
                      displs, rtype, comm, NULL, ierr);
}
SHIM_FORTRAN(f_allgatherv, mpi_allgatherv, MPI_ALLGATHERV, ompi_allgatherv_f,
             (void *, MPI_Fint *, MPI_Fint *, void *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
              MPI_Fint *, MPI_Fint *));

static void f_iallgatherv(void *sbuf, MPI_Fint *scount, MPI_Fint *stype, void *rbuf,
                          MPI_Fint *rcounts, MPI_Fint *displs, MPI_Fint *rtype, MPI_Fint *comm,
                          MPI_Fint *req, MPI_Fint *ierr)
{
    shim_f_allgatherv(AMC_NB + K_ALLGATHERV, __builtin_return_address(0), sbuf, scount, stype, rbuf,
                      rcounts, displs, rtype, comm, req, ierr);
}
SHIM_FORTRAN(f_iallgatherv, mpi_iallgatherv, MPI_IALLGATHERV, ompi_iallgatherv_f,
             (void *, MPI_Fint *, MPI_Fint *, void *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
              MPI_Fint *, MPI_Fint *, MPI_Fint *));

static void shim_f_reduce(int kind, const void *site, void *sbuf, void *rbuf, MPI_Fint *count,
                          MPI_Fint *type, MPI_Fint *op, MPI_Fint *comm, MPI_Fint *freq,
                          MPI_Fint *ierr)
{
    MPI_Request req = MPI_REQUEST_NULL;
    int rc;

    amc_stats.fortran++;
    rc =
        shim_reduce(kind, site, shim_fbuf(sbuf), shim_fbuf(rbuf), (int)*count, PMPI_Type_f2c(*type),
                    PMPI_Op_f2c(*op), PMPI_Comm_f2c(*comm), freq != NULL ? &req : NULL);
    if (freq != NULL && rc == MPI_SUCCESS)
        *freq = PMPI_Request_c2f(req);
    shim_fret(ierr, rc);
}

static void f_allreduce(void *sbuf, void *rbuf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *op,
                        MPI_Fint *comm, MPI_Fint *ierr)
{
    shim_f_reduce(K_ALLREDUCE, __builtin_return_address(0), sbuf, rbuf, count, type, op, comm, NULL,
                  ierr);
}
SHIM_FORTRAN(f_allreduce, mpi_allreduce, MPI_ALLREDUCE, ompi_allreduce_f,
             (void *, void *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *));

static void f_iallreduce(void *sbuf, void *rbuf, MPI_Fint *count, MPI_Fint *type, MPI_Fint *op,
                         MPI_Fint *comm, MPI_Fint *req, MPI_Fint *ierr)
{
    shim_f_reduce(AMC_NB + K_ALLREDUCE, __builtin_return_address(0), sbuf, rbuf, count, type, op,
                  comm, req, ierr);
}
SHIM_FORTRAN(f_iallreduce, mpi_iallreduce, MPI_IALLREDUCE, ompi_iallreduce_f,
             (void *, void *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
              MPI_Fint *));

static void f_reduce_scatter_block(void *sbuf, void *rbuf, MPI_Fint *count, MPI_Fint *type,
                                   MPI_Fint *op, MPI_Fint *comm, MPI_Fint *ierr)
{
    shim_f_reduce(K_RSB, __builtin_return_address(0), sbuf, rbuf, count, type, op, comm, NULL,
                  ierr);
}
SHIM_FORTRAN(f_reduce_scatter_block, mpi_reduce_scatter_block, MPI_REDUCE_SCATTER_BLOCK,
             ompi_reduce_scatter_block_f,
             (void *, void *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *));

static void f_ireduce_scatter_block(void *sbuf, void *rbuf, MPI_Fint *count, MPI_Fint *type,
                                    MPI_Fint *op, MPI_Fint *comm, MPI_Fint *req, MPI_Fint *ierr)
{
    shim_f_reduce(AMC_NB + K_RSB, __builtin_return_address(0), sbuf, rbuf, count, type, op, comm,
                  req, ierr);
}
SHIM_FORTRAN(f_ireduce_scatter_block, mpi_ireduce_scatter_block, MPI_IREDUCE_SCATTER_BLOCK,
             ompi_ireduce_scatter_block_f,
             (void *, void *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
              MPI_Fint *));

/* Request arrays between Fortran and C: NULL when n < 0 or no memory. */
static MPI_Request *shim_freqs(int n, const MPI_Fint *freqs)
{
    MPI_Request *r = n >= 0 ? malloc(((size_t)n + 1) * sizeof(*r)) : NULL;

    for (int i = 0; r != NULL && i < n; i++)
        r[i] = PMPI_Request_f2c(freqs[i]);
    return r;
}

/* C statuses for Fortran ones: 0, or -1 when out of memory. */
static int shim_fstatuses(int n, const MPI_Fint *fst, MPI_Status **sts)
{
    /* Open MPI's MPI_STATUSES_IGNORE is NULL: no memory is told apart. */
    *sts = MPI_STATUSES_IGNORE;
    if (shim_fstatuses_ignored(fst))
        return 0;
    *sts = malloc(((size_t)n + 1) * sizeof(MPI_Status));
    return *sts != NULL ? 0 : -1;
}

static void shim_fback(int n, const MPI_Request *r, MPI_Fint *freqs, const MPI_Status *sts,
                       MPI_Fint *fsts)
{
    for (int i = 0; i < n; i++) {
        freqs[i] = PMPI_Request_c2f(r[i]);
        if (sts != MPI_STATUSES_IGNORE)
            PMPI_Status_c2f(&sts[i], fsts + (size_t)i * SHIM_F_STATUS_SIZE);
    }
}

static void f_wait(MPI_Fint *freq, MPI_Fint *fst, MPI_Fint *ierr)
{
    MPI_Request req = PMPI_Request_f2c(*freq);
    MPI_Status st;
    int ign = shim_fstatus_ignored(fst), rc = shim_wait(&req, ign ? MPI_STATUS_IGNORE : &st);

    /* Also when a failed request was freed (its code in the status). */
    *freq = PMPI_Request_c2f(req);
    if (!ign && (rc == MPI_SUCCESS || req == MPI_REQUEST_NULL))
        PMPI_Status_c2f(&st, fst);
    shim_fret(ierr, rc);
}
SHIM_FORTRAN(f_wait, mpi_wait, MPI_WAIT, ompi_wait_f, (MPI_Fint *, MPI_Fint *, MPI_Fint *));

static void f_test(MPI_Fint *freq, MPI_Fint *flag, MPI_Fint *fst, MPI_Fint *ierr)
{
    MPI_Request req = PMPI_Request_f2c(*freq);
    MPI_Status st;
    int ign = shim_fstatus_ignored(fst), done = 0, rc;

    rc = shim_test(&req, &done, ign ? MPI_STATUS_IGNORE : &st);
    if (rc == MPI_SUCCESS || (done && req == MPI_REQUEST_NULL)) {
        *flag = done != 0; /* gfortran's .true. */
        if (done) {
            *freq = PMPI_Request_c2f(req);
            if (!ign)
                PMPI_Status_c2f(&st, fst);
        }
    }
    shim_fret(ierr, rc);
}
SHIM_FORTRAN(f_test, mpi_test, MPI_TEST, ompi_test_f,
             (MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *));

/* Waitall and testall: test NULL for waitall. */
static void shim_f_all(MPI_Fint *count, MPI_Fint *freqs, MPI_Fint *flag, MPI_Fint *fsts,
                       MPI_Fint *ierr)
{
    int n = (int)*count, done = 1, rc;
    MPI_Request *r = shim_freqs(n, freqs);
    MPI_Status *sts = MPI_STATUSES_IGNORE;

    if (r == NULL || shim_fstatuses(n, fsts, &sts) != 0) {
        free(r);
        shim_fret(ierr, MPI_ERR_NO_MEM);
        return;
    }
    rc = shim_all(n, r, flag != NULL ? &done : NULL, sts);
    if (flag != NULL && (rc == MPI_SUCCESS || rc == MPI_ERR_IN_STATUS))
        *flag = done != 0;
    if ((rc == MPI_SUCCESS || rc == MPI_ERR_IN_STATUS) && done)
        shim_fback(n, r, freqs, sts, fsts);
    if (sts != MPI_STATUSES_IGNORE)
        free(sts);
    free(r);
    shim_fret(ierr, rc);
}

static void f_waitall(MPI_Fint *count, MPI_Fint *freqs, MPI_Fint *fsts, MPI_Fint *ierr)
{
    shim_f_all(count, freqs, NULL, fsts, ierr);
}
SHIM_FORTRAN(f_waitall, mpi_waitall, MPI_WAITALL, ompi_waitall_f,
             (MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *));

static void f_testall(MPI_Fint *count, MPI_Fint *freqs, MPI_Fint *flag, MPI_Fint *fsts,
                      MPI_Fint *ierr)
{
    shim_f_all(count, freqs, flag, fsts, ierr);
}
SHIM_FORTRAN(f_testall, mpi_testall, MPI_TESTALL, ompi_testall_f,
             (MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *));

/* Waitany and testany (flag NULL: wait); Fortran indices count from 1. */
static void shim_f_any(MPI_Fint *count, MPI_Fint *freqs, MPI_Fint *index, MPI_Fint *flag,
                       MPI_Fint *fst, MPI_Fint *ierr)
{
    int n = (int)*count, idx = MPI_UNDEFINED, done = 1, rc;
    int ign = shim_fstatus_ignored(fst);
    MPI_Request *r = shim_freqs(n, freqs);
    MPI_Status st;

    if (r == NULL) {
        shim_fret(ierr, MPI_ERR_NO_MEM);
        return;
    }
    rc = shim_any(n, r, &idx, flag != NULL ? &done : NULL, ign ? MPI_STATUS_IGNORE : &st);
    if (flag != NULL && rc == MPI_SUCCESS)
        *flag = done != 0;
    if ((rc == MPI_SUCCESS || (idx != MPI_UNDEFINED && r[idx] == MPI_REQUEST_NULL)) && done) {
        *index = idx == MPI_UNDEFINED ? MPI_UNDEFINED : idx + 1;
        if (idx != MPI_UNDEFINED) {
            freqs[idx] = PMPI_Request_c2f(r[idx]);
            if (!ign)
                PMPI_Status_c2f(&st, fst);
        }
    }
    free(r);
    shim_fret(ierr, rc);
}

static void f_waitany(MPI_Fint *count, MPI_Fint *freqs, MPI_Fint *index, MPI_Fint *fst,
                      MPI_Fint *ierr)
{
    shim_f_any(count, freqs, index, NULL, fst, ierr);
}
SHIM_FORTRAN(f_waitany, mpi_waitany, MPI_WAITANY, ompi_waitany_f,
             (MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *));

static void f_testany(MPI_Fint *count, MPI_Fint *freqs, MPI_Fint *index, MPI_Fint *flag,
                      MPI_Fint *fst, MPI_Fint *ierr)
{
    shim_f_any(count, freqs, index, flag, fst, ierr);
}
SHIM_FORTRAN(f_testany, mpi_testany, MPI_TESTANY, ompi_testany_f,
             (MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *));

/* Waitsome and testsome (test: 1). */
static void shim_f_some(int test, MPI_Fint *count, MPI_Fint *freqs, MPI_Fint *outcount,
                        MPI_Fint *indices, MPI_Fint *fsts, MPI_Fint *ierr)
{
    int n = (int)*count, out = 0, rc;
    MPI_Request *r = shim_freqs(n, freqs);
    MPI_Status *sts = MPI_STATUSES_IGNORE;
    int *idx = malloc(((size_t)n + 1) * sizeof(int));

    if (r == NULL || idx == NULL || shim_fstatuses(n, fsts, &sts) != 0) {
        free(r);
        free(idx);
        shim_fret(ierr, MPI_ERR_NO_MEM);
        return;
    }
    rc = shim_some(test, n, r, &out, idx, sts);
    if (rc == MPI_SUCCESS || rc == MPI_ERR_IN_STATUS) {
        *outcount = out;
        for (int i = 0; out != MPI_UNDEFINED && i < out; i++) {
            freqs[idx[i]] = PMPI_Request_c2f(r[idx[i]]);
            if (sts != MPI_STATUSES_IGNORE)
                PMPI_Status_c2f(&sts[i], fsts + (size_t)i * SHIM_F_STATUS_SIZE);
            indices[i] = idx[i] + 1;
        }
    }
    if (sts != MPI_STATUSES_IGNORE)
        free(sts);
    free(r);
    free(idx);
    shim_fret(ierr, rc);
}

static void f_waitsome(MPI_Fint *count, MPI_Fint *freqs, MPI_Fint *outcount, MPI_Fint *indices,
                       MPI_Fint *fsts, MPI_Fint *ierr)
{
    shim_f_some(0, count, freqs, outcount, indices, fsts, ierr);
}
SHIM_FORTRAN(f_waitsome, mpi_waitsome, MPI_WAITSOME, ompi_waitsome_f,
             (MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *));

static void f_testsome(MPI_Fint *count, MPI_Fint *freqs, MPI_Fint *outcount, MPI_Fint *indices,
                       MPI_Fint *fsts, MPI_Fint *ierr)
{
    shim_f_some(1, count, freqs, outcount, indices, fsts, ierr);
}
SHIM_FORTRAN(f_testsome, mpi_testsome, MPI_TESTSOME, ompi_testsome_f,
             (MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *));

static void f_request_get_status(MPI_Fint *freq, MPI_Fint *flag, MPI_Fint *fst, MPI_Fint *ierr)
{
    MPI_Status st;
    int ign = shim_fstatus_ignored(fst), done = 0, rc;

    shim_poll_some();
    rc = PMPI_Request_get_status(PMPI_Request_f2c(*freq), &done, ign ? MPI_STATUS_IGNORE : &st);
    if (rc == MPI_SUCCESS) {
        *flag = done != 0;
        if (done && !ign)
            PMPI_Status_c2f(&st, fst);
    }
    shim_fret(ierr, rc);
}
SHIM_FORTRAN(f_request_get_status, mpi_request_get_status, MPI_REQUEST_GET_STATUS,
             ompi_request_get_status_f, (MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *));

/* MPI_Init from Fortran: the agreed setup as from C (no argc/argv there). */
static void f_init(MPI_Fint *ierr)
{
    shim_fret(ierr, shim_init(PMPI_Init(NULL, NULL)));
}
SHIM_FORTRAN(f_init, mpi_init, MPI_INIT, ompi_init_f, (MPI_Fint *));

static void f_init_thread(MPI_Fint *required, MPI_Fint *provided, MPI_Fint *ierr)
{
    int got = MPI_THREAD_SINGLE, rc = shim_init(PMPI_Init_thread(NULL, NULL, (int)*required, &got));

    if (rc == MPI_SUCCESS)
        *provided = (MPI_Fint)got;
    shim_fret(ierr, rc);
}
SHIM_FORTRAN(f_init_thread, mpi_init_thread, MPI_INIT_THREAD, ompi_init_thread_f,
             (MPI_Fint *, MPI_Fint *, MPI_Fint *));

static void f_finalize(MPI_Fint *ierr)
{
    shim_fret(ierr, shim_finalize());
}
SHIM_FORTRAN(f_finalize, mpi_finalize, MPI_FINALIZE, ompi_finalize_f, (MPI_Fint *));

/* The communicator constructors, so that a Fortran program's communicators
 * share their parent's context too. */
static void shim_fcomm(MPI_Fint *newcomm, MPI_Comm c, int rc, MPI_Fint *ierr)
{
    if (rc == MPI_SUCCESS)
        *newcomm = PMPI_Comm_c2f(c);
    shim_fret(ierr, rc);
}

static void f_comm_split(MPI_Fint *comm, MPI_Fint *color, MPI_Fint *key, MPI_Fint *newcomm,
                         MPI_Fint *ierr)
{
    MPI_Comm c = MPI_COMM_NULL;
    int rc = MPI_Comm_split(PMPI_Comm_f2c(*comm), (int)*color, (int)*key, &c);

    shim_fcomm(newcomm, c, rc, ierr);
}
SHIM_FORTRAN(f_comm_split, mpi_comm_split, MPI_COMM_SPLIT, ompi_comm_split_f,
             (MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *));

static void f_comm_split_type(MPI_Fint *comm, MPI_Fint *type, MPI_Fint *key, MPI_Fint *info,
                              MPI_Fint *newcomm, MPI_Fint *ierr)
{
    MPI_Comm c = MPI_COMM_NULL;
    int rc =
        MPI_Comm_split_type(PMPI_Comm_f2c(*comm), (int)*type, (int)*key, PMPI_Info_f2c(*info), &c);

    shim_fcomm(newcomm, c, rc, ierr);
}
SHIM_FORTRAN(f_comm_split_type, mpi_comm_split_type, MPI_COMM_SPLIT_TYPE, ompi_comm_split_type_f,
             (MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *));

static void f_comm_create(MPI_Fint *comm, MPI_Fint *group, MPI_Fint *newcomm, MPI_Fint *ierr)
{
    MPI_Comm c = MPI_COMM_NULL;
    int rc = MPI_Comm_create(PMPI_Comm_f2c(*comm), PMPI_Group_f2c(*group), &c);

    shim_fcomm(newcomm, c, rc, ierr);
}
SHIM_FORTRAN(f_comm_create, mpi_comm_create, MPI_COMM_CREATE, ompi_comm_create_f,
             (MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *));

static void f_comm_dup(MPI_Fint *comm, MPI_Fint *newcomm, MPI_Fint *ierr)
{
    MPI_Comm c = MPI_COMM_NULL;
    int rc = MPI_Comm_dup(PMPI_Comm_f2c(*comm), &c);

    shim_fcomm(newcomm, c, rc, ierr);
}
SHIM_FORTRAN(f_comm_dup, mpi_comm_dup, MPI_COMM_DUP, ompi_comm_dup_f,
             (MPI_Fint *, MPI_Fint *, MPI_Fint *));

static void f_comm_dup_with_info(MPI_Fint *comm, MPI_Fint *info, MPI_Fint *newcomm, MPI_Fint *ierr)
{
    MPI_Comm c = MPI_COMM_NULL;
    int rc = MPI_Comm_dup_with_info(PMPI_Comm_f2c(*comm), PMPI_Info_f2c(*info), &c);

    shim_fcomm(newcomm, c, rc, ierr);
}
SHIM_FORTRAN(f_comm_dup_with_info, mpi_comm_dup_with_info, MPI_COMM_DUP_WITH_INFO,
             ompi_comm_dup_with_info_f, (MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *));
