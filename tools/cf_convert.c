/* cf-convert: data and weights between formats.
     weights-export   checkpoint -> directory of PyTorch-layout .npy tensors
     weights-import   directory of .npy tensors -> checkpoint
     tfrecord2npy     CosmoFlow TFRecords -> the submitters' numpy layout
     universe         raw 512^3 x 4 HDF5 universe -> its 64 sub-volumes as gzip TFRecords
     h52npy           DeepCAM HDF5 snapshots and stats.h5 -> the numpy layout */
#include "tool.h"
#ifdef CF_USE_HDF5
#include <hdf5.h>
#endif

static void usage(void) {
    printf("usage: cf-convert COMMAND ...\n"
           "  weights-export --model M.cfg --weights CKPT --out DIR [--input-shape S]\n"
           "        one NNN_<layer>_<kind>.npy per parameter tensor, PyTorch layouts\n"
           "  weights-import --model M.cfg --npy DIR --out CKPT [--input-shape S]\n"
           "        a checkpoint (step 0) holding those tensors; shapes are checked\n"
           "  tfrecord2npy IN.tfrecord... --out DIR\n"
           "        X_data.npy int16 (S,S,S,4) and X_label.npy float32 (4,) per record, plus\n"
           "        files_data.lst and files_label.lst (sorted names)\n"
           "  universe IN.hdf5... --out DIR [--plain]\n"
           "        datasets 'full' (N,N,N,4) int16 and 'unitPar' (4) -> 64 sub-volumes of (N/4)^3,\n"
           "        index 16a+4b+c, named <parentdir>_<name>_<iii>.tfrecord (gzip unless --plain)%s\n"
           "  h52npy IN.h5... --out DIR\n"
           "        DeepCAM: climate/data (H,W,C) and climate/labels_0 (H,W) of each data-X.h5 -> data-X.npy and\n"
           "        label-X.npy (float32, as NVIDIA's convert_hdf52npy.py); a stats.h5 among the inputs ->\n"
           "        stats_minval.npy / stats_maxval.npy from climate/minval, climate/maxval\n"
           "  --help, --version\n",
#ifdef CF_USE_HDF5
           ""
#else
           "\n        (this build has no libhdf5: rebuild with HDF5=1)"
#endif
    );
    exit(0);
}

static const char *basename_of(const char *p) { const char *s = strrchr(p, '/'); return s ? s + 1 : p; }

static void weights(int argc, char **argv, int import) {
    const char *model = NULL, *in = NULL, *out = NULL;
    cf_shape shape; int has_shape = 0, i;
    cf_net net;
    for (i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--model")) model = flag_value(argc, argv, &i);
        else if (!strcmp(a, import ? "--npy" : "--weights")) in = flag_value(argc, argv, &i);
        else if (!strcmp(a, "--out")) out = flag_value(argc, argv, &i);
        else if (!strcmp(a, "--input-shape")) { shape = flag_shape(a, flag_value(argc, argv, &i)); has_shape = 1; }
        else die("%s: unknown flag for %s (see --help)", a, argv[1]);
    }
    if (!model || !in || !out) die("%s: needs --model, %s and --out", argv[1], import ? "--npy" : "--weights");
    TRY(cf_net_load_cfg(&net, model, has_shape ? &shape : NULL));
    if (import) {
        cf_train_state st = {0, 0, 0, 0};
        TRY(cf_weights_import(&net, in));
        TRY(cf_checkpoint_save(out, &net, &st));
    } else {
        TRY(cf_weights_load(&net, in));
        TRY(cf_weights_export(&net, out));
    }
    printf("%s: %d tensors, %zu parameters -> %s\n", argv[1], cf_net_tensors(&net, NULL, 0), net.n_params, out);
    cf_net_free(&net);
}

