#!/usr/bin/env bash
# arcoll-pap-report on hostile input (docs/profiling.md, "Limits of the reader"): crafted
# files must be refused with a clear message and exit status 1, quickly, without a crash
# (under the sanitizer build, without a sanitizer report) and without allocating by a count a
# file states. No MPI: the files are written here.
# Usage: tests/integ/pap_report_input.sh BUILD_DIR; prints "pap-report-input: N passed, N failed".
set -u
B=${1:-build}
REPORT=$B/bin/arcoll-pap-report
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
pass=0
fail=0

# profile FILE RANK NRANKS [CALL_LINE]: a small valid profile of one call.
profile() {
    local call=${4:-alltoall 1 0 $3 0 64 0 1000 2000 0}
    printf '%s\n' "arcoll-pap-profile 1" "rank $2" "nranks $3" "host h" "clock shared" \
        "calls 1" "dropped 0" "site 0 main+0x10 0x1 ./a.out" "tsize 64 500 5" \
        "$call" "end 1" >"$1"
}

# expect NAME STATUS TEXT: the report of $D/p had exit status STATUS (0 or 1) and said TEXT.
expect() {
    local name=$1 want=$2 text=$3 rc
    timeout 20 "$REPORT" "$D/p" >"$D/out" 2>&1
    rc=$?
    if [ "$rc" -eq "$want" ] && grep -qF -- "$text" "$D/out" &&
        ! grep -qE "Sanitizer|runtime error" "$D/out"; then
        pass=$((pass + 1))
        echo "PASS $name"
    else
        fail=$((fail + 1))
        echo "FAIL $name: exit $rc (want $want), want \"$text\" in:"
        head -c 2000 "$D/out" | sed 's/^/    /'
    fi
    rm -f "$D"/p.*
}

profile "$D/p.0" 0 2
profile "$D/p.1" 1 2
expect valid-two-ranks 0 "2 ranks, 2 records, 1 calls aligned"

# A count far beyond the files present: the reader must not allocate for 16M ranks first.
profile "$D/p.0" 0 16777216
expect huge-rank-count 1 "cannot open $D/p.1"
profile "$D/p.0" 0 1
sed -i 's/^calls 1$/calls 18446744073709551615/' "$D/p.0"
expect huge-call-count 1 "18446744073709551615 calls"
profile "$D/p.0" 0 1
sed -i 's/^site 0 /site 4294967295 /' "$D/p.0"
expect huge-site-index 1 "malformed line: site 4294967295"

profile "$D/p.0" 0 1
head -n 8 "$D/p.0" >"$D/p.t" && mv "$D/p.t" "$D/p.0"
expect truncated 1 "is truncated"

# Binary garbage after a valid header: refused at the NUL byte, not skipped.
{ echo "arcoll-pap-profile 1"; head -c 4096 /dev/urandom; printf '\0'; } >"$D/p.0"
expect binary-garbage 1 "a NUL byte: not a profile"
head -c 65536 /dev/urandom | tr -d '\n' >"$D/p.0"
expect binary-first-line 1 "is not an arcoll PAP profile"

{ echo "arcoll-pap-profile 1"; printf '# '; head -c 10000 /dev/zero | tr '\0' x; echo; } >"$D/p.0"
expect overlong-line 1 "p.0:2: line longer than 8192 characters"

# Times whose difference overflows an int64 (UB in the old reader's arithmetic).
profile "$D/p.0" 0 1 "alltoall 1 0 1 0 64 0 -9000000000000000000 9000000000000000000 0"
expect time-overflow 1 "malformed line: alltoall"
profile "$D/p.0" 0 1
sed -i 's/^tsize 64 500 5$/tsize 64 500 5\ntsize 32 400 5/' "$D/p.0"
expect unsorted-t-table 1 "malformed line: tsize 32"

# Devices and FIFOs are refused without reading or blocking.
ln -s /dev/zero "$D/p.0"
expect dev-zero 1 "not a regular file"
mkfifo "$D/p.0"
expect fifo 1 "not a regular file"

echo "pap-report-input: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
