/* cf-convert: data and weights between formats.
     weights-export   checkpoint -> directory of PyTorch-layout .npy tensors
     weights-import   directory of .npy tensors -> checkpoint
     extract-cfg      the cfg text a checkpoint embeds, byte for byte
     tfrecord2npy     CosmoFlow TFRecords -> the submitters' numpy layout
     universe         raw 512^3 x 4 HDF5 universe -> its 64 sub-volumes as gzip TFRecords, or
                      (--whole) kept whole as .npy, read by hyperslabs
     h52npy           DeepCAM HDF5 snapshots and stats.h5 -> the numpy layout
   No output is written over an input, and each is written atomically. */
#ifndef CF_IMPLEMENTATION_LINKED   /* the Makefile links the implementation it compiled once (tools/cosmoflow.c) */
#define CF_IMPLEMENTATION
#endif
#include "cosmoflow.h"
#include "tool.h"
#ifdef CF_USE_HDF5
#include <hdf5.h>
#endif

typedef struct {
    const char *cmd, *model, *weights, *npy, *out;
    int has_shape, plain, n_in, force, append, whole, slab_planes;
    cf_shape shape;
    const char **in;     /* the positional inputs */
} options;

static const char *commands =
    "  weights-export --weights CKPT --out DIR [--model M.cfg] [--input-shape S]\n"
    "        one NNN_<layer>_<kind>.npy per parameter tensor, PyTorch layouts (the model: the checkpoint's own)\n"
    "  weights-import --model M.cfg --npy DIR --out CKPT [--input-shape S]\n"
    "        a checkpoint (step 0) holding those tensors; shapes are checked\n"
    "  extract-cfg CKPT --out M.cfg\n"
    "        the model text the checkpoint embeds, byte for byte\n"
    "  tfrecord2npy IN.tfrecord... --out DIR\n"
    "        X_data.npy int16 (S,S,S,4) and X_label.npy float32 (4,) per record, plus files_data.lst, files_label.lst\n"
    "  universe IN.hdf5... --out DIR [--plain]\n"
    "        datasets 'full' (N,N,N,4) int16 and 'unitPar' (4) -> 64 sub-volumes of (N/4)^3, index 16a+4b+c,\n"
    "        named <parentdir>_<name>_<iii>.tfrecord (gzip unless --plain); with --whole the universe kept whole:\n"
    "        <parentdir>_<name>_data.npy int16 (N,N,N,4) and _label.npy (4,), read and written by slabs of planes\n"
    "  h52npy IN.h5... --out DIR\n"
    "        DeepCAM: climate/data (H,W,C) and climate/labels_0 (H,W) of each data-X.h5 -> data-X.npy and\n"
    "        label-X.npy (float32, as NVIDIA's convert_hdf52npy.py); a stats.h5 among the inputs ->\n"
    "        stats_minval.npy / stats_maxval.npy from climate/minval, climate/maxval\n"
#ifndef CF_USE_HDF5
    "  (this build has no libhdf5, so no universe or h52npy: rebuild with HDF5=1)\n"
#endif
    ;
static tool_flag flags[12];
static int n_flags;
static void flag_table(options *o) {
    tool_flag f[] = {
        {"--out", "PATH", FLAG_STR, &o->out, 0, 0, "the output: a directory, or a file for weights-import and extract-cfg", NULL, NULL},
        {"--weights", "CKPT", FLAG_STR, &o->weights, 0, 0, "weights-export: the checkpoint", NULL, NULL},
        {"--npy", "DIR", FLAG_STR, &o->npy, 0, 0, "weights-import: the tensors", NULL, NULL},
        {"--model", "M.cfg", FLAG_STR, &o->model, 0, 0, "the network (weights-import; weights-export: default the checkpoint's)", NULL, NULL},
        {"--input-shape", "S", FLAG_SHAPE, &o->shape, 0, 0, "replaces the cfg's input size", NULL, &o->has_shape},
        {"--plain", NULL, FLAG_SET, &o->plain, 1, 0, "universe: plain TFRecords instead of gzip", NULL, NULL},
        {"--whole", NULL, FLAG_SET, &o->whole, 1, 0, "universe: the whole universe as one numpy sample (for --spatial: each rank reads its slab)", NULL, NULL},
        {"--slab-planes", "P", FLAG_INT, &o->slab_planes, 1, 1 << 20, "universe --whole: planes read from the HDF5 file at once (default: about 16 M values)", NULL, NULL},
        {"--force", NULL, FLAG_SET, &o->force, 1, 0, "an output directory that holds files: same-named files are replaced, others stay", NULL, NULL},
        {"--append", NULL, FLAG_SET, &o->append, 1, 0, "an output directory that holds a data set: add to it, replacing none (default: refused)", NULL, NULL},
    };
    n_flags = (int)(sizeof f / sizeof f[0]);
    memcpy(flags, f, sizeof f);
}
static void usage(void) { flag_help("usage: cf-convert COMMAND ...", flags, n_flags, commands); }

