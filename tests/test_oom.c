/* Out of memory, at every allocation: the header's allocator override (CF_MALLOC, CF_FREE)
   here counts the library's allocations and refuses the k-th.  For each k in turn a small net
   is parsed, trained two steps and freed.  A call may then report the failure (CF_ERR with a
   reason, nothing leaked: built under LeakSanitizer too), or complete: a fast path whose
   buffer was refused falls back to another path, which must compute what the run with every
   allocation granted computed (its losses, its gradients and its weights).  In fp32 the
   fallbacks sum in another order: the depthwise backward's rows path, with OpenMP's vector
   sums, moves the second step's gradients by 4.5e-4 and the weights by 1.1e-5 (relative L2;
   batch norm over two samples of a small map amplifies); in a build without a BLAS, where kind
   gemm's GEMM takes the BLAS's GEMMs and falls back to cf_sgemm's double sums when its
   buffers are refused, by up to 1.6e-3 and 5.8e-4 on the plane net (a 1e-7 difference in one
   GEMM's sums, amplified as above).  In bf16 the GEMM's fallback is the emulation
   (cf_sgemm on the same rounded operands): on the plane net the emulation itself moves the
   gradients by 0.044 and the weights by 9e-4 (relative L2) from the bf16 kernels' after two
   steps, a rounding flipped in the first feeding the second; hence looser bounds there.  The
   faults this test found (a fallback that added into a gradient it was to store) moved them
   by 0.31 and 0.014-0.037.  Two nets (a CosmoFlow-like 3-D net whose
   convolutions fuse with their pools, a DeepCAM-like 2-D net with depthwise, dilated,
   transposed convolutions, batch norm, routes and LAMB), each in fp32 and bf16. */
#include <stdlib.h>
#include <string.h>

static long oom_count, oom_fail_at = -1;
static void *oom_malloc(size_t n) {
    long k = __atomic_fetch_add(&oom_count, 1, __ATOMIC_RELAXED);   /* (threads allocate too) */
    return k == oom_fail_at ? NULL : malloc(n);
}
#define CF_MALLOC(n) oom_malloc(n)
#define CF_FREE(p) free(p)
#define CF_IMPLEMENTATION
#include "cosmoflow.h"
#include "check.h"

static const char *cube_cfg =   /* direct-kernel widths; conv + max pool pairs fuse (16-bit halves in bf16); the last
                                   conv's operands fp32 (the bf16 GEMM with buffers of its own, and their fallback) */
    "[net]\ninput=2x4x8x32\nloss=mse\n"
    "[conv]\nfilters=4\nsize=3\npad=same\nactivation=leaky\nslope=0.3\n[maxpool]\nsize=2\n"
    "[conv]\nfilters=6\nsize=3\npad=same\nactivation=leaky\nslope=0.3\n[maxpool]\nsize=2\n"
    "[conv]\nfilters=4\nsize=1\nactivation=relu\n[conv]\nfilters=4\nsize=1\nactivation=relu\n"
    "[flatten]\n[dense]\noutputs=5\nactivation=relu\n[dense]\noutputs=3\n";
static const char *plane_cfg =   /* segmentation: LAMB, softmax cross-entropy */
    "[net]\ninput=4x16x40\nloss=softmax_ce\n"
    "[conv]\nfilters=8\nsize=3\npad=same\n[batchnorm]\nactivation=relu\n"
    /* (the depthwise conv dilated: the kernel that takes a buffer of its own, whose refusal the
       sweep must see absorbed; the stride-1 vector kernel, cf__dwv_*, takes none) */
    "[conv]\nfilters=8\nsize=3\ndilation=2\npad=2\ngroups=8\n[conv]\nfilters=8\nsize=1\n[batchnorm]\nactivation=relu\n"
    "[conv]\nfilters=8\nsize=3\ndilation=2\npad=2\nactivation=relu\n[add]\nlayers=-1,-2\n"
    "[conv]\nfilters=8\nsize=3\nstride=2\npad=1\n[route]\nlayers=-1\n"
    "[deconv]\nfilters=8\nsize=3\nstride=2\npad=1\noutput_padding=1\n[route]\nlayers=-1,-5\n"
    "[conv]\nfilters=3\nsize=3\npad=same\n";

