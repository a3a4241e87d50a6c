/* onednn-peer: every convolution layer of a cfg network timed in oneDNN and in cosmoflow.h, in one
   process, the two alternated.  A benchmark program: neither the header nor the tools depend on it.

   For each distinct [conv] layer of the network (identical ones, same shapes, geometry, groups,
   bias and whether the training step computes their input gradient, are timed once and counted
   with their multiplicity) and each precision:
     ours    a one-conv network in cfg text, "[net] input=<the layer's input> loss=mse" and that
             [conv] (activation linear), in training mode, with cf_net_set_input_grad where the
             real network computes backward-data (every layer but one reading the network input);
             in bf16, a depthwise conv whose output and its gradient the network stores in 16 bits
             (its one reader a pointwise conv) sits between two pointwise convs with identity
             weights, so that the plan stores them so here too (the "ours layer" line), and a
             conv whose input and its gradient the network stores in 16 bits (a depthwise
             conv's output) reads an identity depthwise conv's, after an identity pointwise one;
             a conv the network fuses with the max pool after it (CosmoFlow's: its output stored
             in 16 bits, the pool's backward writing the gradient there) and one whose one reader
             is a batch norm are timed with that layer after them, and one that reads a max pool's
             output the network stores in 16 bits (with the gradient over it) after a max pool of
             an identity pointwise conv (the hook times the conv alone);
             a repetition is cf_net_forward + cf_net_backward, the conv's forward, backward-weights
             and backward-data timed by cf_net_set_layer_hook, as cf-bench --layers times them;
     oneDNN  forward_training, backward_data and backward_weights primitives (convolution_direct),
             memory formats format_tag_any (oneDNN's blocked layouts; the reorders into them are
             not timed), each timed around dnnl_primitive_execute + dnnl_stream_wait; bf16: src,
             weights, dst, diff_dst and diff_src bf16, diff_weights and bias fp32.
   Both start from the same random input, weights and output gradient (bf16: rounded to bf16
   values first, so both compute with the same operands).  The first run of both is untimed
   and checks that they agree: max |oneDNN - ours| / max |ours| of the output, the weight and
   bias gradients and the input gradient within 1e-4 (fp32) or 2e-2 (bf16); a layer that
   disagrees gets no ratio.  Then REPS repetitions, ours first in even ones and oneDNN first in
   odd ones; medians.  ratio = oneDNN ms / ours ms: above 1, ours is faster.
   A depthwise layer's backward runs weights and data in one pass in ours: its bwd-w column is
   both (oneDNN's two primitives summed), its bwd-d column empty.

   Build: make bin/onednn-peer (needs libdnnl-dev); make bench-onednn runs bench/onednn.sh. */
#define CF_IMPLEMENTATION
#include "cosmoflow.h"
#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <time.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#ifdef CF_USE_CBLAS
extern char *openblas_get_corename(void);
extern void openblas_set_num_threads(int);
#endif

enum { FWD, BWW, BWD, NDIR };
static const char *dir_name[NDIR] = {"fwd", "bwd-w", "bwd-d"};

static void die(const char *where, const char *fmt, ...) {
    va_list ap;
    fflush(stdout);
    fprintf(stderr, "onednn-peer: %s: ", where);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}
#define DN(call, where) do { dnnl_status_t st_ = (call); \
    if (st_ != dnnl_success) die(where, "%s: %s", #call, dnnl_status2str(st_)); } while (0)

/* the file name of a path: the model's name in the last lines */
static const char *base_name(const char *path) { return strrchr(path, '/') ? strrchr(path, '/') + 1 : path; }
static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}
static double median(double *v, int n) {
    int i, j;
    for (i = 0; i < n; i++) for (j = i + 1; j < n; j++) if (v[j] < v[i]) { double t = v[i]; v[i] = v[j]; v[j] = t; }
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
static float *floats(size_t n, const char *what) {
    float *p = (float *)calloc(n ? n : 1, sizeof(float));
    if (!p) die(what, "out of memory for %zu floats", n);
    return p;
}
/* max |a - b| / max |b| over n values (0 when both are zero; a NaN counts as infinite) */
static double rel_err(const float *a, const float *b, size_t n) {
    double d = 0, s = 0;
    size_t i;
    for (i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]);
        if (!(e <= d)) d = e == e ? e : INFINITY;
        if (fabs(b[i]) > s) s = fabs(b[i]);
    }
    return d == 0 ? 0 : s > 0 ? d / s : INFINITY;
}

/* ---- the layers: the network's [conv] layers, identical ones merged */
typedef struct {
    cf_layer l;          /* the first of them (shapes, geometry, groups, bias) */
    int bwd_data;        /* the training step computes its input gradient */
    int n, *idx;         /* the layers it stands for */
    const char *net_path[NDIR];   /* the path each op takes inside the whole network (batch B) */
    int half_out;        /* the network stores its output and their gradient in 16 bits (bf16) */
    int half_in;         /* ... its input and the gradient over it, a depthwise conv's output (bf16) */
    int pool[3];         /* the max pool the network fuses with it (its window; zeros: none) */
    int out_bits;        /* ... and the bits the network stores its output in (cf_net_stored_bits) */
    int pool_in[3];      /* the max pool whose output it reads, both stored in 16 bits (window; zeros: none) */
    cf_shape pool_src;   /* ... that pool's input */
} peer_layer;
static int same_layer(const peer_layer *p, const cf_layer *l, int bwd_data) {
    const cf_layer *a = &p->l;
    return p->bwd_data == bwd_data && !memcmp(&a->in, &l->in, sizeof l->in) &&
           !memcmp(&a->out, &l->out, sizeof l->out) &&
           !memcmp(&a->g, &l->g, sizeof l->g) && a->groups == l->groups && a->has_bias == l->has_bias &&
           a->depthwise == l->depthwise;
}
/* the window of the max pool whose output conv i reads, the network storing that output and the
   gradient over it in 16 bits, into k, its input's shape into src; 0 for none */
static int pool_read(const cf_net *net, int i, int *k, cf_shape *src);
/* the network stores layer i's output and the gradient over it in 16 bits */
static int stored_half(const cf_net *net, int i) {
    return i >= 0 && cf_net_stored_bits(net, i, 0) == 16 && cf_net_stored_bits(net, i, 1) == 16;
}
static int is2d(const cf_layer *l) { return l->in.d == 1; }
static int pool_read(const cf_net *net, int i, int *k, cf_shape *src) {
    int j = net->layers[i].src[0], a;
    memset(k, 0, 3 * sizeof *k);
    memset(src, 0, sizeof *src);
    if (j < 0 || net->layers[j].type != CF_L_MAXPOOL || !stored_half(net, j)) return 0;
    for (a = 0; a < 3; a++) {
        k[a] = net->layers[j].g.k[a];
        if (net->layers[j].g.s[a] != k[a] || net->layers[j].g.pb[a] || net->layers[j].g.pa[a]) return 0;
    }
    *src = net->layers[j].in;
    return 1;
}
/* the window of the max pool the network fuses with conv i (its one reader, the gradient over
   the conv's output living in that output: cf_net_stored_bits 0) into k; 0 for none */
