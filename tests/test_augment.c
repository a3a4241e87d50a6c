/* The training augmentation: the 48 symmetries of a cube (tools/tool.h cube_symmetry). */
#define CF_IMPLEMENTATION
#include "cosmoflow.h"
#include <stdlib.h>
#include <string.h>
#include "check.h"

int main(void) {
    int C = 2, S = 5, code, other, i;
    size_t n = (size_t)C * S * S * S;
    float *x = (float *)malloc(n * 4), *y = (float *)malloc(n * 4), *tmp = (float *)malloc(n * 4), *all = (float *)malloc(48 * n * 4);
    cf_rng r = cf_rng_seed(1);
    for (i = 0; i < (int)n; i++) x[i] = cf_rng_uniform(&r);
    for (code = 0; code < 48; code++) {
        double sx = 0, sy = 0;
        memcpy(y, x, n * 4);
        cf_cube_symmetry(y, tmp, C, S, code);
        memcpy(all + code * n, y, n * 4);
        for (i = 0; i < (int)n; i++) { sx += x[i]; sy += y[i]; }
        CHECK(fabs(sx - sy) < 1e-9 * fabs(sx) + 1e-6, "symmetry %d keeps the values", code);
    }
    CHECK(!memcmp(all, x, n * 4), "symmetry 0 is the identity");
    for (code = 0, i = 1; code < 48; code++) for (other = code + 1; other < 48; other++) i &= memcmp(all + code * n, all + other * n, n * 4) != 0;
    CHECK(i, "the 48 symmetries are all different");
    memcpy(y, x, n * 4);
    cf_cube_symmetry(y, tmp, C, S, 6); cf_cube_symmetry(y, tmp, C, S, 6);   /* the same flip twice */
    CHECK(!memcmp(y, x, n * 4), "a flip applied twice is the identity");
    /* code 6 = identity permutation, depth flipped: voxel (0,0,0) goes to (S-1,0,0) */
    memcpy(y, x, n * 4);
    cf_cube_symmetry(y, tmp, C, S, 6);
    CHECK(y[(S - 1) * S * S] == x[0] && y[(S - 1) * S * S + 1] == x[1], "flip of the depth axis moves (0,0,0) to (S-1,0,0)");
    free(x); free(y); free(tmp); free(all);
    return check_summary();
}
