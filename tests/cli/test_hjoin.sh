#!/bin/sh
# Tests `remat join` and `remat simulate` on remat-join-2 problems (the tool,
# not the library): outputs, exit codes and one-line messages.
REMAT=${REMAT:-build/remat}
case $REMAT in /*) ;; *) REMAT="$PWD/$REMAT" ;; esac
EX=$(dirname "$0")/../../examples/join
passed=0; failed=0
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

check() { # $1: name, $2: 0 when the check holds
    if [ "$2" -eq 0 ]; then echo "ok   $1"; passed=$((passed + 1))
    else echo "FAIL $1"; failed=$((failed + 1)); fi
}
run() { # run EXPECTED_RC ARGS...
    want=$1; shift
    "$REMAT" "$@" >"$tmp/out" 2>"$tmp/err"; got=$?
    [ "$got" -eq "$want" ] || { echo "  exit $got, expected $want: $*" >&2; cat "$tmp/err" >&2; return 1; }
}
has() { grep -q -- "$1" "$2"; }
one_line() { [ "$(wc -l <"$1")" -eq 1 ] && grep -q '^remat: ' "$1"; }

# A two-branch network: branch 1 two stages, branch 2 one stage (the hand
# example of tests/test_hjoin.c): store-all peaks at 23 bytes in 10 ms.
cat >"$tmp/p.json" <<'EOF'
{"format": "remat-join-2", "name": "hand", "time_unit": "ms",
 "branches": [
  {"name": "text", "input_bytes": 4, "input_grad_bytes": 0, "stages": [
    {"fwd_time": 1, "bwd_time": 2, "out_bytes": 2, "saved_bytes": 3},
    {"fwd_time": 1, "bwd_time": 1, "out_bytes": 1, "saved_bytes": 2}]},
  {"name": "image", "input_bytes": 3, "stages": [
    {"fwd_time": 2, "bwd_time": 2, "out_bytes": 3, "saved_bytes": 4}]}],
 "turn": {"fwd_time": 0.5, "bwd_time": 0.5, "saved_bytes": 1, "fwd_overhead": 2}}
EOF

run 0 join "$tmp/p.json" --memory 23 --slots 0 && has '"format": "remat-join-schedule-2"' "$tmp/out" \
    && has '"time": 10,' "$tmp/out" && has '"peak_bytes": 23' "$tmp/out"
check "schedule on stdout: store-all at its peak" $?

run 0 join "$tmp/p.json" --memory 17 --slots 0 -o "$tmp/s.json" && [ ! -s "$tmp/out" ] \
    && has '"memory_limit": 17' "$tmp/s.json"
check "-o writes the schedule" $?

run 0 simulate "$tmp/p.json" "$tmp/s.json" && has '"valid": true' "$tmp/out" && has '"peak_bytes": 1[0-7]' "$tmp/out"
check "simulate accepts the join schedule within the limit" $?

sed 's/"T", //; s/"T"\]/]/' "$tmp/s.json" >"$tmp/bad_s.json"
run 2 simulate "$tmp/p.json" "$tmp/bad_s.json" && has '"valid": false' "$tmp/out" && one_line "$tmp/err" \
    && has 'bad_s.json: op' "$tmp/err"
check "simulate names the failing op of a schedule without T" $?

run 1 join "$tmp/p.json" --memory 9 --slots 0 && has 'needs at least 1[0-9] bytes' "$tmp/err" && one_line "$tmp/err"
check "below the smallest limit: exit 1 with the limit" $?

run 0 join "$tmp/p.json" --curve --slots 0 && [ "$(head -n 1 "$tmp/out")" = "memory_bytes,memory_mib,time,slowdown" ] \
    && [ "$(tail -n 1 "$tmp/out" | cut -d, -f3)" = "10" ]
check "--curve: CSV down to the store-all time" $?

run 0 join "$tmp/p.json" --curve --compare --slots 0 && has 'slowdown,flat_chain$' "$tmp/out"
check "--curve --compare adds the flat chain" $?

run 0 join "$tmp/p.json" --curve --format json --slots 0 && has '"format":	"remat-join-curve-2"' "$tmp/out" \
    && has '"store_all_time":	10' "$tmp/out"
check "--curve --format json" $?

run 0 join "$tmp/p.json" --compare --memory 20 --slots 0 && has '^join-optimal,20,' "$tmp/out" \
    && has '^flat-chain,20,' "$tmp/out"
check "--compare: the join solver and the flat chain" $?

run 0 join "$EX/clip-like.json" --compare --memory 200MiB --format json && has '"flat-chain": {"time"' "$tmp/out"
check "--compare --format json on the CLIP-like example" $?

cat "$tmp/p.json" | "$REMAT" join /dev/stdin --memory 23 --slots 0 >"$tmp/out" 2>"$tmp/err" \
    && has '"time": 10,' "$tmp/out"
check "the problem may be a pipe (read once)" $?

printf '{"format": "remat-join-1", "branches": [4, 10, 12], "fwd_time": 1, "bwd_time": 1, "turn_time": 1, "slots": 9}\n' \
    | "$REMAT" join /dev/stdin >"$tmp/out" 2>"$tmp/err" && has '"time": 74' "$tmp/out"
check "a remat-join-1 problem through a pipe still works" $?

run 2 join "$tmp/p.json" && has 'needs --memory' "$tmp/err" && one_line "$tmp/err"
check "no --memory: exit 2" $?

run 2 join "$tmp/p.json" --memory 20 -a revolve && one_line "$tmp/err" && has 'only --memory' "$tmp/err"
check "--algorithm does not apply: exit 2" $?

run 2 join "$tmp/p.json" --memory 20 --bogus && one_line "$tmp/err"
check "unknown option: exit 2" $?

run 2 join "$EX/triplet-like.json" --memory 300MiB --max-time 0.000001 && has 'estimated' "$tmp/err" \
    && one_line "$tmp/err"
check "--max-time refuses up front with the estimate" $?

run 2 join "$EX/triplet-like.json" --memory 300MiB --max-work 1MiB && has 'work limit' "$tmp/err" \
    && one_line "$tmp/err"
check "--max-work refuses up front" $?

# bad inputs: exit 2 with one line naming the file and the field
bad() { # $1: name, $2: file body, $3: what the message must name
    printf '%s\n' "$2" >"$tmp/bad.json"
    run 2 join "$tmp/bad.json" --memory 100 && has "bad.json" "$tmp/err" && has "$3" "$tmp/err" \
        && one_line "$tmp/err"
    check "bad input: $1" $?
}
st='{"fwd_time": 1, "bwd_time": 1, "out_bytes": 2, "saved_bytes": 3}'
br='{"input_bytes": 4, "stages": ['"$st"']}'
turn='"turn": {"fwd_time": 1, "bwd_time": 1}'
bad "no branches" '{"format": "remat-join-2", '"$turn"'}' 'branches: missing required field'
bad "five branches" '{"format": "remat-join-2", "branches": ['"$br,$br,$br,$br,$br"'], '"$turn"'}' '1 to 4 branches'
bad "no turn" '{"format": "remat-join-2", "branches": ['"$br"']}' 'turn: missing'
bad "negative time" '{"format": "remat-join-2", "branches": [{"input_bytes": 4, "stages": [{"fwd_time": -1, "bwd_time": 1, "out_bytes": 2, "saved_bytes": 3}]}], '"$turn"'}' 'branches\[0\].stages\[0\].fwd_time'
bad "saved below out" '{"format": "remat-join-2", "branches": [{"input_bytes": 4, "stages": [{"fwd_time": 1, "bwd_time": 1, "out_bytes": 5, "saved_bytes": 3}]}], '"$turn"'}' 'saved_bytes'
bad "empty stages" '{"format": "remat-join-2", "branches": [{"input_bytes": 4, "stages": []}], '"$turn"'}' 'branches\[0\].stages'
bad "turn without bwd_time" '{"format": "remat-join-2", "branches": ['"$br"'], "turn": {"fwd_time": 1}}' 'turn.bwd_time'
bad "huge size" '{"format": "remat-join-2", "branches": [{"input_bytes": 1e40, "stages": ['"$st"']}], '"$turn"'}' 'input_bytes'
bad "not JSON" '{"format": "remat-join-2", ' 'JSON'

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
