/* The two-point estimator behind cf-eval --spectrum TRAIN: how well the labels can be read
   from a volume's two-point statistics alone, seen as a CNN sees the volume (not as a periodic
   box).  The network's MAE is put beside it (docs/science.md).  With a held-out part of the
   training set (cf-eval --spectrum-select), the estimator's binning, features and fit are
   chosen on it, so that the network is compared with the strongest of them (spec_select).

   Features, per sample: for each channel, the log counts log(1 + x) with their mean removed,
   times a 3-D Hann window, Fourier transformed (F_c).  Then, band by band of |k| (in
   fundamental frequencies; unit shells [1,2), [2,3), .., [B,B+1) with B = floor(S/2 sqrt 3),
   27 at S = 32, or with octaves [1,2), [2,4), .., [S/2,S), or half shells [1,1.5), [1.5,2), ..,
   54 at S = 32):
     - each channel's log power, log(mean |F_c|^2 + 1e-3)                  (the auto-spectra)
     - with cross, each channel pair's (c < d) correlation coefficient
       r_cd = Re sum F_c F_d* / sqrt(sum |F_c|^2 sum |F_d|^2)             (the cross-spectra)
   The four channels are the same particles at four redshifts: where the auto-spectra give each
   channel's power, with its noise, the cross-spectra give how much of one channel's modes is
   the other's, mode by mode; the growth between two redshifts, which tells Omega_m, is in them.
   With moments, last, each channel's log variance, skewness and excess kurtosis of the
   (mean-removed, unwindowed) log counts: the one-point statistics.
   Band-major: a band's C powers, then its C(C-1)/2 pairs (0,1), (0,2), .., (C-2,C-1).

   Estimator: a small network fitted on the training set's features, z-scored with their mean
   and deviation: dense 64 (LeakyReLU 0.3), dense to the labels, tanh x 1.2 (the CosmoFlow
   head); MSE, SGD with momentum 0.9, lr 0.01, batch 8, 12 epochs (the demo's budget; cf-eval
   --spectrum-epochs for a longer fit), seed 0.  The other fits spec_select tries: 200 epochs
   of the same; AdamW (lr 1e-3, betas 0.9, 0.999) for 300 epochs with weight decay 1e-4 at
   width 64 and 1e-3 at width 256.
   It is bench/ps_regressor.py --log --taper --budget [--octaves] [--cross] [--moments], here in
   C with this library; the two compute the same features (tests/test_tools.sh). */
#ifndef CF_TOOLS_SPECTRUM_H
#define CF_TOOLS_SPECTRUM_H
#include "fft.h"

enum { SPEC_LINEAR, SPEC_OCTAVE, SPEC_HALF };   /* the bins: unit shells, octaves, half shells */
typedef struct { int octaves, cross, moments; } spec_kind;   /* what the estimator reads (octaves: SPEC_*) */

/* the number of bands at S voxels a side: octaves up to |k| < S (|k| reaches S/2 sqrt 3), unit
   shells up to floor(S/2 sqrt 3), half shells to the same |k| */
static int spec_bands(int S, int octaves) {
    int b = 0;
    if (octaves == SPEC_HALF) return (int)floor((S / 2.0 * sqrt(3.0) - 1) * 2) + 1;
    if (octaves != SPEC_OCTAVE) return (int)floor(S / 2.0 * sqrt(3.0));
    while ((1 << b) < S) b++;
    return b;
}
static int spec_per_band(int C, const spec_kind *k) { return C + (k->cross ? C * (C - 1) / 2 : 0); }
static int spec_n_features(int S, int C, const spec_kind *k) { return spec_bands(S, k->octaves) * spec_per_band(C, k) + (k->moments ? 3 * C : 0); }

/* the band of a mode at |k| = kk, or -1 */
static int spec_band(double kk, int nb, int octaves) {
    int b;
    if (kk < 1) return -1;
    b = octaves == SPEC_OCTAVE ? (int)floor(log2(kk)) : octaves == SPEC_HALF ? (int)floor((kk - 1) * 2) : (int)floor(kk) - 1;
    return b < nb ? b : -1;
}

/* one channel c of x (S,S,S,C) int16 channels-last: its mean-removed log counts into re, the
   one-point moments into m[3] (when m), then windowed and transformed in place (re, im) */
static void spec_channel(const int16_t *x, int S, int C, int c, const double *w, double *re, double *im, float *m) {
    size_t N = (size_t)S * S * S, v;
    double mean = 0, m2 = 0, m3 = 0, m4 = 0;
    int i, j, k;
    for (v = 0; v < N; v++) { re[v] = log1p((double)x[v * C + c]); mean += re[v]; }
    mean /= (double)N;
    for (v = 0; v < N; v++) {
        double d = re[v] - mean;
        re[v] = d; m2 += d * d / N; m3 += d * d * d / N; m4 += d * d * d * d / N;
    }
    if (m) { m[0] = (float)log(m2 + 1e-6); m[1] = (float)(m3 / (pow(m2, 1.5) + 1e-12)); m[2] = (float)(m4 / (m2 * m2 + 1e-12) - 3); }
    for (i = 0; i < S; i++) for (j = 0; j < S; j++) for (k = 0; k < S; k++) {
        v = ((size_t)i * S + j) * S + k;
        re[v] *= w[i] * w[j] * w[k]; im[v] = 0;
    }
    fft3(re, im, S, -1);
}

