#!/bin/sh
# The oneDNN peer (bin/onednn-peer, bench/onednn_peer.c), where it is built (libdnnl-dev): on
# small layers of every kind it maps to oneDNN (3-D; 2-D with stride, padding before and after
# unequal, dilation, groups, depthwise, pointwise, two identical layers merged), oneDNN's and
# ours' outputs and gradients agree within the bound in fp32 and bf16, and the last line has its
# form (a bf16 depthwise conv with its output in 16 bits, as the network stores it, too, and a
# conv before a batch norm, timed with one after it, a conv before the max pool fused with it,
# timed with that pool after it, and one after a max pool, timed after one); an
# input changed on one side is reported as a disagreement with a non-zero exit; a --layer that
# is not a convolution is refused.  Without the peer: skipped; on a CPU where oneDNN has no bf16
# convolution (no AVX-512), the bf16 last line says so and the bf16 checks are skipped.
# Last line "N passed, M failed".
cd "$(dirname "$0")/.." || exit 1
pass=0; fail=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
if [ ! -x bin/onednn-peer ]; then
    echo "skipped: the oneDNN peer (bin/onednn-peer is not built: apt-get install libdnnl-dev, then make bin/onednn-peer)"
    echo "0 passed, 0 failed"; exit 0
fi
T=$(mktemp -d /tmp/cf-onednn-XXXXXX)
trap 'rm -rf "$T"' EXIT
cat > "$T/tiny.cfg" <<'CFG'
[net]
input=8x20x24
loss=mse
[conv]
filters=16
size=3
stride=2
pad=1
bias=0
[conv]
filters=16
size=3
pad=1
groups=16
[conv]
filters=16
size=3
pad=1
groups=16
[conv]
filters=32
size=3
pad=0,2
dilation=2
groups=4
[conv]
filters=24
size=1
CFG
last='^onednn: [a-z0-9.-]+ b[0-9]+ (fp32|bf16) [A-Za-z0-9]+: conv layers x[0-9]+\.[0-9][0-9] \(oneDNN time / ours\), worst layer x[0-9]+\.[0-9][0-9] \([0-9]+ (fwd|bwd-w|bwd-d|bwd-w\+d)\)$'
run() {   # NAME WANT-CHECKS ARGS...: every check line agrees, one last line a precision in its form
    name=$1; want=$2; shift 2
    if OMP_NUM_THREADS=2 bin/onednn-peer --reps 1 "$@" > "$T/out.txt" 2> "$T/err.txt"; then
        n=$(grep -c '^check .*: agree$' "$T/out.txt"); d=$(grep -c 'DISAGREE' "$T/out.txt")
        l=$(grep -cE "$last" "$T/out.txt"); p=$(grep -c '^onednn:' "$T/out.txt")
        if [ "$n" = "$want" ] && [ "$d" = 0 ] && [ "$l" = "$p" ] && [ "$p" -ge 1 ]; then ok "$name: $n checks agree; $(grep '^onednn:' "$T/out.txt" | tr '\n' ';')"
        else bad "$name: $n of $want checks agree, $l of $p last lines in form:"; grep -e '^check' -e '^onednn' "$T/out.txt"; fi
    else bad "$name: exit $?: $(cat "$T/err.txt")"; tail -5 "$T/out.txt"; fi
}
# oneDNN has no bf16 convolution without AVX-512: there the peer's bf16 last line says so, and the
# checks that need one are skipped (counted)
nobf16='^onednn: cosmoflow-small.cfg b1 bf16 [A-Za-z0-9]+: not timed, oneDNN has no bf16 convolution on this CPU$'
bf16=1; both=both; per=2
if OMP_NUM_THREADS=2 bin/onednn-peer --reps 1 --model models/cosmoflow-small.cfg --layer 0 --precision bf16 > "$T/out.txt" 2> "$T/err.txt" &&
   grep -qE "$nobf16" "$T/out.txt"; then
    if grep -q '^check' "$T/out.txt"; then bad "bf16 not timed, yet checked: $(grep '^check' "$T/out.txt")"
    else ok "no bf16 convolution in oneDNN here ($(grep 'effective ISA' "$T/out.txt" | head -1)): $(grep '^onednn:' "$T/out.txt")"; fi
    bf16=0; both=fp32; per=1
    echo "skipped: the oneDNN peer's bf16 checks (oneDNN has no bf16 convolution on this CPU: no AVX-512)"
