#!/bin/sh
# Runs every test program, shows their output, and adds up their closing "N passed, M failed"
# lines.  A suite that cannot run here (a package missing) prints "skipped: WHAT (WHY)"; those
# are counted: the last line is "N passed, M failed" or "N passed, M failed, K skipped", the
# line above it naming what was skipped.  Exit status non-zero on any failure.
cd "$(dirname "$0")/.." || exit 1
. tools/mpi.sh
PY=/usr/bin/python3
total_pass=0; total_fail=0; total_skip=0; skipped=""
run() {
    name=$1; shift
    echo "== $name"
    out=$("$@" 2>&1); status=$?
    echo "$out" | grep -v -e '^ok  ' -e '^agree ' | tail -n 25
    line=$(echo "$out" | grep -E '^[0-9]+ passed, [0-9]+ failed' | tail -1)
    if [ -z "$line" ]; then
        echo "FAIL: $name printed no result line (exit $status)"; total_fail=$((total_fail + 1)); return
    fi
    p=${line%% passed*}; f=${line#*passed, }; f=${f%% failed*}
    total_pass=$((total_pass + p)); total_fail=$((total_fail + f))
    if [ "$status" != 0 ] && [ "$f" = 0 ]; then echo "FAIL: $name exited $status"; total_fail=$((total_fail + 1)); fi
    s=$(echo "$out" | grep -c '^skipped:')
    if [ "$s" -gt 0 ]; then
        total_skip=$((total_skip + s))
        skipped="$skipped$(echo "$out" | sed -n 's/^skipped: //p' | tr '\n' ';')"
    fi
}
# a suite that needs a command: run it, or count it as skipped
need() { command -v "$1" > /dev/null 2>&1; }
has_torch() { $PY -c 'import torch, numpy' 2>/dev/null; }
skip() { echo "== $1"; echo "skipped: $1 ($2)"; total_skip=$((total_skip + 1)); skipped="$skipped$1 ($2);"; }

run "kernels, gradients, fast paths against references, PyTorch reference dumps, files (OpenBLAS)" bin/test_core
run "the same with the naive sgemm" bin/test_core_naive
run "the same under AddressSanitizer, UndefinedBehaviorSanitizer and LeakSanitizer" env ASAN_OPTIONS=detect_leaks=1 bin/test_core_asan
run "malformed files, table-driven, under AddressSanitizer" env ASAN_OPTIONS=detect_leaks=1 bin/test_malformed_asan
run "out of memory: every allocation refused in turn, reported or absorbed by a fallback with the same numbers (OpenMP)" bin/test_oom
run "the same serially under AddressSanitizer and LeakSanitizer: nothing leaked on the error paths" env ASAN_OPTIONS=detect_leaks=1 bin/test_oom_asan
run "the C API misused: NULL, out of range, NaN, freed and never-made objects refused by name" bin/test_api
run "the same under AddressSanitizer and UndefinedBehaviorSanitizer" env ASAN_OPTIONS=detect_leaks=1 bin/test_api_asan
run "threads: models parsed and planned in 4 threads at once, every network compared, under ThreadSanitizer" env TSAN_OPTIONS=halt_on_error=1 bin/test_threads 15
run "compile: C99 -pedantic, two translation units" bin/test_compile
run "compile: C++" bin/test_compile_cpp
run "compile: CF_STATIC" bin/test_static
run "the vendor's door: the README's example under every strict C and C++ mode, ASan, CF_NO_FILES" sh tests/test_vendor.sh
run "training augmentation: the cube's 48 symmetries" bin/test_augment
run "house rules: function lengths, no dated comments, the activations written once, names in the docs, the tools on the public API" sh tests/check_house.sh
run "the calls' direction: the sections before the fast paths reach them only through the door; a sabotage is reported" sh tests/check_calls.sh
run "the docs kept true: every program, flag, make target, path and link README.md and docs/claims.md name exists; renamed ones reported" sh tests/test_docs.sh
run "checks that see what they claim: a layer type with the wrong table flags fails the gradient check" sh tests/test_checks.sh
run "the tour: every command of docs/tour.md as written, in a copy of the repository" sh tests/test_tour.sh
run "OpenBLAS's kernels: a fallback to SSE replaced by the newest set that passes the sgemm check, said on the first line; OPENBLAS_CORETYPE obeyed" sh tests/test_blas.sh
run "builds: without MPI, OpenBLAS or libhdf5; refusing mpirun and srun; rebuilt when the configuration changes; aarch64" sh tests/test_build.sh
run "the oneDNN peer (where libdnnl-dev is installed): every kind of layer agrees with oneDNN in fp32 and bf16; a changed input reported" sh tests/test_onednn_peer.sh
if has_torch; then
    # the default build and the CF_REFERENCE one (no fast path compiled in), against PyTorch
    run "every layer type and loss against PyTorch float64 (default and CF_REFERENCE builds)" env CF_BINS="bin bin/ref" $PY tests/torch_ops.py
    run "models/cosmoflow.cfg against PyTorch through the tools (default and CF_REFERENCE builds)" env CF_BINS="bin bin/ref" $PY tests/torch_cosmoflow.py
    run "models/deepcam.cfg against PyTorch through the tools (default and CF_REFERENCE builds)" env CF_BINS="bin bin/ref" $PY tests/torch_deepcam.py
    run "the 2018 configurations against independent PyTorch builds" $PY tests/torch_2018.py
else
    skip "the PyTorch comparisons (4 suites)" "python3-torch or python3-numpy missing: apt-get install python3-torch python3-numpy"
fi
run "tools" sh tests/test_tools.sh
run "particle-mesh universes: linear growth on large scales, collapse on small ones, halos, the real records' counts" sh tests/test_pm.sh
run "hostile use: outputs over inputs, FIFOs, late errors, non-finite values, other models, cfg limits, broken MPI jobs" sh tests/test_hostile.sh
run "a sample across ranks: K = 2, 4, 2 x 2 against one rank (MPICH and Open MPI), two sabotages, the tools' --spatial, resume under another K" sh tests/test_spatial.sh
run "many nodes, emulated: network namespaces at 1 Gbit/s, MPICH and Open MPI over TCP, 5 % loss, a cut link ended by the watchdog, a sample split across them" sh tests/test_nodes.sh
run "stopping within an epoch: a stop signal's checkpoint resumed to the byte (1 and 2 ranks, fp32 and bf16, --augment, --spatial 2, --grad-lag 1); --save-every and kill -9 at random instants" sh tests/test_preempt.sh
run "Slurm: a two-node cluster (munged, slurmctld, two slurmd); srun --mpi=pmi2 and sbatch give mpirun's bytes; tools/cf-train.sbatch stopped at a step and requeued ends with the uninterrupted run's bytes" sh tests/test_slurm.sh
if need mpicc.openmpi && need mpirun.openmpi; then
    run "Open MPI: built with mpicc.openmpi, 1 rank x 4 = 2 ranks x 2, a mismatched launcher refused" sh tests/test_openmpi.sh
else
    skip "Open MPI build" "mpicc.openmpi missing: apt-get install libopenmpi-dev"
fi
# memcheck of short training runs of both applications (a plain build: no OpenMP or OpenBLAS
# threads for valgrind to model)
memcheck() {
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
if need valgrind; then run "valgrind memcheck: cf-train, both applications" memcheck
else skip "valgrind memcheck" "valgrind missing: apt-get install valgrind"; fi
# a short fuzzing smoke run of every harness (make fuzz runs them longer)
fuzzsmoke() {
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
if need clang; then run "fuzzing smoke run (libFuzzer, 8 s per reader)" fuzzsmoke
else skip "fuzzing smoke run" "clang missing: apt-get install clang"; fi
if [ "$total_skip" -gt 0 ]; then
    echo "skipped: $skipped"
    echo "$total_pass passed, $total_fail failed, $total_skip skipped"
else
    echo "$total_pass passed, $total_fail failed"
fi
[ "$total_fail" = 0 ]
