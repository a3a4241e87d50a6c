#!/bin/sh
# Memory per rank of a sample split across ranks (--spatial K): the peak resident memory of
# one rank of cf-bench's training step (models/cosmoflow.cfg, batch 1, fp32, SGD), measured
# (the largest of the K ranks) beside cf-check --summary --spatial K's plan, for K = 1, 2, 4 at
# 128^3 and 256^3; the ratio to one rank's peak.  MPICH's launcher, one thread a rank.
# SIZES="128 256" and KS="1 2 4" choose.  About 4 minutes on 2 cores.
# Last line: "spatial_memory: 256^3 K=4 per-rank peak R MB, one rank's O MB, ratio X".
cd "$(dirname "$0")/.." || exit 1
SIZES=${SIZES:-128 256}; KS=${KS:-1 2 4}
L=${LAUNCH:-mpirun.mpich}
. tools/mpi.sh   # (script_whole, script_fail, script_measured: the variables first, a failed run the end)
for s in $SIZES; do script_whole "a size of SIZES" "$s" 1 4096; done
for k in $KS; do script_whole "a K of KS" "$k" 1 1024; done
[ -n "$SIZES" ] && [ -n "$KS" ] || script_fail "SIZES and KS must each name at least one"
T=$(mktemp -d /tmp/cf-spatial-memory-XXXXXX)
trap 'rm -rf "$T"' EXIT
printf "%-6s %-3s %12s %12s %8s\n" size K "plan MB" "peak MB" ratio
for s in $SIZES; do
    one=""
    for k in $KS; do
        if [ "$k" = 1 ]; then script_measured "$T/check.txt" bin/cf-check --model models/cosmoflow.cfg --input-shape 4x$s\x$s\x$s --summary
            plan=$(awk '/^training memory per sample/ {o = $8} /^params/ {p = $2} END {printf "%.1f", o + 3 * p * 4e-6}' "$T/check.txt")
        else script_measured "$T/check.txt" bin/cf-check --model models/cosmoflow.cfg --input-shape 4x$s\x$s\x$s --summary --spatial $k
            plan=$(awk '/^training memory per rank/ {print $8}' "$T/check.txt"); fi
        script_measured "$T/bench.txt" env OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 $L -np $k bin/cf-bench --model models/cosmoflow.cfg --input-shape 4x$s\x$s\x$s --batch 1 --steps 1 --no-sgemm \
               $([ "$k" -gt 1 ] && echo --spatial $k)
        peak=$(awk '/^samples_per_s/ {print $NF}' "$T/bench.txt")
        [ -n "$peak" ] && [ -n "$plan" ] || script_fail "$s^3 K=$k: no peak_rss_mb from cf-bench or no plan from cf-check"
        [ -z "$one" ] && one=$peak
        ratio=$(awk -v a="$peak" -v b="$one" 'BEGIN {printf "%.3f", a / b}')
        printf "%-6s %-3s %12s %12s %8s\n" "$s^3" "$k" "$plan" "$peak" "$ratio"
        last="spatial_memory: ${s}^3 K=$k per-rank peak $peak MB, one rank's $one MB, ratio $ratio"
    done
done
echo "$last"
