/* cf-train: CosmoFlow regression and DeepCAM segmentation with the MLPerf HPC references'
   defaults, on one process or under mpirun (synchronous data parallelism: one gradient
   allreduce per step).  The application follows from the model: loss=softmax_ce is DeepCAM.
   Reads gzip or plain TFRecords and the submitters' numpy layout (CosmoFlow) and the DeepCAM
   numpy layout (data-*.npy, label-*.npy, stats_minval/maxval.npy), told apart by name.
   main() is setup, then per epoch: train, validate, save. */
#define CF_IMPLEMENTATION
#include "cosmoflow.h"
#include "tool.h"
#include "data.h"
#include "draw.h"
#include "mllog.h"
#include <sys/utsname.h>

enum { OPT_SGD, OPT_ADAM, OPT_ADAMW, OPT_LAMB };
static const char *opt_names[4] = {"sgd", "adam", "adamw", "lamb"};
static const char *opt_mlperf[4] = {"sgd", "Adam", "AdamW", "LAMB"};
static const char *transform_names[3] = {"mean", "log", "log-ratio"};   /* by apply_log */

typedef struct {
    const char *model, *train, *val, *out, *resume, *mllog, *stats, *png, *preset;
    int epochs, batch, has_shape, apply_log, n_train, n_val, progress, augment, warmup;
    long overlap;             /* 0: one blocking allreduce; else bucket size in floats */
    uint64_t seed;
    double target, lr, base_batch, momentum, l2, dropout;
    int n_decay; double decay_epoch[16], decay_factor[16];
    cf_shape shape;
    int loss;                 /* -1: the cfg's */
    int optimizer;            /* OPT_* ; -1: the application's default */
    double wd, beta1, beta2, eps, max_grad_norm, larc;
    cf_lr_sched sched; int sched_set;   /* per-step schedule (DeepCAM); else the epoch one */
    int sync_bn;              /* batch-norm statistics over all ranks */
    int staged;               /* each rank's --train holds its own share (staged per node) */
    int skip_nonfinite;       /* skip a batch whose gradient is not finite instead of stopping */
    int grad_lag;             /* 1: apply step t-1's averaged gradient at step t (2018 climate code) */
} options;

/* ---------------------------------------------------------------- flags */
static void parse_decay(const char *v, void *dst) {
    options *o = (options *)dst;
    const char *p = v;
    o->n_decay = 0;
    if (!strcmp(v, "none")) return;
    while (*p) {
        char *end;
        double e = strtod(p, &end), f;
        if (end == p || *end != ':' || o->n_decay == 16 || !isfinite(e) || e < 0) die("--decay: '%s' is not epoch:factor,...", v);
        p = end + 1;
        f = strtod(p, &end);
        if (end == p || !isfinite(f) || f <= 0) die("--decay: '%s' is not epoch:factor,... with factors > 0", v);
        o->decay_epoch[o->n_decay] = e; o->decay_factor[o->n_decay++] = f;
        p = end;
        if (*p == ',') p++; else if (*p) die("--decay: '%s' is not epoch:factor,...", v);
    }
}
static void parse_loss(const char *v, void *dst) {
    int *loss = (int *)dst;
    if (!strcmp(v, "mse")) *loss = CF_LOSS_MSE;
    else if (!strcmp(v, "l1")) *loss = CF_LOSS_L1;
    else die("--loss: '%s' is not mse or l1", v);
}
static void parse_optimizer(const char *v, void *dst) {
    int *opt = (int *)dst;
    for (*opt = 0; *opt < 4 && strcmp(v, opt_names[*opt]); (*opt)++) {}
    if (*opt == 4) die("--optimizer: '%s' is not sgd, adam, adamw or lamb", v);
}
static void parse_betas(const char *v, void *dst) {
    options *o = (options *)dst;
    if (sscanf(v, "%lf,%lf", &o->beta1, &o->beta2) != 2 || !(o->beta1 >= 0 && o->beta1 < 1 && o->beta2 >= 0 && o->beta2 < 1))
        die("--betas: '%s' is not B1,B2 in [0, 1)", v);
}
static void parse_schedule(const char *v, void *dst) {
    options *o = (options *)dst;
    o->sched_set = 1;
    if (!strcmp(v, "multistep")) o->sched.type = CF_SCHED_MULTISTEP;
    else if (!strcmp(v, "cosine")) o->sched.type = CF_SCHED_COSINE;
    else die("--lr-schedule: '%s' is not multistep or cosine", v);
}
static void parse_milestones(const char *v, void *dst) {
    cf_lr_sched *s = (cf_lr_sched *)dst;
    const char *q = v;
    s->n_milestones = 0;
    while (*q) {
        char *end;
        long m = strtol(q, &end, 10);
        if (end == q || m < 0 || s->n_milestones == 16 || (*end && *end != ',')) die("--milestones: '%s' is not a list of up to 16 steps", v);
        s->milestones[s->n_milestones++] = m;
        q = *end == ',' ? end + 1 : end;
    }
}
static void parse_transform(const char *v, void *dst) {
    int *t = (int *)dst, k;
    for (k = 0; k < 3 && strcmp(v, transform_names[k]); k++) {}
    if (k == 3) die("--transform: '%s' is not log, mean or log-ratio", v);
    *t = k;
}
static void parse_preset(const char *v, void *dst) { if (strcmp(v, "2018")) die("--preset: '%s' is not 2018", v); *(const char **)dst = v; }

