#!/bin/sh
# make demo-climate: DeepCAM-style segmentation on synthetic climate snapshots, end to end with
# the project's own tools: cf-synth climate -> cf-train (models/deepcam-small.cfg, the
# reference's LAMB and weighted loss) -> cf-eval with pictures.
# Why 128 x 192 and --feature-scale 2.5: a 768 x 1152 snapshot costs 36x more per step; at
# 128 x 192 a cyclone of physical size (4-6 degrees) would be 3 pixels across, so the demo
# draws features 2.5x larger (docs/science.md, "The climate demo").
# Last line: "demo: val_miou V baseline_miou B" (B: predicting background everywhere).
set -e
cd "$(dirname "$0")/.."
PRECISION=${PRECISION:-fp32}   # make demo-climate PRECISION=bf16: train and evaluate in bf16
OUT=${DEMO_OUT:-data/demo-climate$([ "$PRECISION" = fp32 ] || echo "-$PRECISION")}
TRAIN=${DEMO_TRAIN:-512}
VAL=${DEMO_VAL:-64}
EPOCHS=${DEMO_EPOCHS:-6}
SYN="--height 128 --width 192 --feature-scale 2.5"
. tools/mpi.sh
script_precision "$PRECISION"; script_whole DEMO_TRAIN "$TRAIN" 8 100000000; script_whole DEMO_VAL "$VAL" 1 100000000
script_whole DEMO_EPOCHS "$EPOCHS" 1 1000000
demo_dir "$OUT"
echo "demo: $TRAIN training and $VAL validation snapshots of 128x192x16 in $OUT/"
bin/cf-synth climate --out "$OUT/train" --samples "$TRAIN" --seed 1 $SYN --stats
# validation is normalized with the training set's min/max, as in the reference
bin/cf-synth climate --out "$OUT/validation" --samples "$VAL" --seed 2 $SYN --no-stats
echo "demo: training models/deepcam-small.cfg for $EPOCHS epochs (checkpoint $OUT/deepcam-small.cfck)"
script_logged "$OUT/train.log" bin/cf-train --precision "$PRECISION" --model models/deepcam-small.cfg --train "$OUT/train" --val "$OUT/validation" --stats "$OUT/train" \
    --out "$OUT/deepcam-small.cfck" --epochs "$EPOCHS" --batch 8 --lr 0.004 \
    --lr-schedule cosine --t-max $((EPOCHS * TRAIN / 8)) \
    --mllog "$OUT/mllog.txt" --png "$OUT/pictures"
script_logged "$OUT/eval.txt" bin/cf-eval --precision "$PRECISION" --weights "$OUT/deepcam-small.cfck" --data "$OUT/validation" \
    --stats "$OUT/train" --png "$OUT/pictures" --pred "$OUT/predictions.npy"
echo "demo: pictures in $OUT/pictures/ (learning_curve.png; mask_NNNN.png: precipitable water, true and predicted masks)"
miou=$(sed -n 's/^miou //p' "$OUT/eval.txt")
base=$(sed -n 's/^baseline_miou //p' "$OUT/eval.txt")
echo "demo: val_miou $miou baseline_miou $base"
