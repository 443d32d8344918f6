#!/bin/sh
# The command line on hostile input (issue 13): nothing lost on a failed
# write, input bounded whatever the file kind, no nan/inf in any output.
# $REMAT is the binary under test.
REMAT=${REMAT:-build/remat}
D=$(dirname "$0")/data
E=$(dirname "$0")/../../examples
J=$E/join
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
pass=0; fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; sed 's/^/    /' "$T/err" "$T/out" 2>/dev/null | head -n 8; }
run() { want=$1; name=$2; shift 2; "$@" >"$T/out" 2>"$T/err"; rc=$?
    if [ $rc -eq "$want" ]; then ok "$name"; else echo "    exit $rc, expected $want"; bad "$name"; fi; }
err_line() { if [ "$(wc -l <"$T/err")" -eq 1 ] && grep -q '^remat: ' "$T/err" && grep -qE -e "$2" "$T/err"
    then ok "$1"; else bad "$1"; fi; }
same() { if cmp -s "$2" "$3"; then ok "$1"; else bad "$1"; fi; }
no_temp() { if [ -z "$(ls -A "$1" | grep '\.tmp-')" ]; then ok "$2"; else ls -A "$1" >"$T/err"; bad "$2"; fi; }
# limited WANT NAME CMD...: runs CMD with a file size limit of 512 bytes, so
# that writing its (longer) output fails midway as on a full disk; stderr's
# one line still fits. SIGXFSZ is ignored: write() fails instead.
limited() { want=$1; name=$2; shift 2
    sh -c 'trap "" XFSZ; ulimit -f 1; exec "$@"' limited "$@" >"$T/out" 2>"$T/err"; rc=$?
    if [ $rc -eq "$want" ]; then ok "$name"; else echo "    exit $rc, expected $want"; bad "$name"; fi; }

# ---- nothing lost: -o is atomic ----
mkdir "$T/w"
cp "$E/resnet101-b16-500.json" "$T/w/chain.json"
printf 'old schedule\n' >"$T/w/s.json"; cp "$T/w/s.json" "$T/w/s.orig"
limited 2 "solve -o: a write that fails midway" "$REMAT" solve "$T/w/chain.json" --memory 3GiB -o "$T/w/s.json"
err_line "the failed write is one line naming the file" 's\.json: cannot write'
same "the old schedule survives" "$T/w/s.json" "$T/w/s.orig"
no_temp "$T/w" "no temporary file is left"
run 0 "solve -o without the limit" "$REMAT" solve "$T/w/chain.json" --memory 3GiB -o "$T/w/s.json"
run 0 "the new schedule is whole" "$REMAT" simulate "$T/w/chain.json" "$T/w/s.json"
printf 'old curve\n' >"$T/w/c.csv"; cp "$T/w/c.csv" "$T/w/c.orig"
limited 2 "curve -o: a write that fails midway" "$REMAT" curve "$T/w/chain.json" -o "$T/w/c.csv"
same "the old curve survives" "$T/w/c.csv" "$T/w/c.orig"
printf 'old join\n' >"$T/w/j.json"; cp "$T/w/j.json" "$T/w/j.orig"
limited 2 "join -o: a write that fails midway" "$REMAT" join "$J/toy.json" -o "$T/w/j.json"
same "the old join schedule survives" "$T/w/j.json" "$T/w/j.orig"
no_temp "$T/w" "no temporary file is left after three failures"
if [ -w /dev/full ]; then
    run 2 "-o /dev/full" "$REMAT" solve "$D/tiny.json" --memory 2000 -o /dev/full
    err_line "-o /dev/full: one line" '/dev/full: cannot write'
    run 2 "stdout on /dev/full" sh -c "exec \"$REMAT\" curve \"$D/tiny.json\" >/dev/full"
fi
run 2 "-o a directory" "$REMAT" solve "$D/tiny.json" --memory 2000 -o "$T/w"
err_line "-o a directory: one line" 'is a directory'
run 2 "-o in a missing directory" "$REMAT" solve "$D/tiny.json" --memory 2000 -o "$T/none/s.json"

# -o naming the command's own input is refused before anything is written
cp "$T/w/chain.json" "$T/w/keep.json"
run 2 "solve -o CHAIN is refused" "$REMAT" solve "$T/w/chain.json" --memory 3GiB -o "$T/w/chain.json"
err_line "solve -o CHAIN: one line" 'is the input file'
same "the chain is untouched" "$T/w/chain.json" "$T/w/keep.json"
ln -s chain.json "$T/w/alias.json"
run 2 "curve -o a link to CHAIN is refused" "$REMAT" curve "$T/w/chain.json" -o "$T/w/alias.json"
same "the chain is still untouched" "$T/w/chain.json" "$T/w/keep.json"
cp "$J/toy.json" "$T/w/toy.json"
run 2 "join -o PROBLEM is refused" "$REMAT" join "$T/w/toy.json" -o "$T/w/toy.json"
same "the problem is untouched" "$T/w/toy.json" "$J/toy.json"

# ---- bounded input: any kind of file stops at the cap ----
run 2 "info /dev/zero" "$REMAT" info /dev/zero
err_line "/dev/zero: over the limit" 'more than the limit of 256 MiB'
run 2 "endless standard input" sh -c "yes | exec \"$REMAT\" info /dev/stdin"
err_line "stdin: over the limit" 'more than the limit'
run 2 "a directory as CHAIN" "$REMAT" info "$T"
err_line "a directory: one line" 'is a directory'
run 2 "join PROBLEM from /dev/zero" "$REMAT" join /dev/zero
run 2 "simulate from /dev/zero" "$REMAT" simulate "$D/tiny.json" /dev/zero
run 0 "a chain from a pipe" sh -c "cat \"$D/tiny.json\" | exec \"$REMAT\" info /dev/stdin"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
