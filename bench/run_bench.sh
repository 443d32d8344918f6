#!/bin/sh
# Runs every benchmark binary and prints their markdown tables, then the
# comparison with rotor's own DP when ROTOR names the directory of its built
# module (see BENCHMARKS.md; skipped otherwise).
# Usage: [ROTOR=DIR] [PYTHON=python3] sh bench/run_bench.sh [BUILD] [--quick]
BUILD=${1:-build}
shift 2>/dev/null
echo "# remat benchmarks ($(date -u +%Y-%m-%d), $(nproc) cores, $(uname -m), load $(cut -d' ' -f1-3 /proc/loadavg))"
for b in "$BUILD"/bench/bench_*; do
    [ -x "$b" ] || continue
    echo
    echo "## $(basename "$b")"
    echo
    "$b" "$@" || echo "(benchmark $b failed with exit $?)"
done
echo
echo "## bench_rotor.py"
echo
quick=""
[ "$1" = "--quick" ] && quick="--reps 1 --limits 4 --slots 500 --chains resnet1001-like"
"${PYTHON:-python3}" bench/bench_rotor.py --rotor "${ROTOR:-}" --remat "$BUILD/remat" $quick ||
    echo "(bench_rotor.py failed with exit $?)"
