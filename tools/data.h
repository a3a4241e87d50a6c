/* The tools' input pipeline: one background thread decodes the next batch (gunzip, protobuf,
   log1p, transpose, augmentation) while the network computes on the current one.  Both
   applications go through the same loop; what differs is how one sample is read
   (load_cosmo, load_climate).  A sample split across ranks (--spatial) reads only its slab
   (load_cosmo_slab).  The main thread alone calls MPI. */
#ifndef CF_DATA_H
#define CF_DATA_H
#include <pthread.h>

typedef struct loader loader;
/* reads sample k of the batch from path into the slot's k-th place; 0 or -1 (L->err set) */
typedef int (*load_fn)(loader *L, int k, const char *path);
struct loader {
    char **files; const int *order; int n_order, B, pos;   /* what to load */
    load_fn load;
    size_t x_per, y_per;                                  /* floats per sample: input, labels */
    int augment; uint64_t aug_seed; float *aug_tmp;       /* CosmoFlow: random cube symmetries */
    int S, C, n_y, apply_log;                             /* CosmoFlow: sample shape, input transform */
    cf_net *net; int d0, planes; double *sums[2]; float *box;   /* --spatial: this rank's planes, the channels' sums */
    int H, W, n_classes; float cmin[64], cmax[64];        /* DeepCAM: snapshot shape, classes, statistics */
    float *x[2], *y[2]; int slot, n_in_slot[2];           /* double buffer */
    pthread_t th; int running;
    char err[8192]; int failed;
};

static int load_fail(loader *L, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(L->err, sizeof L->err, fmt, ap);
    va_end(ap);
    L->failed = 1;
    return -1;
}

/* the labels finite and not huge, the counts not negative; frees smp when not */
static int cosmo_checks(loader *L, const char *path, cf_cosmo_sample *smp) {
    size_t v;
    int j;
    if (smp->s != L->S || smp->c < L->C || smp->ny < L->n_y) {
        load_fail(L, "%s: sample is %dx%dx%dx%d with %d labels; the model needs %dx%dx%dx%d with %d",
                  path, smp->c, smp->s, smp->s, smp->s, smp->ny, L->C, L->S, L->S, L->S, L->n_y);
        cf_cosmo_free(smp);
        return -1;
    }
    for (j = 0; j < L->n_y; j++)
        if (!(fabsf(smp->y[j]) <= 1e18f)) {   /* beyond 1e18 the squared error overflows float */
            double y = smp->y[j];
            cf_cosmo_free(smp);
            return load_fail(L, "%s: label %d is %g (%s)", path, j, y, isfinite(y) ? "too large: its squared error overflows float32" : "not finite");
        }
    for (v = 0; v < smp->count; v++)
        if (smp->x[v] < 0) {   /* a count: log(1 + x) and x / mean(x) need it >= 0 */
            int bad = smp->x[v];
            cf_cosmo_free(smp);
            return load_fail(L, "%s: value %zu (voxel %zu, channel %zu%s) is %d: particle counts cannot be negative", path, v, v / 4, v % 4,
                             L->planes < L->S ? " of this rank's part" : "", bad);
        }
    return 0;
}
/* the augmentation's symmetry of the sample in place k of the batch: from (seed, epoch, file),
   so that any rank count and a resumed run draw the same ones */
static int cosmo_symmetry(const loader *L, int k) {
    return L->augment ? (int)(cf_hash64(L->aug_seed ^ (uint64_t)(L->order[L->pos + k] + 1) * 0x9e3779b97f4a7c15ULL) % 48) : 0;
}
/* A CosmoFlow sample: int16 counts (S,S,S,C) and labels, checked, transformed (log(1 + x),
   x / mean or the log ratio) and, when training with augmentation, turned by one of the
   cube's 48 symmetries. */
