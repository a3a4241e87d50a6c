/* cf-eval: a trained model on a directory of samples.  CosmoFlow: MAE overall and per
   parameter, predictions (.npy), pictures (scatter plots, an input slice).  DeepCAM
   (loss=softmax_ce): mean IoU as MLPerf, per class, against predicting background everywhere;
   predicted masks (.npy); pictures of the precipitable water with the true and the predicted
   masks side by side. */
#include "tool.h"
#include "draw.h"

static const char *par_names[4] = {"Omega_m", "sigma_8", "n_s", "H_0"};

static void usage(void) {
    printf("usage: cf-eval --model M.cfg --weights CKPT --data DIR [flags]\n"
           "  --model M.cfg       network (required)\n"
           "  --weights W         checkpoint or weights directory (required)\n"
           "  --data DIR          samples: *.tfrecord, *.tfrecord.gz or *_data.npy (required)\n"
           "  --input-shape S     CxDxHxW, replaces the cfg's input size\n"
           "  --batch B           samples per forward pass (default 4)\n"
           "  --pred FILE.npy     predictions, float32 (N, outputs), in sorted file order\n"
           "  --png DIR           scatter_<parameter>.png (predicted vs true) and input_slice.png\n"
           "  --baseline DIR      also report the MAE of predicting DIR's mean label (e.g. the training set)\n"
           "  --no-log            x / mean(x) instead of log(1 + x), as in training\n"
           "  --log-ratio         log(1 + x) - log(1 + channel mean), as in training\n"
           "DeepCAM models (loss=softmax_ce):\n"
           "  --stats DIR         stats_minval.npy / stats_maxval.npy (default: --data or its parent)\n"
           "  --pred FILE.npy     predicted class ids, uint8 (N, H, W), in sorted file order\n"
           "  --png DIR           mask_NNNN.png for the first --png-count samples: TMQ in grey, true mask left,\n"
           "                      predicted right (cyclones red, rivers blue)\n"
           "  --png-count K       (default 8)\n"
           "last line: mae V (CosmoFlow) or miou V (DeepCAM)\n");
    exit(0);
}

static void scatter(const char *dir, int p, const float *pred, const float *truth, int n, int ny, double mae) {
    canvas c = canvas_new(360, 380);
    char path[4096], title[128];
    int i, x0 = 40, y0 = 40, W = 300;
    unsigned grey = 0xbbbbbb;
    rect(&c, x0, y0, W, W, 0xf4f4f4);
    for (i = 0; i <= 4; i++) {   /* grid at -1, -0.5, 0, 0.5, 1 of the [-1.2, 1.2] range */
        int q = x0 + (int)((i * 0.5 - 1 + 1.2) / 2.4 * W);
        char lab[16];
        line(&c, q, y0, q, y0 + W - 1, 0xe0e0e0); line(&c, x0, q, x0 + W - 1, q, 0xe0e0e0);
        snprintf(lab, sizeof lab, "%g", i * 0.5 - 1);
        text(&c, q - 6, y0 + W + 6, 2, 0x555555, lab);
        text(&c, 4, y0 + W - (q - y0) - 5, 2, 0x555555, lab);
    }
    line(&c, x0, y0 + W - 1, x0 + W - 1, y0, grey);   /* the diagonal: perfect predictions */
    for (i = 0; i < n; i++) {
        int x = x0 + (int)((truth[i * ny + p] + 1.2) / 2.4 * W), y = y0 + W - (int)((pred[i * ny + p] + 1.2) / 2.4 * W);
        dot(&c, x, y, 0x1f60c0);
    }
    snprintf(title, sizeof title, "%s  MAE %.3f", p < 4 ? par_names[p] : "output", mae);
    text(&c, x0, 10, 3, 0x000000, title);
    text(&c, x0 + W / 2 - 40, y0 + W + 22, 2, 0x333333, "TRUE (UNIT)");
    text(&c, x0 + 4, y0 + 4, 2, 0x333333, "PREDICTED");
    snprintf(path, sizeof path, "%s/scatter_%s.png", dir, p < 4 ? par_names[p] : "output");
    canvas_save(&c, path);
}

