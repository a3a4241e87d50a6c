#!/bin/sh
# bf16 (--precision bf16) beside fp32, their steps alternated in one process (cf-bench
# --alternate; the peak memory from a run of each alone), and the PyTorch peer's bf16 (CPU
# autocast, bench/torch_peer.py --bf16) beside its fp32, in the peer's contiguous format;
# medians of REPS.  Ours in each BLAS kernel set bench/common.sh's kernel_sets finds (the
# environment's, and OpenBLAS's AVX-512 ones where they compute correctly); the peer once.
# Each of our steps' rates is also printed as a percentage of the machine's peak for its
# precision: THREADS x the per-core fp32 FMA or bf16 vdpbf16ps rate (cf-bench --check-blas's
# probe); where the bf16 GEMM runs on AMX tiles (the "bf16:" line names them), bf16 % stays
# against vdpbf16ps's rate, not the tiles', and can pass 100 %.  make bench runs it last; alone:
# sh bench/bf16.sh.
# BF16_WORKLOADS chooses the workloads (model|input shape|batch|timed steps).
cd "$(dirname "$0")/.." || exit 1
REPS=${REPS:-3}; THREADS=${THREADS:-2}
PY=/usr/bin/python3
. bench/common.sh
BF16_WORKLOADS=${BF16_WORKLOADS:-"models/cosmoflow.cfg|4x128x128x128|1|2 models/cosmoflow.cfg|4x128x128x128|4|2 models/deepcam.cfg|16x768x1152|1|4"}   # even step counts: each precision first half the time
check_workloads "$BF16_WORKLOADS"
T=$(mktemp -d /tmp/cf-bench-bf16-XXXXXX)
trap 'rm -rf "$T"' EXIT
peer=1
$PY -c 'import torch' 2>/dev/null || peer=0
kernel_sets bin/cf-bench "$T/check.txt"
echo "machine: $(nproc) cores, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1); $(date -u +%Y-%m-%d); $THREADS threads; REPS=$REPS; BLAS kernel sets: $KSETS"
bin/cf-bench --model models/cosmoflow-small.cfg --input-shape 4x16x16x16 --steps 0 --no-sgemm --precision bf16 2>&1 | sed -n 's/^precision /bf16: /p' | head -1
script_measured "$T/peak.txt" bin/cf-bench --check-blas
grep '^peak' "$T/peak.txt"
# "peak per core: fp32 FMA F GFLOP/s, bf16 vdpbf16ps B GFLOP/s (Rx)": F and B
pk32=$(sed -n 's/^peak per core: fp32 FMA \([0-9.]*\) .*/\1/p' "$T/peak.txt"); pk16=$(sed -n 's/.*bf16 vdpbf16ps \([0-9.]*\) .*/\1/p' "$T/peak.txt")
pct() { echo "$1 $2" | awk -v t="$THREADS" '$2 > 0 && $1 != "" {printf "%.0f%%", 100 * $1 / ($2 * t); exit} {print "-"}'; }
ratio() { echo "$1 $2" | awk '$2 > 0 {printf "%.2f", $1 / $2; exit} {print "-"}'; }
printf '%-34s %-9s %8s %8s %5s %6s %6s %7s %7s %5s %9s %9s %5s\n' workload kernels "fp32 s/s" "bf16 s/s" ratio "fp32 %" "bf16 %" "fp32 MB" "bf16 MB" ratio "torch f32" "torch b16" ratio
for w in $BF16_WORKLOADS; do
    IFS='|' read -r model shape batch steps <<EOW
$w
EOW
    first=1
    for k in $KSETS; do
        rm -f "$T"/*.col
        r=0
        while [ $r -lt "$REPS" ]; do
            # the speeds: both precisions in one process, their steps alternated (cf-bench
            # --alternate), so that a host whose speed drifts between runs slows both alike
            script_measured "$T/o.txt" env OPENBLAS_CORETYPE=$k OMP_NUM_THREADS=$THREADS bin/cf-bench --model "$model" --input-shape "$shape" --batch "$batch" --steps "$steps" --threads "$THREADS" --no-sgemm --precision bf16 --alternate
            sed -n 's/^alternated: fp32 \([0-9.]*\) bf16 \([0-9.]*\) .*/\1 \2/p' "$T/o.txt" > "$T/alt.txt"
            [ -s "$T/alt.txt" ] || script_fail "cf-bench --alternate printed no 'alternated:' line: $(tail -c 300 "$T/o.txt")"
            cut -d' ' -f1 "$T/alt.txt" >> "$T/fp32.samples_per_s.col"; cut -d' ' -f2 "$T/alt.txt" >> "$T/bf16.samples_per_s.col"
            for p in fp32 bf16; do
                # the peak memory: each precision alone
                if [ $r -eq 0 ]; then
                    script_measured "$T/m.txt" env OPENBLAS_CORETYPE=$k OMP_NUM_THREADS=$THREADS bin/cf-bench --model "$model" --input-shape "$shape" --batch "$batch" --steps 1 --threads "$THREADS" --no-sgemm --precision $p
                    measured_field peak_rss_mb "$T/m.txt" >> "$T/$p.peak_rss_mb.col"
                fi
                if [ $peer = 1 ] && [ $first = 1 ]; then
                    script_measured "$T/t.txt" $PY bench/torch_peer.py --model "$model" --input-shape "$shape" --batch "$batch" --steps "$steps" --threads "$THREADS" $([ $p = bf16 ] && echo --bf16)
                    measured_field samples_per_s "$T/t.txt" >> "$T/torch_$p.col"
                fi
            done
            r=$((r + 1))
        done
        f32=$(median < "$T/fp32.samples_per_s.col"); b16=$(median < "$T/bf16.samples_per_s.col")
        gps=$(echo "$(field gflops_per_s "$T/o.txt") $(field samples_per_s "$T/o.txt")" | awk '$2 > 0 {print $1 / $2}')   # GFLOP per sample
        g32=$(echo "$f32 $gps" | awk '{print $1 * $2}'); g16=$(echo "$b16 $gps" | awk '{print $1 * $2}')
        m32=$(median < "$T/fp32.peak_rss_mb.col"); m16=$(median < "$T/bf16.peak_rss_mb.col")
        t32=-; t16=-
        if [ $peer = 1 ] && [ $first = 1 ]; then t32=$(median < "$T/torch_fp32.col"); t16=$(median < "$T/torch_bf16.col"); fi
        printf '%-34s %-9s %8s %8s %5s %6s %6s %7s %7s %5s %9s %9s %5s\n' "$(basename "$model") $shape b$batch" "$k" "$f32" "$b16" "$(ratio "$b16" "$f32")" \
            "$(pct "$g32" "$pk32")" "$(pct "$g16" "$pk16")" "$m32" "$m16" "$(ratio "$m16" "$m32")" "$t32" "$t16" "$(ratio "$t16" "$t32")"
        first=0
    done
done
echo "fp32 %, bf16 %: the step's GFLOP/s against $THREADS x the per-core peak above for that precision; torch: its fp32 and its bf16 autocast, one run per workload (the first kernel set's)"