#define NFLAGS 56
static tool_flag flags[NFLAGS];
static int n_flags;
static void flag_table(options *o) {
    tool_flag f[] = {
        {"--model", "M.cfg", FLAG_STR, &o->model, 0, 0, "network (default: the one in --resume's checkpoint)", NULL, NULL},
        {"--train", "DIR", FLAG_STR, &o->train, 0, 0, "training samples: *.tfrecord, *.tfrecord.gz (gzip or plain), *_data.npy, data-*.npy", NULL, NULL},
        {"--val", "DIR", FLAG_STR, &o->val, 0, 0, "validation samples, same formats", NULL, NULL},
        {"--out", "CKPT", FLAG_STR, &o->out, 0, 0, "checkpoint, written atomically after every epoch (the previous kept as CKPT.prev)", NULL, NULL},
        {"--epochs", "E", FLAG_INT, &o->epochs, 1, 1000000, "upper bound on epochs", NULL, NULL},
        {"--batch", "B", FLAG_INT, &o->batch, 1, 65536, "samples per rank per step", NULL, NULL},
        {"--seed", "K", FLAG_U64, &o->seed, 0, 0x7fffffff, "weights, shuffling, dropout", NULL, NULL},
        {"--resume", "CKPT", FLAG_STR, &o->resume, 0, 0, "continue from a checkpoint: its weights, optimizer state, epoch and data order", NULL, NULL},
        {"--target", "V", FLAG_DOUBLE, &o->target, 0, 1e9, "stop when validation MAE <= V (MLPerf CosmoFlow 0.124) or mean IoU >= V (DeepCAM 0.82); default: run all epochs", NULL, NULL},
        {"--input-shape", "S", FLAG_SHAPE, &o->shape, 0, 0, "CxDxHxW, replaces the cfg's input size (e.g. 4x32x32x32)", NULL, &o->has_shape},
        {"--lr", "X", FLAG_DOUBLE, &o->lr, 0, 100, "base learning rate", NULL, NULL},
        {"--base-batch", "N", FLAG_DOUBLE, &o->base_batch, 1, 1e9, "linear scaling: peak lr = lr * global batch / N", NULL, NULL},
        {"--warmup-epochs", "N", FLAG_INT, &o->warmup, 0, 1000000, "epochs from lr to the peak", NULL, NULL},
        {"--decay", "LIST", FLAG_CALL, o, 0, 0, "epoch:factor,... multipliers of the peak after the epoch (default 32:0.25,64:0.125; none: constant)", parse_decay, NULL},
        {"--momentum", "M", FLAG_DOUBLE, &o->momentum, 0, 0.9999, "SGD momentum, Keras form v = m v - lr g", NULL, NULL},
        {"--l2", "X", FLAG_DOUBLE, &o->l2, 0, 1e3, "L2 on the kernels marked l2=1 in the cfg", NULL, NULL},
        {"--dropout", "P", FLAG_DOUBLE, &o->dropout, 0, 0.999, "rate of every dropout layer (default: the cfg's)", NULL, NULL},
        {"--loss", "mse|l1", FLAG_CALL, &o->loss, 0, 0, "(default: the cfg's; CosmoFlow: mse)", parse_loss, NULL},
        {"--transform", "T", FLAG_CALL, &o->apply_log, 0, 0, "CosmoFlow input: log (log(1 + x), default), mean (x / mean(x)) or log-ratio", parse_transform, NULL},
        {"--no-log", NULL, FLAG_SET, &o->apply_log, 0, 0, "--transform mean (the reference's apply_log: False)", NULL, NULL},
        {"--log-ratio", NULL, FLAG_SET, &o->apply_log, 2, 0, "--transform log-ratio: log(1 + x) - log(1 + channel mean), log counts centred per sample", NULL, NULL},
        {"--augment", NULL, FLAG_SET, &o->augment, 1, 0, "a random one of the cube's 48 symmetries per training sample (the 2018 code; MLPerf: none)", NULL, NULL},
        {"--overlap", "N", FLAG_LONG, &o->overlap, 1, 1L << 30, "average gradients in buckets of >= N floats started during backward (default: one allreduce after it)", NULL, NULL},
        {"--n-train", "N", FLAG_INT, &o->n_train, 1, 1 << 30, "use only the first N training files (default: all)", NULL, NULL},
        {"--n-val", "N", FLAG_INT, &o->n_val, 1, 1 << 30, "use only the first N validation files (default: all)", NULL, NULL},
        {"--png", "DIR", FLAG_STR, &o->png, 0, 0, "after every epoch DIR/history.tsv and DIR/learning_curve.png (kept across --resume)", NULL, NULL},
        {"--mllog", "FILE", FLAG_STR, &o->mllog, 0, 0, "MLPerf HPC ':::MLLOG' lines (appended to on --resume)", NULL, NULL},
        {"--progress", NULL, FLAG_SET, &o->progress, 1, 0, "progress on stderr: a bar on a terminal, else a line a minute (default)", NULL, NULL},
        {"--no-progress", NULL, FLAG_SET, &o->progress, 0, 0, "no progress output", NULL, NULL},
        {NULL, NULL, FLAG_STR, NULL, 0, 0, "DeepCAM (models with loss=softmax_ce; defaults are the MLPerf reference's):", NULL, NULL},
        {"--stats", "DIR", FLAG_STR, &o->stats, 0, 0, "stats_minval.npy / stats_maxval.npy (default: --train or its parent)", NULL, NULL},
        {"--optimizer", "O", FLAG_CALL, &o->optimizer, 0, 0, "sgd, adam, adamw or lamb (default: lamb for DeepCAM, sgd for CosmoFlow)", parse_optimizer, NULL},
        {"--weight-decay", "X", FLAG_DOUBLE, &o->wd, 0, 10, "adam: L2 in the gradient; adamw, lamb: decoupled (default 0.01 DeepCAM, 0 CosmoFlow)", NULL, NULL},
        {"--betas", "B1,B2", FLAG_CALL, o, 0, 0, "Adam's betas (default 0.9,0.999)", parse_betas, NULL},
        {"--eps", "X", FLAG_DOUBLE, &o->eps, 0, 1, "Adam's epsilon", NULL, NULL},
        {"--max-grad-norm", "X", FLAG_DOUBLE, &o->max_grad_norm, 0, 1e9, "lamb: clip the global gradient norm (0: off)", NULL, NULL},
        {"--larc", "ETA", FLAG_DOUBLE, &o->larc, 0, 1e3, "scale each tensor's gradient by min(ETA |w|/|g|, 1) first (2018 climate code: 0.002)", NULL, NULL},
        {"--lr-schedule", "S", FLAG_CALL, o, 0, 0, "multistep or cosine, in optimizer steps (default: multistep for DeepCAM)", parse_schedule, NULL},
        {"--milestones", "LIST", FLAG_CALL, &o->sched, 0, 0, "multistep: steps, e.g. 800,1600 (default none)", parse_milestones, NULL},
        {"--decay-rate", "G", FLAG_DOUBLE, &o->sched.gamma, 0, 1, "multistep: the factor at each milestone", NULL, NULL},
        {"--warmup-steps", "N", FLAG_INT, &o->sched.warmup_steps, 0, 1 << 30, "linear warmup", NULL, NULL},
        {"--warmup-factor", "F", FLAG_DOUBLE, &o->sched.warmup_factor, 1, 1e6, "warmup from lr/F", NULL, NULL},
        {"--t-max", "N", FLAG_LONG, &o->sched.t_max, 1, 1L << 40, "cosine: period in steps", NULL, NULL},
        {"--eta-min", "X", FLAG_DOUBLE, &o->sched.eta_min, 0, 100, "cosine: the lowest lr", NULL, NULL},
        {"--grad-lag", "0|1", FLAG_INT, &o->grad_lag, 0, 1, "1: apply the previous step's averaged gradient, its allreduce overlapping this step (2018)", NULL, NULL},
        {"--preset", "2018", FLAG_CALL, &o->preset, 0, 0, "the 2018 papers' recipes (docs/tutorial.md; later flags override it) (default none)", parse_preset, NULL},
        {"--skip-nonfinite", NULL, FLAG_SET, &o->skip_nonfinite, 1, 0, "skip a batch whose loss or gradient is NaN/Inf, with a counted warning (default: stop, naming it)", NULL, NULL},
        {"--staged", NULL, FLAG_SET, &o->staged, 1, 0, "each rank's --train holds its own share of the training set, all of which it reads every epoch (data staged per node; data/README.md); default: every rank sees the whole set", NULL, NULL},
        {"--sync-bn", NULL, FLAG_SET, &o->sync_bn, 1, 0, "batch-norm statistics of the global batch (PyTorch's SyncBatchNorm; default per rank)", NULL, NULL},
    };
    n_flags = (int)(sizeof f / sizeof f[0]);
    memcpy(flags, f, sizeof f);
}
static void usage(void) {
    flag_help("usage: cf-train --train DIR --val DIR --out CKPT (--model M.cfg | --resume CKPT) [flags]", flags, n_flags,
              "stdout: one line per epoch 'epoch E train_loss L val_mae V lr X time T' (DeepCAM: val_miou)\n");
}

