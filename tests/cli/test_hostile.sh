#!/bin/sh
# The command line on the hostile inputs of issue 23: -o through descriptors
# and devices, output that never arrives, control characters, times that
# overflow, valid chains at the limits, revolve's time bound.
# $REMAT is the binary under test.
REMAT=${REMAT:-build/remat}
D=$(dirname "$0")/data
E=$(dirname "$0")/../../examples
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
pass=0; fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; sed 's/^/    /' "$T/err" "$T/out" 2>/dev/null | head -n 8; }
run() { want=$1; name=$2; shift 2; "$@" >"$T/out" 2>"$T/err"; rc=$?
    if [ $rc -eq "$want" ]; then ok "$name"; else echo "    exit $rc, expected $want"; bad "$name"; fi; }
# run_sh WANT NAME SCRIPT: the script's own redirections decide where stdout goes
run_sh() { want=$1; name=$2; sh -c "$3" 2>"$T/err"; rc=$?
    if [ $rc -eq "$want" ]; then ok "$name"; else echo "    exit $rc, expected $want"; bad "$name"; fi; }
err_line() { if [ "$(wc -l <"$T/err")" -eq 1 ] && grep -q '^remat: ' "$T/err" && grep -qE -e "$2" "$T/err"
    then ok "$1"; else bad "$1"; fi; }
has() { if grep -qE -e "$3" "$2"; then ok "$1"; else bad "$1"; fi; }
lacks() { if grep -qE -e "$3" "$2"; then bad "$1"; else ok "$1"; fi; }
R="\"$REMAT\""
TINY="\"$D/tiny.json\""

# ---- 1. -o naming a descriptor or a device is written through, not replaced ----
printf 'old log\n' >"$T/log.txt"
run_sh 0 "solve -o /dev/stdout >> log" "exec $R solve $TINY --memory 2000 -o /dev/stdout >>\"$T/log.txt\""
if [ "$(head -n 1 "$T/log.txt")" = "old log" ]; then ok "the log keeps its old contents"; else bad "the log keeps its old contents"; fi
has "the schedule is appended" "$T/log.txt" '"format": "remat-schedule-1"'
run_sh 0 "-o /dev/fd/1 inside a redirected group" "(echo first; $R solve $TINY --memory 2000 -o /dev/fd/1; echo last) >\"$T/group.txt\""
if [ "$(head -n 1 "$T/group.txt")" = first ] && [ "$(tail -n 1 "$T/group.txt")" = last ]; then
    ok "the group's lines stay around the schedule"; else bad "the group's lines stay around the schedule"; fi
run_sh 0 "-o /proc/self/fd/1" "exec $R curve $TINY -o /proc/self/fd/1 >>\"$T/log.txt\""
has "the curve is appended too" "$T/log.txt" '^memory_bytes,'
ln -s /dev/stdout "$T/out-link"
run_sh 0 "-o a link to /dev/stdout" "exec $R solve $TINY --memory 2000 -o \"$T/out-link\" >>\"$T/log.txt\""
if [ -L "$T/out-link" ]; then ok "the link stays a link"; else bad "the link stays a link"; fi
# /dev/fd/1, not /dev/stdout: a binary with the old bug, run as root, renamed
# its output over the dangling /dev/stdout link itself
run_sh 2 "-o /dev/fd/1 with stdout closed" "exec $R solve $TINY --memory 2000 -o /dev/fd/1 >&-"
err_line "closed descriptor: one line" '/dev/fd/1: cannot write'
ln -s /dev/fd/1 "$T/fd1-link"
run_sh 2 "-o a link to /dev/fd/1 with stdout closed" "exec $R solve $TINY --memory 2000 -o \"$T/fd1-link\" >&-"
if [ -L "$T/fd1-link" ]; then ok "the link is not replaced by a file"; else bad "the link is not replaced by a file"; fi
run 0 "-o /dev/null" "$REMAT" solve "$D/tiny.json" --memory 2000 -o /dev/null
mkfifo "$T/fifo"
cat "$T/fifo" >"$T/from_fifo" &
reader=$!
run 0 "-o a FIFO" "$REMAT" solve "$D/tiny.json" --memory 2000 -o "$T/fifo"
wait $reader
has "the reader got the schedule" "$T/from_fifo" '"format": "remat-schedule-1"'
if [ -p "$T/fifo" ]; then ok "the FIFO is still a FIFO"; else bad "the FIFO is still a FIFO"; fi
if [ -z "$(ls -A "$T" | grep '\.tmp-')" ]; then ok "no temporary file anywhere"; else bad "no temporary file anywhere"; fi

