/* cf-synth climate: synthetic DeepCAM snapshots (included by cf_synth.c).

   A 0.25-degree-like global grid, rows from 90N to 90S, columns from 0 to 360E.  The 16
   channels are the CAM5 variables in the reference's order (TMQ U850 V850 UBOT VBOT QREFHT PS
   PSL T200 T500 PRECT TS TREFHT Z1000 Z200 ZBOT) in their units: smooth climatological
   profiles in latitude plus smooth weather (random low-wavenumber Fourier modes).  On them:
   - tropical cyclones at 8-25 degrees from the equator: a pressure low (30 hPa), a warm
     core aloft, moisture and rain, and cyclonic winds at 850 hPa and the bottom level
     (counter-clockwise in the north, clockwise in the south) peaking at the core's radius;
   - atmospheric rivers: long narrow filaments from the subtropics poleward and eastward,
     of high precipitable water (TMQ) with moisture transported along them.
   Labels come from the same geometry, as the real ones come from thresholds on the fields:
   1 (cyclone) where a storm's pressure anomaly is at least half its depth, 2 (river) where a
   filament's TMQ anomaly is at least half its peak; a cyclone wins where both hold.
   Sizes are physical (cyclone label radius 4-6 degrees, river half-width 2.5-4 degrees);
   --feature-scale f multiplies them for small demo grids.  Same seed, same bytes. */

static const char *climate_names[16] = {"TMQ", "U850", "V850", "UBOT", "VBOT", "QREFHT", "PS", "PSL",
                                        "T200", "T500", "PRECT", "TS", "TREFHT", "Z1000", "Z200", "ZBOT"};

/* Smooth weather: n_modes Fourier modes, periodic in longitude; amplitude 1 overall.
   cos(kx lon + ky lat + p) = cos(a)cos(b) - sin(a)sin(b) from per-column and per-row tables. */
static void smooth_field(float *f, int H, int W, cf_rng *r, float amp) {
    enum { NM = 8 };
    int m, i, j;
    double *cj = (double *)malloc(sizeof(double) * W * 2), *ci = (double *)malloc(sizeof(double) * H * 2);
    for (i = 0; i < H * W; i++) f[i] = 0.0f;
    for (m = 0; m < NM; m++) {
        int kx = 1 + (int)(cf_rng_uniform64(r) * 6);
        double ky = 1 + cf_rng_uniform64(r) * 5, ph = 2 * M_PI * cf_rng_uniform64(r);
        double a = amp * sqrt(2.0 / NM) / (0.5 * (kx + ky)) * 2;
        for (j = 0; j < W; j++) { double v = 2 * M_PI * kx * (j + 0.5) / W + ph; cj[2 * j] = cos(v); cj[2 * j + 1] = sin(v); }
        for (i = 0; i < H; i++) { double v = M_PI * ky * (i + 0.5) / H; ci[2 * i] = cos(v); ci[2 * i + 1] = sin(v); }
        for (i = 0; i < H; i++) for (j = 0; j < W; j++)
            f[(size_t)i * W + j] += (float)(a * (cj[2 * j] * ci[2 * i] - cj[2 * j + 1] * ci[2 * i + 1]));
    }
    free(cj); free(ci);
}