typedef struct { double loss[2]; float *params, *grads; size_t n; } outcome;

/* parse, train two steps, keep what they computed; 0 when every call completed, else 1 (the
   failing call reported CF_ERR or a NULL), with everything freed either way */
static int train_two(const char *cfg, const char *name, int precision, const float *x, const float *t, int B, outcome *o) {
    cf_net net;
    cf_train_config c;
    cf_trainer tr;
    cf_step_result r;
    int s, failed = 0;
    if (cf_net_parse(&net, cfg, name, NULL) != CF_OK) return 1;
    cf_net_init(&net, 7);
    cf_train_defaults(&c);
    c.lr = 0.05; c.precision = precision;
    if (cf_train_init(&tr, &net, &c) != CF_OK) { cf_net_free(&net); return 1; }
    for (s = 0; s < 2 && !failed; s++) {
        failed = cf_train_step(&tr, x, t, B, &r) != CF_OK;
        o->loss[s] = r.loss;
    }
    if (!failed) {
        o->n = net.n_params;
        o->params = (float *)malloc(sizeof(float) * o->n); o->grads = (float *)malloc(sizeof(float) * o->n);
        memcpy(o->params, net.params, sizeof(float) * o->n); memcpy(o->grads, net.grads, sizeof(float) * o->n);
    }
    cf_train_free(&tr);
    cf_net_free(&net);
    return failed;
}

/* the relative L2 distance of a from b */
static double rel_l2(const float *a, const float *b, size_t n) {
    double num = 0, den = 0;
    size_t i;
    for (i = 0; i < n; i++) { num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]); den += (double)b[i] * b[i]; }
    return num == num ? sqrt(num / (den > 0 ? den : 1)) : 1e30;
}

typedef struct { double loss, grads, weights; } bounds;   /* relative; gradients and weights: L2 */

/* every allocation of the run refused in turn; returns how many refusals a fallback absorbed */
static long sweep(const char *cfg, const char *name, int precision, bounds tol) {
    cf_net probe;
    outcome ref, o;
    cf_rng rng = cf_rng_seed(3);
    long k, n_allocs, reported = 0, completed = 0, wrong = 0;
    int B = 2, i, seg;
    size_t nx, nt;
    float *x, *t;
    if (cf_net_parse(&probe, cfg, name, NULL) != CF_OK) { CHECK(0, "%s parses: %s", name, cf_failure_reason()); return 0; }
    nx = (size_t)B * cf_shape_size(probe.input); nt = (size_t)B * probe.n_targets;   /* (softmax_ce: a class id a pixel) */
    seg = probe.loss == CF_LOSS_SOFTMAX_CE;
    cf_net_free(&probe);
    x = (float *)malloc(sizeof(float) * nx); t = (float *)malloc(sizeof(float) * nt);
    for (i = 0; i < (int)nx; i++) x[i] = 2 * cf_rng_uniform(&rng) - 1;
    for (i = 0; i < (int)nt; i++) t[i] = seg ? (float)(i % 3) : 2 * cf_rng_uniform(&rng) - 1;
    memset(&ref, 0, sizeof ref);
    oom_fail_at = -1; oom_count = 0;
    if (train_two(cfg, name, precision, x, t, B, &ref)) { CHECK(0, "%s %s: trains with every allocation granted: %s", name, cf_precision_name(precision), cf_failure_reason()); free(x); free(t); return 0; }
    n_allocs = oom_count;
    for (k = 0; k < n_allocs; k++) {
        memset(&o, 0, sizeof o);
        oom_fail_at = k; oom_count = 0;
        if (train_two(cfg, name, precision, x, t, B, &o)) {
            reported++;
            CHECK(cf_failure_reason()[0] != 0, "%s %s, allocation %ld refused: a call failed with no reason", name, cf_precision_name(precision), k);
            continue;
        }
        completed++;
        if (!(fabs(o.loss[0] - ref.loss[0]) <= tol.loss * fabs(ref.loss[0]) && fabs(o.loss[1] - ref.loss[1]) <= tol.loss * fabs(ref.loss[1]) &&
              rel_l2(o.grads, ref.grads, ref.n) <= tol.grads && rel_l2(o.params, ref.params, ref.n) <= tol.weights)) {
            wrong++;
            CHECK(0, "%s %s, allocation %ld refused: completed with other numbers: losses %.9g %.9g against %.9g %.9g, gradients %.3g, weights %.3g "
                  "(bounds %.0e, %.0e, %.0e)", name, cf_precision_name(precision), k, o.loss[0], o.loss[1], ref.loss[0], ref.loss[1],
                  rel_l2(o.grads, ref.grads, ref.n), rel_l2(o.params, ref.params, ref.n), tol.loss, tol.grads, tol.weights);
        }
        free(o.params); free(o.grads);
    }
    printf("ok  %s %s: %ld allocations; each refused in turn: %ld reported, %ld completed (%ld with other numbers)\n", name,
           cf_precision_name(precision), n_allocs, reported, completed, wrong);
    CHECK(reported > 0, "%s %s: a refusal in parsing is reported", name, cf_precision_name(precision));
    oom_fail_at = -1;
    free(ref.params); free(ref.grads); free(x); free(t);
    return completed;
}

