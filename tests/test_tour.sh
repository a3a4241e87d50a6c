#!/bin/sh
# Every command of docs/tour.md ("- Run: `...`"), as written, from the top of a copy of the
# repository, after the tour's "Build once" commands.  tests/test_tour.sh --fresh (make tour):
# a copy of the tracked files only, built from nothing, every command run.  Without --fresh
# (make test): the copy keeps this checkout's bin/ (make then has nothing to do) and the two
# long commands, `make agreement` and the CF_REFERENCE rebuild, are left to make tour (make
# test runs the same PyTorch comparisons and builds bin/ref/ itself).
# Last line "N passed, M failed".
cd "$(dirname "$0")/.." || exit 1
fresh=0; [ "$1" = --fresh ] && fresh=1
T=$(mktemp -d /tmp/cf-tour-XXXXXX)
trap 'rm -rf "$T"' EXIT
pass=0; fail=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

# the copy: the repository's files (mtimes kept, so a copied bin/ stays up to date)
git ls-files -z --cached --others --exclude-standard | xargs -0 cp -a --parents -t "$T" 2>/dev/null ||
    { bad "cannot copy the repository"; echo "$pass passed, $fail failed"; exit 1; }
[ $fresh = 0 ] && [ -d bin ] && cp -a bin "$T/"
cd "$T" || exit 1
run_cmd() {   # $1 the command as the tour writes it
    if timeout 900 sh -c "$1" > "$T/out.txt" 2>&1; then ok "$(printf "%s" "$1" | tr "\n" " " | cut -c1-110)"
    else bad "$1 (exit $?): $(tail -3 "$T/out.txt")"; fi
}
for c in "make" "make bin/test_core"; do run_cmd "$c"; done
sed -n 's/^- Run: `\([^`]*\)`.*/\1/p' docs/tour.md > "$T/commands.txt"
n=$(wc -l < "$T/commands.txt")
[ "$n" -ge 10 ] && ok "docs/tour.md has $n commands to run" || bad "docs/tour.md: only $n '- Run:' commands found"
while IFS= read -r c; do
    case "$c" in
    "make agreement"|"make CFLAGS="*)
        if [ $fresh = 0 ]; then echo "not here: $c (long: make tour runs it; make test has its equivalent)"; continue; fi ;;
    esac
    run_cmd "$c"
done < "$T/commands.txt"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
