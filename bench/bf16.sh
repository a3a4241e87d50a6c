#!/bin/sh
# bf16 (--precision bf16) beside fp32 in the same process setting, and the PyTorch peer's bf16
# (CPU autocast, bench/torch_peer.py --bf16) beside its fp32, in the environment's BLAS
# kernels and the peer's contiguous format; medians of REPS; then the core's peak rates
# (cf-bench --check-blas).  make bench runs it last; alone: sh bench/bf16.sh.
# BF16_WORKLOADS chooses the workloads (model|input shape|batch|timed steps).
cd "$(dirname "$0")/.." || exit 1
REPS=${REPS:-3}; THREADS=${THREADS:-2}
PY=/usr/bin/python3
. bench/common.sh
T=$(mktemp -d /tmp/cf-bench-bf16-XXXXXX)
trap 'rm -rf "$T"' EXIT
peer=1
$PY -c 'import torch' 2>/dev/null || peer=0
echo "machine: $(nproc) cores, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1); $(date -u +%Y-%m-%d); BLAS kernels ${OPENBLAS_CORETYPE:-default}; $THREADS threads; REPS=$REPS"
BF16_WORKLOADS=${BF16_WORKLOADS:-"models/cosmoflow.cfg|4x128x128x128|1|2 models/cosmoflow.cfg|4x128x128x128|4|1 models/deepcam.cfg|16x768x1152|1|1"}
printf '%-38s %9s %9s %6s %8s %8s %6s %10s %10s %6s\n' workload "fp32 s/s" "bf16 s/s" ratio "fp32 MB" "bf16 MB" ratio "torch fp32" "torch bf16" ratio
for w in $BF16_WORKLOADS; do
    IFS='|' read -r model shape batch steps <<EOW
$w
EOW
    rm -f "$T"/*.col
    r=0
    while [ $r -lt "$REPS" ]; do
        for p in fp32 bf16; do
            OMP_NUM_THREADS=$THREADS bin/cf-bench --model "$model" --input-shape "$shape" --batch "$batch" --steps "$steps" --threads "$THREADS" --no-sgemm --precision $p > "$T/o.txt" 2>&1
            for f in samples_per_s peak_rss_mb; do field $f "$T/o.txt" >> "$T/$p.$f.col"; done
            if [ $peer = 1 ]; then
                $PY bench/torch_peer.py --model "$model" --input-shape "$shape" --batch "$batch" --steps "$steps" --threads "$THREADS" $([ $p = bf16 ] && echo --bf16) > "$T/t.txt" 2>&1
                field samples_per_s "$T/t.txt" >> "$T/torch_$p.col"
            fi
        done
        r=$((r + 1))
    done
    f32=$(median < "$T/fp32.samples_per_s.col"); b16=$(median < "$T/bf16.samples_per_s.col")
    m32=$(median < "$T/fp32.peak_rss_mb.col"); m16=$(median < "$T/bf16.peak_rss_mb.col")
    t32=-; t16=-; [ $peer = 1 ] && { t32=$(median < "$T/torch_fp32.col"); t16=$(median < "$T/torch_bf16.col"); }
    printf '%-38s %9s %9s %6s %8s %8s %6s %10s %10s %6s\n' "$(basename "$model") $shape b$batch" "$f32" "$b16" \
        "$(echo "$b16 $f32" | awk '$2 > 0 {printf "%.2f", $1/$2}')" "$m32" "$m16" "$(echo "$m16 $m32" | awk '$2 > 0 {printf "%.2f", $1/$2}')" \
        "$t32" "$t16" "$(echo "$t16 $t32" | awk '$2 > 0 {printf "%.2f", $1/$2}')"
done
bin/cf-bench --model models/cosmoflow-small.cfg --input-shape 4x16x16x16 --steps 0 --no-sgemm --precision bf16 2>&1 | sed -n 's/^precision /bf16: /p' | head -1
bin/cf-bench --check-blas 2>&1 | grep '^peak'
