#!/bin/sh
# Data-parallel scaling model, from figures measured here (MODEL=models/deepcam.cfg for DeepCAM):
#   T  = one training step of MODEL (its full input, batch 1 per rank), cf-bench, 1 rank
#        (STEP=seconds reuses a step time measured before, e.g. by make bench)
#   n  = gradient bytes; the allreduce of them at 2 ranks on this machine (shared memory)
# and a network (one rank per node): latency ALPHA s, bandwidth BW bytes/s, stated (defaults:
# 5 us and 10 GB/s, typical of InfiniBand HDR or Slingshot) or measured on a link:
# FIT="n1 t1 n2 t2" gives two allreduce sizes in bytes and their times in seconds at 2 ranks
# (cf-bench --allreduce --allreduce-floats N; bench/link.sh does it on an emulated link).
# The allreduce: MPICH's algorithm for large messages, reduce-scatter by recursive halving and
# allgather by recursive doubling (Rabenseifner):
#     t(p) = 2 log2(p) ALPHA + 2 (p-1)/p n / BW
# (ALG=ring: Open MPI's ring, 2 (p-1) ALPHA + 2 (p-1)/p n / BW; the same bandwidth term).  At
# 2 ranks both are 2 ALPHA + n / BW, which FIT solves for.  Without overlap a step takes
# T + t(p); with --overlap the reduction hides behind backward (about 2/3 of T), so only
# max(0, t(p) - 2T/3) shows.  Efficiency = T / (step time).
cd "$(dirname "$0")/.." || exit 1
. tools/mpi.sh
ALPHA=${ALPHA:-5e-6}; BW=${BW:-1.0e10}; FAST=${FAST:-15}; MODEL=${MODEL:-models/cosmoflow.cfg}; ALG=${ALG:-rabenseifner}
# the variables first: numbers where numbers are meant, else the end naming them
number() { echo "$2" | grep -Eq '^[0-9]*\.?[0-9]+([eE][-+]?[0-9]+)?$' && awk -v x="$2" 'BEGIN { exit !(x > 0) }' || script_fail "$1='$2' is not a number above 0"; }
number ALPHA "$ALPHA"; number BW "$BW"; number FAST "$FAST"; [ -z "$STEP" ] || number STEP "$STEP"
[ -f "$MODEL" ] || script_fail "MODEL=$MODEL: no such file"
case $ALG in rabenseifner|ring) ;; *) script_fail "ALG='$ALG' is not rabenseifner or ring";; esac
if [ -n "$FIT" ]; then
    set -- $FIT
    [ $# = 4 ] || script_fail "FIT='$FIT' is not four numbers n1 t1 n2 t2"
    for x in "$@"; do number FIT "$x"; done
    awk -v n1="$1" -v t1="$2" -v n2="$3" -v t2="$4" 'BEGIN { exit !(n2 > n1 && t2 > t1) }' || script_fail "FIT='$FIT': the second size and time must exceed the first"
fi
if [ -n "$FIT" ]; then
    set -- $FIT
    BW=$(awk -v n1="$1" -v t1="$2" -v n2="$3" -v t2="$4" 'BEGIN { printf "%.6g", (n2 - n1) / (t2 - t1) }')
    ALPHA=$(awk -v n1="$1" -v t1="$2" -v bw="$BW" 'BEGIN { a = (t1 - n1 / bw) / 2; printf "%.6g", a > 0 ? a : 0 }')
    echo "fitted from $FIT: alpha $ALPHA s, bandwidth $BW B/s"
fi
mpi_launcher bin/cf-bench   # MPIRUN: the launcher of this build's MPI, named (not the bare mpirun)
[ -n "$MPIRUN" ] || { echo "scaling: bin/cf-bench has no MPI launcher"; exit 1; }
T=$(mktemp -d /tmp/cf-scaling-XXXXXX)
trap 'rm -rf "$T"' EXIT
if [ -z "$STEP" ]; then
    script_measured "$T/step.txt" bin/cf-bench --model "$MODEL" --steps 1 --no-sgemm
    step=$(sed -n 's/.*: \([0-9.]*\) s\/step.*/\1/p' "$T/step.txt")
    [ -n "$step" ] || script_fail "cf-bench printed no s/step: $(tail -c 300 "$T/step.txt")"
else step=$STEP; fi
# the gradient does not depend on the input size: the allreduce is timed on a small input
small=$(case "$MODEL" in *deepcam*|*tiramisu*|*deeplab*) echo 16x96x144;; *) echo 4x128x128x128;; esac)
script_measured "$T/ar.txt" $MPIRUN -np 2 env OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 bin/cf-bench --model "$MODEL" --input-shape "$small" --allreduce --steps 1 --no-sgemm
ar=$(grep '^allreduce_ms ' "$T/ar.txt") || script_fail "the 2-rank run printed no allreduce_ms: $(tail -c 300 "$T/ar.txt")"
echo "measured: $MODEL step (batch 1) $step s; 2-rank allreduce on this machine ($MPIRUN): $ar"
echo "model: $ALG allreduce, alpha $ALPHA s, bandwidth $BW B/s per node; a 'fast node' computes $FAST x faster than this one"
echo "$ar" | awk -v T="$step" -v a="$ALPHA" -v bw="$BW" -v fast="$FAST" -v alg="$ALG" '{
    n = $4 * 1e6
    printf "%8s %12s %14s %14s %16s %16s\n", "nodes", "t_ar (ms)", "eff (ours)", "eff overlap", "eff fast node", "fast + overlap"
    split("2 8 64 512 1024 8192", P, " ")
    for (i = 1; i <= 6; i++) {
        p = P[i]; lat = alg == "ring" ? 2 * (p - 1) * a : 2 * log(p) / log(2) * a
        t = lat + 2 * (p - 1) / p * n / bw
        Tf = T / fast
        e1 = T / (T + t); e2 = T / (T + ((t - 2 * T / 3) > 0 ? t - 2 * T / 3 : 0))
        e3 = Tf / (Tf + t); e4 = Tf / (Tf + ((t - 2 * Tf / 3) > 0 ? t - 2 * Tf / 3 : 0))
        printf "%8d %12.2f %13.1f%% %13.1f%% %15.1f%% %15.1f%%\n", p, 1e3 * t, 100 * e1, 100 * e2, 100 * e3, 100 * e4
    }
}'
