#!/bin/sh
# oneDNN beside ours, every convolution layer (bin/onednn-peer, bench/onednn_peer.c): per network
# and batch of ONEDNN_WORKLOADS, fp32 under each BLAS kernel set bench/common.sh's kernel_sets
# finds (the environment's, and OpenBLAS's AVX-512 ones where they compute correctly), then bf16
# under the environment's; REPS repetitions a layer, the two libraries alternated in one
# process.  Prints each run's last line, 'onednn: <model> b<B> <precision> <kernels>: conv
# layers x<R> (oneDNN time / ours), worst layer x<W> (<layer> <direction>)'; the rows (one a
# distinct layer: ms, ratio and path of each operation) go into ONEDNN_ROWS.  make bench runs
# it after the PyTorch table; alone: make bench-onednn, or sh bench/onednn.sh after make
# bin/onednn-peer.  Without libdnnl-dev it says so in one line and ends.
cd "$(dirname "$0")/.." || exit 1
REPS=${REPS:-3}; THREADS=${THREADS:-2}
. bench/common.sh
ONEDNN_WORKLOADS=${ONEDNN_WORKLOADS:-"models/cosmoflow.cfg|1 models/cosmoflow.cfg|4 models/deepcam.cfg|1"}   # model|batch
ROWS=${ONEDNN_ROWS:-bin/onednn-peer.txt}
if [ ! -x bin/onednn-peer ]; then
    echo "bench: libdnnl-dev is absent: the oneDNN figures are skipped (apt-get install libdnnl-dev, then make bench-onednn)"
    exit 0
fi
for w in $ONEDNN_WORKLOADS; do
    IFS='|' read -r model batch <<EOW
$w
EOW
    [ -f "$model" ] || script_fail "ONEDNN_WORKLOADS '$w': $model: no such file"
    script_whole "the batch of ONEDNN_WORKLOADS '$w'" "$batch" 1 4096
done
T=$(mktemp -d /tmp/cf-bench-onednn-XXXXXX)
trap 'rm -rf "$T"' EXIT
kernel_sets bin/cf-bench "$T/check.txt"
: > "$ROWS" || script_fail "$ROWS: cannot be written"
echo "oneDNN, every convolution layer: $THREADS threads; REPS=$REPS; BLAS kernel sets: $KSETS; the rows: $ROWS"
run_peer() {   # KERNELS MODEL BATCH PRECISION
    env OPENBLAS_CORETYPE="$1" OMP_NUM_THREADS="$THREADS" bin/onednn-peer --model "$2" --batch "$3" --precision "$4" \
        --reps "$REPS" --threads "$THREADS" > "$T/o.txt" 2> "$T/o.err" < /dev/null
    rc=$?
    cat "$T/o.txt" >> "$ROWS"; echo >> "$ROWS"
    # the CPU and oneDNN's version and instruction set, once
    [ -f "$T/head.txt" ] || { grep -E '^(cpu:|oneDNN) ' "$T/o.txt" | sed 's/^/  /' > "$T/head.txt"; cat "$T/head.txt"; }
    grep -e '^onednn:' -e '^left out' "$T/o.txt"
    # (a layer where the two disagree ends the run after its table: its rows are in ROWS)
    [ $rc = 0 ] || { cat "$T/o.err" >&2; script_fail "bin/onednn-peer failed (exit $rc, its message above; its rows in $ROWS)"; }
    grep -q '^onednn:' "$T/o.txt" || script_fail "bin/onednn-peer printed no 'onednn:' line: $(tail -c 300 "$T/o.txt")"
}
for w in $ONEDNN_WORKLOADS; do
    IFS='|' read -r model batch <<EOW
$w
EOW
    for k in $KSETS; do run_peer "$k" "$model" "$batch" fp32; done
    run_peer "$ENVK" "$model" "$batch" bf16
done
