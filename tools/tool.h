/* What the cf-* programs share: error exits that end every MPI rank, a table-driven flag
   parser that also writes --help, the checks every output path passes before any work, file
   lists, timing and memory figures.  Each tool defines CF_IMPLEMENTATION and includes
   cosmoflow.h before this file. */
#ifndef CF_TOOL_H
#define CF_TOOL_H
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <time.h>
#include <math.h>
#include <dirent.h>
#include <signal.h>
#include <unistd.h>
#include <sys/stat.h>
#include <fcntl.h>

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
                                   MPICH's hydra sometimes dropped it otherwise */
        struct timespec pause = {0, 200000000};
        nanosleep(&pause, NULL);
    }
    cf_dist_abort(1);
    exit(1);
}
/* a library call failed: its reason already names the file and the problem */
#define TRY(call) do { if ((call) != CF_OK) die("%s", cf_failure_reason()); } while (0)

/* ---------------------------------------------------------------- flags
   Each tool lists its flags in one table: the flag, its argument's name, what it sets, the
   bounds of a number, and a line of help; --help is written from the table, with each
   flag's default read from the variable it sets.  An entry with no name is a heading. */
typedef enum { FLAG_STR, FLAG_INT, FLAG_LONG, FLAG_U64, FLAG_DOUBLE, FLAG_SET, FLAG_SHAPE, FLAG_CALL, FLAG_TRAIN } flag_kind;
/* FLAG_TRAIN: a training setting (dst: its key), parsed, range-checked and shown by the
   library (cf_train_config_set / _get) in the configuration tool_train points to */
static cf_train_config *tool_train;
typedef struct {
    const char *name, *arg;     /* "--batch", "B" (NULL: a switch) */
    flag_kind kind;
    void *dst;                  /* const char **, int *, long *, uint64_t *, double *, int * (FLAG_SET), cf_shape *, or the key */
    double lo, hi;              /* a number's bounds; FLAG_SET: lo is the value stored */
    const char *help;           /* one line; "(default X)" is added unless it names its default */
    void (*call)(const char *value, void *dst);   /* FLAG_CALL: parses the value itself */
    int *given;                 /* optional: set to 1 when the flag appears */
} tool_flag;

/* One FLAG_TRAIN flag per training setting of the library (--lr for lr, --weight-decay for
   weight_decay, ...), appended to f[*n..max), with the library's help line */
TOOL_UNUSED static void flag_add_train(tool_flag *f, int *n, int max) {
    static char names[64][32];
    const char *key, *arg, *help;
    int i, k;
    for (i = 0; (key = cf_train_config_key(i, &arg, &help)) && *n < max && i < 64; i++, (*n)++) {
        snprintf(names[i], sizeof names[i], "--%s", key);
        for (k = 2; names[i][k]; k++) if (names[i][k] == '_') names[i][k] = '-';
        memset(&f[*n], 0, sizeof f[*n]);
        f[*n].name = names[i]; f[*n].arg = arg; f[*n].kind = FLAG_TRAIN; f[*n].dst = (void *)key; f[*n].help = help;
    }
}
TOOL_UNUSED static void print_version(void) { printf("cf-%s (cosmoflow.h) %s\n", tool_name, CF_VERSION); exit(0); }

static void flag_default(const tool_flag *f, char *buf, size_t n) {
    buf[0] = 0;
    if (!f->dst || strstr(f->help, "default")) return;
    switch (f->kind) {
    case FLAG_STR: if (*(const char **)f->dst) snprintf(buf, n, " (default %s)", *(const char **)f->dst); break;
    case FLAG_INT: snprintf(buf, n, " (default %d)", *(int *)f->dst); break;
    case FLAG_LONG: snprintf(buf, n, " (default %ld)", *(long *)f->dst); break;
    case FLAG_U64: snprintf(buf, n, " (default %llu)", (unsigned long long)*(uint64_t *)f->dst); break;
    case FLAG_DOUBLE: snprintf(buf, n, " (default %g)", *(double *)f->dst); break;
    case FLAG_TRAIN: {
        char v[96];
        if (tool_train && !cf_train_config_get(tool_train, (const char *)f->dst, v, sizeof v)) snprintf(buf, n, " (default %.96s)", v);
        break;
    }
    default: break;
    }
}
/* usage: the synopsis line(s), every flag of the table, then the closing text */
TOOL_UNUSED static void flag_help(const char *synopsis, const tool_flag *f, int n, const char *after) {
    int i;
    printf("%s\n", synopsis);
    for (i = 0; i < n; i++) {
        char left[64], def[128];
        if (!f[i].name) { printf("%s\n", f[i].help); continue; }
        snprintf(left, sizeof left, "%s%s%s", f[i].name, f[i].arg ? " " : "", f[i].arg ? f[i].arg : "");
        flag_default(&f[i], def, sizeof def);
        printf("  %-22s %s%s\n", left, f[i].help, def);
    }
    printf("  %-22s %s\n", "--help, --version", "this text; the version");
    if (after) printf("%s", after);
    exit(0);
}
TOOL_UNUSED static double flag_number(const char *flag, const char *v, double lo, double hi, int whole) {
    char *end;
    double x = strtod(v, &end);
    if (end == v || *end || !isfinite(x) || !(x >= lo && x <= hi) || (whole && x != floor(x)))
        die("%s: '%s' is not a%s number in [%g, %g]", flag, v, whole ? " whole" : "", lo, hi);
    return x;
}
/* what the command line set: the destinations of the flags given (flags that set the same
   thing, --no-log and --transform say, share one) */
