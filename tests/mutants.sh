#!/usr/bin/env bash
# Deliberately broken builds: each kind of check CI runs must be able to fail (tests/README.md,
# "Each check can fail"). For every mutant below, on a scratch copy of this tree: apply one
# small source change, rebuild (incremental), run the one check that must catch it, and expect
# that check to FAIL; then undo the change. Not part of make check (minutes, and the guests).
#   tests/mutants.sh [NAME...]     (default: all; MUT_DIR, default /tmp/arcoll-mutants)
# Each run starts from a fresh copy. Prints "mutant NAME: caught by CHECK (N s)" or "mutant
# NAME: MISSED by CHECK"; the last line "mutants: N caught, M missed, K broken" (broken: the
# change did not apply or did not build).
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
W=${MUT_DIR:-/tmp/arcoll-mutants}
caught=0
missed=0
broken=0

# NAME|FILE|PERL SUBSTITUTION (applied once)|CHECK (run in the copy; must fail)
MUTANTS=(
    # Recursive doubling/halving forget the extra ranks of a team that is not a power of two,
    # at 12 ranks only: a rank count no launcher test runs any more, the matrix does.
    "matrix|src/alg/sched/rd_sched.c|s/c->orphans = \(n & \(n - 1\)\) != 0;/c->orphans = (n & (n - 1)) != 0 \&\& n != 12;/|tests/integ/run.sh build sim-matrix"
    # A sender writes one fragment more than the lanes before any credit: it overwrites a lane
    # the receiver has not copied out (the copy path's flow control, docs/protocol.md §6).
    "lanes|src/engine/wire.h|s/    if \(k < lanes\)\n        return 1;/    if (k <= lanes)\n        return 1;/|tests/integ/run.sh build sim-matrix"
    # A call's deadline is ten times ARCOLL_TIMEOUT_MS: a stopped peer is reported too late.
    "phase-fault|src/engine/eng_call.c|s/\(uint64_t\)ctx->cfg\.timeout_ms \* 1000000ULL/(uint64_t)ctx->cfg.timeout_ms * 10000000ULL/|tests/integ/run.sh build phasefault-3-create-stop"
    # The signature of a call's arguments no longer depends on them: mismatches go unseen.
    "mismatch|src/dispatch/coll.c|s/(static uint64_t coll_sig\(const struct arcoll_team \*t, const coll_args_t \*a\)\n\{\n)/\$1    return (uint64_t)(t != NULL) + (a != NULL);\n/|tests/integ/run.sh build mpirun-3-vbad"
    # A rank that fails a call no longer tells its peers (failure word): they wait for it.
    "fail-word|src/engine/engine_check.c|s/    if \(t->fail_told /    if (1 \x7c\x7c t->fail_told /|tests/integ/run.sh build failtell-4"
    # A 0-byte call is a local no-op again: the 0-byte rank never learns of its mismatch.
    "empty-noop|src/dispatch/coll.c|s/    if \(empty\) \{\n/    if (empty) {\n        return ARCOLL_OK;\n/|tests/integ/run.sh build mpirun-3-vbad"
    # sh_co does not look for a peer that runs the call flat: it waits for it until the timeout.
    "shco-flat|src/alg/node/alg_sh_co.c|s/ \? ARCOLL_OK : coll_flat_check\(r\);/ ? ARCOLL_OK : ARCOLL_OK;/|tests/integ/run.sh build shco-3-check"
    # A failed zero-copy call no longer revokes its advertisements: a late sender writes into
    # the buffer of a call that has returned.
    "revoke|src/engine/zcopy.c|s/(static void zcopy_revoke\(coll_req_t \*r\)\n\{\n)/\$1    return;\n/|tests/integ/run.sh build latewrite-3-alltoall"
    # A failed zero-copy call whose buffer went by address in the node heap no longer revokes
    # it: a late sender memcpys into the buffer of a call that has returned.
    # A receiver stops waiting for a writer caught inside its copy at ARCOLL_TIMEOUT_MS: the
    # copy lands in the buffer of a call that has returned.
    "stall-wait|src/engine/zcopy.c|s/                until = 0;\n/                break;\n/|tests/integ/run.sh build stallwrite-3-heap-alltoallv"
    # A failed call no longer revokes the heap MR on verbs: a writer that had read the
    # advertisement before the revocation reached it writes into a returned buffer.
    "heapmr-revoke|src/engine/zmem.c|s/    if \(ref->hmr != NULL\) \{\n/    if (0) {\n/|env VMBED_ONLY=verbs_stallwrite tests/vm/run.sh build single"
    # The shim registers no progress callback with Open MPI: a healthy rank inside a barrier the
    # shim does not see never times out its call, and a rank that saw a failure waits for its word.
    "shim-opal-progress|src/mpi/arcoll_pmpi.c|s/    if \(fn != NULL && fn\(shim_opal_progress\) == 0\)/    if (fn == (void *)shim_opal_progress)/|tests/mpi/run.sh build shim-coll-4-nbfail"
    "heap-revoke|src/engine/zcopy.c|s/    if \(!r->rreg_valid && r->rheap\.kind != WIRE_KIND_HEAP\)/    if (!r->rreg_valid)/|tests/integ/run.sh build latewrite-3-heap-alltoallv"
    # An alltoallv sender takes the block coming back as agreement without reading its want
    # word: a disagreement in its direction only goes unseen at the sender.
    "want|src/engine/zcopy.c|s/return r->peers\[peer\]\.rx_want == want \? 1/return 1 ? 1/|tests/integ/run.sh build mpirun-3-vbad"
    # A held-back alltoallv advertisement (a copy pair both ways) is never written, even when
    # the peer's block does not come: a peer whose length put its block on the zero-copy path
    # waits for it, and the mismatch is found only at the timeout.
    "adv-late|src/engine/zcopy.c|s/    if \(!r->peers\[peer\]\.adv_owed \x7c\x7c r->polls < ZCOPY_ADV_LATE_POLLS\)\n        return 0;/    return 0;/|tests/integ/run.sh build mpirun-3-vbad"
    # A failed sh_co call no longer revokes its arrival: a late rank copies its share into the
    # buffers of a call that has returned.
    "shco-revoke|src/alg/node/alg_sh_co.c|s/(static void shco_revoke\(coll_req_t \*r\)\n\{\n)/\$1    return;\n/|tests/integ/run.sh build latewrite-3-shco-alltoall"
    # GONE notices are never sent: across the link a killed rank is seen only by the liveness
    # probe (0.5-0.6 s), and no node1 rank logs the notice.
    # Lazy wiring without the watch ring: a rank alone on its host that dies before its first
    # HELLO answer has no QP to probe, and the survivors wait for the timeout.
    "watch-ring|src/chan/verbs/verbs_wire.c|s/    vc->nring = 0;\n    if \(n < 2\)/    vc->nring = 0;\n    if (n < 1000000)/|env VMBED_ONLY=pair_fault_create_kill_lone tests/vm/run.sh build pair"
    "gone-notice|src/chan/verbs/verbs_wire.c|s/g\.dst = \(uint32_t\)r;/continue;/|env VMBED_ONLY=pair_fault_alltoall_kill tests/vm/run.sh build pair"
    # The RC QPs retry for ever on Soft-RoCE again (retry_cnt 7): the liveness probe to a dead
    # rank alone on its node never completes, and it is seen only at the timeout.
    "probe|src/chan/verbs/verbs_wire.c|s/a\.retry_cnt = 6;/a.retry_cnt = 7;/|env VMBED_ONLY=pair_fault_alltoall_kill_lone tests/vm/run.sh build pair"
    # Named segments are never unlinked: names stay behind in /dev/shm.
    "leak|src/chan/smp/smp_seg.c|s/if \(shm_unlink\(name\) != 0\)/if (0)/|tests/integ/run.sh build degraded-3-no-proc"
    # Large RDMA WRITEs land 8 bytes off: only the verbs data path has this line.
    "verbs-pair|src/chan/verbs/verbs_data.c|s/wr\.wr\.rdma\.remote_addr = raddr;/wr.wr.rdma.remote_addr = raddr + (len > 4096 ? 8 : 0);/|env VMBED_ONLY=pair_matrix tests/vm/run.sh build pair"
    # Under Slurm only, every rank believes it is rank 0.
    "slurm|bootstrap/boot_pmix.c|s/b->rank = \(int\)p->self\.rank;/b->rank = getenv(\"SLURM_JOB_ID\") != NULL ? 0 : (int)p->self.rank;/|tests/slurm/run.sh build srun-pmix-3-coll-test"
    # A tuning rule longer than the rule buffer overflows it (the length check comes after).
    "fuzz|src/config/tune.c|s/snprintf\(rule, sizeof\(rule\), \"%\.\*s\", \(int\)\(len < sizeof\(rule\) \? len : sizeof\(rule\) - 1\), p\);/memcpy(rule, p, len);\n        rule[len] = '\\\\0';/|make fuzz FUZZ_SECONDS=20"
    # One line formatted by hand.
    "format|src/util/log.c|s/\n    return /\n    return  /|make format-check"
)

