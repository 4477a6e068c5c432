# arcoll: one Makefile for the library, tools, benchmark and tests.
#   make            library (shared + static), bench and test programs
#   make check      unit tests (cmocka), mpirun integration tests, verbs tests in qemu guests
#   make run        the main job: a short PAP-vs-Direct skew benchmark on 4 local ranks
#   make asan       everything under AddressSanitizer + UBSan, then its check
#   make fuzz       libFuzzer on the settings, tune and profile parsers (FUZZ_SECONDS each)
#   make install PREFIX=/usr/local
#   make deps       install missing Debian packages (as root)
#   make format / format-check

PREFIX ?= /usr/local
V ?= 0
Q := $(if $(filter 1,$(V)),,@)
BUILD ?= build
CC ?= gcc
PKGS := pmix hwloc libibverbs librdmacm
VERSION := 0.1.0
SOMAJOR := 0

OPT ?= -O2 -g
CFLAGS_BASE := -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -fPIC -fvisibility=hidden \
	-I. -Iinclude -Isrc
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS = $(shell pkg-config --libs $(PKGS) 2>/dev/null)
CFLAGS_ALL = $(CFLAGS_BASE) $(OPT) $(PKG_CFLAGS) $(EXTRA_CFLAGS)
LDLIBS_ALL = $(PKG_LIBS) -lrt -lpthread -lm $(EXTRA_LDFLAGS)