static int fused_pool(const cf_net *net, int i, int *k) {
    int j, a;
    memset(k, 0, 3 * sizeof *k);
    if (cf_net_stored_bits(net, i, 1) != 0) return 0;
    for (j = i + 1; j < net->n_layers; j++)
        if (net->layers[j].type == CF_L_MAXPOOL && net->layers[j].src[0] == i) {
            for (a = 0; a < 3; a++) k[a] = net->layers[j].g.k[a];
            return 1;
        }
    return 0;
}
/* "conv 32->64 3x3x3 @64^3" (+ " s2" stride, " d2" dilation, " g4" groups, " dw" depthwise, " bias") */
static void layer_text(const cf_layer *l, char *b, size_t n) {
    const cf_geom *g = &l->g;
    int d2 = is2d(l), a0 = d2 ? 1 : 0, k = 0, a;
    char sp[48];
    if (!d2 && l->in.d == l->in.h && l->in.h == l->in.w) snprintf(sp, sizeof sp, "%d^3", l->in.d);
    else if (d2) snprintf(sp, sizeof sp, "%dx%d", l->in.h, l->in.w);
    else snprintf(sp, sizeof sp, "%dx%dx%d", l->in.d, l->in.h, l->in.w);
    k += snprintf(b + k, n - k, "conv %d->%d ", l->in.c, l->out.c);
    for (a = a0; a < 3; a++) k += snprintf(b + k, n - k, a > a0 ? "x%d" : "%d", g->k[a]);
    k += snprintf(b + k, n - k, " @%s", sp);
    if (g->s[1] > 1 || g->s[2] > 1 || (!d2 && g->s[0] > 1)) k += snprintf(b + k, n - k, " s%d", g->s[2]);
    if (g->dil[1] > 1 || g->dil[2] > 1 || (!d2 && g->dil[0] > 1)) k += snprintf(b + k, n - k, " d%d", g->dil[2]);
    if (l->depthwise) k += snprintf(b + k, n - k, " dw");
    else if (l->groups > 1) k += snprintf(b + k, n - k, " g%d", l->groups);
    if (l->has_bias) snprintf(b + k, n - k, " bias");
}
/* the network's conv layers at batch B (only layer `only` when >= 0), merged; the paths each
   takes inside the whole network, from cf_net_path after cf_net_set_batch */
static peer_layer *list_layers(const char *model, int B, int precision, int only, int *n_out) {
    cf_net net;
    peer_layer *p;
    int i, j, n = 0;
    memset(&net, 0, sizeof net);
    if (cf_net_load_cfg(&net, model, NULL)) die(model, "%s", cf_failure_reason());
    if (only >= net.n_layers || (only >= 0 && net.layers[only].type != CF_L_CONV))
        die("--layer", "%d is not a [conv] layer of %s (it has %d layers)", only, model, net.n_layers);
    if (cf_net_set_precision(&net, precision) || cf_net_set_batch(&net, B)) die(model, "%s", cf_failure_reason());
    p = (peer_layer *)calloc(net.n_layers + 1, sizeof *p);
    if (!p) die(model, "out of memory");
    for (i = 0; i < net.n_layers; i++) {
        const cf_layer *l = &net.layers[i];
        int bd = l->src[0] >= 0;
        if (l->type != CF_L_CONV || (only >= 0 && i != only)) continue;
        int hi = l->src[0] >= 0 && net.layers[l->src[0]].depthwise && stored_half(&net, l->src[0]), pool[3], pin[3];
        cf_shape psrc;
        fused_pool(&net, i, pool);
        pool_read(&net, i, pin, &psrc);
        for (j = 0; j < n && !(same_layer(&p[j], l, bd) && p[j].half_out == stored_half(&net, i) &&
                               p[j].half_in == hi && !memcmp(p[j].pool, pool, sizeof pool) &&
                               !memcmp(p[j].pool_in, pin, sizeof pin)); j++) {}
        if (j == n) {
            p[n].l = *l; p[n].bwd_data = bd; p[n].idx = (int *)calloc(net.n_layers, sizeof(int));
            if (!p[n].idx) die(model, "out of memory");
            for (j = 0; j < NDIR; j++) p[n].net_path[j] = cf_net_path(&net, i, j);
            p[n].half_out = stored_half(&net, i);
            p[n].half_in = hi;
            memcpy(p[n].pool, pool, sizeof pool);
            p[n].out_bits = cf_net_stored_bits(&net, i, 0);
            memcpy(p[n].pool_in, pin, sizeof pin);
            p[n].pool_src = psrc;
            j = n++;
        }
        p[j].idx[p[j].n++] = i;
    }
    if (!n) die(model, "no [conv] layer");
    cf_net_free(&net);
    *n_out = n;
    return p;
}

/* ---- ours: the layer alone in a one-conv network */
typedef struct { double t[NDIR], start; int split, at; } layer_clock;   /* at: the layer timed */
/* the layer hook: phase 0/1 around the forward, 2/3 around the backward, 4 between a
   convolution's backward-weights and backward-data (a depthwise one has none) */
static void time_layer(cf_net *net, int layer, int phase, void *ctx) {
    layer_clock *c = (layer_clock *)ctx;
    double t = now_s();
    (void)net;
    if (layer != c->at) return;   /* (the identity layers around it, below) */
    if (phase == 0 || phase == 2) { c->start = t; c->split = 0; }
    else if (phase == 1) c->t[FWD] = t - c->start;
    else if (phase == 4) { c->t[BWW] = t - c->start; c->start = t; c->split = 1; }
    else c->t[c->split ? BWD : BWW] = t - c->start;
}
typedef struct {
    cf_net net;
    layer_clock clock;
    int at;               /* the layer in the network (after the identity layers before it) */
    float *x, *dy, *dx;   /* input, output gradient (the loss's), input gradient (or NULL) */
} ours_conv;
static void axes_text(const int *v, int d2, char *b, size_t n) {
    if (d2) snprintf(b, n, "%dx%d", v[1], v[2]);
    else snprintf(b, n, "%dx%dx%d", v[0], v[1], v[2]);
}
/* after (the timed networks of a conv whose output the network stores in 16 bits, measure):
   AFTER_BN, a batch norm reads the layer's output; AFTER_BN_ONE, and the layer reads an
   identity pointwise conv's output where nothing else is before it; AFTER_POOL, the max pool
   the network fuses with it reads it.  pool_before: the layer reads the output of a max pool
   (the network's window) fused with an identity pointwise conv, both stored in 16 bits as the
   network stores the max pool it reads (the timed network's input then the pool's input). */
