#!/bin/sh
# make science: the CosmoFlow papers' claim put to a test on universes with collapsed
# structure, against the strongest two-point baseline.  Particle-mesh universes (cf-synth
# cosmo --pm, tools/synth_pm.h) at 2 Mpc/h voxels, where halos form; models/cosmoflow-small.cfg
# trained on them as make demo trains; beside it, fitted on the same training volumes
# (cf-eval --spectrum --spectrum-select, tools/spectrum.h), the two-point estimators: the
# auto-spectra alone ("auto") or with the cross-correlation of every channel pair ("cross"),
# in octaves, unit shells or half shells of |k|, each fitted four ways (SGD for the network's
# 12 epochs or 200, AdamW with weight decay for 300 at two widths).  Which of them is the
# baseline is chosen on the last quarter of the training universes, held out for that choice
# (fitted on the other three quarters); every one is then fitted on all the training universes
# and scored on the validation ones.  The same with each channel's one-point moments
# ("cross-moments": beyond two-point) is reported apart, its binning and fit chosen the same
# way ("moments-chosen").
# SCI_SEEDS=K repeats everything (universes, training, fits) with K seeds and reports the mean
# and spread of every MAE per parameter; seed 1 is the earlier single run's data and weights.
# About 30 minutes a seed on 2 cores; docs/science.md reports the result.  A rerun with the
# same settings reuses what an earlier run finished: a seed's universes when
# seedK/universes.txt names the same flags, a whole seed when seedK/rows.txt was written with
# the same settings (delete the directory to redo it).
# Last line: "science: cnn_mae V spectrum_mae P spectrum_moments_mae M" (means over the seeds;
# P: the two-point estimator chosen on held-out universes, M: the one with one-point moments
# chosen so).
set -e
cd "$(dirname "$0")/.."
. tools/science_lib.sh   # the settings, sci_row, sci_show, sci_summary, sci_mean, sci_ratio
bin/cf-synth cosmo --help 2>&1 | grep -q -- '--pm ' || { echo "science: cf-synth was built without FFTW (apt-get install libfftw3-dev, then make)"; exit 1; }
demo_dir "$OUT" keep   # what an earlier run finished is reused (above)
SYN="--size 32 --voxel 2 --pm $PM --spread 0.5"
R="$OUT/results.txt"   # one row per seed and method: seed method Omega_m sigma_8 n_s H_0 mean
: > "$R"
moments_row() {   # moments_row SEED: of the estimators with one-point moments, the one best on the held-out universes
    awk -v s="$1" '$1 == "spectrum_estimator" && $2 ~ /^cross-moments-/ && (!n++ || $5 < h) {h = $5; r = s " moments-chosen " $7 " " $9 " " $11 " " $13 " " $15}
        END {if (n) print r}' "$OUT/seed$1/eval_select.txt" >> "$R"
}
s=1
while [ $s -le "$SEEDS" ]; do
    D="$OUT/seed$s"; mkdir -p "$D"
    UNIV="$TRAIN training (--seed $((2 * s - 1))) and $VAL validation (--seed $((2 * s))) universes, $SYN"
    SETTINGS="$UNIV; $EPOCHS epochs, batch $BATCH, $RUN; estimator chosen on held-out universes (4 fittings, 3 binnings)"
    if [ -f "$D/rows.txt" ] && [ "$(head -1 "$D/rows.txt")" = "# $SETTINGS" ]; then   # finished before
        echo "science: seed $s of $SEEDS: reusing the results in $D/rows.txt (same settings)"
        grep -v '^#' "$D/rows.txt" >> "$R"
        moments_row $s
        sci_show science $s "$R"
        s=$((s + 1)); continue
    fi
    echo "# $SETTINGS" > "$D/rows.new"
    echo "science: seed $s of $SEEDS: $TRAIN training and $VAL validation particle-mesh universes of 32^3 x 4 ($SYN) in $D/"
    t0=$(date +%s)
    if [ -f "$D/universes.txt" ] && [ "$(cat "$D/universes.txt")" = "$UNIV" ]; then
        echo "science: reusing the universes in $D/ (same flags)"
    else
        rm -rf "$D/universes.txt" "$D/train" "$D/validation"   # another run's, or unfinished
        bin/cf-synth cosmo --out "$D/train" --samples "$TRAIN" --seed $((2 * s - 1)) $SYN --stats
        bin/cf-synth cosmo --out "$D/validation" --samples "$VAL" --seed $((2 * s)) $SYN
        echo "$UNIV" > "$D/universes.txt"
    fi
    t1=$(date +%s)
    echo "science: universes in $((t1 - t0)) s; training models/cosmoflow-small.cfg for $EPOCHS epochs (--seed $((s - 1)))"
    script_logged "$D/train.log" $RUN bin/cf-train --model models/cosmoflow-small.cfg --train "$D/train" --val "$D/validation" --seed $((s - 1)) \
        --out "$D/cosmoflow-small.cfck" --epochs "$EPOCHS" --batch $BATCH --lr 0.003 --base-batch 8 \
        --warmup-epochs 1 --decay "$DECAY" --log-ratio --augment --png "$D/pictures" --no-progress
    t2=$(date +%s)
    EV="bin/cf-eval --weights $D/cosmoflow-small.cfck --data $D/validation"
    $EV --baseline "$D/train" --png "$D/pictures" --pred "$D/predictions.npy" > "$D/eval.txt"
    sci_row $s cnn "$D/eval.txt" mae "$D/rows.new"
    # the estimator: fitted on the first three quarters of the training universes, chosen on
    # the last (links to the same files), then fitted on all of them
    rm -rf "$D/fit" "$D/select"; mkdir -p "$D/fit" "$D/select"
    n=0; for f in $(ls "$D/train" | grep -E '\.tfrecord(\.gz)?$' | sort); do
        if [ $n -lt $((TRAIN * 3 / 4)) ]; then ln -s "../train/$f" "$D/fit/$f"; else ln -s "../train/$f" "$D/select/$f"; fi; n=$((n + 1))
    done
    $EV --spectrum "$D/fit" --spectrum-select "$D/select" > "$D/eval_select.txt"
    awk -v s=$s '$1 == "spectrum_estimator" {print s, $2, $7, $9, $11, $13, $15 >> "'"$D/rows.new"'"}' "$D/eval_select.txt"
    sci_row $s two-point-chosen "$D/eval_select.txt" spectrum_mae "$D/rows.new"
    grep '^spectrum_chosen' "$D/eval_select.txt" | sed "s/^/science: seed $s: /"
    t3=$(date +%s)
    mv "$D/rows.new" "$D/rows.txt" && grep -v '^#' "$D/rows.txt" >> "$R"
    moments_row $s
    echo "science: seed $s: universes $((t1 - t0)) s, training $((t2 - t1)) s, evaluation $((t3 - t2)) s; pictures in $D/pictures/"
    sci_show science $s "$R"
    s=$((s + 1))