/* features of one sample x (S,S,S,C) int16 channels-last into f (spec_n_features of them) */
static void spec_features(const int16_t *x, int S, int C, const spec_kind *kind, float *f) {
    size_t N = (size_t)S * S * S, v;
    int nb = spec_bands(S, kind->octaves), per = spec_per_band(C, kind), c, d, q, i, j, k, b;
    double *re = (double *)malloc(N * C * sizeof(double)), *im = (double *)malloc(N * C * sizeof(double));
    double *w = (double *)malloc(S * sizeof(double)), *sum = (double *)calloc((size_t)nb * per, sizeof(double));
    double *count = (double *)calloc((size_t)nb, sizeof(double));
    if (!re || !im || !w || !sum || !count) die("out of memory for a %d^3 spectrum", S);
    for (i = 0; i < S; i++) w[i] = 0.5 - 0.5 * cos(2 * M_PI * (i + 1) / (S + 1));   /* Hann, zero just outside the volume */
    for (c = 0; c < C; c++) spec_channel(x, S, C, c, w, re + c * N, im + c * N, kind->moments ? f + nb * per + 3 * c : NULL);
    for (i = 0; i < S; i++) for (j = 0; j < S; j++) for (k = 0; k < S; k++) {
        int fi = i < S / 2 ? i : i - S, fj = j < S / 2 ? j : j - S, fk = k < S / 2 ? k : k - S;
        double *s;
        b = spec_band(sqrt((double)fi * fi + (double)fj * fj + (double)fk * fk), nb, kind->octaves);
        if (b < 0) continue;
        v = ((size_t)i * S + j) * S + k;
        s = sum + (size_t)b * per;
        count[b] += 1;
        for (c = 0; c < C; c++) s[c] += re[c * N + v] * re[c * N + v] + im[c * N + v] * im[c * N + v];   /* |F_c|^2 */
        if (kind->cross)   /* Re F_c F_d* */
            for (c = 0, q = C; c < C; c++) for (d = c + 1; d < C; d++, q++) s[q] += re[c * N + v] * re[d * N + v] + im[c * N + v] * im[d * N + v];
    }
    for (b = 0; b < nb; b++) {
        double *s = sum + (size_t)b * per;
        float *o = f + (size_t)b * per;
        for (c = 0; c < C; c++) o[c] = (float)log((count[b] ? s[c] / count[b] : 0) + 1e-3);
        if (kind->cross)
            for (c = 0, q = C; c < C; c++) for (d = c + 1; d < C; d++, q++) o[q] = s[c] * s[d] > 0 ? (float)(s[q] / sqrt(s[c] * s[d])) : 0.0f;
    }
    free(re); free(im); free(w); free(sum); free(count);
}

/* the features of every sample of files (n of them), and their labels; ny labels each */
static float *spec_load(char **files, int n, int S, int C, int ny, const spec_kind *kind, float **labels) {
    int nf = spec_n_features(S, C, kind), i, bad = 0;
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
            spec_features(s.x, S, C, kind, F + (size_t)i * nf);
            for (p = 0; p < ny; p++) Y[(size_t)i * ny + p] = s.y[p];
        }
        cf_cosmo_free(&s);
    }
    if (bad) die("--spectrum: %s", why);
    *labels = Y;
    return F;
}

/* how the estimator is fitted: SGD (momentum 0.9) or AdamW, its epochs, hidden width, lr, decay */
typedef struct { const char *name; int adam, epochs, width; float lr, wd; } spec_fitting;
static const spec_fitting spec_fittings[] = {
    {"sgd-12", 0, 12, 64, 0.01f, 0.0f},   /* the network's budget: the default of cf-eval --spectrum */
    {"sgd-200", 0, 200, 64, 0.01f, 0.0f},
    {"adamw-300", 1, 300, 64, 1e-3f, 1e-4f},
    {"adamw-300-wide", 1, 300, 256, 1e-3f, 1e-3f},
};
#define SPEC_N_FITTINGS ((int)(sizeof spec_fittings / sizeof spec_fittings[0]))
/* fits the estimator on (Ft, Yt) as fit says and returns its absolute errors on (Fv, Yv), per
   label; with crops > 1 the nv rows of Fv are crops, each run of crops rows one volume's, and
   the error is of the volume's mean prediction (cf-eval --crops) */
