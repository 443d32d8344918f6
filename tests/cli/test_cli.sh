#!/bin/sh
# Tests of the remat command-line tool (not the library): output, exit codes
# and one-line error messages. $REMAT is the binary under test.
REMAT=${REMAT:-build/remat}
D=$(dirname "$0")/data
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
pass=0; fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; sed 's/^/    /' "$T/err" "$T/out" 2>/dev/null | head -n 8; }
# run WANT_EXIT NAME CMD...: runs CMD, checks its exit code
run() { want=$1; name=$2; shift 2; "$@" >"$T/out" 2>"$T/err"; rc=$?
    if [ $rc -eq "$want" ]; then ok "$name"; else echo "    exit $rc, expected $want"; bad "$name"; fi; }
# err_line NAME PATTERN: stderr is exactly one line, starts "remat: " and matches PATTERN
err_line() { if [ "$(wc -l <"$T/err")" -eq 1 ] && grep -q '^remat: ' "$T/err" && grep -qE -e "$2" "$T/err"
    then ok "$1"; else bad "$1"; fi; }
out_has() { if grep -qE -e "$2" "$T/out"; then ok "$1"; else bad "$1"; fi; }
json_field() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$1" "$2"; }

# usage and help
run 0 "remat --help" "$REMAT" --help
out_has "help lists commands" "solve CHAIN --memory M"
run 2 "no arguments is a usage error" "$REMAT"
run 2 "unknown command" "$REMAT" frobnicate
err_line "unknown command message" "unknown command"
for c in solve simulate curve info join; do
    run 0 "$c --help" "$REMAT" $c --help
    out_has "$c --help shows usage" "^usage: remat $c"
done
run 0 "version" "$REMAT" version

# simulate: the store-all schedule of tiny.json, worked out by hand:
# peak 1120 bytes while B 4 runs (970 held + d[3] 50 + ... see tests/cli/data), time 31
run 0 "simulate store-all" "$REMAT" simulate "$D/tiny.json" "$D/storeall.sched.json"
out_has "simulate reports valid" '"valid": true'
out_has "simulate peak 1120" '"peak_bytes": 1120'
out_has "simulate time 31" '"time": 31[,}]'
run 0 "simulate --timeline without a bandwidth" "$REMAT" simulate "$D/tiny.json" "$D/storeall.sched.json" --timeline
out_has "timeline has compute events" '"events": \[\{"op": 0, "lane": 0, "start": 0'
out_has "timeline keeps time 31" '"time": 31[,}]'
run 2 "simulate unknown op" "$REMAT" simulate "$D/tiny.json" "$D/bad_op.sched.json"
err_line "unknown op message names op" 'ops\[3\].*Fx 4'
run 2 "simulate wrong B order" "$REMAT" simulate "$D/tiny.json" "$D/bad_order.sched.json"
err_line "wrong order message" 'B 3.*order'
run 2 "simulate missing schedule" "$REMAT" simulate "$D/tiny.json"

# solve with every chain algorithm; each schedule must pass simulate
for a in optimal revolve sequential store-all exact; do
    run 0 "solve $a" "$REMAT" solve "$D/tiny.json" --memory 2000 --algorithm $a -o "$T/$a.json"
    run 0 "simulate $a schedule" "$REMAT" simulate "$D/tiny.json" "$T/$a.json"
    out_has "$a schedule valid" '"valid": true'
    st=$(json_field "$T/$a.json" time); sim=$(json_field "$T/out" time)
    if python3 -c "import sys; a,b=map(float,sys.argv[1:]); sys.exit(abs(a-b)>1e-9*(1+abs(b)))" "$st" "$sim"
    then ok "$a predicted time = simulated"; else bad "$a predicted time $st != simulated $sim"; fi
done
run 0 "solve to stdout" "$REMAT" solve "$D/tiny.json" --memory 1500
out_has "schedule format" '"format": "remat-schedule-1"'
run 0 "solve exact bytes" "$REMAT" solve "$D/tiny.json" --memory 700 --slots 0 -o "$T/s0.json"
run 0 "exact-bytes schedule simulates" "$REMAT" simulate "$D/tiny.json" "$T/s0.json"
peak=$(json_field "$T/out" peak_bytes)
if [ "$peak" -le 700 ]; then ok "exact-bytes peak $peak <= 700"; else bad "exact-bytes peak $peak > 700"; fi
run 0 "solve with size suffix" "$REMAT" solve "$D/tiny.json" --memory 1KiB -a optimal
run 0 "sequential with segments" "$REMAT" solve "$D/tiny.json" --memory 2000 -a sequential --segments 2