static const char *basename_of(const char *p) { const char *s = strrchr(p, '/'); return s ? s + 1 : p; }
/* an output file inside --out: never one of the inputs */
static void out_path(char *path, size_t n, const char *dir, const char *fmt, const char *a, const char *b, int k) {
    int m = snprintf(path, n, "%s/", dir);
    snprintf(path + m, n - m, fmt, a, b, k);
    output_new(path);
}
/* the same, before anything is written: the name claimed for the input from (two inputs that
   would take one name are refused by output_claims_check) */
static void out_claim(const char *dir, const char *fmt, const char *a, const char *b, int k, const char *from) {
    char path[8192];
    out_path(path, sizeof path, dir, fmt, a, b, k);
    output_claim(path, from);
}

static void weights_export(const options *o) {
    cf_net net;
    if (!o->weights || !o->out) die("weights-export: needs --weights CKPT and --out DIR");
    input_path(o->weights); input_path(o->model);
    output_data_dir("--out", o->out, o->force, 0);
    load_model(&net, o->model, o->has_shape ? &o->shape : NULL, o->weights);
    TRY(cf_weights_load(&net, o->weights));
    TRY(cf_weights_export(&net, o->out));
    outputs_complete();
    printf("weights-export: %d tensors, %zu parameters -> %s\n", cf_net_tensors(&net, NULL, 0), net.n_params, o->out);
    cf_net_free(&net);
}
static void weights_import(const options *o) {
    cf_net net;
    cf_train_state st;
    if (!o->model || !o->npy || !o->out) die("weights-import: needs --model, --npy DIR and --out CKPT");
    input_path(o->npy); input_path(o->model);
    output_file("--out", o->out);
    memset(&st, 0, sizeof st);
    TRY(cf_net_load_cfg(&net, o->model, o->has_shape ? &o->shape : NULL));
    TRY(cf_weights_import(&net, o->npy));
    TRY(cf_checkpoint_save(o->out, &net, &st));
    printf("weights-import: %d tensors, %zu parameters -> %s\n", cf_net_tensors(&net, NULL, 0), net.n_params, o->out);
    cf_net_free(&net);
}
/* the checkpoint's embedded cfg, written back out exactly */
static void extract_cfg(const options *o) {
    char *text;
    cf_shape in;
    cf_atomic_file af;
    if (o->n_in != 1 || !o->out) die("extract-cfg: needs one checkpoint and --out M.cfg");
    input_path(o->in[0]);
    output_file("--out", o->out);
    TRY(cf_checkpoint_cfg(o->in[0], &text, &in));
    TRY(cf_atomic_open(&af, o->out));
    cf_atomic_write(&af, text, strlen(text));
    TRY(cf_atomic_commit(&af));
    printf("extract-cfg: %zu bytes (model for input %dx%dx%dx%d) -> %s\n", strlen(text), in.c, in.d, in.h, in.w, o->out);
    cf_free(text);
}

/* files_*.lst: the sorted names of DIR's *suffix files, one per line (atomically) */
static void write_list(const char *dir, const char *suffix, const char *listname) {
    DIR *d = opendir(dir);
    struct dirent *e;
    char **v = NULL, path[4096];
    int n = 0, i, existed;
    size_t sl = strlen(suffix);
    cf_atomic_file af;
    if (!d) die("%s: %s", dir, strerror(errno));
    while ((e = readdir(d))) {   /* (with --append the lists are rewritten: they index the whole set) */
        size_t l = strlen(e->d_name);
        if (l > sl && !strcmp(e->d_name + l - sl, suffix)) {
            if (!(v = (char **)realloc(v, (n + 1) * sizeof *v)) || !(v[n++] = strdup(e->d_name))) die("out of memory");
        }
    }
    closedir(d);
    if (n) qsort(v, n, sizeof *v, cmp_str);
    snprintf(path, sizeof path, "%s/%s", dir, listname);
    output_in_dir(path);
    existed = access(path, F_OK) == 0;
    TRY(cf_atomic_open(&af, path));
    for (i = 0; i < n; i++) { cf_atomic_write(&af, v[i], strlen(v[i])); cf_atomic_write(&af, "\n", 1); free(v[i]); }
    TRY(cf_atomic_commit(&af));
    if (!existed) output_added(path);   /* (a list the run replaced stays: it indexes the whole set) */
    free(v);
}
/* what a converter writes is checked as a reader would check it: finite labels (never a NaN
   passed on), particle counts that are counts */
