#!/bin/sh
# make bench: this project's cf-bench beside the PyTorch peer, alternately, in one run; medians
# of REPS repetitions.  Each workload runs under the BLAS kernels the environment sets and,
# where the CPU has AVX-512 (F, BW, DQ, VL) and OpenBLAS's AVX-512 kernels pass cf-bench
# --check-blas, under those too (OPENBLAS_CORETYPE=SkylakeX, set in that command alone).  Every
# figure names its kernels; "% sgemm" is the training step's rate against a 2048^3 sgemm
# measured in the same process after each step.  The peer (bench/torch_peer.py) runs in the
# environment's setting, in the faster of its two memory formats, and its health is shown: its
# first convolution's rate against our sgemm rate.  Then every convolution layer against oneDNN
# (bench/onednn.sh, where libdnnl-dev is installed).  Then the node's scaling: 1 -> 2 threads and
# 1 -> 2 MPI ranks as parallel efficiency, beside the gradient allreduce's time.
cd "$(dirname "$0")/.." || exit 1
REPS=${REPS:-3}; THREADS=${THREADS:-2}
PY=/usr/bin/python3
. tools/mpi.sh
. bench/common.sh
T=$(mktemp -d /tmp/cf-bench-XXXXXX)
trap 'rm -rf "$T"' EXIT
peer=1
$PY -c 'import torch' 2>/dev/null || { echo "bench: python3-torch is absent: PyTorch figures skipped (apt-get install python3-torch)"; peer=0; }
echo "machine: $(nproc) cores, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1); $(date -u +%Y-%m-%d)"
kernel_sets bin/cf-bench "$T/check.txt"
for k in $KSETS; do
    printf 'kernels %-9s ' "$k"; env OPENBLAS_CORETYPE=$k bin/cf-bench --model models/cosmoflow-small.cfg --steps 1 --no-sgemm 2>&1 | grep -E '^blas:' | head -1
done

printf '\n%-38s %-9s %9s %7s %8s %9s %6s %8s %8s %6s\n' workload kernels "ours s/s" "% sgemm" "sgemm GF" "torch s/s" ratio "ours MB" "torch MB" ratio
for w in $WORKLOADS; do
    IFS='|' read -r model shape batch steps <<EOW
$w
EOW
    rm -f "$T"/*.col
    fmt=contiguous
    if [ $peer = 1 ]; then
        script_measured "$T/probe.txt" $PY bench/torch_peer.py --model "$model" --input-shape "$shape" --batch "$batch" --threads "$THREADS" --memory-format probe
        fmt=$(sed -n 's/^best_format \([a-z_]*\).*/\1/p' "$T/probe.txt"); [ -n "$fmt" ] || fmt=contiguous
    fi
    r=0
    while [ $r -lt "$REPS" ]; do
        for k in $KSETS; do
            script_measured "$T/o.txt" env OPENBLAS_CORETYPE=$k OMP_NUM_THREADS=$THREADS bin/cf-bench --model "$model" --input-shape "$shape" --batch "$batch" --steps "$steps" --threads "$THREADS"
            for f in samples_per_s sgemm_peak_pct gflops_per_s peak_rss_mb; do measured_field $f "$T/o.txt" >> "$T/$k.$f.col"; done
        done
        if [ $peer = 1 ]; then
            script_measured "$T/t.txt" $PY bench/torch_peer.py --model "$model" --input-shape "$shape" --batch "$batch" --steps "$steps" --threads "$THREADS" --memory-format "$fmt"
            for f in samples_per_s peak_rss_mb first_conv_gflops; do measured_field $f "$T/t.txt" >> "$T/torch.$f.col"; done
        fi
        r=$((r + 1))
    done
    ts=-; tm=-
    [ $peer = 1 ] && { ts=$(median < "$T/torch.samples_per_s.col"); tm=$(median < "$T/torch.peak_rss_mb.col"); }
    for k in $KSETS; do
        os=$(median < "$T/$k.samples_per_s.col"); pct=$(median < "$T/$k.sgemm_peak_pct.col"); om=$(median < "$T/$k.peak_rss_mb.col")
        sg=$(paste -d' ' "$T/$k.gflops_per_s.col" "$T/$k.sgemm_peak_pct.col" | awk '$2 > 0 {print 100 * $1 / $2}' | median)
        eval "sgemm_$k=\$sg"
        printf '%-38s %-9s %9s %7s %8.0f %9s %6s %8s %8s %6s\n' "$(basename "$model") $shape b$batch" "$k" "$os" "$pct" "$sg" "$ts" \
            "$(echo "$os $ts" | awk '$2 > 0 {printf "%.2f", $1/$2}')" "$om" "$tm" "$(echo "$om $tm" | awk '$2 > 0 {printf "%.2f", $1/$2}')"
    done
    if [ $peer = 1 ]; then   # the peer's health: its first convolution alone against our sgemm rate
        fc=$(median < "$T/torch.first_conv_gflops.col"); eval "sg=\$sgemm_$ENVK"
        pct=$(echo "$fc $sg" | awk '$2 > 0 {printf "%.0f", 100 * $1 / $2}')
        printf '  peer: PyTorch %s, %s memory format, first convolution %s GFLOP/s = %s %% of the %s sgemm rate%s\n' \
            "$($PY -c 'import torch; print(torch.__version__)')" "$fmt" "$fc" "$pct" "$ENVK" \
            "$( [ -n "$pct" ] && [ "$pct" -lt 25 ] && echo ': FAR BELOW the machine, so its figures understate PyTorch on a healthy build')"
    fi