static void defaults(options *o) {
    memset(o, 0, sizeof *o);
    o->epochs = 128; o->batch = 4; o->apply_log = 1; o->lr = 0.001; o->base_batch = 64; o->warmup = 4; o->momentum = 0.9;
    o->dropout = -1; o->loss = -1; o->progress = 1;
    o->optimizer = -1; o->wd = -1; o->beta1 = 0.9; o->beta2 = 0.999; o->eps = 1e-6; o->max_grad_norm = 1.0;
    o->sched.type = CF_SCHED_MULTISTEP; o->sched.gamma = 0.1; o->sched.warmup_factor = 1; o->sched.t_max = 9000;
    parse_decay("32:0.25,64:0.125", o);
}

/* The 2018 papers' training recipes (docs/references.md, "The 2018 recipes").  CosmoFlow: Adam
   1e-4 at any batch (no scaling, no schedule), L1 loss, input divided by its mean, random
   flips and axis permutations.  Climate: LARC (eta 0.002, clip mode) around Adam 1e-4,
   gradient lag 1; the loss weights are in the model file. */
static void preset_2018(options *o, int seg) {
    o->optimizer = OPT_ADAM; o->lr = 1e-4; o->wd = 0;
    if (seg) { o->larc = 0.002; o->grad_lag = 1; return; }
    o->loss = CF_LOSS_L1; o->apply_log = 0; o->augment = 1;
    o->warmup = 0; o->n_decay = 0; o->base_batch = 0;
}
/* the model's cfg text: from --model, or from the checkpoint --resume names */
static char *model_text(const options *o) {
    char *text = NULL;
    cf_shape in;
    if (o->model) {
        cf_net net;
        TRY(cf_net_load_cfg(&net, o->model, NULL));
        text = strdup(net.cfg_text);
        cf_net_free(&net);
    } else if (o->resume) TRY(cf_checkpoint_cfg(o->resume, &text, &in));
    return text;
}
/* --preset 2018 first (its recipe depends on the application), then the other flags over it */
static void parse_flags(options *o, int argc, char **argv) {
    flag_table(o);
    flag_parse(argc, argv, 1, flags, n_flags, usage, NULL, 0);
    if (o->preset) {
        char *text = model_text(o);
        options given = *o;
        if (!text) die("--preset 2018: needs --model or --resume (the recipe depends on the application)");
        defaults(o);
        preset_2018(o, strstr(text, "softmax_ce") != NULL);
        free(text);
        flag_table(o);
        flag_parse(argc, argv, 1, flags, n_flags, usage, NULL, 0);   /* the flags given win over the recipe */
        o->preset = given.preset;
    }
    if (!o->train || !o->val || !o->out) die("needs --train, --val and --out (see --help)");
    if (!o->model && !o->resume) die("needs --model M.cfg, or --resume CKPT to take the model from the checkpoint");
    if (o->progress) o->progress = isatty(2) ? 1 : 2;
}

/* ---------------------------------------------------------------- the run */
typedef struct {
    options o;
    cf_net net;
    cf_train_state st;
    int rank, size, seg, n_classes, first_epoch, global_batch, steps, reached;
    char **train_files, **val_files;
    int n_train, n_val, n_train_files, n_val_files;
    int *order, *pred;
    float *dout, cmin[64], cmax[64];
    loader L;
    cf_grad_lag lag;
    double t_start;
} run;

