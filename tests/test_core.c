/* Core tests: sgemm, convolution and pooling against direct loops, finite-difference gradient
   checks of every layer type and of a whole network, the PyTorch reference dump, cfg errors,
   checkpoints, PRNG/CRC test vectors, npy and TFRecord round trips, the real CosmoFlow records.
   Built twice: with OpenBLAS (bin/test_core) and with the naive sgemm (bin/test_core_naive). */
#define CF_IMPLEMENTATION
#include "cosmoflow.h"
#include "check.h"
#include <sys/stat.h>
#include <sys/mman.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

static const char *tmpdir;
static char tmpbuf[512];
static const char *tmp(const char *name) { snprintf(tmpbuf, sizeof tmpbuf, "%s/%s", tmpdir, name); return tmpbuf; }

static void fill(float *p, size_t n, cf_rng *r, float lo, float hi) {
    size_t i;
    for (i = 0; i < n; i++) p[i] = lo + (hi - lo) * cf_rng_uniform(r);
}
static float *rnd(size_t n, cf_rng *r) { float *p = (float *)calloc(n + 1, sizeof(float)); fill(p, n, r, -1, 1); return p; }

/* ------------------------------------------------------------ direct-loop oracles */
/* the definition of cross-correlation with zero padding, one output element at a time */
static void conv_direct(float *y, const float *x, const float *w, const float *b, int B, cf_shape in,
                        cf_shape out, const cf_geom *g, int groups) {
    int n, oc, od, oh, ow, c, kd, kh, kw, Cg = in.c / groups, OCg = out.c / groups;
    for (n = 0; n < B; n++) for (oc = 0; oc < out.c; oc++)
    for (od = 0; od < out.d; od++) for (oh = 0; oh < out.h; oh++) for (ow = 0; ow < out.w; ow++) {
        double s = b ? b[oc] : 0;
        int gi = oc / OCg;
        for (c = 0; c < Cg; c++) for (kd = 0; kd < g->k[0]; kd++) for (kh = 0; kh < g->k[1]; kh++) for (kw = 0; kw < g->k[2]; kw++) {
            int id = od * g->s[0] - g->pb[0] + kd * g->dil[0], ih = oh * g->s[1] - g->pb[1] + kh * g->dil[1], iw = ow * g->s[2] - g->pb[2] + kw * g->dil[2];
            if (id < 0 || id >= in.d || ih < 0 || ih >= in.h || iw < 0 || iw >= in.w) continue;
            s += (double)w[(((size_t)oc * Cg + c) * g->k[0] + kd) * g->k[1] * g->k[2] + kh * g->k[2] + kw] *
                 x[((((size_t)n * in.c + gi * Cg + c) * in.d + id) * in.h + ih) * in.w + iw];
        }
        y[((((size_t)n * out.c + oc) * out.d + od) * out.h + oh) * out.w + ow] = (float)s;
    }
}
/* an independent 2-D oracle (NCHW, weights (OC, C, KH, KW)), to show 3-D at depth 1 is 2-D */
static void conv2d_direct(float *y, const float *x, const float *w, int B, int C, int H, int W, int OC,
                          int KH, int KW, int sh, int sw, int ph, int pw, int OH, int OW) {
    int n, oc, oh, ow, c, kh, kw;
    for (n = 0; n < B; n++) for (oc = 0; oc < OC; oc++) for (oh = 0; oh < OH; oh++) for (ow = 0; ow < OW; ow++) {
        double s = 0;
        for (c = 0; c < C; c++) for (kh = 0; kh < KH; kh++) for (kw = 0; kw < KW; kw++) {
            int ih = oh * sh - ph + kh, iw = ow * sw - pw + kw;
            if (ih >= 0 && ih < H && iw >= 0 && iw < W) s += (double)w[((oc * C + c) * KH + kh) * KW + kw] * x[((n * C + c) * H + ih) * W + iw];
        }
        y[((n * OC + oc) * OH + oh) * OW + ow] = (float)s;
    }
}
static void pool_direct(float *y, const float *x, int B, cf_shape in, cf_shape out, const cf_geom *g, int is_max) {
    int p, od, oh, ow, kd, kh, kw;
    for (p = 0; p < B * in.c; p++) for (od = 0; od < out.d; od++) for (oh = 0; oh < out.h; oh++) for (ow = 0; ow < out.w; ow++) {
        double best = -1e30, s = 0; int cnt = 0;
        for (kd = 0; kd < g->k[0]; kd++) for (kh = 0; kh < g->k[1]; kh++) for (kw = 0; kw < g->k[2]; kw++) {
            int id = od * g->s[0] - g->pb[0] + kd, ih = oh * g->s[1] - g->pb[1] + kh, iw = ow * g->s[2] - g->pb[2] + kw;
            if (id < 0 || id >= in.d || ih < 0 || ih >= in.h || iw < 0 || iw >= in.w) continue;
            double v = x[(((size_t)p * in.d + id) * in.h + ih) * in.w + iw];
            if (v > best) best = v;
            s += v; cnt++;
        }
        y[(((size_t)p * out.d + od) * out.h + oh) * out.w + ow] = (float)(is_max ? best : s / cnt);
    }
}

typedef struct { int B, C, D, H, W, OC, k[3], s[3], dil[3], pb[3], pa[3], groups; size_t ws; const char *what; } conv_case;
static const conv_case conv_cases[] = {
    {3, 2, 5, 6, 7, 3, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, 1, 0, "non-cubic 3x3x3 same, batch 3"},
    {2, 3, 6, 5, 7, 4, {2, 2, 2}, {2, 2, 2}, {1, 1, 1}, {0, 0, 0}, {1, 1, 1}, 1, 0, "k2 stride 2, pad 0 before 1 after"},
    {1, 2, 7, 7, 6, 2, {3, 3, 3}, {1, 1, 1}, {2, 2, 2}, {2, 2, 2}, {2, 2, 2}, 1, 0, "dilation 2"},
    {2, 4, 4, 5, 6, 6, {3, 1, 2}, {1, 2, 1}, {1, 1, 2}, {1, 0, 1}, {0, 0, 2}, 2, 0, "per-axis kernel/stride/dilation, groups 2"},
    {3, 2, 5, 6, 7, 3, {3, 3, 3}, {2, 1, 2}, {1, 1, 1}, {0, 1, 2}, {2, 1, 0}, 1, 54, "tiny workspace: one column per tile"},
};

static void setup_case(const conv_case *cc, cf_shape *in, cf_shape *out, cf_geom *g) {
    int a;
    in->c = cc->C; in->d = cc->D; in->h = cc->H; in->w = cc->W;
    for (a = 0; a < 3; a++) { g->k[a] = cc->k[a]; g->s[a] = cc->s[a]; g->dil[a] = cc->dil[a]; g->pb[a] = cc->pb[a]; g->pa[a] = cc->pa[a]; }
    out->c = cc->OC; out->d = cf_geom_out(g, 0, in->d); out->h = cf_geom_out(g, 1, in->h); out->w = cf_geom_out(g, 2, in->w);
}

static void test_sgemm(void) {
    cf_rng r = cf_rng_seed(1);
    int ta, tb;
    float A[2 * 3] = {1, 2, 3, 4, 5, 6}, Bm[3 * 2] = {7, 8, 9, 10, 11, 12}, C[4];
    cf_sgemm(0, 0, 2, 2, 3, 1.0f, A, 3, Bm, 2, 0.0f, C, 2);
    CHECK(C[0] == 58 && C[1] == 64 && C[2] == 139 && C[3] == 154, "sgemm 2x3 * 3x2 by hand: %g %g %g %g", C[0], C[1], C[2], C[3]);
    for (ta = 0; ta < 2; ta++) for (tb = 0; tb < 2; tb++) {
        int M = 17, N = 13, K = 29;
        float *a = rnd((size_t)M * K, &r), *b = rnd((size_t)K * N, &r), *c1 = rnd((size_t)M * N, &r), *c2 = (float *)malloc(sizeof(float) * M * N);
        memcpy(c2, c1, sizeof(float) * M * N);
        cf_sgemm(ta, tb, M, N, K, 0.7f, a, ta ? M : K, b, tb ? K : N, 0.3f, c1, N);
        cf_sgemm_naive(ta, tb, M, N, K, 0.7f, a, ta ? M : K, b, tb ? K : N, 0.3f, c2, N);
        CHECK(check_relerr(c1, c2, (size_t)M * N) < 1e-5, "sgemm trans %d%d against the naive oracle", ta, tb);
        free(a); free(b); free(c1); free(c2);
    }
}

static void test_conv_oracle(void) {
    cf_rng r = cf_rng_seed(2);
    size_t i;
    for (i = 0; i < sizeof conv_cases / sizeof *conv_cases; i++) {
        const conv_case *cc = &conv_cases[i];
        cf_shape in, out; cf_geom g;
        setup_case(cc, &in, &out, &g);
        size_t nx = cf_shape_size(in) * cc->B, ny = cf_shape_size(out) * cc->B, nw = (size_t)cc->OC * cc->C / cc->groups * g.k[0] * g.k[1] * g.k[2];
        size_t ws = cc->ws ? cc->ws : 1 << 16;
        float *x = rnd(nx, &r), *w = rnd(nw, &r), *b = rnd(cc->OC, &r), *y1 = rnd(ny, &r), *y2 = rnd(ny, &r), *col = rnd(ws, &r);
        cf_conv_forward(y1, x, w, b, cc->B, in, out, &g, cc->groups, col, ws);
        conv_direct(y2, x, w, b, cc->B, in, out, &g, cc->groups);
        CHECK(check_relerr(y1, y2, ny) < 1e-5, "conv forward vs direct loop: %s (err %g)", cc->what, check_relerr(y1, y2, ny));
        free(x); free(w); free(b); free(y1); free(y2); free(col);
    }
    {   /* 2-D is the case D = 1: compare with the separate 2-D oracle (stride 2, pad 1) */
        cf_shape in = {3, 1, 9, 8}, out; cf_geom g = {{1, 3, 3}, {1, 2, 2}, {1, 1, 1}, {0, 1, 1}, {0, 1, 1}};
        out.c = 5; out.d = 1; out.h = cf_geom_out(&g, 1, 9); out.w = cf_geom_out(&g, 2, 8);
        float *x = rnd(2 * 3 * 72, &r), *w = rnd(5 * 3 * 9, &r), *y1 = rnd(2 * 5 * out.h * out.w, &r), *y2 = rnd(2 * 5 * out.h * out.w, &r), *col = rnd(1 << 14, &r);
        cf_conv_forward(y1, x, w, NULL, 2, in, out, &g, 1, col, 1 << 14);
        conv2d_direct(y2, x, w, 2, 3, 9, 8, 5, 3, 3, 2, 2, 1, 1, out.h, out.w);
        CHECK(out.h == 5 && out.w == 4 && check_relerr(y1, y2, (size_t)2 * 5 * out.h * out.w) < 1e-5, "3-D conv at depth 1 equals the 2-D oracle");
        free(x); free(w); free(y1); free(y2); free(col);
    }
    {   /* pooling against its oracle: max and average, stride 2 with padding, non-cubic */
        cf_shape in = {2, 5, 6, 7}, out; cf_geom g = {{2, 3, 2}, {2, 2, 1}, {1, 1, 1}, {0, 1, 1}, {1, 1, 0}};
        int is_max;
        out = in; out.d = cf_geom_out(&g, 0, 5); out.h = cf_geom_out(&g, 1, 6); out.w = cf_geom_out(&g, 2, 7);
        for (is_max = 0; is_max < 2; is_max++) {
            size_t ny = 3 * cf_shape_size(out);
            float *x = rnd(3 * cf_shape_size(in), &r), *y1 = rnd(ny, &r), *y2 = rnd(ny, &r);
            cf_pool_forward(y1, x, 3, in, out, &g, is_max);
            pool_direct(y2, x, 3, in, out, &g, is_max);
            CHECK(check_relerr(y1, y2, ny) < 1e-6, "%s pool forward vs direct loop", is_max ? "max" : "average");
            free(x); free(y1); free(y2);
        }
    }
    {   /* max pooling with disjoint 2x2 (2-D) and 2x2x2 windows has its own loops: odd sizes leave inputs over */
        int kd;
        for (kd = 1; kd <= 2; kd++) {
            cf_shape in = {3, 5, 7, 9}, out; cf_geom g = {{1, 2, 2}, {1, 2, 2}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0}};
            g.k[0] = g.s[0] = kd;
            out = in; out.d = cf_geom_out(&g, 0, 5); out.h = cf_geom_out(&g, 1, 7); out.w = cf_geom_out(&g, 2, 9);
            size_t ny = 2 * cf_shape_size(out);
            float *x = rnd(2 * cf_shape_size(in), &r), *y1 = rnd(ny, &r), *y2 = rnd(ny, &r);
            cf_pool_forward(y1, x, 2, in, out, &g, 1);
            pool_direct(y2, x, 2, in, out, &g, 1);
            CHECK(out.h == 3 && out.w == 4 && !memcmp(y1, y2, ny * sizeof(float)), "max pool %dx2x2 (disjoint windows) forward equals the direct loop", kd);
            free(x); free(y1); free(y2);
        }
    }
}

/* Large convolutions go through per-thread tiles (forward, backward-weights, and for stride 1
   backward-data as a forward convolution with the flipped kernel); a workspace too small for
   them sends the same call down the one-big-sgemm path.  Both must agree, and the forward
   must equal the direct loop.  Shapes are big enough for at least 4 tiles per thread count
   up to 2; case 2 has dilation 2 and uneven padding (1 before, 3 after on depth). */
static void test_conv_tiles(void) {
    cf_rng r = cf_rng_seed(11);
    int ci;
    cf_fast_path_set("direct", 0);   /* these are the GEMM paths' tests; test_conv_direct has the direct kernels' */
    for (ci = 0; ci < 3; ci++) {
        int C = ci == 1 ? 3 : 2, OC = ci == 1 ? 5 : 4, B = 2;
        cf_shape in = {C, 44, 44, 44}, out;
        cf_geom g = {{3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}};
        if (ci == 1) { in.d = 24; in.h = 44; in.w = 52; g.dil[0] = g.dil[1] = g.dil[2] = 2; g.pb[0] = 1; g.pa[0] = 3; g.pb[1] = g.pa[1] = g.pb[2] = g.pa[2] = 2; }
        if (ci == 2) { g.s[0] = 2; }   /* stride 2 on depth: backward-data keeps col2im */
        out.c = OC; out.d = cf_geom_out(&g, 0, in.d); out.h = cf_geom_out(&g, 1, in.h); out.w = cf_geom_out(&g, 2, in.w);
        {
            int K = C * 27;
            size_t nx = B * cf_shape_size(in), ny = B * cf_shape_size(out), nw = (size_t)OC * K, big = (size_t)8 << 20, small = (size_t)K * 200;
            float *x = rnd(nx, &r), *w = rnd(nw, &r), *b = rnd(OC, &r), *dy = rnd(ny, &r), *col = rnd(big, &r), *dcol = rnd(big, &r);
            float *y1 = rnd(ny, &r), *y2 = rnd(ny, &r), *dw1 = rnd(nw, &r), *dw2 = (float *)malloc(nw * sizeof(float));
            float *dx1 = rnd(nx, &r), *dx2 = (float *)malloc(nx * sizeof(float)), *db1 = rnd(OC, &r), *db2 = (float *)malloc(OC * sizeof(float));
            size_t i;
            memcpy(dw2, dw1, nw * sizeof(float)); memcpy(dx2, dx1, nx * sizeof(float)); memcpy(db2, db1, OC * sizeof(float));
            cf_conv_forward_act(y1, x, w, b, B, in, out, &g, 1, col, big, CF_ACT_LEAKY, 0.3f);
            conv_direct(y2, x, w, b, B, in, out, &g, 1);
            for (i = 0; i < ny; i++) if (y2[i] < 0) y2[i] *= 0.3f;
            CHECK(check_relerr(y1, y2, ny) < 1e-5, "tiled conv forward + leaky vs direct loop, case %d (err %g)", ci, check_relerr(y1, y2, ny));
            cf_conv_forward_act(y2, x, w, b, B, in, out, &g, 1, col, small, CF_ACT_LEAKY, 0.3f);
            CHECK(check_relerr(y1, y2, ny) < 1e-5, "tiled conv forward vs one-big-sgemm path, case %d", ci);
            cf_conv_backward(dx1, dw1, db1, dy, x, w, B, in, out, &g, 1, col, dcol, big);
            cf_conv_backward(dx2, dw2, db2, dy, x, w, B, in, out, &g, 1, col, dcol, small);
            CHECK(check_relerr(dw1, dw2, nw) < 1e-5 && check_relerr(db1, db2, OC) < 1e-6,
                  "tiled conv backward-weights (added to dw) vs one-big-sgemm path, case %d (err %g)", ci, check_relerr(dw1, dw2, nw));
            CHECK(check_relerr(dx1, dx2, nx) < 1e-5, "tiled conv backward-data (added to dx) vs col2im path, case %d (err %g)", ci, check_relerr(dx1, dx2, nx));
            free(x); free(w); free(b); free(dy); free(col); free(dcol); free(y1); free(y2); free(dw1); free(dw2); free(dx1); free(dx2); free(db1); free(db2);
        }
    }
    cf_fast_path_set("direct", 1);
}

/* The direct kernels (stride 1 along the width; built with AVX2 + FMA): forward + bias +
   activation against the direct loop, and forward and backward-data against the im2col +
   GEMM paths (direct switched off; backward-weights is GEMM in both, and must agree too), on
   geometries that reach every branch: width tails (not a multiple of 16), an output-channel
   tail, stride and dilation on depth and height, dilation along the width, uneven padding, a
   2-D case, CosmoFlow's first layer shape (4 channels), many channels, a 2-wide kernel. */
static void test_conv_direct(void) {
    static const struct { int B, C, D, H, W, OC, k[3], s[3], dil[3], pb[3], pa[3]; const char *what; } cases[] = {
        {2, 4, 9, 10, 37, 8, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, "4 channels, 'same', width 37"},
        {1, 3, 7, 8, 40, 5, {3, 3, 3}, {2, 1, 1}, {1, 2, 2}, {0, 2, 2}, {2, 2, 2}, "5 filters, stride 2 on depth, dilation 2 on height and width"},
        {2, 6, 1, 12, 50, 12, {1, 3, 3}, {1, 2, 1}, {1, 1, 1}, {0, 1, 0}, {0, 1, 2}, "2-D, stride 2 on height, padding 0 before 2 after"},
        {1, 32, 6, 6, 33, 8, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, "32 channels, width 33"},
        {1, 80, 4, 4, 36, 12, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, "80 channels"},
        {1, 2, 5, 5, 30, 4, {2, 2, 2}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0}, {1, 1, 1}, "2-wide kernel"},
    };
    cf_rng r = cf_rng_seed(12);
    int ci, a;
    for (ci = 0; ci < (int)(sizeof cases / sizeof cases[0]); ci++) {
        int B = cases[ci].B, C = cases[ci].C, OC = cases[ci].OC, K;
        cf_shape in = {C, cases[ci].D, cases[ci].H, cases[ci].W}, out;
        cf_geom g;
        for (a = 0; a < 3; a++) { g.k[a] = cases[ci].k[a]; g.s[a] = cases[ci].s[a]; g.dil[a] = cases[ci].dil[a]; g.pb[a] = cases[ci].pb[a]; g.pa[a] = cases[ci].pa[a]; }
        out.c = OC; out.d = cf_geom_out(&g, 0, in.d); out.h = cf_geom_out(&g, 1, in.h); out.w = cf_geom_out(&g, 2, in.w);
        K = C * g.k[0] * g.k[1] * g.k[2];
        {
            size_t nx = B * cf_shape_size(in), ny = B * cf_shape_size(out), nw = (size_t)OC * K, big = (size_t)8 << 20, i;
            float *x = rnd(nx, &r), *w = rnd(nw, &r), *b = rnd(OC, &r), *dy = rnd(ny, &r), *col = rnd(big, &r), *dcol = rnd(big, &r);
            float *y1 = rnd(ny, &r), *y2 = rnd(ny, &r), *dw1 = rnd(nw, &r), *dw2 = (float *)malloc(nw * sizeof(float));
            float *dx1 = rnd(nx, &r), *dx2 = (float *)malloc(nx * sizeof(float)), *db1 = rnd(OC, &r), *db2 = (float *)malloc(OC * sizeof(float));
            memcpy(dw2, dw1, nw * sizeof(float)); memcpy(dx2, dx1, nx * sizeof(float)); memcpy(db2, db1, OC * sizeof(float));
            cf_conv_forward_act(y1, x, w, b, B, in, out, &g, 1, col, big, CF_ACT_LEAKY, 0.3f);
            conv_direct(y2, x, w, b, B, in, out, &g, 1);
            for (i = 0; i < ny; i++) if (y2[i] < 0) y2[i] *= 0.3f;
            CHECK(check_relerr(y1, y2, ny) < 1e-5, "direct conv forward + leaky vs direct loop: %s (err %g)", cases[ci].what, check_relerr(y1, y2, ny));
            cf_conv_backward(dx1, dw1, db1, dy, x, w, B, in, out, &g, 1, col, dcol, big);
            cf_fast_path_set("direct", 0);
            cf_conv_forward_act(y2, x, w, b, B, in, out, &g, 1, col, big, CF_ACT_LEAKY, 0.3f);
            cf_conv_backward(dx2, dw2, db2, dy, x, w, B, in, out, &g, 1, col, dcol, big);
            cf_fast_path_set("direct", 1);
            CHECK(check_relerr(y1, y2, ny) < 1e-5, "direct conv forward vs im2col + GEMM: %s", cases[ci].what);
            CHECK(check_relerr(dw1, dw2, nw) < 1e-5 && check_relerr(db1, db2, OC) < 1e-6,
                  "direct conv backward-weights (added to dw) vs im2col + GEMM: %s (err %g)", cases[ci].what, check_relerr(dw1, dw2, nw));
            CHECK(check_relerr(dx1, dx2, nx) < 1e-5, "direct conv backward-data (added to dx) vs GEMM: %s (err %g)", cases[ci].what, check_relerr(dx1, dx2, nx));
#ifdef CF__DIRECT
            {   /* the kernel's rows in its ring (cf__ring): whole planes where the workspace has room (3-D), the
                   least ring where it has only that (rows cf__ring_slots a plane): the same bits */
                size_t Wp = cf__direct_wp(out, &g),
                       least = 16 + cf__direct_packed(in, out, &g) + (size_t)cf__nthreads() * cf__ring_size(&g, Wp, cf__ring_slots(&g), C, C);
                float *ws = rnd(least, &r), *y3 = rnd(ny, &r);
                cf__conv_call call = cf__conv_make(B, in, out, &g, 1, col, big, 0);
                int planes = cf__ring_ns(in, &g, Wp, big, C, C) == in.h, slots = cf__ring_ns(in, &g, Wp, least - 16 - cf__direct_packed(in, out, &g), C, C) == cf__ring_slots(&g);
                call.x = x; call.w = w; call.b = b; call.act = CF_ACT_LEAKY; call.slope = 0.3f;
                call.y = y2; cf__direct_fwd(&call, 0);
                call.y = y3; call.ws = ws; call.ws_floats = least; cf__direct_fwd(&call, 0);
                CHECK(slots && planes == (g.k[0] > 1) && !memcmp(y2, y3, ny * sizeof(float)),
                      "direct conv forward with its rows in whole planes (%d) and in the least ring: the same bits: %s", planes, cases[ci].what);
                free(ws); free(y3);
            }
#endif
            free(x); free(w); free(b); free(dy); free(col); free(dcol); free(y1); free(y2); free(dw1); free(dw2); free(dx1); free(dx2); free(db1); free(db2);
        }
    }
}

/* Every registered fast path against its operation's reference (section 4 of the header):
   for each path of each table, every geometry where the dispatcher picks it (the test fails
   when a path is never reached; a second round with the BLAS answered as one without AVX-512
   kernels where the first reached none), then the dispatcher's result against the cf_ref_*
   function on the same data.  Convolutions within 1e-5 of each tensor's largest value (the sums run in
   another order), pooling bit for bit.  With every fast path off the dispatchers must give
   the references' bits. */
typedef struct { int B, C, D, H, W, OC, k[3], s[3], pb[3], pa[3], groups, dil; } path_case;
static const path_case path_cases[] = {
    {2, 3, 6, 7, 37, 5, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, 1, 1},     /* direct forward and backward-data */
    {2, 4, 5, 6, 7, 6, {1, 1, 1}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0}, 2, 1},      /* pointwise, groups 2 */
    {1, 40, 16, 16, 32, 3, {3, 3, 3}, {1, 1, 2}, {1, 1, 1}, {1, 1, 1}, 1, 1},  /* stride 2 on width, K = 1080: tiles forward */
    {2, 3, 4, 7, 9, 6, {3, 3, 3}, {1, 2, 1}, {1, 1, 1}, {1, 1, 0}, 3, 1},      /* groups 3, stride 2: the reference */
    {1, 2, 32, 16, 12, 40, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, 1, 1},  /* rows of 12, 40 filters: tiles backward-data */
    {1, 3, 8, 10, 37, 4, {3, 3, 3}, {1, 1, 1}, {0, 1, 1}, {2, 1, 1}, 1, 1},    /* tiles backward-weights, uneven padding */
    {1, 5, 4, 5, 16, 20, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, 1, 1},   /* rows of 16, 20 filters: the bf16 direct kernel's narrow blocks */
    {2, 3, 1, 5, 300, 6, {1, 3, 3}, {1, 1, 1}, {0, 1, 2}, {0, 1, 0}, 1, 1},  /* 2-D rows of 300, uneven padding: tiles end mid-row */
    {1, 96, 1, 4, 300, 8, {1, 3, 3}, {1, 1, 1}, {0, 1, 1}, {0, 1, 1}, 1, 1}, /* 96 channels: the bf16 direct kernel with R past 32 Ki uint32, its old limit; taps forward */
    {1, 64, 1, 6, 40, 8, {1, 3, 3}, {1, 1, 1}, {0, 2, 0}, {0, 0, 2}, 1, 1},  /* 64 channels, 240 positions, uneven padding: taps backward-weights */
    {2, 140, 1, 32, 33, 134, {1, 1, 1}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0}, 2, 1},  /* pointwise, 70 -> 67 channels a group, 1056 positions: the fp32 GEMM (AVX-512) */
    {1, 64, 1, 128, 130, 64, {1, 1, 1}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0}, 1, 1},  /* pointwise, 16640 positions: the fp32 GEMM's backward-weights in parts */
    {2, 8, 1, 20, 21, 64, {1, 3, 3}, {1, 2, 2}, {0, 1, 1}, {0, 1, 1}, 1, 1},     /* stride 2, 64 filters: the fp32 GEMM on made rows, forward */
    {1, 32, 1, 9, 10, 128, {1, 3, 3}, {1, 1, 1}, {0, 1, 0}, {0, 1, 2}, 1, 1},   /* 128 filters, K = 288, uneven padding: its backward-weights */
    {1, 64, 1, 7, 9, 16, {1, 3, 3}, {1, 1, 1}, {0, 1, 1}, {0, 1, 1}, 1, 1},     /* 64 channels in: its backward-data (the flipped kernel) */
    {2, 6, 5, 10, 12, 5, {1, 1, 1}, {2, 3, 2}, {0, 0, 0}, {0, 0, 0}, 1, 1},     /* a strided 1x1, 3-D, strides 2, 3, 2, an even width: planes,
                                                                                rows and a last column that no output reads (the strided
                                                                                pointwise backward-data) */
    {1, 4, 1, 9, 13, 3, {1, 1, 1}, {1, 2, 2}, {0, 0, 0}, {0, 0, 0}, 1, 1},      /* a strided 1x1, 2-D, odd sizes */
    {1, 16, 1, 12, 21, 32, {1, 3, 3}, {1, 2, 2}, {0, 1, 1}, {0, 1, 1}, 1, 1},  /* stride 2, 32 filters, K = 144: the GEMM on made rows (both rules) */
    {1, 33, 4, 5, 21, 37, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, 1, 1},   /* 33 channels (2 chunks of 32), 37 filters, rows of 21:
                                                                               the bf16 direct kernel on AMX tiles, forward and backward-data */
    {1, 20, 7, 9, 40, 18, {3, 3, 3}, {2, 1, 1}, {2, 2, 2}, {2, 1, 1}, 1, 2}, /* dilation 2, stride 2 on depth: the tiles' forward */
    {2, 24, 1, 6, 70, 16, {1, 3, 3}, {1, 1, 1}, {0, 2, 2}, {0, 2, 2}, 1, 2}, /* 2-D, dilation 2, rows of 70, 2 samples: the tiles' both */
    {1, 48, 3, 18, 40, 32, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, 1, 1}, /* 48 channels (32 + 16), 32 filters: the tiles'
                                                                                backward-weights on rows */
    {2, 16, 1, 20, 70, 48, {1, 3, 3}, {1, 2, 1}, {0, 1, 1}, {0, 1, 1}, 1, 1}, /* 2-D, stride 2 on height, 48 filters (32 + 16): the same */
    {1, 4, 6, 9, 40, 32, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, 1, 1},   /* 4 channels x 3 taps kd folded into the tiles' rows */
    {2, 6, 1, 17, 64, 16, {1, 3, 3}, {1, 1, 1}, {0, 1, 0}, {0, 1, 2}, 1, 1},  /* 6 channels, 2-D, uneven padding: the same */
    {2, 24, 4, 7, 12, 40, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, 1, 1},  /* rows of 12, 7 a plane, 40 filters: the tiles'
                                                                               direct kernel two rows a block, the last alone */
    {2, 96, 3, 5, 6, 208, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, 1, 1}, /* a packed kernel past 2^18 words, 2 samples of
                                                                               few rows: the tiles' kernel a sample at a time */
    {2, 32, 3, 19, 40, 20, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, 1, 1}, /* rows of 40 (2 blocks), 19 a plane, 20 filters, 2
                                                                               samples: the tiles' kernel on groups of 7, 7 and 5
                                                                               rows, 27 steps in slices of 9 */
};
static void setup_path_case(const path_case *pc, cf_shape *in, cf_shape *out, cf_geom *g) {
    int a;
    in->c = pc->C; in->d = pc->D; in->h = pc->H; in->w = pc->W;
    for (a = 0; a < 3; a++) { g->k[a] = pc->k[a]; g->s[a] = pc->s[a]; g->dil[a] = pc->dil; g->pb[a] = pc->pb[a]; g->pa[a] = pc->pa[a]; }
    out->c = pc->OC; out->d = cf_geom_out(g, 0, in->d); out->h = cf_geom_out(g, 1, in->h); out->w = cf_geom_out(g, 2, in->w);
}
/* one conv op of case pc through the dispatcher (fast = 1) or the reference; outputs into o */
static void run_conv_op(int op, const path_case *pc, const float *x, const float *w, const float *b, const float *dy, float *o, float *db,
                        float *ws, size_t wsf, int fast) {
    cf_shape in, out; cf_geom g;
    setup_path_case(pc, &in, &out, &g);
    if (op == CF_OP_FORWARD) {
        if (fast) cf_conv_forward_act(o, x, w, b, pc->B, in, out, &g, pc->groups, ws, wsf, CF_ACT_TANH, 0.0f);
        else { cf_ref_conv_forward(o, x, w, b, pc->B, in, out, &g, pc->groups, ws, wsf); cf_act_forward(o, (size_t)pc->B * cf_shape_size(out), CF_ACT_TANH, 0.0f); }
    } else if (op == CF_OP_BACKWARD_WEIGHTS) {
        if (fast) cf_conv_backward_weights(o, db, dy, x, pc->B, in, out, &g, pc->groups, ws, wsf);
        else cf_ref_conv_backward_weights(o, db, dy, x, pc->B, in, out, &g, pc->groups, ws, wsf);
    } else {
        if (fast) cf_conv_backward_data(o, dy, w, pc->B, in, out, &g, pc->groups, ws, wsf);
        else cf_ref_conv_backward_data(o, dy, w, pc->B, in, out, &g, pc->groups, ws, wsf);
    }
}
/* ---- bf16.  The conversion against its definition written another way: the two bf16
   neighbours of x by truncation, the nearer one by exact arithmetic in double, a tie to the
   even one, the top exponent read as 2^128 (where rounding overflows to infinity); zero and
   denormals to a signed zero; NaN to its upper half made quiet. */
