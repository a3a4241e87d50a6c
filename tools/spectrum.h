/* The power-spectrum estimator behind cf-eval --spectrum TRAIN: how well the labels can be read
   from a volume's two-point statistics alone, seen as a CNN sees the volume (not as a periodic
   box).  The network's MAE is put beside it (docs/science.md).

   Features, per sample: for each channel, the log counts log(1 + x) with their mean removed,
   times a 3-D Hann window, Fourier transformed; the mean power |F|^2 in octaves of |k| (in
   fundamental frequencies: [1,2), [2,4), ..., [S/2, S)), and its log (+ 1e-3).  Band-major:
   the channels of a band are adjacent.

   Estimator: a small network fitted on the training set's features, z-scored with their mean
   and deviation: dense 64 (LeakyReLU 0.3), dense to the labels, tanh x 1.2 (the CosmoFlow
   head); MSE, SGD with momentum 0.9, lr 0.01, batch 8, 12 epochs (the demo's budget; cf-eval
   --spectrum-epochs for a longer fit), seed 0.
   It is bench/ps_regressor.py --log --octaves --budget --taper, here in C with this library. */
#ifndef CF_TOOLS_SPECTRUM_H
#define CF_TOOLS_SPECTRUM_H
#include "fft.h"

#define SPEC_MAX_BANDS 11   /* octaves up to S = 1024 */

/* number of octave bands at S voxels a side: |k| up to S/2 sqrt(3) < S */
static int spec_bands(int S) { int b = 0; while ((1 << b) < S) b++; return b; }

/* features of one sample x (S,S,S,C) int16 channels-last into f (bands x C, band-major) */
static void spec_features(const int16_t *x, int S, int C, float *f) {
    size_t N = (size_t)S * S * S, v;
    double *re = (double *)malloc(N * sizeof(double)), *im = (double *)malloc(N * sizeof(double)), *w = (double *)malloc(S * sizeof(double));
    double power[SPEC_MAX_BANDS], count[SPEC_MAX_BANDS];
    int c, i, j, k, b, nb = spec_bands(S);
    if (!re || !im || !w) die("out of memory for a %d^3 spectrum", S);
    for (i = 0; i < S; i++) w[i] = 0.5 - 0.5 * cos(2 * M_PI * (i + 1) / (S + 1));   /* Hann, zero just outside the volume */
    for (c = 0; c < C; c++) {
        double mean = 0;
        for (v = 0; v < N; v++) { re[v] = log1p((double)x[v * C + c]); mean += re[v]; }
        mean /= (double)N;
        for (i = 0; i < S; i++) for (j = 0; j < S; j++) for (k = 0; k < S; k++) {
            v = ((size_t)i * S + j) * S + k;
            re[v] = (re[v] - mean) * w[i] * w[j] * w[k]; im[v] = 0;
        }
        fft3(re, im, S, -1);
        for (b = 0; b < nb; b++) power[b] = count[b] = 0;
        for (i = 0; i < S; i++) for (j = 0; j < S; j++) for (k = 0; k < S; k++) {
            int fi = i < S / 2 ? i : i - S, fj = j < S / 2 ? j : j - S, fk = k < S / 2 ? k : k - S;
            double kk = sqrt((double)fi * fi + (double)fj * fj + (double)fk * fk);
            if (kk < 1) continue;
            b = (int)floor(log2(kk));
            if (b >= nb) continue;
            v = ((size_t)i * S + j) * S + k;
            power[b] += re[v] * re[v] + im[v] * im[v]; count[b] += 1;
        }
        for (b = 0; b < nb; b++) f[b * C + c] = (float)log((count[b] ? power[b] / count[b] : 0) + 1e-3);
    }
    free(re); free(im); free(w);
}

