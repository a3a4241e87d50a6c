#!/bin/sh
# make science: the CosmoFlow papers' claim put to a test on universes with collapsed
# structure.  Particle-mesh universes (cf-synth cosmo --pm, tools/synth_pm.h) at 2 Mpc/h
# voxels, where halos form; models/cosmoflow-small.cfg trained on them as make demo trains;
# the tapered power-spectrum estimator (cf-eval --spectrum) fitted on the same training volumes,
# with the network's budget and with a long fit.  The claim: the network reads information
# beyond the power spectrum, so its MAE is below the estimator's (the moonshot: by 10 % or
# more).  About 30 minutes on 2 cores; docs/science.md reports the result.
# Last line: "science: cnn_mae V spectrum_mae P spectrum_long_mae Q".
set -e
cd "$(dirname "$0")/.."
OUT=${SCI_OUT:-data/science}
TRAIN=${SCI_TRAIN:-2048}
VAL=${SCI_VAL:-512}
EPOCHS=${SCI_EPOCHS:-16}
PM=${SCI_PM:-6}
. tools/mpi.sh
demo_ranks bin/cf-train   # RUN and BATCH (tools/mpi.sh), as make demo
DECAY=$((EPOCHS * 3 / 4 - 1)); [ "$DECAY" -ge 1 ] || DECAY=1; DECAY=$DECAY:0.2   # LR x 0.2 for the last quarter
bin/cf-synth cosmo --help 2>&1 | grep -q -- '--pm ' || { echo "science: cf-synth was built without FFTW (apt-get install libfftw3-dev, then make)"; exit 1; }
demo_dir "$OUT"
SYN="--size 32 --voxel 2 --pm $PM --spread 0.5"
echo "science: $TRAIN training and $VAL validation particle-mesh universes of 32^3 x 4 ($SYN) in $OUT/"
t0=$(date +%s)
bin/cf-synth cosmo --out "$OUT/train" --samples "$TRAIN" --seed 1 $SYN --stats
bin/cf-synth cosmo --out "$OUT/validation" --samples "$VAL" --seed 2 $SYN
t1=$(date +%s)
echo "science: universes in $((t1 - t0)) s; training models/cosmoflow-small.cfg for $EPOCHS epochs"
$RUN bin/cf-train --model models/cosmoflow-small.cfg --train "$OUT/train" --val "$OUT/validation" \
    --out "$OUT/cosmoflow-small.cfck" --epochs "$EPOCHS" --batch $BATCH --lr 0.003 --base-batch 8 \
    --warmup-epochs 1 --decay "$DECAY" --log-ratio --augment --png "$OUT/pictures" --no-progress | tee "$OUT/train.log"
t2=$(date +%s)
bin/cf-eval --weights "$OUT/cosmoflow-small.cfck" --data "$OUT/validation" --baseline "$OUT/train" \
    --spectrum "$OUT/train" --png "$OUT/pictures" --pred "$OUT/predictions.npy" | tee "$OUT/eval.txt"
bin/cf-eval --weights "$OUT/cosmoflow-small.cfck" --data "$OUT/validation" --spectrum "$OUT/train" --spectrum-epochs 200 > "$OUT/eval_long.txt"
t3=$(date +%s)
sed -n 's/^spectrum_mae/spectrum_long_mae/p' "$OUT/eval_long.txt"
mae=$(sed -n 's/^mae //p' "$OUT/eval.txt")
spec=$(sed -n 's/^spectrum_mae //p' "$OUT/eval.txt")
long=$(sed -n 's/^spectrum_mae //p' "$OUT/eval_long.txt")
echo "science: universes $((t1 - t0)) s, training $((t2 - t1)) s, evaluation $((t3 - t2)) s; pictures in $OUT/pictures/"
echo "$mae $spec $long" | awk '{b = $2 < $3 ? $2 : $3; printf "science: the network'"'"'s MAE is %.0f %% of the best power-spectrum estimator'"'"'s (%s)\n", 100 * $1 / b,
    $1 <= 0.9 * b ? "it beats the power spectrum by 10 % or more" : $1 < b ? "below it, by less than 10 %" : "not below it"}'
echo "science: cnn_mae $mae spectrum_mae $spec spectrum_long_mae $long"