# infeasible: exit 1 and the smallest memory that would work
run 1 "solve below the minimum" "$REMAT" solve "$D/tiny.json" --memory 150
err_line "infeasible names the minimum" 'needs at least [0-9]+ bytes'
need=$(sed -E 's/.*needs at least ([0-9]+) bytes.*/\1/' "$T/err")
run 0 "solve at the stated minimum" "$REMAT" solve "$D/tiny.json" --memory "$need"
run 1 "limit below the input size" "$REMAT" solve "$D/tiny.json" --memory 50
err_line "below the input: names the minimum" 'needs at least [0-9]+ bytes'

# usage errors
run 2 "solve without --memory" "$REMAT" solve "$D/tiny.json"
err_line "missing memory message" '--memory'
run 2 "bad size" "$REMAT" solve "$D/tiny.json" --memory 12X
err_line "bad size message" '^remat: --memory'
run 2 "unknown algorithm" "$REMAT" solve "$D/tiny.json" --memory 1000 --algorithm magic
err_line "unknown algorithm message" 'magic'
run 2 "unknown option" "$REMAT" solve "$D/tiny.json" --memory 1000 --frob
run 2 "negative bandwidth" "$REMAT" solve "$D/tiny.json" --memory 1000 -a pofo --bandwidth -5
err_line "bandwidth message" 'bandwidth'
run 2 "missing file" "$REMAT" info "$T/nope.json"
err_line "missing file message" 'nope.json'

# bad chains: exit 2, one line naming the file and the field
for f in syntax missing negative nonfinite huge empty type format; do
    run 2 "bad chain: $f" "$REMAT" solve "$D/bad_$f.json" --memory 1000
    err_line "bad chain $f: one line naming the file" "bad_$f.json"
