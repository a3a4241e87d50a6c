#!/bin/sh
# The direction of the header's calls: the sections before the fast paths reach them only
# through the door.  The sections are found by their headings' names ("the door to the fast
# paths", "fast paths", "the memory plan"), not their numbers.  Lists every use, outside the
# door, of a cf__ function the fast paths' section defines (comments and strings left out),
# then checks a sabotaged copy of the header, with one call from the memory plan into the fast
# paths added, is reported.
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
    function title(s) {     # the title of a section heading, after its number
        sub(/^\/\* =+ [0-9]+\. /, "", s); sub(/[ \t]*(\*\/)?[ \t]*$/, "", s)
        return s
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
    section($0) && title($0) ~ /^the door to the fast paths/ { door = section($0) }
    section($0) && title($0) ~ /^fast paths/ { fast = section($0) }
    END {
        if (!door || !fast) { print "cosmoflow.h: no section headed \"the door to the fast paths\" or \"fast paths\""; exit 1 }
        # the functions the fast paths define: a line at column 0 naming cf__NAME( whose
        # declaration reaches "{" before any ";"
        for (i = 1; i <= NR; i++) {
            if (sec[i] != fast || text[i] !~ /^[A-Za-z_]/ || text[i] ~ /^(typedef|enum|#)/) continue
            if (!match(text[i], /cf__[a-z0-9_]+[ \t]*\(/)) continue
            name = substr(text[i], RSTART, RLENGTH); sub(/[ \t]*\($/, "", name)
            for (j = i; j <= NR && j < i + 8; j++) {
                if (text[j] ~ /\{/) { defined[name] = 1; break }
                if (text[j] ~ /;/) break
            }
        }
        # every use of one of them in the sections before the fast paths but the door
        fn = "(file scope)"
        for (i = 1; i <= NR; i++) {
            if (text[i] ~ /^[A-Za-z_]/ && match(text[i], /[A-Za-z_][A-Za-z0-9_]*[ \t]*\(/)) {
                fn = substr(text[i], RSTART, RLENGTH); sub(/[ \t]*\($/, "", fn)
            }
            if (sec[i] < 1 || sec[i] >= fast || sec[i] == door) continue
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

# the number of the section headed NAME
number() { sed -n "s/^\/\* =* \([0-9]*\)\. $1.*/\1/p" cosmoflow.h | head -1; }
door=$(number 'the door to the fast paths'); fast=$(number 'fast paths'); plan=$(number 'the memory plan')

# 1. the header: no call from the sections before the fast paths (but the door) into them
found=$(calls cosmoflow.h)
if [ -n "$door" ] && [ -n "$fast" ] && [ -z "$found" ]; then
    ok; echo "ok   no call from sections 1-$((fast - 1)) into section $fast (the fast paths) but through section $door (the door)"
else bad "calls into section '$fast' (the fast paths) that do not go through section '$door' (the door) ($(echo "$found" | wc -l)):
$found"; fi

# 2. the sabotage: a copy with a call from the plan's first function into a fast path's
#    kernel (cf__tiles_fwd) added; the listing names it, and nothing else
t=$(mktemp -d /tmp/cf-calls-XXXXXX)
awk '{ print }
     /^\/\* =+ [0-9]+\. the memory plan/ { plan = 1 }
     plan && !done && /^static .*\{[ \t]*$/ { print "    cf__tiles_fwd(NULL);"; done = 1 }' cosmoflow.h > "$t/cosmoflow.h"
sab=$(calls "$t/cosmoflow.h")
if [ -n "$plan" ] && [ "$(echo "$sab" | grep -c "section $plan, in .*: cf__tiles_fwd\$")" = 1 ] && [ "$sab" != "$found" ]; then
    ok; echo "ok   a sabotage is reported: $(echo "$sab" | grep "section $plan,")"
else bad "a call from the plan (section '$plan') into the fast paths (cf__tiles_fwd) was not reported: '$sab'"; fi
rm -rf "$t"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
