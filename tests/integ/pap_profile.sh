#!/usr/bin/env bash
# The PAP profiler end to end (docs/profiling.md): coll_test runs under
# ARCOLL_PROFILE, arcoll-pap-report on their files, and the report's refusal
# of missing, truncated and inconsistent files.
#   - late: the last rank is delayed before every call, so it must dominate
#     the arrivals and the imbalance must be large; without delays it must
#     be several times smaller.
#   - clock_skew (fault build): ranks' clocks are shifted by milliseconds and
#     drift; the estimated offsets must undo it.
#   - sub-teams, nonblocking and failed calls, a singleton, forked ranks with
#     callback bootstrap, an unwritable file, ARCOLL_PROFILE on some ranks only.
# Usage: tests/integ/pap_profile.sh BUILD_DIR; prints "pap-profile: N passed, N failed".
set -u
B=${1:-build}
T=$B/tests
REPORT=$B/bin/arcoll-pap-report
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
MPIRUN="mpirun --oversubscribe"
pass=0
fail=0

ok() {
    pass=$((pass + 1))
    echo "PASS $1"
}

ko() {
    fail=$((fail + 1))
    echo "FAIL $1: $2"
    [ -f "$D/last.out" ] && sed 's/^/    /' "$D/last.out" | tail -n 30
}

# run OUT CMD...: the command's output in OUT; true if it passed ("0 failed").
run() {
    local out=$1
    shift
    timeout 300 "$@" >"$out" 2>&1 && grep -q " 0 failed" "$out"
}

# report PREFIX: arcoll-pap-report's output in $D/last.out; its exit status.
report() {
    timeout 60 "$REPORT" "$1" >"$D/last.out" 2>&1
}

# Columns of the call-site rows with at least 100 calls: avg-case factor,
# worst-case factor, d_bar (us), theta (us).
site_rows() {
    awk '/^collective +call site/ {t = 1; next} t && NF == 0 {exit}
         t && $3 >= 100 {print $5, $6, $7, $8}' "$D/last.out"
}

# Rank R's row of the per-rank table: lateness (us), share of calls it arrived last (%).
rank_row() {
    awk -v r="$1" '/^per rank/ {t = 1; next} t && $1 == r {sub("%", "", $4); print $3, $4}' \
        "$D/last.out"
}

# The last rank must arrive last in most calls, and later than the mean. Its mean lateness
# is not required to be the largest: with 4 ranks on 2 loaded cores a descheduled rank can
# arrive later on average while the delayed one is still the last in most calls (seen: 86%
# last, +5.9 us against another rank's +157 us, under an extra CPU-bound process).
dominated_by() {
    local last=$(($1 - 1)) late share
    read -r late share <<<"$(rank_row $last)"
    [ -n "$share" ] || return 1
    awk -v s="$share" -v l="$late" 'BEGIN {exit !(s > 80 && l > 0)}'
}

name=late-4-ranks
if run "$D/late.run" env ARCOLL_PROFILE="$D/late" $MPIRUN -np 4 "$T/coll_test" skew 200 300 late &&
    report "$D/late"; then
    rows=$(site_rows)
    if [ "$(wc -l <<<"$rows")" -ne 2 ]; then
        ko $name "expected 2 call sites with 200+ calls"
    elif ! awk '{if (!($1 > 1 && $2 > $1 && $3 > 20)) exit 1}' <<<"$rows"; then
        ko $name "imbalance not clearly nonzero (factor > 1, d_bar > 20 us): $rows"
    elif ! dominated_by 4; then
        ko $name "rank 3 does not dominate the arrivals"
    else
        ok $name
        late_dbar=$(awk '{print $3}' <<<"$rows" | sort -g | head -1)
    fi
else
    ko $name "run or report failed"
fi

name=balanced-vs-late-2-ranks
if run "$D/b.run" env ARCOLL_PROFILE="$D/bal" $MPIRUN -np 2 "$T/coll_test" skew 200 0 random &&
    report "$D/bal" && bal=$(site_rows | awk '{print $3}' | sort -g | tail -1) &&
    run "$D/l.run" env ARCOLL_PROFILE="$D/late2" $MPIRUN -np 2 "$T/coll_test" skew 200 300 late &&
    report "$D/late2" && late=$(site_rows | awk '{print $3}' | sort -g | head -1) &&
    [ -n "$bal" ] && [ -n "$late" ]; then
    if awk -v b="$bal" -v l="$late" 'BEGIN {exit !(b * 3 < l)}'; then
        ok "$name (d_bar $bal us vs $late us)"
    else
        ko $name "without delays d_bar is $bal us, with the late rank $late us"
    fi
else
    ko $name "run or report failed"
fi

# Clocks 3 ms apart per rank and drifting 100 ppm per rank: without the
# offsets every call would look milliseconds wide.
name=clock-skew-corrected
if [ -x "$T/coll_test_fault" ] &&
    run "$D/s.run" env ARCOLL_FAULT=clock_skew ARCOLL_PROFILE="$D/skew" $MPIRUN -np 4 \
        "$T/coll_test_fault" skew 200 300 late && report "$D/skew"; then
    est=$(awk '$1 == 3 && $3 == "linear" {print $4}' "$D/last.out")
    rows=$(site_rows)
    if [ -z "$est" ] || ! awk -v e="$est" 'BEGIN {exit !(e > -9100 && e < -8900)}'; then
        ko $name "rank 3's offset estimate is '$est' us, want about -9000 (linear)"
    elif ! awk '{if ($4 >= 3000) exit 1}' <<<"$rows"; then
        ko $name "calls still look milliseconds wide: $rows"
    elif ! dominated_by 4; then
        ko $name "rank 3 does not dominate the arrivals"
    else
        ok $name
    fi
