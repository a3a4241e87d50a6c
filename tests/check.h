/* A tiny test harness: every CHECK counts, failures print where and why; the last line
   of a test program is "N passed, M failed" and its exit status is non-zero on failure. */
#ifndef CHECK_H
#define CHECK_H
#include <stdio.h>
#include <math.h>
static int check_passed, check_failed;
#define CHECK(cond, ...) do { if (cond) check_passed++; else { check_failed++; \
    printf("FAIL %s:%d: ", __FILE__, __LINE__); printf(__VA_ARGS__); printf("\n"); } } while (0)
static int check_summary(void) {
    printf("%d passed, %d failed\n", check_passed, check_failed);
    return check_failed ? 1 : 0;
}
/* worst relative error of a against b, relative to max(|b|) over the tensor (floor tiny) */
#if defined(__GNUC__)
__attribute__((unused))
#endif
static double check_relerr(const float *a, const float *b, size_t n) {
    double worst = 0, scale = 1e-12;
    size_t i;
    for (i = 0; i < n; i++) if (fabs(b[i]) > scale) scale = fabs(b[i]);
    for (i = 0; i < n; i++) { double e = fabs((double)a[i] - b[i]) / scale; if (e > worst || e != e) worst = e != e ? 1e30 : e; }
    return worst;
}
#endif
