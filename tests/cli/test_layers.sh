#!/bin/sh
# The library's files form no circle: no two object files of libremat.a call
# into each other, directly or through others (from `nm`: which file defines
# and which uses each global symbol), and no header of src/ or include/
# includes itself through others. So the dispatcher (solve.c) depends on the
# solvers and the solvers on their helpers (solver_util.c), never back.
# $REMAT is build/remat; libremat.a is beside it (object files are named by
# their base name there, so two sources must not share one).
REMAT=${REMAT:-build/remat}
LIB=$(dirname "$REMAT")/libremat.a
ROOT=$(dirname "$0")/../..
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
pass=0; fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; sed 's/^/    /' "$T/diff" 2>/dev/null | head -n 60; }

# Reads "from to why" edges; prints each pair of files in one circle (a <-> b,
# from the transitive closure), then the edges inside circles that make them.
circles() {
    awk '{ node[$1] = 1; node[$2] = 1; r[$1 " " $2] = 1; why[$1 " " $2] = $3 }
    END {
        for (k in node) for (i in node) if (r[i " " k])
            for (j in node) if (r[k " " j]) r[i " " j] = 1
        for (i in node) for (j in node) {
            if (i < j && r[i " " j] && r[j " " i]) print "1 " i " <-> " j
            if ((i " " j) in why && r[j " " i]) print "2   " i " -> " j " (" why[i " " j] ")"
        }
    }' "$1" | sort | cut -c3-
}

# The detector itself finds a circle of three and none in a line.
printf 'a.o b.o x\nb.o c.o y\nc.o a.o z\n' >"$T/edges"
printf 'a.o b.o x\nb.o c.o y\n' >"$T/line"
if circles "$T/edges" | grep -q 'a.o <-> c.o' && [ -z "$(circles "$T/line")" ]; then
    ok "the circle detector finds a circle and only a circle"
else
    echo "detector broken" >"$T/diff"; bad "the circle detector finds a circle and only a circle"
fi

# Calls between the library's object files.
if [ -f "$LIB" ] && nm -A "$LIB" >"$T/nm" 2>/dev/null && [ -s "$T/nm" ]; then
    awk '{ n = split($1, p, ":"); f = p[n - 1]; t = $(NF - 1); s = $NF
           if (s ~ /^\./) next
           if (t == "U") use[f " " s] = 1; else if (t ~ /^[TDBRC]$/) def[s] = f }
         END { for (k in use) { split(k, q, " ")
                   if ((q[2] in def) && def[q[2]] != q[1]) print q[1], def[q[2]], q[2] } }' \
        "$T/nm" | sort -u -k1,2 >"$T/calls"
    objs=$(awk '{print $1; print $2}' "$T/calls" | sort -u | wc -l)
    if [ "$objs" -ge 20 ]; then ok "nm sees the calls between $objs object files"
    else
        echo "only $objs object files in $LIB" >"$T/diff"
        bad "nm sees the calls between the object files"
    fi
    circles "$T/calls" >"$T/diff"
    if [ ! -s "$T/diff" ]; then ok "no two library files call into each other"
    else bad "no two library files call into each other"; fi
else
    echo "no $LIB or no nm" >"$T/diff"; bad "nm reads $LIB"
fi

# #include "..." between the headers and sources of src/ and include/,
# resolved as the compiler does: beside the file, then -Iinclude, -Isrc.
: >"$T/includes"
for f in $(cd "$ROOT" && find src include -name '*.[ch]' | sort); do
    d=$(dirname "$f")
    sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$ROOT/$f" |
    while read -r inc; do
        for cand in "$d/$inc" "include/$inc" "src/$inc"; do
            if [ -f "$ROOT/$cand" ]; then
                # normalise a/b/../c to a/c
                echo "$f $(echo "$cand" | sed -e ':a' -e 's|[^/]*/\.\./||' -e 'ta') include"
                break
            fi
        done
    done
done >"$T/includes"
edges=$(wc -l <"$T/includes")
if [ "$edges" -ge 40 ]; then ok "the include graph has $edges edges"
else echo "only $edges includes found" >"$T/diff"; bad "the include graph is read"; fi
circles "$T/includes" >"$T/diff"
if [ ! -s "$T/diff" ]; then ok "no header includes itself through others"
else bad "no header includes itself through others"; fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
