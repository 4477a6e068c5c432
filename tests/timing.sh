# shellcheck shell=bash
# Sourced by the suite runners: each test's wall time, and the slowest of the suite at its end
# (tests/README.md, "Time budget").
#   timing_init FILE        start a fresh record (FILE: in the suite's log directory)
#   timing_add NAME SECS    one test's wall time
#   timing_top SUITE [N]    the N (default 10) slowest, sorted, and the sum of all; printed before
#                           the suite's summary line, as "SUITE time: ..." (not "SUITE: ...",
#                           which tests/check.sh counts)
timing_init() {
    TIMING_FILE=$1
    : >"$TIMING_FILE"
}

timing_add() {
    [ -n "${TIMING_FILE:-}" ] && printf '%s %s\n' "$2" "$1" >>"$TIMING_FILE"
}

timing_top() {
    local suite=$1 n=${2:-10}
    [ -s "${TIMING_FILE:-}" ] || return 0
    echo "$suite time: slowest tests (s), of $(awk '{ s += $1 } END { printf "%d s in %d tests", s, NR }' \
        "$TIMING_FILE"):"
    sort -rn -k1,1 "$TIMING_FILE" | head -n "$n" | awk '{ printf "  %6s  %s\n", $1, $2 }'
}

# TEST_MAX_NP (make asan): a test whose name gives a rank count above it is skipped. The count
# is the name's first all-digit field between dashes ("shim-coll-8-fail": 8; "sim-512x16-...":
# none, runs). Every family runs at 2-4 ranks (4: two pretend nodes of 2), so the sanitizer
# still sees each code path; larger counts repeat it (tests/README.md, "Time budget").
#   over_max_np NAME        true if NAME is to be skipped (and counted in MAXNP_SKIPPED)
#   max_np_note SUITE       one line on what was skipped, if anything
MAXNP_SKIPPED=0
over_max_np() {
    local f
    [ -n "${TEST_MAX_NP:-}" ] || return 1
    IFS=- read -ra f <<<"$1"
    for f in "${f[@]}"; do
        if [[ $f =~ ^[0-9]+$ ]]; then
            [ "$f" -gt "$TEST_MAX_NP" ] || return 1
            MAXNP_SKIPPED=$((MAXNP_SKIPPED + 1))
            return 0
        fi
    done
    return 1
}

max_np_note() {
    [ "$MAXNP_SKIPPED" -eq 0 ] || echo "$1 time: skipped $MAXNP_SKIPPED tests above TEST_MAX_NP=$TEST_MAX_NP ranks"
}