static double bf16_value(uint32_t u) {   /* the upper 16 bits as a number, exponent 255 as 2^128 */
    int e = (int)(u >> 23 & 0xff);
    double m = (double)(u >> 16 & 0x7f) / 128.0, v = e ? ldexp(1.0 + m, e - 127) : ldexp(m, -126);
    return u >> 31 ? -v : v;
}
static uint16_t bf16_oracle(uint32_t u) {
    uint32_t lo = u & 0xffff0000u;
    double x, dlo, dhi;
    float f;
    if ((u & 0x7f800000u) == 0) return (uint16_t)(u >> 16 & 0x8000u);
    if ((u & 0x7f800000u) == 0x7f800000u) return (uint16_t)((u & 0x7fffffu) ? (u >> 16) | 0x40u : u >> 16);
    memcpy(&f, &u, 4);
    x = f; dlo = fabs(x - bf16_value(lo)); dhi = fabs(bf16_value(lo + 0x10000u) - x);
    return (uint16_t)((dlo < dhi || (dlo == dhi && !(lo & 0x10000u)) ? lo : lo + 0x10000u) >> 16);
}
/* n bit patterns: every exponent with random mantissas and signs, the ties and the edges */
static uint32_t bf16_pattern(uint64_t i, cf_rng *r) {
    uint32_t u = (uint32_t)cf_rng_u64(r);
    switch (i % 8) {
    case 0: return (u & 0xffff0000u) | 0x8000u;                  /* exactly halfway */
    case 1: return (u & 0xffff0000u) | 0x7fffu;                  /* just below halfway */
    case 2: return (u & 0x807fffffu) | 0x7f000000u;              /* near the largest numbers */
    case 3: return u & 0x807fffffu;                              /* denormals and zeros */
    case 4: return u | 0x7f800000u;                              /* infinities and NaNs */
    default: return u;
    }
}
#ifdef CF__BF16
/* 32 conversions by vcvtne2ps2bf16 (the second operand's 16 go first) */
CF__BF16_TARGET static void bf16_hw(const uint32_t *u, uint16_t *h) {
    __m512 lo, hi;
    __m512bh v;
    memcpy(&lo, u, 64); memcpy(&hi, u + 16, 64);
    v = _mm512_cvtne2ps_pbh(hi, lo);
    memcpy(h, &v, 64);
}
#endif
static void test_bf16_conversion(uint64_t n) {
    cf_rng r = cf_rng_seed(91);
    uint64_t i, bad = 0;
    for (i = 0; i < n; i++) {
        uint32_t u = n == ((uint64_t)1 << 32) ? (uint32_t)i : bf16_pattern(i, &r), back;
        float f, g;
        memcpy(&f, &u, 4);
        if (cf_bf16_from_f32(f) != bf16_oracle(u)) { if (!bad++) printf("  bf16(0x%08x): 0x%04x, the definition 0x%04x\n", u, cf_bf16_from_f32(f), bf16_oracle(u)); }
        g = cf_f32_from_bf16(cf_bf16_from_f32(f));
        memcpy(&back, &g, 4);
        if (back != (uint32_t)bf16_oracle(u) << 16) bad++;
    }
    CHECK(!bad, "cf_bf16_from_f32 and back against the definition, %llu inputs: %llu differ", (unsigned long long)n, (unsigned long long)bad);
    {   /* the pass the network runs (cf_bf16_round: the CPU's instruction where it has one) on the same inputs, 4099 at a time */
        static float buf[4099];
        static uint32_t src[4099];
        uint64_t pass_bad = 0;
        size_t k = 0, j;
        r = cf_rng_seed(91);
        for (i = 0; i < n; i++) {
            src[k] = n == ((uint64_t)1 << 32) ? (uint32_t)i : bf16_pattern(i, &r);
            memcpy(&buf[k], &src[k], 4);
            if (++k < 4099 && i + 1 < n) continue;
            cf_bf16_round(buf, k);
            for (j = 0; j < k; j++) {   /* bit for bit (NaNs too) */
                float f, want;
                memcpy(&f, &src[j], 4);
                want = cf_f32_from_bf16(cf_bf16_from_f32(f));
                pass_bad += memcmp(&buf[j], &want, 4) != 0;
            }
            k = 0;
        }
        CHECK(!pass_bad, "cf_bf16_round (%s) against cf_bf16_from_f32, %llu inputs: %llu differ", cf_bf16_kernels(), (unsigned long long)n,
              (unsigned long long)pass_bad);
    }
#ifdef CF__BF16
    if (cf__has_bf16()) {   /* and against the instruction itself, 32 at a time */
        uint64_t hw_bad = 0, hw_n = 0;
        r = cf_rng_seed(92);
        for (i = 0; i < n; i += 32) {
            uint32_t u[32]; uint16_t h[32]; int j;
            for (j = 0; j < 32; j++) u[j] = n == ((uint64_t)1 << 32) ? (uint32_t)(i + j) : bf16_pattern(i + j, &r);
            bf16_hw(u, h);
            for (j = 0; j < 32; j++) { float f; memcpy(&f, &u[j], 4); hw_bad += cf_bf16_from_f32(f) != h[j]; }
            hw_n += 32;
        }
        CHECK(!hw_bad, "cf_bf16_from_f32 against vcvtne2ps2bf16, %llu inputs: %llu differ", (unsigned long long)hw_n, (unsigned long long)hw_bad);
    } else printf("skipped: cf_bf16_from_f32 against vcvtne2ps2bf16 (the CPU lacks AVX512_BF16)\n");
#endif
}

/* Every bf16 path against the emulation: the same rounded operands through the fp32 paths.
   Per output element, |bf16 path - emulation| / sum |terms| (the same operation on |x|, |w|),
   worst over the tensor: both sum the same exact products in fp32, in other orders.  A
   forward stores its output rounded: each output a bf16 value, the rounding of the
   emulation's sum moved by at most that tolerance (a sum near a tie may round either way). */
static float round_bf16(float f) { return cf_f32_from_bf16(cf_bf16_from_f32(f)); }
static float *rounded(size_t n, cf_rng *r) { float *p = rnd(n, r); cf_bf16_round(p, n); return p; }
static float *absolute(const float *p, size_t n) { float *q = (float *)malloc((n + 1) * 4); size_t i; for (i = 0; i < n; i++) q[i] = fabsf(p[i]); return q; }
static double worst_rel_to(const float *a, const float *b, const float *scale, size_t n) {
    double w = 0;
    size_t i;
    for (i = 0; i < n; i++) { double e = fabs((double)a[i] - b[i]) / (scale[i] > 1e-30f ? scale[i] : 1e-30f); if (e > w || e != e) w = e != e ? 1e30 : e; }
    return w;
}
static void conv_op_p(int op, const path_case *pc, const float *x, const float *w, const float *dy, float *o, float *ws, size_t wsf, int bf16) {
    cf_shape in, out; cf_geom g;
    cf__conv_call c;
    setup_path_case(pc, &in, &out, &g);
    c = cf__conv_make(pc->B, in, out, &g, pc->groups, ws, wsf, bf16);
    if (op == CF_OP_FORWARD) { c.y = o; c.x = x; c.w = w; c.act = CF_ACT_LINEAR; cf__conv_forward_p(&c, 0); }
    else if (op == CF_OP_BACKWARD_WEIGHTS) { c.dw = o; c.dy = dy; c.x = x; cf__conv_backward_weights_p(&c, NULL, 0); }
    else { c.dx = o; c.dy = dy; c.w = w; cf__conv_backward_data_p(&c, 0, 0); }
}
/* The bf16 GEMM against cf_sgemm on the same rounded operands, per element relative to its
   sum |terms|: every transpose, beta 0 and 1, a K cut into parts (partial C added in order)
   and chunks, an odd K, N over one column block, M not a multiple of 8 and over one row block,
   a short sum's wide column blocks (K 64: 1536 columns, 1492 in the last); and the same bits on
   one thread as on all.  Its rounding form (a bf16 network's outputs)
   must store exactly the rounding of the same sums. */
static void test_bf16_gemm(void) {
#ifdef CF__BF16
    static const int shapes[][3] = {{13, 37, 16387}, {9, 600, 5}, {8, 32, 257}, {300, 70, 4097 * 2}, {16, 6100, 64}};
    cf_rng r = cf_rng_seed(61);
    int si, tA, tB, beta, cases = 0, one_thread_same = 0, rounded_same = 0, forms_same = 0;
    double worst = 0;
    if (!cf__has_bf16()) { printf("skipped: the bf16 GEMM (the CPU lacks AVX512_BF16)\n"); return; }
    for (si = 0; si < 5; si++) for (tA = 0; tA < 2; tA++) for (tB = 0; tB < 2; tB++) for (beta = 0; beta < 2; beta++) {
        int M = shapes[si][0], N = shapes[si][1], K = shapes[si][2], lda = tA ? M : K, ldb = tB ? K : N;
        float *A = rounded((size_t)M * K, &r), *B = rounded((size_t)K * N, &r), *C0 = rnd((size_t)M * N, &r);
        float *c1 = (float *)malloc((size_t)M * N * 4), *c2 = (float *)malloc((size_t)M * N * 4), *sc = absolute(C0, (size_t)M * N);
        float *aA = absolute(A, (size_t)M * K), *aB = absolute(B, (size_t)K * N);
        double e;
        memcpy(c1, C0, (size_t)M * N * 4); memcpy(c2, C0, (size_t)M * N * 4);
        cf__sgemm_bf16(tA, tB, M, N, K, A, lda, B, ldb, (float)beta, c1, N);
        cf_sgemm(tA, tB, M, N, K, 1.0f, A, lda, B, ldb, (float)beta, c2, N);
        cf_sgemm(tA, tB, M, N, K, 1.0f, aA, lda, aB, ldb, (float)beta, sc, N);
        e = worst_rel_to(c1, c2, sc, (size_t)M * N);
        if (e > worst) worst = e;
        cases += e <= 1e-6;
        {   /* stored rounded: the rounding of c1, bit for bit */
            size_t i, differ = 0;
            memcpy(c2, C0, (size_t)M * N * 4);
            cf__sgemm_bf16_rounded(tA, tB, M, N, K, A, lda, B, ldb, (float)beta, c2, N);
            for (i = 0; i < (size_t)M * N; i++) differ += c2[i] != round_bf16(c1[i]);
            rounded_same += !differ;
        }
        {   /* the dot step's two forms forced: the same bits, and those of auto where the CPU has no
               AMX tiles (where it has, auto's GEMM is the tiles', c1, held to the bound above) */
            float *cd = (float *)malloc((size_t)M * N * 4);
            memcpy(cd, C0, (size_t)M * N * 4);
            cf_bf16_form_set("dot");
            cf__sgemm_bf16(tA, tB, M, N, K, A, lda, B, ldb, (float)beta, cd, N);
            memcpy(c2, C0, (size_t)M * N * 4);
            cf_bf16_form_set("fma");
            cf__sgemm_bf16(tA, tB, M, N, K, A, lda, B, ldb, (float)beta, c2, N);
            cf_bf16_form_set("auto");
            forms_same += !memcmp(cd, c2, (size_t)M * N * 4);
            forms_same += cf__has_amx() || !memcmp(c1, cd, (size_t)M * N * 4);
            free(cd);
        }
#ifdef _OPENMP
        {   /* the same bits on one thread: the parts' partial sums are added in part order */
            int nt = omp_get_max_threads();
            memcpy(c2, C0, (size_t)M * N * 4);
            omp_set_num_threads(1);
            cf__sgemm_bf16(tA, tB, M, N, K, A, lda, B, ldb, (float)beta, c2, N);
            omp_set_num_threads(nt);
            one_thread_same += !memcmp(c1, c2, (size_t)M * N * 4);
        }
#else
        one_thread_same++;
#endif
        if (e > 1e-6) printf("  bf16 GEMM %dx%dx%d tA %d tB %d beta %d: %.2g of sum |terms|\n", M, N, K, tA, tB, beta, e);
        free(A); free(B); free(C0); free(c1); free(c2); free(sc); free(aA); free(aB);
    }
    {   /* A in 16 bits (dy in a backward-weights), read where it lies when its pairs are words: the bits of A in
           32; K even and odd (a lone last value), lda even and odd, A at an even and an odd value */
        int k, l, off, same16 = 0, M = 13, N = 70;
        for (k = 0; k < 2; k++) for (l = 0; l < 2; l++) for (off = 0; off < 2; off++) {
            int K = k ? 8257 : 8256, lda = K + l;
            float *A = rounded((size_t)M * lda, &r), *B = rounded((size_t)K * N, &r);
            float *c1 = (float *)malloc((size_t)M * N * 4), *c2 = (float *)malloc((size_t)M * N * 4);
            cf_bf16 *A16 = (cf_bf16 *)malloc(((size_t)M * lda + 2) * 2);
            size_t i;
            for (i = 0; i < (size_t)M * lda + 2; i++) A16[i] = 0x7fc0;   /* NaN past each row's K values: no pair reads them */
            for (i = 0; i < (size_t)M * lda; i++) if ((int)(i % lda) < K) A16[i + off] = cf_bf16_from_f32(A[i]);
            {   /* (each form of the dot step: the FMA form widens the pairs where they lie) */
                cf__gemm_call g32 = {0, 0, M, N, K, A, lda, B, N, 0.0f, c1, N, 0, NULL, 0, NULL};
                cf__gemm_call g16 = {0, 0, M, N, K, (const float *)(const void *)(A16 + off), lda, B, N, 0.0f, c2, N, 0, NULL,
                                     CF__GEMM_HALF_A, NULL};
                int f, same = 1;
                for (f = 0; f < 2 + cf__has_amx(); f++) {   /* (each under the same form) */
                    cf_bf16_form_set(f == 2 ? "amx" : f ? "fma" : "dot");
                    memset(c1, 0, (size_t)M * N * 4);
                    memset(c2, 0, (size_t)M * N * 4);
                    same &= !cf__sgemm_bf16_r(&g32, NULL) && !cf__sgemm_bf16_r(&g16, NULL) && !memcmp(c1, c2, (size_t)M * N * 4);
                }
                cf_bf16_form_set("auto");
                same16 += same;
            }
            free(A); free(B); free(c1); free(c2); free(A16);
        }
        CHECK(same16 == 8, "the bf16 GEMM on a 16-bit A (K 8256 and 8257, lda even and odd, A at an even and an odd value; the dot and "
              "FMA forms, and AMX's tiles where the CPU has them): the bits of A in 32 in %d of 8 cases", same16);
    }
    CHECK(cases == 40, "the bf16 GEMM against cf_sgemm on rounded operands: %d of 40 cases within 1e-6 of sum |terms| (worst %.2g)", cases, worst);
    CHECK(one_thread_same == 40, "the bf16 GEMM gives the same bits on one thread as on all: %d of 40 cases", one_thread_same);
    CHECK(rounded_same == 40, "the rounding bf16 GEMM stores the rounding of the same sums, bit for bit: %d of 40 cases", rounded_same);
    CHECK(forms_same == 80, "the bf16 GEMM in the dot and the FMA form, and auto where the CPU has no AMX tiles (%s chosen here): "
          "the same bits in %d of 2 x 40 cases", cf_bf16_kernels(), forms_same);
    CHECK((cf_bf16_form_set("amx") == CF_OK) == cf__has_amx(), "--bf16-form amx taken where the CPU has AMX tiles (%d), refused elsewhere",
          cf__has_amx());
    cf_bf16_form_set("auto");
#else
    printf("skipped: the bf16 GEMM (not compiled in)\n");
#endif
}
/* The fp32 GEMM of the pointwise convolutions (kind "gemm", AVX-512) against cf_sgemm, per
   element relative to its sum |terms|: every transpose, beta 0 and 1, a K cut into parts
   (partial C added in order) and chunks of equal length, N over one column block and not a
   multiple of 32, a short sum's wide column blocks (K 64: 1248 and 1376 columns), M not a multiple of the register block's 14 rows (the last block in each
   of the kernels of 4, 8 and 14 rows, full and not); and the same bits on one
   thread as on all (its promise: the sums' order follows from K alone). */
static void test_gemm_f32(void) {
#ifdef CF__AVX512
    static const int shapes[][3] = {{13, 37, 17}, {15, 600, 5}, {29, 33, 729}, {300, 70, 16385 * 2}, {128, 401, 385},
                                    {18, 70, 40}, {22, 45, 385}, {16, 12300, 64}};   /* (last blocks of 1, 2, 4, 6, 8, 13 rows) */
    cf_rng r = cf_rng_seed(67);
    int si, tA, tB, beta, cases = 0, one_thread_same = 0;
    double worst = 0;
    if (!cf__has_avx512()) { printf("skipped: the fp32 GEMM (the CPU lacks AVX-512)\n"); return; }
    for (si = 0; si < 8; si++) for (tA = 0; tA < 2; tA++) for (tB = 0; tB < 2; tB++) for (beta = 0; beta < 2; beta++) {
        int M = shapes[si][0], N = shapes[si][1], K = shapes[si][2], lda = tA ? M : K, ldb = tB ? K : N;
        float *A = rnd((size_t)M * K, &r), *B = rnd((size_t)K * N, &r), *C0 = rnd((size_t)M * N, &r);
        float *c1 = (float *)malloc((size_t)M * N * 4), *c2 = (float *)malloc((size_t)M * N * 4), *sc = absolute(C0, (size_t)M * N);
        float *aA = absolute(A, (size_t)M * K), *aB = absolute(B, (size_t)K * N);
        double e;
        memcpy(c1, C0, (size_t)M * N * 4); memcpy(c2, C0, (size_t)M * N * 4);
        cf__sgemm_avx512(tA, tB, M, N, K, A, lda, B, ldb, (float)beta, c1, N);
        cf_sgemm(tA, tB, M, N, K, 1.0f, A, lda, B, ldb, (float)beta, c2, N);
        cf_sgemm(tA, tB, M, N, K, 1.0f, aA, lda, aB, ldb, (float)beta, sc, N);
        e = worst_rel_to(c1, c2, sc, (size_t)M * N);
        if (e > worst) worst = e;
        cases += e <= 1e-6;
#ifdef _OPENMP
        {
            int nt = omp_get_max_threads();
            memcpy(c2, C0, (size_t)M * N * 4);
            omp_set_num_threads(1);
            cf__sgemm_avx512(tA, tB, M, N, K, A, lda, B, ldb, (float)beta, c2, N);
            omp_set_num_threads(nt);
            one_thread_same += !memcmp(c1, c2, (size_t)M * N * 4);
        }
#else
        one_thread_same++;
#endif
        if (e > 1e-6) printf("  fp32 GEMM %dx%dx%d tA %d tB %d beta %d: %.2g of sum |terms|\n", M, N, K, tA, tB, beta, e);
        free(A); free(B); free(C0); free(c1); free(c2); free(sc); free(aA); free(aB);
    }
    CHECK(cases == 64, "the fp32 GEMM against cf_sgemm: %d of 64 cases within 1e-6 of sum |terms| (worst %.2g)", cases, worst);
    CHECK(one_thread_same == 64, "the fp32 GEMM gives the same bits on one thread as on all: %d of 64 cases", one_thread_same);
#else
    printf("skipped: the fp32 GEMM (not compiled in)\n");
#endif
}
#ifdef CF__AVX512
/* n floats between two pages that no access may touch (a read past either end faults); *base
   and *len for guarded_free */
static float *guarded_floats(size_t n, char **base, size_t *len) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE), inside = (n * sizeof(float) + page - 1) / page * page;
    void *p = NULL;
    *len = inside + 2 * page;
    if (posix_memalign(&p, page, *len)) return NULL;
    *base = (char *)p;
    mprotect(*base, page, PROT_NONE);
    mprotect(*base + page + inside, page, PROT_NONE);
    return (float *)(void *)(*base + page + inside - n * sizeof(float));   /* (its end against the second) */
}
static void guarded_free(char *base, size_t len) {
    mprotect(base, len, PROT_READ | PROT_WRITE);
    free(base);
}
#endif
/* The GEMMs' made rows (cf__made_row: strides of 1 and 2 along the width by vectors) against section
   3's cf__im2col_row, bit for bit, zeros included: every row of random geometries (strides 1-3,
   padding 0-2 each side, dilation 1-2, odd widths) over runs of positions that start and end
   inside output rows; the input's end against a page no access may touch (a read past the
   last element faults). */
static void test_made_rows(void) {
#ifdef CF__AVX512
    cf_rng r = cf_rng_seed(71);
    int t, rows_same = 0, rows = 0, strided = 0, unit = 0;
    if (!cf__has_avx512()) { printf("skipped: the made rows (the CPU lacks AVX-512)\n"); return; }
    for (t = 0; t < 60; t++) {
        cf_geom g;
        cf_shape in, out;
        int a, k;
        size_t p0, n, i, nx, len;
        float *x, *m1, *m2;
        char *base = NULL;
        memset(&g, 0, sizeof g);
        in.c = 1 + (int)(cf_rng_uniform(&r) * 3); in.d = t % 2 ? 1 : 2 + t % 3;
        in.h = 3 + (int)(cf_rng_uniform(&r) * 5); in.w = 5 + (int)(cf_rng_uniform(&r) * 60);
        for (a = 0; a < 3; a++) {
            int len = a == 0 ? in.d : a == 1 ? in.h : in.w;
            g.k[a] = a == 0 && in.d == 1 ? 1 : 1 + (int)(cf_rng_uniform(&r) * 3);
            g.s[a] = a == 2 ? (t % 4 == 3 ? 1 + t % 3 : t % 4 == 1 ? 1 : 2) : 1 + (int)(cf_rng_uniform(&r) * 2);
            g.dil[a] = 1 + (int)(cf_rng_uniform(&r) * 2);
            g.pb[a] = a == 0 && in.d == 1 ? 0 : (int)(cf_rng_uniform(&r) * 3);
            g.pa[a] = a == 0 && in.d == 1 ? 0 : (int)(cf_rng_uniform(&r) * 3);
            if (cf_geom_out(&g, a, len) < 1) g.pa[a] += g.dil[a] * (g.k[a] - 1);
        }
        out.c = 1; out.d = cf_geom_out(&g, 0, in.d); out.h = cf_geom_out(&g, 1, in.h); out.w = cf_geom_out(&g, 2, in.w);
        nx = cf_shape_size(in);
        x = guarded_floats(nx, &base, &len);
        if (!x) { CHECK(x != NULL, "the made rows: a guarded input of %zu floats", nx); return; }
        for (i = 0; i < nx; i++) x[i] = 2 * cf_rng_uniform(&r) - 1;
        p0 = (size_t)(cf_rng_uniform(&r) * (out.w > 1 ? out.w - 1 : 1));
        n = cf__positions(out) - p0 - (size_t)(cf_rng_uniform(&r) * (out.w > 1 ? out.w - 1 : 1)) % (cf__positions(out) - p0);
        if (t % 2) n = cf__positions(out) - p0;   /* (half the runs to the last position: the rows that read x's end) */
        m1 = (float *)malloc(n * 4); m2 = (float *)malloc(n * 4);
        strided += g.s[2] == 2;
        unit += g.s[2] == 1;
        for (k = 0; k < in.c * g.k[0] * g.k[1] * g.k[2]; k++) {
            memset(m1, 0xff, n * 4); memset(m2, 0x7f, n * 4);   /* (different garbage: every element must be written) */
            cf__made_row(m1, x, k, in, out, &g, p0, n);
            cf__im2col_row(m2, x, k, in, out, &g, p0, n);
            rows++;
            rows_same += !memcmp(m1, m2, n * 4);
        }
        guarded_free(base, len); free(m1); free(m2);
    }
    CHECK(rows > 0 && rows_same == rows && strided >= 30 && unit >= 15,
          "the made rows equal cf__im2col_row's, bit for bit: %d of %d rows (of 60 geometries, %d with a stride of 2, "
          "%d of 1)", rows_same, rows, strided, unit);
#else
    printf("skipped: the made rows (no AVX-512 kernels in this build)\n");
#endif
}
/* The bf16 GEMM making op(B) from x as it packs it (cf__col_src) against the same GEMM on the
   im2col buffer: the same packed values in the same order, so the same bits.  Forward (op(B) =
   col, beta 0) and backward-weights (op(B) = col^T, beta 1), with dilation and padding as
   DeepCAM's ASPP, a stride of 2, an odd number of rows and of positions, several chunks and a
   sum in parts; then the paths built on it (cf__bf16_cols_fwd, _bww, two samples) against the
   references' im2col with the bf16 GEMM, whose workspace holds all positions: the same GEMMs. */
static void test_bf16_gemm_col(void) {
#ifdef CF__BF16
    static const int geo[][7] = {   /* C, H, W, k, stride, dilation, OC */
        {100, 20, 22, 3, 1, 2, 20}, {3, 96, 96, 3, 1, 1, 9}, {7, 13, 13, 3, 2, 1, 5}, {24, 12, 18, 3, 1, 6, 11}};
    cf_rng r = cf_rng_seed(67);
    int gi, same_gemm = 0, same_path = 0;
    if (!cf__has_bf16()) { printf("skipped: the bf16 GEMM making im2col's rows (the CPU lacks AVX512_BF16)\n"); return; }
    for (gi = 0; gi < 4; gi++) {
        int C = geo[gi][0], k = geo[gi][3], s = geo[gi][4], d = geo[gi][5], OC = geo[gi][6], a, K, P, B = 2, bi;
        cf_shape in = {0, 1, 0, 0}, out; cf_geom g;
        in.c = C; in.h = geo[gi][1]; in.w = geo[gi][2];
        for (a = 0; a < 3; a++) { g.k[a] = a ? k : 1; g.s[a] = a ? s : 1; g.dil[a] = a ? d : 1; g.pb[a] = g.pa[a] = a ? d * (k - 1) / 2 : 0; }
        out.c = OC; out.d = 1; out.h = cf_geom_out(&g, 1, in.h); out.w = cf_geom_out(&g, 2, in.w);
        K = C * k * k; P = out.h * out.w;
        {
            size_t nx = (size_t)B * cf_shape_size(in), ny = (size_t)B * cf_shape_size(out), nw = (size_t)OC * K, wsf = (size_t)K * P;
            float *x = rounded(nx, &r), *w = rounded(nw, &r), *b = rounded((size_t)OC, &r), *dy = rounded(ny, &r), *col = rnd(wsf, &r);
            float *o1 = rnd(ny > nw ? ny : nw, &r), *o2 = (float *)malloc((ny > nw ? ny : nw) * 4 + 4), *dw0 = rnd(nw, &r);
            cf__col_src src = {x, in, out, &g};
            cf__conv_call c = cf__conv_make(B, in, out, &g, 1, col, wsf, 1);
            int ok = 1;
            cf__im2col(col, x, C, in, out, &g, 0, (size_t)P);   /* sample 0's col */
            cf__sgemm_bf16(0, 0, OC, P, K, w, K, col, P, 0.0f, o1, P);
            {
                cf__gemm_call made = {0, 0, OC, P, K, w, K, NULL, 0, 0.0f, o2, P, 0, &src, 0, NULL};
                ok &= !cf__sgemm_bf16_r(&made, NULL);
            }
            ok &= !memcmp(o1, o2, (size_t)OC * P * 4);
            memcpy(o1, dw0, nw * 4); memcpy(o2, dw0, nw * 4);
            cf__sgemm_bf16(0, 1, OC, K, P, dy, P, col, P, 1.0f, o1, K);
            {
                cf__gemm_call made = {0, 1, OC, K, P, dy, P, NULL, 0, 1.0f, o2, K, 0, &src, 0, NULL};
                ok &= !cf__sgemm_bf16_r(&made, NULL);
            }
            ok &= !memcmp(o1, o2, nw * 4);
            same_gemm += ok;
            ok = 1;   /* the paths, two samples */
            c.x = x; c.w = w; c.b = b; c.act = CF_ACT_RELU; c.dy = dy;
            c.y = o1; cf__bf16_im2col_fwd(&c); c.y = o2; cf__bf16_cols_fwd(&c);
            ok &= !memcmp(o1, o2, ny * 4);
            for (bi = 0; bi < (int)ny; bi++) ok &= o2[bi] == round_bf16(o2[bi]);   /* stored rounded */
            memcpy(o1, dw0, nw * 4); memcpy(o2, dw0, nw * 4);
            c.dw = o1; cf__bf16_im2col_bww(&c); c.dw = o2; cf__bf16_cols_bww(&c);
            ok &= !memcmp(o1, o2, nw * 4);
            same_path += ok;
            free(x); free(w); free(b); free(dy); free(col); free(o1); free(o2); free(dw0);
        }
    }
    CHECK(same_gemm == 4, "the bf16 GEMM making im2col's rows as it packs them: the bits of the GEMM on im2col's buffer in %d of 4 geometries", same_gemm);
    CHECK(same_path == 4, "the bf16 im2col-free paths (forward, backward-weights): the bits of im2col + the bf16 GEMM in %d of 4 geometries", same_path);
#else
    printf("skipped: the bf16 GEMM making im2col's rows (not compiled in)\n");
#endif
}
/* The dot step's two forms (section 13): vdpbf16ps against the widened pairs' two FMAs (odd,
   then even), bitwise, on chains of 64 steps of random bf16 operands whose products and sums
   are all normal numbers (exponents within 2^+-20): 65536 lanes.  Then the denormal
   difference the header states: a product below 2^-126 is kept by the FMA form and flushed
   to zero by vdpbf16ps, and so is a denormal input. */
