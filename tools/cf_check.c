/* cf-check: look inside a model or a checkpoint.  --summary (layers, shapes, parameters,
   FLOPs, the path each operation takes), --gradcheck (finite differences against backprop,
   layer by layer), --dump (one forward and backward pass written as .npy, to compare with
   PyTorch), --info (what a checkpoint holds). */
#ifndef CF_IMPLEMENTATION_LINKED   /* the Makefile links the implementation it compiled once (tools/cosmoflow.c) */
#define CF_IMPLEMENTATION
#endif
#include "cosmoflow.h"
#include "tool.h"

typedef struct {
    const char *model, *weights, *dump, *input, *target, *mode;
    int summary, gradcheck, info, batch, has_shape, precision, spatial;
    double tolerance;
    uint64_t seed;
    cf_shape shape;
} options;
static void parse_mode(const char *v, void *dst) {
    if (strcmp(v, "train") && strcmp(v, "eval")) die("--mode: '%s' is not train or eval", v);
    *(const char **)dst = v;
}
static tool_flag flags[21];
static int n_flags;
static void flag_table(options *o) {
    tool_flag f[] = {
        {"--model", "M.cfg", FLAG_STR, &o->model, 0, 0, "network (default: the one in the --weights checkpoint)", NULL, NULL},
        {"--weights", "W", FLAG_STR, &o->weights, 0, 0, "checkpoint or weights directory (default: initial weights from --seed)", NULL, NULL},
        {"--input-shape", "S", FLAG_SHAPE, &o->shape, 0, 0, "CxDxHxW or CxHxW, replaces the cfg's input size (default: the cfg's)", NULL, &o->has_shape},
        {"--summary", NULL, FLAG_SET, &o->summary, 1, 0, "one row per layer: type, output, parameters, MFLOP, the bits its output and gradient are stored in (16 where a bf16 plan halves them), the paths its forward, backward-weights and backward-data take; last line 'params N'", NULL, NULL},
        {"--info", NULL, FLAG_SET, &o->info, 1, 0, "what the --weights checkpoint holds: model, input, state, its training record, CRC, format", NULL, NULL},
        {"--gradcheck", NULL, FLAG_SET, &o->gradcheck, 1, 0, "finite differences against backprop for every layer; exit 1 on failure", NULL, NULL},
        {"--batch", "B", FLAG_INT, &o->batch, 1, 4096, "batch for --gradcheck", NULL, NULL},
        {"--tolerance", "T", FLAG_DOUBLE, &o->tolerance, 0, 1, "--gradcheck threshold on the relative error", NULL, NULL},
        {"--seed", "K", FLAG_U64, &o->seed, 0, 0x7fffffff, "weights and data for --gradcheck", NULL, NULL},
        {"--dump", "DIR", FLAG_STR, &o->dump, 0, 0, "DIR/output.npy, DIR/loss.txt and DIR/grad/NNN_<layer>_<kind>.npy (with --target), DIR/grad_input.npy", NULL, NULL},
        {"--input", "x.npy", FLAG_STR, &o->input, 0, 0, "float32 input (N, C, D, H, W) or (N, C, H, W), for --dump; or 'ramp': one sample x[i] = (i % 10) / 10 "
                                                        "with targets 0.5 (class 0), written as DIR/input.npy and DIR/target.npy", NULL, NULL},
        {"--target", "y.npy", FLAG_STR, &o->target, 0, 0, "float32 targets for --dump: (N, outputs), or (N, H, W) class ids for loss=softmax_ce", NULL, NULL},
        PRECISION_FLAG(&o->precision),
        {"--spatial", "K", FLAG_INT, &o->spatial, 1, 65536, "--summary of one rank of a sample split across K (cf-train --spatial K): its slabs, its memory; "
         "refused, naming the layer, when the split cannot align", NULL, NULL},
        {"--mode", "train|eval", FLAG_CALL, &o->mode, 0, 0, "batch norm for --dump: batch statistics (train) or the running ones (eval); dropout off (default eval)", parse_mode, NULL},
    };
    n_flags = (int)(sizeof f / sizeof f[0]);
    memcpy(flags, f, sizeof f);
}
static void usage(void) {
    flag_help("usage: cf-check (--model M.cfg | --weights CKPT) [--input-shape S] (--summary | --info | --gradcheck | --dump DIR --input x.npy ...)",
              flags, n_flags, NULL);
}