done
echo "science: $SEEDS seed(s); MAE per parameter, mean +- standard deviation over the seeds"
sci_summary science "$R" | tee "$OUT/summary.txt"
cnn=$(sci_mean cnn "$R"); spec=$(sci_mean two-point-chosen "$R")
moments=$(sci_mean moments-chosen "$R")
# the network against each baseline chosen on held-out universes, seed by seed: its MAE as a
# percentage of the chosen estimator's, and the spread of that percentage
verdict() {   # verdict METHOD WHAT
    ratio=$(sci_ratio cnn "$1" "$R") || exit 1
    echo "$ratio" | awk -v what="$2" '{ mu = 100 * $1; sd = 100 * $2
        printf "science: the network'"'"'s MAE is %.0f %% (+- %.0f over %d seed(s)) of %s: %s\n", mu, sd, $3, what,
            mu + sd <= 90 ? "it beats them by 10 % or more" : mu + sd < 100 ? "below them, by less than 10 %" : mu - sd < 100 ? "within the spread of theirs" : "above them" }'
}
verdict two-point-chosen "the two-point baseline's (auto- and cross-spectra; binning, features and fit chosen on held-out universes)"
verdict moments-chosen "the spectra with one-point moments' (chosen likewise)"
echo "science: cnn_mae $cnn spectrum_mae $spec spectrum_moments_mae $moments"
