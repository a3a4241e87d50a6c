#!/bin/sh
# The oracle (cf-bench --plan P, tools/plan.h) against measured steps: MODEL (default
# models/cosmoflow.cfg at 128^3, batch 1 a group), every split of 2 and of 4 ranks on this
# machine's shared memory (MPICH, one thread a rank), and, as root, both splits of 2 ranks on
# two emulated nodes (tests/nodes.sh) joined by a link of RATE (default 1gbit).  The link's
# latency and bandwidth are fitted from two sizes of cf-bench --allreduce measured on it; the
# compute from one process's steps on a slab (cf-bench --plan).  Prints one row a split:
# predicted and measured seconds a step, and the error; then the mean and the largest error.
# docs/mpi.md, "The oracle".  About 6 minutes on 2 cores.
# Last line: "oracle: N splits, mean error E %, largest L % (K=.. D=.. ...)".
cd "$(dirname "$0")/.." || exit 1
MODEL=${MODEL:-models/cosmoflow.cfg}; SHAPE=${SHAPE:-4x128x128x128}; B=${BATCH:-1}; STEPS=${STEPS:-3}; RATE=${RATE:-1gbit}
export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-Haswell} OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
T=$(mktemp -d /tmp/cf-oracle-XXXXXX)
BENCH="$(pwd)/bin/cf-bench --model $(pwd)/$MODEL --input-shape $SHAPE --batch $B --no-sgemm --threads 1"
CORES=$(getconf _NPROCESSORS_ONLN)
fit_link() {   # $1: the launcher of 2 ranks; prints "alpha,bw" from allreduces of 1024 and 4 M floats (2 ranks: 2 alpha + n / BW)
    for f in 1024 4194304; do
        $1 $BENCH --allreduce --allreduce-floats $f --steps 0 2> /dev/null | awk -v n=$((4 * f)) '/^allreduce_ms / { print n, $2 / 1e3 }'
    done | tr '\n' ' ' | awk '{ bw = ($3 - $1) / ($4 - $2); a = ($2 - $1 / bw) / 2; if (a < 0) a = 0; printf "%.3g,%.4g", a, bw }'
}
step_of() { sed -n 's/.*: \([0-9.]*\) s\/step.*/\1/p'; }   # cf-bench's "s/step"
rows="$T/rows.txt"; : > "$rows"
predict() {   # $1 P, $2 link, $3 ranks a node, $4 cores a node, $5 where: the plan's rows as "where P K D predicted"
    $BENCH --plan "$1" --link "$2" --ranks-per-node "$3" --cores "$4" --steps "$STEPS" 2> /dev/null | tee "$T/plan.txt" |
        awk -v p="$1" -v w="$5" '$1 ~ /^[0-9]+$/ && NF == 10 { print w, p, $1, $2, $7 }' >> "$T/pred.txt"
    grep '^plan' "$T/plan.txt" | sed 's/^/  /'
}

: > "$T/pred.txt"
echo "== this machine: $CORES cores, shared memory, MPICH"
LINK=$(fit_link "mpirun.mpich -np 2")
echo "link fitted from 2 allreduce sizes: alpha,bandwidth = $LINK"
for P in 2 4; do predict $P "$LINK" $P "$CORES" local; done
while read -r w P K D pred; do
    [ "$w" = local ] || continue
    sp=""; [ "$K" -gt 1 ] && sp="--spatial $K"
    meas=$(mpirun.mpich -np "$P" $BENCH --steps "$STEPS" $sp 2> /dev/null < /dev/null | step_of)   # (mpirun reads stdin: not the loop's)
    echo "local $P $K $D $pred $meas" >> "$rows"
done < "$T/pred.txt"

if [ "$(id -u)" = 0 ] && command -v mpiexec.hydra > /dev/null 2>&1 && ldd bin/cf-bench | grep -q libmpich && ip netns add "cforacle$$" 2> /dev/null && ip netns del "cforacle$$"; then
    . tests/nodes.sh
    trap 'nodes_down; rm -rf "$T"' EXIT INT TERM
    echo "== two emulated nodes at $RATE, one rank each (the two share this machine's cores)"
    if nodes_up 2 "$T/cluster" && link_rate 1 "$RATE" && link_rate 2 "$RATE"; then
        H="mpiexec.hydra $NODES_HYDRA -n 2 -ppn 1 -genv OMP_NUM_THREADS 1 -genv OPENBLAS_NUM_THREADS 1 -genv OPENBLAS_CORETYPE $OPENBLAS_CORETYPE"
        LINK2=$(fit_link "node_run 1 $H")
        echo "link fitted from 2 allreduce sizes: alpha,bandwidth = $LINK2"
        predict 2 "$LINK2" 1 1 nodes
        while read -r w P K D pred; do
            [ "$w" = nodes ] || continue
            sp=""; [ "$K" -gt 1 ] && sp="--spatial $K"
            meas=$(node_run 1 $H $BENCH --steps "$STEPS" $sp 2> /dev/null < /dev/null | step_of)
            echo "nodes $P $K $D $pred $meas" >> "$rows"
        done < "$T/pred.txt"
        nodes_down
    else echo "the emulated nodes could not be made: their rows are missing"; fi
else
    trap 'rm -rf "$T"' EXIT INT TERM
    echo "(not root, or no MPICH hydra or network namespaces: the emulated nodes' rows are left out)"
fi
echo "== predicted against measured, seconds a step ($MODEL, $SHAPE, batch $B a group)"
awk '{ e = $6 > 0 ? 100 * ($5 - $6) / $6 : 0; printf "%-6s P=%-3s K=%-3s D=%-3s predicted %8.3f measured %8.3f error %+6.1f %%\n", $1, $2, $3, $4, $5, $6, e
       a = e < 0 ? -e : e; s += a; n++; if (a > m) { m = a; w = sprintf("%s K=%s D=%s", $1, $3, $4) } }
     END { if (n) printf "oracle: %d splits, mean error %.1f %%, largest %.1f %% (%s)\n", n, s / n, m, w; else print "oracle: nothing measured" }' "$rows"
