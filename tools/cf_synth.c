/* cf-synth cosmo: synthetic dark-matter universes in the real CosmoFlow format.  Two
   generators: the lognormal field below (the default: fast, the linear spectrum and the right
   one-point statistics, no collapsed structure), and particle-mesh universes (--lpt, --pm;
   tools/synth_pm.h, with FFTW): particles moved by gravity, with halos.

   The lognormal physics (each step a textbook approximation, chosen so the labels are learnable from the
   volume the way they are from N-body histograms, not planted as a code):
   1. Labels u ~ U[-1,1]^4 for (Omega_m, sigma_8, n_s, H_0); physical value = centre*(1 + s*u)
      with centres 0.3, 0.8, 0.96, 70 and s = 0.1 as in the real dataset (--spread widens it).
   2. Linear matter power spectrum P(k) = A k^n_s T(k/Gamma)^2, BBKS transfer function, shape
      parameter Gamma = Omega_m h, amplitude A such that the top-hat variance at 8 Mpc/h is
      sigma_8^2.  Voxels are H_0/70 Mpc/h wide, as in the dataset (512 voxels = 512 H_0/70 Mpc/h).
   3. A Gaussian random field with that spectrum (white noise -> FFT -> sqrt(P) -> inverse FFT),
      smoothed by a Gaussian of the real data's voxel width (1 Mpc at H_0 = 70) and by the
      window of counting particles in cells of width dx (sinc(k dx / 2) per axis).  With
      --voxel 4 the cell window dominates, as when a real sample is binned 4x4x4; the earlier
      Gaussian of width dx erased the scales that tell n_s from Omega_m h (a power-spectrum
      regressor's MAE on the demo's data: 0.21 -> 0.11).
   4. Four channels = redshifts 0, 0.5, 1.5, 3: the field times the linear growth factor
      D(z; Omega_m) of a flat LambdaCDM universe (Carroll, Press & Turner 1992), D(0) = 1.
   5. A lognormal density rho = exp(delta)/<exp(delta)> (mean 1) and Poisson particle counts
      with 1 particle per voxel on average: int16 counts, most of them 0 or 1, a few hundreds.
   Same seed, same bytes: every random number comes from cf_rng streams keyed by (seed, sample). */
#ifndef CF_IMPLEMENTATION_LINKED   /* the Makefile links the implementation it compiled once (tools/cosmoflow.c) */
#define CF_IMPLEMENTATION
#endif
#include "cosmoflow.h"
#include "tool.h"
#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif
#ifdef _OPENMP
#include <omp.h>
#endif
#include "synth_climate.h"
#include "fft.h"