/* files_*.lst: the sorted names of DIR's *suffix files, one per line (atomically) */
static void write_list(const char *dir, const char *suffix, const char *listname) {
    DIR *d = opendir(dir);
    struct dirent *e;
    char **v = NULL, path[4096];
    int n = 0, i;
    size_t sl = strlen(suffix);
    cf_atomic_file af;
    if (!d) die("%s: %s", dir, strerror(errno));
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l > sl && !strcmp(e->d_name + l - sl, suffix)) { v = (char **)realloc(v, (n + 1) * sizeof *v); v[n++] = strdup(e->d_name); }
    }
    closedir(d);
    qsort(v, n, sizeof *v, cmp_str);
    snprintf(path, sizeof path, "%s/%s", dir, listname);
    TRY(cf_atomic_open(&af, path));
    for (i = 0; i < n; i++) { cf_atomic_write(&af, v[i], strlen(v[i])); cf_atomic_write(&af, "\n", 1); free(v[i]); }
    TRY(cf_atomic_commit(&af));
    free(v);
}

static void tfrecord2npy(int argc, char **argv) {
    const char *out = NULL;
    int i, n = 0;
    char path[4096];
    for (i = 2; i < argc; i++) if (!strcmp(argv[i], "--out")) out = flag_value(argc, argv, &i);
    if (!out) die("tfrecord2npy: needs --out DIR");
    if (mkdir(out, 0777) && errno != EEXIST) die("%s: %s", out, strerror(errno));
    for (i = 2; i < argc; i++) {
        cf_cosmo_sample s;
        cf_array a;
        char base[2048], *dot;
        if (!strcmp(argv[i], "--out")) { i++; continue; }
        if (argv[i][0] == '-') die("%s: unknown flag for tfrecord2npy", argv[i]);
        TRY(cf_cosmo_read(argv[i], &s));
        snprintf(base, sizeof base, "%s", basename_of(argv[i]));
        if ((dot = strstr(base, ".tfrecord"))) *dot = 0;
        memset(&a, 0, sizeof a);
        a.dtype = CF_I16; a.ndim = 4; a.shape[0] = a.shape[1] = a.shape[2] = s.s; a.shape[3] = s.c; a.count = s.count; a.data = s.x;
        snprintf(path, sizeof path, "%s/%s_data.npy", out, base);
        TRY(cf_npy_write(path, &a));
        a.dtype = CF_F32; a.ndim = 1; a.shape[0] = s.ny; a.count = (size_t)s.ny; a.data = s.y;
        snprintf(path, sizeof path, "%s/%s_label.npy", out, base);
        TRY(cf_npy_write(path, &a));
        cf_cosmo_free(&s);
        n++;
    }
    if (!n) die("tfrecord2npy: no input files");
    write_list(out, "_data.npy", "files_data.lst");
    write_list(out, "_label.npy", "files_label.lst");
    printf("tfrecord2npy: %d records -> %s\n", n, out);
}

