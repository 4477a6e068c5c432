! A Fortran MPI program (`use mpi`) under the PMPI shim's node heap malloc
! (src/preload/heap_preload.c, docs/heap.md): gfortran's ALLOCATE is malloc,
! DEALLOCATE free. ALLOCATABLE arrays of several sizes (small ones below the
! heap's 1 KiB, large ones in it), allocated before MPI_Init too, go through
! MPI_ALLTOALL and MPI_ALLGATHER, are checked element by element, then
! DEALLOCATEd and allocated again with another size, several times.
! Last line on rank 0: "heap_compat_f: P passed, F failed"; stop 1 on any
! failure.
program heap_compat_f
    use mpi
    implicit none
    integer, parameter :: sizes(6) = [4, 1000, 70000, 16, 250000, 3000]
    integer :: ierr, me, n, round, k, mine(2), totals(2)
    integer, allocatable :: early(:)
    real(8), allocatable :: s(:), r(:), g(:)

    ! Made before MPI_Init (a late-init program), checked after it.
    allocate(early(100000))
    early = [(k, k = 1, 100000)]
    call MPI_Init(ierr)
    call MPI_Comm_rank(MPI_COMM_WORLD, me, ierr)
    call MPI_Comm_size(MPI_COMM_WORLD, n, ierr)
    mine = 0
    call check(all(early == [(k, k = 1, 100000)]), 'an array allocated before MPI_Init')

    do round = 1, size(sizes)
        k = sizes(round)
        allocate(s(k * n), r(k * n), g(k))
        call fill_send(s, k, round)
        r = -1
        call MPI_Alltoall(s, k, MPI_DOUBLE_PRECISION, r, k, MPI_DOUBLE_PRECISION, &
                          MPI_COMM_WORLD, ierr)
        call check(ierr == MPI_SUCCESS .and. blocks_ok(r, k, round, me), 'MPI_ALLTOALL')
        g = s(1:k)
        r = -1
        call MPI_Allgather(g, k, MPI_DOUBLE_PRECISION, r, k, MPI_DOUBLE_PRECISION, &
                           MPI_COMM_WORLD, ierr)
        call check(ierr == MPI_SUCCESS .and. blocks_ok(r, k, round, 0), 'MPI_ALLGATHER')
        deallocate(s, r, g)
        ! The array from before MPI_Init, reallocated with another size.
        deallocate(early)
        allocate(early(sizes(round) * 3))
        early = me
        call check(all(early == me), 'an array reallocated')
    end do
    deallocate(early)

    call MPI_Allreduce(mine, totals, 2, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
    if (me == 0) print '(a,i0,a,i0,a)', 'heap_compat_f: ', totals(1), ' passed, ', &
        totals(2), ' failed'
    call MPI_Finalize(ierr)
    if (totals(2) /= 0) stop 1

contains

    ! Element i of the block from rank src to rank dst in round.
    real(8) function val(round, src, dst, i)
        integer, intent(in) :: round, src, dst, i
        val = round * 1d9 + src * 1d6 + dst * 1d3 + mod(i, 997) + 0.5d0
    end function val

    subroutine fill_send(s, k, round)
        real(8), intent(out) :: s(:)
        integer, intent(in) :: k, round
        integer :: i, j
        do j = 0, n - 1
            do i = 1, k
                s(j * k + i) = val(round, me, j, i)
            end do
        end do
    end subroutine fill_send

    ! Rank j's block for rank dest, from each j (alltoall: dest = me; allgather: rank j sent
    ! its block for rank 0 to everybody).
    logical function blocks_ok(r, k, round, dest)
        real(8), intent(in) :: r(:)
        integer, intent(in) :: k, round, dest
        integer :: i, j
        blocks_ok = .true.
        do j = 0, n - 1
            do i = 1, k
                blocks_ok = blocks_ok .and. r(j * k + i) == val(round, j, dest, i)
            end do
        end do
    end function blocks_ok

    subroutine check(good, what)
        logical, intent(in) :: good
        character(*), intent(in) :: what
        if (good) then
            mine(1) = mine(1) + 1
        else
            mine(2) = mine(2) + 1
            print '(a,i0,a,a,a,i0)', 'heap_compat_f[', me, ']: FAIL ', what, ' round ', round
        end if
    end subroutine check
end program heap_compat_f