done
for pair in "missing:stages\[1\]\.out_bytes" "negative:stages\[2\]\.fwd_time" \
            "nonfinite:stages\[3\]\.fwd_time" "huge:stages\[0\]\.saved_bytes" "empty:stages" \
            "type:stages\[0\]\.out_bytes" "format:format"; do
    f=${pair%%:*}; field=${pair#*:}
    "$REMAT" info "$D/bad_$f.json" >"$T/out" 2>"$T/err"
    err_line "bad chain $f names $field" "$field"
done

# curve
run 0 "curve csv" "$REMAT" curve "$D/tiny.json"
out_has "curve header" '^memory_bytes,memory_mib,time,slowdown$'
if awk -F, 'NR>2 && ($1 <= pm || $3 >= pt) {exit 1} NR>1 {pm=$1; pt=$3} END {exit NR < 3}' "$T/out"
then ok "curve: memory increases, time decreases"; else bad "curve not monotone"; fi
if tail -n 1 "$T/out" | grep -q ',1.0000$'; then ok "curve ends at store-all time"; else bad "curve end"; fi
# in exact bytes the curve's first point is the smallest feasible memory
run 0 "curve in exact bytes" "$REMAT" curve "$D/tiny.json" --slots 0
first=$(sed -n 2p "$T/out" | cut -d, -f1); below=$((first - 1))
run 0 "curve's first point is solvable" "$REMAT" solve "$D/tiny.json" --slots 0 --memory "$first"
run 1 "one byte less is not" "$REMAT" solve "$D/tiny.json" --slots 0 --memory "$below"
run 0 "curve json" "$REMAT" curve "$D/tiny.json" --format json --points 5
if python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['format']=='remat-curve-1' and 2<=len(d['points'])<=5" "$T/out"
then ok "curve json parses"; else bad "curve json"; fi
run 0 "curve of sequential" "$REMAT" curve "$D/tiny.json" --algorithm sequential --points 6

# info
run 0 "info" "$REMAT" info "$D/tiny.json"
out_has "info stages" '^stages: +5 '
out_has "info store-all peak" 'store-all peak: +1120 bytes'
out_has "info store-all time" 'store-all time: +31$'
out_has "info smallest memory" '^smallest memory: +[0-9]+ bytes'

# partial saves and fall_overhead (data/options.json): info lists them, exact
# uses them ("Fall 1/k"), every algorithm's schedule simulates, and a bad
# option index is the simulator's error naming the op
O="$D/options.json"
run 0 "info with options" "$REMAT" info "$O"
out_has "info counts the options" '^partial saves: +2 options on 1 stage'
out_has "info lists an option" '^    Fall 1/1 \(matmuls\): saves 40 B, backward 5'
out_has "info shows fall_overhead" '^fall overheads: +1 stage set their own'
run 0 "info without options says nothing of them" "$REMAT" info "$D/tiny.json"
if ! grep -q 'partial saves' "$T/out"; then ok "no options line for tiny.json"; else bad "options line for tiny.json"; fi
run 0 "exact with options" "$REMAT" solve "$O" --memory 60 -a exact -o "$T/ox.json"
if grep -q '"Fall 1/2"' "$T/ox.json"; then ok "exact picks a partial save"; else bad "exact partial save"; cat "$T/ox.json"; fi
for a in exact optimal revolve sequential store-all; do
    run 0 "solve $a on options.json" "$REMAT" solve "$O" --memory 150 -a $a -o "$T/o-$a.json"
    run 0 "its schedule simulates" "$REMAT" simulate "$O" "$T/o-$a.json"
    out_has "$a schedule with options valid" '"valid": true'
done
run 0 "curve with options" "$REMAT" curve "$O" -a exact
out_has "curve reaches the partial save's 55 bytes" '^55,'
printf '{"format": "remat-schedule-1", "ops": ["Fall 1/3", "Fall 2", "B 2", "B 1"]}' >"$T/o-bad.json"
run 2 "bad option index" "$REMAT" simulate "$O" "$T/o-bad.json"
err_line "bad option message names the op" 'op 0 \(Fall 1/3\): stage 1 has 2 options: there is no option 3'
printf '{"format": "remat-chain-1", "input_bytes": 1, "stages": [{"fwd_time": 1, "bwd_time": 1, "out_bytes": 2, "saved_bytes": 2, "options": [{"saved_bytes": 1, "bwd_time": 1}]}]}' >"$T/o-badc.json"
run 2 "option below out_bytes" "$REMAT" info "$T/o-badc.json"
err_line "bad option field named" 'o-badc.json: stages\[0\].options\[0\].saved_bytes: 1 is less than out_bytes 2'

# bounded time: work estimated above --max-time is refused at once, with the estimate
R1001=examples/resnet1001-like.json
run 2 "solve refused above --max-time" "$REMAT" solve "$R1001" --memory 4GiB --max-time 0.0001
err_line "refusal gives the estimate" 'estimated to take about .* s, more than the limit'
run 2 "curve refused above --max-time" "$REMAT" curve "$D/tiny.json" -a pofo -b 1000 --max-time 0.000001
err_line "curve refusal message" 'estimated to take about'
run 2 "--max-time needs a number" "$REMAT" solve "$D/tiny.json" --memory 2000 --max-time soon
run 0 "--max-time 0 is no limit" "$REMAT" solve "$D/tiny.json" --memory 2000 --max-time 0

# progress: on stderr, forced with --progress, never with --quiet; stdout unchanged
"$REMAT" solve "$R1001" --memory 4GiB >"$T/plain.json" 2>"$T/plain.err"
"$REMAT" solve "$R1001" --memory 4GiB --progress >"$T/prog.json" 2>"$T/prog.err"
if grep -q 'optimal: table .*100%' "$T/prog.err" && [ "$(tail -c 1 "$T/prog.err" | od -An -c | tr -d ' ')" = '\n' ]
then ok "--progress prints the table's progress, one final newline"; else bad "--progress output"; cat "$T/prog.err" | head -c 300; fi
if [ ! -s "$T/plain.err" ]; then ok "no progress when stderr is not a terminal"; else bad "unasked progress"; fi
if cmp -s "$T/plain.json" "$T/prog.json"; then ok "stdout unchanged by --progress"; else bad "stdout changed"; fi
"$REMAT" solve "$R1001" --memory 4GiB --progress --quiet >"$T/q.json" 2>"$T/q.err"
if [ ! -s "$T/q.err" ] && cmp -s "$T/plain.json" "$T/q.json"; then ok "--quiet prints nothing"; else bad "--quiet"; fi
"$REMAT" curve "$D/tiny.json" -a sequential --points 8 --progress >"$T/c.csv" 2>"$T/c.err"
if grep -q 'curve .*100%' "$T/c.err"; then ok "curve --progress"; else bad "curve --progress"; fi
# a curve never lists one memory twice, whatever --points asks
run 0 "curve with many points" "$REMAT" curve "$D/tiny.json" -a sequential --points 100000
if [ "$(tail -n +2 "$T/out" | cut -d, -f1 | sort | uniq -d | wc -l)" -eq 0 ]
then ok "curve memories distinct"; else bad "curve repeats a memory"; fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