static void check_sample(const char *file, const cf_cosmo_sample *s) {
    size_t v;
    int k;
    for (k = 0; k < s->ny; k++) if (!isfinite(s->y[k])) die("%s: label %d (y) is %g: not converted", file, k, s->y[k]);
    for (v = 0; v < s->count; v++)
        if (s->x[v] < 0) die("%s: value %zu of x (voxel %zu, channel %zu) is %d: particle counts cannot be negative", file, v, v / 4, v % 4, s->x[v]);
}
/* the name of record in's numpy files: its name without .tfrecord[.gz] */
static void npy_base(char *base, size_t n, const char *in) {
    char *dot;
    snprintf(base, n, "%s", basename_of(in));
    if ((dot = strstr(base, ".tfrecord"))) *dot = 0;
}
static void tfrecord2npy(const options *o) {
    int i, shape[3] = {0, 0, 0};
    char path[4096];
    if (!o->out) die("tfrecord2npy: needs --out DIR");
    if (!o->n_in) die("tfrecord2npy: no input files");
    for (i = 0; i < o->n_in; i++) input_path(o->in[i]);
    output_data_dir("--out", o->out, o->force, o->append);
    for (i = 0; i < o->n_in; i++) {   /* first every record read and checked, and every name it would take: nothing written yet */
        cf_cosmo_sample s;
        char base[2048];
        TRY(cf_cosmo_read(o->in[i], &s));
        check_sample(o->in[i], &s);
        if (!i) { shape[0] = s.s; shape[1] = s.c; shape[2] = s.ny; append_same_shape(o->out, 0, shape, o->in[0]); }
        else if (s.s != shape[0] || s.c != shape[1] || s.ny != shape[2])
            die("%s: a sample of %d^3 x %d with %d labels, %s of %d^3 x %d with %d: one set holds samples of one shape (nothing written)",
                o->in[i], s.s, s.c, s.ny, o->in[0], shape[0], shape[1], shape[2]);
        cf_cosmo_free(&s);
        npy_base(base, sizeof base, o->in[i]);
        out_claim(o->out, "%s%s_data.npy", base, "", 0, o->in[i]);
        out_claim(o->out, "%s%s_label.npy", base, "", 0, o->in[i]);
    }
    output_claims_check();
    for (i = 0; i < o->n_in; i++) {
        cf_cosmo_sample s;
        cf_array a;
        char base[2048];
        TRY(cf_cosmo_read(o->in[i], &s));
        npy_base(base, sizeof base, o->in[i]);
        memset(&a, 0, sizeof a);
        a.dtype = CF_I16; a.ndim = 4; a.shape[0] = a.shape[1] = a.shape[2] = s.s; a.shape[3] = s.c; a.count = s.count; a.data = s.x;
        out_path(path, sizeof path, o->out, "%s%s_data.npy", base, "", 0);
        TRY(cf_npy_write(path, &a));
        output_added(path);
        a.dtype = CF_F32; a.ndim = 1; a.shape[0] = s.ny; a.count = (size_t)s.ny; a.data = s.y;
        out_path(path, sizeof path, o->out, "%s%s_label.npy", base, "", 0);
        TRY(cf_npy_write(path, &a));
        output_added(path);
        cf_cosmo_free(&s);
    }
    write_list(o->out, "_data.npy", "files_data.lst");
    write_list(o->out, "_label.npy", "files_label.lst");
    outputs_complete();
    printf("tfrecord2npy: %d records -> %s\n", i, o->out);
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

#ifdef CF_USE_HDF5
/* one HDF5 input: a regular file (H5Fopen would wait on a FIFO), readable as HDF5 */
static hid_t h5_open(const char *path) {
    hid_t f;
    input_regular(path);
    if ((f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT)) < 0) die("%s: not a readable HDF5 file", path);
    return f;
}
/* A universe's particle counts: an integer or float dataset whose values are whole numbers
   in [0, 32767], stored as int16 (the records' type); anything else (a density in [0, 1), a
   negative count, one beyond int16) is refused by name.  Read in the dataset's own width
   class (a 512^3 x 4 universe is 1 GB as int16). */