static const void *flag_given_dst[256];
static int flag_n_given;
static void flag_set(const tool_flag *f, const char *v) {
    if (flag_n_given < 256) flag_given_dst[flag_n_given++] = f->dst;
    switch (f->kind) {
    case FLAG_STR: *(const char **)f->dst = v; break;
    case FLAG_INT: *(int *)f->dst = (int)flag_number(f->name, v, f->lo, f->hi, 1); break;
    case FLAG_LONG: *(long *)f->dst = (long)flag_number(f->name, v, f->lo, f->hi, 1); break;
    case FLAG_U64: *(uint64_t *)f->dst = (uint64_t)flag_number(f->name, v, f->lo, f->hi, 1); break;
    case FLAG_DOUBLE: *(double *)f->dst = flag_number(f->name, v, f->lo, f->hi, 0); break;
    case FLAG_SET: *(int *)f->dst = (int)f->lo; break;
    case FLAG_SHAPE: if (cf_parse_shape(v, (cf_shape *)f->dst)) die("%s: %s", f->name, cf_failure_reason()); break;
    case FLAG_CALL: f->call(v, f->dst); break;
    case FLAG_TRAIN:   /* the library's reason starts with the key, which the flag names */
        if (tool_train && !cf_train_config_set(tool_train, (const char *)f->dst, v)) break;
        die("%s: %s", f->name, cf_failure_reason() + (strncmp(cf_failure_reason(), (const char *)f->dst, strlen((const char *)f->dst)) ? 0 : strlen((const char *)f->dst) + 2));
    }
    if (f->given) *f->given = 1;
}
/* Parses argv[first..] by the table; words that are not flags go to pos (at most max_pos of
   them, else an error).  --help calls help(), --version prints the version.  Returns the
   number of positional words. */
TOOL_UNUSED static int flag_parse(int argc, char **argv, int first, const tool_flag *f, int n, void (*help)(void),
                                  const char **pos, int max_pos) {
    int i, k, np = 0;
    for (i = first; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) help();
        if (!strcmp(a, "--version")) print_version();
        for (k = 0; k < n && (!f[k].name || strcmp(a, f[k].name)); k++) {}
        if (k < n) {
            if (f[k].kind != FLAG_SET && i + 1 >= argc) die("%s: needs a value (see --help)", a);
            flag_set(&f[k], f[k].kind == FLAG_SET ? NULL : argv[++i]);
        } else if (a[0] == '-' && a[1]) die("%s: unknown flag (see --help)", a);
        else if (np < max_pos) pos[np++] = a;
        else die("%s: unexpected argument (see --help)", a);
    }
    return np;
}
/* whether the command line set what flag name sets */
TOOL_UNUSED static int flag_was_given(const tool_flag *f, int n, const char *name) {
    int k, g;
    for (k = 0; k < n && (!f[k].name || strcmp(f[k].name, name)); k++) {}
    for (g = 0; k < n && g < flag_n_given; g++) if (flag_given_dst[g] == f[k].dst) return 1;
    return 0;
}
/* a recipe's value for flag name, unless the command line set the same thing itself */
TOOL_UNUSED static void flag_preset(const tool_flag *f, int n, const char *name, const char *value) {
    int k, keep = flag_n_given;
    for (k = 0; k < n && (!f[k].name || strcmp(f[k].name, name)); k++) {}
    if (k == n) die("internal: no flag %s", name);
    if (flag_was_given(f, n, name)) return;
    flag_set(&f[k], value);
    flag_n_given = keep;   /* a recipe's value is not one the command line gave */
}
/* --help or -h anywhere, before anything else is read */
TOOL_UNUSED static int has_flag(int argc, char **argv, const char *f) { int i; for (i = 1; i < argc; i++) if (!strcmp(argv[i], f)) return 1; return 0; }

