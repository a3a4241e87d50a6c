/* cf-train: CosmoFlow regression and DeepCAM segmentation with the MLPerf HPC references'
   defaults, on one process or under mpirun (synchronous data parallelism; with --spatial K,
   each sample split across K ranks too).  The application
   follows from the model: loss=softmax_ce is DeepCAM.  The training step itself is the
   library's (cf_train_step); this program parses the flags, loads the data, validates,
   logs, and decides when to write checkpoints.  main() is setup, then per epoch: train,
   validate, save. */
#ifndef CF_IMPLEMENTATION_LINKED   /* the Makefile links the implementation it compiled once (tools/cosmoflow.c) */
#define CF_IMPLEMENTATION
#endif
#include "cosmoflow.h"
#include "tool.h"
#include "data.h"
#include "draw.h"
#include "mllog.h"

typedef struct {
    const char *model, *train, *val, *out, *resume, *mllog, *stats, *png, *preset;
    int epochs, batch, has_shape, apply_log, n_train, n_val, progress, augment, loss;   /* loss, dropout: -1 the cfg's */
    uint64_t seed;
    double target, dropout;
    cf_shape shape;
    cf_train_config tc;       /* the training step's settings (the library's defaults) */
    int sync_bn, staged, skip_nonfinite, override;   /* --sync-bn, --staged, --skip-nonfinite, --override */
    int spatial;              /* --spatial K: ranks a sample */
    int save_every;           /* --save-every N: a checkpoint every N steps too (0: at epochs' ends only) */
} options;

/* ---------------------------------------------------------------- flags */
/* --loss and --dropout: -1 is the cfg's ("cfg"), as the record of a run writes it */
static void parse_loss(const char *v, void *dst) {
    if (strcmp(v, "mse") && strcmp(v, "l1") && strcmp(v, "cfg")) die("--loss: '%s' is not mse or l1", v);
    *(int *)dst = !strcmp(v, "cfg") ? -1 : strcmp(v, "mse") ? CF_LOSS_L1 : CF_LOSS_MSE;
}
static void show_loss(const void *d, char *b, size_t n) { int v = *(const int *)d; snprintf(b, n, "%s", v < 0 ? "cfg" : v ? "l1" : "mse"); }
static void parse_dropout(const char *v, void *dst) { *(double *)dst = strcmp(v, "cfg") ? flag_number("--dropout", v, 0, 0.999, 0) : -1; }
static void show_dropout(const void *d, char *b, size_t n) { double v = *(const double *)d; if (v < 0) snprintf(b, n, "cfg"); else snprintf(b, n, "%.17g", v); }
static void parse_preset(const char *v, void *dst) { if (strcmp(v, "2018")) die("--preset: '%s' is not 2018", v); *(const char **)dst = v; }

