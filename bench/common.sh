# Sourced by bench/run.sh and bench/compare.sh: the workloads, the kernel sets, two helpers.

# model|input shape|batch|timed steps
WORKLOADS=${WORKLOADS:-"models/cosmoflow.cfg|4x128x128x128|1|2 models/cosmoflow.cfg|4x128x128x128|4|1 models/cosmoflow-small.cfg|4x32x32x32|8|4 models/deepcam.cfg|16x768x1152|1|1"}

median() { sort -n | awk '{v[NR]=$1} END {if (NR) print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }
# field KEY FILE: the value after KEY on FILE's last line
field() { tail -1 "$2" | awk -v k="$1" '{for (i = 1; i < NF; i++) if ($i == k) print $(i+1)}'; }

# kernel_sets BENCH TMPFILE: KSETS = the environment's kernels (ENVK) and, where the CPU has
# AVX-512 (F, BW, DQ, VL) and OpenBLAS's AVX-512 kernels pass BENCH --check-blas, SkylakeX
# (set in each command alone); a failed check is printed and those kernels are not used.
kernel_sets() {
    ENVK=${OPENBLAS_CORETYPE:-default}
    KSETS=$ENVK
    flags=$(grep -m1 '^flags' /proc/cpuinfo)
    if [ "$ENVK" != SkylakeX ] && (for f in avx512f avx512bw avx512dq avx512vl; do echo "$flags" | grep -qw $f || exit 1; done); then
        if OPENBLAS_CORETYPE=SkylakeX "$1" --check-blas > "$2" 2>&1; then KSETS="$ENVK SkylakeX"
        else echo "bench: OpenBLAS's AVX-512 kernels computed wrongly here (cf-bench --check-blas): not used"; sed 's/^/  /' "$2"; fi
    fi
}
