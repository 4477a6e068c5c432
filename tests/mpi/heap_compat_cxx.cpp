/*
 * An ordinary C++ MPI program (MPI's C API) under the PMPI shim's node heap
 * malloc (src/preload/heap_preload.c, docs/heap.md): operator new/delete,
 * new[]/delete[], std::vector growth, std::string and over-aligned new all
 * end in malloc & co; their blocks go through MPI_Alltoall/MPI_Allgather and
 * every element is checked. A large vector's data must be in the heap
 * (arcoll_heap_contains), or with HEAP_COMPAT_EXPECT=off not.
 * Last line on rank 0: "heap_compat_cxx: P passed, F failed"; exit 1 on any
 * failure.
 */
/* MPI's C API only: Open MPI's deprecated C++ bindings do not build with -Werror. */
#define OMPI_SKIP_MPICXX  1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "arcoll.h"

static int wrank, wsize, passed, failed;
static bool expect_heap;

static void check(bool ok, const std::string &what)
{
    if (ok) {
        passed++;
        return;
    }
    failed++;
    std::fprintf(stderr, "[rank %d] FAIL %s\n", wrank, what.c_str());
}

static void placed(const void *p, bool in_heap, const std::string &what)
{
    bool want = expect_heap && in_heap;

    check(p != nullptr && (arcoll_heap_contains(p) != 0) == want,
          what + (want ? " is in the node heap" : " is not in the node heap"));
}

/* Element i of what src sends dst in call: every element distinct. */
static double val(int call, int src, int dst, size_t i)
{
    return call * 1e9 + src * 1e6 + dst * 1e3 + static_cast<double>(i % 997) + 0.25;
}

struct Particle { /* 2 KiB: new of one is a heap block */
    double pos[128];
    double vel[128];
};

struct alignas(64) Cell { /* over-aligned: operator new(size_t, align_val_t) */
    double v[8];
    int id;
};

/* A vector grown by push_back to a few MB: each growth a new block. */
static void test_vector(int count)
{
    std::vector<double> send, recv;

    for (int j = 0; j < wsize; j++)
        for (int i = 0; i < count; i++)
            send.push_back(val(1, wrank, j, static_cast<size_t>(i)));
    placed(send.data(), true, "a grown vector's data");
    recv.resize(send.size(), -1.0);
    placed(recv.data(), true, "a resized vector's data");
    MPI_Alltoall(send.data(), count, MPI_DOUBLE, recv.data(), count, MPI_DOUBLE, MPI_COMM_WORLD);
    long bad = 0;
    for (int j = 0; j < wsize; j++)
        for (int i = 0; i < count; i++)
            bad += recv[static_cast<size_t>(j) * count + i] != val(1, j, wrank, i);
    check(bad == 0, "alltoall of vector<double> (" + std::to_string(count) +
                        " per peer): " + std::to_string(bad) + " wrong");
    send.clear();
    send.shrink_to_fit();
    recv.assign(recv.size() * 2, 0.0); /* grown again in place of the old */
    check(recv.size() == static_cast<size_t>(wsize) * count * 2 && recv.back() == 0.0,
          "a vector assigned twice its size");
}

static void test_new_delete()
{
    const int n = 64;
    Particle *p = new Particle;
    Particle *arr = new Particle[n];
    double *d = new double[100000];
    char *c = new char[100]; /* small: not in the heap */

    placed(p, true, "new Particle (2 KiB)");
    placed(arr, true, "new Particle[64]");
    placed(d, true, "new double[100000]");
    placed(c, false, "new char[100]");
    for (int i = 0; i < 128; i++)
        p->pos[i] = val(2, wrank, 0, static_cast<size_t>(i));
    for (int k = 0; k < n; k++)
        for (int i = 0; i < 128; i++)
            arr[k].vel[i] = val(3, wrank, k, static_cast<size_t>(i));
    for (int i = 0; i < 100000; i++)
        d[i] = i;
    std::memset(c, 'x', 100);
    /* The allgather of one Particle per rank, into a new[] array. */
    std::unique_ptr<Particle[]> all(new Particle[wsize]);
    MPI_Allgather(p, sizeof(Particle), MPI_BYTE, all.get(), sizeof(Particle), MPI_BYTE,
                  MPI_COMM_WORLD);
    long bad = 0;
    for (int r = 0; r < wsize; r++)
        for (int i = 0; i < 128; i++)
            bad += all[r].pos[i] != val(2, r, 0, i);
    for (int k = 0; k < n; k++)
        for (int i = 0; i < 128; i++)
            bad += arr[k].vel[i] != val(3, wrank, k, i);
    for (int i = 0; i < 100000; i++)
        bad += d[i] != i;
    for (int i = 0; i < 100; i++)
        bad += c[i] != 'x';
    check(bad == 0,
          "new/new[] blocks and an allgather of Particles: " + std::to_string(bad) + " wrong");
    delete p;
    delete[] arr;
    delete[] d;
    delete[] c;
}