/* one value per axis ("3x3x1"), or one for all ("3"); a 2-D layer's depth axis left out */
static int axes(char *b, size_t n, const int v[3], int is2d) {
    if (v[1] == v[2] && (is2d || v[0] == v[1])) return snprintf(b, n, "%d", v[1]);
    return is2d ? snprintf(b, n, "%dx%d", v[1], v[2]) : snprintf(b, n, "%dx%dx%d", v[0], v[1], v[2]);
}
/* a window layer's geometry: kernel, stride, dilation (when not 1) and the zero padding
   before+after, e.g. "k2 s1 p0+1"; "-" for other layers */
static const char *window(const cf_layer *l, int is2d) {
    static char b[96];
    static const int one[3] = {1, 1, 1};
    size_t n = 0;
    if (l->type != CF_L_CONV && l->type != CF_L_DECONV && l->type != CF_L_MAXPOOL && l->type != CF_L_AVGPOOL) return "-";
    n += snprintf(b + n, sizeof b - n, "k"); n += axes(b + n, sizeof b - n, l->g.k, is2d);
    n += snprintf(b + n, sizeof b - n, " s"); n += axes(b + n, sizeof b - n, l->g.s, is2d);
    if (memcmp(l->g.dil, one, sizeof one)) { n += snprintf(b + n, sizeof b - n, " d"); n += axes(b + n, sizeof b - n, l->g.dil, is2d); }
    n += snprintf(b + n, sizeof b - n, " p"); n += axes(b + n, sizeof b - n, l->g.pb, is2d);
    n += snprintf(b + n, sizeof b - n, "+"); axes(b + n, sizeof b - n, l->g.pa, is2d);
    return b;
}
/* the outputs and gradients of a sample in each precision: bf16 stores some outputs in 16 bits
   where this CPU's bf16 kernels read and write them (docs/math.md, "bf16") */
static void arena_both(cf_net *net) {
    int was = cf_net_precision(net);
    double mb[2];
    TRY(cf_net_set_precision(net, CF_FP32));
    mb[0] = cf_net_arena_floats(net, 1, 0) * 4e-6;
    TRY(cf_net_set_precision(net, CF_BF16));
    mb[1] = cf_net_arena_floats(net, 1, 0) * 4e-6;
    TRY(cf_net_set_precision(net, was));
    printf("outputs and gradients per sample by precision: fp32 %.1f MB, bf16 %.1f MB (%.2fx; bf16 on %s)\n", mb[0], mb[1], mb[1] / mb[0], cf_bf16_kernels());
}
/* a split network's rank (cf-check --spatial K: the shapes above are its slabs): its memory for
   a batch of 1 in fp32, and what a training step holds of it (SGD: parameters, gradients,
   momentum; Adam's second moment one more copy) */
static void spatial_summary(cf_net *net) {
    int K = cf_net_spatial(net, NULL, NULL);
    double arena, extra, par;
    if (K < 2) return;
    arena = cf_net_arena_floats(net, 1, 0) * 4e-6; extra = cf_net_spatial_floats(net, 1) * 4e-6; par = net->n_params * 4e-6;
    printf("per rank of --spatial %d (the rows above: rank 0's slabs, its FLOP and memory): input slab %dx%dx%dx%d of %d planes; outputs and gradients %.1f MB, halos, extended inputs and gathered features %.1f MB, "
           "parameters %zu (%.1f MB per copy)\n", K, net->input.c, net->input.d / K, net->input.h, net->input.w, net->input.d, arena, extra, net->n_params, par);
    printf("training memory per rank, batch 1, SGD: %.1f MB (outputs and gradients, the split's buffers, 3 copies of the parameters); the input batch and the libraries' own besides\n",
           arena + extra + 3 * par);
}
/* how the plan stores a layer's output and its gradient: "32/32", "16/16", "16/-" (the
   gradient lives in the output: a fused conv's) */
