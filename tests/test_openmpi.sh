#!/bin/sh
# The tools built with Open MPI's wrapper (make MPICC=mpicc.openmpi) train 1 rank x batch 4 and
# 2 ranks x batch 2 to the same weights; a build with the other MPI library under Open MPI's
# launcher (each process would see one rank) refuses.  Last line "N passed, M failed".
cd "$(dirname "$0")/.." || exit 1
T=$(mktemp -d /tmp/cf-ompi-XXXXXX)
trap 'rm -rf "$T"' EXIT
pass=0; fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
PY=/usr/bin/python3
RUN="mpirun.openmpi --allow-run-as-root --oversubscribe"
mkdir -p "$T/src" && cp -r Makefile cosmoflow.h tools models "$T/src/"
if make -s -j2 -C "$T/src" MPICC=mpicc.openmpi HDF5=0 bin/cf-train bin/cf-convert bin/cf-synth > "$T/make.txt" 2>&1 &&
   ldd "$T/src/bin/cf-train" | grep -q 'libmpi\.so'; then ok; else bad "make MPICC=mpicc.openmpi: $(tail -3 "$T/make.txt")"; echo "$pass passed, $fail failed"; exit 1; fi
B=$T/src/bin
$B/cf-synth cosmo --out "$T/tr" --samples 16 --size 16 --seed 1 --spread 0.5 > /dev/null
$B/cf-synth cosmo --out "$T/va" --samples 6 --size 16 --seed 2 --spread 0.5 > /dev/null
TR="$B/cf-train --model models/cosmoflow-small.cfg --input-shape 4x16x16x16 --train $T/tr --val $T/va --seed 3 --lr 0.01 --warmup-epochs 0 --epochs 5 --augment --no-progress"
$TR --batch 4 --out "$T/r1.cfck" > /dev/null 2>&1 && $RUN -np 2 $TR --batch 2 --out "$T/r2.cfck" > /dev/null 2> "$T/r2.err" &&
    grep -q "cf-train: 2 ranks x batch 2 = global batch 4" "$T/r2.err" && ok || bad "Open MPI: cf-train under mpirun.openmpi -np 2 ($(tail -2 "$T/r2.err"))"
for f in r1 r2; do $B/cf-convert weights-export --weights "$T/$f.cfck" --out "$T/w$f" > /dev/null || bad "weights-export $f"; done
if $PY -c 'import numpy' 2>/dev/null; then
    $PY - "$T" <<'PYEOF' && ok || bad "Open MPI: 1 rank x 4 and 2 ranks x 2 give the same weights after 5 epochs (relative 1e-4)"
import sys, glob, os, numpy as np
t = sys.argv[1]
worst = max(float(np.abs(np.load(f) - np.load(t + "/wr2/" + os.path.basename(f))).max() / np.abs(np.load(f)).max()) for f in glob.glob(t + "/wr1/*.npy"))
print("  Open MPI: worst relative weight difference 1 x 4 vs 2 x 2 after 20 steps: %.2e" % worst)
assert worst < 1e-4
PYEOF
else
    cmp -s "$T/wr1/000_0_weight.npy" "$T/wr2/000_0_weight.npy" && echo "  (numpy absent: compared nothing)"; echo "skipped: Open MPI weight comparison (python3-numpy missing)"
fi
# the default (MPICH) build under Open MPI's launcher: each process would be a rank of one
if ldd bin/cf-train | grep -q libmpich; then
    if $RUN -np 2 bin/cf-train --model models/cosmoflow-small.cfg --input-shape 4x16x16x16 --train "$T/tr" --val "$T/va" --batch 2 --epochs 1 \
         --out "$T/x.cfck" --no-progress > /dev/null 2> "$T/x.err"; then bad "an MPICH binary under Open MPI's mpirun ran"
    else grep -q "started as one of 2 ranks, but MPI reports 1" "$T/x.err" && [ ! -e "$T/x.cfck" ] && ok || bad "mismatched launcher: $(head -2 "$T/x.err")"; fi
fi
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