enum { AFTER_NONE, AFTER_BN, AFTER_BN_ONE, AFTER_POOL };
static void ours_make(ours_conv *o, const peer_layer *p, int B, int precision, int after, int pool_before) {
    const cf_layer *l = &p->l;
    char cfg[1024], in[64], k[32], s[32], dl[32], pad[64], one[128] = "", before[256] = "";
    int d2 = is2d(l), a;
    cf_shape x_in = pool_before ? p->pool_src : l->in;   /* the timed network's input */
    size_t nx = (size_t)B * cf_shape_size(x_in), ny = (size_t)B * cf_shape_size(l->out);
    memset(o, 0, sizeof *o);
    if (d2 && (l->g.k[0] != 1 || l->g.pb[0] || l->g.pa[0]))
        die("layer", "%d: a 3-D kernel on an input of depth 1 is not compared here", p->idx[0]);
    if (d2) snprintf(in, sizeof in, "%dx%dx%d", x_in.c, x_in.h, x_in.w);
    else snprintf(in, sizeof in, "%dx%dx%dx%d", x_in.c, x_in.d, x_in.h, x_in.w);
    axes_text(l->g.k, d2, k, sizeof k); axes_text(l->g.s, d2, s, sizeof s); axes_text(l->g.dil, d2, dl, sizeof dl);
    pad[0] = 0;
    for (a = d2 ? 1 : 0; a < 3; a++)
        snprintf(pad + strlen(pad), sizeof pad - strlen(pad), "%s%d,%d", pad[0] ? "," : "", l->g.pb[a], l->g.pa[a]);
    /* Where the network stores the layer's output and its gradient in 16 bits (a bf16
       depthwise conv whose one reader is a pointwise conv, its input from a layer), the layer
       reads the output of a pointwise conv with the identity as its weights, and another
       reads its output, so that the plan stores them as the network does: the network's
       output is the layer's, its input and output gradient the layer's, bit for bit (products
       with 1 and 0; the values are bf16's), and the hook times the layer alone. */
    if (precision == CF_BF16 && p->half_out && l->depthwise && p->bwd_data) {
        snprintf(one, sizeof one, "[conv]\nfilters=%d\nsize=1\nbias=0\nactivation=linear\n", l->out.c);
        snprintf(before, sizeof before, "%s", one);
        o->at = 1;
    }
    /* Where the network stores the layer's input and the gradient over it in 16 bits (a conv
       after a depthwise conv that stores its output so), the layer reads the output of a
       depthwise 3x3 conv with the identity as its weights (the centre tap 1), itself after an
       identity pointwise conv (a depthwise conv reading the network's input stores its output
       in fp32): the plan stores the layer's input and dx as the network does. */
    if (precision == CF_BF16 && p->half_in && !l->depthwise && p->bwd_data) {
        snprintf(before, sizeof before, "[conv]\nfilters=%d\nsize=1\nbias=0\nactivation=linear\n"
                 "[conv]\nfilters=%d\nsize=3\npad=1\ngroups=%d\nbias=0\nactivation=linear\n", l->in.c, l->in.c,
                 l->in.c);
        o->at = 2;
    }
    if (after == AFTER_BN || after == AFTER_BN_ONE) snprintf(one, sizeof one, "[batchnorm]\n");
    if (after == AFTER_POOL) {
        char pk[32];
        axes_text(p->pool, d2, pk, sizeof pk);
        snprintf(one, sizeof one, "[maxpool]\nsize=%s\nstride=%s\n", pk, pk);
    }
    if (pool_before) {
        char pk[32];
        axes_text(p->pool_in, d2, pk, sizeof pk);
        snprintf(before, sizeof before, "[conv]\nfilters=%d\nsize=1\nbias=0\nactivation=linear\n"
                 "[maxpool]\nsize=%s\nstride=%s\n", l->in.c, pk, pk);
        o->at = 2;
    }
    if (after == AFTER_BN_ONE && !before[0]) {
        snprintf(before, sizeof before, "[conv]\nfilters=%d\nsize=1\nbias=0\nactivation=linear\n", l->in.c);
        o->at = 1;
    }
    snprintf(cfg, sizeof cfg, "[net]\ninput=%s\nloss=mse\n%s[conv]\nfilters=%d\nsize=%s\nstride=%s\ndilation=%s\n"
             "pad=%s\ngroups=%d\nbias=%d\nactivation=linear\n%s", in, before, l->out.c, k, s, dl, pad, l->groups,
             l->has_bias, one);
    if (cf_net_parse(&o->net, cfg, "the one-conv network", NULL) || cf_net_init(&o->net, 1) ||
        cf_net_set_precision(&o->net, precision))
        die("layer", "%d: %s", p->idx[0], cf_failure_reason());
    if (memcmp(&o->net.layers[o->at].g, &l->g, sizeof l->g) ||
        memcmp(&o->net.layers[o->at].out, &l->out, sizeof l->out))
        die("layer", "%d: the one-conv network's geometry differs from the layer's", p->idx[0]);
    cf_net_set_mode(&o->net, CF_MODE_TRAIN);
    o->x = floats(nx, "the input"); o->dy = floats(ny, "the output gradient");
    /* (after a pool the layer's input gradient is the network's own: the network input's is not asked for) */
    if (p->bwd_data && !pool_before) {
        o->dx = floats(nx, "the input gradient");
        cf_net_set_input_grad(&o->net, o->dx);
    }
    o->clock.at = o->at;
    cf_net_set_layer_hook(&o->net, time_layer, &o->clock);
}
/* random input, weights, bias and output gradient; bf16: rounded to bf16 values */
static void ours_fill(ours_conv *o, int B, int precision) {
    const cf_layer *l = &o->net.layers[o->at];
    size_t nx = (size_t)B * cf_shape_size(o->net.layers[0].in), ny = (size_t)B * cf_shape_size(l->out), i;
    int k;
    float *w = o->net.params + l->w_off, scale = (float)(1 / sqrt((double)l->w_n / l->out.c));
    cf_rng r = cf_rng_seed(20 + (uint64_t)l->out.c);
    for (i = 0; i < nx; i++) o->x[i] = 2 * cf_rng_uniform(&r) - 1;
    for (i = 0; i < ny; i++) o->dy[i] = 2 * cf_rng_uniform(&r) - 1;
    for (i = 0; i < l->w_n; i++) w[i] = scale * (2 * cf_rng_uniform(&r) - 1);
    for (i = 0; i < l->b_n; i++) o->net.params[l->b_off + i] = 2 * cf_rng_uniform(&r) - 1;
    if (precision == CF_BF16) {
        cf_bf16_round(o->x, nx); cf_bf16_round(o->dy, ny); cf_bf16_round(w, l->w_n);
    }
    for (k = 0; k < o->net.n_layers; k++)
        if (k != o->at && o->net.layers[k].type == CF_L_CONV) {   /* the identity layers: pointwise, or depthwise 3x3 (the centre tap) */
            const cf_layer *q = &o->net.layers[k];
            float *v = o->net.params + q->w_off;
            memset(v, 0, q->w_n * sizeof(float));
            for (i = 0; i < (size_t)q->out.c; i++) {
                if (q->depthwise) v[i * 9 + 4] = 1;
                else v[i * q->in.c + i] = 1;
            }
        }
}
/* one step: forward and backward, the output copied to y_copy between them when not NULL;
   the gradients start from zero (untimed) */
static void ours_run(ours_conv *o, int B, int idx, float *y_copy) {
    const cf_layer *l = &o->net.layers[o->at];
    const float *y;
    /* The plan would drop the output of an identity layer before the conv after the forward
       and make it again when the conv's backward reads it, inside the conv's time (the hook
       cannot tell them apart): no outputs made again here (the network's stored bits do not
       depend on it).  Restored after, as --off left it. */
    int recompute = cf_fast_path_on("recompute");
    cf_fast_path_set("recompute", 0);
    cf_net_zero_grad(&o->net);
    if (o->dx) memset(o->dx, 0, (size_t)B * cf_shape_size(l->in) * sizeof(float));
    memset(&o->clock.t, 0, sizeof o->clock.t);
    if (!(y = cf_net_forward(&o->net, o->x, B))) die("layer", "%d: ours: %s", idx, cf_failure_reason());
    if (y_copy) memcpy(y_copy, y, (size_t)B * cf_shape_size(l->out) * sizeof(float));
    if (cf_net_backward(&o->net, o->dy)) die("layer", "%d: ours: %s", idx, cf_failure_reason());
    cf_fast_path_set("recompute", recompute);
}
static void ours_free(ours_conv *o) {
    cf_net_free(&o->net);
    free(o->x); free(o->dy); free(o->dx);
}