#define NFLAGS 56
static tool_flag flags[NFLAGS];
static int n_flags;
static void flag_table(options *o) {
    tool_flag f[] = {
        {"--model", "M.cfg", FLAG_STR, &o->model, 0, 0, "network (default: the one in --resume's checkpoint)", NULL, NULL},
        {"--train", "DIR", FLAG_STR, &o->train, 0, 0, "training samples: *.tfrecord, *.tfrecord.gz (gzip or plain), *_data.npy, data-*.npy", NULL, NULL},
        {"--val", "DIR", FLAG_STR, &o->val, 0, 0, "validation samples, same formats", NULL, NULL},
        {"--out", "CKPT", FLAG_STR, &o->out, 0, 0, "checkpoint, written atomically after every epoch and at a stop signal (the previous kept as CKPT.prev)", NULL, NULL},
        {"--save-every", "N", FLAG_INT, &o->save_every, 0, 1 << 30, "also write the checkpoint every N steps within an epoch (a job that may end without warning; default 0: at epochs' ends and stop signals only)", NULL, NULL},
        {"--epochs", "E", FLAG_INT, &o->epochs, 1, 1000000, "upper bound on epochs", NULL, NULL},
        {"--batch", "B", FLAG_INT, &o->batch, 1, 65536, "samples per rank per step", NULL, NULL},
        {"--seed", "K", FLAG_U64, &o->seed, 0, 0x7fffffff, "weights, shuffling, dropout", NULL, NULL},
        {"--resume", "CKPT", FLAG_STR, &o->resume, 0, 0, "continue from a checkpoint: its weights, optimizer state, epoch, data order and recorded settings", NULL, NULL},
        {"--override", NULL, FLAG_SET, &o->override, 1, 0, "with --resume: the flags given win over the checkpoint's recorded settings (the record notes the change)", NULL, NULL},
        {"--target", "V", FLAG_DOUBLE, &o->target, 0, 1e9, "stop when validation MAE <= V (MLPerf CosmoFlow 0.124) or mean IoU >= V (DeepCAM 0.82); default: run all epochs", NULL, NULL},
        {"--input-shape", "S", FLAG_SHAPE, &o->shape, 0, 0, "CxDxHxW, replaces the cfg's input size (e.g. 4x32x32x32)", NULL, &o->has_shape},
        {"--dropout", "P", FLAG_CALL, &o->dropout, 0, 0, "rate of every dropout layer (default: the cfg's)", parse_dropout, NULL},
        {"--loss", "mse|l1", FLAG_CALL, &o->loss, 0, 0, "(default: the cfg's; CosmoFlow: mse)", parse_loss, NULL},
        {"--transform", "T", FLAG_CALL, &o->apply_log, 0, 0, "CosmoFlow input: log (log(1 + x), default), mean (x / mean(x)) or log-ratio", parse_transform, NULL},
        {"--no-log", NULL, FLAG_SET, &o->apply_log, 0, 0, "--transform mean (the reference's apply_log: False)", NULL, NULL},
        {"--log-ratio", NULL, FLAG_SET, &o->apply_log, 2, 0, "--transform log-ratio: log(1 + x) - log(1 + channel mean), log counts centred per sample", NULL, NULL},
        {"--augment", NULL, FLAG_SET, &o->augment, 1, 0, "a random one of the cube's 48 symmetries per training sample (the 2018 code; MLPerf: none)", NULL, NULL},
        {"--n-train", "N", FLAG_INT, &o->n_train, 1, 1 << 30, "use only the first N training files (default: all)", NULL, NULL},
        {"--n-val", "N", FLAG_INT, &o->n_val, 1, 1 << 30, "use only the first N validation files (default: all)", NULL, NULL},
        {"--png", "DIR", FLAG_STR, &o->png, 0, 0, "after every epoch DIR/history.tsv and DIR/learning_curve.png (kept across --resume)", NULL, NULL},
        {"--mllog", "FILE", FLAG_STR, &o->mllog, 0, 0, "MLPerf HPC ':::MLLOG' lines (appended to on --resume)", NULL, NULL},
        {"--progress", NULL, FLAG_SET, &o->progress, 1, 0, "progress on stderr: a bar on a terminal, else a line a minute (default)", NULL, NULL},
        {"--no-progress", NULL, FLAG_SET, &o->progress, 0, 0, "no progress output", NULL, NULL},
        {"--stats", "DIR", FLAG_STR, &o->stats, 0, 0, "DeepCAM: stats_minval.npy / stats_maxval.npy (default: --train or its parent)", NULL, NULL},
        {"--preset", "2018", FLAG_CALL, &o->preset, 0, 0, "the 2018 papers' recipes (docs/tutorial.md; later flags override it) (default none)", parse_preset, NULL},
        {"--skip-nonfinite", NULL, FLAG_SET, &o->skip_nonfinite, 1, 0, "skip a batch whose loss or gradient is NaN/Inf, with a counted warning (default: stop, naming it)", NULL, NULL},
        {"--staged", NULL, FLAG_SET, &o->staged, 1, 0, "each rank's --train holds its own share of the training set, all of which it reads every epoch (data staged per node; data/README.md); default: every rank sees the whole set", NULL, NULL},
        {"--sync-bn", NULL, FLAG_SET, &o->sync_bn, 1, 0, "batch-norm statistics of the global batch (PyTorch's SyncBatchNorm; default per rank)", NULL, NULL},
        {"--spatial", "K", FLAG_INT, &o->spatial, 1, 65536, "each sample split by depth across K ranks (groups of K consecutive ranks share samples, each rank reading and holding its slab; "
         "the groups run data parallelism; docs/mpi.md, 'A sample across ranks'); default 1", NULL, NULL},
        COMM_TIMEOUT_FLAG,
        BF16_FORM_FLAG,
        {NULL, NULL, FLAG_STR, NULL, 0, 0, "The training step (the library's cf_train_config; defaults: the MLPerf references'):", NULL, NULL},
    };
    n_flags = (int)(sizeof f / sizeof f[0]);
    memcpy(flags, f, sizeof f);
    flag_add_train(flags, &n_flags, NFLAGS);
    tool_train = &o->tc;
}
/* the settings a checkpoint records besides the training step's (tools/tool.h) */
static const tool_setting settings[] = {{"--seed", "seed", NULL}, {"--transform", "transform", show_transform},
    {"--loss", "loss", show_loss}, {"--dropout", "dropout", show_dropout}, {"--augment", "augment", NULL}, {"--sync-bn", "sync_bn", NULL},
    {"--staged", "staged", NULL}};