static int load_cosmo(loader *L, int k, const char *path) {
    cf_cosmo_sample smp;
    float *x = L->x[L->slot] + (size_t)k * L->x_per;
    size_t v, vox = (size_t)L->S * L->S * L->S;
    int c;
    if (cf_cosmo_read(path, &smp)) return load_fail(L, "%s", cf_failure_reason());
    if (cosmo_checks(L, path, &smp)) return -1;
    if (smp.c > L->C) {   /* a model with fewer channels reads the first ones (the 2018 network: z = 0) */
        for (v = 0; v < vox; v++) for (c = 0; c < L->C; c++) smp.x[v * L->C + c] = smp.x[v * smp.c + c];
        smp.c = L->C;
    }
    cf_cosmo_to_input(x, smp.x, L->S, L->C, L->apply_log);
    if (L->augment) cf_cube_symmetry(x, L->aug_tmp, L->C, L->S, cosmo_symmetry(L, k));
    memcpy(L->y[L->slot] + (size_t)k * L->y_per, smp.y, sizeof(float) * L->n_y);
    cf_cosmo_free(&smp);
    return 0;
}
/* A sample's slab (--spatial): planes [d0, d0 + planes) of the transformed and augmented
   volume, made from the box of the file that holds them (cf_cube_symmetry_source; of an .npy
   only that box is read).  log(1 + x) is whole here; x / mean and the log ratio need the
   sample's channel sums, kept in sums and finished by loader_next once the group has added
   its slabs' (cosmo_finish). */
static int load_cosmo_slab(loader *L, int k, const char *path) {
    cf_cosmo_sample smp;
    float *x = L->x[L->slot] + (size_t)k * L->x_per, *dst;
    double *sums = L->sums[L->slot] + (size_t)k * L->C;
    size_t v, nvox = (size_t)L->planes * L->S * L->S;
    int c, code = cosmo_symmetry(L, k), axis = 0, first = 0;
    if (cf_cube_symmetry_source(code, L->S, L->d0, L->planes, &axis, &first) || cf_cosmo_read_box(path, axis, first, L->planes, &smp)) return load_fail(L, "%s", cf_failure_reason());
    if (cosmo_checks(L, path, &smp)) return -1;
    dst = code ? L->box : x;   /* the box, turned into the slab after */
    for (c = 0; c < L->C; c++) sums[c] = 0;
    for (v = 0; v < nvox; v++)
        for (c = 0; c < L->C; c++) {
            int16_t n = smp.x[v * smp.c + c];
            dst[(size_t)c * nvox + v] = L->apply_log ? log1pf((float)n) : (float)n;
            sums[c] += n;
        }
    if (code) cf_cube_symmetry_slab(x, L->box, L->C, L->S, code, L->d0, L->planes);
    memcpy(L->y[L->slot] + (size_t)k * L->y_per, smp.y, sizeof(float) * L->n_y);
    cf_cosmo_free(&smp);
    return 0;
}
/* the slabs of nb samples: the transforms that need the whole sample's channel sums, as
   cf_cosmo_to_input does them (exact sums of integers: the same numbers as one rank's) */
static void cosmo_finish(loader *L, int slot, float *x, int nb) {
    double *sums = L->sums[slot];
    size_t vox = (size_t)L->S * L->S * L->S, nvox = (size_t)L->planes * L->S * L->S, v;
    int k, c;
    TRY(cf_net_spatial_sum(L->net, sums, nb * L->C));   /* the group's slabs' counts: each sample's */
    for (k = 0; k < nb; k++) {
        float *xk = x + (size_t)k * L->x_per;
        const double *s = sums + (size_t)k * L->C;
        if (L->apply_log == 0) {   /* x / mean(x) over the whole sample */
            double sum = 0;
            float scale;
            for (c = 0; c < L->C; c++) sum += s[c];
            scale = sum > 0 ? (float)((double)(vox * L->C) / sum) : 1.0f;
            for (v = 0; v < nvox * L->C; v++) xk[v] *= scale;
        } else
            for (c = 0; c < L->C; c++) {   /* log(1 + x) - log(1 + mean_c) */
                float sub = (float)log1p(s[c] / (double)vox);
                for (v = 0; v < nvox; v++) xk[(size_t)c * nvox + v] -= sub;
            }
    }
}
/* A DeepCAM snapshot (H, W, C) normalized with the per-channel minimum and maximum, and its
   H*W class ids */