/* ---- oneDNN: the same convolution's three primitives */
static dnnl_engine_t engine;
static dnnl_stream_t stream;
typedef struct {
    dnnl_primitive_desc_t pd;
    dnnl_primitive_t prim;
    dnnl_exec_arg_t args[6];
    int nargs;
} dn_op;
typedef struct {
    dnnl_memory_desc_t src, w, b, dst;          /* format_tag_any, the precision's types */
    dnnl_memory_desc_t dw;                      /* the weight gradient: format_tag_any, fp32 */
    dnnl_memory_desc_t u_src, u_w, u_b, u_dst;  /* plain fp32 */
    dnnl_dims_t strides, dil, pl, pr;
} dn_shapes;
typedef struct {
    dn_shapes s;
    dn_op op[NDIR];
    dnnl_memory_t mems[16];   /* every memory made, to free */
    int n_mems;
    float *y, *dw, *db, *dx;  /* plain fp32 copies of the results, for the check */
} dn_conv;
static dnnl_memory_t dn_mem(dn_conv *c, const dnnl_memory_desc_t *md, void *handle) {
    dnnl_memory_t m;
    if (c->n_mems == (int)(sizeof c->mems / sizeof c->mems[0])) die("oneDNN memory", "more than %d memories", c->n_mems);
    DN(dnnl_memory_create(&m, md, engine, handle ? handle : DNNL_MEMORY_ALLOCATE), "oneDNN memory");
    c->mems[c->n_mems++] = m;
    return m;
}
static const dnnl_memory_desc_t *md_of(dnnl_memory_t m) {
    const dnnl_memory_desc_t *md;
    DN(dnnl_memory_get_memory_desc(m, &md), "oneDNN memory");
    return md;
}
static void reorder(dnnl_memory_t from, dnnl_memory_t to) {
    dnnl_primitive_desc_t pd;
    dnnl_primitive_t r;
    dnnl_exec_arg_t a[2];
    DN(dnnl_reorder_primitive_desc_create(&pd, md_of(from), engine, md_of(to), engine, NULL), "oneDNN reorder");
    DN(dnnl_primitive_create(&r, pd), "oneDNN reorder");
    a[0].arg = DNNL_ARG_FROM; a[0].memory = from; a[1].arg = DNNL_ARG_TO; a[1].memory = to;
    DN(dnnl_primitive_execute(r, stream, 2, a), "oneDNN reorder");
    DN(dnnl_stream_wait(stream), "oneDNN reorder");
    dnnl_primitive_destroy(r); dnnl_primitive_desc_destroy(pd);
}
/* the memory the primitive wants for `what`, filled from the plain `user` (or shared with
   `have` when that one has the same layout) */
static dnnl_memory_t dn_input(dn_conv *c, dn_op *op, dnnl_query_t what, int arg, dnnl_memory_t user,
                              dnnl_memory_t *have) {
    const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(op->pd, what, 0);
    dnnl_memory_t m = *have && dnnl_memory_desc_equal(md, md_of(*have)) ? *have : NULL;
    if (!m) { m = dn_mem(c, md, NULL); reorder(user, m); if (!*have) *have = m; }
    op->args[op->nargs].arg = arg; op->args[op->nargs++].memory = m;
    return m;
}
static dnnl_memory_t dn_output(dn_conv *c, dn_op *op, dnnl_query_t what, int index, int arg) {
    dnnl_memory_t m = dn_mem(c, dnnl_primitive_desc_query_md(op->pd, what, index), NULL);
    op->args[op->nargs].arg = arg; op->args[op->nargs++].memory = m;
    return m;
}
static void dn_shapes_make(dn_shapes *s, const cf_layer *l, int B, dnnl_data_type_t dt) {
    int d2 = is2d(l), nd = d2 ? 4 : 5, a, k, G = l->groups;
    dnnl_dims_t src = {B, l->in.c}, dst = {B, l->out.c}, w, b = {l->out.c};
    int wn = 0;
    if (G > 1) { w[wn++] = G; w[wn++] = l->out.c / G; w[wn++] = l->in.c / G; }
    else { w[wn++] = l->out.c; w[wn++] = l->in.c; }
    for (a = d2 ? 1 : 0, k = 0; a < 3; a++, k++) {
        src[2 + k] = a == 0 ? l->in.d : a == 1 ? l->in.h : l->in.w;
        dst[2 + k] = a == 0 ? l->out.d : a == 1 ? l->out.h : l->out.w;
        w[wn++] = l->g.k[a];
        s->strides[k] = l->g.s[a]; s->dil[k] = l->g.dil[a] - 1; s->pl[k] = l->g.pb[a]; s->pr[k] = l->g.pa[a];
    }
    DN(dnnl_memory_desc_init_by_tag(&s->src, nd, src, dt, dnnl_format_tag_any), "oneDNN src");
    DN(dnnl_memory_desc_init_by_tag(&s->dst, nd, dst, dt, dnnl_format_tag_any), "oneDNN dst");
    DN(dnnl_memory_desc_init_by_tag(&s->w, wn, w, dt, dnnl_format_tag_any), "oneDNN weights");
    DN(dnnl_memory_desc_init_by_tag(&s->dw, wn, w, dnnl_f32, dnnl_format_tag_any), "oneDNN weights");
    DN(dnnl_memory_desc_init_by_tag(&s->b, 1, b, dnnl_f32, dnnl_x), "oneDNN bias");
    DN(dnnl_memory_desc_init_by_tag(&s->u_src, nd, src, dnnl_f32, d2 ? dnnl_nchw : dnnl_ncdhw), "oneDNN src");
    DN(dnnl_memory_desc_init_by_tag(&s->u_dst, nd, dst, dnnl_f32, d2 ? dnnl_nchw : dnnl_ncdhw), "oneDNN dst");
    DN(dnnl_memory_desc_init_by_tag(&s->u_w, wn, w, dnnl_f32, G > 1 ? (d2 ? dnnl_goihw : dnnl_goidhw)
                                                                    : (d2 ? dnnl_oihw : dnnl_oidhw)), "oneDNN weights");
    s->u_b = s->b;
}
/* whether this oneDNN has a bf16 convolution on this CPU: it has none without AVX-512 (oneDNN
   2.6 answers "unimplemented" for a bf16 forward there); a small 3x3 conv asked for */