/* One snapshot: x (H, W, 16) channels last, label (H, W). */
static void climate_sample(float *x, float *label, int H, int W, double fscale, uint64_t seed, long idx, int *n_tc, int *n_ar) {
    cf_rng r = cf_rng_seed(cf_hash64(seed * 0x9e3779b97f4a7c15ULL + (uint64_t)idx + 77));
    size_t P = (size_t)H * W, p;
    float *wx = (float *)malloc(sizeof(float) * P * 4), *best_tc = (float *)calloc(P, sizeof(float)), *best_ar = (float *)calloc(P, sizeof(float));
    int i, j, c, s, k;
    double dlat = 180.0 / H, dlon = 360.0 / W;
    /* shared weather: a pressure pattern, a temperature pattern, a moisture pattern, a wind pattern */
    for (k = 0; k < 4; k++) smooth_field(wx + k * P, H, W, &r, 1.0f);
    for (i = 0; i < H; i++) {
        double lat = 90.0 - (i + 0.5) * dlat, sl = sin(lat * M_PI / 180), cl = cos(lat * M_PI / 180);
        for (j = 0; j < W; j++) {
            size_t q = (size_t)i * W + j;
            float *v = x + q * 16;
            double wp = wx[q], wt = wx[P + q], wq = wx[2 * P + q], wu = wx[3 * P + q];
            double ts = 300.0 - 45.0 * sl * sl + 2.0 * wt;
            double tmq = 5.0 + 45.0 * exp(-(lat / 25.0) * (lat / 25.0)) + 4.0 * wq;
            double psl = 101300.0 + 700.0 * cos(2 * lat * M_PI / 180 * 1.5) + 500.0 * wp;
            double u = 12.0 * sin(2 * lat * M_PI / 180) * sin(2 * lat * M_PI / 180) * (fabs(lat) > 30 ? 1 : -0.6) + 4.0 * wu;
            double vv = 3.0 * wx[((size_t)(H - 1 - i)) * W + j] ;   /* a meridional component from the pressure pattern, mirrored */
            v[0] = (float)(tmq < 0.5 ? 0.5 : tmq);
            v[1] = (float)u; v[2] = (float)vv; v[3] = (float)(0.7 * u); v[4] = (float)(0.7 * vv);
            v[5] = (float)(0.002 + 0.016 * exp(-(lat / 30.0) * (lat / 30.0)) + 0.001 * wq);
            v[7] = (float)psl;
            v[6] = (float)(psl - 400.0 - 300.0 * (1 + wt) * cl);
            v[8] = (float)(218.0 + 6.0 * cl + 1.0 * wt);
            v[9] = (float)(ts - 35.0 + 1.0 * wt);
            v[10] = (float)(1e-8 * (1 + 0.4 * v[0]) * (1.2 + 0.5 * wq > 0 ? 1.2 + 0.5 * wq : 0));
            v[11] = (float)ts; v[12] = (float)(ts - 1.5 + 0.3 * wt);
            v[13] = (float)(100.0 + (psl - 101300.0) / 12.0);
            v[14] = (float)(11800.0 - 1500.0 * sl * sl + 40.0 * wt);
            v[15] = (float)(62.0 + 3.0 * wt);
            label[q] = 0.0f;
        }
    }
    /* tropical cyclones: 0 to 3 */
    *n_tc = (int)(cf_rng_uniform64(&r) * 4);
    for (s = 0; s < *n_tc; s++) {
        double hemi = cf_rng_uniform64(&r) < 0.5 ? 1 : -1, clat = hemi * (8 + 17 * cf_rng_uniform64(&r)), clon = 360 * cf_rng_uniform64(&r);
        double R = (4 + 2 * cf_rng_uniform64(&r)) * fscale, sig = R / 1.1774, ccl = cos(clat * M_PI / 180);
        double depth = 2500 + 1000 * cf_rng_uniform64(&r), vmax = 30 + 15 * cf_rng_uniform64(&r);
        for (i = 0; i < H; i++) {
            double lat = 90.0 - (i + 0.5) * dlat, dy = lat - clat;
            if (fabs(dy) > 4 * sig) continue;
            for (j = 0; j < W; j++) {
                double lon = (j + 0.5) * dlon, dx = fmod(lon - clon + 540.0, 360.0) - 180.0;
                double rr, a, vt, th;
                size_t q = (size_t)i * W + j;
                float *v = x + q * 16;
                dx *= ccl;
                rr = sqrt(dx * dx + dy * dy) / sig;
                if (rr > 4) continue;
                a = exp(-0.5 * rr * rr);
                vt = vmax * rr * exp(0.5 * (1 - rr * rr));       /* peaks at r = sigma */
                th = atan2(dy, dx);
                v[0] += (float)(25 * a); v[5] += (float)(0.006 * a);
                v[6] -= (float)(depth * a); v[7] -= (float)(depth * a);
                v[8] += (float)(3 * a); v[9] += (float)(6 * a); v[10] += (float)(3e-7 * a);
                v[13] -= (float)(depth / 12.0 * a);
                v[1] += (float)(-hemi * vt * sin(th)); v[2] += (float)(hemi * vt * cos(th));
                v[3] += (float)(-0.8 * hemi * vt * sin(th)); v[4] += (float)(0.8 * hemi * vt * cos(th));
                if (a > best_tc[q]) best_tc[q] = (float)a;
            }
        }
    }
    /* atmospheric rivers: 0 to 2 filaments, a quadratic Bezier curve sampled in 48 segments */
    *n_ar = (int)(cf_rng_uniform64(&r) * 3);
    for (s = 0; s < *n_ar; s++) {
        enum { NS = 48 };
        double hemi = cf_rng_uniform64(&r) < 0.5 ? 1 : -1, px[NS + 1], py[NS + 1];
        double lat0 = hemi * (15 + 10 * cf_rng_uniform64(&r)), lon0 = 360 * cf_rng_uniform64(&r);
        double lat1 = lat0 + hemi * (20 + 15 * cf_rng_uniform64(&r)), lon1 = lon0 + 35 + 30 * cf_rng_uniform64(&r);
        double latc = 0.5 * (lat0 + lat1) + (cf_rng_uniform64(&r) - 0.5) * 20, lonc = 0.5 * (lon0 + lon1) + (cf_rng_uniform64(&r) - 0.5) * 20;
        double hw = (2.5 + 1.5 * cf_rng_uniform64(&r)) * fscale, sig = hw / 1.1774, amp = 25 + 10 * cf_rng_uniform64(&r);
        double lo_lat = fmin(lat0, lat1) - 4 * sig - 20, hi_lat = fmax(lat0, lat1) + 4 * sig + 20;
        for (k = 0; k <= NS; k++) {
            double t = (double)k / NS;
            px[k] = (1 - t) * (1 - t) * lon0 + 2 * t * (1 - t) * lonc + t * t * lon1;
            py[k] = (1 - t) * (1 - t) * lat0 + 2 * t * (1 - t) * latc + t * t * lat1;
        }
        for (i = 0; i < H; i++) {
            double lat = 90.0 - (i + 0.5) * dlat, cl = cos(lat * M_PI / 180);
            if (lat < lo_lat || lat > hi_lat) continue;
            for (j = 0; j < W; j++) {
                double lon = (j + 0.5) * dlon, best = 1e30, tb = 0, tx = 1, ty = 0, b, taper;
                size_t q = (size_t)i * W + j;
                float *v = x + q * 16;
                for (k = 0; k < NS; k++) {   /* distance to each segment, longitude wrapped and scaled */
                    double ax = fmod(px[k] - lon + 540.0, 360.0) - 180.0, ay = py[k] - lat;
                    double sx = (px[k + 1] - px[k]), sy = py[k + 1] - py[k], L2, u, ex, ey, d;
                    ax *= cl; sx *= cl;
                    L2 = sx * sx + sy * sy;
                    u = L2 > 0 ? -(ax * sx + ay * sy) / L2 : 0;
                    if (u < 0) u = 0;
                    if (u > 1) u = 1;
                    ex = ax + u * sx; ey = ay + u * sy;
                    d = ex * ex + ey * ey;
                    if (d < best) { best = d; tb = (k + u) / NS; tx = sx; ty = sy; }
                }
                b = exp(-0.5 * best / (sig * sig));
                taper = sin(M_PI * tb); taper = sqrt(taper);
                b *= taper;
                if (b < 1e-3) continue;
                {
                    double n = sqrt(tx * tx + ty * ty) + 1e-12, speed = 15 * b;
                    v[0] += (float)(amp * b); v[5] += (float)(0.005 * b); v[10] += (float)(1.5e-7 * b);
                    v[1] += (float)(speed * tx / n); v[2] += (float)(speed * ty / n);
                    v[3] += (float)(0.6 * speed * tx / n); v[4] += (float)(0.6 * speed * ty / n);
                }
                if (b > best_ar[q]) best_ar[q] = (float)b;
            }
        }
    }
    for (p = 0; p < P; p++) label[p] = best_tc[p] >= 0.5f ? 1.0f : best_ar[p] >= 0.5f ? 2.0f : 0.0f;
    (void)c;
    free(wx); free(best_tc); free(best_ar);
}

