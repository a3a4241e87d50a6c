/* cf-train: CosmoFlow regression and DeepCAM segmentation with the MLPerf HPC references'
   defaults, on one process or under mpirun (synchronous data parallelism: one gradient
   allreduce per step).  The application follows from the model: loss=softmax_ce is DeepCAM.
   Reads gzip or plain TFRecords and the submitters' numpy layout (CosmoFlow) and the DeepCAM
   numpy layout (data-*.npy, label-*.npy, stats_minval/maxval.npy), told apart by name. */
#include "tool.h"
#include "draw.h"
#include <unistd.h>
#include <sys/utsname.h>

typedef struct {
    const char *model, *train, *val, *out, *resume, *mllog;
    int epochs, batch, has_shape, apply_log, n_train, n_val, progress, augment;
    long overlap;             /* 0: one blocking allreduce; else bucket size in floats */
    uint64_t seed;
    double target, lr, base_batch, warmup, momentum, l2, dropout;
    int n_decay; double decay_epoch[16], decay_factor[16];
    cf_shape shape;
    int loss;                 /* -1: the cfg's */
    int optimizer;            /* OPT_* ; -1: the application's default */
    double wd, beta1, beta2, eps, max_grad_norm, larc;
    cf_lr_sched sched; int sched_set;   /* per-step schedule (DeepCAM); else the epoch one */
    const char *stats;        /* DeepCAM min/max statistics directory */
    const char *png;          /* learning-curve directory */
    int sync_bn;              /* batch-norm statistics over all ranks */
    int skip_nonfinite;       /* skip a batch whose gradient is not finite instead of stopping */
    int grad_lag;             /* 1: apply step t-1's averaged gradient at step t (2018 climate code) */
} options;
enum { OPT_SGD, OPT_ADAM, OPT_ADAMW, OPT_LAMB };
static const char *opt_names[4] = {"sgd", "adam", "adamw", "lamb"};
static const char *opt_mlperf[4] = {"sgd", "Adam", "AdamW", "LAMB"};

static void usage(void) {
    printf("usage: cf-train --model M.cfg --train DIR --val DIR --out CKPT [flags]\n"
           "  --model M.cfg        network (required)\n"
           "  --train DIR          training samples: *.tfrecord, *.tfrecord.gz (gzip or plain) or *_data.npy\n"
           "  --val DIR            validation samples, same formats\n"
           "  --out CKPT           checkpoint, rewritten atomically after every epoch (previous kept as CKPT.prev)\n"
           "  --epochs E           upper bound on epochs (default 128)\n"
           "  --batch B            samples per rank per step (default 4)\n"
           "  --seed K             weights, shuffling, dropout (default 0)\n"
           "  --resume CKPT        continue from a checkpoint: same weights, optimizer state, epoch and data order\n"
           "  --target V           CosmoFlow: stop when validation MAE <= V (MLPerf: 0.124; default: run all epochs)\n"
           "  --input-shape S      CxDxHxW, replaces the cfg's input size (e.g. 4x32x32x32)\n"
           "  --lr X               base learning rate (default 0.001)\n"
           "  --base-batch N       linear scaling: peak lr = lr * global batch / N (default 64)\n"
           "  --warmup-epochs N    epochs from lr to the peak (default 4)\n"
           "  --decay LIST         epoch:factor,... multipliers of the peak after the epoch (default 32:0.25,64:0.125;\n"
           "                       none: constant)\n"
           "  --momentum M         SGD momentum, Keras form v = m v - lr g (default 0.9)\n"
           "  --l2 X               L2 on the kernels marked l2=1 in the cfg (default 0)\n"
           "  --dropout P          rate of every dropout layer (default: the cfg's)\n"
           "  --loss mse|l1        (default: the cfg's; CosmoFlow: mse)\n"
           "  --no-log             x / mean(x) instead of log(1 + x) (the reference's apply_log: False)\n"
           "  --log-ratio          log(1 + x) - log(1 + channel mean): log counts centred per sample (the demo)\n"
           "  --augment            a random one of the cube's 48 symmetries (axis permutation and flips) per\n"
           "                       training sample, as the 2018 CosmoFlow code did (the MLPerf reference does not)\n"
           "  --overlap N          average gradients with MPI_Iallreduce on buckets of >= N floats started\n"
           "                       during backward (default: one blocking MPI_Allreduce after it)\n"
           "  --n-train N, --n-val N   use only the first N files of each directory\n"
           "  --png DIR            after every epoch: DIR/history.tsv (epoch, training loss, validation metric)\n"
           "                       and DIR/learning_curve.png drawn from it (kept across --resume)\n"
           "  --mllog FILE         MLPerf HPC ':::MLLOG' lines (closed division, CosmoFlow keys)\n"
           "  --progress / --no-progress   progress on stderr: a bar on a terminal, else a line a minute (default on)\n"
           "DeepCAM (models with loss=softmax_ce; defaults are the MLPerf reference's):\n"
           "  --stats DIR          stats_minval.npy / stats_maxval.npy (default: the --train directory or its parent)\n"
           "  --optimizer O        sgd, adam, adamw or lamb (default: lamb for DeepCAM, sgd for CosmoFlow)\n"
           "  --weight-decay X     adam: L2 in the gradient; adamw, lamb: decoupled (default 0.01 DeepCAM)\n"
           "  --betas B1,B2        (default 0.9,0.999)   --eps X (default 1e-6)\n"
           "  --max-grad-norm X    lamb: clip the global gradient norm (default 1.0; 0: off)\n"
           "  --larc ETA           scale each tensor's gradient by min(ETA |w|/|g|, 1) first (2018 climate code: 0.002)\n"
           "  --lr-schedule S      multistep or cosine, counted in optimizer steps (DeepCAM default: multistep)\n"
           "  --milestones LIST    multistep: steps, e.g. 800,1600 (default none)   --decay-rate G (default 0.1)\n"
           "  --warmup-steps N     linear warmup (default 0)   --warmup-factor F (default 1)\n"
           "  --t-max N            cosine: period in steps (default 9000)   --eta-min X (default 0)\n"
           "  --target V           DeepCAM: stop when validation mean IoU >= V (MLPerf: 0.82)\n"
           "  --grad-lag 1         apply the previous step's averaged gradient, its allreduce overlapping this\n"
           "                       step (the 2018 climate code; the first step only starts the pipeline)\n"
           "  --preset 2018        the 2018 papers' recipes (README, '2018 configurations'): CosmoFlow: Adam 1e-4,\n"
           "                       no lr scaling or schedule, L1 loss, x / mean(x), flips and axis permutations;\n"
           "                       DeepCAM: LARC (eta 0.002, clip) around Adam 1e-4, gradient lag 1, no schedule\n"
           "                       (later flags override it)\n"
           "  --skip-nonfinite     a batch whose loss or gradient is NaN/Inf is skipped with a counted warning\n"
           "                       (default: training stops, naming the step, the first bad layer and the files)\n"
           "  --sync-bn            batch-norm statistics of the global batch (summed over ranks; PyTorch's\n"
           "                       SyncBatchNorm); default per rank, as the reference (batchnorm_group_size 1)\n"
           "stdout: one line per epoch 'epoch E train_loss L val_mae V lr X time T' (DeepCAM: val_miou)\n");
    exit(0);
}

