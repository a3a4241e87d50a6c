#!/bin/sh
# Builds as users get them: the tools without MPI, OpenBLAS or libhdf5; such a build started
# by mpirun or srun as one of several ranks refuses to run (it would train N copies); a
# changed configuration (MPI=0, then MPI found) rebuilds the binaries; the header and the
# tools compile for aarch64 (the vector kernels' guards on a second architecture), and the
# Makefile adds -march only on x86-64; without OpenBLAS make stops naming the package and
# BLAS=0, which builds on the header's own sgemm; make compiles the implementation once.  Last line "N passed, M failed".
cd "$(dirname "$0")/.." || exit 1
. tools/mpi.sh
T=$(mktemp -d /tmp/cf-build-XXXXXX)
trap 'rm -rf "$T"' EXIT
pass=0; fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

# ---- the tools with no optional dependency: plain cc, naive sgemm, one process
for t in train eval convert synth check bench; do
    if cc -std=c99 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Werror -O1 -DCF_USE_ZLIB -I. -o "$T/cf-$t" "tools/cf_$t.c" -lz -lm -lpthread &&
       "$T/cf-$t" --help > /dev/null; then ok; else bad "cf-$t without MPI/OpenBLAS/HDF5"; fi
done
[ "$("$T/cf-check" --model models/cosmoflow.cfg --summary | tail -1)" = "params 8907556" ] && ok || bad "the plain cf-check counts cosmoflow.cfg's parameters"

# ---- a build without MPI, started as one of several ranks, refuses and writes nothing
bin/cf-synth cosmo --out "$T/tr" --samples 4 --size 16 --seed 1 > /dev/null
TR="$T/cf-train --model models/cosmoflow-small.cfg --input-shape 4x16x16x16 --train $T/tr --val $T/tr --batch 2 --epochs 1 --no-progress"
refused() {   # $1 the case, then the command; it must fail with the message and leave no checkpoint
    name=$1; shift
    if "$@" > "$T/o.txt" 2> "$T/e.txt"; then bad "$name: ran"; return; fi
    grep -q "built without MPI: every rank would train alone" "$T/e.txt" && grep -q "make MPI=1" "$T/e.txt" && [ ! -e "$T/n.cfck" ] && ok ||
        bad "$name: $(head -3 "$T/e.txt")"
}
mpi_launcher bin/cf-train
if [ -n "$MPIRUN" ]; then refused "an MPI=0 build under $MPIRUN -np 2" $MPIRUN -np 2 $TR --out "$T/n.cfck"
else echo "skipped: an MPI=0 build under mpirun (no MPI launcher installed)"; fi
refused "an MPI=0 build under srun (SLURM_NTASKS=2 SLURM_PROCID=1)" env SLURM_NTASKS=2 SLURM_PROCID=1 $TR --out "$T/n.cfck"
refused "an MPI=0 build under Open MPI's environment (OMPI_COMM_WORLD_SIZE=2)" env OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=0 $TR --out "$T/n.cfck"
env SLURM_NTASKS=1 SLURM_PROCID=0 $TR --out "$T/one.cfck" > /dev/null 2>&1 && [ -s "$T/one.cfck" ] && ok || bad "a single Slurm task (SLURM_NTASKS=1) trains as today"

# ---- a changed configuration rebuilds: MPI=0, then the default (MPI found) must link MPI
if [ -n "$MPIRUN" ] && ldd bin/cf-check | grep -q libmpi; then
    mkdir -p "$T/src" && cp -r Makefile cosmoflow.h tools models "$T/src/" &&
    make -s -C "$T/src" MPI=0 HDF5=0 CFLAGS=-O0 bin/cf-check > /dev/null 2>&1 &&
    ! ldd "$T/src/bin/cf-check" | grep -q libmpi &&
    make -s -C "$T/src" HDF5=0 CFLAGS=-O0 bin/cf-check > /dev/null 2>&1 &&
    ldd "$T/src/bin/cf-check" | grep -q libmpi && ok || bad "make MPI=0, then make: the binary is rebuilt with MPI (bin/.config changed)"
    before=$(stat -c %Y "$T/src/bin/cf-check"); sleep 1
    make -s -C "$T/src" HDF5=0 CFLAGS=-O0 bin/cf-check > /dev/null 2>&1 && [ "$(stat -c %Y "$T/src/bin/cf-check")" = "$before" ] && ok ||
        bad "an unchanged configuration rebuilds nothing"