#define N_SETTINGS ((int)(sizeof settings / sizeof settings[0]))
static void usage(void) {
    flag_help("usage: cf-train --train DIR --val DIR --out CKPT (--model M.cfg | --resume CKPT) [flags]", flags, n_flags,
              "stdout: one line per epoch 'epoch E train_loss L val_mae V lr X time T' (DeepCAM: val_miou)\n");
}
static void defaults(options *o) {
    memset(o, 0, sizeof *o);
    o->epochs = 128; o->batch = 4; o->apply_log = 1; o->dropout = -1; o->loss = -1; o->progress = 1; o->spatial = 1;
    cf_train_defaults(&o->tc);
}
/* The 2018 papers' training recipes (docs/references.md, "The 2018 recipes"), under the flags
   given.  CosmoFlow: Adam 1e-4 at any batch (no scaling, no schedule), L1 loss, input divided
   by its mean, random flips and axis permutations.  Climate: LARC (eta 0.002, clip mode)
   around Adam 1e-4, gradient lag 1; the loss weights are in the model file. */
static void preset_2018(int seg) {
    static const char *both[] = {"--optimizer", "adam", "--lr", "1e-4", "--weight-decay", "0", NULL}, *climate[] = {"--larc", "0.002", "--grad-lag", "1", NULL},
        *cosmo[] = {"--loss", "l1", "--transform", "mean", "--augment", "", "--warmup-epochs", "0", "--decay", "none", "--base-batch", "0", NULL};
    flag_presets(flags, n_flags, both);
    flag_presets(flags, n_flags, seg ? climate : cosmo);
}
static void parse_flags(options *o, int argc, char **argv) {
    flag_table(o);
    flag_parse(argc, argv, 1, flags, n_flags, usage, NULL, 0);
    if (!o->train || !o->val || !o->out) die("needs --train, --val and --out (see --help)");
    if (!o->model && !o->resume) die("needs --model M.cfg, or --resume CKPT to take the model from the checkpoint");
    if (o->override && !o->resume) die("--override: lets the flags given win over the settings --resume's checkpoint records; needs --resume CKPT");
    if (o->progress) o->progress = isatty(2) ? 1 : 2;
    if (o->spatial > 1 && o->staged) die("--spatial %d with --staged: the ranks of a group read the same samples, so their --train cannot be each rank's own", o->spatial);
}

/* ---------------------------------------------------------------- the run */
typedef struct {
    options o;
    cf_net net;
    cf_trainer tr;
    cf_train_state st;
    int rank, size, seg, first_epoch, global_batch, steps, reached;
    int groups, group;        /* data parallelism's replicas: ranks, or groups of --spatial ranks; this rank's */
    char **train_files, **val_files;
    int n_train, n_val, n_train_files, n_val_files;
    int *order;
    loader L;
    double t_start;
    int first_step, first_skipped;   /* a checkpoint written within an epoch: where it stopped (mid_epoch_read) */
    double first_sum;
    char record[4096];        /* the run's record (record_run), without the within-an-epoch lines */
    char resumed_from[4200];  /* the file --resume read: CKPT, or CKPT.next or CKPT.prev */
    char override_note[1100];   /* "override=epoch E: key new, was old; ...": what --override changed */
} run;

/* ---------------------------------------------------------------- stopping within an epoch
   SIGTERM, SIGUSR1 and SIGUSR2 (a scheduler's time limit, its warning signal, a preemption,
   a requeue) ask the run to stop at the end of the step in progress (tools/tool.h,
   tool_stop_requested).  Every rank learns of it at the same step: the flag rides on the
   step's one allreduce of its loss.  The checkpoint is written there with what the rest of
   the epoch needs, and the run ends with status 143 (a shell's status for SIGTERM: a job
   script's sign to requeue; docs/mpi.md, "Slurm").  The data order, the augmentation and the
   dropout masks are functions of the seed, the epoch and the sample or the step, so the
   checkpoint adds three lines to the run's record: the steps of epoch E+1 taken (epoch_step;
   the checkpoint's epoch is E, the last one finished), the loss they summed over ranks
   (epoch_loss_sum, in hexadecimal: exact) and the batches skipped (epoch_skipped).  --resume
   continues at the next step as the uninterrupted run does, to the byte.  --save-every N
   writes the same checkpoint every N steps without stopping. */