/* the features of every sample of files (n of them), and their labels; ny labels each */
static float *spec_load(char **files, int n, int S, int C, int ny, float **labels) {
    int nf = spec_bands(S) * C, i, bad = 0;
    float *F = (float *)malloc(sizeof(float) * (size_t)n * nf), *Y = (float *)malloc(sizeof(float) * (size_t)n * ny);
    char why[8192] = "";
    if (!F || !Y) die("out of memory for %d spectra", n);
    TOOL_OMP(omp parallel for schedule(dynamic))
    for (i = 0; i < n; i++) {
        cf_cosmo_sample s;
        int p;
        if (bad) continue;
        if (cf_cosmo_read(files[i], &s)) {
            TOOL_OMP(omp critical)
            { if (!bad) snprintf(why, sizeof why, "%s", cf_failure_reason()); bad = 1; }
            continue;
        }
        if (s.s != S || s.c != C || s.ny < ny) {
            TOOL_OMP(omp critical)
            { if (!bad) snprintf(why, sizeof why, "%s: %d^3 x %d with %d labels; the model reads %d^3 x %d with %d", files[i], s.s, s.c, s.ny, S, C, ny); bad = 1; }
        } else {
            spec_features(s.x, S, C, F + (size_t)i * nf);
            for (p = 0; p < ny; p++) Y[(size_t)i * ny + p] = s.y[p];
        }
        cf_cosmo_free(&s);
    }
    if (bad) die("--spectrum: %s", why);
    *labels = Y;
    return F;
}

/* fits the estimator on (Ft, Yt) and returns its absolute errors on (Fv, Yv), per label */
static void spec_fit(const float *Ft, const float *Yt, int nt, const float *Fv, const float *Yv, int nv, int nf, int ny, int epochs, double *mae) {
    char cfg[256];
    cf_net net;
    double mu[4 * SPEC_MAX_BANDS] = {0}, sd[4 * SPEC_MAX_BANDS] = {0};
    float xb[8 * 4 * SPEC_MAX_BANDS], yb[8 * 16], *dout = (float *)malloc(sizeof(float) * 8 * ny);
    int *perm = (int *)malloc(sizeof(int) * nt), e, i, j, q, B = 8;
    if (!perm || !dout || nf > 4 * SPEC_MAX_BANDS || ny > 16) die("--spectrum: out of memory or too many features");
    for (i = 0; i < nt; i++) for (q = 0; q < nf; q++) mu[q] += Ft[(size_t)i * nf + q] / nt;
    for (i = 0; i < nt; i++) for (q = 0; q < nf; q++) sd[q] += pow(Ft[(size_t)i * nf + q] - mu[q], 2) / nt;
    for (q = 0; q < nf; q++) sd[q] = sqrt(sd[q]) + 1e-6;
    snprintf(cfg, sizeof cfg, "[net]\ninput=%dx1x1\nloss=mse\n[dense]\noutputs=64\nactivation=leaky\nslope=0.3\n"
             "[dense]\noutputs=%d\nactivation=tanh\n[scale]\nfactor=1.2\n", nf, ny);
    TRY(cf_net_parse(&net, cfg, "the spectrum estimator", NULL));
    cf_net_init(&net, 0);
    for (e = 0; e < epochs; e++) {
        if (cf_epoch_shard(perm, nt, 0, e, 0, 1, 1, 0) < 0) die("%s", cf_failure_reason());   /* the training tool's shuffle */
        for (i = 0; i + B <= nt; i += B) {   /* whole batches */
            for (j = 0; j < B; j++) {
                for (q = 0; q < nf; q++) xb[j * nf + q] = (float)((Ft[(size_t)perm[i + j] * nf + q] - mu[q]) / sd[q]);
                for (q = 0; q < ny; q++) yb[j * ny + q] = Yt[(size_t)perm[i + j] * ny + q];
            }
            if (!cf_net_forward(&net, xb, B)) die("%s", cf_failure_reason());
            cf_net_zero_grad(&net);
            cf_net_loss(&net, yb, dout);
            cf_net_backward(&net, dout);
            cf_sgd_step(&net, 0.01f, 0.9f, 0.0f);
        }
    }
    for (q = 0; q < ny; q++) mae[q] = 0;
    for (i = 0; i < nv; i++) {
        const float *out;
        for (q = 0; q < nf; q++) xb[q] = (float)((Fv[(size_t)i * nf + q] - mu[q]) / sd[q]);
        if (!(out = cf_net_forward(&net, xb, 1))) die("%s", cf_failure_reason());
        for (q = 0; q < ny; q++) mae[q] += fabs((double)out[q] - Yv[(size_t)i * ny + q]) / nv;
    }
    cf_net_free(&net);
    free(perm); free(dout);
}
#endif
