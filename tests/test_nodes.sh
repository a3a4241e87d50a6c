#!/bin/sh
# Many nodes for real, on one machine: two node namespaces on a bridge (tests/nodes.sh), each
# link shaped to 1 Gbit/s, jobs started across them by MPICH's hydra and by Open MPI's mpirun,
# forced onto TCP.  2 nodes x batch 2 train the weights of 1 process x batch 4, and one sample
# split across the 2 nodes (--spatial 2) those of 1 process; 5 % packet
# loss changes no byte; a link cut in the middle of a run ends every rank within
# --comm-timeout + 10 s with a message naming the operation and the last checkpoint, which is
# intact, and resuming from it gives the uninterrupted run's bytes; nothing is left behind
# (namespaces, processes).  Root only (network namespaces); otherwise counted as skipped.
# NODES_SABOTAGE=1 runs the cut without the watchdog: the case must fail by its timeout.
# Last line "N passed, M failed".
cd "$(dirname "$0")/.." || exit 1
pass=0; fail=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
for c in ip tc iptables unshare mpiexec.hydra; do
    command -v $c > /dev/null 2>&1 || { echo "skipped: the emulated cluster ($c missing: apt-get install iproute2 iptables mpich)"; echo "0 passed, 0 failed"; exit 0; }
done
if [ "$(id -u)" != 0 ] || ! ldd bin/cf-train | grep -q libmpich; then
    echo "skipped: the emulated cluster (needs root for network namespaces, and the MPICH build)"; echo "0 passed, 0 failed"; exit 0
fi
if ! ip netns add "cfprobe$$" 2> /dev/null || ! ip netns del "cfprobe$$"; then
    echo "skipped: the emulated cluster (this machine refuses network namespaces, even to root)"; echo "0 passed, 0 failed"; exit 0
fi
T=$(mktemp -d /tmp/cf-nodes-XXXXXX)
. tests/nodes.sh
trap 'nodes_down; rm -rf "$T"' EXIT INT TERM
PY=/usr/bin/python3
B=$(pwd)/bin
nodes_up 2 "$T/cluster" && link_rate 1 1gbit && link_rate 2 1gbit && ok "two nodes (198.18.0.1, .2) on a bridge, links at 1 Gbit/s" ||
    { bad "the emulated cluster cannot be made"; echo "$pass passed, $fail failed"; exit 1; }

$B/cf-synth cosmo --out "$T/tr" --samples 8 --size 16 --seed 1 --spread 0.5 > /dev/null &&
$B/cf-synth cosmo --out "$T/va" --samples 4 --size 16 --seed 2 --spread 0.5 > /dev/null || bad "data"
TR="$B/cf-train --model $(pwd)/models/cosmoflow-small.cfg --input-shape 4x16x16x16 --train $T/tr --val $T/va --seed 3 --lr 0.01 --warmup-epochs 0 --augment --no-progress"
HYDRA="mpiexec.hydra $NODES_HYDRA -n 2 -ppn 1 -genv OMP_NUM_THREADS 1 -genv OPENBLAS_NUM_THREADS 1"
same_weights() {   # $1 $2 checkpoints: the largest difference relative to each tensor's largest value
    for f in "$1" "$2"; do rm -rf "$f.w"; $B/cf-convert weights-export --weights "$f" --out "$f.w" > /dev/null 2>&1 || return 1; done
    $PY - "$1.w" "$2.w" <<'EOF'
import sys, glob, os, numpy as np
worst = max(float(np.abs(np.load(f) - np.load(os.path.join(sys.argv[2], os.path.basename(f)))).max() / np.abs(np.load(f)).max())
            for f in glob.glob(sys.argv[1] + "/*.npy"))
print("%.2e" % worst)
sys.exit(0 if worst < 1e-4 else 1)
EOF
}
rx() { node_run 2 cat /sys/class/net/eth0/statistics/rx_bytes; }

# ---- 1 process x batch 4, then 2 nodes x batch 2 with MPICH (over TCP: the bytes cross eth0)
$TR --batch 4 --epochs 3 --out "$T/r1.cfck" > /dev/null 2>&1 || bad "1 process x batch 4"
before=$(rx)
node_run 1 timeout 60 $HYDRA $TR --batch 2 --epochs 3 --out "$T/m2.cfck" > "$T/m2.txt" 2>&1 && w=$(same_weights "$T/r1.cfck" "$T/m2.cfck") &&
    ok "MPICH, 2 nodes x batch 2 = 1 x batch 4 (worst relative weight difference $w)" || bad "MPICH across the nodes: $(tail -3 "$T/m2.txt") $w"
moved=$(( $(rx) - before ))
[ $moved -gt 3000000 ] && ok "the gradients crossed the emulated link ($moved bytes into node 2)" || bad "only $moved bytes crossed eth0: shared memory?"

# ---- a sample split across the two nodes (--spatial 2): its halos and its split [dense] cross
#      the link; one process's weights
$B/cf-synth cosmo --out "$T/tr32" --samples 8 --size 32 --seed 1 --spread 0.5 --format npy > /dev/null || bad "32^3 data"
TS="$B/cf-train --model $(pwd)/models/cosmoflow-small.cfg --train $T/tr32 --seed 3 --lr 0.001 --augment --no-progress --batch 2 --epochs 1"
$TS --input-shape 4x32x32x32 --val "$T/tr32" --out "$T/s1.cfck" > /dev/null 2>&1 || bad "1 process at 32^3"
before=$(rx)
node_run 1 timeout 90 $HYDRA $TS --input-shape 4x32x32x32 --val "$T/tr32" --spatial 2 --out "$T/s2.cfck" > "$T/s2.txt" 2>&1 && w=$(same_weights "$T/s1.cfck" "$T/s2.cfck") &&
    ok "MPICH, one sample split across the 2 nodes (--spatial 2): one process's weights ($w)" || bad "--spatial 2 across the nodes: $(tail -3 "$T/s2.txt") $w"