typedef struct {
    const char *out, *format, *prefix;
    long n;
    int S, stats, split, fixed, lpt, pm, pm_mesh, force, append;
    uint64_t seed;
    double spread, voxel;
} cosmo_options;
static int vary[4] = {1, 1, 1, 1};   /* --fix holds parameters at their centre (label 0) */
static void parse_fix(const char *v, void *dst) {   /* e.g. --fix 0,3: Omega_m and H_0 at their centres */
    const char *p;
    (void)dst;
    for (p = v; *p; p++) if (*p >= '0' && *p <= '3') vary[*p - '0'] = 0; else if (*p != ',') die("--fix: '%s' is not a list of parameter indices 0-3", v);
}
static tool_flag flags[20];
static int n_flags;
static void flag_table(cosmo_options *o) {
    tool_flag f[] = {
        {"--out", "DIR", FLAG_STR, &o->out, 0, 0, "output directory (created; one that holds files is refused without --force or --append)", NULL, NULL},
        {"--force", NULL, FLAG_SET, &o->force, 1, 0, "write into a directory that holds files: same-named files are replaced, others stay", NULL, NULL},
        {"--append", NULL, FLAG_SET, &o->append, 1, 0, "add to a directory that holds a data set: refused if a file would be replaced (use another --seed or --prefix)", NULL, NULL},
        {"--samples", "N", FLAG_LONG, &o->n, 1, 100000000, "number of universes (required)", NULL, NULL},
        {"--size", "S", FLAG_INT, &o->S, 4, 1024, "voxels per side, a power of 2 (the real data's: 128)", NULL, NULL},
        {"--seed", "K", FLAG_U64, &o->seed, 0, 0x7fffffff, "random seed; same seed, same bytes", NULL, NULL},
        {"--spread", "s", FLAG_DOUBLE, &o->spread, 0, 0.9, "label spread: physical = centre (1 + s u), u in [-1, 1] (the real data's: 0.1)", NULL, NULL},
        {"--voxel", "V", FLAG_DOUBLE, &o->voxel, 0.01, 100, "voxel width in 70/H_0 Mpc (the real data's: 1); a voxel holds V^3 particles on average", NULL, NULL},
        {"--fix", "LIST", FLAG_CALL, NULL, 0, 0, "hold parameters at their centre, label 0 (0 Omega_m, 1 sigma_8, 2 n_s, 3 H_0) (default none)", parse_fix, NULL},
        {"--fixed", NULL, FLAG_SET, &o->fixed, 1, 0, "fixed-amplitude fields (Angulo & Pontzen 2016): the mean power in every mode, random phases", NULL, NULL},
        {"--format", "F", FLAG_STR, &o->format, 0, 0, "tfrecord (gzip, one Example per file) or npy (X_data.npy, X_label.npy, lists)", NULL, NULL},
        {"--split", "K", FLAG_INT, &o->split, 1, 16, "each universe K times as wide, written as its K^3 disjoint sub-volumes (the real data: 512^3 into 64)", NULL, NULL},
        {"--lpt", "1|2", FLAG_INT, &o->lpt, 1, 2, "particles displaced by Lagrangian perturbation theory (Zel'dovich or 2LPT) instead of the lognormal field; needs an FFTW build (default: lognormal)", NULL, NULL},
        {"--pm", "N", FLAG_INT, &o->pm, 0, 256, "particle-mesh steps from z = 9 to z = 0 after the LPT start (FastPM's scheme; tools/synth_pm.h); implies --lpt 2 (default 0: LPT only)", NULL, NULL},
        {"--pm-mesh", "B", FLAG_INT, &o->pm_mesh, 1, 4, "the force mesh B times finer than the particle grid", NULL, NULL},
        {"--prefix", "P", FLAG_STR, &o->prefix, 0, 0, "file name prefix", NULL, NULL},
        {"--stats", NULL, FLAG_SET, &o->stats, 1, 0, "print count statistics (mean, zero fraction, max) per channel", NULL, NULL},
    };
    n_flags = (int)(sizeof f / sizeof f[0]);
    memcpy(flags, f, sizeof f);
}
static void usage(void) {
    flag_help("usage: cf-synth cosmo --out DIR --samples N [flags]\n"
              "       cf-synth climate --out DIR --samples N [flags]   (cf-synth climate --help)\n"
              "  synthetic dark-matter universes in the real CosmoFlow format", flags, n_flags, NULL);
}

static double bbks(double q) {   /* Bardeen, Bond, Kaiser & Szalay (1986) transfer function */
    if (q < 1e-8) return 1.0;
    return log(1 + 2.34 * q) / (2.34 * q) * pow(1 + 3.89 * q + pow(16.1 * q, 2) + pow(5.46 * q, 3) + pow(6.71 * q, 4), -0.25);
}
static double pk_shape(double k, double ns, double gamma) { double t = bbks(k / gamma); return pow(k, ns) * t * t; }
/* amplitude A with sigma(8 Mpc/h) = sigma8: sigma^2 = 1/(2 pi^2) int k^2 P(k) W(kR)^2 dk */
static double pk_amplitude(double sigma8, double ns, double gamma) {
    double s = 0, lk;
    for (lk = -5; lk < 3; lk += 0.001) {   /* trapezoid in ln k from 1e-5 to 1e3 h/Mpc */
        double k = exp(lk), x = 8 * k, w = 3 * (sin(x) - x * cos(x)) / (x * x * x);
        s += k * k * k * pk_shape(k, ns, gamma) * w * w * 0.001 * log(10.0);
    }
    return sigma8 * sigma8 / (s / (2 * M_PI * M_PI));
}
/* linear growth, flat LambdaCDM, normalised to D(0) = 1 (Carroll, Press & Turner 1992) */
static double growth_g(double om, double z) {
    double a3 = pow(1 + z, 3), omz = om * a3 / (om * a3 + 1 - om), olz = 1 - omz;
    return 2.5 * omz / (pow(omz, 4.0 / 7.0) - olz + (1 + omz / 2) * (1 + olz / 70));
}
static double growth(double om, double z) { return growth_g(om, z) / (growth_g(om, 0) * (1 + z)); }

#include "synth_pm.h"   /* the particle-mesh path (--lpt, --pm), with FFTW */

