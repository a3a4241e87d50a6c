/* cf-check: look inside a model.  --summary (layers, shapes, parameters, FLOPs),
   --gradcheck (finite differences against backprop, layer by layer), --dump (one forward and
   backward pass written as .npy, to compare with PyTorch). */
#include "tool.h"

static void usage(void) {
    printf("usage: cf-check --model M.cfg [--input-shape S] (--summary | --gradcheck | --dump DIR --input x.npy ...)\n"
           "  --model M.cfg        network description (required)\n"
           "  --input-shape S      CxDxHxW or CxHxW, replaces the cfg's input size (default: the cfg's)\n"
           "  --summary            one row per layer: type, output shape, parameters, forward FLOPs; last line 'params N'\n"
           "  --gradcheck          finite differences against backprop for every layer; exit 1 on failure\n"
           "  --batch B            batch for --gradcheck (default 2)\n"
           "  --tolerance T        --gradcheck threshold on the relative error (default 0.01)\n"
           "  --seed K             weights and data for --gradcheck (default 1)\n"
           "  --dump DIR           write DIR/output.npy, DIR/loss.txt (with --target), DIR/grad/NNN_<layer>_<kind>.npy\n"
           "  --input x.npy        float32 input (N, C, D, H, W) or (N, C, H, W), for --dump\n"
           "  --target y.npy       float32 targets, for --dump: adds loss and gradients; (N, outputs) for\n"
           "                       regression, (N, H, W) class ids for segmentation (loss=softmax_ce)\n"
           "  --weights W          checkpoint or weights directory (default: initial weights from --seed)\n"
           "  --mode train|eval    batch norm for --dump: batch statistics (train) or running ones (eval,\n"
           "                       the default); dropout is off in both\n"
           "  --help, --version\n");
    exit(0);
}

