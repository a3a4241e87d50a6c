#!/bin/sh
# The oracle (cf-bench --plan P, tools/plan.h) against measured steps: MODEL (default
# models/cosmoflow.cfg at 128^3, batch 1 a group), every split of 2 and of 4 ranks on this
# machine's shared memory (MPICH, one thread a rank), and, as root, both splits of 2 ranks on
# two emulated nodes (tests/nodes.sh) joined by a link of RATE (default 1gbit).  The link's
# latency and bandwidth are fitted from two sizes of cf-bench --allreduce measured on it; the
# compute from one process's steps on a slab (cf-bench --plan).  Prints one row a split:
# predicted and measured seconds a step, and the error; then the mean and the largest error.
# docs/mpi.md, "The oracle".  About 6 minutes on 2 cores.  CF_BENCH names the cf-bench binary
# (default bin/cf-bench), NODES=0 leaves the emulated nodes out.  Every variable is checked
# before the first run; a run that fails (the launcher, cf-bench) or prints no time ends the
# oracle non-zero with that tool's own message: no split is scored without its measurement.
# Last line: "oracle: N splits, mean error E %, largest L % (K=.. D=.. ...)".
cd "$(dirname "$0")/.." || exit 1
MODEL=${MODEL:-models/cosmoflow.cfg}; SHAPE=${SHAPE:-4x128x128x128}; B=${BATCH:-1}; STEPS=${STEPS:-3}; RATE=${RATE:-1gbit}
CF_BENCH=${CF_BENCH:-bin/cf-bench}; NODES=${NODES:-1}
. tools/mpi.sh   # script_whole, script_fail, script_measured
fail() { script_fail "$@"; }
script_whole STEPS "$STEPS" 1 100000; script_whole BATCH "$B" 1 100000
[ -f "$MODEL" ] || fail "MODEL=$MODEL: no such file"
case $SHAPE in ''|*[!0-9x]*|x*|*x|*xx*) fail "SHAPE='$SHAPE' is not CxDxHxW (whole numbers joined by x)";; esac
r=${RATE%bit}; [ "$r" = "$RATE" ] && r=${RATE%bps}; r=${r%[kKmMgGtT]}
case $r in ''|*[!0-9.]*) fail "RATE='$RATE' is not a rate as tc writes it (a number, k, m or g, then bit or bps: 1gbit)";; esac
[ "$r" != "$RATE" ] || fail "RATE='$RATE' is not a rate as tc writes it (a number, k, m or g, then bit or bps: 1gbit)"
case $NODES in 0|1) ;; *) fail "NODES='$NODES' is not 0 or 1";; esac
case $CF_BENCH in /*) ;; *) CF_BENCH=$(pwd)/$CF_BENCH;; esac
[ -x "$CF_BENCH" ] || fail "$CF_BENCH: no such program (make bin/cf-bench)"
export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-Haswell} OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
T=$(mktemp -d /tmp/cf-oracle-XXXXXX)
trap 'rm -rf "$T"' EXIT INT TERM
case $MODEL in /*) M=$MODEL;; *) M=$(pwd)/$MODEL;; esac
BENCH="$CF_BENCH --model $M --input-shape $SHAPE --batch $B --no-sgemm --threads 1"
CORES=$(getconf _NPROCESSORS_ONLN)
fit_link() {   # $1: the launcher of 2 ranks; sets LINK "alpha,bw" from allreduces of 1024 and 4 M floats (2 ranks: 2 alpha + n / BW)
    : > "$T/ar_times.txt"
    for f in 1024 4194304; do
        script_measured "$T/ar.txt" $1 $BENCH --allreduce --allreduce-floats $f --steps 0
        awk -v n=$((4 * f)) '/^allreduce_ms / { print n, $2 / 1e3 }' "$T/ar.txt" >> "$T/ar_times.txt"
    done
    LINK=$(awk '{ n[NR] = $1; t[NR] = $2 } END { if (NR != 2 || t[2] <= t[1] || n[2] <= n[1]) exit 1
               bw = (n[2] - n[1]) / (t[2] - t[1]); a = (t[1] - n[1] / bw) / 2; if (a < 0) a = 0; printf "%.3g,%.4g", a, bw }' "$T/ar_times.txt") ||
        fail "the two allreduces gave no link (their allreduce_ms: $(tr '\n' ' ' < "$T/ar_times.txt"))"
}
step_of() { sed -n 's/.*: \([0-9.]*\) s\/step.*/\1/p' "$1"; }   # cf-bench's "s/step"
rows="$T/rows.txt"; : > "$rows"
predict() {   # $1 P, $2 link, $3 ranks a node, $4 cores a node, $5 where: the plan's rows as "where P K D predicted"
    script_measured "$T/plan.txt" $BENCH --plan "$1" --link "$2" --ranks-per-node "$3" --cores "$4" --steps "$STEPS"
    awk -v p="$1" -v w="$5" '$1 ~ /^[0-9]+$/ && NF == 10 && $7 ~ /^[0-9.]+([eE][-+]?[0-9]+)?$/ && $7 > 0 { print w, p, $1, $2, $7 }' "$T/plan.txt" > "$T/pred1.txt"
    [ -s "$T/pred1.txt" ] || fail "cf-bench --plan $1 printed no split"
    cat "$T/pred1.txt" >> "$T/pred.txt"
    grep '^plan' "$T/plan.txt" | sed 's/^/  /'
}
# measure WHERE P K D PRED CMD...: CMD's time a step, a row of rows; a failed run or one that
# printed no time ends the oracle
measure() {
    w=$1 P=$2 K=$3 D=$4 pred=$5; shift 5
    script_measured "$T/run.txt" "$@"
    meas=$(step_of "$T/run.txt")
    awk -v m="$meas" 'BEGIN { exit !(m + 0 > 0) }' || fail "the measured run of $w P=$P K=$K printed no time a step: $(tail -c 300 "$T/run.txt")"
    echo "$w $P $K $D $pred $meas" >> "$rows"
}