static void test_string()
{
    std::string s = "r" + std::to_string(wrank) + ":"; /* short: inside the object */
    for (int i = 0; s.size() < 5000; i++)
        s += std::to_string(i) + ",";
    placed(s.data(), true, "a 5000-character std::string");
    /* Allgather the strings (all the same length: pad to 6000). */
    std::string pad = s;
    pad.resize(6000, '.');
    std::string all(6000 * static_cast<size_t>(wsize), '?');
    MPI_Allgather(pad.data(), 6000, MPI_CHAR, &all[0], 6000, MPI_CHAR, MPI_COMM_WORLD);
    long bad = 0;
    for (int r = 0; r < wsize; r++) {
        std::string want = "r" + std::to_string(r) + ":";
        for (int i = 0; want.size() < 5000; i++)
            want += std::to_string(i) + ",";
        want.resize(6000, '.');
        bad += all.compare(static_cast<size_t>(r) * 6000, 6000, want) != 0;
    }
    check(bad == 0, "allgather of std::strings: " + std::to_string(bad) + " ranks wrong");
}

static void test_aligned()
{
    Cell *one = new Cell;
    Cell *many = new Cell[1000]; /* 128 KB */
    std::vector<Cell> v(2000);

    check(reinterpret_cast<uintptr_t>(one) % 64 == 0, "new Cell is 64-byte aligned");
    check(reinterpret_cast<uintptr_t>(many) % 64 == 0, "new Cell[1000] is 64-byte aligned");
    check(reinterpret_cast<uintptr_t>(v.data()) % 64 == 0, "vector<Cell> is 64-byte aligned");
    placed(many, true, "new Cell[1000]");
    placed(v.data(), true, "vector<Cell>(2000)'s data");
    one->id = wrank;
    for (int k = 0; k < 1000; k++) {
        many[k].id = k;
        for (int i = 0; i < 8; i++)
            many[k].v[i] = val(4, wrank, k, static_cast<size_t>(i));
    }
    /* Alltoall of Cells: 1000 / wsize per peer (as bytes). */
    int per = 1000 / wsize;
    MPI_Alltoall(many, per * static_cast<int>(sizeof(Cell)), MPI_BYTE, v.data(),
                 per * static_cast<int>(sizeof(Cell)), MPI_BYTE, MPI_COMM_WORLD);
    long bad = one->id != wrank;
    for (int j = 0; j < wsize; j++)
        for (int k = 0; k < per; k++) {
            const Cell &c = v[static_cast<size_t>(j) * per + k];
            int src_k = wrank * per + k;
            bad += c.id != src_k;
            for (int i = 0; i < 8; i++)
                bad += c.v[i] != val(4, j, src_k, i);
        }
    check(bad == 0, "alltoall of over-aligned Cells: " + std::to_string(bad) + " wrong");
    delete one;
    delete[] many;
}

int main(int argc, char **argv)
{
    const char *e = std::getenv("HEAP_COMPAT_EXPECT");

    expect_heap = !(e != nullptr && std::strcmp(e, "off") == 0);
    /* Made before MPI_Init (the late-init program), used after it. */
    std::vector<double> early(100000, 1.5);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    placed(early.data(), true, "a vector made before MPI_Init");
    double sum = 0;
    for (double x : early)
        sum += x;
    check(sum == 150000.0, "a vector made before MPI_Init kept its values");
    test_new_delete();
    test_string();
    test_aligned();
    test_vector(512);                   /* 4 KiB per peer */
    test_vector((1 << 19) / wsize + 1); /* 4 MB in all: grown through 20 blocks */
    long mine[2] = {passed, failed}, all[2] = {0, 0};
    MPI_Allreduce(mine, all, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (wrank == 0)
        std::printf("heap_compat_cxx: %ld passed, %ld failed\n", all[0], all[1]);
    MPI_Finalize();
    return all[1] != 0;
}