#ifdef CF__BF16
CF__BF16_TARGET static void forms_chain(float *acc, const uint32_t *x, const uint32_t *w, int n, int fma) {
    __m512 a = _mm512_loadu_ps(acc);
    int s;
    for (s = 0; s < n; s++) {
        cf__pairs_x v = cf__pairs_x_of(_mm512_loadu_si512(x + 16 * s), fma);
        uint32_t wf[2] = {w[s] & 0xffff0000u, w[s] << 16};
        a = cf__dot_step(a, &v, fma ? wf : w + s, fma);
    }
    _mm512_storeu_ps(acc, a);
}
static uint32_t normal_bf16(cf_rng *r) {   /* sign, exponent 2^-20 .. 2^20, 7 mantissa bits */
    uint32_t u = (uint32_t)cf_rng_u64(r);
    return (u & 0x8000u) | ((uint32_t)(127 - 20 + (int)((u >> 16) % 41)) << 7) | ((u >> 8) & 0x7fu);
}
#endif
static void test_bf16_forms(void) {
#ifdef CF__BF16
    enum { STEPS = 64, CHAINS = 4096 };
    cf_rng r = cf_rng_seed(71);
    uint32_t *x = (uint32_t *)malloc(sizeof(uint32_t) * 16 * STEPS), w[STEPS];
    float a0[16], a1[16];
    long differ = 0, lanes = 0;
    int ch, i;
    if (!cf__has_bf16()) { printf("skipped: the dot step's forms (the CPU lacks AVX512_BF16)\n"); free(x); return; }
    for (ch = 0; ch < CHAINS; ch++) {
        for (i = 0; i < 16 * STEPS; i++) x[i] = normal_bf16(&r) | normal_bf16(&r) << 16;
        for (i = 0; i < STEPS; i++) w[i] = normal_bf16(&r) | normal_bf16(&r) << 16;
        for (i = 0; i < 16; i++) { uint32_t u = normal_bf16(&r) << 16 | (uint32_t)(cf_rng_u64(&r) & 0xffffu); memcpy(&a0[i], &u, 4); }
        memcpy(a1, a0, sizeof a0);
        forms_chain(a0, x, w, STEPS, 0);
        forms_chain(a1, x, w, STEPS, 1);
        for (i = 0; i < 16; i++) differ += memcmp(&a0[i], &a1[i], 4) != 0;
        lanes += 16;
    }
    CHECK(!differ, "vdpbf16ps and the FMA form (odd pair, then even), %d steps on normal numbers: %ld of %ld lanes differ", STEPS, differ, lanes);
    {   /* odd halves 2^-70 x 2^-70 = 2^-140, a denormal product; then a denormal input, 2^-132, x 2^100 */
        uint32_t xs[16], ws[2] = {(uint32_t)(127 - 70) << 23, ((uint32_t)(127 + 100) << 23)};
        float z[16], d0, d1, f0, f1;
        for (i = 0; i < 16; i++) { xs[i] = (uint32_t)(127 - 70) << 23; z[i] = 0.0f; }
        forms_chain(z, xs, ws, 1, 0); d0 = z[0];
        for (i = 0; i < 16; i++) z[i] = 0.0f;
        forms_chain(z, xs, ws, 1, 1); f0 = z[0];
        for (i = 0; i < 16; i++) { xs[i] = 0x00020000u; z[i] = 0.0f; }   /* odd half: bf16 0x0002, 2^-132 */
        forms_chain(z, xs, ws + 1, 1, 0); d1 = z[0];
        for (i = 0; i < 16; i++) z[i] = 0.0f;
        forms_chain(z, xs, ws + 1, 1, 1); f1 = z[0];
        CHECK(d0 == 0.0f && f0 == ldexpf(1.0f, -140) && d1 == 0.0f && f1 == ldexpf(1.0f, -32),
              "denormals: a product of 2^-140 is %g by vdpbf16ps, %g by the FMA form; 2^-132 x 2^100: %g and %g", d0, f0, d1, f1);
    }
    free(x);
#else
    printf("skipped: the dot step's forms (not compiled in)\n");
#endif
}
static void test_bf16_paths(void) {
    static const char *ops[3] = {"forward", "backward-weights", "backward-data"};
    cf_rng r = cf_rng_seed(93);
    size_t wsf = (size_t)1 << 22;
    float *ws = rnd(wsf, &r);
    int op, ci, reached[3] = {0, 0, 0}, amx[3] = {0, 0, 0};
    double worst = 0;
#ifndef CF__BF16
    printf("skipped: the bf16 paths (not compiled in: they need an x86-64 build with AVX2 and FMA, -march=x86-64-v3 or newer, by GCC or Clang, as the direct kernels do)\n"); free(ws); return;
#else
    if (!cf__has_bf16()) { printf("skipped: the bf16 paths (the CPU lacks AVX512_BF16; bf16 runs the emulation)\n"); free(ws); return; }
#endif
    for (op = 0; op < 3; op++)
        for (ci = 0; ci < (int)(sizeof path_cases / sizeof path_cases[0]); ci++) {
            const path_case *pc = &path_cases[ci];
            cf_shape in, out; cf_geom g;
            setup_path_case(pc, &in, &out, &g);
            if (strcmp(cf__conv_path_p(op, pc->B, in, out, &g, pc->groups, wsf, 1), "bf16")) continue;
            reached[op]++;
#ifdef CF__AMX
            {
                cf__conv_call cc = cf__conv_make(pc->B, in, out, &g, pc->groups, NULL, wsf, 1);
                void (*run)(const cf__conv_call *) = cf__conv_pick(cf__conv_paths(op), &cc)->run;
                amx[op] += run == cf__bf16_amx_fwd_run || run == cf__bf16_fold_fwd_run || run == cf__bf16_amx_bwd_run ||
                           run == cf__bf16_rows_amx;
            }
#endif
            {
                size_t nx = pc->B * cf_shape_size(in), ny = pc->B * cf_shape_size(out), nw = (size_t)out.c * (in.c / pc->groups) * g.k[0] * g.k[1] * g.k[2];
                size_t no = op == CF_OP_FORWARD ? ny : op == CF_OP_BACKWARD_WEIGHTS ? nw : nx;
                float *x = rounded(nx, &r), *w = rounded(nw, &r), *dy = rounded(ny, &r);
                float *ax = absolute(x, nx), *aw = absolute(w, nw), *ady = absolute(dy, ny);
                float *o1 = (float *)calloc(no + 1, 4), *o2 = (float *)calloc(no + 1, 4), *sc = (float *)calloc(no + 1, 4);
                double e;
                conv_op_p(op, pc, x, w, dy, o1, ws, wsf, 1);
                {   /* the dot step's two forms forced: the same bits, and auto's where the CPU has no AMX
                       tiles (where it has, o1 is their GEMM's: held to the bounds below) */
                    float *od = (float *)calloc(no + 1, 4);
                    int differ;
                    cf_bf16_form_set("dot");
                    conv_op_p(op, pc, x, w, dy, od, ws, wsf, 1);
                    cf_bf16_form_set("fma");
                    memset(o2, 0, no * 4);
                    conv_op_p(op, pc, x, w, dy, o2, ws, wsf, 1);
                    cf_bf16_form_set("auto");
                    differ = (memcmp(od, o2, no * 4) != 0) + (!cf__has_amx() && memcmp(od, o1, no * 4) != 0);
                    memset(o2, 0, no * 4);
                    free(od);
                    CHECK(!differ, "bf16 path of conv %s (case %d): the dot and the FMA form give the same bits (%d differ)", ops[op], ci, differ);
                }
                conv_op_p(op, pc, x, w, dy, o2, ws, wsf, 0);
                conv_op_p(op, pc, ax, aw, ady, sc, ws, wsf, 0);
                if (op != CF_OP_BACKWARD_WEIGHTS) {   /* y, dx stored rounded: the rounding of a sum within 1e-6 of sum |terms| of the emulation's */
                    size_t i, unrounded = 0, far = 0;
                    for (i = 0; i < no; i++) {
                        float d = 1e-6f * sc[i];   /* rounding is monotone: the roundings of [o2 - d, o2 + d] */
                        unrounded += o1[i] != round_bf16(o1[i]);
                        far += !(o1[i] >= round_bf16(o2[i] - d) && o1[i] <= round_bf16(o2[i] + d));
                    }
                    CHECK(!unrounded && !far, "bf16 path of conv %s (case %d, %s): %zu outputs not bf16 values, %zu not the rounding of the emulation's sum",
                          ops[op], ci, cf__conv_path_p(op, pc->B, in, out, &g, pc->groups, wsf, 0), unrounded, far);
                } else {
                    e = worst_rel_to(o1, o2, sc, no);
                    if (e > worst) worst = e;
                    CHECK(e <= 1e-6, "bf16 path of conv %s (case %d, %s) against the emulation: %.2g of sum |terms| (bound 1e-6)", ops[op], ci,
                          cf__conv_path_p(op, pc->B, in, out, &g, pc->groups, wsf, 0), e);
                }
                free(x); free(w); free(dy); free(ax); free(aw); free(ady); free(o1); free(o2); free(sc);
            }
        }
    for (op = 0; op < 3; op++) CHECK(reached[op] >= 2, "conv %s: the bf16 paths reached by %d test geometries", ops[op], reached[op]);
    if (cf__has_amx())
        CHECK(amx[0] >= 3 && amx[1] >= 4 && amx[2] >= 2, "the bf16 kernels on AMX tiles reached by %d forward, %d backward-weights and %d backward-data test geometries",
              amx[0], amx[1], amx[2]);
    else printf("skipped: the bf16 kernels on AMX tiles (no AMX tiles here)\n");
    printf("  bf16 paths against the emulation: worst %.2g of sum |terms|\n", worst);
    free(ws);
}

/* The bf16 backward-weights on rows of positions (its own test: the path cases' rows are
   narrower than 64 or 2-D): on a 3-D case with 10 filters (a block of 8 and one repeating a
   filter) and rows of 70 (a band's rows padded to 96), against the emulation within 1e-6 of
   sum |terms|; x and dy stored in 16 bits give the bits of fp32 storage; an input not yet
   rounded (x_raw) gives the bits of its rounding; both forms of the dot step the same bits. */
static void test_bf16_rows(void) {
#ifdef CF__BF16
    const path_case pc = {2, 3, 4, 5, 70, 10, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, 1, 1};
    cf_rng r = cf_rng_seed(71);
    size_t wsf = (size_t)1 << 22, nx, ny, nw, i;
    cf_shape in, out; cf_geom g;
    cf__conv_call c;
    float *ws, *x, *xraw, *dy, *dw[5], *sc, *ax, *ady;
    cf_bf16 *x16, *dy16;
    int k, same_half, same_raw, same_form, reached;
    double e;
    if (!cf__has_bf16()) { printf("skipped: the bf16 rows backward-weights (the CPU lacks AVX512_BF16)\n"); return; }
    setup_path_case(&pc, &in, &out, &g);
    nx = pc.B * cf_shape_size(in); ny = pc.B * cf_shape_size(out); nw = (size_t)out.c * in.c * cf__kvol(&g);
    ws = rnd(wsf, &r); xraw = rnd(nx, &r); dy = rounded(ny, &r);
    x = (float *)malloc(nx * 4); memcpy(x, xraw, nx * 4); cf_bf16_round(x, nx);
    x16 = (cf_bf16 *)malloc(nx * 2); dy16 = (cf_bf16 *)malloc(ny * 2);
    for (i = 0; i < nx; i++) x16[i] = cf_bf16_from_f32(x[i]);
    for (i = 0; i < ny; i++) dy16[i] = cf_bf16_from_f32(dy[i]);
    for (k = 0; k < 5; k++) dw[k] = (float *)calloc(nw, 4);
    c = cf__conv_make(pc.B, in, out, &g, 1, ws, wsf, 1);
    c.x = x; c.dy = dy; c.dw = dw[0];
    cf_bf16_form_set("dot");   /* (where the GEMM runs on AMX tiles, the door gives this path no convolution) */
    reached = cf__conv_pick(cf__conv_bww_paths, &c) && cf__conv_pick(cf__conv_bww_paths, &c)->run == cf__bf16_rows_bww;
    CHECK(reached, "the bf16 rows backward-weights: the dispatcher gives it rows of 70, 3-D");
    cf__bf16_rows_bww(&c);
    c.x = (const float *)(const void *)x16; c.x_half = 1; c.dy = (const float *)(const void *)dy16; c.half = 1; c.dw = dw[1];
    cf__bf16_rows_bww(&c);
    c.x = xraw; c.x_half = 0; c.x_raw = 1; c.dy = dy; c.half = 0; c.dw = dw[2];
    cf__bf16_rows_bww(&c);
    c.x = x; c.x_raw = 0;
    for (k = 3; k < 5; k++) {   /* the two forms forced */
        cf_bf16_form_set(k == 3 ? "dot" : "fma");
        c.dw = dw[k];
        cf__bf16_rows_bww(&c);
    }
    cf_bf16_form_set("auto");
    same_half = !memcmp(dw[0], dw[1], nw * 4); same_raw = !memcmp(dw[0], dw[2], nw * 4);
    same_form = !memcmp(dw[0], dw[3], nw * 4) && !memcmp(dw[0], dw[4], nw * 4);
    CHECK(same_half && same_raw && same_form, "the bf16 rows backward-weights: 16-bit x and dy %s, an unrounded input %s, the dot and FMA forms %s",
          same_half ? "the same bits" : "DIFFER", same_raw ? "the same bits" : "DIFFERS", same_form ? "the same bits" : "DIFFER");
    /* against the emulation (the reference on the same rounded operands) */
    memset(dw[1], 0, nw * 4);
    sc = (float *)calloc(nw, 4); ax = absolute(x, nx); ady = absolute(dy, ny);
    cf_ref_conv_backward_weights(dw[1], NULL, dy, x, pc.B, in, out, &g, 1, ws, wsf);
    cf_ref_conv_backward_weights(sc, NULL, ady, ax, pc.B, in, out, &g, 1, ws, wsf);
    e = worst_rel_to(dw[0], dw[1], sc, nw);
    CHECK(e <= 1e-6, "the bf16 rows backward-weights against the emulation: %.2g of sum |terms| (bound 1e-6)", e);
    printf("  bf16 rows backward-weights against the emulation: %.2g of sum |terms|\n", e);
    free(ws); free(x); free(xraw); free(dy); free(x16); free(dy16); free(sc); free(ax); free(ady);
    for (k = 0; k < 5; k++) free(dw[k]);
#else
    printf("skipped: the bf16 rows backward-weights (no bf16 kernels in this build)\n");
#endif
}

/* The bf16 strided 1x1 backward-data (cf__bf16_strided_pw_bwd) on the path cases' two strided
   1x1 geometries (3-D strides 2, 3, 2 with planes, rows and a column no output reads; 2-D odd
   sizes): dx stored over NaN gives the bits of the sums added into zeros (every row it writes
   whole, every row nobody reads zeroed), a dy stored in 16 bits the bits of a dy in 32, each
   output a bf16 value; the dispatcher gives it both geometries.  (test_bf16_paths holds it to
   the emulation.) */
static void test_bf16_strided_pw(void) {
#ifdef CF__BF16
    static const path_case cases[] = {{2, 6, 5, 10, 12, 5, {1, 1, 1}, {2, 3, 2}, {0, 0, 0}, {0, 0, 0}, 1, 1},
                                      {1, 4, 1, 9, 13, 3, {1, 1, 1}, {1, 2, 2}, {0, 0, 0}, {0, 0, 0}, 1, 1}};
    cf_rng r = cf_rng_seed(72);
    size_t wsf = (size_t)1 << 22;
    float *ws = (float *)calloc(wsf, sizeof(float));
    int ci;
    if (!cf__has_bf16()) { printf("skipped: the bf16 strided 1x1 backward-data (the CPU lacks AVX512_BF16)\n"); free(ws); return; }
    for (ci = 0; ci < 2; ci++) {
        const path_case *pc = &cases[ci];
        cf_shape in, out; cf_geom g;
        cf__conv_call c;
        size_t nx, ny, nw, i, not_bf16 = 0;
        float *w, *dy, *dx[3];
        cf_bf16 *dy16;
        int k, reached;
        setup_path_case(pc, &in, &out, &g);
        nx = pc->B * cf_shape_size(in); ny = pc->B * cf_shape_size(out); nw = (size_t)out.c * in.c;
        w = rounded(nw, &r); dy = rounded(ny, &r);
        dy16 = (cf_bf16 *)malloc(ny * 2);
        for (i = 0; i < ny; i++) dy16[i] = cf_bf16_from_f32(dy[i]);
        for (k = 0; k < 3; k++) dx[k] = (float *)calloc(nx + 1, 4);
        for (i = 0; i < nx; i++) dx[1][i] = dx[2][i] = NAN;
        c = cf__conv_make(pc->B, in, out, &g, 1, ws, wsf, 1);
        c.w = w; c.dy = dy; c.dx = dx[0];
        reached = cf__conv_pick(cf__conv_bwd_paths, &c) && cf__conv_pick(cf__conv_bwd_paths, &c)->run == cf__bf16_strided_pw_bwd;
        cf__bf16_strided_pw_bwd(&c);
        c.dx = dx[1]; c.dx_store = 1;
        cf__bf16_strided_pw_bwd(&c);
        c.dx = dx[2]; c.dy = (const float *)(const void *)dy16; c.half = 1;
        cf__bf16_strided_pw_bwd(&c);
        for (i = 0; i < nx; i++) not_bf16 += dx[0][i] != cf_f32_from_bf16(cf_bf16_from_f32(dx[0][i]));
        CHECK(reached && !memcmp(dx[0], dx[1], nx * 4) && !memcmp(dx[0], dx[2], nx * 4) && !not_bf16,
              "the bf16 strided 1x1 backward-data, case %d: the dispatcher's (%s), dx stored over NaN %s, 16-bit dy %s, %zu outputs not bf16 values",
              ci, reached ? "yes" : "NO", !memcmp(dx[0], dx[1], nx * 4) ? "the same bits" : "DIFFERS",
              !memcmp(dx[0], dx[2], nx * 4) ? "the same bits" : "DIFFERS", not_bf16);
        free(w); free(dy); free(dy16);
        for (k = 0; k < 3; k++) free(dx[k]);
    }
    free(ws);
#else
    printf("skipped: the bf16 strided 1x1 backward-data (no bf16 kernels in this build)\n");
#endif
}

/* The rows backward-weights past a row's end (fp32, and bf16 where the CPU has it): the lanes
   of positions past the row are masked off, so an infinite input that only those lanes' taps
   read adds nothing, as in the reference (a row of 70 outputs, x[69] infinite: dw[0] = 69) */
static void test_rows_past_the_row(void) {
#ifdef CF__AVX512
    cf_shape in = {1, 1, 1, 71}, out = {1, 1, 1, 70};
    cf_geom g;
    size_t wsf = (size_t)1 << 20;
    float *ws = (float *)calloc(wsf, sizeof(float)), x[71], dy[70], dw[3], ref[3];
    int i, bf, reached = 0;
    memset(&g, 0, sizeof g);
    g.k[0] = g.k[1] = 1; g.k[2] = 3; g.s[0] = g.s[1] = g.s[2] = 1; g.dil[0] = g.dil[1] = g.dil[2] = 1; g.pb[2] = 1;
    for (i = 0; i < 71; i++) x[i] = i == 69 ? INFINITY : 1.0f;
    for (i = 0; i < 70; i++) dy[i] = 1.0f;
    memset(ref, 0, sizeof ref);
    cf_ref_conv_backward_weights(ref, NULL, dy, x, 1, in, out, &g, 1, ws, wsf);
    for (bf = 0; bf < 2; bf++) {
        cf__conv_call c = cf__conv_make(1, in, out, &g, 1, ws, wsf, bf);
        const cf__conv_path *p = cf__conv_pick(cf__conv_bww_paths, &c);
        if (!p || (p->run != cf__rows_f32_bww
#ifdef CF__BF16
                   && p->run != cf__bf16_rows_bww
#endif
                   )) continue;
        reached++;
        memset(dw, 0, sizeof dw);
        c.x = x; c.dy = dy; c.dw = dw;
        p->run(&c);
        CHECK(dw[0] == 69.0f && ref[0] == 69.0f && isinf(dw[1]) && isinf(dw[2]),
              "the rows backward-weights (%s) past the row's end: dw %g %g %g, the reference %g %g %g", bf ? "bf16" : "fp32",
              dw[0], dw[1], dw[2], ref[0], ref[1], ref[2]);
    }
    CHECK(reached >= (cf__has_avx512() ? 1 : 0), "the rows backward-weights reached on a row of 70 (%d)", reached);
    {   /* an output narrower than the geometry gives (a C caller's: 64 of 200 columns, 4 of 4 rows): the door
           gives the reference (the fast paths assume the geometry's output: the fp32 rows' copy once ran past
           its rows into the next thread's dw, the direct kernel's copy past its row buffer); the rows path,
           called itself, holds what the taps read, no more */
        cf_shape in2 = {2, 1, 6, 200}, out2 = {3, 1, 4, 64};
        cf_rng r = cf_rng_seed(5);
        float *x2 = rnd(2400, &r), *dy2 = rnd(768, &r), dw2[54], ref2[54];
        cf__conv_call c;
        g.k[1] = 3; g.pb[2] = 1; g.pa[2] = 1;
        c = cf__conv_make(1, in2, out2, &g, 1, ws, wsf, 0);
        memset(dw2, 0, sizeof dw2); memset(ref2, 0, sizeof ref2);
        cf_conv_backward_weights(dw2, NULL, dy2, x2, 1, in2, out2, &g, 1, ws, wsf);
        cf_ref_conv_backward_weights(ref2, NULL, dy2, x2, 1, in2, out2, &g, 1, ws, wsf);
        CHECK(!cf__conv_pick(cf__conv_bww_paths, &c) && !strcmp(cf_conv_path(CF_OP_BACKWARD_WEIGHTS, 1, in2, out2, &g, 1, wsf), "reference") &&
                  check_relerr(dw2, ref2, 54) < 1e-6,
              "an output narrower than the geometry: the reference (%s), %.2g from it", cf_conv_path(CF_OP_BACKWARD_WEIGHTS, 1, in2, out2, &g, 1, wsf),
              check_relerr(dw2, ref2, 54));
        memset(dw2, 0, sizeof dw2);
        c.x = x2; c.dy = dy2; c.dw = dw2;
        if (cf__has_avx512()) cf__rows_f32_bww(&c);
        CHECK(!cf__has_avx512() || check_relerr(dw2, ref2, 54) < 1e-6, "the rows backward-weights itself on that output: %.2g from the reference",
              check_relerr(dw2, ref2, 54));
        free(x2); free(dy2);
    }
    free(ws);
#else
    printf("skipped: the rows backward-weights (no AVX-512 kernels in this build)\n");
#endif
}

/* The transposed convolution's bf16 GEMM (it has no path table: its reference runs with the
   bf16 GEMM) against the same reference with cf_sgemm on the same rounded operands: forward,
   and backward's dx and dw, within 1e-6 of sum |terms|.  The geometries are path_cases' with
   groups 1, read the other way: the convolution's output is the transposed one's input. */
#ifdef CF__AVX512
/* the transposed convolution with gemm (bf16: a bf16 network's call) against the reference
   with cf_sgemm, on rounded operands */
static void check_deconv_gemm(const char *what, cf__gemm_fn gemm, int bf16) {
    static const int cases[] = {0, 2, 4, 5};
    cf_rng r = cf_rng_seed(97);
    size_t wsf = (size_t)1 << 22;
    float *ws = (float *)malloc(wsf * 4);
    double worst = 0;
    int ci, good = 0;
    for (ci = 0; ci < 4; ci++) {
        const path_case *pc = &path_cases[cases[ci]];
        cf_shape out, in; cf_geom g;   /* out: the transposed convolution's output (the path case's input) */
        size_t nx, ny, nw, n[3];
        float *x, *w, *dy, *ax, *aw, *ady, *o[3][3];
        int k, t;
        double e[3];
        setup_path_case(pc, &out, &in, &g);
        nx = pc->B * cf_shape_size(in); ny = pc->B * cf_shape_size(out); nw = (size_t)in.c * out.c * g.k[0] * g.k[1] * g.k[2];
        n[0] = ny; n[1] = nx; n[2] = nw;
        x = rounded(nx, &r); w = rounded(nw, &r); dy = rounded(ny, &r);
        ax = absolute(x, nx); aw = absolute(w, nw); ady = absolute(dy, ny);
        for (k = 0; k < 3; k++) for (t = 0; t < 3; t++) o[k][t] = (float *)calloc(n[t] + 1, 4);   /* [gemm, reference, |terms|][y, dx, dw] */
        {
            cf__conv_call dc = cf__deconv_make(pc->B, in, out, &g, ws, wsf, bf16, 0);
            dc.y = o[0][0]; dc.x = x; dc.w = w;
            cf__deconv_forward_with(&dc, gemm);
        }
        cf_deconv_forward(o[1][0], x, w, NULL, pc->B, in, out, &g, ws, wsf);
        cf_deconv_forward(o[2][0], ax, aw, NULL, pc->B, in, out, &g, ws, wsf);
        {
            cf__conv_call dc = cf__deconv_make(pc->B, in, out, &g, ws, wsf, bf16, 0);
            dc.dx = o[0][1]; dc.dw = o[0][2]; dc.dy = dy; dc.x = x; dc.w = w;
            cf__deconv_backward_with(&dc, NULL, gemm, gemm);
        }
        cf_deconv_backward(o[1][1], o[1][2], NULL, dy, x, w, pc->B, in, out, &g, ws, wsf);
        cf_deconv_backward(o[2][1], o[2][2], NULL, ady, ax, aw, pc->B, in, out, &g, ws, wsf);
        for (t = 0; t < 3; t++) { e[t] = worst_rel_to(o[0][t], o[1][t], o[2][t], n[t]); if (e[t] > worst) worst = e[t]; }
        good += e[0] <= 1e-6 && e[1] <= 1e-6 && e[2] <= 1e-6;
        if (e[0] > 1e-6 || e[1] > 1e-6 || e[2] > 1e-6) printf("  deconv case %d: y %.2g, dx %.2g, dw %.2g of sum |terms|\n", cases[ci], e[0], e[1], e[2]);
        for (k = 0; k < 3; k++) for (t = 0; t < 3; t++) free(o[k][t]);
        free(x); free(w); free(dy); free(ax); free(aw); free(ady);
    }
    CHECK(good == 4, "the transposed convolution with %s against cf_sgemm on rounded operands: %d of 4 geometries within 1e-6 of sum |terms| (worst %.2g)", what, good, worst);
    free(ws);
}
#endif
static void test_bf16_deconv(void) {
#ifdef CF__BF16
    if (!cf__has_bf16()) printf("skipped: the transposed convolution's bf16 GEMM (the CPU lacks AVX512_BF16)\n");
    else check_deconv_gemm("the bf16 GEMM", cf__sgemm_bf16, 1);
#else
    printf("skipped: the transposed convolution's bf16 GEMM (not compiled in)\n");
#endif
#ifdef CF__AVX512
    if (!cf__has_avx512()) { printf("skipped: the transposed convolution on kind gemm's GEMM (the CPU lacks AVX-512)\n"); return; }
    cf__blas_avx512_as = 0;   /* (the door's choice where the BLAS runs no AVX-512 kernels) */
    CHECK(!strcmp(cf__deconv_path(0), "gemm"), "the transposed convolution beside a BLAS without AVX-512 kernels: path %s", cf__deconv_path(0));
    cf__blas_avx512_as = -1;
    check_deconv_gemm("kind gemm's fp32 GEMM", cf__sgemm_avx512, 0);
#endif
}

/* sc (+)= the reference operation on |operands|: each output's sum of |terms| (before the
   forward's activation, whose slope is at most 1), the scale a reordered fp32 sum's error is
   measured against */
static void conv_sum_abs(int op, const path_case *pc, const float *x, const float *w, const float *b, const float *dy, float *sc,
                         float *ws, size_t wsf) {
    cf_shape in, out; cf_geom g;
    size_t nx, ny, nw;
    float *ax, *aw, *ab, *ady, *adb;
    setup_path_case(pc, &in, &out, &g);
    nx = pc->B * cf_shape_size(in); ny = pc->B * cf_shape_size(out); nw = (size_t)out.c * (in.c / pc->groups) * g.k[0] * g.k[1] * g.k[2];
    ax = absolute(x, nx); aw = absolute(w, nw); ab = absolute(b, out.c); ady = absolute(dy, ny); adb = (float *)calloc(out.c + 1, 4);
    if (op == CF_OP_FORWARD) cf_ref_conv_forward(sc, ax, aw, ab, pc->B, in, out, &g, pc->groups, ws, wsf);
    else if (op == CF_OP_BACKWARD_WEIGHTS) cf_ref_conv_backward_weights(sc, adb, ady, ax, pc->B, in, out, &g, pc->groups, ws, wsf);
    else cf_ref_conv_backward_data(sc, ady, aw, pc->B, in, out, &g, pc->groups, ws, wsf);
    free(ax); free(aw); free(ab); free(ady); free(adb);
}
/* a test case's geometry: g from its arrays, out from in */
static void case_geom(cf_geom *g, cf_shape in, cf_shape *out, const int k[3], const int st[3], const int dil[3], const int pb[3], const int pa[3]) {
    int a;
    for (a = 0; a < 3; a++) { g->k[a] = k[a]; g->s[a] = st[a]; g->dil[a] = dil ? dil[a] : 1; g->pb[a] = pb[a]; g->pa[a] = pa[a]; }
    *out = in;
    out->d = cf_geom_out(g, 0, in.d); out->h = cf_geom_out(g, 1, in.h); out->w = cf_geom_out(g, 2, in.w);
}
/* The depthwise kernels of stride 2 read and write rows by masked vectors: with x, y, dy and dx
   each ending against a page no access may touch (a read or write past an end faults), the
   same bits as on the heap (DeepCAM's geometry, odd and even widths) */