: > "$T/pred.txt"
echo "== this machine: $CORES cores, shared memory, MPICH"
fit_link "mpirun.mpich -np 2"
echo "link fitted from 2 allreduce sizes: alpha,bandwidth = $LINK"
for P in 2 4; do predict $P "$LINK" $P "$CORES" local; done
while read -r w P K D pred; do
    [ "$w" = local ] || continue
    sp=""; [ "$K" -gt 1 ] && sp="--spatial $K"
    measure local "$P" "$K" "$D" "$pred" mpirun.mpich -np "$P" $BENCH --steps "$STEPS" $sp
done < "$T/pred.txt"

if [ "$NODES" = 1 ] && [ "$(id -u)" = 0 ] && command -v mpiexec.hydra > /dev/null 2>&1 && ldd bin/cf-bench | grep -q libmpich && ip netns add "cforacle$$" 2> /dev/null && ip netns del "cforacle$$"; then
    . tests/nodes.sh
    trap 'nodes_down; rm -rf "$T"' EXIT INT TERM
    echo "== two emulated nodes at $RATE, one rank each (the two share this machine's cores)"
    if nodes_up 2 "$T/cluster" && link_rate 1 "$RATE" && link_rate 2 "$RATE"; then
        H="mpiexec.hydra $NODES_HYDRA -n 2 -ppn 1 -genv OMP_NUM_THREADS 1 -genv OPENBLAS_NUM_THREADS 1 -genv OPENBLAS_CORETYPE $OPENBLAS_CORETYPE"
        fit_link "node_run 1 $H"
        echo "link fitted from 2 allreduce sizes: alpha,bandwidth = $LINK"
        predict 2 "$LINK" 1 1 nodes
        while read -r w P K D pred; do
            [ "$w" = nodes ] || continue
            sp=""; [ "$K" -gt 1 ] && sp="--spatial $K"
            measure nodes "$P" "$K" "$D" "$pred" node_run 1 $H $BENCH --steps "$STEPS" $sp
        done < "$T/pred.txt"
        nodes_down
    else fail "the emulated nodes could not be made (tests/nodes.sh, above; NODES=0 leaves them out)"; fi
elif [ "$NODES" = 0 ]; then echo "(NODES=0: the emulated nodes' rows are left out)"
else echo "(not root, or no MPICH hydra or network namespaces: the emulated nodes' rows are left out)"
fi
echo "== predicted against measured, seconds a step ($MODEL, $SHAPE, batch $B a group)"
[ -s "$rows" ] || fail "nothing measured"
awk '{ e = 100 * ($5 - $6) / $6; printf "%-6s P=%-3s K=%-3s D=%-3s predicted %8.3f measured %8.3f error %+6.1f %%\n", $1, $2, $3, $4, $5, $6, e
       a = e < 0 ? -e : e; s += a; n++; if (a > m) { m = a; w = sprintf("%s K=%s D=%s", $1, $3, $4) } }
     END { printf "oracle: %d splits, mean error %.1f %%, largest %.1f %% (%s)\n", n, s / n, m, w }' "$rows"