static void spec_fit_as(const float *Ft, const float *Yt, int nt, const float *Fv, const float *Yv, int nv, int crops, int nf, int ny,
                        const spec_fitting *fit, double *mae) {
    char cfg[256];
    cf_net net;
    double *mu = (double *)calloc((size_t)nf, sizeof(double)), *sd = (double *)calloc((size_t)nf, sizeof(double));
    float *xb = (float *)malloc(sizeof(float) * 8 * nf), yb[8 * 16], *dout = (float *)malloc(sizeof(float) * 8 * ny);
    int *perm = (int *)malloc(sizeof(int) * nt), e, i, j, q, B = 8;
    uint64_t t;
    if (!mu || !sd || !xb || !perm || !dout || ny > 16) die("--spectrum: out of memory or too many labels");
    if (crops < 1 || nv % crops) die("--crops %d: %d samples are not whole volumes of %d crops", crops, nv, crops);
    for (i = 0; i < nt; i++) for (q = 0; q < nf; q++) mu[q] += Ft[(size_t)i * nf + q] / nt;
    for (i = 0; i < nt; i++) for (q = 0; q < nf; q++) sd[q] += pow(Ft[(size_t)i * nf + q] - mu[q], 2) / nt;
    for (q = 0; q < nf; q++) sd[q] = sqrt(sd[q]) + 1e-6;
    snprintf(cfg, sizeof cfg, "[net]\ninput=%dx1x1\nloss=mse\n[dense]\noutputs=%d\nactivation=leaky\nslope=0.3\n"
             "[dense]\noutputs=%d\nactivation=tanh\n[scale]\nfactor=1.2\n", nf, fit->width, ny);
    TRY(cf_net_parse(&net, cfg, "the spectrum estimator", NULL));
    cf_net_init(&net, 0);
    for (e = 0, t = 0; e < fit->epochs; e++) {
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
            if (fit->adam) cf_adam_step(&net, fit->lr, 0.9f, 0.999f, 1e-8f, fit->wd, 1, ++t);
            else cf_sgd_step(&net, fit->lr, 0.9f, 0.0f);
        }
    }
    for (q = 0; q < ny; q++) mae[q] = 0;
    for (i = 0; i < nv; i += crops) {   /* a volume: the mean of its crops' predictions */
        double m[16] = {0};
        for (j = 0; j < crops; j++) {
            const float *out;
            for (q = 0; q < nf; q++) xb[q] = (float)((Fv[(size_t)(i + j) * nf + q] - mu[q]) / sd[q]);
            if (!(out = cf_net_forward(&net, xb, 1))) die("%s", cf_failure_reason());
            for (q = 0; q < ny; q++) m[q] += out[q] / (double)crops;
        }
        for (q = 0; q < ny; q++) mae[q] += fabs(m[q] - Yv[(size_t)i * ny + q]) / (nv / crops);
    }
    cf_net_free(&net);
    free(mu); free(sd); free(xb); free(perm); free(dout);
}
/* the default fit (SGD for epochs, width 64) */
static void spec_fit(const float *Ft, const float *Yt, int nt, const float *Fv, const float *Yv, int nv, int crops, int nf, int ny, int epochs, double *mae) {
    spec_fitting fit = spec_fittings[0];
    fit.epochs = epochs;
    spec_fit_as(Ft, Yt, nt, Fv, Yv, nv, crops, nf, ny, &fit, mae);
}

/* the columns of the features kind sub reads, out of F (n rows of the full kind's: cross and
   moments); returns a new array of n rows of *nf_out */
static float *spec_columns(const float *F, int n, int S, int C, const spec_kind *sub, int *nf_out) {
    spec_kind full;
    int nb, per_full, per, nf_full, nf, i, b, c;
    float *out;
    full.octaves = sub->octaves; full.cross = 1; full.moments = 1;
    nb = spec_bands(S, sub->octaves); per_full = spec_per_band(C, &full); per = spec_per_band(C, sub);
    nf_full = spec_n_features(S, C, &full); nf = spec_n_features(S, C, sub);
    if (!(out = (float *)malloc(sizeof(float) * (size_t)n * nf))) die("out of memory for %d spectra", n);
    for (i = 0; i < n; i++) {
        const float *f = F + (size_t)i * nf_full;
        float *o = out + (size_t)i * nf;
        for (b = 0; b < nb; b++) for (c = 0; c < per; c++) o[b * per + c] = f[b * per_full + c];   /* a band's powers, then its pairs */
        if (sub->moments) for (c = 0; c < 3 * C; c++) o[nb * per + c] = f[nb * per_full + c];
    }
    *nf_out = nf;
    return out;
}
/* rows a (na) then b (nb) of nf columns, in one new array */
static float *spec_concat(const float *a, int na, const float *b, int nb, int nf) {
    float *o = (float *)malloc(sizeof(float) * ((size_t)na + nb) * nf);
    if (!o) die("out of memory");
    memcpy(o, a, sizeof(float) * (size_t)na * nf);
    memcpy(o + (size_t)na * nf, b, sizeof(float) * (size_t)nb * nf);
    return o;
}
#endif
