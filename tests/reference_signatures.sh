#!/bin/sh
# Every function of the header's section 3 (the plain references) with its signature, one a
# line; then the check that none takes a precision, a storage (16 bits) or a store-or-add flag
# as an argument, and no public one (cf_) a GEMM: bf16, the memory plan's storage and the fast
# paths' GEMMs are section 4's and section 13's (which has the im2col loops with a GEMM as an
# argument, cf__im2col_gemm_*).  --list prints the signatures only.
# Last line "N passed, M failed".
cd "$(dirname "$0")/.." || exit 1
sigs=$(awk '
    /^\/\* =+ 3\. / { on = 1; next }
    /^\/\* =+ [0-9]+\. / { on = 0 }
    !on { next }
    sig != "" { sig = sig " " $0; if ($0 ~ /\{/) { sub(/[ \t]*\{.*$/, "", sig); gsub(/[ \t]+/, " ", sig); print sig; sig = "" } ; next }
    /^(static|CFDEF|CF__INLINE)[^;=]*\(/ && $0 !~ /;[ \t]*$/ {
        sig = $0
        if ($0 ~ /\{/) { sub(/[ \t]*\{.*$/, "", sig); gsub(/[ \t]+/, " ", sig); print sig; sig = "" }
    }' cosmoflow.h)
if [ "$1" = "--list" ]; then echo "$sigs"; exit 0; fi
n=$(echo "$sigs" | grep -c .)
# a parameter named for a precision, a storage, a store, or a GEMM or of a GEMM's type
bad=$( (echo "$sigs" | grep -nE '\((.*[ ,*(])?(rnd|rounds?|half|[a-z]*_half|bf16|precision|store|stores|[a-z]*_store)[,)]'
        echo "$sigs" | grep -nE '\((.*[ ,*(])?(gemm|gemm_[a-z]*)[,)]|cf__gemm_fn') )
pass=0; fail=0
if [ "$n" -ge 30 ]; then pass=$((pass + 1)); echo "ok   section 3 has $n functions"; else fail=$((fail + 1)); echo "FAIL: section 3: only $n functions found"; fi
if [ -z "$bad" ]; then pass=$((pass + 1)); echo "ok   no reference function takes a precision, storage, store or GEMM argument"
else fail=$((fail + 1)); echo "FAIL: reference functions with a precision, storage, store or GEMM argument:"; echo "$bad" | head -20; fi
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