static int16_t *h5_counts(hid_t f, const char *file, const char *name, int *nd, hsize_t dims[8]) {
    hid_t ds = H5Dopen2(f, name, H5P_DEFAULT), ty = ds < 0 ? -1 : H5Dget_type(ds);
    int cls = ty < 0 ? -1 : (int)H5Tget_class(ty), narrow = ty >= 0 && H5Tget_size(ty) <= 2, i;
    size_t n = 1, k;
    int16_t *out;
    if (ty >= 0) H5Tclose(ty);
    if (ds >= 0) H5Dclose(ds);
    if (cls != H5T_INTEGER && cls != H5T_FLOAT) die("%s: '%s' is not a numeric dataset", file, name);
    if (cls == H5T_INTEGER && narrow) out = (int16_t *)h5_read(f, file, name, H5T_NATIVE_SHORT, 2, nd, dims);
    else {   /* wider integers or floats: checked whole and in range, then narrowed */
        float *v = (float *)h5_read(f, file, name, cls == H5T_FLOAT ? H5T_NATIVE_FLOAT : H5T_NATIVE_INT, 4, nd, dims);
        for (i = 0; i < *nd; i++) n *= dims[i];
        for (k = 0; k < n; k++) {
            double x = cls == H5T_FLOAT ? v[k] : ((int *)v)[k];
            if (!(x >= 0 && x <= 32767) || x != floor(x))
                die("%s: %s value %zu is %g: particle counts are whole numbers in [0, 32767] (not converted)", file, name, k, x);
            ((int16_t *)v)[k] = (int16_t)x;   /* in place: each int16 lands before the float it came from */
        }
        return (int16_t *)v;
    }
    for (i = 0; i < *nd; i++) n *= dims[i];
    for (k = 0; k < n; k++) if (out[k] < 0) die("%s: %s value %zu is %d: particle counts cannot be negative (not converted)", file, name, k, out[k]);
    return out;
}
/* sub-volume (a, b, c) of side S of the (N,N,N,4) universe, channels last */
static void subvolume(int16_t *sub, const int16_t *full, int N, int S, int a, int b, int c) {
    int x, y;
    for (x = 0; x < S; x++) for (y = 0; y < S; y++)   /* one row of S voxels x 4 channels at a time */
        memcpy(sub + (((size_t)x * S + y) * S) * 4, full + ((((size_t)(a * S + x) * N + (b * S + y)) * N) + (size_t)c * S) * 4, (size_t)S * 4 * 2);
}
/* A universe's outputs are named as the reference's prepare.py names them: <parent dir>_<file
   name without .hdf5 or .h5>, the stem; then _<iii>.tfrecord (a sub-volume), or _data.npy and
   _label.npy (--whole) */
static void universe_stem(const char *file, char *stem, size_t n) {
    char path[8192], parent[1024] = "", name[1024], *slash, *dot;
    snprintf(path, sizeof path, "%s", file);
    if ((slash = strrchr(path, '/'))) { *slash = 0; snprintf(parent, sizeof parent, "%.900s_", basename_of(path)); }
    snprintf(name, sizeof name, "%s", basename_of(file));
    if ((dot = strstr(name, ".hdf5")) || (dot = strstr(name, ".h5"))) *dot = 0;
    snprintf(stem, n, "%s%s", parent, name);
}
/* "(a,b,c,d)": a dataset's dimensions, for messages (in a static buffer) */
static const char *dims_text(int nd, const hsize_t *dims) {
    static char t[256];
    int k, m = 0;
    for (k = 0; k < nd && k < 8; k++) m += snprintf(t + m, sizeof t - m, "%s%llu", k ? "," : "(", (unsigned long long)dims[k]);
    snprintf(t + m, sizeof t - m, "%s)", nd ? "" : "(");
    return t;
}
/* the dimensions of dataset name of f, without reading it; its rank returned */
static int h5_dims(hid_t f, const char *file, const char *name, hsize_t dims[8]) {
    hid_t ds, sp;
    int nd;
    if (!H5Lexists(f, name, H5P_DEFAULT) || (ds = H5Dopen2(f, name, H5P_DEFAULT)) < 0) die("%s: no dataset '%s'", file, name);
    sp = H5Dget_space(ds);
    nd = H5Sget_simple_extent_ndims(sp);
    if (nd < 0 || nd > 8) die("%s: dataset '%s' has %d dimensions", file, name, nd);
    H5Sget_simple_extent_dims(sp, dims, NULL);
    H5Sclose(sp); H5Dclose(ds);
    return nd;
}
/* A universe file's shape, checked before anything is written: 'full' (N,N,N,4) with N at least
   1 and at most 4096, for sub-volumes a multiple of 4 (64 of (N/4)^3); 'unitPar' 4 finite
   values.  Returns N. */
