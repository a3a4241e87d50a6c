#!/bin/sh
# A sample split across ranks (cf_net_set_spatial, --spatial K) against one rank, with each MPI
# the machine has: tests/test_spatial.c under mpirun for K = 2, K = 4, K = 2 x D = 2, periodic
# volumes, bf16, batch norm over the slabs and models/cosmoflow.cfg at 128^3; a split that cannot
# align refused naming the layer and the largest K; and two sabotages of the header (the
# backward halo not added; a periodic volume's halo from no neighbour, zeros at its faces), each of
# which must fail.  Every run has 10 minutes: a hang is a failure.
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
    set -- "2 models/cosmoflow-small.cfg 4x32x32x32 2 2 5" "4 models/cosmoflow-small.cfg 4x64x64x64 4 1 5" "4 models/cosmoflow-small.cfg 4x32x32x32 2 2 5" \
           "2 models/cosmoflow-small.cfg 4x32x32x32 2 2 5 periodic" "2 models/cosmoflow-small.cfg 4x32x32x32 2 2 1 bf16" "2 $T/bn.cfg 4x32x32x32 2 2 5" \
           "2 models/cosmoflow.cfg 4x128x128x128 2 1 2"
    for c in "$@"; do
        np=${c%% *}; a=${c#* }
        if timeout 600 env OMP_NUM_THREADS=1 $L -np $np "$X" $a > "$T/out.txt" 2>&1 && grep -q ' passed, 0 failed$' "$T/out.txt"; then ok "$M: $(grep '^spatial' "$T/out.txt")"
        else bad "$M -np $np $a: $(grep -E 'FAIL|refused|spatial' "$T/out.txt" | head -4)"; fi
    done
    timeout 600 env OMP_NUM_THREADS=1 $L -np 2 "$X" models/cosmoflow-small.cfg 4x16x16x16 2 2 1 > "$T/out.txt" 2>&1
    grep -q "refused: models/cosmoflow-small.cfg:.*layer 7 (\[maxpool\]).*the largest split of 2 or fewer ranks that works: 1" "$T/out.txt" &&
        ok "$M: a split that cannot align is refused: $(grep refused "$T/out.txt" | head -1)" || bad "$M: the refusal at 16^3: $(head -3 "$T/out.txt")"
}
. tools/mpi.sh
if command -v mpicc.mpich > /dev/null 2>&1 && command -v mpirun.mpich > /dev/null 2>&1 && build mpicc.mpich . "$T/sp"; then
    runs mpirun.mpich "$T/sp" MPICH
    # the sabotages, each on a copy of the header
    mkdir -p "$T/s1" "$T/s2"
    sed 's/^    cf__planes_add(dx, from_prev, BC, Dl, HW, 0, ha);$/    (void)from_prev;/' cosmoflow.h > "$T/s1/cosmoflow.h"
    sed 's/next = r + 1 < K ? r + 1 : sp->periodic ? 0 : MPI_PROC_NULL, prev = r > 0 ? r - 1 : sp->periodic ? K - 1 : MPI_PROC_NULL;/next = r + 1 < K ? r + 1 : MPI_PROC_NULL, prev = r > 0 ? r - 1 : MPI_PROC_NULL;/' cosmoflow.h > "$T/s2/cosmoflow.h"
    for s in s1 s2; do
        cmp -s cosmoflow.h "$T/$s/cosmoflow.h" && { bad "sabotage $s: the line to change was not found"; continue; }
        build mpicc.mpich "$T/$s" "$T/$s/sp" || { bad "sabotage $s does not build"; continue; }
        [ $s = s1 ] && a="models/cosmoflow-small.cfg 4x32x32x32 2 2 2" || a="models/cosmoflow-small.cfg 4x32x32x32 2 2 2 periodic"
        if timeout 600 env OMP_NUM_THREADS=1 mpirun.mpich -np 2 "$T/$s/sp" $a > "$T/out.txt" 2>&1; then bad "sabotage $s ($([ $s = s1 ] && echo 'the backward halo not added' || echo 'the periodic halo from no neighbour: zeros at the faces')) passes"
        else ok "sabotage $s fails: $(grep FAIL "$T/out.txt" | head -1 | sed 's/.*: //')"; fi
    done
else echo "skipped: MPICH (mpicc.mpich or mpirun.mpich missing)"; fi
if command -v mpicc.openmpi > /dev/null 2>&1 && command -v mpirun.openmpi > /dev/null 2>&1 && build mpicc.openmpi . "$T/spo"; then
    runs "mpirun.openmpi --allow-run-as-root --oversubscribe" "$T/spo" "Open MPI"
else echo "skipped: Open MPI (mpicc.openmpi or mpirun.openmpi missing)"; fi
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
