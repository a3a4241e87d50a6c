#!/bin/sh
# The docs kept true: every program, flag, make target, path and link that README.md and
# docs/claims.md name exists.  Read from the inline code spans, the shell blocks and the links:
# a `cf-xxx ... --flag` must be in that program's --help (a flag named alone, in some tool's),
# a `bin/NAME` must be a tool or a program the Makefile builds, a `make TARGET` a target of the
# Makefile, a path under tools/, docs/, models/, tests/ or bench/ a file of the tree, a link's
# target a file beside the page.  Sabotages: copies of README.md with a flag, a make target, a
# path and a link renamed must each be reported.  The flags need the tools built (bin/); without
# them those checks are skipped.  Last line "N passed, M failed".
cd "$(dirname "$0")/.." || exit 1
T=$(mktemp -d /tmp/cf-docs-XXXXXX)
trap 'rm -rf "$T"' EXIT
pass=0; fail=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

TOOLS="cf-train cf-eval cf-check cf-convert cf-synth cf-bench"

# each tool's flags as its --help lists them: the usage lines', and each option line's leading
# "--a" or "--a, --b" (a flag only mentioned in another's description does not count)
helpflags() {
    awk '/^ *usage:/ || /^       cf-/ { s = $0; while (match(s, /--[a-z][a-z0-9-]*/)) { print substr(s, RSTART, RLENGTH); s = substr(s, RSTART + RLENGTH) } next }
         /^ +--/ { s = $0; while (match(s, /^[ ,]*--[a-z][a-z0-9-]*/)) { f = substr(s, RSTART, RLENGTH); sub(/^[ ,]*/, "", f); print f; s = substr(s, RSTART + RLENGTH) } }'
}
flags=1
for t in $TOOLS; do
    if [ ! -x "bin/$t" ]; then flags=0; continue; fi
    { "bin/$t" --help 2>&1; [ $t = cf-synth ] && "bin/$t" climate --help 2>&1; } | helpflags | sort -u > "$T/flags.$t"
done
if [ $flags = 1 ]; then cat "$T"/flags.* | sort -u > "$T/flags.all"
else echo "skipped: the flags named in the docs (the tools are not built: make all)"; fi

# the Makefile's targets: the words before ':' of its rule lines (not variables, not recipes)
awk '/^[^\t#][^=]*:([^=]|$)/ { t = $0; sub(/:.*/, "", t); n = split(t, a, /[ \t]+/); for (i = 1; i <= n; i++) if (a[i] != "") print a[i] }' Makefile | sort -u > "$T/targets"

# What a page names, one item a line: "flag TOOL --F", "bareflag --F", "prog NAME",
# "target NAME", "path P", "link P".  Inline code spans are read line by line (a tool named in
# an earlier span of the line owns the flags after it; a launcher's, srun or mpirun, are its
# own); ```sh blocks line by line; | ; sh and # end a tool's command.
items() {
    awk '
    function scan(text,   n, a, i, w, mk) {
        gsub(/\\\|/, " | ", text)
        n = split(text, a, /[ \t]+/); mk = 0
        for (i = 1; i <= n; i++) {
            w = a[i]
            if (w ~ /^#/) { tool = ""; mk = 0; continue }
            gsub(/^[("]+/, "", w); gsub(/[),;:."]+$/, "", w)
            if (w == "") continue
            if (w == "|" || w == ";" || w == "&&" || w == "||" || w == "sh") { tool = ""; mk = 0; continue }
            if (w == "make") { tool = ""; mk = 1; continue }
            if (mk) { if (w ~ /=/ || w ~ /^-/) continue; mk = 0
                      if (w ~ /^bin\//) print "prog", substr(w, 5); else print "target", w; continue }
            if (w ~ /^(srun|sbatch|salloc|scancel|scontrol|mpirun|mpiexec)(\.[a-z]+)?$/) { tool = "-"; continue }   # a launcher: its own flags
            if (w ~ /^(bin\/)?cf-[a-z]+$/) { sub(/^bin\//, "", w); tool = w; print "prog", w; continue }
            if (w ~ /^bin\/[A-Za-z0-9_.-]+$/) { print "prog", substr(w, 5); continue }
            if (w ~ /^--[a-z][a-z0-9-]*(=.*)?$/ && tool == "-") continue
            if (w ~ /^--[a-z][a-z0-9-]*(=.*)?$/) { sub(/=.*/, "", w)
                      if (tool != "") print "flag", tool, w; else print "bareflag", w; continue }
            if (w ~ /^(tools|docs|models|tests|bench)\/[A-Za-z0-9_.\/-]+$/ && w !~ /\*/) { print "path", w; continue }
        }
    }
    /^```/ { if (!code) { code = 1; lang = substr($0, 4) } else code = 0; next }
    code { tool = ""; if (lang == "sh") scan($0); next }
    {
        s = $0
        while (match(s, /\]\([^)]+\)/)) { print "link", substr(s, RSTART + 2, RLENGTH - 3); s = substr(s, RSTART + RLENGTH) }
        s = $0; tool = ""
        while (match(s, /`[^`]+`/)) { scan(substr(s, RSTART + 1, RLENGTH - 2)); s = substr(s, RSTART + RLENGTH) }
    }' "$1"
}

# check PAGE DIR: every item of PAGE (its links relative to DIR); prints "PAGE: missing ..."
# for each that does not exist, "checked KIND ..." for each that does
check() {
    items "$1" | sort -u | while read -r kind a b; do
        case $kind in
        flag)
            [ $flags = 1 ] || continue
            if [ ! -f "$T/flags.$a" ]; then echo "$1: missing program $a (named with $b)"
            elif grep -qx -- "$b" "$T/flags.$a"; then echo "checked flag $a $b"
            else echo "$1: missing flag: $a $b is not in $a --help"; fi ;;
        bareflag)
            [ $flags = 1 ] || continue
            grep -qx -- "$a" "$T/flags.all" && echo "checked bareflag $a" || echo "$1: missing flag: $a is in no tool's --help" ;;
        prog)
            case $a in
            cf-*) [ -f "tools/$(echo "$a" | tr - _).c" ] && grep -q "^TOOLS.*[ =]$a\( \|$\)" Makefile && echo "checked prog $a" ||
                      echo "$1: missing program: $a is not a tool (tools/*.c and the Makefile's TOOLS)" ;;
            *) grep -qE "(^|[ \t])bin/$a([ \t:]|$)" Makefile && echo "checked prog $a" || echo "$1: missing program: bin/$a is not built by the Makefile" ;;
            esac ;;
        target) grep -qx -- "$a" "$T/targets" && echo "checked target $a" || echo "$1: missing make target: make $a is not in the Makefile" ;;
        path) [ -e "$a" ] && echo "checked path $a" || echo "$1: missing path: $a is not in the tree" ;;
        link)
            case $a in http*|\#*) continue ;; esac
            f=${a%%#*}
            [ -e "$2/$f" ] && echo "checked link $a" || echo "$1: missing link target: $a ($2/$f)" ;;
        esac
    done
}

