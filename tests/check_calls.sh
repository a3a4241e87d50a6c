#!/bin/sh
# The direction of the header's calls: sections 1-10 reach the fast paths (section 11) only
# through the door (section 4).  Lists every use, outside section 4, of a cf__ function
# defined in section 11 (comments and strings left out), then checks a sabotaged copy of the
# header, with one call from the memory plan (section 6) into section 11 added, is reported.
# sh tests/check_calls.sh [HEADER]: the listing alone for HEADER.
# Last line "N passed, M failed".
cd "$(dirname "$0")/.." || exit 1

# calls HEADER: one line "cosmoflow.h:LINE: section S, in FUNCTION: NAME" per use
calls() {
    awk '
    function section(s) {   # the number of a section heading "/* ==== N. title", else 0
        if (s !~ /^\/\* =+ [0-9]+\. /) return 0
        sub(/^\/\* =+ /, "", s); sub(/\..*/, "", s)
        return s + 0
    }
    # the lines as code: comments and string literals blanked, a comment carried across lines
    function code(s,    out, c, i, q) {
        out = ""
        for (i = 1; i <= length(s); i++) {
            c = substr(s, i, 1)
            if (in_comment) { if (substr(s, i, 2) == "*/") { in_comment = 0; i++ } continue }
            if (substr(s, i, 2) == "/*") { in_comment = 1; i++; continue }
            if (substr(s, i, 2) == "//") break
            if (c == "\"" || c == "'\''") {   # a literal: skipped to its closing quote
                q = c
                for (i++; i <= length(s) && substr(s, i, 1) != q; i++) if (substr(s, i, 1) == "\\") i++
                out = out " "; continue
            }
            out = out c
        }
        return out
    }
    { raw[NR] = $0; sec[NR] = (section($0) ? section($0) : sec[NR - 1]); text[NR] = code($0) }
    END {
        # the functions section 11 defines: a line at column 0 naming cf__NAME( whose
        # declaration reaches "{" before any ";"
        for (i = 1; i <= NR; i++) {
            if (sec[i] != 11 || text[i] !~ /^[A-Za-z_]/ || text[i] ~ /^(typedef|enum|#)/) continue
            if (!match(text[i], /cf__[a-z0-9_]+[ \t]*\(/)) continue
            name = substr(text[i], RSTART, RLENGTH); sub(/[ \t]*\($/, "", name)
            for (j = i; j <= NR && j < i + 8; j++) {
                if (text[j] ~ /\{/) { defined[name] = 1; break }
                if (text[j] ~ /;/) break
            }
        }
        # every use of one of them in sections 1-10 but 4
        fn = "(file scope)"
        for (i = 1; i <= NR; i++) {
            if (text[i] ~ /^[A-Za-z_]/ && match(text[i], /[A-Za-z_][A-Za-z0-9_]*[ \t]*\(/)) {
                fn = substr(text[i], RSTART, RLENGTH); sub(/[ \t]*\($/, "", fn)
            }
            if (sec[i] < 1 || sec[i] > 10 || sec[i] == 4) continue
            rest = text[i]
            while (match(rest, /[A-Za-z_][A-Za-z0-9_]*/)) {
                w = substr(rest, RSTART, RLENGTH); rest = substr(rest, RSTART + RLENGTH)
                if (w in defined) printf "cosmoflow.h:%d: section %d, in %s: %s\n", i, sec[i], fn, w
            }
        }
    }' "$1"
}

if [ -n "$1" ]; then calls "$1"; exit 0; fi
pass=0; fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

# 1. the header: no call from sections 1-10 (but the door) into section 11
found=$(calls cosmoflow.h)
if [ -z "$found" ]; then ok; echo "ok   no call from sections 1-10 into section 11 but through section 4"
else bad "calls from sections 1-10 into section 11 that do not go through section 4 ($(echo "$found" | wc -l)):
$found"; fi

# 2. the sabotage: a copy with a call from the plan's first function (section 6) into a
#    section-11 kernel (cf__tiles_fwd) added; the listing names it, and nothing else
t=$(mktemp -d /tmp/cf-calls-XXXXXX)
awk '{ print }
     /^\/\* =+ 6\. / { plan = 1 }
     plan && !done && /^static .*\{[ \t]*$/ { print "    cf__tiles_fwd(NULL);"; done = 1 }' cosmoflow.h > "$t/cosmoflow.h"
sab=$(calls "$t/cosmoflow.h")
if [ "$(echo "$sab" | grep -c 'section 6, in .*: cf__tiles_fwd$')" = 1 ] && [ "$sab" != "$found" ]; then
    ok; echo "ok   a sabotage is reported: $(echo "$sab" | grep 'section 6')"
else bad "a call from the plan into section 11 (cf__tiles_fwd) was not reported: '$sab'"; fi
rm -rf "$t"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