static int poisson(cf_rng *r, double lam) {
    if (lam < 30) {   /* Knuth: multiply uniforms until below e^-lambda */
        double L = exp(-lam), p = 1;
        int k = 0;
        do { k++; p *= cf_rng_uniform64(r); } while (p > L);
        return k - 1;
    } else {          /* normal approximation, fine at this size */
        double v = lam + sqrt(lam) * cf_rng_normal(r);
        return v < 0 ? 0 : (int)(v + 0.5);
    }
}

static const double centre[4] = {0.3, 0.8, 0.96, 70.0};
static const double redshift[4] = {0.0, 0.5, 1.5, 3.0};

/* one universe: x (S,S,S,4) int16 channels-last, y 4 unit labels */
static int fixed_amplitude = 0;   /* --fixed: |W_k| = sqrt(N), random phases only */
static int pm_order, pm_steps, pm_mesh;    /* --lpt, --pm, --pm-mesh */
/* returns 0, or -1 when out of memory */
static int universe(int16_t *x, float *y, int S, double spread, double voxel, uint64_t seed, long index) {
    cf_rng r = cf_rng_seed(cf_hash64(seed * 0x9e3779b97f4a7c15ULL + (uint64_t)index));
    size_t N = (size_t)S * S * S, v;
    double par[4], *re, *im, *e;
    double om, s8, ns, h, dx, L, A, gamma, nbar = voxel * voxel * voxel;   /* particles per voxel: 1 per (70/H_0 Mpc)^3 */
    int c, i, j, k;
    for (c = 0; c < 4; c++) { y[c] = (float)(2 * cf_rng_uniform64(&r) - 1); if (!vary[c]) y[c] = 0; par[c] = centre[c] * (1 + spread * y[c]); }
    om = par[0]; s8 = par[1]; ns = par[2]; h = par[3] / 100;
    dx = voxel * par[3] / 70.0;         /* voxel size, Mpc/h (1 Mpc in the real data) */
    L = S * dx;
    gamma = om * h;
    A = pk_amplitude(s8, ns, gamma);
#ifdef CF_USE_FFTW
    if (pm_order) return pm_universe(x, S, (int)voxel, L, om, A, ns, gamma, pm_order, pm_steps, pm_mesh, fixed_amplitude, &r);
#endif
    re = (double *)malloc(N * 8); im = (double *)malloc(N * 8); e = (double *)malloc(N * 8);
    if (!re || !im || !e) { free(re); free(im); free(e); return -1; }
    for (v = 0; v < N; v++) { re[v] = cf_rng_normal(&r); im[v] = 0; }
    fft3(re, im, S, -1);
    for (i = 0; i < S; i++) for (j = 0; j < S; j++) for (k = 0; k < S; k++) {
        int fi = i <= S / 2 ? i : i - S, fj = j <= S / 2 ? j : j - S, fk = k <= S / 2 ? k : k - S;
        double kk = 2 * M_PI / L * sqrt((double)fi * fi + (double)fj * fj + (double)fk * fk);
        /* <|W_k|^2> = N; delta_k = W_k sqrt(P(k)/dx^3) gives <delta^2> = sum P / V = int P d^3k/(2pi)^3 */
        /* resolution: a Gaussian of the real data's voxel width (dx / voxel), then the window
           of counting particles in cells of width dx, sinc(k_axis dx / 2) per axis */
        double kx = M_PI * fi / S, ky = M_PI * fj / S, kz = M_PI * fk / S, r = dx / voxel;
        double win = (fi ? sin(kx) / kx : 1) * (fj ? sin(ky) / ky : 1) * (fk ? sin(kz) / kz : 1) * exp(-0.5 * kk * kk * r * r);
        double amp = kk > 0 ? sqrt(A * pk_shape(kk, ns, gamma) / (dx * dx * dx)) * win : 0;
        size_t p = ((size_t)i * S + j) * S + k;
        if (fixed_amplitude) {   /* "fixed field": keep the phase, set |W_k|^2 to its mean N */
            double m = sqrt(re[p] * re[p] + im[p] * im[p]);
            if (m > 0) amp *= sqrt((double)N) / m;
        }
        re[p] *= amp; im[p] *= amp;
    }
    fft3(re, im, S, +1);
    for (v = 0; v < N; v++) re[v] /= (double)N;   /* the real part is the z = 0 linear field */
    for (c = 0; c < 4; c++) {
        double D = growth(om, redshift[c]), mean = 0;
        for (v = 0; v < N; v++) { e[v] = exp(D * re[v]); mean += e[v]; }
        mean /= (double)N;
        for (v = 0; v < N; v++) { int n = poisson(&r, nbar * e[v] / mean); x[v * 4 + c] = (int16_t)(n > 32767 ? 32767 : n); }
    }
    free(re); free(im); free(e);
    return 0;
}