/* ---- MLPerf logging (docs/references.md): the run's constants, then the application's keys */
static void mllog_cosmoflow(const run *R) {
    const options *o = &R->o;
    char buf[512];
    int i, n;
    double mx = 0;
    snprintf(buf, sizeof buf, "%g", o->l2); MLL_EVENT("opt_weight_decay", buf);
    snprintf(buf, sizeof buf, "%g", o->dropout >= 0 ? o->dropout : 0.5); MLL_EVENT("dropout", buf);
    snprintf(buf, sizeof buf, "\"%s\"", opt_names[o->optimizer]); MLL_EVENT("opt_name", buf);
    snprintf(buf, sizeof buf, "%g", o->base_batch > 0 ? o->lr * R->global_batch / o->base_batch : o->lr); MLL_EVENT("opt_base_learning_rate", buf);
    snprintf(buf, sizeof buf, "%d", o->warmup); MLL_EVENT("opt_learning_rate_warmup_epochs", buf);
    snprintf(buf, sizeof buf, "%g", o->base_batch > 0 ? R->global_batch / o->base_batch : 1.0); MLL_EVENT("opt_learning_rate_warmup_factor", buf);
    n = snprintf(buf, sizeof buf, "[");
    for (i = 0; i < o->n_decay; i++) { n += snprintf(buf + n, sizeof buf - n, "%s%g", i ? ", " : "", o->decay_epoch[i]); if (o->decay_factor[i] > mx) mx = o->decay_factor[i]; }
    snprintf(buf + n, sizeof buf - n, "]");
    MLL_EVENT("opt_learning_rate_decay_boundary_epochs", buf);
    snprintf(buf, sizeof buf, "%g", mx); MLL_EVENT("opt_learning_rate_decay_factor", buf);
}
static void mllog_deepcam(const run *R) {
    const options *o = &R->o;
    char buf[512];
    int i, n;
    MLL_EVENT("gradient_accumulation_frequency", "1");
    snprintf(buf, sizeof buf, "%d", o->sync_bn ? R->size : 1); MLL_EVENT("batchnorm_group_size", buf);
    snprintf(buf, sizeof buf, "\"%s\"", opt_mlperf[o->optimizer]); MLL_EVENT("opt_name", buf);
    snprintf(buf, sizeof buf, "%g", o->lr); MLL_EVENT("opt_lr", buf);
    snprintf(buf, sizeof buf, "[%g, %g]", o->beta1, o->beta2); MLL_EVENT("opt_betas", buf);
    snprintf(buf, sizeof buf, "%g", o->eps); MLL_EVENT("opt_eps", buf);
    snprintf(buf, sizeof buf, "%g", o->wd); MLL_EVENT("opt_weight_decay", buf);
    if (o->optimizer == OPT_LAMB) {
        MLL_EVENT("opt_bias_correction", "true"); MLL_EVENT("opt_grad_averaging", "true");
        snprintf(buf, sizeof buf, "%g", o->max_grad_norm); MLL_EVENT("opt_max_grad_norm", buf);
    }
    MLL_EVENT("scheduler_type", o->sched.type == CF_SCHED_COSINE ? "\"cosine_annealing\"" : "\"multistep\"");
    snprintf(buf, sizeof buf, "%d", o->sched.warmup_steps); MLL_EVENT("scheduler_lr_warmup_steps", buf);
    snprintf(buf, sizeof buf, "%g", o->sched.warmup_factor); MLL_EVENT("scheduler_lr_warmup_factor", buf);
    if (o->sched.type == CF_SCHED_MULTISTEP) {
        n = snprintf(buf, sizeof buf, "[");
        for (i = 0; i < o->sched.n_milestones; i++) n += snprintf(buf + n, sizeof buf - n, "%s%ld", i ? ", " : "", o->sched.milestones[i]);
        snprintf(buf + n, sizeof buf - n, "]");
        MLL_EVENT("scheduler_milestones", buf);
        snprintf(buf, sizeof buf, "%g", o->sched.gamma); MLL_EVENT("scheduler_decay_rate", buf);
    } else {
        snprintf(buf, sizeof buf, "%ld", o->sched.t_max); MLL_EVENT("scheduler_t_max", buf);
        snprintf(buf, sizeof buf, "%g", o->sched.eta_min); MLL_EVENT("scheduler_eta_min", buf);
    }
}
/* the run's constants, in the reference's order (docs/references.md) */
static void mllog_run_start(const run *R) {
    char buf[512];
    struct utsname u;
    uname(&u);
    snprintf(buf, sizeof buf, "%llu", (unsigned long long)R->o.seed); MLL_EVENT("seed", buf);
    snprintf(buf, sizeof buf, "%d", R->size); MLL_EVENT("number_of_ranks", buf);
    MLL_EVENT("number_of_nodes", "1"); MLL_EVENT("accelerators_per_node", "0");
    MLL_EVENT("submission_benchmark", R->seg ? "\"deepcam\"" : "\"cosmoflow\""); MLL_EVENT("submission_org", "\"cosmoflow.h\"");
    MLL_EVENT("submission_division", "\"closed\""); MLL_EVENT("submission_status", "\"onprem\"");
    snprintf(buf, sizeof buf, "\"%s-cpu\"", u.machine); MLL_EVENT("submission_platform", buf);
    MLL_END("init_stop", NULL);
    MLL_START("run_start", NULL);
    snprintf(buf, sizeof buf, "%d", R->global_batch); MLL_EVENT("global_batch_size", buf);
    snprintf(buf, sizeof buf, "%d", R->steps * R->global_batch); MLL_EVENT("train_samples", buf);
    snprintf(buf, sizeof buf, "%d", R->n_val); MLL_EVENT("eval_samples", buf);
    MLL_START("staging_start", NULL);
    MLL_END("staging_stop", NULL);
    if (R->seg) mllog_deepcam(R); else mllog_cosmoflow(R);
}
static void mllog_run_stop(const run *R) {
    char buf[64];
    snprintf(buf, sizeof buf, "\"status\": \"%s\"", R->reached || R->o.target <= 0 ? "success" : "aborted");
    mll("INTERVAL_END", "run_stop", "null", __LINE__, buf);
    mll_close();
}
static const char *epoch_meta(char *buf, size_t n, int e) { snprintf(buf, n, "\"epoch_num\": %d", e); return buf; }