#ifdef CF_USE_HDF5
/* reads dataset name of file f into a new buffer of the given HDF5 memory type; returns dims */
static void *h5_read(hid_t f, const char *file, const char *name, hid_t memtype, size_t elsize, int *ndim, hsize_t dims[8]) {
    hid_t ds, sp;
    size_t n = 1;
    int i;
    void *buf;
    if (!H5Lexists(f, name, H5P_DEFAULT)) die("%s: no dataset '%s'", file, name);
    ds = H5Dopen2(f, name, H5P_DEFAULT);
    if (ds < 0) die("%s: cannot open dataset '%s'", file, name);
    sp = H5Dget_space(ds);
    *ndim = H5Sget_simple_extent_ndims(sp);
    if (*ndim < 1 || *ndim > 8) die("%s: dataset '%s' has %d dimensions", file, name, *ndim);
    H5Sget_simple_extent_dims(sp, dims, NULL);
    for (i = 0; i < *ndim; i++) n *= dims[i];
    if (n > ((size_t)1 << 32)) die("%s: dataset '%s' is too large", file, name);
    buf = malloc(n * elsize + 1);
    if (!buf) die("out of memory reading %s", file);
    if (H5Dread(ds, memtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0) die("%s: cannot read '%s' as the needed type", file, name);
    H5Sclose(sp); H5Dclose(ds);
    return buf;
}
#endif

static void universe(int argc, char **argv) {
#ifndef CF_USE_HDF5
    (void)argc; (void)argv;
    die("universe: this build has no libhdf5 (install libhdf5-dev and rebuild with HDF5=1)");
#else
    const char *out = NULL;
    int i, gz = 1, files = 0;
    for (i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--out")) out = flag_value(argc, argv, &i);
        else if (!strcmp(argv[i], "--plain")) gz = 0;
    }
    if (!out) die("universe: needs --out DIR");
    if (mkdir(out, 0777) && errno != EEXIST) die("%s: %s", out, strerror(errno));
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);   /* our messages, not the library's stack dumps */
    for (i = 2; i < argc; i++) {
        hid_t f;
        hsize_t dims[8], pd[8];
        int nd, pn, a, b, c, N, S;
        int16_t *full, *sub;
        float *par;
        char parent[1024] = "", name[1024], path[8192], *slash, *dot;
        if (!strcmp(argv[i], "--out")) { i++; continue; }
        if (!strcmp(argv[i], "--plain")) continue;
        f = H5Fopen(argv[i], H5F_ACC_RDONLY, H5P_DEFAULT);
        if (f < 0) die("%s: not a readable HDF5 file", argv[i]);
        full = (int16_t *)h5_read(f, argv[i], "full", H5T_NATIVE_SHORT, 2, &nd, dims);
        par = (float *)h5_read(f, argv[i], "unitPar", H5T_NATIVE_FLOAT, 4, &pn, pd);
        H5Fclose(f);
        if (nd != 4 || dims[0] != dims[1] || dims[1] != dims[2] || dims[3] != 4 || dims[0] % 4)
            die("%s: 'full' must be (N,N,N,4) with N divisible by 4", argv[i]);
        if (pn != 1 || pd[0] != 4) die("%s: 'unitPar' must hold 4 values", argv[i]);
        N = (int)dims[0]; S = N / 4;
        /* names as the reference's prepare.py: <parent dir>_<file name without .hdf5>_<iii> */
        snprintf(path, sizeof path, "%s", argv[i]);
        if ((slash = strrchr(path, '/'))) { *slash = 0; snprintf(parent, sizeof parent, "%.900s_", basename_of(path)); }
        snprintf(name, sizeof name, "%s", basename_of(argv[i]));
        if ((dot = strstr(name, ".hdf5")) || (dot = strstr(name, ".h5"))) *dot = 0;
        sub = (int16_t *)malloc((size_t)S * S * S * 4 * 2);
        for (a = 0; a < 4; a++) for (b = 0; b < 4; b++) for (c = 0; c < 4; c++) {
            int x, y;
            size_t n;
            unsigned char *ex;
            for (x = 0; x < S; x++) for (y = 0; y < S; y++)   /* one row of S voxels x 4 channels at a time */
                memcpy(sub + (((size_t)x * S + y) * S) * 4,
                       full + ((((size_t)(a * S + x) * N + (b * S + y)) * N) + (size_t)c * S) * 4, (size_t)S * 4 * 2);
            n = cf_example_encode(NULL, "x", sub, (size_t)S * S * S * 8, "y", par, 4, 0);
            ex = (unsigned char *)malloc(n);
            cf_example_encode(ex, "x", sub, (size_t)S * S * S * 8, "y", par, 4, 0);
            snprintf(path, sizeof path, "%s/%s%s_%03d.tfrecord", out, parent, name, 16 * a + 4 * b + c);
            TRY(cf_tfrecord_write(path, ex, n, gz));
            free(ex);
        }
        free(sub); free(full); free(par);
        files++;
    }
    if (!files) die("universe: no input files");
    printf("universe: %d files -> %d sub-volumes in %s\n", files, 64 * files, out);
#endif
}

#ifdef CF_USE_HDF5
/* writes a float32 array atomically */
static void save_f32(const char *path, const float *p, int ndim, const hsize_t *dims) {
    cf_array a;
    int i;
    memset(&a, 0, sizeof a);
    a.dtype = CF_F32; a.ndim = ndim; a.count = 1; a.data = (void *)p;
    for (i = 0; i < ndim; i++) { a.shape[i] = (int64_t)dims[i]; a.count *= (size_t)dims[i]; }
    TRY(cf_npy_write(path, &a));
}
#endif