static void test_dws_guarded(cf_rng *r) {
#ifdef CF__AVX512
    static const int hw[2][2] = {{9, 13}, {12, 18}};
    int ci, same = 0;
    for (ci = 0; ci < 2; ci++) {
        static const int k[3] = {1, 3, 3}, st[3] = {1, 2, 2}, pb[3] = {0, 1, 1};
        cf_shape in = {3, 1, hw[ci][0], hw[ci][1]}, out;
        cf_geom g;
        size_t nx, ny, lx, ly, ldy, ldx, i;
        char *bx = NULL, *by = NULL, *bdy = NULL, *bdx = NULL;
        int dw_near = 1;
        float *x, *y, *dy, *dx, *w, *y1, *dx1, *dw = (float *)calloc(27, 4), *dw1 = (float *)calloc(27, 4);
        case_geom(&g, in, &out, k, st, NULL, pb, pb);
        nx = cf_shape_size(in); ny = cf_shape_size(out);
        x = guarded_floats(nx, &bx, &lx); y = guarded_floats(ny, &by, &ly);
        dy = guarded_floats(ny, &bdy, &ldy); dx = guarded_floats(nx, &bdx, &ldx);
        if (!x || !y || !dy || !dx) { CHECK(0, "guarded buffers for the stride-2 depthwise kernels"); return; }
        w = rnd(27, r); y1 = (float *)malloc(ny * 4); dx1 = (float *)malloc(nx * 4);
        fill(x, nx, r, -1, 1); fill(dy, ny, r, -1, 1); memset(dx, 0, nx * 4); memset(dx1, 0, nx * 4);
        cf_dwconv_forward(y, x, w, NULL, 1, in, out, &g);
        cf_dwconv_backward(dx, dw, NULL, dy, x, w, 1, in, out, &g);
        cf_ref_dwconv_forward(y1, x, w, NULL, 1, in, out, &g);
        cf_ref_dwconv_backward(dx1, dw1, NULL, dy, x, w, 1, in, out, &g);
        for (i = 0; i < 27; i++) dw_near = dw_near && fabsf(dw[i] - dw1[i]) <= 1e-5f * (1 + fabsf(dw1[i]));
        same += !strcmp(cf__dwconv_path(CF_OP_FORWARD, 1, in, out, &g), "direct") && !memcmp(y, y1, ny * 4) &&
                !memcmp(dx, dx1, nx * 4) && dw_near;
        guarded_free(bx, lx); guarded_free(by, ly); guarded_free(bdy, ldy); guarded_free(bdx, ldx);
        free(w); free(y1); free(dx1); free(dw); free(dw1);
    }
    CHECK(same == 2, "the stride-2 depthwise kernels with x, y, dy, dx against guard pages: the reference's bits in %d of 2 "
          "geometries", same);
#else
    (void)r;
    printf("skipped: the stride-2 depthwise kernels against guard pages (no AVX-512 kernels in this build)\n");
#endif
}
/* A bf16 network's depthwise backward with dy, x, dx or several of them stored in 16 bits
   (CF__HALF_OUT, CF__HALF_IN, CF__HALF_DIN), against the same call on fp32 storage of the same
   values, dx stored: the number of the seven forms that give the same bits of dx and dw.  0
   when the plan would not store them so (no path takes them, or not with the same sums). */
static int dwconv_bwd_halves_same(cf_shape in, cf_shape out, const cf_geom *g, int B, const float *x, const float *w,
                                  const float *dy, cf_rng *r) {
    size_t nx = B * cf_shape_size(in), ny = B * cf_shape_size(out), nw = (size_t)in.c * cf__kvol(g), i;
    size_t wsf = (size_t)1 << 20;
    float *xr = (float *)malloc(nx * 4), *dyr = (float *)malloc(ny * 4), *dx0 = rnd(nx, r), *dx1 = rnd(nx, r);
    float *dw0 = (float *)malloc(nw * 4), *dw1 = (float *)malloc(nw * 4), *ws = rnd(wsf, r);
    cf_bf16 *xh = (cf_bf16 *)malloc(nx * 2), *dyh = (cf_bf16 *)malloc(ny * 2), *dxh = (cf_bf16 *)malloc(nx * 2);
    cf__conv_call all = cf__conv_make(B, in, out, g, in.c, ws, wsf, 1);
    int h, same = 0;
    cf__conv_halves(&all, CF__HALF_ALL);
    if (!cf__same_sums(cf__dwconv_bwd_paths, &all)) h = 8;   /* (the plan keeps them in fp32) */
    else h = 0;
    memcpy(xr, x, nx * 4); cf_bf16_round(xr, nx);
    memcpy(dyr, dy, ny * 4); cf_bf16_round(dyr, ny);
    for (i = 0; i < nx; i++) xh[i] = cf_bf16_from_f32(xr[i]);
    for (i = 0; i < ny; i++) dyh[i] = cf_bf16_from_f32(dyr[i]);
    for (; h < 8; h++) {   /* h 0: the fp32 storage */
        cf__conv_call c = cf__conv_make(B, in, out, g, in.c, ws, wsf, 1);
        float *dw = h ? dw1 : dw0;
        memset(dw, 0, nw * 4);
        c.x = h & CF__HALF_IN ? (const float *)(const void *)xh : xr;
        c.dy = h & CF__HALF_OUT ? (const float *)(const void *)dyh : dyr;
        c.dx = h & CF__HALF_DIN ? (float *)(void *)dxh : h ? dx1 : dx0;
        c.dw = dw; c.w = w;
        cf__dwconv_backward_p(&c, NULL, h, 1);
        if (!h) continue;
        if (h & CF__HALF_DIN) for (i = 0; i < nx; i++) dx1[i] = cf_f32_from_bf16(dxh[i]);
        same += !memcmp(dx0, dx1, nx * 4) && !memcmp(dw0, dw1, nw * 4);
    }
    free(xr); free(dyr); free(dx0); free(dx1); free(dw0); free(dw1); free(ws); free(xh); free(dyh); free(dxh);
    return same;
}
/* depthwise backward: its path against cf_ref_dwconv_backward.  dx and db add the same
   products in the same order (bit for bit); each dw is a sum the path takes in vector order,
   within 1e-6 of its sum |terms| (the reference run on absolute values).  dx NULL skips dx.
   Then as a bf16 network calls it: dx stored rounded, as the reference's rounded after. */
static void test_dwconv_paths(cf_rng *r) {
    static const struct { int C, D, H, W, k[3], s[3], dil[3], pb[3], pa[3], with_dx; } dcs[] = {
        {3, 1, 9, 13, {1, 3, 3}, {1, 1, 1}, {1, 1, 1}, {0, 1, 1}, {0, 1, 1}, 1},   /* DeepCAM's 3x3 */
        {2, 1, 11, 12, {1, 3, 3}, {1, 1, 1}, {1, 2, 2}, {0, 2, 2}, {0, 2, 2}, 1},  /* dilation 2 */
        {2, 1, 10, 37, {1, 3, 3}, {1, 1, 1}, {1, 3, 1}, {0, 0, 2}, {0, 4, 0}, 1},  /* uneven padding, dilation 3 on the height */
        {2, 1, 2, 3, {1, 3, 3}, {1, 1, 1}, {1, 1, 1}, {0, 1, 1}, {0, 1, 1}, 1},    /* fewer rows than taps */
        {2, 1, 9, 13, {1, 3, 3}, {1, 2, 1}, {1, 1, 1}, {0, 1, 1}, {0, 1, 1}, 1},   /* stride 2 on the height: the rows path */
        {2, 5, 7, 9, {3, 3, 3}, {2, 2, 1}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, 0},    /* 3-D, strided depth and height, no dx */
        {2, 1, 4, 3, {1, 3, 5}, {1, 1, 1}, {1, 1, 1}, {0, 1, 2}, {0, 1, 2}, 1},    /* a row narrower than the kernel */
        {3, 1, 9, 13, {1, 3, 3}, {1, 2, 2}, {1, 1, 1}, {0, 1, 1}, {0, 1, 1}, 1},   /* stride 2, DeepCAM's strided 3x3 */
        {2, 1, 12, 18, {1, 3, 3}, {1, 2, 2}, {1, 1, 1}, {0, 1, 1}, {0, 1, 1}, 1},  /* stride 2, even sizes */
        {2, 1, 13, 17, {1, 3, 3}, {1, 2, 2}, {1, 2, 2}, {0, 2, 0}, {0, 1, 2}, 1},  /* stride 2, dilation 2, uneven padding */
        {2, 1, 12, 19, {1, 3, 3}, {1, 1, 2}, {1, 1, 1}, {0, 0, 1}, {0, 1, 0}, 1},  /* stride 2 on the width only */
        {3, 1, 10, 37, {1, 3, 3}, {1, 1, 1}, {1, 1, 1}, {0, 1, 1}, {0, 1, 1}, 1},  /* rows of 3 vectors, 4 + 4 + 2 rows */
        {2, 1, 7, 33, {1, 3, 3}, {1, 1, 1}, {1, 1, 2}, {0, 0, 2}, {0, 2, 2}, 1},   /* dilation 2 on the width, rows padded after */
        {2, 1, 9, 13, {1, 3, 3}, {1, 3, 3}, {1, 1, 1}, {0, 1, 1}, {0, 1, 1}, 1},   /* stride 3: the reference */
    };
    int ci, fast_reached = 0, ref_kept = 0, B = 2, halves_cases = 0, halves_same = 0;
    for (ci = 0; ci < (int)(sizeof dcs / sizeof dcs[0]); ci++) {
        cf_shape in = {dcs[ci].C, dcs[ci].D, dcs[ci].H, dcs[ci].W}, out;
        cf_geom g;
        case_geom(&g, in, &out, dcs[ci].k, dcs[ci].s, dcs[ci].dil, dcs[ci].pb, dcs[ci].pa);
        {
            size_t nx = B * cf_shape_size(in), ny = B * cf_shape_size(out), nw = (size_t)in.c * cf__kvol(&g);
            float *x = rnd(nx, r), *w = rnd(nw, r), *dy = rnd(ny, r), *dx1 = rnd(nx, r), *dx2 = (float *)malloc(nx * 4);
            float *dw1 = rnd(nw, r), *dw2 = (float *)malloc(nw * 4), *db1 = rnd(in.c, r), *db2 = (float *)malloc(in.c * 4);
            float *ax = absolute(x, nx), *ady = absolute(dy, ny), *adw = absolute(dw1, nw);
            const char *path = cf__dwconv_path(CF_OP_BACKWARD_WEIGHTS, B, in, out, &g);
            int dxs = dcs[ci].with_dx;
            memcpy(dx2, dx1, nx * 4); memcpy(dw2, dw1, nw * 4); memcpy(db2, db1, in.c * 4);
            cf_dwconv_backward(dxs ? dx1 : NULL, dw1, db1, dy, x, w, B, in, out, &g);
            cf_ref_dwconv_backward(dxs ? dx2 : NULL, dw2, db2, dy, x, w, B, in, out, &g);
            cf_ref_dwconv_backward(NULL, adw, NULL, ady, ax, w, B, in, out, &g);   /* sum |terms| of each dw */
            if (dcs[ci].s[2] <= 2) fast_reached |= strcmp(path, "reference") != 0;
            else ref_kept = !strcmp(path, "reference");
            CHECK(!memcmp(dx1, dx2, nx * 4) && !memcmp(db1, db2, in.c * 4) && worst_rel_to(dw1, dw2, adw, nw) <= 1e-6,
                  "depthwise backward case %d (path %s) vs cf_ref_dwconv_backward: dx, db bit for bit, dw %.2g of sum |terms|", ci, path,
                  worst_rel_to(dw1, dw2, adw, nw));
            if (dxs) {   /* bf16: dx rounded as stored */
                memcpy(dx1, dx2, nx * 4);
                cf__conv_call c = cf__conv_make(B, in, out, &g, in.c, NULL, 0, 1);
                c.dx = dx1; c.dw = dw1; c.dy = dy; c.x = x; c.w = w;
                cf__dwconv_backward_p(&c, NULL, 0, 0);
                cf_ref_dwconv_backward(dx2, dw2, NULL, dy, x, w, B, in, out, &g);
                cf_bf16_round(dx2, nx);
                CHECK(!memcmp(dx1, dx2, nx * 4), "depthwise backward case %d (path %s), bf16: dx rounded as stored, bit for bit", ci, path);
                if (dcs[ci].D == 1) {   /* and with kind bf16 off: no rounding as stored, a 16-bit dx made in a row first */
                    int same = dwconv_bwd_halves_same(in, out, &g, B, x, w, dy, r);
                    cf_fast_path_set("bf16", 0);
                    same += dwconv_bwd_halves_same(in, out, &g, B, x, w, dy, r);
                    cf_fast_path_set("bf16", 1);
                    halves_cases += same > 0; halves_same += same;
                }
            }
            free(x); free(w); free(dy); free(dx1); free(dx2); free(dw1); free(dw2); free(db1); free(db2); free(ax); free(ady); free(adw);
        }
    }
    CHECK(fast_reached && ref_kept, "the depthwise backward's fast path is reached, and a stride of 3 on the width keeps the reference");
    /* (the cases a 16-bit path takes: the 2-D ones with dx but the rows path's (stride 2 on the height alone) and stride 3) */
    CHECK(halves_cases == 11 && halves_same == 14 * halves_cases, "depthwise backward with dy, x, dx or several in 16 bits (a bf16 "
          "network's plan), kind bf16 on and off: as on fp32 storage, dx and dw bit for bit, in %d of %d forms (%d cases)",
          halves_same, 14 * halves_cases, halves_cases);
}
/* A bf16 network's depthwise forward (bias, relu or none) with x, y or both stored in 16 bits,
   against the same call on fp32 storage of the same rounded x: the number of the three forms
   that give the same bits */
static int dwconv_halves_same(cf_shape in, cf_shape out, const cf_geom *g, int B, const float *x, const float *w,
                              const float *b, int relu, cf_rng *r) {
    size_t nx = B * cf_shape_size(in), ny = B * cf_shape_size(out), i, wsf = (size_t)1 << 20;
    float *xr = (float *)malloc(nx * 4), *y0 = (float *)malloc(ny * 4), *y1 = (float *)malloc(ny * 4), *ws = rnd(wsf, r);
    cf_bf16 *xh = (cf_bf16 *)malloc(nx * 2), *yh = (cf_bf16 *)malloc(ny * 2);
    int h, same = 0;
    memcpy(xr, x, nx * 4);
    cf_bf16_round(xr, nx);
    for (i = 0; i < nx; i++) xh[i] = cf_bf16_from_f32(xr[i]);
    for (h = 0; h < 4; h++) {   /* h: CF__HALF_OUT (1) and CF__HALF_IN (2) bits; 0 the fp32 storage */
        cf__conv_call c = cf__conv_make(B, in, out, g, in.c, ws, wsf, 1);
        c.x = h & CF__HALF_IN ? (const float *)(const void *)xh : xr;
        c.y = h & CF__HALF_OUT ? (float *)(void *)yh : h ? y1 : y0;
        c.w = w; c.b = b; c.act = relu ? CF_ACT_RELU : CF_ACT_LINEAR; c.slope = 0.0f;
        cf__dwconv_forward_p(&c, h);
        if (!h) continue;
        if (h & CF__HALF_OUT) for (i = 0; i < ny; i++) y1[i] = cf_f32_from_bf16(yh[i]);
        same += !memcmp(y0, y1, ny * 4);
    }
    free(xr); free(y0); free(y1); free(ws); free(xh); free(yh);
    return same;
}
/* depthwise forward: its path against the reference, bit for bit (the same products added in
   the same order): without a bias, with one (the order of the sum shows), and as a bf16
   network calls it (a bias, an activation or none, the output rounded) */
static void test_dwconv_forward_paths(cf_rng *r) {
    static const struct { int C, D, H, W, k[3], s[3], dil[3], pb[3], pa[3]; } dcs[] = {
        {3, 1, 9, 13, {1, 3, 3}, {1, 1, 1}, {1, 1, 1}, {0, 1, 1}, {0, 1, 1}},   /* DeepCAM's 3x3 */
        {2, 1, 11, 12, {1, 3, 3}, {1, 1, 1}, {1, 2, 2}, {0, 2, 2}, {0, 2, 2}},  /* dilation 2 */
        {2, 1, 9, 40, {1, 3, 3}, {1, 2, 1}, {1, 3, 1}, {0, 0, 1}, {0, 2, 0}},   /* stride 2 on the height, uneven padding */
        {2, 1, 2, 3, {1, 3, 3}, {1, 1, 1}, {1, 1, 1}, {0, 1, 1}, {0, 1, 1}},    /* fewer rows than taps */
        {2, 5, 7, 9, {3, 3, 3}, {2, 2, 1}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}},    /* 3-D: the reference */
        {2, 1, 7, 9, {1, 3, 3}, {2, 1, 1}, {1, 1, 1}, {1, 1, 1}, {0, 1, 1}},    /* a depth of 1 read from its padding: the reference */
        {3, 1, 9, 13, {1, 3, 3}, {1, 2, 2}, {1, 1, 1}, {0, 1, 1}, {0, 1, 1}},   /* stride 2, DeepCAM's strided 3x3 */
        {2, 1, 12, 18, {1, 3, 3}, {1, 2, 2}, {1, 1, 1}, {0, 1, 1}, {0, 1, 1}},  /* stride 2, even sizes */
        {2, 1, 13, 17, {1, 3, 3}, {1, 2, 2}, {1, 2, 2}, {0, 2, 0}, {0, 1, 2}},  /* stride 2, dilation 2, uneven padding */
        {3, 1, 10, 37, {1, 3, 3}, {1, 1, 1}, {1, 1, 1}, {0, 1, 1}, {0, 1, 1}},  /* rows of 3 vectors, 4 + 4 + 2 rows */
        {2, 1, 7, 33, {1, 3, 3}, {1, 1, 1}, {1, 1, 2}, {0, 0, 2}, {0, 2, 2}},   /* dilation 2 on the width, rows padded after */
        {3, 1, 9, 13, {1, 3, 3}, {1, 3, 3}, {1, 1, 1}, {0, 1, 1}, {0, 1, 1}},   /* stride 3 on the width: the reference */
    };
    int ci, v, fast_reached = 0, ref_kept = 0, B = 2, halves_cases = 0;
    for (ci = 0; ci < (int)(sizeof dcs / sizeof dcs[0]); ci++)
        for (v = 0; v < 4; v++) {
            cf_shape in = {dcs[ci].C, dcs[ci].D, dcs[ci].H, dcs[ci].W}, out;
            cf_geom g;
            size_t nx, ny;
            float *x, *w, *b, *y1, *y2;
            const char *path;
            case_geom(&g, in, &out, dcs[ci].k, dcs[ci].s, dcs[ci].dil, dcs[ci].pb, dcs[ci].pa);
            nx = B * cf_shape_size(in); ny = B * cf_shape_size(out);
            x = rnd(nx, r); w = rnd((size_t)in.c * cf__kvol(&g), r); b = rnd(in.c, r); y1 = rnd(ny, r); y2 = rnd(ny, r);
            path = cf__dwconv_path(CF_OP_FORWARD, B, in, out, &g);
            if (v >= 2) {   /* as a bf16 network: relu (or none: rounded as stored), rounded */
                int act = v == 2 ? CF_ACT_RELU : CF_ACT_LINEAR;
                cf__conv_call c = cf__conv_make(B, in, out, &g, in.c, NULL, 0, 1);
                c.y = y1; c.x = x; c.w = w; c.b = b; c.act = act; c.slope = 0.0f;
                cf__dwconv_forward_p(&c, 0);
                cf__dwconv_forward_ref(y2, x, w, b, B, in, out, &g, act, 0.0f);   /* the reference, then rounded */
                cf_bf16_round(y2, ny);
            } else {
                cf_dwconv_forward(y1, x, w, v ? b : NULL, B, in, out, &g);
                cf_ref_dwconv_forward(y2, x, w, v ? b : NULL, B, in, out, &g);
            }
            if (dcs[ci].D == 1 && dcs[ci].s[2] <= 2 && dcs[ci].pb[0] == 0) fast_reached |= strcmp(path, "reference") != 0;
            else ref_kept = !strcmp(path, "reference");
            CHECK(!memcmp(y1, y2, ny * 4), "depthwise forward case %d%s (path %s) vs its reference: bit for bit", ci,
                  v == 3 ? ", bias and bf16" : v == 2 ? ", bias, relu and bf16" : v ? ", bias" : "", path);
            if (v >= 2 && dcs[ci].D == 1 && dcs[ci].s[2] <= 2 && dcs[ci].pb[0] == 0) halves_cases += dwconv_halves_same(in, out, &g, B, x, w, b, v == 2, r);
            free(x); free(w); free(b); free(y1); free(y2);
        }
    CHECK(halves_cases == 3 * 2 * 9, "depthwise forward with x, y or both in 16 bits (a bf16 network's plan): as on fp32 storage, bit for bit, "
          "in %d of 54 cases", halves_cases);
    CHECK(fast_reached && ref_kept, "the depthwise forward's fast path is reached, and 3-D or a stride of 3 on the width keeps the reference");
}
/* The direct kernel's long sums: a backward-data of 64 channels and 4x4x4 taps sums 4096 terms
   an element.  As one running sum its rounding error was 5x the reference GEMM's (rms 1.0e-6 of
   dx's rms against a double-precision sum here) and failed the 2018 CosmoFlow's gradients
   against PyTorch on an AVX2 CPU; summed in parts (CF__DIRECT_PART), 2.1e-7.  Held to 4e-7. */
/* The bias gradient's sums in vectors (kind direct, cf__bias_grad_v) against the plain loops
   (cf__bias_grad, cf__sum8_half): the same additions in the same order, so the same bits, dy
   in fp32 and in 16 bits; channels not a multiple of 4, positions not of 8, two samples. */
static void test_bias_grad_bits(void) {
    static const int shapes[][2] = {{30, 1003}, {3, 7}, {5, 64}, {1, 1}, {8, 4099}};
    cf_rng r = cf_rng_seed(61);
    int si, half, same = 0, n = 0;
#ifndef CF__DIRECT
    printf("skipped: the bias gradient in vectors (not compiled in: an x86-64-v3 build)\n");
    return;
#endif
    for (si = 0; si < 5; si++)
        for (half = 0; half < 2; half++) {
            int OC = shapes[si][0], B = 2, k;
            size_t P = (size_t)shapes[si][1], ny = (size_t)B * OC * P, i;
            float *dy = rnd(ny, &r), db[2][32];
            cf_bf16 *h = (cf_bf16 *)malloc(ny * sizeof *h);
            for (i = 0; i < ny; i++) h[i] = cf_bf16_from_f32(dy[i] * (float)(1 + i % 5));
            for (k = 0; k < 2; k++) {
                int j;
                for (j = 0; j < 32; j++) db[k][j] = 0.125f * j;
                cf_fast_path_set("direct", k);
                cf__bias_grad_p(db[k], half ? (const float *)(const void *)h : dy, half, B, OC, P);
            }
            cf_fast_path_set("direct", 1);
            same += !memcmp(db[0], db[1], sizeof db[0]);
            n++;
            free(dy); free(h);
        }
    CHECK(same == n, "the bias gradient in vectors gives the plain loops' bits (fp32 and 16-bit dy): %d of %d shapes",
          same, n);
}
static void test_direct_long_sums(void) {
    cf_rng r = cf_rng_seed(47);
    cf_shape in = {4, 20, 20, 20}, out = {64, 17, 17, 17};
    cf_geom g = {{4, 4, 4}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0}};
    size_t nx = cf_shape_size(in), ny = cf_shape_size(out), wsf = (size_t)1 << 22, i;
    float *w = rnd((size_t)out.c * in.c * 64, &r), *dy = rnd(ny, &r), *ws = rnd(wsf, &r), *dx = (float *)calloc(nx, 4);
    double *ex = (double *)calloc(nx, sizeof(double)), err = 0, mag = 0;
    int c, oc, k, d, h, x;
#ifdef CF__DIRECT
    {   /* the kernel itself, whichever path the door would pick on this CPU */
        cf__conv_call call = cf__conv_make(1, in, out, &g, 1, ws, wsf, 0);
        call.dx = dx; call.dy = dy; call.w = w;
        cf__direct_bwd_run(&call);
    }
#else
    printf("skipped: the direct kernel's long sums (this build has no direct kernel)\n");
    free(w); free(dy); free(ws); free(dx); free(ex);
    (void)g; (void)wsf;
    return;
#endif
    for (c = 0; c < in.c; c++)   /* dx[c][d + kd][h + kh][x + kw] += w[oc][c][kd][kh][kw] dy[oc][d][h][x], in double */
        for (oc = 0; oc < out.c; oc++)
            for (k = 0; k < 64; k++)
                for (d = 0; d < out.d; d++) for (h = 0; h < out.h; h++) for (x = 0; x < out.w; x++)
                    ex[(((size_t)c * in.d + d + k / 16) * in.h + h + k / 4 % 4) * in.w + x + k % 4] +=
                        (double)w[((size_t)oc * in.c + c) * 64 + k] * dy[(((size_t)oc * out.d + d) * out.h + h) * out.w + x];
    for (i = 0; i < nx; i++) { err += (dx[i] - ex[i]) * (dx[i] - ex[i]); mag += ex[i] * ex[i]; }
    err = sqrt(err / mag);
    CHECK(err <= 4e-7, "the direct kernel's backward-data of 4096 terms an element: rms error %.2g of dx's rms against double sums (at most 4e-7)", err);
    free(w); free(dy); free(ws); free(dx); free(ex);
}
static void test_fast_paths(void) {
    static const char *ops[3] = {"forward", "backward-weights", "backward-data"};
    cf_rng r = cf_rng_seed(31);
    size_t wsf = (size_t)1 << 22;
    float *ws = rnd(wsf, &r);
    int op, ci;
    for (op = 0; op < 3; op++) {
        const cf__conv_path *p;
        for (p = cf__conv_paths(op); p->kind >= 0; p++) {
            int reached = 0;
            if (p->kind == CF__K_BF16) continue;   /* a bf16 network's: test_bf16_paths */
#ifdef CF__AVX512
            if ((p->kind == CF__K_GEMM || p->run == cf__rows_f32_bww) && !cf__has_avx512()) {
                printf("skipped: fast path '%s' (entry %d of conv %s's table: the CPU lacks AVX-512)\n", cf__kind_names[p->kind],
                       (int)(p - cf__conv_paths(op)), ops[op]);
                continue;
            }
#endif
            for (ci = 0; ci < 2 * (int)(sizeof path_cases / sizeof path_cases[0]); ci++) {   /* (every case it takes) */
                const path_case *pc = &path_cases[ci % (sizeof path_cases / sizeof path_cases[0])];
                cf_shape in, out; cf_geom g;
                cf__conv_call c;
                if (ci == (int)(sizeof path_cases / sizeof path_cases[0]) && reached) break;
#ifdef CF__AVX512
                /* the second round: the BLAS answered as one that runs no AVX-512 kernels (where
                   kind gemm takes what the BLAS took, or the reference) */
                cf__blas_avx512_as = ci < (int)(sizeof path_cases / sizeof path_cases[0]) ? -1 : 0;
#else
                if (ci >= (int)(sizeof path_cases / sizeof path_cases[0])) break;
#endif
                setup_path_case(pc, &in, &out, &g);
                c = cf__conv_make(pc->B, in, out, &g, pc->groups, ws, wsf, 0);
                if (cf__conv_pick(cf__conv_paths(op), &c) != p) continue;   /* (the case the dispatcher gives this path) */
                reached = 1;
                {
                    size_t nx = pc->B * cf_shape_size(in), ny = pc->B * cf_shape_size(out), nw = (size_t)out.c * (in.c / pc->groups) * g.k[0] * g.k[1] * g.k[2];
                    size_t no = op == CF_OP_FORWARD ? ny : op == CF_OP_BACKWARD_WEIGHTS ? nw : nx;
                    float *x = rnd(nx, &r), *w = rnd(nw, &r), *b = rnd(out.c, &r), *dy = rnd(ny, &r), *o1 = rnd(no, &r), *o2 = (float *)malloc(no * 4);
                    float *db1 = rnd(out.c, &r), *db2 = (float *)malloc(out.c * 4);
                    memcpy(o2, o1, no * 4); memcpy(db2, db1, out.c * 4);   /* backward ops accumulate into what is there */
                    float *sc = op == CF_OP_FORWARD ? (float *)calloc(no + 1, 4) : absolute(o1, no);
                    double e;
                    conv_sum_abs(op, pc, x, w, b, dy, sc, ws, wsf);
                    run_conv_op(op, pc, x, w, b, dy, o1, db1, ws, wsf, 1);
                    run_conv_op(op, pc, x, w, b, dy, o2, db2, ws, wsf, 0);
                    e = worst_rel_to(o1, o2, sc, no);
                    CHECK(e <= 1e-6 && (op != CF_OP_BACKWARD_WEIGHTS || check_relerr(db1, db2, out.c) < 1e-6),
                          "fast path '%s' of conv %s vs cf_ref_conv (case %d): %.2g of sum |terms| (bound 1e-6)", cf__kind_names[p->kind], ops[op], ci, e);
                    if (op == CF_OP_BACKWARD_DATA) {   /* dx stored (its first writer in a network): NaN there before, never read */
                        float *o3 = (float *)malloc(no * 4), *o4 = (float *)calloc(no, 4);
                        cf__conv_call st = cf__conv_make(pc->B, in, out, &g, pc->groups, ws, wsf, 0);
                        size_t k;
                        for (k = 0; k < no; k++) o3[k] = NAN;
                        st.dx = o3; st.dy = dy; st.w = w;
                        cf__conv_backward_data_p(&st, 0, 1);
                        cf_ref_conv_backward_data(o4, dy, w, pc->B, in, out, &g, pc->groups, ws, wsf);
                        e = worst_rel_to(o3, o4, sc, no);
                        CHECK(e <= 1e-6, "fast path '%s' of conv backward-data, dx stored, vs cf_ref_conv (case %d): %.2g of sum |terms|",
                              cf__kind_names[p->kind], ci, e);
                        free(o3); free(o4);
                    }
                    free(sc);
                    cf_fast_path_set("all", 0);   /* every path off: the dispatcher gives the reference's bits */
                    memcpy(o1, o2, no * 4);
                    run_conv_op(op, pc, x, w, b, dy, o1, db1, ws, wsf, 1);
                    run_conv_op(op, pc, x, w, b, dy, o2, db1, ws, wsf, 0);
                    CHECK(!strcmp(cf_conv_path(op, pc->B, in, out, &g, pc->groups, wsf), "reference") && !memcmp(o1, o2, no * 4),
                          "fast paths off: conv %s is the reference, bit for bit (case %d)", ops[op], ci);
                    cf_fast_path_set("all", 1);
                    free(x); free(w); free(b); free(dy); free(o1); free(o2); free(db1); free(db2);
                }
            }
#ifdef CF__AVX512
            cf__blas_avx512_as = -1;
#endif
            CHECK(reached, "conv %s: some test geometry reaches the fast path '%s' (entry %d of its table)", ops[op],
                  cf__kind_names[p->kind], (int)(p - cf__conv_paths(op)));
        }
    }
    {   /* pooling: each path (and the reference itself) bit for bit against cf_ref_pool_* */
        static const struct { int C, D, H, W, k[3], s[3], pb[3], pa[3], is_max; } pcs[] = {
            {3, 6, 8, 10, {2, 2, 2}, {2, 2, 2}, {0, 0, 0}, {0, 0, 0}, 1},   /* pairs, inside */
            {2, 7, 9, 11, {3, 3, 2}, {2, 2, 1}, {0, 0, 0}, {0, 0, 0}, 0},   /* inside (average) */
            {2, 5, 6, 7, {2, 3, 2}, {2, 2, 1}, {0, 1, 1}, {1, 1, 0}, 1},    /* padding: the reference */
            {2, 1, 7, 9, {1, 2, 2}, {1, 2, 2}, {0, 0, 0}, {0, 1, 1}, 1},    /* 2x2 with padding after: not pairs */
        };
        int reach[2][CF__NKINDS] = {{0}}, k, ok = 1, B = 2;
        const cf__pool_path *p;
        for (ci = 0; ci < (int)(sizeof pcs / sizeof pcs[0]); ci++) {
            cf_shape in = {pcs[ci].C, pcs[ci].D, pcs[ci].H, pcs[ci].W}, out;
            cf_geom g;
            case_geom(&g, in, &out, pcs[ci].k, pcs[ci].s, NULL, pcs[ci].pb, pcs[ci].pa);
            {
                size_t nx = B * cf_shape_size(in), ny = B * cf_shape_size(out);
                float *x = rnd(nx, &r), *y1 = rnd(ny, &r), *y2 = rnd(ny, &r), *dy = rnd(ny, &r), *dx1 = rnd(nx, &r), *dx2 = (float *)malloc(nx * 4);
                const char *pf = cf_pool_path(CF_OP_FORWARD, in, out, &g, pcs[ci].is_max), *pb = cf_pool_path(CF_OP_BACKWARD_DATA, in, out, &g, pcs[ci].is_max);
                memcpy(dx2, dx1, nx * 4);
                cf_pool_forward(y1, x, B, in, out, &g, pcs[ci].is_max);
                cf_ref_pool_forward(y2, x, B, in, out, &g, pcs[ci].is_max);
                cf_pool_backward(dx1, dy, x, y2, B, in, out, &g, pcs[ci].is_max);
                cf_ref_pool_backward(dx2, dy, x, y2, B, in, out, &g, pcs[ci].is_max);
                CHECK(!memcmp(y1, y2, ny * 4) && !memcmp(dx1, dx2, nx * 4), "pooling case %d (paths %s, %s) equals cf_ref_pool_* bit for bit", ci, pf, pb);
                for (k = 0; k < CF__NKINDS; k++) { reach[0][k] |= !strcmp(pf, cf__kind_names[k]); reach[1][k] |= !strcmp(pb, cf__kind_names[k]); }
                free(x); free(y1); free(y2); free(dy); free(dx1); free(dx2);
            }
        }
        for (p = cf__pool_fwd_paths; p->kind >= 0; p++) ok &= reach[0][p->kind];
        for (p = cf__pool_bwd_paths; p->kind >= 0; p++) ok &= reach[1][p->kind];
        CHECK(ok, "every pooling fast path is reached by a test case");
    }
    test_dwconv_paths(&r);
    test_dws_guarded(&r);
    test_dwconv_forward_paths(&r);
    free(ws);
}