/* ---- setup */
/* the application's defaults and the flags that change the model (loss, dropout) */
static void apply_model_flags(run *R) {
    options *o = &R->o;
    cf_net *net = &R->net;
    int i;
    R->seg = net->loss == CF_LOSS_SOFTMAX_CE;
    R->n_classes = net->layers[net->n_layers - 1].out.c;
    if (o->optimizer < 0) o->optimizer = R->seg ? OPT_LAMB : OPT_SGD;
    if (o->wd < 0) o->wd = R->seg ? 0.01 : 0.0;
    if (R->seg) o->sched_set = 1;   /* DeepCAM counts the schedule in steps */
    o->sched.base_lr = o->lr;
    if (R->seg && net->input.d != 1) die("%s: a segmentation model must be 2-D (CxHxW)", net->cfg_name);
    if (!R->seg && (net->input.d != net->input.h || net->input.h != net->input.w))
        die("%s: CosmoFlow input must be a cube, got %dx%dx%dx%d", net->cfg_name, net->input.c, net->input.d, net->input.h, net->input.w);
    if (o->loss >= 0 && !R->seg) net->loss = o->loss;
    for (i = 0; i < net->n_layers; i++) if (o->dropout >= 0 && net->layers[i].type == CF_L_DROPOUT) net->layers[i].rate = (float)o->dropout;
}
/* --resume: the newest valid one of CKPT.next (a crash before its rename), CKPT, CKPT.prev */
static void resume(run *R) {
    static const char *suffix[3] = {".next", "", ".prev"};
    char path[4096], main_err[1100] = "";
    int k, loaded = -1;
    for (k = 0; k < 3 && loaded < 0; k++) {
        snprintf(path, sizeof path, "%s%s", R->o.resume, suffix[k]);
        if (k != 1 && access(path, R_OK)) continue;
        if (cf_checkpoint_load(path, &R->net, &R->st) == CF_OK) loaded = k;
        else if (k == 1) snprintf(main_err, sizeof main_err, "%s", cf_failure_reason());
    }
    if (loaded < 0) die("%s", main_err);
    if (loaded == 2 && R->rank == 0) fprintf(stderr, "cf-train: %s; resuming from %s\n", main_err, path);
    R->first_epoch = (int)R->st.epoch + 1;
    R->o.seed = R->st.seed;
}
static void setup_model(run *R) {
    options *o = &R->o;
    const cf_shape *shape = o->has_shape ? &o->shape : NULL;
    if (o->model) TRY(cf_net_load_cfg(&R->net, o->model, shape));
    else TRY(cf_checkpoint_model(o->resume, &R->net, shape));
    apply_model_flags(R);
    cf_net_init(&R->net, o->seed);
    R->st.seed = o->seed;
    R->first_epoch = 1;
    if (o->resume) resume(R);
    cf_dist_bcast(R->net.params, R->net.n_params);   /* rank 0's weights everywhere */
    if (o->sync_bn) TRY(cf_net_sync_bn(&R->net, cf_dist_sum_reduce, NULL));
}
/* every rank must see the same files, or the collectives would not match */
static void same_on_every_rank(int n_train, int n_val) {
    double v[4] = {n_train, n_val, -n_train, -n_val};
    cf_dist_allreduce_max_d(v, 4);
    if (v[0] != n_train || v[1] != n_val || -v[2] != n_train || -v[3] != n_val)
        die("the ranks see different numbers of training (%d here, %g to %g) or validation files (%d here, %g to %g): give every rank the same directories (with --staged: the same number of files)",
            n_train, -v[2], v[0], n_val, -v[3], v[1]);
}
static void setup_data(run *R) {
    options *o = &R->o;
    cf_net *net = &R->net;
    R->train_files = list_samples(o->train, &R->n_train_files);
    R->val_files = list_samples(o->val, &R->n_val_files);
    R->n_train = o->n_train && o->n_train < R->n_train_files ? o->n_train : R->n_train_files;
    R->n_val = o->n_val && o->n_val < R->n_val_files ? o->n_val : R->n_val_files;
    same_on_every_rank(R->n_train, R->n_val);
    R->global_batch = o->batch * R->size;
    R->steps = o->staged ? R->n_train / o->batch : R->n_train / R->global_batch;
    if (R->steps < 1) die("%s: %d training files are fewer than one %sbatch of %d", o->train, R->n_train, o->staged ? "" : "global ",
                          o->staged ? o->batch : R->global_batch);
    if (!(R->order = (int *)malloc(sizeof(int) * (R->n_train + R->n_val + 1))) ||
        !(R->dout = (float *)malloc(sizeof(float) * (size_t)o->batch * net->n_outputs)) ||
        !(R->pred = (int *)malloc(sizeof(int) * (size_t)net->n_targets))) die("out of memory");
    if (R->seg) {
        if (net->input.c > 64) die("%s: more than 64 input channels", net->cfg_name);
        TRY(cf_climate_stats(o->stats ? o->stats : o->train, R->cmin, R->cmax, net->input.c));
        loader_init_climate(&R->L, R->train_files, net->input.c, net->input.h, net->input.w, R->n_classes, o->batch, R->cmin, R->cmax);
    } else loader_init_cosmo(&R->L, R->train_files, net->input.d, net->input.c, net->n_outputs, o->batch, o->apply_log);
}
/* Every output is checked before any work (tools/tool.h): the checkpoint and its .next and
   .prev, the log and the pictures' directory may not be any input.  The one exception is
   --resume CKPT --out CKPT, continuing a run in place: the checkpoint it started from is
   kept as CKPT.prev. */
static void check_outputs(const run *R) {
    const options *o = &R->o;
    char p[4200];
    input_path(o->model); input_path(o->train); input_path(o->val); input_path(o->stats);
    if (o->resume && !same_file(o->resume, o->out)) input_path(o->resume);
    output_file("--out", o->out);
    snprintf(p, sizeof p, "%s.next", o->out); output_file("--out", p);
    snprintf(p, sizeof p, "%s.prev", o->out); output_file("--out", p);
    input_path(o->resume); input_path(o->out);   /* neither checkpoint may be the log or a picture */
    output_file("--mllog", o->mllog);
    if (o->png) {
        output_dir("--png", o->png);
        snprintf(p, sizeof p, "%s/history.tsv", o->png); output_in_dir(p);
        snprintf(p, sizeof p, "%s/learning_curve.png", o->png); output_in_dir(p);
    }
}
/* the record the checkpoint keeps of how it was trained (cf-check --info shows it; cf-eval
   takes the input transform from it) */
