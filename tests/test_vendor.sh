#!/bin/sh
# The vendor's door: the README's example, taken from the README itself, compiled as a user
# who copies cosmoflow.h into a project would compile it - no -D of their own - under
# -std=c99, c11 and c17 with -pedantic, as C++11 and C++17, with GCC and with Clang, with
# -Wall -Wextra -Werror, after other headers, under AddressSanitizer, with OpenBLAS and
# OpenMP, and with CF_NO_FILES; each build runs and must print the same numbers as the
# first.  A CF_NO_FILES build references no file function (nm).  A sabotage, an implicit
# declaration put back into the header, must fail the strict build.
# Last line "N passed, M failed".
cd "$(dirname "$0")/.." || exit 1
T=$(mktemp -d /tmp/cf-vendor-XXXXXX)
trap 'rm -rf "$T"' EXIT
pass=0; fail=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

# the C block under "Using the header in your own C program"
awk '/^## Using the header in your own C program/ {s = 1} s && /^```c$/ {c = 1; next} c && /^```$/ {exit} c {print}' README.md > "$T/example.c"
grep -q 'cf_train_step' "$T/example.c" && ok "the README's example found ($(wc -l < "$T/example.c") lines)" || { bad "no C example in README.md"; echo "$pass passed, $fail failed"; exit 1; }
{ printf '#include <stdio.h>\n#include <string.h>\n#include <math.h>\n'; cat "$T/example.c"; } > "$T/after.c"

# its output: five steps with finite losses and a finite prediction
valid() {
    [ "$(grep -c '^step [1-5] loss [0-9.]* lr ' "$1")" = 5 ] && grep -q '^prediction -\{0,1\}[0-9]' "$1" && ! grep -qi 'nan\|inf' "$1"
}
first=""; same=1
build_run() {   # $1 the case's name, then the compiler and its flags; the example's source last
    name=$1; shift
    if ! "$@" -I. -o "$T/ex" -lm > "$T/cc.txt" 2>&1; then bad "$name: does not build: $(grep -m2 -E 'error|warning' "$T/cc.txt")"; return; fi
    if ! "$T/ex" > "$T/out.txt" 2>&1 || ! valid "$T/out.txt"; then bad "$name: runs wrong: $(head -3 "$T/out.txt")"; return; fi
    [ -z "$first" ] && { first=$name; cp "$T/out.txt" "$T/first.txt"; }
    [ $same = 0 ] && { ok "$name: $(tail -1 "$T/out.txt") (another sgemm: other roundings)"; return; }
    cmp -s "$T/out.txt" "$T/first.txt" && ok "$name: $(tail -1 "$T/out.txt")" || bad "$name: its numbers differ from $first's: $(diff "$T/first.txt" "$T/out.txt" | head -3)"
}
W="-Wall -Wextra -Werror"
for cc in gcc clang; do
    command -v $cc > /dev/null || { echo "skipped: $cc (not installed)"; continue; }
    for std in c99 c11 c17; do build_run "$cc -std=$std -pedantic" $cc -std=$std -pedantic $W "$T/example.c"; done
    build_run "$cc -std=c99 -pedantic, after <stdio.h>, <string.h>, <math.h>" $cc -std=c99 -pedantic $W "$T/after.c"
done
for cxx in g++ clang++; do
    command -v $cxx > /dev/null || { echo "skipped: $cxx (not installed)"; continue; }
    for std in c++11 c++17; do build_run "$cxx -std=$std -pedantic" $cxx -std=$std -pedantic $W -x c++ "$T/example.c"; done
done
build_run "gcc -std=c99 under AddressSanitizer and UBSan" gcc -std=c99 -pedantic $W -g -fsanitize=address,undefined -fno-sanitize-recover=undefined "$T/example.c"
if [ -e /usr/include/x86_64-linux-gnu/cblas.h ] || [ -e /usr/include/cblas.h ]; then
    same=0
    build_run "gcc -std=c11 -O2 with OpenMP, OpenBLAS and the x86-64-v3 kernels" gcc -std=c11 -pedantic $W -O2 -fopenmp \
        $(gcc -dumpmachine | grep -q x86_64 && echo -march=x86-64-v3) -DCF_USE_CBLAS "$T/example.c" -lopenblas
    same=1
fi
build_run "gcc -std=c99 -DCF_NO_FILES" gcc -std=c99 -pedantic $W -DCF_NO_FILES "$T/example.c"

# the README's own link lines (the sh block after the example), run as written on example.c
awk '/^## Using the header in your own C program/ {s = 1} s && /^```sh$/ {c = 1; next} c && /^```$/ {exit} c {print}' README.md |
    sed -e ':a' -e '/\\$/N; s/\\\n//; ta' > "$T/link.sh"   # (continued lines joined)
mkdir -p "$T/v"; cp cosmoflow.h "$T/example.c" "$T/v/"   # a vendor's copy beside the example
nl=$(grep -c '^cc ' "$T/link.sh")
[ "$nl" -ge 2 ] && ok "the README's link lines found ($nl)" || bad "the README's link lines: $nl found after the example"
while read -r line; do
    case "$line" in cc\ *) ;; *) continue ;; esac
    rm -f "$T/v/example"
    if (cd "$T/v" && sh -c "$line") > "$T/cc.txt" 2>&1 && "$T/v/example" > "$T/out.txt" 2>&1 && valid "$T/out.txt"; then ok "as the README says: $line"
    else bad "as the README says: $line: $(head -3 "$T/cc.txt" "$T/out.txt" 2>/dev/null | tr '\n' ' ')"; fi
done < "$T/link.sh"

# CF_NO_FILES: nothing of files left in the program (libc's own symbols are not ours)
gcc -std=c99 -pedantic $W -DCF_NO_FILES -I. -c "$T/example.c" -o "$T/nofiles.o"
found=$(nm -u "$T/nofiles.o" | awk '{print $NF}' | grep -E '^(fopen|fdopen|fclose|fread|fwrite|fgets|fseek|open|open64|read|write|close|fsync|rename|remove|unlink|mkdir|stat|stat64|fstat|fstat64|opendir|readdir|readdir64|closedir|uname|getpid)$' | tr '\n' ' ')
[ -z "$found" ] && ok "CF_NO_FILES: the object references none of fopen, open, read, write, rename, mkdir, opendir, stat (nm -u: $(nm -u "$T/nofiles.o" | awk '{print $NF}' | tr '\n' ' '))" ||
    bad "CF_NO_FILES: the object still calls $found"

# the sabotage: a call that a strict mode does not declare, put back into the header
mkdir -p "$T/sab"
sed 's|    \*size = (size_t)st.st_size;|    *size = (size_t)st.st_size; (void)fdopen(fd, "rb");|' cosmoflow.h > "$T/sab/cosmoflow.h"
if cmp -s cosmoflow.h "$T/sab/cosmoflow.h"; then bad "sabotage: the line to change was not found"
elif gcc -std=c99 -pedantic -Werror=implicit-function-declaration -I"$T/sab" -c "$T/example.c" -o "$T/sab.o" > "$T/sab.txt" 2>&1; then
    bad "sabotage: an implicit declaration of fdopen builds under -std=c99 -Werror=implicit-function-declaration"
else grep -q "fdopen" "$T/sab.txt" && ok "sabotage: fdopen put back fails the strict build ($(grep -m1 -o 'implicit declaration[^[]*' "$T/sab.txt"))" || bad "sabotage: failed for another reason: $(head -2 "$T/sab.txt")"
fi
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
