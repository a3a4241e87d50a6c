#!/bin/sh
# Runs every test program, shows their output, and adds up their closing
# "N passed, M failed" lines.  Last line: the total; exit status non-zero on any failure.
cd "$(dirname "$0")/.." || exit 1
total_pass=0; total_fail=0
run() {
    name=$1; shift
    echo "== $name"
    out=$("$@" 2>&1); status=$?
    echo "$out" | grep -v '^ok  ' | tail -n 25
    line=$(echo "$out" | grep -E '^[0-9]+ passed, [0-9]+ failed' | tail -1)
    if [ -z "$line" ]; then
        echo "FAIL: $name printed no result line (exit $status)"; total_fail=$((total_fail + 1)); return
    fi
    p=${line%% passed*}; f=${line#*passed, }; f=${f%% failed*}
    total_pass=$((total_pass + p)); total_fail=$((total_fail + f))
    if [ "$status" != 0 ] && [ "$f" = 0 ]; then echo "FAIL: $name exited $status"; total_fail=$((total_fail + 1)); fi
}
run "kernels, gradients, PyTorch reference, files (OpenBLAS)" bin/test_core
run "the same with the naive sgemm" bin/test_core_naive
run "compile: C99 -pedantic, two translation units" bin/test_compile
run "compile: C++" bin/test_compile_cpp
run "compile: CF_STATIC" bin/test_static
run "models/cosmoflow.cfg against PyTorch through the tools" /usr/bin/python3 tests/torch_cosmoflow.py
run "tools" sh tests/test_tools.sh
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" = 0 ]
