# The fourth round of hostile use (sourced by tests/test_hostile.sh, whose helpers, inputs $I,
# outputs $O and commands $TR, $EV, $B it uses): families 17 to 24, one per cause found in
# the tools' seams.  The C API's misuse is tests/test_api.c.
HF="$PY tests/hostile_files.py"

# ---- 17. the lock beside a checkpoint: never followed, never another file, gone after the run
family=17
echo important > "$I/notes.txt"
ln -s "$I/notes.txt" "$O/r.cfck.lock"
refused "a lock that is a symbolic link to a user's file" "is a symbolic link" $TR --model "$I/m.cfg" --out "$O/r.cfck"
count; [ "$(cat "$I/notes.txt")" = important ] && [ -L "$O/r.cfck.lock" ] && ok || bad "[17] the link's target or the link changed"
rm -f "$O/r.cfck.lock"; ln "$I/notes.txt" "$O/r.cfck.lock"
refused "a lock that is a hard link to a user's file" "hard link" $TR --model "$I/m.cfg" --out "$O/r.cfck"
rm -f "$O/r.cfck.lock"; echo "my draft" > "$O/r.cfck.lock"
refused "a lock that is a file of the user's" "is not a lock file" $TR --model "$I/m.cfg" --out "$O/r.cfck"
count; [ "$(cat "$O/r.cfck.lock")" = "my draft" ] && ok || bad "[17] the user's file named like the lock was changed"
rm -f "$O/r.cfck.lock"
accepted "a run" $TR --model "$I/m.cfg" --out "$O/r.cfck"
count; [ ! -e "$O/r.cfck.lock" ] && ok || bad "[17] the lock is left behind after a run"
mkdir -p "$I/empty"
refused "a run that fails after taking its lock (a validation directory without samples)" "no sample files" \
    $B/cf-train --train "$I/tr" --val "$I/empty" --batch 2 --epochs 1 --no-progress --model "$I/m.cfg" --out "$O/f.cfck"
count; [ ! -e "$O/f.cfck.lock" ] && ok || bad "[17] a failed run leaves its lock"
rmdir "$I/empty"
echo "pid 999999 on $(uname -n)" > "$O/r.cfck.lock"
accepted "a stale lock of a pid that is gone" $TR --model "$I/m.cfg" --out "$O/r.cfck"
count; grep -q "taking over the lock .* left by pid 999999" "$T/stderr" && [ ! -e "$O/r.cfck.lock" ] && ok || bad "[17] a stale lock: not taken over with a message: $(head -c 300 "$T/stderr")"

# ---- 18. schedules in O(1); a checkpoint's step bounded by its epochs
family=18
$HF ckpt "$I/c.cfck" "$I/late.cfck" step=1099511627776 && $HF ckpt "$I/late.cfck" "$I/late.cfck" epoch=1000
accepted "--resume from step 2^40 (epoch 1000) with a per-step cosine schedule: one more epoch" \
    $B/cf-train --train "$I/tr" --val "$I/va" --batch 2 --epochs 1001 --no-progress --resume "$I/late.cfck" --out "$O/late.cfck" \
    --lr-schedule cosine --t-max 1000 --override
count; grep -q "^epoch 1001 " "$T/stdout" && ok || bad "[18] the resumed epoch at step 2^40: $(head -c 300 "$T/stdout")"
$HF ckpt "$I/c.cfck" "$I/implausible.cfck" step=562949953421311
refused "--resume from step 2^49 - 1 at epoch 1 (no run of one epoch has that many steps)" "not plausible" \
    $B/cf-train --train "$I/tr" --val "$I/va" --batch 2 --epochs 3 --no-progress --resume "$I/implausible.cfck" --out "$O/x.cfck"
rm -f "$I/late.cfck" "$I/implausible.cfck"

