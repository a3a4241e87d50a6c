#!/bin/sh
# cf-train under a real Slurm (tests/slurm.sh: munged, slurmctld and two slurmd, nodes n1 and
# n2 of one CPU, from a scratch directory; root and Debian's slurm-wlm and munge, else skipped): srun --mpi=pmi2 and
# mpirun inside sbatch give mpirun's checkpoint bytes; srun without an MPI plugin is refused
# naming srun --mpi=pmi2; tools/cf-train.sbatch, as written, stopped at a step and requeued at
# three warnings, and requeued once from outside, ends with the uninterrupted run's bytes and
# one run's epoch lines; scancel ends the ranks by SIGTERM, and SIGUSR1 as SIGTERM,
# with the checkpoint intact and no lock.  Every daemon and job is gone afterwards.  Last line "N passed, M failed".
cd "$(dirname "$0")/.." || exit 1
pass=0; fail=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
skip() { echo "skipped: Slurm ($1)"; echo "0 passed, 0 failed"; exit 0; }
[ "$(id -u)" = 0 ] || skip "not root: the daemons run as root"
for c in slurmctld slurmd srun sbatch munged mungekey; do command -v $c > /dev/null 2>&1 || skip "$c missing: apt-get install slurm-wlm munge"; done
command -v mpirun.mpich > /dev/null 2>&1 && ldd bin/cf-train 2>/dev/null | grep -q libmpich || skip "bin/cf-train is not the MPICH build"
T=$(mktemp -d /tmp/cf-slurm-XXXXXX); S=$(mktemp -d /tmp/cf-slurmd-XXXXXX)
. tests/slurm.sh
trap 'slurm_down "$S"; rm -rf "$T"' EXIT
trap 'exit 1' INT TERM
slurm_up "$S" 2 || { bad "the cluster did not start: $(tail -3 "$S"/log/*.log 2>/dev/null)"; echo "$pass passed, $fail failed"; exit 1; }
ok "a cluster of 2 nodes of 1 CPU: $(sinfo -h -o '%P %D %T %N')"
B=$(pwd)/bin
$B/cf-synth cosmo --out "$T/tr" --samples 8 --size 16 --seed 1 --format npy > /dev/null && $B/cf-synth cosmo --out "$T/va" --samples 4 --size 16 --seed 2 > /dev/null || bad "data"
export OMP_NUM_THREADS=1
A="--model $(pwd)/models/cosmoflow-small.cfg --input-shape 4x16x16x16 --batch 2 --train $T/tr --val $T/va --no-progress --seed 3"
# the same job three ways: mpirun (the reference), srun --mpi=pmi2, mpirun inside sbatch
timeout 120 mpirun.mpich -np 2 $B/cf-train $A --epochs 2 --out "$T/m.cfck" > "$T/m.txt" 2>&1 || bad "mpirun: $(tail -2 "$T/m.txt")"
timeout 120 srun -N 2 -n 2 --mpi=pmi2 $B/cf-train $A --epochs 2 --out "$T/s.cfck" > "$T/s.txt" 2>&1 && cmp -s "$T/m.cfck" "$T/s.cfck" &&
    ok "srun -N 2 -n 2 --mpi=pmi2 (a rank on each node): $(grep -o '2 ranks x batch 2' "$T/s.txt"), mpirun's bytes" || bad "srun --mpi=pmi2: $(tail -2 "$T/s.txt")"
waitjob() {   # waitjob ID SECONDS: until the job has left the queue
    i=0; while squeue -h -j "$1" 2>/dev/null | grep -q . && [ $i -lt $(($2 * 10)) ]; do sleep 0.1; i=$((i + 1)); done
    ! squeue -h -j "$1" 2>/dev/null | grep -q .
}
j=$(sbatch --parsable -n 2 -o "$T/b.out" --wrap "mpirun.mpich -np \$SLURM_NTASKS $B/cf-train $A --epochs 2 --out $T/b.cfck") && waitjob "$j" 120 &&
    cmp -s "$T/m.cfck" "$T/b.cfck" && ok "sbatch with mpirun.mpich -np \$SLURM_NTASKS: mpirun's bytes" || bad "sbatch with mpirun: $(tail -2 "$T/b.out")"
# srun without an MPI plugin: N one-rank copies, refused with the launch's fix
if timeout 60 srun -n 2 --mpi=none $B/cf-train $A --epochs 1 --out "$T/n.cfck" > "$T/n.txt" 2>&1; then bad "srun --mpi=none: ran"
elif grep -q "started by srun as one of 2 tasks, but MPI reports 1: .*srun --mpi=pmi2" "$T/n.txt" && [ ! -e "$T/n.cfck" ]; then ok "srun --mpi=none refused: $(grep -m1 -o 'srun started no MPI.*' "$T/n.txt")"
else bad "srun --mpi=none: $(head -3 "$T/n.txt")"; fi
# tools/cf-train.sbatch against one run of 50 epochs: the time limit's warning to the ranks
# (scancel --signal=USR1, what --signal=USR1@N sends) at epochs 10 and 20, the warning to the
# batch shell (--signal=B:USR1@N) at 30, each a stop at a step and a requeue by the script; an
# outside scontrol requeue at 40 (srun may kill the ranks before their step ends: that one
# resumes from the last checkpoint written)
E=50
timeout 300 mpirun.mpich -np 2 $B/cf-train $A --epochs $E --out "$T/u.cfck" > /dev/null 2>&1 || bad "the uninterrupted run"
queued() { squeue -h -j "$1" 2>/dev/null | grep -q .; }
j=$(sbatch --parsable -n 2 -o "$T/rq.out" tools/cf-train.sbatch $A --epochs $E --out "$T/rq.cfck") || bad "sbatch tools/cf-train.sbatch"
for at in 10 20 30 40; do
    i=0; while ! grep -q "^epoch $at " "$T/rq.out" 2>/dev/null && queued "$j" && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
    case $at in 10|20) scancel --signal=USR1 "$j" ;; 30) scancel --batch --signal=USR1 "$j" ;; 40) scontrol requeue "$j" ;; esac
    i=0; while ! [ "$(grep -c '^cf-train.sbatch: job .* attempt' "$T/rq.out")" -gt $((at / 10)) ] && queued "$j" && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