static const char *stored(const cf_net *net, int i) {
    static char b[16];
    int y = cf_net_stored_bits(net, i, 0), g = cf_net_stored_bits(net, i, 1);
    if (g) snprintf(b, sizeof b, "%d/%d", y, g);
    else snprintf(b, sizeof b, "%d/-", y);
    return b;
}
static void summary(cf_net *net) {
    int i;
    double flops = 0;
    TRY(cf_net_set_batch(net, 1));   /* the paths are those of a batch of 1 */
    if (cf_net_arena_floats(net, 1, 0) == (size_t)-1) die("%s", cf_failure_reason());   /* (the plan the bits column reads) */
    printf("%-4s %-10s %-22s %12s %14s  %-16s %-6s %s\n", "#", "type", "output (CxDxHxW)", "params", "fwd MFLOP", "window", "bits", "paths: fwd, bwd-w, bwd-d");
    printf("%-4s %-10s %4dx%-4dx%-4dx%-6d %12s %14s\n", "in", "input", net->input.c, net->input.d, net->input.h, net->input.w, "", "");
    for (i = 0; i < net->n_layers; i++) {
        cf_layer *l = &net->layers[i];
        char shp[64];
        snprintf(shp, sizeof shp, "%dx%dx%dx%d", l->out.c, l->out.d, l->out.h, l->out.w);
        printf("%-4d %-10s %-22s %12zu %14.2f  %-16s %-6s %s, %s, %s\n", i, cf_layer_type_name(l->type), shp, l->w_n + l->b_n, cf_layer_flops(l) / 1e6,
               window(l, net->input.d == 1), stored(net, i), cf_net_path(net, i, CF_OP_FORWARD), cf_net_path(net, i, CF_OP_BACKWARD_WEIGHTS),
               cf_net_path(net, i, CF_OP_BACKWARD_DATA));
        flops += cf_layer_flops(l);
    }
    printf("forward GFLOP per sample %.3f (training step about 3x: %.3f)\n", flops / 1e9, 3 * flops / 1e9);
    if (net->n_stats) printf("batchnorm running statistics %zu (not trained, not counted)\n", net->n_stats);
    printf("training memory per sample: outputs and gradients %.1f MB (%.1f MB if every output were kept), "
           "parameters %.1f MB per copy\n", cf_net_arena_floats(net, 1, 0) * 4e-6, cf_net_arena_floats(net, 1, 1) * 4e-6, net->n_params * 4e-6);
    arena_both(net);
    spatial_summary(net);
    printf("params %zu\n", net->n_params);
}

/* --info: what a checkpoint holds */
static void info(const char *path) {
    cf_ckpt_info ci;
    cf_net net;
    const char *m;
    int i;
    TRY(cf_checkpoint_info(path, &ci));
    TRY(cf_checkpoint_model(path, &net, NULL));
    printf("checkpoint %s: format version %d, CRC32C %s\n", path, ci.version, ci.crc_ok ? "correct" : "WRONG");
    printf("model (its embedded cfg, %zu bytes):\n", strlen(ci.cfg_text));
    for (i = 0; i < net.n_layers; i++) {
        const cf_layer *l = &net.layers[i];
        printf("  %-4d %-10s line %-5d -> %dx%dx%dx%d, %zu parameters\n", i, cf_layer_type_name(l->type), l->line, l->out.c, l->out.d, l->out.h, l->out.w, l->w_n + l->b_n);
    }
    printf("input %dx%dx%dx%d\nparameters %llu, batch-norm statistics %llu\n", ci.input.c, ci.input.d, ci.input.h, ci.input.w,
           (unsigned long long)ci.n_params, (unsigned long long)ci.n_stats);
    printf("step %llu (optimizer updates %llu), epoch %llu, seed %llu, last validation metric %.6g\n", (unsigned long long)ci.state.step,
           (unsigned long long)ci.state.updates, (unsigned long long)ci.state.epoch, (unsigned long long)ci.state.seed, ci.state.best);
    printf("parameters rms %.6g; optimizer state rms: slot 1 (momentum or Adam's m) %.6g, slot 2 (Adam's v) %.6g\n", ci.rms[0], ci.rms[1], ci.rms[2]);
    if (!ci.state.meta[0]) printf("training record: none (format version %d keeps none)\n", ci.version);
    else for (printf("training record:\n"), m = ci.state.meta; *m; ) {
        const char *nl = strchr(m, '\n');
        int len = nl ? (int)(nl - m) : (int)strlen(m);
        printf("  %.*s\n", len, m);
        m += len + (nl != NULL);
    }
    cf_free(ci.cfg_text);
    cf_net_free(&net);
}

