# A real Slurm on one machine (sourced; root, Debian's slurmctld, slurmd, slurm-client and
# munge, no systemd): munged, slurmctld and NODES slurmd (nodes n1, n2, ..., one CPU each, each
# its own port) started from a scratch directory, partition "test", torn down by pid.
# docs/mpi.md, "Slurm", uses it:
#
#   . tests/slurm.sh
#   slurm_up /tmp/slurm 2          # exports SLURM_CONF; sinfo says idle
#   srun -n 2 --mpi=pmi2 bin/cf-train ...; sbatch -n 2 tools/cf-train.sbatch ...
#   slurm_down /tmp/slurm          # jobs cancelled, daemons gone, the directory removed
#
# MpiDefault=none (Slurm's own default): srun starts MPI only when asked (--mpi=pmi2), as on
# most clusters.  Requeued jobs restart within seconds (cred_expire=5, a scheduler pass every
# 2 s).  The daemons listen on SLURM_TEST_PORT and the ports after it (default 7817, 7818, ...).
slurm_up() {   # slurm_up DIR [NODES]
    SLURM_DIR=$1; nn=${2:-2}; p=${SLURM_TEST_PORT:-7817}; h=$(hostname -s)
    mkdir -p "$SLURM_DIR/etc" "$SLURM_DIR/state" "$SLURM_DIR/spool" "$SLURM_DIR/log" "$SLURM_DIR/run" "$SLURM_DIR/key" || return 1
    chmod 755 "$SLURM_DIR" "$SLURM_DIR/run"; chmod 700 "$SLURM_DIR/key"   # munged: the socket's directory world-executable
    mungekey -c -k "$SLURM_DIR/key/munge.key" > /dev/null 2>&1 || return 1
    munged --key-file="$SLURM_DIR/key/munge.key" --socket="$SLURM_DIR/run/munge.socket" --pid-file="$SLURM_DIR/run/munged.pid" \
        --log-file="$SLURM_DIR/log/munged.log" --seed-file="$SLURM_DIR/key/munged.seed" || return 1
    cat > "$SLURM_DIR/etc/slurm.conf" <<CONF
ClusterName=cftest
SlurmctldHost=$h
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$SLURM_DIR/run/munge.socket,cred_expire=5
SlurmctldPort=$p
SlurmdPort=$((p + 1))
StateSaveLocation=$SLURM_DIR/state
SlurmdSpoolDir=$SLURM_DIR/spool/%n
SlurmctldPidFile=$SLURM_DIR/run/slurmctld.pid
SlurmdPidFile=$SLURM_DIR/run/slurmd-%n.pid
SlurmctldLogFile=$SLURM_DIR/log/slurmctld.log
SlurmdLogFile=$SLURM_DIR/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
SchedulerParameters=bf_interval=1,sched_interval=2
KillWait=30
MinJobAge=300
CONF
    k=1; while [ $k -le "$nn" ]; do
        echo "NodeName=n$k NodeHostname=$h NodeAddr=127.0.0.1 Port=$((p + 1 + k)) CPUs=1 RealMemory=1000 State=UNKNOWN" >> "$SLURM_DIR/etc/slurm.conf"
        k=$((k + 1))
    done
    echo "PartitionName=test Nodes=n[1-$nn] Default=YES MaxTime=INFINITE State=UP" >> "$SLURM_DIR/etc/slurm.conf"
    export SLURM_CONF="$SLURM_DIR/etc/slurm.conf"
    slurmctld -i || return 1
    k=1; while [ $k -le "$nn" ]; do slurmd -N n$k || return 1; k=$((k + 1)); done
    i=0; until [ "$(sinfo -h -N -o %T 2>/dev/null | grep -cx idle)" = "$nn" ]; do i=$((i + 1)); [ $i -gt 150 ] && return 1; sleep 0.1; done
}
slurm_down() {   # slurm_down DIR: every job cancelled, every daemon ended, DIR removed
    d=$1
    jobs=$(squeue -h -o %i 2>/dev/null); [ -n "$jobs" ] && scancel $jobs
    i=0; while [ -n "$(squeue -h -o %i 2>/dev/null)" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
    pids=""
    for f in "$d"/run/slurmd-*.pid "$d/run/slurmctld.pid" "$d/run/munged.pid"; do
        [ -e "$f" ] && p=$(cat "$f") && kill "$p" 2>/dev/null && pids="$pids $p"
    done
    i=0; for p in $pids; do while kill -0 "$p" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done; done
    for p in $pids; do kill -9 "$p" 2>/dev/null; done
    rm -rf "$d"
}