static int load_climate(loader *L, int k, const char *path) {
    cf_climate_sample cs;
    size_t P = (size_t)L->H * L->W;
    if (cf_climate_read(path, &cs, L->n_classes)) return load_fail(L, "%s", cf_failure_reason());
    if (cs.h != L->H || cs.w != L->W || cs.c != L->C) {
        load_fail(L, "%s: snapshot is %dx%dx%d (H, W, C); the model needs %dx%dx%d", path, cs.h, cs.w, cs.c, L->H, L->W, L->C);
        cf_climate_free(&cs);
        return -1;
    }
    cf_climate_to_input(L->x[L->slot] + (size_t)k * L->x_per, cs.x, L->H, L->W, L->C, L->cmin, L->cmax);
    memcpy(L->y[L->slot] + (size_t)k * L->y_per, cs.y, sizeof(float) * P);
    cf_climate_free(&cs);
    return 0;
}

static void *loader_run(void *arg) {
    loader *L = (loader *)arg;
    int k;
    L->n_in_slot[L->slot] = 0;
    for (k = 0; k < L->B && L->pos + k < L->n_order; k++) {
        if (L->load(L, k, L->files[L->order[L->pos + k]])) return NULL;
        L->n_in_slot[L->slot]++;
    }
    return NULL;
}
/* the double buffer for B samples of x_per input and y_per label floats */
static void loader_alloc(loader *L, int B, size_t x_per, size_t y_per) {
    int s;
    L->B = B; L->x_per = x_per; L->y_per = y_per;
    for (s = 0; s < 2; s++) {
        L->x[s] = (float *)malloc(sizeof(float) * B * x_per);
        L->y[s] = (float *)malloc(sizeof(float) * B * y_per);
        if (!L->x[s] || !L->y[s]) die("out of memory for the input batches");
    }
}
/* CosmoFlow volumes (S, S, S, C) with n_y labels; split across ranks (K > 1), this rank's
   planes [d0, d0 + S / K) of them */
static void loader_init_cosmo(loader *L, cf_net *net, char **files, int S, int C, int n_y, int B, int apply_log) {
    int K, s;
    memset(L, 0, sizeof *L);
    L->files = files; L->load = load_cosmo; L->S = S; L->C = C; L->n_y = n_y; L->apply_log = apply_log;
    L->net = net; L->planes = S;
    if ((K = cf_net_spatial(net, NULL, &L->d0)) > 1) {
        L->planes = S / K; L->load = load_cosmo_slab;
        for (s = 0; s < 2; s++) if (!(L->sums[s] = (double *)calloc((size_t)B * C, sizeof(double)))) die("out of memory for the input batches");
        if (!(L->box = (float *)malloc(sizeof(float) * C * (size_t)L->planes * S * S))) die("out of memory for the input batches");
    } else if (!(L->aug_tmp = (float *)malloc(sizeof(float) * C * (size_t)S * S * S))) die("out of memory for the input batches");
    loader_alloc(L, B, (size_t)C * L->planes * S * S, (size_t)n_y);
}
/* DeepCAM snapshots (H, W, C) normalized with the per-channel min/max found in stats_dir
   (or its parent); labels H*W class ids */
static void loader_init_climate(loader *L, char **files, int C, int H, int W, int n_classes, int B, const char *stats_dir) {
    memset(L, 0, sizeof *L);
    if (C > 64) die("%d input channels: at most 64", C);
    TRY(cf_climate_stats(stats_dir, L->cmin, L->cmax, C));
    L->files = files; L->load = load_climate; L->C = C; L->H = H; L->W = W; L->n_classes = n_classes; L->n_y = H * W;
    loader_alloc(L, B, (size_t)C * H * W, (size_t)H * W);
}
/* the loader of the net's application: CosmoFlow volumes with the input transform apply_log,
   or DeepCAM snapshots with the statistics of stats_dir.  The network's memory for a batch
   is taken now too, and what is left must still hold OpenBLAS's buffers (tools/tool.h). */