/* ---- gradcheck: every layer's parameters, and every layer's output gradient */
typedef struct { float **saved; } hook_ctx;
static void save_output_grad(cf_net *net, int i, void *ctx) {
    hook_ctx *h = (hook_ctx *)ctx;
    size_t n = cf_shape_size(net->layers[i].out) * net->batch;
    memcpy(h->saved[i], cf_net_output_grad(net, i), n * sizeof(float));
}
static double loss_from(cf_net *net, int first, const float *t) {
    cf_net_forward_from(net, first);
    return cf_net_loss(net, t, NULL);
}
/* worst relative error over a sample of at most 24 entries.  Kink guard: the best of three
   step sizes, since a LeakyReLU or max-pool kink inside one step spoils that step only. */
static double fd(cf_net *net, float *p, const float *g, size_t n, int first, const float *t) {
    double scale = 1e-4, worst = 0;
    size_t i, stride = n > 24 ? n / 24 : 1;
    for (i = 0; i < n; i++) if (fabs(g[i]) > scale) scale = fabs(g[i]);
    for (i = 0; i < n; i += stride) {
        float keep = p[i];
        double best = 1e30, eps = 1e-2 * (fabs(keep) > 1 ? fabs(keep) : 1);
        int k;
        for (k = 0; k < 3; k++, eps /= 10) {
            double lp, lm;
            p[i] = (float)(keep + eps); lp = loss_from(net, first, t);
            p[i] = (float)(keep - eps); lm = loss_from(net, first, t);
            p[i] = keep;
            double e = fabs((lp - lm) / (2 * eps) - g[i]) / scale;
            if (e < best) best = e;
        }
        if (best > worst) worst = best;
    }
    loss_from(net, first, t);
    return worst;
}
/* The gradients of one step under the memory plan (outputs dropped and rebuilt, conv and
   pool fused: what training runs) against the same step with every output kept (what the
   finite differences below see).  A layer type whose table flags claim its backward reads
   less than it does passes the finite differences but differs here.  Returns the worst
   difference relative to each tensor's largest gradient, parameters and input alike. */