static int dn_has_bf16(void) {
    dnnl_dims_t src = {1, 16, 8, 8}, w = {16, 16, 3, 3}, one = {1, 1}, zero = {0, 0}, pad = {1, 1};
    dnnl_memory_desc_t s, wd, d;
    dnnl_convolution_desc_t cd;
    dnnl_primitive_desc_t pd;
    dnnl_status_t st;
    DN(dnnl_memory_desc_init_by_tag(&s, 4, src, dnnl_bf16, dnnl_format_tag_any), "oneDNN src");
    DN(dnnl_memory_desc_init_by_tag(&d, 4, src, dnnl_bf16, dnnl_format_tag_any), "oneDNN dst");
    DN(dnnl_memory_desc_init_by_tag(&wd, 4, w, dnnl_bf16, dnnl_format_tag_any), "oneDNN weights");
    DN(dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_training, dnnl_convolution_direct, &s, &wd, NULL,
                                                  &d, one, zero, pad, pad), "oneDNN forward");
    st = dnnl_primitive_desc_create(&pd, &cd, NULL, engine, NULL);
    if (st == dnnl_success) dnnl_primitive_desc_destroy(pd);
    else if (st != dnnl_unimplemented) die("oneDNN forward", "a bf16 3x3 conv: %s", dnnl_status2str(st));
    return st == dnnl_success;
}
/* oneDNN 2.6.3's AMX backward-weights (jit:avx512_core_amx_bf16) of a 2-D 3x3 conv of stride
   and dilation 1 gave gradients off by a relative 1.4 and corrupted the heap (an abort or a
   segfault a few calls later) on an Intel Xeon with AMX (2026-12-07: DeepCAM's layers 2, 267 and
   269; its stride-2 and dilated 3x3s and CosmoFlow's 3-D ones agreed).  Such a layer's
   backward-weights takes oneDNN's next implementation, with a line saying so. */
static int amx_bwd_w_broken(const cf_layer *l) {
    return is2d(l) && l->groups == 1 && l->g.k[1] == 3 && l->g.k[2] == 3 && l->g.s[1] == 1 && l->g.s[2] == 1 &&
           l->g.dil[1] == 1 && l->g.dil[2] == 1;
}
static dnnl_primitive_desc_t bwd_w_pd(const dnnl_convolution_desc_t *d, const_dnnl_primitive_desc_t hint,
                                      const cf_layer *l, int idx) {
    dnnl_primitive_desc_iterator_t it;
    dnnl_primitive_desc_t pd = NULL;
    const char *first = NULL;
    DN(dnnl_primitive_desc_iterator_create(&it, d, NULL, engine, hint), "oneDNN backward-weights");
    do {
        const char *s = NULL;
        if (pd) dnnl_primitive_desc_destroy(pd);
        pd = dnnl_primitive_desc_iterator_fetch(it);
        if (!pd) die("oneDNN backward-weights", "no implementation");
        DN(dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &s), "oneDNN backward-weights");
        if (!strstr(s, "amx") || !amx_bwd_w_broken(l)) break;
        if (!first) first = s;
    } while (dnnl_primitive_desc_iterator_next(it) == dnnl_success);
    if (first)
        printf("oneDNN layer %d: backward-weights on its next implementation, not %s (oneDNN 2.6.3's AMX "
               "backward-weights of a 2-D 3x3: wrong gradients and a corrupted heap, bench/onednn_peer.c)\n", idx, first);
    dnnl_primitive_desc_iterator_destroy(it);
    return pd;
}
/* the three primitives on ours' buffers: x, w, b, dy as given (plain fp32), reordered in */
static void dn_make(dn_conv *c, const peer_layer *p, int B, int bf16, ours_conv *o) {
    const cf_layer *l = &p->l;
    dn_shapes s;   /* (kept in c, for the results) */
    dnnl_convolution_desc_t d;
    dnnl_memory_t ux, uw, ub = NULL, udy, src = NULL, w = NULL, ddst = NULL;
    dnnl_data_type_t dt = bf16 ? dnnl_bf16 : dnnl_f32;
    const dnnl_memory_desc_t *bmd = l->has_bias ? &s.b : NULL;
    dn_op *f = &c->op[FWD], *bw = &c->op[BWW], *bd = &c->op[BWD];
    size_t ny = (size_t)B * cf_shape_size(l->out);
    memset(c, 0, sizeof *c);
    dn_shapes_make(&s, l, B, dt);
    ux = dn_mem(c, &s.u_src, o->x); uw = dn_mem(c, &s.u_w, o->net.params + o->net.layers[o->at].w_off);
    udy = dn_mem(c, &s.u_dst, o->dy);
    if (bmd) ub = dn_mem(c, &s.u_b, o->net.params + o->net.layers[o->at].b_off);
    DN(dnnl_dilated_convolution_forward_desc_init(&d, dnnl_forward_training, dnnl_convolution_direct, &s.src, &s.w, bmd,
                                                  &s.dst, s.strides, s.dil, s.pl, s.pr), "oneDNN forward");
    DN(dnnl_primitive_desc_create(&f->pd, &d, NULL, engine, NULL), "oneDNN forward");
    dn_input(c, f, dnnl_query_src_md, DNNL_ARG_SRC, ux, &src);
    dn_input(c, f, dnnl_query_weights_md, DNNL_ARG_WEIGHTS, uw, &w);
    if (bmd) { f->args[f->nargs].arg = DNNL_ARG_BIAS; f->args[f->nargs++].memory = ub; }
    dn_output(c, f, dnnl_query_dst_md, 0, DNNL_ARG_DST);
    /* the weight and bias gradients in fp32, as ours keeps them */
    DN(dnnl_dilated_convolution_backward_weights_desc_init(&d, dnnl_convolution_direct, &s.src, &s.dw, bmd, &s.dst,
                                                           s.strides, s.dil, s.pl, s.pr), "oneDNN backward-weights");
    bw->pd = bwd_w_pd(&d, f->pd, l, p->idx[0]);
    dn_input(c, bw, dnnl_query_src_md, DNNL_ARG_SRC, ux, &src);
    dn_input(c, bw, dnnl_query_diff_dst_md, DNNL_ARG_DIFF_DST, udy, &ddst);
    dn_output(c, bw, dnnl_query_diff_weights_md, 0, DNNL_ARG_DIFF_WEIGHTS);
    if (bmd) dn_output(c, bw, dnnl_query_diff_weights_md, 1, DNNL_ARG_DIFF_BIAS);
    if (p->bwd_data) {
        DN(dnnl_dilated_convolution_backward_data_desc_init(&d, dnnl_convolution_direct, &s.src, &s.w, &s.dst,
                                                            s.strides, s.dil, s.pl, s.pr), "oneDNN backward-data");
        DN(dnnl_primitive_desc_create(&bd->pd, &d, NULL, engine, f->pd), "oneDNN backward-data");
        dn_input(c, bd, dnnl_query_diff_dst_md, DNNL_ARG_DIFF_DST, udy, &ddst);
        dn_input(c, bd, dnnl_query_weights_md, DNNL_ARG_WEIGHTS, uw, &w);
        dn_output(c, bd, dnnl_query_diff_src_md, 0, DNNL_ARG_DIFF_SRC);
    }
    for (f = c->op; f < c->op + NDIR; f++)
        if (f->pd) DN(dnnl_primitive_create(&f->prim, f->pd), "oneDNN primitive");
    c->s = s;
    c->y = floats(ny, "oneDNN's output"); c->dw = floats(l->w_n, "oneDNN's weight gradient");
    c->db = floats(l->b_n, "oneDNN's bias gradient");
    c->dx = p->bwd_data ? floats((size_t)B * cf_shape_size(l->in), "oneDNN's input gradient") : NULL;
}
/* the memory passed as `arg` to op */
static dnnl_memory_t arg_mem(const dn_op *op, int arg) {
    int i;
    for (i = 0; i < op->nargs; i++) if (op->args[i].arg == arg) return op->args[i].memory;
    return NULL;
}
/* a result, reordered into a plain fp32 buffer */
static void dn_result(dnnl_memory_t m, const dnnl_memory_desc_t *plain, float *to) {
    dnnl_memory_t u;
    DN(dnnl_memory_create(&u, plain, engine, to), "oneDNN result");
    reorder(m, u);
    dnnl_memory_destroy(u);
}
static void dn_run(dn_conv *c, double t[NDIR]) {
    int i;
    for (i = 0; i < NDIR; i++) {
        double t0 = now_s();
        if (!c->op[i].prim) { t[i] = 0; continue; }
        DN(dnnl_primitive_execute(c->op[i].prim, stream, c->op[i].nargs, c->op[i].args), "oneDNN execute");
        DN(dnnl_stream_wait(stream), "oneDNN execute");
        t[i] = now_s() - t0;
    }
}
static const char *impl_of(const dn_op *op) {
    const char *s = NULL;
    if (!op->pd || dnnl_primitive_desc_query(op->pd, dnnl_query_impl_info_str, 0, &s) != dnnl_success || !s) return "-";
    return s;
}
static void dn_free(dn_conv *c) {
    int i;
    for (i = 0; i < NDIR; i++) {
        if (c->op[i].prim) dnnl_primitive_destroy(c->op[i].prim);
        if (c->op[i].pd) dnnl_primitive_desc_destroy(c->op[i].pd);
    }
    for (i = 0; i < c->n_mems; i++) dnnl_memory_destroy(c->mems[i]);
    free(c->y); free(c->dw); free(c->db); free(c->dx);
}