typedef struct { const char *out; long n; int H, W, stats, write_stats, force; uint64_t seed; double fscale; } climate_options;
static tool_flag climate_flags[12];
static int n_climate_flags;
static void climate_flag_table(climate_options *o) {
    tool_flag f[] = {
        {"--out", "DIR", FLAG_STR, &o->out, 0, 0, "output directory (created; one that holds files is refused without --force): data-synth-K-NNNNNN.npy float32 (H,W,16), label-synth-K-NNNNNN.npy float32 (H,W), stats_minval/maxval.npy", NULL, NULL},
        {"--force", NULL, FLAG_SET, &o->force, 1, 0, "write into a directory that holds files: same-named files (the statistics among them) are replaced, others stay", NULL, NULL},
        {"--samples", "N", FLAG_LONG, &o->n, 1, 100000000, "number of snapshots (required)", NULL, NULL},
        {"--height", "H", FLAG_INT, &o->H, 8, 8192, "grid rows (the real data's: 768)", NULL, NULL},
        {"--width", "W", FLAG_INT, &o->W, 8, 8192, "grid columns (the real data's: 1152)", NULL, NULL},
        {"--seed", "K", FLAG_U64, &o->seed, 0, 0x7fffffff, "random seed; same seed, same bytes", NULL, NULL},
        {"--feature-scale", "f", FLAG_DOUBLE, &o->fscale, 0.1, 20, "cyclone radius and river width times f (small demo grids need f > 1)", NULL, NULL},
        {"--no-stats", NULL, FLAG_SET, &o->write_stats, 0, 0, "no stats_minval/maxval.npy (a validation set takes the training set's, with cf-train --stats)", NULL, NULL},
        {"--stats", NULL, FLAG_SET, &o->stats, 1, 0, "print class fractions and the channels' ranges", NULL, NULL},
    };
    n_climate_flags = (int)(sizeof f / sizeof f[0]);
    memcpy(climate_flags, f, sizeof f);
}
static void climate_usage(void) {
    flag_help("usage: cf-synth climate --out DIR --samples N [flags]\n"
              "  synthetic DeepCAM snapshots: 16 CAM5-like channels, tropical cyclones and atmospheric rivers, their masks",
              climate_flags, n_climate_flags, NULL);
}