static double plan_check(cf_net *net, const float *x, const float *t, float *dout, int B) {
    size_t nx = (size_t)B * cf_shape_size(net->input), k;
    float *g = (float *)malloc(net->n_params * 4 + 4), *dx[2];
    double worst = 0, scale = 0, d = 0;
    int pass, i;
    dx[0] = (float *)calloc(nx, 4); dx[1] = (float *)calloc(nx, 4);
    if (!g || !dx[0] || !dx[1]) die("out of memory");
    for (pass = 0; pass < 2; pass++) {   /* 0: under the plan, 1: every output kept */
        cf_net_keep_outputs(net, pass);
        if (!cf_net_forward(net, x, B)) die("%s", cf_failure_reason());
        cf_net_loss(net, t, dout);
        cf_net_zero_grad(net);
        cf_net_set_input_grad(net, dx[pass]);
        cf_net_backward(net, dout);
        cf_net_set_input_grad(net, NULL);
        if (!pass) memcpy(g, net->grads, net->n_params * 4);
    }
    for (i = 0; i < net->n_layers; i++) {   /* per parameter tensor of each layer */
        const cf_layer *l = &net->layers[i];
        size_t part, off[2] = {l->w_off, l->b_off}, n[2] = {l->w_n, l->b_n};
        for (part = 0; part < 2; part++) {
            for (scale = 1e-30, d = 0, k = off[part]; k < off[part] + n[part]; k++) {
                scale = fmax(scale, fabs(net->grads[k]));
                d = fmax(d, fabs(net->grads[k] - g[k]));
            }
            if (n[part] && d / scale > worst) worst = d / scale;
        }
    }
    for (scale = 1e-30, d = 0, k = 0; k < nx; k++) { scale = fmax(scale, fabs(dx[1][k])); d = fmax(d, fabs(dx[1][k] - dx[0][k])); }
    if (d / scale > worst) worst = d / scale;
    free(g); free(dx[0]); free(dx[1]);
    return worst;
}
static int gradcheck(cf_net *net, int B, double tol, uint64_t seed) {
    cf_rng r = cf_rng_seed(seed);
    size_t nx = B * cf_shape_size(net->input), ny = (size_t)B * net->n_outputs, nt = (size_t)B * net->n_targets, k;
    float *x = (float *)malloc(nx * 4), *t = (float *)malloc(ny * 4 + nt * 4), *dout = (float *)malloc(ny * 4), *g = (float *)malloc(net->n_params * 4 + 4);
    hook_ctx h;
    int i, bad = 0;
    double plan;
    if (!x || !t || !dout || !g) die("out of memory");
    for (k = 0; k < nx; k++) x[k] = cf_rng_uniform(&r) * 2;
    for (k = 0; k < nt; k++)   /* regression targets in [-1, 1), or class ids */
        t[k] = net->loss == CF_LOSS_SOFTMAX_CE ? (float)(cf_rng_u64(&r) % (uint64_t)net->n_classes) : cf_rng_uniform(&r) * 2 - 1;
    h.saved = (float **)calloc(net->n_layers, sizeof *h.saved);
    /* dropout on with one fixed mask (the step does not advance here), batch norm with batch
       statistics (its harder backward) */
    cf_net_set_mode(net, CF_MODE_TRAIN);
    plan = plan_check(net, x, t, dout, B);
    cf_net_keep_outputs(net, 1);   /* forward_from re-runs the network from any layer: every output kept */
    cf_net_set_batch(net, B);
    for (i = 0; i < net->n_layers; i++) h.saved[i] = (float *)malloc(cf_shape_size(net->layers[i].out) * B * 4);
    cf_net_forward(net, x, B);
    cf_net_loss(net, t, dout);
    cf_net_zero_grad(net);
    cf_net_set_backward_hook(net, save_output_grad, &h);
    cf_net_backward(net, dout);
    cf_net_set_backward_hook(net, NULL, NULL);
    memcpy(g, net->grads, net->n_params * 4);
    printf("%-4s %-10s %14s %14s %14s\n", "#", "type", "d output", "d weight", "d bias");
    for (i = 0; i < net->n_layers; i++) {
        cf_layer *l = &net->layers[i];
        double eo = fd(net, cf_net_output(net, i), h.saved[i], cf_shape_size(l->out) * B, i + 1, t);
        double ew = l->w_n ? fd(net, net->params + l->w_off, g + l->w_off, l->w_n, 0, t) : 0;
        double eb = l->b_n ? fd(net, net->params + l->b_off, g + l->b_off, l->b_n, 0, t) : 0;
        int ok = eo <= tol && ew <= tol && eb <= tol;
        bad += !ok;
        printf("%-4d %-10s %14.3g %14.3g %14.3g  %s\n", i, cf_layer_type_name(l->type), eo, ew, eb, ok ? "ok" : "FAIL");
    }
    /* the plan changes where values live, never what they are: the same bits are expected */
    printf("memory plan: gradients under the plan against every output kept, worst relative difference %.3g (tolerance 1e-6) %s\n",
           plan, plan <= 1e-6 ? "ok" : "FAIL: a layer's backward reads an output the plan did not keep (its table flags)");
    bad += plan > 1e-6;
    printf("gradcheck %s: worst relative error per layer above, tolerance %g\n", bad ? "FAILED" : "passed", tol);
    for (i = 0; i < net->n_layers; i++) free(h.saved[i]);
    free(h.saved); free(x); free(t); free(dout); free(g);
    return bad;
}