/* ---- one layer in one precision: checked, then timed */
typedef struct {
    double ours[NDIR], dnn[NDIR];   /* medians, ms; < 0: no such operation */
    double err[NDIR];               /* the check's max relative error; < 0: no such operation */
    int agree;
    const char *path[NDIR];         /* ours' path in the one-conv network */
    char impl[NDIR][40];            /* oneDNN's implementation */
} result;
static void check(ours_conv *o, dn_conv *c, const peer_layer *p, int B, const float *y, double bound, result *r) {
    const cf_layer *l = &o->net.layers[o->at];
    const float *g = o->net.grads;
    int d;
    dn_result(arg_mem(&c->op[FWD], DNNL_ARG_DST), &c->s.u_dst, c->y);
    dn_result(arg_mem(&c->op[BWW], DNNL_ARG_DIFF_WEIGHTS), &c->s.u_w, c->dw);
    r->err[FWD] = rel_err(c->y, y, (size_t)B * cf_shape_size(l->out));
    r->err[BWW] = rel_err(c->dw, g + l->w_off, l->w_n);
    if (l->b_n) {
        double e;
        dn_result(arg_mem(&c->op[BWW], DNNL_ARG_DIFF_BIAS), &c->s.u_b, c->db);
        e = rel_err(c->db, g + l->b_off, l->b_n);
        if (!(e <= r->err[BWW])) r->err[BWW] = e;
    }
    r->err[BWD] = -1;
    if (p->bwd_data) {
        dn_result(arg_mem(&c->op[BWD], DNNL_ARG_DIFF_SRC), &c->s.u_src, c->dx);
        r->err[BWD] = rel_err(c->dx, o->dx, (size_t)B * cf_shape_size(l->in));
    }
    r->agree = 1;
    for (d = 0; d < NDIR; d++) if (!(r->err[d] <= bound) && r->err[d] != -1) r->agree = 0;
}
/* "ours layer I: <what> stored in B0 and B1 bits, as in the network" (B0, B1: layer i's output and
   its gradient in the one-conv network; the network stores both in 16 bits) */
static void storage_line(int idx, const char *what, const cf_net *net, int i) {
    int b0 = cf_net_stored_bits(net, i, 0), b1 = cf_net_stored_bits(net, i, 1);
    printf("ours layer %d: %s stored in %d and %d bits, %s\n", idx, what, b0, b1,
           b0 == 16 && b1 == 16 ? "as in the network" : "NOT as in the network (16 and 16 bits)");
}
static void measure(const peer_layer *p, int B, int precision, int reps, result *r) {
    ours_conv o;
    dn_conv c;
    double *to = (double *)calloc(2 * NDIR * (size_t)reps, sizeof(double)), *tn = to + NDIR * reps, t[NDIR];
    double bound = precision == CF_BF16 ? 2e-2 : 1e-4;
    int i, d, k, dw = p->l.depthwise;
    float *y;
    if (!to) die("layer", "out of memory");
    memset(r, 0, sizeof *r);
    ours_make(&o, p, B, precision, AFTER_NONE, 0);
    ours_fill(&o, B, precision);
    dn_make(&c, p, B, precision == CF_BF16, &o);
    /* tests/test_onednn_peer.sh's sabotage: ours' input no longer oneDNN's, so the check must fail */
    if (getenv("ONEDNN_PEER_SABOTAGE")) o.x[0] += 4;
    /* the untimed first run of both: the check */
    y = floats((size_t)B * cf_shape_size(p->l.out), "the output's copy");
    ours_run(&o, B, p->idx[0], y);
    dn_run(&c, t);
    check(&o, &c, p, B, y, bound, r);
    free(y);
    if (o.at)   /* layer 1's output: the layer's own (at 1), or its input (at 2, the identity depthwise conv's) */
        storage_line(p->idx[0], o.at == 1 ? "between two identity pointwise convs, its output and their gradient"
                                          : "after an identity depthwise conv, its input and the gradient over it",
                     &o.net, 1);
    printf("check %s layer %d: max relative error fwd %.1e, bwd-w %.1e, bwd-d ", cf_precision_name(precision),
           p->idx[0], r->err[FWD], r->err[BWW]);
    if (r->err[BWD] < 0) printf("- (none)"); else printf("%.1e", r->err[BWD]);
    printf(" (bound %.0e): %s\n", bound, r->agree ? "agree" : "DISAGREE");
    if (precision == CF_BF16 && p->half_out && !dw) {
        /* A conv whose one reader is a batch norm (DeepCAM's conv -> batch norm pairs): the
           network stores its output and the gradient over it in 16 bits, which the check's
           network (its output the loss's) cannot, so the timed network has a batch norm after
           the conv.  The check above ran the same sums on fp32 storage: test_core holds the
           16-bit forms to the same bits ("halves before batch norms"). */
        int form;
        for (form = AFTER_BN; form <= AFTER_BN_ONE && (form == AFTER_BN || !stored_half(&o.net, o.at)); form++) {
            /* (a pointwise conv reading the network's input, not yet rounded, stores y in
               fp32: then an identity pointwise conv before it) */
            ours_free(&o);
            ours_make(&o, p, B, precision, form, 0);
            ours_fill(&o, B, precision);
            ours_run(&o, B, p->idx[0], NULL);
        }
        storage_line(p->idx[0], "timed with a batch norm after it, its output and their gradient", &o.net, o.at);
    }
    if (precision == CF_BF16 && (p->pool[0] || p->pool_in[0]) && !p->half_out && !p->half_in) {
        /* A conv the network fuses with the max pool after it (CosmoFlow's five): the network
           stores its output in 16 bits, and the pool's backward writes the gradient over it
           there; one that reads a max pool's output (CosmoFlow's last four) reads it and writes
           the gradient over it in 16 bits.  The timed network has those pools around the conv
           (the hook times the conv alone), the check above the same sums on fp32 storage. */
        int b0;
        ours_free(&o);
        ours_make(&o, p, B, precision, p->pool[0] ? AFTER_POOL : AFTER_NONE, p->pool_in[0] != 0);
        ours_fill(&o, B, precision);
        ours_run(&o, B, p->idx[0], NULL);
        b0 = cf_net_stored_bits(&o.net, o.at, 0);
        if (p->pool[0] && b0 == p->out_bits && cf_net_stored_bits(&o.net, o.at, 1) == 0)
            printf("ours layer %d: timed with its max pool after it, its output stored in %d bits, the gradient in it, "
                   "as in the network\n", p->idx[0], b0);
        else if (p->pool[0])
            printf("ours layer %d: timed with its max pool after it, its output stored in %d bits, NOT as in the network "
                   "(%d bits, the gradient in it)\n", p->idx[0], b0, p->out_bits);
        if (p->pool_in[0])
            storage_line(p->idx[0], "timed after a max pool (of an identity pointwise conv), its input and the "
                         "gradient over it", &o.net, o.at - 1);
    }
    fflush(stdout);
    for (i = 0; i < reps; i++)   /* ours first in even repetitions, oneDNN first in odd ones */
        for (k = 0; k < 2; k++)
            if ((k == 0) == (i % 2 == 0)) {
                ours_run(&o, B, p->idx[0], NULL);
                for (d = 0; d < NDIR; d++) to[d * reps + i] = o.clock.t[d];
            } else {
                dn_run(&c, t);
                if (dw) { t[BWW] += t[BWD]; t[BWD] = 0; }   /* ours does both in one pass */
                for (d = 0; d < NDIR; d++) tn[d * reps + i] = t[d];
            }
    for (d = 0; d < NDIR; d++) {
        int has = d != BWD || (p->bwd_data && !dw);
        r->ours[d] = has ? 1e3 * median(to + d * reps, reps) : -1;
        r->dnn[d] = has ? 1e3 * median(tn + d * reps, reps) : -1;
        r->path[d] = cf_net_path(&o.net, o.at, d);
        snprintf(r->impl[d], sizeof r->impl[d], "%s", impl_of(&c.op[d]));
    }
    free(to);
    dn_free(&c);
    ours_free(&o);
}