static void parse_decay(options *o, const char *v) {
    const char *p = v;
    o->n_decay = 0;
    if (!strcmp(v, "none")) return;
    while (*p) {
        char *end;
        double e = strtod(p, &end), f;
        if (end == p || *end != ':' || o->n_decay == 16) die("--decay: '%s' is not epoch:factor,...", v);
        p = end + 1;
        f = strtod(p, &end);
        if (end == p || f <= 0) die("--decay: '%s' is not epoch:factor,...", v);
        o->decay_epoch[o->n_decay] = e; o->decay_factor[o->n_decay++] = f;
        p = end;
        if (*p == ',') p++; else if (*p) die("--decay: '%s' is not epoch:factor,...", v);
    }
}

/* The reference's schedule (cosmoflow/utils/optimizers.py), epoch e counted from 0:
   warm-up lr + e (peak - lr) / n_warmup for e < n_warmup, then peak times the factor of the
   largest decay epoch k with k < e (strictly), 1 if none. */
static double lr_at(const options *o, int e, int global_batch) {
    double peak = o->base_batch > 0 ? o->lr * global_batch / o->base_batch : o->lr, f = 1, best = -1;
    int i;
    if (e < o->warmup) return o->lr + e * (peak - o->lr) / o->warmup;
    for (i = 0; i < o->n_decay; i++) if (o->decay_epoch[i] < e && o->decay_epoch[i] > best) { best = o->decay_epoch[i]; f = o->decay_factor[i]; }
    return peak * f;
}

