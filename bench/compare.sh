#!/bin/sh
# usage: sh bench/compare.sh OLD_BIN [NEW_BIN]
# Before and after a change, in one run: make bench's workloads timed with OLD_BIN/cf-bench and
# NEW_BIN/cf-bench (default bin/) alternately, REPS times each (default 5), medians, under the
# BLAS kernels the environment sets and, where OpenBLAS's AVX-512 kernels pass cf-bench
# --check-blas, under those too (bench/common.sh; WORKLOADS= chooses others).  Last column:
# new / old samples a second (above 1: faster).
# Build the old binaries from a worktree of the old commit, e.g.
#   git worktree add /tmp/old COMMIT && make -C /tmp/old all && sh bench/compare.sh /tmp/old/bin
cd "$(dirname "$0")/.." || exit 1
OLD=${1:?usage: sh bench/compare.sh OLD_BIN [NEW_BIN]}; NEW=${2:-bin}
REPS=${REPS:-5}; THREADS=${THREADS:-2}
. bench/common.sh
for b in "$OLD" "$NEW"; do [ -x "$b/cf-bench" ] || { echo "compare: $b/cf-bench: not an executable" >&2; exit 1; }; done
T=$(mktemp -d /tmp/cf-compare-XXXXXX)
trap 'rm -rf "$T"' EXIT
kernel_sets "$NEW/cf-bench" "$T/check.txt"
echo "machine: $(nproc) cores, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1); $(date -u +%Y-%m-%d)"
echo "old: $OLD/cf-bench ($("$OLD/cf-bench" --version 2>&1 | head -1)); new: $NEW/cf-bench; $REPS alternations, medians"
printf '%-38s %-9s %9s %9s %9s %9s %6s\n' workload kernels "old s/s" "new s/s" "old MB" "new MB" "new/old"
for w in $WORKLOADS; do
    IFS='|' read -r model shape batch steps <<EOW
$w
EOW
    for k in $KSETS; do
        rm -f "$T"/*.col
        r=0
        while [ $r -lt "$REPS" ]; do
            for side in old new; do
                if [ $side = old ]; then b=$OLD; else b=$NEW; fi
                script_measured "$T/o.txt" env OPENBLAS_CORETYPE=$k OMP_NUM_THREADS=$THREADS "$b/cf-bench" --model "$model" --input-shape "$shape" --batch "$batch" \
                    --steps "$steps" --threads "$THREADS" --no-sgemm
                measured_field samples_per_s "$T/o.txt" >> "$T/$side.s.col"; measured_field peak_rss_mb "$T/o.txt" >> "$T/$side.m.col"
            done
            r=$((r + 1))
        done
        os=$(median < "$T/old.s.col"); ns=$(median < "$T/new.s.col")
        printf '%-38s %-9s %9s %9s %9s %9s %6s\n' "$(basename "$model") $shape b$batch" "$k" "$os" "$ns" "$(median < "$T/old.m.col")" \
            "$(median < "$T/new.m.col")" "$(echo "$os $ns" | awk '$1 > 0 {printf "%.3f", $2 / $1}')"
        echo "  spread: old $(sort -n "$T/old.s.col" | tr '\n' ' ')| new $(sort -n "$T/new.s.col" | tr '\n' ' ')"
    done
done