static void save_checkpoint(run *R, int e);
static void mid_epoch_read(run *R) {
    char v[64];
    if (!meta_value(R->st.meta, "epoch_step", v, sizeof v)) return;
    R->first_step = atoi(v);
    if (meta_value(R->st.meta, "epoch_loss_sum", v, sizeof v)) R->first_sum = strtod(v, NULL);
    if (meta_value(R->st.meta, "epoch_skipped", v, sizeof v)) R->first_skipped = atoi(v);
    if (R->first_step < 0) die("%s: its record says it stopped at step %d of epoch %d", R->o.resume, R->first_step, R->first_epoch);
}
/* the checkpoint after step s of epoch e (summed loss sum, skipped batches) */
static void save_within_epoch(run *R, int e, int s, double sum, int skipped) {
    size_t m;
    snprintf(R->st.meta, sizeof R->st.meta, "%s", R->record);
    m = strlen(R->st.meta);
    snprintf(R->st.meta + m, sizeof R->st.meta - m, "epoch_step=%d\nepoch_loss_sum=%a\nepoch_skipped=%d\n", s, sum, skipped);
    R->st.epoch = (uint64_t)(e - 1); R->st.seed = R->o.seed;
    save_checkpoint(R, e - 1);
    snprintf(R->st.meta, sizeof R->st.meta, "%s", R->record);
}
static void finish(run *R, int e);
/* a stop signal reached a rank: the checkpoint is written (within an epoch, or the epoch's
   own), the run ends with status 143 */
static void stop_now(run *R, int e, int s) {
    const char *sig = tool_stop_requested == SIGUSR1 ? "SIGUSR1" : tool_stop_requested == SIGUSR2 ? "SIGUSR2" : tool_stop_requested ? "SIGTERM" : "a stop signal to another rank";
    if (R->rank == 0) {
        if (s == R->steps) fprintf(stderr, "cf-train: %s: stopped after the last step of epoch %d; %s holds it, and --resume %s continues with its validation\n",
                                   sig, e, R->o.out, R->o.out);
        else if (s) fprintf(stderr, "cf-train: %s: stopped after step %d of %d of epoch %d; %s holds it, and --resume %s continues at step %d\n",
                            sig, s, R->steps, e, R->o.out, R->o.out, s + 1);
        else fprintf(stderr, "cf-train: %s: stopped after epoch %d; %s holds it\n", sig, e, R->o.out);
    }
    R->reached = -1;   /* not a finished run: no run_stop line in the MLPerf log */
    finish(R, e);
    exit(143);
}

/* --resume: CKPT (or when it is missing CKPT.next or CKPT.prev: tools/tool.h), then the
   settings its record holds: taken where no flag was given, refused where a flag differs
   (unless --override; the change is then recorded) */
static void resume(run *R) {
    char changed[1024], seed[32];
    ckpt_resume(R->o.resume, &R->net, &R->st, R->rank, R->resumed_from, sizeof R->resumed_from);
    R->first_epoch = (int)R->st.epoch + 1;
    mid_epoch_read(R);
    comm_watch_note(R->o.resume, R->first_epoch - 1);
    if (settings_resume(flags, n_flags, settings, N_SETTINGS, R->st.meta, R->o.resume, R->o.override, changed, sizeof changed) && R->rank == 0)
        fprintf(stderr, "cf-train: %s records only some of its settings (an older checkpoint): the others from the flags or the defaults\n", R->o.resume);
    if (!meta_value(R->st.meta, "seed", seed, sizeof seed)) R->o.seed = R->st.seed;   /* an older record */
    resume_global_batch(R->st.meta, R->o.resume, &R->o.batch, R->groups, R->o.spatial > 1 ? "groups of --spatial ranks" : "ranks", flag_was_given(flags, n_flags, "--batch"), R->o.override, changed, sizeof changed);
    if (changed[0]) snprintf(R->override_note, sizeof R->override_note, "override=epoch %d: %s\n", R->first_epoch, changed);
}
/* the model (from --model or the checkpoint), the flags that change it (loss, dropout), the
   initial or resumed weights, the training step's settings for its application */
