/* Shared by the cf-* tools: the implementation of cosmoflow.h, error exits that end every MPI
   rank, flag parsing, file lists, timing and memory figures, and the background file loader. */
#ifndef CF_TOOL_H
#define CF_TOOL_H
#define CF_IMPLEMENTATION
#include "cosmoflow.h"
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <dirent.h>
#include <pthread.h>
#include <signal.h>

/* OpenMP pragmas that vanish without -fopenmp (no unknown-pragma warnings) */
#ifdef _OPENMP
#define TOOL_OMP(x) _Pragma(#x)
#else
#define TOOL_OMP(x)
#endif
#if defined(__GNUC__)
#define TOOL_UNUSED __attribute__((unused))
#else
#define TOOL_UNUSED
#endif

static const char *tool_name = "cf";

/* "cf-<tool>: <what>" on stderr, then the whole job ends (MPI_Abort when several ranks run) */
TOOL_UNUSED static void die(const char *fmt, ...) {
    va_list ap;
    char msg[2048];
    int n;
    fflush(stdout);
    if (cf_dist_size() > 1) n = snprintf(msg, sizeof msg, "cf-%s: rank %d: ", tool_name, cf_dist_rank());
    else n = snprintf(msg, sizeof msg, "cf-%s: ", tool_name);
    va_start(ap, fmt);
    vsnprintf(msg + n, sizeof msg - n - 1, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s\n", msg);   /* one write: lines of several ranks do not interleave */
    if (cf_dist_size() > 1) {   /* let mpirun forward the line before MPI_Abort tears the job down:
                                   MPICH's hydra dropped it about once in 40 runs otherwise */
        struct timespec pause = {0, 200000000};
        nanosleep(&pause, NULL);
    }
    cf_dist_abort(1);
    exit(1);
}
/* a library call failed: its reason already names the file and the problem */
#define TRY(call) do { if ((call) != CF_OK) die("%s", cf_failure_reason()); } while (0)

TOOL_UNUSED static const char *flag_value(int argc, char **argv, int *i) {
    if (*i + 1 >= argc) die("%s: needs a value (see --help)", argv[*i]);
    return argv[++*i];
}
TOOL_UNUSED static long flag_long(const char *flag, const char *v, long lo, long hi) {
    char *end;
    long x = strtol(v, &end, 10);
    if (end == v || *end || x < lo || x > hi) die("%s: '%s' is not a whole number in [%ld, %ld]", flag, v, lo, hi);
    return x;
}
TOOL_UNUSED static double flag_double(const char *flag, const char *v, double lo, double hi) {
    char *end;
    double x = strtod(v, &end);
    if (end == v || *end || !(x >= lo && x <= hi)) die("%s: '%s' is not a number in [%g, %g]", flag, v, lo, hi);
    return x;
}
TOOL_UNUSED static cf_shape flag_shape(const char *flag, const char *v) {
    cf_shape s;
    if (cf_parse_shape(v, &s)) die("%s: %s", flag, cf_failure_reason());
    return s;
}

TOOL_UNUSED static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}
/* peak resident memory of this process, MB (VmHWM) */
TOOL_UNUSED static double peak_rss_mb(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    double kb = 0;
    if (!f) return 0;
    while (fgets(line, sizeof line, f)) if (!strncmp(line, "VmHWM:", 6)) kb = atof(line + 6);
    fclose(f);
    return kb / 1024.0;
}

TOOL_UNUSED static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }
TOOL_UNUSED static int is_sample_file(const char *n) {
    size_t l = strlen(n);
    return (l > 9 && !strcmp(n + l - 9, ".tfrecord")) || (l > 12 && !strcmp(n + l - 12, ".tfrecord.gz")) || (l > 9 && !strcmp(n + l - 9, "_data.npy")) ||
           (l > 9 && !strncmp(n, "data-", 5) && !strcmp(n + l - 4, ".npy"));
}
/* Sorted paths of the sample files in dir: CosmoFlow TFRecords or X_data.npy, DeepCAM
   data-*.npy; dies if none. */
TOOL_UNUSED static char **list_samples(const char *dir, int *n_out) {
    DIR *d = opendir(dir);
    struct dirent *e;
    char **v = NULL;
    int n = 0, cap = 0;
    if (!d) die("%s: %s", dir, strerror(errno));
    while ((e = readdir(d))) {
        if (!is_sample_file(e->d_name)) continue;
        if (n == cap) { cap = cap ? 2 * cap : 64; v = (char **)realloc(v, cap * sizeof *v); if (!v) die("out of memory"); }
        v[n] = (char *)malloc(strlen(dir) + strlen(e->d_name) + 2);
        sprintf(v[n++], "%s/%s", dir, e->d_name);
    }
    closedir(d);
    if (!n) die("%s: no sample files (*.tfrecord, *.tfrecord.gz, *_data.npy or data-*.npy)", dir);
    qsort(v, n, sizeof *v, cmp_str);
    *n_out = n;
    return v;
}