/* ------------------------------------------------------------ every layer type against its definition
   One network with every layer type in a chain, every output kept (keep_acts): each layer's
   output against a direct loop of its definition in double, from its input as our net holds
   it.  (The convolution and pooling loops are the oracles above.) */
static const char *oracle_cfg =
    "[net]\ninput=3x4x5x6\nloss=mse\n"
    "[conv]\nfilters=4\nsize=3\npad=1\nactivation=leaky\nslope=0.3\n"              /* 0 */
    "[conv]\nfilters=4\nsize=3\ndilation=2\npad=2\ngroups=4\nbias=0\nactivation=leaky\nslope=0.2\n"  /* 1 depthwise */
    "[batchnorm]\nactivation=relu\n"                                               /* 2 */
    "[affine]\nactivation=tanh\n"                                                  /* 3 */
    "[deconv]\nfilters=2\nsize=2\nstride=2\nactivation=relu\n"                     /* 4 */
    "[maxpool]\nsize=2\n"                                                          /* 5 */
    "[avgpool]\nsize=3\nstride=1\npad=1\n"                                         /* 6 */
    "[activation]\nactivation=leaky\nslope=0.2\n"                                  /* 7 */
    "[scale]\nfactor=1.5\n"                                                        /* 8 */
    "[route]\nlayers=-1,0\n"                                                       /* 9 */
    "[conv]\nfilters=6\nsize=1\n"                                                  /* 10 */
    "[add]\nlayers=-1,-2\n"                                                        /* 11 */
    "[gap]\n[broadcast]\nlike=11\n"                                                /* 12, 13 */
    "[dropout]\nrate=0.3\n[flatten]\n[dense]\noutputs=3\nactivation=relu\n";      /* 14, 15, 16 */
static double act_d(double v, int act, double slope) {
    return act == CF_ACT_RELU ? (v > 0 ? v : 0) : act == CF_ACT_LEAKY ? (v > 0 ? v : slope * v) : act == CF_ACT_TANH ? tanh(v) : v;
}
/* transposed convolution by its definition: y[o, i s - pb + k dil] += x[c, i] w[c, o, k] */
static void deconv_direct(double *y, const float *x, const float *w, const float *b, int B, cf_shape in, cf_shape out, const cf_geom *g) {
    int n, c, o, id, ih, iw, kd, kh, kw;
    size_t q;
    for (q = 0; q < (size_t)B * cf_shape_size(out); q++) y[q] = b ? b[q / (cf_shape_size(out) / out.c) % out.c] : 0;
    for (n = 0; n < B; n++) for (c = 0; c < in.c; c++) for (o = 0; o < out.c; o++)
    for (id = 0; id < in.d; id++) for (ih = 0; ih < in.h; ih++) for (iw = 0; iw < in.w; iw++)
    for (kd = 0; kd < g->k[0]; kd++) for (kh = 0; kh < g->k[1]; kh++) for (kw = 0; kw < g->k[2]; kw++) {
        int od = id * g->s[0] - g->pb[0] + kd * g->dil[0], oh = ih * g->s[1] - g->pb[1] + kh * g->dil[1], ow = iw * g->s[2] - g->pb[2] + kw * g->dil[2];
        if (od < 0 || od >= out.d || oh < 0 || oh >= out.h || ow < 0 || ow >= out.w) continue;
        y[((((size_t)n * out.c + o) * out.d + od) * out.h + oh) * out.w + ow] +=
            (double)x[((((size_t)n * in.c + c) * in.d + id) * in.h + ih) * in.w + iw] * w[(((size_t)c * out.c + o) * g->k[0] + kd) * g->k[1] * g->k[2] + kh * g->k[2] + kw];
    }
}
/* layer i's output by its definition, in double, into ref (B * its output size) */
static void layer_oracle(cf_net *net, int i, double *ref, int B) {
    cf_layer *l = &net->layers[i];
    const float *x = l->src[0] < 0 ? net->priv->x : cf_net_output(net, l->src[0]), *W = net->params + l->w_off, *b = l->b_n ? net->params + l->b_off : NULL;
    size_t n = (size_t)B * cf_shape_size(l->out), P = cf_shape_size(l->in) / l->in.c, k, p;
    float *tmp = (float *)malloc(n * sizeof(float) + 4);
    int bi, c, j;
    switch (l->type) {
    case CF_L_CONV: conv_direct(tmp, x, W, b, B, l->in, l->out, &l->g, l->groups); for (k = 0; k < n; k++) ref[k] = act_d(tmp[k], l->act, l->slope); break;
    case CF_L_DECONV: deconv_direct(ref, x, W, b, B, l->in, l->out, &l->g); for (k = 0; k < n; k++) ref[k] = act_d(ref[k], l->act, l->slope); break;
    case CF_L_MAXPOOL: case CF_L_AVGPOOL: pool_direct(tmp, x, B, l->in, l->out, &l->g, l->type == CF_L_MAXPOOL); for (k = 0; k < n; k++) ref[k] = tmp[k]; break;
    case CF_L_BATCHNORM:   /* batch statistics: mean and biased variance over (B, P) per channel */
        for (c = 0; c < l->in.c; c++) {
            double m = 0, v = 0;
            for (bi = 0; bi < B; bi++) for (p = 0; p < P; p++) m += x[((size_t)bi * l->in.c + c) * P + p];
            m /= (double)B * P;
            for (bi = 0; bi < B; bi++) for (p = 0; p < P; p++) { double d = x[((size_t)bi * l->in.c + c) * P + p] - m; v += d * d; }
            v /= (double)B * P;
            for (bi = 0; bi < B; bi++) for (p = 0; p < P; p++) {
                size_t q = ((size_t)bi * l->in.c + c) * P + p;
                ref[q] = act_d(W[c] * (x[q] - m) / sqrt(v + l->eps) + b[c], l->act, l->slope);
            }
        }
        break;
    case CF_L_AFFINE: for (k = 0; k < n; k++) { c = (int)(k / P % l->in.c); ref[k] = act_d((double)W[c] * x[k] + b[c], l->act, l->slope); } break;
    case CF_L_ACT: for (k = 0; k < n; k++) ref[k] = act_d(x[k], l->act, l->slope); break;
    case CF_L_SCALE: for (k = 0; k < n; k++) ref[k] = (double)l->factor * x[k]; break;
    case CF_L_FLATTEN: for (k = 0; k < n; k++) ref[k] = x[k]; break;
    case CF_L_ROUTE: case CF_L_ADD:
        for (bi = 0, k = 0; bi < B; bi++) {
            size_t q0 = k;
            for (j = 0; j < l->n_src; j++) {
                cf_shape s = l->src[j] < 0 ? net->input : net->layers[l->src[j]].out;
                const float *xs = l->src[j] < 0 ? net->priv->x : cf_net_output(net, l->src[j]);
                size_t m = cf_shape_size(s), e;
                for (e = 0; e < m; e++) {
                    if (l->type == CF_L_ROUTE) ref[k++] = xs[(size_t)bi * m + e];
                    else ref[q0 + e] = (j ? ref[q0 + e] : 0) + xs[(size_t)bi * m + e];
                }
                if (l->type == CF_L_ADD) k = q0 + m;
            }
        }
        break;
    case CF_L_GAP: for (k = 0; k < n; k++) { double s = 0; for (p = 0; p < P; p++) s += x[k * P + p]; ref[k] = s / P; } break;
    case CF_L_BROADCAST: { size_t Q = cf_shape_size(l->out) / l->out.c; for (k = 0; k < n; k++) ref[k] = x[k / Q]; break; }
    case CF_L_DROPOUT: {   /* keep x / (1 - rate) where the hash of (seed, index) is >= rate */
        uint64_t seed = cf__dropout_seed(net, i);
        for (k = 0; k < n; k++) {
            double u = (double)(cf_hash64(seed ^ (0x9e3779b97f4a7c15ULL * (k + 1))) >> 40) / 16777216.0;
            ref[k] = u >= l->rate ? x[k] / (1.0 - l->rate) : 0.0;
        }
        break;
    }
    case CF_L_DENSE:
        for (bi = 0; bi < B; bi++) for (j = 0; j < l->out.c; j++) {
            double s = b ? b[j] : 0;
            size_t IN = cf_shape_size(l->in);
            for (k = 0; k < IN; k++) s += (double)W[(size_t)j * IN + k] * x[(size_t)bi * IN + k];
            ref[(size_t)bi * l->out.c + j] = act_d(s, l->act, l->slope);
        }
        break;
    default: for (k = 0; k < n; k++) ref[k] = NAN;
    }
    free(tmp);
}
static void test_layer_oracles(void) {
    cf_net net;
    cf_rng r = cf_rng_seed(41);
    int B = 2, i, seen[CF_L_NTYPES] = {0}, all = 1;
    float *x;
    if (cf_net_parse(&net, oracle_cfg, "oracle.cfg", NULL)) { CHECK(0, "oracle cfg: %s", cf_failure_reason()); return; }
    cf_net_init(&net, 3);
    fill(net.params, net.n_params, &r, -0.8f, 0.8f);   /* every weight, gamma, beta and bias non-trivial */
    x = rnd(B * cf_shape_size(net.input), &r);
    cf_net_keep_outputs(&net, 1); cf_net_set_mode(&net, CF_MODE_TRAIN); net.priv->step = 7;
    cf_net_forward(&net, x, B);
    for (i = 0; i < net.n_layers; i++) {
        cf_layer *l = &net.layers[i];
        size_t n = (size_t)B * cf_shape_size(l->out), k;
        double *ref = (double *)malloc(n * sizeof(double)), worst = 0, scale = 1e-30;
        const float *y = cf_net_output(&net, i);
        layer_oracle(&net, i, ref, B);
        for (k = 0; k < n; k++) if (fabs(ref[k]) > scale) scale = fabs(ref[k]);
        for (k = 0; k < n; k++) { double e = fabs(y[k] - ref[k]) / scale; if (!(e <= worst)) worst = e != e ? 1e30 : e; }
        CHECK(worst < 1e-5, "layer %d [%s%s] against its direct-loop definition: relative error %.2g", i, cf_layer_type_name(l->type),
              l->depthwise ? ", depthwise" : "", worst);
        seen[l->type] = 1;
        free(ref);
    }
    for (i = 0; i < CF_L_NTYPES; i++) all &= seen[i];
    CHECK(all, "the oracle network holds every layer type");
    free(x);
    cf_net_free(&net);
}

/* ------------------------------------------------------------ finite differences */
typedef double (*loss_fn)(void *ctx);
/* worst |numeric - analytic| over a tensor, relative to the tensor's largest analytic value */
static double fd_check(loss_fn f, void *ctx, float *p, const float *grad, size_t n, double eps, size_t stride) {
    double worst = 0, scale = 1e-3;
    size_t i;
    for (i = 0; i < n; i++) if (fabs(grad[i]) > scale) scale = fabs(grad[i]);
    for (i = 0; i < n; i += stride) {
        float keep = p[i];
        double lp, lm, num;
        double err, e2 = eps;
        int tries;
        /* kink guard: a ReLU/max-pool kink inside [w-eps, w+eps] spoils that step size but not
           a small enough one; a real error shows at all of them.  Steps eps .. eps/100 by
           sqrt(10): a conv bias moves every pre-activation of its channel, so one of them can
           lie within eps/10 of a kink (seen with OpenBLAS's Haswell kernels: 5e-3 at eps/10,
           below 1e-3 at eps/100); stop at the first step that agrees */
        for (err = 1e30, tries = 0; tries < 5 && err > 1e-4; tries++, e2 /= sqrt(10.0)) {
            p[i] = (float)(keep + e2); lp = f(ctx);
            p[i] = (float)(keep - e2); lm = f(ctx);
            p[i] = keep;
            num = (lp - lm) / (2 * e2);
            if (fabs(num - grad[i]) / scale < err) err = fabs(num - grad[i]) / scale;
        }
        if (err > worst) worst = err;
    }
    return worst;
}
static double dot(const float *a, const float *b, size_t n) { double s = 0; size_t i; for (i = 0; i < n; i++) s += (double)a[i] * b[i]; return s; }

typedef struct { const conv_case *cc; cf_shape in, out; cf_geom g; float *x, *w, *b, *y, *R, *col; size_t ny; } conv_ctx;
static double conv_loss(void *v) {
    conv_ctx *c = (conv_ctx *)v;
    cf_conv_forward(c->y, c->x, c->w, c->b, c->cc->B, c->in, c->out, &c->g, c->cc->groups, c->col, 1 << 16);
    return dot(c->y, c->R, c->ny);
}
static void test_gradcheck_conv(void) {
    cf_rng r = cf_rng_seed(3);
    size_t i;
    for (i = 0; i < sizeof conv_cases / sizeof *conv_cases; i++) {
        conv_ctx c;
        c.cc = &conv_cases[i];
        setup_case(c.cc, &c.in, &c.out, &c.g);
        size_t nx = cf_shape_size(c.in) * c.cc->B, nw = (size_t)c.cc->OC * c.cc->C / c.cc->groups * c.g.k[0] * c.g.k[1] * c.g.k[2];
        size_t ws = c.cc->ws ? c.cc->ws : 1 << 16;
        c.ny = cf_shape_size(c.out) * c.cc->B;
        c.x = rnd(nx, &r); c.w = rnd(nw, &r); c.b = rnd(c.cc->OC, &r); c.y = rnd(c.ny, &r); c.R = rnd(c.ny, &r); c.col = rnd(1 << 16, &r);
        float *dx = (float *)calloc(nx, 4), *dw = (float *)calloc(nw, 4), *db = (float *)calloc(c.cc->OC, 4), *c1 = rnd(ws, &r), *c2 = rnd(ws, &r);
        /* backward with the case's own (possibly tiny) workspace: tiling must not change results */
        cf_conv_backward(dx, dw, db, c.R, c.x, c.w, c.cc->B, c.in, c.out, &c.g, c.cc->groups, c1, c2, ws);
        double ex = fd_check(conv_loss, &c, c.x, dx, nx, 1e-2, 1), ew = fd_check(conv_loss, &c, c.w, dw, nw, 1e-2, 1), eb = fd_check(conv_loss, &c, c.b, db, c.cc->OC, 1e-2, 1);
        CHECK(ex < 2e-3 && ew < 2e-3 && eb < 2e-3, "conv gradcheck %s: dx %.2g dw %.2g db %.2g", c.cc->what, ex, ew, eb);
        free(c.x); free(c.w); free(c.b); free(c.y); free(c.R); free(c.col); free(dx); free(dw); free(db); free(c1); free(c2);
    }
}

/* elementwise and small layers through one context */
typedef struct { int kind; float *x, *w, *b, *y, *R, *t; cf_shape in, out; cf_geom g; int B, IN, OUT; size_t n; float slope; } el_ctx;
enum { K_MAX, K_AVG, K_DENSE, K_RELU, K_LEAKY, K_TANH, K_DROP, K_MSE, K_L1 };
static const char *kind_names[] = { "maxpool", "avgpool", "dense", "relu", "leaky", "tanh", "dropout", "mse", "l1" };
static double el_loss(void *v) {
    el_ctx *c = (el_ctx *)v;
    switch (c->kind) {
    case K_MAX: case K_AVG: cf_pool_forward(c->y, c->x, c->B, c->in, c->out, &c->g, c->kind == K_MAX); break;
    case K_DENSE: cf_dense_forward(c->y, c->x, c->w, c->b, c->B, c->IN, c->OUT); break;
    case K_RELU: case K_LEAKY: case K_TANH:
        memcpy(c->y, c->x, c->n * 4); cf_act_forward(c->y, c->n, c->kind == K_RELU ? CF_ACT_RELU : c->kind == K_LEAKY ? CF_ACT_LEAKY : CF_ACT_TANH, c->slope); break;
    case K_DROP: cf_dropout(c->y, c->x, c->n, 0.4f, 77); break;
    case K_MSE: return cf_loss_mse(NULL, c->x, c->t, c->n);
    case K_L1: return cf_loss_l1(NULL, c->x, c->t, c->n);
    }
    return dot(c->y, c->R, c->kind == K_DENSE ? (size_t)c->B * c->OUT : c->kind <= K_AVG ? c->B * cf_shape_size(c->out) : c->n);
}
static void test_gradcheck_layers(void) {
    cf_rng r = cf_rng_seed(4);
    int kind;
    for (kind = K_MAX; kind <= K_L1; kind++) {
        el_ctx c;
        size_t i, ny;
        float *dx, *dw = NULL, *db = NULL;
        double e, ew = 0, eb = 0;
        memset(&c, 0, sizeof c);
        c.kind = kind; c.B = 3; c.slope = 0.3f;
        c.in.c = 2; c.in.d = 3; c.in.h = 5; c.in.w = 4;
        c.n = c.B * cf_shape_size(c.in);
        c.x = rnd(c.n, &r); c.t = rnd(c.n, &r);
        /* distinct values at least 0.01 apart and away from 0: no kink or tie within eps */
        for (i = 0; i < c.n; i++) c.x[i] = (float)((((i * 7919) % c.n) + 1) * 0.013 * (i % 2 ? 1 : -1));
        if (kind == K_MAX || kind == K_AVG) {
            cf_geom g = {{2, 2, 3}, {1, 2, 2}, {1, 1, 1}, {0, 1, 1}, {1, 0, 1}};
            c.g = g; c.out = c.in; c.out.d = cf_geom_out(&g, 0, 3); c.out.h = cf_geom_out(&g, 1, 5); c.out.w = cf_geom_out(&g, 2, 4);
            ny = c.B * cf_shape_size(c.out);
        } else if (kind == K_DENSE) {
            c.IN = (int)cf_shape_size(c.in); c.OUT = 5;
            c.w = rnd((size_t)c.IN * c.OUT, &r); c.b = rnd(c.OUT, &r);
            ny = (size_t)c.B * c.OUT;
        } else ny = c.n;
        c.y = rnd(ny, &r); c.R = rnd(ny, &r);
        dx = (float *)calloc(c.n, 4);
        el_loss(&c);
        switch (kind) {
        case K_MAX: case K_AVG: cf_pool_backward(dx, c.R, c.x, c.y, c.B, c.in, c.out, &c.g, kind == K_MAX); break;
        case K_DENSE:
            dw = (float *)calloc((size_t)c.IN * c.OUT, 4); db = (float *)calloc(c.OUT, 4);
            cf_dense_backward(dx, dw, db, c.R, c.x, c.w, c.B, c.IN, c.OUT); break;
        case K_RELU: case K_LEAKY: case K_TANH: {
            float *d = (float *)malloc(c.n * 4);
            memcpy(d, c.R, c.n * 4);
            cf_act_backward(d, c.y, c.n, kind == K_RELU ? CF_ACT_RELU : kind == K_LEAKY ? CF_ACT_LEAKY : CF_ACT_TANH, c.slope);
            memcpy(dx, d, c.n * 4); free(d); break;
        }
        case K_DROP: cf_dropout(dx, c.R, c.n, 0.4f, 77); break;
        case K_MSE: cf_loss_mse(dx, c.x, c.t, c.n); break;
        case K_L1:
            for (i = 0; i < c.n; i++) if (fabsf(c.x[i] - c.t[i]) < 0.05f) c.t[i] += 0.1f;   /* away from the kink */
            cf_loss_l1(dx, c.x, c.t, c.n); break;
        }
        e = fd_check(el_loss, &c, c.x, dx, c.n, 1e-3, 1);
        if (dw) { ew = fd_check(el_loss, &c, c.w, dw, (size_t)c.IN * c.OUT, 1e-3, 1); eb = fd_check(el_loss, &c, c.b, db, c.OUT, 1e-3, 1); }
        CHECK(e < 2e-3 && ew < 2e-3 && eb < 2e-3, "%s gradcheck: dx %.2g dw %.2g db %.2g", kind_names[kind], e, ew, eb);
        free(c.x); free(c.t); free(c.y); free(c.R); free(dx); free(c.w); free(c.b); free(dw); free(db);
    }
}

/* ------------------------------------------------------------ whole networks */
static const char *every_layer_cfg =
    "# every layer type, odd shapes\n[net]\ninput=3x5x6x7\nloss=mse\n"
    "[conv]\nfilters=4\nsize=3\npad=same\nactivation=leaky\nslope=0.3\n"          /* 0 */
    "[conv]\nfilters=4\nsize=2\nstride=1\npad=same\nactivation=tanh\n"          /* 1 */
    "[add]\nlayers=-1,-2\n"                                                     /* 2 */
    "[conv]\nfilters=6\nsize=3\ndilation=2\npad=2\ngroups=2\nactivation=relu\nbias_init=0.1\n" /* 3 */
    "[route]\nlayers=-1,0\n"                                                    /* 4 */
    "[maxpool]\nsize=2\n"                                                       /* 5 */
    "[conv]\nfilters=5\nsize=3\nstride=2\npad=0,1\nactivation=leaky\nslope=0.1\n" /* 6 */
    "[avgpool]\nsize=2\nstride=1\npad=same\n"                                   /* 7 */
    "[flatten]\n[dense]\noutputs=7\nactivation=leaky\nslope=0.2\nl2=1\n"      /* 8, 9 */
    "[dropout]\nrate=0.3\n[activation]\nactivation=tanh\n"                      /* 10, 11 */
    "[dense]\noutputs=3\n[scale]\nfactor=1.2\n";                                /* 12, 13 */

typedef struct { cf_net *net; const float *x, *t; int B; } net_ctx;
static double net_loss(void *v) {
    net_ctx *c = (net_ctx *)v;
    cf_net_forward(c->net, c->x, c->B);
    return cf_net_loss(c->net, c->t, NULL);
}
static void test_gradcheck_net(void) {
    cf_net net;
    cf_rng r = cf_rng_seed(5);
    int rc = cf_net_parse(&net, every_layer_cfg, "every-layer", NULL), i, B = 3;
    CHECK(rc == CF_OK, "every-layer cfg parses: %s", cf_failure_reason());
    if (rc) return;
    cf_net_init(&net, 11);
    cf_net_set_mode(&net, CF_MODE_DROPOUT); net.priv->step = 5;  /* dropout on, with a mask that stays fixed during the check */
    float *x = rnd(B * cf_shape_size(net.input), &r), *t = rnd((size_t)B * net.n_outputs, &r), *dout = rnd((size_t)B * net.n_outputs, &r);
    net_ctx c = {&net, x, t, B};
    net_loss(&c);
    cf_net_zero_grad(&net);
    cf_net_loss(&net, t, dout);
    cf_net_backward(&net, dout);
    {
        float *g = (float *)malloc(net.n_params * 4);
        memcpy(g, net.grads, net.n_params * 4);
        for (i = 0; i < net.n_layers; i++) {
            cf_layer *l = &net.layers[i];
            double ew, eb = 0;
            if (!l->w_n) continue;
            ew = fd_check(net_loss, &c, net.params + l->w_off, g + l->w_off, l->w_n, 1e-3, 1);
            if (l->b_n) eb = fd_check(net_loss, &c, net.params + l->b_off, g + l->b_off, l->b_n, 1e-3, 1);
            CHECK(ew < 5e-3 && eb < 5e-3, "whole-network gradcheck, layer %d %s: weight %.2g bias %.2g", i, cf_layer_type_name(l->type), ew, eb);
        }
        free(g);
    }
    {   /* liveness plan: gradients alive at the same backward step never share memory */
        int j, ok = 1;
        size_t sum = 0;
        for (i = 0; i < net.n_layers; i++) {
            cf_layer *a = &net.layers[i];
            sum += cf_shape_size(a->out) * B;
            for (j = 0; j < net.n_layers; j++) {
                cf_layer *b = &net.layers[j];
                const cf__plan_layer *pa = &net.priv->plan.l[i], *pb = &net.priv->plan.l[j];
                size_t na = cf_shape_size(a->out) * B, nb = cf_shape_size(b->out) * B;
                if (i != j && i <= pb->last_read && j <= pa->last_read && pa->dy_off < pb->dy_off + nb && pb->dy_off < pa->dy_off + na) ok = 0;
            }
        }
        CHECK(ok && net.priv->plan.floats < 2 * sum, "gradient buffers: live ones disjoint; %zu arena floats for %zu outputs + gradients", net.priv->plan.floats, 2 * sum);
    }
    free(x); free(t); free(dout);
    cf_net_free(&net);
}

/* conv + max pool fusion (cf__plan_fusion): the same gradients, bit for bit, in less memory.
   Odd sizes leave inputs outside every window (rows of 37: a pool's 18 outputs are a vector of
   16 and a tail); each activation kind; a conv read twice and a pool with overlapping windows
   must not fuse. */
/* One training step of the same net fused (a) and unfused (b, no_fuse) on the same random
   input and targets; zero_first_kernel zeroes layer 0's kernel in both first.  0 when the cfg
   does not parse (reported). */
static int fusion_step(cf_net *a, cf_net *b, const char *cfg, const char *name, uint64_t init_seed,
                       int zero_first_kernel, cf_rng *r) {
    int B = 2;
    float *x, *t, *da, *db;
    if (cf_net_parse(a, cfg, name, NULL) || cf_net_parse(b, cfg, name, NULL)) { CHECK(0, "%s: %s", name, cf_failure_reason()); return 0; }
    cf_net_init(a, init_seed); cf_net_init(b, init_seed);
    b->priv->no_fuse = 1;
    if (zero_first_kernel) {
        memset(a->params + a->layers[0].w_off, 0, a->layers[0].w_n * sizeof(float));
        memset(b->params + b->layers[0].w_off, 0, b->layers[0].w_n * sizeof(float));
    }
    x = rnd(B * cf_shape_size(a->input), r); t = rnd((size_t)B * a->n_outputs, r);
    da = rnd((size_t)B * a->n_outputs, r); db = rnd((size_t)B * a->n_outputs, r);
    cf_net_forward(a, x, B); cf_net_forward(b, x, B);
    cf_net_zero_grad(a); cf_net_zero_grad(b);
    cf_net_loss(a, t, da); cf_net_loss(b, t, db);
    cf_net_backward(a, da); cf_net_backward(b, db);
    free(x); free(t); free(da); free(db);
    return 1;
}