static void setup_model(run *R) {
    options *o = &R->o;
    cf_net *net = &R->net;
    const cf_shape *shape = o->has_shape ? &o->shape : NULL;
    if (o->model) TRY(cf_net_load_cfg(net, o->model, shape));
    else TRY(cf_checkpoint_model(o->resume, net, shape));
    R->seg = net->loss == CF_LOSS_SOFTMAX_CE;
    /* split before the weights are drawn or read: a rank then only ever holds its part (each
       draws, or reads from the checkpoint, the whole network's values and keeps its own) */
    if (o->spatial > 1 && cf_net_set_spatial(net, o->spatial, 0)) die("--spatial %d: %s", o->spatial, cf_failure_reason());
    cf_net_init(net, o->seed);
    R->first_epoch = 1;
    if (o->resume) resume(R);             /* its weights and state, then its settings */
    if (o->preset) preset_2018(R->seg);   /* the recipe (it depends on the application) */
    R->st.seed = o->seed;
    if (R->seg && net->input.d != 1) die("%s: a segmentation model must be 2-D (CxHxW)", net->cfg_name);
    if (!R->seg && (net->input.d != net->input.h || net->input.h != net->input.w))
        die("%s: CosmoFlow input must be a cube, got %dx%dx%dx%d", net->cfg_name, net->input.c, net->input.d, net->input.h, net->input.w);
    if (o->loss >= 0 && !R->seg) TRY(cf_net_set_loss(net, o->loss));
    if (!R->seg) o->loss = net->loss;     /* the record says which */
    if (o->dropout >= 0) cf_net_set_dropout(net, (float)o->dropout);
    if (o->spatial == 1) cf_dist_bcast(net->params, net->n_params);   /* rank 0's weights everywhere (split: each rank's own, above) */
    if (o->sync_bn) TRY(cf_net_sync_bn(net, cf_dist_sum_reduce, NULL));
    TRY(cf_train_init(&R->tr, net, &o->tc));
    if (o->resume) TRY(cf_train_resume_pending(&R->tr, R->resumed_from));   /* gradient lag's pending gradient, if it holds one */
    o->tc = R->tr.cfg;   /* resolved for the application: what the record says */
}
static void setup_data(run *R) {
    options *o = &R->o;
    R->train_files = data_files(o->train, o->n_train, &R->n_train, &R->n_train_files);
    R->val_files = data_files(o->val, o->n_val, &R->n_val, &R->n_val_files);
    R->global_batch = o->batch * R->groups;
    R->steps = o->staged ? R->n_train / o->batch : R->n_train / R->global_batch;
    if (R->steps < 1) die("%s: %d training files are fewer than one %sbatch of %d", o->train, R->n_train, o->staged ? "" : "global ",
                          o->staged ? o->batch : R->global_batch);
    if (!(R->order = (int *)malloc(sizeof(int) * (R->n_train + R->n_val + 1)))) die("out of memory");
    loader_init_for(&R->L, &R->net, R->train_files, o->batch, o->apply_log, o->stats ? o->stats : o->train);
}
/* Every output is checked before any work (tools/tool.h): the checkpoint and its .next and
   .prev, the log and the pictures' directory may not be any input.  The one exception is
   --resume CKPT --out CKPT, continuing a run in place: the checkpoint it started from is
   kept as CKPT.prev. */
static void check_outputs(const run *R) {
    const options *o = &R->o;
    static const char *derived[4] = {"", ".next", ".prev", ".lock"};
    char p[4200];
    int k;
    input_path(o->model); input_path(o->train); input_path(o->val); input_path(o->stats);
    if (o->resume && !same_file(o->resume, o->out)) input_path(o->resume);
    for (k = 0; k < 4; k++) { snprintf(p, sizeof p, "%s%s", o->out, derived[k]); output_file("--out", p); }
    input_path(o->resume); input_path(o->out);   /* neither checkpoint may be the log or a picture */
    if (o->mllog) { snprintf(p, sizeof p, "%s.prev", o->mllog); output_file("--mllog", p); }
    output_file("--mllog", o->mllog);
    learning_curve_outputs(o->png);
}
/* the record the checkpoint keeps of how it was trained (cf-check --info shows it; --resume
   takes its settings from it; cf-eval its input transform): every setting, the global batch,
   the metric, and the overrides of resumed runs */
static void record_run(run *R) {
    char old[4096], extra[128];
    snprintf(old, sizeof old, "%s", R->st.meta);
    snprintf(extra, sizeof extra, "global_batch=%d\nmetric=%s\nspatial=%d\n", R->global_batch, R->seg ? "val_miou" : "val_mae", R->o.spatial);
    run_record(R->st.meta, sizeof R->st.meta, flags, n_flags, settings, N_SETTINGS, extra, old, R->override_note);
    snprintf(R->record, sizeof R->record, "%s", R->st.meta);
}
static int target_met(const run *R, double metric) {
    return R->o.target > 0 && (R->seg ? metric >= R->o.target : metric <= R->o.target);
}

/* ---------------------------------------------------------------- one epoch */
/* A NaN or Inf: stop before it reaches a checkpoint, saying where it appeared first */
static void nonfinite_die(run *R, int epoch, int step, const cf_step_result *r, const float *x) {
    char files[2048], where[256];
    cf_train_explain(&R->tr, r, x, R->o.batch, where, sizeof where);
    die("epoch %d step %d: loss %g, %s; batch: %s; the last checkpoint %s is untouched (--skip-nonfinite skips such batches)",
        epoch, step, r->loss, where, loader_batch_files(&R->L, R->L.B, files, sizeof files), R->o.out);
}
/* the loss of one step (0 when skipped) summed over ranks, and whether any rank was asked to
   stop: one allreduce of two numbers a step */
