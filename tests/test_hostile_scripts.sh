# The scripts around the tools under hostile use (sourced by tests/test_hostile.sh, whose
# helpers refused, accepted, count, ok, bad and temporary $T, $I, $O it uses): families 34 to
# 36.  A script checks its variables before any run, and a run that fails or measures nothing
# ends it non-zero with that tool's own message: never a 0 % row, a NaN verdict or rc 0 with
# nothing done.  Stand-ins for cf-bench and the launcher (shell scripts in $T/fake) answer at
# once, so no case runs a real measurement.  CF_SCRIPTS=DIR runs the cases on the scripts of
# another tree (DIR/bench/oracle.sh, DIR/tools/science.sh, ...).
S=${CF_SCRIPTS:-.}
F=$T/fake
mkdir -p "$F"
# cf-bench's stand-in: the lines bench/oracle.sh reads; FAKE_FAIL=plan|allreduce|step makes
# that run fail with a message of its own, nostep makes the step print no time
cat > "$F/cf-bench" <<'EOF'
#!/bin/sh
echo "cf-bench $*" >> "$FAKE_CALLS"
case " $* " in
*" --allreduce "*)
    [ "$FAKE_FAIL" = allreduce ] && { echo "cf-bench: --allreduce: the stand-in's allreduce failed" >&2; exit 1; }
    case " $* " in *" 1024 "*) echo "allreduce_ms 0.05";; *) echo "allreduce_ms 9.5";; esac;;
*" --plan "*)
    [ "$FAKE_FAIL" = plan ] && { echo "cf-bench: --plan: the stand-in's plan failed" >&2; exit 1; }
    P=$(echo " $* " | sed 's/.* --plan \([0-9]*\) .*/\1/')
    echo "plan: the stand-in, $P ranks"
    echo "K     D     compute_s halos_s features_s averaging_s step_s samples_s mem_mb fits"
    K=1; while [ "$K" -le "$P" ]; do echo "$K 128 0.4 0.01 0.01 0.01 0.5 2.0 100.0 yes"; K=$((K * 2)); done;;
*)
    [ "$FAKE_FAIL" = step ] && { echo "cf-bench: --spatial: the stand-in's step failed" >&2; exit 1; }
    [ "$FAKE_FAIL" = nostep ] && { echo "cf-bench: nothing timed"; exit 0; }
    echo "cf-bench: 0.400 s/step, 2.5 samples/s";;
esac
EOF
# the launcher's stand-in (first on PATH as mpirun.mpich): FAKE_FAIL=np4 refuses -np 4
cat > "$F/mpirun.mpich" <<'EOF'
#!/bin/sh
echo "mpirun.mpich $*" >> "$FAKE_CALLS"
[ "$1" = -np ] || { echo "mpirun.mpich: no -np" >&2; exit 2; }
[ "$2" = 4 ] && [ "$FAKE_FAIL" = np4 ] && { echo "mpirun.mpich: cannot start 4 processes here (the stand-in refuses)" >&2; exit 1; }
shift 2; exec "$@"
EOF
chmod +x "$F/cf-bench" "$F/mpirun.mpich"
# $ORACLE [VAR=VALUE...] $OR: bench/oracle.sh with the stand-ins, no emulated nodes
ORACLE="env PATH=$F:$PATH CF_BENCH=$F/cf-bench NODES=0 FAKE_CALLS=$T/calls"
OR="sh $S/bench/oracle.sh"
nothing_ran() { count; [ ! -s "$T/calls" ] && ok || bad "[$family] $1: refused only after running $(head -1 "$T/calls")"; }
no_score() {   # no_score NAME: the oracle scored no split it did not measure
    count; if grep -q "error  *+0.0 %\|^oracle: [0-9]* splits" "$T/stdout"; then bad "[$family] $1: a split scored without its measurement: $(grep '^oracle\|error' "$T/stdout" | head -3)"; else ok; fi
}

