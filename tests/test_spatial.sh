#!/bin/sh
# A sample split across ranks (cf_net_set_spatial, --spatial K) against one rank, with each MPI
# the machine has: tests/test_spatial.c under mpirun for K = 2, K = 4, K = 2 x D = 2, periodic
# volumes, bf16, batch norm over the slabs and models/cosmoflow.cfg at 128^3; a split that cannot
# align refused naming the layer and the largest K; and two sabotages of the header (the
# backward halo not added; a split periodic volume's halo from no neighbour, zeros at its faces,
# where the one rank's wraps around), each of which must fail.  Then the tools (MPICH): cf-train --spatial 2 on 2 ranks and 2 x 2 on 4 against
# one rank (an epoch with augmentation and the mean transform, whose sums the group adds; .npy
# read in slabs and gzipped TFRecords read whole): the epoch line's figures and the weights within
# 1e-5; a run resumed with another K continues as the uninterrupted one; cf-eval --spatial 2
# gives one rank's MAE; cf-check --summary --spatial shows a rank's plan; the refusals (ranks
# that do not form groups, --staged, LAMB, a split that cannot align).
# Every run has 10 minutes: a hang is a failure.
# Last line "N passed, M failed".
cd "$(dirname "$0")/.." || exit 1
T=$(mktemp -d /tmp/cf-spatial-XXXXXX)
trap 'rm -rf "$T"' EXIT
pass=0; fail=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
OB=/usr/lib/$(cc -print-multiarch 2>/dev/null)/openblas-openmp
LIBS="-lm"; DEFS=""
if [ -e /usr/include/x86_64-linux-gnu/cblas.h ] || [ -e /usr/include/cblas.h ]; then DEFS="-DCF_USE_CBLAS"; LIBS="-L$OB -Wl,-rpath,$OB -lopenblas -lm"; fi
build() {   # $1 the MPI wrapper, $2 the header's directory, $3 the binary
    $1 -std=c99 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -O2 -march=x86-64-v3 -fopenmp -DCF_USE_MPI $DEFS -I"$2" -Itests -o "$3" tests/test_spatial.c $LIBS
}
# C's 1/4-sized cosmoflow-small with batch norm after its first two convolutions
sed -e '/^\[maxpool\]/{x;s/^/x/;/^x\{1,2\}$/{x;s/^/[batchnorm]\n/;b};x}' models/cosmoflow-small.cfg > "$T/bn.cfg"
grep -c '^\[batchnorm\]' "$T/bn.cfg" | grep -q '^2$' || bad "the batch-norm model was not made"
runs() {   # $1 the launcher, $2 the binary, $3 the MPI's name
    L=$1; X=$2; M=$3
    # K = 4 at 64^3 for 1 step: in OpenBLAS's Haswell kernels its second step meets a max-pool near-tie; the batch-norm
    # model for 2: from its third step a max pool after a batch norm meets one (docs/mpi.md, "What holds")
    set -- "2 models/cosmoflow-small.cfg 4x32x32x32 2 2 5" "4 models/cosmoflow-small.cfg 4x64x64x64 4 1 1" "4 models/cosmoflow-small.cfg 4x32x32x32 2 2 5" \
           "2 models/cosmoflow-small.cfg 4x32x32x32 2 2 5 periodic" "2 models/cosmoflow-small.cfg 4x32x32x32 2 2 1 bf16" "2 $T/bn.cfg 4x32x32x32 2 2 2" \
           "2 models/cosmoflow.cfg 4x128x128x128 2 1 1"
    for c in "$@"; do
        np=${c%% *}; a=${c#* }
        if timeout 600 env OMP_NUM_THREADS=1 CF_SPATIAL_TMP="$T" $L -np $np "$X" $a > "$T/out.txt" 2>&1 && grep -q ' passed, 0 failed$' "$T/out.txt"; then ok "$M: $(grep '^spatial' "$T/out.txt")"
        else bad "$M -np $np $a: $(grep -E 'FAIL|refused|spatial' "$T/out.txt" | head -4)"; fi
    done
    timeout 600 env OMP_NUM_THREADS=1 $L -np 2 "$X" models/cosmoflow-small.cfg 4x16x16x16 2 2 1 > "$T/out.txt" 2>&1
    grep -q "refused: models/cosmoflow-small.cfg:.*layer 7 (\[maxpool\]).*the largest split of 2 or fewer ranks that works: 1" "$T/out.txt" &&
        ok "$M: a split that cannot align is refused: $(grep refused "$T/out.txt" | head -1)" || bad "$M: the refusal at 16^3: $(head -3 "$T/out.txt")"
}
. tools/mpi.sh
if ! command -v mpicc.mpich > /dev/null 2>&1 || ! command -v mpirun.mpich > /dev/null 2>&1; then echo "skipped: MPICH (mpicc.mpich or mpirun.mpich missing)"
elif ! build mpicc.mpich . "$T/sp"; then bad "MPICH: tests/test_spatial.c does not build"
else
    runs mpirun.mpich "$T/sp" MPICH
    # the sabotages, each on a copy of the header
    mkdir -p "$T/s1" "$T/s2"
    sed 's/^    cf__planes_add(dx, from_prev, BC, Dl, HW, 0, ha);$/    (void)from_prev;/' cosmoflow.h > "$T/s1/cosmoflow.h"
    sed -e 's/next = r + 1 < K ? r + 1 : sp->periodic ? 0 : MPI_PROC_NULL,$/next = r + 1 < K ? r + 1 : K == 1 \&\& sp->periodic ? 0 : MPI_PROC_NULL,/' \
        -e 's/prev = r > 0 ? r - 1 : sp->periodic ? K - 1 : MPI_PROC_NULL;$/prev = r > 0 ? r - 1 : K == 1 \&\& sp->periodic ? 0 : MPI_PROC_NULL;/' cosmoflow.h > "$T/s2/cosmoflow.h"
    for s in s1 s2; do
        cmp -s cosmoflow.h "$T/$s/cosmoflow.h" && { bad "sabotage $s: the line to change was not found"; continue; }
        build mpicc.mpich "$T/$s" "$T/$s/sp" || { bad "sabotage $s does not build"; continue; }
        [ $s = s1 ] && a="models/cosmoflow-small.cfg 4x32x32x32 2 2 2" || a="models/cosmoflow-small.cfg 4x32x32x32 2 2 2 periodic"
        if timeout 600 env OMP_NUM_THREADS=1 mpirun.mpich -np 2 "$T/$s/sp" $a > "$T/out.txt" 2>&1; then bad "sabotage $s ($([ $s = s1 ] && echo 'the backward halo not added' || echo 'a split periodic volume'"'"'s halo from no neighbour: zeros at its faces')) passes"
        else ok "sabotage $s fails: $(grep FAIL "$T/out.txt" | head -1 | sed 's/.*: //')"; fi
    done
fi
if ! command -v mpicc.openmpi > /dev/null 2>&1 || ! command -v mpirun.openmpi > /dev/null 2>&1; then echo "skipped: Open MPI (mpicc.openmpi or mpirun.openmpi missing)"
elif ! build mpicc.openmpi . "$T/spo"; then bad "Open MPI: tests/test_spatial.c does not build"
else runs "mpirun.openmpi --allow-run-as-root --oversubscribe" "$T/spo" "Open MPI"; fi
# ---- the tools
PY=/usr/bin/python3
B=$(pwd)/bin
# close_lines A B: two printed lines with the same words, each pair of numbers within 1e-5
# relative (the bound on the weights) plus one unit in the sixth printed digit: the split sums
# in another order, so a printed figure may round the other way (never compare them as text)
close_lines() {
    [ -n "$1" ] && [ -n "$2" ] && awk -v a="$1" -v b="$2" 'BEGIN {
        n = split(a, x, " "); if (n != split(b, y, " ")) exit 1
        for (i = 1; i <= n; i++) {
            if (x[i] ~ /^-?[0-9.]+(e[-+]?[0-9]+)?$/ && y[i] ~ /^-?[0-9.]+(e[-+]?[0-9]+)?$/) {
                d = x[i] - y[i]; if (d < 0) d = -d; m = x[i] < 0 ? -x[i] : x[i]
                if (d > 1e-5 * m + 1e-6) exit 1
            } else if (x[i] != y[i]) exit 1
        }
    }'
}
same_weights() {   # $1 $2 checkpoints: the largest difference relative to each tensor's largest value, under $3
    for f in "$1" "$2"; do rm -rf "$f.w"; $B/cf-convert weights-export --weights "$f" --out "$f.w" > /dev/null 2>&1 || { echo "export $f failed"; return 1; }; done
    $PY - "$1.w" "$2.w" "$3" <<'PYEOF'
import sys, glob, os, numpy as np
worst = max(float(np.abs(np.load(f) - np.load(os.path.join(sys.argv[2], os.path.basename(f)))).max() / np.abs(np.load(f)).max())
            for f in glob.glob(sys.argv[1] + "/*.npy"))
print("%.2e" % worst)
sys.exit(0 if worst <= float(sys.argv[3]) else 1)
PYEOF
}
if ! ldd bin/cf-train 2>/dev/null | grep -q libmpich || ! command -v mpirun.mpich > /dev/null 2>&1; then echo "skipped: the tools' --spatial (bin/cf-train is not the MPICH build)"
elif ! $PY -c 'import numpy' 2> /dev/null; then echo "skipped: the tools' --spatial (python3-numpy missing)"
else
    R="timeout 600 env OMP_NUM_THREADS=1 mpirun.mpich"
    $B/cf-synth cosmo --out "$T/tr" --samples 16 --size 32 --seed 1 --spread 0.5 --format npy > /dev/null &&
    $B/cf-synth cosmo --out "$T/trt" --samples 16 --size 32 --seed 1 --spread 0.5 > /dev/null &&
    $B/cf-synth cosmo --out "$T/va" --samples 8 --size 32 --seed 2 --spread 0.5 --format npy > /dev/null || bad "data"
    TR="$B/cf-train --model $(pwd)/models/cosmoflow-small.cfg --val $T/va --seed 3 --lr 0.001 --augment --transform mean --no-progress"
    $R -np 1 $TR --train "$T/tr" --batch 4 --epochs 1 --out "$T/k1.cfck" > "$T/k1.txt" 2>&1 || bad "one rank: $(tail -2 "$T/k1.txt")"
    for c in "2 4 2 tr npy" "4 2 2 tr npy" "2 4 2 trt gzipped-TFRecord"; do
        set -- $c
        $R -np $1 $TR --train "$T/$4" --batch $2 --spatial $3 --epochs 1 --out "$T/s$1$4.cfck" > "$T/s.txt" 2>&1 &&
            close_lines "$(grep '^epoch' "$T/s.txt" | cut -d' ' -f1-7)" "$(grep '^epoch' "$T/k1.txt" | cut -d' ' -f1-7)" && w=$(same_weights "$T/k1.cfck" "$T/s$1$4.cfck" 1e-5) &&
            ok "cf-train --spatial $3 on $1 ranks x batch $2 ($5): one rank's epoch line within 1e-5, weights within $w" || bad "cf-train --spatial $3 -np $1 ($5): $w $(grep -E '^epoch|cf-train: [^0-9]' "$T/s.txt" | head -3)"
    done
    grep -q "cf-train: 2 ranks: 1 group of 2, each sample split across a group (16 planes a rank)" "$T/s.txt" && ok "the split announced" || bad "the split's line: $(head -2 "$T/s.txt")"
    # resumed with another K: the uninterrupted run's continuation
    $R -np 2 $TR --train "$T/tr" --batch 4 --spatial 2 --epochs 2 --out "$T/u.cfck" > /dev/null 2>&1 &&
    cp "$T/s2tr.cfck" "$T/a.cfck" && cp "$T/s2tr.cfck" "$T/b.cfck" &&
    $R -np 1 $B/cf-train --train "$T/tr" --val "$T/va" --no-progress --epochs 2 --resume "$T/a.cfck" --out "$T/a.cfck" > "$T/a.txt" 2>&1 &&
    $R -np 2 $B/cf-train --train "$T/tr" --val "$T/va" --no-progress --epochs 2 --spatial 2 --resume "$T/b.cfck" --out "$T/b.cfck" > "$T/b.txt" 2>&1 &&
    wa=$(same_weights "$T/u.cfck" "$T/a.cfck" 1e-5) && wb=$(same_weights "$T/u.cfck" "$T/b.cfck" 0) &&
        ok "resumed: K = 2 then K = 1 within $wa of the uninterrupted K = 2; K = 2 then K = 2 the same ($wb)" || bad "resume with another K: $wa $wb $(tail -2 "$T/a.txt" "$T/b.txt")"
    e1=$($B/cf-eval --weights "$T/u.cfck" --data "$T/va" 2>&1 | tail -1); e2=$($R -np 2 $B/cf-eval --weights "$T/u.cfck" --data "$T/va" --spatial 2 2>&1 | tail -1)
    close_lines "$e1" "$e2" && ok "cf-eval --spatial 2: $e2, as one process's $e1 within 1e-5" || bad "cf-eval --spatial 2: '$e2' against '$e1'"
    $B/cf-check --model models/cosmoflow.cfg --input-shape 4x256x256x256 --summary --spatial 4 > "$T/sum.txt" 2>&1 &&
        grep -q "^per rank of --spatial 4 .*input slab 4x64x256x256 of 256 planes" "$T/sum.txt" && grep -q "^training memory per rank, batch 1, SGD: [0-9.]* MB" "$T/sum.txt" &&
        ok "cf-check --summary --spatial 4: $(grep '^training memory per rank' "$T/sum.txt" | cut -d'(' -f1)" || bad "cf-check --summary --spatial: $(tail -3 "$T/sum.txt")"
    # the large-volume networks: their sizes, one rank's plan at 512^3 (no rank can hold it whole)
    [ "$($B/cf-check --model models/cosmoflow-256.cfg --summary | tail -1)" = "params 15985956" ] &&
    $B/cf-check --model models/cosmoflow-512.cfg --summary --spatial 4 > "$T/s512.txt" 2>&1 && grep -q "input slab 4x128x512x512 of 512 planes" "$T/s512.txt" &&
    ! $B/cf-check --model models/cosmoflow-512.cfg --summary > "$T/w512.txt" 2>&1 && grep -q "would output 32x512x512x512 per sample.*--spatial" "$T/w512.txt" &&
        ok "cosmoflow-256.cfg: 15985956 parameters; cosmoflow-512.cfg refused whole, $(grep '^training memory per rank' "$T/s512.txt" | cut -d'(' -f1)at --spatial 4" ||
        bad "the large-volume networks: $(tail -1 "$T/s512.txt") $(tail -1 "$T/w512.txt")"
    # the oracle: every split of 4 ranks, its memory a rank the plan's (cf-check --summary --spatial) and its batch
    OMP_NUM_THREADS=1 $B/cf-bench --plan 4 --model models/cosmoflow.cfg --batch 1 --steps 1 --overhead 0 > "$T/plan.txt" 2>&1
    for k in 2 4; do
        cc=$($B/cf-check --model models/cosmoflow.cfg --summary --spatial $k | awk '/^training memory per rank/ {print $8}')
        om=$(awk -v k=$k '$1 == k && NF == 10 {print $9}' "$T/plan.txt")
        awk -v a="$om" -v b="$cc" 'BEGIN { exit !(b > 0 && a >= b && a <= 1.1 * b) }' &&
            ok "the oracle's memory a rank at K=$k: $om MB, cf-check --summary --spatial $k's plan $cc MB (within 10 %)" || bad "the oracle's memory at K=$k: '$om' against '$cc': $(tail -3 "$T/plan.txt")"
    done
    grep -q "^plan: best K=[124] D=[124]: " "$T/plan.txt" && ok "the oracle names the best split: $(tail -1 "$T/plan.txt")" || bad "the oracle's last line: $(tail -1 "$T/plan.txt")"
    refused() {   # refused WHAT TEXT NP ARGS...
        what=$1; text=$2; np=$3; shift 3
        if $R -np $np "$@" > "$T/r.txt" 2>&1; then bad "$what: ran"; elif grep -q -- "$text" "$T/r.txt"; then ok "$what refused: $(grep -m1 -- "$text" "$T/r.txt")"; else bad "$what: $(head -3 "$T/r.txt")"; fi
    }
    refused "--spatial 2 on 3 ranks" "3 ranks do not form groups of 2" 3 $TR --train "$T/tr" --batch 2 --spatial 2 --epochs 1 --out "$T/x.cfck"
    refused "--spatial 2 --staged" "with --staged" 2 $TR --train "$T/tr" --batch 2 --spatial 2 --staged --epochs 1 --out "$T/x.cfck"
    refused "--spatial 2 --optimizer lamb" "LAMB and LARC take each tensor's norm" 2 $TR --train "$T/tr" --batch 2 --spatial 2 --optimizer lamb --epochs 1 --out "$T/x.cfck"
    refused "--spatial 2 at 16^3" "layer 7 (\[maxpool\]) has 2 planes in and 1 out" 2 $TR --train "$T/tr" --batch 2 --spatial 2 --input-shape 4x16x16x16 --epochs 1 --out "$T/x.cfck"
    [ ! -e "$T/x.cfck" ] && ok "no refused run wrote a checkpoint" || bad "a refused run wrote $T/x.cfck"
fi
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
