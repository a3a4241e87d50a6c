/* stb compile test, translation unit 1 of 2: the implementation, C99 -pedantic -Werror,
   naive sgemm, no MPI/zlib/OpenMP. */
#define CF_IMPLEMENTATION
#include "cosmoflow.h"
#include "cosmoflow.h"   /* included twice on purpose */
int other_unit(void);
int main(void) {
    float a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8}, c[4];
    cf_sgemm(0, 0, 2, 2, 2, 1.0f, a, 2, b, 2, 0.0f, c, 2);
    printf("compile test (C99, two units)\n%s\n", c[0] == 19 && other_unit() == 42 ? "1 passed, 0 failed" : "0 passed, 1 failed");
    return c[0] == 19 ? 0 : 1;
}