else
    echo "skipped: the rebuild on a changed configuration (this build has no MPI)"
fi

# ---- OpenBLAS missing: make stops in one line naming the package and BLAS=0; BLAS=0 builds on
# the header's own sgemm (a compiler that finds no libopenblas stands for a machine without it)
mkdir -p "$T/nb" && cp -r Makefile cosmoflow.h tools models "$T/nb/" &&
printf '#!/bin/sh\ncase "$*" in *-print-file-name=libopenblas.so*) echo libopenblas.so; exit 0;; esac\nexec cc "$@"\n' > "$T/nocblas-cc" && chmod +x "$T/nocblas-cc"
NB="make -s -C $T/nb CC=$T/nocblas-cc MPI=0 HDF5=0 FFTW=0 CFLAGS=-O0"
if $NB bin/cf-check > "$T/nb.txt" 2>&1; then bad "make without OpenBLAS: built"
elif [ "$(grep -c 'OpenBLAS not found.*apt-get install libopenblas-dev.*make BLAS=0' "$T/nb.txt")" = 1 ] && [ ! -e "$T/nb/bin/cf-check" ]; then ok
else bad "make without OpenBLAS: $(head -3 "$T/nb.txt")"; fi
$NB BLAS=0 bin/cf-check > "$T/nb.txt" 2>&1 && ! ldd "$T/nb/bin/cf-check" | grep -q openblas &&
    [ "$("$T/nb/bin/cf-check" --model models/cosmoflow.cfg --summary | tail -1)" = "params 8907556" ] && ok || bad "make BLAS=0: $(head -3 "$T/nb.txt")"
# the implementation compiled once: one bin/cosmoflow.o, and each tool's own compile line without it
make -n -B MPI=0 HDF5=0 FFTW=0 all 2>/dev/null > "$T/n.txt"
[ "$(grep -c -- '-c -o bin/cosmoflow.o tools/cosmoflow.c' "$T/n.txt")" = 1 ] && [ "$(grep -c -- '-DCF_IMPLEMENTATION_LINKED .*-o bin/cf-[a-z]* tools/cf_[a-z]*.c bin/cosmoflow.o' "$T/n.txt")" = 6 ] && ok ||
    bad "make all does not compile the implementation once and link it into the six tools: $(grep -c cosmoflow.o "$T/n.txt") lines"

# ---- aarch64: the header (implementation, reference build) and every tool compile
if command -v aarch64-linux-gnu-gcc > /dev/null 2>&1; then
    A="aarch64-linux-gnu-gcc -std=c99 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Werror -O2 -I."
    $A -c tests/compile_a.c -o "$T/a.o" && $A -DCF_REFERENCE -c tests/compile_a.c -o "$T/r.o" && ok || bad "cosmoflow.h for aarch64"
    for t in train eval convert synth check bench; do $A -fopenmp -c "tools/cf_$t.c" -o "$T/$t.o" || { bad "cf-$t for aarch64"; t=x; break; }; done
    [ "$t" != x ] && ok
    [ "$(make -n CC=aarch64-linux-gnu-gcc MPI=0 HDF5=0 OPENBLAS_OMP= bin/cf-check 2>/dev/null | grep -c -- -march=)" = 0 ] && ok ||
        bad "the Makefile adds -march only on x86-64"
else
    echo "skipped: the aarch64 compile test (gcc-aarch64-linux-gnu missing: apt-get install gcc-aarch64-linux-gnu)"
fi
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