static void write_f32(const char *path, const float *p, int ndim, const int64_t *shape) {
    cf_array a;
    int i;
    memset(&a, 0, sizeof a);
    a.dtype = CF_F32; a.ndim = ndim; a.count = 1; a.data = (void *)p;
    for (i = 0; i < ndim; i++) { a.shape[i] = shape[i]; a.count *= (size_t)shape[i]; }
    output_in_dir(path);
    TRY(cf_npy_write(path, &a));
}
/* the network's output, (B, outputs) or (B, C, [D,] H, W) */
static void dump_output(cf_net *net, const char *dir, const float *y, int B) {
    cf_layer *last = &net->layers[net->n_layers - 1];
    int64_t shp[5] = {B, last->out.c, last->out.d, last->out.h, last->out.w};
    int nd = last->out.d * last->out.h * last->out.w == 1 ? 2 : (net->input.d == 1 ? 4 : 5);
    char path[4096];
    if (nd == 4) { shp[2] = last->out.h; shp[3] = last->out.w; }
    snprintf(path, sizeof path, "%s/output.npy", dir);
    write_f32(path, y, nd, shp);
}
/* every parameter tensor's gradient as DIR/grad/NNN_<layer>_<kind>.npy */
static void dump_grads(cf_net *net, const char *dir) {
    int nt = cf_net_tensors(net, NULL, 0), i, j;
    cf_tensor *ts = (cf_tensor *)calloc(nt + 1, sizeof *ts);
    char path[4096];
    if (!ts) die("out of memory");
    snprintf(path, sizeof path, "%s/grad", dir);
    output_dir("--dump", path);
    cf_net_tensors(net, ts, nt);
    for (i = 0; i < nt; i++) {
        int64_t shp[5];
        if (ts[i].stats) continue;   /* running statistics have no gradient */
        for (j = 0; j < ts[i].ndim; j++) shp[j] = ts[i].shape[j];
        snprintf(path, sizeof path, "%s/grad/%03d_%d_%s.npy", dir, i, ts[i].layer, ts[i].kind);
        write_f32(path, net->grads + ts[i].off, ts[i].ndim, shp);
    }
    free(ts);
}
/* --input ramp: one sample x[i] = (i % 10) / 10, targets 0.5 (class 0 for segmentation), both
   written to DIR, so that a first dump needs no other program */