static void test_pool_fusion(void) {
    static const char *cfg =
        "[net]\ninput=2x8x13x37\nloss=mse\n"
        "[conv]\nfilters=4\nsize=3\npad=same\nactivation=leaky\nslope=0.3\n"   /* 0 fused */
        "[maxpool]\nsize=2\n"                                                  /* 1 */
        "[conv]\nfilters=5\nsize=2\npad=same\nactivation=tanh\n"               /* 2 fused */
        "[maxpool]\nsize=3\n"                                                  /* 3 */
        "[conv]\nfilters=3\nsize=1\nactivation=relu\n"                         /* 4: read twice */
        "[maxpool]\nsize=1\n"                                                  /* 5 */
        "[route]\nlayers=-1,-2\n"                                              /* 6 */
        "[conv]\nfilters=3\nsize=1\nactivation=relu\n"                         /* 7: overlapping pool */
        "[maxpool]\nsize=1,2,1\nstride=1\n"                                    /* 8 */
        "[flatten]\n[dense]\noutputs=2\n";
    /* ties: the first conv's kernel all zero, so its outputs all equal its bias and every window
       of the first pool is a tie; where the gradient goes then decides that kernel's gradient
       (its input differs between the window's positions): the first maximum, both ways */
    static const char *ties_cfg =
        "[net]\ninput=2x8x13x37\nloss=mse\n"
        "[conv]\nfilters=4\nsize=3\npad=same\nactivation=leaky\nslope=0.3\n"
        "[maxpool]\nsize=2\n"
        "[conv]\nfilters=5\nsize=2\npad=same\nactivation=tanh\n"
        "[flatten]\n[dense]\noutputs=2\n";
    cf_net a, b;
    cf_rng r = cf_rng_seed(9);
    int same;
    if (fusion_step(&a, &b, cfg, "fusion.cfg", 3, 0, &r)) {
        CHECK((a.priv->plan.l[0].fused_pool >= 0) && (a.priv->plan.l[2].fused_pool >= 0) && !(a.priv->plan.l[4].fused_pool >= 0) && !(a.priv->plan.l[7].fused_pool >= 0) && !(b.priv->plan.l[0].fused_pool >= 0),
              "fusion chosen for conv+pool only where the pool is the sole reader with disjoint windows (%d %d %d %d)",
              (a.priv->plan.l[0].fused_pool >= 0), (a.priv->plan.l[2].fused_pool >= 0), (a.priv->plan.l[4].fused_pool >= 0), (a.priv->plan.l[7].fused_pool >= 0));
        same = !memcmp(a.grads, b.grads, a.n_params * sizeof(float));
        CHECK(same, "fused conv+pool backward gives the separate passes' gradients bit for bit");
        CHECK(a.priv->plan.floats < b.priv->plan.floats, "fusion needs fewer arena floats: %zu vs %zu", a.priv->plan.floats, b.priv->plan.floats);
        CHECK(cf_net_first_nonfinite_output(&a) < 0, "after backward, fused outputs (now gradients) are not reported as outputs");
        cf_net_free(&a); cf_net_free(&b);
    }
    if (fusion_step(&a, &b, ties_cfg, "ties.cfg", 4, 1, &r)) {
        float big = 0.0f;
        size_t k;
        for (k = 0; k < b.layers[0].w_n; k++) if (fabsf(b.grads[b.layers[0].w_off + k]) > big) big = fabsf(b.grads[b.layers[0].w_off + k]);
        same = !memcmp(a.grads, b.grads, a.n_params * sizeof(float));
        CHECK((a.priv->plan.l[0].fused_pool >= 0) && big > 0.0f && same,
              "windows of ties: the fused backward gives the first maximum the gradient, as the separate passes do (fused %d, kernel gradient %g, equal %d)",
              (a.priv->plan.l[0].fused_pool >= 0), big, same);
        cf_net_free(&a); cf_net_free(&b);
    }
}

/* the halves tests' setup: 1 (and a line saying why) when this build or CPU has no bf16
   kernels; twins a and b of one cfg in bf16, b storing nothing in 16 bits (no_half); two
   training steps of both on x: 1 when the losses, gradients and running statistics agree bit
   for bit at each */
static int halves_skipped(const char *what) {
#ifdef CF__BF16
    if (cf__has_bf16()) return 0;
    printf("skipped: %s (the CPU lacks AVX512_BF16)\n", what);
#else
    printf("skipped: %s (no bf16 kernels in this build)\n", what);
#endif
    return 1;
}
static int halves_twins(cf_net *a, cf_net *b, const char *cfg, const char *name) {
    if (cf_net_parse(a, cfg, name, NULL) || cf_net_parse(b, cfg, name, NULL)) { CHECK(0, "%s: %s", name, cf_failure_reason()); return 0; }
    cf_net_init(a, 5); cf_net_init(b, 5);
    cf_net_set_precision(a, CF_BF16); cf_net_set_precision(b, CF_BF16);
    b->priv->no_half = 1;
    return 1;
}
static int halves_two_steps(cf_net *a, cf_net *b, const float *x, const float *t, int B) {
    float *da = (float *)calloc((size_t)B * a->n_outputs + 1, sizeof(float)), *db = (float *)calloc((size_t)B * a->n_outputs + 1, sizeof(float));
    int s, ok = da && db;
    for (s = 0; s < 2 && ok; s++) {   /* the second step reads the first's running statistics and weights */
        double la, lb;
        cf_net_set_mode(a, CF_MODE_TRAIN); cf_net_set_mode(b, CF_MODE_TRAIN);
        cf_net_forward(a, x, B); cf_net_forward(b, x, B);
        cf_net_zero_grad(a); cf_net_zero_grad(b);
        la = cf_net_loss(a, t, da); lb = cf_net_loss(b, t, db);
        cf_net_backward(a, da); cf_net_backward(b, db);
        ok &= la == lb && !memcmp(a->grads, b->grads, a->n_params * sizeof(float)) && !memcmp(a->stats, b->stats, a->n_stats * sizeof(float));
        cf_sgd_step(a, 0.01f, 0.9f, 0.0f); cf_sgd_step(b, 0.01f, 0.9f, 0.0f);
    }
    free(da); free(db);
    return ok;
}
/* Halves (section 9): a bf16 network's fused conv outputs and the gradients written over
   them, and a max pool's output and gradient between two such convs, stored in 16 bits, give
   the loss and the gradients of the same paths on fp32 storage bit for bit, in less memory.
   A 3-D net (rows of 36 and 18: a whole and a partial 32-wide block of the direct kernel), a
   2-D one, each with a first conv (no backward-data) and one that reads its input and writes
   its input's gradient in 16 bits. */
static void test_halves(void) {
    static const char *cfgs[3] = {
        "[net]\ninput=3x8x8x36\nloss=mse\n[conv]\nfilters=8\nsize=3\npad=same\nactivation=leaky\nslope=0.3\n[maxpool]\nsize=2\n"
        "[conv]\nfilters=6\nsize=3\npad=same\nactivation=relu\n[maxpool]\nsize=2\n[flatten]\n[dense]\noutputs=3\n",
        "[net]\ninput=4x20x64\nloss=mse\n[conv]\nfilters=8\nsize=3\npad=same\nactivation=leaky\nslope=0.1\n[maxpool]\nsize=2\n"
        "[conv]\nfilters=5\nsize=3\npad=same\nactivation=leaky\nslope=0.2\n[maxpool]\nsize=2\n[flatten]\n[dense]\noutputs=2\n",
        /* rows of 37: the first pool leaves a column no window covers and the taps take only
           rows of even length, so the first conv, its pool and the input stay fp32 (a rounded
           copy); the second chain is 16-bit alone, its input and its input's gradient fp32 */
        "[net]\ninput=3x8x8x37\nloss=mse\n[conv]\nfilters=8\nsize=3\npad=same\nactivation=leaky\nslope=0.3\n[maxpool]\nsize=2\n"
        "[conv]\nfilters=6\nsize=3\npad=same\nactivation=relu\n[maxpool]\nsize=2\n[flatten]\n[dense]\noutputs=3\n"};
    /* per case: the input read as given; layer 0's output, layer 1's output and gradient, layer 2's, layer 3's in 16 bits */
    static const int expect[3][6] = {{1, 1, 1, 1, 1, 0}, {1, 1, 1, 1, 1, 0}, {0, 0, 0, 0, 1, 0}};
    int k, i, B = 2;
    if (halves_skipped("halves")) return;
    for (k = 0; k < 3; k++) {
        cf_net a, b;
        int got[6], outputs_ok = 1;
        cf_rng r = cf_rng_seed(21 + k);
        float *x, *t, *da, *db;
        double la, lb;
        if (!halves_twins(&a, &b, cfgs[k], "halves.cfg")) return;
        x = rnd(B * cf_shape_size(a.input), &r); t = rnd((size_t)B * a.n_outputs, &r);
        da = rnd((size_t)B * a.n_outputs, &r); db = rnd((size_t)B * a.n_outputs, &r);
        cf_net_forward(&a, x, B); cf_net_forward(&b, x, B);
        if (a.priv->plan.l[1].half) {   /* the non-finite guard reads a 16-bit output as 16 bits: a NaN there is found, no other */
            cf_bf16 *y1 = (cf_bf16 *)(void *)(a.priv->arena + a.priv->plan.l[1].y_off), keep = y1[5];
            int clean = cf_net_first_nonfinite_output(&a);
            y1[5] = 0x7fc0;
            CHECK(clean < 0 && cf_net_first_nonfinite_output(&a) == 1, "halves case %d: a NaN in a 16-bit output found in its layer (%d, before it %d)", k,
                  cf_net_first_nonfinite_output(&a), clean);
            y1[5] = keep;
        }
        cf_net_zero_grad(&a); cf_net_zero_grad(&b);
        la = cf_net_loss(&a, t, da); lb = cf_net_loss(&b, t, db);
        cf_net_backward(&a, da); cf_net_backward(&b, db);
        got[0] = a.priv->plan.input_raw && a.priv->x == x; got[1] = a.priv->plan.l[0].half; got[2] = a.priv->plan.l[1].half;
        got[3] = a.priv->plan.l[1].grad_half; got[4] = a.priv->plan.l[2].half; got[5] = a.priv->plan.l[3].half || a.priv->plan.l[3].grad_half;
        CHECK(!memcmp(got, expect[k], sizeof got) && !b.priv->plan.input_raw && !b.priv->plan.l[0].half && !b.priv->plan.l[2].half,
              "halves case %d: in 16 bits (input as given, conv 0, pool 1 output and gradient, conv 2, pool 3): %d %d %d %d %d %d, none with no_half",
              k, got[0], got[1], got[2], got[3], got[4], got[5]);
        CHECK(la == lb && !memcmp(a.grads, b.grads, a.n_params * sizeof(float)),
              "halves case %d: the loss (%.9g, %.9g) and every gradient as on fp32 storage, bit for bit", k, la, lb);
        CHECK(a.priv->plan.floats < b.priv->plan.floats, "halves case %d: fewer arena floats (%zu vs %zu)", k, a.priv->plan.floats, b.priv->plan.floats);
        for (i = 0; i < 4; i++) {
            const cf__plan_layer *pl = &a.priv->plan.l[i];
            outputs_ok &= (cf_net_output(&a, i) == NULL) == pl->half;
            outputs_ok &= (cf_net_output_grad(&a, i) == NULL) == (pl->fused_pool >= 0 ? pl->half : pl->grad_half);
        }
        CHECK(outputs_ok, "halves case %d: cf_net_output and cf_net_output_grad are NULL for 16-bit tensors only", k);
        free(x); free(t); free(da); free(db);
        cf_net_free(&a); cf_net_free(&b);
    }
}

/* Halves before batch norms (section 9; DeepCAM's conv -> batch norm pairs): a conv without
   an activation whose one reader is a batch norm stores its output and the gradient over
   it in 16 bits (the 3x3 direct kernel, the pointwise GEMM; conv 7's bias by the pointwise
   path's fp32 blocks), the batch norm reads and writes
   them so; a depthwise conv's output and gradient when its one reader is a pointwise conv (the
   depthwise 3x3 kernels, the pointwise GEMM reading x and writing dx in 16 bits); a batch
   norm's output and gradient when its one reader is a conv, depthwise or not (batch norms 1,
   3, 6, 8; 10 feeds the sum); the loss,
   every gradient, the running statistics and an evaluation forward as on fp32 storage, bit
   for bit.  Planes of 30x46 (two of batch norm's 1024-value chunks), a batch
   of 2; conv 9 has two readers: fp32.  Once more with the batch norms
   synchronized (a reduce over one rank): the convs before them fp32, the same bits. */
static void halves_bn_reduce(double *v, int n, void *ctx) { (void)v; (void)n; (void)ctx; }
static void test_halves_bn(void) {
    static const char *cfg =
        "[net]\ninput=4x30x46\nloss=mse\n"
        "[conv]\nfilters=8\nsize=3\npad=1\nbias=0\n[batchnorm]\nactivation=relu\n"                     /* 0, 1 */
        "[conv]\nfilters=16\nsize=1\nbias=0\n[batchnorm]\nactivation=relu\n"                          /* 2, 3 */
        "[conv]\nfilters=16\nsize=3\npad=1\ngroups=16\nbias=0\n"                                      /* 4: depthwise */
        "[conv]\nfilters=16\nsize=1\nbias=0\n[batchnorm]\n"                                             /* 5, 6 */
        "[conv]\nfilters=16\nsize=1\n[batchnorm]\nactivation=relu\n"                                    /* 7: a bias */
        "[conv]\nfilters=16\nsize=1\nbias=0\n[batchnorm]\n[add]\nlayers=-1,-2\n"                      /* 9: two readers */
        "[flatten]\n[dense]\noutputs=3\n";
    static const int expect[2][12] = {{1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0}, {0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0}};
    int i, B = 2, sync;
    if (halves_skipped("halves before batch norms")) return;
    for (sync = 0; sync < 2; sync++) {
        cf_net a, b;
        int got[12], ok, bits_ok = 1;
        cf_rng r = cf_rng_seed(31);
        float *x, *t;
        if (!halves_twins(&a, &b, cfg, "halves-bn.cfg")) return;
        if (sync) { cf_net_sync_bn(&a, halves_bn_reduce, NULL); cf_net_sync_bn(&b, halves_bn_reduce, NULL); }
        x = rnd(B * cf_shape_size(a.input), &r); t = rnd((size_t)B * a.n_outputs, &r);
        ok = halves_two_steps(&a, &b, x, t, B);
        for (i = 0; i < 12; i++) {
            got[i] = a.priv->plan.l[i].half;
            bits_ok &= cf_net_stored_bits(&a, i, 0) == (got[i] ? 16 : 32) && cf_net_stored_bits(&a, i, 1) == (a.priv->plan.l[i].grad_half ? 16 : 32);
            bits_ok &= a.priv->plan.l[i].half == a.priv->plan.l[i].grad_half;
        }
        CHECK(!memcmp(got, expect[sync], sizeof got),
              "halves before batch norms%s: in 16 bits (layers 0 to 11) %d %d %d %d %d %d %d %d %d %d %d %d",
              sync ? " (synchronized: the depthwise conv's alone)" : "", got[0], got[1], got[2], got[3], got[4], got[5], got[6], got[7], got[8], got[9],
              got[10], got[11]);
        CHECK(bits_ok, "halves before batch norms%s: cf_net_stored_bits says 16 for each 16-bit output and gradient", sync ? " (synchronized)" : "");
        CHECK(ok, "halves before batch norms%s: two steps' losses, gradients and running statistics as on fp32 storage, bit for bit", sync ? " (synchronized)" : "");
        if (!sync) CHECK(a.priv->plan.floats < b.priv->plan.floats, "halves before batch norms: fewer arena floats (%zu vs %zu)", a.priv->plan.floats, b.priv->plan.floats);
        {   /* evaluation: the running statistics */
            const float *ya, *yb;
            cf_net_set_mode(&a, CF_MODE_EVAL); cf_net_set_mode(&b, CF_MODE_EVAL);
            ya = cf_net_forward(&a, x, B); yb = cf_net_forward(&b, x, B);
            CHECK(ya && yb && !memcmp(ya, yb, (size_t)B * a.n_outputs * sizeof(float)), "halves before batch norms%s: an evaluation forward, bit for bit",
                  sync ? " (synchronized)" : "");
        }
        free(x); free(t);
        cf_net_free(&a); cf_net_free(&b);
    }
}

/* More 16-bit blocks, the same bits (section 9, halves): (a) a transposed conv's output and
   gradient before a batch norm, its sums made in a band of rows that moves down its tiles (the
   workspace cut to 600000 floats past the GEMM's buffers, so that deconv 2's two tiles meet
   inside an input row; deconv 5 with a bias, stride 1), and the output alone of the 1x1 conv
   1 (a bias) that deconv 2 reads in 16 bits; (b) the network's input read as given
   by a stride-2 conv on the tiles paths, its output and gradient in 16 bits before a batch
   norm; (c) a 1x1 transposed conv of stride 2, whose odd rows no tap reaches (the bias
   alone).  Two training steps and an evaluation forward against fp32 storage, bit for bit. */
static void test_halves_tiles_band(void) {
    static const char *cfgs[3] = {
        "[net]\ninput=4x100x150\nloss=mse\n[conv]\nfilters=4\nsize=1\n[conv]\nfilters=8\nsize=1\n"           /* 0, 1 */
        "[deconv]\nfilters=8\nsize=3\nstride=2\npad=1\noutput_padding=1\nbias=0\n[batchnorm]\nactivation=relu\n"   /* 2, 3 */
        "[conv]\nfilters=4\nsize=3\nstride=2\npad=1\nbias=0\n"                                                  /* 4 */
        "[deconv]\nfilters=4\nsize=3\npad=1\n[batchnorm]\n[gap]\n[flatten]\n[dense]\noutputs=3\n",              /* 5: a bias, 6 */
        "[net]\ninput=4x600x800\nloss=mse\n"
        "[conv]\nfilters=8\nsize=3\nstride=2\npad=1\nbias=0\n[batchnorm]\nactivation=relu\n"                    /* 0, 1 */
        "[gap]\n[flatten]\n[dense]\noutputs=3\n",
        ("[net]\ninput=4x20x30\nloss=mse\n[conv]\nfilters=4\nsize=1\nbias=0\n"                                  /* 0 */
         "[deconv]\nfilters=8\nsize=1\nstride=2\n[batchnorm]\n[gap]\n[flatten]\n[dense]\noutputs=3\n")};   /* 1, 2 */
    static const int expect[3][7] = {{0, 1, 3, 0, 0, 3, 0}, {3, 0, 0, 0, 0, 0, 0}, {0, 3, 0, 0, 0, 0, 0}};   /* 1: the output in 16 bits, 3: and its gradient */
    static const char *what[3] = {"transposed conv", "tiles", "transposed conv, rows no tap reaches"};
    int k, i, B;
    if (halves_skipped("16-bit transposed convs and tiles")) return;
    for (k = 0; k < 3; k++) {
        cf_net a, b;
        int got[7], ok, raw;
        cf_rng r = cf_rng_seed(37);
        float *x, *t;
        const float *ya, *yb;
        B = k == 1 ? 1 : 2;
        if (!halves_twins(&a, &b, cfgs[k], "halves-more.cfg")) return;
        if (!k) {   /* (the allocation holds twice the original: more than twice this) */
            size_t ws = 600000 + cf__pointwise_ws_floats();
            if (2 * ws <= 2 * a.priv->ws_floats) a.priv->ws_floats = b.priv->ws_floats = ws;
            CHECK(cf__tile(72, 100 * 150, a.priv->ws_floats) < 100 * 150 || cf__nthreads() > 2, "halves, transposed conv: deconv 2 runs in more than one tile");
        }
        x = rnd(B * cf_shape_size(a.input), &r); t = rnd((size_t)B * a.n_outputs, &r);
        ok = halves_two_steps(&a, &b, x, t, B);
        for (i = 0; i < 7; i++) got[i] = i < a.n_layers ? a.priv->plan.l[i].half + 2 * a.priv->plan.l[i].grad_half : 0;
        raw = a.priv->plan.input_raw;
        CHECK(!memcmp(got, expect[k], sizeof got) && raw == (k == 1), "halves, %s: in 16 bits (layers 0 to 6) %d %d %d %d %d %d %d, the input read as given %d",
              what[k], got[0], got[1], got[2], got[3], got[4], got[5], got[6], raw);
        CHECK(ok, "halves, %s: two steps' losses, gradients and running statistics as on fp32 storage, bit for bit", what[k]);
        cf_net_set_mode(&a, CF_MODE_EVAL); cf_net_set_mode(&b, CF_MODE_EVAL);
        ya = cf_net_forward(&a, x, B); yb = cf_net_forward(&b, x, B);
        CHECK(ya && yb && !memcmp(ya, yb, (size_t)B * a.n_outputs * sizeof(float)), "halves, %s: an evaluation forward, bit for bit", what[k]);
        free(x); free(t);
        cf_net_free(&a); cf_net_free(&b);
    }
}

/* A bf16 network stores every output and output gradient before its dense head as bf16
   values, whichever code stores them: a pass after the layer, or the layer as it stores
   (the bf16 direct kernel's forward, max pooling's forward and its fused backward, copies,
   relu).  Checked
   after each layer's forward and backward (the layer hook), with the fast paths and with the
   emulation alone; the two runs' gradients agree to bf16's precision (their sums differ in
   order, so a sum near a tie may round the other way). */
typedef struct { int unrounded, checked; } bf16_watch;
/* (p NULL: a tensor stored in 16 bits, section 9, halves: bf16 values by construction) */
static size_t count_unrounded(const float *p, size_t n) { size_t i, c = 0; for (i = 0; p && i < n; i++) c += p[i] != round_bf16(p[i]); return c; }
static void bf16_hook(cf_net *net, int i, int phase, void *ctx) {
    bf16_watch *w = (bf16_watch *)ctx;
    const cf_layer *l = &net->layers[i];
    int k;
    if (phase == 1 && i < net->priv->head) { w->unrounded += count_unrounded(cf_net_output(net, i), (size_t)net->batch * cf_shape_size(l->out)) > 0; w->checked++; }
    if (phase == 2 && i < net->priv->head) {   /* its output's gradient, complete (the loss's, for the last layer) */
        w->unrounded += count_unrounded(cf_net_output_grad(net, i), (size_t)net->batch * cf_shape_size(l->out)) > 0;
        w->checked++;
    }
    if (phase == 3) for (k = 0; k < l->n_src; k++)
        if (l->src[k] >= 0 && l->src[k] < net->priv->head) {
            w->unrounded += count_unrounded(cf_net_output_grad(net, l->src[k]), (size_t)net->batch * cf_shape_size(net->layers[l->src[k]].out)) > 0;
            w->checked++;
        }
}
/* one training step's checks on cfg (fused: its layers 0 and 2 pair with their pools) */
static void bf16_stored_net(const char *cfg, const char *name, int fused) {
    cf_net net;
    cf_rng r = cf_rng_seed(17);
    float *x, *t, *d, *g[2];
    double num = 0, den = 0;
    size_t k;
    int run, B = 2;
    if (cf_net_parse(&net, cfg, name, NULL)) { CHECK(0, "%s: %s", name, cf_failure_reason()); return; }
    x = rnd(B * cf_shape_size(net.input), &r); t = rnd((size_t)B * net.n_outputs, &r); d = rnd((size_t)B * net.n_outputs, &r);
    for (run = 0; run < 2; run++) {   /* 0: the fast paths (as this CPU has them), 1: the emulation */
        bf16_watch w = {0, 0};
        cf_net_init(&net, 3);
        cf_net_set_precision(&net, CF_BF16);
        cf_fast_path_set("all", run == 0);
        cf_net_set_layer_hook(&net, bf16_hook, &w);
        cf_net_forward(&net, x, B);
        cf_net_zero_grad(&net);
        cf_net_loss(&net, t, d);
        cf_net_backward(&net, d);
        g[run] = (float *)malloc(net.n_params * sizeof(float));
        memcpy(g[run], net.grads, net.n_params * sizeof(float));
        CHECK(w.checked > 2 * net.priv->head && !w.unrounded, "%s, bf16 (%s): every stored output and gradient before the head is a bf16 value: %d of %d tensors are not",
              name, run ? "the emulation" : cf_bf16_kernels(), w.unrounded, w.checked);
        if (run == 0 && fused) CHECK(net.priv->plan.l[0].fused_pool >= 0 && net.priv->plan.l[2].fused_pool >= 0, "%s: both conv + pool pairs fused", name);
        cf_net_set_layer_hook(&net, NULL, NULL);
    }
    cf_fast_path_set("all", 1);
    for (k = 0; k < net.n_params; k++) { num += ((double)g[0][k] - g[1][k]) * ((double)g[0][k] - g[1][k]); den += (double)g[1][k] * g[1][k]; }
    CHECK(sqrt(num) <= 1e-2 * sqrt(den), "%s, bf16: the fast paths' gradients against the emulation's: relative L2 %.2g (bound 1e-2)", name,
          sqrt(num / (den > 0 ? den : 1)));
    free(x); free(t); free(d); free(g[0]); free(g[1]);
    cf_net_free(&net);
}
static void test_bf16_stored(void) {
    static const char *cfg =   /* wide enough rows for the bf16 direct kernel; conv + pool pairs fuse */
        "[net]\ninput=2x6x10x32\nloss=mse\n"
        "[conv]\nfilters=4\nsize=3\npad=same\nactivation=leaky\nslope=0.3\n"
        "[maxpool]\nsize=2\n"
        "[conv]\nfilters=5\nsize=2\npad=same\nactivation=tanh\n"
        "[maxpool]\nsize=3\n"
        "[conv]\nfilters=3\nsize=1\nactivation=relu\n"
        "[route]\nlayers=-1,-2\n"
        "[avgpool]\nsize=1,1,2\n"
        "[conv]\nfilters=3\nsize=1\n[activation]\nactivation=leaky\nslope=0.1\n[activation]\nactivation=relu\n"
        "[flatten]\n[dense]\noutputs=2\n";
    static const char *seg_cfg =   /* no dense head: the loss gradient itself is stored rounded, and linear convs' dL/dz is it;
                                      a depthwise conv and a batch norm round with their activation; a grouped, strided
                                      conv (im2col with the bf16 GEMM) applies its activation before it rounds; the batch
                                      norm's gradient is the sum of an activation's, an add's and a route's (each rounds
                                      the sum it adds into), the linear depthwise conv's the sum of two; the add's is the transposed conv's dx, rounded by its GEMM */
        "[net]\ninput=3x8x32\nloss=mse\n"
        "[conv]\nfilters=4\nsize=3\npad=same\nactivation=relu\n"
        "[conv]\nfilters=4\nsize=3\nstride=1,2\npad=1\ngroups=2\nactivation=leaky\nslope=0.2\n"
        "[conv]\nfilters=4\nsize=3\npad=same\n"
        "[conv]\nfilters=4\nsize=3\npad=1\ngroups=4\nactivation=leaky\nslope=0.2\n"
        "[batchnorm]\nactivation=leaky\nslope=0.1\n"
        "[activation]\nactivation=leaky\nslope=0.3\n[add]\nlayers=-1,-2\n[route]\nlayers=-1,-3\n"
        "[conv]\nfilters=8\nsize=3\npad=1\ngroups=8\n[add]\nlayers=-1,-2\n"
        "[deconv]\nfilters=4\nsize=3\nstride=1,2\npad=1\noutput_padding=0,1\n"
        "[conv]\nfilters=2\nsize=3\npad=same\n";
    bf16_stored_net(cfg, "bf16-stored.cfg", 1);
    bf16_stored_net(seg_cfg, "bf16-seg.cfg", 0);
}

/* The memory plan (cf__plan_memory): outputs whose life is over are overwritten and cheap
   ones recomputed in backward, so one training step under the default plan must give the
   bits of the same step with keep_acts = 1, where no output's memory is ever reused: the
   output, every gradient and the batch-norm running statistics (a recomputation must not
   move them), with batch statistics and with running ones, at two batch sizes, for the
   layer zoo, a DeepCAM-shaped net (batch norm, depthwise, add, route, image pool,
   deconv) and CosmoFlow's conv + pool stack.  The default plan must need less memory. */
static void test_memory_plan(void) {
    static const struct { const char *path, *text, *shape; } nets[] = {
        {"every-layer", NULL, NULL},
        {"models/deepcam-small.cfg", NULL, "16x32x48"},
        {"models/cosmoflow-small.cfg", NULL, "4x16x16x16"},
        {"tests/ref/seg-layers.cfg", NULL, NULL},
    };
    int m;
    for (m = 0; m < (int)(sizeof nets / sizeof nets[0]); m++) {
        cf_net a, b;
        cf_shape shp;
        int rc, B, mode, recomputed = 0, i;
        cf_rng r = cf_rng_seed(21 + m);
        if (nets[m].shape) cf_parse_shape(nets[m].shape, &shp);
        if (m == 0) rc = cf_net_parse(&a, every_layer_cfg, "every-layer", NULL) || cf_net_parse(&b, every_layer_cfg, "every-layer", NULL);
        else rc = cf_net_load_cfg(&a, nets[m].path, nets[m].shape ? &shp : NULL) || cf_net_load_cfg(&b, nets[m].path, nets[m].shape ? &shp : NULL);
        CHECK(rc == CF_OK, "memory plan: %s loads: %s", nets[m].path, cf_failure_reason());
        if (rc) continue;
        cf_net_init(&a, 5); cf_net_init(&b, 5);
        cf_net_keep_outputs(&b, 1);
        for (B = 2; B <= 3; B++) for (mode = 1; mode >= 0; mode--) {
            size_t nx = (size_t)B * cf_shape_size(a.input), no = (size_t)B * a.n_outputs, nt = (size_t)B * a.n_targets, k;
            float *x = rnd(nx, &r), *t = rnd(nt, &r), *da = rnd(no, &r), *db = rnd(no, &r);
            const float *ya, *yb;
            int same_y, same_g, same_s;
            if (a.loss == CF_LOSS_SOFTMAX_CE) for (k = 0; k < nt; k++) t[k] = (float)(cf_rng_u64(&r) % (uint64_t)a.layers[a.n_layers - 1].out.c);
            a.priv->step = b.priv->step = (uint64_t)(B * 2 + mode);   /* dropout on */
            cf_net_set_mode(&a, CF_MODE_DROPOUT | (mode ? CF_MODE_BATCH_STATS : 0));
            cf_net_set_mode(&b, cf_net_mode(&a));
            ya = cf_net_forward(&a, x, B); yb = cf_net_forward(&b, x, B);
            same_y = ya && yb && !memcmp(ya, yb, no * sizeof(float));
            cf_net_zero_grad(&a); cf_net_zero_grad(&b);
            cf_net_loss(&a, t, da); cf_net_loss(&b, t, db);
            cf_net_backward(&a, da); cf_net_backward(&b, db);
            same_g = !memcmp(a.grads, b.grads, a.n_params * sizeof(float));
            same_s = !a.n_stats || !memcmp(a.stats, b.stats, a.n_stats * sizeof(float));
            CHECK(same_y && same_g && same_s, "memory plan, %s batch %d %s: output %s, gradients %s, running statistics %s to keep_acts",
                  nets[m].path, B, mode ? "batch statistics" : "running statistics", same_y ? "equal" : "DIFFER",
                  same_g ? "equal" : "DIFFER", same_s ? "equal" : "DIFFER");
            free(x); free(t); free(da); free(db);
        }
        for (i = 0; i < a.n_layers; i++) recomputed += a.priv->plan.l[i].rebuild_at >= 0;
        CHECK(a.priv->plan.floats < b.priv->plan.floats, "memory plan, %s: arena %zu floats, %zu with keep_acts (%d outputs recomputed in backward)",
              nets[m].path, a.priv->plan.floats, b.priv->plan.floats, recomputed);
        cf_net_free(&a); cf_net_free(&b);
    }
}