/* ---- the table and the last line */
static void print_rows(const peer_layer *p, const result *r, int n) {
    int i, d;
    printf("%-5s %4s %-38s", "layer", "n", "shape");
    for (d = 0; d < NDIR; d++)
        printf(" | %-5s %9s %9s %6s %-10s", dir_name[d], "ours ms", "oneDNN ms", "ratio", "ours path");
    printf(" | oneDNN fwd, bwd-w, bwd-d | layers\n");
    for (i = 0; i < n; i++) {
        char shp[96], list[4096], n[16];
        int k = 0, j;
        layer_text(&p[i].l, shp, sizeof shp);
        snprintf(n, sizeof n, "x%d", p[i].n);
        printf("%-5d %4s %-38s", p[i].idx[0], n, shp);
        for (d = 0; d < NDIR; d++) {
            char ratio[16], path[40];
            const char *name = d == BWW && p[i].l.depthwise ? "w+d" : "";
            if (r[i].ours[d] < 0) { printf(" | %-5s %9s %9s %6s %-10s", name, "-", "-", "-", "-"); continue; }
            if (r[i].agree) snprintf(ratio, sizeof ratio, "%.2f", r[i].dnn[d] / r[i].ours[d]);
            else snprintf(ratio, sizeof ratio, "err %.0e", r[i].err[d]);
            snprintf(path, sizeof path, "%s", r[i].path[d]);
            if (strcmp(r[i].path[d], p[i].net_path[d]))   /* the whole network takes another path */
                snprintf(path, sizeof path, "%s(net %s)", r[i].path[d], p[i].net_path[d]);
            printf(" | %-5s %9.2f %9.2f %6s %-10s", name, r[i].ours[d], r[i].dnn[d], ratio, path);
        }
        printf(" | %s, %s, %s |", r[i].impl[FWD], r[i].impl[BWW], r[i].impl[BWD]);
        for (j = 0; j < p[i].n && k < (int)sizeof list - 16; j++)
            k += snprintf(list + k, sizeof list - k, "%s%d", j ? "," : " ", p[i].idx[j]);
        printf("%s\n", list);
    }
}
/* the five operations where ours loses the most time to oneDNN in a step: n x (ours - oneDNN) ms
   (the smallest ratio alone may be a layer of a few microseconds) */
static void print_behind(const peer_layer *p, const result *r, int n) {
    int i, d, k, best[5][2], nb = 0;
    double lost[5];
    for (i = 0; i < n; i++)
        for (d = 0; d < NDIR && r[i].agree; d++) {
            double t = p[i].n * (r[i].ours[d] - r[i].dnn[d]);
            if (r[i].ours[d] < 0 || t <= 0) continue;
            for (k = nb < 5 ? nb++ : 5; k > 0 && lost[k - 1] < t; k--)
                if (k < 5) { lost[k] = lost[k - 1]; best[k][0] = best[k - 1][0]; best[k][1] = best[k - 1][1]; }
            if (k < 5) { lost[k] = t; best[k][0] = i; best[k][1] = d; }
        }
    printf("most time behind oneDNN, n x (ours - oneDNN) ms:");
    for (k = 0; k < nb; k++) {
        i = best[k][0]; d = best[k][1];
        printf("%s %d %s %.1f", k ? "," : "", p[i].idx[0], d == BWW && p[i].l.depthwise ? "bwd-w+d" : dir_name[d],
               lost[k]);
        if (p[i].n > 1) printf(" (x%d)", p[i].n);
    }
    printf("%s\n", nb ? "" : " none");
}
/* R: oneDNN's time over ours, summed over the layers (multiplicities included) and their
   operations; W: the smallest ratio of one layer's operation.  Layers that disagreed are left
   out (and named). */
static int print_last_line(const char *model, int B, int precision, const char *kernels, const peer_layer *p,
                           const result *r, int n) {
    double so = 0, sn = 0, worst = INFINITY;
    int i, d, wl = -1, wd = 0, wdw = 0, bad = 0;
    for (i = 0; i < n; i++) {
        if (!r[i].agree) {
            if (!bad++) printf("left out of the sums below, oneDNN and ours disagree beyond the bound: layer");
            printf(" %d", p[i].idx[0]);
            continue;
        }
        for (d = 0; d < NDIR; d++) {
            if (r[i].ours[d] < 0) continue;
            so += p[i].n * r[i].ours[d]; sn += p[i].n * r[i].dnn[d];
            if (r[i].dnn[d] / r[i].ours[d] < worst) {
                worst = r[i].dnn[d] / r[i].ours[d]; wl = p[i].idx[0]; wd = d; wdw = p[i].l.depthwise;
            }
        }
    }
    if (bad) printf("\n");
    printf("onednn: %s b%d %s %s: conv layers x%.2f (oneDNN time / ours), worst layer x%.2f (%d %s)\n", base_name(model), B,
           cf_precision_name(precision), kernels, so > 0 ? sn / so : 0, wl >= 0 ? worst : 0, wl,
           wd == BWW && wdw ? "bwd-w+d" : dir_name[wd]);
    fflush(stdout);
    return bad;
}