static void record_run(run *R) {
    const options *o = &R->o;
    snprintf(R->st.meta, sizeof R->st.meta, "optimizer=%s\nlr=%g\nweight_decay=%g\nmomentum=%g\nbatch=%d\ntransform=%s\nmetric=%s\n",
             opt_names[o->optimizer], o->lr, o->optimizer == OPT_SGD ? o->l2 : o->wd, o->momentum, o->batch,
             R->seg ? "minmax" : transform_names[o->apply_log], R->seg ? "val_miou" : "val_mae");
}
static int target_met(const run *R, double metric) {
    return R->o.target > 0 && (R->seg ? metric >= R->o.target : metric <= R->o.target);
}

/* ---- one epoch */
/* on = 1: a bar redrawn in place (a terminal); 2: a plain line at most once a minute (batch
   job logs, which a bar would fill with carriage returns); 0: nothing */
static void progress(int on, int epoch, int done, int total, double t0) {
    static double last;
    double el = now_s() - t0, rate = done / (el > 0 ? el : 1e-9);
    int w = 30, k, fill = total ? done * w / total : 0;
    if (!on) return;
    if (on == 2) {
        if (now_s() - last < 60 || done == total) return;
        last = now_s();
        fprintf(stderr, "cf-train: epoch %d: %d/%d samples, %.1f samples/s, %.0f s left in the epoch\n", epoch, done, total, rate,
                rate > 0 ? (total - done) / rate : 0.0);
        return;
    }
    fprintf(stderr, "\repoch %d [", epoch);
    for (k = 0; k < w; k++) fputc(k < fill ? '=' : ' ', stderr);
    fprintf(stderr, "] %d/%d  %.1f samples/s  %.0f s left ", done, total, rate, rate > 0 ? (total - done) / rate : 0.0);
    if (done == total) fputs("\r\033[K", stderr);
    fflush(stderr);
}

/* A NaN or Inf: stop before it reaches a checkpoint, saying where it appeared first */
static void nonfinite_die(run *R, int epoch, int step, double loss) {
    cf_net *net = &R->net;
    char files[2048], where[256];
    int lg = cf_net_first_nonfinite_param(net, 0), lp = cf_net_first_nonfinite_param(net, 1), lo;
    /* the same batch again with every output kept, to find the first layer that is not finite */
    net->keep_acts = 1;
    lo = cf_net_forward(net, net->x, net->batch) ? cf_net_first_nonfinite_output(net) : -1;
    if (lp >= 0) snprintf(where, sizeof where, "layer %d (%s, line %d)'s parameters are already not finite", lp, cf_layer_type_name(net->layers[lp].type), net->layers[lp].line);
    else if (lo >= 0) snprintf(where, sizeof where, "first non-finite output at layer %d (%s, cfg line %d)", lo, cf_layer_type_name(net->layers[lo].type), net->layers[lo].line);
    else if (!isfinite(loss)) snprintf(where, sizeof where, "every layer's output is finite: the loss itself%s", R->seg ? " (a label outside the classes?)" : "");
    else snprintf(where, sizeof where, "first non-finite gradient at layer %d (%s, cfg line %d)", lg, lg >= 0 ? cf_layer_type_name(net->layers[lg].type) : "?", lg >= 0 ? net->layers[lg].line : 0);
    die("epoch %d step %d: loss %g, %s; batch: %s; the last checkpoint %s is untouched (--skip-nonfinite skips such batches)",
        epoch, step, loss, where, loader_batch_files(&R->L, R->L.B, files, sizeof files), R->o.out);
}

/* The reference's schedule (docs/references.md, "Learning-rate schedule"), epoch e from 0:
   warm-up lr + e (peak - lr) / n_warmup for e < n_warmup, then peak times the factor of the
   largest decay epoch k with k < e (strictly), 1 if none. */
