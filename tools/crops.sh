#!/bin/sh
# make science-crops: whole volumes against crops of them, on the universes of make science.
# Oyama et al. (TPDS 2021; docs/references.md) trained CosmoFlow on whole 512^3 volumes split
# across GPUs and report a far better prediction than from 128^3 crops.  Part of any such gain
# is only less cosmic variance (a whole volume holds 8 crops' worth of modes); the rest would
# be information only whole volumes hold (the largest scales, what crosses a crop's faces).
# Here, at the sizes 2 cores afford: each of make science's particle-mesh universes of 32^3
# (seedK/train and seedK/validation, made and trained by tools/science.sh, which this runs
# first and which reuses what it finished) and the same universes cut into their 8 octants of
# 16^3 (cf-synth --split 2 regenerates them exactly: tests/test_tools.sh checks the octants).
# The same network (models/cosmoflow-small.cfg, its dense head following the input) and the
# same training (epochs, batch, rate: the crops see 8x the steps of 1/8 the voxels) on the
# crops; a crop-trained network predicts a volume by the mean over its 8 crops (cf-eval
# --crops 8), which removes the cosmic variance a single crop adds.  Beside both, the two-point
# estimator (auto- and cross-spectra in octaves, the default fit: cf-eval --spectrum) on whole
# volumes and on crops, averaged the same way.  SCI_SEEDS=K seeds (mean and spread).
# About 20 minutes a seed on 2 cores beyond make science's (the crops 11, training 10).
# docs/science.md, "Whole volumes against crops".
# Last line: "crops: cnn_whole V cnn_crops C spectrum_whole S spectrum_crops T" (means over the
# seeds; the MAEs on the validation universes, crops by their volumes' mean prediction).
set -e
cd "$(dirname "$0")/.."
. tools/science_lib.sh   # make science's settings, sci_row, sci_show, sci_summary, sci_mean, sci_ratio
echo "crops: make science first (the whole universes and the network on them; what it finished is reused)"
sci_log=$(mktemp /tmp/cf-crops-XXXXXX)
sh tools/science.sh > "$sci_log" 2>&1 || { cat "$sci_log" >&2; rm -f "$sci_log"; script_fail "tools/science.sh failed (its output above)"; }
tail -1 "$sci_log"; rm -f "$sci_log"
R="$OUT/crops.txt"   # one row per seed and method: seed method Omega_m sigma_8 n_s H_0 mean
: > "$R"
SPEC="--spectrum-features cross --spectrum-bins octave"
s=1
while [ $s -le "$SEEDS" ]; do
    D="$OUT/seed$s"; C="$D/crops"; mkdir -p "$C"
    SYN="--voxel 2 --pm $PM --spread 0.5"
    UNIV="$TRAIN training (--seed $((2 * s - 1))) and $VAL validation (--seed $((2 * s))) universes of 32^3, $SYN, as their 8 octants"
    t0=$(date +%s)
    if [ -f "$C/universes.txt" ] && [ "$(cat "$C/universes.txt")" = "$UNIV" ]; then
        echo "crops: seed $s: reusing the crops in $C/ (same flags)"
    else
        rm -rf "$C/universes.txt" "$C/train" "$C/validation" "$C"/cosmoflow-small-16.cfck*
        echo "crops: seed $s: the same universes as $D/, each as its 8 octants of 16^3, in $C/"
        bin/cf-synth cosmo --out "$C/train" --samples "$TRAIN" --seed $((2 * s - 1)) --size 16 --split 2 $SYN
        bin/cf-synth cosmo --out "$C/validation" --samples "$VAL" --seed $((2 * s)) --size 16 --split 2 $SYN
        echo "$UNIV" > "$C/universes.txt"
    fi
    t1=$(date +%s)
    if [ ! -f "$C/train.done" ] || [ ! -f "$C/cosmoflow-small-16.cfck" ]; then
        echo "crops: seed $s: training models/cosmoflow-small.cfg on 16^3 crops for $EPOCHS epochs (--seed $((s - 1)), as on the whole)"
        rm -f "$C"/cosmoflow-small-16.cfck*   # an unfinished run's
        script_logged "$C/train.log" $RUN bin/cf-train --model models/cosmoflow-small.cfg --input-shape 4x16x16x16 --train "$C/train" --val "$C/validation" --seed $((s - 1)) \
            --out "$C/cosmoflow-small-16.cfck" --epochs "$EPOCHS" --batch $BATCH --lr 0.003 --base-batch 8 \
            --warmup-epochs 1 --decay "$DECAY" --log-ratio --augment --no-progress
        touch "$C/train.done"
    fi
    t2=$(date +%s)
    bin/cf-eval --weights "$C/cosmoflow-small-16.cfck" --data "$C/validation" --crops 8 > "$C/eval.txt"
    bin/cf-eval --weights "$C/cosmoflow-small-16.cfck" --data "$C/validation" --crops 8 --spectrum "$C/train" $SPEC > "$C/eval_spectrum.txt"
    bin/cf-eval --weights "$D/cosmoflow-small.cfck" --data "$D/validation" --spectrum "$D/train" $SPEC > "$D/eval_spectrum_octave.txt"
    t3=$(date +%s)
    awk -v s=$s '$2 == "cnn" {print s, "cnn-whole", $3, $4, $5, $6, $7}' "$D/rows.txt" >> "$R"
    sci_row $s cnn-crops "$C/eval.txt" mae "$R"
    sci_row $s spectrum-whole "$D/eval_spectrum_octave.txt" spectrum_mae "$R"
    sci_row $s spectrum-crops "$C/eval_spectrum.txt" spectrum_mae "$R"
    echo "crops: seed $s: crops $((t1 - t0)) s, training $((t2 - t1)) s, evaluation $((t3 - t2)) s; one crop alone: $(sed -n 's/^crop_mae //p' "$C/eval.txt")"
    sci_show crops $s "$R"
    s=$((s + 1))
done
echo "crops: $SEEDS seed(s); MAE per parameter, mean +- standard deviation over the seeds"
sci_summary crops "$R" | tee "$OUT/crops_summary.txt"
# whole against crops, seed by seed: the crops' MAE over the whole volumes', and its spread
ratio() {   # ratio CROPS WHOLE WHAT
    r=$(sci_ratio "$1" "$2" "$R") || exit 1
    echo "$r" | awk -v what="$3" '{ printf "crops: %s: the crops'"'"' MAE is %.2f (+- %.2f over %d seed(s)) times the whole volumes'"'"'\n", what, $1, $2, $3 }'
}
ratio cnn-crops cnn-whole "the network"
ratio spectrum-crops spectrum-whole "the two-point estimator"
cw=$(sci_mean cnn-whole "$R"); cc=$(sci_mean cnn-crops "$R"); sw=$(sci_mean spectrum-whole "$R"); sc=$(sci_mean spectrum-crops "$R")
echo "crops: cnn_whole $cw cnn_crops $cc spectrum_whole $sw spectrum_crops $sc"
