#!/bin/sh
# usage: sh bench/conv_ab.sh OLD_COMMIT [CFG DINPUT]...
# A kernel change's before and after in one process (bench/conv_ab.c): OLD_COMMIT's
# cosmoflow.h and the working tree's, the first convolution of each CFG timed alternately,
# REPS repetitions (default 10), medians of the pairs' ratios.  Default CFGs: cosmoflow.cfg's
# convolutions 0 (4 -> 32 at 128^3) and 2 (32 -> 64 at 64^3), each before its max pool, so
# that their outputs and gradients are stored in 16 bits as in the whole network.
cd "$(dirname "$0")/.." || exit 1
OLD=${1:?usage: sh bench/conv_ab.sh OLD_COMMIT [CFG DINPUT]...}; shift
REPS=${REPS:-10}; THREADS=${THREADS:-2}
T=$(mktemp -d /tmp/cf-conv-ab-XXXXXX)
trap 'rm -rf "$T"' EXIT
mkdir "$T/old" && git show "$OLD:cosmoflow.h" > "$T/old/cosmoflow.h" || exit 1
conv_cfg() {   # input C x S^3, F filters, then the max pool
    printf '[net]\ninput=%sx%s\nloss=mse\n[conv]\nfilters=%s\nsize=3\npad=same\n' "$1" "$2" "$3"
    printf 'activation=leaky\nslope=0.3\n[maxpool]\nsize=2\n'
}
if [ $# -eq 0 ]; then
    conv_cfg 4 128x128x128 32 > "$T/conv0.cfg"
    conv_cfg 32 64x64x64 64 > "$T/conv2.cfg"
    set -- "$T/conv0.cfg" 0 "$T/conv2.cfg" 1
fi
LIB=/usr/lib/x86_64-linux-gnu/openblas-openmp
BLAS="-L$LIB -Wl,-rpath,$LIB -lopenblas"
F="-std=c99 -D_POSIX_C_SOURCE=200809L -O3 -march=${ARCH:-x86-64-v3} -fopenmp"
cc $F -DCF_AB_SIDE=old -DCF_USE_CBLAS -I"$T/old" -c bench/conv_ab.c -o "$T/old.o" &&
    cc $F -DCF_AB_SIDE=new -DCF_USE_CBLAS -I. -c bench/conv_ab.c -o "$T/new.o" &&
    cc $F -o "$T/conv_ab" bench/conv_ab.c "$T/old.o" "$T/new.o" $BLAS -lm -lpthread || exit 1
echo "old: $OLD's cosmoflow.h; new: the working tree's; $THREADS threads; $(date -u '+%Y-%m-%d %H:%M') UTC"
while [ $# -ge 2 ]; do
    OMP_NUM_THREADS=$THREADS OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive} "$T/conv_ab" "$1" "$REPS" "$2" || exit 1
    shift 2
done
