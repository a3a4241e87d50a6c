# Sourced by bench/run.sh, bench/compare.sh and bench/bf16.sh: the workloads, the kernel sets,
# the helpers.  REPS, THREADS and every workload are checked here, before any run; a run that
# fails or prints no figure ends the script with its own message (tools/mpi.sh, script_*).
. tools/mpi.sh
[ -z "$REPS" ] || script_whole REPS "$REPS" 1 1000
[ -z "$THREADS" ] || script_whole THREADS "$THREADS" 1 4096

# model|input shape|batch|timed steps
WORKLOADS=${WORKLOADS:-"models/cosmoflow.cfg|4x128x128x128|1|2 models/cosmoflow.cfg|4x128x128x128|4|1 models/cosmoflow-small.cfg|4x32x32x32|8|4 models/deepcam.cfg|16x768x1152|1|1"}

# check_workloads LIST: each "model|input shape|batch|timed steps" a model file and whole numbers
check_workloads() {
    for w in $1; do
        IFS='|' read -r model shape batch steps <<EOW
$w
EOW
        [ -f "$model" ] || script_fail "workload '$w': $model: no such file"
        case $shape in ''|*[!0-9x]*|x*|*x|*xx*) script_fail "workload '$w': '$shape' is not an input shape CxDxHxW or CxHxW";; esac
        script_whole "the batch of workload '$w'" "$batch" 1 100000; script_whole "the steps of workload '$w'" "$steps" 1 100000
    done
}
check_workloads "$WORKLOADS"
median() { sort -n | awk '{v[NR]=$1} END {if (NR) print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }
# field KEY FILE: the value after KEY on FILE's last line
field() { tail -1 "$2" | awk -v k="$1" '{for (i = 1; i < NF; i++) if ($i == k) print $(i+1)}'; }
# measured_field KEY FILE: field, where a run that printed no KEY ends the script
measured_field() {
    v=$(field "$1" "$2")
    [ -n "$v" ] || script_fail "a run printed no $1: $(tail -c 300 "$2")"
    echo "$v"
}

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
