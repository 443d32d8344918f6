#!/bin/sh
# Restructuring: same schedules. Builds `remat` at a reference commit (a git
# worktree in a temporary folder) and compares it, byte for byte (stdout,
# stderr and exit status), with the current tree's on every chain of
# examples/ (join problems left out): `remat solve` with every algorithm at
# the limits `make bench` uses, `remat curve` with every algorithm, and
# `remat info` with every algorithm. A change that says "no behaviour change"
# shows it here (BENCHMARKS.md, "Restructuring: same schedules").
#
# Usage: sh bench/same_schedules.sh --ref REV [--new PATH] [--quick | --full]
#   --ref REV   the commit to compare with (e.g. the base of the change)
#   --new PATH  the remat to check (default: build/remat, built here first)
#   --quick     chains of at most 20 stages only (a few minutes)
#   --full      no caps: pofo on every chain too (hours on 2 cores)
# The limits, from the smallest memory optimal finds (mm, `remat info`) to
# the store-all peak P: mm, and mm + f (P - mm) for f = 0.1 (bench_exact),
# 0.2 (bench_pofo), 0.5 (bench_exact), 0.9 (bench_exact, bench_rotor); P/2
# (bench_optimal, bench_bounded); 0.95 P (bench_rotor); P. The offload
# algorithms get a 12 GB/s link (bench_pofo). The slow pairs are capped by
# the chain's stages (below; --full lifts the caps). Curves run with
# --max-time 0: the curve sweep otherwise stops on wall time, which a
# loaded machine changes.
set -u
REF=""; NEW=""; MODE=default
while [ $# -gt 0 ]; do
    case "$1" in
    --ref) REF=${2:-}; shift 2 ;;
    --new) NEW=${2:-}; shift 2 ;;
    --quick) MODE=quick; shift ;;
    --full) MODE=full; shift ;;
    *) echo "usage: sh bench/same_schedules.sh --ref REV [--new PATH] [--quick | --full]" >&2
       exit 2 ;;
    esac
done
[ -n "$REF" ] || { echo "same_schedules: --ref REV is required" >&2; exit 2; }
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 2
T=$(mktemp -d)
cleanup() { git worktree remove --force "$T/ref" >/dev/null 2>&1; rm -rf "$T"; }
trap cleanup EXIT INT TERM

echo "building remat at $REF (git worktree in $T/ref)"
git worktree add --detach -q "$T/ref" "$REF" || exit 2
nice make -s -C "$T/ref" -j2 BUILD="$T/ref-build" "$T/ref-build/remat" >"$T/ref-make.log" 2>&1 ||
    { tail -n 20 "$T/ref-make.log"; exit 2; }
OLD="$T/ref-build/remat"
if [ -z "$NEW" ]; then
    nice make -s -j2 build/remat >"$T/new-make.log" 2>&1 ||
        { tail -n 20 "$T/new-make.log"; exit 2; }
    NEW="$ROOT/build/remat"
fi
echo "reference: $OLD ($(git rev-parse --short "$REF"))"
echo "current:   $NEW ($(git describe --always --dirty))"
cp "$NEW" "$T/new-remat" || exit 2 # a rebuild during the run changes nothing
NEW="$T/new-remat"

# The most stages a chain may have for ALG in a solve (kind solve) or a
# sweep of solves (kind sweep: curve and info); 0 = any.
cap() { # $1 kind, $2 algorithm
    [ "$MODE" = full ] && { echo 0; return; }
    [ "$MODE" = quick ] && { echo 20; return; }
    case "$1 $2" in
    "solve exact" | "sweep exact") echo 12 ;;
    "solve pofo") echo 40 ;;
    "sweep pofo") echo 20 ;;
    "solve offload-only" | "solve opportunist" | "solve autocapper") echo 130 ;;
    "sweep offload-only" | "sweep opportunist" | "sweep autocapper") echo 40 ;;
    "sweep revolve") echo 130 ;;
    *) echo 0 ;;
    esac
}

ALGS="optimal optimal-slots0 revolve sequential store-all exact
      pofo offload-only opportunist autocapper"
# The options that select $1. optimal-slots0: optimal in exact bytes, with a
# 1 GiB table cap so that two runs side by side stay within a small
# machine's memory (a table over it is narrowed by bounds, or refused).
alg_args() {
    case "$1" in
    optimal-slots0) echo "-a optimal --slots 0 --max-work 1GiB" ;;
    pofo | offload-only | opportunist | autocapper) echo "-a $1 --bandwidth 12GB/s" ;;
    *) echo "-a $1" ;;
    esac
}

same=0; differ=0; skipped=0
: >"$T/differ"
# Runs both binaries with the same arguments ($1 names the case) and compares.
check() {
    name=$1; shift
    ( "$OLD" "$@" >"$T/o.out" 2>"$T/o.err"; echo "exit $?" >>"$T/o.err" ) &
    ( "$NEW" "$@" >"$T/n.out" 2>"$T/n.err"; echo "exit $?" >>"$T/n.err" ) &
    wait
    if cmp -s "$T/o.out" "$T/n.out" && cmp -s "$T/o.err" "$T/n.err"; then
        same=$((same + 1))
    else
        differ=$((differ + 1))
        { echo "DIFFER $name: remat $*"; diff "$T/o.err" "$T/n.err" | head -n 6
          diff "$T/o.out" "$T/n.out" | head -n 6; } >>"$T/differ"
        echo "  DIFFER $name"
    fi
}

for chain in $(find examples -name '*.json' | sort); do
    grep -q '"remat-chain-1"' "$chain" || continue # join problems
    base=$(basename "$chain" .json)
    "$OLD" info "$chain" --quiet >"$T/info" 2>&1 || { echo "$chain: info failed"; exit 1; }
    n=$(sed -n 's/^stages: *\([0-9]*\).*/\1/p' "$T/info")
    peak=$(sed -n 's/^store-all peak: *\([0-9]*\) .*/\1/p' "$T/info")
    mm=$(sed -n 's/^smallest memory: *\([0-9]*\) .*/\1/p' "$T/info")
    span=$((peak - mm))
    limits=$(printf '%s\n' "$mm" $((mm + span / 10)) $((mm + span / 5)) $((mm + span / 2)) \
        $((mm + span * 9 / 10)) $((peak / 2)) $((peak * 95 / 100)) "$peak" | sort -un)
    echo "$base: $n stages, limits $(echo $limits)"
    before=$((same + differ))
    for alg in $ALGS; do
        c=$(cap solve "$alg")
        if [ "$c" -gt 0 ] && [ "$n" -gt "$c" ]; then skipped=$((skipped + 1)); continue; fi
        for m in $limits; do
            # shellcheck disable=SC2046
            check "$base solve $alg $m" solve "$chain" --memory "$m" $(alg_args "$alg") --quiet
        done
    done
    for alg in $ALGS; do
        c=$(cap sweep "$alg")
        if [ "$c" -gt 0 ] && [ "$n" -gt "$c" ]; then skipped=$((skipped + 1)); continue; fi
        # shellcheck disable=SC2046
        check "$base curve $alg" curve "$chain" $(alg_args "$alg") --points 12 --max-time 0 --quiet
        # shellcheck disable=SC2046
        check "$base info $alg" info "$chain" $(alg_args "$alg") --quiet
    done
    echo "  $((same + differ - before)) runs compared"
done
echo
echo "same_schedules: $same same, $differ differ, $skipped (chain, algorithm, kind) skipped by" \
     "the caps ($MODE); reference $(git rev-parse --short "$REF")"
[ "$differ" -eq 0 ] || { cat "$T/differ"; exit 1; }