/* ---------------------------------------------------------------- start
   A tool built without MPI and started as one of several ranks (mpirun, srun) would train N
   independent copies that all write the same files: refuse.  An MPI build whose library
   differs from the launcher's sees size 1 while the launcher says more: the same. */
static int launcher_ranks(void) {
    static const char *vars[] = {"PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE", "SLURM_NTASKS", "PMIX_SIZE"};
    size_t i;
    for (i = 0; i < sizeof vars / sizeof *vars; i++) {
        const char *v = getenv(vars[i]);
        if (v && atoi(v) > 1) {
            if (!strcmp(vars[i], "SLURM_NTASKS") && !getenv("SLURM_PROCID")) continue;   /* an salloc shell, not a task */
            return atoi(v);
        }
    }
    return 1;
}
#ifdef CF_USE_MPI
#include <mpi.h>
#define TOOL_PEER_GONE "another rank has probably ended (its own message says why)"
/* An MPI error (a rank that ended, messages that do not match) as a line from the tool rather
   than the MPI library's stack dump; then the whole job ends. */
static void tool_mpi_error(MPI_Comm *comm, int *code, ...) {
    char s[MPI_MAX_ERROR_STRING];
    int n = 0;
    (void)comm;
    MPI_Error_string(*code, s, &n);
    die("MPI communication failed (%.200s): " TOOL_PEER_GONE, s);
}
#endif
TOOL_UNUSED static void check_launch(void) {
    int want = launcher_ranks();
#ifdef CF_USE_MPI
    if (cf_dist_size() > 1) {
        MPI_Errhandler h;
        MPI_Comm_create_errhandler(tool_mpi_error, &h);
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, h);
    }
#endif
    if (want <= 1 || cf_dist_size() == want) return;
#ifdef CF_USE_MPI
    die("started as one of %d ranks, but MPI reports %d: this binary's MPI library is not the launcher's "
        "(rebuild with the launcher's wrapper: make MPICC=/path/to/mpicc)", want, cf_dist_size());
#else
    die("started as one of %d ranks, but built without MPI: every rank would train alone and write the same "
        "files (rebuild with MPI: make MPI=1, or make MPICC=/path/to/mpicc)", want);
#endif
}

/* stdout checked once more at exit: a full disk or a closed pipe that took the last lines
   (the contract's last line among them) is an error, never exit 0 */
static void tool_close_stdout(void) {
    if (fflush(stdout) == 0 && !ferror(stdout)) return;
    fprintf(stderr, "cf-%s: stdout: write failed (%s)\n", tool_name, strerror(errno ? errno : EIO));
    _exit(1);
}
/* An MPI transport that loses its peer (a rank killed, a node gone) aborts inside the library:
   say so in one line from the tool instead of the transport's backtrace (UCX's own backtrace
   is turned off unless the user asked for one with UCX_HANDLE_ERRORS). */
#ifdef CF_USE_MPI
static void tool_on_abort(int sig) {
    static char line[256];
    int n = snprintf(line, sizeof line, "cf-%s: the MPI library ended this process: " TOOL_PEER_GONE "\n", tool_name);
    if (n > 0 && write(2, line, (size_t)n) < 0) {}
    _exit(128 + sig);
}
#endif
/* OpenMP threads spin after every parallel region and steal the cores the BLAS needs next;
   libgomp reads OMP_WAIT_POLICY when it loads, so the tool sets it and runs itself again,
   once, before anything else (MPI included). */