static double lr_at(const options *o, int e, int global_batch) {
    double peak = o->base_batch > 0 ? o->lr * global_batch / o->base_batch : o->lr, f = 1, best = -1;
    int i;
    if (e < o->warmup) return o->lr + e * (peak - o->lr) / o->warmup;
    for (i = 0; i < o->n_decay; i++) if (o->decay_epoch[i] < e && o->decay_epoch[i] > best) { best = o->decay_epoch[i]; f = o->decay_factor[i]; }
    return peak * f;
}
/* one update with the chosen optimizer; t counts updates from 1 */
static void optimizer_step(const options *o, cf_net *net, double lr) {
    uint64_t t = net->step + 1;
    if (o->larc > 0) cf_larc_scale(net, (float)o->larc);
    switch (o->optimizer) {
    case OPT_SGD: cf_sgd_step(net, (float)lr, (float)o->momentum, (float)o->l2); break;
    case OPT_ADAM: cf_adam_step(net, (float)lr, (float)o->beta1, (float)o->beta2, (float)o->eps, (float)o->wd, 0, t); break;
    case OPT_ADAMW: cf_adam_step(net, (float)lr, (float)o->beta1, (float)o->beta2, (float)o->eps, (float)o->wd, 1, t); break;
    default: cf_lamb_step(net, (float)lr, (float)o->beta1, (float)o->beta2, (float)o->eps, (float)o->wd, (float)o->max_grad_norm, t); break;
    }
}
/* backward and the gradient averaging; 0 when there is nothing to apply yet (gradient lag) */
static int backward_averaged(run *R) {
    cf_net *net = &R->net;
    int have;
    if (R->o.grad_lag) {   /* the previous step's averaged gradient; this one's reduction starts */
        cf_net_backward(net, R->dout);
        if ((have = cf_dist_grad_lag(net, &R->lag)) < 0) die("%s", cf_failure_reason());
        return have;
    }
    if (R->o.overlap) {   /* reductions start while backward still runs */
        cf_dist_overlap_begin(net, (size_t)R->o.overlap);
        cf_net_backward(net, R->dout);
        cf_dist_overlap_end(net);
    } else {
        cf_net_backward(net, R->dout);
        cf_dist_allreduce_mean(net->grads, net->n_params);
    }
    return 1;
}
/* Trains one epoch; returns this rank's mean loss, and the epoch's learning rate in *lr */
static double train_epoch(run *R, int e, double *lr) {
    options *o = &R->o;
    cf_net *net = &R->net;
    double t0 = now_s(), sum = 0;
    int n_local = o->staged   /* its own files, in its own order; else its share of one global permutation */
                  ? cf_epoch_shard(R->order, R->n_train, cf_hash64(o->seed + 1000003u * (uint64_t)R->rank), e, 0, 1, 1, 1)
                  : cf_epoch_shard(R->order, R->n_train, o->seed, e, R->rank, R->size, 1, 1);
    int s, nb, skipped = 0;
    float *x, *y;
    *lr = R->seg ? cf_lr_sched_at(&o->sched, net->step) : lr_at(o, e - 1, R->global_batch);
    if (n_local > R->steps * o->batch) n_local = R->steps * o->batch;   /* whole batches only, as the reference */
    net->training = 1; net->bn_train = 1;
    R->L.files = R->train_files;
    R->L.augment = o->augment; R->L.aug_seed = cf_hash64(o->seed * 31 + (uint64_t)e);
    loader_begin(&R->L, R->order, n_local);
    for (s = 0; s < R->steps; s++) {
        double loss;
        loader_next(&R->L, &x, &y, &nb);
        if (nb != o->batch) die("internal: short training batch");
        if (!cf_net_forward(net, x, o->batch)) die("%s", cf_failure_reason());
        loss = cf_net_loss(net, y, R->dout);
        if (!isfinite(loss) && !o->skip_nonfinite) nonfinite_die(R, e, s + 1, loss);
        cf_net_zero_grad(net);
        if (!backward_averaged(R)) { net->step++; sum += loss; continue; }
        /* the averaged gradient is the same on every rank, so every rank decides alike */
        if (cf_net_first_nonfinite_param(net, 0) >= 0) {
            if (!o->skip_nonfinite) nonfinite_die(R, e, s + 1, loss);
            skipped++;
            if (R->rank == 0) fprintf(stderr, "cf-train: epoch %d step %d: non-finite gradient (layer %d), batch skipped (%d so far)\n",
                                      e, s + 1, cf_net_first_nonfinite_param(net, 0), skipped);
            net->step++;
            continue;
        }
        if (o->sched_set) *lr = cf_lr_sched_at(&o->sched, net->step);   /* per optimizer step */
        optimizer_step(o, net, *lr);
        net->step++;
        sum += loss;
        progress(o->progress, e, (s + 1) * R->global_batch, R->steps * R->global_batch, t0);
    }
    return sum / R->steps;
}

/* Validation: every file once, in order, sharded over ranks; the mean absolute error
   (CosmoFlow) or the mean over samples of the per-sample IoU (DeepCAM, MLPerf's metric).  A
   sample whose error is not finite is an error that names it, never a NaN in the log. */
static double validate(run *R) {
    cf_net *net = &R->net;
    double sums[2] = {0, 0};
    int n_local, nb, k;
    float *x, *y;
    const float *out;
    net->training = 0; net->bn_train = 0;
    /* the reference averages the batch-norm running statistics over ranks before validating */
    if (net->n_stats) cf_dist_allreduce_mean(net->stats, net->n_stats);
    R->L.augment = 0;
    n_local = cf_epoch_shard(R->order, R->n_val, 0, 0, R->rank, R->size, 0, 0);
    R->L.files = R->val_files;
    loader_begin(&R->L, R->order, n_local);
    for (;;) {
        loader_next(&R->L, &x, &y, &nb);
        if (!nb) break;
        if (!(out = cf_net_forward(net, x, nb))) die("%s", cf_failure_reason());
        for (k = 0; k < nb; k++) {
            int j;
            if (R->seg) {
                cf_argmax_classes(R->pred, out + (size_t)k * net->n_outputs, R->n_classes, (size_t)net->n_targets);
                sums[0] += cf_iou_sample(R->pred, y + (size_t)k * net->n_targets, (size_t)net->n_targets, R->n_classes);
                sums[1] += 1;
            } else {
                for (j = 0; j < net->n_outputs; j++) sums[0] += fabs((double)out[(size_t)k * net->n_outputs + j] - y[(size_t)k * net->n_outputs + j]);
                sums[1] += net->n_outputs;
            }
            if (!isfinite(sums[0])) die("validation: %s gives a non-finite %s (an input or label out of range, or a diverged model)",
                                        loader_file(&R->L, k), R->seg ? "IoU" : "error");
        }
    }
    cf_dist_allreduce_sum_d(sums, 2);
    return sums[0] / sums[1];
}

/* The learning curve: DIR/history.tsv keeps one line per epoch (epochs at or after this one,
   left by a run that was resumed from an earlier checkpoint, are dropped), and
   DIR/learning_curve.png is redrawn from it: training loss left, validation metric right. */
static void learning_curve(const char *dir, int epoch, double loss, double metric, const char *metric_name) {
    enum { MAXE = 100000 };
    static double ep[MAXE], lo[MAXE], me[MAXE];
    char path[4096], title[64], line_[256];
    int n = 0, k;
    FILE *f;
    cf_atomic_file af;
    snprintf(path, sizeof path, "%s/history.tsv", dir);
    if ((f = fopen(path, "r"))) {
        while (n < MAXE - 1 && fgets(line_, sizeof line_, f)) {
            double a, b, c;
            if (sscanf(line_, "%lf %lf %lf", &a, &b, &c) == 3 && a < epoch) { ep[n] = a; lo[n] = b; me[n] = c; n++; }
        }
        fclose(f);
    }
    ep[n] = epoch; lo[n] = loss; me[n] = metric; n++;
    TRY(cf_atomic_open(&af, path));
    snprintf(line_, sizeof line_, "# epoch train_loss %s\n", metric_name);
    cf_atomic_write(&af, line_, strlen(line_));
    for (k = 0; k < n; k++) { snprintf(line_, sizeof line_, "%.0f %.9g %.9g\n", ep[k], lo[k], me[k]); cf_atomic_write(&af, line_, strlen(line_)); }
    TRY(cf_atomic_commit(&af));
    {
        canvas c = canvas_new(760, 300);
        snprintf(title, sizeof title, "%s", metric_name);
        for (k = 0; title[k]; k++) if (title[k] == '_') title[k] = ' ';
        plot_panel(&c, 20, 40, 280, 220, ep, lo, n, "TRAIN LOSS", 0xc03030);
        plot_panel(&c, 400, 40, 280, 220, ep, me, n, title, 0x1f60c0);
        snprintf(path, sizeof path, "%s/learning_curve.png", dir);
        canvas_save(&c, path);
    }
}
/* The new checkpoint is complete on disk (CKPT.next, itself written atomically) before the
   previous one moves to CKPT.prev: a crash or a full disk at any moment leaves a valid CKPT
   or CKPT.prev, and --resume takes either. */
