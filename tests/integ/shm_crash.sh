#!/usr/bin/env bash
# Crash-leak test of the shared segments (docs/reliability.md "Shared memory"):
# RUNS times, start JOB and SIGKILL one of its ranks (processes named RANK_COMM
# under the launcher) at a random moment 0-300 ms after the ranks appear, so that
# kills land in arcoll_init, team creation and the collective loop (every other
# run: while the others wait in setup for one rank held up); then run JOB
# once to its end. /dev/shm must then hold no arcoll* name that was not there
# before (other users' and earlier leftovers do not count).
# Usage: shm_crash.sh RUNS RANK_COMM JOB...; prints "shm-crash: N kills, N
# leaked names" and exits non-zero on a leak or if the clean job fails.
set -u
runs=$1 comm=$2
shift 2

shm_names() { (cd /dev/shm 2>/dev/null && ls -1 | grep '^arcoll' | sort) || true; }

# Pids of the launcher's descendants named $comm (ranks may sit under a daemon).
ranks_of() {
    local todo=$1 p out=""
    while [ -n "$todo" ]; do
        set -- $todo
        todo=""
        for p in "$@"; do
            [ "$(cat /proc/"$p"/comm 2>/dev/null)" = "$comm" ] && out="$out $p"
            todo="$todo $(pgrep -P "$p" | tr "\n" " ")"
        done
        todo=$(echo $todo)
    done
    echo $out
}

before=$(shm_names)
kills=0
for ((i = 0; i < runs; i++)); do
    "$@" >/dev/null 2>&1 &
    job=$!
    pids=""
    for ((w = 0; w < 500; w++)); do
        pids=$(ranks_of $job)
        [ -n "$pids" ] && break
        sleep 0.01
    done
    victim=""
    if ((i % 2)); then
        # At a random moment of the job.
        sleep "0.$(printf "%03d" $((RANDOM % ${SHM_CRASH_MAX_MS:-300})))"
        pids=($(ranks_of $job))
        [ ${#pids[@]} -gt 0 ] && victim=${pids[RANDOM % ${#pids[@]}]}
    else
        # In setup: one rank is held up (SIGSTOP) as it starts, so the others
        # create their segments and wait for it in the bootstrap exchange, the
        # moment no peer has attached yet; one of them dies there.
        pids=($pids)
        if [ ${#pids[@]} -gt 1 ]; then
            kill -STOP "${pids[0]}"
            sleep "0.$(printf "%03d" $((RANDOM % ${SHM_CRASH_MAX_MS:-300})))"
            victim=${pids[1]}
        fi
    fi
    [ -n "$victim" ] && kill -9 "$victim" 2>/dev/null && kills=$((kills + 1))
    [ $((i % 2)) -eq 0 ] && [ ${#pids[@]} -gt 1 ] && kill -CONT "${pids[0]}" 2>/dev/null
    wait $job
done
if ! "$@" >/dev/null 2>&1; then
    echo "shm-crash: the clean job after the kills failed: $*"
    exit 1
fi
leaked=$(comm -13 <(echo "$before") <(shm_names) | grep . || true)
echo "shm-crash: $kills kills in $runs runs, $(echo -n "$leaked" | grep -c .) leaked names"
[ -z "$leaked" ] || {
    echo "leaked in /dev/shm:"
    echo "$leaked"
    exit 1
}