TOOL_UNUSED static void loader_init_for(loader *L, cf_net *net, char **files, int B, int apply_log, const char *stats_dir) {
    if (net->loss == CF_LOSS_SOFTMAX_CE) loader_init_climate(L, files, net->input.c, net->input.h, net->input.w, net->n_classes, B, stats_dir);
    else loader_init_cosmo(L, net, files, net->input.d, net->input.c, net->n_outputs, B, apply_log);
    TRY(cf_net_set_batch(net, B));
    blas_room();
}
/* The sample files of dir, the first limit of them (0: all; *n_all: how many there are),
   the same count on every rank, or the collectives would not match */
TOOL_UNUSED static char **data_files(const char *dir, int limit, int *n, int *n_all) {
    char **v = list_samples(dir, n_all);
    double c[2];
    *n = limit && limit < *n_all ? limit : *n_all;
    c[0] = *n; c[1] = -*n;
    cf_dist_allreduce_max_d(c, 2);
    if (c[0] != *n || -c[1] != *n)
        die("%s: the ranks see different numbers of sample files (%d here, %g to %g): give every rank the same directories (with --staged: the same number of files)",
            dir, *n, -c[1], c[0]);
    return v;
}
/* the CosmoFlow input transforms, by apply_log; --transform's parser */
static const char *transform_names[3] = {"mean", "log", "log-ratio"};
TOOL_UNUSED static void show_transform(const void *d, char *b, size_t n) { snprintf(b, n, "%s", transform_names[*(const int *)d]); }
TOOL_UNUSED static void parse_transform(const char *v, void *dst) {
    int *t = (int *)dst, k;
    for (k = 0; k < 3 && strcmp(v, transform_names[k]); k++) {}
    if (k == 3) die("--transform: '%s' is not log, mean or log-ratio", v);
    *t = k;
}
static void loader_start(loader *L) {
    if (L->pos >= L->n_order) { L->n_in_slot[L->slot] = 0; return; }
    if (pthread_create(&L->th, NULL, loader_run, L)) die("cannot start the loader thread");
    L->running = 1;
}
/* begin an epoch over order[0..n), from order[first] (a run resumed within an epoch) */
TOOL_UNUSED static void loader_begin_at(loader *L, const int *order, int n, int first) {
    if (L->running) { pthread_join(L->th, NULL); L->running = 0; }   /* a prefetch nobody will use */
    L->order = order; L->n_order = n; L->pos = first; L->slot = 0;
    loader_start(L);
}
TOOL_UNUSED static void loader_begin(loader *L, const int *order, int n) { loader_begin_at(L, order, n, 0); }
/* the next batch (count in *nb, 0 at the end); starts loading the one after */
TOOL_UNUSED static void loader_next(loader *L, float **x, float **y, int *nb) {
    int s = L->slot;
    if (L->running) { pthread_join(L->th, NULL); L->running = 0; }
    if (L->failed) die("%s", L->err);
    *x = L->x[s]; *y = L->y[s]; *nb = L->pos < L->n_order ? L->n_in_slot[s] : 0;
    if (L->sums[s] && L->apply_log != 1 && *nb) cosmo_finish(L, s, *x, *nb);   /* (a collective of the group) */
    L->pos += L->B;
    L->slot = 1 - s;
    loader_start(L);
}
/* the file of sample k of the batch loader_next returned last */
TOOL_UNUSED static const char *loader_file(const loader *L, int k) { return L->files[L->order[L->pos - L->B + k]]; }
/* the files of that batch, "a, b, c" (for error messages) */
TOOL_UNUSED static const char *loader_batch_files(const loader *L, int nb, char *buf, size_t size) {
    int k, first = L->pos - L->B;
    size_t n = 0;
    buf[0] = 0;
    for (k = 0; k < nb && first + k < L->n_order && n + 2 < size; k++)
        n += (size_t)snprintf(buf + n, size - n, "%s%s", k ? ", " : "", L->files[L->order[first + k]]);
    return buf;
}
TOOL_UNUSED static void loader_free(loader *L) {
    int s;
    if (L->running) pthread_join(L->th, NULL);
    for (s = 0; s < 2; s++) { free(L->x[s]); free(L->y[s]); free(L->sums[s]); }
    free(L->aug_tmp); free(L->box);
}
#endif