# ---- 6. output that never arrives is an error ----
for cmd in "info $TINY" "solve $TINY --memory 2000" "curve $TINY" \
           "simulate $TINY \"$D/storeall.sched.json\"" "join \"$E/join/toy.json\"" "--help" "version"; do
    run_sh 2 "$cmd >&-" "exec $R $cmd >&-"
    err_line "$cmd >&-: one line" 'cannot write to standard output'
done
if [ -w /dev/full ]; then
    run_sh 2 "info >/dev/full" "exec $R info $TINY >/dev/full"
    err_line "info >/dev/full: the reason" 'cannot write to standard output: No space left'
fi
run_sh 1 "an infeasible solve with stderr closed still exits 1" "exec $R solve $TINY --memory 10 2>&-"

# ---- 5. control characters and bytes that are not UTF-8 are escaped ----
run 2 "a newline in --memory" "$REMAT" solve "$D/tiny.json" --memory "$(printf '150\nx')"
err_line "the message stays one line" '150\\nx'
run 2 "an escape sequence in --memory" "$REMAT" solve "$D/tiny.json" --memory "$(printf '1\033[31m')"
lacks "no raw ESC reaches the terminal" "$T/err" "$(printf '\033')"
err_line "ESC is written as \\x1B" '1\\x1B\[31m'
run 2 "a path with a newline and a bad byte" "$REMAT" info "$(printf 'no\nsuch\377.json')"
err_line "the path stays one line" 'no\\nsuch\\xFF\.json: cannot open'
python3 - "$T" <<'EOF'
import json, sys
t = sys.argv[1]
st = [{"name": "s\u009b%d" % i, "fwd_time": 1, "bwd_time": 1, "out_bytes": 10, "saved_bytes": 10} for i in range(3)]
json.dump({"format": "remat-chain-1", "name": "x\n\u009b[2J", "time_unit": "m\ts", "input_bytes": 10, "stages": st},
          open(t + "/ctl.json", "w"))
open(t + "/latin1.json", "wb").write(b'{"format": "remat-chain-1", "name": "caf\xe9", "input_bytes": 1, '
                                     b'"stages": [{"fwd_time": 1, "bwd_time": 1, "out_bytes": 1, "saved_bytes": 1}]}')
EOF
run 0 "info of a chain whose name holds control characters" "$REMAT" info "$T/ctl.json"
has "its name is escaped on one line" "$T/out" '^chain: +x\\n\\xC2\\x9B\[2J$'
has "its time unit too" "$T/out" '^time unit: +m\\ts$'
run 2 "a name that is not UTF-8 is refused" "$REMAT" info "$T/latin1.json"
err_line "naming the file and the field" 'latin1\.json: name: not valid UTF-8 \(byte 3 is 0xE9\)'

# ---- 3. finite times whose sums overflow are refused at load ----
python3 - "$T" <<'EOF'
import json, sys
t = sys.argv[1]
st = [{"fwd_time": 4e307, "bwd_time": 0, "out_bytes": 10, "saved_bytes": 10} for i in range(4)]
json.dump({"format": "remat-chain-1", "input_bytes": 10, "stages": st}, open(t + "/slow.json", "w"))
st = [{"fwd_time": 1, "bwd_time": 1, "out_bytes": 10, "saved_bytes": 10} for i in range(3)]
json.dump({"format": "remat-chain-1", "input_bytes": 2 ** 53 - 1, "stages": st}, open(t + "/huge.json", "w"))
EOF
for a in optimal revolve; do
    run 2 "solve -a $a: overflowing times" "$REMAT" solve "$T/slow.json" --memory 50 -a $a
    err_line "-a $a: refused at load, naming the file and the field" 'slow\.json: stages: the times \(fwd_time \+ bwd_time\) add up to 1\.6e\+308'
done

