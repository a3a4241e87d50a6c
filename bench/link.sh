#!/bin/sh
# The scaling model against a measured link (root): two emulated nodes (tests/nodes.sh) on a
# link of RATE (default 1gbit), one single-threaded rank each, the job started by MPICH's hydra
# over TCP.  Measures the allreduce of MODEL's gradient (every variant of cf-bench --allreduce),
# the link's latency and bandwidth from two sizes, and the 2-node training step; predicts the
# allreduce (n / BW, and 2 alpha + n / BW fitted) and the 2-node step (the step with both ranks
# on this machine over shared memory, less its allreduce, plus the link's), and prints
# prediction beside measurement.  STEPS=0: the allreduce alone (DeepCAM's step takes minutes).  docs/mpi.md, "The scaling model against a link".
cd "$(dirname "$0")/.." || exit 1
RATE=${RATE:-1gbit}; MODEL=${MODEL:-models/cosmoflow.cfg}; STEPS=${STEPS:-3}
. tools/mpi.sh   # (script_whole, script_fail, script_measured: the variables first, a failed run the end)
script_whole STEPS "$STEPS" 0 100000
[ -f "$MODEL" ] || script_fail "MODEL=$MODEL: no such file"
echo "$RATE" | grep -Eq '^[0-9.]+[mg]bit$' || script_fail "RATE='$RATE' is not a rate in mbit or gbit (1gbit)"
[ "$(id -u)" = 0 ] || { echo "link: needs root (network namespaces)"; exit 1; }
mpi_launcher bin/cf-bench
echo "$MPIRUN" | grep -q mpich || command -v mpiexec.hydra > /dev/null || { echo "link: needs the MPICH build and mpiexec.hydra"; exit 1; }
T=$(mktemp -d /tmp/cf-link-XXXXXX)
. tests/nodes.sh
trap 'nodes_down; rm -rf "$T"' EXIT INT TERM
nodes_up 2 "$T/cluster" && link_rate 1 "$RATE" && link_rate 2 "$RATE" || exit 1
H="mpiexec.hydra $NODES_HYDRA -n 2 -ppn 1 -genv OMP_NUM_THREADS 1 -genv OPENBLAS_NUM_THREADS 1"
BENCH="$(pwd)/bin/cf-bench --model $(pwd)/$MODEL --no-sgemm --threads 1"
bits=$(echo "$RATE" | awk '{ v = $1 + 0; if ($1 ~ /gbit/) v *= 1e9; else if ($1 ~ /mbit/) v *= 1e6; print v }')

echo "== the allreduce of $MODEL's gradient, 2 nodes at $RATE (medians of 8)"
script_measured "$T/run.txt" node_run 1 $H $BENCH --allreduce --steps 0
grep allreduce_ms "$T/run.txt" | tee "$T/ar.txt"
[ -s "$T/ar.txt" ] || script_fail "the allreduce printed no allreduce_ms"
: > "$T/fit.txt"
for f in 1024 4194304; do
    script_measured "$T/run.txt" node_run 1 $H $BENCH --allreduce --allreduce-floats $f --steps 0
    grep '^allreduce_ms ' "$T/run.txt" | awk -v n=$((4 * f)) '{ print n, $2 / 1e3 }' >> "$T/fit.txt"
done
[ "$(wc -l < "$T/fit.txt")" = 2 ] || script_fail "the two allreduce sizes printed no allreduce_ms"
fit=$(tr '\n' ' ' < "$T/fit.txt")
shm=0; shm_ar=0; link=0
if [ "$STEPS" != 0 ]; then
    echo "== a training step of $MODEL, batch 1 per rank, $STEPS steps"
    script_measured "$T/run.txt" $MPIRUN -np 2 env OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 $BENCH --steps "$STEPS"
    shm=$(sed -n 's/.*: \([0-9.]*\) s\/step.*/\1/p' "$T/run.txt")
    script_measured "$T/run.txt" $MPIRUN -np 2 env OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 $BENCH --allreduce --steps 0
    shm_ar=$(sed -n 's/^allreduce_ms \([0-9.]*\).*/\1/p' "$T/run.txt")
    script_measured "$T/run.txt" node_run 1 $H $BENCH --steps "$STEPS"
    link=$(sed -n 's/.*: \([0-9.]*\) s\/step.*/\1/p' "$T/run.txt")
    [ -n "$shm" ] && [ -n "$shm_ar" ] && [ -n "$link" ] || script_fail "a step printed no time (shared memory '$shm' s, its allreduce '$shm_ar' ms, the link '$link' s)"
    echo "2 ranks on this machine (shared memory, $MPIRUN): $shm s/step, of which the allreduce $shm_ar ms"
    echo "2 nodes over the emulated link: $link s/step"
fi
awk -v bits="$bits" -v fit="$fit" -v shm="$shm" -v shm_ar="$shm_ar" -v link="$link" -v ar="$(grep '^allreduce_ms ' "$T/ar.txt")" 'BEGIN {
    split(ar, A, " "); split(fit, F, " ")
    n = A[4] * 1e6; meas = A[2] / 1e3; bw_set = bits / 8
    bw = (F[3] - F[1]) / (F[4] - F[2]); alpha = (F[2] - F[1] / bw) / 2; if (alpha < 0) alpha = 0
    printf "== prediction against measurement\n"
    printf "allreduce of %.1f MB: n / BW at the set rate %.0f MB/s: %.0f ms; measured %.0f ms (%.2f x)\n", n / 1e6, bw_set / 1e6, 1e3 * n / bw_set, 1e3 * meas, meas / (n / bw_set)
    printf "the link fitted from 2 sizes (%s): alpha %.1f us, bandwidth %.0f MB/s; 2 alpha + n / BW = %.0f ms (%.2f x)\n", fit, 1e6 * alpha, bw / 1e6, 1e3 * (2 * alpha + n / bw), meas / (2 * alpha + n / bw)
    if (link == 0) exit
    pred = shm - shm_ar / 1e3 + 2 * alpha + n / bw
    printf "2-node step: predicted %.3f s (%.3f computing + %.3f allreduce), measured %.3f s (%.2f x)\n", pred, shm - shm_ar / 1e3, 2 * alpha + n / bw, link, link / pred
}'