# ---- 19. closed standard streams: refused at the start, nothing written
family=19
rm -rf "$O"/*
refused_closed() {   # $1 name, $2 which (1: stdout, 2: stderr), then the command
    name=$1; which=$2; shift 2
    count; before=$(snapshot)
    if [ "$which" = 1 ]; then timeout "$WAIT" "$@" >&- 2>"$T/stderr" </dev/null; rc=$?; else timeout "$WAIT" "$@" 2>&- >"$T/stdout" </dev/null; rc=$?; fi
    if [ $rc = 0 ] || [ $rc = 124 ]; then bad "[19] $name: exit $rc"
    elif [ "$before" != "$(snapshot)" ] || [ -n "$(ls "$O")" ]; then bad "[19] $name: a file was written or changed: $(ls "$O")"
    elif [ "$which" = 1 ] && ! grep -q "standard output is closed" "$T/stderr"; then bad "[19] $name: stderr lacks why: $(head -c 200 "$T/stderr")"
    elif [ "$which" = 2 ] && ! grep -q "standard error is closed" "$T/stdout"; then bad "[19] $name: stdout lacks why: $(head -c 200 "$T/stdout")"
    else ok; fi
}
refused_closed "cf-train with stdout closed" 1 $TR --model "$I/m.cfg" --out "$O/s.cfck"
refused_closed "cf-train with stderr closed" 2 $TR --model "$I/m.cfg" --out "$O/s.cfck"
refused_closed "cf-eval with stdout closed" 1 $EV --weights "$I/c.cfck" --data "$I/va" --pred "$O/p.csv"
refused_closed "cf-synth with stderr closed" 2 $B/cf-synth cosmo --out "$O/syn" --samples 1 --size 16
refused_closed "cf-check with stdout closed" 1 $B/cf-check --model "$I/m.cfg" --summary

# ---- 20. appends that check first; flags that contradict; outputs among the inputs
family=20
$B/cf-convert tfrecord2npy "$I"/va/*.tfrecord --out "$I/npyset" > /dev/null 2>&1
$B/cf-synth cosmo --out "$I/s32" --samples 1 --size 32 --seed 4 > /dev/null 2>&1
refused "cf-convert tfrecord2npy --append of 32^3 records into a 16^3 set" "one set holds samples of one shape" \
    $B/cf-convert tfrecord2npy "$I"/s32/*.tfrecord --out "$I/npyset" --append
$B/cf-synth cosmo --out "$I/s16" --samples 2 --size 16 --seed 8 > /dev/null 2>&1
keep; count
if $B/cf-convert tfrecord2npy "$I"/s16/*.tfrecord --out "$I/npyset" --append > /dev/null 2>"$T/stderr" &&
   [ "$(wc -l < "$I/npyset/files_data.lst")" = 4 ] && [ "$(ls "$I/npyset" | grep -c '_data.npy$')" = 4 ]; then ok
else bad "[20] cf-convert tfrecord2npy --append of matching records: $(head -c 300 "$T/stderr") (lists: $(cat "$I/npyset/files_data.lst" | tr '\n' ' '))"; fi
restore
refused "cf-convert tfrecord2npy --append of a record already in the set" "give another --out, or --force" \
    $B/cf-convert tfrecord2npy "$I"/va/*.tfrecord --out "$I/npyset" --append
refused "cf-synth cosmo --append --size 32 into a 16^3 set" "one set holds samples of one shape" $B/cf-synth cosmo --out "$I/tr" --samples 1 --size 32 --seed 9 --append
refused "cf-synth --force --append" "one or the other" $B/cf-synth cosmo --out "$I/tr" --samples 1 --size 16 --seed 9 --append --force
refused "cf-convert --force --append" "one or the other" $B/cf-convert tfrecord2npy "$I"/s16/*.tfrecord --out "$I/npyset" --append --force
refused "cf-train --png the training directory" "is the input directory" $TR --model "$I/m.cfg" --out "$O/g.cfck" --png "$I/tr"
refused "cf-eval --png the data directory" "is the input directory" $EV --weights "$I/c.cfck" --data "$I/va" --png "$I/va"
$PY -c "import numpy as np; x = np.ones((1, 4, 16, 16, 16), np.float32); x[0, 1, 2, 3, 4] = np.nan; np.save('$I/xnan.npy', x)"
refused "cf-check --dump of an input holding a NaN" "not finite" $B/cf-check --model "$I/m.cfg" --dump "$O/dump" --input "$I/xnan.npy"
count; [ ! -e "$O/dump" ] && ok || bad "[20] cf-check --dump of a NaN input wrote $O/dump"
rm -rf "$I/npyset" "$I/s32" "$I/s16" "$I/xnan.npy"

# ---- 21. one job, one set of settings; the tools that do one process's work refuse ranks
family=21
if [ -n "$MPIRUN" ]; then
    A="$B/cf-train --train $I/tr --val $I/va --batch 1 --epochs 1 --no-progress --model $I/m.cfg"
    refused "an MPMD job whose second rank has another --lr" "--lr 0.002 here; rank 0 has --lr 0.001" \
        $MPIRUN -np 1 $A --out "$O/m.cfck" --lr 0.001 : -np 1 $A --out "$O/m.cfck" --lr 0.002
    refused "an MPMD job whose second rank has another --seed" "--seed 5 here; rank 0 has --seed 4" \
        $MPIRUN -np 1 $A --out "$O/m.cfck" --seed 4 : -np 1 $A --out "$O/m.cfck" --seed 5
    refused "an MPMD job whose second rank has another --precision" "--precision bf16 here" \
        $MPIRUN -np 1 $A --out "$O/m.cfck" : -np 1 $A --out "$O/m.cfck" --precision bf16
    refused "an MPMD job whose second rank writes another --out" "--out $O/n.cfck here" \
        $MPIRUN -np 1 $A --out "$O/m.cfck" : -np 1 $A --out "$O/n.cfck"
    sed 's/filters=16/filters=8/' "$I/m.cfg" > "$I/m2.cfg"
    refused "an MPMD job whose second rank has another model" "--model $I/m2.cfg" \
        $MPIRUN -np 1 $A --out "$O/m.cfck" : -np 1 $B/cf-train --train $I/tr --val $I/va --batch 1 --epochs 1 --no-progress --model $I/m2.cfg --out "$O/m.cfck"
    rm -f "$I/m2.cfg"
    refused "cf-synth under $MPIRUN -np 2" "runs as one process" $MPIRUN -np 2 $B/cf-synth cosmo --out "$O/syn" --samples 2 --size 16
    count; [ ! -e "$O/syn" ] && ok || bad "[21] cf-synth under mpirun wrote $O/syn"
    refused "cf-eval under $MPIRUN -np 2" "runs as one process" $MPIRUN -np 2 $EV --weights "$I/c.cfck" --data "$I/va"
    refused "cf-convert under $MPIRUN -np 2" "runs as one process" $MPIRUN -np 2 $B/cf-convert extract-cfg "$I/c.cfck" --out "$O/x.cfg"
else echo "skipped: MPMD cases (no launcher for this build's MPI)"; fi

# ---- 22. a hang-up ends a run as SIGTERM does: the checkpoint intact, the lock gone
family=22
for how in alone mpirun; do
    [ $how = mpirun ] && [ -z "$MPIRUN" ] && { echo "skipped: SIGHUP under mpirun (no launcher)"; continue; }
    rm -f "$O"/h.cfck*
    L=""; [ $how = mpirun ] && L="$MPIRUN -np 1"
    $L $B/cf-train --train "$I/tr" --val "$I/va" --batch 1 --epochs 400 --no-progress --model "$I/m.cfg" --out "$O/h.cfck" > "$T/h.out" 2>&1 &
    job=$!
    i=0; while [ ! -e "$O/h.cfck" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
    pid=$(pgrep -f "cf-train.*h.cfck" | while read -r p; do [ "$(cat /proc/$p/comm 2>/dev/null)" = cf-train ] && echo "$p"; done | tail -1)
    [ -n "$pid" ] && kill -HUP "$pid"
    i=0; while kill -0 $job 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
    count
    if kill -0 $job 2>/dev/null; then bad "[22] SIGHUP ($how): the run goes on"; kill $job; wait $job 2>/dev/null
    elif ! $B/cf-check --weights "$O/h.cfck" --info > /dev/null 2>&1; then bad "[22] SIGHUP ($how): the checkpoint does not load"
    elif [ -e "$O/h.cfck.lock" ]; then bad "[22] SIGHUP ($how): the lock is left"
    else ok; fi
    wait $job 2>/dev/null
done

# ---- 23. a checkpoint's record read as settings: its faults named as the checkpoint's
family=23
$HF ckpt "$I/c.cfck" "$I/rec.cfck" "meta=precision=fp32>precision=fx32"
refused "--resume from a checkpoint whose record says precision=fx32" "rec.cfck: its training record (not a flag of this command): --precision" \
    $B/cf-train --train "$I/tr" --val "$I/va" --batch 2 --epochs 3 --no-progress --resume "$I/rec.cfck" --out "$O/x.cfck"
rm -f "$I/rec.cfck"
