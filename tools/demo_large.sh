#!/bin/sh
# make demo-large: whole 256^3 universes, each split across 4 ranks of this machine
# (--spatial 4; docs/mpi.md, "A sample across ranks").  Synthetic universes kept whole in the
# numpy layout, whose depth slabs each rank reads alone; models/cosmoflow-256.cfg (the MLPerf
# network with a sixth stage) trained and evaluated split the same way; one rank's plan
# (cf-check --summary --spatial 4) beside the largest rank's measured peak memory.  The
# universes are the lognormal ones (cf-synth's default): a 256^3 particle-mesh universe takes
# minutes and gigabytes each (docs/science.md); the demo shows the pipeline, not the science.
# DEMO_TRAIN, DEMO_VAL, DEMO_EPOCHS, DEMO_SIZE (a multiple of 128), DEMO_RANKS choose.
# Last line: "demo: val_mae V baseline_mae B peak_rss_mb R" (R: the largest rank's peak).
set -e
cd "$(dirname "$0")/.."
OUT=${DEMO_OUT:-data/demo-large}
TRAIN=${DEMO_TRAIN:-16}; VAL=${DEMO_VAL:-4}; EPOCHS=${DEMO_EPOCHS:-2}; S=${DEMO_SIZE:-256}; K=${DEMO_RANKS:-4}
. tools/mpi.sh
script_whole DEMO_TRAIN "$TRAIN" 1 100000000; script_whole DEMO_VAL "$VAL" 1 100000000; script_whole DEMO_EPOCHS "$EPOCHS" 1 1000000
script_whole DEMO_SIZE "$S" 128 8192; [ $((S % 128)) = 0 ] || script_fail "DEMO_SIZE='$S' is not a multiple of 128"
script_whole DEMO_RANKS "$K" 1 1024
mpi_launcher bin/cf-train
[ -n "$MPIRUN" ] || { echo "demo: make demo-large needs an MPI build and its launcher (apt-get install mpich libmpich-dev, then make)"; exit 1; }
demo_dir "$OUT"
SYN="--size $S --voxel 2 --spread 0.5 --format npy"
t0=$(date +%s)
echo "demo: $TRAIN training and $VAL validation universes of ${S}^3 x 4, whole, in $OUT/"
bin/cf-synth cosmo --out "$OUT/train" --samples "$TRAIN" --seed 1 $SYN
bin/cf-synth cosmo --out "$OUT/validation" --samples "$VAL" --seed 2 $SYN
t1=$(date +%s)
echo "demo: universes in $((t1 - t0)) s; one rank's share of each (cf-check --summary --spatial $K):"
bin/cf-check --model models/cosmoflow-256.cfg --input-shape 4x${S}x${S}x${S} --summary --spatial "$K" | grep -E '^(per rank|training memory per rank)'
echo "demo: training models/cosmoflow-256.cfg for $EPOCHS epochs, each universe split across $K ranks (checkpoint $OUT/cosmoflow-256.cfck)"
with_stderr() { "$@" 2>&1; }   # (the log keeps cf-train's stderr too: its peak memory line)
script_logged "$OUT/train.log" with_stderr $MPIRUN -np "$K" env OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 bin/cf-train --model models/cosmoflow-256.cfg --input-shape 4x${S}x${S}x${S} \
    --train "$OUT/train" --val "$OUT/validation" --out "$OUT/cosmoflow-256.cfck" --spatial "$K" --batch 1 --epochs "$EPOCHS" \
    --lr 0.001 --base-batch 0 --warmup-epochs 0 --decay none --log-ratio --augment --progress
t2=$(date +%s)
script_logged "$OUT/eval.txt" $MPIRUN -np "$K" env OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 bin/cf-eval --weights "$OUT/cosmoflow-256.cfck" --data "$OUT/validation" \
    --baseline "$OUT/train" --spatial "$K"
t3=$(date +%s)
mae=$(sed -n 's/^mae //p' "$OUT/eval.txt"); base=$(sed -n 's/^baseline_mae //p' "$OUT/eval.txt")
rss=$(sed -n 's/^cf-train: peak memory a rank \([0-9]*\) MB.*/\1/p' "$OUT/train.log")
echo "demo: universes $((t1 - t0)) s, training $((t2 - t1)) s, evaluation $((t3 - t2)) s"
echo "demo: val_mae $mae baseline_mae $base peak_rss_mb $rss"