/* The bf16 paths that make im2col's rows as they pack them (DeepCAM's ASPP convolutions, too
   big for the workspace in the nets above): when the GEMM's buffers are refused they take the
   sample on by the reference's tiles, which, with a workspace holding all positions, are the
   GEMMs of the im2col path: the same bits, whichever allocation is refused. */
static float *bf16_values(size_t n, cf_rng *r) {
    float *p = (float *)malloc(sizeof(float) * (n + 1));
    size_t i;
    for (i = 0; i < n; i++) p[i] = 2 * cf_rng_uniform(r) - 1;
    cf_bf16_round(p, n);
    return p;
}
static void cols_fallback(void) {
#ifdef CF__BF16
    cf_shape in = {24, 1, 12, 18}, out = {11, 1, 12, 18};
    cf_geom g = {{1, 3, 3}, {1, 1, 1}, {1, 6, 6}, {0, 6, 6}, {0, 6, 6}};   /* k, s, dil, pad before, after: a dilation of 6 */
    cf_rng r = cf_rng_seed(5);
    int B = 3, K = 24 * 9;
    size_t ny = (size_t)B * cf_shape_size(out), nw = (size_t)11 * K, ws = (size_t)K * 12 * 18;
    float *x = bf16_values((size_t)B * cf_shape_size(in), &r), *w = bf16_values(nw, &r), *b = bf16_values(11, &r), *dy = bf16_values(ny, &r);
    float *col = (float *)malloc(sizeof(float) * ws), *y0 = (float *)malloc(sizeof(float) * ny), *y = (float *)malloc(sizeof(float) * ny);
    float *dw0 = bf16_values(nw, &r), *dw1 = (float *)malloc(sizeof(float) * nw), *dw = (float *)malloc(sizeof(float) * nw);
    cf__conv_call c = cf__conv_make(B, in, out, &g, 1, col, ws, 1);
    long k, n_fwd, n_bww, same = 0;
    if (!cf__has_bf16()) { printf("skipped: the bf16 im2col-free paths out of memory (the CPU lacks AVX512_BF16)\n"); goto done; }
    c.x = x; c.w = w; c.b = b; c.act = CF_ACT_RELU; c.dy = dy;
    c.y = y0; cf__bf16_im2col_fwd(&c);   /* the oracle: im2col + the bf16 GEMM */
    memcpy(dw1, dw0, sizeof(float) * nw); c.dw = dw1; cf__bf16_im2col_bww(&c);
    oom_fail_at = -1; oom_count = 0; c.y = y; cf__bf16_cols_fwd(&c); n_fwd = oom_count;
    oom_count = 0; memcpy(dw, dw0, sizeof(float) * nw); c.dw = dw; cf__bf16_cols_bww(&c); n_bww = oom_count;
    for (k = 0; k < n_fwd; k++) {
        oom_fail_at = k; oom_count = 0;
        memset(y, 0xff, sizeof(float) * ny);   /* NaN: nothing left from before */
        cf__bf16_cols_fwd(&c);
        same += !memcmp(y, y0, sizeof(float) * ny);
    }
    for (k = 0; k < n_bww; k++) {
        oom_fail_at = k; oom_count = 0;
        memcpy(dw, dw0, sizeof(float) * nw);
        cf__bf16_cols_bww(&c);
        same += !memcmp(dw, dw1, sizeof(float) * nw);
    }
    oom_fail_at = -1;
    printf("ok  the bf16 im2col-free paths: %ld and %ld allocations (forward, backward-weights), each refused in turn\n", n_fwd, n_bww);
    CHECK(n_fwd >= B && n_bww >= B && same == n_fwd + n_bww, "the bf16 im2col-free paths with an allocation refused: the bits of im2col + the bf16 GEMM in %ld of %ld runs",
          same, n_fwd + n_bww);
done:
    free(x); free(w); free(b); free(dy); free(col); free(y0); free(y); free(dw0); free(dw1); free(dw);
#else
    printf("skipped: the bf16 im2col-free paths out of memory (not compiled in)\n");
#endif
}

