#!/bin/sh
# Runs every fuzz binary in $1 for $2 seconds, one at a time, in-process (one job).
# New inputs go to $1/corpus/<name>; the seeds under fuzz/corpus/ and the
# example documents are read, never written. Crashes land in $1/artifacts/.
set -e
dir=$1
secs=${2:-60}
mkdir -p "$dir/artifacts"
for bin in "$dir"/fuzz_*; do
    name=${bin##*/fuzz_}
    case $name in
    chain) seeds="fuzz/corpus/chain tests/cli/data examples" ;;
    schedule_sim) seeds="fuzz/corpus/schedule_sim" ;;
    join) seeds="fuzz/corpus/join examples/join" ;;
    *) seeds="fuzz/corpus/$name" ;;
    esac
    mkdir -p "$dir/corpus/$name"
    echo "== fuzz_$name for ${secs}s"
    "$bin" -max_total_time="$secs" -timeout=20 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$dir/artifacts/$name-" "$dir/corpus/$name" $seeds
done
