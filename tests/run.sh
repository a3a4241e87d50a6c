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
run "the same under AddressSanitizer, UndefinedBehaviorSanitizer and LeakSanitizer" env ASAN_OPTIONS=detect_leaks=1 bin/test_core_asan
run "compile: C99 -pedantic, two translation units" bin/test_compile
run "compile: C++" bin/test_compile_cpp
run "compile: CF_STATIC" bin/test_static
run "the README's vendoring example" bin/vendor_example
run "training augmentation: the cube's 48 symmetries" bin/test_augment
# make MPI=0 / HDF5=0: the tools build and start without MPI, libhdf5 or OpenBLAS (naive sgemm)
nompi() {
    d=$(mktemp -d /tmp/cf-nompi-XXXXXX); n=0; f=0
    for t in train eval convert synth check bench; do
        if cc -std=c99 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Werror -O1 -DCF_USE_ZLIB -I. -o "$d/cf-$t" "tools/cf_$t.c" -lz -lm -lpthread &&
           "$d/cf-$t" --help >/dev/null; then n=$((n + 1)); else f=$((f + 1)); echo "FAIL: cf-$t without MPI/OpenBLAS/HDF5"; fi
    done
    [ "$("$d/cf-check" --model models/cosmoflow.cfg --summary | tail -1)" = "params 8907556" ] && n=$((n + 1)) || f=$((f + 1))
    rm -rf "$d"
    echo "$n passed, $f failed"
}
run "compile: tools without MPI, OpenBLAS, libhdf5" nompi
run "models/cosmoflow.cfg against PyTorch through the tools" /usr/bin/python3 tests/torch_cosmoflow.py
run "models/deepcam.cfg against PyTorch through the tools" /usr/bin/python3 tests/torch_deepcam.py
run "the 2018 configurations against independent PyTorch builds" /usr/bin/python3 tests/torch_2018.py
run "tools" sh tests/test_tools.sh
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" = 0 ]
