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
    test_set_note "$1"
}

# TEST_SET=NAME (make asan sets TEST_SET=asan): only the runner's subset NAME runs. A runner
# lists each subset in one place at its top, as TEST_SET_<NAME>="PATTERN ..." (bash glob
# patterns on test names, e.g. sim-*); every other test is skipped and counted. Without
# TEST_SET (make check) every test runs. Unless a FILTER narrows the run, a pattern that matched
# no test (a test renamed or removed under it) counts as a failed test of the suite, so that a
# subset cannot shrink unseen (tests/README.md, "Time budget").
#   not_in_test_set NAME    true if NAME is to be skipped (and counted in SET_SKIPPED)
#   test_set_note SUITE     (called by max_np_note) the subset's line, and its dead patterns
#                           counted into the runner's $fail
SET_SKIPPED=0
SET_RAN=0
SET_HIT=" "
test_set_patterns() { # the subset's patterns (any lines) into the array SET_PATS, unglobbed
    local v=TEST_SET_${TEST_SET^^}
    SET_PATS=()
    read -rd '' -a SET_PATS <<<"${!v-}" || true
}

not_in_test_set() {
    local p
    [ -n "${TEST_SET:-}" ] || return 1
    test_set_patterns
    for p in "${SET_PATS[@]}"; do
        # shellcheck disable=SC2053 # a pattern, not a string
        if [[ $1 == $p ]]; then
            SET_RAN=$((SET_RAN + 1))
            [[ $SET_HIT == *" $p "* ]] || SET_HIT+="$p "
            return 1
        fi
    done
    SET_SKIPPED=$((SET_SKIPPED + 1))
    return 0
}

test_set_note() {
    local v p dead=()
    [ -n "${TEST_SET:-}" ] || return 0
    v=TEST_SET_${TEST_SET^^}
    if [ -z "${!v+x}" ]; then
        echo "FAIL TEST_SET=$TEST_SET: no such subset in this runner ($v)"
        fail=$((fail + 1))
        return 0
    fi
    echo "$1 time: TEST_SET=$TEST_SET: ran $SET_RAN tests, skipped $SET_SKIPPED"
    [ -z "${FILTER:-}" ] || return 0
    test_set_patterns
    for p in "${SET_PATS[@]}"; do
        [[ $SET_HIT == *" $p "* ]] || dead+=("$p")
    done
    if [ ${#dead[@]} -gt 0 ]; then
        echo "FAIL TEST_SET=$TEST_SET names tests that did not run (renamed, removed, or" \
            "skipped here?): ${dead[*]}"
        fail=$((fail + 1))
    fi
}