/* the middle slice of each of the 4 channels, log(1 + count) in grey, side by side */
static void slice_png(const char *dir, const char *file) {
    cf_cosmo_sample s;
    int ch, i, j, cell, S;
    char path[4096];
    TRY(cf_cosmo_read(file, &s));
    S = s.s; cell = S >= 256 ? 1 : 256 / S;
    canvas c = canvas_new(4 * (S * cell + 10) + 10, S * cell + 40);
    for (ch = 0; ch < 4; ch++) {
        double mx = 0, mn = 1e30;
        static const char *z[4] = {"Z = 0", "Z = 0.5", "Z = 1.5", "Z = 3"};
        int ox = 10 + ch * (S * cell + 10);
        for (i = 0; i < S * S; i++) { double v = log1p(s.x[((size_t)(S / 2) * S * S + i) * 4 + ch]); if (v > mx) mx = v; if (v < mn) mn = v; }
        for (i = 0; i < S; i++) for (j = 0; j < S; j++) {   /* dark = dense, stretched from min to max */
            double v = (log1p(s.x[(((size_t)(S / 2) * S + i) * S + j) * 4 + ch]) - mn) / (mx > mn ? mx - mn : 1);
            unsigned g = (unsigned)(255 * (1 - v));
            rect(&c, ox + j * cell, 30 + i * cell, cell, cell, g << 16 | g << 8 | g);
        }
        text(&c, ox, 8, 3, 0, z[ch]);
    }
    snprintf(path, sizeof path, "%s/input_slice.png", dir);
    canvas_save(&c, path);
    cf_cosmo_free(&s);
}

/* TMQ (input channel 0, normalized) in grey; class 1 blended red, class 2 blue */
static void mask_panel(canvas *c, int ox, int oy, int cell, const float *tmq, const float *cls, const int *icls, int H, int W) {
    int i, j;
    for (i = 0; i < H; i++) for (j = 0; j < W; j++) {
        size_t q = (size_t)i * W + j;
        double v = tmq[q] < 0 ? 0 : tmq[q] > 1 ? 1 : tmq[q];
        int k = cls ? (int)cls[q] : icls[q];
        unsigned g = (unsigned)(40 + 200 * v), r = g, gg = g, b = g;
        if (k == 1) { r = (g + 2 * 255) / 3; gg = g / 3; b = g / 3; }
        if (k == 2) { r = g / 3; gg = (g + 120) / 3; b = (g + 2 * 255) / 3; }
        rect(c, ox + j * cell, oy + i * cell, cell, cell, r << 16 | gg << 8 | b);
    }
}