moved=$(( $(rx) - before ))
[ $moved -gt 1000000 ] && ok "the halos and the features crossed the emulated link ($moved bytes into node 2)" || bad "only $moved bytes crossed eth0"

# ---- Open MPI: the tools built with its wrapper
if command -v mpicc.openmpi > /dev/null && command -v mpirun.openmpi > /dev/null; then
    mkdir -p "$T/ompi" && cp -r Makefile cosmoflow.h tools "$T/ompi/" &&
    make -s -C "$T/ompi" MPICC=mpicc.openmpi HDF5=0 FFTW=0 bin/cf-train > "$T/ompi.txt" 2>&1 || bad "make MPICC=mpicc.openmpi: $(tail -2 "$T/ompi.txt")"
    TRO=$(echo "$TR" | sed "s|$B/cf-train|$T/ompi/bin/cf-train|")
    node_run 1 timeout 60 mpirun.openmpi $NODES_OMPI -np 2 -x OMP_NUM_THREADS=1 -x OPENBLAS_NUM_THREADS=1 $TRO --batch 2 --epochs 3 --out "$T/o2.cfck" > "$T/o2.txt" 2>&1 &&
        w=$(same_weights "$T/r1.cfck" "$T/o2.cfck") && ok "Open MPI, 2 nodes x batch 2 = 1 x batch 4 ($w)" || bad "Open MPI across the nodes: weights differ by $w; $(tail -3 "$T/o2.txt")"
else echo "skipped: Open MPI across the nodes (libopenmpi-dev missing)"; fi

# ---- 5 % of the packets lost each way: TCP resends them, the bytes do not change
link_loss 1 0.05 && link_loss 2 0.05
node_run 1 timeout 90 $HYDRA $TR --batch 2 --epochs 3 --out "$T/l2.cfck" > "$T/l2.txt" 2>&1 && cmp -s "$T/m2.cfck" "$T/l2.cfck" &&
    ok "5 % packet loss: the same checkpoint bytes" || bad "5 % loss: $(tail -2 "$T/l2.txt")"
for n in 1 2; do node_run $n iptables -F OUTPUT; done

# ---- a link cut in the middle: every rank ends on its own with the watchdog's message
E=24; TO=8
node_run 1 timeout 90 $HYDRA $TR --batch 1 --epochs $E --out "$T/u.cfck" > /dev/null 2>&1 || bad "the uninterrupted run"
WATCH="--comm-timeout $TO"; [ -n "$NODES_SABOTAGE" ] && WATCH="--comm-timeout 0"
node_run 1 timeout 120 $HYDRA sh -c "exec $TR --batch 1 --epochs $E $WATCH --out $T/c.cfck 2> $T/cut.\$PMI_RANK.err" > "$T/cut.out" 2>&1 &
job=$!
i=0; while ! grep -q '^epoch 2 ' "$T/cut.out" 2>/dev/null && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
link_cut 2; t0=$(date +%s)
running() { for n in 1 2; do ip netns pids "$NODES_PREFIX-$n" 2>/dev/null | while read -r p; do [ "$(cat /proc/$p/comm 2>/dev/null)" = cf-train ] && echo $p; done; done; }
while [ -n "$(running)" ] && [ $(( $(date +%s) - t0 )) -lt $((TO + 30)) ]; do sleep 0.5; done
took=$(( $(date +%s) - t0 ))
[ -z "$(running)" ] && [ $took -le $((TO + 10)) ] && ok "link cut after epoch 2: every rank ended in $took s (--comm-timeout $TO)" ||
    bad "link cut: ranks still running $took s after the cut (--comm-timeout $TO; processes: $(running | tr '\n' ' '))"
for r in 0 1; do
    grep -q "cf-train: rank $r: MPI_.* got no answer from its peers in $TO s (a node or the link is gone); the last checkpoint is $T/c.cfck, epoch [0-9]" "$T/cut.$r.err" &&
        ok "rank $r: $(grep -o 'MPI_[^;]*; the last checkpoint is [^,]*, epoch [0-9]*' "$T/cut.$r.err" | sed "s|$T/||")" || bad "rank $r's message: $(cat "$T/cut.$r.err" 2>/dev/null | head -3)"
done
kill $job 2>/dev/null; for n in 1 2; do ip netns pids "$NODES_PREFIX-$n" | xargs -r kill -9 2>/dev/null; done; wait $job 2>/dev/null
$B/cf-check --weights "$T/c.cfck" --info > "$T/c.info" 2>&1 && grep -q "CRC32C correct" "$T/c.info" && ok "the checkpoint is intact ($(grep -o 'epoch [0-9]*' "$T/c.info" | head -1))" ||
    bad "the checkpoint after the cut: $(head -2 "$T/c.info")"
link_restore 2
node_run 1 timeout 90 $HYDRA $TR --batch 1 --epochs $E --resume "$T/c.cfck" --out "$T/c.cfck" > "$T/res.txt" 2>&1 && cmp -s "$T/u.cfck" "$T/c.cfck" &&
    ok "resumed across the nodes to epoch $E: the uninterrupted run's bytes" || bad "resume after the cut: $(tail -2 "$T/res.txt")"

# ---- nothing left behind
nodes_down
left=$(nodes_left)
[ -z "$left" ] && [ -z "$(ip netns list | grep "^$NODES_PREFIX")" ] && ok "nothing left: no namespace, link or process of the cluster" || bad "left behind: $left"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
