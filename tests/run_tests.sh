#!/bin/sh
# Runs every test of the suite and prints one closing "N passed, N failed" line.
# BUILD: build folder (build or build-asan); PYTHON_TESTS=0 skips the Python tests.
# REMAT_TEST_KERNELS=plain: only the PyTorch tests marked `kernels`, on other CPU
# kernels than this CPU's (tests/python/conftest.py); the closing line goes to
# test-summary-plain.txt.
BUILD=${BUILD:-build}
KERNELS=${REMAT_TEST_KERNELS:-native}
summary="$BUILD/test-summary.txt"
[ "$KERNELS" = plain ] && summary="$BUILD/test-summary-plain.txt"
passed=0; failed=0
count() { # $1: output file of a runner that ends with "N passed, N failed"
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$1" | tail -n 1)
    p=$(echo "$line" | sed -E 's/^([0-9]+) passed.*/\1/'); f=$(echo "$line" | sed -E 's/.* ([0-9]+) failed.*/\1/')
    [ -n "$line" ] || { p=0; f=1; }
    passed=$((passed + p)); failed=$((failed + f))
}
out=$(mktemp)
for t in "$BUILD"/tests/test_*; do
    [ -x "$t" ] && [ "$KERNELS" != plain ] || continue
    echo "== $t"
    "$t" >"$out" 2>&1; rc=$?
    cat "$out"; count "$out"
    [ $rc -ne 0 ] && ! grep -qE '^[0-9]+ passed, [1-9]' "$out" && failed=$((failed + 1))
done
for t in tests/cli/test_*.sh; do
    [ -f "$t" ] && [ "$KERNELS" != plain ] || continue
    echo "== $t"
    REMAT="$BUILD/remat" sh "$t" >"$out" 2>&1
    cat "$out"; count "$out"
done
if [ "${PYTHON_TESTS:-1}" = 1 ] && ls tests/python/test_*.py >/dev/null 2>&1; then
    if [ "$KERNELS" = plain ]; then
        echo "== python tests marked kernels, on plain kernels (oneDNN off, ATEN_CPU_CAPABILITY=default)"
        set -- -m kernels tests/python/test_torch_*.py
    else
        echo "== python tests"
        set --
    fi
    REMAT_LIB="$PWD/$BUILD/libremat.so" REMAT_CLI="$PWD/$BUILD/remat" PYTHONPATH="$PWD/python" \
        REMAT_TEST_KERNELS="$KERNELS" "${PYTHON:-.venv/bin/python}" tests/python/run.py "$@" \
        >"$out" 2>&1
    cat "$out"; count "$out"
fi
rm -f "$out"
echo "$passed passed, $failed failed" | tee "$summary"
[ "$failed" -eq 0 ]