static int climate_main(int argc, char **argv) {
    climate_options o;
    const char *out;
    long n, i;
    int H, W, k, stats, failed = 0, write_stats;
    uint64_t seed;
    double fscale, frac[3] = {0, 0, 0};
    float mn[16], mx[16];
    char err[8192] = "";
    memset(&o, 0, sizeof o);
    o.H = 768; o.W = 1152; o.seed = 1; o.fscale = 1.0; o.write_stats = 1;
    climate_flag_table(&o);
    flag_parse(argc, argv, 2, climate_flags, n_climate_flags, climate_usage, NULL, 0);
    out = o.out; n = o.n; H = o.H; W = o.W; stats = o.stats; write_stats = o.write_stats; seed = o.seed; fscale = o.fscale;
    if (!out || !n) die("climate: needs --out DIR and --samples N");
    output_data_dir("--out", out, o.force, 0);
    for (k = 0; k < 16; k++) { mn[k] = INFINITY; mx[k] = -INFINITY; }
    TOOL_OMP(omp parallel for schedule(dynamic) reduction(min:mn[:16]) reduction(max:mx[:16]) reduction(+:frac[:3]))
    for (i = 0; i < n; i++) {
        size_t P = (size_t)H * W, p;
        float *x = (float *)malloc(sizeof(float) * P * 16), *lab = (float *)malloc(sizeof(float) * P);
        char path[4096];
        cf_array a;
        int rc, ntc, nar, c;
        if (failed) { free(x); free(lab); continue; }
        climate_sample(x, lab, H, W, fscale, seed, i, &ntc, &nar);
        memset(&a, 0, sizeof a);
        a.dtype = CF_F32; a.ndim = 3; a.shape[0] = H; a.shape[1] = W; a.shape[2] = 16; a.count = P * 16; a.data = x;
        snprintf(path, sizeof path, "%s/data-synth-%ld-%06ld.npy", out, (long)seed, i);
        rc = cf_npy_write(path, &a);
        a.ndim = 2; a.count = P; a.data = lab;
        snprintf(path, sizeof path, "%s/label-synth-%ld-%06ld.npy", out, (long)seed, i);
        if (!rc) rc = cf_npy_write(path, &a);
        if (rc) {
            TOOL_OMP(omp critical)
            { if (!failed) snprintf(err, sizeof err, "%s", cf_failure_reason()); failed = 1; }
        }
        for (p = 0; p < P; p++) {
            frac[(int)lab[p]] += 1;
            for (c = 0; c < 16; c++) { float v = x[p * 16 + c]; if (v < mn[c]) mn[c] = v; if (v > mx[c]) mx[c] = v; }
        }
        free(x); free(lab);
    }
    if (failed) die("%s", err);
    if (write_stats) {   /* the statistics file of this set, as the reference's summarize_data.py over its train split */
        cf_array a;
        char path[4096];
        memset(&a, 0, sizeof a);
        a.dtype = CF_F32; a.ndim = 1; a.shape[0] = 16; a.count = 16;
        a.data = mn; snprintf(path, sizeof path, "%s/stats_minval.npy", out); TRY(cf_npy_write(path, &a));
        a.data = mx; snprintf(path, sizeof path, "%s/stats_maxval.npy", out); TRY(cf_npy_write(path, &a));
    }
    outputs_complete();
    if (stats) {
        double tot = frac[0] + frac[1] + frac[2];
        printf("class fractions: background %.4f cyclone %.4f river %.4f\n", frac[0] / tot, frac[1] / tot, frac[2] / tot);
        for (k = 0; k < 16; k++) printf("channel %2d %-7s min %-12.5g max %.5g\n", k, climate_names[k], mn[k], mx[k]);
    }
    printf("climate: %ld snapshots of %dx%dx16 (seed %ld, feature scale %g) -> %s\n", n, H, W, (long)seed, fscale, out);
    return 0;
}