/* --append: every file this run would write is new (the names: prefix, seed, universe, sub-volume) */
static void check_appended(const char *out, const char *prefix, const char *format, uint64_t seed, long n, int split) {
    long i;
    int sub, npy = !strcmp(format, "npy");
    char path[4200], tag[16] = "";
    for (i = 0; i < n; i++) for (sub = 0; sub < split * split * split; sub++) {
        if (split > 1) snprintf(tag, sizeof tag, "_%03d", sub);
        snprintf(path, sizeof path, "%s/%s_%ld_%06ld%s%s", out, prefix, (long)seed, i, tag, npy ? "_data.npy" : ".tfrecord");
        output_new(path);
    }
}
int main(int argc, char **argv) {
    cosmo_options o;
    const char *out, *format, *prefix;
    long n, i;
    int S, stats, split, k;
    double spread, voxel;
    uint64_t seed;
    double zero[4] = {0}, sum[4] = {0}, mx[4] = {0};
    tool_init(argc, argv, "synth");
    one_process_only();
    memset(&o, 0, sizeof o);
    o.format = "tfrecord"; o.prefix = "synth"; o.S = 128; o.split = 1; o.spread = 0.1; o.voxel = 1.0; o.seed = 1; o.pm_mesh = 2;
    flag_table(&o);
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) usage();
    if (!strcmp(argv[1], "--version")) print_version();
    if (!strcmp(argv[1], "climate")) return climate_main(argc, argv);
    if (strcmp(argv[1], "cosmo")) die("%s: unknown kind (cosmo or climate)", argv[1]);
    flag_parse(argc, argv, 2, flags, n_flags, usage, NULL, 0);
    out = o.out; format = o.format; prefix = o.prefix; n = o.n; S = o.S; stats = o.stats; split = o.split;
    spread = o.spread; voxel = o.voxel; seed = o.seed; fixed_amplitude = o.fixed;
    if (!out || !n) die("needs --out DIR and --samples N");
    if (S & (S - 1)) die("--size: %d is not a power of 2", S);
    pm_steps = o.pm; pm_mesh = o.pm_mesh; pm_order = o.lpt ? o.lpt : o.pm ? 2 : 0;
    if (!o.pm && flag_was_given(flags, n_flags, "--pm-mesh")) die("--pm-mesh %d: the force mesh of the particle-mesh steps; needs --pm N", o.pm_mesh);
#ifndef CF_USE_FFTW
    if (pm_order) die("--lpt and --pm need a build with FFTW (apt-get install libfftw3-dev, then make)");
