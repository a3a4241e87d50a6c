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
run "malformed files, table-driven, under AddressSanitizer" env ASAN_OPTIONS=detect_leaks=1 bin/test_malformed_asan
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
# memcheck of short training runs of both applications (a plain build: no OpenMP or OpenBLAS
# threads for valgrind to model), when valgrind is installed
memcheck() {
    command -v valgrind > /dev/null || { echo "skipped: valgrind not installed"; echo "0 passed, 0 failed"; return; }
    d=$(mktemp -d /tmp/cf-vg-XXXXXX); n=0; f=0
    cc -std=c99 -D_POSIX_C_SOURCE=200809L -O1 -g -DCF_USE_ZLIB -I. -o "$d/cf-train" tools/cf_train.c -lz -lm -lpthread
    bin/cf-synth climate --out "$d/ct" --samples 4 --height 32 --width 48 --seed 1 --feature-scale 4 > /dev/null
    bin/cf-synth cosmo --out "$d/co" --samples 4 --size 16 --seed 1 > /dev/null
    VG="valgrind -q --leak-check=full --error-exitcode=3 --errors-for-leak-kinds=definite,indirect"
    for app in climate cosmo; do
        if [ $app = climate ]; then args="--model models/deepcam-small.cfg --input-shape 16x32x48 --train $d/ct --val $d/ct --stats $d/ct"
        else args="--model models/cosmoflow-small.cfg --input-shape 4x16x16x16 --train $d/co --val $d/co --augment"; fi
        if OMP_WAIT_POLICY=passive $VG "$d/cf-train" $args --batch 2 --epochs 2 --out "$d/$app.cfck" --png "$d/png" --no-progress > "$d/out.txt" 2>&1; then
            n=$((n + 1)); else f=$((f + 1)); echo "FAIL: valgrind memcheck of cf-train ($app):"; tail -20 "$d/out.txt"; fi
    done
    rm -rf "$d"
    echo "$n passed, $f failed"
}
run "valgrind memcheck: cf-train, both applications" memcheck
# a short fuzzing smoke run of every harness (make fuzz runs them longer), when clang is installed
fuzzsmoke() {
    command -v clang > /dev/null || { echo "skipped: clang not installed"; echo "0 passed, 0 failed"; return; }
    n=0; f=0
    make -s bin/make_corpus bin/fuzz_npy bin/fuzz_tfrecord bin/fuzz_cfg bin/fuzz_ckpt > /dev/null 2>&1 || { echo "FAIL: fuzz harnesses do not build"; echo "0 passed, 1 failed"; return; }
    d=$(mktemp -d /tmp/cf-fuzz-XXXXXX); bin/make_corpus "$d/corpus"
    for h in npy tfrecord cfg ckpt; do
        mkdir -p "$d/w$h"
        if bin/fuzz_$h -max_total_time=8 -rss_limit_mb=4096 -max_len=4096 "$d/w$h" "$d/corpus/$h" > "$d/log" 2>&1; then n=$((n + 1))
        else f=$((f + 1)); echo "FAIL: fuzz_$h:"; grep -E "ERROR|SUMMARY|#0|#1 |#2 " "$d/log" | head -8; fi
    done
    rm -rf "$d"
    echo "$n passed, $f failed"
}
run "fuzzing smoke run (libFuzzer, 8 s per reader)" fuzzsmoke
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" = 0 ]