done

# ---- every convolution layer against oneDNN (bench/onednn.sh; alone: make bench-onednn)
echo
sh bench/onednn.sh || exit 1

# ---- the node's scaling: threads and ranks, each as parallel efficiency
mpi_launcher bin/cf-bench
echo
printf '%-38s %-9s %10s %10s %9s %10s %9s %12s\n' workload kernels "1 thr s/s" "2 thr s/s" "eff thr" "2 rank s/s" "eff rank" "allreduce ms"
for w in "models/cosmoflow.cfg|4x128x128x128|1|2" "models/deepcam.cfg|16x768x1152|1|1"; do
    IFS='|' read -r model shape batch steps <<EOW
$w
EOW
    k=$ENVK
    B="bin/cf-bench --model $model --input-shape $shape --batch $batch --steps $steps --no-sgemm"
    script_measured "$T/s1.txt" env OPENBLAS_CORETYPE=$k $B --threads 1; s1=$(measured_field samples_per_s "$T/s1.txt") || exit 1
    script_measured "$T/s2.txt" env OPENBLAS_CORETYPE=$k $B --threads 2; s2=$(measured_field samples_per_s "$T/s2.txt") || exit 1
    r2=-; ar=-; er=-
    if [ -n "$MPIRUN" ]; then
        # two ranks of one thread each; a data-parallel step is the step plus one gradient allreduce
        script_measured "$T/r2.txt" env OPENBLAS_CORETYPE=$k $MPIRUN -np 2 env OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 $B --threads 1 --allreduce
        ar=$(sed -n 's/^allreduce_ms \([0-9.]*\).*/\1/p' "$T/r2.txt"); rs=$(measured_field samples_per_s "$T/r2.txt") || exit 1
        [ -n "$ar" ] || script_fail "the 2-rank run printed no allreduce_ms: $(tail -c 300 "$T/r2.txt")"
        r2=$(echo "$rs $ar $batch" | awk '$1 > 0 {t = $3 / $1 + $2 / 1000; printf "%.4f", 2 * $3 / t}')
    fi
    printf '%-38s %-9s %10s %10s %8s%% %10s %8s%% %12s\n' "$(basename "$model") $shape b$batch" "$k" "$s1" "$s2" \
        "$(echo "$s1 $s2" | awk '$1 > 0 {printf "%.0f", 50 * $2 / $1}')" "$r2" "$(echo "$s1 $r2" | awk '$1 > 0 && $2 > 0 {printf "%.0f", 50 * $2 / $1}')" "$ar"
done


# ---- bf16 beside fp32, ours and the peer's (bench/bf16.sh, also run alone)
echo
sh bench/bf16.sh || exit 1
