#!/usr/bin/env bash
# The layering check (docs/architecture.md, "Layers"): every #include of the library's and the
# embeddings' sources, and every symbol one library object takes from another (read from the
# built objects with nm, so a call through a header declared lower down is seen too), must point
# from a directory to itself or to a directory of a lower level. Directories of one level are
# siblings and never refer to each other. Since the levels are a strict order, no two
# directories can call each other, directly or round a circle.
#   scripts/layers.sh [BUILD]     (after `make`; BUILD defaults to build)
# Prints "layering ok: ..." or each violation, and exits 1 on any.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}

# level directory...: bottom up (a directory may be a glob). include/ (the public API) is level 0 for everyone.
LEVELS='
0 include
1 src/util
2 bootstrap
3 src/chan
4 src/chan/*
5 src/mem
6 src/config
7 src/engine
8 src/alg/sched
9 src/alg/flat
10 src/alg/node
11 src/dispatch
12 src/api
13 src/preload
14 src/mpi
15 src/mpi/ompi
'
levels=$(mktemp)
edges=$(mktemp)
trap 'rm -f "$levels" "$edges"' EXIT
# A level may name a glob (src/chan/*: every channel's directory, so that a new channel needs
# no line here).
echo "$LEVELS" | while read -r lv dirs; do
    [ -n "$lv" ] || continue
    for d in $dirs; do
        for m in $d; do [ -d "$m" ] && echo "$m $lv"; done
    done
done >"$levels"

# Every directory with sources must be listed: a new one needs a level.
unlisted=0
for d in $(find src bootstrap include -name '*.[ch]' -printf '%h\n' | sort -u); do
    if ! awk -v d="$d" '$1 == d { f = 1 } END { exit !f }' "$levels"; then
        echo "layers: directory $d has no level in scripts/layers.sh"
        unlisted=1
    fi
done

# Includes: "X" resolves against the including file's directory, then -Isrc, -I., -Iinclude
# (the Makefile's order after the current directory).
for f in $(find src bootstrap -name '*.[ch]' | sort); do
    d=$(dirname "$f")
    sed -n 's/^#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f" | while read -r h; do
        for p in "$d/$h" "src/$h" "$h" "include/$h"; do
            if [ -f "$p" ]; then
                echo "include $f $(dirname "$(realpath --relative-to=. "$p")") $h"
                break
            fi
        done
    done
done >"$edges"

# Symbols: what each library object uses from another library object.
# (only objects whose source still exists: a build directory may keep stale ones after a move)
objs=$(find "$BUILD/obj/src" "$BUILD/obj/bootstrap" -name '*.o' 2>/dev/null | sort |
    while read -r o; do
        c=${o#"$BUILD"/obj/}
        [ -f "${c%.o}.c" ] && echo "$o"
    done || true)
if [ -z "$objs" ]; then
    echo "layers: no objects under $BUILD/obj (run make first)"
    exit 1
fi
# shellcheck disable=SC2086
nm -A $objs 2>/dev/null | awk -v b="$BUILD/obj/" '
    { split($1, a, ":"); o = a[1]; sub("^" b, "", o); sub(/\.o$/, ".c", o) }
    NF == 3 && $2 ~ /^[TDRBCV]$/ { def[$3] = o; next }
    NF == 3 && $2 == "U" { use[++n] = o " " $3 }
    END {
        for (i = 1; i <= n; i++) {
            split(use[i], u, " ")
            if (u[2] in def) {
                d = def[u[2]]; sub(/\/[^\/]*$/, "", d)
                print "symbol", u[1], d, u[2] " (" def[u[2]] ")"
            }
        }
    }' >>"$edges"

awk -v unlisted="$unlisted" '
    FNR == NR { lv[$1] = $2; next }
    {
        from = $2; sub(/\/[^\/]*$/, "", from); to = $3
        if (!(from in lv) || !(to in lv)) next
        if (from == to) { same++; next }
        if (lv[to] + 0 < lv[from] + 0) { down[from " -> " to]++; next }
        printf "layers: %s %s -> %s: %s (level %s -> %s)\n", $1, $2, to, $4 " " $5, lv[from], lv[to]
        bad++
    }
    END {
        if (bad || unlisted) { printf "layers: %d edges against the order\n", bad; exit 1 }
        printf "layering ok: %d edges between %d pairs of directories, all downward; %d within a directory\n",
            length(down) ? sumd() : 0, length(down), same
    }
    function sumd(   k, s) { for (k in down) s += down[k]; return s }
' "$levels" "$edges"