/* Section 9, stores: a gradient block whose first writer stores into it is not zeroed.  The
   test poisons each such block with NaN just before its first writer's backward (layer hook,
   phase 2: after the zeroing), so that a writer that adds where it should store, or a store
   that misses part of the block, shows as a NaN or a different gradient; the gradients and the
   input's gradient must equal those of the same network with the kind "stores" off (zeroed
   blocks, every writer adding), bit for bit, in fp32 and bf16. */
typedef struct { int poisoned; size_t floats; } stores_poison;
static void stores_hook(cf_net *net, int i, int phase, void *ctx) {
    stores_poison *sp = (stores_poison *)ctx;
    int j;
    if (phase != 2) return;
    for (j = 0; j < net->n_layers; j++) {
        const cf__plan_layer *pl = &net->priv->plan.l[j];
        size_t k, n = (size_t)net->batch * cf_shape_size(net->layers[j].out);
        if (!pl->grad_store || pl->last_read != i) continue;
        for (k = 0; k < n; k++) net->priv->arena[pl->dy_off + k] = NAN;
        sp->poisoned++; sp->floats += n;
    }
}
static void test_grad_stores(void) {
    static const struct { const char *path, *shape; } nets[] = {
        {"every-layer", NULL},
        {"models/deepcam-small.cfg", "16x32x48"},
        {"models/cosmoflow-small.cfg", "4x16x16x16"},
        {"tests/ref/seg-layers.cfg", NULL},
    };
    int m, prec;
    {   /* the stores write 0 + v: a -0 term becomes +0, as the add into a zeroed block gives */
        float dy[4] = {0.0f, -0.0f, 1.5f, -2.0f}, x[4] = {1, 2, 3, 4}, g = -1.0f, mean = 2.5f, is = 1.0f;
        float st[4] = {NAN, NAN, NAN, NAN}, ad[4] = {0, 0, 0, 0}, cs[4] = {NAN, NAN, NAN, NAN}, ca[4] = {0, 0, 0, 0}, dg = 0, db = 0;
        cf__bn_call bn;
        memset(&bn, 0, sizeof bn);
        bn.dgamma = &dg; bn.dbeta = &db; bn.dy = dy; bn.x = x; bn.gamma = &g; bn.mean = &mean; bn.invstd = &is;
        bn.B = 1; bn.C = 1; bn.P = 4;
        bn.dx = st; cf__bn_backward_p(&bn, 0, NULL, 0, 1);
        bn.dx = ad; cf__bn_backward_p(&bn, 0, NULL, 0, 0);
        cf__add_to_p(cs, dy, 4, 0, 1); cf__add_to_p(ca, dy, 4, 0, 0);
        CHECK(!memcmp(st, ad, sizeof st) && !memcmp(cs, ca, sizeof cs) && !signbit(st[0]) && !signbit(cs[1]),
              "stores: batch norm's and the sums' store gives the add's bits, +0 for a -0 term (%g %g, %g %g)", st[0], ad[0], cs[1], ca[1]);
    }
    for (m = 0; m < (int)(sizeof nets / sizeof nets[0]); m++)
        for (prec = 0; prec < 2; prec++) {
            cf_net a, b;
            cf_shape shp;
            int rc, B = 2, stored = 0, j, same_g, same_dx;
            cf_rng r = cf_rng_seed(77 + m);
            stores_poison sp = {0, 0};
            size_t nx, no, nt, k;
            float *x, *t, *da, *db, *dxa, *dxb;
            if (nets[m].shape) cf_parse_shape(nets[m].shape, &shp);
            if (m == 0) rc = cf_net_parse(&a, every_layer_cfg, "every-layer", NULL) || cf_net_parse(&b, every_layer_cfg, "every-layer", NULL);
            else rc = cf_net_load_cfg(&a, nets[m].path, nets[m].shape ? &shp : NULL) || cf_net_load_cfg(&b, nets[m].path, nets[m].shape ? &shp : NULL);
            CHECK(rc == CF_OK, "stores: %s loads: %s", nets[m].path, cf_failure_reason());
            if (rc) continue;
            cf_net_init(&a, 5); cf_net_init(&b, 5);
            if (prec) { cf_net_set_precision(&a, CF_BF16); cf_net_set_precision(&b, CF_BF16); }
            nx = (size_t)B * cf_shape_size(a.input); no = (size_t)B * a.n_outputs; nt = (size_t)B * a.n_targets;
            x = rnd(nx, &r); t = rnd(nt, &r); da = rnd(no, &r); db = rnd(no, &r);
            dxa = (float *)calloc(nx, sizeof(float)); dxb = (float *)calloc(nx, sizeof(float));
            if (a.loss == CF_LOSS_SOFTMAX_CE) for (k = 0; k < nt; k++) t[k] = (float)(cf_rng_u64(&r) % (uint64_t)a.layers[a.n_layers - 1].out.c);
            cf_net_set_input_grad(&a, dxa); cf_net_set_input_grad(&b, dxb);
            cf_net_set_mode(&a, CF_MODE_BATCH_STATS); cf_net_set_mode(&b, CF_MODE_BATCH_STATS);
            cf_net_set_layer_hook(&a, stores_hook, &sp);
            cf_net_forward(&a, x, B);
            cf_net_zero_grad(&a);
            cf_net_loss(&a, t, da);
            cf_net_backward(&a, da);
            for (j = 0; j < a.n_layers; j++) stored += a.priv->plan.l[j].grad_store;
            cf_fast_path_set("stores", 0);
            cf_net_forward(&b, x, B);
            cf_net_zero_grad(&b);
            cf_net_loss(&b, t, db);
            cf_net_backward(&b, db);
            cf_fast_path_set("stores", 1);
            for (j = 0; j < b.n_layers; j++) stored -= 1000 * b.priv->plan.l[j].grad_store;   /* none with the kind off */
            same_g = !memcmp(a.grads, b.grads, a.n_params * sizeof(float));
            same_dx = !memcmp(dxa, dxb, nx * sizeof(float));
            CHECK(stored > 0 && sp.poisoned == stored - 1 && same_g && same_dx,
                  "stores, %s %s: %d gradient blocks stored into, not zeroed (%d poisoned with NaN before their first writer, %zu floats); "
                  "gradients %s, input gradient %s to every writer adding into zeroed blocks",
                  nets[m].path, prec ? "bf16" : "fp32", stored, sp.poisoned, sp.floats, same_g ? "equal" : "DIFFER", same_dx ? "equal" : "DIFFER");
            free(x); free(t); free(da); free(db); free(dxa); free(dxb);
            cf_net_free(&a); cf_net_free(&b);
        }
}

/* ------------------------------------------------------------ the PyTorch reference */
static float *load_f32(const char *dir, const char *name, size_t *n) {
    char p[1024]; float *d = NULL; size_t cnt = 0;
    snprintf(p, sizeof p, "%s/%s", dir, name);
    if (cf_npy_read_f32(p, &d, &cnt)) { printf("  %s\n", cf_failure_reason()); return NULL; }
    if (n) *n = cnt;
    return d;
}
static void compare_tensors(cf_net *net, const char *dir, const char *sub, int stats, const float *base, const char *what, const char *agree);
static void test_pytorch_reference(void) {
    const char *dir = "tests/ref/cosmo_ref";
    cf_net net;
    size_t nx, nt, ny, k;
    char path[1024];
    float lr = 0, mom = 0, l2 = 0;
    int B;
    FILE *f;
    if (cf_net_load_cfg(&net, "tests/ref/cosmo-ref.cfg", NULL)) { CHECK(0, "reference cfg: %s", cf_failure_reason()); return; }
    CHECK(cf_weights_import(&net, "tests/ref/cosmo_ref/weights") == CF_OK, "import PyTorch weights: %s", cf_failure_reason());
    float *x = load_f32(dir, "input.npy", &nx), *t = load_f32(dir, "target.npy", &nt), *yref = load_f32(dir, "output.npy", &ny);
    if (!x || !t || !yref) { CHECK(0, "reference arrays missing"); cf_net_free(&net); return; }
    B = (int)(nx / cf_shape_size(net.input));
    snprintf(path, sizeof path, "%s/hyper.txt", dir);
    f = fopen(path, "r");
    CHECK(f && fscanf(f, "%f %f %f", &lr, &mom, &l2) == 3, "read hyper.txt");
    if (f) fclose(f);
    cf_net_set_mode(&net, CF_MODE_EVAL);   /* dropout off, as in the reference */
    const float *y = cf_net_forward(&net, x, B);
    CHECK(check_relerr(y, yref, ny) < 1e-4, "PyTorch reference: output (err %.2g)", check_relerr(y, yref, ny));
    printf("agree cosmo-ref.cfg_output %.3g 1e-04\n", check_relerr(y, yref, ny));
    float *dout = (float *)malloc(ny * 4);
    double loss = cf_net_loss(&net, t, dout), lref = 0;
    snprintf(path, sizeof path, "%s/loss.txt", dir);
    f = fopen(path, "r");
    CHECK(f && fscanf(f, "%lf", &lref) == 1, "read loss.txt");
    if (f) fclose(f);
    CHECK(fabs(loss - lref) / fabs(lref) < 1e-4, "PyTorch reference: loss %.8g vs %.8g", loss, lref);
    cf_net_zero_grad(&net);
    cf_net_backward(&net, dout);
    compare_tensors(&net, dir, "grad", 0, net.grads, "gradient", "cosmo-ref.cfg_gradients");
    /* 10 Keras-form momentum SGD steps with L2 on the dense kernels marked l2=1 */
    for (k = 0; k < 10; k++) {
        cf_net_forward(&net, x, B);
        cf_net_loss(&net, t, dout);
        cf_net_zero_grad(&net);
        cf_net_backward(&net, dout);
        cf_sgd_step(&net, lr, mom, l2);
    }
    compare_tensors(&net, dir, "after10", 0, net.params, "weights after 10 SGD steps", "SGD_(Keras_form,_L2)_10_steps_weights_(written_out_in_PyTorch)");
    free(dout); free(x); free(t); free(yref);
    cf_net_free(&net);
}

/* ------------------------------------------------------------ segmentation: PyTorch reference */
static double read_number(const char *dir, const char *name) {
    char p[1024]; double v = NAN; FILE *f;
    snprintf(p, sizeof p, "%s/%s", dir, name);
    f = fopen(p, "r");
    if (!f || fscanf(f, "%lf", &v) != 1) v = NAN;
    if (f) fclose(f);
    return v;
}
/* compare every tensor of kind-set (stats or trainable) with DIR/SUB/NNN_<layer>_<kind>.npy */
/* Each tensor of sub/ against the net's (parameters, gradients or statistics at base), to 1e-4;
   agree (when not NULL) names the comparison in make agreement's table ("agree NAME WORST TOL"). */
static void compare_tensors(cf_net *net, const char *dir, const char *sub, int stats, const float *base, const char *what, const char *agree) {
    int nt = cf_net_tensors(net, NULL, 0), i;
    cf_tensor *ts = (cf_tensor *)calloc(nt > 0 ? (size_t)nt : 1, sizeof *ts);
    double worst = 0;
    cf_net_tensors(net, ts, nt);
    for (i = 0; i < nt; i++) {
        char name[256]; size_t n; float *r;
        double e;
        if (ts[i].stats != stats) continue;
        snprintf(name, sizeof name, "%s/%03d_%d_%s.npy", sub, i, ts[i].layer, ts[i].kind);
        r = load_f32(dir, name, &n);
        e = r && n == ts[i].n ? check_relerr(base + ts[i].off, r, n) : 1.0;
        CHECK(e < 1e-4, "PyTorch reference: %s %s (err %.2g)", what, name, e);
        if (e > worst) worst = e;
        free(r);
    }
    if (agree) printf("agree %s %.3g 1e-04\n", agree, worst);
    free(ts);
}
static void test_seg_reference(void) {
    const char *dir = "tests/ref/seg_ref";
    cf_net net;
    size_t nx, ny, nz, k;
    int mode, B, step;
    double hp[6] = {0, 0, 0, 0, 0, 0};
    FILE *f = fopen("tests/ref/seg_ref/hyper.txt", "r");
    CHECK(f && fscanf(f, "%lf %lf %lf %lf %lf %lf", &hp[0], &hp[1], &hp[2], &hp[3], &hp[4], &hp[5]) == 6, "read seg hyper.txt");
    if (f) fclose(f);
    if (cf_net_load_cfg(&net, "tests/ref/seg-layers.cfg", NULL)) { CHECK(0, "seg cfg: %s", cf_failure_reason()); return; }
    float *x = load_f32(dir, "input.npy", &nx), *lab = load_f32(dir, "labels.npy", &ny);
    if (!x || !lab) { CHECK(0, "seg reference arrays missing"); cf_net_free(&net); return; }
    B = (int)(nx / cf_shape_size(net.input));
    CHECK(net.n_targets == 80 && ny == (size_t)B * 80, "segmentation targets are H*W class ids per sample (%d)", net.n_targets);
    CHECK(fabs(net.priv->class_w[1] - 2.6146112) < 1e-6 && fabs(net.priv->class_w[0] - 1.0017299) < 1e-6 && fabs(net.priv->class_w[2] - 1.7164197) < 1e-6,
          "default class weights are the reference's f^(-1/8)");
    float *dout = (float *)malloc((size_t)B * net.n_outputs * 4);
    for (mode = 0; mode < 2; mode++) {   /* 0: train-mode batch norm, 1: eval mode */
        const char *m = mode ? "eval" : "train";
        char name[64];
        CHECK(cf_weights_import(&net, "tests/ref/seg_ref/weights") == CF_OK, "import seg weights: %s", cf_failure_reason());
        cf_net_set_mode(&net, mode ? CF_MODE_EVAL : CF_MODE_BATCH_STATS);
        const float *z = cf_net_forward(&net, x, B);
        snprintf(name, sizeof name, "output_%s.npy", m);
        float *zr = load_f32(dir, name, &nz);
        CHECK(zr && nz == (size_t)B * net.n_outputs && check_relerr(z, zr, nz) < 1e-4, "seg reference (%s): output (err %.2g)", m, zr ? check_relerr(z, zr, nz) : 1.0);
        free(zr);
        double loss = cf_net_loss(&net, lab, dout);
        snprintf(name, sizeof name, "loss_%s.txt", m);
        double lref = read_number(dir, name);
        CHECK(fabs(loss - lref) < 1e-5 * fabs(lref), "seg reference (%s): weighted CE %.8g vs %.8g", m, loss, lref);
        cf_net_zero_grad(&net);
        cf_net_backward(&net, dout);
        snprintf(name, sizeof name, "grad_%s", m);
        compare_tensors(&net, dir, name, 0, net.grads, mode ? "eval-mode gradient" : "train-mode gradient",
                        mode ? "seg-layers.cfg_eval-mode_gradients" : "seg-layers.cfg_train-mode_gradients");
        if (!mode) compare_tensors(&net, dir, "stats_train", 1, net.stats, "running statistics after one training forward", "batchnorm_running_statistics");
    }
    /* 5 steps of each optimizer, train mode: AdamW (torch.optim.AdamW), Adam with L2 in the
       gradient (torch.optim.Adam), LARC (clip, eta 0.002) before Adam, LAMB (apex FusedLAMB)
       with weight decay and without (trust ratio 1, as apex and unlike the paper) */
    for (mode = 0; mode < 5; mode++) {
        static const char *sub[5] = {"after_adamw", "after_adam", "after_larc_adam", "after_lamb", "after_lamb_wd0"};
        static const char *what[5] = {"AdamW_5_steps_weights_(torch.optim.AdamW)", "Adam_(L2)_5_steps_weights_(torch.optim.Adam)",
                                      "LARC_(clip)_and_Adam_5_steps_weights", "LAMB_5_steps_weights_(apex_FusedLAMB_in_PyTorch)",
                                      "LAMB_weight_decay_0_5_steps_weights_(apex:_trust_ratio_1)"};
        cf_weights_import(&net, "tests/ref/seg_ref/weights");
        memset(net.opt, 0, (size_t)net.opt_slots * net.n_params * sizeof(float));
        cf_net_set_mode(&net, CF_MODE_BATCH_STATS);
        for (step = 1; step <= 5; step++) {
            cf_net_forward(&net, x, B);
            cf_net_loss(&net, lab, dout);
            cf_net_zero_grad(&net);
            cf_net_backward(&net, dout);
            if (mode == 0) cf_adam_step(&net, (float)hp[0], (float)hp[2], (float)hp[3], (float)hp[4], (float)hp[1], 1, (uint64_t)step);
            else if (mode == 1) cf_adam_step(&net, (float)hp[0], (float)hp[2], (float)hp[3], (float)hp[4], (float)hp[1], 0, (uint64_t)step);
            else if (mode == 2) { cf_larc_scale(&net, 0.002f); cf_adam_step(&net, (float)hp[0], (float)hp[2], (float)hp[3], (float)hp[4], 0.0f, 0, (uint64_t)step); }
            else cf_lamb_step(&net, (float)hp[0], (float)hp[2], (float)hp[3], (float)hp[4], mode == 3 ? (float)hp[1] : 0.0f, (float)hp[5], (uint64_t)step);
        }
        compare_tensors(&net, dir, sub[mode], 0, net.params, what[mode], what[mode]);
    }
    {   /* gradient lag 1 through the trainer: 6 steps, 5 updates, Adam's t counted from the first
           update (torch.optim.Adam, tests/make_seg_ref.py) */
        cf_train_config cfg;
        cf_trainer tr;
        cf_step_result res;
        int waiting = 0;
        cf_weights_import(&net, "tests/ref/seg_ref/weights");
        memset(net.opt, 0, (size_t)net.opt_slots * net.n_params * sizeof(float));
        net.priv->step = net.priv->updates = 0;
        cf_train_defaults(&cfg);
        cfg.optimizer = CF_OPT_ADAM; cfg.lr = hp[0]; cfg.weight_decay = hp[1]; cfg.beta1 = hp[2]; cfg.beta2 = hp[3]; cfg.eps = hp[4];
        cfg.per_step = 1; cfg.sched.n_milestones = 0; cfg.grad_lag = 1;   /* a constant learning rate */
        CHECK(cf_train_init(&tr, &net, &cfg) == CF_OK, "trainer with gradient lag: %s", cf_failure_reason());
        for (step = 1; step <= 6; step++) {
            CHECK(cf_train_step(&tr, x, lab, B, &res) == CF_OK, "lag step %d", step);
            waiting += res.status == CF_STEP_WAITING;
        }
        CHECK(waiting == 1 && cf_net_step(&net) == 6 && cf_net_updates(&net) == 5, "gradient lag: 1 waiting step, 6 steps, 5 updates (%d, %llu, %llu)",
              waiting, (unsigned long long)cf_net_step(&net), (unsigned long long)cf_net_updates(&net));
        compare_tensors(&net, dir, "after_adam_lag", 0, net.params, "Adam_(L2)_gradient_lag_1,_6_steps_weights_(torch.optim.Adam,_t_from_updates)",
                        "Adam_(L2)_gradient_lag_1,_6_steps_weights_(torch.optim.Adam,_t_from_updates)");
        cf_train_free(&tr);
    }
    for (k = 0; k < 1; k++) {   /* a label out of range is reported, not used as an index */
        lab[0] = 3.0f;
        CHECK(isnan(cf_net_loss(&net, lab, dout)), "softmax_ce: a label outside [0, K) gives NAN");
    }
    free(dout); free(x); free(lab);
    cf_net_free(&net);
}

