#!/bin/sh
# The tools under hostile use, in sixteen families: outputs that would destroy inputs, special
# files that would block, errors found late, non-finite values, a checkpoint of another model,
# cfg limits, loose readers and broken MPI jobs; then (the third round) outputs that are
# devices, FIFOs or links, resume that keeps its settings, one writer per checkpoint, data
# sets never mixed, converters that check what they write, checkpoints whose contents are
# impossible, cfg numbers, memory and thread limits, long paths; then (the fourth round) locks
# that are links or other files, schedules at late steps, closed standard streams, appends
# that check first, MPMD jobs with other settings, SIGHUP, records named as the checkpoint's.
# Every case asserts the exit code (non-zero,
# and not a timeout), the words of the message, and that every file given as input is
# byte-identical and where it was afterwards.  CF_BIN=DIR runs the cases against other
# binaries (docs/reliability.md counts how many the previous release failed).
# Last line: "N passed, M failed".
cd "$(dirname "$0")/.." || exit 1
B=${CF_BIN:-bin}
T=$(mktemp -d /tmp/cf-hostile-XXXXXX)
trap 'rm -rf "$T"' EXIT
PY=/usr/bin/python3
I=$T/in O=$T/out
mkdir -p "$I" "$O"
pass=0; fail=0
ok()  { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
. tools/mpi.sh
mpi_launcher $B/cf-train   # MPIRUN: the launcher of this build's MPI, or empty

# every input: its path, type and checksum (FIFOs by name)
snapshot() { (cd "$I" && find . | sort | while read -r f; do
    if [ -L "$f" ]; then echo "link $f $(readlink "$f")"; elif [ -f "$f" ]; then cksum "$f"; elif [ -p "$f" ]; then echo "fifo $f"
    elif [ -c "$f" ] || [ -b "$f" ]; then echo "device $f $(stat -c '%F %t:%T' "$f")"; else echo "dir $f"; fi
done); }
# a copy of the inputs before each case, put back after a case that changed them (so that
# one failure does not spoil the cases after it; FIFOs are copied as FIFOs)
keep() { rm -rf "$T/keep" "$O.prev"; [ -d "$O" ] || { rm -f "$O"; mkdir "$O"; }; cp -a "$I" "$T/keep"; }
restore() { rm -rf "$I"; mv "$T/keep" "$I"; }
WAIT=${CF_HOSTILE_WAIT:-60}   # seconds before a case counts as hung
family=0
count() { eval "n$family=\$((\${n$family:-0} + 1))"; }
# refused NAME WORDS CMD...: CMD must exit non-zero within 60 s, say WORDS on stderr, and
# leave every input as it was
refused() {
    name=$1; want=$2; shift 2
    count
    before=$(snapshot); keep
    timeout "$WAIT" "$@" >"$T/stdout" 2>"$T/stderr" </dev/null
    rc=$?
    after=$(snapshot)
    if [ "$before" != "$after" ]; then bad "[$family] $name: an input changed or moved"; restore
    elif [ $rc = 124 ]; then bad "[$family] $name: still running after $WAIT s"
    elif [ $rc = 0 ]; then bad "[$family] $name: exit 0"
    elif ! grep -q -- "$want" "$T/stderr"; then bad "[$family] $name: stderr lacks '$want': $(head -c 400 "$T/stderr")"
    else ok; fi
}
# accepted NAME CMD...: a use that must work, inputs unchanged
accepted() {
    name=$1; shift
    count
    before=$(snapshot); keep
    if ! timeout 120 "$@" >"$T/stdout" 2>"$T/stderr" </dev/null; then bad "[$family] $name: failed: $(head -c 400 "$T/stderr")"
    elif [ "$before" != "$(snapshot)" ]; then bad "[$family] $name: an input changed or moved"; restore
    else ok; fi
}
npy_edit() {   # npy_edit FILE PYTHON-EXPRESSION-ON-x: rewrite an npy file in place (test set-up only)
    $PY -c "import numpy as np, sys; f = sys.argv[1]; x = np.load(f); $2; np.save(f, x)" "$1"
}

# ---- inputs: a model, tiny CosmoFlow data (TFRecord and npy), a checkpoint, DeepCAM data
sed 's/^input=4x32x32x32/input=4x16x16x16/' models/cosmoflow-small.cfg > "$I/m.cfg"
$B/cf-synth cosmo --out "$I/tr" --samples 4 --size 16 --seed 1 --spread 0.5 >/dev/null &&
$B/cf-synth cosmo --out "$I/va" --samples 2 --size 16 --seed 2 --spread 0.5 >/dev/null &&
$B/cf-synth cosmo --out "$I/npy" --samples 2 --size 16 --seed 3 --spread 0.5 --format npy >/dev/null &&
$B/cf-synth climate --out "$I/ctr" --samples 4 --height 32 --width 48 --seed 5 >/dev/null &&
$B/cf-train --model "$I/m.cfg" --train "$I/tr" --val "$I/va" --batch 2 --epochs 1 --out "$I/c.cfck" --no-progress >/dev/null 2>&1 ||
    { echo "FAIL: set-up"; echo "0 passed, 1 failed"; exit 1; }
TR="$B/cf-train --train $I/tr --val $I/va --batch 2 --epochs 1 --no-progress"
EV="$B/cf-eval --model $I/m.cfg"   # the model given, though the checkpoint holds it (so that older tools run the same cases)
rm -f "$I"/*.prev "$I"/ctr/*.prev

# ---- 1. outputs that would destroy inputs: refused before any work, naming both paths
family=1
refused "--mllog naming the model" "same file as the input $I/m.cfg" $TR --model "$I/m.cfg" --out "$O/a.cfck" --mllog "$I/m.cfg"
refused "--out naming the model" "same file as the input $I/m.cfg" $TR --model "$I/m.cfg" --out "$I/m.cfg"
refused "cf-eval --pred naming the checkpoint" "same file as the input $I/c.cfck" $EV --weights "$I/c.cfck" --data "$I/va" --pred "$I/c.cfck"
refused "--out naming the training directory" "is a directory" $TR --model "$I/m.cfg" --out "$I/tr"
refused "--out naming an existing directory" "is a directory" $TR --model "$I/m.cfg" --out "$O"
ln "$I/m.cfg" "$O/hard.cfg"
refused "--out a hard link to the model (another name, the same inode)" "same file as the input" $TR --model "$I/m.cfg" --out "$O/hard.cfg"
ln -s "$I/c.cfck" "$O/sym.npy"
refused "cf-eval --pred a symbolic link to the checkpoint" "same file as the input" $EV --weights "$I/c.cfck" --data "$I/va" --pred "$O/sym.npy"
rm -f "$O/hard.cfg" "$O/sym.npy"
f=$(ls "$I"/npy/*_data.npy | head -1)
refused "cf-eval --pred naming a sample of --data" "$f" $EV --weights "$I/c.cfck" --data "$I/npy" --pred "$f"
refused "cf-check --dump into the directory of its model" "" $B/cf-check --model "$I/m.cfg" --dump "$I/m.cfg"
refused "cf-convert extract-cfg over its checkpoint" "same file as the input" $B/cf-convert extract-cfg "$I/c.cfck" --out "$I/c.cfck"
refused "cf-convert tfrecord2npy over its own records' directory entries" "" $B/cf-convert tfrecord2npy "$I"/tr/*.tfrecord --out "$I/tr/synth_1_000000.tfrecord"
# a log given on --resume is appended to: the first run's lines stay
cp "$I/c.cfck" "$O/r.cfck"
$TR --model "$I/m.cfg" --out "$O/l.cfck" --mllog "$O/l.log" >/dev/null 2>&1
cp "$O/l.log" "$O/l1.log" 2>/dev/null
accepted "--mllog on --resume appends" $TR --model "$I/m.cfg" --resume "$O/l.cfck" --out "$O/l.cfck" --epochs 2 --mllog "$O/l.log"
head -c "$(wc -c < "$O/l1.log")" "$O/l.log" | cmp -s - "$O/l1.log" && [ "$(wc -c < "$O/l.log")" -gt "$(wc -c < "$O/l1.log")" ] &&
    grep -q '"epoch_num": 2' "$O/l.log" && ok || bad "[1] --resume --mllog: the first run's lines kept, the second's after them"

# ---- 2. special files: refused at once by name, never a blocked open (also under mpirun)
family=2
mkfifo "$I/fifo.cfg" "$I/fifo.cfck"
mkdir "$I/ftr" && cp "$I"/npy/* "$I/ftr/" && d=$(ls "$I"/ftr/*_data.npy | head -1) && rm "$d" && mkfifo "$d"
mkdir "$I/fla" && cp "$I"/npy/* "$I/fla/" && l=$(ls "$I"/fla/*_label.npy | head -1) && rm "$l" && mkfifo "$l"
mkdir "$I/fst" && cp "$I"/ctr/* "$I/fst/" && rm "$I/fst/stats_minval.npy" && mkfifo "$I/fst/stats_minval.npy"
refused "a FIFO as --model" "fifo.cfg: not a regular file" $TR --model "$I/fifo.cfg" --out "$O/a.cfck"
refused "a FIFO as a _data.npy sample" "$d: not a regular file" $TR --model "$I/m.cfg" --train "$I/ftr" --out "$O/a.cfck"
refused "a FIFO as a _label.npy sample" "$l: not a regular file" $TR --model "$I/m.cfg" --train "$I/fla" --out "$O/a.cfck"
refused "a FIFO as --weights" "fifo.cfck: not a regular file" $EV --weights "$I/fifo.cfck" --data "$I/va"
refused "a FIFO as --resume" "fifo.cfck: not a regular file" $TR --model "$I/m.cfg" --resume "$I/fifo.cfck" --out "$O/a.cfck"
refused "a FIFO as a stats file" "stats_minval.npy: not a regular file" $B/cf-train --model models/deepcam-small.cfg --input-shape 16x32x48 --train "$I/ctr" --val "$I/ctr" --stats "$I/fst" --batch 2 --epochs 1 --out "$O/a.cfck" --no-progress
refused "a FIFO as cf-check --model" "fifo.cfg: not a regular file" $B/cf-check --model "$I/fifo.cfg" --summary
refused "a device as --model" "/dev/zero: not a regular file" $B/cf-check --model /dev/zero --summary
if [ -n "$MPIRUN" ]; then
    refused "a FIFO as --model under mpirun -np 2" "fifo.cfg: not a regular file" $MPIRUN -np 2 $TR --model "$I/fifo.cfg" --out "$O/a.cfck"
else echo "skipped: FIFO under mpirun (no launcher for this build's MPI)"; fi

# ---- 3. errors found before the work, every write checked, leftovers of a kill -9 removed
family=3
refused "--out in a missing directory" "the directory $O/nodir does not exist" $TR --model "$I/m.cfg" --out "$O/nodir/a.cfck"
grep -q '^epoch' "$T/stdout" && bad "[3] --out in a missing directory: refused only after an epoch" || ok
refused "cf-eval --pred in a missing directory" "$O/nodir" $EV --weights "$I/c.cfck" --data "$I/va" --pred "$O/nodir/p.npy"
[ -s "$T/stdout" ] && bad "[3] cf-eval --pred in a missing directory: refused only after the evaluation" || ok
refused "--mllog in a missing directory" "$O/nodir" $TR --model "$I/m.cfg" --out "$O/a.cfck" --mllog "$O/nodir/m.log"
refused "--png under a file" "" $TR --model "$I/m.cfg" --out "$O/a.cfck" --png "$I/m.cfg/png"
refused "stdout on a full disk" "write" sh -c "$TR --model $I/m.cfg --out $O/full.cfck > /dev/full"
refused "cf-eval stdout on a full disk" "write" sh -c "$EV --weights $I/c.cfck --data $I/va > /dev/full"
mkdir -p "$O/small"
if mount -t tmpfs -o size=12k tmpfs "$O/small" 2>/dev/null; then
    head -c 1M /dev/zero > "$O/small/fill" 2>/dev/null
    refused "the MLPerf log on a full disk" "m.log" $TR --model "$I/m.cfg" --out "$O/a.cfck" --mllog "$O/small/m.log"
    refused "a checkpoint on a full disk" "small/a.cfck" $TR --model "$I/m.cfg" --out "$O/small/a.cfck"
    umount "$O/small"
else echo "skipped: full-disk MLPerf log (cannot mount a small tmpfs here)"; fi
touch "$O/k.cfck.next.tmp.$(hostname).999999" "$O/k.cfck.next.tmp.$(hostname).999998"   # what a kill -9 during the write leaves
accepted "a run after a kill -9 left temporary files" $TR --model "$I/m.cfg" --out "$O/k.cfck"
[ -z "$(ls "$O" | grep 'k.cfck.tmp')" ] && ok || bad "[3] the temporary files of an interrupted write are removed: $(ls "$O")"
refused "--epochs that is not a number" "--epochs" $TR --model "$I/m.cfg" --out "$O/a.cfck" --epochs 2x

# ---- 4. no NaN passes: non-finite values in data, statistics, flags and metrics are errors naming them
family=4
if $PY -c 'import numpy' 2>/dev/null; then
    for case in "label|x[1] = 3e38|label 1 is 3e+38" "count|x[0, 0, 0, 0] = -5|is -5: particle counts cannot be negative" ; do
        what=${case%%|*}; rest=${case#*|}; expr=${rest%%|*}; words=${rest#*|}
        mkdir -p "$I/v$what" && cp "$I"/npy/* "$I/v$what/"
        f=$(ls "$I/v$what"/*_data.npy | head -1)
        [ "$what" = label ] && npy_edit "${f%_data.npy}_label.npy" "$expr" || npy_edit "$f" "$expr"
        refused "validation: a $what of $words" "$words" $TR --model "$I/m.cfg" --val "$I/v$what" --out "$O/a.cfck"
        grep -q "$(basename "$f")" "$T/stderr" && ok || bad "[4] validation $what: the sample is named: $(cat "$T/stderr")"
        refused "cf-eval: a $what of $words" "$(basename "$f")" $EV --weights "$I/c.cfck" --data "$I/v$what"
        refused "training: a $what of $words" "$(basename "$f")" $TR --model "$I/m.cfg" --train "$I/v$what" --out "$O/a.cfck"
    done
    for case in "nan|x[3] = np.nan|channel 3 is nan" "inf|x[0] = -np.inf|channel 0 is -inf" "swap|x[:] = 1e6|above its maximum"; do
        what=${case%%|*}; rest=${case#*|}; expr=${rest%%|*}; words=${rest#*|}
        mkdir -p "$I/s$what" && cp "$I"/ctr/* "$I/s$what/"
        npy_edit "$I/s$what/stats_minval.npy" "$expr"
        refused "DeepCAM stats: $what (cf-train)" "stats_minval.npy: .*$words" $B/cf-train --model models/deepcam-small.cfg --input-shape 16x32x48 --train "$I/s$what" --val "$I/s$what" --batch 2 --epochs 1 --out "$O/a.cfck" --no-progress
    done
    $B/cf-train --model models/deepcam-small.cfg --input-shape 16x32x48 --train "$I/ctr" --val "$I/ctr" --batch 2 --epochs 1 --out "$I/d.cfck" --no-progress >/dev/null 2>&1
    refused "DeepCAM stats: nan (cf-eval)" "stats_minval.npy: channel 3 is nan" $B/cf-eval --model models/deepcam-small.cfg --input-shape 16x32x48 --weights "$I/d.cfck" --data "$I/ctr" --stats "$I/snan"
    mkdir -p "$I/wnan" && $B/cf-convert weights-export --weights "$I/c.cfck" --out "$I/wnan" >/dev/null 2>&1 &&
        w=$(ls "$I"/wnan/*.npy | head -1) && npy_edit "$w" "x.flat[0] = np.nan"
    refused "imported weights holding a NaN" "$(basename "$w"): holds a NaN" $B/cf-eval --model "$I/m.cfg" --weights "$I/wnan" --data "$I/va"
else echo "skipped: non-finite data cases (python3-numpy absent)"; fi
refused "--lr nan" "--lr: .nan. is not a number" $TR --model "$I/m.cfg" --out "$O/a.cfck" --lr nan
refused "--lr inf" "--lr: .inf. is not a number" $TR --model "$I/m.cfg" --out "$O/a.cfck" --lr inf
refused "--eta-min -inf" "--eta-min" $TR --model "$I/m.cfg" --out "$O/a.cfck" --eta-min -inf
refused "--decay with a nan factor" "--decay" $TR --model "$I/m.cfg" --out "$O/a.cfck" --decay 2:nan
refused "--target nan" "--target" $TR --model "$I/m.cfg" --out "$O/a.cfck" --target nan

# ---- 5. a checkpoint of a different model: refused naming what differs
family=5
sed '0,/^\[maxpool\]/s//[avgpool]/' "$I/m.cfg" > "$I/avg.cfg"
sed '0,/^activation=leaky/s//activation=relu/' "$I/m.cfg" > "$I/relu.cfg"
sed '0,/^slope=0.3/s//slope=0.2/' "$I/m.cfg" > "$I/slope.cfg"
sed '0,/^size=3/s//size=3\ndilation=2/' "$I/m.cfg" > "$I/dil.cfg"
refused "cf-eval: max-pool changed to average" "layer 1 .*maxpool.*avgpool" $B/cf-eval --model "$I/avg.cfg" --weights "$I/c.cfck" --data "$I/va"
refused "cf-eval: an activation changed" "different model" $B/cf-eval --model "$I/relu.cfg" --weights "$I/c.cfck" --data "$I/va"
refused "--resume: a LeakyReLU slope changed" "slope" $TR --model "$I/slope.cfg" --resume "$I/c.cfck" --out "$O/a.cfck" --epochs 2
refused "--resume: a dilation added" "different model" $TR --model "$I/dil.cfg" --resume "$I/c.cfck" --out "$O/a.cfck" --epochs 2
refused "cf-eval: another input size" "input 4x16x16x16 in the checkpoint, 4x32x32x32" $B/cf-eval --model models/cosmoflow-small.cfg --weights "$I/c.cfck" --data "$I/va"
(cat "$I/m.cfg"; printf '\n# a comment does not change the computation\n') > "$I/comment.cfg"
accepted "the same model with another comment" $B/cf-eval --model "$I/comment.cfg" --weights "$I/c.cfck" --data "$I/va"

# ---- 6. cfg limits: 64-bit shapes with limits, repeated keys, long values, byte-order marks
family=6
printf '[net]\ninput=4x16x16x16\n[conv]\nfilters=2\nsize=2000000000\npad=same\n' > "$I/k.cfg"
refused "a huge kernel with pad=same" "k.cfg:5" $B/cf-check --model "$I/k.cfg" --summary
printf '[net]\ninput=4x1024x1024x1024\n[flatten]\n[route]\nlayers=-1,-1\n' > "$I/r.cfg"
refused "a route over huge flattened inputs" "r.cfg" $B/cf-check --model "$I/r.cfg" --summary
printf '[net]\ninput=4x16x16x16\ninput=4x8x8x8\n[conv]\nfilters=2\nsize=3\n' > "$I/twice.cfg"
refused "input= given twice" "twice.cfg:3: key 'input' given twice in \[net\] (first at line 2)" $B/cf-check --model "$I/twice.cfg" --summary
{ printf '[net]\ninput=4x16x16x16\n[conv]\nfilters=2\nsize=3\nactivation='; head -c 300 /dev/zero | tr '\0' 'r'; printf '\n'; } > "$I/long.cfg"
refused "a 300-character value, given whole in the message" "long.cfg:6: activation=$(head -c 300 /dev/zero | tr '\0' 'r') is not" $B/cf-check --model "$I/long.cfg" --summary
printf '\357\273\277[net]\ninput=4x16x16x16\n[conv]\nfilters=2\nsize=3\n' > "$I/bom.cfg"
accepted "a UTF-8 byte-order mark" $B/cf-check --model "$I/bom.cfg" --summary
printf '[net]\ninput=4x16x16x16\n[conv]\nfilters=2\nsize=3\nfoo=1\n' > "$I/unk.cfg"
refused "an unknown key, the file named once" "unk.cfg:6: unknown key 'foo'" $B/cf-check --model "$I/unk.cfg" --summary
[ "$(grep -o 'unk.cfg' "$T/stderr" | wc -l)" = 1 ] && ok || bad "[6] the message repeats its prefix: $(cat "$T/stderr")"
$PY -c "
print('[net]\ninput=4x8x8x8')
for i in range(5000): print('[conv]\nfilters=4\nsize=1\n')" > "$I/deep.cfg"
count; t0=$(date +%s)
timeout 60 $B/cf-check --model "$I/deep.cfg" --summary >/dev/null 2>&1 && ok || bad "[6] cf-check --summary of 5,000 layers within 60 s"
echo "note: cf-check --summary of 5,000 layers: $(( $(date +%s) - t0 )) s"

# ---- 7. loose readers and broken MPI jobs
family=7
mkdir -p "$I/two" && cat "$I"/va/*.tfrecord > "$I/two/both.tfrecord"
refused "a TFRecord file with two records" "both.tfrecord: holds more than one record" $EV --weights "$I/c.cfck" --data "$I/two"
mkdir -p "$I/gz" && f=$(ls "$I"/va/*.tfrecord | head -1) && gzip -c "$f" > "$I/gz/a.tfrecord.gz" && printf 'trailing' >> "$I/gz/a.tfrecord.gz"
refused "bytes after the gzip member" "a.tfrecord.gz: .*after the gzip" $EV --weights "$I/c.cfck" --data "$I/gz"
mkdir -p "$I/empty"
refused "an empty data directory" "empty" $EV --weights "$I/c.cfck" --data "$I/empty"
if [ -n "$MPIRUN" ]; then
    mkdir -p "$I/tr3" && cp "$(ls "$I"/tr/*.tfrecord | head -1)" "$(ls "$I"/tr/*.tfrecord | sed -n 2p)" "$(ls "$I"/tr/*.tfrecord | sed -n 3p)" "$I/tr3/"
    refused "ranks given different file counts (MPMD)" "cf-train: .*--train .* here; rank 0 has --train" $MPIRUN -np 1 $TR --model "$I/m.cfg" --out "$O/a.cfck" : \
        -np 1 $B/cf-train --train "$I/tr3" --val "$I/va" --batch 2 --epochs 1 --no-progress --model "$I/m.cfg" --out "$O/a.cfck"
    grep -q "Message truncated" "$T/stderr" && bad "[7] MPMD: MPI's own message instead of the tool's" || ok
    # a rank killed in the middle of training: the job ends, the survivor says so in a tool line
    count
    $MPIRUN -np 2 $B/cf-train --model "$I/m.cfg" --train "$I/tr" --val "$I/va" --batch 1 --epochs 400 --no-progress --out "$O/kill.cfck" >"$T/kill.out" 2>"$T/kill.err" &
    job=$!
    sleep 4
    pid=$(pgrep -f "cf-train.*kill.cfck" | while read -r p; do [ "$(cat /proc/$p/comm)" = cf-train ] && echo "$p"; done | tail -1)
    [ -n "$pid" ] && kill -9 "$pid"
    t0=$(date +%s); wait $job; rc=$?
    [ $rc != 0 ] && [ $(( $(date +%s) - t0 )) -lt 30 ] && ok || bad "[7] a killed rank: the job ends (rc $rc after $(( $(date +%s) - t0 )) s)"
    # the survivor's line when it noticed first, else the launcher's report of the killed rank
    if grep -q "backtrace\|Backtrace" "$T/kill.err"; then bad "[7] a killed rank: a transport backtrace: $(head -c 300 "$T/kill.err")"
    elif grep -q "cf-train: the MPI library ended this process\|cf-train: .*MPI communication failed" "$T/kill.err" ||
         grep -q "BAD TERMINATION\|exited on signal\|killed" "$T/kill.out" "$T/kill.err"; then ok
    else bad "[7] a killed rank: neither the survivor nor the launcher said so: $(head -c 300 "$T/kill.err")"; fi
else echo "skipped: MPI job cases (no launcher for this build's MPI)"; fi

. tests/test_hostile_3.sh
. tests/test_hostile_4.sh
. tests/test_hostile_scripts.sh
. tests/test_hostile_outputs.sh
. tests/test_hostile_collectives.sh
for f in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23; do eval "echo \"family $f: \${n$f:-0} cases\""; done
echo "$pass passed, $fail failed"
[ $fail = 0 ]