# The library's sources: one directory per layer (docs/architecture.md; scripts/layers.sh
# checks that each calls only the layers below it).
# The scale simulator's channel and driver (src/chan/sim) are a library of their own,
# libarcoll_sim.a, linked whole by arcoll-sim and the tests that run it (docs/scale.md).
# Every channel's settings (src/chan/*/*_opts.c) are libarcoll's, so that every program
# knows the whole ARCOLL_* table.
CHAN_OPTS_SRC := $(wildcard src/chan/*/*_opts.c)
SIM_SRC := $(filter-out $(CHAN_OPTS_SRC),$(wildcard src/chan/sim/*.c))
LIB_SRC := $(filter-out src/mem/heap_none.c $(SIM_SRC),$(wildcard src/util/*.c bootstrap/*.c \
	src/chan/*/*.c src/mem/*.c src/config/*.c src/engine/*.c src/alg/*/*.c src/dispatch/*.c \
	src/api/*.c))
SIMLIB := $(BUILD)/lib/libarcoll_sim.a
SIM_LINK = -Wl,--whole-archive $(SIMLIB) -Wl,--no-whole-archive
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
# libarcoll_nh.so: the same objects without the node heap's jemalloc (heap.o, whose
# initial-exec TLS marks a library STATIC_TLS) but src/mem/heap_none.c, for a library opened
# late with dlopen: the Open MPI component (docs/embedding.md, "The Open MPI component").
NH_OBJ := $(filter-out $(BUILD)/obj/src/mem/heap.o,$(LIB_OBJ)) $(BUILD)/obj/src/mem/heap_none.o
NH_SONAME := libarcoll_nh.so.$(SOMAJOR)
NH_SHLIB := $(BUILD)/lib/libarcoll_nh.so.$(VERSION)
FAULT_OBJ := $(LIB_SRC:%.c=$(BUILD)/fault/%.o)

SONAME := libarcoll.so.$(SOMAJOR)
SHLIB := $(BUILD)/lib/libarcoll.so.$(VERSION)
STLIB := $(BUILD)/lib/libarcoll.a
FAULTLIB := $(BUILD)/lib/libarcoll_fault.a

UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)
PROGS := $(BUILD)/bin/arcoll-bench $(BUILD)/bin/arcoll-sim $(BUILD)/bin/arcoll_info $(BUILD)/bin/arcoll-chanperf \
	$(BUILD)/bin/arcoll-pap-report $(BUILD)/tests/coll_test \
	$(BUILD)/tests/coll_test_fault $(BUILD)/tests/fork_test $(BUILD)/tests/tcp_launch \
	$(BUILD)/tests/heap_preload_test $(BUILD)/tests/sim_matrix

# The tests' support library (tests/lib): data patterns with their checks, the v-forms'
# counts, pass/fail counting; linked by tests, benchmarks and tools.
TL_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard tests/lib/*.c))
TL_LIB := $(BUILD)/tests/libtl.a

.PHONY: all check unit integ vm run asan install uninstall deps format format-check clean

all: $(SHLIB) $(STLIB) $(BUILD)/lib/libarcoll.so $(BUILD)/arcoll.pc $(PROGS) $(UNIT_BIN) \
	$(BUILD)/lib/libarcoll_heap.so $(BUILD)/lib/libarcoll_nh.so

# Objects depend on the headers they include, as the compiler lists them (-MMD: a .d file
# beside each object; -MP: a removed header is no error).
DEPFLAGS = -MMD -MP
$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(CFLAGS_ALL) $(DEPFLAGS) -c $< -o $@

# The same sources with test-only fault injection (ARCOLL_FAULT=...).
$(BUILD)/fault/%.o: %.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $< (faults)")
	$(Q)$(CC) $(CFLAGS_ALL) $(DEPFLAGS) -DARCOLL_FAULTS -c $< -o $@

-include $(shell find $(BUILD)/obj $(BUILD)/fault -name '*.d' 2>/dev/null)

# The node heap's allocator is Debian's jemalloc (libjemalloc-dev), linked into heap.c's one
# object whose symbols are then all made local but heap.c's own: libarcoll exports no malloc
# and changes no program's allocator by being linked (docs/heap.md).
JEMALLOC_A ?= $(shell pkg-config --variable=libdir jemalloc 2>/dev/null)/libjemalloc_pic.a
$(BUILD)/obj/src/mem/heap.o $(BUILD)/fault/src/mem/heap.o: $(BUILD)/%/src/mem/heap.o: \
		src/mem/heap.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $< (+ jemalloc, local)")
	$(Q)$(CC) $(CFLAGS_ALL) -MMD -MP -MF $(@:.o=.d) -MT $@ -c $< -o $@.own.o
	$(Q)nm -g --defined-only $@.own.o | awk '{print $$3}' > $@.keep
	$(Q)$(LD) -r -o $@.all.o $@.own.o $(JEMALLOC_A)
	$(Q)objcopy --keep-global-symbols=$@.keep $@.all.o $@
	$(Q)rm -f $@.own.o $@.all.o $@.keep

$(SHLIB): $(LIB_OBJ)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) -shared -Wl,-soname,$(SONAME) -o $@ $^ $(LDLIBS_ALL)

$(BUILD)/lib/libarcoll.so: $(SHLIB)
	$(Q)ln -sf libarcoll.so.$(VERSION) $(BUILD)/lib/$(SONAME)
	$(Q)ln -sf $(SONAME) $@

$(NH_SHLIB): $(NH_OBJ)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) -shared -Wl,-soname,$(NH_SONAME) -o $@ $^ $(LDLIBS_ALL)

$(BUILD)/lib/libarcoll_nh.so: $(NH_SHLIB)
	$(Q)ln -sf libarcoll_nh.so.$(VERSION) $(BUILD)/lib/$(NH_SONAME)
	$(Q)ln -sf $(NH_SONAME) $@

$(STLIB): $(LIB_OBJ)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  AR      $@")
	$(Q)rm -f $@ && ar rcs $@ $^

$(SIMLIB): $(SIM_SRC:%.c=$(BUILD)/obj/%.o)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  AR      $@")
	$(Q)rm -f $@ && ar rcs $@ $^

$(FAULTLIB): $(FAULT_OBJ)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  AR      $@")
	$(Q)rm -f $@ && ar rcs $@ $^

$(BUILD)/arcoll.pc: arcoll.pc.in
	@mkdir -p $(dir $@)
	$(Q)sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(VERSION)|g' $< > $@

# Programs link the shared library with an rpath to the build tree.
LINK_SHARED = -L$(BUILD)/lib -Wl,-rpath,$(abspath $(BUILD)/lib) -larcoll

# The preloadable malloc of the node heap (docs/heap.md): exports malloc & co, over libarcoll.
# The same code is in the PMPI shim, with ARCOLL_HEAP=auto and ARCOLL_HEAP_MIN=1k by default.
PRELOAD_SRC := src/preload/heap_preload.c
PRELOAD_DEP := $(PRELOAD_SRC) src/preload/heap_preload.h src/mem/heap.h include/arcoll.h \
	$(BUILD)/obj/src/util/size.o $(BUILD)/obj/src/mem/slot.o
PRELOAD_OBJ := $(BUILD)/obj/src/util/size.o $(BUILD)/obj/src/mem/slot.o
$(BUILD)/lib/libarcoll_heap.so: $(PRELOAD_DEP) $(BUILD)/lib/libarcoll.so
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(CFLAGS_ALL) -fvisibility=default -shared $(PRELOAD_SRC) $(PRELOAD_OBJ) -o $@ \
		$(LINK_SHARED) -ldl $(EXTRA_LDFLAGS)

BENCH_SRC := bench/arcoll_bench.c bench/bench_colls.c bench/bench_out.c bench/bench_opts.c \
	bench/bench_stats.c
$(BUILD)/bin/arcoll-bench: $(BENCH_SRC) bench/bench.h bench/bench_stats.h bench/bench_clock.h \
		tests/lib/tl.h $(TL_LIB) $(BUILD)/lib/libarcoll.so
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(CFLAGS_ALL) -fvisibility=default -Itests/lib $(BENCH_SRC) -o $@ $(TL_LIB) \
		$(LINK_SHARED) -lm

# The same benchmark with `mpi` as an algorithm (Open MPI's collectives under the same skew)
# and an MPI bootstrap; built only where mpicc exists (Debian: libopenmpi-dev).
MPICC ?= mpicc
BENCH_MPI := $(if $(shell command -v $(MPICC) 2>/dev/null),$(BUILD)/bin/arcoll-bench-mpi)
all: $(BENCH_MPI)

$(BUILD)/bin/arcoll-bench-mpi: $(BENCH_SRC) bench/bench.h bench/bench_stats.h \
		bench/bench_clock.h tests/lib/tl.h $(TL_LIB) $(BUILD)/lib/libarcoll.so
	@mkdir -p $(dir $@)
	$(Q)if command -v $(MPICC) >/dev/null 2>&1; then \
		$(if $(Q),echo "  LINK    $@";) \
		OMPI_CC=$(CC) $(MPICC) $(CFLAGS_ALL) -fvisibility=default -DARCOLL_BENCH_MPI -Itests/lib \
			$(BENCH_SRC) -o $@ $(TL_LIB) $(LINK_SHARED) -lm; \
	else echo "  SKIP    $@: no $(MPICC) (Debian package libopenmpi-dev)"; fi

# The decision layer the shim and the Open MPI component share (src/mpi/arcoll_mpi_common.c).
MPI_COMMON := src/mpi/arcoll_mpi_common.c src/mpi/arcoll_mpi_common.h

# Allocator compatibility under the shim's node heap (tests/mpi/run.sh, heap-compat-*): C
# (arcoll_heap_contains from libarcoll), the same program bringing its own malloc (Debian's
# libjemalloc.so, where it exists) and C++ (mpicxx, skipped without its compiler); the Fortran
# one is in SHIM_FTEST.
MPICXX ?= mpicxx
JEMALLOC_SO := $(wildcard $(shell pkg-config --variable=libdir jemalloc 2>/dev/null)/libjemalloc.so)
HEAP_COMPAT := $(BUILD)/tests/heap_compat_test $(BUILD)/tests/heap_compat_cxx \
	$(if $(JEMALLOC_SO),$(BUILD)/tests/heap_compat_jemalloc)

# The PMPI shim: an unmodified MPI program's collectives (C and Fortran) on arcoll under
# LD_PRELOAD (docs/embedding.md); its test program and latency benchmark. Only where mpicc
# exists, like arcoll-bench-mpi.
SHIM := $(if $(BENCH_MPI),$(BUILD)/lib/libarcoll_mpi.so $(BUILD)/tests/shim_test \
	$(BUILD)/tests/shim_coll_test $(BUILD)/tests/shim_split_test $(BUILD)/tests/shim_a2av_test \
	$(BUILD)/tests/shim_nb_test $(BUILD)/tests/shim_soak_test $(HEAP_COMPAT) \
	$(BUILD)/bin/arcoll-mpi-lat $(BUILD)/bin/arcoll-transpose)
all: $(SHIM)

# The shim carries the node heap's malloc (ARCOLL_HEAP=auto: only in MPI ranks, blocks of 1 KiB
# or more): one preloaded library is the whole fast path (docs/heap.md).
$(BUILD)/lib/libarcoll_mpi.so: src/mpi/arcoll_pmpi.c src/mpi/pmpi_fortran.c src/mpi/pmpi_int.h \
		$(MPI_COMMON) include/arcoll_mpi.h $(PRELOAD_DEP) $(BUILD)/lib/libarcoll.so
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)OMPI_CC=$(CC) $(MPICC) $(CFLAGS_ALL) -fvisibility=default -shared $< \
		src/mpi/pmpi_fortran.c src/mpi/arcoll_mpi_common.c -DPRE_DEF_MODE='"auto"' \
		-DPRE_DEF_MIN=1024 $(PRELOAD_SRC) $(PRELOAD_OBJ) -o $@ $(LINK_SHARED) -ldl

# The MPI test programs take their data patterns and verdicts from tests/lib (plain C).
# -rdynamic: ARCOLL_PROFILE names the test's functions as call sites.
$(BUILD)/tests/shim_test: tests/mpi/shim_test.c include/arcoll_mpi.h tests/lib/tl.h $(TL_LIB)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)OMPI_CC=$(CC) $(MPICC) $(CFLAGS_ALL) -Itests/lib -rdynamic $< -o $@ $(TL_LIB)

$(BUILD)/tests/shim_coll_test $(BUILD)/tests/shim_split_test $(BUILD)/tests/shim_soak_test: \
		$(BUILD)/tests/%: tests/mpi/%.c include/arcoll_mpi.h tests/lib/tl.h $(TL_LIB)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)OMPI_CC=$(CC) $(MPICC) $(CFLAGS_ALL) -Itests/lib $< -o $@ $(TL_LIB)

# LD_PRELOAD into test ranks: a seccomp filter or a non-dumpable process without
# CAP_SYS_PTRACE, as container runtimes make (tests/integ/degrade_preload.c).
$(BUILD)/tests/libdegrade.so: tests/integ/degrade_preload.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(CFLAGS_ALL) -fPIC -shared $< -o $@
all: $(BUILD)/tests/libdegrade.so

# Allocator compatibility under the shim's node heap (HEAP_COMPAT, with the shim's programs).
HEAP_COMPAT_DEP := tests/mpi/heap_compat_test.c include/arcoll.h tests/lib/tl.h $(TL_LIB) \
	$(BUILD)/lib/libarcoll.so

$(BUILD)/tests/heap_compat_test: $(HEAP_COMPAT_DEP)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)OMPI_CC=$(CC) $(MPICC) $(CFLAGS_ALL) -Itests/lib -pthread $< -o $@ $(TL_LIB) $(LINK_SHARED)

$(BUILD)/tests/heap_compat_jemalloc: $(HEAP_COMPAT_DEP)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LINK    $@ (-ljemalloc)")
	$(Q)OMPI_CC=$(CC) $(MPICC) $(CFLAGS_ALL) -Itests/lib -pthread -DHEAP_COMPAT_JEMALLOC $< -o $@ \
		-ljemalloc $(TL_LIB) $(LINK_SHARED)

$(BUILD)/tests/heap_compat_cxx: tests/mpi/heap_compat_cxx.cpp include/arcoll.h $(BUILD)/lib/libarcoll.so
	@mkdir -p $(dir $@)
	$(Q)if cxx=$$($(MPICXX) --showme:command 2>/dev/null) && command -v $$cxx >/dev/null; then \
		$(if $(Q),echo "  LINK    $@";) \
		$(MPICXX) -std=c++17 $(OPT) -Wall -Wextra -Werror -Iinclude $(EXTRA_CFLAGS) $< -o $@ \
			$(LINK_SHARED) $(EXTRA_LDFLAGS); \
	else echo "  SKIP    $@: no $(MPICXX) or its C++ compiler (Debian package g++)"; fi

# Plain MPI (no arcoll header): many nonblocking calls in flight, arcoll's and MPI's mixed.
$(BUILD)/tests/shim_nb_test: tests/mpi/shim_nb_test.c tests/lib/tl.h $(TL_LIB)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)OMPI_CC=$(CC) $(MPICC) $(CFLAGS_ALL) -Itests/lib $< -o $@ $(TL_LIB)

# Plain MPI (no arcoll header): run.sh compares its output with and without the shim.
$(BUILD)/tests/shim_a2av_test: tests/mpi/shim_a2av_test.c tests/lib/tl.h $(TL_LIB)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)OMPI_CC=$(CC) $(MPICC) $(CFLAGS_ALL) -Itests/lib $< -o $@ $(TL_LIB)

# Fortran programs through the shim (`use mpi` and `use mpi_f08`), where mpifort and the
# compiler it wraps exist (Debian: gfortran besides libopenmpi-dev); tests/mpi/run.sh says
# so when they are missing.
MPIFC ?= mpifort
SHIM_FTEST := $(if $(SHIM),$(BUILD)/tests/shim_ftest $(BUILD)/tests/shim_ftest08 \
	$(BUILD)/tests/heap_compat_f)
all: $(SHIM_FTEST)

$(SHIM_FTEST): $(BUILD)/tests/%: tests/mpi/%.f90
	@mkdir -p $(dir $@)
	$(Q)if fc=$$($(MPIFC) --showme:command 2>/dev/null) && command -v $$fc >/dev/null; then \
		$(if $(Q),echo "  FC      $@";) \
		$(MPIFC) -O1 -g -Wall -Werror $< -o $@; \
	else echo "  SKIP    $@: no $(MPIFC) or its Fortran compiler (Debian package gfortran)"; fi

$(BUILD)/bin/arcoll-mpi-lat: bench/arcoll_mpi_lat.c bench/bench_stats.c bench/bench_stats.h bench/bench_clock.h bench/bench_shim.h \
		include/arcoll_mpi.h tests/lib/tl.h $(TL_LIB)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)OMPI_CC=$(CC) $(MPICC) $(CFLAGS_ALL) -Itests/lib $< bench/bench_stats.c -o $@ $(TL_LIB) -lm

# An FFT-transpose step (pack, MPI_Alltoall, unpack) on fresh buffers, shim vs PMPI.
$(BUILD)/bin/arcoll-transpose: bench/arcoll_transpose.c bench/bench_clock.h bench/bench_shim.h include/arcoll_mpi.h
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)OMPI_CC=$(CC) $(MPICC) $(CFLAGS_ALL) $< -o $@

# The Open MPI coll component (docs/embedding.md, "The Open MPI component"): arcoll selected
# per communicator by Open MPI itself, with the shim's decision layer. Built with Open MPI's
# internal headers (Debian: libopenmpi-dev ships them), for the release they belong to; the
# component refuses any other at run time. make install puts it into $(PREFIX)/lib/openmpi.
# It links libarcoll_nh.so (no jemalloc, hence no static TLS for Open MPI's late dlopen); a
# libarcoll.so loaded at start (LD_PRELOAD=libarcoll_heap.so) comes first in symbol lookup.
OMPI_INC ?= $(firstword $(shell $(MPICC) --showme:incdirs 2>/dev/null))
OMPI_LIBDIR ?= $(firstword $(shell $(MPICC) --showme:libdirs 2>/dev/null))
OMPI_COMPONENT := $(if $(OMPI_INC),$(if $(wildcard $(OMPI_INC)/openmpi/ompi/mca/coll/coll.h),\
	$(BUILD)/lib/openmpi/mca_coll_arcoll.so))
OMPI_CTEST := $(if $(OMPI_COMPONENT),$(BUILD)/tests/ompi_coll_test)
.PHONY: ompi-component-skip install-ompi-component uninstall-ompi-component
all: $(or $(OMPI_COMPONENT),ompi-component-skip) $(OMPI_CTEST)

ompi-component-skip:
	@echo "  SKIP    mca_coll_arcoll.so: no Open MPI internal headers (ompi/mca/coll/coll.h; Debian package libopenmpi-dev)"

$(BUILD)/lib/openmpi/mca_coll_arcoll.so: src/mpi/ompi/coll_arcoll.c $(MPI_COMMON) \
		include/arcoll_mpi.h $(BUILD)/lib/libarcoll_nh.so
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(CFLAGS_ALL) -isystem $(OMPI_INC) -isystem $(OMPI_INC)/openmpi -shared $< \
		src/mpi/arcoll_mpi_common.c -o $@ -L$(OMPI_LIBDIR) -lmpi -lopen-pal \
		-L$(BUILD)/lib -Wl,-rpath,$(abspath $(BUILD)/lib) -Wl,-rpath,$(PREFIX)/lib -larcoll_nh \
		-Wl,-z,defs

# Plain MPI (no arcoll header): every served collective through the component (threads in
# its MPI_THREAD_MULTIPLE mode).
$(BUILD)/tests/ompi_coll_test: tests/mpi/ompi_coll_test.c include/arcoll_mpi.h tests/lib/tl.h \
		$(TL_LIB)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)OMPI_CC=$(CC) $(MPICC) $(CFLAGS_ALL) -Itests/lib -pthread $< -o $@ $(TL_LIB)

# Fortran through `include 'mpif.h'` (the `use mpi` and `use mpi_f08` programs are the shim's).
OMPI_FTEST := $(if $(and $(OMPI_COMPONENT),$(SHIM_FTEST)),$(BUILD)/tests/ompi_ftest_h)
all: $(OMPI_FTEST)

$(BUILD)/tests/ompi_ftest_h: tests/mpi/ompi_ftest_h.f90
	@mkdir -p $(dir $@)
	$(Q)if fc=$$($(MPIFC) --showme:command 2>/dev/null) && command -v $$fc >/dev/null; then \
		$(if $(Q),echo "  FC      $@";) \
		$(MPIFC) -O1 -g -Wall -Werror $< -o $@; \
	else echo "  SKIP    $@: no $(MPIFC) or its Fortran compiler (Debian package gfortran)"; fi

# arcoll-ompi: the component route's one switch, a per-rank wrapper that sets the component
# path and preloads the node heap (tools/arcoll-ompi.in); the build's copy points at the build.
# $(call ompi_wrap,LIBDIR,OUT): the wrapper for libraries installed in LIBDIR.
ompi_wrap = sed -e 's|@LIBDIR@|$(1)|' -e 's|@OMPI_COMPONENTS@|$(OMPI_LIBDIR)/openmpi3|' \
	tools/arcoll-ompi.in >$(2) && chmod 755 $(2)
OMPI_WRAP := $(if $(OMPI_COMPONENT),$(BUILD)/bin/arcoll-ompi)
all: $(OMPI_WRAP)
$(BUILD)/bin/arcoll-ompi: tools/arcoll-ompi.in
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  GEN     $@")
	$(Q)$(call ompi_wrap,$(abspath $(BUILD))/lib,$@)

install: install-ompi-component
install-ompi-component: all
	$(if $(OMPI_COMPONENT),install -d $(DESTDIR)$(PREFIX)/lib/openmpi $(DESTDIR)$(PREFIX)/bin)
	$(if $(OMPI_COMPONENT),install -m 755 $(OMPI_COMPONENT) $(DESTDIR)$(PREFIX)/lib/openmpi/)
	$(if $(OMPI_COMPONENT),$(call ompi_wrap,$(PREFIX)/lib,$(DESTDIR)$(PREFIX)/bin/arcoll-ompi))

uninstall: uninstall-ompi-component
uninstall-ompi-component:
	rm -f $(DESTDIR)$(PREFIX)/lib/openmpi/mca_coll_arcoll.so $(DESTDIR)$(PREFIX)/bin/arcoll-ompi

# A toy MPI channel embedding arcoll through the public API (docs/embedding.md).
EXAMPLES := $(BUILD)/examples/oob_channel
all: $(EXAMPLES)

$(BUILD)/examples/%: examples/%.c $(BUILD)/lib/libarcoll.so
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(CFLAGS_ALL) $< -o $@ $(LINK_SHARED)

# Channel-level latency/bandwidth (internal API, hence the static library).
$(BUILD)/bin/arcoll-chanperf: bench/arcoll_chanperf.c bench/bench_stats.c bench/bench_stats.h $(STLIB)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(CFLAGS_ALL) $< bench/bench_stats.c -o $@ $(STLIB) $(LDLIBS_ALL)

# The scale simulator (docs/scale.md): its driver and model channel are internal (src/chan/sim).
$(BUILD)/bin/arcoll-sim: tools/arcoll_sim.c tests/lib/tl.h $(TL_LIB) $(SIMLIB) $(STLIB)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(CFLAGS_ALL) -Itests/lib $< -o $@ $(TL_LIB) $(SIM_LINK) $(STLIB) $(LDLIBS_ALL)

$(BUILD)/bin/arcoll_info: tools/arcoll_info.c $(STLIB)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(CFLAGS_ALL) $< -o $@ $(STLIB) $(LDLIBS_ALL)

# Summary of an ARCOLL_PROFILE run (docs/profiling.md); its arithmetic is src/api/pap_stats.c,
# its reader tools/pap_report.c (which the fuzz harness fuzz_profile calls too).
$(BUILD)/bin/arcoll-pap-report: tools/arcoll_pap_report.c tools/pap_report.c tools/pap_report.h \
		$(STLIB)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(CFLAGS_ALL) $(filter %.c,$^) -o $@ $(STLIB) $(LDLIBS_ALL)

# coll_test's objects (tests/integ/coll_test.h), linked by coll_test (its main in
# coll_test_main.c), coll_test_fault, fork_test and tcp_launch; with tests/lib (TL_LIB).
COLL_TEST_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,tests/integ/coll_test.c tests/integ/coll_more.c \
	tests/integ/coll_heapmr.c)
INTEG_OBJ := $(COLL_TEST_OBJ) $(patsubst %.c,$(BUILD)/obj/%.o,tests/integ/coll_test_main.c \
	tests/integ/fork_test.c tests/integ/shco_test.c tests/integ/tcp_launch.c)
$(INTEG_OBJ): CFLAGS_ALL += -Itests/lib
$(BUILD)/tests/coll_test: $(COLL_TEST_OBJ) $(BUILD)/obj/tests/integ/coll_test_main.o $(TL_LIB) \
		$(BUILD)/lib/libarcoll.so
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(CFLAGS_ALL) $(filter %.o,$^) -o $@ $(TL_LIB) $(LINK_SHARED)

$(TL_LIB): $(TL_OBJ)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  AR      $@")
	$(Q)rm -f $@ && ar rcs $@ $^

# The algorithm matrix in one process (tests/matrix/sim_matrix.c): every algorithm of the list
# (src/config/algs.h) x the collectives it serves x sizes x team shapes over the simulated channel.
$(BUILD)/tests/sim_matrix: tests/matrix/sim_matrix.c $(TL_LIB) $(SIMLIB) $(STLIB)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(CFLAGS_ALL) -Itests/lib $< -o $@ $(TL_LIB) $(SIM_LINK) $(STLIB) $(LDLIBS_ALL)

# libarcoll_heap.so's malloc under LD_PRELOAD (tests/integ/run.sh runs it so).
$(BUILD)/tests/heap_preload_test: tests/integ/heap_preload_test.c $(BUILD)/lib/libarcoll.so
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(CFLAGS_ALL) $< -o $@ $(LINK_SHARED)

# The same test driven by forked ranks and caller-supplied bootstrap callbacks.
# Static: its sh_co modes register a same-address region (mem/region.h, internal).
$(BUILD)/tests/fork_test: $(BUILD)/obj/tests/integ/fork_test.o $(BUILD)/obj/tests/integ/shco_test.o \
		$(COLL_TEST_OBJ) $(TL_LIB) $(STLIB)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(CFLAGS_ALL) $(filter %.o,$^) -o $@ $(TL_LIB) $(STLIB) $(LDLIBS_ALL)

# coll_test across hosts: one launcher per node, bootstrap callbacks over TCP.
$(BUILD)/tests/tcp_launch: $(BUILD)/obj/tests/integ/tcp_launch.o $(COLL_TEST_OBJ) $(TL_LIB) \
		$(BUILD)/lib/libarcoll.so
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(CFLAGS_ALL) $(filter %.o,$^) -o $@ $(TL_LIB) $(LINK_SHARED) -lpthread

$(BUILD)/tests/coll_test_fault: $(COLL_TEST_OBJ) $(BUILD)/obj/tests/integ/coll_test_main.o \
		$(TL_LIB) $(FAULTLIB)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(CFLAGS_ALL) $(filter %.o,$^) -o $@ $(TL_LIB) $(FAULTLIB) $(LDLIBS_ALL)

# The benchmark's arithmetic, tested apart from any communication.
$(BUILD)/tests/test_bench_stats: tests/unit/test_bench_stats.c bench/bench_stats.c \
		bench/bench_stats.h
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(CFLAGS_ALL) $(shell pkg-config --cflags cmocka) $< bench/bench_stats.c -o $@ \
		$(shell pkg-config --libs cmocka) -lm $(EXTRA_LDFLAGS)

# Unit tests see the internals: they link the static library.
$(BUILD)/tests/test_%: tests/unit/test_%.c $(wildcard tests/unit/*.h) $(SIMLIB) $(STLIB)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(CFLAGS_ALL) $(shell pkg-config --cflags cmocka) $< -o $@ $(SIM_LINK) $(STLIB) \
		$(shell pkg-config --libs cmocka) $(LDLIBS_ALL)

# check and run install missing Debian packages first (as root), then build.
check:
	@scripts/install-deps.sh
	@$(MAKE) --no-print-directory all
	@tests/check.sh $(BUILD)

unit: all
	@tests/run-unit.sh $(BUILD)

integ: all
	@tests/integ/run.sh $(BUILD)

# Only the embedding tests (example channel, PMPI shim), or only srun --mpi=pmix.
.PHONY: mpi slurm
mpi: all
	@tests/mpi/run.sh $(BUILD)

slurm: all
	@tests/slurm/run.sh $(BUILD)

# The soak test (tests/mpi/soak.sh): SOAK_SECONDS of random jobs through the PMPI shim, with
# faults injected in some; not part of make check (which runs a 2-minute version of it).
.PHONY: soak
soak: all
	@tests/mpi/soak.sh $(BUILD) $(or $(SOAK_SECONDS),600)

# Only the Soft-RoCE guests: make vm [VM=single|pair|all]
vm: all
	@tests/vm/run.sh $(BUILD) $(or $(VM),all)

run:
	@scripts/install-deps.sh
	@$(MAKE) --no-print-directory all
	@bench/run-main.sh $(BUILD)

# The sanitizer build runs the unit tests and a subset of integ and mpi (TEST_SET=asan: every
# sim-* test, one launcher test per family at 2-4 ranks, a shim smoke set; each runner lists
# its subset at its top); not the Soft-RoCE guests (VMBED=0) nor Slurm (SLURMBED=0). make check
# runs everything without the sanitizer; what the subset leaves out and what still covers it:
# tests/README.md, "Time budget". The build uses every core (make check's own build is serial).
ASAN_MAKE = $(MAKE) BUILD=build-asan OPT="-O1 -g -fno-omit-frame-pointer" \
	EXTRA_CFLAGS="-fsanitize=address,undefined -fno-sanitize-recover=undefined" \
	EXTRA_LDFLAGS="-fsanitize=address,undefined"
asan:
	$(ASAN_MAKE) -j$(shell nproc 2>/dev/null || echo 2) all
	TEST_SET=asan VMBED=0 SLURMBED=0 MATRIX_COMBOS=1 INTEG_SKEW_CALLS=100 INTEG_VSKEW_CALLS=100 INTEG_CRASH_RUNS=20 \
		ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS=suppressions=$(abspath tests/lsan.supp) \
		UBSAN_OPTIONS=print_stacktrace=1 $(ASAN_MAKE) check

# libFuzzer harnesses of the parsers of outside input (tests/fuzz/README.md): built with clang
# and their own objects under $(BUILD)/fuzz, each run FUZZ_SECONDS from its seed corpus
# (tests/fuzz/corpus/NAME); a crash, leak or sanitizer report fails. Skipped with a notice
# where clang or its fuzzer runtime is missing.
FUZZ_CC ?= clang-14
FUZZ_SECONDS ?= 20
FUZZ_NAMES := config tune profile
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=undefined
FUZZ_CFLAGS = $(CFLAGS_BASE) -O1 -g -fno-omit-frame-pointer $(FUZZ_SAN)
FUZZ_LIB_SRC := src/config/config.c src/config/algs.c src/util/size.c src/config/tune.c src/util/log.c src/util/textio.c \
	src/api/pap_stats.c $(CHAN_OPTS_SRC)
FUZZ_OBJ := $(FUZZ_LIB_SRC:%.c=$(BUILD)/fuzz/obj/%.o)
FUZZ_BIN := $(FUZZ_NAMES:%=$(BUILD)/fuzz/fuzz_%)
.SECONDARY: $(FUZZ_OBJ)
# Longest input per harness: above the line and value limits they test.
FUZZ_LEN_config := 1024
FUZZ_LEN_tune := 20000
FUZZ_LEN_profile := 16384
.PHONY: fuzz fuzz-run

fuzz:
	@mkdir -p $(BUILD)/fuzz
	@if ! command -v $(FUZZ_CC) >/dev/null 2>&1; then \
		echo "fuzz: skipped: no $(FUZZ_CC) (Debian package clang-14)"; \
	elif ! printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return 0; }\n' | \
		$(FUZZ_CC) -x c - -fsanitize=fuzzer,address,undefined -o $(BUILD)/fuzz/probe \
		>/dev/null 2>&1; then \
		echo "fuzz: skipped: $(FUZZ_CC) cannot link -fsanitize=fuzzer (Debian package libclang-rt-14-dev)"; \
	else $(MAKE) --no-print-directory fuzz-run; fi

# The harnesses run side by side (one process each, the host's cores shared), each for
# FUZZ_SECONDS of wall time; every log is read after all have ended.
fuzz-run: $(FUZZ_BIN)
	$(Q)pids=; for f in $(FUZZ_NAMES); do \
		mkdir -p $(BUILD)/fuzz/corpus-$$f; \
		echo "  FUZZ    $$f ($(FUZZ_SECONDS) s)"; \
		$(BUILD)/fuzz/fuzz_$$f -max_total_time=$(FUZZ_SECONDS) -max_len=$(FUZZ_LEN_$$f) \
			-timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
			-artifact_prefix=$(BUILD)/fuzz/fuzz_$$f- $(BUILD)/fuzz/corpus-$$f \
			tests/fuzz/corpus/$$f >$(BUILD)/fuzz/fuzz_$$f.log 2>&1 & \
		pids="$$pids $$f:$$!"; \
	done; \
	bad=0; for p in $$pids; do \
		f=$${p%%:*}; log=$(BUILD)/fuzz/fuzz_$$f.log; \
		if wait $${p#*:} && grep -q '^stat::number_of_executed_units' $$log; then \
			echo "fuzz: $$f: $$(sed -n 's/^stat::number_of_executed_units: *//p' $$log) runs, ok"; \
		else tail -n 40 $$log; echo "fuzz: $$f failed (log: $$log)"; bad=1; fi; \
	done; \
	exit $$bad

$(BUILD)/fuzz/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $< (fuzz)")
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) $(DEPFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@

-include $(shell find $(BUILD)/fuzz/obj -name '*.d' 2>/dev/null)

# fuzz_profile calls arcoll-pap-report's reader (tools/pap_report.c), compiled as a fuzz object.
FUZZ_OBJ_profile := $(BUILD)/fuzz/obj/tools/pap_report.o
.SECONDARY: $(FUZZ_OBJ_profile)
$(BUILD)/fuzz/fuzz_profile: $(FUZZ_OBJ_profile) tools/pap_report.h

$(BUILD)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_OBJ)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer $(filter %.c %.o,$^) -o $@ -lm