fi
run "cosmoflow-small.cfg layer 2 (3-D, backward-data)" $per --model models/cosmoflow-small.cfg --layer 2 --batch 2 --precision $both
run "cosmoflow-small.cfg layer 0 (reads the input: no backward-data)" 1 --model models/cosmoflow-small.cfg --layer 0 --precision fp32
run "a 2-D network: stride 2, depthwise twice, dilated and grouped with unequal padding, pointwise" $((per * 4)) --model "$T/tiny.cfg" --batch 3 --precision $both
if grep -q '^1 .* x2 conv 16->16 3x3 @10x12 dw' "$T/out.txt"; then ok "the two identical depthwise layers timed once, counted twice"
else bad "the identical depthwise layers 1 and 2 are not one row x2:"; grep -E '^[0-9]+ ' "$T/out.txt"; fi
# a conv whose one reader is a batch norm: in bf16 the network stores its output and their gradient
# in 16 bits, and the peer times it with a batch norm after it (checked without: the loss reads the conv)
printf '[net]\ninput=8x10x37\nloss=mse\n[conv]\nfilters=8\nsize=1\n[conv]\nfilters=16\nsize=1\nbias=0\n' > "$T/bn.cfg"
printf '[batchnorm]\nactivation=relu\n[conv]\nfilters=8\nsize=1\n' >> "$T/bn.cfg"
if [ "$bf16" = 1 ]; then
    # a bf16 depthwise conv whose one reader is a pointwise conv: the network stores its output and
    # their gradient in 16 bits, and the peer times it between two identity pointwise convs so
    printf '[net]\ninput=8x10x37\nloss=mse\n[conv]\nfilters=8\nsize=1\n[conv]\nfilters=8\nsize=3\npad=1\ngroups=8\n' > "$T/sep.cfg"
    printf 'bias=0\n[conv]\nfilters=8\nsize=1\nbias=0\n' >> "$T/sep.cfg"
    run "a separable conv's depthwise half in bf16" 1 --model "$T/sep.cfg" --layer 1 --batch 2 --precision bf16
    if grep -q '^ours layer 1: between two identity pointwise convs, its output and their gradient stored in 16 and 16 bits' \
        "$T/out.txt"; then ok "its output and their gradient stored in 16 bits, as in the network"
    else bad "the depthwise layer's storage: $(grep -e '^ours' -e '^check' "$T/out.txt")"; fi
    # the pointwise conv after it reads that output in 16 bits and writes its gradient so: the peer
    # times it after an identity depthwise conv (itself after an identity pointwise conv)
    run "a separable conv's pointwise half in bf16" 1 --model "$T/sep.cfg" --layer 2 --batch 2 --precision bf16
    if grep -q '^ours layer 2: after an identity depthwise conv, its input and the gradient over it stored in 16 and 16 bits' \
        "$T/out.txt"; then ok "its input and the gradient over it stored in 16 bits, as in the network"
    else bad "the pointwise layer's input storage: $(grep -e '^ours' -e '^check' "$T/out.txt")"; fi
    run "a conv before a batch norm in bf16" 1 --model "$T/bn.cfg" --layer 1 --batch 2 --precision bf16
    if grep -q '^ours layer 1: timed with a batch norm after it, its output and their gradient stored in 16 and 16 bits, as in' \
        "$T/out.txt" && grep -q '^1 .* bf16 ' "$T/out.txt"; then ok "its output and their gradient stored in 16 bits, as in the network"
    else bad "the conv before a batch norm: $(grep -e '^ours' -e '^check' -e '^1 ' "$T/out.txt")"; fi
    # a conv the network fuses with the max pool after it (CosmoFlow's): in bf16 the network stores
    # its output in 16 bits, the gradient over it written there by the pool; timed with that pool
    printf '[net]\ninput=3x6x8x20\nloss=mse\n[conv]\nfilters=16\nsize=3\npad=same\n[maxpool]\nsize=2\nstride=2\n' \
        > "$T/pool.cfg"
    printf '[conv]\nfilters=16\nsize=3\npad=same\n[maxpool]\nsize=2\nstride=2\n[conv]\nfilters=4\nsize=1\n' >> "$T/pool.cfg"
    run "a conv before its fused max pool in bf16" 1 --model "$T/pool.cfg" --layer 0 --precision bf16
    if grep -q '^ours layer 0: timed with its max pool after it, its output stored in 16 bits, the gradient in it, as in the network' \
        "$T/out.txt"; then ok "its output stored in 16 bits, the gradient in it, as in the network"
    else bad "the conv before a max pool: $(grep -e '^ours' -e '^check' "$T/out.txt")"; fi
    # the conv after that pool reads its output and writes the gradient over it in 16 bits: timed
    # after a max pool of an identity pointwise conv
    run "a conv after a max pool in bf16" 1 --model "$T/pool.cfg" --layer 2 --precision bf16
    if grep -q '^ours layer 2: timed after a max pool (of an identity pointwise conv), its input and the gradient over it stored in 16 and 16 bits, as in the network' \
        "$T/out.txt"; then ok "its input and the gradient over it stored in 16 bits, as in the network"
    else bad "the conv after a max pool: $(grep -e '^ours' -e '^check' "$T/out.txt")"; fi
fi
run "the same in fp32: no batch norm after it" 1 --model "$T/bn.cfg" --layer 1 --batch 2 --precision fp32
if grep -q '^ours layer 1: timed with a batch norm' "$T/out.txt"; then bad "fp32 timed with a batch norm: $(grep '^ours' "$T/out.txt")"
else ok "fp32: the conv alone"; fi
# the sabotage: ours' input changed after oneDNN's copy was made
if ONEDNN_PEER_SABOTAGE=1 OMP_NUM_THREADS=2 bin/onednn-peer --reps 1 --model "$T/tiny.cfg" --layer 0 --precision fp32 > "$T/out.txt" 2> "$T/err.txt"; then
    bad "a changed input is not reported: $(grep '^check' "$T/out.txt")"
elif grep -q 'DISAGREE' "$T/out.txt" && grep -q 'err ' "$T/out.txt" && grep -q '^onednn-peer: .*disagreed' "$T/err.txt"; then
    ok "a changed input: $(grep '^check' "$T/out.txt")"
else bad "a changed input: no DISAGREE line, no error in the ratio column or no message: $(cat "$T/out.txt" "$T/err.txt")"; fi
# a layer that is not a convolution
if bin/onednn-peer --model models/cosmoflow-small.cfg --layer 1 > /dev/null 2> "$T/err.txt"; then bad "--layer 1 (a max pool) accepted"
elif grep -q '^onednn-peer: --layer: 1 is not a \[conv\] layer' "$T/err.txt"; then ok "--layer of a max pool refused: $(cat "$T/err.txt")"
else bad "--layer 1: $(cat "$T/err.txt")"; fi
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
