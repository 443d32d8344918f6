#!/bin/sh
# Runs every fuzz binary in $1 for $2 seconds, one at a time, in-process (one job).
# New inputs go to $1/corpus/<name>; the seeds under fuzz/corpus/ and the
# example documents are read, never written. Crashes land in $1/artifacts/.
# A failing fuzzer does not stop the others; the exit status says if any failed.
# FUZZ_SKIP=pofo (a list of algorithm names) leaves those out of fuzz_solve.
dir=$1
failed=""
secs=${2:-60}
mkdir -p "$dir/artifacts"
for bin in "$dir"/fuzz_*; do
    case $bin in *.d) continue ;; esac
    [ -x "$bin" ] || continue
    name=${bin##*/fuzz_}
    case $name in
    chain) seeds="fuzz/corpus/chain tests/cli/data examples" ;;
    schedule_sim) seeds="fuzz/corpus/schedule_sim" ;;
    join | hjoin) seeds="fuzz/corpus/$name examples/join" ;;
    *) seeds="fuzz/corpus/$name" ;;
    esac
    mkdir -p "$dir/corpus/$name"
    echo "== fuzz_$name for ${secs}s"
    "$bin" -max_total_time="$secs" -timeout=20 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$dir/artifacts/$name-" "$dir/corpus/$name" $seeds || failed="$failed $name"
done
if [ -n "$failed" ]; then
    echo "fuzz: findings in:$failed (see $dir/artifacts/)"
    exit 1
fi