TOOL_UNUSED static void free_samples(char **v, int n) { int i; for (i = 0; i < n; i++) free(v[i]); free(v); }

TOOL_UNUSED /* OpenBLAS (pthread build) and OpenMP each keep 2 threads on 2 cores; OpenMP's threads spin
   after every parallel region and steal the cores OpenBLAS needs next (measured here:
   17 -> 35 samples/s for cosmoflow-small, 0.21 -> 0.35 for cosmoflow.cfg).  libgomp reads OMP_WAIT_POLICY when it loads, so
   the tool sets it and runs itself again, once, before anything else (MPI included). */
TOOL_UNUSED static void tool_init(int argc, char **argv) {
    (void)argc;
    /* past a file-size limit (ulimit -f) writes fail with EFBIG and we say so, instead of
       the process dying silently from SIGXFSZ */
    signal(SIGXFSZ, SIG_IGN);
    if (!getenv("OMP_WAIT_POLICY")) {
        char self[4096];
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        setenv("OMP_WAIT_POLICY", "passive", 1);
        if (n > 0) { self[n] = 0; execv(self, argv); }   /* on failure go on with the default policy */
    }
}

TOOL_UNUSED static void print_version(void) { printf("cf-%s (cosmoflow.h) %s\n", tool_name, CF_VERSION); exit(0); }

/* The flags every model tool reads the same way: --help, --version, --model M.cfg and
   --input-shape S.  Returns 1 when argv[*i] was one of them (and consumed its value). */
TOOL_UNUSED static int common_flag(int argc, char **argv, int *i, void (*usage)(void),
                                   const char **model, cf_shape *shape, int *has_shape) {
    const char *a = argv[*i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) usage();
    if (!strcmp(a, "--version")) print_version();
    if (!strcmp(a, "--model")) { *model = flag_value(argc, argv, i); return 1; }
    if (!strcmp(a, "--input-shape")) { *shape = flag_shape(a, flag_value(argc, argv, i)); *has_shape = 1; return 1; }
    return 0;
}

TOOL_UNUSED static int has_flag(int argc, char **argv, const char *f) { int i; for (i = 1; i < argc; i++) if (!strcmp(argv[i], f)) return 1; return 0; }

/* ---------------------------------------------------------------- background loading
   One thread decodes the next batch (gunzip, protobuf, log1p, transpose) while the network
   computes on the current one.  The main thread alone calls MPI. */
typedef struct {
    char **files; const int *order; int n_order, B, pos;  /* what to load */
    int augment; uint64_t aug_seed; float *aug_tmp;         /* random cube symmetries (training) */
    int S, C, n_y, apply_log;                              /* expected sample shape */
    int climate, H, W, n_classes; const float *cmin, *cmax; /* DeepCAM: (H, W, C) + labels */
    float *x[2], *y[2]; int slot, n_in_slot[2];            /* double buffer */
    pthread_t th; int running;
    char err[1100]; int failed;
} loader;

