# Sourced by the test scripts: the launcher that matches a binary's MPI library, in MPIRUN
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