int main(void) {
    bounds fp32 = {1e-5, 3e-3, 1e-3}, bf16 = {1e-4, 0.1, 5e-3};
    long absorbed[4];
#ifdef CF__AVX512
    int avx512 = cf__has_avx512();
#else
    int avx512 = 0;
#endif
    cols_fallback();
    absorbed[0] = sweep(cube_cfg, "oom-cube.cfg", CF_FP32, fp32);   /* (its paths take no buffer of their own: none absorbed) */
    cf_bf16_form_set("dot");   /* (the dot form here, the FMA form below: whichever the probe would pick) */
    absorbed[1] = sweep(cube_cfg, "oom-cube.cfg", CF_BF16, bf16);
    cf_bf16_form_set("auto");
    absorbed[2] = sweep(plane_cfg, "oom-plane.cfg", CF_FP32, fp32);
    absorbed[3] = sweep(plane_cfg, "oom-plane.cfg", CF_BF16, bf16);
    /* the fallbacks were reached: the depthwise convolutions' (both nets' precisions; in bf16 on
       a CPU without AVX-512 its depthwise convs read 16-bit inputs, their buffers the workspace's:
       none of their own to refuse), the bf16 GEMM's (where this CPU runs it) */
    CHECK(absorbed[2] > 0 && (absorbed[3] > 0 || !avx512), "the depthwise convolutions' fallbacks were reached (%ld, %ld refusals absorbed)",
          absorbed[2], absorbed[3]);
    CHECK(!strncmp(cf_bf16_kernels(), "the emulation", 13) || absorbed[1] > 0, "the bf16 GEMM's fallbacks were reached (%ld refusals absorbed)", absorbed[1]);
    {   /* the dot step's FMA form: its widened kernel (the direct kernel's) refused falls back on the dot form, the same bits */
        long fma;
        cf_bf16_form_set("fma");
        fma = sweep(cube_cfg, "oom-cube.cfg", CF_BF16, bf16);
        cf_bf16_form_set("auto");
        CHECK(!strncmp(cf_bf16_kernels(), "the emulation", 13) || fma > absorbed[1],
              "the FMA form's widened kernels refused and absorbed: %ld refusals absorbed, the dot form's %ld", fma, absorbed[1]);
    }
    (void)absorbed[0];
    return check_summary();
}