static int universe_shape(const options *o, const char *file) {
    hid_t f = h5_open(file);
    hsize_t dims[8], pd[8];
    int nd = h5_dims(f, file, "full", dims), pn, k;
    float *par = (float *)h5_read(f, file, "unitPar", H5T_NATIVE_FLOAT, 4, &pn, pd);
    H5Fclose(f);
    if (nd != 4 || dims[0] != dims[1] || dims[1] != dims[2] || dims[3] != 4)
        die("%s: 'full' is %s: it must be (N,N,N,4)", file, dims_text(nd, dims));
    if (dims[0] == 0) die("%s: 'full' is %s: an empty universe (not converted)", file, dims_text(nd, dims));
    if (dims[0] > 4096) die("%s: 'full' is %s: N at most 4096", file, dims_text(nd, dims));
    if (!o->whole && dims[0] % 4) die("%s: 'full' is %s: for 64 sub-volumes N must be divisible by 4 (or give --whole)", file, dims_text(nd, dims));
    if (pn != 1 || pd[0] != 4) die("%s: 'unitPar' must hold 4 values", file);
    for (k = 0; k < 4; k++) if (!isfinite(par[k])) die("%s: unitPar[%d] is %g: a label must be a finite number", file, k, par[k]);
    free(par);
    return (int)dims[0];
}
/* one universe file into its 64 sub-volumes (its shape checked by universe_shape) */
static void universe_file(const options *o, const char *file) {
    hid_t f = h5_open(file);
    hsize_t dims[8], pd[8];
    int nd, pn, a, b, c, N, S;
    int16_t *full = h5_counts(f, file, "full", &nd, dims), *sub;
    float *par = (float *)h5_read(f, file, "unitPar", H5T_NATIVE_FLOAT, 4, &pn, pd);
    char stem[2048], path[8192];
    H5Fclose(f);
    if (nd != 4 || dims[0] != dims[1] || dims[1] != dims[2] || dims[3] != 4 || dims[0] % 4 || !dims[0] || pn != 1 || pd[0] != 4)
        die("%s: 'full' or 'unitPar' changed shape while it was converted", file);
    N = (int)dims[0]; S = N / 4;
    universe_stem(file, stem, sizeof stem);
    if (!(sub = (int16_t *)malloc((size_t)S * S * S * 4 * 2))) die("out of memory");
    for (a = 0; a < 4; a++) for (b = 0; b < 4; b++) for (c = 0; c < 4; c++) {
        size_t n = cf_example_encode(NULL, "x", NULL, (size_t)S * S * S * 8, "y", par, 4, 0);
        unsigned char *ex = (unsigned char *)malloc(n);
        if (!ex) die("out of memory");
        subvolume(sub, full, N, S, a, b, c);
        cf_example_encode(ex, "x", sub, (size_t)S * S * S * 8, "y", par, 4, 0);
        out_path(path, sizeof path, o->out, "%s%s_%03d.tfrecord", stem, "", 16 * a + 4 * b + c);
        TRY(cf_tfrecord_write(path, ex, n, !o->plain));
        output_added(path);
        free(ex);
    }
    free(sub); free(full); free(par);
}
/* --whole: planes [p0, p0 + np) of the universe's 'full' (N,N,N,4) dataset, read by hyperslab
   in the dataset's own width class (wide: np N N 4 floats of room) and checked as h5_counts
   checks, into out (np N N 4 int16) */
static void h5_counts_planes(hid_t f, const char *file, hsize_t N, hsize_t p0, hsize_t np, int16_t *out, float *wide) {
    hid_t ds = H5Dopen2(f, "full", H5P_DEFAULT), ty = H5Dget_type(ds), fs = H5Dget_space(ds), ms;
    hsize_t start[4], count[4];
    int cls = (int)H5Tget_class(ty), narrow = cls == H5T_INTEGER && H5Tget_size(ty) <= 2;
    size_t n = (size_t)(np * N * N * 4), k;
    H5Tclose(ty);
    start[0] = p0; start[1] = start[2] = start[3] = 0; count[0] = np; count[1] = count[2] = N; count[3] = 4;
    ms = H5Screate_simple(4, count, NULL);
    if (H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL) < 0 ||
        H5Dread(ds, narrow ? H5T_NATIVE_SHORT : cls == H5T_FLOAT ? H5T_NATIVE_FLOAT : H5T_NATIVE_INT, ms, fs, H5P_DEFAULT, narrow ? (void *)out : (void *)wide) < 0)
        die("%s: cannot read planes %llu to %llu of 'full'", file, (unsigned long long)p0, (unsigned long long)(p0 + np - 1));
    H5Sclose(ms); H5Sclose(fs); H5Dclose(ds);
    for (k = 0; k < n; k++) {
        double x = narrow ? out[k] : cls == H5T_FLOAT ? wide[k] : ((int *)wide)[k];
        if (!(x >= 0 && x <= 32767) || x != floor(x))
            die("%s: full value %zu is %g: particle counts are whole numbers in [0, 32767] (not converted)", file, (size_t)(p0 * N * N * 4) + k, x);
        out[k] = (int16_t)x;
    }
}
/* An .npy version 1 header for int16 (N,N,N,4): the magic, the dict's length, the dict padded
   with spaces to a multiple of 64 bytes in all, ending in a newline */
