/* Writes DeepCAM HDF5 files with the real layout and names, for the cf-convert h52npy test:
   OUT/data-2006-01-01-00-1.h5 with group 'climate' holding 'data' float32 (H,W,16) (value
   (h*W + w)*16 + c, a position code), 'labels_0' float32 (H,W) ((h + w) % 3), 'labels_1',
   'data_stats' (4,16) and 'labels_0_stats' (7,1) as the 2018 generator writes them; and
   OUT/stats.h5 with climate/minval, climate/maxval (16,) and climate/count.  Also
   OUT/bad-nolabel/data-x.h5 without labels_0 and OUT/bad-shape/data-y.h5 whose labels are
   (H, W+1).  Usage: make_climate_h5 OUTDIR H W */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

static void put(hid_t g, const char *name, int nd, const hsize_t *dims, const float *v) {
    hid_t sp = H5Screate_simple(nd, dims, NULL);
    hid_t ds = H5Dcreate2(g, name, H5T_IEEE_F32LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v);
    H5Dclose(ds); H5Sclose(sp);
}
static void snapshot(const char *path, int H, int W, int with_labels, int label_w) {
    hsize_t dd[3] = {(hsize_t)H, (hsize_t)W, 16}, ld[2] = {(hsize_t)H, (hsize_t)label_w}, sd[2] = {4, 16}, ls[2] = {7, 1};
    float *x = malloc(sizeof(float) * H * W * 16), *y = malloc(sizeof(float) * H * label_w), st[64] = {0}, lst[7] = {0};
    int h, w, c;
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), g = H5Gcreate2(f, "climate", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    for (h = 0; h < H; h++) for (w = 0; w < W; w++) for (c = 0; c < 16; c++) x[((size_t)h * W + w) * 16 + c] = (float)((h * W + w) * 16 + c);
    for (h = 0; h < H; h++) for (w = 0; w < label_w; w++) y[(size_t)h * label_w + w] = (float)((h + w) % 3);
    put(g, "data", 3, dd, x);
    put(g, "data_stats", 2, sd, st);
    if (with_labels) { put(g, "labels_0", 2, ld, y); put(g, "labels_0_stats", 2, ls, lst); }
    put(g, "labels_1", 2, ld, y);
    H5Gclose(g); H5Fclose(f);
    free(x); free(y);
}
int main(int argc, char **argv) {
    char p[4096];
    int H, W, c;
    hsize_t d16[1] = {16};
    float mn[16], mx[16], count = 1;
    hid_t f, g, sp, ds;
    if (argc < 4) { fprintf(stderr, "usage: make_climate_h5 OUTDIR H W\n"); return 1; }
    H = atoi(argv[2]); W = atoi(argv[3]);
    mkdir(argv[1], 0777);
    snprintf(p, sizeof p, "%s/data-2006-01-01-00-1.h5", argv[1]); snapshot(p, H, W, 1, W);
    snprintf(p, sizeof p, "%s/bad-nolabel", argv[1]); mkdir(p, 0777);
    snprintf(p, sizeof p, "%s/bad-nolabel/data-x.h5", argv[1]); snapshot(p, H, W, 0, W);
    snprintf(p, sizeof p, "%s/bad-shape", argv[1]); mkdir(p, 0777);
    snprintf(p, sizeof p, "%s/bad-shape/data-y.h5", argv[1]); snapshot(p, H, W, 1, W + 1);
    for (c = 0; c < 16; c++) { mn[c] = (float)c; mx[c] = (float)((H * W - 1) * 16 + c); }
    snprintf(p, sizeof p, "%s/stats.h5", argv[1]);
    f = H5Fcreate(p, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    g = H5Gcreate2(f, "climate", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    put(g, "minval", 1, d16, mn); put(g, "maxval", 1, d16, mx);
    sp = H5Screate(H5S_SCALAR);
    ds = H5Dcreate2(g, "count", H5T_IEEE_F32LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, &count);
    H5Dclose(ds); H5Sclose(sp);
    H5Gclose(g); H5Fclose(f);
    return 0;
}
