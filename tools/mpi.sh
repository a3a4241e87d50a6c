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