done
waitjob "$j" 240
n=$(grep -c '^cf-train.sbatch: job .* attempt [0-9]*, resuming from' "$T/rq.out")
rq=$(grep -c '^cf-train.sbatch: cf-train stopped at a signal (status 143): requeueing' "$T/rq.out")
missing=$(e=1; while [ $e -le $E ]; do grep -q "^epoch $e " "$T/rq.out" || printf ' %d' $e; e=$((e + 1)); done)
[ "$n" = 4 ] && [ "$rq" = 3 ] && cmp -s "$T/u.cfck" "$T/rq.cfck" && [ -z "$missing" ] && [ ! -e "$T/rq.cfck.lock" ] &&
    ok "tools/cf-train.sbatch: 3 warnings, each a stop at a step and a requeue ($(grep -o 'stopped after [^;]*' "$T/rq.out" | head -3 | sed 's/stopped after //' | tr '\n' ';')), and an outside requeue: the uninterrupted run's bytes, every epoch line 1-$E" ||
    bad "the requeued job: $n resumes, $rq requeues by the script, epochs missing:$missing; $(cmp "$T/u.cfck" "$T/rq.cfck" 2>&1); $(grep -E 'cf-train|error' "$T/rq.out" | tail -4)"
grep -q "warning signal: passed on to the ranks" "$T/rq.out" && ok "the batch shell's warning passed on to the ranks" || bad "the batch shell's warning was not passed on"
# scancel: the ranks end by SIGTERM, the checkpoint intact, no lock; --resume continues
j=$(sbatch --parsable -n 2 -o "$T/c.out" --wrap "srun --mpi=pmi2 $B/cf-train $A --epochs 100000 --out $T/c.cfck")
i=0; while ! grep -q "^epoch 3 " "$T/c.out" 2>/dev/null && queued "$j" && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
scancel "$j"; waitjob "$j" 60
$B/cf-check --weights "$T/c.cfck" --info > "$T/ci.txt" 2>&1 && grep -q "CRC32C correct" "$T/ci.txt" && [ ! -e "$T/c.cfck.lock" ] && ! grep -q Killed "$T/c.out" &&
    ok "scancel: the ranks ended by SIGTERM, the checkpoint intact ($(grep -o 'epoch [0-9]*' "$T/ci.txt" | head -1)), no lock" || bad "scancel: $(tail -3 "$T/c.out")"
# SIGUSR1 to the ranks (--signal=USR1@N; MPICH installs its own handler at MPI_Init): they end as
# at SIGTERM, the lock gone, the checkpoint intact
j=$(sbatch --parsable -n 2 -o "$T/u1.out" --wrap "srun --mpi=pmi2 $B/cf-train $A --epochs 100000 --out $T/u1.cfck")
i=0; while ! grep -q "^epoch 3 " "$T/u1.out" 2>/dev/null && queued "$j" && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
scancel --signal=USR1 "$j"; waitjob "$j" 30
$B/cf-check --weights "$T/u1.cfck" --info > "$T/ci.txt" 2>&1 && grep -q "CRC32C correct" "$T/ci.txt" && [ ! -e "$T/u1.cfck.lock" ] &&
    ok "SIGUSR1 to the ranks: ended within 30 s, the checkpoint intact ($(grep -o 'epoch [0-9]*' "$T/ci.txt" | head -1)), no lock" || bad "SIGUSR1: $(tail -3 "$T/u1.out")"
# CF_SLURM_LONG=1 (make test-slurm-long, about 5 minutes): a real time limit.  The job has
# --time=1 and its warning 30 s before (--signal=USR1@30; Slurm sends it 0-60 s early): each
# attempt stops at a step and is requeued until the run of 1500 epochs is done; the end is
# the uninterrupted run's bytes.
if [ "${CF_SLURM_LONG:-0}" = 1 ]; then
    E=1500
    timeout 900 mpirun.mpich -np 2 $B/cf-train $A --epochs $E --out "$T/u3.cfck" > /dev/null 2>&1 || bad "the uninterrupted run of $E epochs"
    j=$(sbatch --parsable -n 2 --time=1 --signal=USR1@30 -o "$T/tl.out" tools/cf-train.sbatch $A --epochs $E --out "$T/tl.cfck")
    waitjob "$j" 1200
    n=$(grep -c '^cf-train.sbatch: cf-train stopped at a signal (status 143): requeueing' "$T/tl.out")
    [ "$n" -ge 3 ] && cmp -s "$T/u3.cfck" "$T/tl.cfck" &&
        ok "--time=1: $n warnings of the time limit, each a stop at a step and a requeue ($(grep -o 'stopped after [^;]*' "$T/tl.out" | sed 's/stopped after //' | tr '\n' ';')): the uninterrupted run's bytes" ||
        bad "the time limit's chain: $n requeues; $(cmp "$T/u3.cfck" "$T/tl.cfck" 2>&1); $(grep -E '^cf-train' "$T/tl.out" | tail -4)"
fi
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