static void test_iou(void) {
    /* 2x4 image; classes 0,1,2 */
    float lab[8] = {0, 0, 1, 1, 2, 2, 0, 0};
    int perfect[8] = {0, 0, 1, 1, 2, 2, 0, 0}, bg[8] = {0, 0, 0, 0, 0, 0, 0, 0}, half[8] = {0, 0, 1, 0, 2, 2, 2, 0};
    float none[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    CHECK(fabs(cf_iou_sample(perfect, lab, 8, 3) - 1.0) < 1e-12, "IoU of a perfect prediction is 1");
    /* background everywhere: bg tp 4 / union 8 = 0.5; classes 1, 2: 0 */
    CHECK(fabs(cf_iou_sample(bg, lab, 8, 3) - 0.5 / 3) < 1e-12, "IoU of all-background: (0.5 + 0 + 0)/3 (%g)", cf_iou_sample(bg, lab, 8, 3));
    /* bg: tp 3 (0,1,7), fp 1 (3), fn 1 (6) -> 3/5; class 1: tp 1 / (1+0+1) = 1/2; class 2: tp 2 / (2+1+0) = 2/3 */
    CHECK(fabs(cf_iou_sample(half, lab, 8, 3) - (0.6 + 0.5 + 2.0 / 3) / 3) < 1e-12, "IoU by hand: (3/5 + 1/2 + 2/3)/3 (%g)", cf_iou_sample(half, lab, 8, 3));
    /* classes 1 and 2 absent from both: each counts 1 */
    CHECK(fabs(cf_iou_sample(bg, none, 8, 3) - 1.0) < 1e-12, "IoU: a class absent from prediction and label counts 1");
    {
        float z[2 * 3] = {0.1f, 0.9f, 0.5f, 0.5f, 0.2f, 0.1f};   /* (K=2, P=3) */
        int p[3];
        cf_argmax_classes(p, z, 2, 3);
        CHECK(p[0] == 1 && p[1] == 0 && p[2] == 0, "argmax over classes, ties to the first");
    }
}

/* torch's schedulers as the reference code runs them, step by step, each lr chained from the
   previous one (the header computed this until it went to closed forms) */
static double chained_lr(const cf_lr_sched *s, uint64_t k) {
    double lr = s->base_lr;
    uint64_t j;
    long W = s->warmup_steps;
    for (j = 0; j <= k; j++) {
        long e = (long)j;
        if (W > 0 && e <= W) {
            lr = s->warmup_factor == 1.0 ? s->base_lr * e / W : s->base_lr * ((s->warmup_factor - 1.0) * e / W + 1.0);
            continue;
        }
        if (s->type == CF_SCHED_MULTISTEP) {
            int m;
            for (m = 0; m < s->n_milestones; m++) if (e == s->milestones[m] + (W > 0 ? W + 1 : 0)) lr *= s->gamma;
        } else {
            long T = s->t_max, ee = W > 0 ? e - W : e;
            const double pi = 3.14159265358979323846;
            if (ee == 0) continue;
            if ((ee - 1 - T) % (2 * T) == 0) lr = lr + (s->base_lr - s->eta_min) * (1.0 - cos(pi / T)) / 2.0;
            else lr = (1.0 + cos(pi * ee / T)) / (1.0 + cos(pi * (ee - 1) / T)) * (lr - s->eta_min) + s->eta_min;
        }
    }
    return lr;
}
static void test_schedules(void) {
    cf_lr_sched s;
    {   /* the closed forms against the chain: multistep bit for bit, cosine within 1e-12 of the
           base lr over 5 periods (restarts included), with and without a warmup from lr/F */
        int W, f, k, T, same = 1;
        double worst = 0;
        for (W = 0; W <= 7; W += 7) for (f = 0; f < 2; f++) {
            memset(&s, 0, sizeof s);
            s.type = CF_SCHED_MULTISTEP; s.base_lr = 0.013; s.gamma = 0.3; s.warmup_steps = W; s.warmup_factor = f ? 4.0 : 1.0;
            s.n_milestones = 4; s.milestones[0] = 5; s.milestones[1] = 5; s.milestones[2] = 40; s.milestones[3] = 0;
            for (k = 0; k < 120; k++) same &= cf_lr_sched_at(&s, (uint64_t)k) == chained_lr(&s, (uint64_t)k);
            for (T = 1; T <= 13; T += 6) {
                s.type = CF_SCHED_COSINE; s.t_max = T; s.eta_min = 0.0004;
                for (k = 0; k < 10 * T + W + 3; k++) {
                    double e = fabs(cf_lr_sched_at(&s, (uint64_t)k) - chained_lr(&s, (uint64_t)k)) / s.base_lr;
                    if (e > worst) worst = e;
                }
            }
        }
        CHECK(same && worst < 1e-12, "schedules in closed form: multistep the chain's bits, cosine within %.1e of the chain over 5 periods", worst);
    }
    memset(&s, 0, sizeof s);
    /* multistep, no warmup: torch MultiStepLR, lr * gamma at k = milestone */
    s.type = CF_SCHED_MULTISTEP; s.base_lr = 1.0; s.gamma = 0.1; s.n_milestones = 2; s.milestones[0] = 3; s.milestones[1] = 5; s.warmup_factor = 1;
    CHECK(cf_lr_sched_at(&s, 2) == 1.0 && fabs(cf_lr_sched_at(&s, 3) - 0.1) < 1e-15 && fabs(cf_lr_sched_at(&s, 5) - 0.01) < 1e-15,
          "multistep: 1 at step 2, 0.1 at 3, 0.01 at 5");
    /* with warmup 4: lr k/4 for k <= 4 (0 at the first step), milestones at m + 5 */
    s.warmup_steps = 4;
    CHECK(cf_lr_sched_at(&s, 0) == 0.0 && cf_lr_sched_at(&s, 2) == 0.5 && cf_lr_sched_at(&s, 4) == 1.0 && cf_lr_sched_at(&s, 7) == 1.0 &&
          fabs(cf_lr_sched_at(&s, 8) - 0.1) < 1e-15 && fabs(cf_lr_sched_at(&s, 10) - 0.01) < 1e-15,
          "multistep with warmup: the reference's MultiStepLRWarmup (milestones shifted by W + 1)");
    /* cosine, no warmup: torch's chained CosineAnnealingLR equals the closed form inside a period */
    memset(&s, 0, sizeof s);
    s.type = CF_SCHED_COSINE; s.base_lr = 0.002; s.t_max = 10; s.eta_min = 0.0001; s.warmup_factor = 1;
    {
        int k, ok = 1;
        for (k = 0; k <= 10; k++) {
            double want = s.eta_min + (s.base_lr - s.eta_min) * (1 + cos(3.14159265358979323846 * k / 10)) / 2;
            if (fabs(cf_lr_sched_at(&s, (uint64_t)k) - want) > 1e-12) ok = 0;
        }
        CHECK(ok, "cosine: eta_min + (base - eta_min)(1 + cos(pi k / T))/2 for k <= T");
        s.warmup_steps = 3;
        CHECK(fabs(cf_lr_sched_at(&s, 1) - 0.002 / 3) < 1e-15 && fabs(cf_lr_sched_at(&s, 3) - 0.002) < 1e-15 &&
              fabs(cf_lr_sched_at(&s, 8) - (s.eta_min + (s.base_lr - s.eta_min) * (1 + cos(3.14159265358979323846 * 5 / 10)) / 2)) < 1e-12,
              "cosine with warmup: the recurrence shifted by W");
    }
}

/* ------------------------------------------------------------ LARC and gradient lag, by hand */
static void test_larc_and_lag(void) {
    cf_net net;
    const char *cfg = "[net]\ninput=3x1x1\n[dense]\noutputs=2\n";
    float x1[3] = {1, 2, -1}, x2[3] = {0.5f, -1, 3}, t[2] = {0.3f, -0.2f}, dout[2], g1[8], w0[8];
    size_t k;
    int ok, had1, had2;
    cf_grad_lag lag;
    if (cf_net_parse(&net, cfg, "larc.cfg", NULL)) { CHECK(0, "larc cfg: %s", cf_failure_reason()); return; }
    /* LARC: weight (2x3) and bias (2) scaled separately by min(eta |w| / |g|, 1) */
    for (k = 0; k < 8; k++) { net.params[k] = (float)(k + 1) * 0.1f; net.grads[k] = k < 6 ? 10.0f : 0.001f; }
    {
        double wn = 0, gn = 0, bn = 0, bgn = 0, s, sb;
        for (k = 0; k < 6; k++) { wn += net.params[k] * net.params[k]; gn += 100.0; }
        for (k = 6; k < 8; k++) { bn += net.params[k] * net.params[k]; bgn += 1e-6; }
        s = 0.002 * sqrt(wn) / sqrt(gn); sb = 0.002 * sqrt(bn) / sqrt(bgn);   /* s < 1; sb > 1: no change */
        cf_larc_scale(&net, 0.002f);
        ok = 1;
        for (k = 0; k < 6; k++) ok &= fabs(net.grads[k] - 10.0 * s) < 1e-6 * 10.0 * s;
        for (k = 6; k < 8; k++) ok &= net.grads[k] == 0.001f && sb > 1;
        CHECK(ok, "LARC (clip): weight gradient x %.3g = min(eta |w|/|g|, 1), bias kept (ratio %.3g > 1)", s, sb);
    }
    /* gradient lag 1: step 1 applies nothing; step 2 applies step 1's gradient, not its own */
    cf_net_init(&net, 7);
    memcpy(w0, net.params, sizeof w0);
    cf_net_forward(&net, x1, 1); cf_net_loss(&net, t, dout); cf_net_zero_grad(&net); cf_net_backward(&net, dout);
    memcpy(g1, net.grads, sizeof g1);                    /* g(w0; x1), by a plain step */
    memset(&lag, 0, sizeof lag);
    cf_net_forward(&net, x1, 1); cf_net_loss(&net, t, dout); cf_net_zero_grad(&net); cf_net_backward(&net, dout);
    had1 = cf_dist_grad_lag(&net, &lag);
    cf_net_forward(&net, x2, 1); cf_net_loss(&net, t, dout); cf_net_zero_grad(&net); cf_net_backward(&net, dout);
    had2 = cf_dist_grad_lag(&net, &lag);
    ok = had1 == 0 && had2 == 1;
    for (k = 0; k < 8; k++) ok &= net.grads[k] == g1[k];
    cf_sgd_step(&net, 0.5f, 0.0f, 0.0f);
    for (k = 0; k < 8; k++) ok &= fabs(net.params[k] - (w0[k] - 0.5f * g1[k])) < 1e-6;
    CHECK(ok, "gradient lag 1: the first step applies nothing, the second applies the first step's gradient");
    cf_dist_grad_lag_free(&lag);
    cf_net_free(&net);
}

/* ------------------------------------------------------------ models and cfg errors */
static void test_models(void) {
    cf_net net;
    cf_shape s;
    CHECK(cf_net_load_cfg(&net, "models/cosmoflow.cfg", NULL) == CF_OK && net.n_params == 8907556, "cosmoflow.cfg has 8,907,556 parameters (%zu)", net.n_params);
    cf_net_free(&net);
    CHECK(cf_net_load_cfg(&net, "models/cosmoflow-v07.cfg", NULL) == CF_OK && net.n_params == 5597604, "cosmoflow-v07.cfg has 5,597,604 parameters (%zu)", net.n_params);
    CHECK(net.layers[0].g.pb[0] == 0 && net.layers[0].g.pa[0] == 1, "v0.7: TF 'same' with kernel 2 pads 0 before, 1 after");
    cf_net_free(&net);
    cf_parse_shape("4x32x32x32", &s);
    CHECK(cf_net_load_cfg(&net, "models/cosmoflow.cfg", &s) == CF_OK && net.layers[11].in.c == 512 && net.n_params == 8907556 - 32768 * 128 + 512 * 128,
          "--input-shape 4x32x32x32 shrinks the first dense layer (%zu)", net.n_params);
    cf_net_free(&net);
    CHECK(cf_net_load_cfg(&net, "models/cosmoflow-small.cfg", NULL) == CF_OK, "cosmoflow-small.cfg parses: %s", cf_failure_reason());
    cf_net_free(&net);
}

static void expect_cfg_error(const char *text, const char *want, const char *what) {
    cf_net net;
    int rc = cf_net_parse(&net, text, "bad.cfg", NULL);
    CHECK(rc == CF_ERR && strstr(cf_failure_reason(), want), "cfg error, %s: got '%s', want '%s'", what, rc ? cf_failure_reason() : "success", want);
    if (!rc) cf_net_free(&net);
}
static void test_cfg_errors(void) {
    expect_cfg_error("[net]\ninput=1x8x8\n[conv]\nfilters=2\nsise=3\n", "bad.cfg:5: unknown key 'sise'", "unknown key");
    expect_cfg_error("[net]\ninput=1x8x8\n[convolution]\nfilters=2\n", "bad.cfg:3: unknown section [convolution]", "unknown section");
    expect_cfg_error("[net]\ninput=1x8x8\n[conv]\nfilters=2\nactivation=leaky\n", "bad.cfg:3: activation=leaky needs slope=", "leaky without slope");
    expect_cfg_error("[net]\ninput=1x8x8\n[conv]\nfilters=2\nsize=9\n", "would produce an empty output", "kernel larger than input");
    expect_cfg_error("[net]\ninput=1x8x8\n[conv]\nfilters=-2\n", "bad.cfg:4: filters=-2 is out of range", "negative filters");
    /* the segmentation layers' errors */
    expect_cfg_error("[net]\ninput=2x8x8\n[deconv]\nfilters=2\nsize=3\nstride=2\npad=same\noutput_padding=1\n", "output_padding needs an explicit pad=", "deconv output padding with pad=same");
    expect_cfg_error("[net]\ninput=2x8x8\n[deconv]\nfilters=2\nsize=3\nstride=2\npad=1\noutput_padding=2\n", "output_padding must be smaller than the stride", "deconv output padding too large");
    expect_cfg_error("[net]\ninput=2x8x8\n[gap]\n[broadcast]\n", "[broadcast] needs like=", "broadcast without like");
    expect_cfg_error("[net]\ninput=2x8x8\n[conv]\nfilters=2\n[broadcast]\nlike=0\n", "needs an input of spatial size 1", "broadcast of a full map");
    expect_cfg_error("[net]\ninput=2x8x8\n[gap]\n[broadcast]\nlike=5\n", "like=5 is out of range", "broadcast like a later layer");
    expect_cfg_error("[net]\ninput=2x8x8\nclass_weights=1,2\n[conv]\nfilters=2\n", "class_weights= needs loss=softmax_ce", "class weights for regression");
    expect_cfg_error("[net]\ninput=2x8x8\nloss=softmax_ce\nclass_weights=1,2\n[conv]\nfilters=3\n", "class_weights=1,2: give reference, uniform or 3", "class weights of the wrong count");
    expect_cfg_error("[net]\ninput=2x8x8\nloss=softmax_ce\n[conv]\nfilters=1\n", "needs 2 to 16 output channels", "one class");
    expect_cfg_error("[net]\ninput=2x8x8\n[conv]\nfilters=2\n[route]\nlayers=abc\n", "layers=abc is not a list", "route to a name");
    expect_cfg_error("[net]\ninput=4x8x8\n[conv]\nfilters=6\ngroups=3\n", "groups=3 does not divide 4 input channels", "groups not dividing");
    expect_cfg_error("[net]\ninput=2x8x8\n[batchnorm]\nmomentum=2\n", "momentum=2 is not a number in [0, 1]", "batch-norm momentum out of range");
    expect_cfg_error("[net]\ninput=2x8x8\n[conv]\nfilters=3\n[add]\nlayers=input,0\n", "[add] inputs differ in shape", "add of the input and another shape");
    expect_cfg_error("[net]\ninput=1x8x8\n[conv]\nfilters=2\npad=1,2,3\n", "bad.cfg:5: pad=1,2,3", "bad padding");
    expect_cfg_error("[net]\ninput=1x8x8\n[route]\nlayers=3\n", "not before this one", "route to a later layer");
    expect_cfg_error("[net]\ninput=0x8x8\n[flatten]\n", "bad.cfg:2: input=0x8x8", "zero dimension");
    expect_cfg_error("[conv]\nfilters=2\n", "must be [net]", "missing [net]");
    expect_cfg_error("[net]\ninput=1x8x8\n[conv]\nfilters=2\nfilters=3\n", ":5: key 'filters' given twice in [conv] (first at line 4)", "repeated key");
    expect_cfg_error("[net]\ninput=3x8x8\n[conv]\nfilters=4\ngroups=2\n", "groups=2 does not divide", "groups");
}

/* ------------------------------------------------------------ files */
static void test_basics(void) {
    cf_rng r = cf_rng_seed(1234567);
    /* splitmix64 reference outputs for seed 1234567 (Vigna's test vector) */
    uint64_t a = cf_rng_u64(&r), b = cf_rng_u64(&r);
    CHECK(a == 6457827717110365317ULL && b == 3203168211198807973ULL, "splitmix64 test vector: %llu %llu", (unsigned long long)a, (unsigned long long)b);
    CHECK(cf_crc32c(0, "123456789", 9) == 0xE3069283u, "CRC32C check value");
}

/* the optimizer state's second slot (Adam's and LAMB's second moments) exists only where an
   optimizer uses it: SGD's networks hold one slot, their checkpoints the same bytes as before
   (the second slot written as zeros) */
static long file_size_of(const char *path) { struct stat sb; return stat(path, &sb) ? -1 : (long)sb.st_size; }
static int same_files(const char *p, const char *q) {
    FILE *a = fopen(p, "rb"), *b = fopen(q, "rb");
    int ca = 0, cb = 0;
    if (a && b) do { ca = fgetc(a); cb = fgetc(b); } while (ca == cb && ca != EOF);
    if (a) fclose(a);
    if (b) fclose(b);
    return a && b && ca == cb;
}
static void test_opt_slots(const char *path) {
    cf_net a, b;
    cf_train_config c;
    cf_trainer tr;
    char p2[1100];
    size_t k, n;
    int nonzero = 0;
    snprintf(p2, sizeof p2, "%s.2", path);
    cf_net_parse(&a, every_layer_cfg, "every-layer", NULL); cf_net_init(&a, 1);
    n = a.n_params;
    CHECK(a.opt_slots == 1, "a new network holds one optimizer slot (%d)", a.opt_slots);
    cf_train_defaults(&c); c.optimizer = CF_OPT_SGD;
    CHECK(cf_train_init(&tr, &a, &c) == CF_OK && a.opt_slots == 1, "SGD's trainer adds none (%d)", a.opt_slots);
    cf_train_free(&tr);
    { cf_rng r = cf_rng_seed(3); fill(a.opt, n, &r, -1, 1); }
    CHECK(cf_checkpoint_save(path, &a, NULL) == CF_OK, "save with one slot: %s", cf_failure_reason());
    c.optimizer = CF_OPT_ADAM;
    CHECK(cf_train_init(&tr, &a, &c) == CF_OK && a.opt_slots == 2, "Adam's trainer adds the second (%d)", a.opt_slots);
    cf_train_free(&tr);
    for (k = 0; k < n; k++) nonzero |= a.opt[n + k] != 0.0f;
    CHECK(!nonzero, "the second slot starts at zero, the first is kept");
    CHECK(cf_checkpoint_save(p2, &a, NULL) == CF_OK && file_size_of(path) > 0 && same_files(path, p2),
          "one slot and two with a zero second: the same checkpoint bytes");
    cf_net_parse(&b, every_layer_cfg, "every-layer", NULL);
    CHECK(cf_checkpoint_load(p2, &b, NULL) == CF_OK && b.opt_slots == 1 && !memcmp(a.opt, b.opt, n * 4),
          "a checkpoint whose second slot is zero loads into one slot (%d)", b.opt_slots);
    cf_net_free(&b);
    a.grads[0] = 0.5f;
    CHECK(cf_adam_step(&a, 0.001f, 0.9f, 0.999f, 1e-8f, 0.0f, 0, 1) == CF_OK && a.opt[n] != 0.0f, "Adam writes its second moments");
    CHECK(cf_checkpoint_save(p2, &a, NULL) == CF_OK, "save with two slots: %s", cf_failure_reason());
    cf_net_parse(&b, every_layer_cfg, "every-layer", NULL);
    CHECK(cf_checkpoint_load(p2, &b, NULL) == CF_OK && b.opt_slots == 2 && !memcmp(a.opt, b.opt, 2 * n * 4),
          "a checkpoint with second moments loads both slots, byte for byte (%d)", b.opt_slots);
    cf_net_free(&b);
    cf_net_parse(&b, every_layer_cfg, "every-layer", NULL); cf_net_init(&b, 1);
    b.grads[0] = 0.5f;
    CHECK(cf_adam_step(&b, 0.001f, 0.9f, 0.999f, 1e-8f, 0.0f, 0, 1) == CF_OK && b.opt_slots == 2 && b.opt[n] != 0.0f,
          "cf_adam_step on a network of one slot adds the second");
    cf_net_free(&b);
    cf_net_free(&a);
    remove(p2);
}

static void test_checkpoints(void) {
    cf_net a, b, c;
    cf_train_state st, st2;
    char path[512];
    FILE *f;
    long size;
    memset(&st, 0, sizeof st);
    st.step = 5; st.epoch = 3; st.seed = 99; st.best = 0.5;   /* (the step written is the network's) */
    snprintf(st.meta, sizeof st.meta, "optimizer=sgd\n");
    snprintf(path, sizeof path, "%s", tmp("ck.cfck"));
    cf_net_parse(&a, every_layer_cfg, "every-layer", NULL);
    cf_net_init(&a, 1);
    a.priv->step = 17; a.priv->updates = 12;   /* gradient lag's waiting steps, skipped ones */
    { cf_rng r = cf_rng_seed(7); fill(a.opt, a.n_params, &r, -1, 1); }
    CHECK(cf_checkpoint_save(path, &a, &st) == CF_OK, "checkpoint save: %s", cf_failure_reason());
    cf_net_parse(&b, every_layer_cfg, "every-layer", NULL);
    CHECK(cf_checkpoint_load(path, &b, &st2) == CF_OK && !memcmp(a.params, b.params, a.n_params * 4) && !memcmp(a.opt, b.opt, a.n_params * 4) &&
          st2.step == 17 && st2.updates == 12 && cf_net_step(&b) == 17 && cf_net_updates(&b) == 12 && st2.epoch == 3 && st2.seed == 99 &&
          !strcmp(st2.meta, "optimizer=sgd\n"), "checkpoint round trip: params, optimizer state, the network's steps and updates, epoch, seed, "
          "the tool's record as written (%llu %llu '%s')", (unsigned long long)st2.step, (unsigned long long)st2.updates, st2.meta);
    a.priv->updates = 17;   /* as many updates as steps: no record line of the library's (the bytes of earlier versions) */
    CHECK(cf_checkpoint_save(path, &a, &st) == CF_OK && cf_checkpoint_load(path, &b, &st2) == CF_OK && cf_net_updates(&b) == 17 &&
          !strcmp(st2.meta, "optimizer=sgd\n"), "checkpoint: updates = steps round trip");
    cf_net_load_cfg(&c, "models/cosmoflow-small.cfg", NULL);
    CHECK(cf_checkpoint_load(path, &c, NULL) == CF_ERR && strstr(cf_failure_reason(), "different model"), "loading into another model: %s", cf_failure_reason());
    cf_net_free(&c);
    f = fopen(path, "rb"); fseek(f, 0, SEEK_END); size = ftell(f); fclose(f);
    f = fopen(path, "r+b"); fseek(f, size / 2, SEEK_SET); { int ch = fgetc(f); fseek(f, size / 2, SEEK_SET); fputc(ch ^ 0xff, f); } fclose(f);
    CHECK(cf_checkpoint_load(path, &b, NULL) == CF_ERR && strstr(cf_failure_reason(), "corrupt"), "flipped byte detected: %s", cf_failure_reason());
    CHECK(cf_checkpoint_save("/nonexistent-dir/x.cfck", &a, &st) == CF_ERR, "save into a missing directory fails cleanly");
    CHECK(cf_weights_export(&a, tmp("w")) == CF_OK && cf_weights_import(&b, tmp("w")) == CF_OK && !memcmp(a.params, b.params, a.n_params * 4), "weights export/import round trip");
    cf_net_free(&a); cf_net_free(&b);
    test_opt_slots(path);
}

static void test_npy(void) {
    int dt;
    for (dt = CF_F32; dt <= CF_I64; dt++) {
        cf_array a, b;
        size_t i;
        memset(&a, 0, sizeof a);
        a.dtype = dt; a.ndim = 3; a.shape[0] = 2; a.shape[1] = 3; a.shape[2] = 5; a.count = 30;
        a.data = calloc(30, 8);
        for (i = 0; i < 30 * cf_dtype_size(dt); i++) ((unsigned char *)a.data)[i] = (unsigned char)(i * 37);
        CHECK(cf_npy_write(tmp("a.npy"), &a) == CF_OK && cf_npy_read(tmp("a.npy"), &b) == CF_OK && b.dtype == dt && b.ndim == 3 &&
              b.shape[2] == 5 && !memcmp(a.data, b.data, 30 * cf_dtype_size(dt)), "npy round trip dtype %d", dt);
        free(a.data); cf_array_free(&b);
    }
    {   /* a version-2 header, written by hand */
        FILE *f = fopen(tmp("v2.npy"), "wb");
        const char *h = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
        unsigned char pre[12] = {0x93, 'N', 'U', 'M', 'P', 'Y', 2, 0, 0, 0, 0, 0};
        size_t hl = strlen(h) + 1, pad = (64 - (12 + hl) % 64) % 64;
        float v[2] = {1.5f, -2.0f};
        cf_array b;
        pre[8] = (unsigned char)(hl + pad);
        fwrite(pre, 1, 12, f); fwrite(h, 1, strlen(h), f);
        while (pad--) fputc(' ', f);
        fputc('\n', f); fwrite(v, 4, 2, f); fclose(f);
        CHECK(cf_npy_read(tmp("v2.npy"), &b) == CF_OK && b.count == 2 && ((float *)b.data)[1] == -2.0f, "npy version 2 header: %s", cf_failure_reason());
        cf_array_free(&b);
        f = fopen(tmp("v2.npy"), "r+b"); fseek(f, -1, SEEK_END); ftruncate(fileno(f), ftell(f)); fclose(f);
        CHECK(cf_npy_read(tmp("v2.npy"), &b) == CF_ERR && strstr(cf_failure_reason(), "truncated"), "truncated npy: %s", cf_failure_reason());
    }
}

static void test_tfrecord(void) {
    int16_t vol[2 * 2 * 2 * 4];
    float y[4] = {0.25f, -0.5f, 0.75f, -1.0f};
    int i, order, gz;
    for (i = 0; i < 32; i++) vol[i] = (int16_t)(i * 3);
    for (order = 0; order < 4; order++) for (gz = 0; gz < 2; gz++) {   /* order: CF_EX_* flags */
        size_t n = cf_example_encode(NULL, "x", vol, sizeof vol, "y", y, 4, order);
        unsigned char *ex = (unsigned char *)malloc(n);
        cf_cosmo_sample s;
        cf_example_encode(ex, "x", vol, sizeof vol, "y", y, 4, order);
        CHECK(cf_tfrecord_write(tmp("r.tfrecord"), ex, n, gz) == CF_OK, "tfrecord write");
        CHECK(cf_cosmo_read(tmp("r.tfrecord"), &s) == CF_OK && s.s == 2 && s.ny == 4 && s.y[3] == -1.0f && !memcmp(s.x, vol, sizeof vol),
              "tfrecord round trip (flags %d, %s): %s", order, gz ? "gzip" : "plain", cf_failure_reason());
        cf_cosmo_free(&s); free(ex);
    }
    {   /* unpacked floats (wire type 5), built by hand: Feature{float_list{1: fixed32, 1: fixed32}} */
        unsigned char ex[64], *p = ex;
        float v[2] = {3.5f, -7.25f}, out[4];
        size_t cnt = 0;
        *p++ = 0x0a; *p++ = 19;                  /* Example.features, 19 bytes */
        *p++ = 0x0a; *p++ = 17;                  /* map entry */
        *p++ = 0x0a; *p++ = 1; *p++ = 'y';       /* key */
        *p++ = 0x12; *p++ = 12;                  /* value: Feature */
        *p++ = 0x12; *p++ = 10;                  /* float_list */
        *p++ = 0x0d; memcpy(p, &v[0], 4); p += 4;
        *p++ = 0x0d; memcpy(p, &v[1], 4); p += 4;
        CHECK(cf_example_floats(ex, (size_t)(p - ex), "y", out, 4, &cnt) == CF_OK && cnt == 2 && out[1] == -7.25f, "unpacked float list: %s", cf_failure_reason());
        CHECK(cf_example_floats(ex, (size_t)(p - ex), "x", out, 4, &cnt) == CF_ERR && strstr(cf_failure_reason(), "missing"), "missing feature named");
    }
    {   /* damage: flipped byte, truncation, wrong length */
        size_t n = cf_example_encode(NULL, "x", vol, sizeof vol, "y", y, 4, 0);
        unsigned char *ex = (unsigned char *)malloc(n + 16);
        cf_cosmo_sample s;
        FILE *f;
        cf_example_encode(ex, "x", vol, sizeof vol, "y", y, 4, 0);
        cf_tfrecord_frame(ex, ex, n);
        ex[30] ^= 1;
        f = fopen(tmp("bad.tfrecord"), "wb"); fwrite(ex, 1, n + 16, f); fclose(f);
        CHECK(cf_cosmo_read(tmp("bad.tfrecord"), &s) == CF_ERR && strstr(cf_failure_reason(), "data CRC mismatch"), "flipped byte: %s", cf_failure_reason());
        ex[30] ^= 1;
        f = fopen(tmp("bad.tfrecord"), "wb"); fwrite(ex, 1, n + 10, f); fclose(f);
        CHECK(cf_cosmo_read(tmp("bad.tfrecord"), &s) == CF_ERR && strstr(cf_failure_reason(), "truncated"), "truncated: %s", cf_failure_reason());
        ex[0] += 1;
        f = fopen(tmp("bad.tfrecord"), "wb"); fwrite(ex, 1, n + 16, f); fclose(f);
        CHECK(cf_cosmo_read(tmp("bad.tfrecord"), &s) == CF_ERR && strstr(cf_failure_reason(), "length CRC"), "wrong length: %s", cf_failure_reason());
        free(ex);
    }
    {   /* x of the wrong size */
        size_t n = cf_example_encode(NULL, "x", vol, 30, "y", y, 4, 0);
        unsigned char *ex = (unsigned char *)malloc(n);
        cf_cosmo_sample s;
        cf_example_encode(ex, "x", vol, 30, "y", y, 4, 0);
        cf_tfrecord_write(tmp("bad.tfrecord"), ex, n, 1);
        CHECK(cf_cosmo_read(tmp("bad.tfrecord"), &s) == CF_ERR && strstr(cf_failure_reason(), "not a (S,S,S,4) volume"), "wrong x size: %s", cf_failure_reason());
        free(ex);
    }
}

static void test_cosmo_input(void) {
    int16_t x[2 * 2 * 2 * 4];
    float out[32], sum = 0;
    int i;
    for (i = 0; i < 32; i++) x[i] = (int16_t)(i % 5);
    cf_cosmo_to_input(out, x, 2, 4, 1);
    /* channels-last (S,S,S,4) -> (4,S,S,S): voxel 1 channel 2 is x[1*4 + 2] */
    CHECK(fabsf(out[2 * 8 + 1] - log1pf((float)x[6])) < 1e-7f && fabsf(out[3 * 8 + 7] - log1pf((float)x[31])) < 1e-7f, "log(1 + x) and the channels-last transpose");
    {   /* the table of log1pf(0..255) and the counts beyond it give log1pf's own bits */
        static const int16_t big[8] = { 0, 1, 254, 255, 256, 300, 32767, 7 };
        int16_t xb[32];
        float ob[32];
        int same = 1;
        for (i = 0; i < 32; i++) xb[i] = big[i % 8];
        cf_cosmo_to_input(ob, xb, 2, 4, 1);
        for (i = 0; i < 32; i++) { float w = log1pf((float)xb[(i % 8) * 4 + i / 8]); same &= memcmp(&w, &ob[i], sizeof w) == 0; }
        CHECK(same, "log(1 + x) of counts 0..32767: the same bits as log1pf");
    }
    cf_cosmo_to_input(out, x, 2, 4, 0);
    for (i = 0; i < 32; i++) sum += out[i];
    CHECK(fabsf(sum / 32 - 1.0f) < 1e-6f && fabsf(out[2 * 8 + 1] - x[6] * 32.0f / 61.0f) < 1e-6f, "x / mean(x) branch (mean %g)", sum / 32);
    cf_cosmo_to_input(out, x, 2, 4, 2);
    {   /* channel 2 holds x[v*4 + 2] = (4v + 2) % 5 for v = 0..7: 2 1 0 4 3 2 1 0, mean 13/8 */
        double want = log1p((double)x[6]) - log1p(13.0 / 8.0);
        CHECK(fabs(out[2 * 8 + 1] - want) < 1e-6, "log-ratio branch: log(1 + x) - log(1 + channel mean): %g vs %g", out[2 * 8 + 1], want);
    }
}

static void test_real_records(void) {
    /* real records of the MLPerf dataset (data/README.md): CF_FIXTURES names their directory */
    const char *dir = getenv("CF_FIXTURES") ? getenv("CF_FIXTURES") : "data/fixtures/cosmoflow";
    static const struct { const char *name; float y[4]; int max; long long sum; } rec[] = {
        {"21688988_univ_ics_2019-03_a10018182_006.tfrecord", {-0.5267246f, -0.1341405f, 0.4718833f, -0.2802058f}, 1019, 8167296},
        {"21688988_univ_ics_2019-03_a10021730_018.tfrecord", {-0.3603292f, 0.3273658f, -0.8659236f, 0.1242608f}, 1028, 9201850},
    };
    int i, k;
    for (i = 0; i < 2; i++) {
        char path[1024];
        cf_cosmo_sample s;
        long long sum = 0; int mx = -1, ok;
        size_t v;
        snprintf(path, sizeof path, "%s/%s", dir, rec[i].name);
        if (access(path, R_OK)) { printf("not checked: real CosmoFlow record %s (absent; set CF_FIXTURES to a directory of real records, data/README.md)\n", rec[i].name); continue; }
        ok = cf_cosmo_read(path, &s) == CF_OK;
        CHECK(ok, "real record %s: %s", rec[i].name, cf_failure_reason());
        if (!ok) continue;
        for (v = 0; v < s.count; v++) { sum += s.x[v]; if (s.x[v] > mx) mx = s.x[v]; }
        for (k = 0; k < 4; k++) ok = ok && fabsf(s.y[k] - rec[i].y[k]) < 1e-6f;
        CHECK(s.s == 128 && ok && mx == rec[i].max && sum == rec[i].sum, "real record %s: S %d labels, max %d sum %lld", rec[i].name, s.s, mx, sum);
        for (k = 1; k <= 3; k++) {   /* re-encoded y before x (1), unpacked (2), both (3): decodes the same */
            size_t n = cf_example_encode(NULL, "x", s.x, s.count * 2, "y", s.y, 4, k);
            unsigned char *ex = (unsigned char *)malloc(n);
            cf_cosmo_sample s2;
            cf_example_encode(ex, "x", s.x, s.count * 2, "y", s.y, 4, k);
            cf_tfrecord_write(tmp("re.tfrecord"), ex, n, 1);
            CHECK(cf_cosmo_read(tmp("re.tfrecord"), &s2) == CF_OK && !memcmp(s2.x, s.x, s.count * 2) && !memcmp(s2.y, s.y, 16) && s2.ny == 4,
                  "real record re-encoded (%s%s) decodes the same", k & 1 ? "y first" : "x first", k & 2 ? ", unpacked floats" : "");
            cf_cosmo_free(&s2); free(ex);
        }
        cf_cosmo_free(&s);
    }
}

/* a box of a CosmoFlow sample (cf_cosmo_read_box) along each axis, from an .npy (read in part)
   and from a gzipped TFRecord (read whole), equals the same voxels of the whole sample */
static void test_cosmo_box(void) {
    enum { S = 6 };
    static int16_t vol[S * S * S * 4];
    float y[4] = {0.5f, 1.5f, -2.0f, 3.0f};
    cf_array a;
    char data[4200];
    int i, axis, first, n, f, bad = 0;
    for (i = 0; i < S * S * S * 4; i++) vol[i] = (int16_t)(i % 5000);
    memset(&a, 0, sizeof a);
    a.dtype = CF_I16; a.ndim = 4; a.shape[0] = a.shape[1] = a.shape[2] = S; a.shape[3] = 4; a.count = S * S * S * 4; a.data = vol;
    snprintf(data, sizeof data, "%s", tmp("u_data.npy"));
    CHECK(cf_npy_write(data, &a) == CF_OK, "the volume as npy");
    a.ndim = 1; a.shape[0] = 4; a.count = 4; a.dtype = CF_F32; a.data = y;
    CHECK(cf_npy_write(tmp("u_label.npy"), &a) == CF_OK, "its labels");
    {
        size_t ne = cf_example_encode(NULL, "x", vol, sizeof vol, "y", y, 4, 0);
        unsigned char *ex = (unsigned char *)malloc(ne);
        cf_example_encode(ex, "x", vol, sizeof vol, "y", y, 4, 0);
        CHECK(cf_tfrecord_write(tmp("u.tfrecord"), ex, ne, 1) == CF_OK, "the volume as a gzipped TFRecord");
        free(ex);
    }
    for (f = 0; f < 2; f++) for (axis = 0; axis < 3; axis++) for (first = 0; first < S; first += 2) for (n = 1; first + n <= S; n += 3) {
        cf_cosmo_sample s;
        int p, q, r, c;
        if (cf_cosmo_read_box(f ? tmp("u.tfrecord") : data, axis, first, n, &s) || s.s != S || s.ny != 4 || s.y[2] != -2.0f || s.count != (size_t)n * S * S * 4) { bad++; continue; }
        for (p = 0; p < (axis == 0 ? n : S); p++) for (q = 0; q < (axis == 1 ? n : S); q++) for (r = 0; r < (axis == 2 ? n : S); r++) for (c = 0; c < 4; c++) {
            int o[3]; o[0] = p; o[1] = q; o[2] = r; o[axis] += first;
            bad += s.x[(((size_t)p * (axis == 1 ? n : S) + q) * (axis == 2 ? n : S) + r) * 4 + c] != vol[(((size_t)o[0] * S + o[1]) * S + o[2]) * 4 + c];
        }
        cf_cosmo_free(&s);
    }
    CHECK(!bad, "boxes along each axis of an npy and a TFRecord sample equal the whole's voxels (%d differ)", bad);
    {
        cf_cosmo_sample s;
        CHECK(cf_cosmo_read_box(data, 0, 4, 3, &s) == CF_ERR && strstr(cf_failure_reason(), "[4, 7)") && strstr(cf_failure_reason(), "has 6"), "a box past the volume: %s", cf_failure_reason());
        CHECK(cf_cosmo_read_box(tmp("u.tfrecord"), 2, 6, 1, &s) == CF_ERR && strstr(cf_failure_reason(), "[6, 7)"), "a box past a TFRecord's volume: %s", cf_failure_reason());
        CHECK(cf_cosmo_read_box(data, 3, 0, 1, &s) == CF_ERR && strstr(cf_failure_reason(), "axis 3"), "axis 3 refused: %s", cf_failure_reason());
    }
}

int main(int argc, char **argv) {
    char dir[] = "/tmp/cf-test-XXXXXX";
    if (argc > 1 && !strcmp(argv[1], "--bf16-sweep")) {   /* make test-bf16: every one of the 2^32 inputs */
        test_bf16_conversion((uint64_t)1 << 32);
        return check_summary();
    }
    tmpdir = mkdtemp(dir);
    test_basics();
    test_sgemm();
    test_conv_oracle();
    test_conv_tiles();
    test_conv_direct();
    test_fast_paths();
    test_direct_long_sums();
    test_bias_grad_bits();
    test_bf16_conversion((uint64_t)1 << 24);
    test_gemm_f32();
    test_bf16_forms();
    test_bf16_gemm();
    test_bf16_gemm_col();
    test_bf16_paths();
    test_bf16_rows();
    test_bf16_strided_pw();
    test_rows_past_the_row();
    test_made_rows();
    test_bf16_deconv();
    test_layer_oracles();
    test_gradcheck_conv();
    test_gradcheck_layers();
    test_gradcheck_net();
    test_pool_fusion();
    test_halves();
    test_halves_bn();
    test_halves_tiles_band();
    test_bf16_stored();
    test_memory_plan();
    test_grad_stores();
    test_models();
    test_cfg_errors();
    test_pytorch_reference();
    test_seg_reference();
    test_iou();
    test_schedules();
    test_larc_and_lag();
    test_checkpoints();
    test_npy();
    test_tfrecord();
    test_cosmo_box();
    test_cosmo_input();
    test_real_records();
    {   char cmd[600]; snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir); if (system(cmd)) {} }
    return check_summary();
}
