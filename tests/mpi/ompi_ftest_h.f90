! A Fortran MPI program through `include 'mpif.h'` (no module, no interfaces)
! for the Open MPI component (tests/mpi/run.sh, ompi-ompi_ftest_h-*): Open
! MPI's mpif.h bindings reach the communicator's coll table, so the
! component serves these calls with no Fortran symbol of its own. It checks
! MPI_Alltoall, MPI_Allreduce (in place both times: without interfaces an
! argument keeps one type and rank in a file), MPI_Ialltoall + MPI_Wait and
! MPI_Allgather on a split communicator against values it computes itself;
! that the component ran them shows in its ARCOLL_LOG=info line at
! MPI_Finalize. Last line on rank 0:
! "ompi_ftest_h (mpif.h) on N ranks: P passed, F failed".
program ompi_ftest_h
    implicit none
    include 'mpif.h'
    integer, parameter :: nk = 64
    integer :: ierr, me, n, i, j, req, sub, sme, sn, totals(2), mine(2)
    integer, allocatable :: sbuf(:), rbuf(:), ibuf(:)
    integer :: one(1)
    logical :: ok

    call MPI_Init(ierr)
    call MPI_Comm_rank(MPI_COMM_WORLD, me, ierr)
    call MPI_Comm_size(MPI_COMM_WORLD, n, ierr)
    allocate(sbuf(nk * n), rbuf(nk * n), ibuf(nk * n))
    mine = 0
    do j = 0, n - 1
        do i = 1, nk
            sbuf(j * nk + i) = me * 100000 + j * 1000 + i
        end do
    end do

    rbuf = -1
    call MPI_Alltoall(sbuf, nk, MPI_INTEGER, rbuf, nk, MPI_INTEGER, MPI_COMM_WORLD, ierr)
    ok = ierr == MPI_SUCCESS
    do j = 0, n - 1
        do i = 1, nk
            ok = ok .and. rbuf(j * nk + i) == j * 100000 + me * 1000 + i
        end do
    end do
    call check(ok, 'MPI_Alltoall')

    one(1) = me + 1
    call MPI_Allreduce(MPI_IN_PLACE, one, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
    call check(ierr == MPI_SUCCESS .and. one(1) == n * (n + 1) / 2, 'MPI_Allreduce (sum)')

    do i = 1, nk * n
        ibuf(i) = me * 10 + i
    end do
    call MPI_Allreduce(MPI_IN_PLACE, ibuf, nk * n, MPI_INTEGER, MPI_MAX, MPI_COMM_WORLD, ierr)
    ok = ierr == MPI_SUCCESS
    do i = 1, nk * n
        ok = ok .and. ibuf(i) == (n - 1) * 10 + i
    end do
    call check(ok, 'MPI_Allreduce (max)')

    rbuf = -1
    call MPI_Ialltoall(sbuf, nk, MPI_INTEGER, rbuf, nk, MPI_INTEGER, MPI_COMM_WORLD, req, ierr)
    call MPI_Wait(req, MPI_STATUS_IGNORE, ierr)
    ok = ierr == MPI_SUCCESS
    do j = 0, n - 1
        do i = 1, nk
            ok = ok .and. rbuf(j * nk + i) == j * 100000 + me * 1000 + i
        end do
    end do
    call check(ok, 'MPI_Ialltoall + MPI_Wait')

    ! Keys reversed: rank order in sub is the reverse of the world's.
    call MPI_Comm_split(MPI_COMM_WORLD, mod(me, 2), n - me, sub, ierr)
    call MPI_Comm_rank(sub, sme, ierr)
    call MPI_Comm_size(sub, sn, ierr)
    rbuf = -1
    call MPI_Allgather(sbuf, nk, MPI_INTEGER, rbuf, nk, MPI_INTEGER, sub, ierr)
    ok = ierr == MPI_SUCCESS
    do j = 0, sn - 1
        do i = 1, nk
            ok = ok .and. rbuf(j * nk + i) == (mod(me, 2) + 2 * ((n - 1 - mod(me, 2)) / 2 - j)) &
                * 100000 + i
        end do
    end do
    call check(ok, 'MPI_Allgather on a split communicator')
    call MPI_Comm_free(sub, ierr)

    call MPI_Reduce(mine, totals, 2, MPI_INTEGER, MPI_SUM, 0, MPI_COMM_WORLD, ierr)
    if (me == 0) print '(a,i0,a,i0,a,i0,a)', 'ompi_ftest_h (mpif.h) on ', n, ' ranks: ', &
        totals(1), ' passed, ', totals(2), ' failed'
    call MPI_Bcast(totals, 2, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
    call MPI_Finalize(ierr)
    if (totals(2) /= 0) stop 1

contains

    subroutine check(good, what)
        logical, intent(in) :: good
        character(len=*), intent(in) :: what

        if (good) then
            mine(1) = mine(1) + 1
        else
            mine(2) = mine(2) + 1
            print '(a,i0,a,a)', 'ompi_ftest_h[', me, ']: FAIL ', what
        end if
    end subroutine check
end program ompi_ftest_h
