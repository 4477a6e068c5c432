! shim_ftest.f90 with `use mpi_f08`: the module's wrappers (mpi_x_f08_) call
! Open MPI's ompi_x_f, which the shim defines; the optional ierror is left
! out of some calls. It checks MPI_Alltoall, MPI_Allgather (also in
! place), MPI_Alltoallv, MPI_Reduce_scatter_block, MPI_Allreduce (also in
! place) and MPI_Ialltoall/MPI_Iallreduce with
! MPI_Wait/MPI_Waitall against values it computes itself; then
! MPI_Comm_split (keys reversed), MPI_Comm_dup, MPI_Comm_create and
! MPI_Comm_free, whose communicators get teams split from the world's. That the shim ran
! them shows in its ARCOLL_LOG=info line at MPI_Finalize (tests/mpi/run.sh).
! Last line on rank 0: "shim_ftest (use mpi_f08) on N ranks: P passed, F failed".
program shim_ftest08
    use mpi_f08
    implicit none
    integer, parameter :: nk = 300
    integer :: ierr, me, n, i, j, totals(2), mine(2)
    type(MPI_Request) :: req, reqs(2)
    integer, allocatable :: sbuf(:), rbuf(:), ibuf(:), scounts(:), sdispls(:), rdispls(:)
    double precision :: dv(nk), dr(nk)
    logical :: ok
    type(MPI_Comm) :: sub, dsub, evens
    type(MPI_Group) :: wg, eg
    integer :: sme, sn, ssum, want, ranks1(1)

    call MPI_Init(ierr)
    call MPI_Comm_rank(MPI_COMM_WORLD, me, ierr)
    call MPI_Comm_size(MPI_COMM_WORLD, n, ierr)
    allocate(sbuf(nk * n), rbuf(nk * n), ibuf(nk * n), scounts(n), sdispls(n), rdispls(n))
    mine = 0

    ! Element i of the block for rank j: who sends, to whom, which.
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

    rbuf = -1
    call MPI_Allgather(sbuf, nk, MPI_INTEGER, rbuf, nk, MPI_INTEGER, MPI_COMM_WORLD, ierr)
    ok = ierr == MPI_SUCCESS
    do j = 0, n - 1
        do i = 1, nk
            ok = ok .and. rbuf(j * nk + i) == j * 100000 + i
        end do
    end do
    call check(ok, 'MPI_Allgather')

    rbuf = -1
    rbuf(me * nk + 1:me * nk + nk) = sbuf(1:nk)
    call MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, rbuf, nk, MPI_INTEGER, &
                       MPI_COMM_WORLD, ierr)
    ok = ierr == MPI_SUCCESS
    do j = 0, n - 1
        do i = 1, nk
            ok = ok .and. rbuf(j * nk + i) == j * 100000 + i
        end do
    end do
    call check(ok, 'MPI_Allgather in place')

    ! Alltoallv: c(me, j) = c(j, me) elements each way, blocks received in reverse order.
    do j = 0, n - 1
        scounts(j + 1) = 1 + mod(me + j, 3)
        sdispls(j + 1) = j * nk
        rdispls(j + 1) = (n - 1 - j) * nk
    end do
    rbuf = -1
    call MPI_Alltoallv(sbuf, scounts, sdispls, MPI_INTEGER, rbuf, scounts, rdispls, &
                       MPI_INTEGER, MPI_COMM_WORLD, ierr)
    ok = ierr == MPI_SUCCESS
    do j = 0, n - 1
        do i = 1, nk
            if (i <= scounts(j + 1)) then
                ok = ok .and. rbuf((n - 1 - j) * nk + i) == j * 100000 + me * 1000 + i
            else
                ok = ok .and. rbuf((n - 1 - j) * nk + i) == -1
            end if
        end do
    end do
    call check(ok, 'MPI_Alltoallv')

    do j = 0, n - 1
        do i = 1, nk
            ibuf(j * nk + i) = me + j + i
        end do
    end do
    rbuf = -1
    call MPI_Reduce_scatter_block(ibuf, rbuf, nk, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
    ok = ierr == MPI_SUCCESS
    do i = 1, nk
        ok = ok .and. rbuf(i) == n * (n - 1) / 2 + n * (me + i)
    end do
    call check(ok, 'MPI_Reduce_scatter_block')

    do i = 1, nk
        dv(i) = me + i * 0.5d0
    end do
    call MPI_Allreduce(dv, dr, nk, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
    ok = ierr == MPI_SUCCESS
    do i = 1, nk
        ok = ok .and. dr(i) == dble(n * (n - 1) / 2) + n * i * 0.5d0
    end do
    call check(ok, 'MPI_Allreduce MPI_SUM of MPI_DOUBLE_PRECISION')

    do i = 1, nk
        ibuf(i) = me * 3 + i
    end do
    call MPI_Allreduce(MPI_IN_PLACE, ibuf, nk, MPI_INTEGER, MPI_MAX, MPI_COMM_WORLD, ierr)
    ok = ierr == MPI_SUCCESS
    do i = 1, nk
        ok = ok .and. ibuf(i) == (n - 1) * 3 + i
    end do
    call check(ok, 'MPI_Allreduce in place MPI_MAX of MPI_INTEGER')

    rbuf = -1
    call MPI_Ialltoall(sbuf, nk, MPI_INTEGER, rbuf, nk, MPI_INTEGER, MPI_COMM_WORLD, req, ierr)
    call MPI_Wait(req, MPI_STATUS_IGNORE)
    ok = req == MPI_REQUEST_NULL
    do j = 0, n - 1
        do i = 1, nk
            ok = ok .and. rbuf(j * nk + i) == j * 100000 + me * 1000 + i
        end do
    end do
    call check(ok, 'MPI_Ialltoall + MPI_Wait')

    rbuf = -1
    dr = 0
    call MPI_Ialltoall(sbuf, nk, MPI_INTEGER, rbuf, nk, MPI_INTEGER, MPI_COMM_WORLD, reqs(1), ierr)
    call MPI_Iallreduce(dv, dr, nk, MPI_DOUBLE_PRECISION, MPI_MIN, MPI_COMM_WORLD, reqs(2), ierr)
    call MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE, ierr)
    ok = ierr == MPI_SUCCESS .and. all(reqs == MPI_REQUEST_NULL)
    do j = 0, n - 1
        do i = 1, nk
            ok = ok .and. rbuf(j * nk + i) == j * 100000 + me * 1000 + i
        end do
    end do
    do i = 1, nk
        ok = ok .and. dr(i) == i * 0.5d0
    end do
    call check(ok, 'MPI_Ialltoall + MPI_Iallreduce + MPI_Waitall')

    ! Communicators made from Fortran: teams split from the world's (the shim's
    ! info line counts them), ranks in MPI's order, an allreduce on each.
    call MPI_Comm_split(MPI_COMM_WORLD, mod(me, 2), -me, sub, ierr)
    call MPI_Comm_rank(sub, sme, ierr)
    call MPI_Comm_size(sub, sn, ierr)
    ok = ierr == MPI_SUCCESS .and. sme == (n - 1 - me) / 2 .and. sn == (n - mod(me, 2) + 1) / 2
    want = 0
    do j = mod(me, 2), n - 1, 2
        want = want + j
    end do
    call MPI_Allreduce(me, ssum, 1, MPI_INTEGER, MPI_SUM, sub, ierr)
    ok = ok .and. ierr == MPI_SUCCESS .and. ssum == want
    call MPI_Comm_dup(sub, dsub, ierr)
    call MPI_Allreduce(me, ssum, 1, MPI_INTEGER, MPI_SUM, dsub, ierr)
    ok = ok .and. ierr == MPI_SUCCESS .and. ssum == want
    call MPI_Comm_free(dsub, ierr)
    call MPI_Comm_free(sub, ierr)
    ok = ok .and. ierr == MPI_SUCCESS
    call check(ok, 'MPI_Comm_split + MPI_Comm_dup + MPI_Comm_free')

    ! MPI_Comm_create of world rank 0 alone.
    call MPI_Comm_group(MPI_COMM_WORLD, wg, ierr)
    ranks1(1) = 0
    call MPI_Group_incl(wg, 1, ranks1, eg, ierr)
    call MPI_Comm_create(MPI_COMM_WORLD, eg, evens, ierr)
    ok = ierr == MPI_SUCCESS .and. ((me == 0) .eqv. (evens /= MPI_COMM_NULL))
    if (me == 0) then
        call MPI_Allreduce(me + 5, ssum, 1, MPI_INTEGER, MPI_SUM, evens, ierr)
        ok = ok .and. ierr == MPI_SUCCESS .and. ssum == 5
        call MPI_Comm_free(evens, ierr)
    end if
    call MPI_Group_free(eg, ierr)
    call MPI_Group_free(wg, ierr)
    call check(ok, 'MPI_Comm_create')

    call MPI_Reduce(mine, totals, 2, MPI_INTEGER, MPI_SUM, 0, MPI_COMM_WORLD, ierr)
    if (me == 0) print '(a,i0,a,i0,a,i0,a)', 'shim_ftest (use mpi_f08) on ', n, ' ranks: ', &
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
            print '(a,i0,a,a)', 'shim_ftest08[', me, ']: FAIL ', what
        end if
    end subroutine check
end program shim_ftest08