static void usage(void) {
    printf("usage: onednn-peer --model M.cfg [--batch B] [--precision fp32|bf16|both] [--reps N] [--threads T]\n"
           "                   [--layer I] [--off KIND]\n"
           "Every [conv] layer of M timed forward, backward-weights and backward-data (where the training step\n"
           "computes it) in oneDNN and in cosmoflow.h, alternated in this process after an untimed run that\n"
           "checks both agree; medians of N; ratio = oneDNN ms / ours ms (above 1: ours faster).\n"
           "  --model M.cfg       the network (required)\n"
           "  --batch B           samples (default 1)\n"
           "  --precision P       fp32, bf16 or both (default both)\n"
           "  --reps N            timed repetitions after the check run (default 5)\n"
           "  --threads T         OpenMP and OpenBLAS threads (default 0: as the environment sets)\n"
           "  --layer I           only layer I (a [conv]), for quick checks\n"
           "  --off KIND          our fast paths of that kind off (cf_fast_path_set; repeatable), to time another path\n"
           "Last line per precision: 'onednn: <model> b<B> <precision> <OpenBLAS kernels>: conv layers x<R>\n"
           "(oneDNN time / ours), worst layer x<W> (<layer index> <direction>)'; the kernels are OpenBLAS's\n"
           "openblas_get_corename(), or naive-sgemm in a build without CF_USE_CBLAS.  Where oneDNN has no bf16\n"
           "convolution (a CPU without AVX-512), bf16's last line says 'not timed, oneDNN has no bf16 convolution\n"
           "on this CPU'.\n");
}
static int whole(const char *flag, const char *v, int lo, int hi) {
    char *end;
    long x = v ? strtol(v, &end, 10) : 0;
    if (!v || end == v || *end || x < lo || x > hi)
        die(flag, "'%s' is not a whole number in [%d, %d]", v ? v : "", lo, hi);
    return (int)x;
}
static void cpu_model(char *b, size_t n) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    snprintf(b, n, "unknown");
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "model name", 10) && strchr(line, ':')) {
            snprintf(b, n, "%s", strchr(line, ':') + 2);
            b[strcspn(b, "\n")] = 0;
            break;
        }
    if (f) fclose(f);
}

int main(int argc, char **argv) {
    const char *model = NULL, *prec = "both", *kernels = "naive-sgemm";
    int B = 1, reps = 5, threads = 0, only = -1, i, pi, bad = 0;
    char cpu[256];
    const dnnl_version_t *v = dnnl_version();
    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(); return 0; }
        else if (!strcmp(a, "--model")) { if (!val) die(a, "needs a value"); model = val; i++; }
        else if (!strcmp(a, "--batch")) { B = whole(a, val, 1, 4096); i++; }
        else if (!strcmp(a, "--reps")) { reps = whole(a, val, 1, 100000); i++; }
        else if (!strcmp(a, "--threads")) { threads = whole(a, val, 0, 1024); i++; }
        else if (!strcmp(a, "--layer")) { only = whole(a, val, 0, 1 << 20); i++; }
        else if (!strcmp(a, "--off")) {
            if (!val || cf_fast_path_set(val, 0)) die(a, "'%s' is not a kind of fast path (cf_fast_path_set)", val ? val : "");
            i++;
        }
        else if (!strcmp(a, "--precision")) {
            if (!val || (strcmp(val, "fp32") && strcmp(val, "bf16") && strcmp(val, "both")))
                die(a, "fp32, bf16 or both");
            prec = val; i++;
        } else die(a, "unknown flag (see --help)");
    }
    if (!model) die("--model", "a cfg network is required (see --help)");
    /* the OpenMP wait policy the tools run with (tools/tool.h): read when libgomp loads, so set
       it and run again, once */
    if (!getenv("OMP_WAIT_POLICY")) {
        setenv("OMP_WAIT_POLICY", "passive", 1);
        execv("/proc/self/exe", argv);
    }
#ifdef _OPENMP
    if (threads) omp_set_num_threads(threads);
#endif
#ifdef CF_USE_CBLAS
    if (threads) openblas_set_num_threads(threads);
    kernels = openblas_get_corename() ? openblas_get_corename() : "unknown";
#endif
    cpu_model(cpu, sizeof cpu);
    DN(dnnl_engine_create(&engine, dnnl_cpu, 0), "oneDNN engine");
    DN(dnnl_stream_create(&stream, engine, dnnl_stream_default_flags), "oneDNN stream");
    printf("onednn-peer: %s batch %d, %d threads, OMP_WAIT_POLICY=%s, %d repetitions (medians) after a check run, "
           "ours and oneDNN alternated\n", model, B,
#ifdef _OPENMP
           omp_get_max_threads(),
#else
           1,
#endif
           getenv("OMP_WAIT_POLICY"), reps);
    printf("cpu: %s\n", cpu);
    printf("oneDNN %d.%d.%d (%s runtime), effective ISA %s\n", v->major, v->minor, v->patch,
           dnnl_runtime2str(v->cpu_runtime), dnnl_cpu_isa2str(dnnl_get_effective_cpu_isa()));
    printf("blas: OpenBLAS, %s kernels\n", kernels);
    printf("ours: cosmoflow.h %s; bf16 on %s\n", CF_VERSION, cf_bf16_kernels());
    for (pi = 0; pi < 2; pi++) {
        int precision = pi ? CF_BF16 : CF_FP32, n, j, mult = 0;
        peer_layer *p;
        result *r;
        if (strcmp(prec, "both") && strcmp(prec, cf_precision_name(precision))) continue;
        if (precision == CF_BF16 && !dn_has_bf16()) {   /* nothing to time ours against */
            printf("\nbf16: oneDNN %d.%d.%d has no bf16 convolution on this CPU (effective ISA %s): not timed\n",
                   v->major, v->minor, v->patch, dnnl_cpu_isa2str(dnnl_get_effective_cpu_isa()));
            printf("onednn: %s b%d bf16 %s: not timed, oneDNN has no bf16 convolution on this CPU\n", base_name(model), B,
                   kernels);
            continue;
        }
        p = list_layers(model, B, precision, only, &n);
        for (j = 0; j < n; j++) mult += p[j].n;
        printf("\n%s: %d conv layers, %d distinct (identical layers timed once, counted n times)\n",
               cf_precision_name(precision), mult, n);
        if (!(r = (result *)calloc(n, sizeof *r))) die(model, "out of memory");
        for (j = 0; j < n; j++) measure(&p[j], B, precision, reps, &r[j]);
        printf("ratio = oneDNN ms / ours ms (above 1: ours faster); ms: medians of %d\n", reps);
        print_rows(p, r, n);
        print_behind(p, r, n);
        bad += print_last_line(model, B, precision, kernels, p, r, n);
        for (j = 0; j < n; j++) free(p[j].idx);
        free(p); free(r);
    }
    dnnl_stream_destroy(stream);
    dnnl_engine_destroy(engine);
    if (bad) die(model, "%d layer(s) disagreed with oneDNN beyond the bound (the check lines above)", bad);
    return 0;
}
