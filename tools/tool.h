/* What the cf-* programs share: error exits that end every MPI rank, a table-driven flag
   parser that also writes --help, the checks every output path passes before any work, file
   lists, timing and memory figures.  Each tool includes cosmoflow.h before this file (with
   CF_IMPLEMENTATION, or linked to the implementation the Makefile compiled once), so what a
   tool uses of the C library, MPI, zlib and OpenMP is included here. */
#ifndef CF_TOOL_H
#define CF_TOOL_H
#include <stdio.h>
#include <ctype.h>
#include <stdint.h>
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
#include <sys/utsname.h>
#include <sys/wait.h>
#ifdef CF_USE_MPI
#include <mpi.h>
#endif
#ifdef CF_USE_ZLIB
#include <zlib.h>
#endif
#ifdef _OPENMP
#include <omp.h>
#endif

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
static const char *tool_record_of;   /* while a checkpoint's record is read as flags: the checkpoint */
static void lock_release(void);      /* the run's lock removed (below): on every way out */

/* "cf-<tool>: <what>" on stderr, then the whole job ends (MPI_Abort when several ranks run) */
TOOL_UNUSED static void die(const char *fmt, ...) {
    va_list ap;
    char msg[16384];   /* two paths of PATH_MAX and the reason fit whole */
    int n;
    fflush(stdout);
    if (cf_dist_size() > 1) n = snprintf(msg, sizeof msg, "cf-%s: rank %d: ", tool_name, cf_dist_rank());
    else n = snprintf(msg, sizeof msg, "cf-%s: ", tool_name);
    if (tool_record_of)   /* a value read from a checkpoint's record, not a flag of this command */
        n += snprintf(msg + n, sizeof msg - n, "%.4000s: its training record (not a flag of this command): ", tool_record_of);
    va_start(ap, fmt);
    vsnprintf(msg + n, sizeof msg - n - 1, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s\n", msg);   /* one write: lines of several ranks do not interleave */
    lock_release();   /* MPI_Abort runs no atexit handler */
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

/* --precision fp32|bf16 (cf-eval, cf-bench, cf-check; cf-train's is a training setting) */
TOOL_UNUSED static void parse_precision(const char *v, void *dst) {
    if (strcmp(v, "fp32") && strcmp(v, "bf16")) die("--precision %s: fp32 or bf16", v);
    *(int *)dst = strcmp(v, "bf16") ? CF_FP32 : CF_BF16;
}
/* --comm-timeout S: every tool that runs collectively (cf-train, cf-eval and cf-bench under
   mpirun) ends a rank whose MPI operation has had no answer in S s (the watchdog, below) */
#define COMM_TIMEOUT_FLAG {"--comm-timeout", "S", FLAG_INT, &tool_comm_timeout, 0, 1e6, \
    "end this rank when an MPI operation gets no answer from its peers in S s (a node or link gone, a rank stopped; 0: wait for ever)", NULL, NULL}
#define PRECISION_FLAG(dst) {"--precision", "P", FLAG_CALL, dst, 0, 0, "fp32 (default), or bf16: activations and their gradients rounded to bfloat16 (docs/math.md)", parse_precision, NULL}
/* --bf16-form dot|fma|auto (cf-train, cf-eval, cf-bench): the form of the bf16 kernels'
   multiply-adds (cf_bf16_form_set).  Both give the same bits, so it is no setting of a run. */
TOOL_UNUSED static void parse_bf16_form(const char *v, void *dst) {
    (void)dst;
    if (cf_bf16_form_set(v)) die("--bf16-form %s: dot, fma or auto", v);
}
#define BF16_FORM_FLAG {"--bf16-form", "F", FLAG_CALL, NULL, 0, 0, "bf16's multiply-adds: dot (vdpbf16ps), fma (the pairs widened to fp32, two FMAs), amx (the GEMM on AMX tiles) or auto (default: amx where the CPU has it, else the faster of dot and fma, measured at start); dot and fma give the same bits (docs/performance.md)", parse_bf16_form, NULL}
/* the precision as a run's first lines say it: bf16 names what its convolutions run on */
TOOL_UNUSED static const char *precision_text(int precision) {
    static char b[256];   /* (cf_bf16_kernels' longest text: 142 characters) */
    if (precision != CF_BF16) return "precision fp32";
    snprintf(b, sizeof b, "precision bf16 on %s", cf_bf16_kernels());
    return b;
}
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
    int bad = end == v || *end || !isfinite(x) || !(x >= lo && x <= hi) || (whole && x != floor(x));
    if (bad && whole) die("%s: '%s' is not a whole number in [%.0f, %.0f]", flag, v, lo, hi);   /* 1048576, not 1.04858e+06 */
    if (bad) die("%s: '%s' is not a number in [%g, %g]", flag, v, lo, hi);
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
/* flag_preset for each "flag", "value" pair of a NULL-terminated list (a switch's value unused) */
TOOL_UNUSED static void flag_presets(const tool_flag *f, int n, const char *const *pairs) {
    int k, j;
    for (k = 0; pairs[k]; k += 2) {
        for (j = 0; j < n && (!f[j].name || strcmp(f[j].name, pairs[k])); j++) {}
        flag_preset(f, n, pairs[k], j < n && f[j].kind == FLAG_SET ? NULL : pairs[k + 1]);
    }
}
/* ---- settings: what a checkpoint records of its run (key=value lines) and what --resume
   takes back from it: every FLAG_TRAIN flag (the library's keys), and the flags a tool
   names in a table of tool_setting.  A flag given on the command line that disagrees with
   the record is refused, naming both, unless override is set (the change is then returned,
   for the record). */
typedef struct {
    const char *flag, *key;
    void (*show)(const void *dst, char *buf, size_t n);   /* FLAG_CALL: the value as its parser reads it */
} tool_setting;
/* flag i's setting: its key, and in *show a FLAG_CALL's printer; NULL when it is none.  How
   the averaging is scheduled (--overlap) changes no number: it is no setting of the run. */
static const char *setting_of(const tool_flag *f, const tool_setting *s, int ns, void (**show)(const void *, char *, size_t)) {
    int k;
    *show = NULL;
    if (!f->name) return NULL;
    if (f->kind == FLAG_TRAIN) return strcmp((const char *)f->dst, "overlap") ? (const char *)f->dst : NULL;
    for (k = 0; k < ns; k++) if (!strcmp(s[k].flag, f->name)) { *show = s[k].show; return s[k].key; }
    return NULL;
}
/* a flag's current value as text, as its parser would read it back */
static void flag_text(const tool_flag *f, void (*show)(const void *, char *, size_t), char *b, size_t n) {
    switch (f->kind) {
    case FLAG_TRAIN: cf_train_config_get(tool_train, (const char *)f->dst, b, n); break;
    case FLAG_INT: case FLAG_SET: snprintf(b, n, "%d", *(const int *)f->dst); break;
    case FLAG_LONG: snprintf(b, n, "%ld", *(const long *)f->dst); break;
    case FLAG_U64: snprintf(b, n, "%llu", (unsigned long long)*(const uint64_t *)f->dst); break;
    case FLAG_DOUBLE: snprintf(b, n, "%.17g", *(const double *)f->dst); break;
    default: if (show) show(f->dst, b, n); else snprintf(b, n, "?"); break;
    }
}
/* the key=value lines of every setting */
TOOL_UNUSED static size_t settings_record(const tool_flag *f, int n, const tool_setting *s, int ns, char *out, size_t size) {
    size_t m = 0;
    int i;
    void (*show)(const void *, char *, size_t);
    out[0] = 0;
    for (i = 0; i < n; i++) {
        char v[256];
        const char *key = setting_of(&f[i], s, ns, &show);
        if (!key) continue;
        flag_text(&f[i], show, v, sizeof v);
        m += (size_t)snprintf(out + m, m < size ? size - m : 0, "%s=%s\n", key, v);
    }
    return m;
}
/* A run's record: its settings, extra lines of the tool's (e.g. "metric=val_mae\n"), then the
   override lines of the record it resumed from (old) and this run's (note) */
TOOL_UNUSED static void run_record(char *out, size_t size, const tool_flag *f, int n, const tool_setting *s, int ns, const char *extra,
                                   const char *old, const char *note) {
    size_t m = settings_record(f, n, s, ns, out, size);
    const char *p = old;
    m += (size_t)snprintf(out + m, m < size ? size - m : 0, "%s", extra);
    for (; (p = strstr(p, "override=")); p += strcspn(p, "\n"))
        if (p == old || p[-1] == '\n') m += (size_t)snprintf(out + m, m < size ? size - m : 0, "%.*s\n", (int)strcspn(p, "\n"), p);
    snprintf(out + m, m < size ? size - m : 0, "%s", note);
}
/* --resume: each recorded setting the command line did not give is taken from the record; one
   it gave differently is refused, or with override kept and listed in changed ("key new,
   was old; ...").  Returns the number of settings the record lacks (an older checkpoint). */
TOOL_UNUSED static int settings_resume(const tool_flag *f, int n, const tool_setting *s, int ns, const char *record, const char *ckpt,
                                       int override, char *changed, size_t size) {
    int i, missing = 0;
    size_t m = 0;
    void (*show)(const void *, char *, size_t);
    changed[0] = 0;
    for (i = 0; i < n; i++) {
        char v[256], want[256];
        const char *key = setting_of(&f[i], s, ns, &show);
        if (!key) continue;
        if (!meta_value(record, key, want, sizeof want)) { missing++; continue; }
        flag_text(&f[i], show, v, sizeof v);
        if (!flag_was_given(f, n, f[i].name)) {   /* continued as it was trained (and as if given: a recipe does not override it) */
            tool_record_of = ckpt;
            if (f[i].kind != FLAG_SET) flag_set(&f[i], want);
            else if (flag_n_given < 256) { *(int *)f[i].dst = atoi(want); flag_given_dst[flag_n_given++] = f[i].dst; }
            tool_record_of = NULL;
            continue;
        }
        if (!strcmp(v, want)) continue;
        if (!override)
            die("%s %s: %s was trained with %s=%s; --resume continues a run with its own settings (give --override to change them)",
                f[i].name, v, ckpt, key, want);
        m += (size_t)snprintf(changed + m, m < size ? size - m : 0, "%s%s %s, was %s", m ? "; " : "", key, v, want);
    }
    return missing;
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
    /* srun without an MPI plugin (Slurm's default MpiDefault=none, or pmix, which MPICH lacks)
       starts N one-rank copies: the build is fine, the launch is not */
    if (getenv("SLURM_PROCID") && !getenv("PMI_RANK") && !getenv("OMPI_COMM_WORLD_RANK"))
        die("started by srun as one of %d tasks, but MPI reports %d: srun started no MPI for this binary "
            "(MPICH: srun --mpi=pmi2; srun --mpi=list shows what this Slurm offers; or mpirun -np %d inside the allocation)", want, cf_dist_size(), want);
    die("started as one of %d ranks, but MPI reports %d: this binary's MPI library is not the launcher's "
        "(rebuild with the launcher's wrapper: make MPICC=/path/to/mpicc)", want, cf_dist_size());
#else
    die("started as one of %d ranks, but built without MPI: every rank would train alone and write the same "
        "files (rebuild with MPI: make MPI=1, or make MPICC=/path/to/mpicc)", want);
#endif
}

/* ---- the communication watchdog.  MPI waits for ever for a peer whose node or link is gone
   (TCP keeps resending; a job burns its allocation, silent).  A thread looks every second at
   the MPI operation the process is blocked in (cf_dist_waiting) and, past tool_comm_timeout
   seconds, says so and ends this process (_exit: MPI cannot be trusted to end it), on every
   node alike.  A finished run that MPI_Finalize does not release (seen with MPICH over UCX's
   TCP) leaves after min(30 s, the timeout) with status 0: its work is done. */
#include <pthread.h>
static int tool_comm_timeout = 1800;   /* seconds; 0: no watchdog (PyTorch's default: 30 minutes) */
static int tool_rank = -1;
static char tool_watch_note[4300];     /* e.g. "; the last checkpoint is k.cfck, epoch 3" */
/* a tool's own MPI call (not the library's), watched alike: TOOL_WAIT("MPI_Allreduce ..."); the call; TOOL_WAITED */
static const char *volatile tool_waiting_op;
static volatile time_t tool_waiting_since;
#define TOOL_WAIT(op) (tool_waiting_since = time(NULL), tool_waiting_op = (op))
#define TOOL_WAITED (tool_waiting_op = NULL)
static void *tool_watchdog(void *arg) {
    char line[5000];
    int n, fin_bound = tool_comm_timeout < 30 ? tool_comm_timeout : 30;
    (void)arg;
    for (;;) {
        double waited;
        const char *op;
        sleep(1);
        if (!(op = cf_dist_waiting(&waited)) && (op = tool_waiting_op)) waited = difftime(time(NULL), tool_waiting_since);
        if (!op) continue;
        if (!strcmp(op, "MPI_Finalize")) {
            if (waited < fin_bound) continue;
            n = snprintf(line, sizeof line, "cf-%s: rank %d: MPI_Finalize did not return in %d s; the run has finished (its outputs are complete): leaving\n",
                         tool_name, tool_rank, fin_bound);
            if (write(2, line, (size_t)n) < 0) {}
            lock_release();   /* (fstat, lstat, unlink, close on the path kept since lock_output) */
            _exit(0);
        }
        if (waited < tool_comm_timeout) continue;
        n = snprintf(line, sizeof line, "cf-%s: rank %d: %s got no answer from its peers in %d s (a node or the link is gone)%s\n",
                     tool_name, tool_rank, op, tool_comm_timeout, tool_watch_note);
        if (write(2, line, (size_t)n) < 0) {}
        lock_release();
        _exit(3);
    }
    return NULL;
}
/* MPI started under the watchdog, then the launch checked (check_launch) */
/* SIGTERM, SIGINT, a hang-up (SIGHUP) and the user signals a scheduler sends as a warning
   (SIGUSR1, SIGUSR2: Slurm's --signal) end the run, whatever handler the MPI library installed
   (MPICH takes SIGUSR1 at MPI_Init): the checkpoint written last stays as it was (writes are atomic), the run's lock
   is removed, and the process ends by the signal, as it would have without the handler */
static void lock_release(void);
/* a signal that arrives while a checkpoint moves into place (ckpt_save: CKPT to CKPT.prev,
   CKPT.next to CKPT) waits for the second rename: ended between the two, a run left no CKPT */
static volatile sig_atomic_t tool_in_ckpt = 0, tool_pending_signal = 0;
/* A run that stops at a step (cf-train: tool_stop_at_steps) takes the first SIGTERM, SIGUSR1
   or SIGUSR2 as a request, which it reads at the end of each step (tool_stop_requested: the
   signal); a second signal, SIGINT or SIGHUP end it at once as above. */
static volatile sig_atomic_t tool_stop_requested = 0;
static int tool_stops_at_steps = 0;
static void tool_on_signal(int sig) {
    if (tool_stops_at_steps && !tool_stop_requested && (sig == SIGTERM || sig == SIGUSR1 || sig == SIGUSR2)) { tool_stop_requested = sig; return; }
    if (tool_in_ckpt) { tool_pending_signal = sig; return; }
    lock_release();   /* (fstat, lstat, unlink, close: safe in a handler) */
    signal(sig, SIG_DFL);
    raise(sig);
}
static void tool_end_on_signals(void) {
    static const int sigs[] = {SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2};
    size_t i;
    for (i = 0; i < sizeof sigs / sizeof *sigs; i++) signal(sigs[i], tool_on_signal);
}
TOOL_UNUSED static void dist_start(int *argc, char ***argv) {
    pthread_t th;
    const char *r = getenv("PMI_RANK") ? getenv("PMI_RANK") : getenv("OMPI_COMM_WORLD_RANK");
    tool_rank = r ? atoi(r) : 0;   /* before MPI answers (MPI_Init itself is watched) */
    if (tool_comm_timeout > 0 && pthread_create(&th, NULL, tool_watchdog, NULL) == 0) pthread_detach(th);
    if (cf_dist_init(argc, argv)) die("%s", cf_failure_reason());
    tool_end_on_signals();   /* again: the MPI library may have installed its own (SIGHUP, SIGUSR1) */
    tool_rank = cf_dist_rank();
    check_launch();
}
/* One job, one set of settings: every rank compares the settings it was started with (text,
   one "--flag value" a line) with rank 0's, and a rank whose line differs ends the job naming
   the flag.  An MPMD launch (mpirun -np 1 A : -np 1 B) gives each rank its own command line:
   another --lr, --seed, --model or --out would otherwise train diverging copies silently. */
TOOL_UNUSED static void settings_agree(const char *text) {
#ifdef CF_USE_MPI
    int len = (int)strlen(text) + 1, line = 0;
    char *ref;
    const char *a, *b;
    if (cf_dist_size() <= 1) return;
    MPI_Bcast(&len, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (!(ref = (char *)malloc((size_t)len))) die("out of memory");
    if (cf_dist_rank() == 0) memcpy(ref, text, (size_t)len);
    MPI_Bcast(ref, len, MPI_CHAR, 0, MPI_COMM_WORLD);
    for (a = text, b = ref; *a || *b; line++) {   /* the first line that differs */
        size_t la = strcspn(a, "\n"), lb = strcspn(b, "\n");
        if (la != lb || strncmp(a, b, la))
            die("%.*s here; rank 0 has %.*s: every rank of one job must run with the same settings (an MPMD launch with other flags?)",
                (int)la, a, (int)lb, b);
        a += la + (a[la] != 0); b += lb + (b[lb] != 0);
    }
    free(ref);
#else
    (void)text;
#endif
}
/* what the watchdog's message adds: where the run's last checkpoint is */
TOOL_UNUSED static void comm_watch_note(const char *ckpt, int epoch) {
    snprintf(tool_watch_note, sizeof tool_watch_note, "; the last checkpoint is %s, epoch %d", ckpt, epoch);
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
    lock_release();
    _exit(128 + sig);
}
#endif
/* ---------------------------------------------------------------- before main
   Some settings must be made before the libraries' own start-up code reads them.  OpenBLAS
   reserves a buffer per thread (128 MB of address space each here) in its constructor and
   spins forever when it cannot (OpenBLAS issue 5289: under `ulimit -v`, before main, or later
   in an sgemm); libgomp crashes when OMP_NUM_THREADS asks for a million threads.  The dynamic
   loader runs an executable's .preinit_array before any library's constructor, with the
   environment array libc then takes as its own: tool_preinit checks the limit there and
   rewrites thread counts in that array.  (setenv would be undone by libc's own start.) */
#include <sys/resource.h>
/* the environment entry for name in env, or NULL */
static char **env_entry(char **env, const char *name) {
    size_t n = strlen(name);
    for (; env && *env; env++) if (!strncmp(*env, name, n) && (*env)[n] == '=') return env;
    return NULL;
}
static long env_number(char **env, const char *name) { char **e = env_entry(env, name); return e ? atol(*e + strlen(name) + 1) : 0; }
static void preinit_say(const char *prog, const char *msg) {
    const char *b = strrchr(prog, '/');
    char line[1024];
    int n = snprintf(line, sizeof line, "%s: %s\n", b ? b + 1 : prog, msg);
    if (n > 0 && write(2, line, (size_t)n) < 0) {}
}
/* OMP_NUM_THREADS (and OPENBLAS_NUM_THREADS) far beyond the machine: capped, saying so */
static void cap_threads(const char *prog, char **env, const char *name, char *slot, size_t n, long cpus) {
    long v = env_number(env, name), cap = 4 * cpus > 64 ? 4 * cpus : 64;
    char msg[256];
    if (v <= cap) return;
    snprintf(slot, n, "%s=%ld", name, cap);
    *env_entry(env, name) = slot;
    snprintf(msg, sizeof msg, "%s=%ld is far more than this machine's %ld CPUs: using %ld", name, v, cpus, cap);
    preinit_say(prog, msg);
}
/* Under an address-space limit (ulimit -v), OpenBLAS's buffers must fit beside what is mapped
   already, with a margin; refused with the figures otherwise, instead of a process that spins.
   Checked before main for (threads + 2) buffers, and for 2 more once the tool holds its own
   memory (blas_room; OpenBLAS has taken most of its buffers by then, blas_warm_up). */
static int address_space_left(const char *prog, long threads, long buffers) {
#ifdef CF_USE_CBLAS
    struct rlimit r;
    size_t need = (size_t)buffers * (128u << 20) + (64u << 20);
    void *probe;
    char msg[512];
    if (getrlimit(RLIMIT_AS, &r) || r.rlim_cur == RLIM_INFINITY) return 1;
    if ((probe = malloc(need))) { free(probe); return 1; }
    snprintf(msg, sizeof msg, "the address-space limit (ulimit -v) of %lu MB leaves less than the %zu MB more that OpenBLAS may reserve%s "
             "(it would hang, not fail): raise the limit, or run fewer threads (OMP_NUM_THREADS=1)",
             (unsigned long)(r.rlim_cur >> 20), need >> 20, threads ? " for its threads" : "");
    preinit_say(prog, msg);
    return 0;
#else
    (void)prog; (void)threads; (void)buffers;
    return 1;
#endif
}
static void check_address_space(const char *prog, char **env, long cpus) {
    long threads = env_number(env, "OPENBLAS_NUM_THREADS") > 0 ? env_number(env, "OPENBLAS_NUM_THREADS")
                 : env_number(env, "OMP_NUM_THREADS") > 0 ? env_number(env, "OMP_NUM_THREADS") : cpus;
    if (!address_space_left(prog, threads, threads + 2)) _exit(1);
}
static void tool_preinit(int argc, char **argv, char **env) {
    static char slots[2][64];
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    const char *prog = argc > 0 && argv[0] ? argv[0] : "cf";
    if (cpus < 1) cpus = 1;
    cap_threads(prog, env, "OMP_NUM_THREADS", slots[0], sizeof slots[0], cpus);
    cap_threads(prog, env, "OPENBLAS_NUM_THREADS", slots[1], sizeof slots[1], cpus);
    check_address_space(prog, env, cpus);
}
#if defined(__GNUC__) && defined(__ELF__)
#define TOOL_PREINIT 1
__attribute__((section(".preinit_array"), used)) static void (*const tool_preinit_entry)(int, char **, char **) = tool_preinit;
#endif
/* the same check once the tool has taken its own memory (the network's arena, the batches) */
TOOL_UNUSED static void blas_room(void) {
    char prog[64];
    snprintf(prog, sizeof prog, "cf-%s", tool_name);
    if (!address_space_left(prog, 0, 2)) { cf_dist_abort(1); exit(1); }
}
/* OpenBLAS takes its per-thread buffers at a thread's first call: all of them now, before the
   tool's own memory, so that a tight limit is met by our allocations (which fail cleanly) and
   never by OpenBLAS's (which spins) */
static void blas_warm_up(void) {
#ifdef CF_USE_CBLAS
    enum { N = 256 };   /* large enough for OpenBLAS's buffered path (small products take none) */
    static float a[N * N], b[N * N], c[N * N];
    cf_sgemm(0, 0, N, N, N, 1.0f, a, N, b, N, 0.0f, c, N);   /* on OpenBLAS's threads */
    TOOL_OMP(omp parallel)
    {
        float *d = (float *)calloc(N * N, sizeof(float));
        if (d) cf_sgemm(0, 0, N, N, N, 1.0f, a, N, b, N, 0.0f, d, N);   /* one call on each of ours */
        free(d);
    }
#endif
}
/* ---------------------------------------------------------------- OpenBLAS's kernels
   OpenBLAS picks its kernels when it loads, for the CPU it recognises; an OpenBLAS older than
   the CPU (Debian 12's 0.3.21 on AMD Zen 5 or a recent Xeon) falls back to its SSE kernels
   ('Prescott'): correct, but about 4x slower.  Unless the user chose a set (OPENBLAS_CORETYPE,
   always obeyed), a tool that finds such a fallback picks the newest set the CPU supports
   (SkylakeX with AVX-512, else Haswell with AVX2 and FMA), checks it in a child process (the
   same binary run with CF_BLAS_PROBE set: sgemm on the shapes below against a double-precision
   loop; a set that computes wrong or crashes is not used), and runs itself again with it.  Its
   first line says which kernels run. */
#ifdef CF_USE_CBLAS
extern char *openblas_get_corename(void);
#endif
/* OpenBLAS's sgemm on shapes that reach its different kernels (tails, thin and long matrices,
   every transpose, alpha and beta) against a double-precision loop; the error is relative to
   the entry's |A||B| sum, so rounding passes and a wrong kernel does not.  The number of wrong
   products; each printed when verbose. */
TOOL_UNUSED static int blas_check(int verbose) {
    static const int shapes[][3] = {{1, 1, 1}, {7, 5, 3}, {17, 33, 65}, {64, 64, 64}, {129, 97, 300}, {32, 2048, 108}, {256, 31, 1024}, {500, 500, 17}};
    cf_rng r = cf_rng_seed(77);
    int si, ta, tb, bad = 0;
    for (si = 0; si < (int)(sizeof shapes / sizeof shapes[0]); si++)
        for (ta = 0; ta < 2; ta++) for (tb = 0; tb < 2; tb++) {
            int M = shapes[si][0], N = shapes[si][1], K = shapes[si][2], i, j, k;
            float *A = (float *)malloc(sizeof(float) * M * K), *Bm = (float *)malloc(sizeof(float) * K * N);
            float *C = (float *)malloc(sizeof(float) * M * N), *C0 = (float *)malloc(sizeof(float) * M * N);
            double worst = 0, alpha = 0.75, beta = si % 2 ? 0.5 : 0.0;
            if (!A || !Bm || !C || !C0) { free(A); free(Bm); free(C); free(C0); return bad + 1; }
            for (i = 0; i < M * K; i++) A[i] = cf_rng_uniform(&r) * 2 - 1;
            for (i = 0; i < K * N; i++) Bm[i] = cf_rng_uniform(&r) * 2 - 1;
            for (i = 0; i < M * N; i++) C[i] = C0[i] = cf_rng_uniform(&r) * 2 - 1;
            cf_sgemm(ta, tb, M, N, K, (float)alpha, A, ta ? M : K, Bm, tb ? K : N, (float)beta, C, N);
            for (i = 0; i < M; i++) for (j = 0; j < N; j++) {
                double sum = 0, mag = 0, e;
                for (k = 0; k < K; k++) {
                    double a = ta ? A[(size_t)k * M + i] : A[(size_t)i * K + k], b = tb ? Bm[(size_t)j * K + k] : Bm[(size_t)k * N + j];
                    sum += a * b; mag += fabs(a * b);
                }
                sum = alpha * sum + beta * C0[(size_t)i * N + j];
                mag = alpha * mag + fabs(beta * C0[(size_t)i * N + j]) + 1e-30;
                e = fabs(C[(size_t)i * N + j] - sum) / mag;
                if (!(e <= worst)) worst = e;   /* a NaN counts as wrong */
            }
            if (!(worst <= 1e-5)) {
                bad++;
                if (verbose) printf("sgemm %dx%dx%d trans %d%d: relative error %.3g WRONG\n", M, N, K, ta, tb, worst);
            }
            free(A); free(Bm); free(C); free(C0);
        }
    return bad;
}
#if defined(CF_USE_CBLAS) && defined(__GNUC__) && defined(__x86_64__)
static int blas_is_fallback(const char *core) {
    return core && (!strcmp(core, "Prescott") || !strcmp(core, "Core2") || !strcmp(core, "Katmai"));
}
/* the kernel set `name` checked in a child: this binary again, with CF_BLAS_PROBE set */
static int blas_probe(const char *self, const char *name) {
    int status = 0;
    pid_t pid = fork();
    if (pid < 0) return 0;
    if (pid == 0) {
        char *args[2];
        int fd = open("/dev/null", O_WRONLY);
        if (fd >= 0) { dup2(fd, 1); dup2(fd, 2); close(fd); }
        args[0] = (char *)self; args[1] = NULL;
        setenv("OPENBLAS_CORETYPE", name, 1); setenv("CF_BLAS_PROBE", "1", 1);
        unsetenv("OMP_NUM_THREADS"); setenv("OPENBLAS_NUM_THREADS", "1", 1);
        execv(self, args);
        _exit(127);
    }
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}
/* 1 when it set OPENBLAS_CORETYPE for the run of this binary that follows (CF_BLAS_KERNELS
   tells that run what happened) */
static int blas_choose_kernels(const char *self) {
    static const char *sets[] = {"SkylakeX", "Haswell"};
    const char *core = openblas_get_corename();
    char note[160];
    int i;
    if (getenv("OPENBLAS_CORETYPE") || getenv("CF_BLAS_KERNELS") || !blas_is_fallback(core)) return 0;
    __builtin_cpu_init();
    for (i = 0; i < 2; i++) {
        int fits = i == 0 ? __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
                                __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512cd")
                          : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
        if (!fits || !blas_probe(self, sets[i])) continue;
        snprintf(note, sizeof note, "OpenBLAS runs its %s kernels (it does not know this CPU: its own choice was %s, SSE)", sets[i], core);
        setenv("OPENBLAS_CORETYPE", sets[i], 1);
        setenv("CF_BLAS_KERNELS", note, 1);
        return 1;
    }
    snprintf(note, sizeof note, "OpenBLAS runs its %s (SSE) kernels: it does not know this CPU, and no newer set passed the check", core);
    setenv("CF_BLAS_KERNELS", note, 1);
    return 0;
}
#else
static int blas_choose_kernels(const char *self) { (void)self; return 0; }
#endif
/* the first line: which kernels run, when the tool chose them or found none better (rank 0) */
static void blas_kernels_note(void) {
    const char *note = getenv("CF_BLAS_KERNELS"), *rank = getenv("PMI_RANK");
    if (!rank) rank = getenv("OMPI_COMM_WORLD_RANK");
    if (!rank) rank = getenv("SLURM_PROCID");
    if (note && (!rank || atoi(rank) == 0)) fprintf(stderr, "cf-%s: %s; OPENBLAS_CORETYPE chooses a set\n", tool_name, note);
}

/* OpenMP threads spin after every parallel region and steal the cores the BLAS needs next;
   libgomp reads OMP_WAIT_POLICY when it loads, so the tool sets it and runs itself again,
   once, before anything else (MPI included).  Without a preinit array, the same run does the
   checks above. */
/* Standard output and error open, before anything else: a closed one would be the next file
   opened, and the run's lines would go into it (a lock, a log).  Standard input closed is
   given the null device (read only), so that no file the tool opens lands on descriptor 0. */
static void std_streams_open(const char *name) {
    char msg[256];
    int n;
    if (fcntl(0, F_GETFD) == -1) {
        int fd = open("/dev/null", O_RDONLY);
        if (fd > 0) { dup2(fd, 0); close(fd); }
    }
    if (fcntl(1, F_GETFD) != -1 && fcntl(2, F_GETFD) != -1) return;
    n = snprintf(msg, sizeof msg, "cf-%s: standard %s is closed: its lines would go into the next file opened; give it somewhere to go (> FILE)\n",
                 name, fcntl(1, F_GETFD) == -1 ? "output" : "error");
    if (n > 0 && write(fcntl(2, F_GETFD) != -1 ? 2 : 1, msg, (size_t)n) < 0) {}
    _exit(2);
}
/* A tool that does one process's work (cf-eval, cf-check, cf-convert, cf-synth): started as
   one of several ranks (mpirun -np 2, srun), every copy would do the same work and write the
   same files: refused */
TOOL_UNUSED static void one_process_only(void) {
    int n = cf_dist_size() > launcher_ranks() ? cf_dist_size() : launcher_ranks();
    if (n > 1) die("started as one of %d ranks: cf-%s runs as one process (every copy would do the same work and write the same files); run it without mpirun or srun",
                   n, tool_name);
}
TOOL_UNUSED static void tool_init(int argc, char **argv, const char *name) {
    (void)argc;
    if (getenv("CF_BLAS_PROBE")) _exit(blas_check(0) ? 1 : 0);   /* the check of a kernel set, in a child (above) */
    tool_name = name;
    std_streams_open(name);
    atexit(tool_close_stdout);
    tool_end_on_signals();
#ifdef CF_USE_MPI
    setenv("UCX_HANDLE_ERRORS", "none", 0);
    signal(SIGABRT, tool_on_abort);
#endif
    /* past a file-size limit (ulimit -f) writes fail with EFBIG and we say so, instead of
       the process dying silently from SIGXFSZ */
    signal(SIGXFSZ, SIG_IGN);
    {   /* once, before anything else: the OpenMP wait policy and OpenBLAS's kernels, both read when
           their libraries load, so the tool runs itself again with them set */
        char self[4096];
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        int again = 0;
        self[n > 0 ? n : 0] = 0;
        if (!getenv("OMP_WAIT_POLICY")) {
#ifndef TOOL_PREINIT
            extern char **environ;
            tool_preinit(argc, argv, environ);
#endif
            setenv("OMP_WAIT_POLICY", "passive", 1);
            again = 1;
        }
        if (n > 0 && blas_choose_kernels(self)) again = 1;
        if (again && n > 0) execv(self, argv);   /* on failure go on as we are */
    }
    blas_kernels_note();
    blas_warm_up();
}

/* ---------------------------------------------------------------- files
   Every output path is checked before any work: its directory exists and can be written,
   it is not a directory, a device, a FIFO or a socket (never replaced or moved), its path
   fits the system's limits, and it is not any of the run's inputs: not an input file, not
   the checkpoint being resumed, not a file inside an input directory, whatever the names
   (device and inode compared, so hard and symbolic links count).  An input file's identity
   is taken when it is compared, not remembered from the start: a checkpoint the run itself
   rotates frees its inode, which a later output may get. */
typedef struct { const char *path; int dir; dev_t dev; ino_t ino; } tool_file;
static tool_file *tool_inputs;        /* the inputs given, then the files of input directories */
static int tool_n_inputs, tool_cap_inputs;
static void input_add(const char *path, int dir, const struct stat *st) {
    if (tool_n_inputs == tool_cap_inputs) {
        tool_cap_inputs = tool_cap_inputs ? 2 * tool_cap_inputs : 64;
        if (!(tool_inputs = (tool_file *)realloc(tool_inputs, tool_cap_inputs * sizeof *tool_inputs))) die("out of memory");
    }
    tool_inputs[tool_n_inputs].path = path; tool_inputs[tool_n_inputs].dir = dir;
    tool_inputs[tool_n_inputs].dev = st->st_dev; tool_inputs[tool_n_inputs].ino = st->st_ino;
    tool_n_inputs++;
}
/* remember an input: a file, or a directory, and then every entry in it too (its samples;
   their inode numbers from the directory itself, no stat per file on a parallel file system) */
TOOL_UNUSED static void input_path(const char *path) {
    struct stat st;
    DIR *d;
    struct dirent *e;
    if (!path || stat(path, &st)) return;
    input_add(path, S_ISDIR(st.st_mode), &st);
    if (!S_ISDIR(st.st_mode) || !(d = opendir(path))) return;
    while ((e = readdir(d))) {
        char *full;
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (!(full = (char *)malloc(strlen(path) + strlen(e->d_name) + 2))) die("out of memory");
        sprintf(full, "%s/%s", path, e->d_name);
        st.st_ino = e->d_ino;   /* the directory's device */
        input_add(full, 2, &st);
    }
    closedir(d);
}
/* the directory part of path ("." for a bare name) */
static void dir_of(const char *path, char *dir, size_t n) {
    const char *s = strrchr(path, '/');
    if (!s) snprintf(dir, n, ".");
    else if (s == path) snprintf(dir, n, "/");
    else snprintf(dir, n, "%.*s", (int)(s - path), path);
}
/* whether two paths name the same existing file */
TOOL_UNUSED static int same_file(const char *a, const char *b) {
    struct stat sa, sb;
    return a && b && !stat(a, &sa) && !stat(b, &sb) && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}
/* the input that is the same file as st, or NULL: a match is confirmed by the input's
   identity now (the files in input directories do not change during a run) */
static const char *input_like(const struct stat *st) {
    struct stat now;
    int i;
    for (i = 0; i < tool_n_inputs; i++)
        if (tool_inputs[i].dev == st->st_dev && tool_inputs[i].ino == st->st_ino &&
            (tool_inputs[i].dir == 2 || (!stat(tool_inputs[i].path, &now) && now.st_dev == st->st_dev && now.st_ino == st->st_ino)))
            return tool_inputs[i].path;
    return NULL;
}
/* the input directory that is dir itself (its device and inode), or NULL */
TOOL_UNUSED static const char *input_dir_named(const char *dir) {
    struct stat st, in;
    int i;
    if (stat(dir, &st)) return NULL;
    for (i = 0; i < tool_n_inputs; i++)
        if (tool_inputs[i].dir == 1 && !stat(tool_inputs[i].path, &in) && in.st_dev == st.st_dev && in.st_ino == st.st_ino) return tool_inputs[i].path;
    return NULL;
}
static const char *same_as_input(const char *path) {
    struct stat st;
    return stat(path, &st) ? NULL : input_like(&st);
}
/* what a non-regular file is, for messages */
static const char *file_kind(mode_t m) {
    return S_ISDIR(m) ? "a directory" : S_ISFIFO(m) ? "a FIFO" : S_ISCHR(m) ? "a character device" : S_ISBLK(m) ? "a block device"
         : S_ISSOCK(m) ? "a socket" : "not a regular file";
}
/* a path the tool will write (or derive .next, .prev, .lock and temporary names from) must fit
   PATH_MAX and its name NAME_MAX with room for those suffixes: refused at the start, not
   after an epoch of work */
static void path_fits(const char *what, const char *path) {
    const char *base = strrchr(path, '/');
    size_t n = strlen(path), b = strlen(base ? base + 1 : path);
    if (n + 96 > 4096) die("%s: a path of %zu characters: at most %d here (the temporary files add up to 96)", what, n, 4096 - 96);
    if (b + 96 > 255) die("%s: a file name of %zu characters: at most %d (the temporary files add up to 96 to the 255 a name may have)", what, b, 255 - 96);
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
static int is_sample_file(const char *n);
/* a name the data readers take for a label: X_label.npy (beside X_data.npy), label-X.npy */
static int is_label_file(const char *n) {
    size_t l = strlen(n);
    return (l > 10 && !strcmp(n + l - 10, "_label.npy")) || (l > 10 && !strncmp(n, "label-", 6) && !strcmp(n + l - 4, ".npy"));
}
/* An output never lands in a directory the run reads (an input directory, compared by device
   and inode) under a name the data readers take for a sample or a label: the next run on that
   directory would read it as data.  A picture directory that is an input directory is refused
   whatever its files' names (output_dir_not_data). */
static void output_not_data(const char *what, const char *path) {
    char dir[4096];
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path, *in;
    if (!is_sample_file(base) && !is_label_file(base)) return;
    dir_of(path, dir, sizeof dir);
    if ((in = input_dir_named(dir)))
        die("%s %s: is named like a %s and is inside the input directory %s: the data readers would take it for one (give another name or directory)",
            what, path, is_label_file(base) ? "label file" : "sample", in);
}
TOOL_UNUSED static void output_dir_not_data(const char *what, const char *dir) {
    const char *in = dir ? input_dir_named(dir) : NULL;
    if (in) die("%s %s: is the input directory %s: the pictures would go among its samples (give another directory)", what, dir, in);
}
/* An output file: written (atomically) only after the run's work, so refused now if it could
   not be, if something that is not a regular file is in its place, or if it would replace
   an input.  what: the flag, for the message. */
TOOL_UNUSED static void output_file(const char *what, const char *path) {
    char dir[4096];
    struct stat st;
    const char *in;
    if (!path) return;
    path_fits(what, path);
    dir_of(path, dir, sizeof dir);
    if (stat(dir, &st) || !S_ISDIR(st.st_mode)) die("%s %s: the directory %s does not exist", what, path, dir);
    if (access(dir, W_OK | X_OK)) die("%s %s: the directory %s is not writable", what, path, dir);
    if (!stat(path, &st) && S_ISDIR(st.st_mode)) die("%s %s: is a directory (give a file name)", what, path);
    if (!stat(path, &st) && !S_ISREG(st.st_mode))
        die("%s %s: is %s, not a regular file: it is never replaced or moved (give a file name)", what, path, file_kind(st.st_mode));
    if ((in = same_as_input(path))) die("%s %s: is the same file as the input %s; it would be overwritten", what, path, in);
    output_not_data(what, path);
    remove_stale_tmp(path);
}
/* An output directory: created when missing, with its missing parents (as mkdir -p);
   refused when it or a parent is a file, or when it holds an input the tool would write over
   (checked by the caller per file). */
TOOL_UNUSED static void output_dir(const char *what, const char *dir) {
    struct stat st;
    char parent[4096];
    if (!dir) return;
    path_fits(what, dir);
    if (!stat(dir, &st)) {
        if (!S_ISDIR(st.st_mode)) die("%s %s: exists and is not a directory", what, dir);
        if (access(dir, W_OK | X_OK)) die("%s %s: the directory is not writable", what, dir);
        return;
    }
    dir_of(dir, parent, sizeof parent);
    if (strcmp(parent, dir)) output_dir(what, parent);
    if (mkdir(dir, 0777) && errno != EEXIST) die("%s %s: cannot create it (%s)", what, dir, strerror(errno));
}
/* --resume and the batch: the record's global batch (batch x ranks) is the setting, so that a
   run of 2 ranks x 2 resumes on 1 rank as 1 x 4.  Taken when --batch is not given (it must
   divide by the ranks), refused when it is and differs, unless override (then noted in changed). */
TOOL_UNUSED static void resume_global_batch(const char *record, const char *ckpt, int *batch, int ranks, const char *what, int given, int override, char *changed, size_t n) {
    char v[32];
    int g;
    if (!meta_value(record, "global_batch", v, sizeof v) || (g = atoi(v)) == *batch * ranks) return;
    if (given && !override) die("--batch %d: %s was trained with a global batch of %d; here %d %s x %d (give --override to change it)", *batch, ckpt, g, ranks, what, *batch);
    if (!given && g % ranks) die("%s: its global batch %d is not a multiple of %d %s", ckpt, g, ranks, what);
    if (!given) *batch = g / ranks;
    else snprintf(changed + strlen(changed), n - strlen(changed), "%sglobal_batch %d, was %d", changed[0] ? "; " : "", *batch * ranks, g);
}
/* ---- checkpoints: one writer each, rotated so that a valid one always exists
   One writer per checkpoint: an advisory lock (fcntl) on CKPT.lock, held until the process
   ends (the kernel releases it then, also after a kill -9); the file says who holds it.  A
   second writer is refused at its start, naming the first.  The lock file is the run's own:
   created new (O_EXCL), never through a link, removed when the run ends; one that a run left
   behind (killed) is taken over, saying whose it was; a CKPT.lock that is not a lock file (a
   link, another kind of file, a file with other contents) is never touched: refused. */
static char tool_lock_path[4200];
static int tool_lock_fd = -1;
/* The holder's lock as it wrote it ("pid N on HOST"), known to every other rank of its job
   (lock_share).  A rank that ends the job removes that file too: MPI_Abort and the launcher
   end the holder with SIGKILL, which no process can answer.  Only the holder's own file (a
   regular file, the same words) is removed: a run that took it over since wrote its own. */
static char tool_lock_peer[300];
static void lock_release_peer(void) {
    char now[300];
    struct stat a, b;
    ssize_t k;
    int fd;
    if (!tool_lock_peer[0] || (fd = open(tool_lock_path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)) < 0) return;
    k = read(fd, now, sizeof now - 1);
    now[k > 0 ? k : 0] = 0;
    if (!strcmp(now, tool_lock_peer) && !fstat(fd, &a) && S_ISREG(a.st_mode) && !lstat(tool_lock_path, &b) && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
        unlink(tool_lock_path);
    close(fd);
    tool_lock_peer[0] = 0;
}
/* at exit: the lock file removed, if it is still ours (the same file); on another rank, the holder's */
static void lock_release(void) {
    struct stat a, b;
    if (tool_lock_fd < 0) { lock_release_peer(); return; }
    if (!fstat(tool_lock_fd, &a) && !lstat(tool_lock_path, &b) && a.st_dev == b.st_dev && a.st_ino == b.st_ino) unlink(tool_lock_path);
    close(tool_lock_fd);
    tool_lock_fd = -1;
    tool_lock_peer[0] = 0;   /* (released: no second try through lock_release_peer) */
}
/* what a lock file says: "pid N on HOST"; 1 when it says that (or nothing: one being made), 0 otherwise */
static int lock_words(int fd, char *who, size_t n, long *pid) {
    ssize_t k = pread(fd, who, n - 1, 0);
    char host[256];
    who[k > 0 ? k : 0] = 0;
    if (k > 0 && who[k - 1] == '\n') who[k - 1] = 0;
    *pid = 0;
    return k <= 0 || (sscanf(who, "pid %ld on %255s", pid, host) == 2 && *pid > 0);
}
TOOL_UNUSED static void lock_output(const char *what, const char *path) {
    char who[256] = "";
    struct flock fl;
    struct utsname u;
    struct stat st, now;
    long pid;
    int fd, k, tries;
    snprintf(tool_lock_path, sizeof tool_lock_path, "%s.lock", path);
    uname(&u);
    for (tries = 0; ; tries++) {
        int made = 1;
        if ((fd = open(tool_lock_path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666)) < 0) {
            if (errno != EEXIST) die("%s %s: cannot create its lock %s (%s)", what, path, tool_lock_path, strerror(errno));
            made = 0;
            if (lstat(tool_lock_path, &st)) continue;   /* gone meanwhile: make it anew */
            if (S_ISLNK(st.st_mode)) die("%s %s: its lock %s is a symbolic link: never followed or written through (remove it)", what, path, tool_lock_path);
            if (!S_ISREG(st.st_mode) || st.st_nlink != 1)
                die("%s %s: its lock %s is %s: not a lock file of ours, left as it is (remove it)", what, path, tool_lock_path,
                    S_ISREG(st.st_mode) ? "a file with another name too (a hard link)" : file_kind(st.st_mode));
            if ((fd = open(tool_lock_path, O_RDWR | O_NOFOLLOW | O_CLOEXEC)) < 0) die("%s %s: cannot open its lock %s (%s)", what, path, tool_lock_path, strerror(errno));
            if (!lock_words(fd, who, sizeof who, &pid))
                die("%s %s: %s exists and is not a lock file (it holds '%.60s'): left as it is; remove it or give another --out", what, path, tool_lock_path, who);
        }
        memset(&fl, 0, sizeof fl);
        fl.l_type = F_WRLCK; fl.l_whence = SEEK_SET;
        if (fcntl(fd, F_SETLK, &fl)) {
            lock_words(fd, who, sizeof who, &pid);
            die("%s %s: another run is writing it (%s; its lock %s): one writer per checkpoint", what, path, who[0] ? who : "pid unknown", tool_lock_path);
        }
        /* still the file at that name (not one a finished run just removed)? */
        if (fstat(fd, &st) || lstat(tool_lock_path, &now) || st.st_dev != now.st_dev || st.st_ino != now.st_ino) { close(fd); if (tries < 8) continue; die("%s: keeps changing", tool_lock_path); }
        if (!made && who[0]) fprintf(stderr, "cf-%s: %s: taking over the lock %s left by %s, which no longer holds it\n", tool_name, what, tool_lock_path, who);
        break;
    }
    if (fd <= 2) die("internal: the lock got descriptor %d (a standard stream was closed)", fd);
    k = snprintf(who, sizeof who, "pid %ld on %s\n", (long)getpid(), u.nodename);
    if (ftruncate(fd, 0) || pwrite(fd, who, (size_t)k, 0) != k) die("%s: cannot write (%s)", tool_lock_path, strerror(errno));
    tool_lock_fd = fd;   /* stays open: the lock lasts as long as the process */
    snprintf(tool_lock_peer, sizeof tool_lock_peer, "%s", who);
    atexit(lock_release);
}
/* after rank 0's lock_output, on every rank: the others learn its lock's path and words */
TOOL_UNUSED static void lock_share(void) {
#ifdef CF_USE_MPI
    if (cf_dist_size() <= 1) return;
    TOOL_WAIT("MPI_Bcast (the checkpoint's lock)");
    MPI_Bcast(tool_lock_path, (int)sizeof tool_lock_path, MPI_CHAR, 0, MPI_COMM_WORLD);
    MPI_Bcast(tool_lock_peer, (int)sizeof tool_lock_peer, MPI_CHAR, 0, MPI_COMM_WORLD);
    TOOL_WAITED;
#endif
}
/* The new checkpoint is complete on disk (CKPT.next, itself written atomically) before it
   takes CKPT's name in one rename; the previous one stays as CKPT.prev, a second name (a
   hard link) made before that rename.  So CKPT is whole at every instant: a kill -9 or a full
   disk anywhere leaves the last checkpoint saved as CKPT, which every reader reads (cf-check,
   cf-eval, --resume).  A file system without hard links gets two renames (CKPT to CKPT.prev,
   CKPT.next to CKPT), a signal between them waiting for the second, and ckpt_resume takes
   CKPT.next or CKPT.prev when CKPT is missing.  Nothing that is not a regular file is moved. */
TOOL_UNUSED static void ckpt_save(const char *out, cf_trainer *t, const cf_train_state *st) {
    char prev[4200], next[4200];
    struct stat sb;
    int have = 0;
    snprintf(prev, sizeof prev, "%s.prev", out);
    snprintf(next, sizeof next, "%s.next", out);
    TRY(cf_checkpoint_save_trainer(next, t, st));   /* (with gradient lag, the gradient the next step applies) */
    if (!stat(out, &sb)) {
        if (!S_ISREG(sb.st_mode)) die("%s: is %s now, not a regular file: not moved", out, file_kind(sb.st_mode));
        have = 1;
    }
    if (have && (unlink(prev) == 0 || errno == ENOENT) && link(out, prev) == 0) {
        if (rename(next, out)) die("%s: cannot move the new checkpoint into place (%s)", out, strerror(errno));
        return;
    }
    tool_in_ckpt = 1;
    if (have && rename(out, prev)) die("%s: cannot keep the previous checkpoint (%s)", out, strerror(errno));
    if (rename(next, out)) die("%s: cannot move the new checkpoint into place (%s)", out, strerror(errno));
    tool_in_ckpt = 0;
    if (tool_pending_signal) tool_on_signal(tool_pending_signal);   /* (one that came meanwhile: the run ends now) */
}
/* CKPT, or when it is missing or damaged CKPT.next (a save ended between two renames) or
   CKPT.prev, loaded into net; the file read goes into from (n bytes), with a note on stderr
   when it was not CKPT */
TOOL_UNUSED static void ckpt_resume(const char *ckpt, cf_net *net, cf_train_state *st, int quiet, char *from, size_t n) {
    static const char *suffix[3] = {"", ".next", ".prev"};
    char main_err[8192] = "";
    int k;
    for (k = 0; k < 3; k++) {
        snprintf(from, n, "%s%s", ckpt, suffix[k]);
        if (k != 0 && access(from, R_OK)) continue;
        if (cf_checkpoint_load(from, net, st) == CF_OK) break;
        if (k == 0) snprintf(main_err, sizeof main_err, "%s", cf_failure_reason());
    }
    if (k == 3) die("%s", main_err);
    if (k > 0 && !quiet) fprintf(stderr, "cf-%s: %s; resuming from %s\n", tool_name, main_err, from);
}
/* an output file inside an output directory: not an input */
TOOL_UNUSED static void output_in_dir(const char *path) {
    const char *in = same_as_input(path);
    if (in) die("%s: is the same file as the input %s; it would be overwritten", path, in);
    remove_stale_tmp(path);
}
/* A generator's or converter's output directory: created when missing.  One that already
   holds files (a data set) is refused unless the user says what to do with them: --force
   (same-named files are replaced, the rest stay) or --append (files are added beside them,
   none replaced: output_new refuses one that exists).  One that holds an input is refused in
   any case: the same samples would be there twice.  One the run creates is removed again,
   with what the run wrote into it, when the run fails (added_undo). */
static int tool_write_force, tool_write_append;
static char tool_new_dir[4200], tool_new_top[4200];   /* the output directory when this run created it, and its topmost new parent */
static void added_undo(void);
TOOL_UNUSED static void output_data_dir(const char *what, const char *dir, int force, int append) {
    DIR *d;
    struct dirent *e;
    struct stat st, in;
    char p[4200];
    int i;
    if (force && append) die("--force and --append: one or the other (--force replaces same-named files, --append adds beside them and replaces none)");
    if (dir && stat(dir, &st)) {   /* a new directory, and maybe new parents (mkdir -p) */
        snprintf(tool_new_dir, sizeof tool_new_dir, "%s", dir);
        snprintf(tool_new_top, sizeof tool_new_top, "%s", dir);
        for (dir_of(tool_new_top, p, sizeof p); strcmp(p, tool_new_top) && stat(p, &st); dir_of(tool_new_top, p, sizeof p))
            snprintf(tool_new_top, sizeof tool_new_top, "%s", p);
        atexit(added_undo);
    }
    output_dir(what, dir);
    tool_write_force = force; tool_write_append = append;
    if (stat(dir, &st)) die("%s %s: %s", what, dir, strerror(errno));
    for (i = 0; i < tool_n_inputs; i++) {
        dir_of(tool_inputs[i].path, p, sizeof p);
        if (tool_inputs[i].dir != 2 && !stat(p, &in) && in.st_dev == st.st_dev && in.st_ino == st.st_ino)
            die("%s %s: holds the input %s: the same samples would be there twice (give another directory)", what, dir, tool_inputs[i].path);
    }
    if (force || append || !(d = opendir(dir))) return;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            die("%s %s: already holds files (%s, ...): give an empty or new directory, or --force to replace same-named files, "
                "or --append to add beside them", what, dir, e->d_name);
    closedir(d);
}
/* a file about to be written into such a directory: with --append, never one that exists
   (tool_append_advice: what the tool's flags offer instead) */
static const char *tool_append_advice = "give another --out, or --force to replace same-named files";
TOOL_UNUSED static void output_new(const char *path) {
    if (tool_write_append && !tool_write_force && access(path, F_OK) == 0)
        die("%s: exists: --append adds files and replaces none (%s)", path, tool_append_advice);
    output_in_dir(path);
}
/* The undo of a failed write: the files a run added to a data set (--append) or wrote into the
   directory it created are removed again when it fails before it has written them all
   (outputs_complete), and that directory too, so that a failed run leaves the set as it was,
   or no new directory.  (Only its own new files: with --append nothing was replaced.) */
static char **tool_added;
static int tool_n_added, tool_cap_added, tool_added_done;
static void added_undo(void) {
    int i;
    for (i = 0; i < tool_n_added; i++) { if (!tool_added_done) remove(tool_added[i]); free(tool_added[i]); }
    free(tool_added);
    tool_added = NULL; tool_n_added = 0;
    while (!tool_added_done && tool_new_dir[0]) {   /* the new directory, then its new parents (rmdir: only when empty) */
        char up[4200];
        if (rmdir(tool_new_dir) || !strcmp(tool_new_dir, tool_new_top)) break;
        dir_of(tool_new_dir, up, sizeof up);
        snprintf(tool_new_dir, sizeof tool_new_dir, "%s", up);
    }
    tool_new_dir[0] = 0;
}
TOOL_UNUSED static void output_added(const char *path) {   /* (callers in threads hold a critical section) */
    if (!tool_write_append && !tool_new_dir[0]) return;
    if (!tool_cap_added && !tool_new_dir[0]) atexit(added_undo);
    if (tool_n_added == tool_cap_added) {
        tool_cap_added = tool_cap_added ? 2 * tool_cap_added : 64;
        if (!(tool_added = (char **)realloc(tool_added, sizeof *tool_added * tool_cap_added))) die("out of memory");
    }
    if (!(tool_added[tool_n_added] = strdup(path))) die("out of memory");
    tool_n_added++;
}
TOOL_UNUSED static void outputs_complete(void) { tool_added_done = 1; }
/* A converter's output names, all claimed before anything is written (output_claim), then
   checked at once (output_claims_check): two inputs that would be written under one name are
   refused naming both (the second would replace the first, and the summary would count a
   sample that is not there); so is one input given twice. */
static char **tool_claims;   /* "path\0input" */
static int tool_n_claims, tool_cap_claims;
TOOL_UNUSED static void output_claim(const char *path, const char *from) {
    size_t lp = strlen(path), lf = strlen(from);
    if (tool_n_claims == tool_cap_claims) {
        tool_cap_claims = tool_cap_claims ? 2 * tool_cap_claims : 64;
        if (!(tool_claims = (char **)realloc(tool_claims, sizeof *tool_claims * tool_cap_claims))) die("out of memory");
    }
    if (!(tool_claims[tool_n_claims] = (char *)malloc(lp + lf + 2))) die("out of memory");
    memcpy(tool_claims[tool_n_claims], path, lp + 1); memcpy(tool_claims[tool_n_claims] + lp + 1, from, lf + 1);
    tool_n_claims++;
}
static int cmp_claim(const void *a, const void *b) {   /* by path, then by input */
    const char *x = *(char *const *)a, *y = *(char *const *)b;
    int c = strcmp(x, y);
    return c ? c : strcmp(x + strlen(x) + 1, y + strlen(y) + 1);
}
TOOL_UNUSED static void output_claims_check(void) {
    int i;
    if (tool_n_claims) qsort(tool_claims, (size_t)tool_n_claims, sizeof *tool_claims, cmp_claim);
    for (i = 1; i < tool_n_claims; i++) {
        const char *path = tool_claims[i], *a = tool_claims[i - 1] + strlen(tool_claims[i - 1]) + 1, *b = path + strlen(path) + 1;
        if (strcmp(path, tool_claims[i - 1])) continue;
        if (!strcmp(a, b) || same_file(a, b)) die("%s: is given twice (once is enough; nothing written)", a);
        die("%s and %s: would both be written as %s, the second replacing the first: convert them into separate directories, "
            "or rename one (nothing written)", a, b, path);
    }
    for (i = 0; i < tool_n_claims; i++) free(tool_claims[i]);
    free(tool_claims);
    tool_claims = NULL; tool_n_claims = tool_cap_claims = 0;
}
static int is_sample_file(const char *n);
/* The sample shape of a data set already in dir, for --append to match: a CosmoFlow set's cube
   side, channels and labels (*.tfrecord, *_data.npy), or a DeepCAM set's (data-*.npy) H, W and channels.
   0 when dir holds no sample of that kind. */
TOOL_UNUSED static int set_sample_shape(const char *dir, int climate, int shape[3]) {
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[4200];
    int found = 0;
    if (!d) return 0;
    while (!found && (e = readdir(d))) {
        size_t l = strlen(e->d_name);
        int is_climate = l > 9 && !strncmp(e->d_name, "data-", 5) && !strcmp(e->d_name + l - 4, ".npy");
        if (!is_sample_file(e->d_name) || is_climate != climate) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (climate) {
            cf_array a;
            if (cf_npy_read(path, &a) || a.ndim != 3) die("%s: a sample of the set --append adds to cannot be read: %s", path, cf_failure_reason());
            shape[0] = (int)a.shape[0]; shape[1] = (int)a.shape[1]; shape[2] = (int)a.shape[2];
            cf_array_free(&a);
        } else {
            cf_cosmo_sample smp;
            if (cf_cosmo_read(path, &smp)) die("%s: a sample of the set --append adds to cannot be read: %s", path, cf_failure_reason());
            shape[0] = smp.s; shape[1] = smp.c; shape[2] = smp.ny;
            cf_cosmo_free(&smp);
        }
        found = 1;
    }
    closedir(d);
    return found;
}
/* --append into a data set: the samples to add (of, e.g. the first input or "--size 32") have the
   set's shape (cube side, channels and labels, or H, W and channels), checked before the first
   file is written, in every writer that appends */
TOOL_UNUSED static void append_same_shape(const char *dir, int climate, const int shape[3], const char *of) {
    int have[3];
    if (!tool_write_append || !set_sample_shape(dir, climate, have)) return;
    if (climate && (have[0] != shape[0] || have[1] != shape[1] || have[2] != shape[2]))
        die("--append %s: its samples are %dx%dx%d (H, W, C), %s makes %dx%dx%d: one set holds samples of one shape (nothing written)", dir,
            have[0], have[1], have[2], of, shape[0], shape[1], shape[2]);
    if (!climate && (have[0] != shape[0] || have[1] != shape[1] || have[2] != shape[2]))
        die("--append %s: its samples are %d^3 x %d with %d labels, %s makes %d^3 x %d with %d: one set holds samples of one shape (nothing written)", dir,
            have[0], have[1], have[2], of, shape[0], shape[1], shape[2]);
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
/* A sample is its file's name without the format's ending (X.tfrecord, X.tfrecord.gz,
   X_data.npy): a directory holding one sample in two formats (a conversion written beside its
   records) would count it twice, and is refused naming both files */
static int cmp_stem(const void *a, const void *b) {
    const char *x = *(char *const *)a, *y = *(char *const *)b;
    int c = strcmp(x + strlen(x) + 1, y + strlen(y) + 1);
    return c ? c : strcmp(x, y);
}
static void same_sample_twice(const char *dir, char **v, int n) {
    static const char *ends[3] = {".tfrecord.gz", ".tfrecord", "_data.npy"};
    char **s = (char **)malloc(sizeof *s * (size_t)n);
    int i, k;
    if (!s) die("out of memory");
    for (i = 0; i < n; i++) {   /* "name\0stem" */
        const char *b = strrchr(v[i], '/') ? strrchr(v[i], '/') + 1 : v[i];
        size_t l = strlen(b);
        if (!(s[i] = (char *)malloc(2 * l + 2))) die("out of memory");
        memcpy(s[i], b, l + 1); memcpy(s[i] + l + 1, b, l + 1);
        for (k = 0; k < 3; k++)
            if (l > strlen(ends[k]) && !strcmp(b + l - strlen(ends[k]), ends[k])) { s[i][l + 1 + l - strlen(ends[k])] = 0; break; }
    }
    qsort(s, (size_t)n, sizeof *s, cmp_stem);
    for (i = 1; i < n; i++)
        if (!strcmp(s[i] + strlen(s[i]) + 1, s[i - 1] + strlen(s[i - 1]) + 1))
            die("%s: holds the sample %s twice, as %s and as %s (a conversion written beside its records?): keep one", dir,
                s[i] + strlen(s[i]) + 1, s[i - 1], s[i]);
    for (i = 0; i < n; i++) free(s[i]);
    free(s);
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
    same_sample_twice(dir, v, n);
    *n_out = n;
    return v;
}
TOOL_UNUSED static void free_samples(char **v, int n) { int i; for (i = 0; i < n; i++) free(v[i]); free(v); }


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
