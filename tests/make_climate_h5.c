/* Writes DeepCAM HDF5 files with the real layout and names, for the cf-convert h52npy tests:
   OUT/data-2006-01-01-00-1.h5 with group 'climate' holding 'data' float32 (H,W,16) (value
   (h*W + w)*16 + c, a position code), 'labels_0' float32 (H,W) ((h + w) % 3), 'labels_1',
   'data_stats' (4,16) and 'labels_0_stats' (7,1) as the 2018 generator writes them; and
   OUT/stats.h5 with climate/minval, climate/maxval (16,) and climate/count.
   Also one damaged file per case under OUT/bad/<case>/ (see the table in main).
   Usage: make_climate_h5 OUTDIR H W */
#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void put(hid_t g, const char *name, int nd, const hsize_t *dims, const float *v) {
    hid_t sp = H5Screate_simple(nd, dims, NULL);
    hid_t ds = H5Dcreate2(g, name, H5T_IEEE_F32LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v);
    H5Dclose(ds); H5Sclose(sp);
}
/* a snapshot; variant damages one thing (0: none) */
enum { OK, NOLABEL, LABELSHAPE, NOGROUP, NODATA, RANK2, RANK4, LABRANK3, LABEL3, LABELNEG, LABELFRAC, DNAN, DINF };
static void snapshot(const char *path, int H, int W, int variant) {
    hsize_t dd[4] = {(hsize_t)H, (hsize_t)W, 16, 1}, d4[4] = {1, (hsize_t)H, (hsize_t)W, 16}, ld[3] = {(hsize_t)H, (hsize_t)W, 1}, sd[2] = {4, 16}, ls[2] = {7, 1};
    float *x = malloc(sizeof(float) * H * W * 16), *y = malloc(sizeof(float) * H * (W + 1)), st[64] = {0}, lst[7] = {0};
    int h, w, c, lw = variant == LABELSHAPE ? W + 1 : W;
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), g;
    for (h = 0; h < H; h++) for (w = 0; w < W; w++) for (c = 0; c < 16; c++) x[((size_t)h * W + w) * 16 + c] = (float)((h * W + w) * 16 + c);
    for (h = 0; h < H; h++) for (w = 0; w < lw; w++) y[(size_t)h * lw + w] = (float)((h + w) % 3);
    if (variant == LABEL3) y[1] = 3; if (variant == LABELNEG) y[2] = -1; if (variant == LABELFRAC) y[3] = 0.5f;
    if (variant == DNAN) x[5] = NAN; if (variant == DINF) x[7] = INFINITY;
    g = H5Gcreate2(f, variant == NOGROUP ? "other" : "climate", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (variant == RANK2) { hsize_t d2[2] = {(hsize_t)H, (hsize_t)W * 16}; put(g, "data", 2, d2, x); }
    else if (variant == RANK4) put(g, "data", 4, d4, x);
    else if (variant != NODATA) put(g, "data", 3, dd, x);
    put(g, "data_stats", 2, sd, st);
    if (variant == LABRANK3) put(g, "labels_0", 3, ld, y);
    else if (variant != NOLABEL) { hsize_t l2[2] = {(hsize_t)H, (hsize_t)lw}; put(g, "labels_0", 2, l2, y); put(g, "labels_0_stats", 2, ls, lst); }
    { hsize_t l2[2] = {(hsize_t)H, (hsize_t)W}; put(g, "labels_1", 2, l2, y); }
    H5Gclose(g); H5Fclose(f);
    free(x); free(y);
}
enum { SOK, SNOMAX, SLEN, SRANK, SNOGROUP };
static void stats(const char *path, int H, int W, int variant) {
    hsize_t d16[1] = {16}, d15[1] = {15}, d44[2] = {4, 4};
    float mn[16], mx[16], count = 1;
    int c;
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), g, sp, ds;
    for (c = 0; c < 16; c++) { mn[c] = (float)c; mx[c] = (float)((H * W - 1) * 16 + c); }
    g = H5Gcreate2(f, variant == SNOGROUP ? "other" : "climate", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (variant == SRANK) put(g, "minval", 2, d44, mn); else put(g, "minval", 1, d16, mn);
    if (variant == SLEN) put(g, "maxval", 1, d15, mx); else if (variant != SNOMAX) put(g, "maxval", 1, d16, mx);
    sp = H5Screate(H5S_SCALAR);
    ds = H5Dcreate2(g, "count", H5T_IEEE_F32LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, &count);
    H5Dclose(ds); H5Sclose(sp);
    H5Gclose(g); H5Fclose(f);
}
int main(int argc, char **argv) {
    /* damaged snapshots: directory name, variant, and what the error must say (listed in OUT/bad/cases.txt) */
    static const struct { const char *name; int variant; const char *want; } snaps[] = {
        {"nolabel", NOLABEL, "no dataset 'climate/labels_0'"}, {"labelshape", LABELSHAPE, "climate/labels_0 must be"},
        {"nogroup", NOGROUP, "no group 'climate'"}, {"nodata", NODATA, "no dataset 'climate/data'"},
        {"rank2", RANK2, "climate/data must be (H, W, C)"}, {"rank4", RANK4, "climate/data must be (H, W, C)"},
        {"labrank3", LABRANK3, "climate/labels_0 must be"}, {"label3", LABEL3, "not 0, 1 or 2"},
        {"labelneg", LABELNEG, "not 0, 1 or 2"}, {"labelfrac", LABELFRAC, "not 0, 1 or 2"},
        {"nan", DNAN, "is not finite"}, {"inf", DINF, "is not finite"},
    };
    static const struct { const char *name; int variant; const char *want; } stat_cases[] = {
        {"stats-nomax", SNOMAX, "no dataset 'climate/maxval'"}, {"stats-len", SLEN, "must be vectors of one length"},
        {"stats-rank", SRANK, "must be vectors of one length"}, {"stats-nogroup", SNOGROUP, "no group 'climate'"},
    };
    char p[4096];
    int H, W;
    size_t k;
    FILE *list;
    if (argc < 4) { fprintf(stderr, "usage: make_climate_h5 OUTDIR H W\n"); return 1; }
    H = atoi(argv[2]); W = atoi(argv[3]);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    mkdir(argv[1], 0777);
    snprintf(p, sizeof p, "%s/data-2006-01-01-00-1.h5", argv[1]); snapshot(p, H, W, OK);
    snprintf(p, sizeof p, "%s/stats.h5", argv[1]); stats(p, H, W, SOK);
    snprintf(p, sizeof p, "%s/bad", argv[1]); mkdir(p, 0777);
    snprintf(p, sizeof p, "%s/bad/cases.txt", argv[1]);
    if (!(list = fopen(p, "w"))) return 1;
    for (k = 0; k < sizeof snaps / sizeof *snaps; k++) {
        snprintf(p, sizeof p, "%s/bad/%s", argv[1], snaps[k].name); mkdir(p, 0777);
        snprintf(p, sizeof p, "%s/bad/%s/data-%s.h5", argv[1], snaps[k].name, snaps[k].name); snapshot(p, H, W, snaps[k].variant);
        fprintf(list, "%s|%s\n", p, snaps[k].want);
    }
    for (k = 0; k < sizeof stat_cases / sizeof *stat_cases; k++) {
        snprintf(p, sizeof p, "%s/bad/%s", argv[1], stat_cases[k].name); mkdir(p, 0777);
        snprintf(p, sizeof p, "%s/bad/%s/stats.h5", argv[1], stat_cases[k].name); stats(p, H, W, stat_cases[k].variant);
        fprintf(list, "%s|%s\n", p, stat_cases[k].want);
    }
    fclose(list);
    return 0;
}
