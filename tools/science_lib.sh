# Shared by make science (tools/science.sh) and make science-crops (tools/crops.sh), sourced
# from the repository's top: their settings (SCI_* in the environment), the launcher, and the
# rows files they write, one row per seed and method: "seed method Omega_m sigma_8 n_s H_0 mean".
# Every setting is checked here, before any run: a value that is not a whole number in its
# range ends the script non-zero, naming it.
OUT=${SCI_OUT:-data/science}
TRAIN=${SCI_TRAIN:-2048}
VAL=${SCI_VAL:-512}
EPOCHS=${SCI_EPOCHS:-16}
PM=${SCI_PM:-6}
SEEDS=${SCI_SEEDS:-1}
. tools/mpi.sh   # (also script_whole, script_fail, script_logged)
script_whole SCI_SEEDS "$SEEDS" 1 1000; script_whole SCI_TRAIN "$TRAIN" 4 100000000; script_whole SCI_VAL "$VAL" 1 100000000
script_whole SCI_EPOCHS "$EPOCHS" 1 1000000; script_whole SCI_PM "$PM" 0 256
demo_ranks bin/cf-train   # RUN and BATCH (tools/mpi.sh), as make demo
DECAY=$((EPOCHS * 3 / 4 - 1)); [ "$DECAY" -ge 1 ] || DECAY=1; DECAY=$DECAY:0.2   # LR x 0.2 for the last quarter
sci_row() {   # sci_row SEED METHOD FILE PREFIX ROWS: the MAEs PREFIX_* of an evaluation's output, a row appended to ROWS
    awk -v s="$1" -v m="$2" -v p="$4" '$1 == p "_Omega_m" {a = $2} $1 == p "_sigma_8" {b = $2} $1 == p "_n_s" {c = $2} $1 == p "_H_0" {d = $2} $1 == p {e = $2}
        END {print s, m, a, b, c, d, e}' "$3" >> "$5"
}
sci_show() {   # sci_show TAG SEED ROWS: the seed's rows, one line each
    grep "^$2 " "$3" | awk -v t="$1" '{printf "%s: seed %s %-19s Omega_m %.3f sigma_8 %.3f n_s %.3f H_0 %.3f mae %.4f\n", t, $1, $2, $3, $4, $5, $6, $7}'
}
sci_summary() {   # sci_summary TAG ROWS: per method, the mean and spread (the sample standard deviation over the seeds; 0 with one seed)
    awk -v t="$1" '{ m = $2; if (!(m in n)) order[k++] = m; n[m]++; for (i = 3; i <= 7; i++) { s[m, i] += $i; q[m, i] += $i * $i } }
        END { for (j = 0; j < k; j++) { m = order[j]; line = sprintf("%s: %-19s", t, m)
                  for (i = 3; i <= 7; i++) { mu = s[m, i] / n[m]; v = n[m] > 1 ? (q[m, i] - n[m] * mu * mu) / (n[m] - 1) : 0
                      line = line sprintf(" %s %.3f +- %.3f", i == 3 ? "Omega_m" : i == 4 ? "sigma_8" : i == 5 ? "n_s" : i == 6 ? "H_0" : "mae", mu, v > 0 ? sqrt(v) : 0) }
                  print line } }' "$2"
}
# sci_mean METHOD ROWS: the mean MAE over the seeds; no row of METHOD, or a MAE that is not a
# number above 0, ends the script (never a NaN in the summary)
sci_mean() {
    awk -v m="$1" '$2 == m { if (!($7 ~ /^[0-9.]+([eE][-+]?[0-9]+)?$/ && $7 > 0)) bad = 1; s += $7; n++ }
        END { if (!n || bad) exit 1; printf "%.6f", s / n }' "$2" || script_fail "$2: no MAE of $1 to average (a run that measured nothing)"
}
sci_ratio() {   # sci_ratio NUM DEN ROWS: "mean sd n" over the seeds of NUM's mean MAE over DEN's, seed by seed (sd 0 with one seed)
    sci_mean "$1" "$3" > /dev/null && sci_mean "$2" "$3" > /dev/null   # (both measured, else the end)
    awk -v a="$1" -v b="$2" '$2 == a {x[$1] = $7} $2 == b {y[$1] = $7}
        END { for (s in x) if (s in y) { r = x[s] / y[s]; t += r; tt += r * r; n++ }
              if (!n) exit 1
              mu = t / n; print mu, (n > 1 && tt - n * mu * mu > 0 ? sqrt((tt - n * mu * mu) / (n - 1)) : 0), n }' "$3" ||
        script_fail "$3: no seed with both $1 and $2"
}
