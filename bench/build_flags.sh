#!/bin/sh
# What each build flag buys a program that vendors the header: one training step of
# models/cosmoflow-small.cfg at 4x32x32x32, batch 2 (best of 3 after one warm-up step), built
# the ways the header's top comment lists, and each build's compile time.  Run from the
# repository's top directory: sh bench/build_flags.sh
cd "$(dirname "$0")/.." || exit 1
T=$(mktemp -d /tmp/cf-flags-XXXXXX)
trap 'rm -rf "$T"' EXIT
cat > "$T/step.c" <<'C'
#define CF_IMPLEMENTATION
#include "cosmoflow.h"
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
int main(void) {
    cf_net net; cf_train_config cfg; cf_trainer tr; cf_step_result r;
    cf_shape s = {4, 32, 32, 32};
    int B = 2, k;
    size_t n, i;
    float *x, *t;
    double t0, best = 1e9;
    if (cf_net_load_cfg(&net, "models/cosmoflow-small.cfg", &s)) { puts(cf_failure_reason()); return 1; }
    cf_net_init(&net, 1);
    n = (size_t)B * cf_shape_size(net.input);
    x = (float *)malloc(n * 4); t = (float *)malloc((size_t)B * net.n_outputs * 4);
    for (i = 0; i < n; i++) x[i] = (float)(i % 13) / 13;
    for (i = 0; i < (size_t)B * net.n_outputs; i++) t[i] = 0.1f;
    cf_train_defaults(&cfg);
    if (cf_train_init(&tr, &net, &cfg)) { puts(cf_failure_reason()); return 1; }
    cf_train_epoch(&tr, 1);
    for (k = 0; k <= 3; k++) { t0 = now(); if (cf_train_step(&tr, x, t, B, &r)) return 1; if (k && now() - t0 < best) best = now() - t0; }
    printf("%.1f", best * 1e3);
    return 0;
}
C
OB=/usr/lib/$(cc -print-multiarch 2>/dev/null)/openblas-openmp
echo "cosmoflow-small.cfg, 4x32x32x32, batch 2: ms per training step (best of 3), compile seconds; $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
run() {   # $1: the label, $2 the compiler and its flags, $3 the libraries (the source and -lm are added)
    label=$1
    s0=$(date +%s.%N)
    if ! $2 -D_POSIX_C_SOURCE=200809L -I. -o "$T/step" "$T/step.c" $3 -lm > "$T/cc.txt" 2>&1; then printf '%-58s does not build: %s\n' "$label" "$(head -1 "$T/cc.txt")"; return; fi
    s1=$(date +%s.%N)
    ms=$("$T/step") || { echo "build_flags: $label: the built step failed: $ms" >&2; exit 1; }   # (a failed run is no row)
    printf '%-58s %8s ms  %5.1f s\n' "$label" "$ms" "$(echo "$s1 - $s0" | bc)"
}
run "cc -std=c99 -O2" "cc -std=c99 -O2"
run "cc -std=c99 -O3" "cc -std=c99 -O3"
run "... -march=x86-64-v3" "cc -std=c99 -O3 -march=x86-64-v3"
run "... -fopenmp" "cc -std=c99 -O3 -march=x86-64-v3 -fopenmp"
[ -d "$OB" ] && run "... -DCF_USE_CBLAS, OpenBLAS's OpenMP build" "cc -std=c99 -O3 -march=x86-64-v3 -fopenmp -DCF_USE_CBLAS" "-L$OB -Wl,-rpath,$OB -lopenblas"
run "... -DCF_USE_CBLAS -lopenblas (the system's default)" "cc -std=c99 -O3 -march=x86-64-v3 -fopenmp -DCF_USE_CBLAS" "-lopenblas"
