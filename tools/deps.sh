#!/bin/sh
# Installs the Debian packages cosmoflow.h needs when something is missing and we are root;
# otherwise says what to install.  "deps.sh test" adds the packages the tests use: PyTorch and
# NumPy (reference numbers), h5py, valgrind, clang (fuzzing), FFTW (the particle-mesh
# generator), Open MPI (the second MPI the suite builds with) and the aarch64 cross compiler
# (the second architecture the header is compiled for), iproute2 and iptables (the emulated
# cluster of tests/test_nodes.sh), slurm-wlm and munge (a real Slurm, tests/test_slurm.sh), libdnnl-dev (oneDNN: the
# peer bench/onednn_peer.c, which make bench times every convolution against, and its check,
# tests/test_onednn_peer.sh).  Without them the suites that need
# them are skipped, and counted as skipped in make test's last line.
need="build-essential libopenblas-dev libopenblas-openmp-dev mpich libmpich-dev zlib1g-dev libhdf5-dev pkg-config libfftw3-dev"
[ "$1" = test ] && need="$need python3-numpy python3-torch python3-h5py valgrind clang libopenmpi-dev gcc-aarch64-linux-gnu iproute2 iptables slurm-wlm munge libdnnl-dev"
missing=""
for p in $need; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if ! command -v dpkg-query > /dev/null 2>&1; then
    echo "deps: not a Debian system: install the equivalents of:$missing"
    exit 0
fi
if [ "$(id -u)" = 0 ]; then
    echo "installing:$missing"
    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $missing || exit 1
    # Open MPI's package makes its mpirun and mpicc the system's defaults; the build and the
    # tests name MPICH's and Open MPI's explicitly, so nothing depends on which one wins.
else
    echo "missing Debian packages:$missing"
    echo "install them with: sudo apt-get install$missing"
    [ "$1" = test ] && exit 0   # the tests that need them are skipped, and counted
    exit 1
fi