static void h52npy(int argc, char **argv) {
#ifndef CF_USE_HDF5
    (void)argc; (void)argv;
    die("h52npy: this build has no libhdf5 (install libhdf5-dev and rebuild with HDF5=1)");
#else
    const char *out = NULL;
    int i, files = 0;
    for (i = 2; i < argc; i++) if (!strcmp(argv[i], "--out")) out = flag_value(argc, argv, &i);
    if (!out) die("h52npy: needs --out DIR");
    if (mkdir(out, 0777) && errno != EEXIST) die("%s: %s", out, strerror(errno));
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    for (i = 2; i < argc; i++) {
        hid_t f;
        hsize_t d1[8], d2[8];
        int n1, n2;
        size_t k, P;
        char name[1024], path[8192], *dot;
        const char *base = basename_of(argv[i]);
        if (!strcmp(argv[i], "--out")) { i++; continue; }
        f = H5Fopen(argv[i], H5F_ACC_RDONLY, H5P_DEFAULT);
        if (f < 0) die("%s: not a readable HDF5 file", argv[i]);
        if (!H5Lexists(f, "climate", H5P_DEFAULT)) die("%s: no group 'climate' (not a DeepCAM file)", argv[i]);
        if (!strcmp(base, "stats.h5")) {   /* the reference's summarize_data.py output */
            float *mn = (float *)h5_read(f, argv[i], "climate/minval", H5T_NATIVE_FLOAT, 4, &n1, d1);
            float *mx = (float *)h5_read(f, argv[i], "climate/maxval", H5T_NATIVE_FLOAT, 4, &n2, d2);
            H5Fclose(f);
            if (n1 != 1 || n2 != 1 || d1[0] != d2[0]) die("%s: climate/minval and climate/maxval must be vectors of one length", argv[i]);
            snprintf(path, sizeof path, "%s/stats_minval.npy", out); save_f32(path, mn, 1, d1);
            snprintf(path, sizeof path, "%s/stats_maxval.npy", out); save_f32(path, mx, 1, d2);
            free(mn); free(mx);
            files++;
            continue;
        }
        float *x = (float *)h5_read(f, argv[i], "climate/data", H5T_NATIVE_FLOAT, 4, &n1, d1);
        float *y = (float *)h5_read(f, argv[i], "climate/labels_0", H5T_NATIVE_FLOAT, 4, &n2, d2);
        H5Fclose(f);
        if (n1 != 3) die("%s: climate/data must be (H, W, C), channels last; it has %d dimensions", argv[i], n1);
        if (n2 != 2 || d2[0] != d1[0] || d2[1] != d1[1])
            die("%s: climate/labels_0 must be (%d, %d) like climate/data", argv[i], (int)d1[0], (int)d1[1]);
        P = (size_t)d1[0] * d1[1];
        for (k = 0; k < P * d1[2]; k++) if (!isfinite(x[k])) die("%s: climate/data value %zu is not finite", argv[i], k);
        for (k = 0; k < P; k++)
            if (!(y[k] >= 0 && y[k] < 3) || y[k] != (float)(int)y[k]) die("%s: climate/labels_0 pixel %zu is %g, not 0, 1 or 2", argv[i], k, y[k]);
        /* data-X.h5 -> data-X.npy and label-X.npy */
        snprintf(name, sizeof name, "%s", strncmp(base, "data-", 5) ? base : base + 5);
        if ((dot = strstr(name, ".h5")) || (dot = strstr(name, ".hdf5"))) *dot = 0;
        snprintf(path, sizeof path, "%s/data-%s.npy", out, name); save_f32(path, x, 3, d1);
        snprintf(path, sizeof path, "%s/label-%s.npy", out, name); save_f32(path, y, 2, d2);
        free(x); free(y);
        files++;
    }
    if (!files) die("h52npy: no input files");
    printf("h52npy: %d files -> %s\n", files, out);
#endif
}

int main(int argc, char **argv) {
    tool_name = "convert";
    tool_init(argc, argv);
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) usage();
    if (!strcmp(argv[1], "--version")) print_version();
    if (has_flag(argc, argv, "--help")) usage();
    if (!strcmp(argv[1], "weights-export")) weights(argc, argv, 0);
    else if (!strcmp(argv[1], "weights-import")) weights(argc, argv, 1);
    else if (!strcmp(argv[1], "tfrecord2npy")) tfrecord2npy(argc, argv);
    else if (!strcmp(argv[1], "universe")) universe(argc, argv);
    else if (!strcmp(argv[1], "h52npy")) h52npy(argc, argv);
    else die("%s: unknown command (weights-export, weights-import, tfrecord2npy, universe, h52npy)", argv[1]);
    return 0;
}
