#!/bin/sh
# OpenBLAS's kernels: a tool that finds OpenBLAS fallen back to its SSE kernels (an OpenBLAS
# older than the CPU) runs with the newest set the CPU supports that passes the sgemm check in
# a child, says so on its first line, and obeys OPENBLAS_CORETYPE when the user set it.  An
# OpenBLAS that does not know the CPU is made with a preloaded library: its
# openblas_get_corename says 'Prescott' unless OPENBLAS_CORETYPE is set, and its cblas_sgemm
# crashes or computes wrong under the sets named in CF_TEST_CRASH and CF_TEST_WRONG.
# Last line "N passed, M failed".
cd "$(dirname "$0")/.." || exit 1
T=$(mktemp -d /tmp/cf-blas-XXXXXX)
trap 'rm -rf "$T"' EXIT
pass=0; fail=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
if ! ldd bin/cf-bench 2>/dev/null | grep -q openblas; then echo "skipped: OpenBLAS's kernels (bin/cf-bench is not built with OpenBLAS)"; echo "0 passed, 0 failed"; exit 0; fi
if ! grep -q avx2 /proc/cpuinfo || [ "$(uname -m)" != x86_64 ]; then echo "skipped: OpenBLAS's kernels (no AVX2: no newer set to choose)"; echo "0 passed, 0 failed"; exit 0; fi
cat > "$T/old.c" <<'CEOF'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
char *openblas_get_corename(void) { char *c = getenv("OPENBLAS_CORETYPE"); return c ? c : (char *)"Prescott"; }
static int named(const char *var) { const char *c = getenv("OPENBLAS_CORETYPE"), *v = getenv(var); return c && v && strstr(v, c); }
void cblas_sgemm(int o, int ta, int tb, int m, int n, int k, float al, const float *a, int lda, const float *b, int ldb, float be, float *c, int ldc) {
    void (*real)(int, int, int, int, int, int, float, const float *, int, const float *, int, float, float *, int) =
        (void (*)(int, int, int, int, int, int, float, const float *, int, const float *, int, float, float *, int))dlsym(RTLD_NEXT, "cblas_sgemm");
    if (named("CF_TEST_CRASH")) raise(SIGSEGV);
    real(o, ta, tb, m, n, k, al, a, lda, b, ldb, be, c, ldc);
    if (named("CF_TEST_WRONG") && m > 8) c[ldc + 1] += 1.0f;
}
CEOF
cc -shared -fPIC -O1 -o "$T/old.so" "$T/old.c" -ldl || { bad "the stand-in library does not build"; echo "$pass passed, $fail failed"; exit 1; }
OLD="env -u OPENBLAS_CORETYPE LD_PRELOAD=$T/old.so"
avx512=$(grep -q 'avx512f.*avx512dq\|avx512dq.*avx512f' /proc/cpuinfo && grep -q avx512bw /proc/cpuinfo && grep -q avx512vl /proc/cpuinfo && echo 1)
best=$([ -n "$avx512" ] && echo SkylakeX || echo Haswell)
case_() {   # case_ NAME WANT-KERNELS WANT-NOTE ENV...: cf-bench --check-blas, its kernels and its first line
    name=$1; want=$2; note=$3; shift 3
    "$@" bin/cf-bench --check-blas > "$T/out.txt" 2> "$T/err.txt"; rc=$?
    k=$(sed -n 's/^blas: OpenBLAS, \(.*\) kernels$/\1/p' "$T/out.txt")
    if [ $rc = 0 ] && [ "$k" = "$want" ] && { [ -z "$note" ] && ! grep -q 'OpenBLAS runs its' "$T/err.txt" || head -1 "$T/err.txt" | grep -q -- "$note"; }; then
        ok "$name: $want kernels${note:+, first line: $(head -1 "$T/err.txt")}"
    else bad "$name: rc $rc, kernels '$k' (want $want): $(head -2 "$T/err.txt")"; fi
}
case_ "OpenBLAS fallen back to SSE" $best "cf-bench: OpenBLAS runs its $best kernels (it does not know this CPU: its own choice was Prescott, SSE)" $OLD
[ -n "$avx512" ] && case_ "the AVX-512 set crashes its check" Haswell "OpenBLAS runs its Haswell kernels" $OLD CF_TEST_CRASH=SkylakeX
case_ "every newer set wrong" Prescott "OpenBLAS runs its Prescott (SSE) kernels: it does not know this CPU, and no newer set passed the check" $OLD CF_TEST_WRONG=SkylakeX,Haswell
case_ "OPENBLAS_CORETYPE=Prescott set by the user" Prescott "" env LD_PRELOAD="$T/old.so" OPENBLAS_CORETYPE=Prescott
# this machine's own OpenBLAS: one that knows the CPU runs its choice, and no line is printed;
# one that fell back (an Intel or AMD CPU newer than it) runs the set the tool chose, said so
real=$(bin/cf-bench --check-blas 2>"$T/real.err" | sed -n 's/^blas: OpenBLAS, \(.*\) kernels$/\1/p')
if grep -q "OpenBLAS runs its" "$T/real.err"; then case_ "this machine's OpenBLAS, fallen back" "$real" "cf-bench: OpenBLAS runs its $real kernels" env -u OPENBLAS_CORETYPE
else case_ "this machine's OpenBLAS ($real)" "$real" "" env; fi
# the check itself fails a wrong sgemm (it is what keeps a wrong set out)
env LD_PRELOAD="$T/old.so" OPENBLAS_CORETYPE=Haswell CF_TEST_WRONG=Haswell bin/cf-bench --check-blas > "$T/out.txt" 2>&1 &&
    bad "cf-bench --check-blas passes a wrong sgemm" || { grep -q "^check-blas: FAILED" "$T/out.txt" && ok "--check-blas fails a wrong sgemm: $(grep -m1 WRONG "$T/out.txt")" || bad "--check-blas: $(tail -2 "$T/out.txt")"; }
# every tool, not only cf-bench: cf-check's first line, and its output otherwise unchanged
$OLD bin/cf-check --model models/cosmoflow-small.cfg --summary > "$T/c.txt" 2> "$T/e.txt" && bin/cf-check --model models/cosmoflow-small.cfg --summary > "$T/c0.txt" 2>/dev/null &&
    cmp -s "$T/c.txt" "$T/c0.txt" && head -1 "$T/e.txt" | grep -q "^cf-check: OpenBLAS runs its $best kernels" && ok "cf-check: $(head -1 "$T/e.txt")" || bad "cf-check on an old OpenBLAS: $(head -2 "$T/e.txt")"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
