#!/bin/sh
# Runs every benchmark binary and prints their markdown tables.
# Usage: sh bench/run_bench.sh [BUILD] [--quick]
BUILD=${1:-build}
shift 2>/dev/null
echo "# remat benchmarks ($(date -u +%Y-%m-%d), $(nproc) cores, $(uname -m))"
for b in "$BUILD"/bench/bench_*; do
    [ -x "$b" ] || continue
    echo
    echo "## $(basename "$b")"
    echo
    "$b" "$@" || echo "(benchmark $b failed with exit $?)"
done
