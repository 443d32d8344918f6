#!/bin/sh
# The shared library's ABI: it exports exactly the functions the public
# headers declare with REMAT_API (no remat__ internals, nothing missing).
# $REMAT is build/remat; the library is beside it.
REMAT=${REMAT:-build/remat}
LIB=$(dirname "$REMAT")/libremat.so
INC=$(dirname "$0")/../../include/remat
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
pass=0; fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; sed 's/^/    /' "$T/diff" 2>/dev/null | head -n 20; }

nm -D --defined-only "$LIB" | awk '$2 ~ /^[TDRB]$/ {print $3}' | sort >"$T/exported"
sed -n 's/^REMAT_API [^(]*[ *]\(remat_[a-z0-9_]*\)(.*/\1/p' "$INC"/*.h | sort >"$T/declared"
if [ -s "$T/declared" ] && [ "$(wc -l <"$T/declared")" -ge 60 ]; then ok "headers declare the API"
else echo "only $(wc -l <"$T/declared") REMAT_API declarations found" >"$T/diff"; bad "headers declare the API"; fi
grep '^remat__' "$T/exported" >"$T/diff"
if [ ! -s "$T/diff" ]; then ok "no remat__ internal is exported"; else bad "no remat__ internal is exported"; fi
diff "$T/declared" "$T/exported" >"$T/diff"
if [ $? -eq 0 ]; then ok "exported symbols = REMAT_API declarations"; else bad "exported symbols = REMAT_API declarations"; fi
# Every function declared in a public header carries REMAT_API.
grep -hE '^(const )?[a-z_0-9]+ \**remat_[a-z_0-9]+\(' "$INC"/*.h >"$T/diff"
if [ ! -s "$T/diff" ]; then ok "every public declaration is REMAT_API"; else bad "every public declaration is REMAT_API"; fi
# The fuzz targets call every public function (fuzz/fuzz_api.c on hand-made structs).
FUZZ=$(dirname "$0")/../../fuzz
: >"$T/diff"
while read -r f; do grep -q "\b$f(" "$FUZZ"/*.c || echo "$f" >>"$T/diff"; done <"$T/declared"
if [ ! -s "$T/diff" ]; then ok "the fuzz targets call every public function"
else bad "the fuzz targets call every public function"; fi
# One version: the CHANGELOG's top entry is the library's version.
top=$(sed -n 's/^## \([0-9][0-9.]*\).*/\1/p' "$(dirname "$0")/../../CHANGELOG.md" | head -n 1)
have=$("$REMAT" version | sed 's/^remat //')
if [ -n "$top" ] && [ "$top" = "$have" ]; then ok "CHANGELOG.md's top entry is version $have"
else echo "CHANGELOG top '$top', library '$have'" >"$T/diff"; bad "CHANGELOG.md's top entry is the version"; fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
