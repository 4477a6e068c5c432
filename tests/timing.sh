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
