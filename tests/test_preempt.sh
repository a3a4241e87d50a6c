#!/bin/sh
# Stopping within an epoch (cf-train, "stopping within an epoch"): a stop signal (SIGTERM,
# SIGUSR1 or SIGUSR2) sent to every rank during the second epoch ends the run with status 143
# and the checkpoint at the step it reached; --resume then ends with the bytes of a run that
# was never interrupted: on 1 and 2 ranks (MPICH), in fp32 and bf16, with --augment, with
# --spatial 2 and with --grad-lag 1 (whose pending gradient the checkpoint holds, format 4).
# --save-every N and kill -9 at random instants (a save's renames included): every kill leaves
# a checkpoint that cf-check reads whole, and the resumed run ends with the same bytes.
# Last line "N passed, M failed".
cd "$(dirname "$0")/.." || exit 1
B=$(pwd)/bin
T=$(mktemp -d /tmp/cf-preempt-XXXXXX)
trap 'rm -rf "$T"' EXIT
pass=0; fail=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
export OMP_NUM_THREADS=1
$B/cf-synth cosmo --out "$T/tr" --samples 16 --size 32 --seed 1 --format npy > /dev/null &&
$B/cf-synth cosmo --out "$T/va" --samples 4 --size 32 --seed 2 > /dev/null || { bad "data"; echo "$pass passed, $fail failed"; exit 1; }
A0="--model $(pwd)/models/cosmoflow-small.cfg --batch 2 --train $T/tr --val $T/va --no-progress --seed 3"
A="$A0 --epochs 3"
# (the stopped runs: 10 epochs, so that the signal sent a moment into epoch 2 lands long before
# the run ends; with 3, bf16 on AMX tiles, about 50 ms an epoch on 2 ranks, sometimes ended first)
P="$A0 --epochs 10"
. tools/mpi.sh
mpi_launcher $B/cf-train   # MPIRUN: this build's launcher, or empty
# preempt NAME SIGNAL LAUNCHER... -- FLAGS: the uninterrupted run, the run stopped by SIGNAL a
# moment into epoch 2, its resume; the stop's step, status and the final bytes
preempt() {
    name=$1; sig=$2; shift 2
    L=""; while [ "$1" != -- ]; do L="$L $1"; shift; done; shift
    rm -f "$T"/u.cfck* "$T"/s.cfck*
    timeout 300 $L $B/cf-train $P "$@" --out "$T/u.cfck" > /dev/null 2>&1 || { bad "$name: the uninterrupted run"; return; }
    timeout 300 $L $B/cf-train $P "$@" --out "$T/s.cfck" > "$T/s.out" 2> "$T/s.err" &
    p=$!; i=0
    while ! grep -q '^epoch 1 ' "$T/s.out" && [ $i -lt 3000 ]; do sleep 0.01; i=$((i + 1)); done
    sleep 0.05
    pkill -$sig -f "^$B/cf-train .*$T/s.cfck"   # the ranks, not the launcher
    wait $p; rc=$?
    at=$(grep -o 'stopped after [^;]*' "$T/s.err")
    timeout 300 $L $B/cf-train $P "$@" --resume "$T/s.cfck" --out "$T/s.cfck" > "$T/r.out" 2>&1
    if [ $rc = 143 ] && [ -n "$at" ] && cmp -s "$T/u.cfck" "$T/s.cfck" && [ ! -e "$T/s.cfck.lock" ]; then ok "$name: SIG$sig $at (status 143); resumed: the uninterrupted run's bytes"
    else bad "$name: status $rc, '$at', resume: $(tail -2 "$T/r.out"); $(cmp "$T/u.cfck" "$T/s.cfck" 2>&1)"; fi
}
preempt "1 rank, fp32, --augment" TERM -- --augment
preempt "1 rank, bf16, --augment" USR1 -- --augment --precision bf16
preempt "1 rank, --grad-lag 1 with LARC" USR2 -- --grad-lag 1 --larc 0.002
if [ -n "$MPIRUN" ]; then
    preempt "2 ranks, fp32, --augment" TERM $MPIRUN -np 2 -- --augment
    preempt "2 ranks, bf16, --augment" USR1 $MPIRUN -np 2 -- --augment --precision bf16
    preempt "2 ranks, --spatial 2" TERM $MPIRUN -np 2 -- --spatial 2
    preempt "2 ranks, --grad-lag 1, bf16" TERM $MPIRUN -np 2 -- --grad-lag 1 --larc 0.002 --precision bf16
else echo "skipped: the cases on 2 ranks (no MPI launcher for this build)"; fi
# the format-4 checkpoint of a run with gradient lag: read by cf-check, and refused by a run without lag
$B/cf-check --weights "$T/s.cfck" --info > "$T/i.txt" 2>&1 && grep -q "format version 4, CRC32C correct" "$T/i.txt" &&
    ok "gradient lag's checkpoint: $(head -1 "$T/i.txt" | sed "s|$T/||")" || bad "cf-check --info on a format-4 checkpoint: $(head -2 "$T/i.txt")"
# --save-every 2 and kill -9 at random instants: each time a whole checkpoint, the resume exact
rm -f "$T"/u.cfck* "$T"/k.cfck*
$B/cf-train $A --augment --epochs 8 --out "$T/u.cfck" > /dev/null 2>&1
kills=0; good=0; k=1
while [ $k -le 8 ]; do
    R=""; [ -e "$T/k.cfck" ] && R="--resume $T/k.cfck"
    $B/cf-train $A --augment --epochs 8 --save-every 2 --out "$T/k.cfck" $R > /dev/null 2>&1 &
    p=$!
    sleep "0.$(awk -v s=$k 'BEGIN { srand(s); printf "%d", 100 + rand() * 800 }')"
    if kill -9 $p 2> /dev/null; then
        kills=$((kills + 1))
        if [ ! -e "$T/k.cfck" ] || $B/cf-check --weights "$T/k.cfck" --info 2>&1 | grep -q "CRC32C correct"; then good=$((good + 1)); fi
    fi
    wait $p 2> /dev/null
    k=$((k + 1))
done
rm -f "$T/k.cfck.lock"   # (what a kill -9 leaves; the next run takes it over)
R=""; [ -e "$T/k.cfck" ] && R="--resume $T/k.cfck"
$B/cf-train $A --augment --epochs 8 --save-every 2 --out "$T/k.cfck" $R > "$T/k.out" 2>&1
[ "$good" = "$kills" ] && cmp -s "$T/u.cfck" "$T/k.cfck" && ok "--save-every 2, kill -9 at $kills random instants: a whole checkpoint after each, the resumed run's bytes the uninterrupted one's" ||
    bad "--save-every 2 and kill -9: $good of $kills checkpoints whole; $(cmp "$T/u.cfck" "$T/k.cfck" 2>&1) $(tail -2 "$T/k.out")"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
