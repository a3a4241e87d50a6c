#!/bin/sh
# make bench: this project's cf-bench beside the PyTorch peer, alternately, in one run;
# medians of REPS repetitions and the ratio ours / PyTorch.  Both use THREADS threads.
cd "$(dirname "$0")/.." || exit 1
REPS=${REPS:-3}; THREADS=${THREADS:-2}
PY=/usr/bin/python3
peer=1
$PY -c 'import torch' 2>/dev/null || { echo "bench: python3-torch is absent: PyTorch figures skipped (apt-get install python3-torch)"; peer=0; }
median() { sort -n | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }
field() { tail -1 | awk -v k="$1" '{for (i = 1; i < NF; i++) if ($i == k) print $(i+1)}'; }
echo "machine: $(nproc) cores, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1); $(date -u +%Y-%m-%d)"
bin/cf-bench --model models/cosmoflow-small.cfg --steps 1 --no-sgemm 2>&1 | grep -E '^blas:|OpenBLAS runs'   # which kernels the BLAS runs
printf '%-42s %10s %10s %7s %10s %10s %7s\n' workload "ours s/s" "torch s/s" ratio "ours MB" "torch MB" ratio
for w in "models/cosmoflow.cfg|4x128x128x128|1|2" "models/cosmoflow.cfg|4x128x128x128|4|1" "models/cosmoflow-small.cfg|4x32x32x32|8|4" "models/deepcam.cfg|16x768x1152|1|1"; do
    IFS='|' read -r model shape batch steps <<EOW
$w
EOW
    : > /tmp/cf-bench-ours.$$; : > /tmp/cf-bench-torch.$$
    r=0
    while [ $r -lt "$REPS" ]; do
        OMP_NUM_THREADS=$THREADS bin/cf-bench --model "$model" --input-shape "$shape" --batch "$batch" --steps "$steps" --threads "$THREADS" --no-sgemm > /tmp/cf-b.$$ 2>&1
        echo "$(field samples_per_s < /tmp/cf-b.$$) $(field peak_rss_mb < /tmp/cf-b.$$)" >> /tmp/cf-bench-ours.$$
        if [ $peer = 1 ]; then
            $PY bench/torch_peer.py --model "$model" --input-shape "$shape" --batch "$batch" --steps "$steps" --threads "$THREADS" > /tmp/cf-b.$$ 2>&1
            echo "$(field samples_per_s < /tmp/cf-b.$$) $(field peak_rss_mb < /tmp/cf-b.$$)" >> /tmp/cf-bench-torch.$$
        fi
        r=$((r + 1))
    done
    os=$(cut -d' ' -f1 /tmp/cf-bench-ours.$$ | median); om=$(cut -d' ' -f2 /tmp/cf-bench-ours.$$ | median)
    if [ $peer = 1 ]; then
        ts=$(cut -d' ' -f1 /tmp/cf-bench-torch.$$ | median); tm=$(cut -d' ' -f2 /tmp/cf-bench-torch.$$ | median)
        printf '%-42s %10s %10s %7.2f %10s %10s %7.2f\n' "$(basename "$model") $shape batch $batch" "$os" "$ts" "$(echo "$os $ts" | awk '{print $1/$2}')" "$om" "$tm" "$(echo "$om $tm" | awk '{print $1/$2}')"
    else
        printf '%-42s %10s %10s %7s %10s %10s %7s\n' "$(basename "$model") $shape batch $batch" "$os" - - "$om" - -
    fi
done
rm -f /tmp/cf-bench-ours.$$ /tmp/cf-bench-torch.$$ /tmp/cf-b.$$