static int eval_segmentation(cf_net *net, char **files, int n, int B, const char *stats, const char *data,
                             const char *pred_path, const char *png, int png_count) {
    int H = net->input.h, W = net->input.w, C = net->input.c, K = net->layers[net->n_layers - 1].out.c, i, k, j;
    size_t P = (size_t)H * W;
    float cmin[64], cmax[64];
    int *order = (int *)malloc(sizeof(int) * n), *pred = (int *)malloc(sizeof(int) * P), *zero = (int *)calloc(P, sizeof(int));
    unsigned char *all = pred_path ? (unsigned char *)malloc((size_t)n * P) : NULL;
    double miou = 0, base = 0, per[CF_MAX_CLASSES] = {0};
    loader L;
    if (C > 64) die("%s: more than 64 input channels", net->cfg_name);
    if (pred_path && !all) die("--pred: %d masks of %dx%d do not fit in memory", n, H, W);
    TRY(cf_climate_stats(stats ? stats : data, cmin, cmax, C));
    if (png && mkdir(png, 0777) && errno != EEXIST) die("%s: %s", png, strerror(errno));
    for (i = 0; i < n; i++) order[i] = i;
    loader_init_climate(&L, files, C, H, W, K, B, cmin, cmax);
    loader_begin(&L, order, n);
    for (k = 0;;) {
        float *x, *y;
        int nb;
        const float *out;
        loader_next(&L, &x, &y, &nb);
        if (!nb) break;
        if (!(out = cf_net_forward(net, x, nb))) die("%s", cf_failure_reason());
        for (j = 0; j < nb; j++, k++) {
            const float *yj = y + (size_t)j * P;
            int c;
            cf_argmax_classes(pred, out + (size_t)j * K * P, K, P);
            miou += cf_iou_sample(pred, yj, P, K);
            base += cf_iou_sample(zero, yj, P, K);   /* background everywhere */
            for (c = 0; c < K; c++) {   /* this class's IoU alone (1 when absent from both) */
                size_t tp = 0, un = 0, q;
                for (q = 0; q < P; q++) { int a = pred[q] == c, b = (int)yj[q] == c; tp += a && b; un += a || b; }
                per[c] += un ? (double)tp / un : 1.0;
            }
            if (all) for (size_t q = 0; q < P; q++) all[(size_t)k * P + q] = (unsigned char)pred[q];
            if (png && k < png_count) {
                int cell = W >= 512 ? 1 : 512 / W;
                canvas cv = canvas_new(2 * W * cell + 30, H * cell + 40);
                char path[4096], title[128];
                mask_panel(&cv, 10, 30, cell, x + (size_t)j * C * P, yj, NULL, H, W);
                mask_panel(&cv, 20 + W * cell, 30, cell, x + (size_t)j * C * P, NULL, pred, H, W);
                snprintf(title, sizeof title, "TRUE");
                text(&cv, 10, 8, 3, 0, title);
                snprintf(title, sizeof title, "PREDICTED  IOU %.3f", cf_iou_sample(pred, yj, P, K));
                text(&cv, 20 + W * cell, 8, 3, 0, title);
                snprintf(path, sizeof path, "%s/mask_%04d.png", png, k);
                canvas_save(&cv, path);
            }
        }
    }
    loader_free(&L);
    if (all) {
        cf_array a;
        memset(&a, 0, sizeof a);
        a.dtype = CF_U8; a.ndim = 3; a.shape[0] = n; a.shape[1] = H; a.shape[2] = W; a.count = (size_t)n * P; a.data = all;
        TRY(cf_npy_write(pred_path, &a));
    }
    {
        static const char *names[3] = {"background", "cyclone", "river"};
        for (j = 0; j < K; j++) printf("iou_%s %.6f\n", j < 3 ? names[j] : "class", per[j] / n);
    }
    printf("baseline_miou %.6f\n", base / n);
    printf("miou %.6f\n", miou / n);
    free(order); free(pred); free(zero); free(all);
    return 0;
}