for page in README.md docs/claims.md; do
    if [ ! -f "$page" ]; then bad "$page is absent"; continue; fi
    check "$page" "$(dirname "$page")" > "$T/out.txt"
    grep -v '^checked ' "$T/out.txt" > "$T/missing.txt"
    summary=$(sed -n 's/^checked \([a-z]*\) .*/\1/p' "$T/out.txt" | sort | uniq -c | awk '{printf "%s%d %ss", (NR > 1 ? ", " : ""), $1, $2}')
    if [ -s "$T/missing.txt" ]; then bad "$page names what does not exist:"; cat "$T/missing.txt"
    else ok "$page: everything it names exists ($summary)"; fi
    [ $page = README.md ] && cp "$T/out.txt" "$T/readme.checked"
done

# Sabotages on copies of README.md (links resolved from the repository's top, as the
# original's): each renamed name must be reported by name.
sabotage() {   # $1 what, $2 the original text, $3 its replacement, $4 what the report must say
    if ! grep -qF -- "$2" README.md; then bad "sabotage ($1): README.md has no '$2' to rename"; return; fi
    awk -v a="$2" -v b="$3" '{ out = ""; while ((i = index($0, a)) > 0) { out = out substr($0, 1, i - 1) b; $0 = substr($0, i + length(a)) } print out $0 }' README.md > "$T/README.md"
    check "$T/README.md" . > "$T/sab.txt"
    if grep -qF -- "$4" "$T/sab.txt"; then ok "sabotage ($1: '$2' -> '$3') reported: $(grep -F -- "$4" "$T/sab.txt" | head -1)"
    else bad "sabotage ($1: '$2' -> '$3') not reported: $(grep -v '^checked ' "$T/sab.txt" | head -3)"; fi
}
if [ $flags = 1 ]; then
    # the first flag the README names after a tool, renamed wherever the README has it
    set -- $(sed -n 's/^checked flag //p' "$T/readme.checked" | head -1)
    if [ $# = 2 ]; then sabotage "a flag" "$2" "--no-such-flag" "missing flag: $1 --no-such-flag"
    else bad "sabotage (a flag): the README names no tool's flag"; fi
fi
set -- $(sed -n 's/^checked target //p' "$T/readme.checked" | head -1)
[ $# = 1 ] && sabotage "a make target" "make $1" "make no-such-target" "missing make target: make no-such-target" || bad "sabotage (a make target): the README names none"
set -- $(sed -n 's/^checked path //p' "$T/readme.checked" | head -1)
[ $# = 1 ] && sabotage "a path" "$1" "$1.no-such" "missing path: $1.no-such" || bad "sabotage (a path): the README names none"
set -- $(sed -n 's/^checked link //p' "$T/readme.checked" | head -1)
[ $# = 1 ] && sabotage "a link" "]($1)" "](docs/no-such.md)" "missing link target: docs/no-such.md" || bad "sabotage (a link): the README has none"

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
