#!/bin/bash
# Run every cmocka unit test binary of a build tree and sum its test cases.
#
#   tests/run-unit.sh BUILD_DIR
#
# Runs BUILD_DIR/tests/test_* (not the coll_test* integration programs), prints
# one line per binary, the output of those that failed, and last a line
#   unit: N passed, N failed
# counting test cases. A binary that crashes, hangs (UNIT_TIMEOUT seconds,
# default 300) or exits non-zero without a cmocka summary counts as one
# failed case. Exit status 0 only if nothing failed.
set -u

if [ $# -ne 1 ]; then
    echo "usage: $0 BUILD_DIR" >&2
    exit 2
fi
build=$1
timeout_s=${UNIT_TIMEOUT:-300}
# UNIT_VALGRIND=1: run each test under valgrind; a memory error or leak fails it.
wrap=()
if [ "${UNIT_VALGRIND:-0}" = 1 ] && command -v valgrind >/dev/null 2>&1; then
    wrap=(valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite)
fi

total_pass=0
total_fail=0
nbin=0
# Binaries run without valgrind even with UNIT_VALGRIND=1 (see run_one).
novg=${UNIT_VALGRIND_SKIP:-test_rd_sched test_sloav test_mnco_sched}
# UNIT_JOBS binaries at a time (default: the cores): valgrind runs one core per binary.
jobs=${UNIT_JOBS:-$(nproc 2>/dev/null || echo 1)}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/timing.sh"
timing_init "$build/unit-times.txt"

# run_one BIN: its output into $tmp/NAME.out, its exit status into $tmp/NAME.rc, its wall
# time into $tmp/NAME.s
run_one() {
    local bin=$1 name start=$SECONDS
    name=$(basename "$bin")
    local w=("${wrap[@]}")
    # The schedule simulators (thousands of whole schedules run in memory) take minutes under
    # valgrind for no extra coverage: they are pure logic, and make asan runs them under
    # ASan/UBSan. Natively here, like every other binary.
    case " $novg " in *" $name "*) w=() ;; esac
    CMOCKA_MESSAGE_OUTPUT=stdout timeout "$timeout_s" "${w[@]}" "$bin" >"$tmp/$name.out" 2>&1
    echo $? >"$tmp/$name.rc"
    echo $((SECONDS - start)) >"$tmp/$name.s"
}

shopt -s nullglob
bins=()
for bin in "$build"/tests/test_*; do
    case $(basename "$bin") in
    coll_test*) continue ;;
    esac
    [ -f "$bin" ] && [ -x "$bin" ] && bins+=("$bin")
done
running=0
for bin in "${bins[@]}"; do
    if [ "$running" -ge "$jobs" ]; then
        wait -n
        running=$((running - 1))
    fi
    run_one "$bin" &
    running=$((running + 1))
done
wait

for bin in "${bins[@]}"; do
    name=$(basename "$bin")
    nbin=$((nbin + 1))
    out=$(cat "$tmp/$name.out")
    rc=$(cat "$tmp/$name.rc")
    timing_add "$name" "$(cat "$tmp/$name.s")"

    # cmocka's summary, once per group: "[  PASSED  ] N test(s)." and
    # "[  FAILED  ] N test(s), listed below:" (only when some failed).
    pass=0
    fail=0
    summary=0
    while IFS= read -r line; do
        if [[ $line =~ ^\[\ \ PASSED\ \ \]\ ([0-9]+)\ test\(s\) ]]; then
            pass=$((pass + BASH_REMATCH[1]))
            summary=1
        elif [[ $line =~ ^\[\ \ FAILED\ \ \]\ ([0-9]+)\ test\(s\) ]]; then
            fail=$((fail + BASH_REMATCH[1]))
            summary=1
        fi
    done <<<"$out"

    note=""
    if [ "$rc" -ne 0 ] && [ "$fail" -eq 0 ]; then
        # Crashed, timed out or failed outside any test case.
        fail=1
        if [ "$rc" -eq 124 ]; then
            note=" (timed out after ${timeout_s}s)"
        elif [ "$rc" -gt 128 ]; then
            note=" (killed by signal $((rc - 128)))"
        else
            note=" (exit status $rc)"
        fi
    elif [ "$summary" -eq 0 ]; then
        fail=1
        note=" (no cmocka summary in its output)"
    fi

    total_pass=$((total_pass + pass))
    total_fail=$((total_fail + fail))
    if [ "$fail" -eq 0 ]; then
        echo "PASS $name: $pass passed ($(cat "$tmp/$name.s") s)"
    else
        echo "FAIL $name: $pass passed, $fail failed$note ($(cat "$tmp/$name.s") s)"
        printf '%s\n' "$out" | sed 's/^/    /'
    fi
done

if [ "$nbin" -eq 0 ]; then
    echo "no unit test binaries in $build/tests (build them first: make all)" >&2
    echo "unit: $total_pass passed, $total_fail failed"
    exit 1
fi
timing_top unit 5
echo "unit: $total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