static size_t npy_header_i16(char *h, int N) {
    int len = snprintf(h + 10, 118, "{'descr': '<i2', 'fortran_order': False, 'shape': (%d, %d, %d, 4), }", N, N, N), total = ((10 + len + 1 + 63) / 64) * 64;
    memcpy(h, "\x93NUMPY\x01\x00", 8);
    h[8] = (char)((total - 10) & 0xff); h[9] = (char)((total - 10) >> 8);
    memset(h + 10 + len, ' ', (size_t)(total - 10 - len - 1));
    h[total - 1] = '\n';
    return (size_t)total;
}
/* One universe kept whole (--whole): <parent>_<name>_data.npy int16 (N,N,N,4) and its labels,
   the numpy layout whose depth slabs a rank of --spatial reads by offset.  The 'full' dataset
   is read by hyperslabs of whole planes (about 16 M values each: a 512^3 universe, 1 GB as
   int16, is never held at once): checked for every input first (write 0), then written into
   one atomic file each (write 1).  Its shape is checked first, by universe_shape. */
static void universe_whole(const options *o, const char *file, int write) {
    hid_t f = h5_open(file);
    hsize_t dims[8], pd[8], p0, np, N;
    int pn, nd = h5_dims(f, file, "full", dims);
    float *par = (float *)h5_read(f, file, "unitPar", H5T_NATIVE_FLOAT, 4, &pn, pd), *wide;
    char stem[2048], path[8192], head[128];
    int16_t *planes;
    cf_atomic_file af;
    cf_array a;
    if (nd != 4 || dims[0] != dims[1] || dims[1] != dims[2] || dims[3] != 4 || !dims[0] || dims[0] > 4096 || pn != 1 || pd[0] != 4)
        die("%s: 'full' or 'unitPar' changed shape while it was converted", file);
    N = dims[0];
    universe_stem(file, stem, sizeof stem);
    np = o->slab_planes ? (hsize_t)o->slab_planes : ((hsize_t)1 << 24) / (N * N * 4);
    if (np < 1) np = 1;
    if (np > N) np = N;
    if (!(planes = (int16_t *)malloc((size_t)(np * N * N * 4) * 2)) || !(wide = (float *)malloc((size_t)(np * N * N * 4) * 4))) die("out of memory");
    out_path(path, sizeof path, o->out, "%s%s_data.npy", stem, "", 0);
    if (write) { TRY(cf_atomic_open(&af, path)); cf_atomic_write(&af, head, npy_header_i16(head, (int)N)); }
    for (p0 = 0; p0 < N; p0 += np) {
        hsize_t m = N - p0 < np ? N - p0 : np;
        h5_counts_planes(f, file, N, p0, m, planes, wide);
        if (write) cf_atomic_write(&af, planes, (size_t)(m * N * N * 4) * 2);
    }
    if (write) { TRY(cf_atomic_commit(&af)); output_added(path); }
    out_path(path, sizeof path, o->out, "%s%s_label.npy", stem, "", 0);
    if (write) {
        memset(&a, 0, sizeof a);
        a.dtype = CF_F32; a.ndim = 1; a.shape[0] = 4; a.count = 4; a.data = par;
        TRY(cf_npy_write(path, &a));
        output_added(path);
    }
    H5Fclose(f);
    free(planes); free(wide); free(par);
}
/* writes a float32 array atomically */
static void save_f32(const char *path, const float *p, int ndim, const hsize_t *dims) {
    cf_array a;
    int i;
    memset(&a, 0, sizeof a);
    a.dtype = CF_F32; a.ndim = ndim; a.count = 1; a.data = (void *)p;
    for (i = 0; i < ndim; i++) { a.shape[i] = (int64_t)dims[i]; a.count *= (size_t)dims[i]; }
    TRY(cf_npy_write(path, &a));
    output_added(path);
}
/* the reference's summarize_data.py output: per-channel minimum and maximum */
static void h5_stats(const options *o, hid_t f, const char *file) {
    hsize_t d1[8], d2[8];
    int n1, n2;
    char path[8192];
    float *mn = (float *)h5_read(f, file, "climate/minval", H5T_NATIVE_FLOAT, 4, &n1, d1);
    float *mx = (float *)h5_read(f, file, "climate/maxval", H5T_NATIVE_FLOAT, 4, &n2, d2);
    if (n1 != 1 || n2 != 1 || d1[0] != d2[0]) die("%s: climate/minval and climate/maxval must be vectors of one length", file);
    out_path(path, sizeof path, o->out, "%s%s", "stats_minval.npy", "", 0); save_f32(path, mn, 1, d1);
    out_path(path, sizeof path, o->out, "%s%s", "stats_maxval.npy", "", 0); save_f32(path, mx, 1, d2);
    free(mn); free(mx);
}
/* X of a snapshot data-X.h5 (or X.h5): its outputs are data-X.npy and label-X.npy */
static void snapshot_name(const char *file, char *name, size_t n) {
    const char *base = basename_of(file);
    char *dot;
    snprintf(name, n, "%s", strncmp(base, "data-", 5) ? base : base + 5);
    if ((dot = strstr(name, ".h5")) || (dot = strstr(name, ".hdf5"))) *dot = 0;
}
/* A DeepCAM input's shapes, checked before anything is written, and its output names claimed:
   a snapshot's climate/data (H, W, C) and climate/labels_0 (H, W), none of them 0; a stats.h5's
   climate/minval and climate/maxval, vectors of one length, not 0.  The snapshot's (H, W, C) in
   shape. */