install: all
	install -d $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/bin \
		$(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 644 include/arcoll.h $(DESTDIR)$(PREFIX)/include/
	install -m 755 $(SHLIB) $(DESTDIR)$(PREFIX)/lib/
	ln -sf libarcoll.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(PREFIX)/lib/libarcoll.so
	install -m 755 $(NH_SHLIB) $(DESTDIR)$(PREFIX)/lib/
	ln -sf libarcoll_nh.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/$(NH_SONAME)
	install -m 644 $(STLIB) $(DESTDIR)$(PREFIX)/lib/
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(VERSION)|g' arcoll.pc.in \
		> $(DESTDIR)$(PREFIX)/lib/pkgconfig/arcoll.pc
	install -m 755 $(BUILD)/bin/arcoll-bench $(BUILD)/bin/arcoll_info $(BUILD)/bin/arcoll-pap-report \
		$(DESTDIR)$(PREFIX)/bin/
	install -m 644 include/arcoll_mpi.h $(DESTDIR)$(PREFIX)/include/
	$(if $(SHIM),install -m 755 $(BUILD)/lib/libarcoll_mpi.so $(DESTDIR)$(PREFIX)/lib/)
	install -m 755 $(BUILD)/lib/libarcoll_heap.so $(DESTDIR)$(PREFIX)/lib/

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/include/arcoll.h $(DESTDIR)$(PREFIX)/include/arcoll_mpi.h \
		$(DESTDIR)$(PREFIX)/lib/libarcoll.* $(DESTDIR)$(PREFIX)/lib/libarcoll_nh.so.* \
		$(DESTDIR)$(PREFIX)/lib/libarcoll_mpi.so \
		$(DESTDIR)$(PREFIX)/lib/libarcoll_heap.so \
		$(DESTDIR)$(PREFIX)/lib/pkgconfig/arcoll.pc $(DESTDIR)$(PREFIX)/bin/arcoll-bench \
		$(DESTDIR)$(PREFIX)/bin/arcoll_info $(DESTDIR)$(PREFIX)/bin/arcoll-pap-report

deps:
	@scripts/install-deps.sh

FORMAT_FILES = $(shell git ls-files '*.c' '*.h' 2>/dev/null)
format:
	clang-format -i $(FORMAT_FILES)

format-check:
	clang-format --dry-run --Werror $(FORMAT_FILES)

clean:
	rm -rf build build-asan