static void summary(cf_net *net) {
    int i;
    double flops = 0;
    printf("%-4s %-10s %-22s %12s %14s\n", "#", "type", "output (CxDxHxW)", "params", "fwd MFLOP");
    printf("%-4s %-10s %4dx%-4dx%-4dx%-6d %12s %14s\n", "in", "input", net->input.c, net->input.d, net->input.h, net->input.w, "", "");
    for (i = 0; i < net->n_layers; i++) {
        cf_layer *l = &net->layers[i];
        char shp[64];
        snprintf(shp, sizeof shp, "%dx%dx%dx%d", l->out.c, l->out.d, l->out.h, l->out.w);
        printf("%-4d %-10s %-22s %12zu %14.2f\n", i, cf_layer_type_name(l->type), shp, l->w_n + l->b_n, cf_layer_flops(l) / 1e6);
        flops += cf_layer_flops(l);
    }
    printf("forward GFLOP per sample %.3f (training step about 3x: %.3f)\n", flops / 1e9, 3 * flops / 1e9);
    if (net->n_stats) printf("batchnorm running statistics %zu (not trained, not counted)\n", net->n_stats);
    printf("training memory per sample: outputs and gradients %.1f MB (%.1f MB if every output were kept), "
           "parameters %.1f MB per copy\n", cf_net_arena_floats(net, 1, 0) * 4e-6, cf_net_arena_floats(net, 1, 1) * 4e-6, net->n_params * 4e-6);
    printf("params %zu\n", net->n_params);
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
static int gradcheck(cf_net *net, int B, double tol, uint64_t seed) {
    cf_rng r = cf_rng_seed(seed);
    size_t nx = B * cf_shape_size(net->input), ny = (size_t)B * net->n_outputs, nt = (size_t)B * net->n_targets, k;
    float *x = (float *)malloc(nx * 4), *t = (float *)malloc(ny * 4), *dout = (float *)malloc(ny * 4), *g = (float *)malloc(net->n_params * 4 + 4);
    hook_ctx h;
    int i, bad = 0;
    for (k = 0; k < nx; k++) x[k] = cf_rng_uniform(&r) * 2;
    for (k = 0; k < nt; k++)   /* regression targets in [-1, 1), or class ids */
        t[k] = net->loss == CF_LOSS_SOFTMAX_CE ? (float)(cf_rng_u64(&r) % (uint64_t)net->layers[net->n_layers - 1].out.c)
                                               : cf_rng_uniform(&r) * 2 - 1;
    h.saved = (float **)calloc(net->n_layers, sizeof *h.saved);
    net->keep_acts = 1;   /* forward_from re-runs the network from any layer: every output kept */
    cf_net_set_batch(net, B);
    for (i = 0; i < net->n_layers; i++) h.saved[i] = (float *)malloc(cf_shape_size(net->layers[i].out) * B * 4);
    net->training = 1; net->step = 1;   /* dropout on with one fixed mask */
    net->bn_train = 1;                  /* batch norm with batch statistics (its harder backward) */
    cf_net_forward(net, x, B);
    cf_net_loss(net, t, dout);
    cf_net_zero_grad(net);
    net->backward_hook = save_output_grad; net->hook_ctx = &h;
    cf_net_backward(net, dout);
    net->backward_hook = NULL;
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
    TRY(cf_npy_write(path, &a));
}

static void dump(cf_net *net, const char *dir, const char *xpath, const char *tpath, int train_mode) {
    cf_array xa, ta;
    int B, i, nt;
    char path[4096];
    size_t per = cf_shape_size(net->input);
    TRY(cf_npy_read(xpath, &xa));
    if (xa.dtype != CF_F32 || xa.ndim < 2 || xa.count % per || xa.shape[1] != net->input.c)
        die("%s: expected float32 (N, %d, ...) with %zu values per sample", xpath, net->input.c, per);
    B = (int)(xa.count / per);
    if (mkdir(dir, 0777) && errno != EEXIST) die("%s: %s", dir, strerror(errno));
    net->training = 0;
    net->bn_train = train_mode;
    const float *y = cf_net_forward(net, (const float *)xa.data, B);
    if (!y) die("%s", cf_failure_reason());
    {
        cf_layer *last = &net->layers[net->n_layers - 1];
        int64_t shp[5] = {B, last->out.c, last->out.d, last->out.h, last->out.w};
        int nd = last->out.d * last->out.h * last->out.w == 1 ? 2 : (net->input.d == 1 ? 4 : 5);
        if (nd == 4) { shp[2] = last->out.h; shp[3] = last->out.w; }
        snprintf(path, sizeof path, "%s/output.npy", dir);
        write_f32(path, y, nd, shp);
    }
    if (!tpath) return;
    TRY(cf_npy_read(tpath, &ta));
    if (ta.dtype != CF_F32 || ta.count != (size_t)B * net->n_targets) die("%s: expected float32 with %d x %d values", tpath, B, net->n_targets);
    float *dout = (float *)malloc((size_t)B * net->n_outputs * 4);
    double loss = cf_net_loss(net, (const float *)ta.data, dout);
    FILE *f;
    snprintf(path, sizeof path, "%s/loss.txt", dir);
    f = fopen(path, "w");
    if (!f) die("%s: %s", path, strerror(errno));
    fprintf(f, "%.9g\n", loss);
    if (fclose(f)) die("%s: write failed", path);
    cf_net_zero_grad(net);
    cf_net_backward(net, dout);
    snprintf(path, sizeof path, "%s/grad", dir);
    if (mkdir(path, 0777) && errno != EEXIST) die("%s: %s", path, strerror(errno));
    nt = cf_net_tensors(net, NULL, 0);
    cf_tensor *ts = (cf_tensor *)calloc(nt, sizeof *ts);
    cf_net_tensors(net, ts, nt);
    for (i = 0; i < nt; i++) {
        int64_t shp[5];
        int j;
        if (ts[i].stats) continue;   /* running statistics have no gradient */
        for (j = 0; j < ts[i].ndim; j++) shp[j] = ts[i].shape[j];
        snprintf(path, sizeof path, "%s/grad/%03d_%d_%s.npy", dir, i, ts[i].layer, ts[i].kind);
        write_f32(path, net->grads + ts[i].off, ts[i].ndim, shp);
    }
    printf("loss %.9g\n", loss);
    free(ts); free(dout);
    cf_array_free(&ta); cf_array_free(&xa);
}

int main(int argc, char **argv) {
    const char *model = NULL, *weights = NULL, *dumpdir = NULL, *xin = NULL, *tin = NULL, *mode = "eval";
    int do_summary = 0, do_grad = 0, B = 2, i, has_shape = 0;
    double tol = 0.01;
    uint64_t seed = 1;
    cf_shape shape;
    cf_net net;
    tool_name = "check";
    tool_init(argc, argv);
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (common_flag(argc, argv, &i, usage, &model, &shape, &has_shape)) continue;
        else if (!strcmp(a, "--summary")) do_summary = 1;
        else if (!strcmp(a, "--gradcheck")) do_grad = 1;
        else if (!strcmp(a, "--batch")) B = (int)flag_long(a, flag_value(argc, argv, &i), 1, 4096);
        else if (!strcmp(a, "--tolerance")) tol = flag_double(a, flag_value(argc, argv, &i), 0, 1);
        else if (!strcmp(a, "--seed")) seed = (uint64_t)flag_long(a, flag_value(argc, argv, &i), 0, 0x7fffffffL);
        else if (!strcmp(a, "--dump")) dumpdir = flag_value(argc, argv, &i);
        else if (!strcmp(a, "--input")) xin = flag_value(argc, argv, &i);
        else if (!strcmp(a, "--target")) tin = flag_value(argc, argv, &i);
        else if (!strcmp(a, "--weights")) weights = flag_value(argc, argv, &i);
        else if (!strcmp(a, "--mode")) { mode = flag_value(argc, argv, &i); if (strcmp(mode, "train") && strcmp(mode, "eval")) die("--mode: '%s' is not train or eval", mode); }
        else die("%s: unknown flag (see --help)", a);
    }
    if (!model) die("--model: required (see --help)");
    if (!do_summary && !do_grad && !dumpdir) die("nothing to do: give --summary, --gradcheck or --dump DIR");
    if (dumpdir && !xin) die("--dump: needs --input x.npy");
    TRY(cf_net_load_cfg(&net, model, has_shape ? &shape : NULL));
    cf_net_init(&net, seed);
    if (weights) TRY(cf_weights_load(&net, weights));
    if (do_summary) summary(&net);
    if (dumpdir) dump(&net, dumpdir, xin, tin, !strcmp(mode, "train"));
    if (do_grad && gradcheck(&net, B, tol, seed)) { cf_net_free(&net); return 1; }
    cf_net_free(&net);
    return 0;
}