/* whether any rank was asked to stop (outside the steps: after an epoch's validation and save) */
static int stop_anywhere(void) {
    double d = tool_stop_requested ? 1 : 0;
    cf_dist_allreduce_sum_d(&d, 1);
    return d > 0;
}
static int step_end(double *sum, double loss) {
    double d[2];
    d[0] = loss; d[1] = tool_stop_requested ? 1 : 0;
    cf_dist_allreduce_sum_d(d, 2);
    *sum += d[0];
    return d[1] > 0;
}
/* Trains epoch e from step first (0, or where a checkpoint within it stopped); returns the
   mean over steps of the loss summed over ranks, and the epoch's last learning rate in *lr.
   At a stop signal it writes the checkpoint and ends the run (stop_now). */
static double train_epoch(run *R, int e, int first, double *lr) {
    options *o = &R->o;
    double t0 = now_s(), sum = first ? R->first_sum : 0;
    int n_local = o->staged   /* its own files, in its own order; else its share of one global permutation */
                  ? cf_epoch_shard(R->order, R->n_train, cf_hash64(o->seed + 1000003u * (uint64_t)R->rank), e, 0, 1, 1, 1)
                  : cf_epoch_shard(R->order, R->n_train, o->seed, e, R->group, R->groups, 1, 1);   /* a group's ranks: the same samples */
    int s, nb, skipped = first ? R->first_skipped : 0, stop;
    float *x, *y;
    cf_step_result r;
    if (n_local > R->steps * o->batch) n_local = R->steps * o->batch;   /* whole batches only, as the reference */
    cf_train_epoch(&R->tr, e);
    *lr = cf_train_lr(&R->tr, R->global_batch);
    R->L.files = R->train_files;
    R->L.augment = o->augment; R->L.aug_seed = cf_hash64(o->seed * 31 + (uint64_t)e);
    loader_begin_at(&R->L, R->order, n_local, first * o->batch);
    for (s = first; s < R->steps; s++) {
        double loss = 0;
        loader_next(&R->L, &x, &y, &nb);
        if (nb != o->batch) die("internal: short training batch");
        TRY(cf_train_step(&R->tr, x, y, o->batch, &r));
        if (r.status == CF_STEP_DIVERGED) nonfinite_die(R, e, s + 1, &r, x);   /* the weights themselves: nothing to skip */
        if (r.status == CF_STEP_NONFINITE || !isfinite(r.loss)) {   /* the same on every rank: the average was not finite */
            if (!o->skip_nonfinite) nonfinite_die(R, e, s + 1, &r, x);
            if (r.status == CF_STEP_NONFINITE && ++skipped && R->rank == 0)
                fprintf(stderr, "cf-train: epoch %d step %d: non-finite gradient (layer %d), batch skipped (%d so far)\n", e, s + 1, r.layer, skipped);
        } else {
            if (r.status == CF_STEP_UPDATED) *lr = r.lr;
            loss = r.loss;
        }
        stop = step_end(&sum, loss);
        progress(o->progress, e, (s + 1) * R->global_batch, R->steps * R->global_batch, t0);
        if (stop || (o->save_every && cf_net_step(&R->net) % (uint64_t)o->save_every == 0 && s + 1 < R->steps))
            save_within_epoch(R, e, s + 1, sum, skipped);
        if (stop) stop_now(R, e, s + 1);
    }
    return sum / R->steps;
}
/* Validation: every file once, in order, sharded over ranks, with the batch-norm statistics
   averaged over ranks first as the reference does; the mean absolute error (CosmoFlow) or
   the mean over samples of the per-sample IoU (DeepCAM, MLPerf's metric).  A sample whose
   error is not finite is an error that names it, never a NaN in the log. */
static double validate(run *R) {
    double sums[2] = {0, 0};
    int n_local, nb, bad;
    float *x, *y;
    cf_net_average_stats(&R->net);
    R->L.augment = 0;
    n_local = cf_epoch_shard(R->order, R->n_val, 0, 0, R->group, R->groups, 0, 0);
    R->L.files = R->val_files;
    loader_begin(&R->L, R->order, n_local);
    for (;;) {
        loader_next(&R->L, &x, &y, &nb);
        if (!nb) break;
        if (cf_eval_batch(&R->net, x, y, nb, sums, &bad))
            die(bad >= 0 ? "validation: %s gives a non-finite %s (an input or label out of range, or a diverged model)" : "%s%s",
                bad >= 0 ? loader_file(&R->L, bad) : cf_failure_reason(), bad >= 0 ? (R->seg ? "IoU" : "error") : "");
    }
    cf_dist_allreduce_sum_d(sums, 2);   /* (a group's ranks each add its samples': K times both sums) */
    return sums[0] / sums[1];
}
/* rank 0 writes the checkpoint; split across ranks (--spatial), the other ranks of its group
   send it their rows of a split [dense] (cf_checkpoint_save) */