TOOL_UNUSED static void tool_init(int argc, char **argv, const char *name) {
    (void)argc;
    tool_name = name;
    atexit(tool_close_stdout);
#ifdef CF_USE_MPI
    setenv("UCX_HANDLE_ERRORS", "none", 0);
    signal(SIGABRT, tool_on_abort);
#endif
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

/* ---------------------------------------------------------------- files
   Every output path is checked before any work: its directory exists and can be written,
   it is not a directory, and it is not any of the run's inputs (the same device and inode,
   whatever the names).  Inputs are given as a NULL-terminated list of paths. */
typedef struct { const char *path; dev_t dev; ino_t ino; } tool_file;
static tool_file tool_inputs[64];
static int tool_n_inputs;
/* remember an input (a file or a directory of inputs) for the output checks */
TOOL_UNUSED static void input_path(const char *path) {
    struct stat st;
    if (!path || tool_n_inputs == 64 || stat(path, &st)) return;
    tool_inputs[tool_n_inputs].path = path; tool_inputs[tool_n_inputs].dev = st.st_dev; tool_inputs[tool_n_inputs].ino = st.st_ino;
    tool_n_inputs++;
}
/* the directory part of path ("." for a bare name) */
static void dir_of(const char *path, char *dir, size_t n) {
    const char *s = strrchr(path, '/');
    if (!s) snprintf(dir, n, ".");
    else if (s == path) snprintf(dir, n, "/");
    else snprintf(dir, n, "%.*s", (int)(s - path), path);
}
static int is_sample_file(const char *n);
/* a file the tools read from a data directory: a sample, or the statistics */
static int data_file_name(const char *path) {
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    return is_sample_file(b) || !strncmp(b, "stats_m", 7) || !strncmp(b, "label-", 6) || strstr(b, "_label.npy") != NULL;
}
/* whether two paths name the same existing file */
TOOL_UNUSED static int same_file(const char *a, const char *b) {
    struct stat sa, sb;
    return a && b && !stat(a, &sa) && !stat(b, &sb) && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}
/* the input that is the same file as path, or NULL */
static const char *same_as_input(const char *path) {
    struct stat st;
    int i;
    if (stat(path, &st)) return NULL;
    for (i = 0; i < tool_n_inputs; i++)
        if (tool_inputs[i].dev == st.st_dev && tool_inputs[i].ino == st.st_ino) return tool_inputs[i].path;
    return NULL;
}
/* Temporary files of earlier writes to path that were cut short (a kill -9, a crash),
   path.tmp.<host>.<pid> with a pid that no longer runs on this host: the tool's own leftovers,
   removed before it writes path (the library itself deletes nothing it was not asked to). */
static void remove_stale_tmp(const char *path) {
    char dir[4096], prefix[4200], full[8400];
    const char *base;
    size_t pl;
    DIR *d;
    struct dirent *e;
    if (cf_atomic_tmp_prefix(path, prefix, sizeof prefix)) return;
    dir_of(path, dir, sizeof dir);
    base = strrchr(prefix, '/') ? strrchr(prefix, '/') + 1 : prefix;
    pl = strlen(base);
    if (!(d = opendir(dir))) return;
    while ((e = readdir(d))) {
        char *end;
        long pid;
        if (strncmp(e->d_name, base, pl)) continue;
        pid = strtol(e->d_name + pl, &end, 10);
        if (*end || pid <= 0 || pid == (long)getpid() || kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
        snprintf(full, sizeof full, "%s/%s", dir, e->d_name);
        remove(full);
    }
    closedir(d);
}
/* An output file: written (atomically) only after the run's work, so refused now if it could
   not be, or if it would replace an input: one of the inputs itself, or a file already in an
   input directory (a sample, a statistics file).  what: the flag, for the message. */
TOOL_UNUSED static void output_file(const char *what, const char *path) {
    char dir[4096];
    struct stat st;
    const char *in;
    if (!path) return;
    dir_of(path, dir, sizeof dir);
    if (stat(dir, &st) || !S_ISDIR(st.st_mode)) die("%s %s: the directory %s does not exist", what, path, dir);
    if (access(dir, W_OK | X_OK)) die("%s %s: the directory %s is not writable", what, path, dir);
    if (!stat(path, &st) && S_ISDIR(st.st_mode)) die("%s %s: is a directory (give a file name)", what, path);
    if ((in = same_as_input(path))) die("%s %s: is the same file as the input %s; it would be overwritten", what, path, in);
    if (!stat(path, &st) && (in = same_as_input(dir)) && data_file_name(path))
        die("%s %s: would overwrite a sample or statistics file of the input directory %s", what, path, in);
    remove_stale_tmp(path);
}
/* An output directory: created when missing, with its missing parents (as mkdir -p);
   refused when it or a parent is a file, or when it holds an input the tool would write over
   (checked by the caller per file). */
TOOL_UNUSED static void output_dir(const char *what, const char *dir) {
    struct stat st;
    char parent[4096];
    if (!dir) return;
    if (!stat(dir, &st)) {
        if (!S_ISDIR(st.st_mode)) die("%s %s: exists and is not a directory", what, dir);
        if (access(dir, W_OK | X_OK)) die("%s %s: the directory is not writable", what, dir);
        return;
    }
    dir_of(dir, parent, sizeof parent);
    if (strcmp(parent, dir)) output_dir(what, parent);
    if (mkdir(dir, 0777) && errno != EEXIST) die("%s %s: cannot create it (%s)", what, dir, strerror(errno));
}
/* an input a library outside ours will open (libhdf5): a regular file, checked without
   waiting on a FIFO */
TOOL_UNUSED static void input_regular(const char *path) {
    struct stat st;
    int fd = open(path, O_RDONLY | O_NONBLOCK);
    if (fd < 0) die("%s: %s", path, strerror(errno));
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) { close(fd); die("%s: not a regular file", path); }
    close(fd);
}
/* an output file inside an output directory: not an input */
TOOL_UNUSED static void output_in_dir(const char *path) {
    const char *in = same_as_input(path);
    if (in) die("%s: is the same file as the input %s; it would be overwritten", path, in);
    remove_stale_tmp(path);
}

TOOL_UNUSED static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}
/* Progress on stderr: on = 1 a bar redrawn in place (a terminal); 2 a plain line at most once
   a minute (batch job logs, which a bar would fill with carriage returns); 0 nothing */
