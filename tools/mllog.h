/* MLPerf logging: one ':::MLLOG {json}' line per event, rank 0 only (docs/references.md,
   "MLPerf logging").  Every line is flushed and its write checked: a full disk ends the run
   with a message instead of leaving a log that stops short. */
#ifndef CF_MLLOG_H
#define CF_MLLOG_H
#include <sys/utsname.h>

static FILE *mll_file;
static const char *mll_path;

/* opens path for the run: a resumed run appends to its log; a new one keeps the previous
   log of that name as path.prev */
TOOL_UNUSED static void mll_open(const char *path, int resumed) {
    char prev[4200];
    struct stat st;
    int fd;
    if (!path || cf_dist_rank() != 0) return;
    if (!resumed && access(path, F_OK) == 0) {
        snprintf(prev, sizeof prev, "%s.prev", path);
        if (rename(path, prev)) die("--mllog %s: cannot keep the earlier log as %s (%s)", path, prev, strerror(errno));
    }
    /* checked again as it is opened (a link planted since the start, a FIFO): appended to
       only when it is a regular file and none of the run's inputs */
    if ((fd = open(path, O_WRONLY | O_CREAT | O_NONBLOCK | (resumed ? O_APPEND : O_TRUNC), 0666)) < 0) die("--mllog %s: %s", path, strerror(errno));
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) die("--mllog %s: is %s, not a regular file", path, file_kind(st.st_mode));
    if (input_like(&st)) die("--mllog %s: is the same file as the input %s; it would be written into", path, input_like(&st));
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    if (!(mll_file = fdopen(fd, resumed ? "a" : "w"))) die("--mllog %s: %s", path, strerror(errno));
    mll_path = path;
}
/* one event: type INTERVAL_START, INTERVAL_END or POINT_IN_TIME; value is JSON text; meta
   (JSON members, may be NULL) joins the file and line */
