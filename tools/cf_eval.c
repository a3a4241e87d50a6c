/* cf-eval: a trained model on a directory of samples.  CosmoFlow: MAE overall and per
   parameter, predictions (.npy), pictures (scatter plots, an input slice).  DeepCAM
   (loss=softmax_ce): mean IoU as MLPerf, per class, against predicting background everywhere;
   predicted masks (.npy); pictures of the precipitable water with the true and the predicted
   masks side by side.  The model comes from the checkpoint unless --model is given.  One
   process, or with --spatial K the K ranks of mpirun -np K, each sample split across them
   (rank 0 prints and writes). */
#ifndef CF_IMPLEMENTATION_LINKED   /* the Makefile links the implementation it compiled once (tools/cosmoflow.c) */
#define CF_IMPLEMENTATION
#endif
#include "cosmoflow.h"
#include "tool.h"
#include "data.h"
#include "draw.h"
#include "spectrum.h"

static const char *par_names[4] = {"Omega_m", "sigma_8", "n_s", "H_0"};

typedef struct {
    const char *model, *weights, *data, *pred, *png, *baseline, *spectrum, *stats, *spectrum_features, *spectrum_bins, *spectrum_dump, *spectrum_select;
    int batch, has_shape, apply_log, png_count, spectrum_epochs, spectrum_moments, precision, spatial, crops;
    cf_shape shape;
} options;
static tool_flag flags[26];
static int n_flags;
static void flag_table(options *o) {
    tool_flag f[] = {
        {"--weights", "W", FLAG_STR, &o->weights, 0, 0, "checkpoint or weights directory (required)", NULL, NULL},
        {"--data", "DIR", FLAG_STR, &o->data, 0, 0, "samples: *.tfrecord, *.tfrecord.gz, *_data.npy or data-*.npy (required)", NULL, NULL},
        {"--model", "M.cfg", FLAG_STR, &o->model, 0, 0, "network (default: the checkpoint's own; needed with a weights directory)", NULL, NULL},
        {"--input-shape", "S", FLAG_SHAPE, &o->shape, 0, 0, "CxDxHxW, replaces the cfg's input size (default: the checkpoint's)", NULL, &o->has_shape},
        {"--batch", "B", FLAG_INT, &o->batch, 1, 65536, "samples per forward pass", NULL, NULL},
        PRECISION_FLAG(&o->precision),
        BF16_FORM_FLAG,
        {"--pred", "FILE.npy", FLAG_STR, &o->pred, 0, 0, "predictions in sorted file order: float32 (N, outputs), or uint8 (N, H, W) class ids", NULL, NULL},
        {"--png", "DIR", FLAG_STR, &o->png, 0, 0, "CosmoFlow: scatter_<parameter>.png and input_slice.png; DeepCAM: mask_NNNN.png", NULL, NULL},
        {"--png-count", "K", FLAG_INT, &o->png_count, 0, 1 << 30, "DeepCAM: pictures of the first K samples", NULL, NULL},
        {"--baseline", "DIR", FLAG_STR, &o->baseline, 0, 0, "also the MAE of predicting DIR's mean label (e.g. the training set)", NULL, NULL},
        {"--spectrum", "DIR", FLAG_STR, &o->spectrum, 0, 0, "also the MAE of the power-spectrum estimator fitted on DIR (the training set): the information bound of the data (docs/science.md)", NULL, NULL},
        {"--spectrum-epochs", "E", FLAG_INT, &o->spectrum_epochs, 1, 100000, "epochs of the estimator's fit (12: the demo network's budget)", NULL, NULL},
        {"--spectrum-features", "F", FLAG_STR, &o->spectrum_features, 0, 0, "cross: the auto-spectra of every channel and the cross-correlation of every pair; auto: the auto-spectra alone", NULL, NULL},
        {"--spectrum-bins", "K", FLAG_STR, &o->spectrum_bins, 0, 0, "linear: unit shells of |k| (27 at 32^3); octave: [1,2), [2,4), .. (5 at 32^3); half: half shells (54)", NULL, NULL},
        {"--spectrum-select", "DIR", FLAG_STR, &o->spectrum_select, 0, 0, "with --spectrum: choose the estimator's bins, features and fit on DIR (held-out training samples), "
         "then fit the chosen one on both and report every candidate (docs/science.md)", NULL, NULL},
        {"--spectrum-moments", NULL, FLAG_SET, &o->spectrum_moments, 1, 0, "also each channel's one-point moments (log variance, skewness, excess kurtosis of the log counts)", NULL, NULL},
        {"--spectrum-dump", "F.npy", FLAG_STR, &o->spectrum_dump, 0, 0, "write the estimator's features of the --data samples: float32 (N, features), in sorted file order", NULL, NULL},
        {"--transform", "T", FLAG_CALL, &o->apply_log, 0, 0, "CosmoFlow input: log, mean or log-ratio (default: what the checkpoint was trained with, else log)", parse_transform, NULL},
        {"--no-log", NULL, FLAG_SET, &o->apply_log, 0, 0, "--transform mean", NULL, NULL},
        {"--log-ratio", NULL, FLAG_SET, &o->apply_log, 2, 0, "--transform log-ratio", NULL, NULL},
        {"--stats", "DIR", FLAG_STR, &o->stats, 0, 0, "DeepCAM: stats_minval.npy / stats_maxval.npy (default: --data or its parent)", NULL, NULL},
        {"--crops", "N", FLAG_INT, &o->crops, 1, 4096, "CosmoFlow: the samples are crops of volumes, each N consecutive ones (sorted file order) one volume's, "
         "with its labels: the MAE (and --spectrum's, --spectrum-select's held-out samples too) is of each volume's mean prediction; crop_mae the crops' own", NULL, NULL},
        {"--spatial", "K", FLAG_INT, &o->spatial, 1, 65536, "each sample split by depth across the K ranks of mpirun -np K, each reading its slab (cf-train --spatial); default 1: one process", NULL, NULL},
        COMM_TIMEOUT_FLAG,
    };
    n_flags = (int)(sizeof f / sizeof f[0]);
    memcpy(flags, f, sizeof f);
}
static void usage(void) {
    flag_help("usage: cf-eval --weights CKPT --data DIR [flags]", flags, n_flags, "last line: mae V (CosmoFlow) or miou V (DeepCAM)\n");
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

/* sample k's picture: precipitable water with the true mask left, the predicted right */
static void mask_picture(const char *dir, int k, const float *x, const float *y, const int *pred, int H, int W, int K) {
    int cell = W >= 512 ? 1 : 512 / W;
    canvas cv = canvas_new(2 * W * cell + 30, H * cell + 40);
    char path[4096], title[128];
    mask_panel(&cv, 10, 30, cell, x, y, NULL, H, W);
    mask_panel(&cv, 20 + W * cell, 30, cell, x, NULL, pred, H, W);
    text(&cv, 10, 8, 3, 0, "TRUE");
    snprintf(title, sizeof title, "PREDICTED  IOU %.3f", cf_iou_sample(pred, y, (size_t)H * W, K));
    text(&cv, 20 + W * cell, 8, 3, 0, title);
    snprintf(path, sizeof path, "%s/mask_%04d.png", dir, k);
    canvas_save(&cv, path);
}
/* the IoU of class c alone (1 when absent from both) */
static double class_iou(const int *pred, const float *y, size_t P, int c) {
    size_t tp = 0, un = 0, q;
    for (q = 0; q < P; q++) { int a = pred[q] == c, b = (int)y[q] == c; tp += a && b; un += a || b; }
    return un ? (double)tp / un : 1.0;
}

static void eval_segmentation(cf_net *net, char **files, int n, const options *o) {
    int H = net->input.h, W = net->input.w, C = net->input.c, K = net->layers[net->n_layers - 1].out.c, i, k, j, c, nb;
    size_t P = (size_t)H * W, q;
    float *x, *y;
    int *order = (int *)malloc(sizeof(int) * n), *pred = (int *)malloc(sizeof(int) * P), *zero = (int *)calloc(P, sizeof(int));
    unsigned char *all = o->pred ? (unsigned char *)malloc((size_t)n * P) : NULL;
    double miou = 0, base = 0, per[CF_MAX_CLASSES] = {0};
    static const char *names[3] = {"background", "cyclone", "river"};
    const float *out;
    loader L;
    if (!order || !pred || !zero || (o->pred && !all)) die("out of memory for %d masks of %dx%d", n, H, W);
    for (i = 0; i < n; i++) order[i] = i;
    loader_init_for(&L, net, files, o->batch, 0, o->stats ? o->stats : o->data);
    loader_begin(&L, order, n);
    for (k = 0;;) {
        loader_next(&L, &x, &y, &nb);
        if (!nb) break;
        if (!(out = cf_net_predict(net, x, nb))) die("%s", cf_failure_reason());
        for (j = 0; j < nb; j++, k++) {
            const float *yj = y + (size_t)j * P;
            cf_argmax_classes(pred, out + (size_t)j * K * P, K, P);
            miou += cf_iou_sample(pred, yj, P, K);
            base += cf_iou_sample(zero, yj, P, K);   /* background everywhere */
            for (c = 0; c < K; c++) per[c] += class_iou(pred, yj, P, c);
            if (!isfinite(miou)) die("%s: a non-finite IoU (its output is not finite)", loader_file(&L, j));
            if (all) for (q = 0; q < P; q++) all[(size_t)k * P + q] = (unsigned char)pred[q];
            if (o->png && k < o->png_count) mask_picture(o->png, k, x + (size_t)j * C * P, yj, pred, H, W, K);
        }
    }
    loader_free(&L);
    if (all) {
        cf_array a;
        memset(&a, 0, sizeof a);
        a.dtype = CF_U8; a.ndim = 3; a.shape[0] = n; a.shape[1] = H; a.shape[2] = W; a.count = (size_t)n * P; a.data = all;
        TRY(cf_npy_write(o->pred, &a));
    }
    for (j = 0; j < K; j++) printf("iou_%s %.6f\n", j < 3 ? names[j] : "class", per[j] / n);
    printf("baseline_miou %.6f\n", base / n);
    printf("miou %.6f\n", miou / n);
    free(order); free(pred); free(zero); free(all);
}

/* the mean labels of the samples in dir (the baseline predicts them for every sample) */
static void mean_labels(const char *dir, double *mean, int ny) {
    int nf, j, p;
    char **bf = list_samples(dir, &nf);
    for (j = 0; j < nf; j++) {
        cf_cosmo_sample s;
        TRY(cf_cosmo_read(bf[j], &s));
        for (p = 0; p < ny && p < s.ny && p < 16; p++) mean[p] += s.y[p] / nf;
        cf_cosmo_free(&s);
    }
    free_samples(bf, nf);
}
/* the two-point estimator fitted on dir's samples, evaluated on files (tools/spectrum.h) */
static void spectrum_baseline(const options *o, char **files, int n, const cf_net *net) {
    int nt, S = net->input.d, C = net->input.c, ny = net->n_outputs, p, nf;
    spec_kind kind;
    char **tf;
    float *Yt, *Yv, *Ft, *Fv;
    double mae[16], total = 0;
    if (ny > 16) die("--spectrum: %d outputs; at most 16", ny);
    kind.cross = !strcmp(o->spectrum_features, "cross"); kind.moments = o->spectrum_moments;
    kind.octaves = !strcmp(o->spectrum_bins, "octave") ? SPEC_OCTAVE : !strcmp(o->spectrum_bins, "half") ? SPEC_HALF : SPEC_LINEAR;
    nf = spec_n_features(S, C, &kind);
    printf("spectrum_features %s, %s bins: %d bands x %d%s = %d features\n", o->spectrum_features, o->spectrum_bins,
           spec_bands(S, kind.octaves), spec_per_band(C, &kind), kind.moments ? " + moments" : "", nf);
    tf = list_samples(o->spectrum, &nt);
    Ft = spec_load(tf, nt, S, C, ny, &kind, &Yt); Fv = spec_load(files, n, S, C, ny, &kind, &Yv);
    if (o->spectrum_dump) {
        cf_array a;
        memset(&a, 0, sizeof a);
        a.dtype = CF_F32; a.ndim = 2; a.shape[0] = n; a.shape[1] = nf; a.count = (size_t)n * nf; a.data = Fv;
        TRY(cf_npy_write(o->spectrum_dump, &a));
    }
    spec_fit(Ft, Yt, nt, Fv, Yv, n, o->crops, nf, ny, o->spectrum_epochs, mae);
    for (p = 0; p < ny; p++) { printf("spectrum_mae_%s %.6f\n", p < 4 ? par_names[p] : "output", mae[p]); total += mae[p]; }
    printf("spectrum_mae %.6f\n", total / ny);
    free_samples(tf, nt);
    free(Ft); free(Fv); free(Yt); free(Yv);
}
/* The estimator chosen on held-out training samples (--spectrum-select DIR): for each binning
   (octaves, unit shells, half shells) and features (auto; auto and cross; the same with the
   one-point moments, reported apart: beyond two-point), each fitting of spec_fittings is fitted
   on --spectrum's samples and scored on DIR's; the best fitting of each is then fitted on both
   and scored on the data.  The chosen estimator is the two-point one (no moments) with the best
   held-out score, and its scores are the spectrum_mae lines, as a single fit's. */
typedef struct { double held, val[17]; int fit; } spec_result;
static void spectrum_select(const options *o, char **files, int n, const cf_net *net) {
    static const char *bin_names[3] = {"linear", "octave", "half"}, *feat_names[3] = {"auto", "cross", "cross-moments"};
    int S = net->input.d, C = net->input.c, ny = net->n_outputs, nt, nh, b, f, k, p, best = -1;
    char **tf = list_samples(o->spectrum, &nt), **hf = list_samples(o->spectrum_select, &nh);
    spec_result r[9];
    if (ny > 16) die("--spectrum: %d outputs; at most 16", ny);
    printf("spectrum_select: fitted on %d samples of %s, chosen on %d of %s, scored on %d\n", nt, o->spectrum, nh, o->spectrum_select, n);
    for (b = 0; b < 3; b++) {
        spec_kind full = {0, 1, 1};
        float *Yt, *Yh, *Yv, *Ft, *Fh, *Fv, *Ya;
        full.octaves = b;
        Ft = spec_load(tf, nt, S, C, ny, &full, &Yt); Fh = spec_load(hf, nh, S, C, ny, &full, &Yh); Fv = spec_load(files, n, S, C, ny, &full, &Yv);
        Ya = spec_concat(Yt, nt, Yh, nh, ny);
        for (f = 0; f < 3; f++) {
            spec_kind sub;
            spec_result *q = &r[b * 3 + f];
            int nf;
            float *ft, *fh, *fv, *fa;
            double mae[16];
            sub.octaves = b; sub.cross = f > 0; sub.moments = f == 2;
            ft = spec_columns(Ft, nt, S, C, &sub, &nf); fh = spec_columns(Fh, nh, S, C, &sub, &nf); fv = spec_columns(Fv, n, S, C, &sub, &nf);
            q->held = 1e30; q->fit = 0;
            for (k = 0; k < SPEC_N_FITTINGS; k++) {   /* each fitting, scored on the held-out samples */
                double m = 0;
                spec_fit_as(ft, Yt, nt, fh, Yh, nh, o->crops, nf, ny, &spec_fittings[k], mae);
                for (p = 0; p < ny; p++) m += mae[p] / ny;
                printf("spectrum_heldout %s %s %s %.6f\n", bin_names[b], feat_names[f], spec_fittings[k].name, m);
                if (m < q->held) { q->held = m; q->fit = k; }
            }
            fa = spec_concat(ft, nt, fh, nh, nf);   /* the best one on all the training samples, scored on the data */
            spec_fit_as(fa, Ya, nt + nh, fv, Yv, n, o->crops, nf, ny, &spec_fittings[q->fit], mae);
            q->val[16] = 0;
            for (p = 0; p < ny; p++) { q->val[p] = mae[p]; q->val[16] += mae[p] / ny; }
            printf("spectrum_estimator %s-%s %s held_out %.6f", feat_names[f], bin_names[b], spec_fittings[q->fit].name, q->held);
            for (p = 0; p < ny; p++) printf(" %s %.6f", p < 4 ? par_names[p] : "output", q->val[p]);
            printf(" mae %.6f\n", q->val[16]);
            if (f < 2 && (best < 0 || q->held < r[best].held)) best = b * 3 + f;
            free(ft); free(fh); free(fv); free(fa);
        }
        free(Ft); free(Fh); free(Fv); free(Yt); free(Yh); free(Yv); free(Ya);
    }
    printf("spectrum_chosen %s-%s %s (held-out MAE %.6f; two-point statistics only)\n", feat_names[best % 3], bin_names[best / 3],
           spec_fittings[r[best].fit].name, r[best].held);
    for (p = 0; p < ny; p++) printf("spectrum_mae_%s %.6f\n", p < 4 ? par_names[p] : "output", r[best].val[p]);
    printf("spectrum_mae %.6f\n", r[best].val[16]);
    free_samples(tf, nt); free_samples(hf, nh);
}
/* --crops N: each N consecutive samples (sorted file order) are the crops of one volume, their
   labels the volume's (checked); the volume's prediction is the mean of its crops'.  In place:
   rows 0 .. n/N - 1 of pred and truth become the volumes' (row v is written after the rows of
   its crops, v N .. v N + N - 1, are read). */
static void crops_to_volumes(float *pred, float *truth, int n, int ny, int N, char **files) {
    int v, j, p;
    if (n % N) die("--crops %d: %d samples are not whole volumes of %d crops", N, n, N);
    for (v = 0; v < n / N; v++) for (p = 0; p < ny; p++) {
        double m = 0;
        float label = truth[(size_t)v * N * ny + p];
        for (j = 0; j < N; j++) {
            size_t i = (size_t)(v * N + j) * ny + p;
            if (truth[i] != label)
                die("--crops %d: %s and %s have different labels: not crops of one volume (a volume's crops come together in sorted file order)", N, files[v * N], files[v * N + j]);
            m += pred[i];
        }
        pred[(size_t)v * ny + p] = (float)(m / N);
        truth[(size_t)v * ny + p] = label;
    }
}
static void eval_regression(cf_net *net, char **files, int n, const options *o) {
    int ny = net->n_outputs, i, k, p, nb;
    float *pred = (float *)malloc(sizeof(float) * n * ny), *truth = (float *)malloc(sizeof(float) * n * ny), *x, *y;
    int *order = (int *)malloc(sizeof(int) * n);
    double total = 0, per[16] = {0}, mean[16] = {0}, bmae = 0;
    const float *out;
    loader L;
    if (!pred || !truth || !order) die("out of memory for %d predictions", n);
    for (i = 0; i < n; i++) order[i] = i;
    loader_init_for(&L, net, files, o->batch, o->apply_log, NULL);
    loader_begin(&L, order, n);
    for (k = 0;;) {
        loader_next(&L, &x, &y, &nb);
        if (!nb) break;
        if (!(out = cf_net_predict(net, x, nb))) die("%s", cf_failure_reason());
        memcpy(pred + (size_t)k * ny, out, sizeof(float) * nb * ny);
        memcpy(truth + (size_t)k * ny, y, sizeof(float) * nb * ny);
        for (i = 0; i < nb * ny; i++)
            if (!isfinite(out[i]) || !isfinite(fabs((double)out[i] - y[i]))) die("%s: a non-finite prediction (%g for label %g)", loader_file(&L, i / ny), out[i], y[i]);
        k += nb;
    }
    loader_free(&L);
    if (o->pred) {   /* one row a sample (with --crops, a crop) */
        cf_array a;
        memset(&a, 0, sizeof a);
        a.dtype = CF_F32; a.ndim = 2; a.shape[0] = n; a.shape[1] = ny; a.count = (size_t)n * ny; a.data = pred;
        TRY(cf_npy_write(o->pred, &a));
    }
    if (o->crops > 1) {   /* the crops' own MAE, then every figure below of the volumes' mean predictions */
        for (i = 0; i < n * ny; i++) total += fabs((double)pred[i] - truth[i]);
        printf("crop_mae %.6f (%d crops)\n", total / ((double)n * ny), n);
        crops_to_volumes(pred, truth, n, ny, o->crops, files);
        n /= o->crops; total = 0;
        printf("volumes %d, each the mean of %d crops' predictions\n", n, o->crops);
    }
    for (i = 0; i < n; i++) for (p = 0; p < ny; p++) { double d = fabs((double)pred[i * ny + p] - truth[i * ny + p]); total += d; if (p < 16) per[p] += d; }
    for (p = 0; p < ny && p < 16; p++) printf("mae_%s %.6f\n", p < 4 ? par_names[p] : "output", per[p] / n);
    if (o->baseline) {
        mean_labels(o->baseline, mean, ny);
        for (i = 0; i < n; i++) for (p = 0; p < ny && p < 16; p++) bmae += fabs(truth[i * ny + p] - mean[p]);
        printf("baseline_mae %.6f\n", bmae / ((double)n * ny));
    }
    if (o->spectrum && o->spectrum_select) spectrum_select(o, files, n * o->crops, net);
    else if (o->spectrum) spectrum_baseline(o, files, n * o->crops, net);
    if (o->png) {
        for (p = 0; p < ny && p < 16; p++) scatter(o->png, p, pred, truth, n, ny, per[p] / n);
        slice_png(o->png, files[0]);
    }
    printf("mae %.6f\n", total / ((double)n * ny));
    free(pred); free(truth); free(order);
}

/* A flag that this run would not read is refused by name, never ignored: every --spectrum-*
   flag sets the estimator of --spectrum, and --spectrum-select chooses the bins, features and
   fitting itself; --png-count counts pictures of --png. */
static void refuse_ignored(const options *o) {
    static const char *estimator[] = {"--spectrum-epochs", "--spectrum-features", "--spectrum-bins", "--spectrum-moments", "--spectrum-dump"};
    size_t i;
    if (!o->spectrum)
        for (i = 0; i < sizeof estimator / sizeof *estimator; i++)
            if (flag_was_given(flags, n_flags, estimator[i])) die("%s: a setting of the power-spectrum estimator; needs --spectrum DIR (the samples it is fitted on)", estimator[i]);
    if (o->spectrum_select && !o->spectrum) die("--spectrum-select %s: needs --spectrum (the samples the estimator is fitted on)", o->spectrum_select);
    for (i = 0; o->spectrum_select && i < sizeof estimator / sizeof *estimator; i++)
        if (flag_was_given(flags, n_flags, estimator[i]))
            die("%s with --spectrum-select: the selection tries every binning, set of features and fitting itself (run %s without --spectrum-select)", estimator[i], estimator[i]);
    if (!o->png && flag_was_given(flags, n_flags, "--png-count")) die("--png-count %d: the number of pictures of --png; needs --png DIR", o->png_count);
}
/* what one application's evaluation does not read: CosmoFlow's input transform, baselines and
   estimator for a segmentation (DeepCAM), DeepCAM's statistics and pictures for a regression */
static void refuse_other_application(int seg) {
    static const char *regression_only[] = {"--transform", "--baseline", "--spectrum"}, *segmentation_only[] = {"--stats", "--png-count"};
    static const char *said[] = {"--transform (or --no-log, --log-ratio)", "--baseline", "--spectrum"};
    size_t i;
    for (i = 0; seg && i < sizeof regression_only / sizeof *regression_only; i++)
        if (flag_was_given(flags, n_flags, regression_only[i])) die("%s: for a regression (CosmoFlow); this model segments pixels (DeepCAM)", said[i]);
    for (i = 0; !seg && i < sizeof segmentation_only / sizeof *segmentation_only; i++)
        if (flag_was_given(flags, n_flags, segmentation_only[i])) die("%s: for a segmentation (DeepCAM); this model is a regression (CosmoFlow)", segmentation_only[i]);
}

/* the input transform the checkpoint records (cf-train writes transform= into it) */
static int recorded_transform(const char *weights) {
    cf_ckpt_info info;
    char value[64];
    int k = -1;
    struct stat st;
    if (stat(weights, &st) || S_ISDIR(st.st_mode) || cf_checkpoint_info(weights, &info)) return -1;
    if (meta_value(info.state.meta, "transform", value, sizeof value)) for (k = 0; k < 3 && strcmp(value, transform_names[k]); k++) {}
    cf_free(info.cfg_text);
    return k >= 0 && k < 3 ? k : -1;
}

int main(int argc, char **argv) {
    options o;
    cf_net net;
    char **files;
    int n, is_dir;
    struct stat st;
    tool_init(argc, argv, "eval");
    memset(&o, 0, sizeof o);
    o.batch = 4; o.apply_log = -1; o.png_count = 8; o.spectrum_epochs = 12; o.spectrum_features = "cross"; o.spectrum_bins = "linear"; o.spatial = 1; o.crops = 1;
    flag_table(&o);
    flag_parse(argc, argv, 1, flags, n_flags, usage, NULL, 0);
    dist_start(&argc, &argv);
    if (o.spatial == 1) one_process_only();
    else if (cf_dist_size() != o.spatial) die("--spatial %d: needs exactly %d ranks (mpirun -np %d); this job has %d", o.spatial, o.spatial, o.spatial, cf_dist_size());
    if (!o.weights || !o.data) die("needs --weights and --data (see --help)");
    if (o.spatial > 1 && o.spectrum) die("--spatial with --spectrum: the two-point estimator reads whole volumes (run it without --spatial)");
    is_dir = !stat(o.weights, &st) && S_ISDIR(st.st_mode);
    if (is_dir && !o.model) die("--weights %s: a weights directory does not hold its model: give --model", o.weights);
    input_path(o.model); input_path(o.weights); input_path(o.data); input_path(o.stats); input_path(o.baseline); input_path(o.spectrum); input_path(o.spectrum_select);
    if (strcmp(o.spectrum_features, "cross") && strcmp(o.spectrum_features, "auto")) die("--spectrum-features %s: cross or auto", o.spectrum_features);
    if (strcmp(o.spectrum_bins, "linear") && strcmp(o.spectrum_bins, "octave") && strcmp(o.spectrum_bins, "half")) die("--spectrum-bins %s: linear, octave or half", o.spectrum_bins);
    refuse_ignored(&o);
    output_file("--pred", o.pred);
    output_file("--spectrum-dump", o.spectrum_dump);
    output_dir("--png", o.png);
    output_dir_not_data("--png", o.png);
    load_model(&net, o.model, o.has_shape ? &o.shape : NULL, is_dir ? NULL : o.weights);
    TRY(cf_weights_load(&net, o.weights));
    refuse_other_application(net.loss == CF_LOSS_SOFTMAX_CE);
    if (o.crops > 1 && net.loss == CF_LOSS_SOFTMAX_CE) die("--crops %d: for a regression (CosmoFlow); this model segments pixels", o.crops);
    if (o.spatial > 1 && cf_net_set_spatial(&net, o.spatial, 0)) die("--spatial %d: %s", o.spatial, cf_failure_reason());
    if (cf_dist_rank()) {   /* rank 0 alone prints and writes */
        o.pred = o.png = NULL;
        if (!freopen("/dev/null", "w", stdout)) die("stdout: cannot silence rank %d", cf_dist_rank());
    }
    TRY(cf_net_set_precision(&net, o.precision));
    if (o.precision == CF_BF16) printf("cf-eval: %s\n", precision_text(o.precision));
    if (o.apply_log < 0 && (o.apply_log = recorded_transform(o.weights)) < 0) o.apply_log = 1;
    files = list_samples(o.data, &n);
    if (net.loss == CF_LOSS_SOFTMAX_CE) eval_segmentation(&net, files, n, &o);
    else eval_regression(&net, files, n, &o);
    free_samples(files, n);
    cf_net_free(&net);
    cf_dist_finalize();
    return 0;
}