TOOL_UNUSED static void progress(int on, int epoch, int done, int total, double t0) {
    static double last;
    double el = now_s() - t0, rate = done / (el > 0 ? el : 1e-9);
    int w = 30, k, fill = total ? done * w / total : 0;
    if (!on) return;
    if (on == 2) {
        if (now_s() - last < 60 || done == total) return;
        last = now_s();
        fprintf(stderr, "cf-%s: epoch %d: %d/%d samples, %.1f samples/s, %.0f s left in the epoch\n", tool_name, epoch, done, total, rate,
                rate > 0 ? (total - done) / rate : 0.0);
        return;
    }
    fprintf(stderr, "\repoch %d [", epoch);
    for (k = 0; k < w; k++) fputc(k < fill ? '=' : ' ', stderr);
    fprintf(stderr, "] %d/%d  %.1f samples/s  %.0f s left ", done, total, rate, rate > 0 ? (total - done) / rate : 0.0);
    if (done == total) fputs("\r\033[K", stderr);
    fflush(stderr);
}
/* "CxDxHxW", or "CxHxW" for a 2-D shape (in a static buffer) */
TOOL_UNUSED static const char *shape_text(cf_shape s) {
    static char buf[64];
    if (s.d == 1) snprintf(buf, sizeof buf, "%dx%dx%d", s.c, s.h, s.w);
    else snprintf(buf, sizeof buf, "%dx%dx%dx%d", s.c, s.d, s.h, s.w);
    return buf;
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
        if (!v[n]) die("out of memory");
        sprintf(v[n++], "%s/%s", dir, e->d_name);
    }
    closedir(d);
    if (!n) die("%s: no sample files (*.tfrecord, *.tfrecord.gz, *_data.npy or data-*.npy)", dir);
    qsort(v, n, sizeof *v, cmp_str);
    *n_out = n;
    return v;
}
TOOL_UNUSED static void free_samples(char **v, int n) { int i; for (i = 0; i < n; i++) free(v[i]); free(v); }

/* the value of key in key=value lines (a checkpoint's record of its run); 0 when absent */
TOOL_UNUSED static int meta_value(const char *meta, const char *key, char *out, size_t n) {
    size_t kl = strlen(key);
    const char *p = meta;
    while (p && *p) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        if (len > kl && !strncmp(p, key, kl) && p[kl] == '=') {
            snprintf(out, n, "%.*s", (int)(len - kl - 1), p + kl + 1);
            return 1;
        }
        p = nl ? nl + 1 : NULL;
    }
    return 0;
}

/* ---------------------------------------------------------------- models
   A checkpoint is its own model: with no --model, the network and input shape come from the
   checkpoint (cfg text and shape embedded in it); with one, the two must agree, and the
   message names the first difference. */
TOOL_UNUSED static void load_model(cf_net *net, const char *model, const cf_shape *shape, const char *ckpt) {
    if (!model && !ckpt) die("needs --model M.cfg (or a checkpoint that holds one)");
    if (model) {
        TRY(cf_net_load_cfg(net, model, shape));
        if (ckpt) TRY(cf_checkpoint_matches(ckpt, net));
        return;
    }
    TRY(cf_checkpoint_model(ckpt, net, shape));
}
#endif