else
    ko $name "run or report failed"
fi

# Sub-teams of one split (same team id), nonblocking and zero-byte calls.
name=matrix-sub-teams
if run "$D/m.run" env ARCOLL_PROFILE="$D/mat" $MPIRUN -np 4 "$T/coll_test" matrix &&
    report "$D/mat" &&
    grep -q "calls aligned across their ranks, 0 failed or unfinished" "$D/last.out" &&
    [ "$(grep -Eo '[0-9]+ calls aligned' "$D/last.out" | cut -d' ' -f1)" -ge 100 ]; then
    ok $name
else
    ko $name "report failed or calls missing"
fi

# Failed calls (size mismatch, a rank that never arrives) are excluded, not fatal.
name=bad-input-failed-calls
if run "$D/bad.run" env ARCOLL_TIMEOUT_MS=20000 ARCOLL_PROFILE="$D/bad" $MPIRUN -np 4 \
    "$T/coll_test" bad && report "$D/bad" &&
    grep -Eq ", [1-9][0-9]* failed or unfinished calls excluded" "$D/last.out"; then
    ok $name
else
    ko $name "report failed or no failed call excluded"
fi

name=singleton-memcpy
if run "$D/one.run" env ARCOLL_PROFILE="$D/one" "$T/coll_test" skew 50 0 random &&
    report "$D/one" && grep -q "memcpy" "$D/last.out"; then
    ok $name
else
    ko $name "singleton profile"
fi

name=oob-fork-late
if [ -x "$T/fork_test" ] &&
    run "$D/f.run" env ARCOLL_PROFILE="$D/oob" "$T/fork_test" 3 skew 200 300 late &&
    report "$D/oob" && dominated_by 3; then
    ok $name
else
    ko $name "forked ranks: run, report or arrival pattern"
fi

# Profiling never fails the application: a file that cannot be written is a warning.
name=unwritable-file
rm -f "$D/last.out"
if run "$D/u.run" env ARCOLL_PROFILE=/nonexistent-dir/p $MPIRUN -np 2 "$T/coll_test" skew 20 0 \
    random && grep -q "cannot write /nonexistent-dir/p" "$D/u.run"; then
    ok $name
else
    ko $name "$(tail -3 "$D/u.run")"
fi

# ARCOLL_PROFILE on rank 0 only: everybody takes part in the clock exchange
# (no hang), only rank 0 writes, the report names the missing file.
name=profile-on-some-ranks
if run "$D/x.run" $MPIRUN -np 1 env ARCOLL_PROFILE="$D/some" "$T/coll_test" skew 20 0 random : \
    -np 1 "$T/coll_test" skew 20 0 random && [ -f "$D/some.0" ] && [ ! -f "$D/some.1" ] &&
    ! report "$D/some" && grep -q "cannot open $D/some.1" "$D/last.out"; then
    ok $name
else
    ko $name "mixed ARCOLL_PROFILE"
fi

# The report refuses what it cannot trust, with exit status 1.
# expect_error NAME PREFIX PATTERN
expect_error() {
    report "$2"
    local rc=$?
    if [ $rc -eq 1 ] && grep -q "$3" "$D/last.out"; then
        ok "$1"
    else
        ko "$1" "exit $rc, want 1 and \"$3\""
    fi
}
if [ -f "$D/late.3" ]; then
    for r in 0 1 2; do cp "$D/late.$r" "$D/miss.$r"; done
    expect_error report-missing-file "$D/miss" "cannot open $D/miss.3"
    for r in 0 1 2 3; do cp "$D/late.$r" "$D/trunc.$r"; done
    head -n 300 "$D/late.2" >"$D/trunc.2"
    expect_error report-truncated-file "$D/trunc" "trunc.2 is truncated"
    # Rank 1 lost one call: counts and "end" agree, the alignment does not.
    for r in 0 1 2 3; do cp "$D/late.$r" "$D/mis.$r"; done
    n=$(awk '$1 == "calls" {print $2}' "$D/late.1")
    awk -v n="$n" 'BEGIN {done = 0}
        $1 == "calls" {print "calls", n - 1; next}
        $1 == "end" {print "end", n - 1; next}
        ($1 == "alltoall" || $1 == "allgather") && !done && $5 == 57 {done = 1; next}
        {print}' "$D/late.1" >"$D/mis.1"
    expect_error report-mismatched-calls "$D/mis" "recorded by 3 ranks (0,2,3) but the team has 4"
    echo "not a profile" >"$D/junk.0"
    expect_error report-not-a-profile "$D/junk" "is not an arcoll PAP profile"
else
    ko report-errors "no profile of the late run to corrupt"
fi

echo "pap-profile: $pass passed, $fail failed"
[ $fail -eq 0 ]