/* ---- MLPerf logging: one JSON object per line, rank 0 only */
static FILE *mll;
static void mllog(const char *event, const char *key, const char *value, int lineno, const char *meta) {
    struct timespec t;
    if (!mll) return;
    clock_gettime(CLOCK_REALTIME, &t);
    fprintf(mll, ":::MLLOG {\"namespace\": \"\", \"time_ms\": %lld, \"event_type\": \"%s\", \"key\": \"%s\", \"value\": %s, "
            "\"metadata\": {\"file\": \"cf_train.c\", \"lineno\": %d%s%s}}\n",
            (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000, event, key, value, lineno, meta ? ", " : "", meta ? meta : "");
    fflush(mll);
}
#define EV(key, value) mllog("POINT_IN_TIME", key, value, __LINE__, NULL)

/* The 2018 papers' training recipes (COSMOFLOW-REFERENCE.md 1.5, DEEPCAM-REFERENCE.md 3.6).
   CosmoFlow 2018: Adam 1e-4 at any batch (no scaling, no schedule), L1 loss, input divided by
   its mean, random flips and axis permutations.  Climate 2018: LARC (eta 0.002, clip mode)
   around Adam 1e-4, gradient lag 1; the loss weights are in the model file. */
static void preset_2018(options *o, int seg) {
    o->optimizer = OPT_ADAM; o->lr = 1e-4; o->wd = 0;
    if (seg) { o->larc = 0.002; o->grad_lag = 1; return; }
    o->loss = CF_LOSS_L1; o->apply_log = 0; o->augment = 1;
    o->warmup = 0; o->n_decay = 0; o->base_batch = 0;
}

/* the CosmoFlow reference's keys (COSMOFLOW-REFERENCE.md 4.2) */
static void mllog_cosmoflow(const options *o, int global_batch) {
    char buf[512];
    int i;
    snprintf(buf, sizeof buf, "%g", o->l2); EV("opt_weight_decay", buf);
    snprintf(buf, sizeof buf, "%g", o->dropout >= 0 ? o->dropout : 0.5); EV("dropout", buf);
    snprintf(buf, sizeof buf, "\"%s\"", opt_names[o->optimizer]); EV("opt_name", buf);
    snprintf(buf, sizeof buf, "%g", o->base_batch > 0 ? o->lr * global_batch / o->base_batch : o->lr); EV("opt_base_learning_rate", buf);
    snprintf(buf, sizeof buf, "%g", o->warmup); EV("opt_learning_rate_warmup_epochs", buf);
    snprintf(buf, sizeof buf, "%g", o->base_batch > 0 ? global_batch / o->base_batch : 1.0); EV("opt_learning_rate_warmup_factor", buf);
    {
        int n = snprintf(buf, sizeof buf, "[");
        double mx = 0;
        for (i = 0; i < o->n_decay; i++) { n += snprintf(buf + n, sizeof buf - n, "%s%g", i ? ", " : "", o->decay_epoch[i]); if (o->decay_factor[i] > mx) mx = o->decay_factor[i]; }
        snprintf(buf + n, sizeof buf - n, "]");
        EV("opt_learning_rate_decay_boundary_epochs", buf);
        snprintf(buf, sizeof buf, "%g", mx); EV("opt_learning_rate_decay_factor", buf);
    }
}

/* the keys the DeepCAM closed-division checker requires (DEEPCAM-REFERENCE.md 4) */
static void mllog_deepcam(const options *o, int global_batch) {
    char buf[512];
    int i, n;
    (void)global_batch;
    EV("gradient_accumulation_frequency", "1");
    snprintf(buf, sizeof buf, "%d", o->sync_bn ? cf_dist_size() : 1); EV("batchnorm_group_size", buf);
    snprintf(buf, sizeof buf, "\"%s\"", opt_mlperf[o->optimizer]); EV("opt_name", buf);
    snprintf(buf, sizeof buf, "%g", o->lr); EV("opt_lr", buf);
    snprintf(buf, sizeof buf, "[%g, %g]", o->beta1, o->beta2); EV("opt_betas", buf);
    snprintf(buf, sizeof buf, "%g", o->eps); EV("opt_eps", buf);
    snprintf(buf, sizeof buf, "%g", o->wd); EV("opt_weight_decay", buf);
    if (o->optimizer == OPT_LAMB) {
        EV("opt_bias_correction", "true"); EV("opt_grad_averaging", "true");
        snprintf(buf, sizeof buf, "%g", o->max_grad_norm); EV("opt_max_grad_norm", buf);
    }
    EV("scheduler_type", o->sched.type == CF_SCHED_COSINE ? "\"cosine_annealing\"" : "\"multistep\"");
    snprintf(buf, sizeof buf, "%d", o->sched.warmup_steps); EV("scheduler_lr_warmup_steps", buf);
    snprintf(buf, sizeof buf, "%g", o->sched.warmup_factor); EV("scheduler_lr_warmup_factor", buf);
    if (o->sched.type == CF_SCHED_MULTISTEP) {
        n = snprintf(buf, sizeof buf, "[");
        for (i = 0; i < o->sched.n_milestones; i++) n += snprintf(buf + n, sizeof buf - n, "%s%ld", i ? ", " : "", o->sched.milestones[i]);
        snprintf(buf + n, sizeof buf - n, "]");
        EV("scheduler_milestones", buf);
        snprintf(buf, sizeof buf, "%g", o->sched.gamma); EV("scheduler_decay_rate", buf);
    } else {
        snprintf(buf, sizeof buf, "%ld", o->sched.t_max); EV("scheduler_t_max", buf);
        snprintf(buf, sizeof buf, "%g", o->sched.eta_min); EV("scheduler_eta_min", buf);
    }
}

/* The learning curve: DIR/history.tsv keeps one line per epoch (epochs at or after this one,
   left by a run that was resumed from an earlier checkpoint, are dropped), and
   DIR/learning_curve.png is redrawn from it: training loss left, validation metric right. */
static void learning_curve(const char *dir, int epoch, double loss, double metric, const char *metric_name) {
    enum { MAXE = 100000 };
    static double ep[MAXE], lo[MAXE], me[MAXE];
    char path[4096], tmp[4200], title[64], line_[256];
    int n = 0, k;
    FILE *f;
    if (mkdir(dir, 0777) && errno != EEXIST) die("%s: %s", dir, strerror(errno));
    snprintf(path, sizeof path, "%s/history.tsv", dir);
    if ((f = fopen(path, "r"))) {
        while (n < MAXE - 1 && fgets(line_, sizeof line_, f)) {
            double a, b, c;
            if (sscanf(line_, "%lf %lf %lf", &a, &b, &c) == 3 && a < epoch) { ep[n] = a; lo[n] = b; me[n] = c; n++; }
        }
        fclose(f);
    }
    ep[n] = epoch; lo[n] = loss; me[n] = metric; n++;
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    if (!(f = fopen(tmp, "w"))) die("%s: %s", tmp, strerror(errno));
    fprintf(f, "# epoch train_loss %s\n", metric_name);
    for (k = 0; k < n; k++) fprintf(f, "%.0f %.9g %.9g\n", ep[k], lo[k], me[k]);
    if (fclose(f) || rename(tmp, path)) die("%s: cannot write (%s)", path, strerror(errno));
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

/* A NaN or Inf: stop before it reaches a checkpoint, saying where it appeared first */
static void nonfinite_die(cf_net *net, const loader *L, int epoch, int step, double loss, int seg, const char *ckpt) {
    char files[2048];
    int lg = cf_net_first_nonfinite_param(net, 0), lp = cf_net_first_nonfinite_param(net, 1), lo;
    char where[256];
    /* the same batch again with every output kept, to find the first layer that is not finite */
    net->keep_acts = 1;
    lo = cf_net_forward(net, net->x, net->batch) ? cf_net_first_nonfinite_output(net) : -1;
    if (lp >= 0) snprintf(where, sizeof where, "layer %d (%s, line %d)'s parameters are already not finite", lp, cf_layer_type_name(net->layers[lp].type), net->layers[lp].line);
    else if (lo >= 0) snprintf(where, sizeof where, "first non-finite output at layer %d (%s, cfg line %d)", lo, cf_layer_type_name(net->layers[lo].type), net->layers[lo].line);
    else if (!isfinite(loss)) snprintf(where, sizeof where, "every layer's output is finite: the loss itself%s", seg ? " (a label outside the classes?)" : "");
    else snprintf(where, sizeof where, "first non-finite gradient at layer %d (%s, cfg line %d)", lg, lg >= 0 ? cf_layer_type_name(net->layers[lg].type) : "?", lg >= 0 ? net->layers[lg].line : 0);
    die("epoch %d step %d: loss %g, %s; batch: %s; the last checkpoint %s is untouched (--skip-nonfinite skips such batches)",
        epoch, step, loss, where, loader_batch_files(L, L->B, files, sizeof files), ckpt);
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

int main(int argc, char **argv) {
    options o;
    cf_net net;
    cf_train_state st = {0, 0, 0, 0};
    int i, rank, size, n_train, n_val, first_epoch = 1, e;
    char **train_files, **val_files, buf[512], meta[128];
    double t_start;
    tool_name = "train";
    tool_init(argc, argv);
    memset(&o, 0, sizeof o);
    o.epochs = 128; o.batch = 4; o.apply_log = 1; o.lr = 0.001; o.base_batch = 64; o.warmup = 4; o.momentum = 0.9;
    o.dropout = -1; o.loss = -1; o.progress = isatty(2) ? 1 : 2;
    o.optimizer = -1; o.wd = -1; o.beta1 = 0.9; o.beta2 = 0.999; o.eps = 1e-6; o.max_grad_norm = 1.0;
    o.sched.type = CF_SCHED_MULTISTEP; o.sched.gamma = 0.1; o.sched.warmup_factor = 1; o.sched.t_max = 9000;
    parse_decay(&o, "32:0.25,64:0.125");
    if (has_flag(argc, argv, "--help") || has_flag(argc, argv, "-h")) usage();
    for (i = 1; i + 1 < argc; i++)   /* --preset first, so that the other flags override it */
        if (!strcmp(argv[i], "--preset") && !strcmp(argv[i + 1], "2018")) {
            const char *m = NULL;
            int j;
            for (j = 1; j + 1 < argc; j++) if (!strcmp(argv[j], "--model")) m = argv[j + 1];
            if (!m) die("--preset 2018: needs --model (the recipe depends on the application)");
            TRY(cf_net_load_cfg(&net, m, NULL));
            preset_2018(&o, net.loss == CF_LOSS_SOFTMAX_CE);
            cf_net_free(&net);
        }
    if (has_flag(argc, argv, "--version")) print_version();
    if (cf_dist_init(&argc, &argv)) die("%s", cf_failure_reason());
    rank = cf_dist_rank(); size = cf_dist_size();
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--model")) o.model = flag_value(argc, argv, &i);
        else if (!strcmp(a, "--train")) o.train = flag_value(argc, argv, &i);
        else if (!strcmp(a, "--val")) o.val = flag_value(argc, argv, &i);
        else if (!strcmp(a, "--out")) o.out = flag_value(argc, argv, &i);
        else if (!strcmp(a, "--resume")) o.resume = flag_value(argc, argv, &i);
        else if (!strcmp(a, "--mllog")) o.mllog = flag_value(argc, argv, &i);
        else if (!strcmp(a, "--epochs")) o.epochs = (int)flag_long(a, flag_value(argc, argv, &i), 1, 1000000);
        else if (!strcmp(a, "--batch")) o.batch = (int)flag_long(a, flag_value(argc, argv, &i), 1, 65536);
        else if (!strcmp(a, "--seed")) o.seed = (uint64_t)flag_long(a, flag_value(argc, argv, &i), 0, 0x7fffffffL);
        else if (!strcmp(a, "--target")) o.target = flag_double(a, flag_value(argc, argv, &i), 0, 1e9);
        else if (!strcmp(a, "--input-shape")) { o.shape = flag_shape(a, flag_value(argc, argv, &i)); o.has_shape = 1; }
        else if (!strcmp(a, "--lr")) o.lr = flag_double(a, flag_value(argc, argv, &i), 0, 100);
        else if (!strcmp(a, "--base-batch")) o.base_batch = flag_double(a, flag_value(argc, argv, &i), 1, 1e9);
        else if (!strcmp(a, "--warmup-epochs")) o.warmup = (double)flag_long(a, flag_value(argc, argv, &i), 0, 1000000);
        else if (!strcmp(a, "--decay")) parse_decay(&o, flag_value(argc, argv, &i));
        else if (!strcmp(a, "--momentum")) o.momentum = flag_double(a, flag_value(argc, argv, &i), 0, 0.9999);
        else if (!strcmp(a, "--l2")) o.l2 = flag_double(a, flag_value(argc, argv, &i), 0, 1e3);
        else if (!strcmp(a, "--dropout")) o.dropout = flag_double(a, flag_value(argc, argv, &i), 0, 0.999);
        else if (!strcmp(a, "--loss")) { const char *v = flag_value(argc, argv, &i); o.loss = !strcmp(v, "mse") ? CF_LOSS_MSE : !strcmp(v, "l1") ? CF_LOSS_L1 : -2; if (o.loss == -2) die("--loss: '%s' is not mse or l1", v); }
        else if (!strcmp(a, "--no-log")) o.apply_log = 0;
        else if (!strcmp(a, "--log-ratio")) o.apply_log = 2;
        else if (!strcmp(a, "--augment")) o.augment = 1;
        else if (!strcmp(a, "--overlap")) o.overlap = flag_long(a, flag_value(argc, argv, &i), 1, 1L << 30);
        else if (!strcmp(a, "--n-train")) o.n_train = (int)flag_long(a, flag_value(argc, argv, &i), 1, 1 << 30);
        else if (!strcmp(a, "--n-val")) o.n_val = (int)flag_long(a, flag_value(argc, argv, &i), 1, 1 << 30);
        else if (!strcmp(a, "--progress")) o.progress = isatty(2) ? 1 : 2;
        else if (!strcmp(a, "--no-progress")) o.progress = 0;
        else if (!strcmp(a, "--stats")) o.stats = flag_value(argc, argv, &i);
        else if (!strcmp(a, "--png")) o.png = flag_value(argc, argv, &i);
        else if (!strcmp(a, "--sync-bn")) o.sync_bn = 1;
        else if (!strcmp(a, "--skip-nonfinite")) o.skip_nonfinite = 1;
        else if (!strcmp(a, "--grad-lag")) o.grad_lag = (int)flag_long(a, flag_value(argc, argv, &i), 0, 1);
        else if (!strcmp(a, "--preset")) { const char *v = flag_value(argc, argv, &i); if (strcmp(v, "2018")) die("--preset: '%s' is not 2018", v); }
        else if (!strcmp(a, "--optimizer")) {
            const char *v = flag_value(argc, argv, &i);
            for (o.optimizer = 0; o.optimizer < 4 && strcmp(v, opt_names[o.optimizer]); o.optimizer++) {}
            if (o.optimizer == 4) die("--optimizer: '%s' is not sgd, adam, adamw or lamb", v);
        }
        else if (!strcmp(a, "--weight-decay")) o.wd = flag_double(a, flag_value(argc, argv, &i), 0, 10);
        else if (!strcmp(a, "--betas")) { const char *v = flag_value(argc, argv, &i); if (sscanf(v, "%lf,%lf", &o.beta1, &o.beta2) != 2 || !(o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 && o.beta2 < 1)) die("--betas: '%s' is not B1,B2 in [0, 1)", v); }
        else if (!strcmp(a, "--eps")) o.eps = flag_double(a, flag_value(argc, argv, &i), 0, 1);
        else if (!strcmp(a, "--max-grad-norm")) o.max_grad_norm = flag_double(a, flag_value(argc, argv, &i), 0, 1e9);
        else if (!strcmp(a, "--larc")) o.larc = flag_double(a, flag_value(argc, argv, &i), 0, 1e3);
        else if (!strcmp(a, "--lr-schedule")) {
            const char *v = flag_value(argc, argv, &i);
            o.sched_set = 1;
            if (!strcmp(v, "multistep")) o.sched.type = CF_SCHED_MULTISTEP;
            else if (!strcmp(v, "cosine")) o.sched.type = CF_SCHED_COSINE;
            else die("--lr-schedule: '%s' is not multistep or cosine", v);
        }
        else if (!strcmp(a, "--milestones")) {
            const char *v = flag_value(argc, argv, &i), *q = v;
            o.sched.n_milestones = 0;
            while (*q) {
                char *end;
                long m = strtol(q, &end, 10);
                if (end == q || m < 0 || o.sched.n_milestones == 16) die("--milestones: '%s' is not a list of up to 16 steps", v);
                o.sched.milestones[o.sched.n_milestones++] = m;
                q = *end == ',' ? end + 1 : end;
                if (*end && *end != ',') die("--milestones: '%s' is not a list of steps", v);
            }
        }
        else if (!strcmp(a, "--decay-rate")) o.sched.gamma = flag_double(a, flag_value(argc, argv, &i), 0, 1);
        else if (!strcmp(a, "--warmup-steps")) o.sched.warmup_steps = (int)flag_long(a, flag_value(argc, argv, &i), 0, 1 << 30);
        else if (!strcmp(a, "--warmup-factor")) o.sched.warmup_factor = flag_double(a, flag_value(argc, argv, &i), 1, 1e6);
        else if (!strcmp(a, "--t-max")) o.sched.t_max = flag_long(a, flag_value(argc, argv, &i), 1, 1L << 40);
        else if (!strcmp(a, "--eta-min")) o.sched.eta_min = flag_double(a, flag_value(argc, argv, &i), 0, 100);
        else die("%s: unknown flag (see --help)", a);
    }
    if (!o.model || !o.train || !o.val || !o.out) die("needs --model, --train, --val and --out (see --help)");
    if (rank) o.progress = 0;
    if (rank == 0 && o.mllog && !(mll = fopen(o.mllog, "w"))) die("%s: %s", o.mllog, strerror(errno));
    mllog("POINT_IN_TIME", "cache_clear", "true", __LINE__, NULL);
    mllog("INTERVAL_START", "init_start", "null", __LINE__, NULL);

    TRY(cf_net_load_cfg(&net, o.model, o.has_shape ? &o.shape : NULL));
    int seg = net.loss == CF_LOSS_SOFTMAX_CE, n_classes = net.layers[net.n_layers - 1].out.c;
    if (o.optimizer < 0) o.optimizer = seg ? OPT_LAMB : OPT_SGD;
    if (o.wd < 0) o.wd = seg ? 0.01 : 0.0;
    if (seg) o.sched_set = 1;   /* DeepCAM counts the schedule in steps */
    o.sched.base_lr = o.lr;
    if (seg && net.input.d != 1) die("%s: a segmentation model must be 2-D (CxHxW)", o.model);
    if (!seg && (net.input.d != net.input.h || net.input.h != net.input.w)) die("%s: CosmoFlow input must be a cube, got %dx%dx%dx%d", o.model, net.input.c, net.input.d, net.input.h, net.input.w);
    if (o.loss >= 0 && !seg) net.loss = o.loss;
    for (i = 0; i < net.n_layers; i++) if (o.dropout >= 0 && net.layers[i].type == CF_L_DROPOUT) net.layers[i].rate = (float)o.dropout;
    cf_net_init(&net, o.seed);
    st.seed = o.seed;
    if (o.resume) {   /* the newest valid one of CKPT.next (a crash before its rename), CKPT, CKPT.prev */
        static const char *suffix[3] = {".next", "", ".prev"};
        char path[4096], main_err[1100] = "";
        int k, loaded = -1;
        for (k = 0; k < 3 && loaded < 0; k++) {
            snprintf(path, sizeof path, "%s%s", o.resume, suffix[k]);
            if (k != 1 && access(path, R_OK)) continue;
            if (cf_checkpoint_load(path, &net, &st) == CF_OK) loaded = k;
            else if (k == 1) snprintf(main_err, sizeof main_err, "%s", cf_failure_reason());
        }
        if (loaded < 0) die("%s", main_err);
        if (loaded == 2 && rank == 0) fprintf(stderr, "cf-train: %s; resuming from %s\n", main_err, path);
        first_epoch = (int)st.epoch + 1;
        o.seed = st.seed;
    }
    cf_dist_bcast(net.params, net.n_params);   /* rank 0's weights everywhere */
    if (o.sync_bn) TRY(cf_net_sync_bn(&net, cf_dist_sum_reduce, NULL));
    train_files = list_samples(o.train, &n_train);
    val_files = list_samples(o.val, &n_val);
    int n_train_files = n_train, n_val_files = n_val;   /* before --n-train / --n-val */
    if (o.n_train && o.n_train < n_train) n_train = o.n_train;
    if (o.n_val && o.n_val < n_val) n_val = o.n_val;
    int global_batch = o.batch * size, steps = n_train / global_batch;
    if (steps < 1) die("%s: %d training files are fewer than one global batch of %d", o.train, n_train, global_batch);
    int *order = (int *)malloc(sizeof(int) * (n_train + n_val + 1));
    size_t ny = (size_t)o.batch * net.n_outputs;
    float *dout = (float *)malloc(ny * 4);
    loader L;
    cf_grad_lag lag;
    float cmin[64], cmax[64];
    memset(&lag, 0, sizeof lag);
    if (seg) {
        if (net.input.c > 64) die("%s: more than 64 input channels", o.model);
        TRY(cf_climate_stats(o.stats ? o.stats : o.train, cmin, cmax, net.input.c));
        loader_init_climate(&L, train_files, net.input.c, net.input.h, net.input.w, n_classes, o.batch, cmin, cmax);
    } else {
        loader_init(&L, train_files, net.input.d, net.input.c, net.n_outputs, o.batch, o.apply_log);
    }
    int *pred = (int *)malloc(sizeof(int) * (size_t)net.n_targets);

    {   /* the run's constants, in the reference's order (COSMOFLOW-REFERENCE.md 4.2) */
        struct utsname u;
        uname(&u);
        snprintf(buf, sizeof buf, "%llu", (unsigned long long)o.seed); EV("seed", buf);
        snprintf(buf, sizeof buf, "%d", size); EV("number_of_ranks", buf);
        EV("number_of_nodes", "1"); EV("accelerators_per_node", "0");
        EV("submission_benchmark", seg ? "\"deepcam\"" : "\"cosmoflow\""); EV("submission_org", "\"cosmoflow.h\"");
        EV("submission_division", "\"closed\""); EV("submission_status", "\"onprem\"");
        snprintf(buf, sizeof buf, "\"%s-cpu\"", u.machine); EV("submission_platform", buf);
        mllog("INTERVAL_END", "init_stop", "null", __LINE__, NULL);
        mllog("INTERVAL_START", "run_start", "null", __LINE__, NULL);
        snprintf(buf, sizeof buf, "%d", global_batch); EV("global_batch_size", buf);
        snprintf(buf, sizeof buf, "%d", steps * global_batch); EV("train_samples", buf);
        snprintf(buf, sizeof buf, "%d", n_val); EV("eval_samples", buf);
        mllog("INTERVAL_START", "staging_start", "null", __LINE__, NULL);
        mllog("INTERVAL_END", "staging_stop", "null", __LINE__, NULL);
        if (seg) mllog_deepcam(&o, global_batch);
        else mllog_cosmoflow(&o, global_batch);
    }

    t_start = now_s();
    int reached = 0;
    for (e = first_epoch; e <= o.epochs && !reached; e++) {
        double lr = seg ? cf_lr_sched_at(&o.sched, net.step) : lr_at(&o, e - 1, global_batch), t0 = now_s(), sums[3] = {0, 0, 0};
        int n_local = cf_epoch_shard(order, n_train, o.seed, e, rank, size, 1, 1), s, nb, k, skipped = 0;
        if (n_local > steps * o.batch) n_local = steps * o.batch;   /* whole batches only, as the reference */
        float *x, *y;
        snprintf(meta, sizeof meta, "\"epoch_num\": %d", e);
        mllog("INTERVAL_START", "epoch_start", "null", __LINE__, meta);
        net.training = 1; net.bn_train = 1;
        L.files = train_files;
        L.augment = o.augment; L.aug_seed = cf_hash64(o.seed * 31 + (uint64_t)e);
        loader_begin(&L, order, n_local);
        for (s = 0; s < steps; s++) {
            double loss;
            loader_next(&L, &x, &y, &nb);
            if (nb != o.batch) die("internal: short training batch");
            if (!cf_net_forward(&net, x, o.batch)) die("%s", cf_failure_reason());
            loss = cf_net_loss(&net, y, dout);
            if (!isfinite(loss) && !o.skip_nonfinite) nonfinite_die(&net, &L, e, s + 1, loss, seg, o.out);
            cf_net_zero_grad(&net);
            if (o.grad_lag) {   /* the previous step's averaged gradient; this one's reduction starts */
                int have;
                cf_net_backward(&net, dout);
                have = cf_dist_grad_lag(&net, &lag);
                if (have < 0) die("%s", cf_failure_reason());
                if (!have) { net.step++; sums[0] += loss; continue; }
            } else if (o.overlap) {   /* reductions start while backward still runs */
                cf_dist_overlap_begin(&net, (size_t)o.overlap);
                cf_net_backward(&net, dout);
                cf_dist_overlap_end(&net);
            } else {
                cf_net_backward(&net, dout);
                cf_dist_allreduce_mean(net.grads, net.n_params);
            }
            /* the averaged gradient is the same on every rank, so every rank decides alike */
            if (cf_net_first_nonfinite_param(&net, 0) >= 0) {
                if (!o.skip_nonfinite) nonfinite_die(&net, &L, e, s + 1, loss, seg, o.out);
                skipped++;
                if (rank == 0) fprintf(stderr, "cf-train: epoch %d step %d: non-finite gradient (layer %d), batch skipped (%d so far)\n",
                                       e, s + 1, cf_net_first_nonfinite_param(&net, 0), skipped);
                net.step++;
                continue;
            }
            if (o.sched_set) lr = cf_lr_sched_at(&o.sched, net.step);   /* per optimizer step */
            optimizer_step(&o, &net, lr);
            net.step++;
            sums[0] += loss;
            progress(o.progress, e, (s + 1) * global_batch, steps * global_batch, t0);
        }
        /* validation: every file once, in order, sharded over ranks */
        snprintf(meta, sizeof meta, "\"epoch_num\": %d", e);
        mllog("INTERVAL_START", "eval_start", "null", __LINE__, meta);
        net.training = 0; net.bn_train = 0;
        /* the reference averages the batch-norm running statistics over ranks before validating */
        if (net.n_stats) cf_dist_allreduce_mean(net.stats, net.n_stats);
        L.augment = 0;
        n_local = cf_epoch_shard(order, n_val, 0, 0, rank, size, 0, 0);
        L.files = val_files;
        loader_begin(&L, order, n_local);
        for (;;) {
            const float *out;
            loader_next(&L, &x, &y, &nb);
            if (!nb) break;
            if (!(out = cf_net_forward(&net, x, nb))) die("%s", cf_failure_reason());
            if (seg) {   /* MLPerf: mean over samples of the per-sample 3-class IoU */
                for (k = 0; k < nb; k++) {
                    cf_argmax_classes(pred, out + (size_t)k * net.n_outputs, n_classes, (size_t)net.n_targets);
                    sums[1] += cf_iou_sample(pred, y + (size_t)k * net.n_targets, (size_t)net.n_targets, n_classes);
                }
                sums[2] += nb;
            } else {
                for (k = 0; k < nb * net.n_outputs; k++) sums[1] += fabs((double)out[k] - y[k]);
                sums[2] += nb * net.n_outputs;
            }
        }
        sums[0] /= steps;
        cf_dist_allreduce_sum_d(sums, 3);
        double train_loss = sums[0] / size, val_mae = sums[1] / sums[2];   /* segmentation: mean IoU */
        mllog("INTERVAL_END", "eval_stop", "null", __LINE__, meta);
        mllog("INTERVAL_END", "epoch_stop", "null", __LINE__, meta);
        snprintf(buf, sizeof buf, "%.6g", val_mae);
        mllog("POINT_IN_TIME", seg ? "eval_accuracy" : "eval_error", buf, __LINE__, meta);
        snprintf(buf, sizeof buf, "%.6g", train_loss);
        if (seg) mllog("POINT_IN_TIME", "train_loss", buf, __LINE__, meta);
        st.step = net.step; st.epoch = (uint64_t)e; st.seed = o.seed; st.best = val_mae;
        if (rank == 0) {
            /* the new checkpoint is complete on disk (CKPT.next, itself written atomically)
               before the previous one moves to CKPT.prev: a crash or a full disk at any
               moment leaves a valid CKPT or CKPT.prev, and --resume takes either */
            char prev[4096], next[4096];
            snprintf(prev, sizeof prev, "%s.prev", o.out);
            snprintf(next, sizeof next, "%s.next", o.out);
            if (cf_net_first_nonfinite_param(&net, 1) >= 0)
                die("epoch %d: layer %d's parameters are not finite; no checkpoint written, the last one %s is untouched",
                    e, cf_net_first_nonfinite_param(&net, 1), o.out);
            TRY(cf_checkpoint_save(next, &net, &st));
            if (access(o.out, F_OK) == 0 && rename(o.out, prev)) die("%s: cannot keep the previous checkpoint (%s)", o.out, strerror(errno));
            if (rename(next, o.out)) die("%s: cannot move the new checkpoint into place (%s)", o.out, strerror(errno));
        }
        if (rank == 0) {
            printf("epoch %d train_loss %.6f %s %.6f lr %.6g time %.1f\n", e, train_loss, seg ? "val_miou" : "val_mae", val_mae, lr, now_s() - t0);
            if (o.png) learning_curve(o.png, e, train_loss, val_mae, seg ? "val_miou" : "val_mae");
            fflush(stdout);
        }
        if (o.target > 0 && (seg ? val_mae >= o.target : val_mae <= o.target)) reached = 1;
        if (reached && seg) mllog("POINT_IN_TIME", "target_accuracy_reached", buf, __LINE__, meta);
    }
    snprintf(buf, sizeof buf, "\"status\": \"%s\"", reached || o.target <= 0 ? "success" : "aborted");
    mllog("INTERVAL_END", "run_stop", "null", __LINE__, buf);
    if (rank == 0) fprintf(stderr, "cf-train: %d epochs in %.1f s, checkpoint %s\n", e - first_epoch, now_s() - t_start, o.out);
    loader_free(&L);
    free(order); free(dout); free(pred);
    cf_dist_grad_lag_free(&lag);
    free_samples(train_files, n_train_files); free_samples(val_files, n_val_files);
    cf_net_free(&net);
    if (mll) fclose(mll);
    cf_dist_finalize();
    return 0;
}