static void h52npy_shape(const options *o, const char *file, int shape[3]) {
    hid_t f = h5_open(file);
    hsize_t d1[8], d2[8];
    int n1, n2;
    char name[1024];
    if (!H5Lexists(f, "climate", H5P_DEFAULT)) die("%s: no group 'climate' (not a DeepCAM file)", file);
    if (!strcmp(basename_of(file), "stats.h5")) {
        n1 = h5_dims(f, file, "climate/minval", d1); n2 = h5_dims(f, file, "climate/maxval", d2);
        if (n1 != 1 || n2 != 1 || d1[0] != d2[0]) die("%s: climate/minval and climate/maxval must be vectors of one length", file);
        if (!d1[0]) die("%s: climate/minval and climate/maxval are empty (0 channels)", file);
        out_claim(o->out, "%s%s", "stats_minval.npy", "", 0, file);
        out_claim(o->out, "%s%s", "stats_maxval.npy", "", 0, file);
        shape[0] = shape[1] = shape[2] = 0;
        H5Fclose(f);
        return;
    }
    n1 = h5_dims(f, file, "climate/data", d1); n2 = h5_dims(f, file, "climate/labels_0", d2);
    H5Fclose(f);
    if (n1 != 3) die("%s: climate/data must be (H, W, C), channels last; it has %d dimensions", file, n1);
    if (n2 != 2 || d2[0] != d1[0] || d2[1] != d1[1]) die("%s: climate/labels_0 must be (%d, %d) like climate/data", file, (int)d1[0], (int)d1[1]);
    if (!d1[0] || !d1[1] || !d1[2] || d1[0] > 65536 || d1[1] > 65536 || d1[2] > 65536)
        die("%s: climate/data is %s: each of H, W and C from 1 to 65536", file, dims_text(n1, d1));
    snapshot_name(file, name, sizeof name);
    out_claim(o->out, "data-%s%s.npy", name, "", 0, file);
    out_claim(o->out, "label-%s%s.npy", name, "", 0, file);
    shape[0] = (int)d1[0]; shape[1] = (int)d1[1]; shape[2] = (int)d1[2];
}
/* one snapshot: data-X.h5 -> data-X.npy and label-X.npy, values checked */
static void h5_snapshot(const options *o, hid_t f, const char *file) {
    hsize_t d1[8], d2[8];
    int n1, n2;
    size_t k, P;
    char name[1024], path[8192];
    float *x = (float *)h5_read(f, file, "climate/data", H5T_NATIVE_FLOAT, 4, &n1, d1);
    float *y = (float *)h5_read(f, file, "climate/labels_0", H5T_NATIVE_FLOAT, 4, &n2, d2);
    if (n1 != 3) die("%s: climate/data must be (H, W, C), channels last; it has %d dimensions", file, n1);
    if (n2 != 2 || d2[0] != d1[0] || d2[1] != d1[1]) die("%s: climate/labels_0 must be (%d, %d) like climate/data", file, (int)d1[0], (int)d1[1]);
    P = (size_t)d1[0] * d1[1];
    for (k = 0; k < P * d1[2]; k++) if (!isfinite(x[k])) die("%s: climate/data value %zu is not finite", file, k);
    for (k = 0; k < P; k++)
        if (!(y[k] >= 0 && y[k] < 3) || y[k] != (float)(int)y[k]) die("%s: climate/labels_0 pixel %zu is %g, not 0, 1 or 2", file, k, y[k]);
    snapshot_name(file, name, sizeof name);
    out_path(path, sizeof path, o->out, "data-%s%s.npy", name, "", 0); save_f32(path, x, 3, d1);
    out_path(path, sizeof path, o->out, "label-%s%s.npy", name, "", 0); save_f32(path, y, 2, d2);
    free(x); free(y);
}
#endif

