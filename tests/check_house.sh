#!/bin/sh
# The house rules a reader relies on, checked: no header function over 80 lines unless the
# comment above it says why ("long:"); no dated measurement in a code comment; the
# activation formulas written once; every function the docs name exists in the header or
# the tools; no file cites a path outside the repository; the tools use the public API;
# every exported function under a group with a stability label; the references plain
# (tests/reference_signatures.sh); no header line over 120 columns; no header function over
# 10 parameters but the named ones below.  Last line "N passed, M failed".
cd "$(dirname "$0")/.." || exit 1
pass=0; fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

# 1. function lengths: a definition starts at column 0 with its name and '(' and ends at the
#    first '}' in column 0; the 3 lines above it may hold "long:" with the reason
long=$(awk '
    { line[NR] = $0 }
    END {
        for (i = 1; i <= NR; i++) {
            if (line[i] !~ /^[A-Za-z_].*\(/ || line[i] ~ /^(#|typedef|enum)/ || line[i] ~ /\{.*\}[ \t]*$/) continue;
            for (j = i; j <= NR && j < i + 8; j++) {   # a definition: "{" ends its signature before any ";"
                if (line[j] ~ /;[ \t]*(\/\*.*)?$/ && line[j] !~ /\{[ \t]*$/) { j = 0; break }
                if (line[j] ~ /\{[ \t]*$/) break
            }
            if (!j || j >= i + 8) continue;
            for (e = j; e <= NR && line[e] !~ /^}/; e++) {}
            why = line[i - 1] line[i - 2] line[i - 3]
            if (e - i + 1 > 80 && why !~ /long:/) printf "cosmoflow.h:%d: %d lines: %s\n", i, e - i + 1, substr(line[i], 1, 70)
            i = e
        }
    }' cosmoflow.h)
[ -z "$long" ] && ok || bad "header functions over 80 lines without a comment saying why:
$long"

# 2. no dated measurement in code comments (dates belong to git log and docs/)
dated=$(grep -nE '20[0-9]{2}-[01][0-9]-[0-3][0-9]' cosmoflow.h tools/*.c tools/*.h 2>/dev/null)
[ -z "$dated" ] && ok || bad "dated notes in code: $dated"

# 3. each activation's formula once in the header: tanhf appears in cf__act_f only
n=$(grep -c 'tanhf(' cosmoflow.h)
[ "$n" = 1 ] && ok || bad "tanhf( appears $n times in cosmoflow.h (the activations are written once, in cf__act_f)"

# 4. every cf_ / cf__ name the docs cite in backquotes exists as a definition in the header
#    or a tool, and every file they link exists
missing=""
for d in docs/*.md README.md; do
    [ -f "$d" ] || continue
    for name in $(grep -oE '`cf_{1,2}[a-z0-9_]+(\(\))?`' "$d" | tr -d '`()' | sort -u); do
        grep -qE "(^|[^a-z0-9_])$name([^a-z0-9_]|$)" cosmoflow.h tools/*.c tools/*.h 2>/dev/null || missing="$missing $d:$name"
    done
    for f in $(grep -oE '\]\([^)#]+' "$d" | sed 's/^](//' | grep -v '^http'); do
        [ -e "$(dirname "$d")/$f" ] || missing="$missing $d:link:$f"
    done
done
[ -z "$missing" ] && ok || bad "names or links in the docs that the code does not have:$missing"

# 5. nothing cites a path outside the repository (users who clone it have only the repository)
outside=$(git ls-files 2>/dev/null | grep -v '^tests/check_house.sh$' | xargs grep -lE '\.\./shared|[A-Z]+-REFERENCE\.md|STYLE-ANCHORS' 2>/dev/null)
[ -z "$outside" ] && ok || bad "files citing paths outside the repository: $outside"

# 6. the tools are programs over the public API: no private cf__ function, type or macro
#    and no field of the private part of cf_net (priv->...) in tools/
private=$(grep -nE '(^|[^A-Za-z0-9_])(cf__|CF__)[A-Za-z0-9_]|priv(->|\.)' tools/*.c tools/*.h 2>/dev/null | head -5)
[ -z "$private" ] && ok || bad "the tools reach into the header's private part: $private"

# 7. every exported function is declared under a group heading that says its stability:
#    "/* ===... NAME (stable)" or "(may change)" or "(arguments may change)"
unlabelled=$(awk '
    /^\/\* =+ implementation/ { exit }
    /^\/\* =+ / { label = ($0 ~ /\((stable|may change|arguments may change)\)/) ? 1 : 0; group = $0 }
    /^CFDEF / { if (!label) { n++; if (n <= 3) printf "%d: %s\n", NR, substr($0, 1, 70) } }
    END { if (n) printf "(%d functions)\n", n }' cosmoflow.h)
[ -z "$unlabelled" ] && ok || bad "exported functions under a group heading without a stability label:
$unlabelled"

# 8. the references (section 3) take no precision, storage, store or GEMM argument
sh tests/reference_signatures.sh > /dev/null && ok || bad "$(sh tests/reference_signatures.sh | grep -A20 FAIL)"

# 9. no line of the header over 120 columns
wide=$(awk 'length > 120 { n++; if (n <= 3) printf "cosmoflow.h:%d: %d columns\n", NR, length } END { if (n) printf "(%d lines)\n", n }' cosmoflow.h)
[ -z "$wide" ] && ok || bad "header lines over 120 columns:
$wide"

# 10. no function definition of the header with more than 10 parameters, but these:
#     the public operations of group F that users call with a layer's arguments one by one
public_ops="cf_sgemm cf_sgemm_naive cf_ref_conv_forward cf_ref_conv_backward_weights cf_conv_forward
    cf_conv_forward_act cf_conv_backward_weights cf_conv_backward cf_bn_forward cf_bn_backward cf_deconv_backward"
#     the GEMMs of type cf__gemm_fn, shaped as BLAS's sgemm is
gemms="cf__sgemm_fp32 cf__sgemm_bf16 cf__sgemm_bf16_rounded cf__sgemm_avx512 cf__sgemm_tiles"
#     section 3's private loops, plain as the references that call them (tests/reference_signatures.sh), and section
#     13's copies with a GEMM argument
ref_loops="cf__im2col_forward cf__im2col_backward_weights cf__im2col_backward_data cf__im2col_gemm_forward
    cf__im2col_gemm_backward_weights cf__im2col_gemm_backward_data cf__bn_apply
    cf__bn_act_backward cf__bn_stats cf__bn_sync_dsums cf__bn_channel"
allowed=" $(echo $public_ops $gemms $ref_loops) "
many=$(awk '
    { line[NR] = $0 }
    END {
        for (i = 1; i <= NR; i++) {
            if (line[i] !~ /^[A-Za-z_].*\(/ || line[i] ~ /^(#|typedef)/ || line[i] ~ /\\$/) continue;
            head = ""
            for (j = i; j <= NR && j < i + 8; j++) {   # the signature, up to its "{" (a ";" first: a declaration)
                head = head " " line[j]
                if (head ~ /[;{]/) break
            }
            b = index(head, "{"); s = index(head, ";")
            if (!b || (s && s < b)) continue;
            open = index(head, "("); depth = 0; commas = 0; empty = 1
            for (k = open; k < b; k++) {   # the commas between the parameters (not inside a nested "(")
                c = substr(head, k, 1)
                if (c == "(") depth++
                else if (c == ")") { depth--; if (!depth) break }
                else if (depth == 1 && c == ",") commas++
                else if (depth == 1 && c !~ /[ \t]/) empty = 0
            }
            params = (empty || substr(head, open + 1, k - open - 1) ~ /^[ \t]*void[ \t]*$/) ? 0 : commas + 1
            name = substr(head, 1, open - 1); sub(/[ \t]+$/, "", name); sub(/.*[^A-Za-z0-9_]/, "", name)
            if (params > 10) printf "%s %d %d\n", name, params, i
        }
    }' cosmoflow.h | while read name n at; do
        case "$allowed" in *" $name "*) ;; *) echo "cosmoflow.h:$at: $name has $n parameters" ;; esac
    done)
[ -z "$many" ] && ok || bad "header functions over 10 parameters (a call struct, or a named place above with the reason):
$many"

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
