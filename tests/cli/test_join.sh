#!/bin/sh
# Tests the `remat join` command line (the tool, not the library): outputs,
# exit codes and one-line messages. REMAT is the path to the binary.
REMAT=${REMAT:-build/remat}
case $REMAT in /*) ;; *) REMAT="$PWD/$REMAT" ;; esac
passed=0; failed=0
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

check() { # $1: name, $2: 0 when the check holds
    if [ "$2" -eq 0 ]; then echo "ok   $1"; passed=$((passed + 1))
    else echo "FAIL $1"; failed=$((failed + 1)); fi
}
# run EXPECTED_RC ARGS...: runs remat, keeps stdout/stderr, returns 0 when the exit code matches
run() {
    want=$1; shift
    "$REMAT" "$@" >"$tmp/out" 2>"$tmp/err"; got=$?
    [ "$got" -eq "$want" ] || { echo "  exit $got, expected $want: $*" >&2; cat "$tmp/err" >&2; return 1; }
}
has() { grep -q -- "$1" "$2"; }
one_line() { [ "$(wc -l <"$1")" -eq 1 ] && grep -q '^remat: ' "$1"; }
doc() { # $1: file, $2: branches, $3: rest of the fields
    printf '{"format": "remat-join-1", "branches": %s%s}\n' "$2" "$3" >"$tmp/$1"
}
costs=', "fwd_time": 1, "bwd_time": 1, "turn_time": 1'

doc toy.json '[4, 10, 12]' "$costs, \"slots\": 9"
run 0 join "$tmp/toy.json" && has '"format": "remat-join-schedule-1"' "$tmp/out" && has '"time": 74' "$tmp/out"
check "schedule on stdout, toy example makespan 74" $?

run 0 join "$tmp/toy.json" -o "$tmp/s.json" && [ ! -s "$tmp/out" ] && has '"peak_slots": 9' "$tmp/s.json"
check "-o writes the schedule to a file" $?

run 0 simulate "$tmp/toy.json" "$tmp/s.json" && has '"valid": true' "$tmp/out" && has '"makespan": 74' "$tmp/out" && has '"peak_slots": 9' "$tmp/out"
check "simulate accepts the join schedule" $?

sed 's/"S 3 0", //' "$tmp/s.json" >"$tmp/bad_s.json"
grep -q '"S 3 0", ' "$tmp/s.json"; had=$?
run 2 simulate "$tmp/toy.json" "$tmp/bad_s.json" && has '"valid": false' "$tmp/out" && has 'not in memory' "$tmp/out" && one_line "$tmp/err"
check "simulate names the failing op of a broken schedule" $(( $? + had ))

run 0 join "$tmp/toy.json" --slots 20 && has '"slots": 20' "$tmp/out"
check "--slots overrides the problem's memory" $?

run 1 join "$tmp/toy.json" --slots 6 && has 'needs at least 7 slots (c_min)' "$tmp/err" && one_line "$tmp/err"
check "below c_min: exit 1 naming c_min" $?

run 0 join "$tmp/toy.json" --curve && [ "$(head -n 1 "$tmp/out")" = "slots,makespan" ] \
    && [ "$(sed -n 2p "$tmp/out")" = "7,88" ] && [ "$(tail -n 1 "$tmp/out")" = "29,53" ] \
    && [ "$(wc -l <"$tmp/out")" -eq 24 ]
check "--curve: CSV from c_min to full storage, ending at Span*" $?

run 0 join "$tmp/toy.json" --curve --format json && has '"points"' "$tmp/out" && has '"slots": 29, "makespan": 53' "$tmp/out"
check "--curve --format json" $?

run 0 join "$tmp/toy.json" --compare && has '^join-optimal,9,74,9,1$' "$tmp/out" && has '^equiv-chain,9,' "$tmp/out"
check "--compare prints both algorithms" $?

doc snn.json '[4, 4, 4]' "$costs"
run 0 join "$tmp/snn.json" --compare --slots 9 --format json && has '"join-optimal": {"makespan": ' "$tmp/out" && has '"equiv-chain": {"makespan": ' "$tmp/out"
check "--compare --format json" $?

run 0 join "$tmp/snn.json" --curve --compare && [ "$(head -n 1 "$tmp/out")" = "slots,makespan,equiv_chain" ] && has '^7,[0-9.]*,$' "$tmp/out"
check "--curve --compare leaves the cell empty where EQUIV-CHAIN does not fit" $?

run 2 join "$tmp/snn.json" && has 'slots' "$tmp/err" && one_line "$tmp/err"
check "no slots anywhere: exit 2" $?

# bad inputs: exit 2 with one line naming the file and the field
bad() { # $1: name, $2: file body, $3: field the message must name
    printf '%s\n' "$2" >"$tmp/bad.json"
    run 2 join "$tmp/bad.json" && has "bad.json" "$tmp/err" && has "$3" "$tmp/err" && one_line "$tmp/err"
    check "bad input: $1" $?
}
bad "zero length" '{"format": "remat-join-1", "branches": [3, 0]'"$costs"', "slots": 9}' 'branches\[1\]'
bad "negative length" '{"format": "remat-join-1", "branches": [-2]'"$costs"', "slots": 9}' 'branches\[0\]'
bad "k = 0" '{"format": "remat-join-1", "branches": []'"$costs"', "slots": 9}' '"branches"'
bad "missing costs" '{"format": "remat-join-1", "branches": [3], "fwd_time": 1, "turn_time": 1, "slots": 9}' 'bwd_time'
bad "huge length" '{"format": "remat-join-1", "branches": [1e40]'"$costs"', "slots": 9}' 'branches\[0\]'
bad "huge slots" '{"format": "remat-join-1", "branches": [3]'"$costs"', "slots": 1e300}' '"slots"'
bad "non-integer length" '{"format": "remat-join-1", "branches": [2.5]'"$costs"', "slots": 9}' 'integer'
bad "non-integer slots" '{"format": "remat-join-1", "branches": [3]'"$costs"', "slots": 4.5}' '"slots"'
bad "infinite time" '{"format": "remat-join-1", "branches": [3], "fwd_time": 1e999, "bwd_time": 1, "turn_time": 1}' 'fwd_time'
bad "wrong format" '{"format": "remat-chain-1", "branches": [3]'"$costs"'}' 'format: "remat-chain-1" is not'
bad "not JSON" '{"format": "remat-join-1", ' 'JSON'

run 2 join "$tmp/nonexistent.json" && one_line "$tmp/err"
check "missing file: exit 2" $?

run 2 join "$tmp/toy.json" --bogus && one_line "$tmp/err"
check "unknown option: exit 2" $?

run 2 join "$tmp/toy.json" --slots -3 && one_line "$tmp/err"
check "bad --slots: exit 2" $?

doc big.json '[100000, 100000, 100000]' "$costs, \"slots\": 40"
run 2 join "$tmp/big.json" && has 'too large' "$tmp/err" && one_line "$tmp/err"
check "tables too large: refused, exit 2" $?

run 0 join --help && has 'usage: remat join' "$tmp/out"
check "--help" $?

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