TOOL_UNUSED static void *loader_run(void *arg) {
    loader *L = (loader *)arg;
    int s = L->slot, k;
    size_t vox = (size_t)L->S * L->S * L->S;
    L->n_in_slot[s] = 0;
    for (k = 0; L->climate && k < L->B && L->pos + k < L->n_order; k++) {
        cf_climate_sample cs;
        const char *path = L->files[L->order[L->pos + k]];
        size_t P = (size_t)L->H * L->W;
        if (cf_climate_read(path, &cs, L->n_classes)) { snprintf(L->err, sizeof L->err, "%s", cf_failure_reason()); L->failed = 1; return NULL; }
        if (cs.h != L->H || cs.w != L->W || cs.c != L->C) {
            snprintf(L->err, sizeof L->err, "%.900s: snapshot is %dx%dx%d (H, W, C); the model needs %dx%dx%d", path, cs.h, cs.w, cs.c, L->H, L->W, L->C);
            cf_climate_free(&cs); L->failed = 1; return NULL;
        }
        cf_climate_to_input(L->x[s] + (size_t)k * L->C * P, cs.x, L->H, L->W, L->C, L->cmin, L->cmax);
        memcpy(L->y[s] + (size_t)k * P, cs.y, sizeof(float) * P);
        cf_climate_free(&cs);
        L->n_in_slot[s]++;
    }
    for (k = 0; !L->climate && k < L->B && L->pos + k < L->n_order; k++) {
        cf_cosmo_sample smp;
        const char *path = L->files[L->order[L->pos + k]];
        if (cf_cosmo_read(path, &smp)) { snprintf(L->err, sizeof L->err, "%s", cf_failure_reason()); L->failed = 1; return NULL; }
        if (smp.s != L->S || smp.c < L->C || smp.ny < L->n_y) {
            snprintf(L->err, sizeof L->err, "%.900s: sample is %dx%dx%dx%d with %d labels; the model needs %dx%dx%dx%d with %d",
                     path, smp.c, smp.s, smp.s, smp.s, smp.ny, L->C, L->S, L->S, L->S, L->n_y);
            cf_cosmo_free(&smp); L->failed = 1; return NULL;
        }
        if (smp.c > L->C) {   /* a model with fewer channels reads the first ones (the 2018 network: z = 0) */
            size_t v;
            int c;
            for (v = 0; v < vox; v++) for (c = 0; c < L->C; c++) smp.x[v * L->C + c] = smp.x[v * smp.c + c];
            smp.c = L->C;
        }
        cf_cosmo_to_input(L->x[s] + (size_t)k * L->C * vox, smp.x, L->S, L->C, L->apply_log);
        if (L->augment)   /* the symmetry depends on (seed, epoch, file): any rank count, resumable */
            cf_cube_symmetry(L->x[s] + (size_t)k * L->C * vox, L->aug_tmp, L->C, L->S,
                          (int)(cf_hash64(L->aug_seed ^ (uint64_t)(L->order[L->pos + k] + 1) * 0x9e3779b97f4a7c15ULL) % 48));
        {
            int j;
            for (j = 0; j < L->n_y; j++)
                if (!isfinite(smp.y[j])) {
                    snprintf(L->err, sizeof L->err, "%.900s: label %d is %g (not finite)", path, j, smp.y[j]);
                    cf_cosmo_free(&smp); L->failed = 1; return NULL;
                }
        }
        memcpy(L->y[s] + (size_t)k * L->n_y, smp.y, sizeof(float) * L->n_y);
        cf_cosmo_free(&smp);
        L->n_in_slot[s]++;
    }
    return NULL;
}
TOOL_UNUSED static void loader_init(loader *L, char **files, int S, int C, int n_y, int B, int apply_log) {
    int s;
    memset(L, 0, sizeof *L);
    L->files = files; L->S = S; L->C = C; L->n_y = n_y; L->B = B; L->apply_log = apply_log;
    L->aug_tmp = (float *)malloc(sizeof(float) * C * (size_t)S * S * S);
    for (s = 0; s < 2; s++) {
        L->x[s] = (float *)malloc(sizeof(float) * B * C * (size_t)S * S * S);
        L->y[s] = (float *)malloc(sizeof(float) * B * n_y);
        if (!L->x[s] || !L->y[s]) die("out of memory for the input batches");
    }
}
/* DeepCAM snapshots (H, W, C) normalized with per-channel min/max; labels H*W class ids */
TOOL_UNUSED static void loader_init_climate(loader *L, char **files, int C, int H, int W, int n_classes, int B,
                                            const float *cmin, const float *cmax) {
    int s;
    size_t P = (size_t)H * W;
    memset(L, 0, sizeof *L);
    L->files = files; L->climate = 1; L->C = C; L->H = H; L->W = W; L->n_classes = n_classes; L->B = B;
    L->n_y = (int)P; L->cmin = cmin; L->cmax = cmax;
    for (s = 0; s < 2; s++) {
        L->x[s] = (float *)malloc(sizeof(float) * B * C * P);
        L->y[s] = (float *)malloc(sizeof(float) * B * P);
        if (!L->x[s] || !L->y[s]) die("out of memory for the input batches");
    }
}
TOOL_UNUSED static void loader_start(loader *L) {
    if (L->pos >= L->n_order) { L->n_in_slot[L->slot] = 0; return; }
    if (pthread_create(&L->th, NULL, loader_run, L)) die("cannot start the loader thread");
    L->running = 1;
}
/* begin an epoch over order[0..n) */
TOOL_UNUSED static void loader_begin(loader *L, const int *order, int n) {
    if (L->running) { pthread_join(L->th, NULL); L->running = 0; }   /* a prefetch nobody will use */
    L->order = order; L->n_order = n; L->pos = 0; L->slot = 0;
    loader_start(L);
}
/* the next batch (count in *nb, 0 at the end); starts loading the one after */
TOOL_UNUSED static void loader_next(loader *L, float **x, float **y, int *nb) {
    int s = L->slot;
    if (L->running) { pthread_join(L->th, NULL); L->running = 0; }
    if (L->failed) die("%s", L->err);
    *x = L->x[s]; *y = L->y[s]; *nb = L->pos < L->n_order ? L->n_in_slot[s] : 0;
    L->pos += L->B;
    L->slot = 1 - s;
    loader_start(L);
}
/* the files of the batch loader_next returned last, "a, b, c" (for error messages) */
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
    for (s = 0; s < 2; s++) { free(L->x[s]); free(L->y[s]); }
    free(L->aug_tmp);
}
#endif