# ---- 34. bench/oracle.sh: its variables checked first; a failed run ends it with that run's message
family=34
for v in STEPS=abc STEPS=0 STEPS=-2 BATCH=-1 BATCH=1x; do
    : > "$T/calls"
    refused "oracle.sh $v" "${v%%=*}" $ORACLE "$v" $OR
    nothing_ran "oracle.sh $v"
done
: > "$T/calls"
refused "oracle.sh MODEL naming no file" "models/none.cfg" $ORACLE MODEL=models/none.cfg $OR
nothing_ran "oracle.sh MODEL naming no file"
: > "$T/calls"
refused "oracle.sh SHAPE with trailing junk" "SHAPE" $ORACLE SHAPE=4x32x32x32junk $OR
refused "oracle.sh RATE not a rate" "RATE" $ORACLE RATE=fast $OR
nothing_ran "oracle.sh SHAPE, RATE"
: > "$T/calls"
refused "oracle.sh: the launcher refuses -np 4" "cannot start 4 processes here" $ORACLE FAKE_FAIL=np4 $OR
no_score "oracle.sh: the launcher refuses -np 4"
refused "oracle.sh: a measured step fails" "the stand-in's step failed" $ORACLE FAKE_FAIL=step $OR
no_score "oracle.sh: a measured step fails"
refused "oracle.sh: a measured step prints no time" "no time a step" $ORACLE FAKE_FAIL=nostep $OR
no_score "oracle.sh: a measured step prints no time"
refused "oracle.sh: cf-bench --plan fails" "the stand-in's plan failed" $ORACLE FAKE_FAIL=plan $OR
refused "oracle.sh: the link's allreduce fails" "the stand-in's allreduce failed" $ORACLE FAKE_FAIL=allreduce $OR
refused "oracle.sh: no cf-bench" "no such program" env PATH="$F:$PATH" CF_BENCH="$T/none" NODES=0 sh "$S/bench/oracle.sh"
accepted "oracle.sh with every run measured (the stand-ins)" $ORACLE $OR
count; grep -q "^oracle: 5 splits, mean error 25.0 %" "$T/stdout" && ok || bad "[34] the stand-ins' 5 splits: $(tail -2 "$T/stdout")"
# the other bench scripts: their variables refused before any run (LAUNCH=false: a launcher
# that would fail at once, were it reached)
for v in ALPHA=abc BW=-1 FAST=0x ALG=tree "FIT=1 2 3" STEP=soon MODEL=models/none.cfg; do
    refused "scaling.sh $v" "${v%%=*}" env "$v" sh "$S/bench/scaling.sh"
done
for v in SIZES=abc SIZES=0 KS=-1 "KS=2 x"; do
    refused "spatial_memory.sh $v" "${v%%=*}" env LAUNCH=false "$v" sh "$S/bench/spatial_memory.sh"
done
for v in REPS=0 REPS=abc THREADS=-2 "WORKLOADS=models/none.cfg|4x8x8x8|1|1" "WORKLOADS=models/cosmoflow-small.cfg|4x8x8x8|0|1"; do
    refused "run.sh $v" "${v%%=*}\|models/none.cfg\|batch" env "$v" sh "$S/bench/run.sh"
    refused "compare.sh $v" "${v%%=*}\|models/none.cfg\|batch" env "$v" sh "$S/bench/compare.sh" bin
done
refused "bf16.sh BF16_WORKLOADS with a batch of x" "batch" env "BF16_WORKLOADS=models/cosmoflow-small.cfg|4x8x8x8|x|2" sh "$S/bench/bf16.sh"

# ---- 35. tools/science.sh and tools/crops.sh: SCI_* checked before any run, no NaN verdict
family=35
for v in SCI_SEEDS=0 SCI_SEEDS=-1 SCI_SEEDS=abc SCI_TRAIN=abc SCI_VAL=0 SCI_EPOCHS=1.5 SCI_PM=6x; do
    refused "science.sh $v" "${v%%=*}" env SCI_OUT="$O/sci" SCI_TRAIN=4 SCI_VAL=1 SCI_EPOCHS=1 "$v" sh "$S/tools/science.sh"
    count; grep -qi "nan" "$T/stdout" && bad "[35] science.sh $v: a NaN verdict: $(grep -i nan "$T/stdout" | head -1)" || ok
