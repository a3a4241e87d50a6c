/* The training augmentation: the 48 symmetries of a cube (cf_cube_symmetry), and each on a
   slab from the box of the original that cf_cube_symmetry_source names (a sample across ranks). */
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
    {   /* every symmetry, every slab of S = 6 into 1, 2 and 3 (and a last odd one): the planes of the whole result */
        int S6 = 6, K, slab_r, axis, first, bad = 0, a, ext[3];
        size_t n6 = (size_t)C * S6 * S6 * S6;
        float *w = (float *)malloc(n6 * 4), *wt = (float *)malloc(n6 * 4), *t6 = (float *)malloc(n6 * 4), *box = (float *)malloc(n6 * 4), *slab = (float *)malloc(n6 * 4);
        for (i = 0; i < (int)n6; i++) w[i] = cf_rng_uniform(&r);
        for (code = 0; code < 48; code++) {
            memcpy(wt, w, n6 * 4);
            cf_cube_symmetry(wt, t6, C, S6, code);
            for (K = 1; K <= 3; K++) for (slab_r = 0; slab_r < K; slab_r++) {
                int d0 = slab_r * (S6 / K), np = S6 / K, c, p, q, z;
                if (cf_cube_symmetry_source(code, S6, d0, np, &axis, &first)) { bad++; continue; }
                for (a = 0; a < 3; a++) ext[a] = a == axis ? np : S6;
                for (c = 0; c < C; c++) for (p = 0; p < ext[0]; p++) for (q = 0; q < ext[1]; q++) for (z = 0; z < ext[2]; z++) {   /* the box, cut from the original */
                    int src[3]; src[0] = p; src[1] = q; src[2] = z; src[axis] += first;
                    box[(((size_t)c * ext[0] + p) * ext[1] + q) * ext[2] + z] = w[(((size_t)c * S6 + src[0]) * S6 + src[1]) * S6 + src[2]];
                }
                cf_cube_symmetry_slab(slab, box, C, S6, code, d0, np);
                for (c = 0; c < C; c++) bad += memcmp(slab + (size_t)c * np * S6 * S6, wt + ((size_t)c * S6 + d0) * S6 * S6, (size_t)np * S6 * S6 * 4) != 0;
            }
        }
        CHECK(!bad, "each of the 48 symmetries on every slab of 1, 2 and 3 equals the planes of the whole result (%d differ)", bad);
        CHECK(cf_cube_symmetry_source(6, 6, 0, 2, &axis, &first) == CF_OK && axis == 0 && first == 4, "a flipped depth: the first slab from the last planes (axis %d first %d)", axis, first);
        CHECK(cf_cube_symmetry_source(0, 6, 5, 2, &axis, &first) == CF_ERR && strstr(cf_failure_reason(), "[5, 7) of 6"), "planes past the cube refused: %s", cf_failure_reason());
        free(w); free(wt); free(t6); free(box); free(slab);
    }
    free(x); free(y); free(tmp); free(all);
    return check_summary();
}