static void save_checkpoint(run *R, int e) {
    const char *out = R->o.out;
    char prev[4200], next[4200];
    if (R->rank) return;
    snprintf(prev, sizeof prev, "%s.prev", out);
    snprintf(next, sizeof next, "%s.next", out);
    if (cf_net_first_nonfinite_param(&R->net, 1) >= 0)
        die("epoch %d: layer %d's parameters are not finite; no checkpoint written, the last one %s is untouched",
            e, cf_net_first_nonfinite_param(&R->net, 1), out);
    TRY(cf_checkpoint_save(next, &R->net, &R->st));
    if (access(out, F_OK) == 0 && rename(out, prev)) die("%s: cannot keep the previous checkpoint (%s)", out, strerror(errno));
    if (rename(next, out)) die("%s: cannot move the new checkpoint into place (%s)", out, strerror(errno));
}
/* After an epoch: the MLPerf lines, the checkpoint, the epoch line, the learning curve */
static void end_epoch(run *R, int e, double loss, double metric, double lr, double t0) {
    char meta[64], buf[64], lbuf[64];
    const char *name = R->seg ? "val_miou" : "val_mae";
    epoch_meta(meta, sizeof meta, e);
    MLL_END("eval_stop", meta);
    MLL_END("epoch_stop", meta);
    mll("POINT_IN_TIME", R->seg ? "eval_accuracy" : "eval_error", mll_number(buf, sizeof buf, metric), __LINE__, meta);
    if (R->seg) mll("POINT_IN_TIME", "train_loss", mll_number(lbuf, sizeof lbuf, loss), __LINE__, meta);
    R->st.step = R->net.step; R->st.epoch = (uint64_t)e; R->st.seed = R->o.seed; R->st.best = metric;
    save_checkpoint(R, e);
    if (R->rank == 0) {
        printf("epoch %d train_loss %.6f %s %.6f lr %.6g time %.1f\n", e, loss, name, metric, lr, now_s() - t0);
        if (R->o.png) learning_curve(R->o.png, e, loss, metric, name);
        if (fflush(stdout) || ferror(stdout)) die("stdout: write failed (%s)", strerror(errno));
    }
    if ((R->reached = target_met(R, metric)) && R->seg) mll("POINT_IN_TIME", "target_accuracy_reached", buf, __LINE__, meta);
}

static void setup(run *R, int argc, char **argv) {
    options *o = &R->o;
    cf_net *net = &R->net;
    char shp[64];
    if (cf_dist_init(&argc, &argv)) die("%s", cf_failure_reason());
    check_launch();
    R->rank = cf_dist_rank(); R->size = cf_dist_size();
    if (R->rank) o->progress = 0;
    check_outputs(R);
    mll_open(o->mllog, o->resume != NULL);
    MLL_EVENT("cache_clear", "true");
    MLL_START("init_start", NULL);
    setup_model(R);
    setup_data(R);
    record_run(R);
    memset(&R->lag, 0, sizeof R->lag);
    snprintf(shp, sizeof shp, net->input.d == 1 ? "%dx%dx%d" : "%dx%dx%dx%d", net->input.c, net->input.d == 1 ? net->input.h : net->input.d,
             net->input.d == 1 ? net->input.w : net->input.h, net->input.w);
    if (R->rank == 0)
        fprintf(stderr, "cf-train: %d rank%s x batch %d = global batch %d; %d training%s, %d validation files; %s, input %s, %zu parameters\n",
                R->size, R->size > 1 ? "s" : "", o->batch, R->global_batch, R->n_train, o->staged ? " (per rank, staged)" : "", R->n_val,
                net->cfg_name, shp, net->n_params);
    mllog_run_start(R);
}
static void finish(run *R, int e) {
    mllog_run_stop(R);
    if (R->rank == 0) fprintf(stderr, "cf-train: %d epochs in %.1f s, checkpoint %s\n", e - R->first_epoch, now_s() - R->t_start, R->o.out);
    loader_free(&R->L);
    free(R->order); free(R->dout); free(R->pred);
    cf_dist_grad_lag_free(&R->lag);
    free_samples(R->train_files, R->n_train_files); free_samples(R->val_files, R->n_val_files);
    cf_net_free(&R->net);
    cf_dist_finalize();
}

int main(int argc, char **argv) {
    static run R;
    char meta[64];
    int e;
    tool_init(argc, argv, "train");
    defaults(&R.o);
    parse_flags(&R.o, argc, argv);
    setup(&R, argc, argv);
    R.t_start = now_s();
    /* a run resumed from a checkpoint that already met the target is done (MLPerf's own
       reference trains one more epoch there) */
    R.reached = R.first_epoch > 1 && target_met(&R, R.st.best);
    if (R.reached && R.rank == 0) fprintf(stderr, "cf-train: the checkpoint's %s %g already meets --target %g: no epoch to train\n",
                                          R.seg ? "val_miou" : "val_mae", R.st.best, R.o.target);
    for (e = R.first_epoch; e <= R.o.epochs && !R.reached; e++) {
        double t0 = now_s(), lr, loss, metric;
        MLL_START("epoch_start", epoch_meta(meta, sizeof meta, e));
        loss = train_epoch(&R, e, &lr);
        MLL_START("eval_start", meta);
        metric = validate(&R);
        cf_dist_allreduce_sum_d(&loss, 1);
        end_epoch(&R, e, loss / R.size, metric, lr, t0);
    }
    finish(&R, e);
    return 0;
}