mkdir -p "$W"
echo "mutants: copying $ROOT to $W"
rm -rf "$W" && mkdir -p "$W" || exit 1
# The tree as it is now (tracked files and new ones git does not ignore), without builds.
(cd "$ROOT" && git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$W") ||
    exit 1
cd "$W" || exit 1
# make format-check lists the files git knows.
git init -q && git add -A || exit 1
if ! make -j2 all >"$W/build.log" 2>&1; then
    echo "mutants: the unmutated copy does not build (see $W/build.log)"
    exit 1
fi
for m in "${MUTANTS[@]}"; do
    IFS='|' read -r name file subst check <<<"$m"
    if [ $# -gt 0 ] && [[ " $* " != *" $name "* ]]; then
        continue
    fi
    cp "$file" "$file.orig"
    perl -0pi -e "$subst" "$file"
    if cmp -s "$file" "$file.orig"; then
        echo "mutant $name: BROKEN (the change did not apply to $file)"
        broken=$((broken + 1))
        mv "$file.orig" "$file"
        touch "$file"
        continue
    fi
    t=$SECONDS
    if ! make -j2 all >"$W/mutant-$name.build.log" 2>&1; then
        echo "mutant $name: BROKEN (does not build; see $W/mutant-$name.build.log)"
        broken=$((broken + 1))
    elif bash -c "$check" >"$W/mutant-$name.log" 2>&1 ||
        grep -qE '^[a-z]+: 0 passed, 0 failed$' "$W/mutant-$name.log"; then
        if grep -qE '^[a-z]+: 0 passed, 0 failed$' "$W/mutant-$name.log"; then
            echo "mutant $name: BROKEN (the check ran no test: $check)"
            broken=$((broken + 1))
        else
            echo "mutant $name: MISSED by $check (see $W/mutant-$name.log)"
            missed=$((missed + 1))
        fi
    else
        echo "mutant $name: caught by $check ($((SECONDS - t)) s): $(grep -m1 -E '^FAIL|FAIL |failed|ERROR|error:' "$W/mutant-$name.log" | cut -c1-160)"
        caught=$((caught + 1))
    fi
    mv "$file.orig" "$file"
    touch "$file" # newer than the mutant's objects: the next build takes it
done
make -j2 all >/dev/null 2>&1
echo "mutants: $caught caught, $missed missed, $broken broken"
[ $missed -eq 0 ] && [ $broken -eq 0 ]