# ---- 4. info summarises every valid chain ----
run 0 "info: store-all peak past 2^53" "$REMAT" info "$T/huge.json"
has "it gives the peak" "$T/out" '^store-all peak: +18014398509482002 bytes'
has "and says no limit fits" "$T/out" '^smallest memory: +none below 2\^53 bytes with optimal \(it needs 18014398509482002 bytes'
run 0 "info -a sequential: past 2^53" "$REMAT" info "$T/huge.json" -a sequential
has "none below 2^53 with sequential" "$T/out" '^smallest memory: +none below 2\^53 bytes with sequential$'
run 1 "solve: it still says what memory would do" "$REMAT" solve "$T/huge.json" --memory 1000
err_line "the infeasible line" 'needs at least 18014398509482002 bytes'
python3 -c 'import json; json.dump({"format": "remat-chain-1", "input_bytes": 10, "stages": [{"fwd_time": 1.5, "bwd_time": 2.5, "out_bytes": 1000, "saved_bytes": 2000} for i in range(100000)]}, open("'"$T"'/c100k.json", "w"))'
run 0 "info on the documented maximum of 100000 stages" "$REMAT" info "$T/c100k.json"
has "it counts them" "$T/out" '^stages: +100000 '
has "and says why the smallest memory is not computed" "$T/out" '^smallest memory: +not computed: optimal: '
run 0 "solve -a sequential on 100000 stages" "$REMAT" solve "$T/c100k.json" --memory 1MB -a sequential -o "$T/s100k.json"
run 0 "its schedule simulates" "$REMAT" simulate "$T/c100k.json" "$T/s100k.json"
run 2 "optimal on 100000 stages is refused, not run" "$REMAT" solve "$T/c100k.json" --memory 1MB
err_line "refused by the work limit" 'optimal: the per-pair bounds of 100000 stages'

# ---- 2. revolve honours --max-time, refused at once ----
python3 - "$T" <<'EOF'
import json, random, sys
t = sys.argv[1]
for n in (2000, 5000):
    r = random.Random(n)
    st = []
    for i in range(n):
        f, o = 0.1 + 5 * r.random(), int(1e6 + 99e6 * r.random())
        st.append({"fwd_time": f, "bwd_time": 2 * f, "out_bytes": o, "saved_bytes": 2 * o,
                   "fwd_overhead": int(1e7 * r.random())})
    json.dump({"format": "remat-chain-1", "input_bytes": 50000000, "stages": st}, open("%s/r%d.json" % (t, n), "w"))
EOF
for n in 2000 5000; do
    # generous: the refusal takes well under a second here; 20 s is the bound's sanity check
    run 2 "revolve --bucket 1 on $n stages" timeout 20 "$REMAT" solve "$T/r$n.json" --memory 20GB -a revolve --bucket 1
    err_line "$n stages: refused with the estimate" 'revolve: estimated to take about .* more than the limit of 60 s'
    [ $n = 5000 ] && err_line "5000 stages: the bounds alone" 'its bounds alone take about'
    run 0 "info -a revolve on $n stages" timeout 20 "$REMAT" info "$T/r$n.json" -a revolve
    has "$n stages: its smallest memory is not searched past the limit" "$T/out" '^smallest memory: +not computed: revolve: the smallest-memory search: estimated'
done
run 2 "revolve's curve is refused too" timeout 20 "$REMAT" curve "$T/r2000.json" -a revolve --bucket 1
run 0 "revolve's smallest memory of resnet1001-like (95 s once)" timeout 30 "$REMAT" info "$E/resnet1001-like.json" -a revolve
has "the same answer as the bisection over solves gave" "$T/out" '^smallest memory: +187928001 bytes'

# ---- decided: --threads up to REMAT_MAX_THREADS; pofo asks for its link ----
run 0 "--threads 1024" "$REMAT" solve "$D/tiny.json" --memory 2000 --threads 1024
run 2 "--threads 1025" "$REMAT" solve "$D/tiny.json" --memory 2000 --threads 1025
err_line "--threads: the range" 'not an integer in 0\.\.1024'
run 2 "pofo without --bandwidth" "$REMAT" solve "$D/tiny.json" --memory 2000 -a pofo
err_line "pofo: asks for the link" 'pofo needs --bandwidth B'
run 0 "pofo --bandwidth 0: no link" "$REMAT" solve "$D/tiny.json" --memory 2000 -a pofo --bandwidth 0

if [ -L /dev/stdout ]; then ok "/dev/stdout is still a link"; else bad "/dev/stdout is still a link"; fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