static void write_checkpoint(run *R) {
    if (R->group) return;
    if (R->rank) TRY(cf_checkpoint_save(NULL, &R->net, &R->st));
    else ckpt_save(R->o.out, &R->tr, &R->st);
}
/* after each epoch: a checkpoint never holds a parameter that is not finite */
static void save_checkpoint(run *R, int e) {
    comm_watch_note(R->o.out, e);   /* what a watchdog's message names (rank 0 writes it) */
    if (R->group) return;
    if (R->rank) { write_checkpoint(R); return; }
    if (cf_net_first_nonfinite_param(&R->net, 1) >= 0)
        die("epoch %d: layer %d's parameters are not finite; no checkpoint written, the last one %s is untouched",
            e, cf_net_first_nonfinite_param(&R->net, 1), R->o.out);
    write_checkpoint(R);
}
/* After an epoch: the MLPerf lines, the checkpoint, the epoch line, the learning curve */
static void end_epoch(run *R, int e, double loss, double metric, double lr, double t0) {
    const char *name = R->seg ? "val_miou" : "val_mae";
    mll_epoch_end(e, R->seg, metric, loss);
    R->st.epoch = (uint64_t)e; R->st.seed = R->o.seed; R->st.best = metric;
    save_checkpoint(R, e);
    if (R->rank == 0) {
        printf("epoch %d train_loss %.6f %s %.6f lr %.6g time %.1f\n", e, loss, name, metric, lr, now_s() - t0);
        if (R->o.png) learning_curve(R->o.png, e, loss, metric, name);
        if (fflush(stdout) || ferror(stdout)) die("stdout: write failed (%s)", strerror(errno));
    }
    if ((R->reached = target_met(R, metric)) && R->seg) mll_target_reached(e, metric);
}

/* the settings every rank of a job must share (tools/tool.h, settings_agree): the training
   step's and the run's (the record's lines as flags), the model's text, the inputs and outputs;
   --staged gives each rank its own --train */
