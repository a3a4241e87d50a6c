#!/bin/sh
# make agreement: every operation and network against PyTorch in float64, as a table of the
# largest relative error measured (each relative to its tensor's largest value) beside the
# tolerance the tests assert.  The rows come from the test programs themselves ("agree NAME
# ERROR TOLERANCE" lines): test_core's PyTorch reference dumps (tests/ref/, the optimizers),
# tests/torch_ops.py (each layer type and loss), tests/torch_cosmoflow.py, torch_deepcam.py
# and torch_2018.py (the networks).  CF_BINS selects the tool builds (default: bin).
cd "$(dirname "$0")/.." || exit 1
PY=/usr/bin/python3
out=$(mktemp /tmp/cf-agree-XXXXXX)
bin/test_core > "$out.core" 2>&1; grep '^agree ' "$out.core" > "$out"
if $PY -c 'import torch, numpy' 2>/dev/null; then
    for s in torch_ops torch_cosmoflow torch_deepcam torch_2018; do $PY tests/$s.py 2>&1 | grep '^agree ' >> "$out"; done
else
    echo "agreement: python3-torch or python3-numpy is missing: only the committed PyTorch references (test_core) below"
fi
awk 'BEGIN { printf "%-100s %12s %10s\n", "operation or network (against PyTorch float64)", "measured", "asserted"; bad = 0 }
     { name = $2; gsub("_", " ", name); ok = ($3 + 0 <= $4 + 0); bad += !ok
       printf "%-100s %12s %10s%s\n", name, $3, $4, ok ? "" : "  FAIL" }
     END { printf "%d rows, %d above their tolerance\n", NR, bad; exit bad > 0 }' "$out"
rc=$?
rm -f "$out" "$out.core"
exit $rc