#endif
    if (pm_order && (voxel != floor(voxel) || voxel < 1)) die("--voxel %g: with --lpt or --pm a voxel is a whole number of particle spacings", voxel);
    if (pm_order && (double)S * split * voxel > 1024) die("--size x --split x --voxel: %g particles a side; at most 1024", (double)S * split * voxel);
    if (split & (split - 1) || (long)S * split > 1024) die("--split: %d is not a power of 2 with --size x --split <= 1024", split);
    if (strcmp(format, "tfrecord") && strcmp(format, "npy")) die("--format: '%s' is not tfrecord or npy", format);
    output_data_dir("--out", out, o.force, o.append);
    tool_append_advice = "another --seed or --prefix, or --force to replace same-named files";
    if (o.append) {
        int shape[3] = {S, 4, 4};   /* side, channels, labels */
        char size[32];
        check_appended(out, prefix, format, seed, n, split);
        snprintf(size, sizeof size, "--size %d", S);
        append_same_shape(out, 0, shape, size);
    }
    int failed = 0;
    char err[8192] = "";
    TOOL_OMP(omp parallel for schedule(dynamic) reduction(+:zero[:4], sum[:4]) reduction(max:mx[:4]))
    for (i = 0; i < n; i++) {
        size_t N = (size_t)S * S * S, v;
        int W = S * split, sub;   /* the universe's width; sub-volume index (d, h, w) major */
        int16_t *u = (int16_t *)malloc((size_t)W * W * W * 8), *x = split > 1 ? (int16_t *)malloc(N * 8) : u;
        float y[4];
        char path[4096], tag[16] = "";
        int rc = CF_OK, c, tfrecord = !strcmp(format, "tfrecord");
        size_t len = tfrecord ? cf_example_encode(NULL, "x", NULL, N * 8, "y", NULL, 4, 0) : 0;   /* sizes only: the same for every sub-volume */
        unsigned char *ex = tfrecord ? (unsigned char *)malloc(len) : NULL;
        if (failed || !u || !x || (tfrecord && !ex)) {
            if (!failed) { TOOL_OMP(omp critical) { snprintf(err, sizeof err, "out of memory for a %d^3 universe", W); failed = 1; } }
            free(u); if (x != u) free(x);
            free(ex);
            continue;
        }
        if (universe(u, y, W, spread, voxel, seed, i)) {
            TOOL_OMP(omp critical) { snprintf(err, sizeof err, "out of memory for the particles of a %d^3 universe", W); failed = 1; }
            free(u); if (x != u) free(x); free(ex);
            continue;
        }
        for (sub = 0; sub < split * split * split && !rc; sub++) {
            if (split > 1) {   /* copy sub-volume (sd, sh, sw), channels-last rows of S voxels */
                int sd = sub / (split * split), sh = sub / split % split, sw = sub % split, d, hh;
                for (d = 0; d < S; d++) for (hh = 0; hh < S; hh++)
                    memcpy(x + ((size_t)d * S + hh) * S * 4,
                           u + (((size_t)(sd * S + d) * W + (size_t)(sh * S + hh)) * W + (size_t)sw * S) * 4, (size_t)S * 4 * sizeof(int16_t));
                snprintf(tag, sizeof tag, "_%03d", sub);
            }
            if (tfrecord) {
                cf_example_encode(ex, "x", x, N * 8, "y", y, 4, 0);
                snprintf(path, sizeof path, "%s/%s_%ld_%06ld%s.tfrecord", out, prefix, (long)seed, i, tag);
                rc = cf_tfrecord_write(path, ex, len, 1);
                if (!rc) { TOOL_OMP(omp critical(added)) output_added(path); }
            } else {
                cf_array a;
                memset(&a, 0, sizeof a);
                a.dtype = CF_I16; a.ndim = 4; a.shape[0] = a.shape[1] = a.shape[2] = S; a.shape[3] = 4; a.count = N * 4; a.data = x;
                snprintf(path, sizeof path, "%s/%s_%ld_%06ld%s_data.npy", out, prefix, (long)seed, i, tag);
                rc = cf_npy_write(path, &a);
                if (!rc) { TOOL_OMP(omp critical(added)) output_added(path); }
                a.dtype = CF_F32; a.ndim = 1; a.shape[0] = 4; a.count = 4; a.data = y;
                snprintf(path, sizeof path, "%s/%s_%ld_%06ld%s_label.npy", out, prefix, (long)seed, i, tag);
                if (!rc) rc = cf_npy_write(path, &a);
                if (!rc) { TOOL_OMP(omp critical(added)) output_added(path); }
            }
        }
        if (rc) {
            TOOL_OMP(omp critical)
            { if (!failed) snprintf(err, sizeof err, "%s", cf_failure_reason()); failed = 1; }
        }
        for (v = 0; v < N * split * split * split; v++) for (c = 0; c < 4; c++) {
            double val = u[v * 4 + c];
            zero[c] += val == 0; sum[c] += val; if (val > mx[c]) mx[c] = val;
        }
        free(u);
        if (x != u) free(x);
        free(ex);
    }
    if (failed) die("%s", err);
    if (!strcmp(format, "npy")) {   /* the submitters' lists, as cf-convert tfrecord2npy writes them */
        char cmd[8192];
        snprintf(cmd, sizeof cmd, "cd '%s' && ls | grep '_data.npy$' | sort > files_data.lst && ls | grep '_label.npy$' | sort > files_label.lst", out);
        if (system(cmd)) die("%s: cannot write the file lists", out);
    }
    outputs_complete();
    if (stats) {
        double N = (double)n * S * S * S * split * split * split;
        for (k = 0; k < 4; k++) printf("channel %d (z = %.1f): mean %.3f zero %.1f %% max %.0f\n", k, redshift[k], sum[k] / N, 100 * zero[k] / N, mx[k]);
    }
    if (split > 1) printf("cosmo: %ld universes of %d^3 x 4, each cut into %d sub-volumes of %d^3 (spread %g, seed %ld) -> %s\n",
                          n, S * split, split * split * split, S, spread, (long)seed, out);
    else printf("cosmo: %ld universes of %d^3 x 4 (spread %g, seed %ld) -> %s\n", n, S, spread, (long)seed, out);
    return 0;
}