TOOL_UNUSED static void mll(const char *event, const char *key, const char *value, int lineno, const char *meta) {
    struct timespec t;
    if (!mll_file) return;
    clock_gettime(CLOCK_REALTIME, &t);
    fprintf(mll_file, ":::MLLOG {\"namespace\": \"\", \"time_ms\": %lld, \"event_type\": \"%s\", \"key\": \"%s\", \"value\": %s, "
            "\"metadata\": {\"file\": \"cf_train.c\", \"lineno\": %d%s%s}}\n",
            (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000, event, key, value, lineno, meta ? ", " : "", meta ? meta : "");
    if (fflush(mll_file) || ferror(mll_file)) die("--mllog %s: write failed (%s)", mll_path, strerror(errno));
}
#define MLL_EVENT(key, value) mll("POINT_IN_TIME", key, value, __LINE__, NULL)
#define MLL_START(key, meta) mll("INTERVAL_START", key, "null", __LINE__, meta)
#define MLL_END(key, meta) mll("INTERVAL_END", key, "null", __LINE__, meta)
/* a metric as a JSON number: a non-finite one is an error (JSON has no NaN) */
TOOL_UNUSED static const char *mll_number(char *buf, size_t n, double v) {
    if (!isfinite(v)) die("internal: a non-finite value %g for the MLPerf log", v);
    snprintf(buf, n, "%.6g", v);
    return buf;
}
TOOL_UNUSED static void mll_close(void) {
    if (mll_file && fclose(mll_file)) die("--mllog %s: write failed (%s)", mll_path, strerror(errno));
    mll_file = NULL;
}
TOOL_UNUSED static const char *mll_epoch(char *buf, size_t n, int e) { snprintf(buf, n, "\"epoch_num\": %d", e); return buf; }
/* ---- the run's constants (docs/references.md, "MLPerf logging"), from the resolved training
   settings: the submission and the batch, then the application's keys */
typedef struct { int seg, ranks, global_batch, train_samples, eval_samples, sync_bn; uint64_t seed; double dropout; } mll_run;
static void mll_cosmoflow(const cf_train_config *c, const mll_run *r) {
    static const char *opt_names[4] = {"sgd", "adam", "adamw", "lamb"};
    char buf[512];
    int i, n;
    double mx = 0;
    snprintf(buf, sizeof buf, "%g", c->l2); MLL_EVENT("opt_weight_decay", buf);
    snprintf(buf, sizeof buf, "%g", r->dropout >= 0 ? r->dropout : 0.5); MLL_EVENT("dropout", buf);
    snprintf(buf, sizeof buf, "\"%s\"", opt_names[c->optimizer]); MLL_EVENT("opt_name", buf);
    snprintf(buf, sizeof buf, "%g", c->base_batch > 0 ? c->lr * r->global_batch / c->base_batch : c->lr); MLL_EVENT("opt_base_learning_rate", buf);
    snprintf(buf, sizeof buf, "%d", c->warmup_epochs); MLL_EVENT("opt_learning_rate_warmup_epochs", buf);
    snprintf(buf, sizeof buf, "%g", c->base_batch > 0 ? r->global_batch / c->base_batch : 1.0); MLL_EVENT("opt_learning_rate_warmup_factor", buf);
    n = snprintf(buf, sizeof buf, "[");
    for (i = 0; i < c->n_decay; i++) { n += snprintf(buf + n, sizeof buf - n, "%s%g", i ? ", " : "", c->decay_epoch[i]); if (c->decay_factor[i] > mx) mx = c->decay_factor[i]; }
    snprintf(buf + n, sizeof buf - n, "]");
    MLL_EVENT("opt_learning_rate_decay_boundary_epochs", buf);
    snprintf(buf, sizeof buf, "%g", mx); MLL_EVENT("opt_learning_rate_decay_factor", buf);
}
static void mll_deepcam(const cf_train_config *c, const mll_run *r) {
    static const char *opt_names[4] = {"sgd", "Adam", "AdamW", "LAMB"};
    char buf[512];
    int i, n;
    MLL_EVENT("gradient_accumulation_frequency", "1");
    snprintf(buf, sizeof buf, "%d", r->sync_bn ? r->ranks : 1); MLL_EVENT("batchnorm_group_size", buf);
    snprintf(buf, sizeof buf, "\"%s\"", opt_names[c->optimizer]); MLL_EVENT("opt_name", buf);
    snprintf(buf, sizeof buf, "%g", c->lr); MLL_EVENT("opt_lr", buf);
    snprintf(buf, sizeof buf, "[%g, %g]", c->beta1, c->beta2); MLL_EVENT("opt_betas", buf);
    snprintf(buf, sizeof buf, "%g", c->eps); MLL_EVENT("opt_eps", buf);
    snprintf(buf, sizeof buf, "%g", c->weight_decay); MLL_EVENT("opt_weight_decay", buf);
    if (c->optimizer == CF_OPT_LAMB) {
        MLL_EVENT("opt_bias_correction", "true"); MLL_EVENT("opt_grad_averaging", "true");
        snprintf(buf, sizeof buf, "%g", c->max_grad_norm); MLL_EVENT("opt_max_grad_norm", buf);
    }
    MLL_EVENT("scheduler_type", c->sched.type == CF_SCHED_COSINE ? "\"cosine_annealing\"" : "\"multistep\"");
    snprintf(buf, sizeof buf, "%d", c->sched.warmup_steps); MLL_EVENT("scheduler_lr_warmup_steps", buf);
    snprintf(buf, sizeof buf, "%g", c->sched.warmup_factor); MLL_EVENT("scheduler_lr_warmup_factor", buf);
    if (c->sched.type == CF_SCHED_MULTISTEP) {
        n = snprintf(buf, sizeof buf, "[");
        for (i = 0; i < c->sched.n_milestones; i++) n += snprintf(buf + n, sizeof buf - n, "%s%ld", i ? ", " : "", c->sched.milestones[i]);
        snprintf(buf + n, sizeof buf - n, "]");
        MLL_EVENT("scheduler_milestones", buf);
        snprintf(buf, sizeof buf, "%g", c->sched.gamma); MLL_EVENT("scheduler_decay_rate", buf);
    } else {
        snprintf(buf, sizeof buf, "%ld", c->sched.t_max); MLL_EVENT("scheduler_t_max", buf);
        snprintf(buf, sizeof buf, "%g", c->sched.eta_min); MLL_EVENT("scheduler_eta_min", buf);
    }
}
/* the run's constants in the reference's order */
TOOL_UNUSED static void mll_run_start(const cf_train_config *c, const mll_run *r) {
    char buf[512];
    struct utsname u;
    uname(&u);
    snprintf(buf, sizeof buf, "%llu", (unsigned long long)r->seed); MLL_EVENT("seed", buf);
    snprintf(buf, sizeof buf, "%d", r->ranks); MLL_EVENT("number_of_ranks", buf);
    MLL_EVENT("number_of_nodes", "1"); MLL_EVENT("accelerators_per_node", "0");
    MLL_EVENT("submission_benchmark", r->seg ? "\"deepcam\"" : "\"cosmoflow\""); MLL_EVENT("submission_org", "\"cosmoflow.h\"");
    MLL_EVENT("submission_division", "\"closed\""); MLL_EVENT("submission_status", "\"onprem\"");
    snprintf(buf, sizeof buf, "\"%s-cpu\"", u.machine); MLL_EVENT("submission_platform", buf);
    MLL_END("init_stop", NULL);
    MLL_START("run_start", NULL);
    snprintf(buf, sizeof buf, "%d", r->global_batch); MLL_EVENT("global_batch_size", buf);
    snprintf(buf, sizeof buf, "%d", r->train_samples); MLL_EVENT("train_samples", buf);
    snprintf(buf, sizeof buf, "%d", r->eval_samples); MLL_EVENT("eval_samples", buf);
    MLL_START("staging_start", NULL);
    MLL_END("staging_stop", NULL);
    if (r->seg) mll_deepcam(c, r); else mll_cosmoflow(c, r);
}
/* an epoch's end: its evaluation's metric (and DeepCAM's training loss) */
TOOL_UNUSED static void mll_epoch_end(int e, int seg, double metric, double loss) {
    char meta[64], buf[64];
    mll_epoch(meta, sizeof meta, e);
    MLL_END("eval_stop", meta);
    MLL_END("epoch_stop", meta);
    mll("POINT_IN_TIME", seg ? "eval_accuracy" : "eval_error", mll_number(buf, sizeof buf, metric), __LINE__, meta);
    if (seg) mll("POINT_IN_TIME", "train_loss", mll_number(buf, sizeof buf, loss), __LINE__, meta);
}
TOOL_UNUSED static void mll_target_reached(int e, double metric) {
    char meta[64], buf[64];
    mll("POINT_IN_TIME", "target_accuracy_reached", mll_number(buf, sizeof buf, metric), __LINE__, mll_epoch(meta, sizeof meta, e));
}
TOOL_UNUSED static void mll_run_stop(int success) {
    mll("INTERVAL_END", "run_stop", "null", __LINE__, success ? "\"status\": \"success\"" : "\"status\": \"aborted\"");
    mll_close();
}
#endif