static void ramp(cf_net *net, const char *dir, cf_array *xa, cf_array *ta) {
    size_t k;
    char path[4096];
    memset(xa, 0, sizeof *xa); memset(ta, 0, sizeof *ta);
    xa->dtype = ta->dtype = CF_F32;
    xa->ndim = net->input.d == 1 ? 4 : 5; xa->shape[0] = 1; xa->shape[1] = net->input.c;
    if (xa->ndim == 5) { xa->shape[2] = net->input.d; xa->shape[3] = net->input.h; xa->shape[4] = net->input.w; }
    else { xa->shape[2] = net->input.h; xa->shape[3] = net->input.w; }
    xa->count = cf_shape_size(net->input); ta->count = (size_t)net->n_targets;
    ta->ndim = 2; ta->shape[0] = 1; ta->shape[1] = net->n_targets;
    if (!(xa->data = calloc(xa->count, 4)) || !(ta->data = calloc(ta->count, 4))) die("out of memory");
    for (k = 0; k < xa->count; k++) ((float *)xa->data)[k] = (float)(k % 10) / 10.0f;
    for (k = 0; k < ta->count; k++) ((float *)ta->data)[k] = net->loss == CF_LOSS_SOFTMAX_CE ? 0.0f : 0.5f;
    snprintf(path, sizeof path, "%s/input.npy", dir); output_in_dir(path); TRY(cf_npy_write(path, xa));
    snprintf(path, sizeof path, "%s/target.npy", dir); output_in_dir(path); TRY(cf_npy_write(path, ta));
}
/* a small tensor's values on stdout too (at most 16), for reading a dump without numpy */
static void show(const char *name, const float *v, size_t n) {
    size_t k;
    if (n > 16) return;
    printf("%s:", name);
    for (k = 0; k < n; k++) printf(" %.6g", v[k]);
    printf("\n");
}
/* the first value of x that is NaN or infinite: refused, naming it, before anything is written */
static void finite_or_die(const char *path, const cf_array *a) {
    size_t k;
    for (k = 0; k < a->count; k++)
        if (!isfinite(((const float *)a->data)[k])) die("%s: value %zu is %g: not finite (nothing dumped)", path, k, ((const float *)a->data)[k]);
}
static void dump(cf_net *net, const options *o) {
    cf_array xa, ta;
    char path[4096], text[64];
    size_t per = cf_shape_size(net->input);
    float *dout, *dx;
    const float *y;
    double loss;
    int B, i;
    cf_atomic_file af;
    if (!strcmp(o->input, "ramp")) { output_dir("--dump", o->dump); ramp(net, o->dump, &xa, &ta); }
    else TRY(cf_npy_read(o->input, &xa));
    if (xa.dtype != CF_F32 || xa.ndim < 2 || xa.count % per || xa.shape[1] != net->input.c)
        die("%s: expected float32 (N, %d, ...) with %zu values per sample", o->input, net->input.c, per);
    if (xa.dtype == CF_F32) finite_or_die(o->input, &xa);
    if (o->target) { TRY(cf_npy_read(o->target, &ta)); if (ta.dtype == CF_F32) finite_or_die(o->target, &ta); }
    output_dir("--dump", o->dump);   /* made once the inputs are known to be good */
    B = (int)(xa.count / per);
    cf_net_set_mode(net, strcmp(o->mode, "train") ? CF_MODE_EVAL : CF_MODE_BATCH_STATS);   /* dropout off */
    if (!(y = cf_net_forward(net, (const float *)xa.data, B))) die("%s", cf_failure_reason());
    if (cf_net_first_nonfinite_param(net, 1) >= 0)
        die("%s: layer %d's parameters are not finite (nothing dumped)", o->weights ? o->weights : o->model, cf_net_first_nonfinite_param(net, 1));
    dump_output(net, o->dump, y, B);
    show("input", (const float *)xa.data, xa.count);
    show("output", y, (size_t)B * net->n_outputs);
    if (!o->target && strcmp(o->input, "ramp")) { cf_array_free(&xa); return; }
    if (ta.dtype != CF_F32 || ta.count != (size_t)B * net->n_targets) die("%s: expected float32 with %d x %d values", o->target, B, net->n_targets);
    if (!(dout = (float *)malloc((size_t)B * net->n_outputs * 4)) || !(dx = (float *)calloc(xa.count, 4))) die("out of memory");
    loss = cf_net_loss(net, (const float *)ta.data, dout);
    snprintf(path, sizeof path, "%s/loss.txt", o->dump);
    output_in_dir(path);
    snprintf(text, sizeof text, "%.9g\n", loss);
    TRY(cf_atomic_open(&af, path)); cf_atomic_write(&af, text, strlen(text)); TRY(cf_atomic_commit(&af));
    cf_net_zero_grad(net);
    cf_net_set_input_grad(net, dx);   /* the gradient of the input too (the input's backward-data) */
    cf_net_backward(net, dout);
    cf_net_set_input_grad(net, NULL);
    dump_grads(net, o->dump);
    snprintf(path, sizeof path, "%s/grad_input.npy", o->dump);
    write_f32(path, dx, xa.ndim, xa.shape);
    for (i = 0; i < net->n_layers; i++) {
        char name[64];
        snprintf(name, sizeof name, "layer %d weight gradient", i); if (net->layers[i].w_n) show(name, net->grads + net->layers[i].w_off, net->layers[i].w_n);
        snprintf(name, sizeof name, "layer %d bias gradient", i); if (net->layers[i].b_n) show(name, net->grads + net->layers[i].b_off, net->layers[i].b_n);
    }
    show("input gradient", dx, xa.count);
    printf("loss %.9g\n", loss);
    free(dout); free(dx);
    cf_array_free(&ta); cf_array_free(&xa);
}

