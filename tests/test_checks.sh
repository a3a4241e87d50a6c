#!/bin/sh
# Checks that see what they claim.  The tour's exercise (docs/tour.md, stop 8) done twice in a
# copy of the header: a [square] layer (y = x^2, dx += 2 x dy) registered with the right table
# flags passes cf-check --gradcheck; registered with flags that hide its read of x from the
# memory plan, its finite differences still pass (they keep every output) but the gradient
# check's memory-plan line must fail.  Last line "N passed, M failed".
cd "$(dirname "$0")/.." || exit 1
T=$(mktemp -d /tmp/cf-checks-XXXXXX)
trap 'rm -rf "$T"' EXIT
pass=0; fail=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

# the layer type, inserted into a copy of the header with the given table flags
square() {   # $1 the flags, $2 the directory
    mkdir -p "$2"
    FLAGS="$1" /usr/bin/python3 - cosmoflow.h "$2/cosmoflow.h" <<'EOF'
import os, sys
s = open(sys.argv[1]).read()
def put(anchor, text, before=True):
    global s
    assert anchor in s, anchor
    s = s.replace(anchor, text + anchor if before else anchor + text, 1)
put("CF_L_NTYPES\n};", "CF_L_SQUARE, ")
put("/* ---- the layer-type table, in the order of CF_L_*.", '''/* ---- [square]: y = x^2; dx += 2 x dy (the tour's exercise) */
static void cf__square_forward(cf_net *net, int i) {
    cf_layer *l = &net->layers[i];
    const float *x = cf__in(net, l, 0);
    float *y = cf__out(net, i);
    size_t k, n = cf__n_out(net, l);
    for (k = 0; k < n; k++) y[k] = x[k] * x[k];
}
static void cf__square_backward(cf_net *net, int i) {
    cf_layer *l = &net->layers[i];
    const float *x = cf__in(net, l, 0), *dy = cf__grad(net, i);
    float *dx = cf__in_grad(net, l, 0);
    size_t k, n = cf__n_out(net, l);
    if (dx) for (k = 0; k < n; k++) dx[k] += 2.0f * x[k] * dy[k];
}
''')
put("\n};\nCFDEF const char *cf_layer_type_name", '\n    {"square", cf__no_keys, cf__size_flops, cf__square_forward, cf__square_backward, %s},' % os.environ["FLAGS"], before=True)
open(sys.argv[2], "w").write(s)
EOF
}
# a net where x, the square's input, is a conv output the plan may drop: conv -> square ->
# conv, so that the square's input is read again only by its own backward
printf '[net]\ninput=2x8x8\n[conv]\nfilters=3\nsize=3\n[square]\n[conv]\nfilters=3\nsize=3\n[flatten]\n[dense]\noutputs=2\n' > "$T/sq.cfg"
CC="cc -std=c99 -D_POSIX_C_SOURCE=200809L -O1 -DCF_USE_ZLIB"
for case in right wrong; do
    if [ $case = right ]; then flags="CF__READS_IN | CF__CHEAP"; else flags="0"; fi
    square "$flags" "$T/$case" || { bad "[square] could not be inserted into the header"; continue; }
    if ! $CC -I"$T/$case" -o "$T/$case/cf-check" tools/cf_check.c -lz -lm -lpthread > "$T/$case/cc.txt" 2>&1; then
        bad "[square] with flags $flags: cf-check does not build: $(head -3 "$T/$case/cc.txt")"; continue
    fi
    "$T/$case/cf-check" --model "$T/sq.cfg" --gradcheck > "$T/$case/out.txt" 2>&1; rc=$?
    plan=$(grep '^memory plan' "$T/$case/out.txt")
    fd_ok=$(grep -c '  ok$' "$T/$case/out.txt")
    if [ $case = right ]; then
        [ $rc = 0 ] && echo "$plan" | grep -q ' ok$' && ok "[square] with flags $flags: gradcheck passes ($plan)" ||
            bad "[square] with the right flags: $(cat "$T/$case/out.txt")"
    else
        [ $rc != 0 ] && [ "$fd_ok" = 5 ] && echo "$plan" | grep -q 'FAIL' && ok "[square] with flags 0: every finite difference passes, the memory-plan line fails ($plan)" ||
            bad "[square] with the wrong flags is not caught: exit $rc, $(cat "$T/$case/out.txt")"
    fi
done
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