int main(int argc, char **argv) {
    const char *model = NULL, *weights = NULL, *data = NULL, *pred_path = NULL, *png = NULL, *base_dir = NULL, *stats = NULL;
    int B = 4, i, has_shape = 0, n, apply_log = 1, k, p, png_count = 8;
    cf_shape shape;
    cf_net net;
    char **files;
    tool_name = "eval";
    tool_init(argc, argv);
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (common_flag(argc, argv, &i, usage, &model, &shape, &has_shape)) continue;
        else if (!strcmp(a, "--weights")) weights = flag_value(argc, argv, &i);
        else if (!strcmp(a, "--data")) data = flag_value(argc, argv, &i);
        else if (!strcmp(a, "--batch")) B = (int)flag_long(a, flag_value(argc, argv, &i), 1, 65536);
        else if (!strcmp(a, "--pred")) pred_path = flag_value(argc, argv, &i);
        else if (!strcmp(a, "--png")) png = flag_value(argc, argv, &i);
        else if (!strcmp(a, "--baseline")) base_dir = flag_value(argc, argv, &i);
        else if (!strcmp(a, "--no-log")) apply_log = 0;
        else if (!strcmp(a, "--log-ratio")) apply_log = 2;
        else if (!strcmp(a, "--stats")) stats = flag_value(argc, argv, &i);
        else if (!strcmp(a, "--png-count")) png_count = (int)flag_long(a, flag_value(argc, argv, &i), 0, 1 << 30);
        else die("%s: unknown flag (see --help)", a);
    }
    if (!model || !weights || !data) die("needs --model, --weights and --data (see --help)");
    TRY(cf_net_load_cfg(&net, model, has_shape ? &shape : NULL));
    TRY(cf_weights_load(&net, weights));
    net.training = 0; net.bn_train = 0;
    files = list_samples(data, &n);
    if (net.loss == CF_LOSS_SOFTMAX_CE) {
        int rc = eval_segmentation(&net, files, n, B, stats, data, pred_path, png, png_count);
        for (i = 0; i < n; i++) free(files[i]);
        free(files);
        cf_net_free(&net);
        return rc;
    }
    int ny = net.n_outputs;
    float *pred = (float *)malloc(sizeof(float) * n * ny), *truth = (float *)malloc(sizeof(float) * n * ny);
    int *order = (int *)malloc(sizeof(int) * n);
    loader L;
    for (i = 0; i < n; i++) order[i] = i;
    loader_init(&L, files, net.input.d, net.input.c, ny, B, apply_log);
    loader_begin(&L, order, n);
    for (k = 0;;) {
        float *x, *y;
        int nb;
        const float *out;
        loader_next(&L, &x, &y, &nb);
        if (!nb) break;
        if (!(out = cf_net_forward(&net, x, nb))) die("%s", cf_failure_reason());
        memcpy(pred + (size_t)k * ny, out, sizeof(float) * nb * ny);
        memcpy(truth + (size_t)k * ny, y, sizeof(float) * nb * ny);
        k += nb;
    }
    loader_free(&L);
    double total = 0, per[16] = {0};
    for (i = 0; i < n; i++) for (p = 0; p < ny; p++) { double d = fabs((double)pred[i * ny + p] - truth[i * ny + p]); total += d; if (p < 16) per[p] += d; }
    for (p = 0; p < ny && p < 16; p++) printf("mae_%s %.6f\n", p < 4 ? par_names[p] : "output", per[p] / n);
    if (base_dir) {   /* predicting the mean label of base_dir for every sample */
        int nb_files, j;
        char **bf = list_samples(base_dir, &nb_files);
        double mean[16] = {0}, bmae = 0;
        for (j = 0; j < nb_files; j++) {
            cf_cosmo_sample s;
            TRY(cf_cosmo_read(bf[j], &s));
            for (p = 0; p < ny && p < s.ny && p < 16; p++) mean[p] += s.y[p] / nb_files;
            cf_cosmo_free(&s);
            free(bf[j]);
        }
        free(bf);
        for (i = 0; i < n; i++) for (p = 0; p < ny && p < 16; p++) bmae += fabs(truth[i * ny + p] - mean[p]);
        printf("baseline_mae %.6f\n", bmae / ((double)n * ny));
    }
    if (pred_path) {
        cf_array a;
        memset(&a, 0, sizeof a);
        a.dtype = CF_F32; a.ndim = 2; a.shape[0] = n; a.shape[1] = ny; a.count = (size_t)n * ny; a.data = pred;
        TRY(cf_npy_write(pred_path, &a));
    }
    if (png) {
        if (mkdir(png, 0777) && errno != EEXIST) die("%s: %s", png, strerror(errno));
        for (p = 0; p < ny && p < 16; p++) scatter(png, p, pred, truth, n, ny, per[p] / n);
        slice_png(png, files[0]);
    }
    printf("mae %.6f\n", total / ((double)n * ny));
    for (i = 0; i < n; i++) free(files[i]);
    free(files); free(pred); free(truth); free(order);
    cf_net_free(&net);
    return 0;
}