int main(int argc, char **argv) {
    options o;
    cf_net net;
    struct stat st;
    int is_dir, bad = 0;
    tool_init(argc, argv, "check");
    memset(&o, 0, sizeof o);
    o.batch = 2; o.tolerance = 0.01; o.seed = 1; o.mode = "eval"; o.spatial = 1;
    flag_table(&o);
    flag_parse(argc, argv, 1, flags, n_flags, usage, NULL, 0);
    dist_start(&argc, &argv);
    one_process_only();
    if (!o.summary && !o.gradcheck && !o.dump && !o.info) die("nothing to do: give --summary, --info, --gradcheck or --dump DIR");
    if (o.dump && !o.input) die("--dump: needs --input x.npy (or --input ramp)");
    {   /* a flag of --gradcheck or of --dump without it would be ignored: refused by name */
        static const char *of_gradcheck[] = {"--batch", "--tolerance"}, *of_dump[] = {"--input", "--target", "--mode"};
        int i;
        for (i = 0; i < 2; i++) if (!o.gradcheck && flag_was_given(flags, n_flags, of_gradcheck[i])) die("%s: a setting of --gradcheck; needs --gradcheck", of_gradcheck[i]);
        for (i = 0; i < 3; i++) if (!o.dump && flag_was_given(flags, n_flags, of_dump[i])) die("%s: a setting of --dump; needs --dump DIR", of_dump[i]);
    }
    is_dir = o.weights && !stat(o.weights, &st) && S_ISDIR(st.st_mode);
    if (o.info) {
        if (!o.weights || is_dir) die("--info: needs --weights CKPT, a checkpoint");
        info(o.weights);
        if (!o.summary && !o.gradcheck && !o.dump) return 0;
    }
    if (!o.model && (!o.weights || is_dir)) die("--model: required (or --weights with a checkpoint, which holds its model)");
    input_path(o.model); input_path(o.weights); input_path(o.target);
    if (o.input && strcmp(o.input, "ramp")) input_path(o.input);
    load_model(&net, o.model, o.has_shape ? &o.shape : NULL, is_dir ? NULL : o.weights);
    cf_net_init(&net, o.seed);
    if (o.weights) TRY(cf_weights_load(&net, o.weights));
    if (o.gradcheck && o.precision == CF_BF16) die("--gradcheck --precision bf16: finite differences cannot resolve gradients rounded to 8 bits; bf16 is checked against float64 PyTorch (make agreement)");
    TRY(cf_net_set_precision(&net, o.precision));
    if (o.precision == CF_BF16) printf("cf-check: %s\n", precision_text(o.precision));
    if (o.spatial > 1 && !o.summary) die("--spatial: with --summary (one rank's plan)");
    if (o.spatial > 1 && cf_net_set_spatial(&net, o.spatial, 0)) die("--spatial %d: %s", o.spatial, cf_failure_reason());
    if (o.summary) summary(&net);
    if (o.dump) dump(&net, &o);
    if (o.gradcheck) bad = gradcheck(&net, o.batch, o.tolerance, o.seed);
    cf_net_free(&net);
    cf_dist_finalize();
    return bad ? 1 : 0;
}