static void agree_across_ranks(const options *o) {
    char rec[8192], text[16384], *at = text, *end = text + sizeof text;
    const char *p;
    unsigned crc = 0;
    struct stat st;
    int fd = o->model ? open(o->model, O_RDONLY | O_NONBLOCK) : -1;   /* (a FIFO is refused later, by name, not waited on here) */
    if (fd >= 0 && !fstat(fd, &st) && S_ISREG(st.st_mode)) { char b[4096]; ssize_t k; while ((k = read(fd, b, sizeof b)) > 0) crc = cf_crc32c(crc, b, (size_t)k); }
    if (fd >= 0) close(fd);
    settings_record(flags, n_flags, settings, N_SETTINGS, rec, sizeof rec);
    for (p = rec; *p && at < end - 1; p += strcspn(p, "\n") + (p[strcspn(p, "\n")] != 0)) {   /* key=value -> --key value */
        size_t kl = strcspn(p, "="), ll = strcspn(p, "\n"), i;
        at += snprintf(at, (size_t)(end - at), "--");
        for (i = 0; i < kl && at < end - 1; i++) *at++ = p[i] == '_' ? '-' : p[i];
        at += snprintf(at, (size_t)(end - at), " %.*s\n", (int)(ll > kl ? ll - kl - 1 : 0), p + kl + (kl < ll));
    }
    if (at < end) snprintf(at, (size_t)(end - at), "--model %s (its text's CRC32C %08x)\n--train %s\n--val %s\n--out %s\n--resume %s\n--batch %d\n--epochs %d\n"
             "--input-shape %s\n--target %.17g\n--n-train %d\n--n-val %d\n--stats %s\n--mllog %s\n--png %s\n--preset %s\n--skip-nonfinite %d\n--spatial %d\n",
             o->model ? o->model : "(none)", crc, o->staged ? "(each rank's own)" : o->train, o->val, o->out, o->resume ? o->resume : "(none)",
             o->batch, o->epochs, o->has_shape ? shape_text(o->shape) : "(the cfg's)", o->target, o->n_train, o->n_val,
             o->stats ? o->stats : "(none)", o->mllog ? o->mllog : "(none)", o->png ? o->png : "(none)", o->preset ? o->preset : "(none)", o->skip_nonfinite, o->spatial);
    settings_agree(text);
}
static void setup(run *R, int argc, char **argv) {
    options *o = &R->o;
    cf_net *net = &R->net;
    mll_run m;
    dist_start(&argc, &argv);
    agree_across_ranks(o);
    R->rank = cf_dist_rank(); R->size = cf_dist_size();
    if (R->size % o->spatial) die("--spatial %d: %d ranks do not form groups of %d", o->spatial, R->size, o->spatial);
    R->groups = R->size / o->spatial; R->group = R->rank / o->spatial;
    if (R->rank) o->progress = 0;
    check_outputs(R);
    if (R->rank == 0) lock_output("--out", o->out);   /* one writer per checkpoint */
    lock_share();   /* (a rank that ends the job removes it too) */
    mll_open(o->mllog, o->resume != NULL);
    MLL_EVENT("cache_clear", "true");
    MLL_START("init_start", NULL);
    setup_model(R);
    setup_data(R);
    if (R->first_step > R->steps && !o->override)
        die("%s: it stopped after step %d of epoch %d, but an epoch here has %d steps (another training set or global batch; "
            "--override starts that epoch afresh)", o->resume, R->first_step, R->first_epoch, R->steps);
    if (R->first_step > R->steps) {   /* --override: the stopped epoch's position does not fit this epoch: it starts again */
        if (R->rank == 0)
            fprintf(stderr, "cf-train: %s stopped after step %d of epoch %d; an epoch here has %d steps: --override starts epoch %d afresh\n",
                    o->resume, R->first_step, R->first_epoch, R->steps, R->first_epoch);
        R->first_step = 0; R->first_sum = 0; R->first_skipped = 0;
    }
    record_run(R);
    if (R->rank == 0 && o->spatial > 1)
        fprintf(stderr, "cf-train: %d ranks: %d group%s of %d, each sample split across a group (%d planes a rank)\n", R->size, R->groups,
                R->groups > 1 ? "s" : "", o->spatial, net->input.d / o->spatial);
    if (R->rank == 0)
        fprintf(stderr, "cf-train: %d %s%s x batch %d = global batch %d; %d training%s, %d validation files; %s, input %s, %zu parameters, %s\n",
                R->groups, o->spatial > 1 ? "group" : "rank", R->groups > 1 ? "s" : "", o->batch, R->global_batch, R->n_train, o->staged ? " (per rank, staged)" : "", R->n_val,
                net->cfg_name, shape_text(net->input), net->n_params, precision_text(R->tr.cfg.precision));
    m.seg = R->seg; m.ranks = R->size; m.global_batch = R->global_batch; m.train_samples = R->steps * R->global_batch;
    m.eval_samples = R->n_val; m.sync_bn = o->sync_bn; m.seed = o->seed; m.dropout = o->dropout; mll_run_start(&R->tr.cfg, &m);
}
static void finish(run *R, int e) {
    double rss[2];
    if (R->reached >= 0) mll_run_stop(R->reached || R->o.target <= 0);
    rss[0] = peak_rss_mb(); rss[1] = -rss[0];
    cf_dist_allreduce_max_d(rss, 2);   /* the largest and the smallest rank's peak */
    if (R->rank == 0) fprintf(stderr, "cf-train: %d epochs in %.1f s, checkpoint %s\n", e - R->first_epoch, now_s() - R->t_start, R->o.out);
    if (R->rank == 0 && R->size > 1) fprintf(stderr, "cf-train: peak memory a rank %.0f MB (the largest of %d; the smallest %.0f MB)\n", rss[0], R->size, -rss[1]);
    loader_free(&R->L);
    free(R->order);
    cf_train_free(&R->tr);
    free_samples(R->train_files, R->n_train_files); free_samples(R->val_files, R->n_val_files);
    cf_net_free(&R->net);
    cf_dist_finalize();
}

int main(int argc, char **argv) {
    static run R;
    char meta[64];
    int e;
    tool_init(argc, argv, "train");
    tool_stops_at_steps = 1;   /* SIGTERM, SIGUSR1, SIGUSR2: stop at the end of the step (above) */
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
        if (e != R.first_epoch || !R.first_step) MLL_START("epoch_start", mll_epoch(meta, sizeof meta, e));   /* (logged before the stop) */
        loss = train_epoch(&R, e, e == R.first_epoch ? R.first_step : 0, &lr);
        MLL_START("eval_start", meta);
        metric = validate(&R);
        end_epoch(&R, e, loss / R.size, metric, lr, t0);
        if (stop_anywhere()) stop_now(&R, e, 0);   /* a stop signal during validation or the save */
    }
    /* a resumed run with no epoch left still writes the checkpoint it announces */
    if (e == R.first_epoch && !same_file(R.o.resume, R.o.out)) write_checkpoint(&R);
    finish(&R, e);
    return 0;
}
