# Hostile use of the collective tools and of flags (sourced by tests/test_hostile.sh, whose
# helpers, inputs $I, outputs $O and commands $TR, $EV, $B it uses): families 29 to 33.
# 29: every tool that runs collectively ends a stopped job after --comm-timeout; 30: no run,
# however it ends, leaves its lock; 31: cf-bench --plan takes only layouts that exist;
# 32: a flag that would be ignored is refused by name; 33: messages say what is wrong.

# stopped NAME WORDS CMD...: CMD runs under $MPIRUN -np 2, each rank writing its pid first;
# rank 1 is stopped (kill -STOP) at its start, before CMD (with STOP_AT_START=1), or
# $STOP_DELAY s after both run, or once the file $STOP_AFTER exists.  Rank 0 must end within
# 20 s, saying WORDS on stderr.  The launcher may wait for the stopped rank: it is ended by its
# pid afterwards, whatever happened, and the job with it.
stopped() {
    name=$1; want=$2; shift 2
    count
    rm -f "$T"/rank[01].pid
    $MPIRUN -np 2 sh -c 'r=${PMI_RANK:-$OMPI_COMM_WORLD_RANK}; echo $$ > "$0/rank$r.pid"; [ "$r" = 1 ] && [ "$1" = 1 ] && kill -STOP $$; shift; exec "$@"' \
        "$T" "${STOP_AT_START:-0}" "$@" > "$T/stop.out" 2> "$T/stop.err" < /dev/null &
    job=$!
    i=0; while { [ ! -s "$T/rank0.pid" ] || [ ! -s "$T/rank1.pid" ]; } && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
    first=$(cat "$T/rank0.pid" 2> /dev/null); victim=$(cat "$T/rank1.pid" 2> /dev/null)
    [ -n "$STOP_DELAY" ] && sleep "$STOP_DELAY"
    i=0; while [ -n "$STOP_AFTER" ] && [ ! -e "$STOP_AFTER" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
    [ -n "$victim" ] && kill -STOP "$victim"
    i=0; while [ -n "$first" ] && kill -0 "$first" 2> /dev/null && [ $i -lt 200 ]; do sleep 0.1; i=$((i + 1)); done
    if [ -z "$victim" ] || [ -z "$first" ]; then bad "[$family] $name: the two ranks never ran: $(head -c 400 "$T/stop.err")"
    elif kill -0 "$first" 2> /dev/null; then bad "[$family] $name: rank 0 still runs 20 s after rank 1 was stopped"
    elif ! grep -q -- "$want" "$T/stop.err"; then bad "[$family] $name: stderr lacks '$want': $(head -c 400 "$T/stop.err")"
    else ok; fi
    [ -n "$victim" ] && { kill -CONT "$victim" 2> /dev/null; kill -9 "$victim" 2> /dev/null; }
    [ -n "$first" ] && kill -9 "$first" 2> /dev/null
    i=0; while kill -0 $job 2> /dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
    kill $job 2> /dev/null; wait $job 2> /dev/null
}
NO_ANSWER="got no answer from its peers in 3 s"
# a network that splits in two at 16^3 (m.cfg's third pooling would leave one plane a rank)
printf '[net]\ninput=4x16x16x16\nloss=mse\n' > "$I/split.cfg"
for f in 8 8; do printf '\n[conv]\nfilters=%d\nsize=3\npad=same\nactivation=leaky\nslope=0.3\n\n[maxpool]\nsize=2\n' $f; done >> "$I/split.cfg"
printf '\n[flatten]\n\n[dense]\noutputs=8\nactivation=leaky\nslope=0.3\n\n[dense]\noutputs=4\nactivation=tanh\n' >> "$I/split.cfg"
$TR --model "$I/split.cfg" --out "$I/split.cfck" > /dev/null 2>&1 || bad "[29] set-up: the checkpoint of split.cfg"

# ---- 29. the watchdog of every collective tool: --comm-timeout, cf-train's flag, message and default
family=29
refused "cf-eval --comm-timeout -1" "--comm-timeout: '-1' is not a whole number in \[0, 1000000\]" $EV --weights "$I/c.cfck" --data "$I/va" --comm-timeout -1
refused "cf-bench --comm-timeout 1e7" "--comm-timeout: '1e7' is not a whole number in \[0, 1000000\]" $B/cf-bench --model "$I/m.cfg" --steps 1 --comm-timeout 1e7
accepted "cf-eval --comm-timeout 5 as one process" $EV --weights "$I/c.cfck" --data "$I/va" --comm-timeout 5
count; for t in cf-eval cf-bench; do $B/$t --help | grep -q -- "--comm-timeout S .*(default 1800)" || echo "$t"; done > "$T/helps"
[ ! -s "$T/helps" ] && ok || bad "[29] --help lacks '--comm-timeout S ... (default 1800)': $(cat "$T/helps")"
if [ -n "$MPIRUN" ]; then
    STOP_AT_START=1   # (cf-eval's 2 samples take less than the polling)
    stopped "cf-eval --spatial 2 --comm-timeout 3, rank 1 stopped at its start" "$NO_ANSWER" \
        $B/cf-eval --model "$I/split.cfg" --weights "$I/split.cfck" --data "$I/va" --spatial 2 --comm-timeout 3
    STOP_AT_START=""
    STOP_DELAY=1   # (cf-bench: within its steps)
    stopped "cf-bench --spatial 2 --comm-timeout 3, one rank stopped" "$NO_ANSWER" \
        $B/cf-bench --model "$I/split.cfg" --steps 100000 --no-sgemm --spatial 2 --comm-timeout 3
    stopped "cf-bench --allreduce (data parallel) --comm-timeout 3, one rank stopped" "$NO_ANSWER" \
        $B/cf-bench --model "$I/m.cfg" --steps 100000 --no-sgemm --allreduce --comm-timeout 3
    STOP_DELAY=""
else echo "skipped: stopped ranks of cf-eval and cf-bench (no launcher for this build's MPI)"; fi

# ---- 30. the lock of a multi-rank run is gone however the run ends: an error on every rank
#          (MPI_Abort runs no atexit handler), the watchdog (_exit)
family=30
if [ -n "$MPIRUN" ]; then
    lock_gone() {   # NAME WORDS ARGS...: cf-train under $MPIRUN -np 2 fails saying WORDS, and leaves no l.cfck.lock
        name=$1; want=$2; shift 2
        rm -f "$O"/l.cfck*
        refused "$name" "$want" $MPIRUN -np 2 $TR --model "$I/m.cfg" --out "$O/l.cfck" "$@"
        count; [ ! -e "$O/l.cfck.lock" ] && ok || bad "[30] $name: the lock $O/l.cfck.lock is left: $(cat "$O/l.cfck.lock")"
    }
    lock_gone "a split the model refuses (--spatial 2 of m.cfg)" "the largest split of 2 or fewer ranks that works: 1" --spatial 2
    lock_gone "LAMB with --spatial 2" "LAMB and LARC take each tensor's norm" --model "$I/split.cfg" --optimizer lamb --spatial 2
    lock_gone "samples of another shape than --input-shape" "32" --input-shape 4x32x32x32
    lock_gone "--spatial 2 of a 2-D model" "spatial" --spatial 2 --model models/deepcam-small.cfg --input-shape 16x32x48
    if $PY -c 'import numpy' 2> /dev/null; then   # one sample of two wrong: found by the rank that reads it (rank 0 or 1)
        for k in 1 2; do
            rm -rf "$I/bad" && mkdir "$I/bad" && cp "$I"/npy/* "$I/bad/" && npy_edit "$(ls "$I"/bad/*_data.npy | sed -n ${k}p)" "x[0, 0, 0, 0] = -5"
            lock_gone "a sample of negative counts found in training (sample $k of 2)" "particle counts cannot be negative" --train "$I/bad" --batch 1
            rm -rf "$I/bad"
        done
    else echo "skipped: a wrong sample found by one rank (python3-numpy absent)"; fi
    rm -f "$O"/l.cfck*
    STOP_AFTER="$O/l.cfck"   # stopped in its training, the lock taken and a checkpoint written
    stopped "cf-train -np 2 --comm-timeout 3, rank 1 stopped after the first checkpoint" "$NO_ANSWER" \
        $B/cf-train --train "$I/tr" --val "$I/va" --batch 1 --epochs 100000 --no-progress --model "$I/m.cfg" --out "$O/l.cfck" --comm-timeout 3
    STOP_AFTER=""
    count; [ -e "$O/l.cfck" ] && [ ! -e "$O/l.cfck.lock" ] && ok || bad "[30] the watchdog's exit leaves the lock $O/l.cfck.lock (or wrote no checkpoint)"
    rm -f "$O"/l.cfck*
else echo "skipped: the lock of multi-rank runs (no launcher for this build's MPI)"; fi

# ---- 31. cf-bench --plan: layouts that exist, flags it reads, rows it measured
family=31
PLAN="$B/cf-bench --model $I/m.cfg --batch 1 --steps 1 --no-sgemm"
refused "--plan 4 --ranks-per-node 8" "--ranks-per-node 8: more than the 4 ranks" $PLAN --plan 4 --ranks-per-node 8
refused "--plan 4 --ranks-per-node 3" "--ranks-per-node 3: --plan 4's ranks do not fill whole nodes of 3" $PLAN --plan 4 --ranks-per-node 3
refused "--plan 4 --spatial 2" "--spatial with --plan" $PLAN --plan 4 --spatial 2
refused "--plan 4 --allreduce" "--allreduce with --plan" $PLAN --plan 4 --allreduce
refused "--plan 4 --precision bf16" "--precision with --plan" $PLAN --plan 4 --precision bf16
refused "--ranks-per-node without --plan" "--ranks-per-node: a setting of the oracle; needs --plan" $PLAN --ranks-per-node 2
refused "--mem-limit without --plan" "--mem-limit: a setting of the oracle; needs --plan" $PLAN --mem-limit 100
count
if $PLAN --plan 65536 > "$T/plan.txt" 2>&1 && grep -q "^plan: no split of 65536 ranks fits 0\.[0-9][0-9] MB a rank (this machine's memory shared by 65536 ranks a node: give --ranks-per-node" "$T/plan.txt" &&
    ! grep -q "more ranks" "$T/plan.txt"; then ok; else bad "[31] --plan 65536 on one node: $(tail -1 "$T/plan.txt")"; fi
count   # a slab far beyond this machine's memory (a batch of 4096 at 64^3) is not timed, and says so
if $B/cf-bench --model "$I/m.cfg" --input-shape 4x64x64x64 --batch 4096 --steps 1 --plan 1 --mem-limit 1000 > "$T/plan.txt" 2>&1 &&
    grep -q "^1 .*(not timed)" "$T/plan.txt" && ! grep -qi "nan" "$T/plan.txt"; then ok; else bad "[31] an untimed split: $(grep '^1 ' "$T/plan.txt")"; fi
count   # the same slab within a limit of 1 TB: it fits, but was not timed, and is not called too large for the limit
if $B/cf-bench --model "$I/m.cfg" --input-shape 4x64x64x64 --batch 4096 --steps 1 --plan 1 --mem-limit 1000000 > "$T/plan.txt" 2>&1 &&
    tail -1 "$T/plan.txt" | grep -q "^plan: no split of 1 ranks that fits 1000000 MB a rank could be timed"; then ok; else bad "[31] an untimed split that fits: $(tail -1 "$T/plan.txt")"; fi

# ---- 32. a flag that this run would not read is refused by name
family=32
refused "--spectrum-dump and --spectrum-bins without --spectrum" "needs --spectrum" $EV --weights "$I/c.cfck" --data "$I/va" --spectrum-dump "$O/s.npy" --spectrum-bins octave
refused "--spectrum-epochs without --spectrum" "--spectrum-epochs: a setting of the power-spectrum estimator; needs --spectrum" $EV --weights "$I/c.cfck" --data "$I/va" --spectrum-epochs 3
refused "--spectrum-moments without --spectrum" "--spectrum-moments: a setting of the power-spectrum estimator" $EV --weights "$I/c.cfck" --data "$I/va" --spectrum-moments
refused "--spectrum-bins with --spectrum-select (which tries every binning)" "--spectrum-bins with --spectrum-select" \
    $EV --weights "$I/c.cfck" --data "$I/va" --spectrum "$I/tr" --spectrum-select "$I/va" --spectrum-bins octave
refused "--png-count without --png" "--png-count 3: .*needs --png" $EV --weights "$I/c.cfck" --data "$I/va" --png-count 3
refused "--stats on a CosmoFlow model" "--stats: for a segmentation (DeepCAM)" $EV --weights "$I/c.cfck" --data "$I/va" --stats "$I/tr"
if [ -f "$I/d.cfck" ]; then
    refused "--baseline on a DeepCAM model" "--baseline: for a regression (CosmoFlow)" \
        $B/cf-eval --model models/deepcam-small.cfg --input-shape 16x32x48 --weights "$I/d.cfck" --data "$I/ctr" --baseline "$I/ctr"
    refused "--no-log on a DeepCAM model" "--transform (or --no-log, --log-ratio): for a regression" \
        $B/cf-eval --model models/deepcam-small.cfg --input-shape 16x32x48 --weights "$I/d.cfck" --data "$I/ctr" --no-log
else echo "skipped: DeepCAM flags of cf-eval (no DeepCAM checkpoint: python3-numpy absent)"; fi
refused "cf-train --override without --resume" "--override: .*needs --resume" $TR --model "$I/m.cfg" --out "$O/o.cfck" --override
count; [ ! -e "$O/o.cfck" ] && ok || bad "[32] --override without --resume trained $O/o.cfck"
rm -f "$O"/o.cfck*
refused "cf-check --tolerance without --gradcheck" "--tolerance: a setting of --gradcheck; needs --gradcheck" $B/cf-check --model "$I/m.cfg" --summary --tolerance 0.5
refused "cf-check --mode train without --dump" "--mode: a setting of --dump; needs --dump" $B/cf-check --model "$I/m.cfg" --summary --mode train
refused "cf-synth --pm-mesh without --pm" "--pm-mesh 4: .*needs --pm" $B/cf-synth cosmo --out "$O/pm" --samples 1 --size 16 --pm-mesh 4
count; [ ! -e "$O/pm" ] && ok || bad "[32] cf-synth --pm-mesh without --pm wrote $O/pm"
rm -rf "$O/pm"
refused "cf-bench --allreduce-floats without --allreduce" "--allreduce-floats 1000: .*needs --allreduce" $B/cf-bench --model "$I/m.cfg" --steps 1 --no-sgemm --allreduce-floats 1000

# ---- 33. messages that say what is wrong: whole bounds as whole numbers, shapes that differ by what
family=33
refused "--plan 0" "--plan: '0' is not a whole number in \[1, 1048576\]" $PLAN --plan 0
refused "--cores 0" "--cores: '0' is not a whole number in \[1, 1048576\]" $PLAN --plan 2 --cores 0
refused "--t-max 0 (a library setting)" "--t-max: '0' is not a whole number in \[1, 1099511627776\]" $TR --model "$I/m.cfg" --out "$O/t.cfck" --lr-schedule cosine --t-max 0
refused "--input-shape 4x1x1x1 on a 3-D model" "--input-shape 4x1x1x1 is 2-D (depth 1); the model's input 4x16x16x16 is 3-D" \
    $EV --weights "$I/c.cfck" --data "$I/va" --input-shape 4x1x1x1
refused "--input-shape 3x16x16x16 on a model of 4 channels" "--input-shape 3x16x16x16 has 3 channels; the model's input 4x16x16x16 has 4" \
    $EV --weights "$I/c.cfck" --data "$I/va" --input-shape 3x16x16x16
refused "--input-shape 4x16x16x16, (a trailing comma)" "shape '4x16x16x16,' is not CxDxHxW" $EV --weights "$I/c.cfck" --data "$I/va" --input-shape 4x16x16x16,
refused "--input-shape 4x16x16x16x (a trailing x)" "shape '4x16x16x16x' is not CxDxHxW" $TR --model "$I/m.cfg" --out "$O/t.cfck" --input-shape 4x16x16x16x
sed 's/^input=4x16x16x16$/input=4x16x16x16,/' "$I/m.cfg" > "$I/comma.cfg"
refused "a cfg's input= with a trailing comma" "input=4x16x16x16,: shape" $B/cf-check --model "$I/comma.cfg" --summary
rm -f "$I/comma.cfg" "$I/split.cfg" "$I/split.cfck" "$O"/t.cfck*

for f in 29 30 31 32 33; do eval "echo \"family $f: \${n$f:-0} cases\""; done
