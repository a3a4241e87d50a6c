# Sourced by the test scripts and the demos: the launcher that matches a binary's MPI library, in MPIRUN
# (empty when the binary has no MPI or no launcher is installed).  MPICH's Hydra runs as root
# as it is; Open MPI's mpirun needs --allow-run-as-root and, on 2 cores, --oversubscribe.
mpi_launcher() {
    libs=$(ldd "$1" 2>/dev/null)
    MPIRUN=""
    if echo "$libs" | grep -q libmpich; then
        for m in mpirun.mpich mpiexec.mpich mpiexec.hydra; do command -v $m > /dev/null 2>&1 && { MPIRUN=$m; return; }; done
    elif echo "$libs" | grep -q 'libmpi\.so'; then
        for m in mpirun.openmpi orterun; do command -v $m > /dev/null 2>&1 && { MPIRUN="$m --allow-run-as-root --oversubscribe"; return; }; done
    else
        return
    fi
    command -v mpirun > /dev/null 2>&1 && MPIRUN=mpirun
}

# The scripts' checks (docs/reliability.md, "Scripts"): a setting that is not what it must be,
# or a run that fails, ends the script non-zero with one line naming it (a failed tool's own
# message is printed above that line).  script_whole NAME VALUE LO HI: VALUE a whole number in
# [LO, HI].  script_logged LOG CMD...: CMD's output shown and kept in LOG, CMD's failure the
# end (a pipe into tee alone would take tee's status, and go on).  script_measured OUT CMD...:
# CMD's standard output into OUT (its stderr into OUT.err), CMD's failure the end.
script_fail() { echo "$(basename "$0" .sh): $*" >&2; exit 1; }
script_whole() {
    case $2 in ''|*[!0-9]*) script_fail "$1='$2' is not a whole number in [$3, $4]";; esac
    [ "${#2}" -le 9 ] && [ "$2" -ge "$3" ] && [ "$2" -le "$4" ] || script_fail "$1='$2' is not a whole number in [$3, $4]"
}
script_logged() {
    log=$1; shift
    { "$@" && echo 0 > "$log.rc" || echo $? > "$log.rc"; } | tee "$log"
    rc=$(cat "$log.rc" 2> /dev/null); rm -f "$log.rc"
    [ "$rc" = 0 ] || script_fail "$1 failed (exit $rc; its message above)"
}
script_measured() {
    out=$1; shift
    "$@" > "$out" 2> "$out.err" < /dev/null && return   # (a launcher reads stdin: not the caller's loop)
    cat "$out.err" >&2
    script_fail "a run failed (its message above): $*"
}
script_precision() { case $1 in fp32|bf16) ;; *) script_fail "PRECISION='$1' is not fp32 or bf16";; esac; }

# demo_dir DIR: DIR for a demo's outputs.  A directory an earlier demo made (it holds
# .cf-demo) is emptied and reused; any other existing, non-empty directory is refused, so that
# DEMO_OUT naming a user's own directory never loses a file.  demo_dir DIR keep: a demo's
# directory is kept as it is, for a caller that reuses what it holds (make science).
demo_dir() {
    if [ -e "$1" ] && [ ! -f "$1/.cf-demo" ] && [ -n "$(ls -A "$1" 2>/dev/null)" ]; then
        echo "demo: $1 exists and was not made by a demo; give another DEMO_OUT, or remove it yourself" >&2
        exit 1
    fi
    [ "$2" = keep ] && [ -f "$1/.cf-demo" ] && return
    rm -rf "$1"
    mkdir -p "$1" && echo "made by make demo; emptied by the next one" > "$1/.cf-demo"
}

# demo_ranks BIN: how the demos run a small network (docs/science.md): two single-threaded MPI
# ranks of batch 4 beat one process with two threads; without a launcher (or in an MPI=0
# build) one process runs the global batch of 8.  Sets RUN (the launcher prefix) and BATCH.
demo_ranks() {
    mpi_launcher "$1"
    if [ -n "$MPIRUN" ]; then RUN="$MPIRUN -np 2 env OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1"; BATCH=4; else RUN=""; BATCH=8; fi
}