static void hdf5_command(const options *o, int universe) {
#ifndef CF_USE_HDF5
    (void)universe;
    die("%s: this build has no libhdf5 (install libhdf5-dev and rebuild with HDF5=1)", o->cmd);
#else
    int i, k, written = 0, first = -1, first_shape[3] = {0, 0, 0};
    if (!o->out) die("%s: needs --out DIR", o->cmd);
    if (!o->n_in) die("%s: no input files", o->cmd);
    for (i = 0; i < o->n_in; i++) input_path(o->in[i]);
    if ((o->whole || o->slab_planes) && !universe) die("--whole and --slab-planes: for universe only");
    if (o->whole && o->plain) die("--whole with --plain: --plain is for the sub-volumes' TFRecords");
    if (o->slab_planes && !o->whole) die("--slab-planes: with --whole");
    output_data_dir("--out", o->out, o->force, o->append);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);   /* our messages, not the library's stack dumps */
    /* first every input's shape and every output name: nothing written yet */
    for (i = 0; i < o->n_in; i++) {
        int shape[3] = {0, 0, 0};
        char stem[2048];
        if (universe) {
            int N = universe_shape(o, o->in[i]);
            shape[0] = o->whole ? N : N / 4; shape[1] = 4; shape[2] = 4;   /* side, channels, labels */
            universe_stem(o->in[i], stem, sizeof stem);
            if (o->whole) { out_claim(o->out, "%s%s_data.npy", stem, "", 0, o->in[i]); out_claim(o->out, "%s%s_label.npy", stem, "", 0, o->in[i]); }
            else for (k = 0; k < 64; k++) out_claim(o->out, "%s%s_%03d.tfrecord", stem, "", k, o->in[i]);
        } else h52npy_shape(o, o->in[i], shape);
        if (!shape[0]) continue;   /* (a stats.h5) */
        if (first < 0) { first = i; memcpy(first_shape, shape, sizeof shape); append_same_shape(o->out, !universe, shape, o->in[i]); }
        else if (memcmp(shape, first_shape, sizeof shape) && universe)
            die("%s: its samples would be %d^3 x 4, those of %s %d^3 x 4: one set holds samples of one shape (nothing written)", o->in[i],
                shape[0], o->in[first], first_shape[0]);
        else if (memcmp(shape, first_shape, sizeof shape))
            die("%s: a snapshot of %dx%dx%d (H, W, C), %s of %dx%dx%d: one set holds samples of one shape (nothing written)", o->in[i],
                shape[0], shape[1], shape[2], o->in[first], first_shape[0], first_shape[1], first_shape[2]);
    }
    output_claims_check();
    if (universe && o->whole) {   /* every input's values checked, then every one written */
        int write;
        for (write = 0; write < 2; write++) for (i = 0; i < o->n_in; i++) universe_whole(o, o->in[i], write);
        write_list(o->out, "_data.npy", "files_data.lst");
        write_list(o->out, "_label.npy", "files_label.lst");
        outputs_complete();
        printf("universe --whole: %d files -> %d whole universes in %s\n", o->n_in, i, o->out);
        return;
    }
    for (i = 0; i < o->n_in; i++) {
        hid_t f;
        if (universe) { universe_file(o, o->in[i]); written += 64; continue; }
        f = h5_open(o->in[i]);
        if (!strcmp(basename_of(o->in[i]), "stats.h5")) h5_stats(o, f, o->in[i]);
        else { h5_snapshot(o, f, o->in[i]); written++; }
        H5Fclose(f);
    }
    outputs_complete();
    if (universe) printf("universe: %d files -> %d sub-volumes in %s\n", o->n_in, written, o->out);
    else printf("h52npy: %d files -> %d snapshots in %s\n", o->n_in, written, o->out);
#endif
}

int main(int argc, char **argv) {
    options o;
    tool_init(argc, argv, "convert");
    memset(&o, 0, sizeof o);
    flag_table(&o);
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) usage();
    if (!strcmp(argv[1], "--version")) print_version();
    o.cmd = argv[1];
    if (!(o.in = (const char **)calloc((size_t)argc, sizeof *o.in))) die("out of memory");
    o.n_in = flag_parse(argc, argv, 2, flags, n_flags, usage, o.in, argc);
    dist_start(&argc, &argv);
    one_process_only();
    if (strcmp(o.cmd, "extract-cfg") && strcmp(o.cmd, "tfrecord2npy") && strcmp(o.cmd, "universe") && strcmp(o.cmd, "h52npy") && o.n_in)
        die("%s: unexpected argument for %s (see --help)", o.in[0], o.cmd);
    if (!strcmp(o.cmd, "weights-export")) weights_export(&o);
    else if (!strcmp(o.cmd, "weights-import")) weights_import(&o);
    else if (!strcmp(o.cmd, "extract-cfg")) extract_cfg(&o);
    else if (!strcmp(o.cmd, "tfrecord2npy")) tfrecord2npy(&o);
    else if (!strcmp(o.cmd, "universe")) hdf5_command(&o, 1);
    else if (!strcmp(o.cmd, "h52npy")) hdf5_command(&o, 0);
    else die("%s: unknown command (weights-export, weights-import, extract-cfg, tfrecord2npy, universe, h52npy)", o.cmd);
    free(o.in);
    cf_dist_finalize();
    return 0;
}