done
for v in SCI_SEEDS=0 SCI_SEEDS=-1 SCI_SEEDS=abc; do
    refused "crops.sh $v" "${v%%=*}" env SCI_OUT="$O/sci" SCI_TRAIN=4 SCI_VAL=1 SCI_EPOCHS=1 "$v" sh "$S/tools/crops.sh"
    count; grep -qi "nan" "$T/stdout" && bad "[35] crops.sh $v: a NaN verdict: $(grep -i nan "$T/stdout" | head -1)" || ok
done
# the summaries of rows that measured nothing (a run that left no MAE): an error, not a NaN
: > "$O/rows.txt"
refused "sci_mean of no rows" "no MAE of cnn" sh -c "cd $S && SCI_OUT=$O/sci . tools/science_lib.sh && sci_mean cnn $O/rows.txt"
echo "1 cnn 0.1 0.1 0.1 0.1 nan" > "$O/rows.txt"
refused "sci_mean of a NaN MAE" "no MAE of cnn" sh -c "cd $S && SCI_OUT=$O/sci . tools/science_lib.sh && sci_mean cnn $O/rows.txt"
echo "1 cnn 0.1 0.1 0.1 0.1 0.2" > "$O/rows.txt"
refused "sci_ratio without the baseline's rows" "two-point-chosen" sh -c "cd $S && SCI_OUT=$O/sci . tools/science_lib.sh && sci_ratio cnn two-point-chosen $O/rows.txt"
echo "1 two-point-chosen 0.1 0.1 0.1 0.1 0.4" >> "$O/rows.txt"
count; r=$(cd "$S" && SCI_OUT=$O/sci . tools/science_lib.sh && sci_ratio cnn two-point-chosen "$O/rows.txt")
[ "$r" = "0.5 0 1" ] && ok || bad "[35] sci_ratio of one seed's 0.2 against 0.4: '$r', not '0.5 0 1'"
# a run that fails inside the log's pipe ends the script with its own status and message
refused "script_logged of a failing run" "exit 3" sh -c "cd $S && SCI_OUT=$O/sci . tools/science_lib.sh && script_logged $O/run.log sh -c 'echo a line; exit 3'; echo after"
count; grep -q "a line" "$O/run.log" && ! grep -q after "$T/stdout" && ok || bad "[35] script_logged: the log kept, nothing after the failure"

# ---- 36. the demos: DEMO_* and PRECISION checked before the first universe is made
family=36
made_nothing() { count; [ ! -e "$O/demo" ] && ok || bad "[36] $1: refused only after making $O/demo"; rm -rf "$O/demo"; }
for v in DEMO_TRAIN=abc DEMO_VAL=0 DEMO_EPOCHS=0 DEMO_EPOCHS=1.5 PRECISION=fp16 DEMO_DECAY=soon; do
    refused "demo.sh $v" "${v%%=*}" env DEMO_OUT="$O/demo" DEMO_TRAIN=2 DEMO_VAL=1 DEMO_EPOCHS=1 "$v" sh "$S/tools/demo.sh"
    made_nothing "demo.sh $v"
done
for v in DEMO_TRAIN=4 DEMO_VAL=x PRECISION=bf17; do
    refused "demo_climate.sh $v" "${v%%=*}" env DEMO_OUT="$O/demo" DEMO_TRAIN=8 DEMO_VAL=1 DEMO_EPOCHS=1 "$v" sh "$S/tools/demo_climate.sh"
    made_nothing "demo_climate.sh $v"
done
for v in DEMO_RANKS=0 DEMO_SIZE=100 DEMO_EPOCHS=-1; do
    refused "demo_large.sh $v" "${v%%=*}" env DEMO_OUT="$O/demo" DEMO_TRAIN=1 DEMO_VAL=1 DEMO_EPOCHS=1 DEMO_SIZE=128 DEMO_RANKS=2 "$v" sh "$S/tools/demo_large.sh"
    made_nothing "demo_large.sh $v"
done
