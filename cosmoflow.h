/* cosmoflow.h - a small, exact 2-D/3-D convolutional network framework in one C header.
   Reproduces CosmoFlow (3-D CNN regression of cosmological parameters) and DeepCAM (2-D
   segmentation of climate snapshots: DeepLabv3+, Tiramisu).  No warranty; MIT licence at the
   end of the file.

   USE
     In exactly one C or C++ file:
         #define CF_IMPLEMENTATION
         #include "cosmoflow.h"
     Everywhere else just #include "cosmoflow.h".  No -D is needed: the header builds
     under -std=c99, c11, c17 (-pedantic) and C++11 or later, before or after other headers.
     Files are read and written with POSIX calls that every strict mode declares (open, read,
     write, fsync, rename, ...); with CF_NO_FILES it needs the C standard library alone.

   LINK LINE AND BUILD FLAGS
     The least:      cc -std=c99 prog.c -lm                     (the naive sgemm, one thread)
     For speed:      cc -std=c99 -O3 -march=x86-64-v3 -fopenmp -DCF_USE_CBLAS prog.c \
                        -L/usr/lib/x86_64-linux-gnu/openblas-openmp \
                        -Wl,-rpath,/usr/lib/x86_64-linux-gnu/openblas-openmp -lopenblas -lm
     What each buys, measured (sh bench/build_flags.sh: a training step of
     models/cosmoflow-small.cfg at 4x32x32x32, batch 2; 2 cores of an AMD EPYC Zen 5, GCC 12;
     docs/performance.md, "Build flags"):
       -O2                              746 ms   the naive sgemm: correct, for reading
       -O3                              774 ms
       -O3 -march=x86-64-v3             468 ms   the direct convolution kernels (AVX2, FMA;
                                                 their AVX-512 form chosen at run time)
       ... -fopenmp                     393 ms   the threads (OpenMP)
       ... -DCF_USE_CBLAS, OpenBLAS's   18.6 ms  BLAS, 21x: without CF_USE_CBLAS every GEMM
           OpenMP build                          runs the naive sgemm, silently slow
       ... the same, -lopenblas as      50.1 ms  a pthreads OpenBLAS whose threads spin
           the system's default                  beside OpenMP's: link its OpenMP build
     The implementation takes about 11 s to compile at -O3 (15 s with -g); the Makefile
     compiles it once (bin/cosmoflow.o) and links it into the six tools.  -O2 is fine;
     the bf16 GEMM runs at 0.87x its -O3 rate there.  Add -DCF_USE_MPI with an MPI wrapper
     compiler (mpicc) for data parallelism, -DCF_USE_ZLIB -lz for gzipped TFRecords and PNG.

   LIMITATIONS
     * Platforms: Linux with glibc is what the tests run on (x86-64; aarch64 is built).  Files
       need POSIX (open, fsync, rename, uname, dirent); CF_NO_FILES leaves them out.  The fast
       kernels need GCC or Clang on x86-64 (AVX2 + FMA; AVX-512 and AVX512_BF16 chosen at run
       time); elsewhere the portable code runs, with the same results to rounding.
     * Little-endian hosts only: the file formats (.npy "<f4", checkpoints, TFRecords) are read
       and written as the host stores numbers, and a big-endian host would misread them.
     * CPU only; float32 NCDHW activations (bf16 rounding, fp32 storage: cf_net_set_precision).
       Per sample, a layer's output and its weights hold at most 2e9 values, an axis at most
       2^20; a [route] or [add] at most 8 sources (CF_MAX_SRC); at most 16 classes.
     * A sample split across ranks (cf_net_set_spatial) only along depth, only 3-D networks
       whose layers before the first [flatten] align with the slabs (checked, named); no
       gradient lag or overlapped averaging there, no LAMB or LARC with its [dense] split,
       no 16-bit storage of bf16 outputs; a network is split once.
     * Threads: see THREADS.  The library starts OpenMP threads inside its calls (-fopenmp);
       BLAS must run single-threaded inside a parallel region (OpenBLAS's OpenMP build does).

   THREADS (what may run at the same time in several threads of one process)
     basics           any, at once: cf_failure_reason() is the calling thread's own
     A-C              one thread at a time per cf_net (and its cf_trainer); different
                      networks in different threads at once, cf_net_parse included
     D. files         any, at once, on different files; one writer per file
     E. distributed   MPI from one thread (the thread that called cf_dist_init);
                      cf_dist_overlap_* keeps one network's state per process;
                      cf_dist_waiting() from any thread at any time
     F. operations    any, at once, on buffers that do not overlap
     G. inside        cf_fast_path_set changes switches of the whole process: call it
                      before other threads use the library; the rest as A

   OPTIONS (define before the implementation include)
     CF_USE_CBLAS   call cblas_sgemm (OpenBLAS); otherwise a naive sgemm is used.
                    The naive sgemm is always compiled as cf_sgemm_naive: it is the test oracle.
                    With OpenMP, large convolutions call it from several threads at once
                    and expect it to run single-threaded inside a parallel region
                    (OpenBLAS's OpenMP build, MKL and BLIS do; a pthreads OpenBLAS gives the
                    same numbers, but may start threads of its own on busy cores).
     CF_USE_MPI     data parallelism through MPI (cf_dist_*); otherwise one process.
     CF_USE_ZLIB    gzip TFRecords and PNG pictures; without it only plain TFRecords are read.
     CF_NO_FILES    no file input or output at all (group D below, cf_net_load_cfg): the
                    network, its kernels, the optimizers and the training step, for a program
                    that brings its own data and keeps its own weights (cf_net_parse takes the
                    model as text; the parameters are one buffer, net->params).
     CF_REFERENCE   every operation runs its plain reference function (section 3) and
                    no fast path (section 13) is compiled in: the code a reader audits.
     CF_NO_DIRECT_CONV   no direct convolution kernels.  They are compiled with GCC or Clang
                    when the target has AVX2 and FMA (-march=x86-64-v3 or native).
     CF_STATIC      make every function static (private copy per translation unit).
     CF_MALLOC(n), CF_FREE(p)   allocator overrides (define both or neither).
     CF_ASSERT(x)   internal-invariant check (default: assert): only in functions that return
                    nothing (the contract, below).

   THE PUBLIC API, by audience (the declarations below are in this order)
     basics           errors, the generator, CRC32C, bfloat16, shapes and geometry    stable
     A. network       parse a cfg, initialize, forward, loss, backward, free          stable
     B. training      cf_train_step: forward, loss, backward, the gradient averaging
                      and the optimizer with its schedule, in one call; the optimizers
                      and schedules it is made of; the references' data transforms     stable
     C. evaluation    predictions and the applications' metrics                        stable
     D. files         .npy, checkpoints, weights, TFRecords, samples, PNG              stable
     E. distributed   MPI wrappers, synchronized batch norm, overlapped averaging      stable
     F. operations    every kernel's reference and its dispatcher: what a reader
                      audits and the tests compare            arguments may change
     G. inside        the paths, outputs, hooks and switches the tools and tests use
                      to look inside a step                             may change
     Stable: the names, arguments and meaning of the basics and of groups A-E change only
     with the major version.  The structs expose what a user reads (the model's shapes, the
     parameter count, the buffers, a trainer's settings); the memory plan, workspace, mode,
     hooks, step counters and a trainer's buffers are private (read through functions).
     Each function states what it expects (pointers not NULL unless said).  The contract: a
     function that can report an error (an int code, a NULL pointer, NAN) reports it with the
     reason in cf_failure_reason() and never asserts; CF_ASSERT is only where nothing can be
     returned (void functions).  No library call crashes on purpose.

   CONVENTIONS
     * Activations are float32 NCDHW; a 2-D network is the case D = 1.
     * All parameters live in one buffer (net->params), their gradients in a second with the
       same offsets (net->grads), the optimizer state in a third (net->opt, two slots per
       parameter).  Layers hold offsets.  Data parallelism is one allreduce over net->grads.
       A sample split across ranks keeps the layout, cut to the rank's rows of its split
       [dense] (section 8, "pieces"); its files stay the whole network's.
       Batch-norm running statistics, which are saved but not trained, have their own buffer
       (net->stats).
     * Kernels are plain functions over raw pointers with a shape comment; backward kernels
       ACCUMULATE (+=) into gradients.  cf_net_zero_grad() clears them.
     * Every operation has one reference function, the obvious loops or im2col + sgemm with
       its derivation beside it (docs/math.md derives each backward).  Where a faster way
       exists it is a registered alternative in section 13, chosen by one dispatcher per
       operation (section 4); cf_fast_path_set("all", 0) or CF_REFERENCE runs the references only.
     * Library functions never exit(): they return CF_OK (0) or CF_ERR (-1) and leave a
       message in cf_failure_reason().  The library deletes no file it was not asked to.

   TABLE OF CONTENTS of the implementation (docs/tour.md is a reading order through it)
     1. Basics: errors, allocation, PRNG, CRC32C, bfloat16, the activation formulas, reading
                files
     2. Dense linear algebra: sgemm (naive + cblas)
     3. Reference kernels: convolution (im2col + sgemm), depthwise and transposed
                convolution, pooling, dense, activations, dropout, batch norm, losses, IoU;
                fp32, accumulating, nothing but the operation
     4. The door to the fast paths: the kinds and their switches, and the dispatchers the
                network calls, with what its precision and memory plan ask of an operation
     5. Networks: the layer-type table (parse, shape, parameters, FLOPs, forward, backward
                of each type), the cfg parser, forward and backward, initializers, bf16 as
                the reference on rounded operands; a sample split across ranks (halos,
                slabs, the gathered features, the [dense] split by rows)
     6. The memory plan: outputs and gradients in one arena over the step's timeline,
                cheap outputs rebuilt in backward, conv + max-pool pairs fused
     7. Optimizers: Keras-form momentum SGD, Adam/AdamW, LAMB, LARC; the schedules
     8. The training step and evaluation: cf_train_step, cf_eval_batch; the references'
                input transforms, sharding and the cube's symmetries
     9. Files: .npy, checkpoints, weights directories, TFRecord + tf.train.Example,
               CosmoFlow and DeepCAM samples, PNG
    10. Distributed: MPI wrappers (one process without CF_USE_MPI), a split's group and its
                exchanges
    11. Fast paths, last: the registry, the kernels (pointwise, tiles, direct, AVX-512, bf16,
                pooling, depthwise), the tables, the dispatchers and the storage forms
*/
#ifndef CF_INCLUDE_COSMOFLOW_H
#define CF_INCLUDE_COSMOFLOW_H

#include <stddef.h>
#include <stdint.h>

#define CF_VERSION "0.3.0"

#if defined(CF_STATIC) && defined(__GNUC__)
#define CFDEF static __attribute__((unused))
#elif defined(CF_STATIC)
#define CFDEF static
#else
#ifdef __cplusplus
#define CFDEF extern "C"
#else
#define CFDEF extern
#endif
#endif

#define CF_OK 0
#define CF_ERR (-1)
#define CF_MAX_SRC 8      /* inputs of a route/add layer */
#define CF_MAX_DIMS 8     /* .npy arrays */
#define CF_MAX_CLASSES 16

/* ================================================================ basics (stable) */
CFDEF const char *cf_failure_reason(void);
/* frees what a call handed to the caller (a checkpoint's cfg_text) with the library's own
   CF_FREE, so a translation unit without CF_IMPLEMENTATION can free it too */
CFDEF void cf_free(void *p);
CFDEF int cf_fail(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
/* splitmix64: a tiny seedable generator, identical on every platform */
typedef struct { uint64_t s; } cf_rng;
CFDEF cf_rng cf_rng_seed(uint64_t seed);
CFDEF uint64_t cf_rng_u64(cf_rng *r);
CFDEF float cf_rng_uniform(cf_rng *r);            /* [0, 1), 24 random bits */
CFDEF double cf_rng_uniform64(cf_rng *r);         /* [0, 1), 53 random bits */
CFDEF double cf_rng_normal(cf_rng *r);            /* N(0,1), Box-Muller */
CFDEF uint64_t cf_hash64(uint64_t x);             /* splitmix64 finalizer (counter-based streams) */
CFDEF uint32_t cf_crc32c(uint32_t crc, const void *data, size_t n);
CFDEF uint32_t cf_crc32c_masked(const void *data, size_t n); /* TFRecord's mask */
/* bfloat16: the upper 16 bits of an fp32 (sign, 8 exponent bits, 7 mantissa bits), so the
   same range as fp32 with 8 bits of precision.  cf_bf16_from_f32 rounds as the CPU's
   vcvtne2ps2bf16 does: zero or denormal -> zero of the same sign, NaN -> quiet NaN, otherwise
   round to nearest, ties to even (docs/math.md, "bf16").  cf_bf16_round: x[i] = f32(bf16(x[i])). */
typedef uint16_t cf_bf16;
CFDEF cf_bf16 cf_bf16_from_f32(float f);
CFDEF float cf_f32_from_bf16(cf_bf16 h);
CFDEF void cf_bf16_round(float *x, size_t n);

typedef struct { int c, d, h, w; } cf_shape;   /* one sample; d = 1 for 2-D */
CFDEF size_t cf_shape_size(cf_shape s);
CFDEF int cf_parse_shape(const char *s, cf_shape *out);     /* "CxDxHxW" or "CxHxW" */

/* Geometry of a convolution or pooling window, per axis (0 = depth, 1 = height, 2 = width). */
typedef struct {
    int k[3];        /* kernel size */
    int s[3];        /* stride */
    int dil[3];      /* dilation */
    int pb[3], pa[3];/* zero padding before / after */
} cf_geom;
CFDEF int cf_geom_out(const cf_geom *g, int axis, int in); /* output size along an axis */
enum { CF_ACT_LINEAR, CF_ACT_RELU, CF_ACT_LEAKY, CF_ACT_TANH };

/* ================================================================ A. network (stable)
   What every function here and in B-E expects of a cf_net: one cf_net_parse made (or a
   function that parses: cf_net_load_cfg, cf_checkpoint_model) and cf_net_free has not freed
   since (a freed or never-initialized network is detected and refused); pointers not NULL
   unless a comment says they may be. */
enum {
    CF_L_CONV, CF_L_MAXPOOL, CF_L_AVGPOOL, CF_L_DENSE, CF_L_FLATTEN, CF_L_DROPOUT,
    CF_L_ACT, CF_L_SCALE, CF_L_ROUTE, CF_L_ADD, CF_L_BATCHNORM, CF_L_DECONV, CF_L_GAP,
    CF_L_BROADCAST, CF_L_AFFINE, CF_L_NTYPES
};
enum { CF_INIT_GLOROT_UNIFORM, CF_INIT_KAIMING_UNIFORM, CF_INIT_KAIMING_NORMAL,
       CF_INIT_TORCH, CF_INIT_ZEROS, CF_INIT_CONST };
enum { CF_LOSS_MSE, CF_LOSS_L1, CF_LOSS_SOFTMAX_CE };

/* One layer as the cfg describes it: what it computes, its shapes and where its parameters
   are (read-only; where its output lives during a step is the memory plan's, private). */
typedef struct {
    int type;                 /* CF_L_* */
    int line;                 /* line of its section in the cfg */
    int src[CF_MAX_SRC];      /* input layer indices; -1 = network input */
    int n_src;
    cf_shape in, out;         /* per sample; out.c: a conv's filters, a dense layer's outputs */
    cf_geom g;                /* conv / pool geometry */
    char pad_mode[16];        /* "same", "valid" or "explicit" (kept for --input-shape) */
    int pad_spec[6];          /* explicit padding, as written */
    int groups, has_bias, depthwise;   /* depthwise: groups = in channels = out channels */
    int act;  float slope;    /* fused activation (conv, dense, batchnorm, ...; act layer) */
    float factor;             /* scale layer */
    float rate;               /* dropout rate */
    int l2;                   /* 1: the optimizer's L2 applies to this layer's kernel */
    int outpad[3];            /* deconv: output padding (extra rows at the end) */
    int like;                 /* broadcast: the layer whose spatial size the output takes */
    float momentum, eps;      /* batchnorm */
    int init, bias_init; float bias_value;
    size_t w_off, w_n, b_off, b_n;  /* into params / grads / opt (b_n = 0: no bias) */
    size_t s_off, s_n;        /* batchnorm: running mean (C) then running var (C), into stats */
} cf_layer;

/* A network: its model (read-only), its buffers, and the state a training step advances.
   Everything else (the memory plan, the workspace, the mode, the hooks) is private. */
struct cf__net_private;
typedef struct cf_net {
    char *cfg_text;           /* the model text, embedded in checkpoints */
    char *cfg_name;           /* its file name (error messages) */
    cf_shape input;           /* per sample */
    int loss;                 /* CF_LOSS_* */
    int n_outputs;            /* per sample */
    int n_targets;            /* per sample: n_outputs, or H*W class ids (softmax_ce) */
    int n_classes;            /* softmax_ce: the classes (the last layer's channels); else 0 */
    int n_layers;
    cf_layer *layers;
    /* the buffers (llm.c's memory model): parameters, their gradients and the optimizer state
       with the same offsets.  opt holds opt_slots slots of n_params: the first SGD's velocity
       or Adam's and LAMB's first moments, the second (opt + n_params) their second moments,
       allocated (zero) when an optimizer that uses it first needs it (cf_train_init, the
       first cf_adam_step or cf_lamb_step, a checkpoint that holds one): SGD leaves opt_slots
       at 1.  Batch-norm running statistics apart, saved but not trained */
    size_t n_params;
    float *params, *grads, *opt;
    int opt_slots;
    size_t n_stats;
    float *stats;
    /* read-only state: the seed of cf_net_init (dropout masks hash it with the step, below),
       the batch of the last forward */
    uint64_t seed;
    int batch;
    struct cf__net_private *priv;
} cf_net;
/* The training steps taken (cf_train_step advances it by one each call, a checkpoint restores
   it; dropout masks hash it) and of those the optimizer updates made (not gradient lag's
   waiting step, not a step whose gradient was not finite): Adam's and LAMB's t is the
   update's number, counted from 1, as PyTorch counts its optimizer's steps. */
CFDEF uint64_t cf_net_step(const cf_net *net);
CFDEF uint64_t cf_net_updates(const cf_net *net);

/* Parse a cfg text (name used in error messages; may be NULL).  shape_override may be NULL.
   Parameters are allocated and zero; call cf_net_init to draw the initial weights.  The cfg
   parser keeps no state: networks may be parsed in several threads at once. */
CFDEF int cf_net_parse(cf_net *net, const char *text, const char *name,
                       const cf_shape *shape_override);
#ifndef CF_NO_FILES
CFDEF int cf_net_load_cfg(cf_net *net, const char *path, const cf_shape *shape_override);
#endif
CFDEF int cf_net_init(cf_net *net, uint64_t seed);
CFDEF void cf_net_free(cf_net *net);   /* NULL, a zeroed or a freed network: nothing to do */
/* What a forward pass does with dropout and batch norm.  A parsed net starts in
   CF_MODE_EVAL; cf_train_step sets CF_MODE_TRAIN for its own step, cf_net_predict EVAL. */
enum {
    CF_MODE_EVAL = 0,          /* dropout off, batch norm with the running statistics */
    CF_MODE_DROPOUT = 1,       /* dropout on: masks from (seed, step, layer) */
    CF_MODE_BATCH_STATS = 2,   /* batch norm with the batch's statistics, running ones updated */
    CF_MODE_TRAIN = 3          /* both: a training step */
};
CFDEF void cf_net_set_mode(cf_net *net, int mode);   /* mode one of CF_MODE_* (asserted) */
CFDEF int cf_net_mode(const cf_net *net);
/* The precision of the activations.  CF_FP32, the default; CF_BF16: every layer's operands
   (its inputs, a convolution's weights) are rounded to bfloat16 and its output is rounded once
   when stored, as training on the CPU's bf16 dot-product instructions computes; the master
   weights, their gradients and optimizer state, batch-norm statistics, the losses and the
   dense head (from the first [dense] layer on) stay fp32 (docs/math.md, "bf16").  Takes
   effect at the next forward. */
enum { CF_FP32, CF_BF16 };
CFDEF int cf_net_set_precision(cf_net *net, int precision);
CFDEF int cf_net_precision(const cf_net *net);
CFDEF const char *cf_precision_name(int precision);   /* "fp32", "bf16" */
/* Change the model's loss (regression: CF_LOSS_MSE or CF_LOSS_L1) or every dropout layer's
   rate (in [0, 0.999], as the cfg's rate=); the embedded cfg text is not changed (cf-train
   records both in its checkpoints). */
CFDEF int cf_net_set_loss(cf_net *net, int loss);
CFDEF int cf_net_set_dropout(cf_net *net, float rate);
/* x (B, C, D, H, W) -> the output (B, n_outputs), valid until the next forward; NULL on
   failure (out of memory, B < 1).  In the current mode. */
CFDEF const float *cf_net_forward(cf_net *net, const float *x, int B);
/* The loss of the last forward against target (B, n_targets); dout (B, n_outputs), may be
   NULL, receives dL/d(output).  NAN with a reason when there is no output to score (no
   forward since the last backward) or a label is not a class. */
CFDEF double cf_net_loss(cf_net *net, const float *target, float *dout);
CFDEF void cf_net_zero_grad(cf_net *net);
/* dout (B, n_outputs): dL/d(output).  ACCUMULATES into net->grads.  After a forward (a
   second backward of one forward needs cf_net_keep_outputs). */
CFDEF int cf_net_backward(cf_net *net, const float *dout);
CFDEF const char *cf_layer_type_name(int type);             /* "?" for a type out of range */
CFDEF double cf_layer_flops(const cf_layer *l);             /* forward, per sample */
/* Parameter tensors in network order: index -> layer, kind ("weight"/"bias"), offset,
   count and PyTorch shape.  Returns the number of tensors. */
typedef struct { int layer; const char *kind; size_t off, n; int ndim; int shape[5]; int stats; } cf_tensor;
/* stats = 1: the tensor lives in net->stats (batchnorm running statistics; no gradient) */
CFDEF int cf_net_tensors(const cf_net *net, cf_tensor *out, int max);

/* ================================================================ B. training (stable)
   cf_train_step trains one step: the forward pass in training mode, the loss, the backward
   pass, the averaging of the gradient over the ranks, and the optimizer at this step's
   learning rate; then the step counter advances.  cf-train calls exactly this.  The
   defaults are the MLPerf HPC references' (docs/references.md).  Use:
       cf_train_config cfg; cf_trainer tr; cf_step_result r;
       cf_train_defaults(&cfg);  cfg.lr = ...;
       cf_train_init(&tr, &net, &cfg);
       for (epoch = 1; ...) { cf_train_epoch(&tr, epoch); for (...) cf_train_step(&tr, x, y, B, &r); }
       cf_train_free(&tr); */
enum { CF_OPT_SGD, CF_OPT_ADAM, CF_OPT_ADAMW, CF_OPT_LAMB };
/* Learning-rate schedules of the DeepCAM reference, per optimizer step.  Chained, exactly as
   torch computes them (utils/schedulers.py): the lr of step k derives from step k-1's. */
enum { CF_SCHED_MULTISTEP, CF_SCHED_COSINE };
typedef struct {
    int type;
    double base_lr;
    int warmup_steps; double warmup_factor;   /* linear warmup over the first steps */
    int n_milestones; long milestones[16]; double gamma;   /* multistep */
    long t_max; double eta_min;                            /* cosine */
} cf_lr_sched;
CFDEF double cf_lr_sched_at(const cf_lr_sched *s, uint64_t k);   /* k counted from 0 */
typedef struct {
    int optimizer;             /* CF_OPT_*; -1: the application's (CosmoFlow SGD, DeepCAM LAMB) */
    double lr;                 /* the base learning rate */
    double momentum;           /* SGD, Keras's form v = m v - lr g */
    double l2;                 /* SGD: L2 on the kernels marked l2=1 in the cfg */
    double weight_decay;       /* Adam: L2 in the gradient; AdamW, LAMB: decoupled;
                                  -1: the application's (CosmoFlow 0, DeepCAM 0.01) */
    double beta1, beta2, eps;  /* Adam, AdamW, LAMB */
    double max_grad_norm;      /* LAMB: the global gradient norm clipped to it (0: no clipping) */
    double larc;               /* > 0: LARC's eta, each tensor's gradient scaled first */
    /* the learning rate by epoch (CosmoFlow's reference): from lr over warmup_epochs to the
       peak lr * global batch / base_batch (base_batch 0: lr), then the peak times the factor
       of the latest decay epoch passed */
    double base_batch;
    int warmup_epochs;
    int n_decay; double decay_epoch[16], decay_factor[16];
    /* or per optimizer step (DeepCAM's reference) */
    int per_step;              /* 1: sched (its base_lr is lr); 0: by epoch; -1: the application's */
    cf_lr_sched sched;
    /* the gradient averaging over ranks (one process: none) */
    int grad_lag;              /* 1: step t's update applies step t-1's averaged gradient (2018) */
    long overlap;              /* > 0: averaged in buckets of >= overlap floats during backward */
    int precision;             /* CF_FP32 or CF_BF16: the net's (cf_net_set_precision) */
} cf_train_config;
CFDEF void cf_train_defaults(cf_train_config *c);
/* The settings as text, one key each: what cf-train's flags set and what its checkpoints
   record.  Keys: optimizer (sgd adam adamw lamb auto), lr, momentum, l2, weight_decay (or
   auto), betas (B1,B2), eps, max_grad_norm, larc, base_batch, warmup_epochs, decay (none or
   E:F,...), lr_schedule (epochs multistep cosine auto), milestones (S,... or none), decay_rate,
   warmup_steps, warmup_factor, t_max, eta_min, grad_lag (0 1), overlap, precision (fp32
   bf16).  set: CF_ERR with
   a reason "key: 'value' is not ..." for an unknown key or a value out of its range; get: the value
   as set would read it back exactly.  cf_train_config_key: the i-th key (from 0, NULL past
   the last), with a word for its value and a line of help. */
CFDEF int cf_train_config_set(cf_train_config *c, const char *key, const char *value);
CFDEF int cf_train_config_get(const cf_train_config *c, const char *key, char *out, size_t n);
CFDEF const char *cf_train_config_key(int i, const char **arg, const char **help);
/* Gradient lag's state (cf_dist_grad_lag): zero it before the first use; its fields are the
   library's (pending: 1 a sum whose allreduce is in flight, 2 an average read from a
   checkpoint) */
typedef struct { float *buf[2]; int cur, pending; void *req; } cf_grad_lag;
struct cf__train_private;
typedef struct {
    cf_net *net;
    cf_train_config cfg;       /* resolved for the net's application by cf_train_init */
    int epoch;                 /* the epoch being trained, from 1 (cf_train_epoch) */
    struct cf__train_private *priv;   /* the loss gradient's buffer, gradient lag's state */
} cf_trainer;
enum {
    CF_STEP_UPDATED,           /* the parameters moved */
    CF_STEP_WAITING,           /* gradient lag's first step: nothing to apply yet */
    CF_STEP_NONFINITE,         /* the averaged gradient (or a rank's loss) was not finite:
                                  no update, on every rank alike */
    CF_STEP_DIVERGED           /* the update made a parameter not finite (r->layer's): the
                                  weights are lost, the last checkpoint is what remains */
};
typedef struct {
    double loss;               /* this rank's loss of the batch */
    double lr;                 /* the learning rate of this step */
    int status;                /* CF_STEP_* */
    int layer;                 /* CF_STEP_NONFINITE: the first layer whose gradient is not finite;
                                  CF_STEP_DIVERGED: whose parameters are not */
} cf_step_result;
CFDEF int cf_train_init(cf_trainer *t, cf_net *net, const cf_train_config *c);
CFDEF int cf_train_epoch(cf_trainer *t, int epoch);   /* epoch from 1 */
/* x (B, C, D, H, W), target (B, n_targets); B the batch of this rank (the global batch is B
   times the ranks).  CF_ERR when out of memory or the optimizer refuses the step's arguments
   (a setting that as a float leaves its range: the reason names it). */
CFDEF int cf_train_step(cf_trainer *t, const float *x, const float *target, int B, cf_step_result *r);
CFDEF double cf_train_lr(const cf_trainer *t, int global_batch);   /* the next step's; NAN for a batch < 1 */
/* After a step that was not finite (r->status CF_STEP_NONFINITE, or a loss that is not):
   where it first went wrong, as a sentence (runs the batch x again) */
CFDEF void cf_train_explain(cf_trainer *t, const cf_step_result *r, const float *x, int B, char *out, size_t n);
CFDEF void cf_train_free(cf_trainer *t);
/* The building blocks of the step.  Each checks its arguments against the ranges of the
   training settings of the same names (cf_train_config_set's, the ones cf_train_init checks;
   lr: finite and >= 0, eta: larc's) and refuses one outside them, NaN included, with the
   reason: CF_ERR (cf_lamb_step: NAN), nothing changed.
   Keras SGD: v = m*v - lr*(g + 2*l2*w [layers with l2=1]); w += v */
CFDEF int cf_sgd_step(cf_net *net, float lr, float momentum, float l2);
/* Adam as torch.optim.Adam (decoupled = 0: wd adds wd*w to the gradient) or AdamW
   (decoupled = 1: w *= 1 - lr*wd first).  t: this step's number, counted from 1.  CF_ERR
   (nothing changed) when the second moments' slot cannot be allocated. */
CFDEF int cf_adam_step(cf_net *net, float lr, float beta1, float beta2, float eps, float wd,
                        int decoupled, uint64_t t);
/* LAMB as NVIDIA apex FusedLAMB (the DeepCAM reference): gradients clipped to a global norm
   of max_grad_norm (0: no clipping), Adam moments with bias correction, update
   u = m^/(sqrt(v^)+eps) + wd*w, then per tensor w -= lr * (|w|/|u|) * u.  As apex (not the
   paper), the trust ratio is 1 when wd = 0 or a norm is 0 (docs/math.md, "LAMB").  Returns
   the global gradient norm before clipping (NAN, nothing changed: the second moments' slot
   cannot be allocated).  The gradient buffer is overwritten with u. */
CFDEF double cf_lamb_step(cf_net *net, float lr, float beta1, float beta2, float eps, float wd,
                          float max_grad_norm, uint64_t t);
/* LARC (the 2018 climate code, clip mode): per tensor, g *= min(eta |w| / |g|, 1);
   a tensor with a zero norm is left alone.  Run before the optimizer step. */
CFDEF int cf_larc_scale(cf_net *net, float eta);
/* The references' data: CosmoFlow's channels-last (S,S,S,C) int16 -> (C,S,S,S) float:
   log(1 + x), or x / mean(x) when apply_log = 0 (the two branches of the reference's
   _parse_data), or with apply_log = 2 log(1 + x) - log(1 + mean_c), mean_c the sample's mean
   of channel c: log counts around 0 */
CFDEF void cf_cosmo_to_input(float *out, const int16_t *x, int S, int C, int apply_log);
/* DeepCAM's (H, W, C) -> (C, H, W) with the reference's normalization (x - min[c]) / (max[c] - min[c]) */
CFDEF void cf_climate_to_input(float *out, const float *x, int H, int W, int C,
                               const float *minval, const float *maxval);
/* One of the cube's 48 symmetries (code % 6 picks a permutation of the 3 axes, code / 6 a flip
   of each), in place on x (C, S, S, S), as the 2018 CosmoFlow code augments its volumes.
   tmp: C S^3 floats of scratch. */
CFDEF int cf_cube_symmetry(float *x, float *tmp, int C, int S, int code);   /* code in [0, 48) */
/* The same symmetry on a slab (a sample across ranks): planes [d0, d0 + n) of the depth of
   cf_cube_symmetry's result come from the original's voxels whose index along *axis lies in
   [*first, *first + n) (cf_cube_symmetry_source); cf_cube_symmetry_slab makes them, out (C,
   n, S, S), from that box, box (C, ...) with the extent n along axis. */
CFDEF int cf_cube_symmetry_source(int code, int S, int d0, int n, int *axis, int *first);
CFDEF int cf_cube_symmetry_slab(float *out, const float *box, int C, int S, int code, int d0, int n);
/* The references' sharding: a fresh permutation of all n files every epoch, identical on
   every rank (same seed), then files[rank::size].  Writes the rank's indices into out
   (n/size of them when drop_remainder, so every rank takes the same number of steps) and
   returns their count.  shuffle = 0 keeps the order (validation). */
CFDEF int cf_epoch_shard(int *out, int n, uint64_t seed, int epoch, int rank, int size,
                         int shuffle, int drop_remainder);

/* ================================================================ C. evaluation (stable) */
/* cf_net_forward in CF_MODE_EVAL: dropout off, batch norm with the running statistics */
CFDEF const float *cf_net_predict(cf_net *net, const float *x, int B);
/* One batch predicted and scored with the application's metric, added to sums: sums[0] the
   absolute errors of every output (regression) or the per-sample mean IoU (segmentation),
   sums[1] what they average over (outputs or samples); the metric is sums[0] / sums[1].
   CF_ERR when out of memory or when a sample's error is not finite (*bad: its index in the
   batch, else -1). */
CFDEF int cf_eval_batch(cf_net *net, const float *x, const float *target, int B, double sums[2], int *bad);
/* pred[p] = argmax_k z[k, p] (the first maximum).  z (K, P) */
CFDEF void cf_argmax_classes(int *pred, const float *z, int K, size_t P);
/* Mean IoU of ONE sample as MLPerf DeepCAM: the mean over all K classes (background
   included) of tp/(tp+fp+fn), a class absent from both prediction and label counting 1. */
CFDEF double cf_iou_sample(const int *pred, const float *label, size_t n, int K);

#ifndef CF_NO_FILES
/* ================================================================ D. files (stable) */
enum { CF_F32, CF_I16, CF_U8, CF_I64 };
typedef struct {
    int dtype, ndim;
    int64_t shape[CF_MAX_DIMS];
    size_t count;             /* elements */
    void *data;
} cf_array;
CFDEF size_t cf_dtype_size(int dtype);
CFDEF int cf_npy_read(const char *path, cf_array *a);
/* The part of an .npy array whose index along axis lies in [first, first + n), read alone
   (one read per combination of the indices before axis): a->shape[axis] = n.  A slab of a
   volume (axis 0) is one read. */
CFDEF int cf_npy_read_box(const char *path, int axis, int64_t first, int64_t n, cf_array *a);
CFDEF int cf_npy_write(const char *path, const cf_array *a);      /* atomic */
CFDEF void cf_array_free(cf_array *a);
CFDEF int cf_npy_read_f32(const char *path, float **data, size_t *count); /* any float32 */

/* Write to path.tmp.<host>.<pid>, fsync, rename; on failure nothing at path changes.  A
   temporary file left by a killed writer is not removed here (the library deletes nothing
   it was not asked to): the tools do that for their own outputs. */
typedef struct { int fd; char *path, *tmp; int failed; } cf_atomic_file;
CFDEF int cf_atomic_open(cf_atomic_file *af, const char *path);
CFDEF int cf_atomic_write(cf_atomic_file *af, const void *p, size_t n);
CFDEF int cf_atomic_commit(cf_atomic_file *af);   /* always closes */
CFDEF void cf_atomic_abort(cf_atomic_file *af);
/* "<path>.tmp.<host>." : the prefix of path's temporary files written on this host */
CFDEF int cf_atomic_tmp_prefix(const char *path, char *out, size_t n);

/* Where a training run is: epoch, seed, the last validation metric, and meta, what the
   training tool records of its run as key=value lines (optimizer, input transform, ...);
   step and updates are the network's (cf_net_step, cf_net_updates): cf_checkpoint_save
   writes the network's own, cf_checkpoint_load and cf_checkpoint_info fill them in. */
typedef struct { uint64_t step, epoch, seed; double best; char meta[4096]; uint64_t updates; } cf_train_state;
CFDEF int cf_checkpoint_save(const char *path, const cf_net *net, const cf_train_state *st);
/* (A network split across ranks, cf_net_set_spatial: the save is collective over the K ranks
   of one group, whose first rank writes path while the others send it their rows of a split
   [dense] (path unused there); the load reads the whole file on every rank, each keeping its
   own rows.  Either way the file is the whole network's.) */
/* Loads parameters, statistics and optimizer state into an already built net, which must
   compute what the checkpoint's model computes (else an error names the first difference:
   the input shape, a layer's type, activation, geometry, ...).  st may be NULL. */
CFDEF int cf_checkpoint_load(const char *path, cf_net *net, cf_train_state *st);
/* A trainer's checkpoint: cf_checkpoint_save's, and with gradient lag (grad_lag 1) the
   averaged gradient the next step applies (format 4), so that a run resumed from it
   continues to the byte; cf_train_resume_pending puts that gradient back into a trainer made
   after cf_checkpoint_load (a checkpoint without one: nothing changes).  (Not with a split:
   gradient lag does not run there.) */
CFDEF int cf_checkpoint_save_trainer(const char *path, cf_trainer *t, const cf_train_state *st);
CFDEF int cf_train_resume_pending(cf_trainer *t, const char *path);
/* Reads only the cfg text embedded in a checkpoint (the caller frees it with cf_free). */
CFDEF int cf_checkpoint_cfg(const char *path, char **cfg_text, cf_shape *input);
/* A checkpoint is its own model: builds the net its cfg text and input shape describe
   (shape, when not NULL, must be that shape), or checks that net is that model. */
CFDEF int cf_checkpoint_model(const char *path, cf_net *net, const cf_shape *shape);
CFDEF int cf_checkpoint_matches(const char *path, const cf_net *net);
/* everything a checkpoint holds but its tensors; cfg_text is the caller's (free with cf_free) */
typedef struct {
    int version;              /* 1, 2 or 3 */
    cf_shape input;
    uint64_t n_params, n_stats;
    cf_train_state state;     /* meta is empty before version 3 */
    char *cfg_text;
    int crc_ok;               /* the file read whole and its CRC32C matched */
    double rms[3];            /* root mean square of the parameters and of the two optimizer slots */
} cf_ckpt_info;
CFDEF int cf_checkpoint_info(const char *path, cf_ckpt_info *info);
CFDEF int cf_weights_export(const cf_net *net, const char *dir);
CFDEF int cf_weights_import(cf_net *net, const char *dir);
/* Checkpoint or weights directory, whichever path is. */
CFDEF int cf_weights_load(cf_net *net, const char *path);

/* TFRecord: the whole file (gzip or plain) in memory, records walked in order. */
typedef struct { unsigned char *buf; size_t len, pos; char *path; } cf_tfrecord;
CFDEF int cf_tfrecord_open(cf_tfrecord *r, const char *path);
/* 1: a record, 0: end of file, -1: error (reason names the file and offset) */
CFDEF int cf_tfrecord_next(cf_tfrecord *r, const unsigned char **data, size_t *len);
CFDEF void cf_tfrecord_close(cf_tfrecord *r);
/* tf.train.Example feature lookups (map entries in any order; unknown fields skipped). */
CFDEF int cf_example_bytes(const unsigned char *ex, size_t n, const char *key,
                           const unsigned char **val, size_t *len);
CFDEF int cf_example_floats(const unsigned char *ex, size_t n, const char *key,
                            float *out, size_t max, size_t *count);
/* Encoders, for writing synthetic data in the real format.  flags: CF_EX_Y_FIRST puts the y
   map entry before x; CF_EX_UNPACKED writes y as one fixed32 field per float. */
enum { CF_EX_Y_FIRST = 1, CF_EX_UNPACKED = 2 };
CFDEF size_t cf_example_encode(unsigned char *out, const char *xkey, const void *x, size_t xlen,
                               const char *ykey, const float *y, size_t ny, int flags);
CFDEF size_t cf_tfrecord_frame(unsigned char *out, const unsigned char *rec, size_t n);
CFDEF int cf_tfrecord_write(const char *path, const unsigned char *rec, size_t n, int gzip);

/* 8-bit RGB image (h rows of w*3 bytes) as a PNG, written atomically (needs CF_USE_ZLIB). */
CFDEF int cf_png_write(const char *path, const unsigned char *rgb, int w, int h);

/* CosmoFlow sample: int16 channels-last (S,S,S,4) + 4 labels, from a TFRecord or an
   X_data.npy (its label from the matching X_label.npy). */
typedef struct { int16_t *x; size_t count; int s, c; float y[8]; int ny; } cf_cosmo_sample;
CFDEF int cf_cosmo_read(const char *path, cf_cosmo_sample *smp);
/* The sample's voxels whose index along axis (0 depth, 1 height, 2 width) lies in [first,
   first + n): x (S,S,S,4) with that extent n, count its values, s the whole side S.  An .npy
   is read in part (a depth slab in one read); a TFRecord, framed and maybe compressed, is
   read whole and the box kept. */
CFDEF int cf_cosmo_read_box(const char *path, int axis, int first, int n, cf_cosmo_sample *smp);
CFDEF void cf_cosmo_free(cf_cosmo_sample *smp);
/* DeepCAM samples in the numpy layout (NVIDIA's convert_hdf52npy): data-X.npy float32
   (H, W, C) channels-last and label-X.npy float32 (H, W) class ids beside it.  path names the
   data file.  x and y are malloc'd; the labels are checked to be integers in [0, n_classes). */
typedef struct { float *x, *y; int h, w, c; } cf_climate_sample;
CFDEF int cf_climate_read(const char *path, cf_climate_sample *smp, int n_classes);
CFDEF void cf_climate_free(cf_climate_sample *smp);
/* Per-channel minimum and maximum: DIR/stats_minval.npy and DIR/stats_maxval.npy, float32
   (C,) (cf-convert h52npy writes them from the reference's stats.h5, cf-synth climate from
   its samples).  Looks in dir, then in its parent (train/ and validation/ share them). */
CFDEF int cf_climate_stats(const char *dir, float *minval, float *maxval, int C);
#endif /* CF_NO_FILES */

/* ================================================================ E. distributed (stable) */
CFDEF int cf_dist_init(int *argc, char ***argv);
CFDEF void cf_dist_finalize(void);
CFDEF int cf_dist_rank(void);
CFDEF int cf_dist_size(void);
CFDEF void cf_dist_allreduce_mean(float *buf, size_t n);   /* in place */
CFDEF void cf_dist_allreduce_sum_d(double *buf, int n);
CFDEF void cf_dist_allreduce_max_d(double *buf, int n);
CFDEF void cf_dist_sum_reduce(double *buf, int n, void *ctx);   /* the same, as a cf_net_sync_bn callback */
CFDEF void cf_dist_bcast(float *buf, size_t n);            /* from rank 0 */
CFDEF void cf_dist_abort(int code);
CFDEF void cf_dist_barrier(void);
/* Synchronized batch norm through reduce (a sum over ranks, e.g. cf_dist_sum_reduce); NULL
   turns it off.  Allocates the reduction buffer. */
CFDEF int cf_net_sync_bn(cf_net *net, void (*reduce)(double *buf, int n, void *ctx), void *ctx);
/* The batch-norm running statistics averaged over the ranks (the references do this before
   every validation) */
CFDEF void cf_net_average_stats(cf_net *net);
/* Gradient averaging that overlaps backward: cf_dist_overlap_begin() before cf_net_backward
   installs a backward hook that starts an MPI_Iallreduce on each finished suffix of
   net->grads (layers are laid out in order and backward runs last to first) once it holds
   at least bucket_floats values; cf_dist_overlap_end() reduces the rest, waits and divides
   by the number of ranks.  Same result as cf_dist_allreduce_mean(net->grads, n_params).
   One process: both do nothing. */
CFDEF void cf_dist_overlap_begin(cf_net *net, size_t bucket_floats);
CFDEF void cf_dist_overlap_end(cf_net *net);
/* Gradient lag 1 (the 2018 climate code): the update of step t applies the averaged gradient
   of step t-1, so that gradient's allreduce runs while step t computes.  After backward,
   cf_dist_grad_lag(net, lag) waits for the reduction started at the previous step, starts one
   of this step's gradient, and puts the previous step's averaged gradient into net->grads.
   Returns 0 at the first step (nothing to apply yet; skip the update), 1 otherwise, CF_ERR
   when out of memory.  Zero-initialize the struct; cf_dist_grad_lag_free releases it. */
CFDEF int cf_dist_grad_lag(cf_net *net, cf_grad_lag *lag);
CFDEF void cf_dist_grad_lag_free(cf_grad_lag *lag);
/* The MPI operation this process is blocked in ("MPI_Allreduce of the gradient", ...) and for
   how many seconds, or NULL: for a watchdog thread, which may call it at any time (MPI is
   not called).  One process: always NULL. */
CFDEF const char *cf_dist_waiting(double *seconds);
/* A sample split across ranks (spatial parallelism; docs/mpi.md, "A sample across ranks").
   The P ranks form D = P / K groups of K consecutive ranks; a group trains on the same
   samples, rank r of it (r = rank % K) holding slab r of each sample and of every output
   before the network's first [flatten]: planes [r Dl / K, (r + 1) Dl / K) of a layer's depth
   Dl (the first spatial axis).  A convolution exchanges with its neighbours the planes its
   windows reach across a slab boundary (the halo) before its forward, and sends back their
   part of the input's gradient after its backward; pools keep their windows inside a slab;
   batch norm sums its statistics over the group; the [flatten] gathers the slabs, and the
   layers after it run whole on every rank of the group.  The gradient is averaged over the D
   groups.  periodic: the volume wraps around its depth (a periodic box) where otherwise its
   faces are zero-padded.  Results are a one-rank run's, up to the order of sums.
   Refused naming the first layer a split of K cannot keep whole (a pool's window, a halo
   wider than a slab, a layer that needs the whole volume); cf_net_spatial_max: the largest K
   <= limit that works.  K = 1 and periodic = 0: no split.  Under MPI K must divide the ranks;
   in one process the layers take one slab's shapes (for planning: cf-check --summary
   --spatial) and forward and backward need K = 1.  The network's input is then a slab:
   (B, C, D / K, H, W), its first plane cf_net_spatial's d0. */
CFDEF int cf_net_set_spatial(cf_net *net, int K, int periodic);
CFDEF int cf_net_spatial_max(cf_net *net, int limit);
/* K; this rank's slab and its input's first plane (may be NULL) */
CFDEF int cf_net_spatial(const cf_net *net, int *r, int *d0);
/* v[0..n) summed over this rank's group, in place (unsplit or one process: unchanged): what
   a slab alone cannot know, such as a sample's total for an input transform.  Collective
   over the group. */
CFDEF int cf_net_spatial_sum(cf_net *net, double *v, int n);
/* Floats a rank's split needs beside its arena for a batch of B: the largest convolution's
   extended input and its gradient, the halos in transit and the gathered features, a split
   [dense]'s rows (0 unsplit; (size_t)-1 with the reason on a bad network or a batch below 1) */
CFDEF size_t cf_net_spatial_floats(cf_net *net, int B);

/* ================================================================ F. operations (arguments may change)
   Every operation's plain reference (section 3) and its dispatcher (section 4): what a
   reader audits and what the tests compare.  Their mathematics is stable; their argument
   lists may change with the fast paths.  They are raw kernels: every pointer must be valid
   for the shapes and counts given (B >= 1, every extent >= 1, groups dividing the channels);
   the convolution and pooling functions, which return nothing, assert the shapes
   (CF_ASSERT); pointers are the caller's to get right. */
/* Row-major C = alpha * op(A) * op(B) + beta * C;  op(A) is M x K, op(B) is K x N. */
CFDEF void cf_sgemm(int transA, int transB, int M, int N, int K, float alpha,
                    const float *A, int lda, const float *B, int ldb, float beta,
                    float *C, int ldc);
CFDEF void cf_sgemm_naive(int transA, int transB, int M, int N, int K, float alpha,
                          const float *A, int lda, const float *B, int ldb, float beta,
                          float *C, int ldc);
/* Convolution (cross-correlation, PyTorch's Conv3d/Conv2d) by im2col + sgemm: the references.
   x (B, C, D, H, W)  w (OC, C/groups, KD, KH, KW)  b (OC) or NULL  y (B, OC, OD, OH, OW)
   ws: a workspace of ws_floats floats (any size >= one im2col column, C/groups * kernel volume).
   Forward writes y = conv(x, w) + b; the backward halves ACCUMULATE: */
CFDEF void cf_ref_conv_forward(float *y, const float *x, const float *w, const float *b,
                               int B, cf_shape in, cf_shape out, const cf_geom *g, int groups,
                               float *ws, size_t ws_floats);
/* dw += dy x im2col(x)^T, db += dy summed over positions (db may be NULL) */
CFDEF void cf_ref_conv_backward_weights(float *dw, float *db, const float *dy, const float *x,
                                        int B, cf_shape in, cf_shape out, const cf_geom *g,
                                        int groups, float *ws, size_t ws_floats);
/* dx += col2im(w^T x dy) */
CFDEF void cf_ref_conv_backward_data(float *dx, const float *dy, const float *w, int B, cf_shape in,
                                     cf_shape out, const cf_geom *g, int groups, float *ws,
                                     size_t ws_floats);
/* x (B, C, D, H, W) -> y (B, C, OD, OH, OW); max picks the first maximum of a window;
   average divides by the number of in-bounds elements (TensorFlow's rule).  Backward
   accumulates dx; max pooling finds the window's first maximum again (x equal to y). */
CFDEF void cf_ref_pool_forward(float *y, const float *x, int B, cf_shape in, cf_shape out,
                               const cf_geom *g, int is_max);
CFDEF void cf_ref_pool_backward(float *dx, const float *dy, const float *x, const float *y, int B,
                                cf_shape in, cf_shape out, const cf_geom *g, int is_max);
/* The same operations through their dispatchers (section 4): the first registered fast path
   that applies, else the reference.  Same arguments, same results to rounding (bit for bit
   for the pooling paths); cf_conv_forward_act also applies the activation act (CF_ACT_*,
   slope for leaky) to each part of y while it is still in cache. */
CFDEF void cf_conv_forward(float *y, const float *x, const float *w, const float *b,
                           int B, cf_shape in, cf_shape out, const cf_geom *g, int groups,
                           float *ws, size_t ws_floats);
CFDEF void cf_conv_forward_act(float *y, const float *x, const float *w, const float *b,
                               int B, cf_shape in, cf_shape out, const cf_geom *g, int groups,
                               float *ws, size_t ws_floats, int act, float slope);
CFDEF void cf_conv_backward_weights(float *dw, float *db, const float *dy, const float *x,
                                    int B, cf_shape in, cf_shape out, const cf_geom *g, int groups,
                                    float *ws, size_t ws_floats);
CFDEF void cf_conv_backward_data(float *dx, const float *dy, const float *w, int B, cf_shape in,
                                 cf_shape out, const cf_geom *g, int groups, float *ws, size_t ws_floats);
/* both halves (dx may be NULL: skipped); dws: a second workspace for backward-data */
CFDEF void cf_conv_backward(float *dx, float *dw, float *db, const float *dy, const float *x,
                            const float *w, int B, cf_shape in, cf_shape out, const cf_geom *g,
                            int groups, float *ws, float *dws, size_t ws_floats);
CFDEF void cf_pool_forward(float *y, const float *x, int B, cf_shape in, cf_shape out,
                           const cf_geom *g, int is_max);
CFDEF void cf_pool_backward(float *dx, const float *dy, const float *x, const float *y, int B,
                            cf_shape in, cf_shape out, const cf_geom *g, int is_max);
/* Depthwise convolution (groups = C = OC): a direct loop over taps, since im2col would copy
   every input value kvol times to feed a GEMM with one row; the references.
   x (B, C, D, H, W)  w (C, 1, KD, KH, KW)  b (C) or NULL  y (B, C, OD, OH, OW)
   Forward writes y; backward accumulates dx (may be NULL: skipped), dw and db (may be NULL). */
CFDEF void cf_ref_dwconv_forward(float *y, const float *x, const float *w, const float *b,
                                 int B, cf_shape in, cf_shape out, const cf_geom *g);
CFDEF void cf_ref_dwconv_backward(float *dx, float *dw, float *db, const float *dy, const float *x,
                                  const float *w, int B, cf_shape in, cf_shape out, const cf_geom *g);
/* ... and through their dispatchers (section 4): same arguments, same results to rounding */
CFDEF void cf_dwconv_forward(float *y, const float *x, const float *w, const float *b,
                             int B, cf_shape in, cf_shape out, const cf_geom *g);
CFDEF void cf_dwconv_backward(float *dx, float *dw, float *db, const float *dy, const float *x,
                              const float *w, int B, cf_shape in, cf_shape out, const cf_geom *g);
/* Transposed convolution (PyTorch ConvTranspose): the adjoint of a convolution.  g is the
   geometry of the convolution that maps a y-shaped tensor to an x-shaped one, so
   y = col2im(w^T x): one GEMM and a scatter.  Backward-data is that ordinary convolution.
   x (B, C, D, H, W)  w (C, OC, KD, KH, KW)  b (OC) or NULL  y (B, OC, OD, OH, OW) */
CFDEF void cf_deconv_forward(float *y, const float *x, const float *w, const float *b,
                             int B, cf_shape in, cf_shape out, const cf_geom *g,
                             float *ws, size_t ws_floats);
CFDEF void cf_deconv_backward(float *dx, float *dw, float *db, const float *dy, const float *x,
                              const float *w, int B, cf_shape in, cf_shape out, const cf_geom *g,
                              float *ws, size_t ws_floats);
/* x (B, IN)  w (OUT, IN)  b (OUT) or NULL  y (B, OUT) */
CFDEF void cf_dense_forward(float *y, const float *x, const float *w, const float *b,
                            int B, int IN, int OUT);
CFDEF void cf_dense_backward(float *dx, float *dw, float *db, const float *dy, const float *x,
                             const float *w, int B, int IN, int OUT);
/* Elementwise activation in place on n values; backward turns dy into dy * f'(.) using the
   OUTPUT y (valid for relu, leaky with slope > 0, tanh). */
CFDEF void cf_act_forward(float *y, size_t n, int act, float slope);
CFDEF void cf_act_backward(float *dy, const float *y, size_t n, int act, float slope);
/* Inverted dropout: y = x * mask / (1 - rate), rate in [0, 0.999] (asserted); the mask is a
   hash of (seed, index), so it is recomputed in backward instead of stored. */
CFDEF void cf_dropout(float *y, const float *x, size_t n, float rate, uint64_t seed);
/* Losses over n = B * outputs values; return the loss, write dL/dy into dy (may be NULL). */
CFDEF double cf_loss_mse(float *dy, const float *y, const float *t, size_t n);
CFDEF double cf_loss_l1(float *dy, const float *y, const float *t, size_t n);
/* Synchronized batch norm: the per-channel sums behind the batch statistics (and their
   backward) are summed over all ranks with reduce(buf, n, ctx) before use, so the statistics
   are those of the global batch (PyTorch's SyncBatchNorm).  work: 2C + 1 doubles. */
typedef struct { void (*reduce)(double *buf, int n, void *ctx); void *ctx; double *work; } cf_bn_sync;
/* Batch normalization per channel over (B, P).  train = 1: normalize with the batch mean and
   the biased variance, save mean and 1/sqrt(var + eps) for backward, and move the running
   statistics: r += momentum * (batch - r), the variance unbiased (n/(n-1)), as PyTorch.
   train = 0: normalize with the running statistics (save_mean and save_invstd receive them).
   sync: NULL (per-rank statistics, the DeepCAM reference's default) or a reduction over ranks.
   x, y (B, C, P)   gamma, beta, rmean, rvar, save_mean, save_invstd (C) */
CFDEF void cf_bn_forward(float *y, const float *x, const float *gamma, const float *beta,
                         float *rmean, float *rvar, float *save_mean, float *save_invstd,
                         int B, int C, size_t P, int train, float momentum, float eps,
                         const cf_bn_sync *sync);
/* dy (B, C, P): the gradient after the fused activation's backward.  Accumulates dx (may be
   NULL), dgamma, dbeta.  mean, invstd: the saved batch statistics (train = 1) or the
   running mean and 1/sqrt(running var + eps) (train = 0).  sync (may be NULL): as forward. */
CFDEF void cf_bn_backward(float *dx, float *dgamma, float *dbeta, const float *dy, const float *x,
                          const float *gamma, const float *mean, const float *invstd,
                          int B, int C, size_t P, int train, const cf_bn_sync *sync);
/* Per-pixel weighted softmax cross-entropy averaged over all B*P pixels: the DeepCAM
   reference's torch.mean of the weighted per-pixel losses (not divided by the sum of the
   weights, unlike PyTorch's reduction='mean').  z (B, K, P) logits; labels (B, P) class ids
   stored as floats; w (K) or NULL for 1.  dz (may be NULL) receives dL/dz.  Returns the loss,
   or NAN when a label is not an integer in [0, K). */
CFDEF double cf_loss_softmax_ce(float *dz, const float *z, const float *labels, const float *w,
                                int B, int K, size_t P);

/* ================================================================ G. inside (may change)
   What the tools and tests use to look inside a step. */
/* The fast paths by kind: "direct", "tiles", "pointwise", "taps", "gemm" (convolutions), "inside", "pairs"
   (pooling), "fusion", "recompute", "stores" (the memory plan), "bf16", or "all".  All are on, except in a
   CF_REFERENCE build, where none exists.  Returns CF_ERR for an unknown kind.  Not
   thread-safe; a network takes a change at its next forward. */
CFDEF int cf_fast_path_set(const char *kind, int on);
CFDEF int cf_fast_path_on(const char *kind);                /* 1 on, 0 off, -1 unknown */
/* What a bf16 network's convolutions run on here: "vdpbf16ps (AVX512_BF16)", "fp32 FMA of the
   widened pairs (...)" (the CPU's vdpbf16ps slower than its FMA: then bf16 computes at fp32's
   rate and saves memory only), "AMX tiles (AMX-BF16) in the GEMM, ... elsewhere", each with
   "; forced" when cf_bf16_form_set chose it, or "the emulation (...)" with the reason (the CPU,
   the build, the fast paths switched off).  Its first call may take the probe's 2 ms. */
CFDEF const char *cf_bf16_kernels(void);
/* The form of the bf16 kernels' multiply-adds (section 4, kind bf16): "dot" (vdpbf16ps),
   "fma" (the pairs widened to fp32, two FMAs), "amx" (the bf16 GEMM on AMX tiles, the other
   kernels in the faster of the two) or "auto" (the default: "amx" where the CPU and Linux give
   the tiles, else the faster of dot and fma, measured once at first use).  dot and fma give the
   same bits (denormals aside, docs/math.md), so such a run does not depend on the choice; the
   tiles add in an order of their own, held to the same bound against the emulation (a run on
   them differs in the last bits).  Returns CF_ERR for another word, or "amx" without the tiles.
   Not thread-safe, as cf_fast_path_set. */
CFDEF int cf_bf16_form_set(const char *form);
/* Which path an operation takes for these shapes: "reference" or the fast path's kind; "?"
   with the reason for an op or shapes it cannot take.
   op: CF_OP_FORWARD, CF_OP_BACKWARD_WEIGHTS, CF_OP_BACKWARD_DATA. */
enum { CF_OP_FORWARD, CF_OP_BACKWARD_WEIGHTS, CF_OP_BACKWARD_DATA };
CFDEF const char *cf_conv_path(int op, int B, cf_shape in, cf_shape out, const cf_geom *g,
                               int groups, size_t ws_floats);
CFDEF const char *cf_pool_path(int op, cf_shape in, cf_shape out, const cf_geom *g, int is_max);
/* The path layer i's op (CF_OP_*) takes at the current batch: "reference", a fast path's
   kind, or "-" when the layer has no such op.  After cf_net_set_batch or a forward. */
CFDEF const char *cf_net_path(const cf_net *net, int layer, int op);
CFDEF int cf_net_set_batch(cf_net *net, int B);             /* plans and (re)allocates the arena */
/* keep = 1: every output stays valid from a forward to the next (cf_net_output of any layer,
   cf_net_forward_from, cf_net_first_nonfinite_output); no fusion, no recomputation: more
   memory.  0 (the default): outputs live only while the step needs them (section 9). */
CFDEF void cf_net_keep_outputs(cf_net *net, int keep);
/* Floats of the arena (outputs and output gradients) a batch of B needs, under the default
   plan or with every output kept.  Allocates nothing; not between a forward and its
   backward (the next forward plans again).  Returns (size_t)-1 with the reason when out of
   memory or B is below 1. */
CFDEF size_t cf_net_arena_floats(cf_net *net, int B, int keep_outputs);
/* How the plan of the last cf_net_arena_floats or forward stores layer's output (gradient 0)
   or its output's gradient (1): 32 or 16 (bits a value, section 9, halves), 0 for a gradient
   that lives in its output (a fused conv's); -1 for no such layer or no plan yet */
CFDEF int cf_net_stored_bits(const cf_net *net, int layer, int gradient);
CFDEF const float *cf_net_forward_from(cf_net *net, int first);   /* after a forward, outputs kept */
/* A layer's output in the arena, and its gradient (during backward); NULL for a layer that
   the plan stores in 16 bits (a bf16 network's conv before a max pool, section 9: with
   cf_net_keep_outputs every output is fp32) */
CFDEF float *cf_net_output(cf_net *net, int layer);
CFDEF float *cf_net_output_grad(cf_net *net, int layer);
/* dx (B, C, D, H, W) or NULL: backward also accumulates dL/d(input) there */
CFDEF void cf_net_set_input_grad(cf_net *net, float *dx);
/* Called in backward just before layer i's own backward runs, when cf_net_output_grad(net,
   i) holds the complete gradient of its output (cf-check); NULL removes it. */
CFDEF void cf_net_set_backward_hook(cf_net *net, void (*hook)(cf_net *net, int layer, void *ctx), void *ctx);
/* Called around every layer's work, phase 0/1 before/after its forward, 2/3 before/after its
   backward, and 4 inside a convolution's backward, between its backward-weights and
   backward-data (cf-bench times layers with it); NULL removes it. */
CFDEF void cf_net_set_layer_hook(cf_net *net, void (*hook)(cf_net *net, int layer, int phase, void *ctx), void *ctx);
/* Numerics guard: the first layer whose output (after a forward) or whose parameters'
   gradient (after a backward; params = 1: the parameters themselves) holds a NaN or Inf,
   or -1 when all are finite.  Outputs are all checked only when the forward kept every
   output; otherwise only those still in memory. */
CFDEF int cf_net_first_nonfinite_output(const cf_net *net);
CFDEF int cf_net_first_nonfinite_param(const cf_net *net, int params);
/* The batch x again with every output kept: the first layer whose output is not finite, or
   -1 (in the current mode; the parameters are not changed) */
CFDEF int cf_net_find_nonfinite(cf_net *net, const float *x, int B);

#endif /* CF_INCLUDE_COSMOFLOW_H */
/* ================================================================ implementation */
#ifdef CF_IMPLEMENTATION
#ifndef CF__IMPLEMENTED
#define CF__IMPLEMENTED

#include <stdlib.h>
#include <string.h>
#include <stdarg.h>
#include <stdio.h>
#include <math.h>
#include <errno.h>
#include <ctype.h>
#include <time.h>
#ifndef CF_NO_FILES
/* POSIX, only what every strict -std mode declares without a feature macro (no fdopen,
   fileno, kill or gethostname, which glibc hides there): files as descriptors */
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>
#include <fcntl.h>
#include <dirent.h>
#endif

#if defined(CF_MALLOC) && defined(CF_FREE)
#elif !defined(CF_MALLOC) && !defined(CF_FREE)
#define CF_MALLOC(n) malloc(n)
#define CF_FREE(p) free(p)
#else
#error "define both CF_MALLOC and CF_FREE, or neither"
#endif
#ifndef CF_ASSERT
#include <assert.h>
#define CF_ASSERT(x) assert(x)
#endif
#ifdef CF_USE_CBLAS
#include <cblas.h>
#endif
#ifdef CF_USE_MPI
#include <mpi.h>
#endif
#ifdef CF_USE_ZLIB
#include <zlib.h>
#endif

#ifdef _OPENMP
#include <omp.h>
#define CF__OMP(x) _Pragma(#x)
#else
#define CF__OMP(x)
#endif
#if defined(__cplusplus)
#define CF__TLS thread_local
#elif defined(__GNUC__)
#define CF__TLS __thread
#else
#define CF__TLS
#endif
#define CF__NEW(T, n) ((T *)cf__calloc((size_t)(n), sizeof(T)))
#if defined(__GNUC__)
#define CF__INLINE static inline __attribute__((always_inline))   /* also into the target/optimize-attributed kernels */
#else
#define CF__INLINE static inline
#endif
#if defined(__GNUC__)
#define CF__RESTRICT __restrict   /* C99's restrict, also in C++ */
#else
#define CF__RESTRICT
#endif
#if defined(__GNUC__)   /* a hint to fetch a cache line ahead of its use: for reading (rw 0) or writing (1) */
#define CF__PREFETCH(p, rw) __builtin_prefetch((p), (rw), 3)
#else
#define CF__PREFETCH(p, rw) ((void)(p))
#endif
/* the cache lines of p[0 .. n), fetched ahead for writing (rw 1) or reading */
CF__INLINE void cf__prefetch_floats(const float *p, size_t n, int rw) {
    size_t j;
    for (j = 0; j < n; j += 16) {
        if (rw) CF__PREFETCH(p + j, 1);
        else CF__PREFETCH(p + j, 0);
    }
}

/* ================================================================ 1. basics */
static CF__TLS char cf__err[8192];   /* room for two paths of PATH_MAX and the reason */

CFDEF const char *cf_failure_reason(void) { return cf__err[0] ? cf__err : "no error"; }
CFDEF void cf_free(void *p) { CF_FREE(p); }

/* formatted into a scratch buffer first: the arguments may be the current reason itself
   (cf_fail("%s: %s", path, cf_failure_reason()) adds a prefix to it) */
CFDEF int cf_fail(const char *fmt, ...) {
    char msg[sizeof cf__err];
    va_list ap;
    if (!fmt) fmt = "cf_fail: no message";
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    memcpy(cf__err, msg, sizeof msg);
    return CF_ERR;
}
/* A function's precondition, as its comment in the public part states it.  When it does not
   hold, the reason is set (what: the function and the argument) and the function returns
   without acting: CF__RETURN_UNLESS, in a function that returns a value, returns ret (its error:
   CF_ERR, NULL, NAN, ...) and asserts nothing; CF__ASSERT_ARG, in a function that returns
   nothing, has CF_ASSERT name it as well (on unless NDEBUG; a program may define CF_ASSERT to
   catch it).  (CF__RETURN_UNLESS with no ret does not compile: a void function takes the other.) */
#define CF__RETURN_UNLESS(cond, ret, what) do { if (!(cond)) { cf_fail("%s", what); return (ret); } } while (0)
#define CF__ASSERT_ARG(cond, what) \
    do { if (!(cond)) { cf_fail("%s", what); CF_ASSERT((cond) && what); return; } } while (0)


/* zeroed allocation; NULL (with a reason) when n*size overflows or memory is short */
static void *cf__calloc(size_t n, size_t size) {
    void *p;
    if (size && n > (size_t)-1 / size) { cf_fail("allocation of %zu x %zu bytes overflows", n, size); return NULL; }
    size_t bytes = n * size > 0 ? n * size : 1;
    p = CF_MALLOC(bytes);
    if (!p) { cf_fail("out of memory allocating %zu bytes", bytes); return NULL; }
    memset(p, 0, bytes);
    return p;
}

static char *cf__strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = CF__NEW(char, n);
    if (p) memcpy(p, s, n);
    return p;
}

#ifndef CF_NO_FILES
/* ---- reading files.  An input must be a regular file, opened without blocking on a FIFO
   or a device: open non-blocking, fstat, then back to blocking reads.  Returns the file
   descriptor and its size in bytes, or -1 with a reason naming the path. */
static int cf__open_regular(const char *path, size_t *size) {
    struct stat st;
    int fd, fl;
    if (!path) return cf_fail("a file's path is NULL");
    fd = open(path, O_RDONLY | O_NONBLOCK);
    if (fd < 0) return cf_fail("%s: %s", path, strerror(errno));
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        close(fd);
        return cf_fail("%s: not a regular file (%s)", path,
                       S_ISDIR(st.st_mode) ? "a directory" : S_ISFIFO(st.st_mode) ? "a FIFO" : "a device or socket");
    }
    if ((fl = fcntl(fd, F_GETFL)) != -1) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    *size = (size_t)st.st_size;
    return fd;
}
/* n bytes of fd into p (a read may return fewer): the count read, short only at the end of
   the file or on an error */
static size_t cf__read_full(int fd, void *p, size_t n) {
    size_t got = 0;
    while (got < n) {
        ssize_t k = read(fd, (char *)p + got, n - got < ((size_t)1 << 30) ? n - got : ((size_t)1 << 30));
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        got += (size_t)k;
    }
    return got;
}
#endif

CFDEF cf_rng cf_rng_seed(uint64_t seed) { cf_rng r; r.s = seed; return r; }
CFDEF uint64_t cf_hash64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
CFDEF uint64_t cf_rng_u64(cf_rng *r) {
    CF__RETURN_UNLESS(r, 0, "cf_rng_u64: the generator is NULL");
    r->s += 0x9e3779b97f4a7c15ULL;
    return cf_hash64(r->s);
}
CFDEF float cf_rng_uniform(cf_rng *r) { return (float)(cf_rng_u64(r) >> 40) * (1.0f / 16777216.0f); }
CFDEF double cf_rng_uniform64(cf_rng *r) { return (double)(cf_rng_u64(r) >> 11) * (1.0 / 9007199254740992.0); }
CFDEF double cf_rng_normal(cf_rng *r) {
    double u1 = 1.0 - cf_rng_uniform64(r), u2 = cf_rng_uniform64(r); /* u1 in (0, 1] */
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* CRC32C (Castagnoli, reflected polynomial 0x82F63B78), bytewise table.  The table is made
   per call (2048 shifts, about a microsecond): no state shared between threads. */
CFDEF uint32_t cf_crc32c(uint32_t crc, const void *data, size_t n) {
    uint32_t table[256], k, c;
    const unsigned char *p = (const unsigned char *)data;
    size_t i;
    int j;
    CF__RETURN_UNLESS(data || !n, 0, "cf_crc32c: data is NULL");
    for (k = 0; k < 256; k++) {
        c = k;
        for (j = 0; j < 8; j++) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        table[k] = c;
    }
    crc = ~crc;
    for (i = 0; i < n; i++) crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
    return ~crc;
}
CFDEF uint32_t cf_crc32c_masked(const void *data, size_t n) {
    uint32_t c = cf_crc32c(0, data, n);
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

/* ---- bfloat16, as Intel's pseudo-code for vcvtne2ps2bf16 defines the rounding:
     zero or denormal:  the sign alone (denormals go to zero)
     infinity:          the upper half unchanged
     NaN:               the upper half with the quiet bit (bit 6) set
     otherwise:         round to nearest even: add 0x7fff + (bit 16) to the bits as an
                        integer, keep the upper half (a carry may reach infinity)
   and back: the 16 bits above 16 zero bits. */
CFDEF cf_bf16 cf_bf16_from_f32(float f) {
    uint32_t u, e;
    memcpy(&u, &f, 4);
    e = u & 0x7f800000u;   /* the exponent's bits; one expression, so that loops vectorize */
    return (cf_bf16)(e == 0 ? (u >> 16) & 0x8000u                                             /* zero, denormal */
                     : e == 0x7f800000u ? (u >> 16) | ((u & 0x007fffffu) ? 0x0040u : 0)       /* inf, NaN */
                     : (u + 0x7fffu + ((u >> 16) & 1)) >> 16);                                /* nearest even */
}
CFDEF float cf_f32_from_bf16(cf_bf16 h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
/* x[0 .. n) rounded in place on the calling thread: the rounding a pass applies to a stretch
   it has just written, while the stretch is in cache */
static void cf__round_floats(float *x, size_t n) {
    size_t j;
    for (j = 0; j < n; j++) x[j] = cf_f32_from_bf16(cf_bf16_from_f32(x[j]));
}
/* cf__round_floats, or its twin on the CPU's rounding instruction (the same bits, section 13,
   kind bf16): chosen by the door, section 4 */
static void cf__round_run(float *x, size_t n);
CFDEF void cf_bf16_round(float *x, size_t n) {
    long i;   /* a signed index for OpenMP 2.5; chunks of 2^16: a pass over memory, shared by the threads */
    CF__ASSERT_ARG(x || !n, "cf_bf16_round: x is NULL");
    CF__OMP(omp parallel for schedule(static) if (n >= ((size_t)1 << 18)))
    for (i = 0; i < (long)((n + 65535) >> 16); i++) {
        size_t start = (size_t)i << 16;
        cf__round_run(x + start, n - start < 65536 ? n - start : 65536);
    }
}

/* x[0 .. n) = 0, the threads sharing the pass (chunks of 2^16, as cf_bf16_round) */
static void cf__zero_floats(float *x, size_t n) {
    long i;
    CF__OMP(omp parallel for schedule(static) if (n >= ((size_t)1 << 18)))
    for (i = 0; i < (long)((n + 65535) >> 16); i++) {
        size_t start = (size_t)i << 16;
        memset(x + start, 0, sizeof(float) * (n - start < 65536 ? n - start : 65536));
    }
}

/* ---- the activations, the one place their formulas are written.  f(v), and the gradient
   dL/dv = dy f'(v) from the OUTPUT y = f(v): relu' = [y > 0], leaky' = 1 or slope by the
   sign of y (slope > 0), tanh' = 1 - y^2. */
CF__INLINE float cf__act_f(float v, int act, float slope) {
    switch (act) {
    case CF_ACT_RELU: return v > 0.0f ? v : 0.0f;
    case CF_ACT_LEAKY: return v > 0.0f ? v : slope * v;
    case CF_ACT_TANH: return tanhf(v);
    default: return v;
    }
}
CF__INLINE float cf__act_df(float dy, float y, int act, float slope) {
    switch (act) {
    case CF_ACT_RELU: return y > 0.0f ? dy : 0.0f;
    case CF_ACT_LEAKY: return y > 0.0f ? dy : slope * dy;
    case CF_ACT_TANH: return dy * (1.0f - y * y);
    default: return dy;
    }
}
/* one loop per activation, CF__ACT_LOOP(A) with A a constant, so that each runs without a
   test of act per element; linear: none */
#define CF__ACT_SWITCH(act)                                  \
    switch (act) {                                           \
    case CF_ACT_RELU: CF__ACT_LOOP(CF_ACT_RELU); break;      \
    case CF_ACT_LEAKY: CF__ACT_LOOP(CF_ACT_LEAKY); break;    \
    case CF_ACT_TANH: CF__ACT_LOOP(CF_ACT_TANH); break;      \
    default: break;                                          \
    }
/* y[0 .. n) = f(y) on the calling thread: a pass's activation of a stretch it has just written */
static void cf__act_floats(float *y, size_t n, int act, float slope) {
    size_t i;
#define CF__ACT_LOOP(A) do { for (i = 0; i < n; i++) y[i] = cf__act_f(y[i], A, slope); } while (0)
    CF__ACT_SWITCH(act)
#undef CF__ACT_LOOP
}
/* dy[i] = act'(y[i]) dy[i] on n values on the calling thread (the switch outside the loop, as
   cf_act_backward's) */
static void cf__act_backward_run(float *dy, const float *y, size_t n, int act, float slope) {
    size_t i;
#define CF__ACT_LOOP(A) do { for (i = 0; i < n; i++) dy[i] = cf__act_df(dy[i], y[i], A, slope); } while (0)
    CF__ACT_SWITCH(act)
#undef CF__ACT_LOOP
}

/* ================================================================ 2. sgemm */
static float cf__at(const float *M, int ld, int trans, int r, int c) {
    return trans ? M[(size_t)c * ld + r] : M[(size_t)r * ld + c];
}
/* The definition, written for reading, not speed: C[i][j] = alpha*sum_k A[i][k]*B[k][j] + beta*C[i][j] */
CFDEF void cf_sgemm_naive(int transA, int transB, int M, int N, int K, float alpha,
                          const float *A, int lda, const float *B, int ldb, float beta,
                          float *C, int ldc) {
    int i, j, k;
    for (i = 0; i < M; i++)
        for (j = 0; j < N; j++) {
            double acc = 0.0;
            for (k = 0; k < K; k++) acc += (double)cf__at(A, lda, transA, i, k) * cf__at(B, ldb, transB, k, j);
            float *c = &C[(size_t)i * ldc + j];
            *c = (float)(alpha * acc + (beta == 0.0f ? 0.0f : beta * *c));
        }
}
CFDEF void cf_sgemm(int transA, int transB, int M, int N, int K, float alpha,
                    const float *A, int lda, const float *B, int ldb, float beta,
                    float *C, int ldc) {
    if (M <= 0 || N <= 0) return;
#ifdef CF_USE_CBLAS
    if (K <= 0) { /* BLAS would be asked for an empty product: only the beta scaling remains */
        int i, j;
        for (i = 0; i < M; i++)
            for (j = 0; j < N; j++) C[(size_t)i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[(size_t)i * ldc + j];
        return;
    }
    cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans,
                M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
#else
    cf_sgemm_naive(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
#endif
}
/* ================================================================ 3. reference kernels
   One plain function per operation: the obvious loops, or im2col + sgemm for a convolution,
   each with its shapes and a line of its derivation (docs/math.md has the whole of each).
   The tests use these as the oracle of the fast paths in section 13.  None takes a precision, a
   storage or a GEMM: those are the dispatchers' (section 4). */
CFDEF size_t cf_shape_size(cf_shape s) { return (size_t)s.c * s.d * s.h * s.w; }

CFDEF int cf_geom_out(const cf_geom *g, int axis, int in) {
    long long span, padded;
    CF__RETURN_UNLESS(g && axis >= 0 && axis < 3 && g->s[axis] >= 1 && g->k[axis] >= 1 && g->dil[axis] >= 1, 0,
                "cf_geom_out: the geometry is NULL, the axis not 0, 1 or 2, or a kernel, stride or dilation below 1");
    span = (long long)g->dil[axis] * (g->k[axis] - 1) + 1; padded = (long long)in + g->pb[axis] + g->pa[axis];
    if (padded < span) return 0;
    return (int)((padded - span) / g->s[axis] + 1);   /* at most in + padding: an int */
}

/* The output positions of a tile, p0 .. p0+n-1 (flattened over OD, OH, OW), are walked one
   output row (fixed od, oh) at a time: within a row only ow changes, so each kernel tap reads
   a strided run of one input row; the in-bounds part [t_lo, t_hi) is computed once instead of
   testing every element. */
typedef struct { int od, oh, ow0, len; } cf__seg;
/* the shapes an operation is given (F's precondition, asserted): a batch, extents and a geometry */
static int cf__shapes_ok(int B, cf_shape in, cf_shape out, const cf_geom *g, int groups) {
    return B >= 1 && in.c >= 1 && in.d >= 1 && in.h >= 1 && in.w >= 1 && out.c >= 1 && out.d >= 1 && out.h >= 1 &&
           out.w >= 1 && g && groups >= 1 && in.c % groups == 0 && out.c % groups == 0;
}
static int cf__next_seg(cf__seg *sg, size_t p, size_t left, cf_shape out) {
    sg->ow0 = (int)(p % out.w);
    sg->oh = (int)((p / out.w) % out.h);
    sg->od = (int)(p / ((size_t)out.w * out.h));
    sg->len = out.w - sg->ow0 < (long)left ? out.w - sg->ow0 : (int)left;
    return sg->len;
}
/* in-bounds range of t in [0, len): 0 <= (ow0 + t)*s + off < W, off = tap offset - pad */
static void cf__row_range(int ow0, int len, int s, int off, int W, int *lo, int *hi) {
    int t0 = 0, t1 = len;
    while (t0 < len && (ow0 + t0) * s + off < 0) t0++;
    while (t1 > t0 && (ow0 + t1 - 1) * s + off >= W) t1--;
    *lo = t0; *hi = t1;
}

/* im2col for one sample and a tile of output positions.
   x: (C, D, H, W) with C = channels of this group;  col: (C*KD*KH*KW, n) where column j is
   output position p0 + j.  Out-of-bounds taps read zero.
   Row r of col (channel c, tap kd, kh, kw): the tap's input value at each position, a run of
   an input row per output row (its segment), zeros where the tap reaches into the padding.
   (The bf16 GEMM also makes rows of col this way as it packs them, section 13.) */
static void cf__im2col_row(float *dst, const float *x, int r, cf_shape in, cf_shape out, const cf_geom *g, size_t p0,
                           size_t n) {
    int KD = g->k[0], KH = g->k[1], KW = g->k[2];
    int kw = r % KW, kh = (r / KW) % KH, kd = (r / (KW * KH)) % KD, c = r / (KW * KH * KD);
    const float *xc = x + (size_t)c * in.d * in.h * in.w;
    int sw = g->s[2], offw = kw * g->dil[2] - g->pb[2];
    size_t j = 0;
    cf__seg sg;
    while (j < n && cf__next_seg(&sg, p0 + j, n - j, out)) {
        int id = sg.od * g->s[0] - g->pb[0] + kd * g->dil[0], ih = sg.oh * g->s[1] - g->pb[1] + kh * g->dil[1];
        float *d = dst + j;
        int t, lo, hi;
        if (id < 0 || id >= in.d || ih < 0 || ih >= in.h) {
            memset(d, 0, sizeof(float) * sg.len);
            j += sg.len;
            continue;
        }
        const float *src = xc + ((size_t)id * in.h + ih) * in.w + offw;   /* src[ow*sw] is the tap */
        cf__row_range(sg.ow0, sg.len, sw, offw, in.w, &lo, &hi);
        for (t = 0; t < lo; t++) d[t] = 0.0f;
        if (sw == 1) memcpy(d + lo, src + sg.ow0 + lo, sizeof(float) * (hi - lo));
        else for (t = lo; t < hi; t++) d[t] = src[(size_t)(sg.ow0 + t) * sw];
        for (t = hi; t < sg.len; t++) d[t] = 0.0f;
        j += sg.len;
    }
}
static void cf__im2col(float *col, const float *x, int C, cf_shape in, cf_shape out,
                       const cf_geom *g, size_t p0, size_t n) {
    int rows = C * g->k[0] * g->k[1] * g->k[2];
    int r;
    CF__OMP(omp parallel for schedule(static))
    for (r = 0; r < rows; r++) cf__im2col_row(col + (size_t)r * n, x, r, in, out, g, p0, n);
}

/* col2im: the adjoint of im2col; ADDS col back into dx (C, D, H, W).
   Parallel over channels, so no two threads touch the same element of dx. */
static void cf__col2im(float *dx, const float *col, int C, cf_shape in, cf_shape out,
                       const cf_geom *g, size_t p0, size_t n) {
    int KD = g->k[0], KH = g->k[1], KW = g->k[2], kvol = KD * KH * KW;
    int c;
    CF__OMP(omp parallel for schedule(static))
    for (c = 0; c < C; c++) {
        float *xc = dx + (size_t)c * in.d * in.h * in.w;
        int kk;
        for (kk = 0; kk < kvol; kk++) {
            int kw = kk % KW, kh = (kk / KW) % KH, kd = kk / (KW * KH);
            const float *srcrow = col + ((size_t)c * kvol + kk) * n;
            int sw = g->s[2], offw = kw * g->dil[2] - g->pb[2];
            size_t j = 0;
            cf__seg sg;
            while (j < n && cf__next_seg(&sg, p0 + j, n - j, out)) {
                int id = sg.od * g->s[0] - g->pb[0] + kd * g->dil[0], ih = sg.oh * g->s[1] - g->pb[1] + kh * g->dil[1];
                int t, lo, hi;
                if (id >= 0 && id < in.d && ih >= 0 && ih < in.h) {
                    float *d = xc + ((size_t)id * in.h + ih) * in.w + offw;
                    const float *s = srcrow + j;
                    cf__row_range(sg.ow0, sg.len, sw, offw, in.w, &lo, &hi);
                    if (sw == 1) for (t = lo; t < hi; t++) d[sg.ow0 + t] += s[t];
                    else for (t = lo; t < hi; t++) d[(size_t)(sg.ow0 + t) * sw] += s[t];
                }
                j += sg.len;
            }
        }
    }
}

/* Columns per im2col tile: as many output positions as fit the workspace, at least one.
   One large GEMM per tile is what the BLAS does best (docs/performance.md, "Per-thread tiles"). */
static size_t cf__tile(size_t rows, size_t P, size_t ws_floats) {
    size_t n = ws_floats / (rows ? rows : 1);
    if (n < 1) n = 1;
    return n < P ? n : P;
}

/* yr[p] = act(yr[p] + bias) for p < n: one row of an output's bias and activation */
static void cf__bias_act_row(float *yr, float bias, size_t n, int act, float slope) {
    size_t p;
    if (bias != 0.0f) for (p = 0; p < n; p++) yr[p] += bias;
    cf__act_floats(yr, n, act, slope);
}
/* the rows r < rows, columns p < n of a (rows, stride) block: a tile's bias b[r] (b may be
   NULL) and activation, applied right after its GEMM wrote it */
static void cf__bias_act(float *y, const float *b, int rows, size_t n, size_t stride, int act, float slope) {
    int r;
    CF__OMP(omp parallel for schedule(static) if(rows * n > 32768))
    for (r = 0; r < rows; r++) cf__bias_act_row(y + (size_t)r * stride, b ? b[r] : 0.0f, n, act, slope);
}

/* the sum of x[0 .. n) in double, as 8 partial sums: lane p mod 8, as a vector loop would
   split it, but fixed (a tensor stored in 16 bits is summed in the same order, section 13) */
static double cf__sum8(const float *x, size_t n) {
    double s[8] = {0, 0, 0, 0, 0, 0, 0, 0}, t = 0.0;
    size_t p = 0;
    int j;
    for (; p + 8 <= n; p += 8) for (j = 0; j < 8; j++) s[j] += x[p + j];
    for (; p < n; p++) s[p % 8] += x[p];
    for (j = 0; j < 8; j++) t += s[j];
    return t;
}
/* db[oc] += sum over positions of dy[b][oc] (B, OC, P), sample by sample in double */
static void cf__bias_grad(float *db, const float *dy, int B, int OC, size_t P) {
    int bi, oc;
    for (bi = 0; bi < B; bi++) {
        CF__OMP(omp parallel for schedule(static))
        for (oc = 0; oc < OC; oc++) db[oc] += (float)cf__sum8(dy + ((size_t)bi * OC + oc) * P, P);
    }
}

/* ---- convolution by im2col + sgemm.  Per sample and group g (Cg = C/groups input and OCg
   output channels), im2col lays out the K = Cg KD KH KW inputs each output position reads
   as the columns of col (K, P); then
       forward           y[g] (OCg, P)  = w[g] (OCg, K) x col (K, P)          + b
       backward-weights  dw[g] (OCg, K) += dy[g] (OCg, P) x col^T (P, K),      db += sum_P dy
       backward-data     dcol (K, P)    = w[g]^T (K, OCg) x dy[g] (OCg, P),    dx += col2im(dcol)
   over tiles of as many positions as the workspace holds (docs/math.md, "Convolution").
   The loops call cf_sgemm (cf__sgemm_fp32); section 13 has the same loops with another GEMM
   (its bf16 GEMM, its own fp32 one). */
/* a GEMM as an argument: C (M, N) = op(A) op(B) + beta C, op(X) = X^T when tX */
typedef void (*cf__gemm_fn)(int tA, int tB, int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                            float beta, float *C, int ldc);
static void cf__sgemm_fp32(int tA, int tB, int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                           float beta, float *C, int ldc) {
    cf_sgemm(tA, tB, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
}
/* y = w col + b, tile by tile (no activation: the caller's) */
static void cf__im2col_forward(float *y, const float *x, const float *w, const float *b, int B, cf_shape in,
                               cf_shape out, const cf_geom *g, int groups, float *ws, size_t ws_floats) {
    int Cg = in.c / groups, OCg = out.c / groups, K = Cg * g->k[0] * g->k[1] * g->k[2], bi, gi;
    size_t P = (size_t)out.d * out.h * out.w, in_sz = cf_shape_size(in), tile = cf__tile((size_t)K, P, ws_floats), p0;
    for (bi = 0; bi < B; bi++) {
        float *yb = y + (size_t)bi * out.c * P;
        for (p0 = 0; p0 < P; p0 += tile) {
            size_t n = P - p0 < tile ? P - p0 : tile;
            for (gi = 0; gi < groups; gi++) {
                cf__im2col(ws, x + bi * in_sz + (size_t)gi * Cg * in.d * in.h * in.w, Cg, in, out, g, p0, n);
                cf__sgemm_fp32(0, 0, OCg, (int)n, K, w + (size_t)gi * OCg * K, K, ws, (int)n, 0.0f,
                               yb + (size_t)gi * OCg * P + p0, (int)P);
            }
            cf__bias_act(yb + p0, b, out.c, n, P, CF_ACT_LINEAR, 0.0f);
        }
    }
}
/* dw += dy col^T (db: the caller's) */
static void cf__im2col_backward_weights(float *dw, const float *dy, const float *x, int B, cf_shape in, cf_shape out,
                                        const cf_geom *g, int groups, float *ws, size_t ws_floats) {
    int Cg = in.c / groups, OCg = out.c / groups, K = Cg * g->k[0] * g->k[1] * g->k[2], bi, gi;
    size_t P = (size_t)out.d * out.h * out.w, in_sz = cf_shape_size(in), tile = cf__tile((size_t)K, P, ws_floats), p0;
    for (bi = 0; bi < B; bi++)
        for (gi = 0; gi < groups; gi++) {
            const float *xg = x + bi * in_sz + (size_t)gi * Cg * in.d * in.h * in.w;
            const float *dyg = dy + (size_t)bi * out.c * P + (size_t)gi * OCg * P;
            for (p0 = 0; p0 < P; p0 += tile) {   /* col is recomputed here, not kept from forward */
                size_t n = P - p0 < tile ? P - p0 : tile;
                cf__im2col(ws, xg, Cg, in, out, g, p0, n);
                cf__sgemm_fp32(0, 1, OCg, K, (int)n, dyg + p0, (int)P, ws, (int)n, 1.0f, dw + (size_t)gi * OCg * K,
                               K);
            }
        }
}
/* dx += col2im(w^T dy) */
static void cf__im2col_backward_data(float *dx, const float *dy, const float *w, int B, cf_shape in, cf_shape out,
                                     const cf_geom *g, int groups, float *ws, size_t ws_floats) {
    int Cg = in.c / groups, OCg = out.c / groups, K = Cg * g->k[0] * g->k[1] * g->k[2], bi, gi;
    size_t P = (size_t)out.d * out.h * out.w, in_sz = cf_shape_size(in), tile = cf__tile((size_t)K, P, ws_floats), p0;
    for (bi = 0; bi < B; bi++)
        for (gi = 0; gi < groups; gi++) {
            float *dxg = dx + bi * in_sz + (size_t)gi * Cg * in.d * in.h * in.w;
            const float *dyg = dy + (size_t)bi * out.c * P + (size_t)gi * OCg * P, *wg = w + (size_t)gi * OCg * K;
            for (p0 = 0; p0 < P; p0 += tile) {
                size_t n = P - p0 < tile ? P - p0 : tile;
                cf__sgemm_fp32(1, 0, K, (int)n, OCg, wg, K, dyg + p0, (int)P, 0.0f, ws, (int)n);
                cf__col2im(dxg, ws, Cg, in, out, g, p0, n);
            }
        }
}
CFDEF void cf_ref_conv_forward(float *y, const float *x, const float *w, const float *b,
                               int B, cf_shape in, cf_shape out, const cf_geom *g, int groups,
                               float *ws, size_t ws_floats) {
    CF_ASSERT(cf__shapes_ok(B, in, out, g, groups) && ws &&
              ws_floats >= (size_t)(in.c / groups * g->k[0] * g->k[1] * g->k[2]));
    cf__im2col_forward(y, x, w, b, B, in, out, g, groups, ws, ws_floats);
}
CFDEF void cf_ref_conv_backward_weights(float *dw, float *db, const float *dy, const float *x,
                                        int B, cf_shape in, cf_shape out, const cf_geom *g,
                                        int groups, float *ws, size_t ws_floats) {
    CF_ASSERT(cf__shapes_ok(B, in, out, g, groups) && ws &&
              ws_floats >= (size_t)(in.c / groups * g->k[0] * g->k[1] * g->k[2]));
    if (db) cf__bias_grad(db, dy, B, out.c, (size_t)out.d * out.h * out.w);
    cf__im2col_backward_weights(dw, dy, x, B, in, out, g, groups, ws, ws_floats);
}
CFDEF void cf_ref_conv_backward_data(float *dx, const float *dy, const float *w, int B, cf_shape in,
                                     cf_shape out, const cf_geom *g, int groups, float *ws,
                                     size_t ws_floats) {
    CF_ASSERT(cf__shapes_ok(B, in, out, g, groups) && ws &&
              ws_floats >= (size_t)(in.c / groups * g->k[0] * g->k[1] * g->k[2]));
    cf__im2col_backward_data(dx, dy, w, B, in, out, g, groups, ws, ws_floats);
}

/* ---- pooling, the definition: every window's taps with a bounds test.  Max: the first
   maximum; its backward hands dy to the first tap equal to y (no argmax is stored).  Average:
   the mean of the in-bounds taps; its backward shares dy equally among them. */
CFDEF void cf_ref_pool_forward(float *y, const float *x, int B, cf_shape in, cf_shape out,
                               const cf_geom *g, int is_max) {
    int plane;
    CF_ASSERT(y && x && cf__shapes_ok(B, in, out, g, 1));
    CF__OMP(omp parallel for schedule(static))
    for (plane = 0; plane < B * in.c; plane++) {
        const float *xp = x + (size_t)plane * in.d * in.h * in.w;
        float *yp = y + (size_t)plane * out.d * out.h * out.w;
        int od, oh, ow, kd, kh, kw;
        for (od = 0; od < out.d; od++) for (oh = 0; oh < out.h; oh++) for (ow = 0; ow < out.w; ow++) {
            float best = -INFINITY; double sum = 0.0; int cnt = 0;
            for (kd = 0; kd < g->k[0]; kd++) for (kh = 0; kh < g->k[1]; kh++) for (kw = 0; kw < g->k[2]; kw++) {
                int id = od * g->s[0] - g->pb[0] + kd * g->dil[0];
                int ih = oh * g->s[1] - g->pb[1] + kh * g->dil[1];
                int iw = ow * g->s[2] - g->pb[2] + kw * g->dil[2];
                float v;
                if (id < 0 || id >= in.d || ih < 0 || ih >= in.h || iw < 0 || iw >= in.w) continue;
                v = xp[((size_t)id * in.h + ih) * in.w + iw];
                if (v > best) best = v;
                sum += v; cnt++;
            }
            yp[((size_t)od * out.h + oh) * out.w + ow] = is_max ? best : (cnt ? (float)(sum / cnt) : 0.0f);
        }
    }
}

CFDEF void cf_ref_pool_backward(float *dx, const float *dy, const float *x, const float *y, int B,
                                cf_shape in, cf_shape out, const cf_geom *g, int is_max) {
    int plane;
    CF_ASSERT(dx && dy && x && y && cf__shapes_ok(B, in, out, g, 1));
    CF__OMP(omp parallel for schedule(static))
    for (plane = 0; plane < B * in.c; plane++) {
        const float *xp = x + (size_t)plane * in.d * in.h * in.w;
        float *dxp = dx + (size_t)plane * in.d * in.h * in.w;
        const float *yp = y + (size_t)plane * out.d * out.h * out.w;
        const float *dyp = dy + (size_t)plane * out.d * out.h * out.w;
        int od, oh, ow, kd, kh, kw, pass;
        for (od = 0; od < out.d; od++) for (oh = 0; oh < out.h; oh++) for (ow = 0; ow < out.w; ow++) {
            size_t o = ((size_t)od * out.h + oh) * out.w + ow;
            int cnt = 0, done = 0;
            /* pass 0 counts the in-bounds taps (average); pass 1 hands out the gradient */
            for (pass = 0; pass < 2 && !done; pass++)
                for (kd = 0; kd < g->k[0] && !done; kd++) for (kh = 0; kh < g->k[1] && !done; kh++)
                    for (kw = 0; kw < g->k[2] && !done; kw++) {
                        int id = od * g->s[0] - g->pb[0] + kd * g->dil[0];
                        int ih = oh * g->s[1] - g->pb[1] + kh * g->dil[1];
                        int iw = ow * g->s[2] - g->pb[2] + kw * g->dil[2];
                        size_t i;
                        if (id < 0 || id >= in.d || ih < 0 || ih >= in.h || iw < 0 || iw >= in.w) continue;
                        i = ((size_t)id * in.h + ih) * in.w + iw;
                        if (pass == 0) { cnt++; continue; }
                        if (is_max) { if (xp[i] == yp[o]) { dxp[i] += dyp[o]; done = 1; } }
                        else dxp[i] += dyp[o] / (float)cnt;
                    }
        }
    }
}

/* ---- dense: y = x w^T + b, so dx = dy w, dw = dy^T x, db = sum over the batch of dy */
CFDEF void cf_dense_forward(float *y, const float *x, const float *w, const float *b,
                            int B, int IN, int OUT) {
    int bi, o;
    for (bi = 0; bi < B; bi++) for (o = 0; o < OUT; o++) y[(size_t)bi * OUT + o] = b ? b[o] : 0.0f;
    /* y (B, OUT) += x (B, IN) x w^T (IN, OUT) */
    cf_sgemm(0, 1, B, OUT, IN, 1.0f, x, IN, w, IN, 1.0f, y, OUT);
}

CFDEF void cf_dense_backward(float *dx, float *dw, float *db, const float *dy, const float *x,
                             const float *w, int B, int IN, int OUT) {
    int bi, o;
    if (db) for (bi = 0; bi < B; bi++) for (o = 0; o < OUT; o++) db[o] += dy[(size_t)bi * OUT + o];
    cf_sgemm(1, 0, OUT, IN, B, 1.0f, dy, OUT, x, IN, 1.0f, dw, IN);      /* dw += dy^T x */
    if (dx) cf_sgemm(0, 0, B, IN, OUT, 1.0f, dy, OUT, w, IN, 1.0f, dx, IN); /* dx += dy w */
}

/* ---- activations (formulas in section 1).  Elementwise passes only stream memory and two
   cores stream faster than one, so loops over large tensors are split between the threads;
   one loop per kind, so that each runs without a test of act per element. */
#define CF__PAR_FOR(n) CF__OMP(omp parallel for schedule(static) if((n) > 65536))
CFDEF void cf_act_forward(float *y, size_t n, int act, float slope) {
    long i;   /* chunks of 2^16, shared by the threads */
    if (act == CF_ACT_LINEAR) return;
    CF__PAR_FOR(n)
    for (i = 0; i < (long)((n + 65535) >> 16); i++) {
        size_t start = (size_t)i << 16;
        cf__act_floats(y + start, n - start < 65536 ? n - start : 65536, act, slope);
    }
}

CFDEF void cf_act_backward(float *dy, const float *y, size_t n, int act, float slope) {
    long i, m = (long)n;
#define CF__ACT_LOOP(A)                                                                                               \
    do { CF__PAR_FOR(m) for (i = 0; i < m; i++) dy[i] = cf__act_df(dy[i], y[i], A, slope); } while (0)
    CF__ACT_SWITCH(act)
#undef CF__ACT_LOOP
}
/* ---- dropout: keep element i when hash(seed, i) >= rate and scale it by 1/(1-rate).  y is
   linear in x with the mask as its diagonal, so backward is the same map: dx += dropout(dy). */
CFDEF void cf_dropout(float *y, const float *x, size_t n, float rate, uint64_t seed) {
    float scale;
    size_t i;
    CF__ASSERT_ARG(rate >= 0.0f && rate <= 0.999f,
                     "cf_dropout: the rate is not in [0, 0.999] (the cfg's rate= range)");
    scale = 1.0f / (1.0f - rate);
    for (i = 0; i < n; i++) {
        float u = (float)(cf_hash64(seed ^ (0x9e3779b97f4a7c15ULL * (i + 1))) >> 40) * (1.0f / 16777216.0f);
        y[i] = u >= rate ? x[i] * scale : 0.0f;
    }
}

/* ---- losses.  MSE = (1/n) sum (y - t)^2, so dL/dy = 2 (y - t) / n; L1 = (1/n) sum |y - t|,
   dL/dy = sign(y - t) / n (0 at a tie, as torch). */
CFDEF double cf_loss_mse(float *dy, const float *y, const float *t, size_t n) {
    double s = 0.0;
    size_t i;
    for (i = 0; i < n; i++) {
        double d = (double)y[i] - t[i];
        s += d * d;
        if (dy) dy[i] = (float)(2.0 * d / (double)n);
    }
    return s / (double)n;
}

CFDEF double cf_loss_l1(float *dy, const float *y, const float *t, size_t n) {
    double s = 0.0;
    size_t i;
    for (i = 0; i < n; i++) {
        double d = (double)y[i] - t[i];
        s += fabs(d);
        if (dy) dy[i] = (float)((d > 0) - (d < 0)) / (float)n;
    }
    return s / (double)n;
}

/* ---- batch normalization.  Sums in double: a channel of a 768x1152 batch has ~10^6 terms. */
/* sum over (B, P) of f(x) for one channel, in float per chunk of CF__BN_CHUNK (SIMD), chunks
   in double */
#define CF__BN_CHUNK 1024
/* one chunk's sum of x or of (x - center)^2, n <= CF__BN_CHUNK */
static float cf__bn_chunk_sum(const float *x, size_t n, float center, int squared) {
    float acc = 0.0f;
    size_t p;
    if (squared) {
        CF__OMP(omp simd reduction(+:acc))
        for (p = 0; p < n; p++) acc += (x[p] - center) * (x[p] - center);
    } else {
        CF__OMP(omp simd reduction(+:acc))
        for (p = 0; p < n; p++) acc += x[p];
    }
    return acc;
}
static double cf__bn_sum(const float *x, int B, int C, int c, size_t P, float center, int squared) {
    double s = 0.0;
    size_t r;
    int b;
    for (b = 0; b < B; b++) {
        const float *xc = x + ((size_t)b * C + c) * P;
        for (r = 0; r < P; r += CF__BN_CHUNK)
            s += cf__bn_chunk_sum(xc + r, P - r < CF__BN_CHUNK ? P - r : CF__BN_CHUNK, center, squared);
    }
    return s;
}

/* y = act(a x + sh) on n values: a stretch of batch norm's normalizing pass */
static void cf__bn_apply_run(float *y, const float *x, float a, float sh, size_t n, int act, float slope) {
    size_t p;
    for (p = 0; p < n; p++) y[p] = a * x[p] + sh;
    cf__act_floats(y, n, act, slope);
}
/* y = act(gamma (x - mean) invstd + beta) = act(a x + sh) per channel: batch norm's
   normalizing pass, also what rebuilds a batch norm's output in backward (the same bits).
   The activation runs on a stretch of CF__STRETCH values just written, while it is in
   cache: one pass over memory instead of two. */
#define CF__STRETCH 4096
static void cf__bn_apply(float *y, const float *x, const float *gamma, const float *beta, const float *mean,
                         const float *invstd, int B, int C, size_t P, int act, float slope) {
    int c;
    CF__OMP(omp parallel for schedule(static))
    for (c = 0; c < C; c++) {
        float a = gamma[c] * invstd[c], sh = beta[c] - mean[c] * a;
        size_t p0;
        int b;
        for (b = 0; b < B; b++)
            for (p0 = 0; p0 < P; p0 += CF__STRETCH)
                cf__bn_apply_run(y + ((size_t)b * C + c) * P + p0, x + ((size_t)b * C + c) * P + p0, a, sh,
                                 P - p0 < CF__STRETCH ? P - p0 : CF__STRETCH, act, slope);
    }
}

/* dy = act'(y) dy, batch norm's activation backward, with y = act(a x + sh) computed again a
   stretch at a time from x as cf__bn_apply computes it, not read: a batch norm's output need
   not be kept (or rebuilt) for its own backward (section 9), and its bytes are not read */
static void cf__bn_act_backward(float *dy, const float *x, const float *gamma, const float *beta, const float *mean,
                                const float *invstd, int B, int C, size_t P, int act, float slope) {
    int c;
    CF__OMP(omp parallel for schedule(static))
    for (c = 0; c < C; c++) {
        float a = gamma[c] * invstd[c], sh = beta[c] - mean[c] * a, y[CF__STRETCH];
        size_t p0, n, at;
        int b;
        for (b = 0; b < B; b++)
            for (p0 = 0; p0 < P; p0 += CF__STRETCH) {
                n = P - p0 < CF__STRETCH ? P - p0 : CF__STRETCH;
                at = ((size_t)b * C + c) * P + p0;
                cf__bn_apply_run(y, x + at, a, sh, n, act, slope);
                cf__act_backward_run(dy + at, y, n, act, slope);
            }
    }
}

/* channel c's statistics from its mean and biased variance over n values */
static void cf__bn_set(int c, double mean, double var, double n, float *rmean, float *rvar, float *save_mean,
                       float *save_invstd, float momentum, float eps) {
    save_mean[c] = (float)mean;
    save_invstd[c] = (float)(1.0 / sqrt(var + eps));
    rmean[c] = (float)((1.0 - momentum) * rmean[c] + momentum * mean);
    rvar[c] = (float)((1.0 - momentum) * rvar[c] + momentum * (n > 1 ? var * n / (n - 1) : var));  /* unbiased */
}
/* the statistics that normalize, into save_mean and save_invstd: the batch's (train; the
   running ones move towards them) or the running ones */
static void cf__bn_stats(const float *x, float *rmean, float *rvar, float *save_mean, float *save_invstd, int B, int C,
                         size_t P, int train, float momentum, float eps, const cf_bn_sync *sync) {
    int c;
    if (train) {
        /* two passes, the mean and then squared deviations (no cancellation); each pass's
           per-channel sums are reduced over ranks first when synchronized */
        double *sum = sync ? sync->work : NULL, n;
        if (sync) {
            CF__OMP(omp parallel for schedule(static))
            for (c = 0; c < C; c++) sum[c] = cf__bn_sum(x, B, C, c, P, 0.0f, 0);
            sum[C] = (double)B * P;
            sync->reduce(sum, C + 1, sync->ctx);
            n = sum[C];
            for (c = 0; c < C; c++) save_mean[c] = (float)(sum[c] / n);
            CF__OMP(omp parallel for schedule(static))
            for (c = 0; c < C; c++) sum[c] = cf__bn_sum(x, B, C, c, P, save_mean[c], 1);
            sync->reduce(sum, C, sync->ctx);
        } else {
            n = (double)B * P;
        }
        CF__OMP(omp parallel for schedule(static))
        for (c = 0; c < C; c++) {
            double mean, var;
            if (sync) { mean = save_mean[c]; var = sum[c] / n; }
            else {
                mean = cf__bn_sum(x, B, C, c, P, 0.0f, 0) / n;
                var = cf__bn_sum(x, B, C, c, P, (float)mean, 1) / n;   /* biased: what normalizes */
            }
            cf__bn_set(c, mean, var, n, rmean, rvar, save_mean, save_invstd, momentum, eps);
        }
    } else {   /* the running statistics are the ones used */
        for (c = 0; c < C; c++) {
            save_mean[c] = rmean[c];
            save_invstd[c] = (float)(1.0 / sqrt((double)rvar[c] + eps));
        }
    }
}
CFDEF void cf_bn_forward(float *y, const float *x, const float *gamma, const float *beta,
                         float *rmean, float *rvar, float *save_mean, float *save_invstd,
                         int B, int C, size_t P, int train, float momentum, float eps,
                         const cf_bn_sync *sync) {
    cf__bn_stats(x, rmean, rvar, save_mean, save_invstd, B, C, P, train, momentum, eps, sync);
    cf__bn_apply(y, x, gamma, beta, save_mean, save_invstd, B, C, P, CF_ACT_LINEAR, 0.0f);
}

/* ---- batch norm's backward: the sums of dy and dy xhat, the coefficients of dx, then dx
   (cf_bn_backward, the last) */
/* one chunk's sums of dy and of dy xhat, xhat = (x - m) is: n <= CF__BN_CHUNK values, in
   float (SIMD), added to sdy and sdyx */
static void cf__bn_chunk_dsums(const float *dy, const float *x, size_t n, float m, float is, double *sdy,
                               double *sdyx) {
    float a = 0.0f, ax = 0.0f;
    size_t p;
    CF__OMP(omp simd reduction(+:a, ax))
    for (p = 0; p < n; p++) { a += dy[p]; ax += dy[p] * ((x[p] - m) * is); }
    *sdy += a; *sdyx += ax;
}
/* channel c's sums of dy and of dy xhat over (B, P): in float per chunk of CF__BN_CHUNK,
   chunks in double, as cf__bn_sum */
static void cf__bn_dsums(const float *dy, const float *x, int B, int C, int c, size_t P, float m, float is, double *sdy,
                         double *sdyx) {
    size_t r;
    int b;
    *sdy = *sdyx = 0.0;
    for (b = 0; b < B; b++) {
        const float *xc = x + ((size_t)b * C + c) * P, *dyc = dy + ((size_t)b * C + c) * P;
        for (r = 0; r < P; r += CF__BN_CHUNK)
            cf__bn_chunk_dsums(dyc + r, xc + r, P - r < CF__BN_CHUNK ? P - r : CF__BN_CHUNK, m, is, sdy, sdyx);
    }
}
/* synchronized (train): the global sums of dy and dy xhat of every channel, reduced over
   the ranks, into sums[0 .. C) and sums[C .. 2C), this rank's share added to dgamma and dbeta
   first (the gradient allreduce adds the rest); returns the global count of values n */
static double cf__bn_sync_dsums(double *sums, float *dgamma, float *dbeta, const float *dy, const float *x,
                                const float *mean, const float *invstd, int B, int C, size_t P,
                                const cf_bn_sync *sync) {
    int c;
    CF__OMP(omp parallel for schedule(static))
    for (c = 0; c < C; c++) {
        double sdy, sdyx;
        cf__bn_dsums(dy, x, B, C, c, P, mean[c], invstd[c], &sdy, &sdyx);
        dgamma[c] += (float)sdyx;
        dbeta[c] += (float)sdy;
        sums[c] = sdy; sums[C + c] = sdyx;
    }
    sums[2 * C] = (double)B * P;
    sync->reduce(sums, 2 * C + 1, sync->ctx);
    return sums[2 * C];
}
/* channel c's dx = k (dy - k1 - (x - m) is k2): its coefficients */
typedef struct { float m, is, k, k1, k2; } cf__bn_dx_coef;
/* k, k1 and k2 from the sums of dy and dy xhat over n values (k.m and k.is set); k1 = k2 = 0
   in eval mode */
static cf__bn_dx_coef cf__bn_coef(cf__bn_dx_coef k, float gamma, double sdy, double sdyx, int train, double n) {
    k.k = gamma * k.is;
    k.k1 = train ? (float)(sdy / n) : 0.0f;
    k.k2 = train ? (float)(sdyx / n) : 0.0f;
    return k;
}
/* channel c's coefficients from its sums of dy and dy xhat (sums: the global ones, already in
   dgamma and dbeta; NULL: this batch's, computed here and added to dgamma and dbeta) */
static cf__bn_dx_coef cf__bn_channel(float *dgamma, float *dbeta, const float *dy, const float *x, const float *gamma,
                                     const float *mean, const float *invstd, int B, int C, int c, size_t P, int train,
                                     const double *sums, double n) {
    cf__bn_dx_coef k;
    double sdy, sdyx;
    k.m = mean[c]; k.is = invstd[c];
    if (sums) { sdy = sums[c]; sdyx = sums[C + c]; }
    else {
        cf__bn_dsums(dy, x, B, C, c, P, k.m, k.is, &sdy, &sdyx);
        dgamma[c] += (float)sdyx;
        dbeta[c] += (float)sdy;
    }
    return cf__bn_coef(k, gamma[c], sdy, sdyx, train, n);
}
/* With xhat = (x - mean) invstd and n values per channel (train mode; the mean and variance
   depend on x):  dgamma = sum dy xhat,  dbeta = sum dy,
   dx = gamma invstd (dy - sum(dy)/n - xhat sum(dy xhat)/n), the sums over the global batch
   when synchronized.  Eval mode: the statistics are constants, dx = gamma invstd dy. */
CFDEF void cf_bn_backward(float *dx, float *dgamma, float *dbeta, const float *dy, const float *x,
                          const float *gamma, const float *mean, const float *invstd,
                          int B, int C, size_t P, int train, const cf_bn_sync *sync) {
    double *sums = sync && train ? sync->work : NULL;
    double n = sums ? cf__bn_sync_dsums(sums, dgamma, dbeta, dy, x, mean, invstd, B, C, P, sync) : (double)B * P;
    int c;
    CF__OMP(omp parallel for schedule(static))
    for (c = 0; c < C; c++) {
        cf__bn_dx_coef k = cf__bn_channel(dgamma, dbeta, dy, x, gamma, mean, invstd, B, C, c, P, train, sums, n);
        size_t p;
        int b;
        if (!dx) continue;
        for (b = 0; b < B; b++) {
            const float *xc = x + ((size_t)b * C + c) * P, *dyc = dy + ((size_t)b * C + c) * P;
            float *dxc = dx + ((size_t)b * C + c) * P;
            for (p = 0; p < P; p++) dxc[p] += k.k * (dyc[p] - k.k1 - (xc[p] - k.m) * k.is * k.k2);
        }
    }
}

/* ---- depthwise convolution: for each output row and tap, one strided run of an input row
   (the in-bounds part computed once by cf__row_range, as in im2col). */
/* one plane: yc (OD, OH, OW) = bias + the taps wc (KD, KH, KW) over xc (D, H, W) */
static void cf__dw_plane_forward(float *yc, const float *xc, const float *wc, float bias, cf_shape in, cf_shape out,
                                 const cf_geom *g) {
    int KD = g->k[0], KH = g->k[1], KW = g->k[2], od, oh, kd, kh, kw, t, lo, hi;
    size_t p, ov = (size_t)out.d * out.h * out.w;
    for (p = 0; p < ov; p++) yc[p] = bias;
    for (od = 0; od < out.d; od++) for (oh = 0; oh < out.h; oh++) {
        float *yr = yc + ((size_t)od * out.h + oh) * out.w;
        for (kd = 0; kd < KD; kd++) {
            int id = od * g->s[0] - g->pb[0] + kd * g->dil[0];
            if (id < 0 || id >= in.d) continue;
            for (kh = 0; kh < KH; kh++) {
                int ih = oh * g->s[1] - g->pb[1] + kh * g->dil[1];
                const float *xr;
                if (ih < 0 || ih >= in.h) continue;
                xr = xc + ((size_t)id * in.h + ih) * in.w;
                for (kw = 0; kw < KW; kw++) {
                    int off = kw * g->dil[2] - g->pb[2], s = g->s[2];
                    float wv = wc[(kd * KH + kh) * KW + kw];
                    cf__row_range(0, out.w, s, off, in.w, &lo, &hi);
                    for (t = lo; t < hi; t++) yr[t] += wv * xr[t * s + off];
                }
            }
        }
    }
}
/* y = act(dwconv(x, w) + b), the activation applied to each plane while it is in cache */
static void cf__dwconv_forward_ref(float *y, const float *x, const float *w, const float *b, int B, cf_shape in,
                                   cf_shape out, const cf_geom *g, int act, float slope) {
    int C = in.c, pl;
    size_t iv = (size_t)in.d * in.h * in.w, ov = (size_t)out.d * out.h * out.w;
    CF__OMP(omp parallel for schedule(static))
    for (pl = 0; pl < B * C; pl++) {   /* plane pl: sample pl / C, channel pl % C */
        int c = pl % C;
        cf__dw_plane_forward(y + (size_t)pl * ov, x + (size_t)pl * iv, w + (size_t)c * g->k[0] * g->k[1] * g->k[2],
                             b ? b[c] : 0.0f, in, out, g);
        cf__act_floats(y + (size_t)pl * ov, ov, act, slope);
    }
}
CFDEF void cf_ref_dwconv_forward(float *y, const float *x, const float *w, const float *b,
                                 int B, cf_shape in, cf_shape out, const cf_geom *g) {
    cf__dwconv_forward_ref(y, x, w, b, B, in, out, g, CF_ACT_LINEAR, 0.0f);
}

CFDEF void cf_ref_dwconv_backward(float *dx, float *dw, float *db, const float *dy, const float *x,
                                  const float *w, int B, cf_shape in, cf_shape out, const cf_geom *g) {
    int C = in.c, c, KD = g->k[0], KH = g->k[1], KW = g->k[2];
    size_t iv = (size_t)in.d * in.h * in.w, ov = (size_t)out.d * out.h * out.w;
    if (db) cf__bias_grad(db, dy, B, C, ov);
    CF__OMP(omp parallel for schedule(static))
    for (c = 0; c < C; c++) {   /* a channel's dw and dx belong to one thread */
        const float *wc = w + (size_t)c * KD * KH * KW;
        float *dwc = dw + (size_t)c * KD * KH * KW;
        int bi, od, oh, kd, kh, kw, t, lo, hi;
        for (bi = 0; bi < B; bi++) {
            const float *xc = x + ((size_t)bi * C + c) * iv, *dyc = dy + ((size_t)bi * C + c) * ov;
            float *dxc = dx ? dx + ((size_t)bi * C + c) * iv : NULL;
            for (od = 0; od < out.d; od++) for (oh = 0; oh < out.h; oh++) {
                const float *dyr = dyc + ((size_t)od * out.h + oh) * out.w;
                for (kd = 0; kd < KD; kd++) {
                    int id = od * g->s[0] - g->pb[0] + kd * g->dil[0];
                    if (id < 0 || id >= in.d) continue;
                    for (kh = 0; kh < KH; kh++) {
                        int ih = oh * g->s[1] - g->pb[1] + kh * g->dil[1];
                        size_t row;
                        if (ih < 0 || ih >= in.h) continue;
                        row = ((size_t)id * in.h + ih) * in.w;
                        for (kw = 0; kw < KW; kw++) {
                            int off = kw * g->dil[2] - g->pb[2], s = g->s[2], k = (kd * KH + kh) * KW + kw;
                            float wv = wc[k], acc = 0.0f;
                            cf__row_range(0, out.w, s, off, in.w, &lo, &hi);
                            /* a float sum the compiler may reorder (vectorize) only when told */
                            CF__OMP(omp simd reduction(+:acc))
                            for (t = lo; t < hi; t++) acc += dyr[t] * xc[row + t * s + off];
                            dwc[k] += acc;
                            if (dxc) for (t = lo; t < hi; t++) dxc[row + t * s + off] += wv * dyr[t];
                        }
                    }
                }
            }
        }
    }
}

/* ---- transposed convolution.  The GEMM runs over tiles of x's positions (the forward
   convolution's output grid), so the col workspace stays bounded like im2col's. */
CFDEF void cf_deconv_forward(float *y, const float *x, const float *w, const float *b,
                             int B, cf_shape in, cf_shape out, const cf_geom *g,
                             float *col, size_t ws_floats) {
    int K = out.c * g->k[0] * g->k[1] * g->k[2], bi, oc;
    size_t P = (size_t)in.d * in.h * in.w, Q = (size_t)out.d * out.h * out.w, tile = cf__tile((size_t)K, P, ws_floats),
        p0, q;
    for (bi = 0; bi < B; bi++) {
        const float *xb = x + (size_t)bi * in.c * P;
        float *yb = y + (size_t)bi * out.c * Q;
        for (oc = 0; oc < out.c; oc++) for (q = 0; q < Q; q++) yb[(size_t)oc * Q + q] = b ? b[oc] : 0.0f;
        for (p0 = 0; p0 < P; p0 += tile) {
            size_t n = P - p0 < tile ? P - p0 : tile;
            /* col (K, n) = w^T (K, C) x x[:, p0:p0+n] (C, n); then scatter-add into y */
            cf_sgemm(1, 0, K, (int)n, in.c, 1.0f, w, K, xb + p0, (int)P, 0.0f, col, (int)n);
            cf__col2im(yb, col, out.c, out, in, g, p0, n);
        }
    }
}

CFDEF void cf_deconv_backward(float *dx, float *dw, float *db, const float *dy, const float *x,
                              const float *w, int B, cf_shape in, cf_shape out, const cf_geom *g,
                              float *col, size_t ws_floats) {
    int K = out.c * g->k[0] * g->k[1] * g->k[2], bi, oc;
    size_t P = (size_t)in.d * in.h * in.w, Q = (size_t)out.d * out.h * out.w, tile = cf__tile((size_t)K, P, ws_floats),
        p0, q;
    for (bi = 0; bi < B; bi++) {
        const float *xb = x + (size_t)bi * in.c * P, *dyb = dy + (size_t)bi * out.c * Q;
        if (db) for (oc = 0; oc < out.c; oc++) {
            double s = 0.0;
            for (q = 0; q < Q; q++) s += dyb[(size_t)oc * Q + q];
            db[oc] += (float)s;
        }
        for (p0 = 0; p0 < P; p0 += tile) {
            size_t n = P - p0 < tile ? P - p0 : tile;
            cf__im2col(col, dyb, out.c, out, in, g, p0, n);          /* (K, n) */
            /* dw (C, K) += x (C, n) x col^T (n, K);  dx (C, n) += w (C, K) x col (K, n) */
            cf_sgemm(0, 1, in.c, K, (int)n, 1.0f, xb + p0, (int)P, col, (int)n, 1.0f, dw, K);
            if (dx) cf_sgemm(0, 0, in.c, (int)n, K, 1.0f, w, K, col, (int)n, 1.0f, dx + (size_t)bi * in.c * P + p0,
                             (int)P);
        }
    }
}

/* ---- segmentation loss and metric */
CFDEF double cf_loss_softmax_ce(float *dz, const float *z, const float *labels, const float *w,
                                int B, int K, size_t P) {
    double total = 0.0, n = (double)B * P;
    int bi, bad = 0;
    for (bi = 0; bi < B; bi++) {
        const float *zb = z + (size_t)bi * K * P, *lb = labels + (size_t)bi * P;
        float *dzb = dz ? dz + (size_t)bi * K * P : NULL;
        size_t p;
        for (p = 0; p < P; p++) {
            int k, y = (int)lb[p];
            double mx = -INFINITY, se = 0.0, wy;
            if (!(lb[p] >= 0.0f && lb[p] < (float)K) || (float)y != lb[p]) { bad = 1; continue; }
            for (k = 0; k < K; k++) if (zb[(size_t)k * P + p] > mx) mx = zb[(size_t)k * P + p];
            for (k = 0; k < K; k++) se += exp(zb[(size_t)k * P + p] - mx);
            wy = w ? w[y] : 1.0;
            /* -log softmax(z)_y = log sum exp(z - max) - (z_y - max) */
            total += wy * (log(se) - (zb[(size_t)y * P + p] - mx));
            if (dzb)   /* d/dz_k = w_y (softmax_k - [k == y]) / n */
                for (k = 0; k < K; k++)
                    dzb[(size_t)k * P + p] = (float)(wy * (exp(zb[(size_t)k * P + p] - mx) / se - (k == y)) / n);
        }
    }
    return bad ? NAN : total / n;
}

CFDEF void cf_argmax_classes(int *pred, const float *z, int K, size_t P) {
    size_t p;
    int k;
    CF__ASSERT_ARG((pred && z) || !P, "cf_argmax_classes: pred or z is NULL");
    for (p = 0; p < P; p++) {
        int best = 0;
        for (k = 1; k < K; k++) if (z[(size_t)k * P + p] > z[(size_t)best * P + p]) best = k;
        pred[p] = best;
    }
}

CFDEF double cf_iou_sample(const int *pred, const float *label, size_t n, int K) {
    double iou = 0.0;
    int k;
    if (((!pred || !label) && n) || K < 1) { cf_fail("cf_iou_sample: pred or label NULL, or K %d < 1", K); return NAN; }
    for (k = 0; k < K; k++) {
        size_t tp = 0, fp = 0, fn = 0, i;
        for (i = 0; i < n; i++) {
            int p = pred[i] == k, g = (int)label[i] == k;
            tp += p && g; fp += p && !g; fn += !p && g;
        }
        iou += tp + fp + fn ? (double)tp / (double)(tp + fp + fn) : 1.0;   /* empty union: 1 */
    }
    return iou / K;
}
/* ================================================================ 4. the door to the fast paths
   The network (section 5) runs each operation through one dispatcher: the first registered
   fast path (section 13) that applies and is switched on, else the reference of section 3.
   A dispatcher also takes what the network's precision and memory plan ask of an operation,
   which the references never see:
     bf16     the operands are bf16 values and the output is stored rounded to bf16 (a bf16
              network, section 6): rounded by a path as it stores, else by a pass after the
              reference; the function returns whether it rounded
     store    the output gradient holds no values yet (section 9, stores): a path stores
              0 + its sum, else the dispatcher zeroes the block before the reference adds
     halves   operands stored in 16 bits (section 9, halves): the plan asks this only of an
              operation that has a path which takes them
   The kinds of fast path, each switched off and on by cf_fast_path_set (all on; a
   CF_REFERENCE build compiles none in and has them all off):
     tiles      a large convolution cut into tiles of output positions that the threads take
                whole, each with its own im2col tile and a single-threaded sgemm
     pointwise  a 1x1 convolution as GEMMs on x and dx themselves (im2col would copy them)
     direct     stride-1 convolutions without im2col: vector kernels over output rows; the
                depthwise backward over contiguous rows; the bias gradient's sums in vectors
     inside     pooling windows that never leave the input: no bounds tests
     pairs      max pooling with disjoint 2x2(x2) windows, read as pairs from 2 or 4 rows
     fusion     conv + max pool: the pool's backward writes the conv's gradient in place
     recompute  cheap outputs rebuilt in backward instead of kept (the last two are steps of
                the memory plan, section 9)
     bf16       a bf16 network's convolutions on the CPU's bf16 instructions (the direct kernel
                and a GEMM), and its outputs rounded as they are stored.  Their multiply-adds
                take one of two forms (section 13, "the dot step"), the same bits: vdpbf16ps,
                or the pairs widened to fp32 and two FMAs, for the CPUs whose vdpbf16ps runs
                below their FMA's rate (an Intel Xeon: 63.2 against 87.9 GFLOP/s a core).  A
                probe at first use (2 ms: both instructions in registers) picks the faster;
                cf_bf16_form_set forces one; cf_bf16_kernels names the one in use
     stores     a gradient's first writer stores into it instead of adding to a block zeroed
                before (a step of the memory plan, section 9)
     taps       a 2-D stride-1 convolution with many input channels as one GEMM per tap, on x
                or a copy of x shifted along the width, over the output rows the tap reaches
     gemm       the pointwise convolutions' fp32 GEMMs on this header's own AVX-512 kernel
                (chosen at run time by the CPU, not by the BLAS's kernel set), where they are
                large enough; the same sums whatever the number of threads
   Why each is faster, with its measurements, is in docs/performance.md.
   Every decision of which path runs, and of which tensors a path takes in 16 bits, is made
   here; section 13 holds the paths' code, which sections 1-12 reach only through this door
   (tests/check_calls.sh).  Contents: the kinds and what this build compiles in; the dispatchers'
   declarations; the registry (a call, a path, picking one); the section-11 code the door calls
   (declared); the tables of paths and the dispatchers; the storage forms of section 3's passes
   (rounded, stored, 16 bits); what the memory plan may store in 16 bits. */
enum { CF__K_TILES, CF__K_POINTWISE, CF__K_DIRECT, CF__K_INSIDE, CF__K_PAIRS, CF__K_FUSION,
       CF__K_RECOMPUTE, CF__K_BF16, CF__K_STORES, CF__K_TAPS, CF__K_GEMM, CF__NKINDS };
static const char *cf__kind_names[CF__NKINDS] = {"tiles", "pointwise", "direct", "inside", "pairs", "fusion",
                                                 "recompute", "bf16", "stores", "taps", "gemm"};
#ifdef CF_REFERENCE
static int cf__kind_on[CF__NKINDS] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
#else
static int cf__kind_on[CF__NKINDS] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
#endif

CFDEF int cf_fast_path_set(const char *kind, int on) {
    int k, all = !strcmp(kind, "all"), found = all;
    for (k = 0; k < CF__NKINDS; k++)
        if (all || !strcmp(kind, cf__kind_names[k])) {
            found = 1;
            cf__kind_on[k] = on != 0;
#ifdef CF_REFERENCE
            cf__kind_on[k] = 0;   /* none is compiled in */
#endif
        }
    return found ? CF_OK
                 : cf_fail("fast path kind '%s' is unknown (all, tiles, pointwise, direct, inside, pairs, fusion, "
                           "recompute, bf16, stores, taps, gemm)", kind);
}
CFDEF int cf_fast_path_on(const char *kind) {
    int k;
    for (k = 0; k < CF__NKINDS; k++) if (!strcmp(kind, cf__kind_names[k])) return cf__kind_on[k];
    return -1;
}

/* what this build compiles in (section 13 holds the code; CF_REFERENCE none of it): the direct
   kernels where GCC or Clang targets AVX2 and FMA (-march=x86-64-v3 or native), their AVX-512
   instances on x86-64, and the bf16 kernels with those; the last two chosen at run time, by
   the CPU */
#if !defined(CF_REFERENCE) && defined(__GNUC__) && defined(__AVX2__) && defined(__FMA__) && !defined(CF_NO_DIRECT_CONV)
#define CF__DIRECT 1
#endif
#if defined(CF__DIRECT) && defined(__x86_64__) && !defined(CF_NO_AVX512)
#define CF__AVX512 1
#endif
#if defined(CF__DIRECT) && defined(CF__AVX512) && !defined(CF_NO_BF16)
#define CF__BF16 1
#define CF__BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
#endif
/* the bf16 GEMM's AMX form: Linux (the tiles' state is granted by arch_prctl), GCC 11 or Clang 12 on */
#if defined(CF__BF16) && defined(__linux__) && (defined(__clang__) ? __clang_major__ >= 12 : __GNUC__ >= 11)
#define CF__AMX 1
#define CF__AMX_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,amx-tile,amx-bf16")))
#endif
/* halves: which of a convolution's operands are stored in 16 bits, CF__HALF_OUT y (forward)
   or dy (backward), CF__HALF_IN x, CF__HALF_DIN dx; CF__RAW_IN: x is the network's input, not
   yet rounded (its readers round it as they read it, section 9) */
enum { CF__HALF_OUT = 1, CF__HALF_IN = 2, CF__HALF_DIN = 4, CF__RAW_IN = 8, CF__HALF_ALL = 7 };
/* which of a GEMM's A, B and C are stored in 16 bits (section 13, the bf16 GEMM) */
enum { CF__GEMM_HALF_A = 1, CF__GEMM_HALF_B = 2, CF__GEMM_HALF_C = 4 };
/* convolutions (cf_conv_forward_act and its backward halves) on a call c that cf__conv_make
   made and the caller gave its operands; halves and store as above, db the bias gradient */
typedef struct cf__conv_call cf__conv_call;
static void cf__conv_forward_p(cf__conv_call *c, int halves);
static void cf__conv_backward_weights_p(cf__conv_call *c, float *db, int halves);
static void cf__conv_backward_data_p(cf__conv_call *c, int halves, int store);
static const char *cf__conv_path_p(int op, int B, cf_shape in, cf_shape out, const cf_geom *g, int groups,
                                   size_t ws_floats, int bf16);
/* depthwise convolutions: y = act(dwconv(x, w) + b); the backward's dx, dw and db at once
   (a call of cf__conv_make with groups = in.c) */
static void cf__dwconv_forward_p(cf__conv_call *c, int halves);
static void cf__dwconv_backward_p(cf__conv_call *c, float *db, int halves, int store);
static const char *cf__dwconv_path(int op, int B, cf_shape in, cf_shape out, const cf_geom *g);
/* transposed convolutions on a call of cf__deconv_make; the backward's dx rounded when
   rnd_dx: returns whether it was */
static void cf__deconv_forward_p(cf__conv_call *c);
static int cf__deconv_backward_p(cf__conv_call *c, float *db, int rnd_dx);
static const char *cf__deconv_path(int bf16);
/* pooling; half, y_half: x, y stored in 16 bits */
static void cf__pool_forward_p(float *y, int y_half, const float *x, int half, int B, cf_shape in, cf_shape out,
                               const cf_geom *g, int is_max);
/* the backward of act + max pool fused in place (section 9, fusion): xg holds the pool's input
   x = act(z) on entry and dL/dz on return, rounded when bf16; half, dy_half, y_half: xg, the
   pool's dy and y stored in 16 bits */
typedef struct {
    float *xg;
    const float *dy, *y;
    int half, dy_half, y_half, B;
    cf_shape in, out;
    const cf_geom *g;
    int act;
    float slope;
    int bf16;
} cf__pool_fused_call;
static void cf__pool_fused_backward(const cf__pool_fused_call *f);
/* a batch norm call: B samples of C channels of P values; its input x, output y, the gradients
   dy over y and dx over x (NULL: none), each in fp32 or (x_half, ...) in 16 bits; gamma, beta,
   their gradients, and the statistics it normalizes with (mean, invstd) per channel; the
   activation after it.  Its caller sets what the operation reads and writes, the rest 0. */
typedef struct {
    const float *x; float *y, *dy, *dx;
    int x_half, y_half, dy_half, dx_half;
    const float *gamma, *beta, *mean, *invstd;
    float *dgamma, *dbeta;
    int B, C; size_t P;
    int act; float slope;
} cf__bn_call;
/* batch norm's normalizing pass and backward (cf__bn_apply, cf_bn_backward), rnd: the output
   (dx) rounded to bf16 as it is stored */
static int cf__bn_apply_p(const cf__bn_call *bn, int rnd);
static int cf__bn_backward_p(const cf__bn_call *bn, int train, const cf_bn_sync *sync, int rnd, int store);
/* cf__bn_act_backward (on bn->dy) with y rounded to bf16 as the forward stored it (rnd: a bf16 network's) */
static void cf__bn_act_backward_p(const cf__bn_call *bn, int rnd);
/* the same three (the statistics, cf__bn_apply, cf_bn_backward with the activation's
   derivative) on x, y, dy, dx each in fp32 or 16 bits (section 9, halves), a batch of this
   rank's alone (not synchronized); y and dx rounded (a bf16 network's) */
static void cf__bn_stats_half(const cf__bn_call *bn, float *rmean, float *rvar, float *save_mean, float *save_invstd,
                              int train, float momentum, float eps);
static void cf__bn_apply_h(const cf__bn_call *bn);
static void cf__bn_backward_h(const cf__bn_call *bn, int train, int store, int rnd);
/* the elementwise passes of copies and sums: dx += dy (store: dx = 0 + dy; dx NULL: nothing);
   y = the sum of n_src tensors in source order; rnd: rounded as stored.  These and batch
   norm's return 1 when what they stored needs no rounding pass after them. */
static int cf__add_to_p(float *dx, const float *dy, size_t n, int rnd, int store);
static int cf__sum_p(float *y, const float *const *src, int n_src, size_t n, int rnd);
/* what the memory plan may store in 16 bits: conv l's (depthwise or not) operands halves
   (CF__HALF_*: each of its operations has a path that takes them and computes fp32 storage's
   sums) and max pool p's input and (y_half) output */
static int cf__conv_takes_halves(cf_net *net, const cf_layer *l, int dinput, int halves);
static size_t cf__pointwise_ws_floats(void);
static size_t cf__band_floats(const cf_layer *l, size_t ws_floats);
static int cf__deconv_takes_halves(cf_net *net, const cf_layer *l, int halves);
static int cf__pool_takes_halves(cf_net *net, const cf_layer *p, int y_half);

/* ---- what the door and the paths share: the element of a tensor stored in fp32 or in 16
   bits, the bias gradient of a tensor in 16 bits (a GEMM as an argument: section 3) */
/* the address of element i of a tensor stored in fp32 or (half) in 16 bits (section 9, halves) */
CF__INLINE float *cf__elt(const float *base, int half, size_t i) {
    return (float *)(void *)((char *)base + i * (half ? 2 : 4));
}
/* n values stored in 16 bits widened to fp32 (exact) */
static void cf__widen_run(float *to, const cf_bf16 *h, size_t n) {
    size_t p;
    for (p = 0; p < n; p++) { uint32_t u = (uint32_t)h[p] << 16; memcpy(to + p, &u, 4); }
}
/* v rounded to bf16 (in place), then stored as its upper halves */
static void cf__narrow_run(cf_bf16 *to, float *v, size_t n) {
    size_t p;
    cf__round_run(v, n);
    for (p = 0; p < n; p++) { uint32_t u; memcpy(&u, v + p, 4); to[p] = (cf_bf16)(u >> 16); }
}
/* cf__sum8 of n values stored in 16 bits, in the same order */
static double cf__sum8_half(const cf_bf16 *h, size_t n) {
    double s[8] = {0, 0, 0, 0, 0, 0, 0, 0}, t = 0.0;
    size_t p = 0;
    int j;
    for (; p + 8 <= n; p += 8) for (j = 0; j < 8; j++) s[j] += cf_f32_from_bf16(h[p + j]);
    for (; p < n; p++) s[p % 8] += cf_f32_from_bf16(h[p]);
    for (j = 0; j < 8; j++) t += s[j];
    return t;
}
#ifdef CF__DIRECT
static void cf__bias_grad_v(float *db, const float *dy, int half, int B, int OC, size_t P);   /* (section 13) */
#endif
/* cf__bias_grad of a dy stored in fp32 or (half) in 16 bits; in vectors (kind direct), the same bits */
static void cf__bias_grad_p(float *db, const float *dy, int half, int B, int OC, size_t P) {
    int bi, oc;
#ifdef CF__DIRECT
    if (cf__kind_on[CF__K_DIRECT]) { cf__bias_grad_v(db, dy, half, B, OC, P); return; }
#endif
    if (!half) { cf__bias_grad(db, dy, B, OC, P); return; }
    for (bi = 0; bi < B; bi++) {
        CF__OMP(omp parallel for schedule(static))
        for (oc = 0; oc < OC; oc++)
            db[oc] += (float)cf__sum8_half((const cf_bf16 *)(const void *)dy + ((size_t)bi * OC + oc) * P, P);
    }
}

/* ---- the registry.  A convolution call, as every path of a convolution operation gets it: */
struct cf__conv_call {
    float *y; const float *x, *w, *b; int act; float slope;   /* forward: y = act(conv(x, w) + b) */
    float *dw; const float *dy;                               /* backward-weights: dw += ... */
    float *dx;                                                /* backward-data: dx += ... */
    int dx_store;                                             /* dx = ... instead (dx holds no values yet,
                                                                 section 9, stores): 0 + the sum, as the
                                                                 add into a zeroed dx gives */
    int B, groups; cf_shape in, out; const cf_geom *g;
    float *ws; size_t ws_floats;                              /* workspace */
    int bf16;                                                 /* operands are bf16 values (section 6) */
    int half;                                                 /* y (forward) or dy (backward) is stored in
                                                                 16 bits (section 9, halves): its pointer
                                                                 is a cf_bf16 * */
    int x_half, dx_half;                                      /* x, dx stored in 16 bits; dx written, not
                                                                 added to (the plan: its only writer) */
    int x_raw;                                                /* x in fp32 not yet rounded (a bf16 network's
                                                                 input): rounded as the path reads it */
};
/* a path: its kind, whether it applies, the code; rounds = 1: a forward or backward-data path
   that stores its output rounded to bf16 when c->bf16 (else the dispatcher rounds it, section
   6); half = 1:
   it takes a call with operands in 16 bits or an unrounded input (half, x_half, dx_half,
   x_raw; the others never see one); half = 2: the same, and it computes the sums of the next
   path in its table, the one fp32 storage takes (its twin: the plan stores a tensor in 16 bits
   only where that keeps every bit, section 9); stores = 1: a backward-data path that honours dx_store
   (for the others the dispatcher zeroes dx first) */
typedef struct {
    int kind;
    int (*applies)(const cf__conv_call *c);
    void (*run)(const cf__conv_call *c);
    int rounds, half, stores;
} cf__conv_path;
/* a pooling call; half, y_half: x, y are stored in 16 bits (section 9, halves) */
typedef struct {
    float *y, *dx; const float *x, *dy;
    int B, is_max; cf_shape in, out; const cf_geom *g;
    int half, y_half;
} cf__pool_call;
typedef struct {
    int kind;
    int (*applies)(const cf__pool_call *c);
    void (*run)(const cf__pool_call *c);
    int half;
} cf__pool_path;

/* the first enabled path that applies (a table ends with kind -1), or NULL: the reference.
   The paths assume the output the geometry gives; a C caller's other output (section 3
   takes any) goes to the reference. */
static const cf__conv_path *cf__conv_pick(const cf__conv_path *p, const cf__conv_call *c) {
    int half = c->half || c->x_half || c->dx_half || c->x_raw;
    if (c->out.d != cf_geom_out(c->g, 0, c->in.d) || c->out.h != cf_geom_out(c->g, 1, c->in.h) ||
        c->out.w != cf_geom_out(c->g, 2, c->in.w))
        return NULL;
    for (; p->kind >= 0; p++) if (cf__kind_on[p->kind] && (p->half || !half) && p->applies(c)) return p;
    return NULL;
}
static const cf__pool_path *cf__pool_pick(const cf__pool_path *p, const cf__pool_call *c) {
    for (; p->kind >= 0; p++)
        if (cf__kind_on[p->kind] && (p->half || !(c->half || c->y_half)) && p->applies(c)) return p;
    return NULL;
}

/* ---- what the door calls in section 13: each path's condition and code (the tables below),
   the bf16 GEMM and the CPU's bf16 instructions, the transposed convolution's loops with
   another GEMM and their band of 16-bit rows, the fused backward of act + max pool */
#ifndef CF_REFERENCE
static int cf__pointwise_applies(const cf__conv_call *c);
static void cf__pointwise_fwd(const cf__conv_call *c);
static void cf__pointwise_bww(const cf__conv_call *c);
static void cf__pointwise_bwd(const cf__conv_call *c);
static int cf__tiles_fwd_applies(const cf__conv_call *c);
static void cf__tiles_fwd(const cf__conv_call *c);
static int cf__tiles_bww_applies(const cf__conv_call *c);
static void cf__tiles_bww(const cf__conv_call *c);
static int cf__tiles_bwd_applies(const cf__conv_call *c);
static void cf__tiles_bwd(const cf__conv_call *c);
static int cf__taps_applies(const cf__conv_call *c);
static void cf__taps_fwd(const cf__conv_call *c);
static void cf__taps_bww(const cf__conv_call *c);
static int cf__pool_pairs_applies(const cf__pool_call *c);
static void cf__pool_pairs_fwd(const cf__pool_call *c);
static int cf__pool_inside_applies(const cf__pool_call *c);
static void cf__pool_inside_fwd(const cf__pool_call *c);
static void cf__pool_inside_bwd(const cf__pool_call *c);
static int cf__dw3x3_half_applies(const cf__conv_call *c);
static int cf__dw3x3_applies(const cf__conv_call *c);
static void cf__dw3x3_fwd(const cf__conv_call *c);
static int cf__dw_rounded_applies(const cf__conv_call *c);
static void cf__dw_rounded_fwd(const cf__conv_call *c);
static int cf__dw3x3_half_bwd_applies(const cf__conv_call *c);
static int cf__dw3x3_bwd_applies(const cf__conv_call *c);
static void cf__dw3x3_bwd(const cf__conv_call *c);
static int cf__dw_rows_applies(const cf__conv_call *c);
static void cf__dw_rows_bwd(const cf__conv_call *c);
static void cf__pool_fused_backward_run(const cf__pool_fused_call *f);
#endif
#ifdef CF__AVX512
static int cf__pointwise_f32_applies(const cf__conv_call *c);
static int cf__pointwise_f32_bww_applies(const cf__conv_call *c);
static int cf__pointwise_f32_bwd_applies(const cf__conv_call *c);
static void cf__pointwise_f32_fwd(const cf__conv_call *c);
static void cf__pointwise_f32_bww(const cf__conv_call *c);
static void cf__pointwise_f32_bwd(const cf__conv_call *c);
static int cf__cols_f32_fwd_applies(const cf__conv_call *c);
static int cf__cols_f32_bww_applies(const cf__conv_call *c);
static int cf__cols_f32_bwd_applies(const cf__conv_call *c);
static void cf__cols_f32_fwd(const cf__conv_call *c);
static void cf__cols_f32_bww(const cf__conv_call *c);
static void cf__cols_f32_bwd(const cf__conv_call *c);
static int cf__strided_pw_applies(const cf__conv_call *c);
static void cf__strided_pw_bwd(const cf__conv_call *c);
static int cf__rows_f32_bww_applies(const cf__conv_call *c);
static void cf__rows_f32_bww(const cf__conv_call *c);
static int cf__im2col_f32_applies(const cf__conv_call *c);
static void cf__im2col_f32_fwd(const cf__conv_call *c);
static void cf__im2col_f32_bww(const cf__conv_call *c);
static void cf__im2col_f32_bwd(const cf__conv_call *c);
#endif
#ifdef CF__DIRECT
static int cf__direct_fwd_applies(const cf__conv_call *c);
static void cf__direct_fwd_run(const cf__conv_call *c);
static int cf__direct_bwd_applies(const cf__conv_call *c);
static void cf__direct_bwd_run(const cf__conv_call *c);
#endif
#ifdef CF__AVX512
static int cf__has_avx512(void);
static int cf__dwv_half_applies(const cf__conv_call *c);
static int cf__dwv_applies(const cf__conv_call *c);
static void cf__dwv_fwd(const cf__conv_call *c);
static void cf__dwv_bwd(const cf__conv_call *c);
static int cf__dws_half_applies(const cf__conv_call *c);
static int cf__dws_applies(const cf__conv_call *c);
static void cf__dws_fwd(const cf__conv_call *c);
static void cf__dws_bwd(const cf__conv_call *c);
#endif
#ifdef CF__BF16
static int cf__has_bf16(void);
static void cf__bf16_rates(double *dot, double *fma);
CF__BF16_TARGET static void cf__round_floats_bf16(float *x, size_t n);
static int cf__bf16_gemm_applies(const cf__conv_call *c);
static void cf__sgemm_bf16(int tA, int tB, int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                           float beta, float *C, int ldc);
static void cf__sgemm_bf16_rounded(int tA, int tB, int M, int N, int K, const float *A, int lda, const float *B,
                                   int ldb, float beta, float *C, int ldc);
static size_t cf__gemm_bf16_ws_floats(void);
static int cf__gemm_bf16_one_chunk(size_t K);
static int cf__bf16_direct_fwd_applies(const cf__conv_call *c);
static void cf__bf16_direct_fwd_run(const cf__conv_call *c);
#ifdef CF__AMX
static int cf__bf16_amx_fwd_applies(const cf__conv_call *c);
static void cf__bf16_amx_fwd_run(const cf__conv_call *c);
static int cf__bf16_amx_bwd_applies(const cf__conv_call *c);
static void cf__bf16_amx_bwd_run(const cf__conv_call *c);
static int cf__bf16_fold_fwd_applies(const cf__conv_call *c);
static void cf__bf16_fold_fwd_run(const cf__conv_call *c);
#endif
static int cf__bf16_pw_half_fwd_applies(const cf__conv_call *c);
static void cf__bf16_pw_half_fwd(const cf__conv_call *c);
static int cf__bf16_pointwise_applies(const cf__conv_call *c);
static void cf__bf16_pointwise_fwd(const cf__conv_call *c);
static int cf__bf16_tiles_fwd_applies(const cf__conv_call *c);
static void cf__bf16_tiles_fwd(const cf__conv_call *c);
static int cf__bf16_cols_fwd_applies(const cf__conv_call *c);
static void cf__bf16_cols_fwd(const cf__conv_call *c);
static void cf__bf16_im2col_fwd(const cf__conv_call *c);
static int cf__bf16_pw_half_applies(const cf__conv_call *c);
static void cf__bf16_pw_half_bww(const cf__conv_call *c);
static void cf__bf16_pointwise_bww(const cf__conv_call *c);
static int cf__bf16_rows_bww_applies(const cf__conv_call *c);
static void cf__bf16_rows_bww(const cf__conv_call *c);
#ifdef CF__AMX
static int cf__bf16_rows_amx_applies(const cf__conv_call *c);
static void cf__bf16_rows_amx(const cf__conv_call *c);
#endif
static int cf__bf16_taps_bww_applies(const cf__conv_call *c);
static void cf__bf16_taps_bww(const cf__conv_call *c);
static int cf__bf16_tiles_bww_applies(const cf__conv_call *c);
static void cf__bf16_tiles_bww(const cf__conv_call *c);
static int cf__bf16_cols_applies(const cf__conv_call *c);
static void cf__bf16_cols_bww(const cf__conv_call *c);
static void cf__bf16_im2col_bww(const cf__conv_call *c);
static int cf__bf16_pw_half_bwd_applies(const cf__conv_call *c);
static void cf__bf16_pw_half_bwd(const cf__conv_call *c);
static void cf__bf16_pointwise_bwd(const cf__conv_call *c);
static int cf__bf16_cols_bwd_applies(const cf__conv_call *c);
static void cf__bf16_cols_bwd(const cf__conv_call *c);
static int cf__bf16_direct_bwd_applies(const cf__conv_call *c);
static void cf__bf16_direct_bwd_run(const cf__conv_call *c);
static int cf__bf16_strided_pw_applies(const cf__conv_call *c);
static void cf__bf16_strided_pw_bwd(const cf__conv_call *c);
static int cf__bf16_tiles_bwd_applies(const cf__conv_call *c);
static void cf__bf16_tiles_bwd(const cf__conv_call *c);
static int cf__bf16_im2col_bwd_applies(const cf__conv_call *c);
static void cf__bf16_im2col_bwd(const cf__conv_call *c);
static int cf__pool_pairs_half_applies(const cf__pool_call *c);
CF__BF16_TARGET static void cf__pool_pairs_half_fwd(const cf__pool_call *c);
#endif
static int cf__band_rows(cf_shape in, const cf_geom *g, size_t tile);
static void cf__deconv_forward_with(const cf__conv_call *c, cf__gemm_fn gemm);
#ifndef CF_REFERENCE
/* the fp32 GEMM of the tiles and taps paths and the transposed convolution: the BLAS, or where
   the BLAS runs no AVX-512 kernels (OpenBLAS's SSE fallback, its AVX2 sets) and the CPU has
   AVX-512, section 13's own (kind gemm, when on: cf__gemm_ours) */
static int cf__gemm_ours(void);
static void cf__sgemm_tiles(int tA, int tB, int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                            float beta, float *C, int ldc);
#endif
static void cf__deconv_backward_with(const cf__conv_call *c, float *db, cf__gemm_fn gemm, cf__gemm_fn gemm_dx);
/* the network's workspace (section 5 holds the network's private part) */
static size_t cf__net_ws_floats(const cf_net *net);

/* (compiled in every build: CF_REFERENCE's rounds by the definition) */
static void cf__round_run(float *x, size_t n) {
#ifdef CF__BF16
    if (cf__kind_on[CF__K_BF16] && cf__has_bf16()) { cf__round_floats_bf16(x, n); return; }
#endif
    cf__round_floats(x, n);
}

/* the form of the bf16 kernels' multiply-adds: forced (cf_bf16_form_set) or the probe's, the
   dot form unless the CPU's vdpbf16ps does fewer multiply-adds a second than its FMA */
enum { CF__BF16_AUTO, CF__BF16_DOT, CF__BF16_FMA, CF__BF16_AMX };
static int cf__bf16_form_forced = CF__BF16_AUTO;
static int cf__has_amx(void);
CFDEF int cf_bf16_form_set(const char *form) {
    int f = !strcmp(form, "auto") ? CF__BF16_AUTO : !strcmp(form, "dot") ? CF__BF16_DOT
            : !strcmp(form, "fma") ? CF__BF16_FMA : !strcmp(form, "amx") ? CF__BF16_AMX : -1;
    if (f < 0) return cf_fail("bf16 form '%s' is unknown (dot, fma, amx, auto)", form);
    if (f == CF__BF16_AMX && !cf__has_amx())
        return cf_fail("bf16 form amx: %s",
                       "this CPU, system or build has no AMX tiles (AMX-BF16, Linux, GCC 11 or Clang 12)");
    cf__bf16_form_forced = f;
    return CF_OK;
}
#ifdef CF__AMX
#include <cpuid.h>
/* AMX-TILE and AMX-BF16 (CPUID 7.0 EDX bits 24, 22), and Linux's grant of the tiles' state to
   this process (arch_prctl(ARCH_REQ_XCOMP_PERM 0x1023, XFEATURE_XTILEDATA 18), syscall 158,
   made here without <sys/syscall.h>); asked once (two threads asking at once ask twice: the
   same answer) */
static int cf__has_amx(void) {
    static volatile int known = -1;
    unsigned a, b, c, d;
    long r = -1;
    if (known >= 0) return known;
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d) && (d >> 24 & 1) && (d >> 22 & 1))
        __asm__ volatile("syscall" : "=a"(r) : "0"(158L), "D"(0x1023L), "S"(18L) : "rcx", "r11", "memory");
    known = r == 0;
    return known;
}
#else
static int cf__has_amx(void) { return 0; }
#endif
#ifdef CF__BF16
static int cf__bf16_fma(void) {   /* (read once a kernel call: section 13) */
    double dot, fma;
    if (cf__bf16_form_forced == CF__BF16_DOT || cf__bf16_form_forced == CF__BF16_FMA)
        return cf__bf16_form_forced == CF__BF16_FMA;
    cf__bf16_rates(&dot, &fma);
    return dot < fma;
}
/* whether the bf16 GEMM runs on the AMX tiles: forced, or auto where the CPU has them */
static int cf__bf16_amx_on(void) {
    int f = cf__bf16_form_forced;
    return f == CF__BF16_AMX || (f == CF__BF16_AUTO && cf__has_amx());
}
/* the bf16 GEMM's form: 2 the AMX tiles, else cf__bf16_fma's */
static int cf__bf16_gemm_form(void) { return cf__bf16_amx_on() ? 2 : cf__bf16_fma(); }
#endif
/* (the text names no measured rate: a tool's output does not change from run to run) */
CFDEF const char *cf_bf16_kernels(void) {
#if defined(CF__BF16)
    if (!cf__kind_on[CF__K_BF16]) return "the emulation (the bf16 fast paths are off)";
    if (!cf__has_bf16())   /* (0.84-0.97x fp32's step on an AMD Zen 3, docs/performance.md) */
        return "the emulation (this CPU lacks AVX512_BF16): fp32's kernels on bf16 values, "
               "which saves memory, not time";
    if (cf__bf16_form_forced == CF__BF16_DOT) return "vdpbf16ps (AVX512_BF16; forced)";
    if (cf__bf16_form_forced == CF__BF16_FMA) return "fp32 FMA of the widened pairs (forced)";
    if (cf__bf16_form_forced == CF__BF16_AMX)
        return cf__bf16_fma() ? "AMX tiles in the GEMM and the convolutions, fp32 FMA of the widened pairs elsewhere "
                                "(forced)"
                              : "AMX tiles in the GEMM and the convolutions, vdpbf16ps elsewhere (forced)";
    if (cf__has_amx())
        return cf__bf16_fma() ? "AMX tiles (AMX-BF16) in the GEMM and the convolutions, fp32 FMA of the widened pairs "
                                "elsewhere (vdpbf16ps slower than FMA here: cf-bench --check-blas)"
                              : "AMX tiles (AMX-BF16) in the GEMM and the convolutions, vdpbf16ps (AVX512_BF16) "
                                "elsewhere";
    return cf__bf16_fma() ? "fp32 FMA of the widened pairs (vdpbf16ps slower than FMA here: cf-bench --check-blas): "
                            "bf16 computes at fp32's rate here and saves memory only"
                          : "vdpbf16ps (AVX512_BF16)";
#elif defined(CF_REFERENCE)
    return "the emulation (a CF_REFERENCE build)";
#else
    return "the emulation (no bf16 kernels in this build: they need x86-64, GCC or Clang, AVX2 and FMA)";
#endif
}

/* ---- the paths of each operation, in the order the dispatcher tries them */
static const cf__conv_path cf__conv_fwd_paths[] = {
#ifndef CF_REFERENCE
#ifdef CF__BF16
#ifdef CF__AMX
    {CF__K_BF16, cf__bf16_amx_fwd_applies, cf__bf16_amx_fwd_run, 1, 1, 0},
    {CF__K_BF16, cf__bf16_fold_fwd_applies, cf__bf16_fold_fwd_run, 1, 1, 0},
#endif
    {CF__K_BF16, cf__bf16_direct_fwd_applies, cf__bf16_direct_fwd_run, 1, 1, 0},
    {CF__K_BF16, cf__bf16_pw_half_fwd_applies, cf__bf16_pw_half_fwd, 1, 2, 0},
    {CF__K_BF16, cf__bf16_pointwise_applies, cf__bf16_pointwise_fwd, 1, 0, 0},
    {CF__K_BF16, cf__bf16_tiles_fwd_applies, cf__bf16_tiles_fwd, 1, 1, 0},
    {CF__K_BF16, cf__bf16_cols_fwd_applies, cf__bf16_cols_fwd, 1, 1, 0},
    {CF__K_BF16, cf__bf16_gemm_applies, cf__bf16_im2col_fwd, 1, 0, 0},
#endif
#ifdef CF__DIRECT
    {CF__K_DIRECT, cf__direct_fwd_applies, cf__direct_fwd_run, 0, 0, 0},
#endif
#ifdef CF__AVX512
    {CF__K_GEMM, cf__pointwise_f32_applies, cf__pointwise_f32_fwd, 0, 0, 0},
    {CF__K_GEMM, cf__cols_f32_fwd_applies, cf__cols_f32_fwd, 0, 0, 0},
#endif
    {CF__K_POINTWISE, cf__pointwise_applies, cf__pointwise_fwd, 0, 0, 0},
    {CF__K_TILES, cf__tiles_fwd_applies, cf__tiles_fwd, 0, 0, 0},
    {CF__K_TAPS, cf__taps_applies, cf__taps_fwd, 0, 0, 0},
#ifdef CF__AVX512
    {CF__K_GEMM, cf__im2col_f32_applies, cf__im2col_f32_fwd, 0, 0, 0},
#endif
#endif
    {-1, NULL, NULL, 0, 0, 0}};
static const cf__conv_path cf__conv_bww_paths[] = {
#ifndef CF_REFERENCE
#ifdef CF__BF16
    {CF__K_BF16, cf__bf16_pw_half_applies, cf__bf16_pw_half_bww, 0, 2, 0},
    {CF__K_BF16, cf__bf16_pointwise_applies, cf__bf16_pointwise_bww, 0, 0, 0},
#ifdef CF__AMX
    {CF__K_BF16, cf__bf16_rows_amx_applies, cf__bf16_rows_amx, 0, 1, 0},
#endif
    {CF__K_BF16, cf__bf16_rows_bww_applies, cf__bf16_rows_bww, 0, 1, 0},
    {CF__K_BF16, cf__bf16_taps_bww_applies, cf__bf16_taps_bww, 0, 1, 0},
    {CF__K_BF16, cf__bf16_tiles_bww_applies, cf__bf16_tiles_bww, 0, 1, 0},
    {CF__K_BF16, cf__bf16_cols_applies, cf__bf16_cols_bww, 0, 0, 0},
    {CF__K_BF16, cf__bf16_gemm_applies, cf__bf16_im2col_bww, 0, 0, 0},
#endif
#ifdef CF__AVX512
    {CF__K_DIRECT, cf__rows_f32_bww_applies, cf__rows_f32_bww, 0, 0, 0},
    {CF__K_GEMM, cf__pointwise_f32_bww_applies, cf__pointwise_f32_bww, 0, 0, 0},
    {CF__K_GEMM, cf__cols_f32_bww_applies, cf__cols_f32_bww, 0, 0, 0},
#endif
    {CF__K_POINTWISE, cf__pointwise_applies, cf__pointwise_bww, 0, 0, 0},
    {CF__K_TILES, cf__tiles_bww_applies, cf__tiles_bww, 0, 0, 0},
    {CF__K_TAPS, cf__taps_applies, cf__taps_bww, 0, 0, 0},
#ifdef CF__AVX512
    {CF__K_GEMM, cf__im2col_f32_applies, cf__im2col_f32_bww, 0, 0, 0},
#endif
#endif
    {-1, NULL, NULL, 0, 0, 0}};
static const cf__conv_path cf__conv_bwd_paths[] = {
#ifndef CF_REFERENCE
#ifdef CF__BF16
    {CF__K_BF16, cf__bf16_pw_half_bwd_applies, cf__bf16_pw_half_bwd, 1, 2, 1},
    {CF__K_BF16, cf__bf16_pointwise_applies, cf__bf16_pointwise_bwd, 1, 0, 1},
    {CF__K_BF16, cf__bf16_strided_pw_applies, cf__bf16_strided_pw_bwd, 1, 1, 1},
    {CF__K_BF16, cf__bf16_cols_bwd_applies, cf__bf16_cols_bwd, 1, 0, 1},
#ifdef CF__AMX
    {CF__K_BF16, cf__bf16_amx_bwd_applies, cf__bf16_amx_bwd_run, 0, 1, 1},
#endif
    {CF__K_BF16, cf__bf16_direct_bwd_applies, cf__bf16_direct_bwd_run, 0, 1, 1},
    {CF__K_BF16, cf__bf16_tiles_bwd_applies, cf__bf16_tiles_bwd, 1, 0, 1},
    {CF__K_BF16, cf__bf16_im2col_bwd_applies, cf__bf16_im2col_bwd, 0, 1, 0},
#endif
#ifdef CF__AVX512
    {CF__K_GEMM, cf__pointwise_f32_bwd_applies, cf__pointwise_f32_bwd, 0, 0, 1},
    {CF__K_GEMM, cf__strided_pw_applies, cf__strided_pw_bwd, 0, 0, 1},
    {CF__K_GEMM, cf__cols_f32_bwd_applies, cf__cols_f32_bwd, 0, 0, 1},
#endif
    {CF__K_POINTWISE, cf__pointwise_applies, cf__pointwise_bwd, 0, 0, 1},
#ifdef CF__DIRECT
    {CF__K_DIRECT, cf__direct_bwd_applies, cf__direct_bwd_run, 0, 0, 1},
#endif
    {CF__K_TILES, cf__tiles_bwd_applies, cf__tiles_bwd, 0, 0, 1},
#ifdef CF__AVX512
    {CF__K_GEMM, cf__im2col_f32_applies, cf__im2col_f32_bwd, 0, 0, 0},
#endif
#endif
    {-1, NULL, NULL, 0, 0, 0}};
static const cf__pool_path cf__pool_fwd_paths[] = {
#ifndef CF_REFERENCE
#ifdef CF__BF16
    {CF__K_PAIRS, cf__pool_pairs_half_applies, cf__pool_pairs_half_fwd, 1},
#endif
    {CF__K_PAIRS, cf__pool_pairs_applies, cf__pool_pairs_fwd, 0},
    {CF__K_INSIDE, cf__pool_inside_applies, cf__pool_inside_fwd, 0},
#endif
    {-1, NULL, NULL, 0}};
static const cf__pool_path cf__pool_bwd_paths[] = {
#ifndef CF_REFERENCE
    {CF__K_INSIDE, cf__pool_inside_applies, cf__pool_inside_bwd, 0},
#endif
    {-1, NULL, NULL, 0}};
static const cf__conv_path cf__dwconv_fwd_paths[] = {
#ifndef CF_REFERENCE
#ifdef CF__AVX512
    {CF__K_DIRECT, cf__dwv_half_applies, cf__dwv_fwd, 1, 2, 0},
    {CF__K_DIRECT, cf__dwv_applies, cf__dwv_fwd, 1, 0, 0},
    {CF__K_DIRECT, cf__dws_half_applies, cf__dws_fwd, 1, 2, 0},
    {CF__K_DIRECT, cf__dws_applies, cf__dws_fwd, 1, 0, 0},
#endif
    {CF__K_DIRECT, cf__dw3x3_half_applies, cf__dw3x3_fwd, 1, 2, 0},
    {CF__K_DIRECT, cf__dw3x3_applies, cf__dw3x3_fwd, 1, 0, 0},
    {CF__K_BF16, cf__dw_rounded_applies, cf__dw_rounded_fwd, 1, 0, 0},
#endif
    {-1, NULL, NULL, 0, 0, 0}};
static const cf__conv_path cf__dwconv_bwd_paths[] = {   /* both halves at once: dw and dx */
#ifndef CF_REFERENCE
#ifdef CF__AVX512
    {CF__K_DIRECT, cf__dwv_half_applies, cf__dwv_bwd, 1, 2, 1},
    {CF__K_DIRECT, cf__dwv_applies, cf__dwv_bwd, 1, 0, 1},
    {CF__K_DIRECT, cf__dws_half_applies, cf__dws_bwd, 1, 2, 1},
    {CF__K_DIRECT, cf__dws_applies, cf__dws_bwd, 1, 0, 1},
#endif
    {CF__K_DIRECT, cf__dw3x3_half_bwd_applies, cf__dw3x3_bwd, 1, 2, 1},
    {CF__K_DIRECT, cf__dw3x3_bwd_applies, cf__dw3x3_bwd, 1, 0, 1},
    {CF__K_DIRECT, cf__dw_rows_applies, cf__dw_rows_bwd, 1, 0, 1},
#endif
    {-1, NULL, NULL, 0, 0, 0}};
static const cf__conv_path *cf__conv_paths(int op) {
    return op == CF_OP_FORWARD ? cf__conv_fwd_paths : op == CF_OP_BACKWARD_WEIGHTS ? cf__conv_bww_paths
           : cf__conv_bwd_paths;
}

/* ---- the dispatchers */
/* bf16 = 1: the operands are bf16 values (a bf16 network's, section 6), and the bf16 paths
   may take the call; the others compute the same sums in fp32 (the emulation).  A forward and
   a backward-data store their output rounded to bf16: the path as it stores (rounds = 1), or a
   pass after it. */
static cf__conv_call cf__conv_make(int B, cf_shape in, cf_shape out, const cf_geom *g, int groups, float *ws,
                                   size_t ws_floats, int bf16) {
    cf__conv_call c;
    CF_ASSERT(cf__shapes_ok(B, in, out, g, groups));   /* (F's precondition) */
    memset(&c, 0, sizeof c);
    c.B = B; c.in = in; c.out = out; c.g = g; c.groups = groups; c.ws = ws; c.ws_floats = ws_floats; c.bf16 = bf16;
    return c;
}
static const char *cf__conv_path_p(int op, int B, cf_shape in, cf_shape out, const cf_geom *g, int groups,
                                   size_t ws_floats, int bf16) {
    cf__conv_call c = cf__conv_make(B, in, out, g, groups, NULL, ws_floats, bf16);
    const cf__conv_path *p = cf__conv_pick(cf__conv_paths(op), &c);
    return p ? cf__kind_names[p->kind] : "reference";
}
CFDEF const char *cf_conv_path(int op, int B, cf_shape in, cf_shape out, const cf_geom *g, int groups,
                               size_t ws_floats) {
    CF__RETURN_UNLESS(op >= CF_OP_FORWARD && op <= CF_OP_BACKWARD_DATA && cf__shapes_ok(B, in, out, g, groups), "?",
                "cf_conv_path: op is not one of CF_OP_*, or a size below 1, g NULL or channels not divisible by "
                "groups");
    return cf__conv_path_p(op, B, in, out, g, groups, ws_floats, 0);
}
/* the operands stored in 16 bits (section 4's halves; the plan has made sure a path takes them) */
static void cf__conv_halves(cf__conv_call *c, int halves) {
    c->half = (halves & CF__HALF_OUT) != 0; c->x_half = (halves & CF__HALF_IN) != 0;
    c->dx_half = (halves & CF__HALF_DIN) != 0;
    c->x_raw = (halves & CF__RAW_IN) != 0;
}
static void cf__conv_forward_p(cf__conv_call *c, int halves) {
    const cf__conv_path *p;
    size_t n_out = (size_t)c->B * cf_shape_size(c->out);
    cf__conv_halves(c, halves & (CF__HALF_OUT | CF__HALF_IN | CF__RAW_IN));
    p = cf__conv_pick(cf__conv_fwd_paths, c);
    CF_ASSERT(!(halves & (CF__HALF_OUT | CF__HALF_IN | CF__RAW_IN)) || p);
    if (p) p->run(c);
    else {
        cf_ref_conv_forward(c->y, c->x, c->w, c->b, c->B, c->in, c->out, c->g, c->groups, c->ws, c->ws_floats);
        cf_act_forward(c->y, n_out, c->act, c->slope);
    }
    if (c->bf16 && !(p && p->rounds)) cf_bf16_round(c->y, n_out);   /* stored rounded, once */
}
CFDEF void cf_conv_forward_act(float *y, const float *x, const float *w, const float *b,
                               int B, cf_shape in, cf_shape out, const cf_geom *g, int groups,
                               float *ws, size_t ws_floats, int act, float slope) {
    cf__conv_call c = cf__conv_make(B, in, out, g, groups, ws, ws_floats, 0);
    c.y = y; c.x = x; c.w = w; c.b = b; c.act = act; c.slope = slope;
    cf__conv_forward_p(&c, 0);
}
CFDEF void cf_conv_forward(float *y, const float *x, const float *w, const float *b,
                           int B, cf_shape in, cf_shape out, const cf_geom *g, int groups,
                           float *ws, size_t ws_floats) {
    cf_conv_forward_act(y, x, w, b, B, in, out, g, groups, ws, ws_floats, CF_ACT_LINEAR, 0.0f);
}
/* c: dw, dy, x given */
static void cf__conv_backward_weights_p(cf__conv_call *c, float *db, int halves) {
    const cf__conv_path *p;
    cf_shape out = c->out;
    cf__conv_halves(c, halves & (CF__HALF_OUT | CF__HALF_IN | CF__RAW_IN));
    p = cf__conv_pick(cf__conv_bww_paths, c);
    CF_ASSERT(!(halves & (CF__HALF_OUT | CF__HALF_IN | CF__RAW_IN)) || p);
    if (!p) {
        cf_ref_conv_backward_weights(c->dw, db, c->dy, c->x, c->B, c->in, out, c->g, c->groups, c->ws, c->ws_floats);
        return;
    }
    /* one way for every path */
    if (db) cf__bias_grad_p(db, c->dy, c->half, c->B, out.c, (size_t)out.d * out.h * out.w);
    p->run(c);
}
CFDEF void cf_conv_backward_weights(float *dw, float *db, const float *dy, const float *x,
                                    int B, cf_shape in, cf_shape out, const cf_geom *g, int groups,
                                    float *ws, size_t ws_floats) {
    cf__conv_call c = cf__conv_make(B, in, out, g, groups, ws, ws_floats, 0);
    c.dw = dw; c.dy = dy; c.x = x;
    cf__conv_backward_weights_p(&c, db, 0);
}
/* c: dx, dy, w given; store: dx holds no values yet (section 9, stores): a path that honours
   dx_store writes it, for any other it is zeroed first */
static void cf__conv_backward_data_p(cf__conv_call *c, int halves, int store) {
    const cf__conv_path *p;
    size_t n_in = (size_t)c->B * cf_shape_size(c->in);
    cf__conv_halves(c, halves & (CF__HALF_OUT | CF__HALF_DIN));
    p = cf__conv_pick(cf__conv_bwd_paths, c);
    CF_ASSERT(!(halves & (CF__HALF_OUT | CF__HALF_DIN)) || p);
    c->dx_store = store && p && p->stores;
    if (store && !c->dx_store) cf__zero_floats(c->dx, n_in);
    if (p) p->run(c);
    else cf_ref_conv_backward_data(c->dx, c->dy, c->w, c->B, c->in, c->out, c->g, c->groups, c->ws, c->ws_floats);
    /* (16 bits: bf16 values as stored) */
    if (c->bf16 && !(p && p->rounds) && !c->dx_half) cf_bf16_round(c->dx, n_in);
}
CFDEF void cf_conv_backward_data(float *dx, const float *dy, const float *w, int B, cf_shape in,
                                 cf_shape out, const cf_geom *g, int groups, float *ws, size_t ws_floats) {
    cf__conv_call c = cf__conv_make(B, in, out, g, groups, ws, ws_floats, 0);
    c.dx = dx; c.dy = dy; c.w = w;
    cf__conv_backward_data_p(&c, 0, 0);
}
CFDEF void cf_conv_backward(float *dx, float *dw, float *db, const float *dy, const float *x,
                            const float *w, int B, cf_shape in, cf_shape out, const cf_geom *g,
                            int groups, float *ws, float *dws, size_t ws_floats) {
    cf_conv_backward_weights(dw, db, dy, x, B, in, out, g, groups, ws, ws_floats);
    if (dx) cf_conv_backward_data(dx, dy, w, B, in, out, g, groups, dws, ws_floats);
}
static cf__pool_call cf__pool_make(int B, cf_shape in, cf_shape out, const cf_geom *g, int is_max) {
    cf__pool_call c;
    CF_ASSERT(cf__shapes_ok(B, in, out, g, 1));   /* (F's precondition) */
    memset(&c, 0, sizeof c);
    c.B = B; c.in = in; c.out = out; c.g = g; c.is_max = is_max;
    return c;
}
CFDEF const char *cf_pool_path(int op, cf_shape in, cf_shape out, const cf_geom *g, int is_max) {
    cf__pool_call c;
    const cf__pool_path *p;
    CF__RETURN_UNLESS(op >= CF_OP_FORWARD && op <= CF_OP_BACKWARD_DATA && cf__shapes_ok(1, in, out, g, 1), "?",
                "cf_pool_path: op is not one of CF_OP_*, or a size below 1 or g NULL");
    c = cf__pool_make(1, in, out, g, is_max);
    if (op == CF_OP_BACKWARD_WEIGHTS) return "-";
    p = cf__pool_pick(op == CF_OP_FORWARD ? cf__pool_fwd_paths : cf__pool_bwd_paths, &c);
    return p ? cf__kind_names[p->kind] : "reference";
}
/* half, y_half: x, y are stored in 16 bits (the plan has made sure a path takes them, section 9) */
static void cf__pool_forward_p(float *y, int y_half, const float *x, int half, int B, cf_shape in, cf_shape out,
                               const cf_geom *g, int is_max) {
    cf__pool_call c = cf__pool_make(B, in, out, g, is_max);
    const cf__pool_path *p;
    c.y = y; c.x = x; c.half = half; c.y_half = y_half;
    p = cf__pool_pick(cf__pool_fwd_paths, &c);
    CF_ASSERT(!(half || y_half) || p);
    if (p) p->run(&c);
    else cf_ref_pool_forward(y, x, B, in, out, g, is_max);
}
CFDEF void cf_pool_forward(float *y, const float *x, int B, cf_shape in, cf_shape out,
                           const cf_geom *g, int is_max) {
    cf__pool_forward_p(y, 0, x, 0, B, in, out, g, is_max);
}
CFDEF void cf_pool_backward(float *dx, const float *dy, const float *x, const float *y, int B,
                            cf_shape in, cf_shape out, const cf_geom *g, int is_max) {
    cf__pool_call c = cf__pool_make(B, in, out, g, is_max);
    const cf__pool_path *p;
    c.dx = dx; c.dy = dy; c.x = x; c.y = (float *)y;
    if ((p = cf__pool_pick(cf__pool_bwd_paths, &c))) p->run(&c);
    else cf_ref_pool_backward(dx, dy, x, y, B, in, out, g, is_max);
}

/* depthwise: y = act(dwconv(x, w) + b), stored rounded to bf16 when bf16 (a bf16 network,
   section 6), by its path or the reference; the backward's path does dw and dx in one pass,
   the dispatcher db (as for every convolution); halves: as the convolutions' (CF__HALF_*: the
   plan has made sure a path takes them, in the workspace ws) */
static void cf__dwconv_forward_p(cf__conv_call *c, int halves) {
    const cf__conv_path *p;
    cf__conv_halves(c, halves & (CF__HALF_OUT | CF__HALF_IN));
    p = cf__conv_pick(cf__dwconv_fwd_paths, c);
    CF_ASSERT(!(halves & (CF__HALF_OUT | CF__HALF_IN)) || p);
    if (p) p->run(c);
    else cf__dwconv_forward_ref(c->y, c->x, c->w, c->b, c->B, c->in, c->out, c->g, c->act, c->slope);
    if (c->bf16 && !(p && p->rounds)) cf_bf16_round(c->y, (size_t)c->B * cf_shape_size(c->out));
}
CFDEF void cf_dwconv_forward(float *y, const float *x, const float *w, const float *b,
                             int B, cf_shape in, cf_shape out, const cf_geom *g) {
    cf__conv_call c = cf__conv_make(B, in, out, g, in.c, NULL, 0, 0);
    c.y = y; c.x = x; c.w = w; c.b = b; c.act = CF_ACT_LINEAR; c.slope = 0.0f;
    cf__dwconv_forward_p(&c, 0);
}
static const char *cf__dwconv_path(int op, int B, cf_shape in, cf_shape out, const cf_geom *g) {
    cf__conv_call c = cf__conv_make(B, in, out, g, in.c, NULL, 0, 0);
    const cf__conv_path *p = cf__conv_pick(op == CF_OP_FORWARD ? cf__dwconv_fwd_paths : cf__dwconv_bwd_paths, &c);
    return p ? cf__kind_names[p->kind] : "reference";
}
/* c: dx (may be NULL), dw, dy, x, w given; bf16: dx stored rounded, by the path that rounds
   or after it (as every convolution's); store: as cf__conv_backward_data_p's */
static void cf__dwconv_backward_p(cf__conv_call *c, float *db, int halves, int store) {
    const cf__conv_path *p;
    cf_shape in = c->in, out = c->out;
    cf__conv_halves(c, halves & CF__HALF_ALL);
    if (db) cf__bias_grad_p(db, c->dy, c->half, c->B, in.c, (size_t)out.d * out.h * out.w);
    p = cf__conv_pick(cf__dwconv_bwd_paths, c);
    CF_ASSERT(!(halves & CF__HALF_ALL) || p);
    c->dx_store = store && p && p->stores;
    if (store && c->dx && !c->dx_store) cf__zero_floats(c->dx, (size_t)c->B * cf_shape_size(in));
    if (p) p->run(c);
    else cf_ref_dwconv_backward(c->dx, c->dw, NULL, c->dy, c->x, c->w, c->B, in, out, c->g);
    /* (a 16-bit dx: rounded by the path) */
    if (c->bf16 && c->dx && !(p && p->rounds)) cf_bf16_round(c->dx, (size_t)c->B * cf_shape_size(in));
}
CFDEF void cf_dwconv_backward(float *dx, float *dw, float *db, const float *dy, const float *x,
                              const float *w, int B, cf_shape in, cf_shape out, const cf_geom *g) {
    cf__conv_call c = cf__conv_make(B, in, out, g, in.c, NULL, 0, 0);
    c.dx = dx; c.dw = dw; c.dy = dy; c.x = x; c.w = w;
    cf__dwconv_backward_p(&c, db, 0, 0);
}

/* the transposed convolution's GEMM: the bf16 one for a bf16 network on AVX512_BF16, kind
   gemm's where the BLAS runs no AVX-512 kernels (cf__gemm_ours), else the BLAS */
static cf__gemm_fn cf__deconv_gemm(int bf16) {
#ifdef CF__BF16
    cf__conv_call c;
    memset(&c, 0, sizeof c);
    c.bf16 = bf16;
    if (cf__kind_on[CF__K_BF16] && cf__bf16_gemm_applies(&c)) return cf__sgemm_bf16;
#endif
    (void)bf16;
#ifndef CF_REFERENCE
    if (cf__gemm_ours()) return cf__sgemm_tiles;
#endif
    return cf__sgemm_fp32;
}
static const char *cf__deconv_path(int bf16) {
    cf__gemm_fn gemm = cf__deconv_gemm(bf16);
    if (gemm == cf__sgemm_fp32) return "reference";
#ifndef CF_REFERENCE
    if (gemm == cf__sgemm_tiles) return cf__kind_names[CF__K_GEMM];
#endif
    return cf__kind_names[CF__K_BF16];
}
/* a transposed convolution as a convolution call (in: its input, out: its output; half: y in
   the forward, dy in the backward, stored in 16 bits), its operands set by the caller */
static cf__conv_call cf__deconv_make(int B, cf_shape in, cf_shape out, const cf_geom *g, float *ws, size_t ws_floats,
                                     int bf16, int halves) {
    cf__conv_call c;
    memset(&c, 0, sizeof c);
    c.B = B; c.in = in; c.out = out; c.g = g; c.groups = 1; c.ws = ws; c.ws_floats = ws_floats; c.bf16 = bf16;
    c.half = (halves & CF__HALF_OUT) != 0; c.x_half = (halves & CF__HALF_IN) != 0;
    c.dx_half = (halves & CF__HALF_DIN) != 0;
    return c;
}
/* halves: CF__HALF_OUT, CF__HALF_IN, CF__HALF_DIN (y and dy, x, dx in 16 bits; the plan has
   checked, cf__deconv_takes_halves; ws holds 2 ws_floats) */
/* c: y, x, w, b given */
static void cf__deconv_forward_p(cf__conv_call *c) {
    cf__gemm_fn gemm = cf__deconv_gemm(c->bf16);
    if (gemm == cf__sgemm_fp32 && !c->x_half && !c->half)
        cf_deconv_forward(c->y, c->x, c->w, c->b, c->B, c->in, c->out, c->g, c->ws, c->ws_floats);
    else cf__deconv_forward_with(c, gemm);
}
/* c: dx (may be NULL), dw, dy, x, w and dx_store (dx holds no values yet) given */
static int cf__deconv_backward_p(cf__conv_call *c, float *db, int rnd_dx) {
    cf__gemm_fn gemm = cf__deconv_gemm(c->bf16), gemm_dx = gemm;
#ifdef CF__BF16
    /* each tile's columns of dx get their one product there */
    if (rnd_dx && gemm == cf__sgemm_bf16) gemm_dx = cf__sgemm_bf16_rounded;
#endif
    if (gemm == cf__sgemm_fp32 && !c->dx_store && !c->x_half && !c->dx_half && !c->half)
        cf_deconv_backward(c->dx, c->dw, db, c->dy, c->x, c->w, c->B, c->in, c->out, c->g, c->ws, c->ws_floats);
    else cf__deconv_backward_with(c, db, gemm, gemm_dx);
    return c->dx_half || gemm_dx != gemm || !rnd_dx || !c->dx;
}
/* the workspace a pointwise convolution's bf16 GEMM on 16-bit operands needs (its buffers) */
static size_t cf__pointwise_ws_floats(void) {
#ifdef CF__BF16
    return cf__gemm_bf16_ws_floats();
#else
    return 0;
#endif
}
/* (a 16-bit y and dy: 2-D, no activation, the band's room after the GEMM's buffers) */
static int cf__deconv_takes_halves(cf_net *net, const cf_layer *l, int halves) {
#ifdef CF__BF16
    size_t K = (size_t)l->out.c * l->g.k[0] * l->g.k[1] * l->g.k[2], ws = cf__net_ws_floats(net);
    if ((halves & CF__HALF_OUT) && (l->in.d != 1 || l->out.d != 1 || l->act != CF_ACT_LINEAR ||
                                    ws < cf__pointwise_ws_floats() + cf__band_floats(l, ws)))
        return 0;
    return cf__deconv_gemm(1) == cf__sgemm_bf16 && l->type == CF_L_DECONV && !(halves & CF__RAW_IN) &&
           ws >= cf__pointwise_ws_floats() && (!(halves & CF__HALF_DIN) || cf__gemm_bf16_one_chunk(K));
#else
    (void)net; (void)l; (void)halves;
    return 0;
#endif
}

/* cf__pool_fused_backward: half, dy_half, y_half = xg, the pool's dy, its y are stored
   in 16 bits (section 9, halves; the plan takes them only where the vector path below does,
   with the CPU's bf16 instructions) */
static int cf__maxpool_inplace_takes_half(const cf__pool_call *pc) {
#ifdef CF__BF16
    return cf__pool_pairs_applies(pc) && cf__has_bf16();
#else
    (void)pc;
    return 0;
#endif
}
/* the backward of act + max pool fused in place (section 13 holds the kernel; a CF_REFERENCE
   build fuses nothing: kind "fusion" is off, and the plan never asks) */
static void cf__pool_fused_backward(const cf__pool_fused_call *f) {
#ifndef CF_REFERENCE
    cf__pool_fused_backward_run(f);
#else
    (void)f;
    CF_ASSERT(0);
#endif
}

/* ---- the storage forms of section 3's passes and section 5's copies and sums: the same
   loops, storing into a gradient that holds no values yet (store: 0 + the term, the bits of
   adding into zeros; the plan asks for it while kind "stores" is on) and rounding each stretch
   to bf16 as it is stored, while it is in cache (rnd, while kind "bf16" is on; otherwise the
   network rounds in a pass after).  Each returns 1 when what it stored needs no rounding pass
   after it. */
static int cf__fuses_rounding(int rnd) { return rnd && cf__kind_on[CF__K_BF16]; }
static int cf__bn_apply_p(const cf__bn_call *bn, int rnd) {
    float *y = bn->y;
    const float *x = bn->x, *gamma = bn->gamma, *beta = bn->beta, *mean = bn->mean, *invstd = bn->invstd;
    int B = bn->B, C = bn->C, act = bn->act;
    size_t P = bn->P;
    float slope = bn->slope;
    int c;
    if (!cf__fuses_rounding(rnd)) { cf__bn_apply(y, x, gamma, beta, mean, invstd, B, C, P, act, slope); return !rnd; }
    CF__OMP(omp parallel for schedule(static))
    for (c = 0; c < C; c++) {
        float a = gamma[c] * invstd[c], sh = beta[c] - mean[c] * a;
        size_t p0, at;
        int b;
        for (b = 0; b < B; b++)
            for (p0 = 0; p0 < P; p0 += CF__STRETCH) {
                size_t n = P - p0 < CF__STRETCH ? P - p0 : CF__STRETCH;
                at = ((size_t)b * C + c) * P + p0;
                cf__bn_apply_run(y + at, x + at, a, sh, n, act, slope);
                cf__round_run(y + at, n);
            }
    }
    return 1;
}
static int cf__bn_backward_p(const cf__bn_call *bn, int train, const cf_bn_sync *sync, int rnd, int store) {
    float *dx = bn->dx, *dgamma = bn->dgamma, *dbeta = bn->dbeta;
    const float *dy = bn->dy, *x = bn->x, *gamma = bn->gamma, *mean = bn->mean, *invstd = bn->invstd;
    int B = bn->B, C = bn->C;
    size_t P = bn->P;
    double *sums = sync && train ? sync->work : NULL, n;
    int c, fuse = cf__fuses_rounding(rnd);
    if (!store && !fuse) {
        cf_bn_backward(dx, dgamma, dbeta, dy, x, gamma, mean, invstd, B, C, P, train, sync);
        return !rnd || !dx;
    }
    n = sums ? cf__bn_sync_dsums(sums, dgamma, dbeta, dy, x, mean, invstd, B, C, P, sync) : (double)B * P;
    CF__OMP(omp parallel for schedule(static))
    for (c = 0; c < C; c++) {
        cf__bn_dx_coef k = cf__bn_channel(dgamma, dbeta, dy, x, gamma, mean, invstd, B, C, c, P, train, sums, n);
        size_t p, p0, e;
        int b;
        if (!dx) continue;
        for (b = 0; b < B; b++) {
            const float *xc = x + ((size_t)b * C + c) * P, *dyc = dy + ((size_t)b * C + c) * P;
            float *dxc = dx + ((size_t)b * C + c) * P;
            for (p0 = 0; p0 < P; p0 += CF__STRETCH) {
                e = P - p0 < CF__STRETCH ? P : p0 + CF__STRETCH;
                if (store) for (p = p0; p < e; p++) dxc[p] = 0.0f + k.k * (dyc[p] - k.k1 - (xc[p] - k.m) * k.is * k.k2);
                else for (p = p0; p < e; p++) dxc[p] += k.k * (dyc[p] - k.k1 - (xc[p] - k.m) * k.is * k.k2);
                if (fuse) cf__round_run(dxc + p0, e - p0);
            }
        }
    }
    return fuse || !rnd || !dx;
}
static void cf__bn_act_backward_p(const cf__bn_call *bn, int rnd) {
    float *dy = bn->dy;
    const float *x = bn->x, *gamma = bn->gamma, *beta = bn->beta, *mean = bn->mean, *invstd = bn->invstd;
    int B = bn->B, C = bn->C, act = bn->act;
    size_t P = bn->P;
    float slope = bn->slope;
    int c;
    if (!rnd) { cf__bn_act_backward(dy, x, gamma, beta, mean, invstd, B, C, P, act, slope); return; }
    CF__OMP(omp parallel for schedule(static))
    for (c = 0; c < C; c++) {
        float a = gamma[c] * invstd[c], sh = beta[c] - mean[c] * a, y[CF__STRETCH];
        size_t p0, n;
        int b;
        for (b = 0; b < B; b++)
            for (p0 = 0; p0 < P; p0 += n) {
                float *d = dy + ((size_t)b * C + c) * P + p0;
                n = P - p0 < CF__STRETCH ? P - p0 : CF__STRETCH;
                cf__bn_apply_run(y, x + (d - dy), a, sh, n, act, slope);
                cf__round_run(y, n);   /* (as the forward stored it) */
                cf__act_backward_run(d, y, n, act, slope);
            }
    }
}

/* ---- batch norm on tensors stored in 16 bits (section 9, halves: its input and the gradient
   over it when a bf16 conv's output; its output and gradient when a conv reads them).
   Section 3's loops on the same chunks and stretches, each first widened into a buffer of the
   thread's (exact: the values are bf16): the same sums in the same order, so the bits of fp32
   storage; y and dx rounded to bf16 as they are stored in 16 bits.  Half the bytes read and
   written. */
static double cf__bn_sum_half(const cf_bf16 *x, int B, int C, int c, size_t P, float center, int squared) {
    float buf[CF__BN_CHUNK];
    double s = 0.0;
    size_t r, n;
    int b;
    for (b = 0; b < B; b++)
        for (r = 0; r < P; r += CF__BN_CHUNK) {
            n = P - r < CF__BN_CHUNK ? P - r : CF__BN_CHUNK;
            cf__widen_run(buf, x + ((size_t)b * C + c) * P + r, n);
            s += cf__bn_chunk_sum(buf, n, center, squared);
        }
    return s;
}
static void cf__bn_stats_half(const cf__bn_call *bn, float *rmean, float *rvar, float *save_mean, float *save_invstd,
                              int train, float momentum, float eps) {
    const cf_bf16 *x = (const cf_bf16 *)(const void *)bn->x;
    int B = bn->B, C = bn->C;
    size_t P = bn->P;
    int c;
    /* (x not read) */
    if (!train) { cf__bn_stats(NULL, rmean, rvar, save_mean, save_invstd, B, C, P, 0, momentum, eps, NULL); return; }
    CF__OMP(omp parallel for schedule(static))
    for (c = 0; c < C; c++) {
        double n = (double)B * P, mean = cf__bn_sum_half(x, B, C, c, P, 0.0f, 0) / n;
        double var = cf__bn_sum_half(x, B, C, c, P, (float)mean, 1) / n;
        cf__bn_set(c, mean, var, n, rmean, rvar, save_mean, save_invstd, momentum, eps);
    }
}
/* y = act(a x + sh) rounded, x and y each in fp32 or (x_half, y_half) in 16 bits */
static void cf__bn_apply_h(const cf__bn_call *bn) {
    float *y = bn->y;
    const float *x = bn->x, *gamma = bn->gamma, *beta = bn->beta, *mean = bn->mean, *invstd = bn->invstd;
    int y_half = bn->y_half, x_half = bn->x_half, B = bn->B, C = bn->C, act = bn->act;
    size_t P = bn->P;
    float slope = bn->slope;
    int c;
    CF__OMP(omp parallel for schedule(static))
    for (c = 0; c < C; c++) {
        float a = gamma[c] * invstd[c], sh = beta[c] - mean[c] * a, xb[CF__STRETCH], yb[CF__STRETCH];
        size_t p0, n, at;
        int b;
        for (b = 0; b < B; b++)
            for (p0 = 0; p0 < P; p0 += CF__STRETCH) {
                float *yr;
                n = P - p0 < CF__STRETCH ? P - p0 : CF__STRETCH;
                at = ((size_t)b * C + c) * P + p0;
                if (x_half) cf__widen_run(xb, (const cf_bf16 *)(const void *)x + at, n);
                yr = y_half ? yb : y + at;
                cf__bn_apply_run(yr, x_half ? xb : x + at, a, sh, n, act, slope);
                if (y_half) cf__narrow_run((cf_bf16 *)(void *)y + at, yr, n);
                else cf__round_run(yr, n);
            }
    }
}
/* n <= CF__STRETCH values of dy from at (16 bits: dy_half) into d, times the activation's
   derivative at y = act(a x + sh) rounded (x's values in xv), as cf__bn_act_backward_p leaves
   them in an fp32 dy */
static void cf__bn_dy_run(float *d, const float *dy, int dy_half, size_t at, const float *xv, size_t n, float a,
                          float sh, int act, float slope) {
    float y[CF__STRETCH];
    if (dy_half) cf__widen_run(d, (const cf_bf16 *)(const void *)dy + at, n);
    else memcpy(d, dy + at, n * sizeof(float));
    if (act == CF_ACT_LINEAR) return;
    cf__bn_apply_run(y, xv, a, sh, n, act, slope);
    cf__round_run(y, n);
    cf__act_backward_run(d, y, n, act, slope);
}
/* cf_bn_backward with the activation's derivative (y computed again from x) on x, dy and dx
   each in fp32 or 16 bits (x_half, dy_half, dx_half); dx stored or added (store), rounded as
   it is stored (16 bits, or rnd) */
static void cf__bn_backward_h(const cf__bn_call *bn, int train, int store, int rnd) {
    float *dx = bn->dx, *dgamma = bn->dgamma, *dbeta = bn->dbeta;
    const float *dy = bn->dy, *x = bn->x, *gamma = bn->gamma, *beta = bn->beta, *mean = bn->mean, *invstd = bn->invstd;
    int dx_half = bn->dx_half, dy_half = bn->dy_half, x_half = bn->x_half, B = bn->B, C = bn->C, act = bn->act;
    size_t P = bn->P;
    float slope = bn->slope;
    int c;
    CF__OMP(omp parallel for schedule(static))
    for (c = 0; c < C; c++) {
        float xb[CF__STRETCH], d[CF__STRETCH], v[CF__STRETCH], a = gamma[c] * invstd[c], sh = beta[c] - mean[c] * a;
        double sdy = 0.0, sdyx = 0.0;
        cf__bn_dx_coef k;
        size_t r, n, p, at;
        int b;
        k.m = mean[c]; k.is = invstd[c];
        for (b = 0; b < B; b++)   /* the sums of dy and dy xhat, as cf__bn_dsums */
            for (r = 0; r < P; r += CF__BN_CHUNK) {
                const float *xv;
                n = P - r < CF__BN_CHUNK ? P - r : CF__BN_CHUNK;
                at = ((size_t)b * C + c) * P + r;
                if (x_half) cf__widen_run(xb, (const cf_bf16 *)(const void *)x + at, n);
                xv = x_half ? xb : x + at;
                cf__bn_dy_run(d, dy, dy_half, at, xv, n, a, sh, act, slope);
                cf__bn_chunk_dsums(d, xv, n, k.m, k.is, &sdy, &sdyx);
            }
        dgamma[c] += (float)sdyx;
        dbeta[c] += (float)sdy;
        k = cf__bn_coef(k, gamma[c], sdy, sdyx, train, (double)B * P);
        if (!dx) continue;
        for (b = 0; b < B; b++)   /* dx, as cf__bn_backward_p: 0 + the term (store) or the term added */
            for (r = 0; r < P; r += CF__STRETCH) {
                const float *xv;
                float *o;
                n = P - r < CF__STRETCH ? P - r : CF__STRETCH;
                at = ((size_t)b * C + c) * P + r;
                if (x_half) cf__widen_run(xb, (const cf_bf16 *)(const void *)x + at, n);
                xv = x_half ? xb : x + at;
                cf__bn_dy_run(d, dy, dy_half, at, xv, n, a, sh, act, slope);
                o = dx_half ? v : dx + at;
                if (store) for (p = 0; p < n; p++) o[p] = 0.0f + k.k * (d[p] - k.k1 - (xv[p] - k.m) * k.is * k.k2);
                else {
                    if (dx_half) cf__widen_run(v, (const cf_bf16 *)(const void *)dx + at, n);
                    for (p = 0; p < n; p++) o[p] += k.k * (d[p] - k.k1 - (xv[p] - k.m) * k.is * k.k2);
                }
                if (dx_half) cf__narrow_run((cf_bf16 *)(void *)dx + at, v, n);
                else if (rnd) cf__round_run(o, n);
            }
    }
}
static int cf__add_to_p(float *dx, const float *dy, size_t n, int rnd, int store) {
    long s, ns = (long)((n + CF__STRETCH - 1) / CF__STRETCH);
    int fuse = cf__fuses_rounding(rnd);
    if (!dx) return 1;
    CF__OMP(omp parallel for schedule(static) if (ns > 4))
    for (s = 0; s < ns; s++) {
        size_t k, k0 = (size_t)s * CF__STRETCH, e = n - k0 < CF__STRETCH ? n : k0 + CF__STRETCH;
        if (store) for (k = k0; k < e; k++) dx[k] = 0.0f + dy[k];
        else for (k = k0; k < e; k++) dx[k] += dy[k];
        if (fuse) cf__round_run(dx + k0, e - k0);
    }
    return fuse || !rnd;
}
static int cf__sum_p(float *y, const float *const *src, int n_src, size_t n, int rnd) {
    long s, ns = (long)((n + CF__STRETCH - 1) / CF__STRETCH);
    int fuse = cf__fuses_rounding(rnd);
    CF__OMP(omp parallel for schedule(static) if (ns > 4))
    for (s = 0; s < ns; s++) {   /* a stretch at a time: the sum in source order */
        size_t k, k0 = (size_t)s * CF__STRETCH, e = n - k0 < CF__STRETCH ? n : k0 + CF__STRETCH;
        int j;
        for (k = k0; k < e; k++) y[k] = src[0][k];
        for (j = 1; j < n_src; j++) for (k = k0; k < e; k++) y[k] += src[j][k];
        if (fuse) cf__round_run(y + k0, e - k0);
    }
    return fuse || !rnd;
}

/* ---- what the memory plan may store in 16 bits (section 9, halves): conv l's operands when
   each of its operations has a half path, max pool p's input and (y_half) output */
/* the path a call with 16-bit operands takes computes the bits the same call on fp32 storage
   gets: it is that path, or its twin (half = 2) */
static int cf__same_sums(const cf__conv_path *table, const cf__conv_call *c) {
    cf__conv_call c32 = *c;
    const cf__conv_path *p = cf__conv_pick(table, c), *p32;
    cf__conv_halves(&c32, 0);
    p32 = cf__conv_pick(table, &c32);
    return p && (p == p32 || (p->half == 2 && p + 1 == p32));
}
static int cf__conv_takes_halves(cf_net *net, const cf_layer *l, int dinput, int halves) {
    static const float some_bias = 0.0f;   /* (the paths ask only whether there is one) */
    cf__conv_call c = cf__conv_make(net->batch, l->in, l->out, &l->g, l->groups, NULL, cf__net_ws_floats(net), 1);
    if (l->type != CF_L_CONV || l->n_src != 1) return 0;
    c.b = l->has_bias ? &some_bias : NULL; c.act = l->act; c.slope = l->slope;
    cf__conv_halves(&c, halves);
    /* (dw and dx at once) */
    if (l->depthwise) return cf__same_sums(cf__dwconv_fwd_paths, &c) && cf__same_sums(cf__dwconv_bwd_paths, &c);
    if (!cf__same_sums(cf__conv_fwd_paths, &c) || !cf__same_sums(cf__conv_bww_paths, &c)) return 0;
    return (l->src[0] < 0 && !dinput) || cf__same_sums(cf__conv_bwd_paths, &c);
}
static int cf__pool_takes_halves(cf_net *net, const cf_layer *p, int y_half) {
    cf__pool_call pc = cf__pool_make(net->batch, p->in, p->out, &p->g, 1);
    pc.half = 1; pc.y_half = y_half;
    if (p->in.d != p->out.d * p->g.k[0] || p->in.h != p->out.h * p->g.k[1] || p->in.w != p->out.w * p->g.k[2]) return 0;
    return cf__pool_pick(cf__pool_fwd_paths, &pc) && cf__maxpool_inplace_takes_half(&pc);
}

/* the band of transposed conv l with the tiles of a workspace of ws_floats */
static size_t cf__band_floats(const cf_layer *l, size_t ws_floats) {
    size_t K = (size_t)l->out.c * l->g.k[0] * l->g.k[1] * l->g.k[2],
        tile = cf__tile(K, (size_t)l->in.d * l->in.h * l->in.w, ws_floats);
    return (size_t)l->out.c * cf__band_rows(l->in, &l->g, tile) * l->out.w;
}

/* ================================================================ 5. layers
   A network is an array of layers run in order, each reading the outputs of earlier layers
   (src; -1 the network input) and writing its own.  Here: the network's private part (what
   every layer's functions read), the cfg's sections and keys, what a layer computes with (its
   inputs, outputs, gradients and parameters, bf16's rounded operands), then each layer type in
   functions named after it, found through one table (cf__types, at the end): how it is parsed
   (its keys, its output shape, its parameter counts), its FLOPs, its forward and its backward.
   A sample split across ranks runs the same layers on slabs: their split parts are section 8's. */

/* ---- the private part of a network: where its outputs and gradients live during a step
   (the memory plan of section 9), the im2col workspace, the mode, the hooks */
typedef struct {
    size_t y_off, dy_off;     /* the output and its gradient, into the arena */
    int last_read;            /* the last layer whose forward reads the output (n: the loss) */
    int fwd_end;              /* the output's first life ends after this layer's forward */
    int rebuild_at;           /* >= 0: dropped after forward, rebuilt from its inputs just
                                 before this layer's backward; -1: kept */
    int fused_pool;           /* a conv whose gradient a max pool's backward writes over the
                                 conv's output (no gradient block): that pool; -1: none */
    int half;                 /* the output (and a fused conv's gradient over it) is stored as
                                 bf16 in 16 bits (section 9, halves) */
    int grad_half;            /* the gradient block is stored in 16 bits */
    int grad_store;           /* its first writer stores into it: no zeroing (section 9, stores) */
} cf__plan_layer;
typedef struct {
    cf__plan_layer *l;        /* one per layer */
    int batch;                /* what the plan is for (0: none yet) */
    int flags;                /* the settings it was made with (keep_acts, fast paths) */
    int threads;              /* and the threads (with halves: a path's room may depend on them) */
    int input_raw;            /* bf16: the input's readers round it as they read it (section 9,
                                 halves): no rounded copy */
    size_t floats, cap;       /* arena floats this plan uses / allocated */
} cf__arena_plan;
#define CF__NET_MAGIC 0x4346744eu   /* "CFtN": a network cf_net_parse made (cf_net_free clears it) */
/* a sample split across ranks (cf_net_set_spatial): K slabs of every output of the layers before
   end (the gathering [flatten]), this rank holding slab r; the layers' whole shapes kept, and
   the network's input slab; each convolution's halos, hb planes before its slab and ha after;
   the buffers of the exchange: the extended input (and its gradient) of the largest
   convolution, the packed halos and the gathered features.  The first [dense] after the
   [flatten] may hold only its rows [r rows, (r + 1) rows) here (shard >= 0: its layer): the
   parameters, gradients and optimizer state then have this rank's layout, the whole one's
   with the other ranks' rows of that layer cut out (whole_n the whole count) */
typedef struct {
    int K, r, periodic, end, on;     /* on: K > 1 or periodic (the split's code runs) */
    int comm;                        /* the group's communicator is made (an MPI run of several ranks) */
    void *mpi_comm;                  /* its MPI_Comm (section 8) */
    cf_shape input;                  /* the input slab (net->input stays the whole sample) */
    cf_shape *gin, *gout;            /* every layer's whole input and output */
    int *hb, *ha;                    /* per layer: a convolution's halo planes */
    float *ext, *dext; size_t ext_n; /* (B, C, D/K + hb + ha, H, W) and its gradient */
    float *pack; size_t pack_n;      /* halos in transit; the [flatten]'s gathered slabs */
    int shard, rows;                 /* the [dense] whose rows are split, -1: none; rows a rank */
    size_t whole_n;                  /* the whole network's parameter count */
    void *cross_comm;                /* the MPI_Comm of the ranks holding the same rows (one a group) */
    float *part; size_t part_n;      /* the shard's rows of a batch, and its part of dx */
} cf__split_state;
struct cf__net_private {
    uint32_t magic;
    cf__arena_plan plan;             /* where outputs and gradients live (section 9) */
    float *arena;                    /* plan.cap floats: every output and output gradient */
    int keep_acts;                   /* 1: every output kept from forward to the next forward */
    int no_fuse;                     /* 1: never fuse a layer's gradient into its max pool */
    int no_half;                     /* 1: store no output in 16 bits (section 9; tests compare) */
    size_t ws_floats;                /* per im2col workspace */
    float *ws;                       /* 2 * ws_floats */
    const float *x;                  /* current input (B, C, D, H, W), caller's memory */
    float *dinput;                   /* optional: backward accumulates dL/d(input) here */
    int training, bn_train;          /* the mode: dropout on; batch-norm batch statistics */
    float *bn_save;                  /* the batch mean and 1/std of the last forward, per layer */
    cf_bn_sync bn_sync;              /* reduce != NULL: synchronized batch norm over ranks */
    float class_w[CF_MAX_CLASSES];   /* softmax_ce: per-class weights */
    void (*backward_hook)(cf_net *net, int layer, void *ctx);   /* the caller's (cf_net_set_backward_hook) */
    void *hook_ctx;
    void (*dist_hook)(cf_net *net, int layer);        /* the overlapped averaging's (section 7), before the caller's */
    uint64_t step, updates;          /* cf_net_step, cf_net_updates */
    void (*layer_hook)(cf_net *net, int layer, int phase, void *ctx);
    void *layer_ctx;
    int acts_clobbered;              /* backward has reused the outputs' memory (until forward) */
    int rebuilding;                  /* inside a backward-time rebuild of an output */
    int precision;                   /* CF_FP32, CF_BF16 */
    float *wq;                       /* bf16: room for the largest convolution kernel, rounded
                                        there each time a layer reads it (cf__w); else NULL */
    float *xq; size_t xq_n;          /* bf16: the input, rounded */
    int head;                        /* bf16: the first layer of the fp32 dense head */
    int stored_bf16;                 /* bf16: the layer's forward (backward) stored its output
                                        (its sources' gradients) rounded: no second pass */
    cf__split_state split;           /* a sample across ranks (section 8) */
};
/* the floats of one of the network's two workspaces (section 4 asks it for the plan) */
static size_t cf__net_ws_floats(const cf_net *net) { return net->priv->ws_floats; }
/* a network cf_net_parse made and cf_net_free has not freed: else CF_ERR naming the function */
static int cf__net_ok(const cf_net *net) { return net && net->priv && net->priv->magic == CF__NET_MAGIC; }
static int cf__net_check(const cf_net *net, const char *fn) {
    return cf__net_ok(net) ? CF_OK : cf_fail("%s: the network was not made by cf_net_parse (or was freed)", fn);
}
#define CF__NET_RETURN_UNLESS(net, ret, fn) \
    CF__RETURN_UNLESS(cf__net_ok(net), ret, fn ": the network was not made by cf_net_parse (or was freed)")
#define CF__NET_ASSERT(net, fn) \
    CF__ASSERT_ARG(cf__net_ok(net), fn ": the network was not made by cf_net_parse (or was freed)")
typedef struct { char *key, *val; int line; int used; } cf__kv;
typedef struct { char *name; int line; cf__kv *kv; int n_kv; } cf__section;

static char *cf__trim(char *s) {
    char *e;
    while (*s && isspace((unsigned char)*s)) s++;
    e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1])) *--e = 0;
    return s;
}

/* Splits the text into sections of key=value pairs.  buf is a private copy that owns the strings. */
/* the sections' key lists, then the array (on every error path of cf__split too) */
static void cf__free_sections(cf__section *secs, int n) {
    int i;
    if (secs) for (i = 0; i < n; i++) CF_FREE(secs[i].kv);
    CF_FREE(secs);
}

static int cf__split(char *buf, const char *name, cf__section **out, int *n_out) {
    cf__section *secs = NULL;
    int n = 0, cap = 0, line = 0, k;
    char *p = buf;
    if (!strncmp(p, "\xEF\xBB\xBF", 3)) p += 3;   /* a UTF-8 byte-order mark (some editors write one): not text */
    while (p && *p) {
        char *nl = strchr(p, '\n'), *s, *hash;
        if (nl) *nl = 0;
        line++;
        hash = strchr(p, '#');
        if (hash) *hash = 0;
        s = cf__trim(p);
        p = nl ? nl + 1 : NULL;
        if (!*s) continue;
        if (*s == '[') {
            char *close = strchr(s, ']');
            if (!close || *cf__trim(close + 1)) {
                cf__free_sections(secs, n);
                return cf_fail("%s:%d: malformed section header '%s'", name, line, s);
            }
            *close = 0;
            if (n == cap) {
                cf__section *ns = CF__NEW(cf__section, cap ? 2 * cap : 16);
                if (!ns) { cf__free_sections(secs, n); return CF_ERR; }
                if (secs) memcpy(ns, secs, sizeof *ns * n);
                CF_FREE(secs);
                secs = ns; cap = cap ? 2 * cap : 16;
            }
            secs[n].name = cf__trim(s + 1); secs[n].line = line; secs[n].kv = NULL; secs[n].n_kv = 0;
            n++;
        } else {
            char *eq = strchr(s, '=');
            cf__section *sec;
            if (!n) { cf__free_sections(secs, n); return cf_fail("%s:%d: '%s' outside any [section]", name, line, s); }
            if (!eq) {
                cf__free_sections(secs, n);
                return cf_fail("%s:%d: expected key=value, got '%s'", name, line, s);
            }
            *eq = 0;
            sec = &secs[n - 1];
            if (sec->n_kv % 16 == 0) {
                cf__kv *nk = CF__NEW(cf__kv, sec->n_kv + 16);
                if (!nk) { cf__free_sections(secs, n); return CF_ERR; }
                if (sec->kv) memcpy(nk, sec->kv, sizeof *nk * sec->n_kv);
                CF_FREE(sec->kv);
                sec->kv = nk;
            }
            sec->kv[sec->n_kv].key = cf__trim(s);
            for (k = 0; k < sec->n_kv; k++)
                if (!strcmp(sec->kv[k].key, sec->kv[sec->n_kv].key)) {
                    int first = sec->kv[k].line;
                    const char *key = sec->kv[k].key, *sname = sec->name;   /* both point into buf */
                    cf__free_sections(secs, n);
                    return cf_fail("%s:%d: key '%s' given twice in [%s] (first at line %d)", name, line, key, sname,
                                   first);
                }
            sec->kv[sec->n_kv].val = cf__trim(eq + 1);
            sec->kv[sec->n_kv].line = line;
            sec->kv[sec->n_kv].used = 0;
            sec->n_kv++;
        }
    }
    *out = secs; *n_out = n;
    return CF_OK;
}

static cf__kv *cf__find(cf__section *s, const char *key) {
    int i;
    for (i = s->n_kv - 1; i >= 0; i--) if (!strcmp(s->kv[i].key, key)) { s->kv[i].used = 1; return &s->kv[i]; }
    return NULL;
}

/* Integer list "a,b,c" or "axbxc"; returns the count or -1 */
static int cf__ints(const char *v, int *out, int max) {
    int n = 0;
    const char *p = v;
    while (*p) {
        char *end;
        long x = strtol(p, &end, 10);
        if (end == p || n == max || x < -1000000000L || x > 1000000000L) return -1;
        out[n++] = (int)x;
        p = end;
        while (*p == ' ') p++;
        if (!*p) break;
        if (*p != ',' && *p != 'x') return -1;   /* junk after a number: "4x32x32x32junk" */
        if (!*++p) return -1;                    /* a separator with no number after it: "4x32x32x32," */
    }
    return n;
}

static int cf__get_int(cf__section *s, const char *name, const char *key, int def, int lo, int hi, int *out) {
    cf__kv *kv = cf__find(s, key);
    int v[1];
    if (!kv) { *out = def; return CF_OK; }
    if (cf__ints(kv->val, v, 1) != 1) return cf_fail("%s:%d: %s=%s is not an integer", name, kv->line, key, kv->val);
    if (v[0] < lo || v[0] > hi)
        return cf_fail("%s:%d: %s=%d is out of range [%d, %d]", name, kv->line, key, v[0], lo, hi);
    *out = v[0];
    return CF_OK;
}

static int cf__get_float(cf__section *s, const char *name, const char *key, float def, float lo, float hi, float *out) {
    cf__kv *kv = cf__find(s, key);
    char *end;
    double v;
    if (!kv) { *out = def; return CF_OK; }
    v = strtod(kv->val, &end);
    if (end == kv->val || *end || !(v >= lo && v <= hi))
        return cf_fail("%s:%d: %s=%s is not a number in [%g, %g]", name, kv->line, key, kv->val, lo, hi);
    *out = (float)v;
    return CF_OK;
}

static int cf__get_choice(cf__section *s, const char *name, const char *key, const char *const *choices,
                          int n, int def, int *out) {
    cf__kv *kv = cf__find(s, key);
    int i;
    if (!kv) { *out = def; return CF_OK; }
    for (i = 0; i < n; i++) if (!strcmp(kv->val, choices[i])) { *out = i; return CF_OK; }
    return cf_fail("%s:%d: %s=%s is not one of the known values (e.g. %s)", name, kv->line, key, kv->val, choices[0]);
}

/* Per-axis values: "3" -> all spatial axes; "3x3x3" (3-D) or "3x3" (2-D) -> one per axis.
   For a 2-D network the depth axis is always 1. */
static int cf__get_axes(cf__section *s, const char *name, const char *key, int def, int is2d, int lo, int out[3]) {
    cf__kv *kv = cf__find(s, key);
    int v[3], n, i;
    out[0] = is2d ? 1 : def; out[1] = out[2] = def;
    if (!kv) return CF_OK;
    n = cf__ints(kv->val, v, 3);
    if (n == 1) { out[0] = is2d ? 1 : v[0]; out[1] = out[2] = v[0]; }
    else if (n == 2 && is2d) { out[1] = v[0]; out[2] = v[1]; }
    else if (n == 3 && !is2d) { out[0] = v[0]; out[1] = v[1]; out[2] = v[2]; }
    else return cf_fail("%s:%d: %s=%s: give one value or one per spatial axis (%s)", name, kv->line, key, kv->val,
                        is2d ? "HxW" : "DxHxW");
    for (i = 0; i < 3; i++)
        if (out[i] < lo || out[i] > 4096) return cf_fail("%s:%d: %s=%s is out of range", name, kv->line, key, kv->val);
    return CF_OK;
}

CFDEF int cf_parse_shape(const char *s, cf_shape *out) {
    int v[4], n, i;
    if (!s || !out) return cf_fail("cf_parse_shape: the text and the shape must not be NULL");
    n = cf__ints(s, v, 4);
    if (n == 3) { out->c = v[0]; out->d = 1; out->h = v[1]; out->w = v[2]; }
    else if (n == 4) { out->c = v[0]; out->d = v[1]; out->h = v[2]; out->w = v[3]; }
    else return cf_fail("shape '%s' is not CxDxHxW or CxHxW", s);
    for (i = 0; i < n; i++) if (v[i] < 1 || v[i] > 65536) return cf_fail("shape '%s' has a dimension out of range", s);
    if ((double)out->c * out->d * out->h * out->w > 2e9) return cf_fail("shape '%s' is too large", s);
    return CF_OK;
}

/* Padding from the layer's pad mode for the current input size (TensorFlow's 'same' rule:
   total = max((ceil(in/s) - 1)*s + span - in, 0), before = total/2, after = the rest). */
static void cf__resolve_pad(cf_layer *l, int is2d) {
    int a, in[3];
    in[0] = l->in.d; in[1] = l->in.h; in[2] = l->in.w;
    for (a = 0; a < 3; a++) {
        int span = l->g.dil[a] * (l->g.k[a] - 1) + 1;
        if (is2d && a == 0) { l->g.pb[0] = l->g.pa[0] = 0; continue; }
        if (!strcmp(l->pad_mode, "same")) {   /* in 64 bits: o s can pass 2^31 */
            long long o = ((long long)in[a] + l->g.s[a] - 1) / l->g.s[a];
            int total = (int)((o - 1) * l->g.s[a] + span - in[a]);   /* below s + span */
            if (total < 0) total = 0;
            l->g.pb[a] = total / 2; l->g.pa[a] = total - total / 2;
        } else if (!strcmp(l->pad_mode, "valid")) {
            l->g.pb[a] = l->g.pa[a] = 0;
        } else {
            l->g.pb[a] = l->pad_spec[2 * a]; l->g.pa[a] = l->pad_spec[2 * a + 1];
        }
    }
}

static int cf__parse_pad(cf__section *s, const char *name, cf_layer *l, int is2d) {
    cf__kv *kv = cf__find(s, "pad");
    int v[6], n, i;
    strcpy(l->pad_mode, "valid");
    if (!kv) return CF_OK;
    if (!strcmp(kv->val, "same") || !strcmp(kv->val, "valid")) { strcpy(l->pad_mode, kv->val); return CF_OK; }
    strcpy(l->pad_mode, "explicit");
    n = cf__ints(kv->val, v, 6);
    for (i = 0; i < 6; i++) l->pad_spec[i] = 0;
    if (n == 1) for (i = (is2d ? 2 : 0); i < 6; i++) l->pad_spec[i] = v[0];
    else if (n == 2) for (i = (is2d ? 1 : 0); i < 3; i++) { l->pad_spec[2 * i] = v[0]; l->pad_spec[2 * i + 1] = v[1]; }
    else if (n == 4 && is2d) for (i = 0; i < 4; i++) l->pad_spec[2 + i] = v[i];
    else if (n == 6 && !is2d) for (i = 0; i < 6; i++) l->pad_spec[i] = v[i];
    else return cf_fail("%s:%d: pad=%s: use same, valid, N, before,after or one before,after pair per axis", name,
                        kv->line, kv->val);
    for (i = 0; i < 6; i++)
        if (l->pad_spec[i] < 0 || l->pad_spec[i] > 4096)
            return cf_fail("%s:%d: pad=%s is out of range", name, kv->line, kv->val);
    return CF_OK;
}

static const char *cf__act_names[] = { "linear", "relu", "leaky", "tanh" };
static const char *cf__init_names[] = { "glorot_uniform", "kaiming_uniform", "kaiming_normal", "torch", "zeros" };
static const char *cf__loss_names[] = { "mse", "l1", "softmax_ce" };

/* the output shape of a layer, or the network input's for src < 0 */
static cf_shape cf__src_shape(const cf_net *net, int src) {
    return src >= 0 ? net->layers[src].out : net->priv && net->priv->split.on ? net->priv->split.input : net->input;
}

/* The limits of a layer: per sample at most CF__MAX_ELEMENTS values in its output on a rank
   (a slab of it when a sample is split across ranks, at most CF__MAX_SLABS of them: checked
   when the network is planned) and in its weights (so every count fits an int), at most
   CF__MAX_EXTENT along an axis. */
#define CF__MAX_ELEMENTS ((size_t)2000000000)
#define CF__MAX_SLABS 4096
#define CF__MAX_EXTENT (1 << 20)

/* ---- what every layer type's functions get: the layer's section of the cfg and the net */
typedef struct { cf_net *net; int idx; cf__section *s; const char *name; int is2d; } cf__parser;
/* a layer's output, the output of its source k (the network input for -1), the gradient of
   its output and of its source k (net->priv->dinput for the input, or NULL) */
static float *cf__out(cf_net *net, int i) { return net->priv->arena + net->priv->plan.l[i].y_off; }
static const float *cf__in(cf_net *net, const cf_layer *l, int k) {
    return l->src[k] < 0 ? net->priv->x : cf__out(net, l->src[k]);
}
static float *cf__grad(cf_net *net, int i) { return net->priv->arena + net->priv->plan.l[i].dy_off; }
static float *cf__in_grad(cf_net *net, const cf_layer *l, int k) {
    return l->src[k] < 0 ? net->priv->dinput : cf__grad(net, l->src[k]);
}
static size_t cf__n_out(const cf_net *net, const cf_layer *l) { return cf_shape_size(l->out) * net->batch; }
static size_t cf__per_channel(cf_shape s) { return cf_shape_size(s) / s.c; }
/* the parameters a layer computes with: the masters, or in bf16 a convolution's kernel
   before the dense head rounded into wq (each call: the masters may have moved since) */
static int cf__rounds(const cf_net *net, int layer);
static int cf__stores_grad(const cf_net *net, const cf_layer *l, int k);
static int cf__rounds_kernel(const cf_net *net, const cf_layer *l) {
    return (l->type == CF_L_CONV || l->type == CF_L_DECONV) && cf__rounds(net, (int)(l - net->layers));
}
static float *cf__w(cf_net *net, const cf_layer *l) {
    float *w = net->params + l->w_off;
    if (!net->priv->wq || !cf__rounds_kernel(net, l)) return w;
    memcpy(net->priv->wq, w, l->w_n * sizeof(float));
    cf_bf16_round(net->priv->wq, l->w_n);
    return net->priv->wq;
}
static float *cf__b(cf_net *net, const cf_layer *l) { return l->b_n ? net->params + l->b_off : NULL; }
static float *cf__dw(cf_net *net, const cf_layer *l) { return net->grads + l->w_off; }
static float *cf__db(cf_net *net, const cf_layer *l) { return l->b_n ? net->grads + l->b_off : NULL; }
static double cf__size_flops(const cf_layer *l) { return (double)cf_shape_size(l->out); }   /* elementwise layers */
static int cf__no_keys(cf__parser *p, cf_layer *l) { (void)p; (void)l; return CF_OK; }
/* bf16: whether layer's output (and its gradient) is stored rounded: before the dense head */
static int cf__rounds(const cf_net *net, int layer) {
    return net->priv->precision == CF_BF16 && layer >= 0 && layer < net->priv->head;
}
/* whether a backward rounds the gradient it adds into over layer's output: one of bf16
   values, not stored in 16 bits (those are bf16 values as stored) */
static int cf__rounds_grad(const cf_net *net, int layer) {
    return cf__rounds(net, layer) && !net->priv->plan.l[layer].grad_half;
}
/* bf16: dL/dz = dL/dy f'(z) of layer i, an operand of its backward products, rounded before
   use; dL/dy is stored rounded, so a linear or relu f (f' = 1 or 0) leaves it bf16 values */
static void cf__round_dz(cf_net *net, int i, float *dz) {
    const cf_layer *l = &net->layers[i];
    if (cf__rounds(net, i) && l->act != CF_ACT_LINEAR && l->act != CF_ACT_RELU) cf_bf16_round(dz, cf__n_out(net, l));
}

/* out.d, out.h, out.w of a window layer from its input and geometry */
static void cf__window_out(cf_layer *l) {
    l->out.d = cf_geom_out(&l->g, 0, l->in.d); l->out.h = cf_geom_out(&l->g, 1, l->in.h);
    l->out.w = cf_geom_out(&l->g, 2, l->in.w);
}
/* the keys [conv] and [deconv] share: filters (into out.c), size, stride, dilation, pad, bias */
static int cf__filter_keys(cf__parser *p, cf_layer *l) {
    cf__section *s = p->s;
    int rc;
    if ((rc = cf__get_int(s, p->name, "filters", 0, 1, 1 << 20, &l->out.c)) ||
        (rc = cf__get_axes(s, p->name, "size", 1, p->is2d, 1, l->g.k)) ||
        (rc = cf__get_axes(s, p->name, "stride", 1, p->is2d, 1, l->g.s)) ||
        (rc = cf__get_axes(s, p->name, "dilation", 1, p->is2d, 1, l->g.dil)) ||
        (rc = cf__parse_pad(s, p->name, l, p->is2d)) ||
        (rc = cf__get_int(s, p->name, "bias", 1, 0, 1, &l->has_bias))) return rc;
    if (!l->out.c) return cf_fail("%s:%d: [%s] needs filters=", p->name, s->line, s->name);
    return CF_OK;
}

/* a sample split across ranks (section 8): a convolution's extended input and its geometry,
   the gradient of that input back to the slabs; the [flatten]'s gather and scatter; the
   [dense] whose rows the group shares */
static void cf__split_extend(cf_net *net, int i, const float *x);
static void cf__split_geometry(const cf_net *net, int i, cf_shape *in, cf_geom *g);
static void cf__split_reduce(cf_net *net, int i, float *dx);
static void cf__split_gather(cf_net *net, int i);
static void cf__split_scatter(cf_net *net, int i);
static void cf__shard_dense_forward(cf_net *net, int i);
static void cf__shard_dense_backward(cf_net *net, int i);

/* ---- [conv]: y = act(conv(x, w) + b); a depthwise one (groups = C = OC) by its own loops */
static int cf__conv_parse(cf__parser *p, cf_layer *l) {
    int rc;
    if ((rc = cf__filter_keys(p, l)) || (rc = cf__get_int(p->s, p->name, "groups", 1, 1, 1 << 20, &l->groups)))
        return rc;
    if (l->in.c % l->groups || l->out.c % l->groups)
        return cf_fail("%s:%d: groups=%d does not divide %d input channels and %d filters", p->name, p->s->line,
                       l->groups, l->in.c, l->out.c);
    cf__resolve_pad(l, p->is2d);
    cf__window_out(l);
    l->w_n = (size_t)l->out.c * (size_t)(l->in.c / l->groups) * l->g.k[0] * l->g.k[1] * l->g.k[2];
    l->b_n = l->has_bias ? (size_t)l->out.c : 0;
    l->depthwise = l->groups > 1 && l->groups == l->in.c && l->out.c == l->in.c;
    return CF_OK;
}
static double cf__conv_flops(const cf_layer *l) {
    return 2.0 * l->in.c / l->groups * l->g.k[0] * l->g.k[1] * l->g.k[2] * l->out.c * l->out.d * l->out.h * l->out.w;
}
/* which of layer i's operands the plan stores in 16 bits (section 9, halves): its output and
   the gradient over it, its input, its input's gradient (the network's input: as given) */
static int cf__planned_input(const cf_net *net, const cf_layer *l);
static int cf__layer_halves(const cf_net *net, int i) {
    int in = cf__planned_input(net, &net->layers[i]);
    return (net->priv->plan.l[i].half ? CF__HALF_OUT : 0) | (in == CF__RAW_IN && !net->priv->plan.input_raw ? 0 : in);
}
/* whether layer i is the [flatten] that gathers a split network's slabs */
static int cf__split_gathers(const cf_net *net, int i) { return net->priv->split.on && i == net->priv->split.end; }
/* whether conv i runs on a slab (a split network's layer before its [flatten]) */
static int cf__split_layer(const cf_net *net, int i) { return net->priv->split.on && i < net->priv->split.end; }
static void cf__conv_forward(cf_net *net, int i) {
    cf_layer *l = &net->layers[i];
    float *y = cf__out(net, i);
    const float *x = cf__in(net, l, 0);
    cf_shape in = l->in;
    cf_geom g = l->g;
    cf__conv_call c;
    /* its slab with the neighbours' planes: the same convolution, taller, unpadded in depth */
    if (cf__split_layer(net, i)) {
        cf__split_extend(net, i, x);
        x = net->priv->split.ext;
        cf__split_geometry(net, i, &in, &g);
    }
    c = cf__conv_make(net->batch, in, l->out, &g, l->depthwise ? in.c : l->groups, net->priv->ws,
                      net->priv->ws_floats, cf__rounds(net, i));
    c.y = y; c.x = x; c.w = cf__w(net, l); c.b = cf__b(net, l); c.act = l->act; c.slope = l->slope;
    if (!l->depthwise) cf__conv_forward_p(&c, cf__layer_halves(net, i));
    else cf__dwconv_forward_p(&c, cf__layer_halves(net, i));
    net->priv->stored_bf16 = 1;   /* the dispatcher rounded it (when bf16) */
}
static void cf__conv_backward(cf_net *net, int i) {
    cf_layer *l = &net->layers[i];
    float *dy = cf__grad(net, i), *dx = cf__in_grad(net, l, 0), *dx_to = dx;
    const float *x = cf__in(net, l, 0);
    int B = net->batch, halves = cf__layer_halves(net, i), store = cf__stores_grad(net, l, 0),
        split = cf__split_layer(net, i);
    cf_shape in = l->in;
    cf_geom g = l->g;
    cf__conv_call c;
    /* (its output alone in 16 bits) */
    if (!net->priv->plan.l[i].grad_half && net->priv->plan.l[i].fused_pool < 0) halves &= ~CF__HALF_OUT;
    if (net->priv->plan.l[i].fused_pool < 0) {
        cf_act_backward(dy, cf__out(net, i), cf__n_out(net, l), l->act, l->slope);
        cf__round_dz(net, i, dy);   /* dL/dz: an operand of both products */
    }
    /* (fused: the pool's backward has already written dL/dz, act's backward included, here) */
    if (split) {   /* the extended input again (a second halo exchange); its gradient first, to the slabs after */
        cf__split_extend(net, i, x);
        x = net->priv->split.ext;
        cf__split_geometry(net, i, &in, &g);
        if (dx) { dx_to = net->priv->split.dext; store = 1; }
    }
    c = cf__conv_make(B, in, l->out, &g, l->depthwise ? in.c : l->groups, net->priv->ws, net->priv->ws_floats,
                      cf__rounds(net, i));
    c.dw = cf__dw(net, l); c.dy = dy; c.x = x;
    if (l->depthwise) {
        c.dx = dx_to; c.w = cf__w(net, l);
        cf__dwconv_backward_p(&c, cf__db(net, l), halves, store);
    } else {
        cf__conv_backward_weights_p(&c, cf__db(net, l), halves);
        /* cf-bench times the two halves apart */
        if (net->priv->layer_hook) net->priv->layer_hook(net, i, 4, net->priv->layer_ctx);
        if (dx) {   /* the second half of the workspace */
            cf__conv_call cd = cf__conv_make(B, in, l->out, &g, l->groups, net->priv->ws + net->priv->ws_floats,
                                             net->priv->ws_floats, cf__rounds(net, i));
            cd.dx = dx_to; cd.dy = dy; cd.w = cf__w(net, l);
            cf__conv_backward_data_p(&cd, halves, store);
        }
    }
    if (split && dx) {   /* dext added into dx, zeroed first if it holds no values yet (section 9, stores) */
        if (cf__stores_grad(net, l, 0)) memset(dx, 0, (size_t)B * cf_shape_size(l->in) * sizeof(float));
        cf__split_reduce(net, i, dx);
    }
    /* the dispatcher rounded dx (when bf16); split: rounded after the halos are added */
    net->priv->stored_bf16 = !split;
}

/* ---- [deconv]: a transposed convolution.  Output size as PyTorch's ConvTranspose:
   (in - 1) s - pb - pa + dil (k - 1) + 1, the padding after reduced by output_padding;
   TensorFlow's 'same' gives in * s. */
static int cf__deconv_shape(cf__parser *p, cf_layer *l, int a, int in, int *out) {
    int span = l->g.dil[a] * (l->g.k[a] - 1) + 1, st = l->g.s[a];
    if (l->outpad[a] && strcmp(l->pad_mode, "explicit"))
        return cf_fail("%s:%d: output_padding needs an explicit pad=", p->name, p->s->line);
    if (l->outpad[a] >= st && l->outpad[a] >= l->g.dil[a])
        return cf_fail("%s:%d: output_padding must be smaller than the stride or the dilation", p->name, p->s->line);
    long long o;   /* in 64 bits: (in - 1) s can pass 2^31 */
    if (!strcmp(l->pad_mode, "same")) {
        int total = span - st;
        if (total < 0) total = 0;
        o = (long long)in * st; l->g.pb[a] = total / 2; l->g.pa[a] = total - total / 2;
    } else {
        l->g.pb[a] = l->pad_spec[2 * a];
        l->g.pa[a] = l->pad_spec[2 * a + 1] - l->outpad[a];   /* output padding: rows not cropped at the end */
        if (l->g.pa[a] < 0)
            return cf_fail("%s:%d: output_padding larger than the padding after is not supported", p->name, p->s->line);
        o = (long long)(in - 1) * st + span - l->g.pb[a] - l->g.pa[a];
    }
    if (o > CF__MAX_EXTENT)
        return cf_fail("%s:%d: [deconv] would make an axis of %lld (at most %d)", p->name, p->s->line, o,
                       CF__MAX_EXTENT);
    *out = o < 0 ? 0 : (int)o;
    return CF_OK;
}
static int cf__deconv_parse(cf__parser *p, cf_layer *l) {
    int rc, a, io[3], oo[3];
    if ((rc = cf__filter_keys(p, l)) || (rc = cf__get_axes(p->s, p->name, "output_padding", 0, p->is2d, 0, l->outpad)))
        return rc;
    if (p->is2d) l->outpad[0] = 0;
    io[0] = l->in.d; io[1] = l->in.h; io[2] = l->in.w;
    for (a = 0; a < 3; a++) {
        if ((rc = cf__deconv_shape(p, l, a, io[a], &oo[a]))) return rc;
        if (p->is2d && a == 0) { oo[0] = 1; l->g.pb[0] = l->g.pa[0] = 0; }
    }
    l->out.d = oo[0]; l->out.h = oo[1]; l->out.w = oo[2];
    l->w_n = (size_t)l->in.c * l->out.c * l->g.k[0] * l->g.k[1] * l->g.k[2];
    l->b_n = l->has_bias ? (size_t)l->out.c : 0;
    return CF_OK;
}
static double cf__deconv_flops(const cf_layer *l) {
    return 2.0 * (double)cf_shape_size(l->in) * l->out.c * l->g.k[0] * l->g.k[1] * l->g.k[2];
}
static void cf__deconv_forward(cf_net *net, int i) {
    cf_layer *l = &net->layers[i];
    float *y = cf__out(net, i);
    cf__conv_call c = cf__deconv_make(net->batch, l->in, l->out, &l->g, net->priv->ws, net->priv->ws_floats,
                                      cf__rounds(net, i), cf__layer_halves(net, i));
    c.y = y; c.x = cf__in(net, l, 0); c.w = cf__w(net, l); c.b = cf__b(net, l);
    cf__deconv_forward_p(&c);
    /* (16 bits: rounded as stored, no activation) */
    if (net->priv->plan.l[i].half) { net->priv->stored_bf16 = 1; return; }
    cf_act_forward(y, cf__n_out(net, l), l->act, l->slope);
}
static void cf__deconv_backward(cf_net *net, int i) {
    cf_layer *l = &net->layers[i];
    float *dy = cf__grad(net, i);
    cf__conv_call c = cf__deconv_make(net->batch, l->in, l->out, &l->g, net->priv->ws, net->priv->ws_floats,
                                      cf__rounds(net, i), cf__layer_halves(net, i));
    c.dx = cf__in_grad(net, l, 0); c.dw = cf__dw(net, l); c.dy = dy; c.x = cf__in(net, l, 0); c.w = cf__w(net, l);
    c.dx_store = cf__stores_grad(net, l, 0);
    cf_act_backward(dy, cf__out(net, i), cf__n_out(net, l), l->act, l->slope);
    cf__round_dz(net, i, dy);
    net->priv->stored_bf16 = cf__deconv_backward_p(&c, cf__db(net, l), cf__rounds_grad(net, l->src[0]));
}

/* ---- [maxpool], [avgpool]: stride = size unless given */
static int cf__pool_parse(cf__parser *p, cf_layer *l) {
    int rc, a;
    if ((rc = cf__get_axes(p->s, p->name, "size", 2, p->is2d, 1, l->g.k)) ||
        (rc = cf__parse_pad(p->s, p->name, l, p->is2d))) return rc;
    for (a = 0; a < 3; a++) { l->g.s[a] = l->g.k[a]; l->g.dil[a] = 1; }
    if (cf__find(p->s, "stride") && (rc = cf__get_axes(p->s, p->name, "stride", 1, p->is2d, 1, l->g.s))) return rc;
    cf__resolve_pad(l, p->is2d);
    cf__window_out(l);
    return CF_OK;
}
static double cf__pool_flops(const cf_layer *l) {
    return (double)l->g.k[0] * l->g.k[1] * l->g.k[2] * cf_shape_size(l->out);
}
static void cf__pool_forward_layer(cf_net *net, int i) {
    cf_layer *l = &net->layers[i];
    cf__pool_forward_p(cf__out(net, i), net->priv->plan.l[i].half, cf__in(net, l, 0),
                       l->src[0] >= 0 && net->priv->plan.l[l->src[0]].half, net->batch, l->in, l->out, &l->g,
                       l->type == CF_L_MAXPOOL);
    net->priv->stored_bf16 = l->type == CF_L_MAXPOOL;   /* in bf16, the maximum of bf16 values is one of them */
}
static void cf__pool_backward_layer(cf_net *net, int i) {
    cf_layer *l = &net->layers[i];
    int src = l->src[0];
    /* the plan fused this pair: write the conv's dL/dz in place */
    if (src >= 0 && net->priv->plan.l[src].fused_pool == i) {
        const cf_layer *c = &net->layers[src];
        const cf__plan_layer *pl = net->priv->plan.l;
        cf__pool_fused_call f = {cf__grad(net, src), cf__grad(net, i), cf__out(net, i), pl[src].half, pl[i].grad_half,
                                 pl[i].half, net->batch, l->in, l->out, &l->g, c->act, c->slope, cf__rounds(net, src)};
        cf__pool_fused_backward(&f);
        net->priv->stored_bf16 = 1;
        return;
    }
    if (cf__in_grad(net, l, 0))
        cf_pool_backward(cf__in_grad(net, l, 0), cf__grad(net, i), cf__in(net, l, 0), cf__out(net, i), net->batch,
                         l->in, l->out, &l->g, l->type == CF_L_MAXPOOL);
}

/* ---- [dense]: outputs= (into out.c); flattens its input as C order (C, D, H, W) */
static int cf__dense_parse(cf__parser *p, cf_layer *l) {
    int rc;
    if ((rc = cf__get_int(p->s, p->name, "outputs", 0, 1, 1 << 24, &l->out.c)) ||
        (rc = cf__get_int(p->s, p->name, "bias", 1, 0, 1, &l->has_bias))) return rc;
    if (!l->out.c) return cf_fail("%s:%d: [dense] needs outputs=", p->name, p->s->line);
    l->w_n = (size_t)l->out.c * cf_shape_size(l->in);
    l->b_n = l->has_bias ? (size_t)l->out.c : 0;
    l->out.d = l->out.h = l->out.w = 1;
    return CF_OK;
}
static double cf__dense_flops(const cf_layer *l) { return 2.0 * (double)cf_shape_size(l->in) * l->out.c; }
static void cf__dense_forward_layer(cf_net *net, int i) {
    cf_layer *l = &net->layers[i];
    float *y = cf__out(net, i);
    if (i == net->priv->split.shard) { cf__shard_dense_forward(net, i); return; }
    cf_dense_forward(y, cf__in(net, l, 0), cf__w(net, l), cf__b(net, l), net->batch, (int)cf_shape_size(l->in),
                     l->out.c);
    cf_act_forward(y, cf__n_out(net, l), l->act, l->slope);
}
static void cf__dense_backward_layer(cf_net *net, int i) {
    cf_layer *l = &net->layers[i];
    float *dy = cf__grad(net, i);
    if (i == net->priv->split.shard) { cf__shard_dense_backward(net, i); return; }
    cf_act_backward(dy, cf__out(net, i), cf__n_out(net, l), l->act, l->slope);
    cf_dense_backward(cf__in_grad(net, l, 0), cf__dw(net, l), cf__db(net, l), dy, cf__in(net, l, 0), cf__w(net, l),
                      net->batch, (int)cf_shape_size(l->in), l->out.c);
}

/* ---- elementwise layers.  Each backward adds its input's gradient: dx += (dy/dx) dy. */
/* [flatten]: y = x as (C D H W, 1, 1, 1); dx += dy */
/* (a split network's is whole on every rank: an int, too) */
static int cf__flatten_parse(cf__parser *p, cf_layer *l) {
    if (cf_shape_size(l->in) > CF__MAX_ELEMENTS)
        return cf_fail("%s:%d: [flatten] of %dx%dx%dx%d: more than %lld values a sample", p->name, p->s->line, l->in.c,
                       l->in.d, l->in.h, l->in.w, (long long)CF__MAX_ELEMENTS);
    l->out.c = (int)cf_shape_size(l->in); l->out.d = l->out.h = l->out.w = 1;
    return CF_OK;
}
static void cf__copy_forward(cf_net *net, int i) {
    cf_layer *l = &net->layers[i];
    if (cf__split_gathers(net, i)) { cf__split_gather(net, i); return; }
    memcpy(cf__out(net, i), cf__in(net, l, 0), cf__n_out(net, l) * sizeof(float));
    net->priv->stored_bf16 = 1;   /* in bf16, a copy of bf16 values */
}
/* dx += dy (dx NULL: nothing) */
static void cf__copy_backward(cf_net *net, int i) {
    cf_layer *l = &net->layers[i];
    if (cf__split_gathers(net, i)) { cf__split_scatter(net, i); return; }
    net->priv->stored_bf16 = cf__add_to_p(cf__in_grad(net, l, 0), cf__grad(net, i), cf__n_out(net, l),
                                          cf__rounds_grad(net, l->src[0]), cf__stores_grad(net, l, 0));
}
/* [dropout]: y = mask x / (1 - rate) while training, y = x otherwise; dx += the same map of dy */
static int cf__dropout_parse(cf__parser *p, cf_layer *l) {
    return cf__get_float(p->s, p->name, "rate", 0.5f, 0.0f, 0.999f, &l->rate);
}
static uint64_t cf__dropout_seed(const cf_net *net, int layer) {
    return cf_hash64(net->seed ^ cf_hash64(net->priv->step * 1000003ULL + (uint64_t)layer + 1));
}
static void cf__dropout_forward(cf_net *net, int i) {
    cf_layer *l = &net->layers[i];
    if (net->priv->training && l->rate > 0.0f)
        cf_dropout(cf__out(net, i), cf__in(net, l, 0), cf__n_out(net, l), l->rate, cf__dropout_seed(net, i));
    else cf__copy_forward(net, i);
}
static void cf__dropout_backward(cf_net *net, int i) {
    cf_layer *l = &net->layers[i];
    float *dy = cf__grad(net, i);
    if (!cf__in_grad(net, l, 0)) return;
    /* same mask */
    if (net->priv->training && l->rate > 0.0f) cf_dropout(dy, dy, cf__n_out(net, l), l->rate, cf__dropout_seed(net, i));
    cf__copy_backward(net, i);
}
/* [activation]: y = f(x); dx += f'(x) dy, taken from y */
static void cf__act_layer_forward(cf_net *net, int i) {
    cf_layer *l = &net->layers[i];
    cf__copy_forward(net, i);
    cf_act_forward(cf__out(net, i), cf__n_out(net, l), l->act, l->slope);
    net->priv->stored_bf16 = l->act == CF_ACT_RELU || l->act == CF_ACT_LINEAR;   /* max(x, 0) of a bf16 value is one */
}
static void cf__act_layer_backward(cf_net *net, int i) {
    cf_layer *l = &net->layers[i];
    cf_act_backward(cf__grad(net, i), cf__out(net, i), cf__n_out(net, l), l->act, l->slope);
    cf__copy_backward(net, i);
}
/* [scale]: y = factor x; dx += factor dy */
static int cf__scale_parse(cf__parser *p, cf_layer *l) {
    return cf__get_float(p->s, p->name, "factor", 1.0f, -1e30f, 1e30f, &l->factor);
}
static void cf__scale_forward(cf_net *net, int i) {
    cf_layer *l = &net->layers[i];
    const float *x = cf__in(net, l, 0);
    float *y = cf__out(net, i);
    size_t k, n = cf__n_out(net, l);
    for (k = 0; k < n; k++) y[k] = l->factor * x[k];
}
static void cf__scale_backward(cf_net *net, int i) {
    cf_layer *l = &net->layers[i];
    float *dx = cf__in_grad(net, l, 0);
    const float *dy = cf__grad(net, i);
    size_t k, n = cf__n_out(net, l);
    if (dx) for (k = 0; k < n; k++) dx[k] += l->factor * dy[k];
}

/* ---- [route], [add]: layers= a list of earlier layers ("input": the network input; negative
   numbers count back from this one) */
static int cf__parse_sources(cf__parser *p, cf_layer *l) {
    cf__kv *kv = cf__find(p->s, "layers");
    char tok[256];
    const char *at;
    int is_input[CF_MAX_SRC], i;
    if (!kv) return cf_fail("%s:%d: [%s] needs layers=", p->name, p->s->line, p->s->name);
    if (strlen(kv->val) >= sizeof tok)
        return cf_fail("%s:%d: layers= is %zu characters long; a list of up to %d layers is shorter", p->name, kv->line,
                       strlen(kv->val), CF_MAX_SRC);
    l->n_src = 0;
    for (at = kv->val; *at; ) {   /* the items between commas (empty ones skipped), each into tok */
        size_t len = strcspn(at, ",");
        int v[1] = {-1}, k = l->n_src;
        memcpy(tok, at, len); tok[len] = 0;
        at += len + (at[len] == ',');
        if (!len) continue;
        if (k == CF_MAX_SRC) { l->n_src = -1; break; }
        is_input[k] = !strcmp(cf__trim(tok), "input");
        if (!is_input[k] && cf__ints(cf__trim(tok), v, 1) != 1) { l->n_src = -1; break; }
        l->src[k] = v[0];   /* the input: -1 */
        l->n_src = k + 1;
    }
    if (l->n_src < 1)
        return cf_fail("%s:%d: layers=%s is not a list of up to %d layer indices (or 'input')", p->name, kv->line,
                       kv->val, CF_MAX_SRC);
    for (i = 0; i < l->n_src; i++) {
        if (is_input[i]) continue;
        if (l->src[i] < 0) l->src[i] += p->idx;   /* -1 = the previous layer */
        if (l->src[i] < 0 || l->src[i] >= p->idx)
            return cf_fail("%s:%d: layers=%s names a layer that is not before this one", p->name, kv->line, kv->val);
    }
    return CF_OK;
}
/* [route]: the sources' channels concatenated, sample by sample; backward splits dy back */
static int cf__route_parse(cf__parser *p, cf_layer *l) {
    long long c = 0;
    int i;
    for (i = 0; i < l->n_src; i++) {
        cf_shape o = cf__src_shape(p->net, l->src[i]);
        if (o.d != l->in.d || o.h != l->in.h || o.w != l->in.w)
            return cf_fail("%s:%d: [route] inputs differ in spatial size", p->name, p->s->line);
        c += o.c;
    }
    if (c > (long long)CF__MAX_ELEMENTS)
        return cf_fail("%s:%d: [route] would have %lld channels", p->name, p->s->line, c);
    l->out.c = (int)c;
    return CF_OK;
}
static void cf__route_forward(cf_net *net, int i) {
    cf_layer *l = &net->layers[i];
    int b, j;
    for (b = 0; b < net->batch; b++) {
        float *dst = cf__out(net, i) + (size_t)b * cf_shape_size(l->out);
        for (j = 0; j < l->n_src; j++) {
            size_t m = cf_shape_size(cf__src_shape(net, l->src[j]));
            memcpy(dst, cf__in(net, l, j) + (size_t)b * m, m * sizeof(float));
            dst += m;
        }
    }
    net->priv->stored_bf16 = 1;   /* in bf16, copies of bf16 values */
}
static void cf__route_backward(cf_net *net, int i) {
    cf_layer *l = &net->layers[i];
    int b, j, rounded = 1;
    for (b = 0; b < net->batch; b++) {
        const float *src = cf__grad(net, i) + (size_t)b * cf_shape_size(l->out);
        for (j = 0; j < l->n_src; j++) {
            size_t m = cf_shape_size(cf__src_shape(net, l->src[j]));
            float *d = cf__in_grad(net, l, j);
            int rnd = cf__rounds_grad(net, l->src[j]);
            if (d && cf__add_to_p(d + (size_t)b * m, src, m, rnd, cf__stores_grad(net, l, j)) != rnd) rounded = 0;
            src += m;
        }
    }
    net->priv->stored_bf16 = rounded;   /* (when bf16: each source's part rounded as it was added) */
}
/* [add]: y = sum of the sources (same shapes); every source gets dy */
static int cf__add_parse(cf__parser *p, cf_layer *l) {
    int i;
    for (i = 1; i < l->n_src; i++) {
        cf_shape o = cf__src_shape(p->net, l->src[i]);
        if (o.c != l->in.c || o.d != l->in.d || o.h != l->in.h || o.w != l->in.w)
            return cf_fail("%s:%d: [add] inputs differ in shape", p->name, p->s->line);
    }
    return CF_OK;
}
static void cf__add_forward(cf_net *net, int i) {
    cf_layer *l = &net->layers[i];
    const float *src[CF_MAX_SRC];
    int j;
    for (j = 0; j < l->n_src; j++) src[j] = cf__in(net, l, j);
    net->priv->stored_bf16 = cf__sum_p(cf__out(net, i), src, l->n_src, cf__n_out(net, l), cf__rounds(net, i));
}
static void cf__add_backward(cf_net *net, int i) {
    cf_layer *l = &net->layers[i];
    int j, rounded = 1;
    for (j = 0; j < l->n_src; j++) {
        int rnd = cf__rounds_grad(net, l->src[j]);
        if (cf__add_to_p(cf__in_grad(net, l, j), cf__grad(net, i), cf__n_out(net, l), rnd,
                         cf__stores_grad(net, l, j)) != rnd) rounded = 0;
    }
    net->priv->stored_bf16 = rounded;
}

/* ---- [batchnorm]: y = act(gamma xhat + beta) per channel, statistics of the batch while
   training (net->priv->bn_train), the running ones otherwise */
static int cf__bn_parse(cf__parser *p, cf_layer *l) {
    int rc;
    if ((rc = cf__get_float(p->s, p->name, "momentum", 0.1f, 0.0f, 1.0f, &l->momentum)) ||
        (rc = cf__get_float(p->s, p->name, "eps", 1e-5f, 0.0f, 1.0f, &l->eps)))
        return rc;
    l->w_n = l->b_n = (size_t)l->in.c;   /* gamma, beta */
    l->s_n = 2 * (size_t)l->in.c;        /* running mean, running var */
    return CF_OK;
}
/* the batch norm call of layer i: its input, parameters, the statistics it saves for the
   backward (net->priv->bn_save), sizes and activation; the caller adds the rest */
static cf__bn_call cf__bn_layer_call(cf_net *net, int i) {
    cf_layer *l = &net->layers[i];
    cf__bn_call bn;
    memset(&bn, 0, sizeof bn);
    bn.x = cf__in(net, l, 0); bn.gamma = cf__w(net, l); bn.beta = cf__b(net, l);
    bn.mean = net->priv->bn_save + l->s_off; bn.invstd = bn.mean + l->in.c;
    bn.B = net->batch; bn.C = l->in.c; bn.P = cf__per_channel(l->in); bn.act = l->act; bn.slope = l->slope;
    return bn;
}
static void cf__bn_forward_layer(cf_net *net, int i) {
    cf_layer *l = &net->layers[i];
    float *st = net->stats + l->s_off, *sv = net->priv->bn_save + l->s_off, *y = cf__out(net, i);
    int C = l->in.c, h = cf__layer_halves(net, i), x_half = (h & CF__HALF_IN) != 0, y_half = (h & CF__HALF_OUT) != 0;
    cf__bn_call bn = cf__bn_layer_call(net, i);
    bn.y = y; bn.x_half = x_half; bn.y_half = y_half;
    if (x_half || y_half) {
        const float *x = cf__in(net, l, 0);
        if (!net->priv->rebuilding && x_half)
            cf__bn_stats_half(&bn, st, st + C, sv, sv + C, net->priv->bn_train, l->momentum, l->eps);
        else if (!net->priv->rebuilding)
            cf__bn_stats(x, st, st + C, sv, sv + C, net->batch, C, cf__per_channel(l->in), net->priv->bn_train,
                         l->momentum, l->eps, NULL);
        cf__bn_apply_h(&bn);
        net->priv->stored_bf16 = 1;
        return;
    }
    if (!net->priv->rebuilding)   /* (rebuilding: the statistics of this step's forward; the running ones stay) */
        cf__bn_stats(cf__in(net, l, 0), st, st + C, sv, sv + C, net->batch, C, cf__per_channel(l->in),
                     net->priv->bn_train, l->momentum, l->eps, net->priv->bn_sync.reduce ? &net->priv->bn_sync : NULL);
    net->priv->stored_bf16 = cf__bn_apply_p(&bn, cf__rounds(net, i));
}
static void cf__bn_backward_layer(cf_net *net, int i) {
    cf_layer *l = &net->layers[i];
    float *dy = cf__grad(net, i);
    int h = cf__layer_halves(net, i), x_half = (h & CF__HALF_IN) != 0, dx_half = (h & CF__HALF_DIN) != 0;
    int dy_half = net->priv->plan.l[i].grad_half;
    cf__bn_call bn = cf__bn_layer_call(net, i);
    bn.dy = dy; bn.dx = cf__in_grad(net, l, 0); bn.dgamma = cf__dw(net, l); bn.dbeta = cf__db(net, l);
    bn.x_half = x_half; bn.dy_half = dy_half; bn.dx_half = dx_half;
    if (x_half || dy_half || dx_half) {   /* (16 bits: the activation's derivative taken as dy is read) */
        cf__bn_backward_h(&bn, net->priv->bn_train, cf__stores_grad(net, l, 0), cf__rounds_grad(net, l->src[0]));
        net->priv->stored_bf16 = 1;
        return;
    }
    if (l->act != CF_ACT_LINEAR)   /* (its output computed again from x: not kept for this) */
        cf__bn_act_backward_p(&bn, cf__rounds(net, i));
    net->priv->stored_bf16 = cf__bn_backward_p(&bn, net->priv->bn_train,
                                               net->priv->bn_sync.reduce ? &net->priv->bn_sync : NULL,
                                               cf__rounds_grad(net, l->src[0]), cf__stores_grad(net, l, 0));
}

/* ---- [affine]: y = act(w[c] x + b[c]) per channel (DeepCAM's image-pool branch); so
   dw[c] += sum dy x, db[c] += sum dy, dx += w[c] dy */
static int cf__affine_parse(cf__parser *p, cf_layer *l) { (void)p; l->w_n = l->b_n = (size_t)l->in.c; return CF_OK; }
static void cf__affine_forward(cf_net *net, int i) {
    cf_layer *l = &net->layers[i];
    const float *x = cf__in(net, l, 0), *W = cf__w(net, l), *b = cf__b(net, l);
    float *y = cf__out(net, i);
    size_t k, n = cf__n_out(net, l), P = cf__per_channel(l->in);
    for (k = 0; k < n; k++) { size_t c = k / P % l->in.c; y[k] = W[c] * x[k] + b[c]; }
    cf_act_forward(y, n, l->act, l->slope);
}
static void cf__affine_backward(cf_net *net, int i) {
    cf_layer *l = &net->layers[i];
    const float *x = cf__in(net, l, 0), *W = cf__w(net, l);
    float *dy = cf__grad(net, i), *dW = cf__dw(net, l), *db = cf__db(net, l), *dx = cf__in_grad(net, l, 0);
    size_t k, n = cf__n_out(net, l), P = cf__per_channel(l->in);
    cf_act_backward(dy, cf__out(net, i), n, l->act, l->slope);
    for (k = 0; k < n; k++) {
        size_t c = k / P % l->in.c;
        dW[c] += dy[k] * x[k]; db[c] += dy[k];
        if (dx) dx[k] += W[c] * dy[k];
    }
}

/* ---- [gap]: (B, C, P) -> (B, C) means; dx += dy / P at every position */
static int cf__gap_parse(cf__parser *p, cf_layer *l) { (void)p; l->out.d = l->out.h = l->out.w = 1; return CF_OK; }
static void cf__gap_forward(cf_net *net, int i) {
    cf_layer *l = &net->layers[i];
    const float *x = cf__in(net, l, 0);
    float *y = cf__out(net, i);
    size_t P = cf__per_channel(l->in), k, p, n = cf__n_out(net, l);
    for (k = 0; k < n; k++) { double s = 0.0; for (p = 0; p < P; p++) s += x[k * P + p]; y[k] = (float)(s / P); }
}
static void cf__gap_backward(cf_net *net, int i) {
    cf_layer *l = &net->layers[i];
    float *dx = cf__in_grad(net, l, 0);
    const float *dy = cf__grad(net, i);
    size_t P = cf__per_channel(l->in), k, p, n = cf__n_out(net, l);
    if (dx) for (k = 0; k < n; k++) for (p = 0; p < P; p++) dx[k * P + p] += dy[k] / (float)P;
}

/* ---- [broadcast]: (B, C) -> (B, C, P) with the spatial size of layer like=; dx += sum over P of dy */
static int cf__broadcast_parse(cf__parser *p, cf_layer *l) {
    int rc, idx = p->idx;
    if ((rc = cf__get_int(p->s, p->name, "like", 0, -idx, idx - 1, &l->like))) return rc;
    if (!cf__find(p->s, "like"))
        return cf_fail("%s:%d: [broadcast] needs like= (the layer whose spatial size to take)", p->name, p->s->line);
    if (l->like < 0) l->like += idx;
    if (l->like < 0 || l->like >= idx)
        return cf_fail("%s:%d: like= names a layer that is not before this one", p->name, p->s->line);
    if (l->in.d != 1 || l->in.h != 1 || l->in.w != 1)
        return cf_fail("%s:%d: [broadcast] needs an input of spatial size 1 (e.g. after [gap])", p->name, p->s->line);
    l->out.d = p->net->layers[l->like].out.d; l->out.h = p->net->layers[l->like].out.h;
    l->out.w = p->net->layers[l->like].out.w;
    return CF_OK;
}
static void cf__broadcast_forward(cf_net *net, int i) {
    cf_layer *l = &net->layers[i];
    const float *x = cf__in(net, l, 0);
    float *y = cf__out(net, i);
    size_t P = cf__per_channel(l->out), k, p, n = cf_shape_size(l->in) * net->batch;
    for (k = 0; k < n; k++) for (p = 0; p < P; p++) y[k * P + p] = x[k];
}
static void cf__broadcast_backward(cf_net *net, int i) {
    cf_layer *l = &net->layers[i];
    float *dx = cf__in_grad(net, l, 0);
    const float *dy = cf__grad(net, i);
    size_t P = cf__per_channel(l->out), k, p, n = cf_shape_size(l->in) * net->batch;
    if (dx) for (k = 0; k < n; k++) { double s = 0.0; for (p = 0; p < P; p++) s += dy[k * P + p]; dx[k] += (float)s; }
}

/* ---- the layer-type table, in the order of CF_L_*.  flags: what the type's backward reads
   besides gradients (its input; its output, or its output when it has an activation),
   whether its output is cheap to rebuild from its inputs (section 9), which common keys it
   takes (activation=, slope=; init=, l2=, bias_init=; layers=), whether its backward can store
   into a source's gradient when it is that gradient's first writer (cf__stores_grad). */
enum { CF__READS_IN = 1, CF__READS_OUT = 2, CF__READS_OUT_IF_ACT = 4, CF__CHEAP = 8, CF__ACT_KEYS = 16,
      CF__INIT_KEYS = 32, CF__SOURCES = 64, CF__STORES = 128 };
typedef struct {
    const char *name;
    int (*parse)(cf__parser *p, cf_layer *l);   /* its keys -> fields, output shape, parameter counts */
    double (*flops)(const cf_layer *l);         /* forward, per sample */
    void (*forward)(cf_net *net, int i);
    void (*backward)(cf_net *net, int i);
    int flags;
} cf__layer_type;
static const cf__layer_type cf__types[CF_L_NTYPES] = {
    {"conv", cf__conv_parse, cf__conv_flops, cf__conv_forward, cf__conv_backward,
     CF__READS_IN | CF__READS_OUT_IF_ACT | CF__ACT_KEYS | CF__INIT_KEYS | CF__STORES},
    {"maxpool", cf__pool_parse, cf__pool_flops, cf__pool_forward_layer, cf__pool_backward_layer,
     CF__READS_IN | CF__READS_OUT},
    {"avgpool", cf__pool_parse, cf__pool_flops, cf__pool_forward_layer, cf__pool_backward_layer,
     CF__READS_IN | CF__READS_OUT},
    {"dense", cf__dense_parse, cf__dense_flops, cf__dense_forward_layer, cf__dense_backward_layer,
     CF__READS_IN | CF__READS_OUT_IF_ACT | CF__ACT_KEYS | CF__INIT_KEYS},
    {"flatten", cf__flatten_parse, cf__size_flops, cf__copy_forward, cf__copy_backward, CF__CHEAP | CF__STORES},
    {"dropout", cf__dropout_parse, cf__size_flops, cf__dropout_forward, cf__dropout_backward, CF__CHEAP | CF__STORES},
    {"activation", cf__no_keys, cf__size_flops, cf__act_layer_forward, cf__act_layer_backward,
     CF__READS_OUT | CF__CHEAP | CF__ACT_KEYS | CF__STORES},
    {"scale", cf__scale_parse, cf__size_flops, cf__scale_forward, cf__scale_backward, CF__CHEAP},
    {"route", cf__route_parse, cf__size_flops, cf__route_forward, cf__route_backward,
     CF__CHEAP | CF__SOURCES | CF__STORES},
    {"add", cf__add_parse, cf__size_flops, cf__add_forward, cf__add_backward, CF__CHEAP | CF__SOURCES | CF__STORES},
    {"batchnorm", cf__bn_parse, cf__size_flops, cf__bn_forward_layer, cf__bn_backward_layer,
     CF__READS_IN | CF__CHEAP | CF__ACT_KEYS | CF__STORES},
    {"deconv", cf__deconv_parse, cf__deconv_flops, cf__deconv_forward, cf__deconv_backward,
     CF__READS_IN | CF__READS_OUT_IF_ACT | CF__ACT_KEYS | CF__INIT_KEYS | CF__STORES},
    {"gap", cf__gap_parse, cf__size_flops, cf__gap_forward, cf__gap_backward, 0},
    {"broadcast", cf__broadcast_parse, cf__size_flops, cf__broadcast_forward, cf__broadcast_backward, CF__CHEAP},
    {"affine", cf__affine_parse, cf__size_flops, cf__affine_forward, cf__affine_backward,
     CF__READS_IN | CF__READS_OUT_IF_ACT | CF__CHEAP | CF__ACT_KEYS},
};
CFDEF const char *cf_layer_type_name(int type) { return type >= 0 && type < CF_L_NTYPES ? cf__types[type].name : "?"; }
CFDEF double cf_layer_flops(const cf_layer *l) {
    CF__RETURN_UNLESS(l && l->type >= 0 && l->type < CF_L_NTYPES, 0.0,
                      "cf_layer_flops: not a layer of a parsed network");
    return cf__types[l->type].flops(l);
}

/* activation= (linear, relu, leaky, tanh) and slope= (leaky needs it said) */
static int cf__act_keys(cf__parser *p, cf_layer *l) {
    int rc;
    if ((rc = cf__get_choice(p->s, p->name, "activation", cf__act_names, 4, CF_ACT_LINEAR, &l->act)) ||
        (rc = cf__get_float(p->s, p->name, "slope", 0.01f, 1e-6f, 1.0f, &l->slope)))
        return rc;
    if (l->act == CF_ACT_LEAKY && !cf__find(p->s, "slope"))
        return cf_fail("%s:%d: activation=leaky needs slope= (Keras uses 0.3, PyTorch 0.01)", p->name, p->s->line);
    return CF_OK;
}
/* init= (the weights' initializer), l2= (optimizer L2 on the kernel), bias_init= (zeros, torch or a number) */
static int cf__init_keys(cf__parser *p, cf_layer *l) {
    cf__kv *bi = cf__find(p->s, "bias_init");
    int rc;
    char *end;
    double v;
    if ((rc = cf__get_choice(p->s, p->name, "init", cf__init_names, 5, CF_INIT_GLOROT_UNIFORM, &l->init)) ||
        (rc = cf__get_int(p->s, p->name, "l2", 0, 0, 1, &l->l2)))
        return rc;
    l->bias_init = CF_INIT_ZEROS;
    if (!bi || !strcmp(bi->val, "zeros")) return CF_OK;
    if (!strcmp(bi->val, "torch")) { l->bias_init = CF_INIT_TORCH; return CF_OK; }
    l->bias_init = CF_INIT_CONST;
    v = strtod(bi->val, &end);
    if (end == bi->val || *end || !(v >= -1e6 && v <= 1e6))
        return cf_fail("%s:%d: bias_init=%s: use zeros, torch or a number in [-1e6, 1e6]", p->name, bi->line, bi->val);
    l->bias_value = (float)v;
    return CF_OK;
}
/* every key must have been understood (lookups mark what they read); the output non-empty */
static int cf__check_layer(cf__parser *p, const cf_layer *l) {
    cf__section *s = p->s;
    int i;
    for (i = 0; i < s->n_kv; i++)   /* (a key given twice is refused by cf__split) */
        if (!s->kv[i].used)
            return cf_fail("%s:%d: unknown key '%s' in [%s]", p->name, s->kv[i].line, s->kv[i].key, s->name);
    if (l->out.c <= 0 || l->out.d <= 0 || l->out.h <= 0 || l->out.w <= 0)
        return cf_fail("%s:%d: [%s] gets input %dx%dx%dx%d and would produce an empty output", p->name, s->line,
                       s->name, l->in.c, l->in.d, l->in.h, l->in.w);
    if (l->out.d > CF__MAX_EXTENT || l->out.h > CF__MAX_EXTENT || l->out.w > CF__MAX_EXTENT ||
        cf_shape_size(l->out) > CF__MAX_ELEMENTS * CF__MAX_SLABS)
        return cf_fail("%s:%d: [%s] would output %dx%dx%dx%d per sample "
                       "(at most %d per axis, %lld values a rank, %d ranks a sample)", p->name, s->line,
                       s->name, l->out.c, l->out.d, l->out.h, l->out.w,
                       CF__MAX_EXTENT, (long long)CF__MAX_ELEMENTS, CF__MAX_SLABS);
    if (l->w_n > CF__MAX_ELEMENTS)
        return cf_fail("%s:%d: [%s] would have %zu weights (at most %lld)", p->name, s->line, s->name, l->w_n,
                       (long long)CF__MAX_ELEMENTS);
    return CF_OK;
}

/* One section -> one layer: its type's parse, then the keys several types share. */
static int cf__build_layer(cf_net *net, int idx, cf__section *s, const char *name) {
    cf_layer *l = &net->layers[idx];
    cf__parser p;
    const cf__layer_type *ty;
    int t, rc;
    for (t = 0; t < CF_L_NTYPES && strcmp(s->name, cf__types[t].name); t++) {}
    if (t == CF_L_NTYPES) return cf_fail("%s:%d: unknown section [%s]", name, s->line, s->name);
    ty = &cf__types[t];
    p.net = net; p.idx = idx; p.s = s; p.name = name; p.is2d = net->input.d == 1;
    memset(l, 0, sizeof *l);
    l->type = t; l->line = s->line; l->n_src = 1; l->src[0] = idx - 1;
    if ((ty->flags & CF__SOURCES) && (rc = cf__parse_sources(&p, l))) return rc;
    l->in = cf__src_shape(net, l->src[0]);
    l->out = l->in;
    l->groups = 1; l->act = CF_ACT_LINEAR; l->factor = 1.0f;
    if ((rc = ty->parse(&p, l))) return rc;
    if ((ty->flags & CF__ACT_KEYS) && (rc = cf__act_keys(&p, l))) return rc;
    if ((ty->flags & CF__INIT_KEYS) && (rc = cf__init_keys(&p, l))) return rc;
    return cf__check_layer(&p, l);
}
/* ================================================================ 6. networks
   A network from its cfg (cf_net_parse: each section one layer of section 5's table), its
   parameters initialized, its bf16 form, forward (the layers in order) and backward (in
   reverse), the loss, the mode, and looking inside. */

#ifndef CF_WS_FLOATS
#define CF_WS_FLOATS ((size_t)8 << 20)   /* 32 MiB per im2col workspace (two are used) */
#endif


/* softmax_ce: the classes are the output channels.  class_weights= a list, 'uniform', or
   'reference' (the default for 3 classes): the DeepCAM reference's f^(-1/8) of its class
   frequencies f = (0.98627, 0.000458, 0.01327) (background, cyclone, river). */
static int cf__class_weights(cf_net *net, cf__section *s, const char *name) {
    static const double freq[3] = {0.986267818390377, 0.0004578708870701058, 0.01327431072255291};
    cf__kv *kv = cf__find(s, "class_weights");
    int K = net->layers[net->n_layers - 1].out.c, k;
    cf_layer *last = &net->layers[net->n_layers - 1];
    net->n_targets = (int)((size_t)last->out.d * last->out.h * last->out.w);
    net->n_classes = K;
    if (K < 2 || K > CF_MAX_CLASSES)
        return cf_fail("%s: loss=softmax_ce needs 2 to %d output channels (classes), the last layer has %d", name,
                       CF_MAX_CLASSES, K);
    for (k = 0; k < K; k++) net->priv->class_w[k] = 1.0f;
    if ((!kv && K == 3) || (kv && !strcmp(kv->val, "reference"))) {
        if (K != 3) return cf_fail("%s:%d: class_weights=reference is for 3 classes; the model has %d", name, kv->line,
                                   K);
        for (k = 0; k < 3; k++) net->priv->class_w[k] = (float)pow(freq[k], -0.125);
    } else if (kv && strcmp(kv->val, "uniform")) {
        const char *p = kv->val;
        for (k = 0; k < K; k++) {
            char *end;
            double v = strtod(p, &end);
            if (end == p || !(v >= 0 && v < 1e6)) break;
            net->priv->class_w[k] = (float)v;
            p = end; while (*p == ' ') p++;
            if (*p == ',') p++;
        }
        if (k != K || *p)
            return cf_fail("%s:%d: class_weights=%s: give reference, uniform or %d non-negative numbers", name,
                           kv->line, kv->val, K);
    }
    return CF_OK;
}

/* [net]: input=, loss=, class_weights= (applied once the classes are known); then the
   --input-shape override, which may change the size but not the channels or dimensionality */
static int cf__net_section(cf_net *net, cf__section *s, const char *name, const cf_shape *shape_override) {
    cf__kv *in = cf__find(s, "input");
    const cf_shape *o = shape_override;
    int i, rc;
    if (!in) return cf_fail("%s:%d: [net] needs input=CxDxHxW", name, s->line);
    if (cf_parse_shape(in->val, &net->input))
        return cf_fail("%s:%d: input=%s: %s", name, in->line, in->val, cf_failure_reason());
    if ((rc = cf__get_choice(s, name, "loss", cf__loss_names, 3, CF_LOSS_MSE, &net->loss))) return rc;
    if (cf__find(s, "class_weights") && net->loss != CF_LOSS_SOFTMAX_CE)
        return cf_fail("%s: class_weights= needs loss=softmax_ce", name);
    for (i = 0; i < s->n_kv; i++)
        if (!s->kv[i].used) return cf_fail("%s:%d: unknown key '%s' in [net]", name, s->kv[i].line, s->kv[i].key);
    if (!o) return CF_OK;
    if (o->c != net->input.c)
        return cf_fail("%s: --input-shape %dx%dx%dx%d has %d channels; "
                       "the model's input %dx%dx%dx%d has %d (only the spatial size can change)",
                       name, o->c, o->d, o->h, o->w, o->c,
                       net->input.c, net->input.d, net->input.h, net->input.w, net->input.c);
    if ((o->d == 1) != (net->input.d == 1))   /* a depth of 1 is a 2-D shape (CxHxW) */
        return cf_fail("%s: --input-shape %dx%dx%dx%d is %s (depth %d); the model's input %dx%dx%dx%d is %s: give %s",
                       name, o->c, o->d, o->h, o->w, o->d == 1 ? "2-D" : "3-D", o->d, net->input.c, net->input.d,
                       net->input.h, net->input.w, net->input.d == 1 ? "2-D" : "3-D",
                       net->input.d == 1 ? "CxHxW" : "CxDxHxW with a depth above 1");
    net->input = *o;
    return CF_OK;
}

/* the layers, then their parameters laid out layer by layer (weight, bias) and their
   running statistics */
static int cf__net_layers(cf_net *net, cf__section *secs, int n, const char *name) {
    int i, rc;
    net->n_layers = n;
    if (n < 1) return cf_fail("%s: no layers after [net]", name);
    if (!(net->layers = CF__NEW(cf_layer, n)) || !(net->priv->plan.l = CF__NEW(cf__plan_layer, n)))
        return cf_fail("%s: %s (%d layers)", name, cf_failure_reason(), n);
    for (i = 0; i < n; i++) {
        cf_layer *l = &net->layers[i];
        if ((rc = cf__build_layer(net, i, &secs[i], name))) return rc;
        if (l->w_n) { l->w_off = net->n_params; net->n_params += l->w_n; }
        if (l->b_n) { l->b_off = net->n_params; net->n_params += l->b_n; }
        if (l->s_n) { l->s_off = net->n_stats; net->n_stats += l->s_n; }
    }
    net->n_outputs = (int)cf_shape_size(net->layers[n - 1].out);
    net->n_targets = net->n_outputs;
    return CF_OK;
}

/* the workspace: the largest im2col tile a convolution needs (columns: output positions;
   transposed: input positions), capped by CF_WS_FLOATS; at least the buffers of the bf16 GEMM
   on 16-bit operands where a conv is pointwise (section 13, for a bf16 network's halves) */
static size_t cf__workspace_floats(const cf_net *net) {
    size_t ws = 1;
    int i;
    for (i = 0; i < net->n_layers; i++) {
        const cf_layer *l = &net->layers[i];
        size_t kvol = (size_t)l->g.k[0] * l->g.k[1] * l->g.k[2], rows, need = 0;
        if (l->type == CF_L_CONV) {
            rows = (size_t)l->in.c / l->groups * kvol;
            need = rows * cf__tile(rows, (size_t)l->out.d * l->out.h * l->out.w, CF_WS_FLOATS);
            if (kvol == 1 && l->groups < l->in.c &&
                need < cf__pointwise_ws_floats() + (size_t)l->out.c / l->groups * 32)   /* (a 16-bit y's blocks) */
                need = cf__pointwise_ws_floats() + (size_t)l->out.c / l->groups * 32;
        } else if (l->type == CF_L_DECONV) {
            size_t band = cf__pointwise_ws_floats() + cf__band_floats(l, CF_WS_FLOATS);   /* (a 16-bit y's band, 2-D) */
            rows = (size_t)l->out.c * kvol;
            need = rows * cf__tile(rows, (size_t)l->in.d * l->in.h * l->in.w, CF_WS_FLOATS);
            if (l->in.d == 1 && need < band && band <= CF_WS_FLOATS) need = band;
        }
        if (need > ws) ws = need;
    }
    return ws;
}

CFDEF int cf_net_parse(cf_net *net, const char *text, const char *name, const cf_shape *shape_override) {
    cf__section *secs = NULL;
    int n_secs = 0, rc;
    char *buf;
    if (!net || !text) return cf_fail("cf_net_parse: the network and the cfg text must not be NULL");
    if (!name) name = "(cfg text)";
    buf = cf__strdup(text);
    memset(net, 0, sizeof *net);
    if (!buf || !(net->priv = CF__NEW(struct cf__net_private, 1))) { CF_FREE(buf); return CF_ERR; }
    net->priv->magic = CF__NET_MAGIC;
    net->priv->split.shard = -1;
    if ((rc = cf__split(buf, name, &secs, &n_secs))) { CF_FREE(buf); CF_FREE(net->priv); net->priv = NULL; return rc; }
    if (!n_secs || strcmp(secs[0].name, "net"))
        rc = cf_fail("%s:%d: the first section must be [net]", name, n_secs ? secs[0].line : 1);
    if (!rc) rc = cf__net_section(net, &secs[0], name, shape_override);
    if (!rc) rc = cf__net_layers(net, secs + 1, n_secs - 1, name);
    if (!rc && net->loss == CF_LOSS_SOFTMAX_CE) rc = cf__class_weights(net, &secs[0], name);
    if (!rc) {
        net->params = CF__NEW(float, net->n_params); net->grads = CF__NEW(float, net->n_params);
        net->opt = CF__NEW(float, net->n_params); net->opt_slots = 1;
        net->stats = CF__NEW(float, net->n_stats + 1); net->priv->bn_save = CF__NEW(float, net->n_stats + 1);
        net->cfg_text = cf__strdup(text); net->cfg_name = cf__strdup(name);
        net->priv->ws_floats = cf__workspace_floats(net);
        net->priv->ws = CF__NEW(float, 2 * net->priv->ws_floats);
        if (!net->params || !net->grads || !net->opt || !net->stats || !net->priv->bn_save || !net->cfg_text ||
            !net->cfg_name || !net->priv->ws)
            rc = cf_fail("%s: %s (for %zu parameters, their gradients and optimizer state, and %zu workspace floats)",
                         name, cf_failure_reason(), net->n_params, 2 * net->priv->ws_floats);
    }
    cf__free_sections(secs, n_secs);
    CF_FREE(buf);
    if (rc) {
        char keep[sizeof cf__err];
        memcpy(keep, cf__err, sizeof keep);
        cf_net_free(net);
        memcpy(cf__err, keep, sizeof keep);
    }
    return rc;
}

static void cf__split_free(cf_net *net);   /* (section 8) */
CFDEF void cf_net_free(cf_net *net) {
    struct cf__net_private *p = net ? net->priv : NULL;
    if (!net) return;
    if (p) cf__split_free(net);
    if (p) {
        p->magic = 0;
        CF_FREE(p->bn_sync.work);
        CF_FREE(p->plan.l);
        CF_FREE(p->bn_save);
        CF_FREE(p->arena);
        CF_FREE(p->ws);
        CF_FREE(p->wq);
        CF_FREE(p->xq);
        CF_FREE(p);
    }
    CF_FREE(net->cfg_text); CF_FREE(net->cfg_name); CF_FREE(net->layers);
    CF_FREE(net->params); CF_FREE(net->grads); CF_FREE(net->opt); CF_FREE(net->stats);
    memset(net, 0, sizeof *net);
}

CFDEF int cf_net_sync_bn(cf_net *net, void (*reduce)(double *buf, int n, void *ctx), void *ctx) {
    int i, C = 0;
    if (cf__net_check(net, "cf_net_sync_bn")) return CF_ERR;
    CF_FREE(net->priv->bn_sync.work);
    memset(&net->priv->bn_sync, 0, sizeof net->priv->bn_sync);
    /* the next forward plans anew (section 9, halves: batch norms synchronized read fp32) */
    net->priv->plan.batch = 0;
    if (!reduce) return CF_OK;
    for (i = 0; i < net->n_layers; i++)
        if (net->layers[i].type == CF_L_BATCHNORM && net->layers[i].in.c > C) C = net->layers[i].in.c;
    if (!(net->priv->bn_sync.work = CF__NEW(double, 2 * C + 1))) return CF_ERR;
    net->priv->bn_sync.reduce = reduce; net->priv->bn_sync.ctx = ctx;
    return CF_OK;
}

#ifndef CF_NO_FILES
static char *cf__read_text(const char *path) {
    size_t n;
    int fd = cf__open_regular(path, &n);
    char *buf;
    if (fd < 0) return NULL;
    if (n > ((size_t)64 << 20)) {
        close(fd);
        cf_fail("%s: %zu bytes is too large for a text file", path, n);
        return NULL;
    }
    buf = CF__NEW(char, n + 1);
    if (buf && cf__read_full(fd, buf, n) != n) { CF_FREE(buf); buf = NULL; cf_fail("%s: read error", path); }
    close(fd);
    if (buf && strlen(buf) != n) {
        CF_FREE(buf);
        cf_fail("%s: contains a NUL byte: not a text file", path);
        return NULL;
    }
    return buf;
}
CFDEF int cf_net_load_cfg(cf_net *net, const char *path, const cf_shape *shape_override) {
    char *text;
    int rc;
    if (!net || !path) return cf_fail("cf_net_load_cfg: the network and the path must not be NULL");
    if (!(text = cf__read_text(path))) return CF_ERR;
    rc = cf_net_parse(net, text, path, shape_override);
    CF_FREE(text);
    return rc;
}
#endif

/* fan_in / fan_out as PyTorch computes them: (C/groups)*kvol and OC*kvol */
static void cf__init_tensor(float *p, size_t n, int kind, double fan_in, double fan_out, float value, cf_rng *r) {
    size_t i;
    double a;
    switch (kind) {
    case CF_INIT_GLOROT_UNIFORM:
        a = sqrt(6.0 / (fan_in + fan_out));
        for (i = 0; i < n; i++) p[i] = (float)((2.0 * cf_rng_uniform64(r) - 1.0) * a);
        break;
    case CF_INIT_KAIMING_UNIFORM:
        a = sqrt(6.0 / fan_in);
        for (i = 0; i < n; i++) p[i] = (float)((2.0 * cf_rng_uniform64(r) - 1.0) * a);
        break;
    case CF_INIT_KAIMING_NORMAL:
        a = sqrt(2.0 / fan_in);
        for (i = 0; i < n; i++) p[i] = (float)(cf_rng_normal(r) * a);
        break;
    case CF_INIT_TORCH:
        a = 1.0 / sqrt(fan_in);
        for (i = 0; i < n; i++) p[i] = (float)((2.0 * cf_rng_uniform64(r) - 1.0) * a);
        break;
    case CF_INIT_CONST: for (i = 0; i < n; i++) p[i] = value; break;
    default: for (i = 0; i < n; i++) p[i] = 0.0f; break;
    }
}


/* a [dense] whose rows are split across ranks (section 8): every row drawn in turn, as the
   whole layer's, this rank's kept */
static int cf__init_shard(cf_net *net, const cf_layer *l, double fan_in, double fan_out, cf_rng *r) {
    size_t F = cf_shape_size(l->in), o0 = (size_t)net->priv->split.r * net->priv->split.rows,
        R = (size_t)net->priv->split.rows, o;
    float *other = CF__NEW(float, F > (size_t)l->out.c ? F : (size_t)l->out.c);
    if (!other) return CF_ERR;
    for (o = 0; o < (size_t)l->out.c; o++)
        cf__init_tensor(o >= o0 && o < o0 + R ? net->params + l->w_off + (o - o0) * F : other, F, l->init, fan_in,
                        fan_out, 0.0f, r);
    if (l->b_n) {
        cf__init_tensor(other, (size_t)l->out.c, l->bias_init, fan_in, fan_out, l->bias_value, r);
        memcpy(net->params + l->b_off, other + o0, R * sizeof(float));
    }
    CF_FREE(other);
    return CF_OK;
}

/* Initial weights, each layer from its own stream (inserting a layer does not change the
   others' weights); fan_in and fan_out as PyTorch computes them.  Batch norm and affine
   layers start as the identity, running statistics at mean 0, variance 1. */
CFDEF int cf_net_init(cf_net *net, uint64_t seed) {
    int i;
    if (cf__net_check(net, "cf_net_init")) return CF_ERR;
    net->seed = seed;
    for (i = 0; i < net->n_layers; i++) {
        cf_layer *l = &net->layers[i];
        cf_rng r = cf_rng_seed(cf_hash64(seed * 0x100000001b3ULL + (uint64_t)i));
        double kvol = (double)l->g.k[0] * l->g.k[1] * l->g.k[2], fan_in, fan_out;
        size_t c;
        if (l->type == CF_L_BATCHNORM || l->type == CF_L_AFFINE) {
            for (c = 0; c < l->w_n; c++) { net->params[l->w_off + c] = 1.0f; net->params[l->b_off + c] = 0.0f; }
            for (c = 0; c < l->s_n / 2; c++) {
                net->stats[l->s_off + c] = 0.0f;
                net->stats[l->s_off + l->s_n / 2 + c] = 1.0f;
            }
            continue;
        }
        if (!l->w_n) continue;
        if (l->type == CF_L_CONV) { fan_in = (double)l->in.c / l->groups * kvol; fan_out = (double)l->out.c * kvol; }
        /* PyTorch: weight.size(1) * kvol */
        else if (l->type == CF_L_DECONV) { fan_in = (double)l->out.c * kvol; fan_out = (double)l->in.c * kvol; }
        else { fan_in = (double)cf_shape_size(l->in); fan_out = l->out.c; }
        if (i == net->priv->split.shard) { if (cf__init_shard(net, l, fan_in, fan_out, &r)) return CF_ERR; continue; }
        cf__init_tensor(net->params + l->w_off, l->w_n, l->init, fan_in, fan_out, 0.0f, &r);
        if (l->b_n) cf__init_tensor(net->params + l->b_off, l->b_n, l->bias_init, fan_in, fan_out, l->bias_value, &r);
    }
    memset(net->opt, 0, (size_t)net->opt_slots * net->n_params * sizeof(float));
    return CF_OK;
}

/* a layer index of a network that has run a forward (its arena planned) */
static int cf__layer_ok(const cf_net *net, int layer) {
    return cf__net_ok(net) && layer >= 0 && layer < net->n_layers && net->priv->arena;
}
CFDEF float *cf_net_output(cf_net *net, int layer) {
    CF__RETURN_UNLESS(cf__layer_ok(net, layer), NULL, "cf_net_output: not a layer of a network that has run a forward");
    return net->priv->plan.l[layer].half ? NULL : cf__out(net, layer);
}
CFDEF float *cf_net_output_grad(cf_net *net, int layer) {
    const cf__plan_layer *pl;
    CF__RETURN_UNLESS(cf__layer_ok(net, layer), NULL,
                      "cf_net_output_grad: not a layer of a network that has run a forward");
    pl = &net->priv->plan.l[layer];
    return (pl->fused_pool >= 0 ? pl->half : pl->grad_half) ? NULL : cf__grad(net, layer);
}

/* ---- bf16 (cf_net_set_precision): each layer's bf16 form is its fp32 code on rounded
   operands, its output rounded once when stored.  The operands: the network input, rounded
   into its copy once per forward (here); a convolution's kernel, rounded into wq as the layer
   reads it (cf__w); the outputs and output gradients of
   the layers before the dense head, rounded as each layer's forward and backward store them
   (cf__layer_forward, cf__layer_backward: in a pass after the layer, or by the layer itself
   as it stores, which then sets stored_bf16: a convolution's forward, a max pool's forward
   and its fused backward, the copies (route, flatten, relu)); dL/dz inside a convolution's backward (cf__round_dz).
   Everything else is fp32. */
CFDEF const char *cf_precision_name(int precision) { return precision == CF_BF16 ? "bf16" : "fp32"; }
CFDEF int cf_net_precision(const cf_net *net) {
    return cf__net_check(net, "cf_net_precision") ? CF_ERR : net->priv->precision;
}
CFDEF int cf_net_set_precision(cf_net *net, int precision) {
    struct cf__net_private *p;
    if (cf__net_check(net, "cf_net_set_precision")) return CF_ERR;
    p = net->priv;
    if (precision != CF_FP32 && precision != CF_BF16)
        return cf_fail("precision %d is neither CF_FP32 nor CF_BF16", precision);
    p->precision = precision;
    CF_FREE(p->wq); p->wq = NULL;
    CF_FREE(p->xq); p->xq = NULL; p->xq_n = 0;
    for (p->head = 0; p->head < net->n_layers && net->layers[p->head].type != CF_L_DENSE; p->head++) {}
    if (precision == CF_BF16) {
        size_t most = 1;
        int i;
        for (i = 0; i < net->n_layers; i++)
            if (cf__rounds_kernel(net, &net->layers[i]) && net->layers[i].w_n > most) most = net->layers[i].w_n;
        if (!(p->wq = CF__NEW(float, most)))
            return cf_fail("bf16: %s (room for a rounded kernel)", cf_failure_reason());
    }
    return CF_OK;
}
/* the input x (B samples), rounded into its copy */
static int cf__round_operands(cf_net *net, const float *x, int B) {
    struct cf__net_private *p = net->priv;
    size_t n = (size_t)B * cf_shape_size(cf__src_shape(net, -1));
    if (n > p->xq_n) {
        CF_FREE(p->xq); p->xq_n = 0;
        if (!(p->xq = CF__NEW(float, n))) return cf_fail("bf16: %s (the rounded input)", cf_failure_reason());
        p->xq_n = n;
    }
    memcpy(p->xq, x, n * sizeof(float));
    cf_bf16_round(p->xq, n);
    return CF_OK;
}
static void cf__layer_forward(cf_net *net, int i) {
    net->priv->stored_bf16 = 0;
    cf__types[net->layers[i].type].forward(net, i);
    if (cf__rounds(net, i) && !net->priv->stored_bf16) cf_bf16_round(cf__out(net, i), cf__n_out(net, &net->layers[i]));
}
static void cf__layer_backward(cf_net *net, int i) {
    const cf_layer *l = &net->layers[i];
    int k;
    net->priv->stored_bf16 = 0;
    cf__types[l->type].backward(net, i);
    /* the gradients it added into (in 16 bits: bf16 values as stored) */
    for (k = 0; k < l->n_src && !net->priv->stored_bf16; k++)
        if (cf__rounds_grad(net, l->src[k]))
            cf_bf16_round(cf__grad(net, l->src[k]), cf__n_out(net, &net->layers[l->src[k]]));
}

/* ---- forward and backward: the layers in order, then in reverse */
static int cf__plan(cf_net *net, int B);
/* the outputs of the last forward are still there: no backward since, or every output kept
   (plan flag CF__PLAN_KEEP, section 9) */
static int cf__outputs_valid(const cf_net *net) {
    return net->priv->x && net->priv->arena && (!net->priv->acts_clobbered || (net->priv->plan.flags & 1));
}
CFDEF const float *cf_net_forward_from(cf_net *net, int first) {
    int i;
    CF__RETURN_UNLESS(cf__net_ok(net) && net->priv->x && net->priv->arena && first >= 0 && first <= net->n_layers
                && (first == 0 || (net->priv->plan.flags & 1)),
                NULL, "cf_net_forward_from: needs a network that has run a forward with every output kept "
                      "(cf_net_keep_outputs), and a layer of it");
    net->priv->acts_clobbered = 0;
    for (i = first; i < net->n_layers; i++) {
        if (net->priv->layer_hook) net->priv->layer_hook(net, i, 0, net->priv->layer_ctx);
        cf__layer_forward(net, i);
        if (net->priv->layer_hook) net->priv->layer_hook(net, i, 1, net->priv->layer_ctx);
    }
    return cf__out(net, net->n_layers - 1);
}

CFDEF const float *cf_net_forward(cf_net *net, const float *x, int B) {
    if (cf__net_check(net, "cf_net_forward")) return NULL;
    if (!x) { cf_fail("cf_net_forward: x is NULL"); return NULL; }
    if (net->priv->split.on && net->priv->split.K > 1 && !net->priv->split.comm) {
        cf_fail("%s: split into %d slabs for planning only: "
                "a forward needs the ranks of an MPI run (cf_net_set_spatial)",
                net->cfg_name, net->priv->split.K);
        return NULL;
    }
    if (cf_net_set_batch(net, B)) return NULL;
    if (net->priv->precision == CF_BF16 && !net->priv->plan.input_raw) {   /* (raw: its readers round it, section 9) */
        if (cf__round_operands(net, x, B)) return NULL;
        x = net->priv->xq;
    }
    net->priv->x = x;
    return cf_net_forward_from(net, 0);
}

/* the gradient blocks whose life starts at layer i's backward (section 9): zeroed there,
   since gradients are accumulated; a fused conv's is written by its pool, not accumulated,
   and one whose first writer stores (section 9, stores) is not zeroed */
static void cf__zero_grads_starting(cf_net *net, int i) {
    int j, n = net->n_layers;
    for (j = 0; j < n; j++) {
        const cf__plan_layer *p = &net->priv->plan.l[j];
        int start = p->last_read < n - 1 ? p->last_read : n - 1;
        if (start == i && p->fused_pool < 0 && !p->grad_store)
            memset(cf__grad(net, j), 0,
                   cf__n_out(net, &net->layers[j]) * (p->grad_half ? sizeof(cf_bf16) : sizeof(float)));
    }
}

CFDEF int cf_net_backward(cf_net *net, const float *dout) {
    int i, j, n;
    if (cf__net_check(net, "cf_net_backward")) return CF_ERR;
    if (!dout) return cf_fail("cf_net_backward: dout is NULL");
    if (!cf__outputs_valid(net))
        return cf_fail("cf_net_backward: no forward since the last backward "
                       "(its outputs are gone; cf_net_keep_outputs keeps them)");
    n = net->n_layers;
    /* the plan is the one the forward used (a setting changed since takes effect at the next
       forward): the outputs backward reads are where that forward put them */
    for (i = n - 1; i >= 0; i--) {
        cf__zero_grads_starting(net, i);
        net->priv->acts_clobbered = 1;
        /* the loss gradient, stored as every output gradient is (rounded in bf16 before a dense head) */
        if (i == n - 1) {
            memcpy(cf__grad(net, i), dout, (size_t)net->n_outputs * net->batch * sizeof(float));
            if (cf__rounds(net, i)) cf_bf16_round(cf__grad(net, i), (size_t)net->n_outputs * net->batch);
        }
        if (net->priv->dist_hook) net->priv->dist_hook(net, i);
        if (net->priv->backward_hook) net->priv->backward_hook(net, i, net->priv->hook_ctx);
        if (net->priv->layer_hook) net->priv->layer_hook(net, i, 2, net->priv->layer_ctx);
        /* outputs dropped after forward that this backward is the first to read: rebuilt
           from their inputs, in forward order (section 9) */
        for (j = 0; j <= i; j++)
            if (net->priv->plan.l[j].rebuild_at == i) {
                net->priv->rebuilding = 1;
                cf__layer_forward(net, j);
                net->priv->rebuilding = 0;
            }
        cf__layer_backward(net, i);
        if (net->priv->layer_hook) net->priv->layer_hook(net, i, 3, net->priv->layer_ctx);
    }
    return CF_OK;
}

CFDEF void cf_net_zero_grad(cf_net *net) {
    CF__NET_ASSERT(net, "cf_net_zero_grad");
    memset(net->grads, 0, net->n_params * sizeof(float));
}

CFDEF double cf_net_loss(cf_net *net, const float *target, float *dout) {
    const float *y;
    size_t n;
    if (cf__net_check(net, "cf_net_loss")) return NAN;
    if (!target) { cf_fail("cf_net_loss: target is NULL"); return NAN; }
    if (!cf__outputs_valid(net)) {
        cf_fail("cf_net_loss: no forward since the last backward: there is no output to score");
        return NAN;
    }
    y = cf__out(net, net->n_layers - 1);
    n = (size_t)net->n_outputs * net->batch;
    if (net->loss == CF_LOSS_SOFTMAX_CE) {
        const cf_layer *l = &net->layers[net->n_layers - 1];
        double loss = cf_loss_softmax_ce(dout, y, target, net->priv->class_w, net->batch, l->out.c,
                                         (size_t)net->n_targets);
        if (isnan(loss)) cf_fail("cf_net_loss: a label is not a class id in [0, %d)", l->out.c);
        return loss;
    }
    return net->loss == CF_LOSS_L1 ? cf_loss_l1(dout, y, target, n) : cf_loss_mse(dout, y, target, n);
}

CFDEF uint64_t cf_net_step(const cf_net *net) { return cf__net_check(net, "cf_net_step") ? 0 : net->priv->step; }
CFDEF uint64_t cf_net_updates(const cf_net *net) {
    return cf__net_check(net, "cf_net_updates") ? 0 : net->priv->updates;
}

/* ---- the mode, and the settings of a model a training run may change */
CFDEF void cf_net_set_mode(cf_net *net, int mode) {
    CF__NET_ASSERT(net, "cf_net_set_mode");
    CF__ASSERT_ARG(mode >= 0 && mode <= CF_MODE_TRAIN, "cf_net_set_mode: the mode is not one of CF_MODE_*");
    net->priv->training = (mode & CF_MODE_DROPOUT) != 0;
    net->priv->bn_train = (mode & CF_MODE_BATCH_STATS) != 0;
}
CFDEF int cf_net_mode(const cf_net *net) {
    if (cf__net_check(net, "cf_net_mode")) return CF_ERR;
    return (net->priv->training ? CF_MODE_DROPOUT : 0) | (net->priv->bn_train ? CF_MODE_BATCH_STATS : 0);
}
CFDEF int cf_net_set_loss(cf_net *net, int loss) {
    if (cf__net_check(net, "cf_net_set_loss")) return CF_ERR;
    if (net->loss == CF_LOSS_SOFTMAX_CE || (loss != CF_LOSS_MSE && loss != CF_LOSS_L1))
        return cf_fail("%s: the loss of a regression model can be mse or l1; a segmentation model keeps softmax_ce",
                       net->cfg_name);
    net->loss = loss;
    return CF_OK;
}
CFDEF int cf_net_set_dropout(cf_net *net, float rate) {
    int i;
    if (cf__net_check(net, "cf_net_set_dropout")) return CF_ERR;
    if (!(rate >= 0.0f && rate <= 0.999f))
        return cf_fail("cf_net_set_dropout: the rate %g is not in [0, 0.999] (the cfg's rate= range)", rate);
    for (i = 0; i < net->n_layers; i++) if (net->layers[i].type == CF_L_DROPOUT) net->layers[i].rate = rate;
    return CF_OK;
}

/* ---- looking inside */
CFDEF void cf_net_keep_outputs(cf_net *net, int keep) {
    CF__NET_ASSERT(net, "cf_net_keep_outputs");
    net->priv->keep_acts = keep != 0;
}
CFDEF void cf_net_set_input_grad(cf_net *net, float *dx) {
    CF__NET_ASSERT(net, "cf_net_set_input_grad");
    net->priv->dinput = dx;
}
CFDEF void cf_net_set_backward_hook(cf_net *net, void (*hook)(cf_net *net, int layer, void *ctx), void *ctx) {
    CF__NET_ASSERT(net, "cf_net_set_backward_hook");
    net->priv->backward_hook = hook; net->priv->hook_ctx = ctx;
}
CFDEF void cf_net_set_layer_hook(cf_net *net, void (*hook)(cf_net *net, int layer, int phase, void *ctx), void *ctx) {
    CF__NET_ASSERT(net, "cf_net_set_layer_hook");
    net->priv->layer_hook = hook; net->priv->layer_ctx = ctx;
}
CFDEF const char *cf_net_path(const cf_net *net, int layer, int op) {
    const cf_layer *l;
    int has_w;
    CF__RETURN_UNLESS(cf__net_ok(net) && layer >= 0 && layer < net->n_layers && op >= CF_OP_FORWARD &&
                op <= CF_OP_BACKWARD_DATA, "?",
                "cf_net_path: not a layer of a network made by cf_net_parse, or not one of CF_OP_*");
    l = &net->layers[layer];
    has_w = l->w_n > 0;
    if (op == CF_OP_BACKWARD_DATA && l->src[0] < 0 && !net->priv->dinput) return "-";
    switch (l->type) {
    case CF_L_CONV:
        if (l->depthwise) return cf__dwconv_path(op, net->batch, l->in, l->out, &l->g);
        return cf__conv_path_p(op, net->batch, l->in, l->out, &l->g, l->groups, net->priv->ws_floats,
                               cf__rounds(net, layer));
    case CF_L_DECONV:
        return cf__deconv_path(cf__rounds(net, layer));
    case CF_L_MAXPOOL: case CF_L_AVGPOOL:
        if (op == CF_OP_BACKWARD_DATA && l->src[0] >= 0 && net->priv->plan.l[l->src[0]].fused_pool == layer)
            return "fusion";
        return cf_pool_path(op, l->in, l->out, &l->g, l->type == CF_L_MAXPOOL);
    default:
        return op == CF_OP_BACKWARD_WEIGHTS && !has_w ? "-" : "reference";
    }
}

/* no NaN or Inf among p's n floats: no element with the exponent's bits all ones.  (Integer
   tests the compiler vectorizes: the sum of p[i] * 0 this was is one chain of dependent adds,
   5x slower, 12 ms of cosmoflow.cfg's step checking its gradients and parameters.) */
static int cf__all_finite(const float *p, size_t n) {
    size_t i;
    unsigned bad = 0;
    for (i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, p + i, sizeof u);
        bad |= (u & 0x7f800000u) == 0x7f800000u;
    }
    return !bad;
}
/* the same for a tensor stored in 16 bits */
static int cf__all_finite_half(const cf_bf16 *p, size_t n) {
    size_t i;
    unsigned bad = 0;
    for (i = 0; i < n; i++) bad |= (p[i] & 0x7f80u) == 0x7f80u;
    return !bad;
}
CFDEF int cf_net_first_nonfinite_output(const cf_net *net) {
    int i, keep;
    CF__NET_RETURN_UNLESS(net, -1, "cf_net_first_nonfinite_output");
    if (!net->priv->arena) return -1;   /* no forward yet: no output */
    keep = net->priv->plan.flags & 1;   /* the plan the last forward used kept every output */
    for (i = 0; i < net->n_layers; i++) {
        const cf_layer *l = &net->layers[i];
        /* only outputs that are still there: all of them with keep_acts, otherwise those
           alive at the end of the forward, and none after a backward */
        if (!keep && (net->priv->acts_clobbered || net->priv->plan.l[i].fwd_end < net->n_layers - 1)) continue;
        const float *y = net->priv->arena + net->priv->plan.l[i].y_off;
        size_t n = cf_shape_size(l->out) * net->batch;
        if (net->priv->plan.l[i].half ? !cf__all_finite_half((const cf_bf16 *)(const void *)y, n)
            : !cf__all_finite(y, n)) return i;
    }
    return -1;
}
CFDEF int cf_net_first_nonfinite_param(const cf_net *net, int params) {
    const float *base;
    int i;
    CF__NET_RETURN_UNLESS(net, -1, "cf_net_first_nonfinite_param");
    base = params ? net->params : net->grads;
    for (i = 0; i < net->n_layers; i++) {
        const cf_layer *l = &net->layers[i];
        if ((l->w_n && !cf__all_finite(base + l->w_off, l->w_n)) ||
            (l->b_n && !cf__all_finite(base + l->b_off, l->b_n))) return i;
    }
    return -1;
}
CFDEF int cf_net_find_nonfinite(cf_net *net, const float *x, int B) {
    int keep, bad;
    CF__NET_RETURN_UNLESS(net, -1, "cf_net_find_nonfinite");
    keep = net->priv->keep_acts;
    net->priv->keep_acts = 1;
    bad = cf_net_forward(net, x, B) ? cf_net_first_nonfinite_output(net) : -1;
    net->priv->keep_acts = keep;
    return bad;
}

/* the tensors of one layer in PyTorch's layouts: conv (OC, C/groups, k...), transposed conv
   (C, OC, k...), dense (OUT, IN), batch norm gamma, beta, running mean, running var (C) */
static int cf__layer_tensors(const cf_net *net, int i, cf_tensor *t) {
    const cf_layer *l = &net->layers[i];
    int bn = l->type == CF_L_BATCHNORM, k, n = 0, conv = l->type == CF_L_CONV || l->type == CF_L_DECONV;
    if (!l->w_n) return 0;
    memset(t, 0, 4 * sizeof *t);
    t[0].layer = i; t[0].kind = bn ? "gamma" : "weight"; t[0].off = l->w_off; t[0].n = l->w_n;
    if (conv) {
        t[0].shape[0] = l->type == CF_L_CONV ? l->out.c : l->in.c;
        t[0].shape[1] = l->type == CF_L_CONV ? l->in.c / l->groups : l->out.c;
        t[0].ndim = net->input.d == 1 ? 4 : 5;
        for (k = 0; k < t[0].ndim - 2; k++) t[0].shape[2 + k] = l->g.k[3 - (t[0].ndim - 2) + k];
    } else if (bn || l->type == CF_L_AFFINE) { t[0].ndim = 1; t[0].shape[0] = (int)l->w_n; }
    else { t[0].ndim = 2; t[0].shape[0] = l->out.c; t[0].shape[1] = (int)cf_shape_size(l->in); }
    n = 1;
    if (l->b_n) {
        t[n].layer = i;
        t[n].kind = bn ? "beta" : "bias";
        t[n].off = l->b_off;
        t[n].n = l->b_n;
        t[n].ndim = 1;
        t[n].shape[0] = (int)l->b_n;
        n++;
    }
    for (k = 0; k < 2 && l->s_n; k++, n++) {
        t[n].layer = i; t[n].kind = k ? "running_var" : "running_mean"; t[n].stats = 1;
        t[n].off = l->s_off + k * (l->s_n / 2); t[n].n = l->s_n / 2; t[n].ndim = 1; t[n].shape[0] = (int)(l->s_n / 2);
    }
    return n;
}
CFDEF int cf_net_tensors(const cf_net *net, cf_tensor *out, int max) {
    int i, n = 0, k, m;
    cf_tensor t[4];
    if (cf__net_check(net, "cf_net_tensors")) return CF_ERR;
    for (i = 0; i < net->n_layers; i++)
        for (m = cf__layer_tensors(net, i, t), k = 0; k < m; k++, n++) if (out && n < max) out[n] = t[k];
    return n;
}

/* ================================================================ 7. distributed */
/* What the process is waiting for: every blocking MPI call below is bracketed by
   CF__WAIT(op) / CF__WAITED, so that a watchdog thread (cf-train --comm-timeout) can read
   cf_dist_waiting() and end a process whose peers stopped answering (a node or a link gone:
   MPI itself waits for ever).  Plain stores read from another thread: a watchdog at worst
   sees the state a moment late. */
static const char *volatile cf__waiting_op;
static volatile time_t cf__waiting_since;
#define CF__WAIT(op) (cf__waiting_since = time(NULL), cf__waiting_op = (op))
#define CF__WAITED (cf__waiting_op = NULL)
CFDEF const char *cf_dist_waiting(double *seconds) {
    const char *op = cf__waiting_op;
    *seconds = op ? difftime(time(NULL), cf__waiting_since) : 0.0;
    return op;
}
#ifdef CF_USE_MPI
/* MPI starts only under a launcher (mpirun/mpiexec/srun set one of these); a program
   started on its own is one rank without touching MPI, so it also runs where MPI cannot
   start (no shared memory, a small ulimit, no network). */
static int cf__launched(void) {
    static const char *vars[] = {"PMI_RANK", "PMI_SIZE", "PMIX_RANK", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE",
                                 "SLURM_PROCID"};
    size_t i;
    for (i = 0; i < sizeof vars / sizeof *vars; i++) if (getenv(vars[i])) return 1;
    return 0;
}
CFDEF int cf_dist_init(int *argc, char ***argv) {
    int inited = 0, provided;
    MPI_Initialized(&inited);
    if (!inited && cf__launched()) {
        int rc;
        CF__WAIT("MPI_Init (the launcher and the other ranks)");
        rc = MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
        CF__WAITED;
        if (rc != MPI_SUCCESS) return cf_fail("MPI_Init_thread failed");
    }
    return CF_OK;
}
CFDEF void cf_dist_finalize(void) {
    int i = 0, f = 0;
    MPI_Initialized(&i); MPI_Finalized(&f);
    if (i && !f) { CF__WAIT("MPI_Finalize"); MPI_Finalize(); CF__WAITED; }
}
CFDEF int cf_dist_rank(void) {
    int r = 0, i = 0;
    MPI_Initialized(&i);
    if (i) MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
}
CFDEF int cf_dist_size(void) {
    int s = 1, i = 0;
    MPI_Initialized(&i);
    if (i) MPI_Comm_size(MPI_COMM_WORLD, &s);
    return s;
}
/* The average in chunks of CF_ALLREDUCE_CHUNK floats (1 Mi: 4 MiB), each divided by the ranks
   while it is still in cache.  One call for the whole buffer was 1.7-2x slower (docs/mpi.md,
   "The allreduce"): MPICH takes a temporary buffer of the message's size at every call, and
   above glibc's 32 MiB limit for reusing freed memory each call maps and first-touches fresh
   pages; then the division read the whole buffer again from memory. */
#ifndef CF_ALLREDUCE_CHUNK
#define CF_ALLREDUCE_CHUNK ((size_t)1 << 20)
#endif
CFDEF void cf_dist_allreduce_mean(float *buf, size_t n) {
    int size = cf_dist_size();
    size_t off, k;
    CF__ASSERT_ARG(buf || !n, "cf_dist_allreduce_mean: buf is NULL");
    if (size == 1) return;
    for (off = 0; off < n; off += CF_ALLREDUCE_CHUNK) {
        size_t m = n - off < CF_ALLREDUCE_CHUNK ? n - off : CF_ALLREDUCE_CHUNK;
        CF__WAIT("MPI_Allreduce of the gradient");
        MPI_Allreduce(MPI_IN_PLACE, buf + off, (int)m, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        CF__WAITED;
        for (k = off; k < off + m; k++) buf[k] /= (float)size;
    }
}
CFDEF void cf_dist_allreduce_sum_d(double *buf, int n) {
    CF__ASSERT_ARG((buf || n == 0) && n >= 0, "cf_dist_allreduce_sum_d: buf NULL or n < 0");
    if (cf_dist_size() == 1) return;
    CF__WAIT("MPI_Allreduce (a sum)"); MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    CF__WAITED;
}
CFDEF void cf_dist_allreduce_max_d(double *buf, int n) {
    CF__ASSERT_ARG((buf || n == 0) && n >= 0, "cf_dist_allreduce_max_d: buf NULL or n < 0");
    if (cf_dist_size() == 1) return;
    CF__WAIT("MPI_Allreduce (a maximum)"); MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    CF__WAITED;
}
CFDEF void cf_dist_sum_reduce(double *buf, int n, void *ctx) { (void)ctx; cf_dist_allreduce_sum_d(buf, n); }
CFDEF void cf_dist_bcast(float *buf, size_t n) {
    size_t off = 0;
    CF__ASSERT_ARG(buf || !n, "cf_dist_bcast: buf is NULL");
    if (cf_dist_size() == 1) return;
    while (off < n) {
        int chunk = (int)(n - off > ((size_t)1 << 30) ? ((size_t)1 << 30) : n - off);
        CF__WAIT("MPI_Bcast of the weights");
        MPI_Bcast(buf + off, chunk, MPI_FLOAT, 0, MPI_COMM_WORLD);
        CF__WAITED;
        off += (size_t)chunk;
    }
}
CFDEF void cf_dist_abort(int code) {
    int i = 0;
    MPI_Initialized(&i);
    if (i && cf_dist_size() > 1) MPI_Abort(MPI_COMM_WORLD, code);
}
CFDEF void cf_dist_barrier(void)
{
    if (cf_dist_size() > 1) { CF__WAIT("MPI_Barrier"); MPI_Barrier(MPI_COMM_WORLD); CF__WAITED; }
}

/* the largest of v over every rank (a decision every rank must take alike) */
static int cf__max_over_ranks(int v) {
    double d = v;
    cf_dist_allreduce_max_d(&d, 1);
    return (int)d;
}

/* state of the overlapped reduction: the not-yet-started prefix is grads[0, end) */
typedef struct { MPI_Request req[1024]; MPI_Status st[1024]; int n; size_t end, bucket; } cf__overlap;
static cf__overlap cf__ov;
static void cf__ov_start(float *buf, size_t lo, size_t hi) {
    while (hi > lo) {   /* chunks fit an int count and the request table */
        size_t n = hi - lo > ((size_t)1 << 30) ? ((size_t)1 << 30) : hi - lo;
        if (cf__ov.n == 1024) {
            CF__WAIT("MPI_Waitall (overlapped gradient buckets)");
            MPI_Waitall(cf__ov.n, cf__ov.req, cf__ov.st);
            CF__WAITED;
            cf__ov.n = 0;
        }
        MPI_Iallreduce(MPI_IN_PLACE, buf + hi - n, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &cf__ov.req[cf__ov.n++]);
        hi -= n;
    }
}
/* called before layer i's backward: every layer after i is finished */
static void cf__ov_hook(cf_net *net, int i) {
    size_t done_from = net->n_params;
    int j, flag;
    for (j = i + 1; j < net->n_layers; j++) if (net->layers[j].w_n) { done_from = net->layers[j].w_off; break; }
    if (done_from < cf__ov.end && cf__ov.end - done_from >= cf__ov.bucket) {
        cf__ov_start(net->grads, done_from, cf__ov.end);
        cf__ov.end = done_from;
    }
    if (cf__ov.n) MPI_Testall(cf__ov.n, cf__ov.req, &flag, cf__ov.st);   /* let MPI progress */
}
CFDEF void cf_dist_overlap_begin(cf_net *net, size_t bucket_floats) {
    CF__NET_ASSERT(net, "cf_dist_overlap_begin");
    cf__ov.n = 0; cf__ov.end = net->n_params; cf__ov.bucket = bucket_floats ? bucket_floats : 1;
    /* (the caller's own hook stays, called after it) */
    net->priv->dist_hook = cf_dist_size() > 1 ? cf__ov_hook : NULL;
}
CFDEF void cf_dist_overlap_end(cf_net *net) {
    size_t k;
    float inv;
    CF__NET_ASSERT(net, "cf_dist_overlap_end");
    net->priv->dist_hook = NULL;
    if (cf_dist_size() == 1) return;
    cf__ov_start(net->grads, 0, cf__ov.end);
    CF__WAIT("MPI_Waitall (overlapped gradient buckets)");
    MPI_Waitall(cf__ov.n, cf__ov.req, cf__ov.st);
    CF__WAITED;
    inv = (float)cf_dist_size();
    for (k = 0; k < net->n_params; k++) net->grads[k] /= inv;   /* as cf_dist_allreduce_mean */
}

CFDEF int cf_dist_grad_lag(cf_net *net, cf_grad_lag *lag) {
    size_t k, n;
    int had, size = cf_dist_size(), next;
    float inv = 1.0f / (float)size;
    if (cf__net_check(net, "cf_dist_grad_lag")) return CF_ERR;
    if (!lag) return cf_fail("cf_dist_grad_lag: lag is NULL");
    n = net->n_params; had = lag->pending;
    if (n >= 2147483647u) return cf_fail("cf_dist_grad_lag: %zu parameters, more than an MPI count holds", n);
    if (!lag->buf[0]) {
        lag->buf[0] = CF__NEW(float, n + 1); lag->buf[1] = CF__NEW(float, n + 1);
        lag->req = CF_MALLOC(sizeof(MPI_Request));
        if (!lag->buf[0] || !lag->buf[1] || !lag->req) return cf_fail("out of memory for the gradient lag buffers");
    }
    if (had == 1 && size > 1) {
        CF__WAIT("MPI_Wait (the previous step's gradient)");
        MPI_Wait((MPI_Request *)lag->req, MPI_STATUS_IGNORE);
        CF__WAITED;
    }
    next = 1 - lag->cur;
    memcpy(lag->buf[next], net->grads, n * sizeof(float));
    if (size > 1)
        MPI_Iallreduce(MPI_IN_PLACE, lag->buf[next], (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                       (MPI_Request *)lag->req);
    if (had == 2) memcpy(net->grads, lag->buf[lag->cur], n * sizeof(float));   /* an average from a checkpoint */
    else if (had) for (k = 0; k < n; k++) net->grads[k] = lag->buf[lag->cur][k] * inv;
    lag->cur = next;
    lag->pending = 1;
    return had;
}
CFDEF void cf_dist_grad_lag_free(cf_grad_lag *lag) {
    if (!lag) return;
    if (lag->pending == 1 && cf_dist_size() > 1) {
        CF__WAIT("MPI_Wait (the last gradient)");
        MPI_Wait((MPI_Request *)lag->req, MPI_STATUS_IGNORE);
        CF__WAITED;
    }
    CF_FREE(lag->buf[0]); CF_FREE(lag->buf[1]); CF_FREE(lag->req);
    memset(lag, 0, sizeof *lag);
}
#ifndef CF_NO_FILES   /* (for the checkpoints of section 12) */
/* the average the next step applies (n floats into out): 1, or 0 when nothing is pending */
static int cf__grad_lag_average(cf_grad_lag *lag, size_t n, float *out) {
    size_t k;
    float inv = 1.0f / (float)cf_dist_size();
    if (!lag->pending) return 0;
    if (lag->pending == 1 && cf_dist_size() > 1) {
        CF__WAIT("MPI_Wait (the pending gradient)");
        MPI_Wait((MPI_Request *)lag->req, MPI_STATUS_IGNORE);
        CF__WAITED;
    }
    if (lag->pending == 2) memcpy(out, lag->buf[lag->cur], n * sizeof(float));
    else for (k = 0; k < n; k++) out[k] = lag->buf[lag->cur][k] * inv;   /* as cf_dist_grad_lag applies it */
    return 1;
}
/* avg (n floats) the average the next step applies */
static int cf__grad_lag_set(cf_grad_lag *lag, size_t n, const float *avg) {
    if (!lag->buf[0]) {
        lag->buf[0] = CF__NEW(float, n + 1); lag->buf[1] = CF__NEW(float, n + 1);
        lag->req = CF_MALLOC(sizeof(MPI_Request));
        if (!lag->buf[0] || !lag->buf[1] || !lag->req) return cf_fail("out of memory for the gradient lag buffers");
    }
    *(MPI_Request *)lag->req = MPI_REQUEST_NULL;
    memcpy(lag->buf[lag->cur], avg, n * sizeof(float));
    lag->pending = 2;
    return CF_OK;
}
#endif
#else
CFDEF int cf_dist_init(int *argc, char ***argv) { (void)argc; (void)argv; return CF_OK; }
CFDEF void cf_dist_finalize(void) {}
CFDEF int cf_dist_rank(void) { return 0; }
CFDEF int cf_dist_size(void) { return 1; }
CFDEF void cf_dist_allreduce_mean(float *buf, size_t n) { (void)buf; (void)n; }
CFDEF void cf_dist_allreduce_sum_d(double *buf, int n) { (void)buf; (void)n; }
CFDEF void cf_dist_allreduce_max_d(double *buf, int n) { (void)buf; (void)n; }
CFDEF void cf_dist_sum_reduce(double *buf, int n, void *ctx) { (void)ctx; cf_dist_allreduce_sum_d(buf, n); }
CFDEF void cf_dist_bcast(float *buf, size_t n) { (void)buf; (void)n; }
CFDEF void cf_dist_abort(int code) { (void)code; }
CFDEF void cf_dist_barrier(void) {}
CFDEF void cf_dist_overlap_begin(cf_net *net, size_t bucket_floats) {
    CF__NET_ASSERT(net, "cf_dist_overlap_begin");
    (void)bucket_floats;
}
CFDEF void cf_dist_overlap_end(cf_net *net) { CF__NET_ASSERT(net, "cf_dist_overlap_end"); }

static int cf__max_over_ranks(int v) { return v; }
CFDEF int cf_dist_grad_lag(cf_net *net, cf_grad_lag *lag) {   /* one process: a delay line */
    size_t n;
    int had, next;
    if (cf__net_check(net, "cf_dist_grad_lag")) return CF_ERR;
    if (!lag) return cf_fail("cf_dist_grad_lag: lag is NULL");
    n = net->n_params; had = lag->pending;
    if (!lag->buf[0]) {
        lag->buf[0] = CF__NEW(float, n + 1); lag->buf[1] = CF__NEW(float, n + 1);
        if (!lag->buf[0] || !lag->buf[1]) return cf_fail("out of memory for the gradient lag buffers");
    }
    next = 1 - lag->cur;
    memcpy(lag->buf[next], net->grads, n * sizeof(float));
    if (had) memcpy(net->grads, lag->buf[lag->cur], n * sizeof(float));
    lag->cur = next;
    lag->pending = 1;
    return had;
}
CFDEF void cf_dist_grad_lag_free(cf_grad_lag *lag) {
    if (!lag) return;
    CF_FREE(lag->buf[0]);
    CF_FREE(lag->buf[1]);
    memset(lag, 0, sizeof *lag);
}
#ifndef CF_NO_FILES
static int cf__grad_lag_average(cf_grad_lag *lag, size_t n, float *out) {
    if (!lag->pending) return 0;
    memcpy(out, lag->buf[lag->cur], n * sizeof(float));
    return 1;
}
static int cf__grad_lag_set(cf_grad_lag *lag, size_t n, const float *avg) {
    if (!lag->buf[0]) {
        lag->buf[0] = CF__NEW(float, n + 1); lag->buf[1] = CF__NEW(float, n + 1);
        if (!lag->buf[0] || !lag->buf[1]) return cf_fail("out of memory for the gradient lag buffers");
    }
    memcpy(lag->buf[lag->cur], avg, n * sizeof(float));
    lag->pending = 2;
    return CF_OK;
}
#endif
#endif
CFDEF void cf_net_average_stats(cf_net *net) {
    CF__NET_ASSERT(net, "cf_net_average_stats");
    if (net->n_stats) cf_dist_allreduce_mean(net->stats, net->n_stats);
}

/* ================================================================ 8. a sample across ranks
   cf_net_set_spatial splits each sample along its depth over a group of K ranks (docs/mpi.md,
   "A sample across ranks"), here in the order docs/math.md ("Halos") derives it: the slabs
   (which layers split, and how); a convolution's halos, forward and back; batch norm's sums
   over the group; the [flatten] that gathers the slabs; the first [dense] after it, its rows
   split over the group; the setup and the buffers; last the exchanges themselves (MPI: the
   group's communicator, the halo swap, the gathers and sums). */
/* the exchanges (at the end of this section): with the group's previous and next ranks
   (periodic: around), its gathers and sums */
static void cf__halo_swap(cf_net *net, const float *to_next, float *from_prev, size_t n1, const float *to_prev,
                          float *from_next, size_t n2);
static void cf__split_allgather(cf_net *net, const float *mine, float *all, size_t n);
static void cf__split_sum_floats(cf_net *net, float *buf, size_t n);
static int cf__split_comm_make(cf_net *net);
static void cf__split_comm_free(cf_net *net);
static void cf__split_sum(double *buf, int n, void *ctx);

/* ---- the slabs: their shapes (cf_net_set_spatial).  A layer before the
   first [flatten] must keep whole on slabs: a convolution whose input slab is its stride times
   its output slab and whose halos fit a neighbour's slab, a pool whose windows stay inside a
   slab, an elementwise layer (batch norm, activation, scale, sum, concatenation); a dropout
   there would draw its masks over the whole volume, other layers need the whole volume. */
static cf_shape cf__whole_in(const cf_net *net, int i) {
    return net->priv->split.gin ? net->priv->split.gin[i] : net->layers[i].in;
}
static cf_shape cf__whole_out(const cf_net *net, int i) {
    return net->priv->split.gin ? net->priv->split.gout[i] : net->layers[i].out;
}
/* CF_OK when K slabs fit (the gathering [flatten] in *end), else CF_ERR naming the layer */
static int cf__split_fits(const cf_net *net, int K, int *end) {
    int i;
    const char *name = net->cfg_name;
    if (net->input.d == 1) return cf_fail("%s: a 2-D network has no depth to split across ranks", name);
    if (net->input.d % K)
        return cf_fail("%s: the input's depth %d does not divide into %d slabs", name, net->input.d, K);
    for (i = 0; i < net->n_layers && net->layers[i].type != CF_L_FLATTEN; i++) {
        const cf_layer *l = &net->layers[i];
        int Din = cf__whole_in(net, i).d, Dout = cf__whole_out(net, i).d, k = l->g.k[0], s = l->g.s[0];
        if (Din % K || Dout % K)
            return cf_fail("%s:%d: layer %d ([%s]) has %d planes in and %d out: not %d equal slabs", name, l->line, i,
                           cf_layer_type_name(l->type), Din, Dout, K);
        if ((double)cf_shape_size(cf__whole_out(net, i)) / K > (double)CF__MAX_ELEMENTS)
            return cf_fail("%s:%d: layer %d ([%s]) would output %.3g values a sample on each of %d ranks, "
                           "at most %lld: split it across more ranks", name, l->line, i, cf_layer_type_name(l->type),
                           (double)cf_shape_size(cf__whole_out(net, i)) / K, K, (long long)CF__MAX_ELEMENTS);
        switch (l->type) {
        case CF_L_CONV: {
            int hb = l->g.pb[0], ha = l->g.dil[0] * (k - 1) - l->g.pb[0] + 1 - s;
            if (Din / K != s * (Dout / K))
                return cf_fail("%s:%d: layer %d ([conv], stride %d) maps %d planes to %d: "
                               "slabs of %d to slabs of %d do not align",
                               name, l->line, i, s, Din, Dout, Din / K, Dout / K);
            if (hb < 0 || ha < 0 || hb > Din / K || ha > Din / K)
                return cf_fail("%s:%d: layer %d ([conv]) reads %d planes before and %d after its slab of %d: "
                               "wider than a neighbour's slab", name, l->line, i, hb, ha, Din / K);
            break;
        }
        case CF_L_MAXPOOL: case CF_L_AVGPOOL:
            if (s != k || l->g.pb[0] || l->g.pa[0] || (Din / K) % k || Din / k != Dout)
                return cf_fail("%s:%d: layer %d ([%s]) has windows of %d planes: "
                               "they cross the boundaries of slabs of %d planes", name, l->line, i,
                               cf_layer_type_name(l->type), k, Din / K);
            break;
        case CF_L_BATCHNORM: case CF_L_ACT: case CF_L_SCALE: case CF_L_ADD: case CF_L_ROUTE: case CF_L_AFFINE: break;
        case CF_L_DROPOUT:
            if (l->rate > 0.0f)
                return cf_fail("%s:%d: layer %d ([dropout]) draws its masks over the whole volume: "
                               "before the [flatten] it cannot be split", name, l->line, i);
            break;
        default:
            return cf_fail("%s:%d: layer %d ([%s]) needs the whole volume: "
                           "a split network's layers before its first [flatten] work on slabs",
                           name, l->line, i, cf_layer_type_name(l->type));
        }
    }
    if (i == net->n_layers)
        return cf_fail("%s: no [flatten]: the network's output would be split across the ranks", name);
    *end = i;
    return CF_OK;
}
CFDEF int cf_net_spatial_max(cf_net *net, int limit) {
    int K, end;
    char keep[sizeof cf__err];
    if (cf__net_check(net, "cf_net_spatial_max")) return CF_ERR;
    memcpy(keep, cf__err, sizeof keep);   /* (the tries' reasons are not the caller's) */
    for (K = limit; K > 1 && cf__split_fits(net, K, &end); K--) {}
    memcpy(cf__err, keep, sizeof keep);
    return K < 1 ? 1 : K;
}
/* the whole shapes back into the layers (and kept, the first time) */
static int cf__split_whole(cf_net *net) {
    cf__split_state *sp = &net->priv->split;
    int i, n = net->n_layers;
    if (!sp->gin) {
        if (!(sp->gin = CF__NEW(cf_shape, n)) || !(sp->gout = CF__NEW(cf_shape, n)) || !(sp->hb = CF__NEW(int, n)) ||
            !(sp->ha = CF__NEW(int, n))) return CF_ERR;
        for (i = 0; i < n; i++) { sp->gin[i] = net->layers[i].in; sp->gout[i] = net->layers[i].out; }
    }
    for (i = 0; i < n; i++) {
        net->layers[i].in = sp->gin[i];
        net->layers[i].out = sp->gout[i];
        sp->hb[i] = sp->ha[i] = 0;
    }
    return CF_OK;
}

/* ---- a convolution's halos, forward and back (docs/mpi.md, "A sample across ranks").  Slab r
   of a layer's output holds planes [r Dl/K, (r + 1) Dl/K) of its depth Dl.  A convolution of
   stride s, kernel k, dilation dil and padding pb before its input writes its slab's outputs
   [o0, o1) from the input planes [o0 s - pb, (o1 - 1) s - pb + dil (k - 1)]: with the slabs
   aligned (the input's slab s times the output's: o0 s = d0), that is its own planes and hb =
   pb planes of the previous slab, ha = dil (k - 1) - pb + 1 - s of the next (the halo).  The
   forward runs the convolution on the extended input, ext = [previous's last hb | own | next's
   first ha] (zeros beyond the volume's faces, or the other face's planes when periodic), with
   no padding along the depth; its backward-data gives the gradient of ext, whose halo parts
   belong to the neighbours' planes: sent back and added there (docs/math.md, "Halos").  The
   backward reads ext again (its backward-weights): it builds it again, a second exchange of
   the same halos, rather than keep each convolution's from the forward; that exchange moves
   hb + ha planes a convolution, less than a step's time can show (docs/performance.md, "The
   backward's halo"). */

/* planes [p0, p0 + np) of every (sample, channel) of x (BC of them, Dl planes of HW values)
   to and from buf (BC, np, HW) */
static void cf__planes_pack(float *buf, const float *x, int BC, int Dl, size_t HW, int p0, int np) {
    int q;
    for (q = 0; q < BC; q++) memcpy(buf + (size_t)q * np * HW, x + ((size_t)q * Dl + p0) * HW, sizeof(float) * np * HW);
}
static void cf__planes_add(float *x, const float *buf, int BC, int Dl, size_t HW, int p0, int np) {
    int q;
    size_t k;
    for (q = 0; q < BC; q++) {
        float *d = x + ((size_t)q * Dl + p0) * HW;
        const float *s = buf + (size_t)q * np * HW;
        for (k = 0; k < (size_t)np * HW; k++) d[k] += s[k];
    }
}

/* the extended input of conv i: priv->split.ext (B, C, hb + Dl + ha, H, W) from its slab x */
static void cf__split_extend(cf_net *net, int i, const float *x) {
    cf__split_state *sp = &net->priv->split;
    const cf_layer *l = &net->layers[i];
    int BC = net->batch * l->in.c, Dl = l->in.d, hb = sp->hb[i], ha = sp->ha[i], L = hb + Dl + ha, q;
    size_t HW = (size_t)l->in.h * l->in.w;
    float *to_next = sp->pack, *from_prev = to_next + (size_t)BC * hb * HW, *to_prev = from_prev + (size_t)BC * hb * HW,
          *from_next = to_prev + (size_t)BC * ha * HW;
    cf__planes_pack(to_next, x, BC, Dl, HW, Dl - hb, hb);   /* my last planes are the next slab's "before" */
    cf__planes_pack(to_prev, x, BC, Dl, HW, 0, ha);         /* my first planes the previous slab's "after" */
    cf__halo_swap(net, to_next, from_prev, (size_t)BC * hb * HW, to_prev, from_next, (size_t)BC * ha * HW);
    for (q = 0; q < BC; q++) {
        float *e = sp->ext + (size_t)q * L * HW;
        memcpy(e, from_prev + (size_t)q * hb * HW, sizeof(float) * hb * HW);
        memcpy(e + (size_t)hb * HW, x + (size_t)q * Dl * HW, sizeof(float) * Dl * HW);
        memcpy(e + (size_t)(hb + Dl) * HW, from_next + (size_t)q * ha * HW, sizeof(float) * ha * HW);
    }
}
/* conv i on its extended input: the convolution's own code on a taller input, no depth padding */
static void cf__split_geometry(const cf_net *net, int i, cf_shape *in, cf_geom *g) {
    const cf_layer *l = &net->layers[i];
    *in = l->in; *g = l->g;
    in->d += net->priv->split.hb[i] + net->priv->split.ha[i];
    g->pb[0] = g->pa[0] = 0;
}
/* the gradient of conv i's extended input (priv->split.dext) back to the slabs: its own part
   added into dx (which the caller has zeroed if it held no values yet), its halo parts sent to
   the neighbours, and theirs of my planes added */
static void cf__split_reduce(cf_net *net, int i, float *dx) {
    cf__split_state *sp = &net->priv->split;
    const cf_layer *l = &net->layers[i];
    int BC = net->batch * l->in.c, Dl = l->in.d, hb = sp->hb[i], ha = sp->ha[i], L = hb + Dl + ha, q;
    size_t HW = (size_t)l->in.h * l->in.w, k;
    float *to_prev = sp->pack, *from_next = to_prev + (size_t)BC * hb * HW, *to_next = from_next + (size_t)BC * hb * HW,
          *from_prev = to_next + (size_t)BC * ha * HW;
    for (q = 0; q < BC; q++) {
        const float *e = sp->dext + (size_t)q * L * HW;
        float *d = dx + (size_t)q * Dl * HW;
        for (k = 0; k < (size_t)Dl * HW; k++) d[k] += e[(size_t)hb * HW + k];
    }
    cf__planes_pack(to_prev, sp->dext, BC, L, HW, 0, hb);        /* the previous slab's last planes */
    cf__planes_pack(to_next, sp->dext, BC, L, HW, hb + Dl, ha);  /* the next slab's first */
    cf__halo_swap(net, to_next, from_prev, (size_t)BC * ha * HW, to_prev, from_next, (size_t)BC * hb * HW);
    cf__planes_add(dx, from_prev, BC, Dl, HW, 0, ha);
    cf__planes_add(dx, from_next, BC, Dl, HW, Dl - hb, hb);
}

/* ---- batch norm over the group: its mean and variance, and its backward's sums, are sums
   over every position, each the sum of the slabs': cf_net_set_spatial synchronizes the
   network's batch norms over the group (cf_net_sync_bn with cf__split_sum, the exchanges);
   a caller's own sums over a sample go through cf_net_spatial_sum */
CFDEF int cf_net_spatial_sum(cf_net *net, double *v, int n) {
    if (cf__net_check(net, "cf_net_spatial_sum")) return CF_ERR;
    if ((!v && n) || n < 0) return cf_fail("cf_net_spatial_sum: v NULL or n %d < 0", n);
    if (net->priv->split.on && n) cf__split_sum(v, n, net);
    return CF_OK;
}

/* ---- the [flatten] at the split's end gathers the slabs: y (B, C, D, H, W) whole, from every
   rank's (B, C, Dl, H, W); its backward takes this slab's planes of dy */
static void cf__split_gather(cf_net *net, int i) {
    cf__split_state *sp = &net->priv->split;
    const cf_layer *l = &net->layers[i];
    int B = net->batch, C = l->in.c, Dl = l->in.d, K = sp->K, b, c, q;
    size_t HW = (size_t)l->in.h * l->in.w, slab = (size_t)C * Dl * HW;
    float *y = cf__out(net, i);
    cf__split_allgather(net, cf__in(net, l, 0), sp->pack, (size_t)B * slab);
    for (q = 0; q < K; q++)
        for (b = 0; b < B; b++)
            for (c = 0; c < C; c++)
                memcpy(y + (((size_t)b * C + c) * K * Dl + (size_t)q * Dl) * HW,
                       sp->pack + ((size_t)q * B + b) * slab + (size_t)c * Dl * HW, sizeof(float) * Dl * HW);
    net->priv->stored_bf16 = 1;   /* copies of bf16 values */
}
static void cf__split_scatter(cf_net *net, int i) {
    cf__split_state *sp = &net->priv->split;
    const cf_layer *l = &net->layers[i];
    int B = net->batch, C = l->in.c, Dl = l->in.d, b, c, store = cf__stores_grad(net, l, 0);
    size_t HW = (size_t)l->in.h * l->in.w, k;
    const float *dy = cf__grad(net, i);
    float *dx = cf__in_grad(net, l, 0);
    if (!dx) return;
    for (b = 0; b < B; b++) for (c = 0; c < C; c++) {
        const float *s = dy + (((size_t)b * C + c) * sp->K * Dl + (size_t)sp->r * Dl) * HW;
        float *d = dx + ((size_t)b * C + c) * Dl * HW;
        if (store) for (k = 0; k < (size_t)Dl * HW; k++) d[k] = 0.0f + s[k];
        else for (k = 0; k < (size_t)Dl * HW; k++) d[k] += s[k];
    }
    net->priv->stored_bf16 = 1;
}

/* ---- the split [dense]: the first [dense] after the [flatten], its rows shared by the group
   (split.shard; its parameters' layout below).  Forward: this rank's rows of
   y = act(x w^T + b) from the whole (gathered) x, then every rank's rows gathered into y (B,
   out.c).  Backward: dL/dz of every row (the same on every rank), this rank's rows' dw and db,
   and their part of dx = dz w, summed over the group. */
static void cf__shard_dense_forward(cf_net *net, int i) {
    const cf__split_state *sp = &net->priv->split;
    cf_layer *l = &net->layers[i];
    int B = net->batch, O = l->out.c, R = sp->rows, q, b;
    float *y = cf__out(net, i), *mine = sp->part, *all = sp->part + (size_t)B * R;
    cf_dense_forward(mine, cf__in(net, l, 0), cf__w(net, l), cf__b(net, l), B, (int)cf_shape_size(l->in), R);
    cf_act_forward(mine, (size_t)B * R, l->act, l->slope);
    cf__split_allgather(net, mine, all, (size_t)B * R);   /* (rank q's B R values, in rank order) */
    for (q = 0; q < sp->K; q++)
        for (b = 0; b < B; b++)
            memcpy(y + (size_t)b * O + (size_t)q * R, all + ((size_t)q * B + b) * R, (size_t)R * sizeof(float));
}
static void cf__shard_dense_backward(cf_net *net, int i) {
    const cf__split_state *sp = &net->priv->split;
    cf_layer *l = &net->layers[i];
    int B = net->batch, O = l->out.c, R = sp->rows, b;
    size_t F = cf_shape_size(l->in), k;
    float *dy = cf__grad(net, i), *dx = cf__in_grad(net, l, 0), *dz = sp->part, *part = sp->part + (size_t)B * R;
    cf_act_backward(dy, cf__out(net, i), cf__n_out(net, l), l->act, l->slope);
    for (b = 0; b < B; b++)
        memcpy(dz + (size_t)b * R, dy + (size_t)b * O + (size_t)sp->r * R, (size_t)R * sizeof(float));
    if (dx) memset(part, 0, (size_t)B * F * sizeof(float));
    cf_dense_backward(dx ? part : NULL, cf__dw(net, l), cf__db(net, l), dz, cf__in(net, l, 0), cf__w(net, l), B, (int)F,
                      R);
    if (!dx) return;
    cf__split_sum_floats(net, part, (size_t)B * F);   /* every rank's rows' part of dx */
    for (k = 0; k < (size_t)B * F; k++) dx[k] += part[k];
}
/* the split [dense]'s parameters ("pieces"): rank r holds rows [r R, (r + 1) R) of its
   weights (out.c rows of F = its input's size) and of its bias, R = out.c / K; in a model
   where that layer carries most of the parameters (the MLPerf network at 256^3: 33.5 M of
   38.3 M) this is what keeps a rank's memory near 1 / K of one rank's.  The whole parameter
   vector is then a sequence of pieces, each every rank's or one group rank's: the layers
   before that one; its weight rows of rank 0, 1, ...; its bias of rank 0, 1, ...; the layers
   after it.  A rank's layout (params, grads, each optimizer slot) keeps its own pieces, in
   that order. */
typedef struct { size_t off, n; int owner; } cf__piece;   /* whole offset, count, group rank (-1: every rank) */
static int cf__n_pieces(const cf_net *net) { return net->priv->split.shard < 0 ? 1 : 2 * net->priv->split.K + 2; }
static cf__piece cf__piece_at(const cf_net *net, int j) {
    const cf__split_state *sp = &net->priv->split;
    const cf_layer *l;
    cf__piece p;
    size_t F, w0, R;
    int K = sp->K;
    p.owner = -1;
    if (sp->shard < 0) { p.off = 0; p.n = net->n_params; return p; }
    l = &net->layers[sp->shard]; F = cf_shape_size(l->in); w0 = l->w_off; R = (size_t)sp->rows;
    if (j == 0) { p.off = 0; p.n = w0; }
    else if (j <= K) { p.off = w0 + (size_t)(j - 1) * R * F; p.n = R * F; p.owner = j - 1; }
    else if (j <= 2 * K) {
        p.off = w0 + (size_t)l->out.c * F + (size_t)(j - K - 1) * R;
        p.n = l->has_bias ? R : 0;
        p.owner = j - K - 1;
    }
    else { p.off = w0 + (size_t)l->out.c * (F + (l->has_bias ? 1 : 0)); p.n = sp->whole_n - p.off; }
    return p;
}
/* where a piece lives in this rank's layout, or (size_t)-1 when it is another rank's */
static size_t cf__piece_local(const cf_net *net, cf__piece p) {
    const cf__split_state *sp = &net->priv->split;
    const cf_layer *l;
    size_t F;
    if (sp->shard < 0) return p.off;   /* nothing split: the whole layout */
    l = &net->layers[sp->shard]; F = cf_shape_size(l->in);
    /* before the layer, or after it: moved down by the cut */
    if (p.owner < 0) return p.off < l->w_off ? p.off : p.off - (sp->whole_n - net->n_params);
    if (p.owner != sp->r) return (size_t)-1;   /* another rank's rows */
    /* my weight rows, then my bias */
    return p.off < l->w_off + (size_t)l->out.c * F ? l->w_off : l->w_off + (size_t)sp->rows * F;
}
/* the [dense] whose rows a split of K can share: right after the [flatten], reading it alone,
   read by nothing else, its rows a multiple of K; -1 when none */
static int cf__shard_candidate(const cf_net *net, int end, int K) {
    int j = end + 1, i, k;
    if (K < 2 || j >= net->n_layers || net->layers[j].type != CF_L_DENSE || net->layers[j].n_src != 1 ||
        net->layers[j].src[0] != end || net->layers[j].out.c % K) return -1;
    for (i = 0; i < net->n_layers; i++)
        for (k = 0; k < net->layers[i].n_src; k++) if (i != j && net->layers[i].src[k] == end) return -1;
    return j;
}
/* the parameters, gradients and optimizer state of the whole layout into this rank's (layer
   j's rows split; r set): its own pieces copied, the buffers replaced */
static int cf__shard_relayout(cf_net *net, int j) {
    cf__split_state *sp = &net->priv->split;
    cf_layer *l = &net->layers[j];
    size_t whole = net->n_params, F = cf_shape_size(l->in), R = (size_t)(l->out.c / sp->K), n, cut, q;
    float *params, *grads, *opt;
    int i, s;
    cut = (size_t)(l->out.c - (int)R) * (F + (l->has_bias ? 1 : 0));
    n = whole - cut;
    params = CF__NEW(float, n); grads = CF__NEW(float, n); opt = CF__NEW(float, (size_t)net->opt_slots * n);
    if (!params || !grads || !opt) {
        CF_FREE(params);
        CF_FREE(grads);
        CF_FREE(opt);
        return cf_fail("a split network's parameters: %s", cf_failure_reason());
    }
    sp->shard = j; sp->rows = (int)R; sp->whole_n = whole;
    net->n_params = n;   /* (what cf__piece_local computes with) */
    for (q = 0; q < (size_t)cf__n_pieces(net); q++) {
        cf__piece p = cf__piece_at(net, (int)q);
        size_t at = cf__piece_local(net, p);
        if (at == (size_t)-1 || !p.n) continue;
        memcpy(params + at, net->params + p.off, p.n * sizeof(float));
        for (s = 0; s < net->opt_slots; s++)
            memcpy(opt + s * n + at, net->opt + s * whole + p.off, p.n * sizeof(float));
    }
    CF_FREE(net->params); CF_FREE(net->grads); CF_FREE(net->opt);
    net->params = params; net->grads = grads; net->opt = opt;
    l->w_n = R * F;
    if (l->has_bias) { l->b_off = l->w_off + l->w_n; l->b_n = R; }
    for (i = j + 1; i < net->n_layers; i++) {
        if (net->layers[i].w_n) net->layers[i].w_off -= cut;
        if (net->layers[i].b_n) net->layers[i].b_off -= cut;
    }
    return CF_OK;
}

/* ---- the setup: the slabs' shapes, each convolution's halos, the split [dense], batch norm
   over the group; then the buffers of the exchanges for a batch */
CFDEF int cf_net_set_spatial(cf_net *net, int K, int periodic) {
    cf__split_state *sp;
    int i, end = 0;
    if (cf__net_check(net, "cf_net_set_spatial")) return CF_ERR;
    if (K < 1 || K > 65536) return cf_fail("cf_net_set_spatial: K = %d slabs (1 to 65536)", K);
    sp = &net->priv->split;
    if (sp->shard >= 0)
        return cf_fail("%s: its [dense] at line %d holds only this rank's rows (split across %d ranks): "
                       "a network is split once (load it anew to split it another way)",
                       net->cfg_name, net->layers[sp->shard].line, sp->K);
    if (cf__split_whole(net)) return CF_ERR;
    net->priv->plan.batch = 0;   /* the next forward plans anew */
    if (K == 1 && !periodic) { cf__split_comm_free(net); sp->on = 0; sp->K = 1; sp->r = 0; return CF_OK; }
    if (cf__split_fits(net, K, &end)) {
        int best = cf_net_spatial_max(net, K), more;
        char why[sizeof cf__err];
        memcpy(why, cf__err, sizeof why);
        if (!strstr(why, "across more ranks"))
            return cf_fail("%s (the largest split of %d or fewer ranks that works: %d)", why, K, best);
        for (more = K + 1; more <= 65536 && (net->input.d % more || cf__split_fits(net, more, &end)); more++) {}
        memcpy(cf__err, why, sizeof why);
        return more <= 65536 ? cf_fail("%s (the smallest split that works: %d)", why, more) : CF_ERR;
    }
    sp->K = K; sp->periodic = periodic != 0; sp->end = end; sp->on = 1;
    if (cf__split_comm_make(net)) { sp->on = 0; return CF_ERR; }   /* (sets r; one process: r = 0, no exchange) */
    sp->input = net->input; sp->input.d /= K;
    for (i = 0; i <= end; i++) {
        cf_layer *l = &net->layers[i];
        l->in.d /= K;
        if (i == end) break;   /* the [flatten]'s output is the whole gathered volume */
        l->out.d /= K;
        if (l->type == CF_L_CONV) {
            sp->hb[i] = l->g.pb[0];
            sp->ha[i] = l->g.dil[0] * (l->g.k[0] - 1) - l->g.pb[0] + 1 - l->g.s[0];
        }
    }
    if ((i = cf__shard_candidate(net, end, K)) >= 0 && cf__shard_relayout(net, i)) {
        cf__split_whole(net);
        sp->on = 0;
        return CF_ERR;
    }
    /* batch norm's statistics over the slabs */
    if (K > 1 && sp->comm && !net->priv->bn_sync.reduce) return cf_net_sync_bn(net, cf__split_sum, net);
    return CF_OK;
}
CFDEF int cf_net_spatial(const cf_net *net, int *r, int *d0) {
    const cf__split_state *sp;
    if (cf__net_check(net, "cf_net_spatial")) return CF_ERR;
    sp = &net->priv->split;
    if (r) *r = sp->on ? sp->r : 0;
    if (d0) *d0 = sp->on ? sp->r * sp->input.d : 0;
    return sp->on ? sp->K : 1;
}
/* the exchange's buffers for a batch of B (cf__plan): the largest extended convolution input and
   its gradient; the halos in transit and the gathered slabs */
static void cf__split_sizes(const cf_net *net, int B, size_t *ext, size_t *pack, size_t *part) {
    const cf__split_state *sp = &net->priv->split;
    int i;
    *ext = 1; *pack = 1; *part = 0;
    for (i = 0; i <= sp->end; i++) {
        const cf_layer *l = &net->layers[i];
        size_t plane = (size_t)B * l->in.c * l->in.h * l->in.w;
        if (i == sp->end) {
            if ((size_t)sp->K * plane * l->in.d > *pack) *pack = (size_t)sp->K * plane * l->in.d;
            break;
        }
        if (l->type != CF_L_CONV) continue;
        if (plane * (l->in.d + sp->hb[i] + sp->ha[i]) > *ext) *ext = plane * (l->in.d + sp->hb[i] + sp->ha[i]);
        if (2 * plane * (sp->hb[i] + sp->ha[i]) > *pack) *pack = 2 * plane * (sp->hb[i] + sp->ha[i]);
    }
    if (sp->shard >= 0) {   /* the shared [dense]: B rows-of-mine, then B out.c gathered or B F of dx */
        const cf_layer *l = &net->layers[sp->shard];
        size_t F = cf_shape_size(l->in);
        *part = (size_t)B * sp->rows + (size_t)B * (F > (size_t)l->out.c ? F : (size_t)l->out.c);
    }
}
CFDEF size_t cf_net_spatial_floats(cf_net *net, int B) {
    size_t ext, pack, part;
    if (cf__net_check(net, "cf_net_spatial_floats")) return (size_t)-1;
    if (B < 1) { cf_fail("cf_net_spatial_floats: batch %d < 1", B); return (size_t)-1; }
    if (!net->priv->split.on) return 0;
    cf__split_sizes(net, B, &ext, &pack, &part);
    return 2 * ext + pack + part;
}
static int cf__split_buffers(cf_net *net, int B) {
    cf__split_state *sp = &net->priv->split;
    size_t ext, pack, part;
    if (!sp->on) return CF_OK;
    cf__split_sizes(net, B, &ext, &pack, &part);
    if (ext > sp->ext_n) {
        CF_FREE(sp->ext); CF_FREE(sp->dext); sp->ext_n = 0;
        if (!(sp->ext = CF__NEW(float, ext)) || !(sp->dext = CF__NEW(float, ext)))
            return cf_fail("a split convolution's extended input: %s", cf_failure_reason());
        sp->ext_n = ext;
    }
    if (pack > sp->pack_n) {
        CF_FREE(sp->pack); sp->pack_n = 0;
        if (!(sp->pack = CF__NEW(float, pack))) return cf_fail("a split network's halos: %s", cf_failure_reason());
        sp->pack_n = pack;
    }
    if (part > sp->part_n) {
        CF_FREE(sp->part); sp->part_n = 0;
        if (!(sp->part = CF__NEW(float, part))) return cf_fail("a split [dense]'s rows: %s", cf_failure_reason());
        sp->part_n = part;
    }
    return CF_OK;
}
/* everything the split holds (cf_net_free) */
static void cf__split_free(cf_net *net) {
    cf__split_state *sp = &net->priv->split;
    cf__split_comm_free(net);
    CF_FREE(sp->gin); CF_FREE(sp->gout); CF_FREE(sp->hb); CF_FREE(sp->ha);
    CF_FREE(sp->ext); CF_FREE(sp->dext); CF_FREE(sp->pack); CF_FREE(sp->part);
}


/* ---- the exchanges: the group's communicator (the K consecutive ranks that share samples),
   each exchange bracketed for the watchdog (section 7, CF__WAIT) */
#ifdef CF_USE_MPI
static MPI_Comm *cf__split_mpi(const cf_net *net) { return (MPI_Comm *)net->priv->split.mpi_comm; }
static int cf__split_comm_make(cf_net *net) {
    cf__split_state *sp = &net->priv->split;
    int size = cf_dist_size(), rank = cf_dist_rank();
    cf__split_comm_free(net);
    sp->r = 0;
    if (size == 1) return CF_OK;   /* one process: the shapes only (K = 1: the wrap onto itself) */
    if (size % sp->K)
        return cf_fail("%d ranks do not form groups of %d (a sample across %d ranks needs a multiple of %d)", size,
                       sp->K, sp->K, sp->K);
    if (!(sp->mpi_comm = CF_MALLOC(sizeof(MPI_Comm))) || !(sp->cross_comm = CF_MALLOC(sizeof(MPI_Comm)))) {
        CF_FREE(sp->mpi_comm);
        return cf_fail("out of memory for a communicator");
    }
    MPI_Comm_split(MPI_COMM_WORLD, rank / sp->K, rank % sp->K, cf__split_mpi(net));          /* the group */
    MPI_Comm_split(MPI_COMM_WORLD, rank % sp->K, rank / sp->K, (MPI_Comm *)sp->cross_comm);  /* slab r of every group */
    sp->r = rank % sp->K;
    sp->comm = 1;
    return CF_OK;
}
static void cf__split_comm_free(cf_net *net) {
    cf__split_state *sp = &net->priv->split;
    int fin = 0;
    MPI_Finalized(&fin);
    if (sp->mpi_comm) { if (!fin) MPI_Comm_free(cf__split_mpi(net)); CF_FREE(sp->mpi_comm); }
    if (sp->cross_comm) { if (!fin) MPI_Comm_free((MPI_Comm *)sp->cross_comm); CF_FREE(sp->cross_comm); }
    sp->mpi_comm = sp->cross_comm = NULL; sp->comm = 0;
}
/* sends to_next (n1 floats) to the group's next rank, receiving the previous's into from_prev;
   then to_prev (n2) to the previous, receiving the next's into from_next.  At a face of the
   volume (not periodic) there is no partner: nothing sent, zeros received.  One rank (K = 1,
   periodic): itself on both sides. */
static void cf__halo_swap(cf_net *net, const float *to_next, float *from_prev, size_t n1, const float *to_prev,
                          float *from_next, size_t n2) {
    cf__split_state *sp = &net->priv->split;
    int K = sp->K, r = sp->r, next = r + 1 < K ? r + 1 : sp->periodic ? 0 : MPI_PROC_NULL,
        prev = r > 0 ? r - 1 : sp->periodic ? K - 1 : MPI_PROC_NULL;
    if (!sp->comm) {   /* one rank: the wrap onto itself, or the faces' zeros */
        if (sp->periodic) {
            memcpy(from_prev, to_next, n1 * sizeof(float));
            memcpy(from_next, to_prev, n2 * sizeof(float));
        }
        else { memset(from_prev, 0, n1 * sizeof(float)); memset(from_next, 0, n2 * sizeof(float)); }
        return;
    }
    CF_ASSERT(n1 < 2147483647u && n2 < 2147483647u);
    if (prev == MPI_PROC_NULL) memset(from_prev, 0, n1 * sizeof(float));
    if (next == MPI_PROC_NULL) memset(from_next, 0, n2 * sizeof(float));
    CF__WAIT("MPI_Sendrecv (a convolution's halo)");
    MPI_Sendrecv(to_next, (int)n1, MPI_FLOAT, next, 11, from_prev, (int)n1, MPI_FLOAT, prev, 11, *cf__split_mpi(net),
                 MPI_STATUS_IGNORE);
    MPI_Sendrecv(to_prev, (int)n2, MPI_FLOAT, prev, 12, from_next, (int)n2, MPI_FLOAT, next, 12, *cf__split_mpi(net),
                 MPI_STATUS_IGNORE);
    CF__WAITED;
}
/* every rank's n floats, in rank order, into all (K n) */
static void cf__split_allgather(cf_net *net, const float *mine, float *all, size_t n) {
    if (!net->priv->split.comm) { memcpy(all, mine, n * sizeof(float)); return; }
    CF_ASSERT(n < 2147483647u);
    CF__WAIT("MPI_Allgather (a split network's features)");
    MPI_Allgather(mine, (int)n, MPI_FLOAT, all, (int)n, MPI_FLOAT, *cf__split_mpi((cf_net *)net));
    CF__WAITED;
}
/* n floats summed in place over comm, in chunks, then divided by div (1: the sum) */
static void cf__allreduce_floats(float *buf, size_t n, MPI_Comm comm, int div, const char *what) {
    size_t off, k;
    for (off = 0; off < n; off += CF_ALLREDUCE_CHUNK) {
        size_t m = n - off < CF_ALLREDUCE_CHUNK ? n - off : CF_ALLREDUCE_CHUNK;
        CF__WAIT(what);
        MPI_Allreduce(MPI_IN_PLACE, buf + off, (int)m, MPI_FLOAT, MPI_SUM, comm);
        CF__WAITED;
        if (div > 1) for (k = off; k < off + m; k++) buf[k] /= (float)div;
    }
}
static void cf__split_sum_floats(cf_net *net, float *buf, size_t n) {
    if (net->priv->split.comm)
        cf__allreduce_floats(buf, n, *cf__split_mpi(net), 1, "MPI_Allreduce (a split [dense]'s part of dx)");
}
/* the gradient averaged over the D = P / K groups: each group's is the sum of its slabs' parts
   (the layers after the [flatten] run whole on every rank of a group: only its first adds
   theirs), summed over all ranks, divided by D.  A [dense] whose rows are split: each rank's
   rows summed over the ranks that hold them, one a group, divided by D. */
static void cf__split_average(cf_net *net) {
    cf__split_state *sp = &net->priv->split;
    int i, j, groups = cf_dist_size() / sp->K;
    if (!sp->comm) { cf_dist_allreduce_mean(net->grads, net->n_params); return; }
    if (sp->r)
        for (i = sp->end; i < net->n_layers; i++) {
            const cf_layer *l = &net->layers[i];
            if (i == sp->shard) continue;   /* (its rows are this rank's own) */
            if (l->w_n) memset(net->grads + l->w_off, 0, l->w_n * sizeof(float));
            if (l->b_n) memset(net->grads + l->b_off, 0, l->b_n * sizeof(float));
        }
    for (j = 0; j < cf__n_pieces(net); j++) {
        cf__piece p = cf__piece_at(net, j);
        size_t at = cf__piece_local(net, p);
        if (at == (size_t)-1 || !p.n) continue;
        if (p.owner < 0)
            cf__allreduce_floats(net->grads + at, p.n, MPI_COMM_WORLD, groups, "MPI_Allreduce of the gradient");
        else cf__allreduce_floats(net->grads + at, p.n, *(MPI_Comm *)sp->cross_comm, groups,
                                  "MPI_Allreduce of a split [dense]'s rows' gradient");
    }
}
#ifndef CF_NO_FILES
/* a checkpoint of a network whose [dense] rows are split (section 12): the rows other ranks
   hold, sent to the group's first rank in chunks, received there in the same chunks */
static void cf__split_send(cf_net *net, const float *buf, size_t n) {
    size_t off;
    for (off = 0; off < n; off += CF_ALLREDUCE_CHUNK) {
        CF__WAIT("MPI_Send (a split [dense]'s rows to the checkpoint's writer)");
        MPI_Send(buf + off, (int)(n - off < CF_ALLREDUCE_CHUNK ? n - off : CF_ALLREDUCE_CHUNK), MPI_FLOAT, 0, 13,
                 *cf__split_mpi(net));
        CF__WAITED;
    }
}
static void cf__split_recv(cf_net *net, int from, float *buf, size_t n) {
    size_t off;
    for (off = 0; off < n; off += CF_ALLREDUCE_CHUNK) {
        CF__WAIT("MPI_Recv (a split [dense]'s rows for the checkpoint)");
        MPI_Recv(buf + off, (int)(n - off < CF_ALLREDUCE_CHUNK ? n - off : CF_ALLREDUCE_CHUNK), MPI_FLOAT, from, 13,
                 *cf__split_mpi(net), MPI_STATUS_IGNORE);
        CF__WAITED;
    }
}
#endif
/* batch norm's sums over the group's slabs (a cf_bn_sync reduce; ctx: the network) */
static void cf__split_sum(double *buf, int n, void *ctx) {
    cf_net *net = (cf_net *)ctx;
    if (!net->priv->split.comm) return;
    CF__WAIT("MPI_Allreduce (batch norm over a sample's slabs)");
    MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_DOUBLE, MPI_SUM, *cf__split_mpi(net));
    CF__WAITED;
}
#else
/* one process: a split's shapes only, and the wrap of a periodic volume onto itself */
static int cf__split_comm_make(cf_net *net) { net->priv->split.r = 0; return CF_OK; }
static void cf__split_comm_free(cf_net *net) { net->priv->split.comm = 0; }
static void cf__halo_swap(cf_net *net, const float *to_next, float *from_prev, size_t n1, const float *to_prev,
                          float *from_next, size_t n2) {
    if (net->priv->split.periodic) {
        memcpy(from_prev, to_next, n1 * sizeof(float));
        memcpy(from_next, to_prev, n2 * sizeof(float));
    }
    else { memset(from_prev, 0, n1 * sizeof(float)); memset(from_next, 0, n2 * sizeof(float)); }
}
static void cf__split_allgather(cf_net *net, const float *mine, float *all, size_t n) {
    (void)net;
    memcpy(all, mine, n * sizeof(float));
}
static void cf__split_sum(double *buf, int n, void *ctx) { (void)buf; (void)n; (void)ctx; }
static void cf__split_sum_floats(cf_net *net, float *buf, size_t n) { (void)net; (void)buf; (void)n; }
static void cf__split_average(cf_net *net) { (void)net; }
#ifndef CF_NO_FILES
static void cf__split_send(cf_net *net, const float *buf, size_t n) { (void)net; (void)buf; (void)n; }
static void cf__split_recv(cf_net *net, int from, float *buf, size_t n) { (void)net; (void)from; (void)buf; (void)n; }
#endif
#endif

/* ================================================================ 9. the memory plan
   One arena holds every layer's output and output gradient, each a block planned over one
   training step's timeline: the forward of layer i at time i, the loss at n, the backward of
   layer i at 2n - i.  An output lives from its forward to its last forward reader and, when
   backward reads it, on to the last backward that does (a conv, batch norm, dense or pool
   layer reads its input there, an activated layer its own output: the derivative is taken
   from y).  A gradient lives from its last reader's backward (where it starts from zero) to
   its own layer's backward.  Blocks alive at the same time never share memory.  Made in
   three steps, each a function below:
     fusion     a conv whose only reader is a max pool with disjoint windows gets no gradient
                block: the pool's backward writes the conv's gradient over its output (fast
                path "fusion": the largest tensors' gradients, their zeroing and an
                activation pass disappear, with the same bits)
     halves     in a bf16 network, blocks stored as bf16 in 16 bits where every operation
                on them has a path that reads and writes 16 bits and computes the sums fp32
                storage gets (fast path "bf16"): a fused conv's output and the gradient
                written over it, a max pool's output and gradient between such convs; a
                conv's output and gradient when a batch norm alone reads it, a depthwise
                conv's when a pointwise conv alone reads it (DeepCAM); and the network's
                input read as given, its readers rounding it (no rounded copy).  The same
                bits as fp32 storage, in half the memory and traffic
     lives      when each block is alive (a batch norm's backward reads its input, not its
                output: its activation's derivative takes y computed again from x, section
                5).  Cheap outputs that backward reads (batch norm,
                activations, sums, concatenations, depthwise convolutions) are dropped after
                their forward readers and rebuilt from their inputs just before the first
                backward that reads them (fast path "recompute": one more elementwise pass
                for memory that serves other tensors in between)
     stores     a gradient block whose first writer (its last reader's backward) reads it
                once and can store gets no zeroing: that backward stores 0 + its term where
                the others add theirs (fast path "stores": the same bits, one pass over the
                block fewer; deepcam.cfg's blocks are about 5 GB a sample)
     placement  offsets, first fit, largest block first.
   keep_acts = 1 (or the fast paths off) plans every output to live to the end of the step. */
enum { CF__PLAN_KEEP = 1, CF__PLAN_FUSE = 2, CF__PLAN_REBUILD = 4, CF__PLAN_HALF = 8, CF__PLAN_DINPUT = 16,
      CF__PLAN_STORE = 32 };

/* a block: its size and up to two live intervals [t[0], t[1]], [t[2], t[3]] */
typedef struct { size_t size, off; int t[4], n; } cf__blk;
static int cf__blk_alive(const cf__blk *b, int t) {
    int k;
    for (k = 0; k < b->n; k++) if (b->t[2 * k] <= t && t <= b->t[2 * k + 1]) return 1;
    return 0;
}
static int cf__blk_meet(const cf__blk *a, const cf__blk *b) {
    int i, j;
    for (i = 0; i < a->n; i++) for (j = 0; j < b->n; j++)
        if (a->t[2 * i] <= b->t[2 * j + 1] && b->t[2 * j] <= a->t[2 * i + 1]) return 1;
    return 0;
}

/* step 0: the last layer whose forward reads each output (n for the network's output: the loss) */
static void cf__plan_readers(cf_net *net) {
    int i, j, n = net->n_layers;
    for (i = 0; i < n; i++) net->priv->plan.l[i].last_read = -1;
    for (i = 0; i < n; i++)
        for (j = 0; j < net->layers[i].n_src; j++)
            if (net->layers[i].src[j] >= 0) net->priv->plan.l[net->layers[i].src[j]].last_read = i;
    net->priv->plan.l[n - 1].last_read = n;
    for (i = 0; i < n; i++) if (net->priv->plan.l[i].last_read < 0) net->priv->plan.l[i].last_read = i;
}

/* the one layer that reads block s, or -1 (none, or more than one) */
static int cf__only_reader(const cf_net *net, int s) {
    int j, k, reader = -1;
    for (j = s + 1; j < net->n_layers; j++)
        for (k = 0; k < net->layers[j].n_src; k++)
            if (net->layers[j].src[k] == s) { if (reader >= 0) return -1; reader = j; }
    return reader;
}
/* step 1, fusion: conv i and max pool p pair when p is the conv's only reader and its windows
   are disjoint and inside (k = s, dilation 1, no padding): then each conv output is read by
   exactly one window, and the pool's backward can write dL/dz there (cf__pool_fused_backward) */
static void cf__plan_fusion(cf_net *net, int allow) {
    int i, j, a, n = net->n_layers;
    for (i = 0; i < n; i++) {
        cf__plan_layer *pl = &net->priv->plan.l[i];
        const cf_layer *p;
        int ok;
        pl->fused_pool = -1;
        if (!allow || net->layers[i].type != CF_L_CONV || pl->last_read >= n || (j = cf__only_reader(net, i)) < 0)
            continue;
        p = &net->layers[j];   /* (its last reader) */
        ok = p->type == CF_L_MAXPOOL && p->n_src == 1;
        for (a = 0; a < 3 && ok; a++)
            ok = p->g.k[a] == p->g.s[a] && p->g.dil[a] == 1 && p->g.pb[a] == 0 && p->g.pa[a] == 0;
        if (ok) pl->fused_pool = j;
    }
}

/* step 1b, halves: which outputs and gradients are stored in 16 bits.  A block qualifies when
   every operation on it has a path that takes 16 bits (the paths marked half in section 4's
   tables): a fused conv's output and the gradient over it (the conv's forward, backward-weights
   and backward-data, the pool's forward and fused backward); a max pool's output after such a
   conv when its readers are convolutions that take their input in 16 bits; that pool's
   gradient when its one reader writes it through a path that stores 16 bits.  The pool's
   windows must cover the conv's output (nothing past the last window to zero).  And a conv's
   or a transposed conv's output and the gradient over it when its one reader is a [batchnorm]
   (DeepCAM's conv -> batch norm pairs; section 4, "batch norm on tensors stored in 16
   bits"): the conv without an activation of its own (the batch norm has it), its three
   operations with half paths, the batch norm's statistics this rank's alone (not
   synchronized).  A conv's output alone (its gradient fp32) when its one reader is a
   transposed conv that reads it in 16 bits. */
/* how many layers read block s (-1: the network's input), when every one is a bf16 conv that
   takes 16-bit operands; 0 when any is not */
static int cf__readers_take_halves(cf_net *net, int s, int flags) {
    int j, k, readers = 0;
    for (j = s + 1; j < net->n_layers; j++)
        for (k = 0; k < net->layers[j].n_src; k++)
            if (net->layers[j].src[k] == s) {
                if (!cf__rounds(net, j) || !cf__conv_takes_halves(net, &net->layers[j], (flags & CF__PLAN_DINPUT) != 0,
                                                                  CF__HALF_ALL)) return 0;
                readers++;
            }
    return readers;
}
static int cf__conv_to_bn_half(cf_net *net, int i, int flags) {
    const cf_layer *l = &net->layers[i];
    int j = cf__only_reader(net, i), halves = CF__HALF_OUT | cf__planned_input(net, l);
    if (l->act != CF_ACT_LINEAR || j <= i || net->layers[j].type != CF_L_BATCHNORM || !cf__rounds(net, j) ||
        net->priv->bn_sync.reduce) return 0;
    if (l->type == CF_L_DECONV) return cf__deconv_takes_halves(net, l, halves);   /* (a transposed conv's too) */
    return l->type == CF_L_CONV && !l->depthwise && cf__conv_takes_halves(net, l, (flags & CF__PLAN_DINPUT) != 0,
                                                                          halves);
}
/* layer l's input as planned (CF__HALF_*; the network's input: CF__RAW_IN, read as given where
   the plan says so, plan.input_raw) */
static int cf__planned_input(const cf_net *net, const cf_layer *l) {
    const cf__plan_layer *pl = net->priv->plan.l;
    int s = l->src[0];
    return s < 0 ? CF__RAW_IN : (pl[s].half ? CF__HALF_IN : 0) | (pl[s].grad_half ? CF__HALF_DIN : 0);
}
/* a depthwise conv's output and the gradient over it when its one reader is a conv that reads
   that input and writes its gradient in 16 bits (DeepCAM's separable convolutions: depthwise,
   then pointwise; the pointwise conv's own output is decided after) */
static int cf__dw_to_conv_half(cf_net *net, int i) {
    const cf_layer *l = &net->layers[i];
    int j = cf__only_reader(net, i);
    if (l->type != CF_L_CONV || !l->depthwise || l->act != CF_ACT_LINEAR || j <= i ||
        net->layers[j].type != CF_L_CONV || net->layers[j].depthwise || !cf__rounds(net, j)) return 0;
    return cf__conv_takes_halves(net, l, 1, CF__HALF_OUT | cf__planned_input(net, l)) &&
           cf__conv_takes_halves(net, &net->layers[j], 1, CF__HALF_IN | CF__HALF_DIN);
}
/* a batch norm's output and the gradient over it when its one reader is a conv (depthwise or
   not) or a transposed conv that reads that input and writes its gradient in 16 bits (the
   batch norm writes y and reads dy so, its activation's derivative taken from x) */
static int cf__bn_to_half(cf_net *net, int i) {
    const cf_layer *l = &net->layers[i], *r;
    int j = cf__only_reader(net, i), in = CF__HALF_IN | CF__HALF_DIN;
    if (l->type != CF_L_BATCHNORM || !cf__rounds(net, i) || net->priv->bn_sync.reduce || j <= i || !cf__rounds(net, j))
        return 0;
    r = &net->layers[j];
    if (r->type == CF_L_CONV) return cf__conv_takes_halves(net, r, 1, in);
    return r->type == CF_L_DECONV && cf__deconv_takes_halves(net, r, in);
}
/* a conv's output alone (the gradient over it in fp32) when its one reader is a transposed
   conv that reads it in 16 bits but cannot store the gradient so (DeepCAM's decoder: the 1x1
   conv before the last transposed conv, whose dx sums 2304 terms) */
static int cf__conv_to_deconv_half(cf_net *net, int i, int flags) {
    const cf_layer *l = &net->layers[i];
    int j = cf__only_reader(net, i), in = cf__planned_input(net, l), dinput = (flags & CF__PLAN_DINPUT) != 0;
    if (l->type != CF_L_CONV || l->depthwise || l->act != CF_ACT_LINEAR || j <= i ||
        net->layers[j].type != CF_L_DECONV || !cf__rounds(net, j)) return 0;
    return cf__conv_takes_halves(net, l, dinput, CF__HALF_OUT | in) &&
           (!in || cf__conv_takes_halves(net, l, dinput, in)) &&
                   cf__deconv_takes_halves(net, &net->layers[j], CF__HALF_IN);
}
static void cf__plan_halves(cf_net *net, int i, int flags) {
    cf__plan_layer *pl = &net->priv->plan.l[i];
    const cf_layer *l = &net->layers[i];
    int readers, n = net->n_layers;
    pl->half = pl->grad_half = 0;
    if (!(flags & CF__PLAN_HALF) || !cf__rounds(net, i)) return;
    if (pl->fused_pool >= 0) {   /* a fused conv */
        pl->half = cf__conv_takes_halves(net, l, (flags & CF__PLAN_DINPUT) != 0, CF__HALF_ALL) &&
                cf__pool_takes_halves(net, &net->layers[pl->fused_pool], 0);
        return;
    }
    if (i < n - 1 && (cf__conv_to_bn_half(net, i, flags) || cf__dw_to_conv_half(net, i) || cf__bn_to_half(net, i))) {
        pl->half = pl->grad_half = 1;
        return;
    }
    if (i < n - 1 && cf__conv_to_deconv_half(net, i, flags)) { pl->half = 1; return; }
    if (l->type != CF_L_MAXPOOL || i == n - 1 || l->src[0] < 0 || !net->priv->plan.l[l->src[0]].half) return;
    if (!(readers = cf__readers_take_halves(net, i, flags)) || !cf__pool_takes_halves(net, l, 1)) return;
    pl->half = 1;
    pl->grad_half = readers == 1;   /* written once by its reader's backward-data (a half path stores it) */
}
/* the network's input read as it is, each reader rounding it as it reads (the half paths
   pack their operands with vcvtne2ps2bf16, which rounds): every layer that reads it is a bf16
   conv that takes it so, its output stored as planned (after the halves) */
static int cf__plan_input_raw(cf_net *net, int flags) {
    int j, k, readers = 0;
    for (j = 0; j < net->n_layers && (flags & CF__PLAN_HALF); j++)
        for (k = 0; k < net->layers[j].n_src; k++)
            if (net->layers[j].src[k] == -1) {
                int out = net->priv->plan.l[j].half ? CF__HALF_OUT : 0;
                if (!cf__rounds(net, j) || !cf__conv_takes_halves(net, &net->layers[j], (flags & CF__PLAN_DINPUT) != 0,
                                                                  CF__RAW_IN | out)) return 0;
                readers++;
            }
    return readers > 0;
}

/* what a layer's backward reads besides gradients: its input (src[0]) and/or its output; a
   fused conv finds its gradient in its output, so it "reads" that too */
static int cf__reads_output(const cf_net *net, int i) {
    const cf_layer *l = &net->layers[i];
    int f = cf__types[l->type].flags;
    return (f & CF__READS_OUT) || ((f & CF__READS_OUT_IF_ACT) && l->act != CF_ACT_LINEAR) ||
           net->priv->plan.l[i].fused_pool >= 0;
}
/* outputs that cost about one pass over their inputs to rebuild, changing no state (a
   depthwise conv is a direct loop over 9 taps: a few percent of its pointwise partner) */
static int cf__cheap(const cf_layer *l) { return (cf__types[l->type].flags & CF__CHEAP) || l->depthwise; }

/* Can layer s's output be read at time t?  Yes when it is alive then, or when it can be
   rebuilt then from inputs that can (recursively): commit = 1 then moves (or adds) its
   rebuild to t, so that it happens, in forward order, before whatever reads it. */
static int cf__available(cf_net *net, cf__blk *blk, int s, int t, int commit, int rebuild) {
    cf_layer *l = &net->layers[s];
    cf__blk *b = &blk[2 * s];
    int k, n = net->n_layers;
    if (cf__blk_alive(b, t)) return 1;
    if (!rebuild || !cf__cheap(l) || s == n - 1 || t <= n || (b->n == 2 && t > b->t[2])) return 0;
    for (k = 0; k < l->n_src; k++)
        if (l->src[k] >= 0 && !cf__available(net, blk, l->src[k], t, commit, rebuild)) return 0;
    if (commit) {
        if (b->n == 1) { b->n = 2; b->t[3] = t; }
        b->t[2] = t;
        net->priv->plan.l[s].rebuild_at = 2 * n - t;
    }
    return 1;
}

/* the first and last backward times that read layer i's output, or -1 */
static void cf__backward_reads(const cf_net *net, int i, int *first, int *last) {
    int j, n = net->n_layers;
    *first = *last = -1;
    if (cf__reads_output(net, i)) *first = *last = 2 * n - i;
    for (j = i + 1; j < n; j++) {
        const cf_layer *c = &net->layers[j];
        if (c->n_src && c->src[0] == i && (cf__types[c->type].flags & CF__READS_IN)) {
            if (*first < 0 || 2 * n - j < *first) *first = 2 * n - j;
            if (2 * n - j > *last) *last = 2 * n - j;
        }
    }
}

/* step 2, lives: blk[2i] is layer i's output, blk[2i + 1] its gradient */
static void cf__plan_lives(cf_net *net, cf__blk *blk, int keep, int rebuild, int flags) {
    int n = net->n_layers, i, k, T = 2 * n + 1;   /* T: after the whole step */
    for (i = 0; i < n; i++) {
        cf__plan_layer *pl = &net->priv->plan.l[i];
        cf__blk *o = &blk[2 * i], *g = &blk[2 * i + 1];
        int first, last, ok = 1;
        size_t n_out = cf_shape_size(net->layers[i].out) * net->batch;
        cf__backward_reads(net, i, &first, &last);
        cf__plan_halves(net, i, flags);
        o->size = pl->half ? (n_out + 1) / 2 : n_out;   /* in floats: 16 bits each, two to a float */
        o->n = 1; o->t[0] = i; o->t[1] = pl->last_read;
        pl->rebuild_at = -1;
        if (keep) o->t[1] = T;
        else if (first >= 0 && rebuild && cf__cheap(&net->layers[i]) && i < n - 1) {
            const cf_layer *l = &net->layers[i];   /* rebuilt from its inputs: they must be there then */
            for (k = 0; k < l->n_src; k++)
                if (l->src[k] >= 0 && !cf__available(net, blk, l->src[k], first, 0, rebuild)) ok = 0;
            for (k = 0; k < l->n_src && ok; k++)
                if (l->src[k] >= 0) cf__available(net, blk, l->src[k], first, 1, rebuild);
            if (ok) { o->n = 2; o->t[2] = first; o->t[3] = last; pl->rebuild_at = 2 * n - first; }
            else o->t[1] = last;
        } else if (last > o->t[1]) o->t[1] = last;
        pl->fwd_end = o->t[1];
        /* fused: the gradient lives in the output */
        g->size = pl->fused_pool >= 0 ? 0 : pl->grad_half ? (n_out + 1) / 2 : n_out;
        g->n = 1; g->t[0] = 2 * n - (pl->last_read < n - 1 ? pl->last_read : n - 1); g->t[1] = 2 * n - i;
    }
    /* A rebuilt output lives until its last use: its own backward's reads, or the rebuild of
       a layer that reads it.  A chain of cheap layers rebuilt for a later one (DeepCAM's
       middle flow: relu(batch norm + the previous block's relu)) moves each link's rebuild
       earlier; its batch norm and sum are then read at that rebuild alone, not at the time
       first asked (deepcam.cfg bf16: 1176.8 -> 1166.7 MB a sample; at the rebuild's own step
       every link is still alive, the plan counting time a layer at a time). */
    for (i = 0; i < n; i++) {
        cf__blk *o = &blk[2 * i];
        int first, last, j;
        if (o->n != 2) continue;
        cf__backward_reads(net, i, &first, &last);
        o->t[3] = last > o->t[2] ? last : o->t[2];
        for (j = i + 1; j < n; j++)
            for (k = 0; k < net->layers[j].n_src; k++)
                if (net->layers[j].src[k] == i && blk[2 * j].n == 2 && blk[2 * j].t[2] > o->t[3])
                    o->t[3] = blk[2 * j].t[2];
    }
}

/* step 3, placement: the blocks by size, largest first (ties in block order); each at the
   lowest offset where it overlaps no placed block alive at the same time.  placed[] holds the
   placed blocks by offset.  Returns the arena's floats, or (size_t)-1 when out of memory. */
typedef struct { size_t size; int i; } cf__blk_key;   /* what the sort compares: no shared state */
static int cf__by_size(const void *a, const void *b) {
    const cf__blk_key *x = (const cf__blk_key *)a, *y = (const cf__blk_key *)b;
    return x->size != y->size ? (x->size < y->size ? 1 : -1) : (x->i > y->i) - (x->i < y->i);
}
static size_t cf__plan_place(cf__blk *blk, int nb) {
    cf__blk_key *order = CF__NEW(cf__blk_key, nb);
    int *placed = CF__NEW(int, nb), i, j, np = 0;
    size_t total = 0;
    if (!order || !placed) { CF_FREE(order); CF_FREE(placed); return (size_t)-1; }
    for (i = 0; i < nb; i++) { order[i].size = blk[i].size; order[i].i = i; }
    qsort(order, (size_t)nb, sizeof *order, cf__by_size);
    for (i = 0; i < nb; i++) {
        cf__blk *b = &blk[order[i].i];
        size_t off = 0;
        b->off = 0;
        if (!b->size) continue;
        for (j = 0; j < np; j++) {   /* the lowest gap among the blocks alive with this one */
            const cf__blk *h = &blk[placed[j]];
            if (!cf__blk_meet(b, h)) continue;
            if (off + b->size <= h->off) break;
            if (h->off + h->size > off) off = h->off + h->size;
        }
        b->off = off;
        if (off + b->size > total) total = off + b->size;
        /* keep placed[] by offset */
        for (j = np; j > 0 && blk[placed[j - 1]].off > off; j--) placed[j] = placed[j - 1];
        placed[j] = order[i].i;
        np++;
    }
    CF_FREE(order); CF_FREE(placed);
    return total;
}

/* step 3, stores: layer j's gradient block is first written by its last reader i's backward
   (backward runs from the last layer down; the network's output's by the loss gradient's
   copy).  When i reads j once and its type can store (CF__STORES), i stores 0 + its term
   there and the block is not zeroed: the same bits as zeroing and adding.  Not for a fused
   conv (its pool writes over its output) nor a block in 16 bits (its writer stores already). */
static void cf__plan_stores(cf_net *net, int allow) {
    int j, k, n = net->n_layers;
    for (j = 0; j < n; j++) {
        cf__plan_layer *pl = &net->priv->plan.l[j];
        const cf_layer *r;
        int reads = 0;
        pl->grad_store = 0;
        if (!allow || pl->fused_pool >= 0 || pl->grad_half) continue;
        if (j == n - 1) { pl->grad_store = 1; continue; }
        r = &net->layers[pl->last_read];
        for (k = 0; k < r->n_src; k++) reads += r->src[k] == j;
        pl->grad_store = reads == 1 && (cf__types[r->type].flags & CF__STORES);
    }
}
/* whether layer l's backward stores into (not adds to) its source k's gradient (step 3) */
static int cf__stores_grad(const cf_net *net, const cf_layer *l, int k) {
    int s = l->src[k];
    return s >= 0 && net->priv->plan.l[s].grad_store && net->priv->plan.l[s].last_read == (int)(l - net->layers);
}

/* the whole plan for net->batch under flags; fills plan.l and returns the arena's floats */
static size_t cf__plan_make(cf_net *net, int flags) {
    int i, n = net->n_layers;
    cf__blk *blk = CF__NEW(cf__blk, 2 * n);
    size_t total;
    if (!blk) return (size_t)-1;
    cf__plan_readers(net);
    cf__plan_fusion(net, (flags & CF__PLAN_FUSE) != 0);
    cf__plan_lives(net, blk, flags & CF__PLAN_KEEP, (flags & CF__PLAN_REBUILD) != 0, flags);
    cf__plan_stores(net, (flags & CF__PLAN_STORE) != 0);
    net->priv->plan.input_raw = cf__plan_input_raw(net, flags);
    total = cf__plan_place(blk, 2 * n);
    for (i = 0; i < n; i++) {
        cf__plan_layer *pl = &net->priv->plan.l[i];
        pl->y_off = blk[2 * i].off;
        pl->dy_off = pl->fused_pool >= 0 ? pl->y_off : blk[2 * i + 1].off;
    }
    CF_FREE(blk);
    return total;
}

/* the plan's settings: keep_acts, and which of its fast paths are on */
static int cf__plan_flags(const cf_net *net, int keep_acts) {
    if (keep_acts) return CF__PLAN_KEEP;
    return (net->priv->no_fuse || !cf__kind_on[CF__K_FUSION] ? 0 : CF__PLAN_FUSE) |
           (cf__kind_on[CF__K_RECOMPUTE] ? CF__PLAN_REBUILD : 0) |
           (net->priv->precision == CF_BF16 && !net->priv->no_half && !net->priv->split.on && cf__kind_on[CF__K_BF16] &&
            cf__kind_on[CF__K_PAIRS] ? CF__PLAN_HALF : 0) |
           (net->priv->dinput ? CF__PLAN_DINPUT : 0) | (cf__kind_on[CF__K_STORES] ? CF__PLAN_STORE : 0);
}

static int cf__plan_threads(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}
/* plans for B (again when B or a setting changed); the arena only grows, so a smaller last
   batch (validation) costs no allocation */
/* a layer's output per sample (a rank's slab when split) at most CF__MAX_ELEMENTS values */
static int cf__plan_sizes(const cf_net *net) {
    int i, K;
    for (i = 0; i < net->n_layers; i++) {
        const cf_layer *l = &net->layers[i];
        if (cf_shape_size(l->out) <= CF__MAX_ELEMENTS) continue;
        for (K = 2; K <= 4096 && (double)cf_shape_size(l->out) / K > (double)CF__MAX_ELEMENTS; K *= 2) {}
        return cf_fail("%s:%d: [%s] would output %dx%dx%dx%d per sample: %.3g values, at most %lld a rank (split each "
                       "sample across ranks: cf_net_set_spatial, --spatial %d or more)", net->cfg_name, l->line,
                       cf_layer_type_name(l->type), l->out.c, l->out.d, l->out.h, l->out.w,
                           (double)cf_shape_size(l->out),
                       (long long)CF__MAX_ELEMENTS, K);
    }
    return CF_OK;
}
static int cf__plan(cf_net *net, int B) {
    int flags = cf__plan_flags(net, net->priv->keep_acts);
    size_t na;
    if (B < 1) return cf_fail("batch %d < 1", B);
    if (B == net->priv->plan.batch && net->priv->arena && flags == net->priv->plan.flags &&
        cf__plan_threads() == net->priv->plan.threads) return CF_OK;
    if (cf__plan_sizes(net)) return CF_ERR;
    if (cf__split_buffers(net, B)) return CF_ERR;
    net->priv->plan.batch = net->batch = B;
    if ((na = cf__plan_make(net, flags)) == (size_t)-1) { net->priv->plan.batch = 0; return CF_ERR; }
    if (na > net->priv->plan.cap) {
        CF_FREE(net->priv->arena);
        net->priv->plan.cap = 0;
        if (!(net->priv->arena = CF__NEW(float, na))) {
            net->priv->plan.batch = 0;
            return cf_fail("%s: %s: the outputs and gradients of a batch of %d need %.0f MB", net->cfg_name,
                           cf_failure_reason(), B, na * 4e-6);
        }
        net->priv->plan.cap = na;
    }
    net->priv->plan.floats = na;
    net->priv->plan.flags = flags;
    net->priv->plan.threads = cf__plan_threads();
    return CF_OK;
}
CFDEF int cf_net_set_batch(cf_net *net, int B) {
    return cf__net_check(net, "cf_net_set_batch") ? CF_ERR : cf__plan(net, B);
}

CFDEF size_t cf_net_arena_floats(cf_net *net, int B, int keep_acts) {
    int batch;
    size_t na;
    if (cf__net_check(net, "cf_net_arena_floats")) return (size_t)-1;
    if (B < 1) { cf_fail("cf_net_arena_floats: batch %d < 1", B); return (size_t)-1; }
    batch = net->batch;
    net->batch = B;
    na = cf__plan_make(net, cf__plan_flags(net, keep_acts));
    net->batch = batch;
    net->priv->plan.batch = 0;   /* plan.l now describes this plan: the next forward plans anew */
    return na;
}
CFDEF int cf_net_stored_bits(const cf_net *net, int layer, int gradient) {
    const cf__plan_layer *pl;
    if (!cf__net_ok(net) || layer < 0 || layer >= net->n_layers || !net->priv->plan.l) return -1;
    pl = &net->priv->plan.l[layer];
    if (!gradient) return pl->half ? 16 : 32;
    if (pl->fused_pool >= 0) return 0;
    return pl->grad_half ? 16 : 32;
}

/* ================================================================ 10. optimizers */
/* opt holds at least slots slots (section A): a new slot is zero */
static int cf__opt_slots(cf_net *net, int slots) {
    float *opt;
    if (net->opt_slots >= slots) return CF_OK;
    if (!(opt = CF__NEW(float, (size_t)slots * net->n_params)))
        return cf_fail("the optimizer's second moments (%zu floats): %s", net->n_params, cf_failure_reason());
    memcpy(opt, net->opt, (size_t)net->opt_slots * net->n_params * sizeof(float));
    CF_FREE(net->opt);
    net->opt = opt; net->opt_slots = slots;
    return CF_OK;
}
/* A building block's argument against the range of its training setting (key) in the table
   of section 11, the range cf_train_init checks: CF_ERR, "fn: key X is not in [lo, hi]".
   upper = 0: the lower bound alone, for a step's learning rate, which linear scaling by the
   global batch takes above the base lr's bound. */
static int cf__check_arg(const char *fn, const char *key, double x, int upper);
CFDEF int cf_sgd_step(cf_net *net, float lr, float momentum, float l2) {
    int i;
    CF__NET_RETURN_UNLESS(net, CF_ERR, "cf_sgd_step");
    if (cf__check_arg("cf_sgd_step", "lr", lr, 0) || cf__check_arg("cf_sgd_step", "momentum", momentum, 1) ||
        cf__check_arg("cf_sgd_step", "l2", l2, 1)) return CF_ERR;
    for (i = 0; i < net->n_layers; i++) {
        cf_layer *l = &net->layers[i];
        long k, n = (long)(l->w_n + l->b_n), nw = (long)l->w_n;   /* weight and bias are adjacent */
        float *w = net->params + l->w_off, *v = net->opt + l->w_off;
        const float *dw = net->grads + l->w_off;
        int decay = l->l2 && l2 != 0.0f;
        CF__PAR_FOR(n)   /* (each element on its own: the same values on any number of threads) */
        for (k = 0; k < n; k++) {
            float g = dw[k];
            /* Keras kernel_regularizer l2: loss += l2*sum(w^2), so the gradient gains 2*l2*w */
            if (decay && k < nw) g += 2.0f * l2 * w[k];
            v[k] = momentum * v[k] - lr * g;
            w[k] += v[k];
        }
    }
    return CF_OK;
}

/* One parameter tensor at a time (PyTorch's per-tensor norms): weight, then bias. */
static int cf__next_tensor(const cf_net *net, int *i, int *part, size_t *off, size_t *n) {
    for (; *i < net->n_layers; (*i)++, *part = 0) {
        const cf_layer *l = &net->layers[*i];
        if (*part == 0 && l->w_n) { *off = l->w_off; *n = l->w_n; *part = 1; return 1; }
        if (*part <= 1 && l->b_n) { *off = l->b_off; *n = l->b_n; *part = 2; return 1; }
    }
    return 0;
}

CFDEF int cf_adam_step(cf_net *net, float lr, float beta1, float beta2, float eps, float wd,
                       int decoupled, uint64_t t) {
    long k, n;
    float *m, *v, *w, bc1, sq2, step, decay, l2;
    const float *gr;
    CF__NET_RETURN_UNLESS(net, CF_ERR, "cf_adam_step");
    CF__RETURN_UNLESS(t >= 1, CF_ERR, "cf_adam_step: t counts the updates from 1");
    CF__RETURN_UNLESS(decoupled == 0 || decoupled == 1, CF_ERR, "cf_adam_step: decoupled is not 0 or 1");
    if (cf__check_arg("cf_adam_step", "lr", lr, 0) || cf__check_arg("cf_adam_step", "betas", beta1, 1) ||
        cf__check_arg("cf_adam_step", "betas", beta2, 1) || cf__check_arg("cf_adam_step", "eps", eps, 1) ||
        cf__check_arg("cf_adam_step", "weight_decay", wd, 1)) return CF_ERR;
    if (cf__opt_slots(net, 2)) return CF_ERR;
    n = (long)net->n_params; m = net->opt; v = net->opt + n; w = net->params; gr = net->grads;
    bc1 = (float)(1.0 - pow(beta1, (double)t)); sq2 = (float)sqrt(1.0 - pow(beta2, (double)t));
    step = lr / bc1; decay = decoupled ? 1.0f - lr * wd : 1.0f; l2 = decoupled ? 0.0f : wd;
    CF__OMP(omp parallel for schedule(static))
    for (k = 0; k < n; k++) {
        float g = gr[k] + l2 * w[k];
        w[k] *= decay;
        m[k] = beta1 * m[k] + (1.0f - beta1) * g;
        v[k] = beta2 * v[k] + (1.0f - beta2) * g * g;
        /* torch: w -= lr/bc1 * m / (sqrt(v)/sqrt(bc2) + eps) */
        w[k] -= step * m[k] / (sqrtf(v[k]) / sq2 + eps);
    }
    return CF_OK;
}

/* The update u of each tensor is needed twice (its norm, then the step), so pass 1 writes it
   over the gradient, which the step has consumed: no buffer the size of the model, and no
   second square root per parameter.  net->grads holds the updates afterwards. */
CFDEF double cf_lamb_step(cf_net *net, float lr, float beta1, float beta2, float eps, float wd,
                          float max_grad_norm, uint64_t t) {
    long k, n;
    size_t off, cnt;
    float *m, *v, *gr, bc1, bc2, inv_clip = 1.0f;
    double gn = 0.0;
    int i = 0, part = 0;
    CF__NET_RETURN_UNLESS(net, NAN, "cf_lamb_step");
    CF__RETURN_UNLESS(t >= 1, NAN, "cf_lamb_step: t counts the updates from 1");
    if (cf__check_arg("cf_lamb_step", "lr", lr, 0) || cf__check_arg("cf_lamb_step", "betas", beta1, 1) ||
        cf__check_arg("cf_lamb_step", "betas", beta2, 1) || cf__check_arg("cf_lamb_step", "eps", eps, 1) ||
        cf__check_arg("cf_lamb_step", "weight_decay", wd, 1) ||
                cf__check_arg("cf_lamb_step", "max_grad_norm", max_grad_norm, 1)) return NAN;
    if (cf__opt_slots(net, 2)) return NAN;
    n = (long)net->n_params; m = net->opt; v = net->opt + n; gr = net->grads;
    bc1 = (float)(1.0 - pow(beta1, (double)t)); bc2 = (float)(1.0 - pow(beta2, (double)t));
    CF__OMP(omp parallel for schedule(static) reduction(+:gn))
    for (k = 0; k < n; k++) gn += (double)gr[k] * gr[k];
    gn = sqrt(gn);
    if (max_grad_norm > 0 && gn > max_grad_norm) inv_clip = (float)(max_grad_norm / gn);
    while (cf__next_tensor(net, &i, &part, &off, &cnt)) {
        double wn = 0.0, un = 0.0;
        float *w = net->params + off, *mt = m + off, *vt = v + off, *g = gr + off, ratio;
        long j, c = (long)cnt;
        CF__OMP(omp parallel for schedule(static) reduction(+:wn, un))
        for (j = 0; j < c; j++) {
            float gk = g[j] * inv_clip, u;
            mt[j] = beta1 * mt[j] + (1.0f - beta1) * gk;
            vt[j] = beta2 * vt[j] + (1.0f - beta2) * gk * gk;
            u = (mt[j] / bc1) / (sqrtf(vt[j] / bc2) + eps) + wd * w[j];
            g[j] = u;
            wn += (double)w[j] * w[j]; un += (double)u * u;
        }
        wn = sqrt(wn); un = sqrt(un);
        ratio = (float)((wd != 0.0f && wn > 0.0 && un > 0.0) ? lr * wn / un : lr);
        CF__OMP(omp parallel for schedule(static))
        for (j = 0; j < c; j++) w[j] -= ratio * g[j];
    }
    return gn;
}

CFDEF int cf_larc_scale(cf_net *net, float eta) {
    size_t k, off, cnt;
    int i = 0, part = 0;
    CF__NET_RETURN_UNLESS(net, CF_ERR, "cf_larc_scale");
    if (cf__check_arg("cf_larc_scale", "larc", eta, 1)) return CF_ERR;
    while (cf__next_tensor(net, &i, &part, &off, &cnt)) {
        double wn = 0.0, gn = 0.0, s;
        for (k = 0; k < cnt; k++) {
            wn += (double)net->params[off + k] * net->params[off + k];
            gn += (double)net->grads[off + k] * net->grads[off + k];
        }
        if (wn == 0.0 || gn == 0.0) continue;
        s = eta * sqrt(wn) / sqrt(gn);
        if (s < 1.0) for (k = 0; k < cnt; k++) net->grads[off + k] *= (float)s;
    }
    return CF_OK;
}

/* The reference's torch schedulers, in closed form (O(1) at any step).  Warmup (k <= W): base
   * k / W (factor 1) or base * ((factor - 1) k / W + 1); its first step has lr 0, as in the
   reference.  After it, torch CHAINS each step's lr from the previous one; the closed forms
   of those chains, from the warmup's last lr L (base without warmup):
     multistep   L times gamma once for each milestone m reached, at k >= m + W + 1 (plain
                 MultiStepLR, W = 0: at k >= m): the chain's own products, the same bits
     cosine      with e = k - W: eta_min + (L - eta_min)(1 + cos(pi e / T)) / 2 up to e = T;
                 from the chain's first restart (e = T + 1) on, base in place of L: torch's
                 recurrence telescopes to this, equal to its values within about 1e-16 of lr
   (docs/math.md, "Learning-rate schedules"). */
static double cf__warmup_lr(const cf_lr_sched *s, uint64_t k) {
    long W = s->warmup_steps;
    return s->warmup_factor == 1.0 ? s->base_lr * (long)k / W
           : s->base_lr * ((s->warmup_factor - 1.0) * (long)k / W + 1.0);
}
CFDEF double cf_lr_sched_at(const cf_lr_sched *s, uint64_t k) {
    const double pi = 3.14159265358979323846;
    long W;
    double lr;
    int m;
    if (!s) { cf_fail("cf_lr_sched_at: the schedule is NULL"); return NAN; }
    W = s->warmup_steps;
    if (W < 0 || s->n_milestones < 0 || s->n_milestones > 16 || (s->type == CF_SCHED_COSINE && s->t_max < 1) ||
        (s->type != CF_SCHED_MULTISTEP && s->type != CF_SCHED_COSINE)) {
        cf_fail("cf_lr_sched_at: not a schedule (warmup %ld steps, %d milestones, t_max %ld, type %d)", W,
                s->n_milestones, s->t_max, s->type);
        return NAN;
    }
    /* what this schedule uses, against its training setting's range (cf_train_init's) */
    if (cf__check_arg("cf_lr_sched_at", "lr", s->base_lr, 1) ||
        cf__check_arg("cf_lr_sched_at", "warmup_steps", (double)W, 1) ||
        (W > 0 && cf__check_arg("cf_lr_sched_at", "warmup_factor", s->warmup_factor, 1)) ||
        (s->type == CF_SCHED_MULTISTEP && cf__check_arg("cf_lr_sched_at", "decay_rate", s->gamma, 1)) ||
        (s->type == CF_SCHED_COSINE && (cf__check_arg("cf_lr_sched_at", "t_max", (double)s->t_max, 1) ||
                                        cf__check_arg("cf_lr_sched_at", "eta_min", s->eta_min, 1)))) return NAN;
    for (m = 0; m < s->n_milestones; m++)
        if (s->milestones[m] < 0) { cf_fail("cf_lr_sched_at: milestone %ld is below 0", s->milestones[m]); return NAN; }
    if (W > 0 && k <= (uint64_t)W) return cf__warmup_lr(s, k);
    lr = W > 0 ? cf__warmup_lr(s, (uint64_t)W) : s->base_lr;
    if (s->type == CF_SCHED_MULTISTEP) {
        for (m = 0; m < s->n_milestones; m++)
            if ((uint64_t)s->milestones[m] + (uint64_t)(W > 0 ? W + 1 : 0) <= k) lr *= s->gamma;
        return lr;
    } else {
        double e = (double)(k - (uint64_t)(W > 0 ? W : 0)), T = (double)s->t_max;
        if (e == 0.0) return lr;   /* torch: the first step keeps the lr it starts from */
        return s->eta_min + ((e <= T ? lr : s->base_lr) - s->eta_min) * (1.0 + cos(pi * fmod(e, 2.0 * T) / T)) / 2.0;
    }
}

/* ================================================================ 11. the training step
   What a training run does at every step, as library code (cf-train keeps the flags, the
   data, the log and when to write checkpoints): the learning rate of the step, the forward
   pass in training mode, the loss, the backward pass, the averaging of the gradient over the
   ranks (one allreduce, buckets overlapping the backward pass, or the 2018 gradient lag), a
   guard against non-finite gradients, LARC, and the optimizer.  Then evaluation, and the
   references' input transforms, sharding and augmentation. */
CFDEF void cf_train_defaults(cf_train_config *c) {
    CF__ASSERT_ARG(c, "cf_train_defaults: the settings are NULL");
    memset(c, 0, sizeof *c);
    c->optimizer = -1; c->lr = 0.001; c->momentum = 0.9; c->weight_decay = -1;
    c->beta1 = 0.9; c->beta2 = 0.999; c->eps = 1e-6; c->max_grad_norm = 1.0;
    /* CosmoFlow's reference: linear scaling from a batch of 64, 4 warmup epochs, then the
       peak times 0.25 after epoch 32 and 0.125 after epoch 64 */
    c->base_batch = 64; c->warmup_epochs = 4;
    c->n_decay = 2; c->decay_epoch[0] = 32; c->decay_factor[0] = 0.25; c->decay_epoch[1] = 64;
    c->decay_factor[1] = 0.125;
    /* DeepCAM's: a multistep schedule in optimizer steps */
    c->per_step = -1;
    c->sched.type = CF_SCHED_MULTISTEP; c->sched.gamma = 0.1; c->sched.warmup_factor = 1; c->sched.t_max = 9000;
}
/* the private part of a trainer: the loss gradient's buffer, gradient lag's state */
#define CF__TRAINER_MAGIC 0x43467452u   /* "CFtR": an initialized trainer (cf_train_free clears it) */
struct cf__train_private {
    uint32_t magic;
    float *dout; size_t dout_n;
    cf_grad_lag lag;
};
static int cf__config_check(const cf_train_config *c);
CFDEF int cf_train_init(cf_trainer *t, cf_net *net, const cf_train_config *c) {
    int seg;
    if (!t || !net || !c) return cf_fail("cf_train_init: the trainer, the network and the settings must not be NULL");
    memset(t, 0, sizeof *t);
    if (cf__net_check(net, "cf_train_init") || cf__config_check(c)) return CF_ERR;
    seg = net->loss == CF_LOSS_SOFTMAX_CE;
    t->net = net; t->cfg = *c; t->epoch = 1;
    if (t->cfg.optimizer < 0) t->cfg.optimizer = seg ? CF_OPT_LAMB : CF_OPT_SGD;
    if (t->cfg.weight_decay < 0) t->cfg.weight_decay = seg ? 0.01 : 0.0;
    if (t->cfg.per_step < 0) t->cfg.per_step = seg;
    t->cfg.sched.base_lr = t->cfg.lr;
    if (cf_net_set_precision(net, t->cfg.precision) || (t->cfg.optimizer != CF_OPT_SGD && cf__opt_slots(net, 2)) ||
        !(t->priv = CF__NEW(struct cf__train_private, 1))) {
        memset(t, 0, sizeof *t);
        return CF_ERR;
    }
    t->priv->magic = CF__TRAINER_MAGIC;
    return CF_OK;
}
/* a trainer cf_train_init made, not freed since, whose network is still there */
static int cf__trainer_check(const cf_trainer *t, const char *fn) {
    if (!t || !t->priv || t->priv->magic != CF__TRAINER_MAGIC)
        return cf_fail("%s: the trainer was not made by cf_train_init (or was freed)", fn);
    return cf__net_check(t->net, fn);
}
CFDEF int cf_train_epoch(cf_trainer *t, int epoch) {
    if (cf__trainer_check(t, "cf_train_epoch")) return CF_ERR;
    if (epoch < 1) return cf_fail("cf_train_epoch: epoch %d (epochs count from 1)", epoch);
    t->epoch = epoch; cf_net_set_mode(t->net, CF_MODE_TRAIN);
    return CF_OK;
}
CFDEF void cf_train_free(cf_trainer *t) {
    if (!t) return;
    if (t->priv) {
        CF_FREE(t->priv->dout);
        cf_dist_grad_lag_free(&t->priv->lag);
        t->priv->magic = 0;
        CF_FREE(t->priv);
    }
    memset(t, 0, sizeof *t);
}

/* ---- the settings as text: one key per setting, what cf-train's flags set and its
   checkpoints record.  Each key's kind and range are written once, in this table. */
enum { CF__SET_DOUBLE, CF__SET_INT, CF__SET_LONG, CF__SET_OPTIMIZER, CF__SET_SCHEDULE, CF__SET_BETAS, CF__SET_DECAY,
       CF__SET_MILESTONES, CF__SET_PRECISION };
typedef struct { const char *key; int kind; size_t off; double lo, hi; const char *arg, *help; } cf__setting;
#define CF__AT(field) offsetof(cf_train_config, field)
static const cf__setting cf__settings[] = {
    {"optimizer", CF__SET_OPTIMIZER, CF__AT(optimizer), 0, 0, "O",
     "sgd, adam, adamw or lamb (auto: lamb for DeepCAM, sgd for CosmoFlow)"},
    {"lr", CF__SET_DOUBLE, CF__AT(lr), 0, 100, "X", "base learning rate"},
    {"momentum", CF__SET_DOUBLE, CF__AT(momentum), 0, 0.9999, "M", "SGD momentum, Keras form v = m v - lr g"},
    {"l2", CF__SET_DOUBLE, CF__AT(l2), 0, 1e3, "X", "SGD: L2 on the kernels marked l2=1 in the cfg"},
    {"weight_decay", CF__SET_DOUBLE, CF__AT(weight_decay), 0, 10, "X",
     "adam: L2 in the gradient; adamw, lamb: decoupled (auto: 0.01 DeepCAM, 0 CosmoFlow)"},
    {"betas", CF__SET_BETAS, CF__AT(beta1), 0, 1, "B1,B2", "Adam's betas, in [0, 1)"},   /* (1 itself excluded) */
    {"eps", CF__SET_DOUBLE, CF__AT(eps), 1e-30, 1, "X",
     "Adam's epsilon (above 0: a weight whose gradient is 0 would get 0/0)"},
    {"max_grad_norm", CF__SET_DOUBLE, CF__AT(max_grad_norm), 0, 1e9, "X",
     "lamb: clip the global gradient norm (0: off)"},
    {"larc", CF__SET_DOUBLE, CF__AT(larc), 0, 1e3, "ETA",
     "scale each tensor's gradient by min(ETA |w|/|g|, 1) first (2018 climate code: 0.002; 0: off)"},
    {"base_batch", CF__SET_DOUBLE, CF__AT(base_batch), 0, 1e9, "N",
     "by epoch: linear scaling, peak lr = lr * global batch / N (0: none)"},
    {"warmup_epochs", CF__SET_INT, CF__AT(warmup_epochs), 0, 1e6, "N", "by epoch: epochs from lr to the peak"},
    {"decay", CF__SET_DECAY, CF__AT(n_decay), 0, 0, "LIST",
     "by epoch: epoch:factor,... multipliers of the peak after the epoch, or none"},
    {"lr_schedule", CF__SET_SCHEDULE, CF__AT(per_step), 0, 0, "S",
     "epochs, or multistep or cosine in optimizer steps (auto: multistep for DeepCAM, epochs for CosmoFlow)"},
    {"milestones", CF__SET_MILESTONES, CF__AT(sched.n_milestones), 0, 0, "LIST",
     "multistep: the steps, e.g. 800,1600, or none"},
    {"decay_rate", CF__SET_DOUBLE, CF__AT(sched.gamma), 0, 1, "G", "multistep: the factor at each milestone"},
    {"warmup_steps", CF__SET_INT, CF__AT(sched.warmup_steps), 0, 1073741824.0, "N", "by step: linear warmup"},
    {"warmup_factor", CF__SET_DOUBLE, CF__AT(sched.warmup_factor), 1, 1e6, "F", "by step: warmup from lr/F"},
    {"t_max", CF__SET_LONG, CF__AT(sched.t_max), 1, 1099511627776.0, "N", "cosine: period in steps"},
    {"eta_min", CF__SET_DOUBLE, CF__AT(sched.eta_min), 0, 100, "X", "cosine: the lowest lr"},
    {"grad_lag", CF__SET_INT, CF__AT(grad_lag), 0, 1, "0|1",
     "1: apply the previous step's averaged gradient, its allreduce overlapping this step (2018)"},
    {"overlap", CF__SET_LONG, CF__AT(overlap), 0, 1073741824.0, "N",
     "average gradients in buckets of >= N floats started during backward (0: one allreduce after it)"},
    {"precision", CF__SET_PRECISION, CF__AT(precision), 0, 0, "P",
     "fp32, or bf16: activations and their gradients rounded to bfloat16, fp32 master weights (docs/math.md)"},
};
#define CF__N_SETTINGS ((int)(sizeof cf__settings / sizeof cf__settings[0]))
static const char *cf__opt_names[4] = {"sgd", "adam", "adamw", "lamb"};
static const char *cf__sched_names[3] = {"epochs", "multistep", "cosine"};   /* per_step 0; 1 with sched.type 0, 1 */

/* (section 10's building blocks: their arguments against the same rows) */
static int cf__check_arg(const char *fn, const char *key, double x, int upper) {
    const cf__setting *k = NULL;
    int i, in;
    for (i = 0; i < CF__N_SETTINGS && !k; i++) if (!strcmp(key, cf__settings[i].key)) k = &cf__settings[i];
    if (!k) return cf_fail("%s: %s is not a training setting", fn, key);
    if (!upper) in = x >= k->lo && isfinite(x);
    else if (k->kind == CF__SET_BETAS) in = x >= k->lo && x < k->hi;
    else in = x >= k->lo && x <= k->hi;
    if (in) return CF_OK;
    if (!upper) return cf_fail("%s: %s %g is not a finite number >= %g", fn, key, x, k->lo);
    return cf_fail("%s: %s %g is not in [%g, %g%s", fn, key, x, k->lo, k->hi, k->kind == CF__SET_BETAS ? ")" : "]");
}
/* a number with its range, whole when asked: strtod and the checks every key shares */
static int cf__set_number(const cf__setting *k, const char *v, double *x) {
    char *end;
    *x = strtod(v, &end);
    if (end == v || *end || !(*x >= k->lo && *x <= k->hi) || (k->kind != CF__SET_DOUBLE && *x != floor(*x)))
        /* (a whole number's bounds with %.0f: 1099511627776, not 1.09951e+12) */
        return k->kind != CF__SET_DOUBLE
                   ? cf_fail("%s: '%s' is not a whole number in [%.0f, %.0f]", k->key, v, k->lo, k->hi)
                   : cf_fail("%s: '%s' is not a number in [%g, %g]", k->key, v, k->lo, k->hi);
    return CF_OK;
}
/* decay=none or E:F,... (epochs >= 0, factors > 0, at most 16) */
static int cf__set_decay(cf_train_config *c, const char *v) {
    const char *p = v;
    int n = 0;
    if (!strcmp(v, "none")) { c->n_decay = 0; return CF_OK; }
    while (*p) {
        char *end;
        double e = strtod(p, &end), f;
        if (end == p || *end != ':' || n == 16 || !(e >= 0 && e < 1e9))
            return cf_fail("decay: '%s' is not none or epoch:factor,... (at most 16)", v);
        f = strtod(end + 1, &end);
        if (!(f > 0 && f < 1e9) || (*end && *end != ','))
            return cf_fail("decay: '%s' is not epoch:factor,... with factors > 0", v);
        c->decay_epoch[n] = e; c->decay_factor[n++] = f;
        p = *end ? end + 1 : end;
    }
    c->n_decay = n;
    return CF_OK;
}
static int cf__set_milestones(cf_lr_sched *s, const char *v) {
    const char *q = v;
    int n = 0;
    if (!strcmp(v, "none")) q = "";
    while (*q) {
        char *end;
        long m = strtol(q, &end, 10);
        if (end == q || m < 0 || n == 16 || (*end && *end != ','))
            return cf_fail("milestones: '%s' is not a list of up to 16 steps", v);
        s->milestones[n++] = m;
        q = *end ? end + 1 : end;
    }
    s->n_milestones = n;
    return CF_OK;
}
/* the choices: optimizer=, lr_schedule= ("auto": the application's), betas= */
static int cf__set_choice(cf_train_config *c, const cf__setting *k, const char *v) {
    int i;
    if (k->kind == CF__SET_BETAS) {
        char *e1, *e2 = NULL;
        double b1 = strtod(v, &e1), b2 = *e1 == ',' ? strtod(e1 + 1, &e2) : -1;
        if (*e1 != ',' || !e2 || *e2 || !(b1 >= k->lo && b1 < k->hi && b2 >= k->lo && b2 < k->hi))
            return cf_fail("betas: '%s' is not B1,B2 in [%g, %g)", v, k->lo, k->hi);
        c->beta1 = b1; c->beta2 = b2;
        return CF_OK;
    }
    if (k->kind == CF__SET_OPTIMIZER) {
        for (i = 0; i < 4 && strcmp(v, cf__opt_names[i]); i++) {}
        if (i == 4 && strcmp(v, "auto")) return cf_fail("optimizer: '%s' is not sgd, adam, adamw, lamb or auto", v);
        c->optimizer = i == 4 ? -1 : i;
        return CF_OK;
    }
    for (i = 0; i < 3 && strcmp(v, cf__sched_names[i]); i++) {}
    if (i == 3 && strcmp(v, "auto")) return cf_fail("lr_schedule: '%s' is not epochs, multistep, cosine or auto", v);
    c->per_step = i == 3 ? -1 : i > 0;
    if (i == 1 || i == 2) c->sched.type = i == 1 ? CF_SCHED_MULTISTEP : CF_SCHED_COSINE;
    return CF_OK;
}
CFDEF int cf_train_config_set(cf_train_config *c, const char *key, const char *value) {
    const cf__setting *k = NULL;
    char *at = (char *)c;
    double x;
    int i;
    if (!c || !key || !value)
        return cf_fail("cf_train_config_set: the settings, the key and the value must not be NULL");
    for (i = 0; i < CF__N_SETTINGS && !k; i++) if (!strcmp(key, cf__settings[i].key)) k = &cf__settings[i];
    if (!k) return cf_fail("%s: not a training setting", key);
    if (k->kind == CF__SET_DECAY) return cf__set_decay(c, value);
    if (k->kind == CF__SET_MILESTONES) return cf__set_milestones(&c->sched, value);
    if (k->kind == CF__SET_PRECISION) {
        if (strcmp(value, "fp32") && strcmp(value, "bf16"))
            return cf_fail("precision: '%s' is not fp32 or bf16", value);
        c->precision = strcmp(value, "bf16") ? CF_FP32 : CF_BF16;
        return CF_OK;
    }
    if (k->kind >= CF__SET_OPTIMIZER) return cf__set_choice(c, k, value);
    if (!strcmp(value, "auto") && !strcmp(key, "weight_decay")) { c->weight_decay = -1; return CF_OK; }
    if (cf__set_number(k, value, &x)) return CF_ERR;
    if (k->kind == CF__SET_DOUBLE) *(double *)(at + k->off) = x;
    else if (k->kind == CF__SET_INT) *(int *)(at + k->off) = (int)x;
    else *(long *)(at + k->off) = (long)x;
    return CF_OK;
}
/* a double as the shortest of %.15g / %.17g that reads back to the same value */
static int cf__fmt_double(char *out, size_t n, double v) {
    int k = snprintf(out, n, "%.15g", v);
    if (strtod(out, NULL) != v) k = snprintf(out, n, "%.17g", v);
    return k;
}
/* one key's value as text */
static void cf__setting_text(const cf_train_config *c, const cf__setting *k, char *out, size_t n) {
    const char *at = (const char *)c;
    size_t m = 0;
    int i;
    out[0] = 0;
    switch (k->kind) {
    case CF__SET_DOUBLE:
        if (!strcmp(k->key, "weight_decay") && c->weight_decay < 0) snprintf(out, n, "auto");
        else cf__fmt_double(out, n, *(const double *)(at + k->off));
        break;
    case CF__SET_INT: snprintf(out, n, "%d", *(const int *)(at + k->off)); break;
    case CF__SET_LONG: snprintf(out, n, "%ld", *(const long *)(at + k->off)); break;
    case CF__SET_OPTIMIZER:
        snprintf(out, n, "%s", c->optimizer < 0 || c->optimizer > 3 ? "auto" : cf__opt_names[c->optimizer]);
        break;
    case CF__SET_SCHEDULE:
        snprintf(out, n, "%s",
                 c->per_step < 0 ? "auto" : cf__sched_names[c->per_step ? 1 + (c->sched.type == CF_SCHED_COSINE) : 0]);
        break;
    case CF__SET_PRECISION: snprintf(out, n, "%s", cf_precision_name(c->precision)); break;
    case CF__SET_BETAS:
        m = (size_t)cf__fmt_double(out, n, c->beta1);
        if (m + 1 < n) { out[m++] = ','; cf__fmt_double(out + m, n - m, c->beta2); }
        break;
    case CF__SET_DECAY:
        if (!c->n_decay) snprintf(out, n, "none");
        for (i = 0; i < c->n_decay && m + 1 < n; i++) {
            if (i) out[m++] = ',';
            m += (size_t)cf__fmt_double(out + m, n - m, c->decay_epoch[i]);
            if (m + 1 < n) { out[m++] = ':'; m += (size_t)cf__fmt_double(out + m, n - m, c->decay_factor[i]); }
        }
        break;
    default:
        if (!c->sched.n_milestones) snprintf(out, n, "none");
        for (i = 0; i < c->sched.n_milestones && m + 1 < n; i++)
            m += (size_t)snprintf(out + m, n - m, "%s%ld", i ? "," : "", c->sched.milestones[i]);
        break;
    }
}
CFDEF int cf_train_config_get(const cf_train_config *c, const char *key, char *out, size_t n) {
    char v[1024];
    int i;
    if (!c || !key || !out || !n)
        return cf_fail("cf_train_config_get: the settings, the key and the output must not be NULL or empty");
    out[0] = 0;
    for (i = 0; i < CF__N_SETTINGS; i++)
        if (!strcmp(key, cf__settings[i].key)) {
            cf__setting_text(c, &cf__settings[i], v, sizeof v);
            if (strlen(v) >= n)
                return cf_fail("%s: its value '%s' needs %zu bytes, the output has %zu", key, v, strlen(v) + 1, n);
            memcpy(out, v, strlen(v) + 1);
            return CF_OK;
        }
    return cf_fail("%s: not a training setting", key);
}
/* The whole configuration as cf_train_config_set would take it (cf_train_init's check): the
   choices and list lengths first, then every key's value written as text and set again on
   a scratch copy, so that each range is the table's, said in set's words. */
static int cf__config_check(const cf_train_config *c) {
    cf_train_config scratch;
    char v[1024];
    int i;
    if (c->optimizer < -1 || c->optimizer > CF_OPT_LAMB)
        return cf_fail("optimizer: %d is not one of CF_OPT_* (or -1: the application's)", c->optimizer);
    if (c->per_step < -1 || c->per_step > 1)
        return cf_fail("per_step: %d is not 0, 1 or -1 (the application's)", c->per_step);
    if (c->sched.type != CF_SCHED_MULTISTEP && c->sched.type != CF_SCHED_COSINE)
        return cf_fail("sched.type: %d is not CF_SCHED_*", c->sched.type);
    if (c->precision != CF_FP32 && c->precision != CF_BF16)
        return cf_fail("precision: %d is not CF_FP32 or CF_BF16", c->precision);
    if (c->n_decay < 0 || c->n_decay > 16) return cf_fail("decay: %d decays (0 to 16)", c->n_decay);
    if (c->sched.n_milestones < 0 || c->sched.n_milestones > 16)
        return cf_fail("milestones: %d milestones (0 to 16)", c->sched.n_milestones);
    if (c->weight_decay < 0 && c->weight_decay != -1)
        return cf_fail("weight_decay: %g is not >= 0 (or -1: the application's)", c->weight_decay);
    for (i = 0; i < CF__N_SETTINGS; i++) {
        cf__setting_text(c, &cf__settings[i], v, sizeof v);
        scratch = *c;
        if (cf_train_config_set(&scratch, cf__settings[i].key, v)) return CF_ERR;
    }
    return CF_OK;
}
CFDEF const char *cf_train_config_key(int i, const char **arg, const char **help) {
    if (i < 0 || i >= CF__N_SETTINGS) return NULL;
    if (arg) *arg = cf__settings[i].arg;
    if (help) *help = cf__settings[i].help;
    return cf__settings[i].key;
}

/* The CosmoFlow reference's schedule (docs/references.md, "Learning-rate schedule"), epoch e
   from 0: lr + e (peak - lr) / warmup for e < warmup, then the peak times the factor of the
   largest decay epoch k with k < e (strictly), 1 if none. */
static double cf__lr_by_epoch(const cf_train_config *c, int e, int global_batch) {
    double peak = c->base_batch > 0 ? c->lr * global_batch / c->base_batch : c->lr, f = 1, best = -1;
    int i;
    if (e < c->warmup_epochs) return c->lr + e * (peak - c->lr) / c->warmup_epochs;
    for (i = 0; i < c->n_decay; i++) if (c->decay_epoch[i] < e && c->decay_epoch[i] > best) {
        best = c->decay_epoch[i];
        f = c->decay_factor[i];
    }
    return peak * f;
}
CFDEF double cf_train_lr(const cf_trainer *t, int global_batch) {
    if (cf__trainer_check(t, "cf_train_lr")) return NAN;
    if (global_batch < 1) { cf_fail("cf_train_lr: global batch %d < 1", global_batch); return NAN; }
    return t->cfg.per_step ? cf_lr_sched_at(&t->cfg.sched, t->net->priv->step)
           : cf__lr_by_epoch(&t->cfg, t->epoch - 1, global_batch);
}

/* one update with the chosen optimizer, LARC first; the optimizers count updates from 1.
   CF_ERR (the optimizer's reason) when one refuses its arguments or memory is short */
static int cf__optimizer_step(const cf_train_config *c, cf_net *net, double lr) {
    uint64_t t = net->priv->updates + 1;
    if (c->larc > 0 && cf_larc_scale(net, (float)c->larc)) return CF_ERR;
    switch (c->optimizer) {
    case CF_OPT_SGD: return cf_sgd_step(net, (float)lr, (float)c->momentum, (float)c->l2);
    case CF_OPT_ADAM: return cf_adam_step(net, (float)lr, (float)c->beta1, (float)c->beta2, (float)c->eps,
                                          (float)c->weight_decay, 0, t);
    case CF_OPT_ADAMW: return cf_adam_step(net, (float)lr, (float)c->beta1, (float)c->beta2, (float)c->eps,
                                           (float)c->weight_decay, 1, t);
    default: return isnan(cf_lamb_step(net, (float)lr, (float)c->beta1, (float)c->beta2, (float)c->eps,
                                       (float)c->weight_decay, (float)c->max_grad_norm, t)) ? CF_ERR : CF_OK;
    }
}
/* cf_net_first_nonfinite_param, decided alike on every rank: a split network's ranks hold
   different rows of its split [dense] (section 8); the last such layer over the ranks */
static int cf__first_nonfinite_everywhere(cf_net *net, int params) {
    int l = cf_net_first_nonfinite_param(net, params);
    return net->priv->split.shard >= 0 ? cf__max_over_ranks(l) : l;
}
/* backward and the averaging of the gradient over the ranks: one allreduce after backward,
   or buckets started during it, or (gradient lag) the previous step's average.  Returns 0
   when there is nothing to apply yet (gradient lag's first step), CF_ERR out of memory. */
static int cf__backward_averaged(cf_trainer *t) {
    cf_net *net = t->net;
    /* a sample across ranks (section 8): the slabs' parts summed, over the groups averaged */
    if (net->priv->split.on) {
        if (t->cfg.grad_lag || t->cfg.overlap)
            return cf_fail("gradient lag and overlapped averaging do not run with a sample split across ranks");
        if (net->priv->split.shard >= 0 && (t->cfg.optimizer == CF_OPT_LAMB || t->cfg.larc > 0))
            return cf_fail("LAMB and LARC take each tensor's norm: with the rows of [dense] at line %d split across "
                           "ranks (cf_net_set_spatial) give SGD, Adam or AdamW",
                           net->layers[net->priv->split.shard].line);
        if (cf_net_backward(net, t->priv->dout)) return CF_ERR;
        cf__split_average(net);
        return 1;
    }
    if (t->cfg.grad_lag) {
        cf_net_backward(net, t->priv->dout);
        return cf_dist_grad_lag(net, &t->priv->lag);
    }
    if (t->cfg.overlap) {
        cf_dist_overlap_begin(net, (size_t)t->cfg.overlap);
        cf_net_backward(net, t->priv->dout);
        cf_dist_overlap_end(net);
    } else {
        cf_net_backward(net, t->priv->dout);
        cf_dist_allreduce_mean(net->grads, net->n_params);
    }
    return 1;
}
CFDEF int cf_train_step(cf_trainer *t, const float *x, const float *target, int B, cf_step_result *r) {
    cf_net *net;
    struct cf__train_private *tp;
    size_t nd, k;
    int have;
    if (cf__trainer_check(t, "cf_train_step")) return CF_ERR;
    if (!x || !target || !r) return cf_fail("cf_train_step: x, target and the result must not be NULL");
    net = t->net; tp = t->priv;
    if (cf_net_set_batch(net, B)) return CF_ERR;   /* (B checked, the arena planned) */
    nd = (size_t)B * net->n_outputs;
    memset(r, 0, sizeof *r);
    r->layer = -1;
    if (nd > tp->dout_n) {
        CF_FREE(tp->dout);
        tp->dout_n = 0;
        if (!(tp->dout = CF__NEW(float, nd))) return CF_ERR;
        tp->dout_n = nd;
    }
    /* the global batch: B a group */
    r->lr = cf_train_lr(t, B * (cf_dist_size() / (net->priv->split.on ? net->priv->split.K : 1)));
    cf_net_set_mode(net, CF_MODE_TRAIN);
    if (!cf_net_forward(net, x, B)) return CF_ERR;
    r->loss = cf_net_loss(net, target, tp->dout);
    /* a loss that is not finite makes this rank's gradient so, and the average with it: every
       rank then skips the update alike (a rank that skipped alone would leave the others) */
    if (!isfinite(r->loss)) for (k = 0; k < nd; k++) tp->dout[k] = NAN;
    cf_net_zero_grad(net);
    if ((have = cf__backward_averaged(t)) < 0) return CF_ERR;
    if (!have) r->status = CF_STEP_WAITING;
    else if ((r->layer = cf__first_nonfinite_everywhere(net, 0)) >= 0) r->status = CF_STEP_NONFINITE;
    else {
        if (cf__optimizer_step(&t->cfg, net, r->lr)) return CF_ERR;
        net->priv->updates++;
        /* finite gradients can still make a weight infinite (a learning rate far too large) */
        if ((r->layer = cf__first_nonfinite_everywhere(net, 1)) >= 0) r->status = CF_STEP_DIVERGED;
    }
    net->priv->step++;
    return CF_OK;
}

/* Where a step that was not finite first went wrong: parameters already not finite, the first
   layer whose output is not finite (the batch x run again with every output kept), the loss
   itself, or the first layer whose gradient is not finite. */
CFDEF void cf_train_explain(cf_trainer *t, const cf_step_result *r, const float *x, int B, char *out, size_t n) {
    cf_net *net;
    int lp, lo, lg;
    if (!out || !n) return;
    if (cf__trainer_check(t, "cf_train_explain") || !r || !x) {
        snprintf(out, n, "%s", r && x ? cf_failure_reason() : "cf_train_explain: r and x must not be NULL");
        return;
    }
    net = t->net;
    lp = cf_net_first_nonfinite_param(net, 1); lo = lp >= 0 ? -1 : cf_net_find_nonfinite(net, x, B); lg = r->layer;
    if (r->status == CF_STEP_DIVERGED && lp >= 0)
        snprintf(out, n,
                 "the update made layer %d (%s, cfg line %d)'s parameters not finite (a learning rate far too large?)",
                 lp, cf_layer_type_name(net->layers[lp].type), net->layers[lp].line);
    else if (lp >= 0)
        snprintf(out, n, "layer %d (%s, cfg line %d)'s parameters are already not finite", lp,
                 cf_layer_type_name(net->layers[lp].type), net->layers[lp].line);
    else if (lo >= 0)
        snprintf(out, n, "first non-finite output at layer %d (%s, cfg line %d)", lo,
                 cf_layer_type_name(net->layers[lo].type), net->layers[lo].line);
    else if (!isfinite(r->loss))
        snprintf(out, n, "every layer's output is finite: the loss itself%s",
                 net->loss == CF_LOSS_SOFTMAX_CE ? " (a label outside the classes?)" : "");
    else snprintf(out, n, "first non-finite gradient at layer %d (%s, cfg line %d)", lg,
                  lg >= 0 ? cf_layer_type_name(net->layers[lg].type) : "?", lg >= 0 ? net->layers[lg].line : 0);
}

/* ---- evaluation */
CFDEF const float *cf_net_predict(cf_net *net, const float *x, int B) {
    if (cf__net_check(net, "cf_net_predict")) return NULL;
    cf_net_set_mode(net, CF_MODE_EVAL);
    return cf_net_forward(net, x, B);
}
CFDEF int cf_eval_batch(cf_net *net, const float *x, const float *target, int B, double sums[2], int *bad) {
    int seg, k, j, *pred, bad_own;
    size_t ny, nt;
    const float *out;
    if (!bad) bad = &bad_own;
    *bad = -1;
    if (cf__net_check(net, "cf_eval_batch")) return CF_ERR;
    if (!x || !target || !sums) return cf_fail("cf_eval_batch: x, target and sums must not be NULL");
    seg = net->loss == CF_LOSS_SOFTMAX_CE; ny = (size_t)net->n_outputs; nt = (size_t)net->n_targets;
    pred = seg ? CF__NEW(int, net->n_targets) : NULL;
    out = seg && !pred ? NULL : cf_net_predict(net, x, B);
    if (!out) { CF_FREE(pred); return CF_ERR; }
    for (k = 0; k < B; k++) {
        if (seg) {   /* the sample's mean IoU */
            cf_argmax_classes(pred, out + k * ny, net->n_classes, nt);
            sums[0] += cf_iou_sample(pred, target + k * nt, nt, net->n_classes);
            sums[1] += 1;
        } else for (j = 0; j < net->n_outputs; j++) {   /* every output's absolute error */
            sums[0] += fabs((double)out[k * ny + j] - target[k * ny + j]);
            sums[1] += 1;
        }
        if (!isfinite(sums[0])) {
            *bad = k;
            CF_FREE(pred);
            return cf_fail("sample %d of the batch: its %s is not finite", k, seg ? "IoU" : "error");
        }
    }
    CF_FREE(pred);
    return CF_OK;
}

/* ---- the references' data: input transforms, augmentation, sharding */
CFDEF void cf_climate_to_input(float *out, const float *x, int H, int W, int C,
                               const float *minval, const float *maxval) {
    size_t p, P = (size_t)H * W;
    int c;
    CF__ASSERT_ARG(out && x && minval && maxval && H >= 1 && W >= 1 && C >= 1,
                     "cf_climate_to_input: a NULL pointer or a size below 1");
    for (c = 0; c < C; c++) {
        float lo = minval[c], range = maxval[c] - minval[c];
        float inv = range > 0.0f ? 1.0f / range : 0.0f;   /* a constant channel becomes 0 */
        for (p = 0; p < P; p++) out[(size_t)c * P + p] = (x[p * C + c] - lo) * inv;
    }
}

CFDEF void cf_cosmo_to_input(float *out, const int16_t *x, int S, int C, int apply_log) {
    size_t vox = (size_t)S * S * S, v;
    double sum = 0.0;
    float scale = 1.0f, log1p_small[256];   /* log1pf of the counts 0..255 (most voxels hold 0-10) */
    int c, i;
    CF__ASSERT_ARG(out && x && S >= 1 && C >= 1 && apply_log >= 0 && apply_log <= 2,
                     "cf_cosmo_to_input: a NULL pointer, a size below 1 or apply_log not 0, 1 or 2");
    if (!apply_log) {   /* the reference's other branch: x / mean(x) over the whole sample */
        for (v = 0; v < vox * C; v++) sum += x[v];
        scale = sum > 0 ? (float)((double)(vox * C) / sum) : 1.0f;
    }
    if (apply_log) for (i = 0; i < 256; i++) log1p_small[i] = log1pf((float)i);
    for (v = 0; v < vox; v++)
        for (c = 0; c < C; c++) {
            int16_t n = x[v * C + c];
            float f = (float)n;
            out[(size_t)c * vox + v] = !apply_log ? f * scale : (n >= 0 && n < 256) ? log1p_small[n] : log1pf(f);
        }
    if (apply_log == 2)   /* a lognormal field's log is Gaussian: centred, the channels differ by their growth only */
        for (c = 0; c < C; c++) {
            double m = 0.0;
            float sub;
            for (v = 0; v < vox; v++) m += x[v * C + c];
            sub = (float)log1p(m / (double)vox);
            for (v = 0; v < vox; v++) out[(size_t)c * vox + v] -= sub;
        }
}

/* out[o] = in[i] where i is o with the axes permuted by p and flipped where flip's bit is
   set: a cube has 6 axis orders times 8 flips */
CFDEF int cf_cube_symmetry(float *x, float *tmp, int C, int S, int code) {
    static const int perms[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
    const int *p;
    int flip, c, i[3], o[3], a;
    size_t vox = (size_t)S * S * S;
    if (!x || !tmp || C < 1 || S < 1)
        return cf_fail("cf_cube_symmetry: x and tmp must not be NULL, C and S at least 1");
    if (code < 0 || code >= 48)
        return cf_fail("cf_cube_symmetry: code %d is not one of the cube's 48 symmetries [0, 48)", code);
    p = perms[code % 6]; flip = code / 6;
    memcpy(tmp, x, sizeof(float) * C * vox);
    for (c = 0; c < C; c++)
        for (o[0] = 0; o[0] < S; o[0]++) for (o[1] = 0; o[1] < S; o[1]++) for (o[2] = 0; o[2] < S; o[2]++) {
            for (a = 0; a < 3; a++) { i[p[a]] = o[a]; if (flip >> a & 1) i[p[a]] = S - 1 - o[a]; }
            x[c * vox + ((size_t)o[0] * S + o[1]) * S + o[2]] = tmp[c * vox + ((size_t)i[0] * S + i[1]) * S + i[2]];
        }
    return CF_OK;
}

/* the output's depth (axis 0) is the input's axis p[0], flipped when bit 0 of the flips is set */
CFDEF int cf_cube_symmetry_source(int code, int S, int d0, int n, int *axis, int *first) {
    static const int axis_of_depth[6] = {0, 0, 1, 1, 2, 2};   /* p[0] of cf_cube_symmetry's perms */
    if (!axis || !first || code < 0 || code >= 48 || S < 1 || d0 < 0 || n < 1 || d0 + n > S)
        return cf_fail("cf_cube_symmetry_source: code %d (0 to 47), planes [%d, %d) of %d, or a NULL pointer", code, d0,
                       d0 + n, S);
    *axis = axis_of_depth[code % 6];
    *first = (code / 6) & 1 ? S - d0 - n : d0;
    return CF_OK;
}
CFDEF int cf_cube_symmetry_slab(float *out, const float *box, int C, int S, int code, int d0, int n) {
    static const int perms[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
    const int *p;
    int flip, c, i[3], o[3], a, axis = 0, first = 0, ext[3];
    if (!out || !box || C < 1 || cf_cube_symmetry_source(code, S, d0, n, &axis, &first))
        return cf_fail("cf_cube_symmetry_slab: %s",
                       out && box && C >= 1 ? cf_failure_reason() : "out or box NULL, or C < 1");
    p = perms[code % 6]; flip = code / 6;
    for (a = 0; a < 3; a++) ext[a] = a == axis ? n : S;
    for (c = 0; c < C; c++)
        for (o[0] = d0; o[0] < d0 + n; o[0]++) for (o[1] = 0; o[1] < S; o[1]++) for (o[2] = 0; o[2] < S; o[2]++) {
            for (a = 0; a < 3; a++) { i[p[a]] = o[a]; if (flip >> a & 1) i[p[a]] = S - 1 - o[a]; }
            i[axis] -= first;   /* into the box */
            out[(((size_t)c * n + (o[0] - d0)) * S + o[1]) * S + o[2]] =
                box[(((size_t)c * ext[0] + i[0]) * ext[1] + i[1]) * ext[2] + i[2]];
        }
    return CF_OK;
}

CFDEF int cf_epoch_shard(int *out, int n, uint64_t seed, int epoch, int rank, int size,
                         int shuffle, int drop_remainder) {
    int *perm, i, k = 0, per;
    cf_rng r = cf_rng_seed(cf_hash64(seed ^ (0x5eedULL + (uint64_t)epoch * 0x9e3779b97f4a7c15ULL)));
    if (!out || n < 0 || size < 1 || rank < 0 || rank >= size)
        return cf_fail("cf_epoch_shard: out NULL, n %d < 0, or rank %d not in [0, %d)", n, rank, size);
    per = n / size;
    if (!(perm = CF__NEW(int, n + 1))) return -1;
    for (i = 0; i < n; i++) perm[i] = i;
    if (shuffle)   /* Fisher-Yates with our generator: the same order on every platform */
        for (i = n - 1; i > 0; i--) {
            int j = (int)(cf_rng_u64(&r) % (uint64_t)(i + 1)), t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
        }
    for (i = rank; i < n; i += size) {
        if (drop_remainder && k == per) break;
        out[k++] = perm[i];
    }
    CF_FREE(perm);
    return k;
}

#ifndef CF_NO_FILES
/* ================================================================ 12. files */
CFDEF size_t cf_dtype_size(int dtype) {
    switch (dtype) { case CF_F32: return 4; case CF_I16: return 2; case CF_U8: return 1; case CF_I64: return 8; }
    return 0;
}
static const char *cf__dtype_descr[] = { "<f4", "<i2", "|u1", "<i8" };

CFDEF void cf_array_free(cf_array *a) { if (!a) return; CF_FREE(a->data); memset(a, 0, sizeof *a); }

/* ---- atomic writes: the new contents go to path.tmp.<host>.<pid> (the host from uname(),
   so that writers on several nodes sharing a file system never meet), are synced to disk and
   only then renamed over path.  A temporary file left by a killed writer is left alone: the
   library deletes nothing it was not asked to (the tools remove their own, tools/tool.h). */
CFDEF int cf_atomic_tmp_prefix(const char *path, char *out, size_t n) {
    struct utsname u;
    const char *host = uname(&u) == 0 && u.nodename[0] ? u.nodename : "host";
    int k;
    if (!path || !out || !n) return cf_fail("cf_atomic_tmp_prefix: the path and the output must not be NULL or empty");
    k = snprintf(out, n, "%s.tmp.%s.", path, host);
    return k < 0 || (size_t)k >= n ? cf_fail("%s: path too long", path) : CF_OK;
}
CFDEF int cf_atomic_open(cf_atomic_file *af, const char *path) {
    size_t n;
    int flags = O_WRONLY | O_CREAT | O_TRUNC;
    if (!af || !path) return cf_fail("cf_atomic_open: the file and the path must not be NULL");
    n = strlen(path) + 128 + sizeof ((struct utsname *)0)->nodename;
#ifdef O_NOFOLLOW
    flags |= O_NOFOLLOW;   /* never write through a link planted at the temporary name */
#endif
    memset(af, 0, sizeof *af);
    af->fd = -1;
    af->path = cf__strdup(path);
    af->tmp = CF__NEW(char, n);
    if (!af->path || !af->tmp || cf_atomic_tmp_prefix(path, af->tmp, n)) {
        CF_FREE(af->path);
        CF_FREE(af->tmp);
        return CF_ERR;
    }
    snprintf(af->tmp + strlen(af->tmp), n - strlen(af->tmp), "%ld", (long)getpid());
    if ((af->fd = open(af->tmp, flags, 0666)) < 0) {
        int rc = cf_fail("%s: cannot create (%s)", af->tmp, strerror(errno));
        CF_FREE(af->path); CF_FREE(af->tmp);
        return rc;
    }
    return CF_OK;
}
CFDEF int cf_atomic_write(cf_atomic_file *af, const void *p, size_t n) {
    const char *c = (const char *)p;
    if (!af || !af->tmp || (!p && n)) return cf_fail("cf_atomic_write: not a file cf_atomic_open opened, or p NULL");
    if (af->failed) return CF_ERR;
    while (n) {   /* a write may take fewer bytes than asked */
        ssize_t k = write(af->fd, c, n < ((size_t)1 << 30) ? n : ((size_t)1 << 30));
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            af->failed = 1;
            return cf_fail("%s: write failed (%s)", af->path, k < 0 ? strerror(errno) : "no progress");
        }
        c += k; n -= (size_t)k;
    }
    return CF_OK;
}
CFDEF void cf_atomic_abort(cf_atomic_file *af) {
    if (!af || !af->tmp) return;   /* nothing open */
    if (af->fd >= 0) close(af->fd);
    if (af->tmp) remove(af->tmp);   /* our own temporary file */
    CF_FREE(af->path); CF_FREE(af->tmp);
    memset(af, 0, sizeof *af);
    af->fd = -1;
}
CFDEF int cf_atomic_commit(cf_atomic_file *af) {
    int ok;
    if (!af || !af->tmp) return cf_fail("cf_atomic_commit: not a file cf_atomic_open opened");
    ok = !af->failed && fsync(af->fd) == 0;
    char reason[256];
    struct stat st;
    snprintf(reason, sizeof reason, "%s", strerror(errno));
    if (close(af->fd) != 0) ok = 0;
    af->fd = -1;
    if (!ok) {
        int rc = af->failed ? CF_ERR : cf_fail("%s: write failed (%s); the previous file is untouched", af->path,
                                               reason);
        cf_atomic_abort(af);
        return rc;
    }
    /* a device, FIFO, socket or directory at path is never replaced by a file */
    if (stat(af->path, &st) == 0 && !S_ISREG(st.st_mode)) {
        int rc = cf_fail("%s: is %s, not a regular file: not replaced", af->path,
                         S_ISDIR(st.st_mode) ? "a directory" : S_ISFIFO(st.st_mode) ? "a FIFO" : "a device or socket");
        cf_atomic_abort(af);
        return rc;
    }
    if (rename(af->tmp, af->path) != 0) {
        int rc = cf_fail("%s: cannot rename into place (%s)", af->path, strerror(errno));
        cf_atomic_abort(af);
        return rc;
    }
    CF_FREE(af->path); CF_FREE(af->tmp);
    return CF_OK;
}

/* .npy: "\x93NUMPY", version, header length (2 bytes in v1, 4 in v2/v3), then a Python
   dict literal {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } padded to 64. */
static int cf__npy_parse_header(const char *path, const char *h, cf_array *a) {
    const char *d = strstr(h, "'descr'"), *fo = strstr(h, "'fortran_order'"), *sh = strstr(h, "'shape'");
    int i;
    if (!d || !fo || !sh) return cf_fail("%s: npy header lacks descr, fortran_order or shape", path);
    d = strchr(d + 7, '\'');
    a->dtype = -1;
    for (i = 0; d && i < 4; i++) if (!strncmp(d + 1, cf__dtype_descr[i], 3) && d[4] == '\'') a->dtype = i;
    if (d && !strncmp(d + 1, "<u1'", 4)) a->dtype = CF_U8;
    if (a->dtype < 0)
        return cf_fail("%s: unsupported dtype %.8s (need <f4, <i2, |u1 or <i8, little-endian)", path, d ? d : "?");
    fo = strchr(fo + 15, ':');
    while (fo && (*fo == ':' || *fo == ' ')) fo++;
    if (!fo || strncmp(fo, "False", 5))
        return cf_fail("%s: Fortran-order arrays are not supported (save with C order)", path);
    sh = strchr(sh + 7, '(');
    if (!sh) return cf_fail("%s: malformed shape in npy header", path);
    sh++;
    a->ndim = 0; a->count = 1;
    for (;;) {
        char *end;
        long long v;
        while (*sh == ' ' || *sh == ',') sh++;
        if (*sh == ')') break;
        v = strtoll(sh, &end, 10);
        if (end == sh || v < 0 || a->ndim == CF_MAX_DIMS)
            return cf_fail("%s: malformed or unsupported shape in npy header", path);
        if (v && a->count > ((size_t)1 << 40) / (size_t)v) return cf_fail("%s: shape too large", path);
        a->shape[a->ndim++] = v; a->count *= (size_t)v;
        sh = end;
    }
    return CF_OK;
}

/* opens an .npy file and reads its header into a (no data yet): the descriptor, positioned at
   the data, whose size is the shape's; -1 with the reason */
static int cf__npy_open(const char *path, cf_array *a) {
    unsigned char pre[12];
    char *h = NULL;
    size_t hlen, pos, need, fsize;
    int fd;
    memset(a, 0, sizeof *a);
    if ((fd = cf__open_regular(path, &fsize)) < 0) return -1;
    if (cf__read_full(fd, pre, 10) != 10 || memcmp(pre, "\x93NUMPY", 6)) {
        close(fd);
        return cf_fail("%s: not an .npy file (bad magic)", path);
    }
    if (pre[6] == 1) { hlen = pre[8] | (size_t)pre[9] << 8; pos = 10; }
    else if (pre[6] == 2 || pre[6] == 3) {
        if (cf__read_full(fd, pre + 10, 2) != 2) { close(fd); return cf_fail("%s: truncated npy header", path); }
        hlen = pre[8] | (size_t)pre[9] << 8 | (size_t)pre[10] << 16 | (size_t)pre[11] << 24; pos = 12;
    } else { close(fd); return cf_fail("%s: npy version %d is not supported", path, pre[6]); }
    if (hlen > 1 << 20 || pos + hlen > fsize) {
        close(fd);
        return cf_fail("%s: npy header length %zu is impossible", path, hlen);
    }
    h = CF__NEW(char, hlen + 1);
    if (!h) { close(fd); return -1; }
    if (cf__read_full(fd, h, hlen) != hlen) { CF_FREE(h); close(fd); return cf_fail("%s: truncated npy header", path); }
    if (cf__npy_parse_header(path, h, a)) { CF_FREE(h); close(fd); return -1; }
    CF_FREE(h);
    need = a->count * cf_dtype_size(a->dtype);
    if (fsize - pos - hlen != need) {
        close(fd);
        return cf_fail("%s: data is %zu bytes but the header's shape needs %zu (truncated or corrupt)", path,
                       fsize - (pos + hlen), need);
    }
    return fd;
}
CFDEF int cf_npy_read(const char *path, cf_array *a) {
    size_t need;
    int fd;
    if (!a) return cf_fail("cf_npy_read: the array is NULL");
    if ((fd = cf__npy_open(path, a)) < 0) return CF_ERR;
    need = a->count * cf_dtype_size(a->dtype);
    a->data = cf__calloc(need ? need : 1, 1);
    if (!a->data) { close(fd); return CF_ERR; }
    if (need && cf__read_full(fd, a->data, need) != need) {
        close(fd);
        cf_array_free(a);
        return cf_fail("%s: read error", path);
    }
    close(fd);
    return CF_OK;
}
/* a box along axis: outer runs (the indices before axis) of n lines of inner values (the
   extents after it) each */
CFDEF int cf_npy_read_box(const char *path, int axis, int64_t first, int64_t n, cf_array *a) {
    size_t outer = 1, inner = 1, run, q, es, E;
    off_t data;
    int fd, i;
    if (!a) return cf_fail("cf_npy_read_box: the array is NULL");
    if ((fd = cf__npy_open(path, a)) < 0) return CF_ERR;
    if (axis < 0 || axis >= a->ndim || first < 0 || n < 1 || first + n > a->shape[axis]) {
        long long ext = axis >= 0 && axis < a->ndim ? (long long)a->shape[axis] : 0;
        int nd = a->ndim;
        close(fd);
        memset(a, 0, sizeof *a);
        return cf_fail("%s: no box [%lld, %lld) along axis %d of this %d-dimensional array (that axis has %lld)", path,
                       (long long)first, (long long)(first + n), axis, nd, ext);
    }
    for (i = 0; i < axis; i++) outer *= (size_t)a->shape[i];
    for (i = axis + 1; i < a->ndim; i++) inner *= (size_t)a->shape[i];
    es = cf_dtype_size(a->dtype);
    data = lseek(fd, 0, SEEK_CUR);
    E = (size_t)a->shape[axis];
    run = (size_t)n * inner * es;
    a->shape[axis] = n; a->count = outer * (size_t)n * inner;
    if (data < 0 || !(a->data = cf__calloc(a->count * es, 1))) {
        close(fd);
        memset(a, 0, sizeof *a);
        return data < 0 ? cf_fail("%s: cannot seek", path) : CF_ERR;
    }
    for (q = 0; q < outer; q++) {   /* run q: lines [first, first + n) under the outer index q */
        off_t at = data + (off_t)((q * E + (size_t)first) * inner * es);
        if (lseek(fd, at, SEEK_SET) != at || cf__read_full(fd, (char *)a->data + q * run, run) != run) {
            close(fd); cf_array_free(a);
            return cf_fail("%s: read error", path);
        }
    }
    close(fd);
    return CF_OK;
}

CFDEF int cf_npy_read_f32(const char *path, float **data, size_t *count) {
    cf_array a;
    if (!data || !count) return cf_fail("cf_npy_read_f32: data and count must not be NULL");
    if (cf_npy_read(path, &a)) return CF_ERR;
    if (a.dtype != CF_F32) { cf_array_free(&a); return cf_fail("%s: dtype must be float32 (<f4)", path); }
    *data = (float *)a.data; *count = a.count;
    return CF_OK;
}

CFDEF int cf_npy_write(const char *path, const cf_array *a) {
    char h[512];
    unsigned char pre[10];
    int n, i;
    size_t total;
    cf_atomic_file af;
    if (!path || !a || a->dtype < CF_F32 || a->dtype > CF_I64 || a->ndim < 0 || a->ndim > CF_MAX_DIMS ||
        (!a->data && a->count))
        return cf_fail("cf_npy_write: the path or the array is NULL, or the array's dtype, dimensions or data are not "
                       "an array's");
    n = snprintf(h, sizeof h, "{'descr': '%s', 'fortran_order': False, 'shape': (", cf__dtype_descr[a->dtype]);
    for (i = 0; i < a->ndim; i++)
        n += snprintf(h + n, sizeof h - n, "%lld%s", (long long)a->shape[i],
                      a->ndim == 1 ? "," : (i + 1 < a->ndim ? ", " : ""));
    n += snprintf(h + n, sizeof h - n, "), }");
    total = 10 + (size_t)n + 1;
    while (total % 64) { h[n++] = ' '; total++; }   /* pad with spaces, end with newline */
    h[n++] = '\n';
    memcpy(pre, "\x93NUMPY\x01\x00", 8);
    pre[8] = (unsigned char)(n & 0xff); pre[9] = (unsigned char)(n >> 8);
    if (cf_atomic_open(&af, path)) return CF_ERR;
    cf_atomic_write(&af, pre, 10);
    cf_atomic_write(&af, h, (size_t)n);
    cf_atomic_write(&af, a->data, a->count * cf_dtype_size(a->dtype));
    return cf_atomic_commit(&af);
}

/* ---- checkpoints: "CFCKPT03" | u64 cfg length | cfg text | i32 input C,D,H,W |
   u64 n_params, step, epoch, seed, n_stats | f64 best | u32 meta length | meta text |
   params | stats | optimizer state (2 n_params; a slot the network does not hold, SGD's second,
   written as zeros) | CRC32C of everything before it.  The meta
   text is what the training tool records of its run (key=value lines: optimizer, input
   transform, ...), and the line "updates=N" when the optimizer updates differ from the steps
   (gradient lag, skipped steps; older checkpoints: as many as steps).  "CFCKPT04", written by
   cf_checkpoint_save_trainer with gradient lag, adds after the optimizer state u64 n_params
   and the averaged gradient the next step applies.  Still read: "CFCKPT02" (no meta) and
   "CFCKPT01" (no meta, no stats and n_params of optimizer state). */
typedef struct { int fd; uint32_t crc; int bad; } cf__rd;
static int cf__rd_get(cf__rd *r, void *p, size_t n) {
    if (r->bad || cf__read_full(r->fd, p, n) != n) { r->bad = 1; return CF_ERR; }
    r->crc = cf_crc32c(r->crc, p, n);
    return CF_OK;
}
static int cf__wr_put(cf_atomic_file *af, uint32_t *crc, const void *p, size_t n) {
    *crc = cf_crc32c(*crc, p, n);
    return cf_atomic_write(af, p, n);
}

/* the parameters or an optimizer slot, buf in this rank's layout, in the whole layout's order
   (section 8, "pieces"): the pieces other ranks of the group hold received from them (section
   8) in chunks of tmp's CF_ALLREDUCE_CHUNK floats; af NULL: received and dropped (a writer
   that failed still takes its group's rows, or they would wait on it); buf NULL: an optimizer
   slot the group's ranks do not hold (SGD's second), written as zeros, nothing received */
#ifndef CF_ALLREDUCE_CHUNK
#define CF_ALLREDUCE_CHUNK ((size_t)1 << 20)   /* floats an MPI call moves at once (section 7) */
#endif
static void cf__wr_pieces(cf_atomic_file *af, uint32_t *crc, const cf_net *net, const float *buf, float *tmp) {
    static const float zeros[1024] = {0.0f};
    int j;
    size_t off;
    for (j = 0; j < cf__n_pieces(net); j++) {
        cf__piece p = cf__piece_at(net, j);
        size_t at = cf__piece_local(net, p);
        if (!buf) {
            for (off = 0; af && off < p.n; off += 1024)
                cf__wr_put(af, crc, zeros, (p.n - off < 1024 ? p.n - off : 1024) * sizeof(float));
            continue;
        }
        if (at != (size_t)-1) { if (af) cf__wr_put(af, crc, buf + at, p.n * sizeof(float)); continue; }
        for (off = 0; off < p.n; off += CF_ALLREDUCE_CHUNK) {
            size_t m = p.n - off < CF_ALLREDUCE_CHUNK ? p.n - off : CF_ALLREDUCE_CHUNK;
            cf__split_recv((cf_net *)net, p.owner, tmp, m);
            if (af) cf__wr_put(af, crc, tmp, m * sizeof(float));
        }
    }
}
/* the other side: this rank's own pieces of buf, to the group's first rank */
static void cf__send_pieces(const cf_net *net, const float *buf) {
    int j;
    for (j = 0; j < cf__n_pieces(net); j++) {
        cf__piece p = cf__piece_at(net, j);
        if (p.owner == net->priv->split.r && p.n) cf__split_send((cf_net *)net, buf + cf__piece_local(net, p), p.n);
    }
}

/* writes format version 1, 2 or 3 (the tests write the old ones to check they are read) */
static int cf__checkpoint_write(const char *path, const cf_net *net, const cf_train_state *st, int version,
                                const float *pending) {
    cf_atomic_file af;
    uint32_t crc = 0, mlen;
    uint64_t u[6];
    int32_t shp[4];
    double best = st ? st->best : 0.0;
    char magic[9], meta[sizeof st->meta + 32];
    int s, rc = CF_OK, split = 0;
    float *tmp = NULL;
    if (cf__net_check(net, "cf_checkpoint_save")) return CF_ERR;
    split = net->priv->split.shard >= 0;
    /* a group's other rank: its rows of a split [dense] to the writer */
    if (net->priv->split.on && net->priv->split.r) {
        if (split) {
            cf__send_pieces(net, net->params);
            for (s = 0; s < net->opt_slots; s++) cf__send_pieces(net, net->opt + (size_t)s * net->n_params);
        }
        return CF_OK;
    }
    snprintf(meta, sizeof meta, "%s", st ? st->meta : "");
    if (net->priv->updates != net->priv->step)
        snprintf(meta + strlen(meta), sizeof meta - strlen(meta), "updates=%llu\n",
                 (unsigned long long)net->priv->updates);
    mlen = (uint32_t)strlen(meta);
    if (mlen >= sizeof st->meta)
        rc = cf_fail("%s: the run's record is %u bytes (at most %u)", path, mlen, (unsigned)sizeof st->meta - 1);
    if (split && !(tmp = CF__NEW(float, CF_ALLREDUCE_CHUNK))) rc = CF_ERR;
    if (!rc && cf_atomic_open(&af, path)) rc = CF_ERR;
    if (rc) {   /* nothing written; a split group's rows still taken */
        if (split && tmp)
            for (s = 0; s < 1 + net->opt_slots; s++)
                cf__wr_pieces(NULL, &crc, net, s ? net->opt + (size_t)(s - 1) * net->n_params : net->params, tmp);
        CF_FREE(tmp);
        return rc;
    }
    snprintf(magic, sizeof magic, "CFCKPT0%d", version);
    u[0] = strlen(net->cfg_text);
    cf__wr_put(&af, &crc, magic, 8);
    cf__wr_put(&af, &crc, &u[0], 8);
    cf__wr_put(&af, &crc, net->cfg_text, (size_t)u[0]);
    shp[0] = net->input.c; shp[1] = net->input.d; shp[2] = net->input.h; shp[3] = net->input.w;
    cf__wr_put(&af, &crc, shp, sizeof shp);
    u[1] = split ? net->priv->split.whole_n : net->n_params; u[2] = net->priv->step; u[3] = st ? st->epoch : 0;
    u[4] = st ? st->seed : net->seed;
    u[5] = version >= 2 ? net->n_stats : 0;
    cf__wr_put(&af, &crc, &u[1], 5 * 8);
    cf__wr_put(&af, &crc, &best, 8);
    if (version >= 3) { cf__wr_put(&af, &crc, &mlen, 4); cf__wr_put(&af, &crc, meta, mlen); }
    cf__wr_pieces(&af, &crc, net, net->params, tmp);
    if (version >= 2) cf__wr_put(&af, &crc, net->stats, net->n_stats * sizeof(float));
    for (s = 0; s < 2; s++)   /* (a slot not held: zeros) */
        cf__wr_pieces(version >= 2 || s == 0 ? &af : NULL, &crc, net,
                      s < net->opt_slots ? net->opt + (size_t)s * net->n_params : NULL, tmp);
    if (version >= 4) {   /* gradient lag's pending average (never split) */
        uint64_t np = net->n_params;
        cf__wr_put(&af, &crc, &np, 8);
        cf__wr_put(&af, &crc, pending, net->n_params * sizeof(float));
    }
    CF_FREE(tmp);
    cf_atomic_write(&af, &crc, 4);
    return cf_atomic_commit(&af);
}
CFDEF int cf_checkpoint_save(const char *path, const cf_net *net, const cf_train_state *st) {
    return cf__checkpoint_write(path, net, st, 3, NULL);
}

/* the header: magic, cfg text (malloc'd), input shape, then the counts and state */
typedef struct {
    int version;
    char *cfg;
    cf_shape in;
    uint64_t u[5];
    double best;
    char meta[sizeof ((cf_train_state *)0)->meta];
} cf__ckpt_head;
static int cf__ckpt_header(cf__rd *r, const char *path, cf__ckpt_head *h, int whole) {
    char magic[8];
    uint64_t len;
    uint32_t mlen = 0;
    int32_t shp[4];
    memset(h, 0, sizeof *h);
    if (cf__rd_get(r, magic, 8) || memcmp(magic, "CFCKPT0", 7) || magic[7] < '1' || magic[7] > '4')
        return cf_fail("%s: not a cosmoflow.h checkpoint (bad magic)", path);
    h->version = magic[7] - '0';
    if (cf__rd_get(r, &len, 8) || len > (16u << 20)) return cf_fail("%s: corrupt checkpoint header", path);
    if (!(h->cfg = CF__NEW(char, (size_t)len + 1))) return CF_ERR;
    if (cf__rd_get(r, h->cfg, (size_t)len) || cf__rd_get(r, shp, sizeof shp)) {
        CF_FREE(h->cfg);
        h->cfg = NULL;
        return cf_fail("%s: truncated checkpoint", path);
    }
    h->in.c = shp[0]; h->in.d = shp[1]; h->in.h = shp[2]; h->in.w = shp[3];
    if (!whole) return CF_OK;
    if (cf__rd_get(r, h->u, sizeof h->u) || cf__rd_get(r, &h->best, 8) ||
        (h->version >= 3 && cf__rd_get(r, &mlen, 4)) || mlen >= sizeof h->meta ||
        (mlen && cf__rd_get(r, h->meta, mlen))) {
        CF_FREE(h->cfg); h->cfg = NULL;
        return cf_fail("%s: truncated or corrupt checkpoint header", path);
    }
    return CF_OK;
}
/* the optimizer updates a checkpoint's record holds (its "updates=" line), or its steps */
static uint64_t cf__ckpt_updates(const char *meta, uint64_t step) {
    const char *p = meta;
    for (; (p = strstr(p, "updates=")); p++)
        if (p == meta || p[-1] == '\n') return strtoull(p + 8, NULL, 10);
    return step;
}
/* the state a checkpoint's header holds; the record as the tool wrote it (without the
   library's "updates=" line) */
static void cf__ckpt_state(cf_train_state *st, const cf__ckpt_head *h) {
    char *p;
    memset(st, 0, sizeof *st);
    st->step = h->u[1]; st->epoch = h->u[2]; st->seed = h->u[3]; st->best = h->best;
    st->updates = cf__ckpt_updates(h->meta, h->u[1]);
    memcpy(st->meta, h->meta, sizeof st->meta);
    for (p = st->meta; (p = strstr(p, "updates=")); p++)
        if (p == st->meta || p[-1] == '\n') {
            const char *next = p + strcspn(p, "\n");   /* the line's end, then past its newline */
            if (*next) next++;
            memmove(p, next, strlen(next) + 1);
            break;
        }
}
static int cf__ckpt_open(cf__rd *r, const char *path) {
    size_t n;
    r->crc = 0;
    r->bad = 0;
    return r->fd = cf__open_regular(path, &n);
}

CFDEF int cf_checkpoint_cfg(const char *path, char **cfg_text, cf_shape *input) {
    cf__rd r;
    cf__ckpt_head h;
    int rc;
    if (!cfg_text || !input) return cf_fail("cf_checkpoint_cfg: cfg_text and input must not be NULL");
    if (cf__ckpt_open(&r, path) < 0) return CF_ERR;
    rc = cf__ckpt_header(&r, path, &h, 0);
    close(r.fd);
    *cfg_text = h.cfg; *input = h.in;
    return rc;
}

/* ---- what defines a model's computation: the input, the loss, and per layer its type,
   sources, shapes, geometry, groups, bias, activation and the constants of its kind.
   The first difference between two nets, described ("" when they compute alike). */
static void cf__shape_str(char *b, size_t n, cf_shape s) {
    if (s.d == 1) snprintf(b, n, "%dx%dx%d", s.c, s.h, s.w); else snprintf(b, n, "%dx%dx%dx%d", s.c, s.d, s.h, s.w);
}
static int cf__layer_diff(const cf_layer *a, const cf_layer *b, char *w, size_t n) {
    char sa[64], sb[64];
    int k;
    if (a->type != b->type) {
        snprintf(w, n, "%s in the checkpoint, %s in the cfg", cf_layer_type_name(a->type), cf_layer_type_name(b->type));
        return 1;
    }
    if (a->n_src != b->n_src || memcmp(a->src, b->src, sizeof a->src)) {
        snprintf(w, n, "its inputs (layers=) differ");
        return 1;
    }
    if (memcmp(&a->out, &b->out, sizeof a->out)) {
        cf__shape_str(sa, sizeof sa, a->out); cf__shape_str(sb, sizeof sb, b->out);
        snprintf(w, n, "output %s in the checkpoint, %s from the cfg", sa, sb); return 1;
    }
    for (k = 0; k < 3; k++)
        if (a->g.k[k] != b->g.k[k] || a->g.s[k] != b->g.s[k] || a->g.dil[k] != b->g.dil[k] ||
            a->g.pb[k] != b->g.pb[k] || a->g.pa[k] != b->g.pa[k]) {
            snprintf(w, n, "size, stride, dilation or padding differ (axis %d)", k); return 1;
        }
    if (a->groups != b->groups) {
        snprintf(w, n, "groups=%d in the checkpoint, %d in the cfg", a->groups, b->groups);
        return 1;
    }
    if (a->has_bias != b->has_bias) {
        snprintf(w, n, "bias=%d in the checkpoint, %d in the cfg", a->has_bias, b->has_bias);
        return 1;
    }
    if (a->act != b->act || (a->act == CF_ACT_LEAKY && a->slope != b->slope)) {
        snprintf(w, n, "activation=%s (slope %g) in the checkpoint, %s (slope %g) in the cfg", cf__act_names[a->act],
                 a->slope, cf__act_names[b->act], b->slope);
        return 1;
    }
    if (a->factor != b->factor || a->eps != b->eps || a->momentum != b->momentum || a->like != b->like) {
        snprintf(w, n, "factor=, eps=, momentum= or like= differ"); return 1;
    }
    return 0;
}
static int cf__model_diff(const cf_net *a, const cf_net *b, char *w, size_t n) {
    char sa[64], sb[64], why[256];
    int i;
    if (memcmp(&a->input, &b->input, sizeof a->input)) {
        cf__shape_str(sa, sizeof sa, a->input); cf__shape_str(sb, sizeof sb, b->input);
        snprintf(w, n, "input %s in the checkpoint, %s from the cfg", sa, sb); return 1;
    }
    if (a->n_layers != b->n_layers) {
        snprintf(w, n, "%d layers in the checkpoint, %d in the cfg", a->n_layers, b->n_layers);
        return 1;
    }
    if (a->loss != b->loss) {
        snprintf(w, n, "loss=%s in the checkpoint, %s in the cfg", cf__loss_names[a->loss], cf__loss_names[b->loss]);
        return 1;
    }
    if (memcmp(a->priv->class_w, b->priv->class_w, sizeof a->priv->class_w)) {
        snprintf(w, n, "class_weights= differ");
        return 1;
    }
    for (i = 0; i < a->n_layers; i++) {
        cf_layer bw = b->layers[i];   /* (a split network's: its whole shapes, section 8) */
        bw.in = cf__whole_in(b, i); bw.out = cf__whole_out(b, i);
        if (cf__layer_diff(&a->layers[i], &bw, why, sizeof why)) {
            snprintf(w, n, "layer %d ([%s] at line %d of the cfg): %s", i, cf_layer_type_name(b->layers[i].type),
                     b->layers[i].line, why);
            return 1;
        }
    }
    return 0;
}
/* the net the checkpoint's embedded cfg and shape describe, into saved */
static int cf__ckpt_net(const char *path, const cf__ckpt_head *h, cf_net *saved) {
    if (cf_net_parse(saved, h->cfg, path, &h->in))
        return cf_fail("%s: its embedded model does not parse: %s", path, cf_failure_reason());
    return CF_OK;
}
static int cf__ckpt_compare(const char *path, const cf__ckpt_head *h, const cf_net *net) {
    cf_net saved;
    char why[512];
    int differ;
    if (cf__ckpt_net(path, h, &saved)) return CF_ERR;
    differ = cf__model_diff(&saved, net, why, sizeof why);
    cf_net_free(&saved);
    return differ ? cf_fail("%s: made for a different model than %s: %s", path, net->cfg_name ? net->cfg_name
                            : "this one", why) : CF_OK;
}
CFDEF int cf_checkpoint_matches(const char *path, const cf_net *net) {
    cf__rd r;
    cf__ckpt_head h;
    int rc;
    if (cf__net_check(net, "cf_checkpoint_matches")) return CF_ERR;
    if (cf__ckpt_open(&r, path) < 0) return CF_ERR;
    rc = cf__ckpt_header(&r, path, &h, 0);
    close(r.fd);
    if (!rc) rc = cf__ckpt_compare(path, &h, net);
    CF_FREE(h.cfg);
    return rc;
}
CFDEF int cf_checkpoint_model(const char *path, cf_net *net, const cf_shape *shape) {
    cf__rd r;
    cf__ckpt_head h;
    int rc;
    if (!net) return cf_fail("cf_checkpoint_model: the network is NULL");
    memset(net, 0, sizeof *net);
    if (cf__ckpt_open(&r, path) < 0) return CF_ERR;
    rc = cf__ckpt_header(&r, path, &h, 0);
    close(r.fd);
    if (!rc && shape && memcmp(shape, &h.in, sizeof *shape)) {
        char sa[64], sb[64];
        cf__shape_str(sa, sizeof sa, h.in); cf__shape_str(sb, sizeof sb, *shape);
        rc = cf_fail("%s: input %s in the checkpoint, %s from --input-shape", path, sa, sb);
    }
    if (!rc) rc = cf__ckpt_net(path, &h, net);
    CF_FREE(h.cfg);
    return rc;
}

/* the parameters, statistics and optimizer state after the header, and the CRC, read twice
   rather than held twice: first checked whole (the CRC, every value finite, the state
   plausible) in chunks, then read into the network, each piece where this rank keeps it
   (section 8, "pieces": all of them but a split [dense]'s other rows), the CRC again.  On an
   error in the first pass the network is untouched. */
#define CF__CKPT_CHUNK ((size_t)1 << 18)   /* floats a pass reads at once */
/* n floats of the file into dst (NULL: read and dropped), in chunks through tmp; with check,
   bit 0 set when all were finite and bit 1 when any was not zero */
static int cf__rd_floats(cf__rd *r, float *dst, size_t n, float *tmp, int check) {
    size_t off, k;
    int finite = 1, nonzero = 0;
    for (off = 0; off < n && !r->bad; off += CF__CKPT_CHUNK) {
        size_t m = n - off < CF__CKPT_CHUNK ? n - off : CF__CKPT_CHUNK;
        float *to = dst ? dst + off : tmp;
        cf__rd_get(r, to, m * sizeof(float));
        if (check) for (k = 0; k < m; k++) { finite &= isfinite(to[k]) != 0; nonzero |= to[k] != 0.0f; }
    }
    return finite | nonzero << 1;
}
/* the parameters or an optimizer slot into buf (this rank's layout; NULL: read and dropped), piece by piece */
static void cf__rd_pieces(cf__rd *r, const cf_net *net, float *buf, float *tmp) {
    int j;
    for (j = 0; j < cf__n_pieces(net); j++) {
        cf__piece p = cf__piece_at(net, j);
        size_t at = cf__piece_local(net, p);
        cf__rd_floats(r, !buf || at == (size_t)-1 ? NULL : buf + at, p.n, tmp, 0);
    }
}
/* the CRC at the end, and nothing after it */
static int cf__rd_crc_ok(cf__rd *r) {
    uint32_t crc_file;
    unsigned char extra;
    return !r->bad && cf__read_full(r->fd, &crc_file, 4) == 4 && crc_file == r->crc &&
           cf__read_full(r->fd, &extra, 1) == 0;
}
/* format 4's block: u64 n (np) and n floats into dst (NULL: dropped); CF_ERR when n is not np
   or a value is not finite */
static int cf__rd_pending(cf__rd *r, size_t np, float *dst, float *tmp) {
    uint64_t n = 0;
    if (cf__rd_get(r, &n, 8) || n != np) { r->bad = 1; return CF_ERR; }
    return cf__rd_floats(r, dst, np, tmp, 1) & 1 ? CF_OK : CF_ERR;
}
static int cf__ckpt_body(cf__rd *r, const char *path, const cf__ckpt_head *h, cf_net *net) {
    size_t np = net->priv->split.shard >= 0 ? net->priv->split.whole_n : net->n_params,
        n_stats = h->version >= 2 ? net->n_stats : 0;
    int slots = h->version >= 2 ? 2 : 1, s, params_ok, opt_ok = 1, second = 0, f;
    off_t body = lseek(r->fd, 0, SEEK_CUR);
    uint32_t crc0 = r->crc;
    float *tmp;
    if (h->u[0] != np || (h->version >= 2 && h->u[4] != net->n_stats))
        return cf_fail("%s: corrupt checkpoint (its counts do not fit its model)", path);
    if (body < 0) return cf_fail("%s: cannot seek", path);
    if (!(tmp = CF__NEW(float, CF__CKPT_CHUNK))) return CF_ERR;
    /* a correct CRC says the file is what was written, not that what was written makes sense */
    params_ok = cf__rd_floats(r, NULL, np + n_stats, tmp, 1) & 1;
    for (s = 0; s < slots; s++) {
        f = cf__rd_floats(r, NULL, np, tmp, 1);
        if (!(f & 1)) opt_ok = 0;
        if (s == 1 && (f & 2)) second = 1;   /* second moments: the network needs their slot */
    }
    if (h->version >= 4 && cf__rd_pending(r, np, NULL, tmp)) opt_ok = 0;
    if (r->bad) { CF_FREE(tmp); return cf_fail("%s: truncated checkpoint", path); }
    if (!cf__rd_crc_ok(r)) {
        CF_FREE(tmp);
        return cf_fail("%s: checksum mismatch or trailing bytes: the checkpoint is corrupt", path);
    }
    if (!params_ok) {
        CF_FREE(tmp);
        return cf_fail("%s: its parameters or statistics hold a NaN or an infinity", path);
    }
    if (!opt_ok) { CF_FREE(tmp); return cf_fail("%s: its optimizer state holds a NaN or an infinity", path); }
    /* at most 10^8 epochs, and (a checkpoint that counts epochs) as many steps as that many
       epochs of at most 2^31 steps make */
    if (!isfinite(h->best) || h->u[2] > 100000000u || h->u[1] > ((uint64_t)1 << 50) ||
        (h->u[2] && h->u[1] > h->u[2] * (uint64_t)2147483647u)) {
        CF_FREE(tmp);
        return cf_fail("%s: its state is not plausible (epoch %llu, step %llu, validation metric %g)", path,
                       (unsigned long long)h->u[2], (unsigned long long)h->u[1], h->best);
    }
    /* the second pass, into the network */
    r->crc = crc0;
    if (lseek(r->fd, body, SEEK_SET) != body) { CF_FREE(tmp); return cf_fail("%s: cannot seek", path); }
    cf__rd_pieces(r, net, net->params, tmp);
    cf__rd_floats(r, net->stats, n_stats, tmp, 0);
    if (second && cf__opt_slots(net, 2)) { CF_FREE(tmp); return CF_ERR; }
    memset(net->opt, 0, (size_t)net->opt_slots * net->n_params * sizeof(float));
    for (s = 0; s < slots; s++)
        cf__rd_pieces(r, net, s < net->opt_slots ? net->opt + (size_t)s * net->n_params : NULL, tmp);
    if (h->version >= 4) cf__rd_pending(r, np, NULL, tmp);
    CF_FREE(tmp);
    if (!cf__rd_crc_ok(r))
        return cf_fail("%s: changed while it was read (its second reading does not match its CRC): load it again",
                       path);
    return CF_OK;
}
CFDEF int cf_checkpoint_load(const char *path, cf_net *net, cf_train_state *st) {
    cf__rd r;
    cf__ckpt_head h;
    int rc;
    if (cf__net_check(net, "cf_checkpoint_load")) return CF_ERR;
    if (cf__ckpt_open(&r, path) < 0) return CF_ERR;
    rc = cf__ckpt_header(&r, path, &h, 1);
    if (!rc) rc = cf__ckpt_compare(path, &h, net);
    if (!rc) rc = cf__ckpt_body(&r, path, &h, net);
    close(r.fd);
    CF_FREE(h.cfg);
    if (rc) return rc;
    net->seed = h.u[3];
    net->priv->step = h.u[1];   /* dropout masks continue where they stopped */
    net->priv->updates = cf__ckpt_updates(h.meta, h.u[1]);
    if (st) cf__ckpt_state(st, &h);
    return CF_OK;
}
CFDEF int cf_checkpoint_save_trainer(const char *path, cf_trainer *t, const cf_train_state *st) {
    float *avg;
    int rc;
    if (cf__trainer_check(t, "cf_checkpoint_save_trainer")) return CF_ERR;
    if (!t->cfg.grad_lag || !t->priv->lag.pending) return cf_checkpoint_save(path, t->net, st);
    if (!(avg = CF__NEW(float, t->net->n_params + 1))) return CF_ERR;
    cf__grad_lag_average(&t->priv->lag, t->net->n_params, avg);
    rc = cf__checkpoint_write(path, t->net, st, 4, avg);
    CF_FREE(avg);
    return rc;
}
CFDEF int cf_train_resume_pending(cf_trainer *t, const char *path) {
    cf__rd r;
    cf__ckpt_head h;
    float *avg = NULL, *tmp = NULL;
    size_t np, slots, skip;
    int rc = CF_OK;
    if (cf__trainer_check(t, "cf_train_resume_pending")) return CF_ERR;
    if (cf__ckpt_open(&r, path) < 0) return CF_ERR;
    if (!(rc = cf__ckpt_header(&r, path, &h, 1)) && h.version >= 4) {
        np = t->net->n_params; slots = 2;
        skip = (np + h.u[4] + slots * np) * sizeof(float);   /* params, stats, two optimizer slots */
        if (h.u[0] != np) rc = cf_fail("%s: its gradient lag's gradient is not this network's", path);
        else if (lseek(r.fd, (off_t)skip, SEEK_CUR) < 0) rc = cf_fail("%s: cannot seek", path);
        else if (!(avg = CF__NEW(float, np + 1)) || !(tmp = CF__NEW(float, CF__CKPT_CHUNK))) rc = CF_ERR;
        else if (cf__rd_pending(&r, np, avg, tmp))
            rc = cf_fail("%s: its gradient lag's gradient is truncated or not finite", path);
        else if (!t->cfg.grad_lag)
            rc = cf_fail("%s: holds a gradient lag's gradient, but the trainer runs without gradient lag", path);
        else rc = cf__grad_lag_set(&t->priv->lag, np, avg);
    }
    close(r.fd);
    CF_FREE(h.cfg); CF_FREE(avg); CF_FREE(tmp);
    return rc;
}

/* What a checkpoint holds, for cf-check --info: the header, and the whole file read once to
   check the CRC and to measure the parameters and each optimizer slot (root mean square). */
CFDEF int cf_checkpoint_info(const char *path, cf_ckpt_info *info) {
    cf__rd r;
    cf__ckpt_head h;
    cf_net net;
    int rc;
    if (!info) return cf_fail("cf_checkpoint_info: info is NULL");
    memset(info, 0, sizeof *info);
    if (cf__ckpt_open(&r, path) < 0) return CF_ERR;
    if ((rc = cf__ckpt_header(&r, path, &h, 1)) || (rc = cf__ckpt_net(path, &h, &net))) {
        close(r.fd);
        CF_FREE(h.cfg);
        return rc;
    }
    info->version = h.version; info->input = h.in; info->n_params = h.u[0]; info->n_stats = h.version >= 2 ? h.u[4] : 0;
    cf__ckpt_state(&info->state, &h);
    info->cfg_text = h.cfg;
    if (!(rc = cf__ckpt_body(&r, path, &h, &net))) {
        size_t k, np = net.n_params;
        double s[3] = {0, 0, 0};
        for (k = 0; k < np; k++) {
            s[0] += (double)net.params[k] * net.params[k];
            s[1] += (double)net.opt[k] * net.opt[k];
            s[2] += net.opt_slots > 1 ? (double)net.opt[np + k] * net.opt[np + k] : 0.0;
        }
        for (k = 0; k < 3; k++) info->rms[k] = np ? sqrt(s[k] / np) : 0.0;
        info->crc_ok = 1;
    }
    close(r.fd);
    cf_net_free(&net);
    if (rc) { CF_FREE(info->cfg_text); info->cfg_text = NULL; }
    return rc;
}

static void cf__tensor_path(char *out, size_t n, const char *dir, int idx, const cf_tensor *t) {
    snprintf(out, n, "%s/%03d_%d_%s.npy", dir, idx, t->layer, t->kind);
}

CFDEF int cf_weights_export(const cf_net *net, const char *dir) {
    int nt, i, j;
    cf_tensor *t;
    char path[4096];
    if (cf__net_check(net, "cf_weights_export")) return CF_ERR;
    if (!dir) return cf_fail("cf_weights_export: the directory is NULL");
    if (net->priv->split.shard >= 0)
        return cf_fail("cf_weights_export: %s holds only this rank's rows of a [dense] (cf_net_set_spatial): save a "
                       "checkpoint (the whole network) and export that", net->cfg_name);
    nt = cf_net_tensors(net, NULL, 0);
    if (!(t = CF__NEW(cf_tensor, nt + 1))) return CF_ERR;
    cf_net_tensors(net, t, nt);
    if (mkdir(dir, 0777) && errno != EEXIST) {
        CF_FREE(t);
        return cf_fail("%s: cannot create directory (%s)", dir, strerror(errno));
    }
    for (i = 0; i < nt; i++) {
        cf_array a;
        memset(&a, 0, sizeof a);
        a.dtype = CF_F32; a.ndim = t[i].ndim; a.count = t[i].n;
        a.data = (t[i].stats ? net->stats : net->params) + t[i].off;
        for (j = 0; j < a.ndim; j++) a.shape[j] = t[i].shape[j];
        cf__tensor_path(path, sizeof path, dir, i, &t[i]);
        if (cf_npy_write(path, &a)) { CF_FREE(t); return CF_ERR; }
    }
    CF_FREE(t);
    return CF_OK;
}

CFDEF int cf_weights_import(cf_net *net, const char *dir) {
    int nt, i, j, found = 0;
    cf_tensor *t;
    float *tmp;   /* params, then stats */
    char path[4096];
    if (cf__net_check(net, "cf_weights_import")) return CF_ERR;
    if (!dir) return cf_fail("cf_weights_import: the directory is NULL");
    if (net->priv->split.shard >= 0)
        return cf_fail("cf_weights_import: %s holds only this rank's rows of a [dense] (cf_net_set_spatial): import "
                       "into the whole network, then split it", net->cfg_name);
    nt = cf_net_tensors(net, NULL, 0);
    t = CF__NEW(cf_tensor, nt + 1);
    tmp = CF__NEW(float, net->n_params + net->n_stats + 1);
    DIR *dd;
    struct dirent *e;
    if (!t || !tmp) { CF_FREE(t); CF_FREE(tmp); return CF_ERR; }
    cf_net_tensors(net, t, nt);
    dd = opendir(dir);
    if (!dd) { CF_FREE(t); CF_FREE(tmp); return cf_fail("%s: %s", dir, strerror(errno)); }
    while ((e = readdir(dd)))   /* count tensor files, so a directory for a bigger model is refused */
        if (isdigit((unsigned char)e->d_name[0]) && strstr(e->d_name, ".npy")) found++;
    closedir(dd);
    if (found != nt) {
        CF_FREE(t);
        CF_FREE(tmp);
        return cf_fail("%s: holds %d tensor files; the model has %d tensors", dir, found, nt);
    }
    for (i = 0; i < nt; i++) {
        cf_array a;
        int ok;
        cf__tensor_path(path, sizeof path, dir, i, &t[i]);
        if (cf_npy_read(path, &a)) { CF_FREE(t); CF_FREE(tmp); return CF_ERR; }
        ok = a.dtype == CF_F32 && a.ndim == t[i].ndim;
        for (j = 0; ok && j < a.ndim; j++) ok = a.shape[j] == t[i].shape[j];
        if (!ok) {
            char want[128]; int n = 0;
            for (j = 0; j < t[i].ndim; j++)
                n += snprintf(want + n, sizeof want - n, "%s%d", j ? "x" : "", t[i].shape[j]);
            cf_array_free(&a); CF_FREE(t); CF_FREE(tmp);
            return cf_fail("%s: expected float32 of shape %s (PyTorch layout)", path, want);
        }
        ok = cf__all_finite((const float *)a.data, t[i].n);
        if (ok) memcpy(tmp + (t[i].stats ? net->n_params : 0) + t[i].off, a.data, t[i].n * sizeof(float));
        cf_array_free(&a);
        if (!ok) { CF_FREE(t); CF_FREE(tmp); return cf_fail("%s: holds a NaN or an infinity", path); }
    }
    memcpy(net->params, tmp, net->n_params * sizeof(float));   /* all or nothing */
    memcpy(net->stats, tmp + net->n_params, net->n_stats * sizeof(float));
    CF_FREE(t); CF_FREE(tmp);
    return CF_OK;
}

CFDEF int cf_weights_load(cf_net *net, const char *path) {
    struct stat st;
    if (!path) return cf_fail("cf_weights_load: the path is NULL");
    if (stat(path, &st)) return cf_fail("%s: %s", path, strerror(errno));
    return S_ISDIR(st.st_mode) ? cf_weights_import(net, path) : cf_checkpoint_load(path, net, NULL);
}

/* ---- TFRecord: uint64 length | uint32 masked crc(length) | data | uint32 masked crc(data) */
static uint64_t cf__le64(const unsigned char *p) {
    uint64_t v = 0;
    int i;
    for (i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}
static uint32_t cf__le32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

#ifndef CF_MAX_FILE_BYTES
#define CF_MAX_FILE_BYTES ((size_t)1 << 31)   /* 2 GiB: larger inputs are refused, not allocated */
#endif

/* the whole of a regular file in memory (at most CF_MAX_FILE_BYTES) */
static int cf__slurp(const char *path, unsigned char **buf, size_t *len) {
    int fd = cf__open_regular(path, len);
    if (fd < 0) return CF_ERR;
    if (*len > CF_MAX_FILE_BYTES) {
        close(fd);
        return cf_fail("%s: %zu bytes is larger than %zu", path, *len, CF_MAX_FILE_BYTES);
    }
    if (!(*buf = CF__NEW(unsigned char, *len + 1))) { close(fd); return CF_ERR; }
    if (cf__read_full(fd, *buf, *len) != *len) { close(fd); CF_FREE(*buf); return cf_fail("%s: read error", path); }
    close(fd);
    return CF_OK;
}
#ifdef CF_USE_ZLIB
/* one gzip member of raw[*pos..n) appended to out (len of its cap bytes used); *pos moves past it */
static int cf__inflate_member(const char *path, const unsigned char *raw, size_t n, size_t *pos,
                              unsigned char **out, size_t *len, size_t *cap) {
    z_stream z;
    int rc;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, 15 + 16) != Z_OK) return cf_fail("%s: zlib init failed", path);
    z.next_in = (unsigned char *)raw + *pos;
    z.avail_in = (uInt)(n - *pos);   /* at most CF_MAX_FILE_BYTES: fits */
    do {
        if (*len == *cap) {   /* grow the output */
            unsigned char *nb;
            if (*cap >= CF_MAX_FILE_BYTES) {
                inflateEnd(&z);
                return cf_fail("%s: decompresses to more than %zu bytes", path, CF_MAX_FILE_BYTES);
            }
            if (!(nb = CF__NEW(unsigned char, 2 * *cap))) { inflateEnd(&z); return CF_ERR; }
            memcpy(nb, *out, *len); CF_FREE(*out); *out = nb; *cap *= 2;
        }
        z.next_out = *out + *len;
        z.avail_out = (uInt)(*cap - *len);
        rc = inflate(&z, Z_NO_FLUSH);
        *len = (size_t)(z.next_out - *out);
    } while (rc == Z_OK && (z.avail_out == 0 || z.avail_in > 0));
    *pos = (size_t)(z.next_in - raw);
    inflateEnd(&z);
    if (rc != Z_STREAM_END)
        return cf_fail("%s: gzip stream is %s", path, rc == Z_OK || rc == Z_BUF_ERROR ? "truncated" : "corrupt");
    return CF_OK;
}
/* The gzip members of raw inflated, one after another as gzip allows; bytes after the last
   member that do not start another one are an error (gzip itself warns of them), not data.
   TensorFlow's GZIP TFRecords are one member. */
static int cf__gunzip(const char *path, const unsigned char *raw, size_t n, unsigned char **out, size_t *len) {
    size_t cap = n * 8 + 1024, pos = 0;
    if (!(*out = CF__NEW(unsigned char, cap))) return CF_ERR;
    *len = 0;
    while (pos < n) {
        if (n - pos < 2 || raw[pos] != 0x1f || raw[pos + 1] != 0x8b) {
            CF_FREE(*out);
            return cf_fail("%s: %zu bytes after the gzip stream are not gzip (a damaged or appended file)", path,
                           n - pos);
        }
        if (cf__inflate_member(path, raw, n, &pos, out, len, &cap)) { CF_FREE(*out); return CF_ERR; }
    }
    return CF_OK;
}
#endif

/* the file, inflated when it is gzip */
CFDEF int cf_tfrecord_open(cf_tfrecord *r, const char *path) {
    unsigned char *raw = NULL;
    size_t n = 0;
    if (!r) return cf_fail("cf_tfrecord_open: the reader is NULL");
    memset(r, 0, sizeof *r);
    if (cf__slurp(path, &raw, &n)) return CF_ERR;
    if (n >= 2 && raw[0] == 0x1f && raw[1] == 0x8b) {
#ifdef CF_USE_ZLIB
        int rc = cf__gunzip(path, raw, n, &r->buf, &r->len);
        CF_FREE(raw);
        if (rc) return rc;
#else
        CF_FREE(raw);
        return cf_fail("%s: gzip file, but built without zlib (CF_USE_ZLIB)", path);
#endif
    } else { r->buf = raw; r->len = n; }
    r->pos = 0;
    r->path = cf__strdup(path);
    if (!r->path) { CF_FREE(r->buf); memset(r, 0, sizeof *r); return CF_ERR; }
    return CF_OK;
}

CFDEF int cf_tfrecord_next(cf_tfrecord *r, const unsigned char **data, size_t *len) {
    uint64_t n;
    size_t left;
    const unsigned char *p;
    if (!r || !r->buf || !data || !len)
        return cf_fail("cf_tfrecord_next: not a reader cf_tfrecord_open opened, or data or len NULL");
    left = r->len - r->pos; p = r->buf + r->pos;
    if (left == 0) return 0;
    if (left < 12) return cf_fail("%s: truncated record header at offset %zu", r->path, r->pos);
    n = cf__le64(p);
    if (cf__le32(p + 8) != cf_crc32c_masked(p, 8))
        return cf_fail("%s: length CRC mismatch at offset %zu (corrupt file)", r->path, r->pos);
    if (n > left - 12 || left - 12 - n < 4)
        return cf_fail("%s: record at offset %zu claims %llu bytes, only %zu remain (truncated)", r->path, r->pos,
                       (unsigned long long)n, left - 12);
    if (cf__le32(p + 12 + n) != cf_crc32c_masked(p + 12, (size_t)n))
        return cf_fail("%s: data CRC mismatch in record at offset %zu (corrupt file)", r->path, r->pos);
    *data = p + 12; *len = (size_t)n;
    r->pos += 16 + (size_t)n;
    return 1;
}

CFDEF void cf_tfrecord_close(cf_tfrecord *r) {
    if (!r) return;
    CF_FREE(r->buf);
    CF_FREE(r->path);
    memset(r, 0, sizeof *r);
}

/* protobuf wire format: tag = field << 3 | wire type; 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32 */
static const unsigned char *cf__pb_varint(const unsigned char *p, const unsigned char *end, uint64_t *v) {
    int shift = 0;
    *v = 0;
    while (p < end && shift < 64) {
        *v |= (uint64_t)(*p & 0x7f) << shift;
        if (!(*p++ & 0x80)) return p;
        shift += 7;
    }
    return NULL;
}
/* Next field of a message in [*p, end): its number, wire type, and (for length-delimited and
   fixed) its payload.  Returns 1, 0 at the end, -1 when malformed. */
static int cf__pb_next(const unsigned char **p, const unsigned char *end, int *field, int *wire,
                       const unsigned char **val, size_t *vlen) {
    uint64_t tag, n;
    if (*p >= end) return 0;
    if (!(*p = cf__pb_varint(*p, end, &tag))) return -1;
    *field = (int)(tag >> 3); *wire = (int)(tag & 7);
    switch (*wire) {
    case 0: *val = *p; if (!(*p = cf__pb_varint(*p, end, &n))) return -1; *vlen = 0; return 1;
    case 1: n = 8; break;
    case 5: n = 4; break;
    case 2: if (!(*p = cf__pb_varint(*p, end, &n))) return -1; break;
    default: return -1;   /* groups are not used by tf.train.Example */
    }
    if (n > (uint64_t)(end - *p)) return -1;
    *val = *p; *vlen = (size_t)n; *p += n;
    return 1;
}

/* Example{1: Features{1: repeated map entry{1: key, 2: Feature}}} -> the Feature of key */
static int cf__example_feature(const unsigned char *ex, size_t n, const char *key,
                               const unsigned char **feat, size_t *flen) {
    const unsigned char *p = ex, *end = ex + n, *v, *q, *qe, *ev;
    size_t vl, el;
    int f, w, rc, f2, w2, found = 0;
    while ((rc = cf__pb_next(&p, end, &f, &w, &v, &vl)) == 1) {
        if (f != 1 || w != 2) continue;                    /* Example.features */
        q = v; qe = v + vl;
        while ((rc = cf__pb_next(&q, qe, &f2, &w2, &ev, &el)) == 1) {
            const unsigned char *e = ev, *ee = ev + el, *kv, *fv = NULL;
            size_t fl = 0;
            int f3, w3, rc3, has_key = 0;
            if (f2 != 1 || w2 != 2) continue;               /* Features.feature map entry */
            while ((rc3 = cf__pb_next(&e, ee, &f3, &w3, &kv, &vl)) == 1) {
                if (f3 == 1 && w3 == 2) has_key = vl == strlen(key) && !memcmp(kv, key, vl);
                else if (f3 == 2 && w3 == 2) { fv = kv; fl = vl; }
            }
            if (rc3 < 0) return cf_fail("malformed protobuf in a feature map entry");
            if (!has_key || !fv) continue;
            /* protobuf would keep the last of two entries; a sample with two is damaged */
            if (found++) return cf_fail("feature '%s' appears twice", key);
            *feat = fv; *flen = fl;
        }
        if (rc < 0) return cf_fail("malformed protobuf in Features");
    }
    if (rc < 0) return cf_fail("malformed protobuf in Example");
    return found ? 1 : cf_fail("feature '%s' is missing", key);
}

CFDEF int cf_example_bytes(const unsigned char *ex, size_t n, const char *key,
                           const unsigned char **val, size_t *len) {
    const unsigned char *feat, *p, *v, *q, *bv;
    size_t fl, vl, bl;
    int f, w, f2, w2;
    if (cf__example_feature(ex, n, key, &feat, &fl) != 1) return CF_ERR;
    p = feat;
    while (cf__pb_next(&p, feat + fl, &f, &w, &v, &vl) == 1)
        if (f == 1 && w == 2) {                               /* Feature.bytes_list */
            q = v;
            while (cf__pb_next(&q, v + vl, &f2, &w2, &bv, &bl) == 1)
                if (f2 == 1 && w2 == 2) { *val = bv; *len = bl; return CF_OK; }
        }
    return cf_fail("feature '%s' is not a bytes list with a value", key);
}

CFDEF int cf_example_floats(const unsigned char *ex, size_t n, const char *key,
                            float *out, size_t max, size_t *count) {
    const unsigned char *feat, *p, *v, *q, *fv;
    size_t fl, vl, l, k, got = 0;
    int f, w, f2, w2, rc, found = 0;
    if (cf__example_feature(ex, n, key, &feat, &fl) != 1) return CF_ERR;
    p = feat;
    while (cf__pb_next(&p, feat + fl, &f, &w, &v, &vl) == 1) {
        if (f != 2 || w != 2) continue;                       /* Feature.float_list */
        found = 1;
        q = v;
        while ((rc = cf__pb_next(&q, v + vl, &f2, &w2, &fv, &l)) == 1) {
            if (f2 != 1) continue;
            if (w2 == 5) l = 4;                               /* one unpacked float */
            else if (w2 != 2 || l % 4) return cf_fail("feature '%s': malformed float list", key);
            for (k = 0; k + 4 <= l; k += 4) {
                uint32_t u = cf__le32(fv + k);
                if (got >= max) return cf_fail("feature '%s' has more than %zu floats", key, max);
                memcpy(&out[got++], &u, 4);
            }
        }
        if (rc < 0) return cf_fail("feature '%s': malformed float list", key);
    }
    if (!found) return cf_fail("feature '%s' is not a float list", key);
    *count = got;
    return CF_OK;
}

static unsigned char *cf__put_varint(unsigned char *p, uint64_t v) {
    while (v >= 0x80) { *p++ = (unsigned char)(v | 0x80); v >>= 7; }
    *p++ = (unsigned char)v;
    return p;
}
static size_t cf__varint_len(uint64_t v) { size_t n = 1; while (v >= 0x80) { v >>= 7; n++; } return n; }
/* tag + length prefix of a length-delimited field */
static unsigned char *cf__put_len(unsigned char *p, int field, size_t n) {
    *p++ = (unsigned char)(field << 3 | 2);
    return cf__put_varint(p, n);
}
static size_t cf__len_field(size_t n) { return 1 + cf__varint_len(n) + n; }

/* Writes Example{features{x: bytes_list, y: packed float_list}}; out NULL returns the size. */
CFDEF size_t cf_example_encode(unsigned char *out, const char *xkey, const void *x, size_t xlen,
                               const char *ykey, const float *y, size_t ny, int flags) {
    size_t xk = strlen(xkey), yk = strlen(ykey);
    int y_first = flags & CF_EX_Y_FIRST, unpacked = flags & CF_EX_UNPACKED;
    size_t ylist = unpacked ? 5 * ny : cf__len_field(4 * ny);              /* FloatList body */
    size_t xfeat = cf__len_field(cf__len_field(xlen));                      /* Feature{bytes_list{value}} */
    size_t yfeat = cf__len_field(ylist);                                    /* Feature{float_list{...}} */
    size_t xent = cf__len_field(xk) + cf__len_field(xfeat), yent = cf__len_field(yk) + cf__len_field(yfeat);
    size_t feats = cf__len_field(xent) + cf__len_field(yent), total = cf__len_field(feats);
    unsigned char *p = out;
    int pass;
    if (!out) return total;
    p = cf__put_len(p, 1, feats);
    for (pass = 0; pass < 2; pass++) {
        if ((pass == 0) != (y_first != 0)) {   /* the x entry */
            p = cf__put_len(p, 1, xent);
            p = cf__put_len(p, 1, xk); memcpy(p, xkey, xk); p += xk;
            p = cf__put_len(p, 2, xfeat);
            p = cf__put_len(p, 1, cf__len_field(xlen));
            p = cf__put_len(p, 1, xlen); memcpy(p, x, xlen); p += xlen;
        } else {                               /* the y entry */
            size_t k;
            p = cf__put_len(p, 1, yent);
            p = cf__put_len(p, 1, yk); memcpy(p, ykey, yk); p += yk;
            p = cf__put_len(p, 2, yfeat);
            p = cf__put_len(p, 2, ylist);
            if (!unpacked) p = cf__put_len(p, 1, 4 * ny);
            for (k = 0; k < ny; k++) {
                if (unpacked) *p++ = 0x0d;   /* field 1, wire type 5 (fixed32) */
                memcpy(p, &y[k], 4); p += 4;
            }
        }
    }
    return (size_t)(p - out);
}

CFDEF size_t cf_tfrecord_frame(unsigned char *out, const unsigned char *rec, size_t n) {
    uint32_t c;
    int i;
    if (!out) return n + 16;
    for (i = 0; i < 8; i++) out[i] = (unsigned char)((uint64_t)n >> (8 * i));
    c = cf_crc32c_masked(out, 8); memcpy(out + 8, &c, 4);
    memmove(out + 12, rec, n);
    c = cf_crc32c_masked(out + 12, n); memcpy(out + 12 + n, &c, 4);
    return n + 16;
}

CFDEF int cf_tfrecord_write(const char *path, const unsigned char *rec, size_t n, int gzip) {
    cf_atomic_file af;
    unsigned char *framed, *out;
    size_t outlen = n + 16;
    int rc;
    if (!path || (!rec && n)) return cf_fail("cf_tfrecord_write: the path or the record is NULL");
    out = framed = CF__NEW(unsigned char, n + 16);
    if (!framed) return CF_ERR;
    cf_tfrecord_frame(framed, rec, n);
#ifdef CF_USE_ZLIB
    if (gzip) {   /* one gzip member, as TensorFlow's TFRecordWriter(options='GZIP') writes; level 1:
                     on 32^3 x 4 counts twice as fast as level 6 for files 1.7 % larger */
        z_stream z;
        memset(&z, 0, sizeof z);
        outlen = deflateBound(&z, (uLong)(n + 16)) + 64;
        out = CF__NEW(unsigned char, outlen);
        if (!out || deflateInit2(&z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
            CF_FREE(out);
            CF_FREE(framed);
            return cf_fail("%s: zlib init failed", path);
        }
        z.next_in = framed; z.avail_in = (uInt)(n + 16); z.next_out = out; z.avail_out = (uInt)outlen;
        if (deflate(&z, Z_FINISH) != Z_STREAM_END) {
            deflateEnd(&z);
            CF_FREE(out);
            CF_FREE(framed);
            return cf_fail("%s: compression failed", path);
        }
        outlen = z.total_out;
        deflateEnd(&z);
    }
#else
    if (gzip) { CF_FREE(framed); return cf_fail("%s: gzip output needs zlib (CF_USE_ZLIB)", path); }
#endif
    if ((rc = cf_atomic_open(&af, path)) == CF_OK) { cf_atomic_write(&af, out, outlen); rc = cf_atomic_commit(&af); }
    if (out != framed) CF_FREE(out);
    CF_FREE(framed);
    return rc;
}

/* ---- PNG: signature, IHDR, one IDAT (zlib of rows each prefixed by filter 0), IEND */
#ifdef CF_USE_ZLIB
static void cf__be32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}
#endif
CFDEF int cf_png_write(const char *path, const unsigned char *rgb, int w, int h) {
#ifdef CF_USE_ZLIB
    size_t row, raw_n;
    if (!path || !rgb || w < 1 || h < 1)
        return cf_fail("cf_png_write: the path or the image is NULL, or a side below 1");
    row = (size_t)w * 3 + 1; raw_n = row * h;
    unsigned char *raw = CF__NEW(unsigned char, raw_n), *z, hdr[13], len[4], crc[4];
    uLongf zn = compressBound((uLong)raw_n);
    cf_atomic_file af;
    int y, k;
    if (!raw) return CF_ERR;
    for (y = 0; y < h; y++) { raw[y * row] = 0; memcpy(raw + y * row + 1, rgb + (size_t)y * w * 3, (size_t)w * 3); }
    z = CF__NEW(unsigned char, zn);
    if (!z || compress2(z, &zn, raw, (uLong)raw_n, 6) != Z_OK) {
        CF_FREE(raw);
        CF_FREE(z);
        return cf_fail("%s: PNG compression failed", path);
    }
    CF_FREE(raw);
    cf__be32(hdr, (uint32_t)w); cf__be32(hdr + 4, (uint32_t)h);
    hdr[8] = 8; hdr[9] = 2; hdr[10] = hdr[11] = hdr[12] = 0;   /* 8-bit RGB, no interlace */
    if (cf_atomic_open(&af, path)) { CF_FREE(z); return CF_ERR; }
    cf_atomic_write(&af, "\x89PNG\r\n\x1a\n", 8);
    for (k = 0; k < 3; k++) {
        const char *type = k == 0 ? "IHDR" : k == 1 ? "IDAT" : "IEND";
        const unsigned char *data = k == 0 ? hdr : z;
        uint32_t n = k == 0 ? 13 : k == 1 ? (uint32_t)zn : 0;
        uLong c = crc32(0, (const Bytef *)type, 4);
        c = crc32(c, data, n);
        cf__be32(len, n); cf__be32(crc, (uint32_t)c);
        cf_atomic_write(&af, len, 4); cf_atomic_write(&af, type, 4); cf_atomic_write(&af, data, n);
        cf_atomic_write(&af, crc, 4);
    }
    CF_FREE(z);
    return cf_atomic_commit(&af);
#else
    (void)rgb; (void)w; (void)h;
    return cf_fail("%s: PNG output needs zlib (CF_USE_ZLIB)", path);
#endif
}

/* ---- CosmoFlow samples */
static int cf__ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

/* x bytes -> (S,S,S,C) int16 with C = 4 */
static int cf__cosmo_shape(const char *path, size_t count, int *S) {
    int s = (int)floor(cbrt((double)count / 4.0) + 0.5);
    if (count == 0 || (size_t)s * s * s * 4 != count)
        return cf_fail("%s: x holds %zu int16 values, not a (S,S,S,4) volume", path, count);
    *S = s;
    return CF_OK;
}

/* the labels of X_data.npy: X_label.npy, float32, 1 to 8 values */
static int cf__cosmo_npy_labels(const char *path, cf_cosmo_sample *smp) {
    cf_array lab;
    char *lp = CF__NEW(char, strlen(path) + 8);
    size_t k;
    if (!lp) return CF_ERR;
    memcpy(lp, path, strlen(path) - 9);
    strcpy(lp + strlen(path) - 9, "_label.npy");
    if (cf_npy_read(lp, &lab)) { CF_FREE(lp); return CF_ERR; }
    if (lab.dtype != CF_F32 || lab.count < 1 || lab.count > 8) {
        int rc = cf_fail("%s: expected float32 labels (1 to 8 values)", lp);
        cf_array_free(&lab); CF_FREE(lp);
        return rc;
    }
    for (k = 0; k < lab.count; k++) smp->y[k] = ((float *)lab.data)[k];
    smp->ny = (int)lab.count;
    cf_array_free(&lab); CF_FREE(lp);
    return CF_OK;
}
/* the submitters' numpy layout, whole (n = 0) or its box [first, first + n) along axis */
static int cf__cosmo_read_npy(const char *path, int axis, int first, int n, cf_cosmo_sample *smp) {
    cf_array a;
    int S;
    if (n ? cf_npy_read_box(path, axis, first, n, &a) : cf_npy_read(path, &a)) return CF_ERR;
    S = (int)a.shape[axis == 0 ? 1 : 0];
    if (a.dtype != CF_I16 || a.ndim != 4 || a.shape[3] != 4 || a.shape[(axis + 1) % 3] != S ||
        a.shape[(axis + 2) % 3] != S || (!n && a.shape[axis] != S)) {
        cf_array_free(&a);
        return cf_fail("%s: expected int16 of shape (S,S,S,4)", path);
    }
    if (cf__cosmo_npy_labels(path, smp)) { cf_array_free(&a); return CF_ERR; }
    smp->x = (int16_t *)a.data; smp->count = a.count; smp->s = S;
    return CF_OK;
}
/* a TFRecord's one Example: x, S^3 x 4 int16 as bytes, and y */
static int cf__cosmo_read_tfrecord(const char *path, cf_cosmo_sample *smp) {
    cf_tfrecord r;
    const unsigned char *rec = NULL, *xb, *more;
    size_t rlen = 0, xlen, ny = 0, mlen;
    int rc, next;
    if (cf_tfrecord_open(&r, path)) return CF_ERR;
    rc = cf_tfrecord_next(&r, &rec, &rlen);
    if (rc == 0) { cf_tfrecord_close(&r); return cf_fail("%s: no record in file", path); }
    if (rc < 0) { cf_tfrecord_close(&r); return CF_ERR; }
    next = cf_tfrecord_next(&r, &more, &mlen);   /* one Example per file, as the reference's prepare step writes them */
    if (next) {
        cf_tfrecord_close(&r);
        return next < 0 ? CF_ERR : cf_fail("%s: holds more than one record (a CosmoFlow file holds one sample)", path);
    }
    if (cf_example_bytes(rec, rlen, "x", &xb, &xlen) || cf_example_floats(rec, rlen, "y", smp->y, 8, &ny)) {
        char keep[sizeof cf__err]; memcpy(keep, cf__err, sizeof keep);
        cf_tfrecord_close(&r);
        return cf_fail("%s: %s", path, keep);
    }
    if (xlen % 2 || cf__cosmo_shape(path, xlen / 2, &smp->s)) {
        cf_tfrecord_close(&r);
        return xlen % 2 ? cf_fail("%s: x has an odd number of bytes", path) : CF_ERR;
    }
    if (ny < 1) { cf_tfrecord_close(&r); return cf_fail("%s: y is empty", path); }
    smp->ny = (int)ny;
    smp->count = xlen / 2;
    smp->x = CF__NEW(int16_t, smp->count);
    if (!smp->x) { cf_tfrecord_close(&r); return CF_ERR; }
    memcpy(smp->x, xb, xlen);   /* little-endian int16, as on every supported host */
    cf_tfrecord_close(&r);
    return CF_OK;
}
CFDEF int cf_cosmo_read(const char *path, cf_cosmo_sample *smp) {
    if (!path || !smp) return cf_fail("cf_cosmo_read: the path and the sample must not be NULL");
    memset(smp, 0, sizeof *smp);
    smp->c = 4;
    return cf__ends_with(path, "_data.npy") ? cf__cosmo_read_npy(path, 0, 0, 0, smp)
           : cf__cosmo_read_tfrecord(path, smp);
}
CFDEF int cf_cosmo_read_box(const char *path, int axis, int first, int n, cf_cosmo_sample *smp) {
    int16_t *box;
    size_t run, outer, inner, i, S;
    if (!path || !smp) return cf_fail("cf_cosmo_read_box: the path and the sample must not be NULL");
    memset(smp, 0, sizeof *smp);
    smp->c = 4;
    if (axis < 0 || axis > 2 || first < 0 || n < 1)
        return cf_fail("cf_cosmo_read_box: axis %d (0, 1 or 2), first %d (>= 0), n %d (>= 1)", axis, first, n);
    if (cf__ends_with(path, "_data.npy")) return cf__cosmo_read_npy(path, axis, first, n, smp);
    /* a record is framed and maybe compressed: read whole, the box kept */
    if (cf__cosmo_read_tfrecord(path, smp)) return CF_ERR;
    S = (size_t)smp->s;
    if ((size_t)first + (size_t)n > S) {
        cf_cosmo_free(smp);
        return cf_fail("%s: no planes [%d, %d) in a sample of side %zu", path, first, first + n, S);
    }
    outer = axis == 0 ? 1 : axis == 1 ? S : S * S;
    inner = (axis == 0 ? S * S : axis == 1 ? S : 1) * 4;
    run = (size_t)n * inner;
    if (!(box = CF__NEW(int16_t, outer * run))) { cf_cosmo_free(smp); return CF_ERR; }
    for (i = 0; i < outer; i++) memcpy(box + i * run, smp->x + (i * S + (size_t)first) * inner, run * sizeof(int16_t));
    CF_FREE(smp->x);
    smp->x = box; smp->count = outer * run;
    return CF_OK;
}
CFDEF void cf_cosmo_free(cf_cosmo_sample *smp) { if (!smp) return; CF_FREE(smp->x); memset(smp, 0, sizeof *smp); }

CFDEF int cf_climate_read(const char *path, cf_climate_sample *smp, int n_classes) {
    cf_array a, lab;
    const char *base = path ? strrchr(path, '/') : NULL;
    char *lp;
    size_t dirlen, k;
    if (!path || !smp) return cf_fail("cf_climate_read: the path and the sample must not be NULL");
    memset(smp, 0, sizeof *smp);
    base = base ? base + 1 : path;
    if (strncmp(base, "data-", 5) || !cf__ends_with(base, ".npy"))
        return cf_fail("%s: not a DeepCAM data-*.npy file", path);
    if (cf_npy_read(path, &a)) return CF_ERR;
    if (a.dtype != CF_F32 || a.ndim != 3 || a.shape[0] < 1 || a.shape[1] < 1 || a.shape[2] < 1) {
        cf_array_free(&a);
        return cf_fail("%s: expected float32 of shape (H, W, C), channels last", path);
    }
    for (k = 0; k < a.count; k++)
        if (!isfinite(((float *)a.data)[k])) {
            cf_array_free(&a);
            return cf_fail("%s: value %zu is not finite", path, k);
        }
    dirlen = (size_t)(base - path);
    lp = CF__NEW(char, strlen(path) + 2);
    if (!lp) { cf_array_free(&a); return CF_ERR; }
    memcpy(lp, path, dirlen);
    strcpy(lp + dirlen, "label-");
    strcat(lp, base + 5);
    if (cf_npy_read(lp, &lab)) { cf_array_free(&a); CF_FREE(lp); return CF_ERR; }
    if (lab.dtype != CF_F32 || lab.ndim != 2 || lab.shape[0] != a.shape[0] || lab.shape[1] != a.shape[1]) {
        int rc = cf_fail("%s: expected float32 labels of shape (%d, %d) like its data file", lp, (int)a.shape[0],
                         (int)a.shape[1]);
        cf_array_free(&a); cf_array_free(&lab); CF_FREE(lp);
        return rc;
    }
    for (k = 0; k < lab.count; k++) {
        float v = ((float *)lab.data)[k];
        if (!(v >= 0.0f && v < (float)n_classes) || v != (float)(int)v) {
            int rc = cf_fail("%s: label %g at pixel %zu is not a class id in [0, %d)", lp, v, k, n_classes);
            cf_array_free(&a); cf_array_free(&lab); CF_FREE(lp);
            return rc;
        }
    }
    smp->x = (float *)a.data; smp->y = (float *)lab.data;
    smp->h = (int)a.shape[0]; smp->w = (int)a.shape[1]; smp->c = (int)a.shape[2];
    CF_FREE(lp);
    return CF_OK;
}

CFDEF void cf_climate_free(cf_climate_sample *smp) {
    if (!smp) return;
    CF_FREE(smp->x);
    CF_FREE(smp->y);
    memset(smp, 0, sizeof *smp);
}

static int cf__stats_pair(const char *dir, float *minval, float *maxval, int C) {
    static const char *names[2] = {"stats_minval.npy", "stats_maxval.npy"};
    int i;
    for (i = 0; i < 2; i++) {
        char path[4096];
        float *d = NULL, *dst = i ? maxval : minval;
        size_t n = 0;
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        if (cf_npy_read_f32(path, &d, &n)) return CF_ERR;
        if (n != (size_t)C) {
            CF_FREE(d);
            return cf_fail("%s: %zu values, the model has %d input channels", path, n, C);
        }
        memcpy(dst, d, sizeof(float) * C);
        CF_FREE(d);
        for (n = 0; n < (size_t)C; n++)
            if (!isfinite(dst[n]))
                return cf_fail("%s: channel %zu is %g, not a finite number", path, n, (double)dst[n]);
    }
    for (i = 0; i < C; i++)   /* a constant channel (min = max) is normalized to 0; min > max is a broken file */
        if (minval[i] > maxval[i])
            return cf_fail("%s/stats_minval.npy: channel %d's minimum %g is above its maximum %g in stats_maxval.npy "
                           "(swapped files?)", dir, i, (double)minval[i], (double)maxval[i]);
    return CF_OK;
}

CFDEF int cf_climate_stats(const char *dir, float *minval, float *maxval, int C) {
    char path[4200], parent[4096];
    size_t n;
    struct stat st;
    if (!dir || !minval || !maxval || C < 1)
        return cf_fail("cf_climate_stats: dir, minval and maxval must not be NULL, C at least 1");
    snprintf(path, sizeof path, "%s/stats_minval.npy", dir);
    if (stat(path, &st) == 0) return cf__stats_pair(dir, minval, maxval, C);
    snprintf(parent, sizeof parent, "%s", dir);
    n = strlen(parent);
    while (n > 1 && parent[n - 1] == '/') parent[--n] = 0;
    snprintf(path, sizeof path, "%s/../stats_minval.npy", parent);
    if (n + 4 < sizeof parent && stat(path, &st) == 0) {
        strcat(parent, "/..");
        return cf__stats_pair(parent, minval, maxval, C);
    }
    return cf_fail("%s: no stats_minval.npy / stats_maxval.npy here or in the parent directory "
                   "(cf-convert h52npy writes them from stats.h5)", dir);
}


#endif /* CF_NO_FILES */

/* ================================================================ 13. fast paths
   Faster ways to compute some of section 3's operations.  Each is registered as an
   alternative for one operation, in section 4's tables: its kind, the condition under which
   it applies (written once, here) and its code.  One dispatcher per operation (section 4)
   runs the first enabled path whose condition holds, else the reference.  Contents:
     pointwise, tiles, direct (AVX2 and AVX-512), the fp32 GEMM on AVX-512 (kind "gemm": the
     pointwise convolutions, the dense ones on rows of im2col made as packed, and every fp32
     GEMM where the BLAS runs no AVX-512 kernels), the backward-weights on rows of positions
     (fp32 and bf16), bf16 (its GEMM, in vdpbf16ps, FMA or AMX tiles, 16-bit tensors, the
     direct kernel, the tiles, the im2col paths), pooling, depthwise, max pooling in pairs,
     the transposed convolution's loops with another GEMM, the fused backward of act + max pool,
     the bias gradient's sums
   Why each path is faster, with its measurements, is in docs/performance.md.  CF_REFERENCE
   leaves every path out. */
/* ---- what the paths share (with the registry of section 4): the bf16 GEMM's call, a bias and
   activation rounded as it stores */
/* op(B) made as it is packed instead of read from memory: the im2col of one sample's x, its
   rows the sum's index (channel and tap), its columns the output positions, each row made by
   cf__im2col_row into a row buffer of the thread's.  The packed values, and so the sums, are
   those of the im2col buffer: the same bits without the buffer (K x P floats, which the
   references make in tiles of the workspace). */
typedef struct { const float *x; cf_shape in, out; const cf_geom *g; } cf__col_src;
/* a forward convolution's bias (per row of C, or NULL) and activation, applied as C is stored */
typedef struct { const float *b; int act; float slope; } cf__gemm_out;
/* One call of section 13's GEMMs, the bf16 one and the fp32 one (kind gemm): C (M x N) = beta
   C + op(A) op(B), op(A) M x K, op(B) K x N, cf_sgemm's arguments in cf_sgemm's order (alpha
   = 1, beta 0 or 1), then what they add.  Both: col, op(B) made from x as it is packed (B and
   ldb unused; NULL: op(B) read from B).  The bf16 GEMM: rnd, C stored rounded to bf16;
   halves, which of A, B and C are stored in 16 bits (CF__GEMM_HALF_*).  The fp32 GEMM: out,
   NULL or C = act(sum + b[row]) as it is stored (beta 0).  A GEMM leaves the other's fields
   zero.  A task of the bf16 GEMM (cf__gemm_bf16_task) is the same struct with A and C moved
   to the task's first row and M its rows. */
typedef struct {
    int tA, tB, M, N, K;
    const float *A;
    int lda;
    const float *B;
    int ldb;
    float beta;
    float *C;
    int ldc;
    int rnd;
    const cf__col_src *col;
    int halves;
    const cf__gemm_out *out;
} cf__gemm_call;
/* the bf16 GEMM on operands stored in 16 bits (CF__GEMM_HALF_*) or not yet rounded, with its
   buffers in gws (one thread's: cf__gemm_bf16_thread_floats; the threads': cf__gemm_bf16_ws_floats) */
static void cf__gemm_halves(const cf__gemm_call *gemm, float *gws);
#ifndef CF_REFERENCE
/* cf__bias_act with each row then rounded to bf16 while in cache (rnd: a bf16 network's output) */
static void cf__bias_act_p(float *y, const float *b, int rows, size_t n, size_t stride, int act, float slope, int rnd) {
    int r;
    CF__OMP(omp parallel for schedule(static) if(rows * n > 32768))
    for (r = 0; r < rows; r++) {
        float *yr = y + (size_t)r * stride;
        cf__bias_act_row(yr, b ? b[r] : 0.0f, n, act, slope);
        if (rnd) cf__round_run(yr, n);
    }
}
#endif
#ifndef CF_REFERENCE
static int cf__nthreads(void) {
#ifdef _OPENMP
    return omp_in_parallel() ? 1 : omp_get_max_threads();
#else
    return 1;
#endif
}
static int cf__thread_id(void) {
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}
static size_t cf__positions(cf_shape s) { return (size_t)s.d * s.h * s.w; }

#ifdef CF__AVX512   /* (its callers: the bf16 paths, kind gemm's) */
/* ---- section 3's im2col loops (cf_ref_conv_*) with another GEMM as an argument: the bf16
   paths pass the bf16 GEMM, kind gemm beside a BLAS without AVX-512 kernels its own.  The
   same loops, so the same sums as the reference's but for the GEMM's. */
/* y = w col + b, tile by tile (no activation: the caller's) */
static void cf__im2col_gemm_forward(float *y, const float *x, const float *w, const float *b, int B, cf_shape in,
                                    cf_shape out, const cf_geom *g, int groups, float *ws, size_t ws_floats,
                                    cf__gemm_fn gemm) {
    int Cg = in.c / groups, OCg = out.c / groups, K = Cg * g->k[0] * g->k[1] * g->k[2], bi, gi;
    size_t P = (size_t)out.d * out.h * out.w, in_sz = cf_shape_size(in), tile = cf__tile((size_t)K, P, ws_floats), p0;
    for (bi = 0; bi < B; bi++) {
        float *yb = y + (size_t)bi * out.c * P;
        for (p0 = 0; p0 < P; p0 += tile) {
            size_t n = P - p0 < tile ? P - p0 : tile;
            for (gi = 0; gi < groups; gi++) {
                cf__im2col(ws, x + bi * in_sz + (size_t)gi * Cg * in.d * in.h * in.w, Cg, in, out, g, p0, n);
                gemm(0, 0, OCg, (int)n, K, w + (size_t)gi * OCg * K, K, ws, (int)n, 0.0f,
                     yb + (size_t)gi * OCg * P + p0, (int)P);
            }
            cf__bias_act(yb + p0, b, out.c, n, P, CF_ACT_LINEAR, 0.0f);
        }
    }
}
/* dw += dy col^T (db: the caller's) */
static void cf__im2col_gemm_backward_weights(float *dw, const float *dy, const float *x, int B, cf_shape in,
                                             cf_shape out, const cf_geom *g, int groups, float *ws, size_t ws_floats,
                                             cf__gemm_fn gemm) {
    int Cg = in.c / groups, OCg = out.c / groups, K = Cg * g->k[0] * g->k[1] * g->k[2], bi, gi;
    size_t P = (size_t)out.d * out.h * out.w, in_sz = cf_shape_size(in), tile = cf__tile((size_t)K, P, ws_floats), p0;
    for (bi = 0; bi < B; bi++)
        for (gi = 0; gi < groups; gi++) {
            const float *xg = x + bi * in_sz + (size_t)gi * Cg * in.d * in.h * in.w;
            const float *dyg = dy + (size_t)bi * out.c * P + (size_t)gi * OCg * P;
            for (p0 = 0; p0 < P; p0 += tile) {   /* col is recomputed here, not kept from forward */
                size_t n = P - p0 < tile ? P - p0 : tile;
                cf__im2col(ws, xg, Cg, in, out, g, p0, n);
                gemm(0, 1, OCg, K, (int)n, dyg + p0, (int)P, ws, (int)n, 1.0f, dw + (size_t)gi * OCg * K, K);
            }
        }
}
/* dx += col2im(w^T dy) */
static void cf__im2col_gemm_backward_data(float *dx, const float *dy, const float *w, int B, cf_shape in,
                                          cf_shape out, const cf_geom *g, int groups, float *ws, size_t ws_floats,
                                          cf__gemm_fn gemm) {
    int Cg = in.c / groups, OCg = out.c / groups, K = Cg * g->k[0] * g->k[1] * g->k[2], bi, gi;
    size_t P = (size_t)out.d * out.h * out.w, in_sz = cf_shape_size(in), tile = cf__tile((size_t)K, P, ws_floats), p0;
    for (bi = 0; bi < B; bi++)
        for (gi = 0; gi < groups; gi++) {
            float *dxg = dx + bi * in_sz + (size_t)gi * Cg * in.d * in.h * in.w;
            const float *dyg = dy + (size_t)bi * out.c * P + (size_t)gi * OCg * P, *wg = w + (size_t)gi * OCg * K;
            for (p0 = 0; p0 < P; p0 += tile) {
                size_t n = P - p0 < tile ? P - p0 : tile;
                gemm(1, 0, K, (int)n, OCg, wg, K, dyg + p0, (int)P, 0.0f, ws, (int)n);
                cf__col2im(dxg, ws, Cg, in, out, g, p0, n);
            }
        }
}
#endif

/* ---- pointwise: a 1x1x1 kernel, stride 1, no padding, where im2col(x) is x itself.
   Per sample and group: y (OCg, P) = w (OCg, Cg) x x (Cg, P); dw (OCg, Cg) += dy (OCg, P) x
   x^T (P, Cg); dx (Cg, P) += w^T (Cg, OCg) x dy (OCg, P). */
static int cf__pointwise_applies(const cf__conv_call *c) {
    int a;
    for (a = 0; a < 3; a++) if (c->g->k[a] != 1 || c->g->s[a] != 1 || c->g->pb[a] || c->g->pa[a]) return 0;
    return 1;
}
/* rnd: the bias and activation pass rounds the output to bf16 as it stores it */
static void cf__pointwise_fwd_with(const cf__conv_call *c, cf__gemm_fn gemm, int rnd) {
    int Cg = c->in.c / c->groups, OCg = c->out.c / c->groups, bi, gi;
    size_t P = cf__positions(c->out), in_sz = cf_shape_size(c->in);
    for (bi = 0; bi < c->B; bi++) {
        float *yb = c->y + (size_t)bi * c->out.c * P;
        for (gi = 0; gi < c->groups; gi++)
            gemm(0, 0, OCg, (int)P, Cg, c->w + (size_t)gi * OCg * Cg, Cg, c->x + bi * in_sz + (size_t)gi * Cg * P,
                 (int)P, 0.0f, yb + (size_t)gi * OCg * P, (int)P);
        cf__bias_act_p(yb, c->b, c->out.c, P, P, c->act, c->slope, rnd);
    }
}
static void cf__pointwise_bww_with(const cf__conv_call *c, cf__gemm_fn gemm) {
    int Cg = c->in.c / c->groups, OCg = c->out.c / c->groups, bi, gi;
    size_t P = cf__positions(c->out), in_sz = cf_shape_size(c->in);
    for (bi = 0; bi < c->B; bi++)
        for (gi = 0; gi < c->groups; gi++)
            gemm(0, 1, OCg, Cg, (int)P, c->dy + (size_t)bi * c->out.c * P + (size_t)gi * OCg * P, (int)P,
                 c->x + bi * in_sz + (size_t)gi * Cg * P, (int)P, 1.0f, c->dw + (size_t)gi * OCg * Cg, Cg);
}
static void cf__pointwise_bwd_with(const cf__conv_call *c, cf__gemm_fn gemm) {
    int Cg = c->in.c / c->groups, OCg = c->out.c / c->groups, bi, gi;
    size_t P = cf__positions(c->out), in_sz = cf_shape_size(c->in);
    for (bi = 0; bi < c->B; bi++)
        for (gi = 0; gi < c->groups; gi++)
            gemm(1, 0, Cg, (int)P, OCg, c->w + (size_t)gi * OCg * Cg, Cg,
                 c->dy + (size_t)bi * c->out.c * P + (size_t)gi * OCg * P, (int)P, c->dx_store ? 0.0f : 1.0f,
                 c->dx + bi * in_sz + (size_t)gi * Cg * P, (int)P);
}
static void cf__pointwise_fwd(const cf__conv_call *c) { cf__pointwise_fwd_with(c, cf__sgemm_fp32, 0); }
static void cf__pointwise_bww(const cf__conv_call *c) { cf__pointwise_bww_with(c, cf__sgemm_fp32); }
static void cf__pointwise_bwd(const cf__conv_call *c) { cf__pointwise_bwd_with(c, cf__sgemm_fp32); }

/* ---- per-thread tiles.  A large convolution is cut into tiles of output positions that the
   threads take whole: each builds its own im2col tile, small enough to stay in its cache, and
   runs a single-threaded sgemm on it (a BLAS called inside an OpenMP parallel region runs on
   the calling thread: OpenBLAS's OpenMP build, MKL and BLIS do).  One big threaded sgemm
   would read its im2col matrix from memory and, with few filters, split badly between
   threads.  Only groups = 1, and only with at least 2 tiles per thread. */
static size_t cf__gemm_bf16_thread_floats(void);
#define CF__TILE_FLOATS ((size_t)1 << 20)   /* forward: K x tile about 4 MiB, at least 1024 columns */
#define CF__BWW_TILE 256                    /* backward-weights: columns per tile */

/* The forward tiling of P positions with K im2col rows: the tile's columns, and the number
   of tiles, or 0 when there are fewer than 2 per thread or ws_floats cannot hold one im2col
   tile per thread. */
static long cf__fwd_tiles(int K, size_t P, size_t ws_floats, size_t *tile) {
    int nth = cf__nthreads();
    long ntiles;
    *tile = CF__TILE_FLOATS / (size_t)K;
    if (*tile < 1024) *tile = 1024;
    ntiles = (long)((P + *tile - 1) / *tile);
    return ntiles < 2 * nth || (size_t)nth * K * *tile > ws_floats ? 0 : ntiles;
}
static int cf__kvol(const cf_geom *g) { return g->k[0] * g->k[1] * g->k[2]; }
static void cf__tile_im2col(float *col, const float *x, int C, cf_shape in, cf_shape out, const cf_geom *g, size_t p0,
                            size_t n);

/* Sample bi of the forward convolution f:  y (OC, P) = beta*y + w (OC, K) x im2col(x) (K, P),
   then bias and act per tile (and rnd: rounding to bf16), the tiles in f's workspace.  Tiles
   write disjoint columns of y, so any thread may take any tile.  gws: the bf16 GEMM with each
   thread's buffers there (cf__gemm_halves), for a y stored in 16 bits (f->half: no bias, no
   activation, rounded as the GEMM stores) or an x not yet rounded (the GEMM's packing rounds
   it, section 9, halves). */
static void cf__conv_tiles(const cf__conv_call *f, int bi, float beta, cf__gemm_fn gemm, int rnd, float *gws) {
    cf_shape in = f->in, out = f->out;
    const cf_geom *g = f->g;
    float *y = cf__elt(f->y, f->half, (size_t)bi * cf_shape_size(out)), *ws = f->ws, slope = f->slope;
    const float *x = f->x + (size_t)bi * cf_shape_size(in), *w = f->w, *b = f->b;
    int y_half = f->half, act = f->act, K = in.c * cf__kvol(g);
    size_t P = cf__positions(out), tile;
    long ntiles = cf__fwd_tiles(K, P, f->ws_floats, &tile), t;
    CF__OMP(omp parallel num_threads(cf__nthreads()))
    {
        float *col = ws + (size_t)cf__thread_id() * K * tile;
        CF__OMP(omp for schedule(dynamic, 1))
        for (t = 0; t < ntiles; t++) {
            size_t p0 = (size_t)t * tile, n = P - p0 < tile ? P - p0 : tile;
            cf__tile_im2col(col, x, in.c, in, out, g, p0, n);
            if (gws) {
                cf__gemm_call yg = {0, 0, out.c, (int)n, K, w, K, col, (int)n, beta, cf__elt(y, y_half, p0),
                                    (int)P, y_half, NULL, y_half ? CF__GEMM_HALF_C : 0, NULL};
                cf__gemm_halves(&yg, gws + (size_t)cf__thread_id() * cf__gemm_bf16_thread_floats());
            } else gemm(0, 0, out.c, (int)n, K, w, K, col, (int)n, beta, y + p0, (int)P);
            if (!y_half && (b || act != CF_ACT_LINEAR || rnd)) cf__bias_act_p(y + p0, b, out.c, n, P, act, slope, rnd);
        }
    }
}
static int cf__tiles_fwd_applies(const cf__conv_call *c) {
    size_t tile;
    return c->groups == 1 && cf__fwd_tiles(c->in.c * cf__kvol(c->g), cf__positions(c->out), c->ws_floats, &tile) > 0;
}
/* the workspace the tiles take (gws: the GEMM's buffers start there) */
static size_t cf__fwd_tiles_floats(const cf__conv_call *c) {
    size_t tile;
    int K = c->in.c * cf__kvol(c->g);
    cf__fwd_tiles(K, cf__positions(c->out), c->ws_floats, &tile);
    return (size_t)cf__nthreads() * K * tile;
}
static void cf__tiles_fwd_with(const cf__conv_call *c, cf__gemm_fn gemm, int rnd) {
    float *gws = c->half || c->x_raw ? c->ws + cf__fwd_tiles_floats(c) : NULL;
    int bi;
    for (bi = 0; bi < c->B; bi++) cf__conv_tiles(c, bi, 0.0f, gemm, rnd, gws);
}
static void cf__tiles_fwd(const cf__conv_call *c) { cf__tiles_fwd_with(c, cf__sgemm_tiles, 0); }

/* Backward-weights:  dw (OC, K) += dy (OC, P) x im2col(x)^T (P, K).  Thread 0 adds into dw,
   the others into zeroed copies after their tiles in ws, summed into dw in thread order at the
   end; tiles are dealt statically, so the result is the same in every run. */
static int cf__bww_fits(int K, size_t P, int OC, size_t ws_floats) {
    int nth = cf__nthreads();
    long ntiles = (long)((P + CF__BWW_TILE - 1) / CF__BWW_TILE);
    return ntiles >= 2 * nth && (size_t)nth * K * CF__BWW_TILE + (size_t)(nth - 1) * OC * K <= ws_floats;
}
/* (gws, dy_half: as cf__conv_tiles's, dy stored in 16 bits) */
static void cf__conv_bww_tiles(float *dw, const float *dy, int dy_half, const float *x, cf_shape in, cf_shape out,
                               const cf_geom *g, float *ws, cf__gemm_fn gemm, float *gws) {
    int K = in.c * cf__kvol(g), nth = cf__nthreads();
    size_t P = cf__positions(out), tile = CF__BWW_TILE, wsz = (size_t)out.c * K, i;
    long ntiles = (long)((P + tile - 1) / tile), t;
    float *acc = ws + (size_t)nth * K * tile;
    if (nth > 1) memset(acc, 0, sizeof(float) * (nth - 1) * wsz);
    CF__OMP(omp parallel num_threads(nth))
    {
        int me = cf__thread_id();
        float *col = ws + (size_t)me * K * tile, *a = me ? acc + (size_t)(me - 1) * wsz : dw;
        CF__OMP(omp for schedule(static))
        for (t = 0; t < ntiles; t++) {
            size_t p0 = (size_t)t * tile, n = P - p0 < tile ? P - p0 : tile;
            cf__tile_im2col(col, x, in.c, in, out, g, p0, n);
            if (gws) {
                cf__gemm_call dwg = {0, 1, out.c, K, (int)n, cf__elt(dy, dy_half, p0), (int)P, col, (int)n, 1.0f,
                                     a, K, 0, NULL, dy_half ? CF__GEMM_HALF_A : 0, NULL};
                cf__gemm_halves(&dwg, gws + (size_t)me * cf__gemm_bf16_thread_floats());
            } else gemm(0, 1, out.c, K, (int)n, dy + p0, (int)P, col, (int)n, 1.0f, a, K);
        }
    }
    if (nth > 1) {
        CF__OMP(omp parallel for schedule(static))
        for (i = 0; i < wsz; i++) {
            int th;
            for (th = 1; th < nth; th++) dw[i] += acc[(size_t)(th - 1) * wsz + i];
        }
    }
}
static int cf__tiles_bww_applies(const cf__conv_call *c) {
    return c->groups == 1 && cf__bww_fits(c->in.c * cf__kvol(c->g), cf__positions(c->out), c->out.c, c->ws_floats);
}
/* the workspace the backward-weights tiles take: the im2col tiles, the threads' dw after thread 0 */
static size_t cf__bww_tiles_floats(const cf__conv_call *c) {
    size_t nth = (size_t)cf__nthreads(), K = (size_t)c->in.c * cf__kvol(c->g);
    return nth * K * CF__BWW_TILE + (nth - 1) * c->out.c * K;
}
static void cf__tiles_bww_with(const cf__conv_call *c, cf__gemm_fn gemm) {
    float *gws = c->half || c->x_raw ? c->ws + cf__bww_tiles_floats(c) : NULL;
    int bi;
    for (bi = 0; bi < c->B; bi++)
        cf__conv_bww_tiles(c->dw, cf__elt(c->dy, c->half, (size_t)bi * cf_shape_size(c->out)), c->half,
                           c->x + (size_t)bi * cf_shape_size(c->in), c->in, c->out, c->g, c->ws, gemm, gws);
}
static void cf__tiles_bww(const cf__conv_call *c) { cf__tiles_bww_with(c, cf__sgemm_tiles); }

/* Backward-data of a stride-1 convolution as a forward convolution: dx is the convolution of
   dy with the kernel flipped on every axis and its two channel axes swapped, w' (C, OC, KD,
   KH, KW), padded (k-1)*dil - pb before and (k-1)*dil - pa after (docs/math.md,
   "Backward-data as a convolution").  Its tiles write disjoint parts of dx, where col2im's
   scatter-add would have threads adding into the same elements.  w' goes at the front of
   the workspace.  Returns 0 when it does not apply: a stride or a padding beyond the reach. */
static int cf__flipped_geom(const cf_geom *g, cf_geom *gt) {
    int a;
    *gt = *g;
    for (a = 0; a < 3; a++) {
        gt->pb[a] = (g->k[a] - 1) * g->dil[a] - g->pb[a];
        gt->pa[a] = (g->k[a] - 1) * g->dil[a] - g->pa[a];
        if (g->s[a] != 1 || gt->pb[a] < 0 || gt->pa[a] < 0) return 0;
    }
    return 1;
}
/* w'[c][oc][k] = w[oc][c][kvol-1-k]: flipping every axis of a C-order kernel reverses its flat index */
static void cf__flip_kernel(float *wt, const float *w, int C, int OC, int kvol) {
    int oc, c, k;
    for (oc = 0; oc < OC; oc++)
        for (c = 0; c < C; c++)
            for (k = 0; k < kvol; k++)
                wt[((size_t)c * OC + oc) * kvol + k] = w[((size_t)oc * C + c) * kvol + kvol - 1 - k];
}
static size_t cf__flipped_floats(const cf__conv_call *c) { return (size_t)c->in.c * c->out.c * cf__kvol(c->g); }
/* c's backward-data as the forward convolution of dy into dx (fp32 both) with the flipped
   kernel, w' at the front of c's workspace (cf__flip_kernel), the geometry gt
   (cf__flipped_geom); the rest of the workspace is the forward's */
static cf__conv_call cf__flipped_call(const cf__conv_call *c, const cf_geom *gt) {
    cf__conv_call f = *c;
    size_t wsz = cf__flipped_floats(c);
    f.y = c->dx; f.x = c->dy; f.w = c->ws; f.b = NULL;
    f.act = CF_ACT_LINEAR; f.slope = 0.0f;
    f.in = c->out; f.out = c->in; f.g = gt;
    f.ws = c->ws + wsz; f.ws_floats = c->ws_floats - wsz;
    f.half = f.x_half = 0;
    return f;
}
static int cf__tiles_bwd_applies(const cf__conv_call *c) {
    cf_geom gt;
    size_t wsz = cf__flipped_floats(c), tile;
    return c->groups == 1 && cf__flipped_geom(c->g, &gt) && wsz < c->ws_floats &&
           cf__fwd_tiles(c->out.c * cf__kvol(c->g), cf__positions(c->in), c->ws_floats - wsz, &tile) > 0;
}
static void cf__tiles_bwd_with(const cf__conv_call *c, cf__gemm_fn gemm, int rnd) {
    cf_geom gt;
    cf__conv_call f;
    int bi;
    cf__flipped_geom(c->g, &gt);
    cf__flip_kernel(c->ws, c->w, c->in.c, c->out.c, cf__kvol(c->g));
    f = cf__flipped_call(c, &gt);
    for (bi = 0; bi < c->B; bi++) cf__conv_tiles(&f, bi, c->dx_store ? 0.0f : 1.0f, gemm, rnd, NULL);
}
static void cf__tiles_bwd(const cf__conv_call *c) { cf__tiles_bwd_with(c, cf__sgemm_tiles, 0); }

/* ---- a 2-D stride-1 convolution as one GEMM per tap (kind "taps"; DeepCAM's ASPP:
   2048 -> 256 channels, 3x3 at dilation 6, 12 and 18 on 48x72).  Tap (kh, kw) adds
   w[:, :, kh, kw] (OC, C) x x shifted by (kh dil - pb, kw dil - pb) to the output rows whose
   input row lies inside: a GEMM with K = C that reads x itself (kw's shift 0 and the same
   width) or a copy of x shifted along the width, zero where the shift leaves the row.  im2col
   would write K = 9 C rows of which the padding's are zeros (at dilation 18 on 48 rows, a
   quarter of the rows and a sixth of the columns), in tiles of 455 columns in the network's
   workspace, each a GEMM that packs the weights again; the tiles path needs 5x that workspace.
   Channels in chunks of Cc so the repacked weights and the shifted copies fit the workspace:
   ws holds kvol x OC x Cc weights (or their gradients), then one copy per shifted kw.  The sum
   goes over the chunks, then the taps (kh, kw), then a chunk's channels: another order than
   the reference's (within the GEMM's rounding), the same in every run and thread count.
   Reference -> taps, ms, alternated (bin/onednn-peer --layer 249 --precision fp32, 2 threads,
   the AMD EPYC host under load): dilation 18 forward 602-811 -> 426-544, backward-
   weights 607-684 -> 414-437; dilation 6 level within the host's noise (a small program
   timing both in one process: forward 514 / 512, backward-weights 468 / 417, medians of 3). */
static int cf__taps_shift(const cf__conv_call *c, int kw) { return kw * c->g->dil[2] - c->g->pb[2]; }
/* the copies a chunk needs: kw's whose shift is not 0, or all when the widths differ */
static int cf__taps_copies(const cf__conv_call *c) {
    int kw, n = 0;
    for (kw = 0; kw < c->g->k[2]; kw++) n += cf__taps_shift(c, kw) != 0 || c->in.w != c->out.w;
    return n;
}
/* the chunk of channels that fits c's workspace (0: not even 16, or C if fewer) */
static int cf__taps_chunk(const cf__conv_call *c) {
    size_t per = (size_t)c->g->k[1] * c->g->k[2] * c->out.c + (size_t)cf__taps_copies(c) * c->in.h * c->out.w;
    size_t cc = c->ws_floats / per;
    if (cc >= (size_t)c->in.c) return c->in.c;
    return cc >= 16 ? (int)(cc & ~(size_t)15) : 0;
}
static int cf__taps_applies(const cf__conv_call *c) {
    const cf_geom *g = c->g;
    return c->groups == 1 && c->in.d == 1 && c->out.d == 1 && g->k[0] == 1 && g->pb[0] == 0 && g->s[1] == 1 &&
           g->s[2] == 1 && g->k[1] * g->k[2] > 1 && c->in.c >= 64 && cf__taps_chunk(c) > 0;
}
/* x's channels c0 .. c0 + n of one sample, shifted along the width into the copies (one a kw
   that needs one, in.h rows of out.w each): xs[c][h][t] = x[c][h][t + shift], 0 outside */
static void cf__taps_shifted(float *xs, const float *x, const cf__conv_call *c, int c0, int n) {
    int H = c->in.h, W = c->in.w, OW = c->out.w, kw, j = 0;
    for (kw = 0; kw < c->g->k[2]; kw++) {
        int s = cf__taps_shift(c, kw), ch;
        float *to = xs + (size_t)j * n * H * OW;
        if (s == 0 && W == OW) continue;
        j++;
        CF__OMP(omp parallel for schedule(static))
        for (ch = 0; ch < n * H; ch++) {   /* (channel, row) pairs */
            const float *xr = x + ((size_t)c0 * H + ch) * W;
            float *r = to + (size_t)ch * OW;
            int lo = s < 0 ? -s : 0, hi = W - s < OW ? W - s : OW, t;
            if (hi < lo) hi = lo;
            for (t = 0; t < lo; t++) r[t] = 0.0f;
            if (hi > lo) memcpy(r + lo, xr + lo + s, sizeof(float) * (size_t)(hi - lo));
            for (t = hi; t < OW; t++) r[t] = 0.0f;
        }
    }
}
/* B operand of tap column kw in a chunk: x's channel c0 (row stride W) or its copy (stride OW) */
static const float *cf__taps_src(const float *xs, const float *x, const cf__conv_call *c, int c0, int n, int kw,
                                 int *width) {
    int k, j = 0;
    for (k = 0; k < kw; k++) j += cf__taps_shift(c, k) != 0 || c->in.w != c->out.w;
    *width = c->out.w;
    if (cf__taps_shift(c, kw) == 0 && c->in.w == c->out.w) {
        *width = c->in.w;
        return x + (size_t)c0 * c->in.h * c->in.w;
    }
    return xs + (size_t)j * n * c->in.h * c->out.w;
}
/* the output rows [*o0, *o1) whose tap row kh lies in the input; its first input row */
static int cf__taps_rows(const cf__conv_call *c, int kh, int *o0, int *o1) {
    int off = kh * c->g->dil[1] - c->g->pb[1];
    *o0 = off < 0 ? -off : 0;
    *o1 = c->in.h - off < c->out.h ? c->in.h - off : c->out.h;
    return off;
}
/* wr[k][oc][ch] = w[oc][c0 + ch][k] for ch < n (back = 1: w[oc][c0 + ch][k] += wr[k][oc][ch]) */
static void cf__taps_repack(float *wr, float *w, int OC, int C, int c0, int n, int kv, int back) {
    int oc;
    CF__OMP(omp parallel for schedule(static))
    for (oc = 0; oc < OC; oc++) {
        int ch, k;
        for (ch = 0; ch < n; ch++) {
            float *wc = w + ((size_t)oc * C + c0 + ch) * kv;
            for (k = 0; k < kv; k++) {
                float *r = wr + ((size_t)k * OC + oc) * n + ch;
                if (back) wc[k] += *r;
                else *r = wc[k];
            }
        }
    }
}
/* forward: y = act(sum over taps + b); backward-weights with dw: dw += the taps' products */
static void cf__taps_run(const cf__conv_call *c, cf__gemm_fn gemm, int bww) {
    const cf_geom *g = c->g;
    int KH = g->k[1], KW = g->k[2], kv = KH * KW, C = c->in.c, OC = c->out.c, Cc = cf__taps_chunk(c), bi, c0;
    size_t P = cf__positions(c->out), in_sz = cf_shape_size(c->in), OW = (size_t)c->out.w;
    float *wr = c->ws, *xs = c->ws + (size_t)kv * OC * Cc;
    for (bi = 0; bi < c->B; bi++) {
        const float *x = c->x + bi * in_sz;
        float *y = bww ? NULL : c->y + bi * (size_t)OC * P;
        const float *dy = bww ? c->dy + bi * (size_t)OC * P : NULL;
        if (!bww) memset(y, 0, sizeof(float) * OC * P);
        for (c0 = 0; c0 < C; c0 += Cc) {
            int n = C - c0 < Cc ? C - c0 : Cc, kh, kw;
            if (bww) memset(wr, 0, sizeof(float) * kv * OC * n);
            else
                cf__taps_repack(wr, (float *)c->w, OC, C, c0, n, kv, 0);
            cf__taps_shifted(xs, x, c, c0, n);
            for (kh = 0; kh < KH; kh++) {
                int o0, o1, off = cf__taps_rows(c, kh, &o0, &o1);
                if (o1 <= o0) continue;
                for (kw = 0; kw < KW; kw++) {
                    int width;
                    const float *src = cf__taps_src(xs, x, c, c0, n, kw, &width);
                    int ld = c->in.h * width, N = (o1 - o0) * (int)OW;
                    float *wk = wr + (size_t)(kh * KW + kw) * OC * n;
                    src += (size_t)(o0 + off) * width;
                    if (bww) gemm(0, 1, OC, n, N, dy + (size_t)o0 * OW, (int)P, src, ld, 1.0f, wk, n);
                    else gemm(0, 0, OC, N, n, wk, n, src, ld, 1.0f, y + (size_t)o0 * OW, (int)P);
                }
            }
            if (bww) cf__taps_repack(wr, c->dw, OC, C, c0, n, kv, 1);
        }
        if (!bww && (c->b || c->act != CF_ACT_LINEAR)) cf__bias_act_p(y, c->b, OC, P, P, c->act, c->slope, 0);
    }
}
static void cf__taps_fwd(const cf__conv_call *c) { cf__taps_run(c, cf__sgemm_tiles, 0); }
static void cf__taps_bww(const cf__conv_call *c) { cf__taps_run(c, cf__sgemm_tiles, 1); }

/* ---- direct convolution (no im2col) for a stride of 1 along the width.  With few input
   channels im2col + GEMM is slow: CosmoFlow's first layer (4 -> 32 channels, K = 108) would
   write a 900 MB im2col matrix per sample that the BLAS then packs again, for a GEMM of only
   32 rows.  Here each output row (od, oh) first gathers the input rows its taps read,
   zero-padded, into a small per-thread buffer R (cf__direct_rows: C x KD x KH rows); then
   blocks of 4 output channels x 2 vectors of positions are summed over all taps in 8 vector
   registers: per tap 2 vector loads and 4 broadcasts feed 8 multiply-adds.  Written with
   GCC/Clang vector types and compiled only where the target has AVX2 and FMA
   (-march=x86-64-v3 or native), with an AVX-512 instance chosen at run time. */
#ifdef CF__DIRECT   /* (section 4: what this build compiles in) */
#if defined(__clang__)
#define CF__CONTRACT                  /* clang fuses a += b * c into one FMA by default */
#else
#define CF__CONTRACT __attribute__((optimize("fp-contract=fast")))   /* GCC's ISO C mode does not */
#endif
typedef float cf__v8 __attribute__((vector_size(32)));
#include <immintrin.h>   /* (the bias gradient's sums: AVX2's conversions to double) */

/* ---- the bias gradient in vectors: cf__sum8's eight partial sums (value p of a channel into
   sum p mod 8, in double, in order of p) as the lanes of two 4-double vectors, four channels
   at a time (one channel's additions wait on each other: four chains in flight).  The same
   additions in the same order: the same bits as cf__bias_grad_p.  30 channels of 128^3
   positions, 2 threads on an Intel Xeon: dy in fp32 16-17 -> 10-11 ms, in 16 bits 33-35 -> 9
   (the loops convert and add one value at a time; cosmoflow.cfg's first conv's backward-weights
   62 -> 37 ms in bf16, docs/performance.md). */
/* 4 values of x from element i, in double */
static __m256d cf__load4_d(const float *x, int half, size_t i) {
    if (half) {   /* (a bf16 is a float's top half) */
        __m128i b = _mm_loadl_epi64((const __m128i *)(const void *)((const cf_bf16 *)(const void *)x + i));
        return _mm256_cvtps_pd(_mm_castsi128_ps(_mm_slli_epi32(_mm_cvtepu16_epi32(b), 16)));
    }
    return _mm256_cvtps_pd(_mm_loadu_ps(x + i));
}
static float cf__elt_value(const float *x, int half, size_t i) {
    return half ? cf_f32_from_bf16(((const cf_bf16 *)(const void *)x)[i]) : x[i];
}
/* cf__sum8's end: the eight sums so far (lo, hi), values p .. n of x from element from, their total */
static double cf__sum8_end(__m256d lo, __m256d hi, const float *x, int half, size_t from, size_t p, size_t n) {
    double s[8], t = 0.0;
    int j;
    _mm256_storeu_pd(s, lo); _mm256_storeu_pd(s + 4, hi);
    for (; p < n; p++) s[p % 8] += cf__elt_value(x, half, from + p);
    for (j = 0; j < 8; j++) t += s[j];
    return t;
}
/* sums[k] = cf__sum8 of the n values of x from element at + k stride, k < nk <= 4 (the lanes
   past nk read the last channel again) */
static void cf__sum8_4(double *sums, const float *x, int half, size_t at, size_t stride, int nk, size_t n) {
    __m256d l0 = _mm256_setzero_pd(), l1 = l0, l2 = l0, l3 = l0;   /* sums 0-3 */
    __m256d h0 = l0, h1 = l0, h2 = l0, h3 = l0;                       /* sums 4-7 */
#define CF__CHANNEL(k) (at + (size_t)((k) < nk ? (k) : nk - 1) * stride)   /* channel k's first value */
    size_t f0 = CF__CHANNEL(0), f1 = CF__CHANNEL(1), f2 = CF__CHANNEL(2), f3 = CF__CHANNEL(3), p;
#undef CF__CHANNEL
    for (p = 0; p + 8 <= n; p += 8) {   /* (named accumulators: in an array GCC kept them in memory) */
#define CF__ADD4(a, at) a = _mm256_add_pd(a, cf__load4_d(x, half, at))
        CF__ADD4(l0, f0 + p); CF__ADD4(h0, f0 + p + 4); CF__ADD4(l1, f1 + p); CF__ADD4(h1, f1 + p + 4);
        CF__ADD4(l2, f2 + p); CF__ADD4(h2, f2 + p + 4); CF__ADD4(l3, f3 + p); CF__ADD4(h3, f3 + p + 4);
#undef CF__ADD4
    }
    sums[0] = cf__sum8_end(l0, h0, x, half, f0, p, n);
    if (nk > 1) sums[1] = cf__sum8_end(l1, h1, x, half, f1, p, n);
    if (nk > 2) sums[2] = cf__sum8_end(l2, h2, x, half, f2, p, n);
    if (nk > 3) sums[3] = cf__sum8_end(l3, h3, x, half, f3, p, n);
}
/* cf__bias_grad_p's db += the sums over positions of dy (B, OC, P; half: stored in 16 bits) */
static void cf__bias_grad_v(float *db, const float *dy, int half, int B, int OC, size_t P) {
    int bi, o4;
    for (bi = 0; bi < B; bi++) {
        CF__OMP(omp parallel for schedule(static))
        for (o4 = 0; o4 < OC; o4 += 4) {
            double sums[4];
            int k, nk = OC - o4 < 4 ? OC - o4 : 4;
            cf__sum8_4(sums, dy, half, ((size_t)bi * OC + o4) * P, P, nk, P);
            for (k = 0; k < nk; k++) db[o4 + k] += (float)sums[k];
        }
    }
}

/* ---- the rows the direct kernels read (fp32 and bf16), kept from one output row to the next.
   Output row (od, oh) reads, for tap (kd, kh), input row (id, ih) of each channel; the next
   output row reads mostly the same input rows, so each thread keeps the rows it built in slots
   (id mod ND, ih mod NS), tagged with the (sample, id, ih) each holds, and hands the kernel a
   pointer a row.  A row is Wp 32-bit words, the input row from word pb on and zeros either
   side: one channel's floats (the fp32 kernel: cf__float_row) or two channels' bf16 values in
   each word (the bf16 kernels' pair rows: cf__pair_row).  The slots: ND = (KD - 1) dil + 1
   planes, the KD planes one output plane reads being distinct mod ND, of NS rows.  NS =
   (KH - 1) dil + 1 (the KH rows one output row reads, distinct mod NS): a 3-D convolution
   builds each row KD times, once for each output plane that reads it.  NS = in.h (whole
   planes: the next output plane reads KD - 1 of the same planes) builds it once a thread,
   where the workspace has room for every thread's slots and they are at most CF__RING_PLANES
   words a thread (2 MiB: cosmoflow.cfg's convs at 64^3 and below).  Its 32 -> 64 conv spent a
   fifth of its bf16 time building pair rows (2 channels' rows a plane apart, read from
   memory): forward 75-79 -> 71-72 ms, backward-data 82-84 -> 73-75; the fp32 kernel, which
   built every row it read for every output row, forward 123-126 -> 114-117 and backward-data
   132-135 -> 119-120 (Intel Xeon; docs/performance.md, "bf16" and "fp32"). */
typedef struct {
    uint32_t *rows;          /* [slot][c] rows of Wp, slot (id mod nd, ih mod ns) */
    long *tag;               /* [slot]: the (sample, id, ih) it holds, or -1 */
    uint32_t *zero;          /* a row of zeros: taps in the padding */
    const uint32_t **rp;     /* the rows one output row reads, [c][kd][kh] as the kernels */
    size_t Wp;               /* words a row */
    int nd, ns;              /* slots: nd planes of ns rows (cf__ring_ns) */
    int n, c2;               /* rows built a slot (channels, or pairs of them); rows a slot, c2 >= n (zeros past n) */
} cf__ring;
/* row c (a channel, or a pair of them) of input row (id, ih) of sample x (C channels, half:
   stored in 16 bits) into r, Wp words, from word pb on: cf__float_row or cf__pair_row */
typedef void (*cf__row_builder)(uint32_t *r, size_t Wp, const float *x, int half, int C, cf_shape in, int pb, int c,
                                int id, int ih);
#define CF__RING_PLANES ((size_t)1 << 19)
static size_t cf__r16(size_t n) { return (n + 15) / 16 * 16; }   /* 64-byte parts */
/* p moved up to the next 64 bytes (at most 15 floats): a vector of the packed op(B), a row of a
   tile or of the ring, within one cache line */
static float *cf__line_aligned(float *p) { return p + (16 - (uintptr_t)p / sizeof(float) % 16) % 16; }
static int cf__ring_nd(const cf_geom *g) { return (g->k[0] - 1) * g->dil[0] + 1; }
static int cf__ring_slots(const cf_geom *g) { return (g->k[1] - 1) * g->dil[1] + 1; }
/* uint32 of one thread's ring: rows of Wp, slots of ns rows of c2 each (n of them built) */
static size_t cf__ring_size(const cf_geom *g, size_t Wp, int ns, int n, int c2) {
    size_t slots = (size_t)cf__ring_nd(g) * ns;
    return cf__r16(slots * c2 * Wp) + cf__r16(Wp) + cf__r16(2 * slots) + cf__r16((size_t)2 * n * g->k[0] * g->k[1]);
}
/* NS for a workspace of room uint32 */
static int cf__ring_ns(cf_shape in, const cf_geom *g, size_t Wp, size_t room, int n, int c2) {
    size_t planes = cf__ring_size(g, Wp, in.h, n, c2);
    return g->k[0] > 1 && planes <= CF__RING_PLANES && planes * cf__nthreads() <= room ? in.h : cf__ring_slots(g);
}
/* the ring in ws (cf__ring_size uint32): its rows, a row of zeros, the tags (no row held yet), the pointers */
static cf__ring cf__ring_at(uint32_t *ws, const cf_geom *g, size_t Wp, int ns, int n, int c2) {
    cf__ring pr;
    size_t slots = (size_t)cf__ring_nd(g) * ns, k;
    pr.Wp = Wp; pr.nd = cf__ring_nd(g); pr.ns = ns; pr.n = n; pr.c2 = c2;
    pr.rows = ws; ws += cf__r16(slots * c2 * Wp);
    pr.zero = ws; ws += cf__r16(Wp);
    pr.tag = (long *)(void *)ws; ws += cf__r16(2 * slots);
    pr.rp = (const uint32_t **)(void *)ws;
    memset(pr.zero, 0, Wp * sizeof(uint32_t));
    if (c2 > n) memset(pr.rows, 0, slots * c2 * Wp * sizeof(uint32_t));   /* the rows past n: zeros */
    for (k = 0; k < slots; k++) pr.tag[k] = -1;
    return pr;
}
/* pr->rp for output row (od, oh) of sample bi (x, C channels), building the rows not in the ring */
static void cf__ring_for(cf__ring *pr, const float *x, int half, int bi, int C, cf_shape in, const cf_geom *g,
                         int od, int oh, cf__row_builder build) {
    size_t Wp = pr->Wp;
    int KD = g->k[0], KH = g->k[1], n = pr->n, kd, kh, c;
    for (kd = 0; kd < KD; kd++) {
        int id = od * g->s[0] - g->pb[0] + kd * g->dil[0];
        for (kh = 0; kh < KH; kh++) {
            int ih = oh * g->s[1] - g->pb[1] + kh * g->dil[1],
                slot = (id >= 0 ? id % pr->nd : 0) * pr->ns + (ih >= 0 ? ih % pr->ns : 0);
            long key = ((long)bi * in.d + id) * in.h + ih;
            if (id < 0 || id >= in.d || ih < 0 || ih >= in.h) {
                for (c = 0; c < n; c++) pr->rp[(c * KD + kd) * KH + kh] = pr->zero;
                continue;
            }
            if (pr->tag[slot] != key) {
                for (c = 0; c < n; c++)
                    build(pr->rows + ((size_t)slot * pr->c2 + c) * Wp, Wp, x, half, C, in, g->pb[2], c, id, ih);
                pr->tag[slot] = key;
            }
            for (c = 0; c < n; c++) pr->rp[(c * KD + kd) * KH + kh] = pr->rows + ((size_t)slot * pr->c2 + c) * Wp;
        }
    }
}
/* the fp32 kernel's row: channel c's input row (id, ih) of x (fp32: half 0) as floats at pb,
   zeros either side (C: the pair rows' argument) */
static void cf__float_row(uint32_t *r, size_t Wp, const float *x, int half, int C, cf_shape in, int pb, int c, int id,
                          int ih) {
    (void)half; (void)C;
    memset(r, 0, (size_t)pb * sizeof *r);
    memcpy(r + pb, x + (((size_t)c * in.d + id) * in.h + ih) * in.w, (size_t)in.w * sizeof(float));
    memset(r + pb + in.w, 0, (Wp - pb - (size_t)in.w) * sizeof *r);
}

#define CF__DIRECT_PART 128   /* terms of the direct kernel's sum summed apart, then added (below) */
#define CF__DIRECT_GROUP 8     /* blocks of output channels a part of the tap rows serves while in L1 (below) */
#define CF__DIRECT_OB_MOST 8  /* output channels a block of the direct kernel, at most (its two forms: 4, 8) */
/* What the direct kernel's output rows share: rows of y ystride apart, T tap rows (the ring's,
   cf__float_row's floats), KW taps along the width dil apart, the kernel w (OC, T KW) as
   cf__direct_pack lays it out in blocks of OB output channels, OW positions a row, the bias b
   (may be NULL), accumulate, the activation. */
typedef struct {
    size_t ystride;
    int T, KW, dil;
    const float *w;
    int OC, OW;
    const float *b;
    int accumulate, act;
    float slope;
} cf__direct_row_call;
/* One output row:  y[oc][w] (+)= sum over t < T, kw < KW of w[oc][t KW + kw] R[t][w + kw dil]
   for oc < OC, w < OW, tap row R[t] at rp[t] (readable up to OW rounded up to 32, plus (KW-1)
   dil).  accumulate = 0: y = act(sum + b[oc]); 1: y += sum.  The sum runs in parts of
   CF__DIRECT_PART / KW tap rows, each summed in registers and added to the parts before it:
   one running sum of 4096 terms (a backward-data of 64 channels and 4x4x4 taps) had 5x the
   rounding error of the reference's GEMM and failed the 2018 CosmoFlow's gradients against
   PyTorch on an AVX2 CPU (tests/torch_2018.py); in parts, the reference's error, for 3-7 % of
   the time (AVX2, one thread).  A part's tap rows serve a group of CF__DIRECT_GROUP blocks of OB
   channels before the next part (its rows stay in the L1 cache), each block's sum of the parts
   so far kept in s: the same sums in the same order as block by block (32 -> 64 at 64^3
   backward-data on an Intel Xeon 0.77-0.78 -> 0.84-0.89 of oneDNN).  Written once, with its two
   helpers, for a vector type VT of VW floats and instantiated twice below (one body, because
   the two instances must stay the same code). */
#define CF__DIRECT_FWD_ROW(NAME, VT, VW, OB, ATTR)                                                                    \
/* a whole block of 2 VW outputs v into row yr: loops of a constant length with act fixed, which                      \
   the compiler turns into vector code, cf__act_f inlined in each */                                                  \
ATTR static void NAME##_block(float *CF__RESTRICT yr, float *v, float bo, int accumulate, int act, float slope) {     \
    int j;                                                                                                            \
    if (accumulate) { for (j = 0; j < 2 * VW; j++) yr[j] += v[j]; return; }                                           \
    for (j = 0; j < 2 * VW; j++) v[j] += bo;                                                                          \
    switch (act) {                                                                                                    \
    case CF_ACT_RELU:                                                                                                 \
        for (j = 0; j < 2 * VW; j++) yr[j] = cf__act_f(v[j], CF_ACT_RELU, slope);                                     \
        break;                                                                                                        \
    case CF_ACT_LEAKY:                                                                                                \
        for (j = 0; j < 2 * VW; j++) yr[j] = cf__act_f(v[j], CF_ACT_LEAKY, slope);                                    \
        break;                                                                                                        \
    default: for (j = 0; j < 2 * VW; j++) yr[j] = cf__act_f(v[j], act, slope);                                        \
    }                                                                                                                 \
}                                                                                                                     \
/* one tap (its OB weights at wk, one a channel) for OB output rows: 2 vector loads of the                            \
   inputs at r (the ring's words, the floats' bits), OB broadcasts, 2 OB multiply-adds into a */                      \
ATTR static void NAME##_tap(VT a[OB][2], const float *CF__RESTRICT wk, const uint32_t *r) {                           \
    VT x0, x1;                                                                                                        \
    int o;                                                                                                            \
    memcpy(&x0, r, sizeof x0); memcpy(&x1, r + VW, sizeof x1);                                                        \
    for (o = 0; o < OB; o++) { float q = wk[o]; a[o][0] += q * x0; a[o][1] += q * x1; }                               \
}                                                                                                                     \
ATTR static void NAME(float *y, const uint32_t *const *rp, const cf__direct_row_call *d) {                            \
    size_t ystride = d->ystride;                                                                                      \
    int T = d->T, KW = d->KW, dil = d->dil, OC = d->OC, OW = d->OW, accumulate = d->accumulate, act = d->act;         \
    const float *w = d->w, *b = d->b;                                                                                 \
    float slope = d->slope;                                                                                           \
    int K = T * KW, tp = KW < CF__DIRECT_PART ? CF__DIRECT_PART / KW : 1, G = CF__DIRECT_GROUP * OB;                  \
    int g0, oc0, w0, t0, t, kw, o, j;                                                                                 \
    float out[OB][2 * VW];                                                                                            \
    VT s[CF__DIRECT_GROUP][OB][2];   /* the group's blocks' sums of the parts so far */                               \
    for (g0 = 0; g0 < OC; g0 += G) {                                                                                  \
        int g1 = OC - g0 < G ? OC : g0 + G;                                                                           \
        for (w0 = 0; w0 < OW; w0 += 2 * VW) {                                                                         \
            for (t0 = 0; t0 < T; t0 += tp) {                                                                          \
                int t1 = T - t0 < tp ? T : t0 + tp;                                                                   \
                for (oc0 = g0; oc0 < g1; oc0 += OB) {                                                                 \
                    const float *wb = w + (size_t)oc0 * K;   /* the block's kernel, (K, OB) */                        \
                    VT a[OB][2], zero = {0}, (*sb)[2] = s[(oc0 - g0) / OB];   /* a: one part's sum */                 \
                    for (o = 0; o < OB; o++) a[o][0] = a[o][1] = zero;                                                \
                    for (t = t0; t < t1; t++) {                                                                       \
                        const uint32_t *r = rp[t] + w0;                                                               \
                        const float *wk = wb + (size_t)t * KW * OB;                                                   \
                        for (kw = 0; kw < KW; kw++) NAME##_tap(a, wk + kw * OB, r + kw * dil);                        \
                    }                                                                                                 \
                    for (o = 0; o < OB; o++) {                                                                        \
                        sb[o][0] = t0 ? sb[o][0] + a[o][0] : a[o][0];                                                 \
                        sb[o][1] = t0 ? sb[o][1] + a[o][1] : a[o][1];                                                 \
                    }                                                                                                 \
                }                                                                                                     \
            }                                                                                                         \
            for (oc0 = g0; oc0 < g1; oc0 += OB) {                                                                     \
                int no = OC - oc0 < OB ? OC - oc0 : OB;   /* the last block may have fewer channels: zeros, unstored */\
                for (o = 0; o < no; o++) {   /* the block's valid part (the last block may pass OW) */                \
                    float *CF__RESTRICT yr = y + (size_t)(oc0 + o) * ystride + w0, bo = b ? b[oc0 + o] : 0.0f;        \
                    int n = OW - w0 < 2 * VW ? OW - w0 : 2 * VW;                                                      \
                    memcpy(out[o], s[(oc0 - g0) / OB][o], sizeof out[o]);                                             \
                    if (n == 2 * VW) { NAME##_block(yr, out[o], bo, accumulate, act, slope); continue; }              \
                    if (accumulate) for (j = 0; j < n; j++) yr[j] += out[o][j];                                       \
                    else for (j = 0; j < n; j++) yr[j] = cf__act_f(out[o][j] + bo, act, slope);                       \
                }                                                                                                     \
            }                                                                                                         \
        }                                                                                                             \
    }                                                                                                                 \
}
CF__DIRECT_FWD_ROW(cf__direct_fwd_row8, cf__v8, 8, 4, CF__CONTRACT)
/* The same with 16-float vectors, chosen at run time when the CPU has AVX-512 and a row has at
   least 32 positions: the x86-64-v3 build still runs on AVX2 machines. */
#ifdef CF__AVX512
#include <immintrin.h>
typedef float cf__v16 __attribute__((vector_size(64)));
#ifndef CF__DIRECT_OB512
#define CF__DIRECT_OB512 8   /* output channels a block: 16 accumulators of the 32 registers */
#endif
#if CF__DIRECT_OB512 > CF__DIRECT_OB_MOST
#error "CF__DIRECT_OB512 must be at most CF__DIRECT_OB_MOST (cf__direct_packed's blocks)"
#endif
#if defined(__clang__)
#define CF__CONTRACT512 __attribute__((target("avx512f")))
#else
#define CF__CONTRACT512 __attribute__((target("avx512f"), optimize("fp-contract=fast")))
#endif
CF__DIRECT_FWD_ROW(cf__direct_fwd_row16, cf__v16, 16, CF__DIRECT_OB512, CF__CONTRACT512)
/* (a read of what the runtime found at start) */
static int cf__has_avx512(void) { return __builtin_cpu_supports("avx512f") ? 1 : 0; }
/* the mask of a vector's first n lanes (none when n <= 0, all when n >= 16) */
CF__INLINE __mmask16 cf__lanes(int n) { return (__mmask16)(n >= 16 ? 0xffffu : n <= 0 ? 0u : (1u << n) - 1u); }
#endif

/* floats of one row of R: the output row rounded up to 32, plus the kernel's reach */
static size_t cf__direct_wp(cf_shape out, const cf_geom *g) {
    return ((size_t)out.w + 31) / 32 * 32 + (size_t)(g->k[2] - 1) * g->dil[2];
}
/* floats of the kernel packed for the direct kernel (cf__direct_pack): OC rounded up to
   CF__DIRECT_OB_MOST, times K */
static size_t cf__direct_packed(cf_shape in, cf_shape out, const cf_geom *g) {
    return ((size_t)out.c + CF__DIRECT_OB_MOST - 1) / CF__DIRECT_OB_MOST * CF__DIRECT_OB_MOST * in.c * cf__kvol(g);
}
/* wp: the kernel w (OC, K) in blocks of ob output channels, each block (K, ob): tap k's ob
   weights side by side, so that the direct kernel reads one stream of them (from OB rows of w,
   OB streams and pointers: 32 -> 64 at 64^3 forward 134-147 -> 115-118 ms on an Intel Xeon);
   zeros past OC */
static void cf__direct_pack(float *wp, const float *w, int OC, int K, int ob) {
    int oc0, k, o;
    for (oc0 = 0; oc0 < OC; oc0 += ob)
        for (k = 0; k < K; k++)
            for (o = 0; o < ob; o++)
                wp[(size_t)oc0 * K + (size_t)k * ob + o] = oc0 + o < OC ? w[(size_t)(oc0 + o) * K + k] : 0.0f;
}
/* OpenBLAS's name for the kernel set it runs: a weak reference, NULL with another BLAS */
#ifdef CF_USE_CBLAS
#ifdef __cplusplus
extern "C"
#endif
char *openblas_get_corename(void) __attribute__((weak));
#endif
/* whether the BLAS runs AVX-512 kernels: OpenBLAS's SkylakeX, Cooperlake or SapphireRapids
   sets, or another BLAS (MKL, BLIS: their own detection); not OpenBLAS's SSE kernels (its
   fallback for a CPU it does not know), its AVX2 sets, nor the naive sgemm */
static int cf__blas_avx512_as = -1;   /* (test_core: 0 or 1 answers for the BLAS; -1 asks it) */
static int cf__blas_runs_avx512(void) {
    if (cf__blas_avx512_as >= 0) return cf__blas_avx512_as;
#ifdef CF_USE_CBLAS
    {
        const char *core = openblas_get_corename ? openblas_get_corename() : NULL;
        return !core || !strcmp(core, "SkylakeX") || !strcmp(core, "Cooperlake") || !strcmp(core, "SapphireRapids");
    }
#else
    return 0;
#endif
}
/* whether the BLAS runs vector kernels of AVX2 or wider: those, or OpenBLAS's Haswell and Zen
   sets; not its SSE kernels nor the naive sgemm */
static int cf__blas_runs_avx2(void) {
#ifdef CF_USE_CBLAS
    const char *core = openblas_get_corename ? openblas_get_corename() : NULL;
    if (core && (!strcmp(core, "Haswell") || !strcmp(core, "Zen"))) return 1;
#endif
    return cf__blas_runs_avx512();
}
/* Whether the direct kernel can run a convolution of in into out: stride 1 along the width,
   rows of 16 or more, one ring per thread (its least, cf__ring_slots) and the packed kernel in
   ws; and whether the door gives it the convolution rather than im2col + GEMM (kinds tiles and
   taps, the BLAS), which depends on the CPU:
   - with AVX-512 (the 16-lane form): a backward-data always (GEMM + col2im is slower; kind
     gemm, tried before it, takes those with many channels), a forward where R is at most
     CF__DIRECT_FWD_MAX_R floats (64 Ki: with many input channels R outgrows the L2 cache while
     the GEMM gets a long K) and the output rows are 32 or longer (shorter ones run the 8-lane
     form: on an Intel Xeon, cosmoflow.cfg's 128 -> 256 at 16^3 forward took 48 ms there
     against the GEMM's 26, the 2018 CosmoFlow's 32 -> 64 k4 to 27^3 38 against 25);
   - with AVX2 only (the 8-lane form, 4 output channels a block): beside a BLAS that runs AVX2
     kernels, only for 16 input channels or fewer (a short K, where the GEMM is poor: the
     2018 CosmoFlow's 16 -> 32 at 55^3 forward, direct 164-184 ms against the GEMM's 176-192);
     beside OpenBLAS's SSE kernels, always.  On an AMD EPYC (Zen 3) with OpenBLAS's Zen kernels the
     GEMM (kind tiles, or the reference's) ran DeepCAM's dense backward-data 1.2-2.0x faster
     than the direct kernel, and CosmoFlow's step at batch 1 1.1-1.2x faster, its layers level
     (docs/performance.md, "The door there"); with the SSE kernels the direct kernel was
     2.8-3.4x the GEMM.
   in: the convolution's input (dy for a backward-data, its flipped geometry g); fwd: 1 for a
   forward.  (The bf16 kernel has its own limit, CF__BF16_DIRECT_MAX_R.) */
#define CF__DIRECT_FWD_MAX_R 65536
static int cf__direct_fits(cf_shape in, cf_shape out, const cf_geom *g, size_t ws_floats, int fwd) {
    size_t Wp = cf__direct_wp(out, g), rsz = (size_t)in.c * g->k[0] * g->k[1] * Wp,   /* (the rows a row reads) */
           ring = cf__ring_size(g, Wp, cf__ring_slots(g), in.c, in.c);
    int door = !cf__blas_runs_avx2() || in.c <= 16;
#ifdef CF__AVX512
    if (cf__has_avx512()) door = !fwd || (rsz <= CF__DIRECT_FWD_MAX_R && out.w >= 32);
#else
    (void)fwd; (void)rsz;
#endif
    return g->s[2] == 1 && out.w >= 16 && door &&
           16 + (size_t)cf__nthreads() * ring + cf__direct_packed(in, out, g) <= ws_floats;
}
/* the forward convolution f, y (B, OC, OD, OH, OW) (+)= conv(x, w) with w (OC, C, KD, KH, KW)
   (accumulate: added into y): rows shared out between the threads, in f's workspace the packed
   kernel, then each thread's ring (on a cache line).  Only where cf__direct_fits says it applies. */
static void cf__direct_fwd(const cf__conv_call *f, int accumulate) {
    cf_shape in = f->in, out = f->out;
    const cf_geom *g = f->g;
    int T = in.c * g->k[0] * g->k[1], KW = g->k[2], ns;
    size_t Wp = cf__direct_wp(out, g), packed = cf__direct_packed(in, out, g), rsz;
    size_t P = cf__positions(out), in_sz = cf_shape_size(in);
    long rows = (long)f->B * out.d * out.h, r;
    cf__direct_row_call d = {P, T, KW, g->dil[2], f->w, out.c, out.w, f->b, accumulate, f->act, f->slope};
    void (*row)(float *, const uint32_t *const *, const cf__direct_row_call *) = cf__direct_fwd_row8;
    int ob = 4;   /* the 8-lane form's output channels a block */
    float *wp = f->ws, *rings = cf__line_aligned(f->ws + packed);
    ns = cf__ring_ns(in, g, Wp, f->ws_floats - packed - 16, in.c, in.c);
    rsz = cf__ring_size(g, Wp, ns, in.c, in.c);
#ifdef CF__AVX512
    if (out.w >= 32 && cf__has_avx512()) { row = cf__direct_fwd_row16; ob = CF__DIRECT_OB512; }
#endif
    cf__direct_pack(wp, f->w, out.c, T * KW, ob);
    d.w = wp;
    CF__OMP(omp parallel num_threads(cf__nthreads()))
    {
        cf__ring pr = cf__ring_at((uint32_t *)(void *)(rings + (size_t)cf__thread_id() * rsz), g, Wp, ns, in.c, in.c);
        CF__OMP(omp for schedule(static))
        for (r = 0; r < rows; r++) {
            int bi = (int)(r / ((long)out.d * out.h)), od = (int)(r / out.h % out.d), oh = (int)(r % out.h);
            cf__ring_for(&pr, f->x + (size_t)bi * in_sz, 0, bi, in.c, in, g, od, oh, cf__float_row);
            row(f->y + (size_t)bi * out.c * P + ((size_t)od * out.h + oh) * out.w, pr.rp, &d);
        }
    }
}
static int cf__direct_fwd_applies(const cf__conv_call *c) {
    return c->groups == 1 && !cf__pointwise_applies(c) && cf__direct_fits(c->in, c->out, c->g, c->ws_floats, 1);
}
static void cf__direct_fwd_run(const cf__conv_call *c) { cf__direct_fwd(c, 0); }
/* backward-data: the forward of dy (out's shape) into dx with the flipped kernel, as above */
static int cf__direct_bwd_applies(const cf__conv_call *c) {
    cf_geom gt;
    size_t wsz = cf__flipped_floats(c);
    return c->groups == 1 && cf__flipped_geom(c->g, &gt) && wsz < c->ws_floats &&
           cf__direct_fits(c->out, c->in, &gt, c->ws_floats - wsz, 0);
}
static void cf__direct_bwd_run(const cf__conv_call *c) {
    cf_geom gt;
    cf__conv_call f;
    cf__flipped_geom(c->g, &gt);
    cf__flip_kernel(c->ws, c->w, c->in.c, c->out.c, cf__kvol(c->g));
    f = cf__flipped_call(c, &gt);
    cf__direct_fwd(&f, !c->dx_store);
}
#endif /* CF__DIRECT */

/* ---- the fp32 GEMM (kind "gemm"): C (M x N) = beta C + op(A) op(B), op(A) M x K, op(B) K x N,
   beta 0 or 1, on AVX-512 FMA, chosen at run time by the CPU and not by the BLAS's kernel set: an
   OpenBLAS that does not know the CPU runs its SSE kernels, 1.5-3.8x slower on DeepCAM's pointwise
   convolutions (docs/performance.md).  It runs the pointwise convolutions and, with op(B) made
   from x as it is packed (a col source, as the bf16 GEMM's), the dense ones without an im2col
   buffer; its applies functions, after it, say where.  A forward's bias and activation are applied
   as the sum's last chunk is stored (out).  The sum over K runs in chunks of at most CF__F32_KC
   terms, all of one length (728 terms as 364 + 364).  Each chunk packs its part of op(B) once, in
   panels of 32 columns (Bp[panel][k][j]: the micro-kernel reads a panel as one contiguous
   stretch), and blocks of CF__F32_MR rows of op(A) as Ap[k][r] (one broadcast a row and term).
   The micro-kernel keeps a CF__F32_MR x 32 block of C in 28 of the 32 registers: per term two
   loads of op(B), a broadcast and two FMAs a row; its rows of op(A) (21 KB at most) stay in the L1
   cache while the chunk's op(B) (576 KB at most) passes from the L2 cache.  (14 x 32 measured at
   least as fast as 8 x 32.) A task is a block of columns of C over all of C's rows (or over
   CF__F32_MB of them when the columns give fewer tasks than threads); the columns are cut into at
   least CF__F32_TASKS blocks a thread where blocks of 64 columns allow, which the threads take in
   turn.  When several column blocks would pack the same op(A), it is packed whole beforehand (at
   most CF__F32_A_ALL floats), the threads sharing its rows.  A long sum (K over CF__F32_KPART: a
   backward-weights sum over many positions) is cut into parts of equal length, each into its own
   partial C, the partials added in part order.  Every element of C is the same sum in the same
   order whatever the number of threads: the chunks and parts follow from K alone, and a task's
   block changes which elements it computes, never how (test_core checks the bits). */
#ifdef CF__AVX512
#define CF__F32_TARGET __attribute__((target("avx512f")))
/* v is wanted in a register: an empty statement that takes and gives it there.  Without it GCC
   folds a load used by several multiply-adds into each of them (the rows backward-weights read
   each dy vector 3 times, 27 loads for 24 multiply-adds: 32 -> 64 at 64^3 176 -> 126-131 ms on
   an Intel Xeon); the bits are the same. */
#define CF__IN_REGISTER(v) __asm__("" : "+v"(v))
#define CF__F32_MR 14                     /* rows of the register block (x 32 columns) */
#define CF__F32_MB (9 * CF__F32_MR)       /* rows of op(A) a task packs at a time */
#define CF__F32_NB 384                    /* columns of a task, at most */
#define CF__F32_KC 384                    /* terms of a chunk, at most */
#define CF__F32_TASKS 4                   /* tasks a thread */
#define CF__F32_A_BIG ((size_t)1 << 20)   /* floats of op(A) past which a thread takes one task (below) */
#define CF__F32_A_ALL ((size_t)4 << 20)   /* floats of op(A) packed whole, at most (16 MB) */
#define CF__F32_KPART 16384               /* terms of a part of a long sum, at most */
/* cf__act_f on 16 lanes (the fp32 GEMM's and the bf16 kernels'): linear, relu and leaky as
   vector operations (max returns its second operand for a NaN, as relu's test v > 0 gives 0;
   a compare with NaN is false, as leaky's), others lane by lane */
CF__F32_TARGET static __m512 cf__act16(__m512 z, int act, float slope) {
    float v[16];
    int j;
    if (act == CF_ACT_LINEAR) return z;
    if (act == CF_ACT_RELU) return _mm512_max_ps(z, _mm512_setzero_ps());
    if (act == CF_ACT_LEAKY)
        return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(z, _mm512_setzero_ps(), _CMP_GT_OQ),
                                    _mm512_mul_ps(z, _mm512_set1_ps(slope)), z);
    _mm512_storeu_ps(v, z);
    for (j = 0; j < 16; j++) v[j] = cf__act_f(v[j], act, slope);
    return _mm512_loadu_ps(v);
}

/* d[t] = s[2 t], t < n: pairs of vectors, their even lanes kept (one permute); the loads read
   no element past s[2 (n - 1)] */
CF__F32_TARGET static void cf__even_lanes(float *d, const float *s, int n) {
    const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    int t;
    for (t = 0; t < n; t += 16) {
        int m = n - t < 16 ? n - t : 16;   /* outputs now; they read 2 m - 1 elements */
        __m512 a = _mm512_maskz_loadu_ps(cf__lanes(2 * m - 1), s + 2 * t);
        __m512 b = _mm512_maskz_loadu_ps(cf__lanes(2 * m - 17), s + 2 * t + 16);
        _mm512_mask_storeu_ps(d + t, cf__lanes(m), _mm512_permutex2var_ps(a, even, b));
    }
}
/* One output row's segment of a made row, len positions from ow0 into d: the input row src
   (NULL: the tap reads padding there) at the width's offset offw = kw dil - pb, W values long.
   Stride 1: 16 values at a time by masked loads (the lanes outside the input row read nothing
   and give zeros), where section 3 copies by memcpy (at 16^3 a segment is 16 values). */
CF__F32_TARGET static void cf__made_seg_s1(float *d, const float *src, int ow0, int len, int offw, int W) {
    int t;
    for (t = 0; t < len; t += 16) {   /* output positions q = ow0 + t + i read input src[q + offw] */
        int q = ow0 + t, lo = -offw - q, hi = W - offw - q;   /* lanes i in [lo, hi) inside the row */
        __mmask16 m = src ? (__mmask16)(cf__lanes(hi) & ~cf__lanes(lo) & cf__lanes(len - t)) : 0;
        _mm512_mask_storeu_ps(d + t, cf__lanes(len - t), _mm512_maskz_loadu_ps(m, src ? src + offw + q : d));
    }
}
/* stride 2: the in-bounds run by cf__even_lanes, zeros either side */
CF__F32_TARGET static void cf__made_seg_s2(float *d, const float *src, int ow0, int len, int offw, int W) {
    int lo = 0, hi = 0;
    if (src) cf__row_range(ow0, len, 2, offw, W, &lo, &hi);
    memset(d, 0, sizeof(float) * lo);
    if (hi > lo) cf__even_lanes(d + lo, src + offw + (size_t)(ow0 + lo) * 2, hi - lo);
    memset(d + hi, 0, sizeof(float) * (len - hi));
}
/* cf__im2col_row (section 3) for the GEMMs' made rows, the same values: a stride of 1 or 2
   along the width copied by vectors (cf__made_seg_s1, cf__made_seg_s2) where the reference
   copies by memcpy or reads element by element (DeepCAM's strided convolutions spent as long
   making rows as multiplying them; cosmoflow.cfg's 16^3 convs a quarter of their time), the
   output rows' segments followed by counters where the reference finds each by three
   divisions; other strides by cf__im2col_row.  (The in-bounds range is section 3's.) */
CF__F32_TARGET static void cf__made_row(float *dst, const float *x, int r, cf_shape in, cf_shape out, const cf_geom *g,
                                        size_t p0, size_t n) {
    int KD = g->k[0], KH = g->k[1], KW = g->k[2];
    int kw = r % KW, kh = (r / KW) % KH, kd = (r / (KW * KH)) % KD, c = r / (KW * KH * KD);
    int offw = kw * g->dil[2] - g->pb[2];
    int ow0 = (int)(p0 % out.w), oh = (int)(p0 / out.w % out.h), od = (int)(p0 / ((size_t)out.w * out.h));
    const float *xc = x + (size_t)c * in.d * in.h * in.w;
    size_t j = 0;
    if (g->s[2] != 1 && g->s[2] != 2) {
        cf__im2col_row(dst, x, r, in, out, g, p0, n);
        return;
    }
    while (j < n) {
        int len = out.w - ow0 < (long)(n - j) ? out.w - ow0 : (int)(n - j);
        int id = od * g->s[0] - g->pb[0] + kd * g->dil[0], ih = oh * g->s[1] - g->pb[1] + kh * g->dil[1];
        const float *src = id >= 0 && id < in.d && ih >= 0 && ih < in.h ? xc + ((size_t)id * in.h + ih) * in.w : NULL;
        (g->s[2] == 1 ? cf__made_seg_s1 : cf__made_seg_s2)(dst + j, src, ow0, len, offw, in.w);
        j += len;
        ow0 = 0;
        if (++oh == out.h) { oh = 0; od++; }
    }
}
/* 16 x 16 transpose of floats: lane j of r[i] goes to lane i of r[j] */
CF__F32_TARGET static void cf__gemm_f32_transpose16(__m512 r[16]) {
    __m512 t[16];
    int i;
    for (i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (i = 0; i < 16; i += 4) {
        r[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
        r[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
        r[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
        r[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
    }
    for (i = 0; i < 4; i++) {
        t[i] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0x88); t[i + 4] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0xdd);
        t[i + 8] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0x88);
        t[i + 12] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0xdd);
    }
    for (i = 0; i < 8; i++) {
        r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
        r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xdd);
    }
}
/* The transposing copy both packings need: rows 0 .. nr (at most 16) of X (ld apart), their
   elements 0 .. nk, to column r of D, element k of row r at D[k * dstride + r] (nr lanes a
   row of D; lanes past nr are zero when zero_pad, else not written) */
CF__F32_TARGET static void cf__gemm_f32_transpose_rows(float *D, int dstride, const float *X, size_t ld, int nr,
                                                       int nk, int zero_pad) {
    int k, i;
    __mmask16 out = cf__lanes(zero_pad ? dstride : nr);
    for (k = 0; k < nk; k += 16) {
        __m512 r[16];
        for (i = 0; i < 16; i++)
            r[i] = i < nr ? _mm512_maskz_loadu_ps(cf__lanes(nk - k), X + (size_t)i * ld + k) : _mm512_setzero_ps();
        cf__gemm_f32_transpose16(r);
        for (i = 0; i < 16 && k + i < nk; i++) _mm512_mask_storeu_ps(D + (size_t)(k + i) * dstride, out, r[i]);
    }
}
/* Ap[k][r] = op(A)[m0 + r][k0 + k], a block of CF__F32_MR rows (rows past M zero), kc terms */
CF__F32_TARGET static void cf__gemm_f32_pack_a(float *Ap, const cf__gemm_call *g, int m0, int k0, int kc) {
    int nr = g->M - m0 < CF__F32_MR ? g->M - m0 : CF__F32_MR, k;
    if (g->tA) {   /* op(A)[m][k] = A[k][m]: a row of A holds the block's rows for one k */
        for (k = 0; k < kc; k++)
            _mm512_mask_storeu_ps(Ap + (size_t)k * CF__F32_MR, cf__lanes(CF__F32_MR),
                                  _mm512_maskz_loadu_ps(cf__lanes(nr), g->A + (size_t)(k0 + k) * g->lda + m0));
        return;
    }
    cf__gemm_f32_transpose_rows(Ap, CF__F32_MR, g->A + (size_t)m0 * g->lda + k0, (size_t)g->lda, nr, kc, 1);
}
/* Bp[panel][k][j] = op(B)[k0 + k][n0 + 32 panel + j], kc terms, nb columns (to a multiple of
   32, zeros past nb).  With a col source, the rows of im2col(x) are made first into made
   (16 x CF__F32_KC floats): row k0 + k over columns n0 .. n0 + nb (not transposed), or rows
   n0 + j .. n0 + j + 16 over positions k0 .. k0 + kc (transposed). */
CF__F32_TARGET static void cf__gemm_f32_pack_b(float *Bp, const cf__gemm_call *g, int k0, int kc, int n0, int nb,
                                               float *made) {
    const cf__col_src *col = g->col;
    int k, j, i;
    if (!g->tB) {
        for (k = 0; k < kc; k++) {
            const float *b = g->B + (size_t)(k0 + k) * g->ldb + n0;
            if (col) {
                cf__made_row(made, col->x, k0 + k, col->in, col->out, col->g, (size_t)n0, (size_t)nb);
                b = made;
            } else if (k + 2 < kc)
                cf__prefetch_floats(b + (size_t)2 * g->ldb, (size_t)nb, 0);   /* (the row after next, fetched ahead) */
            for (j = 0; j < nb; j += 16)
                _mm512_storeu_ps(Bp + (size_t)(j / 32) * kc * 32 + (size_t)k * 32 + (j & 31),
                                 _mm512_maskz_loadu_ps(cf__lanes(nb - j), b + j));
        }
        if ((nb + 15) / 16 % 2) for (k = 0; k < kc; k++)   /* (the last panel's upper half) */
            _mm512_storeu_ps(Bp + (size_t)(nb / 32) * kc * 32 + (size_t)k * 32 + 16, _mm512_setzero_ps());
        return;
    }
    /* op(B)[k][n] = B[n][k]: 16 rows of B at a time, transposed into the panel's lanes */
    for (j = 0; j < (nb + 31) / 32 * 32; j += 16) {
        float *d = Bp + (size_t)(j / 32) * kc * 32 + (j & 31);
        int nr = nb - j < 16 ? (nb - j > 0 ? nb - j : 0) : 16;
        for (i = 0; i < nr && col; i++)
            cf__made_row(made + (size_t)i * CF__F32_KC, col->x, n0 + j + i, col->in, col->out, col->g, (size_t)k0,
                           (size_t)kc);
        if (nr && col) cf__gemm_f32_transpose_rows(d, 32, made, CF__F32_KC, nr, kc, 0);
        else if (nr)
            cf__gemm_f32_transpose_rows(d, 32, g->B + (size_t)(n0 + j) * g->ldb + k0, (size_t)g->ldb, nr, kc, 0);
        for (k = 0; k < kc && nr < 16; k++)
            _mm512_mask_storeu_ps(d + (size_t)k * 32, (__mmask16)~cf__lanes(nr), _mm512_setzero_ps());
    }
}
/* the micro-kernel's 14 rows, each accumulator named by a constant (an array indexed by a
   variable, GCC at -O2 keeps in memory: the bf16 GEMM's CF__ZERO8) */
#define CF__F32_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13)
/* C[0 .. nm][0 .. nn] = (beta ? C : 0) + Ap (kc x CF__F32_MR) x Bp (kc x 32): per term two
   loads of Bp, a broadcast of Ap a row, two FMAs a row, for the first `rows` rows (a constant
   where it is inlined: the rows past it cost nothing); C read and written once (out: the bias
   of row r at out->b[r] and the activation applied as it is stored) */
CF__F32_TARGET CF__INLINE void cf__gemm_f32_rows(const int rows, int kc, const float *Ap, const float *Bp, float *C,
                                                 int ldc, int nm, int nn, int beta, const cf__gemm_out *out) {
#define CF__F32_DECL(r) __m512 c##r##a = _mm512_setzero_ps(), c##r##b = _mm512_setzero_ps();
    CF__F32_ROWS(CF__F32_DECL)
#undef CF__F32_DECL
    __mmask16 k0 = cf__lanes(nn), k1 = cf__lanes(nn - 16);
    int k;
    for (k = 0; k < kc; k++) {
        __m512 b0 = _mm512_loadu_ps(Bp), b1 = _mm512_loadu_ps(Bp + 16), a;
#define CF__F32_FMA(r) if (r < rows) { a = _mm512_set1_ps(Ap[r]); c##r##a = _mm512_fmadd_ps(a, b0, c##r##a); \
        c##r##b = _mm512_fmadd_ps(a, b1, c##r##b); }
        CF__F32_ROWS(CF__F32_FMA)
#undef CF__F32_FMA
        Ap += CF__F32_MR; Bp += 32;
    }
#define CF__F32_ST(r) if (r < nm) {                                                                                   \
        float *c = C + (size_t)r * ldc;                                                                              \
        if (beta) {                                                                                                  \
            c##r##a = _mm512_add_ps(_mm512_maskz_loadu_ps(k0, c), c##r##a);                                          \
            c##r##b = _mm512_add_ps(_mm512_maskz_loadu_ps(k1, c + 16), c##r##b);                                     \
        }                                                                                                            \
        if (out) {                                                                                                   \
            __m512 bias = _mm512_set1_ps(out->b ? out->b[r] : 0.0f);                                                 \
            c##r##a = cf__act16(_mm512_add_ps(c##r##a, bias), out->act, out->slope);                                 \
            c##r##b = cf__act16(_mm512_add_ps(c##r##b, bias), out->act, out->slope);                                 \
        }                                                                                                            \
        _mm512_mask_storeu_ps(c, k0, c##r##a);                                                                       \
        _mm512_mask_storeu_ps(c + 16, k1, c##r##b); }
    CF__F32_ROWS(CF__F32_ST)
#undef CF__F32_ST
}
/* the block's nm rows in a kernel of 4, 8 or CF__F32_MR rows (M = 128: 9 blocks of 14, then its
   last 2 rows in the 4-row kernel, where a 14-row one would spend 140 rows' work) */
CF__F32_TARGET static void cf__gemm_f32_kernel(int kc, const float *Ap, const float *Bp, float *C, int ldc, int nm,
                                               int nn, int beta, const cf__gemm_out *out) {
    if (nm <= 4) cf__gemm_f32_rows(4, kc, Ap, Bp, C, ldc, nm, nn, beta, out);
    else if (nm <= 8) cf__gemm_f32_rows(8, kc, Ap, Bp, C, ldc, nm, nn, beta, out);
    else cf__gemm_f32_rows(CF__F32_MR, kc, Ap, Bp, C, ldc, nm, nn, beta, out);
}
/* How a GEMM is cut into tasks for nth threads: the sum in parts of span terms (parts > 1:
   each into its own partial C), C's columns in nblocks blocks of width (a multiple of 32), its
   rows in rblocks blocks of rows; tasks = rblocks x nblocks x parts.  A thread's buffers:
   a_sz floats for a block of op(A), b_sz for a chunk of op(B), made_sz for made rows (a col
   source's). */
typedef struct {
    int nth, parts, span, nblocks, width, rows, rblocks, tasks;
    size_t a_sz, b_sz, made_sz;
} cf__gemm_f32_cut;
/* The widest block of columns of a GEMM (both section 13's, fp32 and bf16) whose chunks of the
   sum are at most chunk long: nb, or, where op(B) is read from memory (not made from x, not
   transposed), as wide as a thread's buffer for op(B) holds (chunk x width <= room), at most
   4 nb.  A short sum over a large image (a pointwise conv of 64 or 128 channels at 384x576)
   then reads each row of B and writes each row of C in runs of 1536 values rather than 384
   (the hardware's prefetchers follow a longer run): its bf16 forward (16-bit x and y) 13.5-15.3
   -> 11.6-12.2 ms, fp32 24.1-25.3 -> 23.0-23.9 (docs/performance.md, "bf16"). */
static int cf__gemm_widest(const cf__gemm_call *g, size_t chunk, size_t room, int nb) {
    size_t width = chunk ? room / chunk / 32 * 32 : (size_t)nb;
    if (g->col || g->tB || width < (size_t)nb) return nb;
    return width > (size_t)4 * nb ? 4 * nb : (int)width;
}
/* the parts follow from K alone; the columns are cut into more blocks until there are
   CF__F32_TASKS tasks a thread, a multiple of the threads (or blocks of 64 columns), the rows
   into blocks when there are still fewer tasks than threads.  Where op(A) has more than
   CF__F32_A_BIG floats (4 MiB, past the L2 cache), one task a thread: every task streams all
   of op(A) from memory (cosmoflow.cfg's 256 -> 512 at 8^3 forward, op(A) 512 x 6912, 4 tasks
   a thread of 64 columns: 16.5 ms, one task a thread 14.7, on an Intel Xeon). */
static void cf__gemm_f32_cut_up(cf__gemm_f32_cut *cut, const cf__gemm_call *g) {
    int M = g->M, N = g->N, K = g->K, kc, widest;   /* kc: a chunk's terms, at most */
    int per = (size_t)M * K > CF__F32_A_BIG ? 1 : CF__F32_TASKS;   /* tasks a thread */
    cut->nth = cf__nthreads();
    cut->parts = K > CF__F32_KPART ? (K + CF__F32_KPART - 1) / CF__F32_KPART : 1;
    cut->span = (K + cut->parts - 1) / cut->parts;
    kc = K < CF__F32_KC ? K : CF__F32_KC;
    widest = cf__gemm_widest(g, (size_t)kc, (size_t)CF__F32_KC * CF__F32_NB, CF__F32_NB);
    cut->nblocks = (N + widest - 1) / widest;
    while ((cut->nblocks * cut->parts < per * cut->nth || (cut->nblocks * cut->parts) % cut->nth) &&
           cut->nblocks * 64 < N)
        cut->nblocks++;
    cut->width = ((N + cut->nblocks - 1) / cut->nblocks + 31) / 32 * 32;
    cut->nblocks = (N + cut->width - 1) / cut->width;
    cut->rows = cut->nblocks * cut->parts >= cut->nth ? M : CF__F32_MB;
    cut->rblocks = (M + cut->rows - 1) / cut->rows;
    cut->tasks = cut->rblocks * cut->nblocks * cut->parts;
    cut->a_sz = (size_t)CF__F32_MB * CF__F32_KC;
    cut->b_sz = (size_t)kc * cut->width;
    cut->made_sz = g->col ? (size_t)16 * CF__F32_KC : 0;
}
/* a thread's buffers: Ap, Bp, a block of op(A) and a chunk of op(B); A_all, all of op(A)
   packed beforehand (panels of CF__F32_MR rows over all of K), or NULL */
typedef struct { float *Ap, *Bp, *made; const float *A_all; } cf__gemm_f32_bufs;
/* task t of the cut: its rows, columns and part of the sum, into C or (parts > 1) the part's
   partial C (M x N, beta 0) */
static void cf__gemm_f32_task(const cf__gemm_call *g, const cf__gemm_f32_cut *cut, int t, float *partial,
                              const cf__gemm_f32_bufs *bufs) {
    int blocks = cut->rblocks * cut->nblocks, b = t % blocks, part = t / blocks, K = g->K;
    int m0 = b / cut->nblocks * cut->rows, n0 = b % cut->nblocks * cut->width;
    int mr = g->M - m0 < cut->rows ? g->M - m0 : cut->rows, nb = g->N - n0 < cut->width ? g->N - n0 : cut->width;
    int q0 = part * cut->span, q1 = K - q0 < cut->span ? K : q0 + cut->span;
    int chunks = (q1 - q0 + CF__F32_KC - 1) / CF__F32_KC, step = (q1 - q0 + chunks - 1) / chunks, k0, mb, i, j;
    float *C = cut->parts == 1 ? g->C : partial + (size_t)g->M * g->N * part;
    int ldc = cut->parts == 1 ? g->ldc : g->N, beta = cut->parts == 1 && g->beta != 0.0f;
    for (k0 = q0; k0 < q1; k0 += step) {
        int kc = q1 - k0 < step ? q1 - k0 : step;
        cf__gemm_f32_pack_b(bufs->Bp, g, k0, kc, n0, nb, bufs->made);
        for (mb = m0; mb < m0 + mr; mb += CF__F32_MB) {
            int mbr = m0 + mr - mb < CF__F32_MB ? m0 + mr - mb : CF__F32_MB;
            for (i = 0; i < mbr && !bufs->A_all; i += CF__F32_MR)
                cf__gemm_f32_pack_a(bufs->Ap + (size_t)i * kc, g, mb + i, k0, kc);
            for (i = 0; i < mbr; i += CF__F32_MR) {   /* (the first chunk of a part: beta, then 1) */
                const float *a = bufs->A_all ? bufs->A_all + (size_t)(mb + i) * K + (size_t)k0 * CF__F32_MR
                                             : bufs->Ap + (size_t)i * kc;
                int nm = mbr - i < CF__F32_MR ? mbr - i : CF__F32_MR;
                cf__gemm_out out, *last = NULL;   /* (the bias and act with the sum's last chunk) */
                if (g->out && cut->parts == 1 && k0 + kc == q1) {
                    out = *g->out;
                    out.b = out.b ? out.b + mb + i : NULL;
                    last = &out;
                }
                for (j = 0; j < nb; j += 32)
                    cf__gemm_f32_kernel(kc, a, bufs->Bp + (size_t)j * kc, C + (size_t)(mb + i) * ldc + n0 + j, ldc, nm,
                                        nb - j < 32 ? nb - j : 32, k0 > q0 || beta, last);
            }
        }
    }
}
/* row m of C = beta C + the parts' partial sums, added in part order (out: then the bias and act) */
static void cf__gemm_f32_add_parts(const cf__gemm_call *g, const float *partial, int parts, int m) {
    size_t MN = (size_t)g->M * g->N;
    float *c = g->C + (size_t)m * g->ldc;
    int n, p;
    for (n = 0; n < g->N; n++) {
        float v = g->beta != 0.0f ? c[n] : 0.0f;
        for (p = 0; p < parts; p++) v += partial[MN * p + (size_t)m * g->N + n];
        c[n] = g->out ? cf__act_f(v + (g->out->b ? g->out->b[m] : 0.0f), g->out->act, g->out->slope) : v;
    }
}
/* The GEMM's steps in one parallel region (each region's start and end wait for every
   thread): op(A) packed whole when A_all is given (panels of CF__F32_MR rows over all of K),
   the tasks, the parts' partial sums added */
static void cf__gemm_f32_run(const cf__gemm_call *g, const cf__gemm_f32_cut *cut, float *buf, float *A_all,
                             float *partial) {
    int panels = (g->M + CF__F32_MR - 1) / CF__F32_MR;
    CF__OMP(omp parallel num_threads(cut->nth))
    {
        cf__gemm_f32_bufs bufs;
        int t;
        bufs.Ap = cf__line_aligned(buf) + (cut->a_sz + cut->b_sz + cut->made_sz) * cf__thread_id();
        bufs.Bp = bufs.Ap + cut->a_sz;
        bufs.made = bufs.Bp + cut->b_sz;
        bufs.A_all = A_all;
        if (A_all) {
            CF__OMP(omp for schedule(static))
            for (t = 0; t < panels; t++)
                cf__gemm_f32_pack_a(A_all + (size_t)t * CF__F32_MR * g->K, g, t * CF__F32_MR, 0, g->K);
        }
        CF__OMP(omp for schedule(dynamic, 1))
        for (t = 0; t < cut->tasks; t++) cf__gemm_f32_task(g, cut, t, partial, &bufs);
        if (partial) {
            CF__OMP(omp for schedule(static))
            for (t = 0; t < g->M; t++) cf__gemm_f32_add_parts(g, partial, cut->parts, t);
        }
    }
}
/* The GEMM g; 1 (and C untouched) where its buffers cannot be had */
static int cf__gemm_f32_r(const cf__gemm_call *g) {
    cf__gemm_f32_cut cut;
    float *buf, *partial = NULL, *A_all = NULL;
    CF_ASSERT(!g->rnd && !g->halves);   /* (the bf16 GEMM's fields) */
    cf__gemm_f32_cut_up(&cut, g);
    buf = (float *)CF_MALLOC(sizeof(float) * ((cut.a_sz + cut.b_sz + cut.made_sz) * cut.nth + 16));
    if (buf && cut.parts > 1) partial = (float *)CF_MALLOC(sizeof(float) * (size_t)g->M * g->N * cut.parts);
    if (!buf || (cut.parts > 1 && !partial)) {
        CF_FREE(buf);
        return 1;
    }
    if (cut.rblocks == 1 && cut.nblocks > 1 && cut.parts == 1 && (size_t)g->M * g->K <= CF__F32_A_ALL)
        A_all = (float *)CF_MALLOC(sizeof(float) * (size_t)(g->M + CF__F32_MR - 1) / CF__F32_MR * CF__F32_MR * g->K);
    cf__gemm_f32_run(g, &cut, buf, A_all, partial);
    CF_FREE(buf);
    CF_FREE(partial);
    CF_FREE(A_all);
    return 0;
}
/* The GEMM (a cf__gemm_fn).  Where its buffers cannot be had: cf_sgemm (the same sums to
   rounding). */
static void cf__sgemm_avx512(int tA, int tB, int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                             float beta, float *C, int ldc) {
    cf__gemm_call g = {tA, tB, M, N, K, A, lda, B, ldb, beta, C, ldc, 0, NULL, 0, NULL};
    if (M <= 0 || N <= 0 || K <= 0 || cf__gemm_f32_r(&g)) cf__sgemm_fp32(tA, tB, M, N, K, A, lda, B, ldb, beta, C, ldc);
}
/* The pointwise convolutions' GEMMs on it where the CPU has AVX-512, with 64 or more channels
   each way (16 where the BLAS runs no AVX-512 kernels) and 1024 positions (the GEMMs' tasks
   fill the threads).  Against OpenBLAS's SSE
   kernels 1.5-3.8x a layer; against its AVX-512 kernels (docs/performance.md): the forward
   1.0-1.7x, the backward-weights where a sample's sum is long (more than CF__F32_KPART
   positions: 1.1-2.9x; shorter, 0.8-1.0x), the backward-data where the sum is short (128
   output channels or fewer: 1.5x; else 0.9-1.1x). */
static int cf__pointwise_f32_applies(const cf__conv_call *c) {
    int Cg = c->in.c / c->groups, OCg = c->out.c / c->groups, big = Cg >= 64 && OCg >= 64;
    if (!cf__pointwise_applies(c) || !cf__has_avx512() || cf__positions(c->out) < 1024) return 0;
    return big || (!cf__blas_runs_avx512() && Cg >= 16 && OCg >= 16);   /* (16: beside the BLAS's SSE kernels) */
}
static int cf__pointwise_f32_bww_applies(const cf__conv_call *c) {
    return cf__pointwise_f32_applies(c) && (!cf__blas_runs_avx512() || cf__positions(c->out) > CF__F32_KPART);
}
static int cf__pointwise_f32_bwd_applies(const cf__conv_call *c) {
    return cf__pointwise_f32_applies(c) && (!cf__blas_runs_avx512() || c->out.c / c->groups <= 128);
}
/* (the forward with the bias and act as the GEMM stores y; cf_sgemm and a pass where its
   buffers cannot be had) */
static void cf__pointwise_f32_fwd(const cf__conv_call *c) {
    int Cg = c->in.c / c->groups, OCg = c->out.c / c->groups, bi, gi;
    size_t P = cf__positions(c->out), in_sz = cf_shape_size(c->in);
    for (bi = 0; bi < c->B; bi++)
        for (gi = 0; gi < c->groups; gi++) {
            const float *w = c->w + (size_t)gi * OCg * Cg, *x = c->x + bi * in_sz + (size_t)gi * Cg * P;
            float *y = c->y + ((size_t)bi * c->out.c + (size_t)gi * OCg) * P;
            cf__gemm_out out = {c->b ? c->b + (size_t)gi * OCg : NULL, c->act, c->slope};
            cf__gemm_call g = {0, 0, OCg, (int)P, Cg, w, Cg, x, (int)P, 0.0f, y, (int)P, 0, NULL, 0, &out};
            if (!cf__gemm_f32_r(&g)) continue;
            cf__sgemm_fp32(0, 0, OCg, (int)P, Cg, w, Cg, x, (int)P, 0.0f, y, (int)P);
            cf__bias_act_p(y, out.b, OCg, P, P, c->act, c->slope, 0);
        }
}
static void cf__pointwise_f32_bww(const cf__conv_call *c) { cf__pointwise_bww_with(c, cf__sgemm_avx512); }
static void cf__pointwise_f32_bwd(const cf__conv_call *c) { cf__pointwise_bwd_with(c, cf__sgemm_avx512); }
/* whether the GEMMs that would go to the BLAS go to this one: kind gemm on, the CPU has
   AVX-512 and the BLAS runs none */
static int cf__gemm_ours(void) { return cf__kind_on[CF__K_GEMM] && cf__has_avx512() && !cf__blas_runs_avx512(); }
static void cf__sgemm_tiles(int tA, int tB, int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                            float beta, float *C, int ldc) {
    (cf__gemm_ours() ? cf__sgemm_avx512 : cf__sgemm_fp32)(tA, tB, M, N, K, A, lda, B, ldb, beta, C, ldc);
}
/* The dense convolutions (groups 1, not pointwise) on the same GEMM with op(B) made from x as
   it is packed (the bf16 kind's cols, in fp32): no im2col buffer and no second packing by a
   BLAS.  Forward, per sample: y (OC, P) = w (OC, K) x im2col(x) (K, P), then bias and act;
   backward-weights: dw (OC, K) += dy (OC, P) x im2col(x)^T (P, K); backward-data of a
   stride-1 convolution: the forward of dy with the flipped kernel (cf__flipped_call), added
   into dx or stored.  Where the GEMM's buffers cannot be had, the rest of the batch by the
   reference. */
static int cf__cols_f32_applies(const cf__conv_call *c) {
    return c->groups == 1 && !cf__pointwise_applies(c) && cf__has_avx512();
}
/* (a dilated 2-D convolution that kind taps takes: it skips the taps that read padding,
   where this GEMM multiplies zeros; taps measured 1.0-1.3x faster on DeepCAM's ASPP) */
static int cf__cols_f32_not_taps(const cf__conv_call *c) {
    int dilated = c->g->dil[0] > 1 || c->g->dil[1] > 1 || c->g->dil[2] > 1;
    return !(dilated && cf__taps_applies(c));
}
static int cf__cols_f32_fwd_applies(const cf__conv_call *c) {
    return cf__cols_f32_applies(c) && cf__cols_f32_not_taps(c) && c->out.c >= 32 && c->in.c * cf__kvol(c->g) >= 64;
}
/* (a stride of 2 along the width: made rows read it by vectors, where the tiles' im2col reads
   element by element; DeepCAM's 16 -> 32 entry layer) */
static int cf__cols_f32_bww_applies(const cf__conv_call *c) {
    int K = c->in.c * cf__kvol(c->g);
    return cf__cols_f32_applies(c) && cf__cols_f32_not_taps(c) &&
           ((c->out.c >= 128 && K >= 256) || (c->g->s[2] == 2 && c->out.c >= 32 && K >= 144));
}
/* y = (beta ? y : 0) + conv(x, w) for the samples of f (out: the bias and act as stored); the
   first sample the GEMM could not take, or B */
static int cf__cols_f32_sums(const cf__conv_call *f, float beta, const cf__gemm_out *out) {
    int K = f->in.c * cf__kvol(f->g), bi;
    size_t P = cf__positions(f->out);
    for (bi = 0; bi < f->B; bi++) {
        cf__col_src col = {f->x + (size_t)bi * cf_shape_size(f->in), f->in, f->out, f->g};
        cf__gemm_call yg = {0, 0, f->out.c, (int)P, K, f->w, K, NULL, 0, beta,
                            f->y + (size_t)bi * cf_shape_size(f->out), (int)P, 0, &col, 0, out};
        if (cf__gemm_f32_r(&yg)) return bi;
    }
    return f->B;
}
static void cf__cols_f32_fwd(const cf__conv_call *c) {
    cf__gemm_out out = {c->b, c->act, c->slope};
    int done = cf__cols_f32_sums(c, 0.0f, &out);
    size_t out_sz = cf_shape_size(c->out), in_sz = cf_shape_size(c->in);
    if (done == c->B) return;
    cf_ref_conv_forward(c->y + done * out_sz, c->x + done * in_sz, c->w, c->b, c->B - done, c->in, c->out, c->g, 1,
                        c->ws, c->ws_floats);
    cf_act_forward(c->y + done * out_sz, (c->B - done) * out_sz, c->act, c->slope);
}
static void cf__cols_f32_bww(const cf__conv_call *c) {   /* db: the dispatcher's */
    int K = c->in.c * cf__kvol(c->g), bi;
    size_t P = cf__positions(c->out), out_sz = cf_shape_size(c->out), in_sz = cf_shape_size(c->in);
    for (bi = 0; bi < c->B; bi++) {
        cf__col_src col = {c->x + bi * in_sz, c->in, c->out, c->g};
        cf__gemm_call dwg = {0, 1, c->out.c, K, (int)P, c->dy + bi * out_sz, (int)P, NULL, 0, 1.0f, c->dw, K, 0, &col,
                             0, NULL};
        if (cf__gemm_f32_r(&dwg)) {
            cf_ref_conv_backward_weights(c->dw, NULL, c->dy + bi * out_sz, c->x + bi * in_sz, c->B - bi, c->in,
                                         c->out, c->g, 1, c->ws, c->ws_floats);
            return;
        }
    }
}
/* (not for fewer than 1024 positions: the flipped forward's sums are long (OC kvol terms) and
   its columns few, where the reference's GEMM (w^T dy, OC terms) and col2im took cosmoflow.cfg's
   256 -> 512 at 8^3 in 15.2-15.5 ms against 19.1-19.5 here; at 16^3 this path is the faster) */
static int cf__cols_f32_bwd_applies(const cf__conv_call *c) {
    cf_geom gt;
    return cf__cols_f32_applies(c) && cf__flipped_geom(c->g, &gt) && cf__flipped_floats(c) < c->ws_floats &&
           (c->in.c >= 128 || (c->in.c >= 64 && c->in.d == 1)) && c->out.c * cf__kvol(c->g) >= 64 &&
           cf__positions(c->in) >= 1024;
}
static void cf__cols_f32_bwd(const cf__conv_call *c) {
    cf_geom gt;
    cf__conv_call f;
    int done;
    size_t in_sz = cf_shape_size(c->in), out_sz = cf_shape_size(c->out);
    cf__flipped_geom(c->g, &gt);
    cf__flip_kernel(c->ws, c->w, c->in.c, c->out.c, cf__kvol(c->g));
    f = cf__flipped_call(c, &gt);
    done = cf__cols_f32_sums(&f, c->dx_store ? 0.0f : 1.0f, NULL);
    if (done == c->B) return;
    if (c->dx_store) memset(c->dx + done * in_sz, 0, sizeof(float) * (c->B - done) * in_sz);
    cf_ref_conv_backward_data(c->dx + done * in_sz, c->dy + done * out_sz, c->w, c->B - done, c->in, c->out, c->g, 1,
                              c->ws, c->ws_floats);
}
/* ---- backward-data of a strided pointwise convolution (kind gemm; DeepCAM's 1x1 convolutions
   of stride 2 on its residual branches): dx is w^T dy at the positions the convolution reads,
   x[c][od s0][oh s1][ow s2], and zero elsewhere.  Per band of output rows, the GEMM writes
   w^T dy (C x the band's positions) into the workspace, then each dx row the band reads is
   written once: its values every s2-th element, zeros between (dx not stored: the values added
   there).  The rows no output reads are zeroed first (dx stored).  The reference runs a GEMM
   of the same sums into its im2col tiles and adds them back by col2im into a dx zeroed by the
   dispatcher: two passes over dx, element by element. */
static int cf__strided_pw_geom(const cf__conv_call *c) {   /* a 1x1 of stride above 1, no padding, no groups */
    int a;
    for (a = 0; a < 3; a++) if (c->g->k[a] != 1 || c->g->pb[a] || c->g->pa[a]) return 0;
    return c->groups == 1 && !cf__pointwise_applies(c);
}
static int cf__strided_pw_applies(const cf__conv_call *c) {
    return cf__strided_pw_geom(c) && cf__has_avx512() && (size_t)c->in.c * c->out.w <= c->ws_floats;
}
/* dx row (id, ih) of channel c read by no output: zeroed */
static int cf__strided_pw_unread(const cf__conv_call *c, int id, int ih) {
    const cf_geom *g = c->g;
    return id % g->s[0] || ih % g->s[1] || id / g->s[0] >= c->out.d || ih / g->s[1] >= c->out.h;
}
/* output rows r0 .. r0 + nr of a sample (v: C x nr out.w values) into its dx; round: each dx
   row written rounded to bf16 (after the add, as the bf16 GEMM rounds C) */
static void cf__strided_pw_rows(const cf__conv_call *c, float *dx, const float *v, int r0, int nr,
                                void (*round)(float *, size_t)) {
    const cf_geom *g = c->g;
    int ch;
    size_t n = (size_t)nr * c->out.w;
    CF__OMP(omp parallel for schedule(static))
    for (ch = 0; ch < c->in.c; ch++) {
        int r, ow;
        for (r = r0; r < r0 + nr; r++) {
            int od = r / c->out.h, oh = r % c->out.h;
            size_t row = (size_t)od * g->s[0] * c->in.h + (size_t)oh * g->s[1];   /* (the input row it reads) */
            float *d = dx + (size_t)ch * cf__positions(c->in) + row * c->in.w;
            const float *s = v + (size_t)ch * n + (size_t)(r - r0) * c->out.w;
            if (c->dx_store) memset(d, 0, sizeof(float) * c->in.w);
            for (ow = 0; ow < c->out.w; ow++) d[(size_t)ow * g->s[2]] += s[ow];
            if (round) round(d, (size_t)c->in.w);
        }
    }
}
/* dx's rows no output reads, zeroed (dx stored) */
static void cf__strided_pw_zero(const cf__conv_call *c, float *dx) {
    int ch;
    CF__OMP(omp parallel for schedule(static))
    for (ch = 0; ch < c->in.c; ch++) {
        int id, ih;
        for (id = 0; id < c->in.d; id++)
            for (ih = 0; ih < c->in.h; ih++)
                if (cf__strided_pw_unread(c, id, ih))
                    memset(dx + (size_t)ch * cf__positions(c->in) + ((size_t)id * c->in.h + ih) * c->in.w, 0,
                           sizeof(float) * c->in.w);
    }
}
/* The band loop of both precisions' paths: per sample, dx's unread rows zeroed (dx stored),
   then per band of output rows v (C x n fp32 sums, v_floats at most) = w^T dy over the band's
   n positions (dy read as stored: 16 bits when c->half) by gemm, whose buffers are ws's first
   (the bf16 GEMM's), added into dx by cf__strided_pw_rows (round: each dx row rounded) */
typedef void (*cf__strided_pw_gemm)(const cf__gemm_call *g, float *gws);
static void cf__strided_pw_bands(const cf__conv_call *c, float *v, size_t v_floats, cf__strided_pw_gemm gemm,
                                 void (*round)(float *, size_t)) {
    int C = c->in.c, rows = c->out.d * c->out.h, band, bi, r0, h = c->half ? CF__GEMM_HALF_B : 0;
    size_t P = cf__positions(c->out), fit = v_floats / ((size_t)C * c->out.w);   /* (output rows v holds) */
    band = fit < (size_t)rows ? (int)fit : rows;
    for (bi = 0; bi < c->B; bi++) {
        float *dx = c->dx + (size_t)bi * cf_shape_size(c->in);
        if (c->dx_store) cf__strided_pw_zero(c, dx);
        for (r0 = 0; r0 < rows; r0 += band) {
            int nr = rows - r0 < band ? rows - r0 : band, n = nr * c->out.w;
            cf__gemm_call g = {1, 0, C, n, c->out.c, c->w, C,
                               cf__elt(c->dy, c->half, (size_t)bi * cf_shape_size(c->out) + (size_t)r0 * c->out.w),
                               (int)P, 0.0f, v, n, 0, NULL, h, NULL};
            gemm(&g, c->ws);
            cf__strided_pw_rows(c, dx, v, r0, nr, round);
        }
    }
}
/* the fp32 GEMM, or the BLAS where it cannot run */
static void cf__strided_pw_gemm_f32(const cf__gemm_call *g, float *gws) {
    (void)gws;
    if (cf__gemm_f32_r(g)) cf__sgemm_fp32(1, 0, g->M, g->N, g->K, g->A, g->lda, g->B, g->ldb, 0.0f, g->C, g->ldc);
}
static void cf__strided_pw_bwd(const cf__conv_call *c) {
    cf__strided_pw_bands(c, c->ws, c->ws_floats, cf__strided_pw_gemm_f32, NULL);
}
/* ---- backward-weights on rows of positions, stride 1 along the width (kind direct in fp32,
   kind bf16 on bf16 operands): dw[oc][c][kd][kh][kw] += sum over output positions p of
   dy[oc][p] x[c][p's tap (kd, kh, kw)].  Along an output row the taps of one (c, kd, kh) read
   one input row, shifted by kw dil - pb: a vector of dy's row times the input row's vector
   read kw dil elements further along adds 16 (fp32) or 32 (bf16: vdpbf16ps on pairs of
   neighbouring positions) of the sum's products.  No im2col, no packing, no transposition:
   the taps path packs 108 rows of im2col for every 256 positions of CosmoFlow's first conv,
   as much work as its GEMM does.  A work item is a band of output rows of one plane od of one
   sample: its dy rows (OC a row) and the input rows its taps read (C x KD x (band + (KH - 1))
   rows, zeros in the padding) copied (bf16: rounded) into the thread's buffers, each row to a
   multiple of 32 positions (zeros past its end); then for each block of 8 filters (its dy
   rows, 8 x band x OWp values, read from the L2 cache) and each tap row (c, kd, kh), 8 x 3
   accumulators (3 taps kw at a time) summed over the band's positions, reduced lane by lane
   and added into the thread's dw.  The taps kd that put a plane in the padding are skipped.
   As the taps path, each thread sums its items (dealt statically) into its own dw, added into
   dw in thread order at the end.  Where: rows of 64 positions or more (a band of rows of 32
   sums too few positions between reductions: CosmoFlow's 32^3 conv in bf16 ran 0.8-0.9x the
   taps path), no dilation (taps skips the rows that read padding: DeepCAM's ASPP in bf16 ran
   0.8-0.9x it); docs/performance.md has the figures. */
#define CF__ROWS_BAND_POSITIONS 4096   /* a band's positions, at least (OWp x band) */
/* (each accumulator named by a constant: indexed by a variable, GCC keeps a[][] in memory) */
#define CF__ROWS_ZERO(a) {                                                                                            \
        a[0][0] = a[1][0] = a[2][0] = a[3][0] = a[4][0] = a[5][0] = a[6][0] = a[7][0] = _mm512_setzero_ps();          \
        a[0][1] = a[1][1] = a[2][1] = a[3][1] = a[4][1] = a[5][1] = a[6][1] = a[7][1] = _mm512_setzero_ps();          \
        a[0][2] = a[1][2] = a[2][2] = a[3][2] = a[4][2] = a[5][2] = a[6][2] = a[7][2] = _mm512_setzero_ps(); }
/* the 8 x 3 accumulators' lanes summed into dw0[o K + j] for the block's filters o < no and taps j < nk */
#define CF__ROWS_DW(o, j) if (o < no && j < nk) dw0[(size_t)o * K + j] += _mm512_reduce_add_ps(a[o][j]);
#define CF__ROWS_DW3(o) CF__ROWS_DW(o, 0) CF__ROWS_DW(o, 1) CF__ROWS_DW(o, 2)
#define CF__ROWS_FLUSH(at) {                                                                                          \
        float *dw0 = (at);                                                                                            \
        CF__ROWS_DW3(0) CF__ROWS_DW3(1) CF__ROWS_DW3(2) CF__ROWS_DW3(3)                                               \
        CF__ROWS_DW3(4) CF__ROWS_DW3(5) CF__ROWS_DW3(6) CF__ROWS_DW3(7) }
/* a band's rows and buffers for values of esize bytes (4: fp32, 2: bf16) */
typedef struct { int OWp, band, XR, XW; size_t dy_floats, per; } cf__rows_bww_shape;
/* (bands of band rows: at most out.h) */
static cf__rows_bww_shape cf__rows_bww_shape_band(const cf__conv_call *c, int esize, int band) {
    cf__rows_bww_shape s;
    const cf_geom *g = c->g;
    s.OWp = (c->out.w + 31) / 32 * 32;
    s.band = band < c->out.h ? band : c->out.h;
    s.XR = (s.band - 1) * g->s[1] + g->k[1];   /* input rows a band's taps read (no dilation) */
    s.XW = (s.OWp + (g->k[2] + 2) / 3 * 3 - 1 + 31) / 32 * 32;   /* an input row's values: 3 taps a block */
    s.dy_floats = (size_t)c->out.c * s.band * s.OWp * esize / 4;
    s.per = (size_t)c->out.c * c->in.c * cf__kvol(g) + 16 + s.dy_floats +
            (size_t)c->in.c * g->k[0] * s.XR * s.XW * esize / 4;   /* floats: dw, the band's dy rows and x rows */
    return s;
}
static cf__rows_bww_shape cf__rows_bww_shape_of(const cf__conv_call *c, int esize) {
    int OWp = (c->out.w + 31) / 32 * 32;
    return cf__rows_bww_shape_band(c, esize, (CF__ROWS_BAND_POSITIONS + OWp - 1) / OWp);
}
static int cf__rows_bww_fits(const cf__conv_call *c, int esize) {
    const cf_geom *g = c->g;
    int dilated = g->dil[0] > 1 || g->dil[1] > 1 || g->dil[2] > 1;
    return c->groups == 1 && g->s[2] == 1 && c->out.w >= 64 && !dilated && !cf__pointwise_applies(c) &&
           (size_t)cf__nthreads() * cf__rows_bww_shape_of(c, esize).per <= c->ws_floats;
}
/* one item into dwt: sample bi, plane od, output rows oh0 .. oh0 + nb; dyb, xb the thread's
   buffers; fma: the bf16 dot step's form */
typedef void (*cf__rows_bww_item_fn)(float *dwt, void *dyb, void *xb, const cf__conv_call *c,
                                     const cf__rows_bww_shape *s, int bi, int od, int oh0, int nb, int fma);
static void cf__rows_bww_run(const cf__conv_call *c, int esize, cf__rows_bww_item_fn item, int fma) {
    cf__rows_bww_shape s = cf__rows_bww_shape_of(c, esize);
    int K = c->in.c * cf__kvol(c->g), OC = c->out.c, nth = cf__nthreads(), z;
    int bands = (c->out.h + s.band - 1) / s.band;
    long items = (long)c->B * c->out.d * bands, t;
    size_t i;
    for (z = 0; z < nth; z++) memset(c->ws + s.per * z, 0, sizeof(float) * K * OC);   /* every thread's */
    CF__OMP(omp parallel num_threads(nth))
    {
        float *dwt = c->ws + s.per * cf__thread_id(), *dyb = cf__line_aligned(dwt + (size_t)K * OC);
        CF__OMP(omp for schedule(static))
        for (t = 0; t < items; t++) {
            int bi = (int)(t / ((long)c->out.d * bands)), od = (int)(t / bands % c->out.d);
            int oh0 = (int)(t % bands) * s.band, nb = c->out.h - oh0 < s.band ? c->out.h - oh0 : s.band;
            item(dwt, dyb, dyb + s.dy_floats, c, &s, bi, od, oh0, nb, fma);
        }
    }
    CF__OMP(omp parallel for schedule(static))
    for (i = 0; i < (size_t)OC * K; i++) {   /* dw += each thread's, in thread order */
        int th;
        for (th = 0; th < nth; th++) c->dw[i] += c->ws[s.per * th + i];
    }
}
/* fp32: one band's dy rows (dyb[oc][r], OWp floats) and input rows (xb[c][kd][r], XW floats,
   element e the input's w = e - pb, zeros outside the input) */
static void cf__rows_f32_fill(float *dyb, float *xb, const cf__conv_call *c, const cf__rows_bww_shape *s, int bi,
                              int od, int oh0, int nb) {
    const cf_geom *g = c->g;
    int W = c->in.w, OW = c->out.w, pb = g->pb[2], ch, r, kd;
    size_t P = cf__positions(c->out), Pin = cf__positions(c->in);
    for (ch = 0; ch < c->out.c; ch++)
        for (r = 0; r < nb; r++) {
            float *d = dyb + ((size_t)ch * s->band + r) * s->OWp;
            size_t at = ((size_t)bi * c->out.c + ch) * P + ((size_t)od * c->out.h + oh0 + r) * OW;
            memcpy(d, c->dy + at, sizeof(float) * OW);
            memset(d + OW, 0, sizeof(float) * (s->OWp - OW));
        }
    for (ch = 0; ch < c->in.c; ch++)
        for (kd = 0; kd < g->k[0]; kd++)
            for (r = 0; r < s->XR; r++) {
                int id = od * g->s[0] - g->pb[0] + kd, ih = oh0 * g->s[1] - g->pb[1] + r;
                float *d = xb + (((size_t)ch * g->k[0] + kd) * s->XR + r) * s->XW;
                memset(d, 0, sizeof(float) * s->XW);
                if (id >= 0 && id < c->in.d && ih >= 0 && ih < c->in.h)   /* (what the row holds of it) */
                    memcpy(d + pb, c->x + ((size_t)bi * c->in.c + ch) * Pin + ((size_t)id * c->in.h + ih) * W,
                           sizeof(float) * (W < s->XW - pb ? W : s->XW - pb));
            }
}
/* the band's sums into dwt (OC x K) for the filters oc0 .. oc0 + 8 and tap row tr = (ch, kd,
   kh): per 16 positions 3 loads of x (taps kw0 .. kw0 + 2, read past KW into the row's slack
   where KW is not a multiple of 3, unstored), 8 of dy, 24 FMAs; the lanes past the row's OW
   positions masked off (their dy is zero, but 0 x an infinite x would be NaN where the
   reference adds nothing) */
CF__F32_TARGET static void cf__rows_f32_block(float *dwt, const float *dyb, const float *xb, const cf__conv_call *c,
                                              const cf__rows_bww_shape *s, int nb, int oc0, int tr) {
    int KW = c->g->k[2], K = c->in.c * cf__kvol(c->g), no = c->out.c - oc0 < 8 ? c->out.c - oc0 : 8;
    int kh = tr % c->g->k[1], kdc = tr / c->g->k[1], kw0, r, p, o;   /* kdc = ch KD + kd: xb's block of rows */
    for (kw0 = 0; kw0 < KW; kw0 += 3) {
        int nk = KW - kw0 < 3 ? KW - kw0 : 3;
        __m512 a[8][3];
        CF__ROWS_ZERO(a)
        for (r = 0; r < nb; r++) {
            const float *xr = xb + ((size_t)kdc * s->XR + (size_t)r * c->g->s[1] + kh) * s->XW + kw0, *d[8];
            for (o = 0; o < 8; o++)   /* the block's dy rows r (the last block repeats a row, unstored) */
                d[o] = dyb + ((size_t)(oc0 + (o < no ? o : 0)) * s->band + r) * s->OWp;
            for (p = 0; p < c->out.w; p += 16) {
                __m512 x0 = _mm512_loadu_ps(xr + p), x1 = _mm512_loadu_ps(xr + p + 1), x2 = _mm512_loadu_ps(xr + p + 2);
                __mmask16 m = cf__lanes(c->out.w - p);
#define CF__FV(o) {                                                                                                   \
        __m512 y = _mm512_loadu_ps(d[o] + p);                                                                         \
        CF__IN_REGISTER(y);                                                                                           \
        a[o][0] = _mm512_mask3_fmadd_ps(y, x0, a[o][0], m);                                                           \
        a[o][1] = _mm512_mask3_fmadd_ps(y, x1, a[o][1], m);                                                           \
        a[o][2] = _mm512_mask3_fmadd_ps(y, x2, a[o][2], m); }
                CF__FV(0) CF__FV(1) CF__FV(2) CF__FV(3) CF__FV(4) CF__FV(5) CF__FV(6) CF__FV(7)
#undef CF__FV
            }
        }
        CF__ROWS_FLUSH(dwt + (size_t)oc0 * K + (size_t)tr * KW + kw0)
    }
}
static void cf__rows_f32_item(float *dwt, void *dyb, void *xb, const cf__conv_call *c, const cf__rows_bww_shape *s,
                              int bi, int od, int oh0, int nb, int fma) {
    int oc0, tr, T = c->in.c * c->g->k[0] * c->g->k[1];
    (void)fma;
    cf__rows_f32_fill((float *)dyb, (float *)xb, c, s, bi, od, oh0, nb);
    for (oc0 = 0; oc0 < c->out.c; oc0 += 8)
        for (tr = 0; tr < T; tr++) {
            int id = od * c->g->s[0] - c->g->pb[0] + tr / c->g->k[1] % c->g->k[0];
            if (id >= 0 && id < c->in.d)   /* (else its rows all zeros) */
                cf__rows_f32_block(dwt, (const float *)dyb, (const float *)xb, c, s, nb, oc0, tr);
        }
}
/* fp32 with at most 32 input channels: with more, the GEMM's sums reuse each packed value for
   more of them (DeepCAM's decoder, 256 channels: this kernel 0.78x the fp32 GEMM; CosmoFlow's
   first conv, 4 channels: 1.2x the tiles path) */
static int cf__rows_f32_bww_applies(const cf__conv_call *c) {
    return cf__has_avx512() && c->in.c <= 32 && cf__rows_bww_fits(c, 4);
}
static void cf__rows_f32_bww(const cf__conv_call *c) {   /* db: the dispatcher's */
    cf__rows_bww_run(c, 4, cf__rows_f32_item, 0);
}
/* Where the BLAS runs no AVX-512 kernels, what no other path takes: the reference's im2col
   loops (section 3) with this GEMM in place of the BLAS's (under OpenBLAS's SSE fallback its
   strided and small convolutions ran at a quarter of oneDNN's speed, docs/performance.md) */
static int cf__im2col_f32_applies(const cf__conv_call *c) {
    size_t col_row = (size_t)(c->in.c / c->groups) * cf__kvol(c->g);   /* (the reference's least workspace) */
    return cf__has_avx512() && !cf__blas_runs_avx512() && c->ws_floats >= col_row;
}
static void cf__im2col_f32_fwd(const cf__conv_call *c) {
    cf__im2col_gemm_forward(c->y, c->x, c->w, c->b, c->B, c->in, c->out, c->g, c->groups, c->ws, c->ws_floats,
                       cf__sgemm_avx512);
    cf_act_forward(c->y, (size_t)c->B * cf_shape_size(c->out), c->act, c->slope);
}
static void cf__im2col_f32_bww(const cf__conv_call *c) {   /* db: the dispatcher's */
    cf__im2col_gemm_backward_weights(c->dw, c->dy, c->x, c->B, c->in, c->out, c->g, c->groups, c->ws,
                                     c->ws_floats,
                                cf__sgemm_avx512);
}
static void cf__im2col_f32_bwd(const cf__conv_call *c) {
    cf__im2col_gemm_backward_data(c->dx, c->dy, c->w, c->B, c->in, c->out, c->g, c->groups, c->ws,
                                  c->ws_floats,
                             cf__sgemm_avx512);
}
#endif /* CF__AVX512 */
#ifndef CF_REFERENCE
/* the tiles' im2col (called inside their parallel region): by made rows where a stride of 2
   along the width is read by vectors (DeepCAM's strided layers, the bf16 tiles 1.1-1.4x), else
   section 3's; the same values */
static void cf__tile_im2col(float *col, const float *x, int C, cf_shape in, cf_shape out, const cf_geom *g, size_t p0,
                            size_t n) {
#ifdef CF__AVX512
    if (g->s[2] == 2 && cf__has_avx512()) {
        int r;
        for (r = 0; r < C * cf__kvol(g); r++) cf__made_row(col + (size_t)r * n, x, r, in, out, g, p0, n);
        return;
    }
#endif
    cf__im2col(col, x, C, in, out, g, p0, n);
}
#endif
#if !defined(CF__AVX512) && !defined(CF_REFERENCE)
static int cf__gemm_ours(void) { return 0; }
static void cf__sgemm_tiles(int tA, int tB, int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                            float beta, float *C, int ldc) {
    cf__sgemm_fp32(tA, tB, M, N, K, A, lda, B, ldb, beta, C, ldc);
}
#endif

/* ---- bf16 (kind "bf16"): the convolutions of a bf16 network (cf_net_set_precision) on the
   CPU's vdpbf16ps, which multiplies 16 pairs of bf16 by 16 pairs and adds both products of
   each pair to an fp32 lane: acc + a_odd b_odd + a_even b_even, the products exact (8-bit
   mantissas), the additions rounded to nearest even; or on the same pairs widened to fp32 and
   two FMAs, the same bits, where the CPU's vdpbf16ps is slower than its FMA (the dot step,
   below).  Operands are bf16 values, held in fp32
   (the network rounds them, section 6) or in 16 bits (section 9, halves); the packing into
   pairs rounds with vcvtne2ps2bf16, which keeps a bf16 value as it is (and rounds the
   network's input, which the plan may hand over unrounded).  They are paired along the sum:
   two input rows interleaved (the direct kernel) or two rows of op(A) and op(B) (the GEMM).
   The output is the fp32 sum; the layer rounds it when it stores it.  The emulation (the fp32
   paths on the same operands) computes the same sums in another order (tests/test_core.c,
   test_bf16).  Compiled where GCC or Clang targets x86-64 with AVX-512 available, chosen at run
   time when the CPU has AVX512_BF16. */
#ifdef CF__BF16
static int cf__has_bf16(void) {   /* (every CPU with AVX512_BF16 has the 16-bit loads and stores of BW and VL) */
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bf16") ? 1 : 0;
}
CF__INLINE uint32_t cf__bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
/* one vdpbf16ps pair of two bf16 values held in fp32: a in the low half, b in the high */
CF__INLINE uint32_t cf__pair(float a, float b) { return (cf__bits(a) >> 16) | (cf__bits(b) & 0xffff0000u); }

/* ---- the dot step, in two forms, each kernel compiled in both (the form read once a call:
   cf__bf16_fma, section 4).  A pair word holds the even element of a pair in its low 16 bits,
   the odd in its high 16 bits.  The dot form is vdpbf16ps: per lane acc + a_odd b_odd, then
   + a_even b_even (Intel SDM), each product exact and each addition rounded to nearest even,
   with denormal inputs and results flushed to zero (DAZ, FTZ, whatever MXCSR says).  The FMA
   form widens the pairs to fp32 in registers (odd = word & 0xffff0000, even = word << 16) and
   does acc = fma(odd_a, odd_b, acc), then acc = fma(even_a, even_b, acc): the same bits
   wherever no operand, product or sum is a denormal (tests/test_core.c, test_bf16_forms); where
   one is, the FMA form keeps it (IEEE) and vdpbf16ps flushes it (a denormal is below 2^-126,
   1.2e-38: where a run meets one, the forms may part in that sum).  Why two: vdpbf16ps does
   32 multiply-adds an instruction, an FMA 16, but some CPUs issue vdpbf16ps at less than half
   the FMA's rate (an Intel Xeon: 63.2 against 87.9 GFLOP/s a core), where the FMA form is the
   faster.  The loaded operand (x) is widened once a vector, shared by all the output channels
   of a block; the broadcast operand (w, one weight or row value a channel) is kept widened in
   memory, two floats (odd, even) a pair, each broadcast straight into its FMA: per pair of a
   block of 8 channels x 32 positions, 2 loads, 16 broadcasts (load-port work), 4 widening
   instructions, 32 FMAs; against 2 loads, 8 broadcasts, 16 vdpbf16ps. */
typedef struct { __m512i p; __m512 odd, even; } cf__pairs_x;   /* 16 pair words, and widened (FMA form) */
CF__BF16_TARGET CF__INLINE cf__pairs_x cf__pairs_x_of(__m512i p, int fma) {
    cf__pairs_x x;
    x.p = p;
    x.odd = x.even = _mm512_setzero_ps();
    if (fma) {
        x.odd = _mm512_castsi512_ps(_mm512_and_si512(p, _mm512_set1_epi32((int)0xffff0000u)));
        x.even = _mm512_castsi512_ps(_mm512_slli_epi32(p, 16));
    }
    return x;
}
/* acc + the pairs of x times the pair w: w[0] a pair word (dot form) or w[0], w[1] its odd and
   even halves widened (FMA form: cf__widen_pairs) */
CF__BF16_TARGET CF__INLINE __m512 cf__dot_step(__m512 acc, const cf__pairs_x *x, const uint32_t *w, int fma) {
    if (fma) {
        float odd, even;
        memcpy(&odd, w, 4); memcpy(&even, w + 1, 4);
        return _mm512_fmadd_ps(x->even, _mm512_set1_ps(even), _mm512_fmadd_ps(x->odd, _mm512_set1_ps(odd), acc));
    }
    {
        uint32_t pair;   /* (w may be a 16-bit tensor's two values: cf__gemm_bf16_a_where) */
        memcpy(&pair, w, 4);
        return _mm512_dpbf16_ps(acc, (__m512bh)x->p, (__m512bh)_mm512_set1_epi32((int)pair));
    }
}
/* n pair words p widened for the FMA form: to[2i] = the odd half of p[i] as an fp32 word,
   to[2i + 1] the even half */
CF__BF16_TARGET static void cf__widen_pairs(uint32_t *to, const uint32_t *p, size_t n) {
    const __m512i lo = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0),
        hi = _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8);
    size_t i;
    for (i = 0; i < n; i += 16) {
        int m = n - i < 16 ? (int)(n - i) : 16;
        cf__pairs_x x = cf__pairs_x_of(_mm512_maskz_loadu_epi32(cf__lanes(m), p + i), 1);
        __m512i o = _mm512_castps_si512(x.odd), e = _mm512_castps_si512(x.even);
        _mm512_mask_storeu_epi32(to + 2 * i, cf__lanes(2 * m), _mm512_permutex2var_epi32(o, lo, e));
        _mm512_mask_storeu_epi32(to + 2 * i + 16, cf__lanes(2 * m - 16), _mm512_permutex2var_epi32(o, hi, e));
    }
}
/* The probe: the core's rates of vdpbf16ps and of fp32 FMA, GFLOP/s a core counting a
   multiply-add as 2, as cf-bench --check-blas measures them (12 independent chains in
   registers), here 5 rounds of each of about 0.15 ms, alternated, the best of each kept; once
   a process, at the first call (about 2 ms; the loser of a race waits for the winner's). */
#define CF__PROBE_CHAINS(op, x, n)                                                                                    \
    __m512 a[12];                                                                                                     \
    int i;                                                                                                            \
    long k;                                                                                                           \
    double t;                                                                                                         \
    for (i = 0; i < 12; i++) a[i] = _mm512_setzero_ps();                                                              \
    t = cf__seconds();                                                                                                \
    for (k = 0; k < n; k++) { for (i = 0; i < 12; i++) a[i] = op; __asm__ volatile("" : "+v"(x)); }                   \
    t = cf__seconds() - t;                                                                                            \
    for (i = 1; i < 12; i++) a[0] = _mm512_add_ps(a[0], a[i]);                                                        \
    cf__probe_sink = _mm512_reduce_add_ps(a[0]);
static volatile float cf__probe_sink;
static double cf__seconds(void) {
#ifdef _OPENMP
    return omp_get_wtime();
#else
    return (double)clock() / CLOCKS_PER_SEC;   /* (one thread: its processor time) */
#endif
}
CF__BF16_TARGET static double cf__probe_fma(long n) {
    __m512 x = _mm512_set1_ps(1.0001f), y = _mm512_set1_ps(0.999f);
    CF__PROBE_CHAINS(_mm512_fmadd_ps(a[i], x, y), x, n)
    return t > 0 ? 12.0 * n * 16 * 2 / t / 1e9 : 0.0;
}
CF__BF16_TARGET static double cf__probe_dot(long n) {
    __m512bh x = (__m512bh)_mm512_set1_epi32(0x3f803f80), y = (__m512bh)_mm512_set1_epi32(0x3c003c00);
    CF__PROBE_CHAINS(_mm512_dpbf16_ps(a[i], x, y), x, n)
    return t > 0 ? 12.0 * n * 32 * 2 / t / 1e9 : 0.0;
}
#undef CF__PROBE_CHAINS
static double cf__bf16_rate[2];   /* vdpbf16ps, FMA */
static int cf__bf16_probed;       /* 0, 1 while one thread measures, 2 */
static void cf__bf16_rates(double *dot, double *fma) {
    int zero = 0, r;
    if (__atomic_load_n(&cf__bf16_probed, __ATOMIC_ACQUIRE) != 2) {
        if (__atomic_compare_exchange_n(&cf__bf16_probed, &zero, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
            double d = 0, f = 0;
            cf__probe_fma(200000);   /* (the vector units woken up first) */
            for (r = 0; r < 5; r++) {
                double fr = cf__probe_fma(100000), dr = cf__probe_dot(100000);
                if (fr > f) f = fr;
                if (dr > d) d = dr;
            }
            cf__bf16_rate[0] = d; cf__bf16_rate[1] = f;
            __atomic_store_n(&cf__bf16_probed, 2, __ATOMIC_RELEASE);
        } else
            while (__atomic_load_n(&cf__bf16_probed, __ATOMIC_ACQUIRE) != 2) {}
    }
    *dot = cf__bf16_rate[0]; *fma = cf__bf16_rate[1];
}

/* ---- the GEMM: C (M x N) = beta C + op(A) op(B), op(A) M x K, op(B) K x N, beta 0 or 1.
   K is taken in pairs, q = k / 2 (an odd K gets a zero).  A task is a block of up to 384
   columns of C and a part of the pairs; it runs through its part in chunks of at most 384
   pairs, all of one length (432 pairs as 216 + 216: a short last chunk would load and store C
   for few pairs), packing op(B)'s chunk once as Bp[q][j] = (op(B)[2q][n0+j],
   op(B)[2q+1][n0+j]) in panels of 32 columns (cf__bp; 576 KB at most), then, 128 rows of C
   at a time, op(A)'s chunk as Ap[m][q] = (op(A)[m][2q], op(A)[m][2q+1]) (192 KB): both stay in
   the core's 1 MB cache while the rows read them.  (When several column blocks would pack the same op(A), it is packed
   whole beforehand and the tasks read it in place.)  A chunk that long (768 terms) makes a
   sum over DeepCAM's 728 channels one chunk, so C is stored once instead of three times:
   10-15 % faster than chunks of 128 pairs on its pointwise GEMMs (docs/performance.md).  The
   micro-kernel keeps an 8 x 32 block of C in 16 registers: per pair q, two loads of Bp, eight
   broadcasts of Ap, sixteen vdpbf16ps (the FMA form: 16 broadcasts, 4 widenings, 32 FMAs).  A long
   K (a backward-weights sum over positions) is cut into parts of 4096 pairs that the threads
   take apart, each into its own partial C; the partials are added in part order, so the
   result does not depend on the number of threads.  Outside a parallel region the tasks are
   shared out between the threads. */
#define CF__GEMM_MB 128
#define CF__GEMM_NB 384
#define CF__GEMM_KC 384
#define CF__GEMM_KPART 4096
/* floats in a made row: a chunk's positions (op(B) = col^T), or a block's columns (op(B) = col) */
#define CF__COL_ROW (2 * CF__GEMM_KC)
/* pairs (x[t], x[t + 1]) for t = 0, 2, .. 30, x[t] read only for lo <= t < hi (zero elsewhere) */
CF__BF16_TARGET static __m512i cf__pairs16_within(const float *x, int lo, int hi) {
    __m512 a = _mm512_maskz_loadu_ps(cf__lanes(hi) & (__mmask16)~cf__lanes(lo), x);
    __m512 b = _mm512_maskz_loadu_ps(cf__lanes(hi - 16) & (__mmask16)~cf__lanes(lo - 16), x + 16);
    return (__m512i)_mm512_cvtne2ps_pbh(b, a);
}
/* 16 floats rounded to bf16 and back by vcvtneps2bf16, which rounds as vcvtne2ps2bf16 does
   (one source instead of two): as cf_bf16_from_f32 (test_core checks it on 2^24 inputs,
   make test-bf16 on all 2^32) */
CF__BF16_TARGET static __m512 cf__round16_bf16(__m512 z) {
    __m256i h = (__m256i)_mm512_cvtneps_pbh(z);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
/* the pairs (x[2i], x[2i+1]) of up to 32 floats of a row, as 16 lanes; floats past n are zero.
   vcvtne2ps2bf16 keeps a bf16 value as it is, so on the bf16 values the GEMM is given it is
   cf__pair, a vector at a time. */
CF__BF16_TARGET static __m512i cf__pairs16(const float *x, int n) { return cf__pairs16_within(x, 0, n); }
/* the pairs (a[i], b[i]) of up to 16 columns of two rows (a or b NULL: zeros), as 16 lanes:
   both rows rounded to bf16 by one vcvtne2ps2bf16 (a's in the low 16 words, b's in the high),
   then interleaved, a's word below b's; cf__pair a vector at a time on bf16 values, and on
   floats not yet rounded (the network's input, section 9) their rounding as they are read */
CF__BF16_TARGET static __m512i cf__pairs16_rows(const float *a, const float *b, int n) {
    const __m512i mix = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8,
                                         23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    __m512 va = a ? _mm512_maskz_loadu_ps(cf__lanes(n), a) : _mm512_setzero_ps(),
        vb = b ? _mm512_maskz_loadu_ps(cf__lanes(n), b) : _mm512_setzero_ps();
    return _mm512_permutexvar_epi16(mix, (__m512i)_mm512_cvtne2ps_pbh(vb, va));
}
/* ---- tensors the memory plan stores in 16 bits (section 9, "halves"): element i of such a
   tensor is ((const cf_bf16 *)base)[i], the upper half of the fp32 word the kernels compute
   with.  Loaded by widening (a shift), stored by keeping the upper half (exact on bf16 values). */
CF__INLINE __mmask32 cf__lanes32(int n) { return (__mmask32)(n >= 32 ? 0xffffffffu : n <= 0 ? 0u : (1u << n) - 1u); }
/* lanes k of 16 16-bit elements at p, each in the low half of a 32-bit lane (0 elsewhere) */
CF__BF16_TARGET static __m512i cf__widen_half(const cf_bf16 *p, __mmask16 k) {
    return _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(k, p));
}
/* the same as floats: the 16 bits moved up */
CF__BF16_TARGET static __m512 cf__load_half(const cf_bf16 *p, __mmask16 k) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(cf__widen_half(p, k), 16));
}
/* lanes k of v, bf16 values, stored at p in 16 bits */
CF__BF16_TARGET static void cf__store_half(cf_bf16 *p, __mmask16 k, __m512 v) {
    _mm512_mask_cvtepi32_storeu_epi16(p, k, _mm512_srli_epi32(_mm512_castps_si512(v), 16));
}
/* cf__pairs16_rows on two 16-bit rows: a's elements in the low halves, b's in the high */
CF__BF16_TARGET static __m512i cf__pairs16_rows_half(const cf_bf16 *a, const cf_bf16 *b, int n) {
    __m512i lo = a ? cf__widen_half(a, cf__lanes(n)) : _mm512_setzero_si512();
    __m512i hi = b ? _mm512_slli_epi32(cf__widen_half(b, cf__lanes(n)), 16) : _mm512_setzero_si512();
    return _mm512_or_si512(lo, hi);
}
/* cf__pairs16_within and cf__pairs16 on a 16-bit row: the pairs (x[t], x[t+1]) are its 32-bit
   words as they lie */
CF__BF16_TARGET static __m512i cf__pairs16_within_half(const cf_bf16 *x, int lo, int hi) {
    return _mm512_maskz_loadu_epi16(cf__lanes32(hi) & (__mmask32)~cf__lanes32(lo), x);
}
CF__BF16_TARGET static __m512i cf__pairs16_half(const cf_bf16 *x, int n) { return cf__pairs16_within_half(x, 0, n); }

/* 16 x 16 transpose of 32-bit lanes: lane j of r[i] goes to lane i of r[j].  Three rounds:
   interleave 32-bit lanes of row pairs, then 64-bit lanes, then move 128-bit quarters twice. */
CF__BF16_TARGET static void cf__transpose16(__m512i r[16]) {
    __m512i t[16];
    int i;
    for (i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
    for (i = 0; i < 16; i += 4) {
        r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]); r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
        r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]); r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    for (i = 0; i < 4; i++) {
        t[i] = _mm512_shuffle_i32x4(r[i], r[i + 4], 0x88); t[i + 4] = _mm512_shuffle_i32x4(r[i], r[i + 4], 0xdd);
        t[i + 8] = _mm512_shuffle_i32x4(r[i + 8], r[i + 12], 0x88);
        t[i + 12] = _mm512_shuffle_i32x4(r[i + 8], r[i + 12], 0xdd);
    }
    for (i = 0; i < 8; i++) {
        r[i] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0x88);
        r[i + 8] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0xdd);
    }
}
/* Ap[m][q - q0], nq pairs from q0; half: A (not transposed) is stored in 16 bits */
CF__BF16_TARGET static void cf__pack_a(uint32_t *Ap, int tA, const float *A, int half, int lda, int M, int K, int q0,
                                       int nq) {
    int m, q;
    /* op(A)'s row m is a row of A: its pairs are adjacent floats (adjacent 16-bit values: a 32-bit word) */
    if (!tA) {
        for (m = 0; m < M; m++)
            for (q = 0; q < nq; q += 16) {
                int k = 2 * (q0 + q);
                _mm512_mask_storeu_epi32(Ap + (size_t)m * nq + q, cf__lanes(nq - q),
                                         half ? cf__pairs16_half((const cf_bf16 *)(const void *)A + (size_t)m * lda + k,
                                                                 K - k) : cf__pairs16(A + (size_t)m * lda + k, K - k));
            }
        return;
    }
    CF_ASSERT(!half);   /* (op(A) = A^T is never stored in 16 bits) */
    for (m = 0; m < M; m += 16)   /* op(A)[m][k] = A[k][m]: two rows of A give 16 columns' pairs, transposed */
        for (q = 0; q < nq; q += 16) {
            __m512i r[16];
            int i;
            for (i = 0; i < 16; i++) {
                int k = 2 * (q0 + q + i);
                r[i] = q + i < nq ? cf__pairs16_rows(A + (size_t)k * lda + m, k + 1 < K ? A + (size_t)(k + 1) * lda + m
                                                     : NULL, M - m) : _mm512_setzero_si512();
            }
            cf__transpose16(r);
            for (i = 0; i < 16 && m + i < M; i++)
                _mm512_mask_storeu_epi32(Ap + (size_t)(m + i) * nq + q, cf__lanes(nq - q), r[i]);
        }
}
/* Bp holds the chunk in panels of 32 columns, each panel's nq rows of pairs one after the
   other: the micro-kernel reads a panel as one contiguous stretch (rows of a whole 512-column
   block, 2 KB apart, would fall into a few sets of the L1 cache and evict each other).
   Element (q, j) of a chunk of nq pairs: */
CF__INLINE size_t cf__bp(int q, int j, int nq) { return (size_t)(j & ~31) * nq + (size_t)q * 32 + (j & 31); }
/* Bp[q - q0][j], nq pairs from q0, columns n0 .. n0 + nb of the GEMM's op(B): B read from
   memory (CF__GEMM_HALF_B: stored in 16 bits), or B = im2col(col->x) (not transposed, or
   transposed: op(B) = col^T), its rows made into the buffer made (16 x CF__COL_ROW floats) */
CF__BF16_TARGET static void cf__pack_b(uint32_t *Bp, const cf__gemm_call *gemm, int q0, int nq, int n0, int nb,
                                       float *made) {
    const float *B = gemm->B;
    const cf__col_src *col = gemm->col;
    int tB = gemm->tB, half = (gemm->halves & CF__GEMM_HALF_B) != 0, ldb = gemm->ldb, K = gemm->K, q, j, i;
    if (!tB) for (q = 0; q < nq; q++) {   /* two rows of B, 16 columns at a time */
        int k = 2 * (q0 + q);
        const float *b0 = made, *b1 = NULL;
        if (half) {   /* two 16-bit rows */
            const cf_bf16 *h0 = (const cf_bf16 *)(const void *)B + (size_t)k * ldb + n0,
                *h1 = k + 1 < K ? h0 + ldb : NULL;
            for (j = 0; j < nb; j += 16)
                _mm512_mask_storeu_epi32(Bp + cf__bp(q, j, nq), cf__lanes(nb - j),
                                         cf__pairs16_rows_half(h0 + j, h1 ? h1 + j : NULL, nb - j));
            continue;
        }
        if (col) {   /* rows k, k + 1 of im2col(x), made here */
            cf__made_row(made, col->x, k, col->in, col->out, col->g, (size_t)n0, (size_t)nb);
            if (k + 1 < K) {
                b1 = made + CF__COL_ROW;
                cf__made_row(made + CF__COL_ROW, col->x, k + 1, col->in, col->out, col->g, (size_t)n0, (size_t)nb);
            }
        } else {
            b0 = B + (size_t)k * ldb + n0; b1 = k + 1 < K ? b0 + ldb : NULL;
            /* the next two fetched ahead */
            if (k + 3 < K) {
                cf__prefetch_floats(b0 + (size_t)2 * ldb, (size_t)nb, 0);
                cf__prefetch_floats(b0 + (size_t)3 * ldb, (size_t)nb, 0);
            }
        }
        for (j = 0; j < nb; j += 16)
            _mm512_mask_storeu_epi32(Bp + cf__bp(q, j, nq), cf__lanes(nb - j),
                                     cf__pairs16_rows(b0 + j, b1 ? b1 + j : NULL, nb - j));
    }
    else for (j = 0; j < nb; j += 16) {   /* op(B)[k][n] = B[n][k]: 16 rows of B give 16 pairs each, transposed */
        int kn = K - 2 * q0 < 2 * nq ? K - 2 * q0 : 2 * nq;   /* the chunk's values in a row */
        for (i = 0; i < 16 && j + i < nb && col; i++)    /* rows n0 + j + i of im2col(x), the chunk's positions */
            cf__made_row(made + (size_t)i * CF__COL_ROW, col->x, n0 + j + i, col->in, col->out, col->g,
                           (size_t)2 * q0, (size_t)kn);
        for (q = 0; q < nq; q += 16) {
            int k = 2 * (q0 + q);
            __m512i r[16];
            for (i = 0; i < 16; i++) {
                size_t at = (size_t)(n0 + j + i) * ldb + k;
                int n = K - k < 2 * (nq - q) ? K - k : 2 * (nq - q);
                r[i] = j + i >= nb ? _mm512_setzero_si512()
                       : col       ? cf__pairs16(made + (size_t)i * CF__COL_ROW + 2 * q, n)
                       : half      ? cf__pairs16_half((const cf_bf16 *)(const void *)B + at, n)
                                   : cf__pairs16(B + at, n);
            }
            cf__transpose16(r);
            for (i = 0; i < 16 && q + i < nq; i++)
                _mm512_mask_storeu_epi32(Bp + cf__bp(q + i, j, nq), cf__lanes(nb - j), r[i]);
        }
    }
}
/* the 8 x 2 accumulators of a bf16 micro-kernel set to zero, each named by a constant: set in
   a loop, GCC at -O2 (which unrolls no loop of 8) keeps the array in memory and stores all 16
   at every step of the sum (2.6x slower at -O2 than at -O3, measured) */
#define CF__ZERO8(a) {                                                                                                \
        a[0][0] = a[0][1] = a[1][0] = a[1][1] = a[2][0] = a[2][1] = a[3][0] = a[3][1] = _mm512_setzero_ps();          \
        a[4][0] = a[4][1] = a[5][0] = a[5][1] = a[6][0] = a[6][1] = a[7][0] = a[7][1] = _mm512_setzero_ps(); }
/* row r of a block of C, columns n0 .. (k0, k1: the valid lanes of its two vectors of sums a0,
   a1): C = beta C + the sums, rounded to bf16 when rnd, stored in 16 bits when CF__GEMM_HALF_C */
CF__BF16_TARGET CF__INLINE void cf__gemm_bf16_store_row(const cf__gemm_call *gemm, int r, int n0, __mmask16 k0,
                                                        __mmask16 k1, __m512 a0, __m512 a1) {
    float beta = gemm->beta;
    if (gemm->halves & CF__GEMM_HALF_C) {
        cf_bf16 *h = (cf_bf16 *)(void *)gemm->C + (size_t)r * gemm->ldc + n0;
        if (beta == 0.0f) {   /* both halves rounded by one vcvtne2ps2bf16 */
            _mm512_mask_storeu_epi16(h, ((__mmask32)k1 << 16) | k0, (__m512i)_mm512_cvtne2ps_pbh(a1, a0));
            return;
        }
        a0 = _mm512_add_ps(a0, cf__load_half(h, k0));
        a1 = _mm512_add_ps(a1, cf__load_half(h + 16, k1));
        cf__store_half(h, k0, cf__round16_bf16(a0));
        cf__store_half(h + 16, k1, cf__round16_bf16(a1));
    } else {
        float *c = gemm->C + (size_t)r * gemm->ldc + n0;
        if (beta != 0.0f) {
            a0 = _mm512_add_ps(a0, _mm512_maskz_loadu_ps(k0, c));
            a1 = _mm512_add_ps(a1, _mm512_maskz_loadu_ps(k1, c + 16));
        }
        if (gemm->rnd) { a0 = cf__round16_bf16(a0); a1 = cf__round16_bf16(a1); }
        _mm512_mask_storeu_ps(c, k0, a0);
        _mm512_mask_storeu_ps(c + 16, k1, a1);
    }
}
/* C (M x nb) = beta C + the packed chunk's K2 pairs (Ap's rows a_stride apart), C, M, ldc,
   beta and rnd the block's (gemm: the rows of a task); rnd: C rounded to bf16 as it is stored
   (the last chunk of a sum whose result is a bf16 network's tensor); CF__GEMM_HALF_C: C is
   stored in 16 bits (then rnd: a sum of one chunk).  fma: the dot step's FMA form, each block
   of 8 rows of Ap widened first into wa (K2 <= CF__GEMM_KC; 24 KB, in the L1 cache) and read
   by all nb / 32 column blocks. */
CF__BF16_TARGET CF__INLINE void cf__gemm_bf16_block_f(const cf__gemm_call *gemm, int nb, int K2,
                                                      const uint32_t *Ap, int a_stride, const uint32_t *Bp, int fma) {
    int M = gemm->M, m0, n0, q, o;
    uint32_t wa[8 * 2 * CF__GEMM_KC];   /* (the dot form: unused) */
    CF_ASSERT(!fma || K2 <= CF__GEMM_KC);
    for (m0 = 0; m0 < M; m0 += 8) {
        int nm = M - m0 < 8 ? M - m0 : 8;
        const uint32_t *ar[8];
        /* the last block repeats a row, unstored */
        for (o = 0; o < 8; o++) ar[o] = Ap + (size_t)(m0 + (o < nm ? o : 0)) * a_stride;
        for (o = 0; o < 8 && fma; o++) {
            cf__widen_pairs(wa + (size_t)o * 2 * K2, ar[o], (size_t)K2);
            ar[o] = wa + (size_t)o * 2 * K2;
        }
        for (n0 = 0; n0 < nb; n0 += 32) {
            int nn = nb - n0 < 32 ? nb - n0 : 32;
            __mmask16 k0 = (__mmask16)(nn >= 16 ? 0xffff : (1u << nn) - 1),
                k1 = (__mmask16)(nn >= 32 ? 0xffff : nn > 16 ? (1u << (nn - 16)) - 1 : 0);
            __m512 a[8][2];
            CF__ZERO8(a)
            for (q = 0; q < K2; q++) {
                const uint32_t *b = Bp + cf__bp(q, n0, K2);
                cf__pairs_x x0 = cf__pairs_x_of(_mm512_maskz_loadu_epi32(k0, b), fma),
                    x1 = cf__pairs_x_of(_mm512_maskz_loadu_epi32(k1, b + 16), fma);
                int t = fma ? 2 * q : q;
#define CF__DP(o) {                                                                                                   \
        a[o][0] = cf__dot_step(a[o][0], &x0, ar[o] + t, fma);                                                         \
        a[o][1] = cf__dot_step(a[o][1], &x1, ar[o] + t, fma); }
                CF__DP(0) CF__DP(1) CF__DP(2) CF__DP(3) CF__DP(4) CF__DP(5) CF__DP(6) CF__DP(7)
#undef CF__DP
            }
            /* the block's valid rows, each accumulator named by a constant: indexed by a
               variable here, GCC kept a[][] in memory and stored all 16 at every step of q */
#define CF__ST(o) if (o < nm) cf__gemm_bf16_store_row(gemm, m0 + o, n0, k0, k1, a[o][0], a[o][1]);
            CF__ST(0) CF__ST(1) CF__ST(2) CF__ST(3) CF__ST(4) CF__ST(5) CF__ST(6) CF__ST(7)
#undef CF__ST
        }
    }
}
CF__BF16_TARGET static void cf__gemm_bf16_block_dot(const cf__gemm_call *gemm, int nb, int K2, const uint32_t *Ap,
                                                    int a_stride, const uint32_t *Bp) {
    cf__gemm_bf16_block_f(gemm, nb, K2, Ap, a_stride, Bp, 0);
}
CF__BF16_TARGET static void cf__gemm_bf16_block_fma(const cf__gemm_call *gemm, int nb, int K2, const uint32_t *Ap,
                                                    int a_stride, const uint32_t *Bp) {
    cf__gemm_bf16_block_f(gemm, nb, K2, Ap, a_stride, Bp, 1);
}
#ifdef CF__AMX
/* ---- the block on AMX tiles (--bf16-form amx): each 32 x 32 block of C in four tiles of 16 x
   16 fp32 sums (tiles 0-3), a step of 16 pairs taking two tiles of Ap (4, 5: 16 rows x 16 pair
   words, Ap's own layout, rows a_stride words apart) and two of Bp (6, 7: 16 pairs x 16 columns,
   the halves of Bp's panel of 32 columns, 128 bytes a pair) into four tdpbf16ps of 16 x 16 x 32
   multiply-adds each.  The order of the additions inside a tdpbf16ps is the hardware's and not
   vdpbf16ps's (odd then even, pair by pair: 30-55 % of the sums the same bits, docs/math.md):
   this form is held to a bound, not to the dot form's bits (tests/test_core.c).  Rows of a
   block past M, or a chunk's last pairs short of a step, are copied into a zeroed tile first
   (a zero pair adds nothing); the sums go through a buffer to cf__gemm_bf16_store_row.  The
   columns of a panel past nb are read (within the panel) and their sums never stored. */
typedef struct { uint8_t palette, start_row, reserved[14]; uint16_t colsb[16]; uint8_t rows[16]; } cf__amx_config;
/* the eight tiles 16 rows of 64 bytes, for this thread (a constant in memory: GCC 12 dropped the
   stores into a configuration built on the stack, not seeing that ldtilecfg reads them) */
CF__AMX_TARGET static void cf__amx_tiles_on(void) {
    static const cf__amx_config cfg = {1, 0, {0}, {64, 64, 64, 64, 64, 64, 64, 64}, {16, 16, 16, 16, 16, 16, 16, 16}};
    _tile_loadconfig(&cfg);
}
CF__AMX_TARGET static void cf__amx_tiles_off(void) { _tile_release(); }
/* a tile's 16 rows of width words from rows lda words apart: nr rows of nc words, zeros after */
static const uint32_t *cf__amx_padded(uint32_t *to, const uint32_t *from, size_t lda, int nr, int nc, int width) {
    int r;
    memset(to, 0, sizeof(uint32_t) * 16 * (size_t)width);
    for (r = 0; r < nr; r++) memcpy(to + (size_t)r * width, from + r * lda, sizeof(uint32_t) * (size_t)nc);
    return to;
}
CF__AMX_TARGET static void cf__gemm_bf16_block_amx(const cf__gemm_call *gemm, int nb, int K2, const uint32_t *Ap,
                                                   int a_stride, const uint32_t *Bp) {
    float sums[32 * 32] __attribute__((aligned(64)));   /* (tile stores: rows within a line) */
    uint32_t pa[2][16 * 16], pb[16 * 32];
    int m0, n0, q, o;
    cf__amx_tiles_on();
    for (m0 = 0; m0 < gemm->M; m0 += 32) {
        int nm = gemm->M - m0 < 32 ? gemm->M - m0 : 32;
        for (n0 = 0; n0 < nb; n0 += 32) {
            int nn = nb - n0 < 32 ? nb - n0 : 32;
            __mmask16 k0 = (__mmask16)(nn >= 16 ? 0xffff : (1u << nn) - 1),
                k1 = (__mmask16)(nn >= 32 ? 0xffff : nn > 16 ? (1u << (nn - 16)) - 1 : 0);
            _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
            for (q = 0; q < K2; q += 16) {
                int nq = K2 - q < 16 ? K2 - q : 16;
                const uint32_t *a0 = Ap + (size_t)m0 * a_stride + q, *a1 = a0 + (size_t)16 * a_stride,
                               *b = Bp + cf__bp(q, n0, K2);
                if (nq < 16 || nm < 16) a0 = cf__amx_padded(pa[0], a0, (size_t)a_stride, nm < 16 ? nm : 16, nq, 16);
                if (nm > 16 && (nq < 16 || nm < 32)) a1 = cf__amx_padded(pa[1], a1, (size_t)a_stride, nm - 16, nq, 16);
                if (nq < 16) b = cf__amx_padded(pb, b, 32, nq, 32, 32);
                _tile_loadd(4, a0, 4 * (nq < 16 || nm < 16 ? 16 : a_stride));
                _tile_loadd(6, b, 128);
                _tile_loadd(7, b + 16, 128);
                _tile_dpbf16ps(0, 4, 6);
                _tile_dpbf16ps(1, 4, 7);
                if (nm > 16) {
                    _tile_loadd(5, a1, 4 * (nq < 16 || nm < 32 ? 16 : a_stride));
                    _tile_dpbf16ps(2, 5, 6);
                    _tile_dpbf16ps(3, 5, 7);
                }
            }
            _tile_stored(0, sums, 128);
            _tile_stored(1, sums + 16, 128);
            _tile_stored(2, sums + 16 * 32, 128);
            _tile_stored(3, sums + 16 * 32 + 16, 128);
            for (o = 0; o < nm; o++)
                cf__gemm_bf16_store_row(gemm, m0 + o, n0, k0, k1, _mm512_loadu_ps(sums + o * 32),
                                        _mm512_loadu_ps(sums + o * 32 + 16));
        }
    }
    cf__amx_tiles_off();
}
#endif
/* form: 0 the dot step's dot form, 1 its FMA form, 2 the AMX tiles */
static void cf__gemm_bf16_block(const cf__gemm_call *gemm, int nb, int K2, const uint32_t *Ap, int a_stride,
                                const uint32_t *Bp, int form) {
#ifdef CF__AMX
    if (form == 2) { cf__gemm_bf16_block_amx(gemm, nb, K2, Ap, a_stride, Bp); return; }
#endif
    (form ? cf__gemm_bf16_block_fma : cf__gemm_bf16_block_dot)(gemm, nb, K2, Ap, a_stride, Bp);
}
/* a thread's buffers for its tasks: Ap and Bp, its chunks of op(A) and op(B) (NULL when they
   could not be had); A_all, all of op(A) packed beforehand (or NULL); made, the rows of op(B)
   made from x (cf__pack_b); and the block's form (cf__gemm_bf16_block) */
typedef struct { uint32_t *Ap, *Bp; const uint32_t *A_all; float *made; int form; } cf__gemm_bf16_bufs;
/* a task without buffers: cf_sgemm on the same operands, then C's columns rounded when rnd */
static void cf__gemm_bf16_task_sgemm(const cf__gemm_call *task, int n0, int nb, int q0, int q1) {
    int k0 = 2 * q0, kn = (2 * q1 < task->K ? 2 * q1 : task->K) - k0, lda = task->lda, ldb = task->ldb, r;
    const float *A = task->tA ? task->A + (size_t)k0 * lda : task->A + k0;
    const float *B = task->tB ? task->B + (size_t)n0 * ldb + k0 : task->B + (size_t)k0 * ldb + n0;
    cf_sgemm(task->tA, task->tB, task->M, nb, kn, 1.0f, A, lda, B, ldb, task->beta, task->C + n0, task->ldc);
    for (r = 0; r < task->M && task->rnd; r++) cf__round_run(task->C + (size_t)r * task->ldc + n0, (size_t)nb);
}
/* An A stored in 16 bits and not transposed holds op(A)'s pairs as adjacent values, a 32-bit
   word each: rows m0 .. of a chunk of pairs q .. q + nq read where they lie (lda / 2 words
   apart), not packed, when lda and A's address are even and the chunk holds no lone last
   value (an odd K's, which the packing pairs with a zero).  A 1x1 backward-weights with dy in
   16 bits (DeepCAM's before a batch norm), 64 -> 128 channels at 384x576: 18.7-19.5 -> 14.5-14.8
   ms in the network (docs/performance.md, "bf16").  NULL where it does not apply. */
static const uint32_t *cf__gemm_bf16_a_where(const cf__gemm_call *task, int m0, int q, int nq) {
    const cf_bf16 *A = (const cf_bf16 *)(const void *)task->A;
    if (!(task->halves & CF__GEMM_HALF_A) || task->tA || task->lda % 2 || 2 * (q + nq) > task->K || (uintptr_t)A % 4)
        return NULL;
    return (const uint32_t *)(const void *)(A + (size_t)m0 * task->lda) + q;
}
/* one task: C[:, n0 .. n0 + nb] = beta C + the sum over pairs q0 .. q1 (the task's A and C start
   at its first row, M its rows), rounded to bf16 when rnd; without buffers cf_sgemm, the same
   operands.  Each chunk of op(B) is packed once and read by every block of CF__GEMM_MB rows in
   turn, which packs its own chunk of op(A) unless all of op(A) was packed before (A_all: the
   task's rows, K2 pairs each).  col: op(B) made from x (cf__pack_b; then the buffers are
   there).  halves: which of A, B and C are stored in 16 bits (CF__GEMM_HALF_*; then the buffers
   are there, and a 16-bit C's sum is one chunk). */
static void cf__gemm_bf16_task(const cf__gemm_call *task, int n0, int nb, int q0, int q1,
                               const cf__gemm_bf16_bufs *bufs) {
    int K = task->K, K2 = (K + 1) / 2, chunks = (q1 - q0 + CF__GEMM_KC - 1) / CF__GEMM_KC, step, q, m0;
    int ah = (task->halves & CF__GEMM_HALF_A) != 0, ch = (task->halves & CF__GEMM_HALF_C) != 0;
    /* chunks of equal length: 432 pairs as 216 + 216, not 384 + 48 */
    step = chunks > 0 ? (q1 - q0 + chunks - 1) / chunks : 1;
    if (!bufs->Ap || !bufs->Bp) { cf__gemm_bf16_task_sgemm(task, n0, nb, q0, q1); return; }
    for (q = q0; q < q1; q += step) {
        int nq = q1 - q < step ? q1 - q : step;
        cf__pack_b(bufs->Bp, task, q, nq, n0, nb, bufs->made);
        for (m0 = 0; m0 < task->M; m0 += CF__GEMM_MB) {
            cf__gemm_call rows = *task;   /* the block's rows of C */
            /* their chunk of op(A), rows a_stride apart: packed before, where it lies, or packed here */
            const uint32_t *where = bufs->A_all ? NULL : cf__gemm_bf16_a_where(task, m0, q, nq);
            const uint32_t *a = bufs->A_all ? bufs->A_all + (size_t)m0 * K2 + q : where ? where : bufs->Ap;
            int a_stride = bufs->A_all ? K2 : where ? task->lda / 2 : nq;
            rows.M = task->M - m0 < CF__GEMM_MB ? task->M - m0 : CF__GEMM_MB;
            rows.C = cf__elt(task->C, ch, (size_t)m0 * task->ldc + n0);
            rows.beta = q == q0 ? task->beta : 1.0f;
            rows.rnd = task->rnd && q + nq == q1;
            if (!bufs->A_all && !where)
                cf__pack_a(bufs->Ap, task->tA, task->tA ? task->A + m0 : cf__elt(task->A, ah, (size_t)m0 * task->lda),
                           ah, task->lda, rows.M, K, q, nq);
            CF_ASSERT(!ch || (q == q0 && q + nq == q1 && task->rnd));   /* (a 16-bit C: one chunk, rounded) */
            cf__gemm_bf16_block(&rows, nb, nq, a, a_stride, bufs->Bp, bufs->form);
        }
    }
}
/* one thread's buffers (floats), and all the threads' */
static size_t cf__gemm_bf16_thread_floats(void) {
    return (size_t)CF__GEMM_MB * CF__GEMM_KC + (size_t)CF__GEMM_KC * CF__GEMM_NB;
}
static size_t cf__gemm_bf16_ws_floats(void) { return (size_t)cf__nthreads() * cf__gemm_bf16_thread_floats(); }
/* whether a sum of K products is one chunk of the GEMM (what a 16-bit C needs) */
static int cf__gemm_bf16_one_chunk(size_t K) { return (K + 1) / 2 <= CF__GEMM_KC; }
/* How cf__sgemm_bf16_r cuts a GEMM into tasks, for nth threads: the sum in parts of span
   pairs (parts > 1: each part into its own partial C), C's columns in nblocks blocks of width
   (a multiple of 32), its rows in rblocks blocks of rows; tasks = rblocks x nblocks x parts.
   A thread's buffers: a_sz for op(A)'s chunk, b_sz for op(B)'s, per with the made rows. */
typedef struct {
    int nth, parts, span, nblocks, width, rows, rblocks, tasks;
    size_t a_sz, b_sz, per;
} cf__gemm_bf16_cut;
/* the parts of a sum of K2 pairs over nblocks column blocks: even when there is one column
   block (more parts, not more column blocks: op(A) packed once; even: the sums may not depend
   on the threads, and 2 divides most counts) */
static int cf__gemm_bf16_parts(int K2, int nblocks) {
    int parts = (K2 + CF__GEMM_KPART - 1) / CF__GEMM_KPART;
    if (parts > 1 && nblocks == 1 && parts % 2) parts++;
    return parts;
}
/* the rest of the cut, cut->parts set: the columns cut into more blocks until the tasks are a
   multiple of the threads, or blocks of 32 columns */
static void cf__gemm_bf16_cut_up(cf__gemm_bf16_cut *cut, const cf__gemm_call *gemm) {
    int K2 = (gemm->K + 1) / 2, M = gemm->M, N = gemm->N;
    size_t ka = (size_t)(K2 < CF__GEMM_KC ? K2 : CF__GEMM_KC);   /* a chunk's pairs, at most */
    int widest = cf__gemm_widest(gemm, ka, (size_t)CF__GEMM_KC * CF__GEMM_NB, CF__GEMM_NB);
    cut->nth = cf__nthreads();
    cut->span = (K2 + cut->parts - 1) / cut->parts;
    cut->nblocks = (N + widest - 1) / widest;
    while ((cut->nblocks * cut->parts) % cut->nth && cut->nblocks * 32 < N) cut->nblocks++;
    cut->width = ((N + cut->nblocks - 1) / cut->nblocks + 31) / 32 * 32;
    cut->nblocks = (N + cut->width - 1) / cut->width;
    cut->rows = cut->nblocks * cut->parts >= cut->nth ? M : CF__GEMM_MB;
    cut->rblocks = (M + cut->rows - 1) / cut->rows;
    cut->tasks = cut->rblocks * cut->nblocks * cut->parts;
    cut->a_sz = (size_t)(M < CF__GEMM_MB ? M : CF__GEMM_MB) * ka;   /* as big as a task needs */
    cut->b_sz = ka * (size_t)cut->width;
    cut->per = cut->a_sz + cut->b_sz + (gemm->col ? (size_t)16 * CF__COL_ROW : 0);
}
/* C = beta C when the sum is empty (bf16 values stay; beta 0: C is not read, as BLAS) */
static void cf__gemm_bf16_empty(const cf__gemm_call *gemm) {
    int r, j;
    for (r = 0; r < gemm->M; r++)
        for (j = 0; j < gemm->N; j++) {
            float *c = gemm->C + (size_t)r * gemm->ldc + j;
            *c = gemm->beta == 0.0f ? 0.0f : gemm->beta * *c;
        }
}
/* all of op(A) packed once (M rows of K2 pairs), the threads sharing its rows; NULL when there
   is no room for it (then each task packs its own) */
static uint32_t *cf__gemm_bf16_pack_a_all(const cf__gemm_call *gemm, int K2) {
    uint32_t *A_all = (uint32_t *)CF_MALLOC(sizeof(uint32_t) * (size_t)gemm->M * K2);
    int ah = gemm->halves & CF__GEMM_HALF_A, t;
    if (!A_all) return NULL;
    CF__OMP(omp parallel for num_threads(cf__nthreads()) schedule(static))
    for (t = 0; t < (gemm->M + 15) / 16; t++) {
        int m0 = t * 16, mb = gemm->M - m0 < 16 ? gemm->M - m0 : 16;
        const float *A = gemm->tA ? gemm->A + m0 : cf__elt(gemm->A, ah, (size_t)m0 * gemm->lda);
        cf__pack_a(A_all + (size_t)m0 * K2, gemm->tA, A, ah, gemm->lda, mb, gemm->K, 0, K2);
    }
    return A_all;
}
/* task t of the cut: its rows, columns and part of the sum; a part of several goes into its
   own partial C (M x N, beta 0, not rounded, in fp32) */
static void cf__gemm_bf16_task_at(const cf__gemm_call *gemm, const cf__gemm_bf16_cut *cut, int t, float *partial,
                                  const cf__gemm_bf16_bufs *bufs) {
    int blocks = cut->rblocks * cut->nblocks, b = t % blocks, part = t / blocks;
    int m0 = b / cut->nblocks * cut->rows, n0 = b % cut->nblocks * cut->width, q0 = part * cut->span,
        K2 = (gemm->K + 1) / 2;
    int nb = gemm->N - n0 < cut->width ? gemm->N - n0 : cut->width, q1 = K2 - q0 < cut->span ? K2 : q0 + cut->span;
    cf__gemm_call task = *gemm;
    task.M = gemm->M - m0 < cut->rows ? gemm->M - m0 : cut->rows;
    /* its rows of op(A) */
    task.A = gemm->tA ? gemm->A + m0 : cf__elt(gemm->A, gemm->halves & CF__GEMM_HALF_A, (size_t)m0 * gemm->lda);
    if (cut->parts == 1) task.C = cf__elt(gemm->C, gemm->halves & CF__GEMM_HALF_C, (size_t)m0 * gemm->ldc);
    else {
        task.beta = 0.0f;
        task.C = partial + (size_t)gemm->M * gemm->N * (size_t)part + (size_t)m0 * gemm->N;
        task.ldc = gemm->N;
        task.rnd = 0;
        task.halves &= ~CF__GEMM_HALF_C;
    }
    cf__gemm_bf16_task(&task, n0, nb, q0, q1, bufs);
}
/* the tasks shared out between the threads, each with its buffers in buf (NULL: none); form:
   the block's form (cf__gemm_bf16_block) */
static void cf__gemm_bf16_run_tasks(const cf__gemm_call *gemm, const cf__gemm_bf16_cut *cut, uint32_t *buf,
                                    const uint32_t *A_all, float *partial, int form) {
    int t;
    CF__OMP(omp parallel num_threads(cut->nth))
    {
        cf__gemm_bf16_bufs bufs;
        bufs.Ap = buf ? buf + cut->per * cf__thread_id() : NULL;
        bufs.Bp = buf ? bufs.Ap + cut->a_sz : NULL;
        bufs.A_all = A_all;
        bufs.made = buf && gemm->col ? (float *)(void *)(bufs.Bp + cut->b_sz) : NULL;
        bufs.form = form;
        CF__OMP(omp for schedule(dynamic, 1))
        for (t = 0; t < cut->tasks; t++) cf__gemm_bf16_task_at(gemm, cut, t, partial, &bufs);
    }
}
/* C = beta C + the parts' partial sums, added in part order, rounded to bf16 when rnd */
static void cf__gemm_bf16_add_parts(const cf__gemm_call *gemm, const float *partial, int parts) {
    size_t MN = (size_t)gemm->M * gemm->N;
    int t;
    CF__OMP(omp parallel for num_threads(cf__nthreads()) schedule(static))
    for (t = 0; t < gemm->M; t++) {
        int p;
        size_t i;
        float *c = gemm->C + (size_t)t * gemm->ldc;
        for (i = 0; i < (size_t)gemm->N; i++) {
            float v = gemm->beta != 0.0f ? c[i] : 0.0f;
            for (p = 0; p < parts; p++) v += partial[MN * p + (size_t)t * gemm->N + i];
            c[i] = gemm->rnd ? cf_f32_from_bf16(cf_bf16_from_f32(v)) : v;
        }
    }
}
/* The GEMM on bf16 values (cf__gemm_call).  A task is a block of columns of C (at most
   cf__gemm_widest's, in panels of 32) and a part of the sum, over all of C's rows, or over
   CF__GEMM_MB of them when columns and parts alone give fewer tasks than threads.  The tasks
   are made a multiple of the threads, so that none waits at the end: a sum in parts over one
   column block gets an even number of parts (a long backward-weights sum over few channels:
   each part packs its own chunk of op(A), and a second column block would pack it again:
   15-25 % slower on 2 threads), and the columns are cut into more blocks where that is not
   enough.
   When several column blocks would each pack the same rows of op(A), a sum of one part (a
   kernel, at most 8 MB packed), op(A) is packed once beforehand, the threads sharing the
   rows: a long backward-weights sum is left to pack its own, which would take tens of MB at
   the network's peak of memory.
   A 16-bit C needs rnd and K <= 2 CF__GEMM_KC: a sum of one chunk.  ws: the threads' buffers
   (cf__gemm_bf16_ws_floats), or NULL: allocated here.  Returns -1, C untouched, when the
   threads' buffers cannot be had for col or halves (0 when done). */
static int cf__sgemm_bf16_r(const cf__gemm_call *gemm, float *ws) {
    int K2 = (gemm->K + 1) / 2;
    cf__gemm_bf16_cut cut;
    float *partial = NULL;
    uint32_t *A_all = NULL, *buf;
    CF_ASSERT(!gemm->out);   /* (the fp32 GEMM's field) */
    if (gemm->M <= 0 || gemm->N <= 0) return 0;
    if (gemm->K <= 0) { cf__gemm_bf16_empty(gemm); return 0; }
    cut.parts = cf__gemm_bf16_parts(K2, (gemm->N + CF__GEMM_NB - 1) / CF__GEMM_NB);
    if (cut.parts > 1 && !(partial = (float *)CF_MALLOC(sizeof(float) * (size_t)gemm->M * gemm->N * cut.parts)))
        cut.parts = 1;   /* no room: one part, the same sums */
    cf__gemm_bf16_cut_up(&cut, gemm);
    /* (no buffers: each task runs cf_sgemm, which cannot make op(B) or read 16 bits) */
    buf = ws ? (uint32_t *)(void *)ws : (uint32_t *)CF_MALLOC(sizeof(uint32_t) * cut.per * cut.nth);
    if (!buf && (gemm->col || gemm->halves)) { CF_FREE(partial); return -1; }
    CF_ASSERT(!(gemm->halves & CF__GEMM_HALF_C) || (gemm->rnd && K2 <= CF__GEMM_KC && !partial));
    if (cut.rblocks == 1 && cut.nblocks > 1 && cut.parts == 1 && (size_t)gemm->M * K2 <= ((size_t)2 << 20))
        A_all = cf__gemm_bf16_pack_a_all(gemm, K2);
    cf__gemm_bf16_run_tasks(gemm, &cut, buf, A_all, partial, cf__bf16_gemm_form());
    if (!ws) CF_FREE(buf);
    CF_FREE(A_all);
    if (!partial) return 0;
    cf__gemm_bf16_add_parts(gemm, partial, cut.parts);
    CF_FREE(partial);
    return 0;
}
static void cf__sgemm_bf16(int tA, int tB, int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                           float beta, float *C, int ldc) {
    cf__gemm_call gemm = {tA, tB, M, N, K, A, lda, B, ldb, beta, C, ldc, 0, NULL, 0, NULL};
    cf__sgemm_bf16_r(&gemm, NULL);
}
/* the same, C stored rounded to bf16: the sum as cf__sgemm_bf16's, rounded once */
static void cf__sgemm_bf16_rounded(int tA, int tB, int M, int N, int K, const float *A, int lda, const float *B,
                                   int ldb, float beta, float *C, int ldc) {
    cf__gemm_call gemm = {tA, tB, M, N, K, A, lda, B, ldb, beta, C, ldc, 1, NULL, 0, NULL};
    cf__sgemm_bf16_r(&gemm, NULL);
}

/* ---- the direct kernel in bf16: as cf__direct_fwd, with the input channels paired.  A pair
   row (cp, id, ih) holds (x[2cp][id][ih][w], x[2cp+1][id][ih][w]) at w + pb (zeros for a
   missing channel and in the padding), kept in the direct kernels' ring (cf__ring); the kernel
   is packed the same way, in blocks of NB output channels, w2[oc / NB][cp][kd][kh][kw][oc % NB]
   = (w[oc][2cp][kd][kh][kw], w[oc][2cp+1][kd][kh][kw]).  Per tap pair the kernel does 2 loads,
   8 broadcasts, 16 vdpbf16ps over 8 output channels x 32 positions (the FMA form: 16
   broadcasts of the widened kernel, 4 widenings, 32 FMAs). */
/* pair row (cp, id, ih) of sample x (half: stored in 16 bits) into r */
CF__BF16_TARGET static void cf__pair_row(uint32_t *r, size_t Wp, const float *x, int half, int C, cf_shape in, int pb,
                                         int cp, int id, int ih) {
    size_t at = (((size_t)2 * cp * in.d + id) * in.h + ih) * in.w;
    const float *a = cf__elt(x, half, at), *b = 2 * cp + 1 < C ? cf__elt(x, half, at + cf__positions(in)) : NULL;
    uint32_t *d = r + pb;
    int w;
    memset(r, 0, (size_t)pb * sizeof *r);   /* the padding either side of the row */
    memset(d + in.w, 0, (Wp - pb - (size_t)in.w) * sizeof *r);
    for (w = 0; w < in.w; w += 16)          /* d[w] = cf__pair(a[w], b[w]), 16 at a time */
        _mm512_mask_storeu_epi32(d + w, cf__lanes(in.w - w),
                                 half ? cf__pairs16_rows_half((const cf_bf16 *)(const void *)a + w,
                                                              b ? (const cf_bf16 *)(const void *)b + w : NULL, in.w - w)
                                 : cf__pairs16_rows(a + w, b ? b + w : NULL, in.w - w));
}
/* w (OC, C, KDKH, KW) as pairs of input channels, in blocks of NB output channels (the row
   kernel's: 8 wide, 16 narrow): w2 (ceil(OC/NB), ceil(C/2), KDKH, KW, NB), zeros past OC.  A
   tap's NB pair words lie together, so the kernel reaches a block's channels from one pointer
   at fixed offsets: one address a step for the NB broadcasts, where NB pointers, each stepped,
   spilled to the stack at every pair row (cosmoflow.cfg's 32 -> 64 conv forward 78-85 ->
   76-78 ms, docs/performance.md, "bf16"). */
static size_t cf__w2_words(int OC, int C, int KDKH, int KW) {   /* (for NB of 8 or 16) */
    return (size_t)(OC + 15) / 16 * 16 * ((C + 1) / 2) * KDKH * KW;
}
static int cf__w2_block(cf_shape out) { return out.w <= 16 ? 16 : 8; }   /* the row kernel's NB for output out */
static void cf__pack_kernel_bf16(uint32_t *w2, const float *w, int OC, int C, int KDKH, int KW, int NB) {
    int C2 = (C + 1) / 2, OCp = (OC + NB - 1) / NB * NB, oc, cp, k, kw;
    for (oc = 0; oc < OCp; oc++) for (cp = 0; cp < C2; cp++) for (k = 0; k < KDKH; k++) for (kw = 0; kw < KW; kw++) {
        const float *r = w + (((size_t)oc * C + 2 * cp) * KDKH + k) * KW + kw;
        w2[((((size_t)(oc / NB) * C2 + cp) * KDKH + k) * KW + kw) * NB + oc % NB] =
            oc < OC ? cf__pair(r[0], 2 * cp + 1 < C ? r[(size_t)KDKH * KW] : 0.0f) : 0;
    }
}
/* x[0 .. n) (n <= 16) rounded in place, as cf__round16_bf16 */
CF__BF16_TARGET static void cf__round16_bf16_at(float *x, int n) {
    _mm512_mask_storeu_ps(x, cf__lanes(n), cf__round16_bf16(_mm512_maskz_loadu_ps(cf__lanes(n), x)));
}
/* cf__round_floats, 16 at a time: about 2 instructions for 16 values instead of ~2 cycles for
   one (the definition's three cases, vectorized by the compiler, take that long) */
CF__BF16_TARGET static void cf__round_floats_bf16(float *x, size_t n) {
    size_t i;
    for (i = 0; i < n; i += 16) cf__round16_bf16_at(x + i, n - i < 16 ? (int)(n - i) : 16);
}
/* n (<= 16) sums z of one output row's block into element i of y: added to what is there
   (backward-data), or + bias, the activation, rounded to bf16 (half: stored in 16 bits) */
CF__BF16_TARGET static void cf__direct_store_bf16(float *y, int half, size_t i, __m512 z, int n, float bias,
                                                  int accumulate, int act, float slope) {
    __mmask16 k = cf__lanes(n);
    __m512 v;
    if (accumulate) { _mm512_mask_storeu_ps(y + i, k, _mm512_add_ps(_mm512_maskz_loadu_ps(k, y + i), z)); return; }
    v = cf__round16_bf16(cf__act16(_mm512_add_ps(z, _mm512_set1_ps(bias)), act, slope));
    if (half) cf__store_half((cf_bf16 *)(void *)y + i, k, v);
    else _mm512_mask_storeu_ps(y + i, k, v);
}
/* What the bf16 direct kernel's output rows share: y (half: stored in 16 bits), its rows
   ystride apart, T2 pair rows, KW taps along the width dil apart, the packed kernel w2 (OC, T2
   KW pairs), OW positions a row, the bias b (may be NULL), accumulate, the activation. */
typedef struct {
    float *y;
    int half;
    size_t ystride;
    int T2, KW, dil;
    const uint32_t *w2;
    int OC, OW;
    const float *b;
    int accumulate, act;
    float slope;
} cf__direct_row_bf16_call;
/* One output row (all OC channels, OW positions, from element y0 of y) from its T2 pair rows
   rp: blocks of 8 channels by 32 positions, 16 accumulators; each step loads 32 positions of
   one pair row and multiplies them by one packed weight pair per channel.  fma: the dot step's
   FMA form, w2 packed widened (two words a pair). */
CF__BF16_TARGET CF__INLINE void cf__direct_row_bf16_f(const cf__direct_row_bf16_call *d, size_t y0,
                                                      const uint32_t *const *rp, int fma) {
    float *y = d->y, slope = d->slope;
    size_t ystride = d->ystride;
    int half = d->half, T2 = d->T2, KW = d->KW, dil = d->dil, OC = d->OC, OW = d->OW, accumulate = d->accumulate,
        act = d->act;
    const uint32_t *w2 = d->w2;
    const float *b = d->b;
    int K2 = T2 * KW, oc0, w0, q, kw, o, j;
    for (oc0 = 0; oc0 < OC; oc0 += 8) {
        int no = OC - oc0 < 8 ? OC - oc0 : 8;
        const uint32_t *wb = w2 + (size_t)oc0 * K2 * (1 + fma);   /* the block's taps, 8 channels each */
        for (w0 = 0; w0 < OW; w0 += 32) {
            __m512 a[8][2];
            int n = OW - w0 < 32 ? OW - w0 : 32;
            CF__ZERO8(a)
            for (q = 0; q < T2; q++) {
                const uint32_t *r = rp[q] + w0;
                for (kw = 0; kw < KW; kw++) {
                    cf__pairs_x x0 = cf__pairs_x_of(_mm512_loadu_si512(r + kw * dil), fma),
                        x1 = cf__pairs_x_of(_mm512_loadu_si512(r + kw * dil + 16), fma);
                    const uint32_t *wt = wb + (size_t)(q * KW + kw) * 8 * (1 + fma);
#define CF__DP(o) {                                                                                                   \
        a[o][0] = cf__dot_step(a[o][0], &x0, wt + (o) * (1 + fma), fma);                                              \
        a[o][1] = cf__dot_step(a[o][1], &x1, wt + (o) * (1 + fma), fma); }
                    CF__DP(0) CF__DP(1) CF__DP(2) CF__DP(3) CF__DP(4) CF__DP(5) CF__DP(6) CF__DP(7)
#undef CF__DP
                }
            }
            for (o = 0; o < no; o++)   /* the block's valid part */
                for (j = 0; j < 2; j++)
                    cf__direct_store_bf16(y, half, y0 + (size_t)(oc0 + o) * ystride + w0 + 16 * j, a[o][j], n - 16 * j,
                                          b ? b[oc0 + o] : 0.0f, accumulate, act, slope);
        }
    }
}
/* The same for rows of at most 16 positions (a 16^3 layer, where a 32-wide block would be half
   empty): blocks of 16 channels by 16 positions, still 16 accumulators, one load of R2 per step. */
CF__BF16_TARGET CF__INLINE void cf__direct_row_bf16_narrow_f(const cf__direct_row_bf16_call *d, size_t y0,
                                                             const uint32_t *const *rp, int fma) {
    float *y = d->y, slope = d->slope;
    size_t ystride = d->ystride;
    int half = d->half, T2 = d->T2, KW = d->KW, dil = d->dil, OC = d->OC, OW = d->OW, accumulate = d->accumulate,
        act = d->act;
    const uint32_t *w2 = d->w2;
    const float *b = d->b;
    int K2 = T2 * KW, oc0, q, kw, o;
    for (oc0 = 0; oc0 < OC; oc0 += 16) {
        int no = OC - oc0 < 16 ? OC - oc0 : 16;
        const uint32_t *wb = w2 + (size_t)oc0 * K2 * (1 + fma);   /* the block's taps, 16 channels each */
        __m512 a[16];
        for (o = 0; o < 16; o++) a[o] = _mm512_setzero_ps();
        for (q = 0; q < T2; q++) {
            const uint32_t *r = rp[q];
            for (kw = 0; kw < KW; kw++) {
                cf__pairs_x x0 = cf__pairs_x_of(_mm512_loadu_si512(r + kw * dil), fma);
                const uint32_t *wt = wb + (size_t)(q * KW + kw) * 16 * (1 + fma);
#define CF__DP(o) a[o] = cf__dot_step(a[o], &x0, wt + (o) * (1 + fma), fma);
                CF__DP(0) CF__DP(1) CF__DP(2) CF__DP(3) CF__DP(4) CF__DP(5) CF__DP(6) CF__DP(7)
                CF__DP(8) CF__DP(9) CF__DP(10) CF__DP(11) CF__DP(12) CF__DP(13) CF__DP(14) CF__DP(15)
#undef CF__DP
            }
        }
        for (o = 0; o < no; o++)
            cf__direct_store_bf16(y, half, y0 + (size_t)(oc0 + o) * ystride, a[o], OW, b ? b[oc0 + o] : 0.0f,
                                  accumulate, act, slope);
    }
}
/* the four instances: wide or narrow rows, the dot step's dot or FMA form */
CF__BF16_TARGET static void cf__direct_row_bf16(const cf__direct_row_bf16_call *d, size_t y0,
                                                const uint32_t *const *rp) {
    cf__direct_row_bf16_f(d, y0, rp, 0);
}
CF__BF16_TARGET static void cf__direct_row_bf16_fma(const cf__direct_row_bf16_call *d, size_t y0,
                                                    const uint32_t *const *rp) {
    cf__direct_row_bf16_f(d, y0, rp, 1);
}
CF__BF16_TARGET static void cf__direct_row_bf16_narrow(const cf__direct_row_bf16_call *d, size_t y0,
                                                       const uint32_t *const *rp) {
    cf__direct_row_bf16_narrow_f(d, y0, rp, 0);
}
CF__BF16_TARGET static void cf__direct_row_bf16_narrow_fma(const cf__direct_row_bf16_call *d, size_t y0,
                                                           const uint32_t *const *rp) {
    cf__direct_row_bf16_narrow_f(d, y0, rp, 1);
}
/* the forward convolution f, y (+)= conv(x, w) as cf__direct_fwd, y stored rounded to bf16
   unless added into (accumulate); w2 = the packed kernel (fma: widened, the dot step's FMA
   form); ws: one cf__ring per thread; f->half (y), f->x_half: stored in 16 bits */
static void cf__direct_fwd_bf16(const cf__conv_call *f, const uint32_t *w2, uint32_t *ws, int accumulate, int fma) {
    cf_shape in = f->in, out = f->out;
    const cf_geom *g = f->g;
    int C2 = (in.c + 1) / 2, T2 = C2 * g->k[0] * g->k[1], KW = g->k[2], y_half = f->half, x_half = f->x_half, ns;
    size_t Wp = cf__direct_wp(out, g), P = cf__positions(out), in_sz = cf_shape_size(in), rsz;
    ns = cf__ring_ns(in, g, Wp, (size_t)((const uint32_t *)(const void *)(f->ws + f->ws_floats) - ws), C2, C2);
    rsz = cf__ring_size(g, Wp, ns, C2, C2);
    long rows = (long)f->B * out.d * out.h, r;
    cf__direct_row_bf16_call d = {f->y, y_half, P, T2, KW, g->dil[2], w2, out.c, out.w, f->b, accumulate, f->act,
                                  f->slope};
    void (*row)(const cf__direct_row_bf16_call *, size_t, const uint32_t *const *) =
        cf__w2_block(out) == 16 ? (fma ? cf__direct_row_bf16_narrow_fma : cf__direct_row_bf16_narrow)
                    : (fma ? cf__direct_row_bf16_fma : cf__direct_row_bf16);
    CF__OMP(omp parallel num_threads(cf__nthreads()))
    {
        cf__ring pr = cf__ring_at(ws + (size_t)cf__thread_id() * rsz, g, Wp, ns, C2, C2);
        CF__OMP(omp for schedule(static))
        for (r = 0; r < rows; r++) {
            int bi = (int)(r / ((long)out.d * out.h)), od = (int)(r / out.h % out.d), oh = (int)(r % out.h);
            cf__ring_for(&pr, cf__elt(f->x, x_half, (size_t)bi * in_sz), x_half, bi, in.c, in, g, od, oh, cf__pair_row);
            /* the next row's outputs (same sample) fetched for writing, as the pools' rows */
            if (r + 1 < rows && (r + 1) % ((long)out.d * out.h)) {
                size_t yn = (size_t)bi * out.c * P + ((size_t)od * out.h + oh + 1) * out.w;
                int oc;
                for (oc = 0; oc < out.c; oc++)
                    cf__prefetch_floats(cf__elt(f->y, y_half, yn + (size_t)oc * P),
                                        y_half ? (size_t)(out.w + 1) / 2 : (size_t)out.w, 1);
            }
            row(&d, (size_t)bi * out.c * P + ((size_t)od * out.h + oh) * out.w, pr.rp);
        }
    }
}
/* every bf16 path's first condition: the operands are bf16 values and the CPU has the instructions */
static int cf__bf16_gemm_applies(const cf__conv_call *c) { return c->bf16 && cf__has_bf16(); }
/* the packed kernel (OC x ceil(C/2) x KD KH x KW uint32, in 64-byte parts) at the front of ws,
   then one cf__ring per thread */
static size_t cf__w2_floats(cf_shape in, const cf_geom *g, int OC) {
    return cf__r16(cf__w2_words(OC, in.c, g->k[0] * g->k[1], g->k[2]));
}
/* The bf16 kernel's forward takes an R of up to CF__BF16_DIRECT_MAX_R uint32 (4 MiB), far
   past the fp32 kernel's limit: with few filters the alternative, im2col + the bf16 GEMM, has
   a GEMM of few rows.  Measured in one process, the paths alternated (docs/performance.md,
   "bf16"): Tiramisu's 5x5 convs to 32 channels (R up to 647 Ki) 2.8-3.7x faster than im2col;
   DeepCAM's decoder 3x3 convs (R 147 Ki) the same either way; DeepCAM's ASPP conv of dilation
   6 (R 1.4 Mi) 25 % slower, so it stays with im2col.  Backward-data passes no limit. */
#define CF__BF16_DIRECT_MAX_R ((size_t)1 << 20)
static int cf__bf16_direct_fits(cf_shape in, cf_shape out, const cf_geom *g, size_t ws_floats, size_t max_r) {
    size_t w2 = cf__w2_floats(in, g, out.c),
           rsz = cf__ring_size(g, cf__direct_wp(out, g), cf__ring_slots(g), (in.c + 1) / 2, (in.c + 1) / 2);
    return g->s[2] == 1 && out.w >= 16 && rsz <= max_r && w2 + (size_t)cf__nthreads() * rsz <= ws_floats;
}
/* Where the bf16 GEMM runs on AMX tiles (cf__bf16_amx_on) and the tiles' own direct kernel
   does not apply (below, cf__bf16_amx_fwd_applies), the GEMM paths take a forward of 64 input
   channels or more and a backward-data of 256 output channels or more from this direct
   kernel (Intel Xeon with AMX, 2 threads, bin/onednn-peer --precision bf16, the two doors in one
   hour: DeepCAM's 304 -> 256 3x3 at 192x288 forward 237 -> 115 ms; cosmoflow.cfg's 64 -> 128 at
   32^3 forward 44 -> 33, 128 -> 256 at 16^3 forward 27 -> 16 and backward-data 28 -> 20; behind
   these lines the direct kernel was level or ahead: 4 -> 32 forward 52 against 101, the 64 ->
   128 backward-data 47 against 55) */
static int cf__bf16_direct_amx_ok(int channels_in, int limit) { return !cf__bf16_amx_on() || channels_in < limit; }
static int cf__bf16_direct_fwd_applies(const cf__conv_call *c) {
    return cf__bf16_gemm_applies(c) && cf__bf16_direct_amx_ok(c->in.c, 64) && c->groups == 1 &&
           !cf__pointwise_applies(c) && cf__bf16_direct_fits(c->in, c->out, c->g, c->ws_floats, CF__BF16_DIRECT_MAX_R);
}
/* f (+)= conv as cf__direct_fwd_bf16 with the kernel w2 packed in the workspace (n pair words),
   in the dot step's form: the FMA form's widened kernel in a block of its own (twice w2's bytes,
   which the workspace may not have; one path's room whatever the form, so that the form never
   changes which path runs); where that block cannot be had, the dot form: the same bits */
static void cf__direct_fwd_bf16_form(const cf__conv_call *f, const uint32_t *w2, size_t n, uint32_t *ws,
                                     int accumulate) {
    uint32_t *wf = cf__bf16_fma() ? (uint32_t *)CF_MALLOC(sizeof(uint32_t) * 2 * n) : NULL;
    if (wf) cf__widen_pairs(wf, w2, n);
    cf__direct_fwd_bf16(f, wf ? wf : w2, ws, accumulate, wf != NULL);
    CF_FREE(wf);
}
static void cf__bf16_direct_fwd_run(const cf__conv_call *c) {
    uint32_t *w2 = (uint32_t *)c->ws;
    size_t n = cf__w2_floats(c->in, c->g, c->out.c);
    cf__pack_kernel_bf16(w2, c->w, c->out.c, c->in.c, c->g->k[0] * c->g->k[1], c->g->k[2], cf__w2_block(c->out));
    cf__direct_fwd_bf16_form(c, w2, n, w2 + n, 0);
}
/* backward-data: dy convolved with the flipped kernel (flipped into ws, then packed after it) */
static int cf__bf16_direct_bwd_applies(const cf__conv_call *c) {
    cf_geom gt;
    size_t wsz = cf__r16(cf__flipped_floats(c));   /* (64-byte parts: the pair rows hold longs) */
    return cf__bf16_gemm_applies(c) && cf__bf16_direct_amx_ok(c->out.c, 256) && c->groups == 1 &&
           cf__flipped_geom(c->g, &gt) && wsz < c->ws_floats &&
           cf__bf16_direct_fits(c->out, c->in, &gt, c->ws_floats - wsz, (size_t)-1);
}
/* c's backward-data as a forward call of the direct kernels (the kernel flipped into c->ws, gt
   its geometry), on dy and dx as the plan stores them; dx is added to unless stored
   (dx_half, dx_store) */
static cf__conv_call cf__bf16_flipped_call(const cf__conv_call *c, cf_geom *gt) {
    cf__conv_call f;
    cf__flipped_geom(c->g, gt);
    cf__flip_kernel(c->ws, c->w, c->in.c, c->out.c, cf__kvol(c->g));
    f = cf__flipped_call(c, gt);
    f.half = c->dx_half; f.x_half = c->half;
    return f;
}
static int cf__bf16_dx_added(const cf__conv_call *c) { return !c->dx_half && !c->dx_store; }
static void cf__bf16_direct_bwd_run(const cf__conv_call *c) {
    cf_geom gt;
    cf__conv_call f = cf__bf16_flipped_call(c, &gt);
    uint32_t *w2 = (uint32_t *)(c->ws + cf__r16(cf__flipped_floats(c)));
    size_t n = cf__w2_floats(c->out, &gt, c->in.c);
    cf__pack_kernel_bf16(w2, f.w, c->in.c, c->out.c, gt.k[0] * gt.k[1], gt.k[2], cf__w2_block(c->in));
    cf__direct_fwd_bf16_form(&f, w2, n, w2 + n, cf__bf16_dx_added(c));
}
#ifdef CF__AMX
/* ---- the direct kernel on AMX tiles, where the bf16 GEMM runs on them (cf__bf16_amx_on).  The
   bf16 direct kernel's pair rows, each slot holding 16 pair rows a chunk of 32 input channels
   (zeros past C), are read by tile loads: for tap (kd, kh, kw), chunk ch and 16 positions from
   w0, op(B) is 16 pair rows Wp words apart from word w0 + kw dil (tile 6; the next 16
   positions, tile 7).  The kernel is packed so that the same tap and chunk for 16 output
   channels is one tile of op(A), 16 rows of 16 pair words (tiles 4, 5 for two blocks of 16
   channels): wa[oc / 16][tap][ch][oc % 16][pair % 16], zeros past OC and C.  A block of 32
   channels x 32 positions sums in tiles 0-3 over every tap and chunk, four tdpbf16ps a step,
   and is stored as the other direct kernels' blocks (cf__direct_store_bf16: the bias, the
   activation, the rounding; or added into y).  Taps in the padding are skipped: they add
   zeros.  The sums are in the tiles' order, held to the bound as the GEMM's tiles are. */
static int cf__amx_chunks(int C) { return (C + 31) / 32; }
static size_t cf__wa_words(int OC, int C, int taps) {
    return cf__r16((size_t)(OC + 15) / 16 * 256 * cf__amx_chunks(C) * taps);
}
/* (flip: w is the kernel of the convolution whose backward-data this one is, w[C][OC][taps]
   with its taps reversed: cf__flip_kernel's kernel read where it lies, never made).  Written in
   wa's order, a tile of 16 x 16 pair words at a time (in w's order, cosmoflow.cfg's 256 -> 512
   kernel took 3.5 ms, its stores each a cache line apart) */
static void cf__pack_kernel_amx(uint32_t *wa, const float *w, int OC, int C, int taps, int flip) {
    int nch = cf__amx_chunks(C), nob = (OC + 15) / 16, ob;
    size_t o_step = flip ? (size_t)taps : (size_t)C * taps, c_step = flip ? (size_t)OC * taps : (size_t)taps;
    CF__OMP(omp parallel for schedule(static) if((size_t)OC * C * taps > 65536))
    for (ob = 0; ob < nob; ob++) {
        int t, ch, o, o8, p;
        for (ch = 0; ch < nch; ch++)
            for (o8 = 0; o8 < 16; o8 += 8)   /* (8 filters' part of w, 27 KiB for 3^3 taps: in the L1 cache) */
                for (t = 0; t < taps; t++) {
                    uint32_t *tile = wa + (((size_t)ob * taps + t) * nch + ch) * 256;
                    for (o = o8; o < o8 + 8; o++)
                        for (p = 0; p < 16; p++) {
                            int oc = 16 * ob + o, c = 2 * (16 * ch + p);   /* w[oc][c][t], or w[c][oc][taps - 1 - t] */
                            size_t at = (size_t)oc * o_step + (size_t)c * c_step + (size_t)(flip ? taps - 1 - t : t);
                            tile[o * 16 + p] =
                                oc < OC && c < C ? cf__pair(w[at], c + 1 < C ? w[at + c_step] : 0.0f) : 0;
                        }
                }
    }
}
/* what the rows share: y (half: 16 bits), its channel planes ystride apart; the packed kernel wa
   (OC channels, T = KD KH taps of pair rows, KW along the width dil apart, nch chunks); OW
   positions a row; pair rows Wp words long; the bias b (may be NULL), accumulate, the activation */
typedef struct {
    float *y;
    int half;
    size_t ystride;
    const uint32_t *wa;
    int OC, T, KW, dil, nch, OW;
    size_t Wp;
    const float *b;
    int accumulate, act;
    float slope;
} cf__direct_amx_call;
/* a block of the sums: 32 channels from oc0 (no valid) x 32 positions from w0 (n valid), over
   the steps s0 .. s1 of the T KW nch (step s: tap t, kw, chunk ch, s = (t KW + kw) nch + ch),
   added to the sums given (load) or from zeros */
typedef struct { int oc0, no, w0, n, s0, s1, load; } cf__amx_block;
/* block b's sums into sums (32 x 32), rp[t] the first pair row of tap t (zero: in the padding);
   or, where rp1 is not NULL, x 16 positions from w0 of two rows (n valid in each), rp and rp1's,
   the second row's in tiles 1 and 3 (sums' columns 16-31) */
CF__AMX_TARGET static void cf__direct_block_amx(const cf__direct_amx_call *d, const uint32_t *const *rp,
                                                const uint32_t *const *rp1, const uint32_t *zero,
                                                const cf__amx_block *b, float *sums) {
    size_t bstride = d->Wp * sizeof(uint32_t), astep = (size_t)d->T * d->KW * d->nch * 256;   /* 16 channels' taps */
    const uint32_t *wb = d->wa + (size_t)(b->oc0 / 16) * astep;
    int s;
    if (b->load) {
        _tile_loadd(0, sums, 128);
        _tile_loadd(1, sums + 16, 128);
        _tile_loadd(2, sums + 16 * 32, 128);
        _tile_loadd(3, sums + 16 * 32 + 16, 128);
    } else {
        _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
    }
    for (s = b->s0; s < b->s1; s++) {
        int t = s / (d->KW * d->nch), kw = s / d->nch % d->KW, ch = s % d->nch;
        int on0 = rp[t] != zero, on1 = rp1 ? rp1[t] != zero : on0 && b->n > 16;   /* (a row in the padding: zeros) */
        size_t at = (size_t)ch * 16 * d->Wp + (size_t)b->w0 + (size_t)kw * d->dil;
        const uint32_t *a = wb + (size_t)s * 256;
        if (!on0 && !on1) continue;
        _tile_loadd(4, a, 64);
        if (on0) { _tile_loadd(6, rp[t] + at, bstride); _tile_dpbf16ps(0, 4, 6); }
        if (on1) { _tile_loadd(7, rp1 ? rp1[t] + at : rp[t] + at + 16, bstride); _tile_dpbf16ps(1, 4, 7); }
        if (b->no > 16) {
            _tile_loadd(5, a + astep, 64);
            if (on0) _tile_dpbf16ps(2, 5, 6);
            if (on1) _tile_dpbf16ps(3, 5, 7);
        }
    }
    _tile_stored(0, sums, 128);
    _tile_stored(1, sums + 16, 128);
    _tile_stored(2, sums + 16 * 32, 128);
    _tile_stored(3, sums + 16 * 32 + 16, 128);
}
/* block b's sums into y: the row from element y0; or (two) two rows, from y0 and y1 */
CF__AMX_TARGET static void cf__direct_store_amx(const cf__direct_amx_call *d, const float *sums, size_t y0, size_t y1,
                                                int two, const cf__amx_block *b) {
    int o, j;
    for (o = 0; o < b->no; o++)
        for (j = 0; j < 2; j++) {
            size_t at = two ? (j ? y1 : y0) + (size_t)b->w0 : y0 + (size_t)b->w0 + 16 * j;
            int m = two ? b->n : b->n - 16 * j;   /* (the sums' columns 16 j ..) */
            if (m > 0)
                cf__direct_store_bf16(d->y, d->half, at + (size_t)(b->oc0 + o) * d->ystride,
                                      _mm512_loadu_ps(sums + o * 32 + 16 * j), m, d->b ? d->b[b->oc0 + o] : 0.0f,
                                      d->accumulate, d->act, d->slope);
        }
}
/* ---- Units in groups, the steps in slices.  A block's kernel (its steps x 2 KiB: 54 KiB for
   cosmoflow.cfg's 32 -> 64) does not stay in the L1 cache beside the pair rows, so each of the
   block's tile loads would come from the L2 cache, which cannot feed a tdpbf16ps a tile load.
   Here the steps are cut into slices of CF__AMX_SLICE (18 KiB of the kernel), and a slice is
   applied to every block of a group of units before the next slice, the blocks' sums kept in
   acc between slices (stored and loaded again as they are: the same sums in the same order as
   one pass over all the steps).  A unit is an output row, or two rows of at most 16 positions
   (cf__amx_two_rows); a group at most CF__AMX_GROUP_BLOCKS blocks.  A scratch program on the
   Xeon, the 32 -> 64's blocks: 12.3 -> 9.1 ns a tdpbf16ps (groups of 4 to 16 rows alike). */
#define CF__AMX_SLICE 9
#define CF__AMX_GROUP_BLOCKS 16
#define CF__AMX_GROUP_PTRS 256   /* (pair row pointers of a group: its rows x T) */
typedef struct { size_t y0, y1; const uint32_t *const *rp0, *const *rp1; } cf__amx_unit;   /* (rp1 NULL: one row) */
static int cf__amx_steps(const cf__direct_amx_call *d) { return d->T * d->KW * d->nch; }
static int cf__amx_unit_blocks(const cf__direct_amx_call *d, int two) { return two ? 1 : (d->OW + 31) / 32; }
/* floats of a thread's acc: the blocks of a group, or of one wide row */
static size_t cf__amx_acc_floats(int OW) {
    int nb = (OW + 31) / 32;
    return (size_t)(nb > CF__AMX_GROUP_BLOCKS ? nb : CF__AMX_GROUP_BLOCKS) * 1024;
}
/* units a group: its blocks at most CF__AMX_GROUP_BLOCKS (one unit at least), its pair rows at
   most CF__AMX_GROUP_PTRS; the left units cut into groups of even size */
static int cf__amx_group_units(const cf__direct_amx_call *d, int two, long left) {
    int G;
    long groups;
    if (two) return 1;   /* (pairs of rows in groups, sliced: 10 % slower, cosmoflow.cfg's 128 -> 256 and 256 -> 512) */
    G = CF__AMX_GROUP_BLOCKS / cf__amx_unit_blocks(d, 0);
    if (G * d->T > CF__AMX_GROUP_PTRS) G = CF__AMX_GROUP_PTRS / d->T;
    if (G < 1) G = 1;
    groups = (left + G - 1) / G;
    return (int)((left + groups - 1) / groups);
}
/* block b's positions: the w-th block of wide positions of a row of OW */
static void cf__amx_block_at(cf__amx_block *b, int OW, int w, int wide) {
    b->w0 = wide * w;
    b->n = OW - b->w0 < wide ? OW - b->w0 : wide;
}
/* the nu units u (two: of two rows each), channels oc_from .. oc_to; acc: their blocks' sums (one
   slice: each block stored as it is made, its sums in acc's first 1024 floats) */
CF__AMX_TARGET static void cf__direct_units_amx(const cf__direct_amx_call *d, const cf__amx_unit *u, int nu, int two,
                                                const uint32_t *zero, int oc_from, int oc_to, float *acc) {
    int nb = cf__amx_unit_blocks(d, two), wide = two ? 16 : 32, S = cf__amx_steps(d), oc0, s0, i, w;
    int slice = nu * nb > 1 ? CF__AMX_SLICE : S, one = slice >= S;   /* (one block: none to share a slice with) */
    for (oc0 = oc_from; oc0 < oc_to; oc0 += 32) {
        cf__amx_block b = {oc0, oc_to - oc0 < 32 ? oc_to - oc0 : 32, 0, 0, 0, 0, 0};
        for (s0 = 0; s0 < S; s0 += slice)
            for (i = 0; i < nu; i++)
                for (w = 0; w < nb; w++) {
                    float *sums = one ? acc : acc + ((size_t)i * nb + w) * 1024;
                    cf__amx_block_at(&b, d->OW, w, wide);
                    b.s0 = s0; b.s1 = s0 + slice < S ? s0 + slice : S; b.load = s0 > 0;
                    cf__direct_block_amx(d, u[i].rp0, u[i].rp1, zero, &b, sums);
                    if (one) cf__direct_store_amx(d, sums, u[i].y0, u[i].y1, u[i].rp1 != NULL, &b);
                }
        for (i = 0; i < nu && !one; i++)
            for (w = 0; w < nb; w++) {
                cf__amx_block_at(&b, d->OW, w, wide);
                cf__direct_store_amx(d, acc + ((size_t)i * nb + w) * 1024, u[i].y0, u[i].y1, u[i].rp1 != NULL, &b);
            }
    }
}
/* Rows of at most 16 positions go two at a time, a block's two tiles of positions one row's
   each (one row left half of each block's tiles empty: cosmoflow.cfg's 128 -> 256 at 16^3
   forward 10.6 -> 5.8 ms, backward-data 11.7 -> 7.8), where each thread's pair rows hold whole
   planes (cf__ring_ns), so that both rows' are there at once, and a row reads at most
   CF__AMX_TWO_T rows of taps */
#define CF__AMX_TWO_T 64
static int cf__amx_two_rows(cf_shape in, cf_shape out, const cf_geom *g, int ns) {
    return out.w <= 16 && out.h >= 2 && ns == in.h && g->k[0] * g->k[1] <= CF__AMX_TWO_T;
}
/* ---- a sample at a time: where the packed kernel is large (more than CF__AMX_SAMPLE_W words;
   row by row, each row would read it again: cosmoflow.cfg's 256 -> 512 at 8^3, 7 MiB) and one
   sample's pair rows are few (at most CF__AMX_SAMPLE_R words), the threads build every pair row
   of the sample first, then each takes blocks of 32 output channels whole, every row of the
   sample for each: a block's part of the kernel is read from memory once and then from the
   cache.  The rows, blocks and sums are the row-by-row kernel's (the same bits). */
#define CF__AMX_SAMPLE_W ((size_t)1 << 18)
#define CF__AMX_SAMPLE_R ((size_t)1 << 21)
static size_t cf__amx_sample_words(cf_shape in, cf_shape out, const cf_geom *g) {
    size_t Wp = cf__direct_wp(out, g);
    return cf__r16((size_t)in.d * in.h * 16 * cf__amx_chunks(in.c) * Wp) + cf__r16(Wp);
}
static int cf__amx_by_sample(cf_shape in, cf_shape out, const cf_geom *g, size_t room) {
    size_t rows = cf__amx_sample_words(in, out, g);
    return cf__wa_words(out.c, in.c, cf__kvol(g)) > CF__AMX_SAMPLE_W && rows <= CF__AMX_SAMPLE_R &&
           rows + (size_t)cf__nthreads() * cf__amx_acc_floats(out.w) <= room &&
           g->k[0] * g->k[1] <= CF__AMX_TWO_T;
}
/* rp[kd KH + kh]: the pair rows output row (od, oh) reads (rows: the sample's, c2 a row) */
static void cf__amx_sample_rp(const uint32_t **rp, const uint32_t *rows, const uint32_t *zero, int c2, size_t Wp,
                              cf_shape in, const cf_geom *g, int od, int oh) {
    int kd, kh;
    for (kd = 0; kd < g->k[0]; kd++)
        for (kh = 0; kh < g->k[1]; kh++) {
            int id = od * g->s[0] - g->pb[0] + kd * g->dil[0], ih = oh * g->s[1] - g->pb[1] + kh * g->dil[1];
            rp[kd * g->k[1] + kh] = id < 0 || id >= in.d || ih < 0 || ih >= in.h
                                        ? zero : rows + ((size_t)id * in.h + ih) * c2 * Wp;
        }
}
/* every pair row of sample x (c2 a row, zeros past C's) into rows */
static void cf__amx_sample_rows(uint32_t *rows, const float *x, int half, cf_shape in, const cf_geom *g, int c2,
                                size_t Wp) {
    long q;
    int C2 = (in.c + 1) / 2;
    CF__OMP(omp parallel for schedule(static))
    for (q = 0; q < (long)in.d * in.h; q++) {
        uint32_t *r = rows + (size_t)q * c2 * Wp;
        int cp;
        for (cp = 0; cp < C2; cp++)
            cf__pair_row(r + (size_t)cp * Wp, Wp, x, half, in.c, in, g->pb[2], cp, (int)(q / in.h), (int)(q % in.h));
        memset(r + (size_t)C2 * Wp, 0, sizeof(uint32_t) * (size_t)(c2 - C2) * Wp);
    }
}
static void cf__direct_fwd_amx_sample(const cf__conv_call *f, const cf__direct_amx_call *d, uint32_t *ws) {
    cf_shape in = f->in, out = f->out;
    int c2 = 16 * cf__amx_chunks(in.c), nob = (out.c + 31) / 32, bi, hh, G;
    int two = cf__amx_two_rows(in, out, f->g, in.h);   /* (a sample's pair rows hold its whole planes) */
    size_t Wp = cf__direct_wp(out, f->g), P = cf__positions(out), rows = cf__amx_sample_words(in, out, f->g);
    uint32_t *zero = ws + rows - cf__r16(Wp);
    long units, ng, k;
    hh = two ? (out.h + 1) / 2 : out.h;
    units = (long)out.d * hh;
    G = cf__amx_group_units(d, two, units);
    ng = (units + G - 1) / G;
    memset(zero, 0, sizeof(uint32_t) * Wp);
    for (bi = 0; bi < f->B; bi++) {
        cf__amx_sample_rows(ws, cf__elt(f->x, f->x_half, (size_t)bi * cf_shape_size(in)), f->x_half, in, f->g, c2, Wp);
        CF__OMP(omp parallel num_threads(cf__nthreads()))
        {
            const uint32_t *rps[CF__AMX_GROUP_PTRS];
            cf__amx_unit u[CF__AMX_GROUP_BLOCKS];
            float *acc = (float *)(void *)(ws + rows) + (size_t)cf__thread_id() * cf__amx_acc_floats(out.w);
            cf__amx_tiles_on();
            CF__OMP(omp for schedule(static))
            for (k = 0; k < nob * ng; k++) {   /* a thread's blocks of channels whole: k / ng */
                int ob = (int)(k / ng), nu = units - k % ng * G < G ? (int)(units - k % ng * G) : G, i;
                for (i = 0; i < nu; i++) {
                    long q = k % ng * G + i;
                    int od = (int)(q / hh), oh = (int)(q % hh) * (two ? 2 : 1);
                    const uint32_t **r0 = rps + (size_t)(two ? 2 * i : i) * d->T;
                    u[i].y0 = (size_t)bi * out.c * P + ((size_t)od * out.h + oh) * out.w;
                    u[i].y1 = u[i].y0 + (size_t)out.w;
                    cf__amx_sample_rp(r0, ws, zero, c2, Wp, in, f->g, od, oh);
                    u[i].rp0 = r0;
                    u[i].rp1 = NULL;
                    if (two && oh + 1 < out.h) {
                        cf__amx_sample_rp(r0 + d->T, ws, zero, c2, Wp, in, f->g, od, oh + 1);
                        u[i].rp1 = r0 + d->T;
                    }
                }
                cf__direct_units_amx(d, u, nu, two, zero, 32 * ob, 32 * ob + 32 < out.c ? 32 * ob + 32 : out.c, acc);
            }
            cf__amx_tiles_off();
        }
    }
}
/* y (+)= conv(x, w) as cf__direct_fwd_bf16, on the tiles: wa the packed kernel, ws one
   cf__ring per thread (16 pair rows a chunk) and its group's sums, or a sample's
   (cf__amx_by_sample).  Groups of several units where the pair rows hold whole planes (every
   row of a group's there at once). */
static void cf__direct_fwd_amx(const cf__conv_call *f, const uint32_t *wa, uint32_t *ws, int accumulate) {
    cf_shape in = f->in, out = f->out;
    const cf_geom *g = f->g;
    int c2 = 16 * cf__amx_chunks(in.c), x_half = f->x_half, nth = cf__nthreads(), ns, two, hh, G, copy;
    size_t Wp = cf__direct_wp(out, g), P = cf__positions(out), in_sz = cf_shape_size(in), rsz,
           acc_sz = cf__amx_acc_floats(out.w);
    long ng, groups, r;
    cf__direct_amx_call d = {f->y, f->half, P, wa, out.c, g->k[0] * g->k[1], g->k[2], g->dil[2], cf__amx_chunks(in.c),
                             out.w, Wp, f->b, accumulate, f->act, f->slope};
    size_t room = (size_t)((const uint32_t *)(const void *)(f->ws + f->ws_floats) - ws);
    if (cf__amx_by_sample(in, out, g, room)) { cf__direct_fwd_amx_sample(f, &d, ws); return; }
    ns = cf__ring_ns(in, g, Wp, room - (size_t)nth * acc_sz, (in.c + 1) / 2, c2);
    rsz = cf__ring_size(g, Wp, ns, (in.c + 1) / 2, c2) + acc_sz;   /* (a thread's: its pair rows, its sums) */
    two = cf__amx_two_rows(in, out, g, ns);
    hh = two ? (out.h + 1) / 2 : out.h;   /* units a plane */
    G = ns == in.h ? cf__amx_group_units(&d, two, hh) : 1;
    ng = (hh + G - 1) / G;
    copy = G > 1 || two;   /* (each cf__ring_for sets pr.rp: kept in rps where a group has more rows) */
    groups = (long)f->B * out.d * ng;
    CF__OMP(omp parallel num_threads(nth))
    {
        cf__ring pr = cf__ring_at(ws + (size_t)cf__thread_id() * rsz, g, Wp, ns, (in.c + 1) / 2, c2);
        float *acc = (float *)(void *)(ws + (size_t)cf__thread_id() * rsz + rsz - acc_sz);
        const uint32_t *rps[CF__AMX_GROUP_PTRS];
        cf__amx_unit u[CF__AMX_GROUP_BLOCKS];
        cf__amx_tiles_on();
        CF__OMP(omp for schedule(static))
        for (r = 0; r < groups; r++) {
            int bi = (int)(r / ((long)out.d * ng)), od = (int)(r / ng % out.d), q0 = (int)(r % ng) * G, i, j;
            int nu = hh - q0 < G ? hh - q0 : G;
            const float *xs = cf__elt(f->x, x_half, (size_t)bi * in_sz);
            for (i = 0; i < nu; i++) {
                int oh = (q0 + i) * (two ? 2 : 1);
                u[i].y0 = (size_t)bi * out.c * P + ((size_t)od * out.h + oh) * out.w;
                u[i].y1 = u[i].y0 + (size_t)out.w;
                u[i].rp1 = NULL;
                for (j = 0; j < (two && oh + 1 < out.h ? 2 : 1); j++) {
                    const uint32_t **to = rps + (size_t)(two ? 2 * i + j : i) * d.T;
                    cf__ring_for(&pr, xs, x_half, bi, in.c, in, g, od, oh + j, cf__pair_row);
                    if (copy) memcpy(to, pr.rp, sizeof *to * (size_t)d.T);
                    if (j) u[i].rp1 = to;
                    else u[i].rp0 = copy ? to : pr.rp;
                }
            }
            cf__direct_units_amx(&d, u, nu, two, pr.zero, 0, out.c, acc);
        }
        cf__amx_tiles_off();
    }
}
/* Where the kernel goes: rows along the width of stride 1 (a tile's positions are consecutive
   words); 16 input channels or more (fewer leave most of a tile's pairs zero: cosmoflow.cfg's
   4 -> 32 forward 103 ms, against 53 for the direct kernel; they go to cf__bf16_fold_fwd,
   below); a sample at a time where cf__amx_by_sample says so, else a packed kernel of at most
   CF__AMX_DIRECT_MAX_W words, which each row reads again (above it, from memory: DeepCAM's
   ASPP 2048 -> 256 backward-data 46 ms against 35; cosmoflow.cfg's 256 -> 512 at 8^3 forward
   14.7 against 8.3 by the GEMM, 7.8-8.0 a sample at a time); the packed kernel and every
   thread's pair rows (or the sample's) in the workspace.  Measured on an Intel Xeon with AMX,
   2 threads, bin/onednn-peer --precision bf16 (docs/performance.md). */
#define CF__AMX_DIRECT_MAX_W ((size_t)1 << 19)
static int cf__amx_direct_fits(cf_shape in, cf_shape out, const cf_geom *g, size_t ws_floats) {
    size_t wa = cf__wa_words(out.c, in.c, cf__kvol(g)),
           rsz = cf__ring_size(g, cf__direct_wp(out, g), cf__ring_slots(g), (in.c + 1) / 2, 16 * cf__amx_chunks(in.c));
    if (g->s[2] != 1 || in.c < 16 || wa >= ws_floats) return 0;
    if (cf__amx_by_sample(in, out, g, ws_floats - wa)) return 1;   /* (a sample at a time: any kernel) */
    rsz += cf__amx_acc_floats(out.w);                                /* (a thread's sums, cf__direct_units_amx) */
    return wa <= CF__AMX_DIRECT_MAX_W && wa + (size_t)cf__nthreads() * rsz <= ws_floats;
}
/* The workspace the tiles read, from its first cache line: a tile's 64-byte rows each within
   one line where the buffer starts on one.  Split over two, a tile load costs more than its
   tdpbf16ps (a scratch program on the Xeon, 27 taps of 32 x 32 blocks: 21 against 14 ns a
   tdpbf16ps with the packed kernel 16 bytes past a line; the network's workspace lies anywhere) */
static uint32_t *cf__amx_ws(const cf__conv_call *c) { return (uint32_t *)(void *)cf__line_aligned(c->ws); }
static size_t cf__amx_ws_floats(const cf__conv_call *c) { return c->ws_floats > 15 ? c->ws_floats - 15 : 0; }
static int cf__bf16_amx_fwd_applies(const cf__conv_call *c) {
    return cf__bf16_gemm_applies(c) && cf__bf16_amx_on() && c->groups == 1 && !cf__pointwise_applies(c) &&
           cf__amx_direct_fits(c->in, c->out, c->g, cf__amx_ws_floats(c));
}
static void cf__bf16_amx_fwd_run(const cf__conv_call *c) {
    uint32_t *wa = cf__amx_ws(c);
    cf__pack_kernel_amx(wa, c->w, c->out.c, c->in.c, cf__kvol(c->g), 0);
    cf__direct_fwd_amx(c, wa, wa + cf__wa_words(c->out.c, c->in.c, cf__kvol(c->g)), 0);
}
/* backward-data: dy convolved with the flipped kernel, as cf__bf16_direct_bwd_run, the flipped
   kernel packed from c's as it lies (not made in the workspace first) */
static int cf__bf16_amx_bwd_applies(const cf__conv_call *c) {
    cf_geom gt;
    return cf__bf16_gemm_applies(c) && cf__bf16_amx_on() && c->groups == 1 && cf__flipped_geom(c->g, &gt) &&
           cf__amx_direct_fits(c->out, c->in, &gt, cf__amx_ws_floats(c));
}
static void cf__bf16_amx_bwd_run(const cf__conv_call *c) {
    cf_geom gt;
    cf__conv_call f;
    uint32_t *wa = cf__amx_ws(c);
    cf__flipped_geom(c->g, &gt);
    f = cf__flipped_call(c, &gt);
    f.w = c->w; f.ws = c->ws; f.ws_floats = c->ws_floats;   /* (the flipped kernel is never made) */
    f.half = c->dx_half; f.x_half = c->half;
    cf__pack_kernel_amx(wa, c->w, c->in.c, c->out.c, cf__kvol(&gt), 1);
    cf__direct_fwd_amx(&f, wa, wa + cf__wa_words(c->in.c, c->out.c, cf__kvol(&gt)), cf__bf16_dx_added(c));
}
/* ---- few input channels on the tiles (cosmoflow.cfg's 4 -> 32 conv).  With fewer than 16
   input channels a chunk's 16 pairs would be mostly zeros, so here a tile's pairs are (channel
   pair, tap) instead: pair p = (cp, kd, kh, kw) of an output row, for 16 positions from w, is
   the pair row (cp, kd, kh) from word w + kw dil.  Those rows are copied into X, 16 pair rows
   a step (zeros past the C2 KD KH KW pairs), XW positions at a time, and X is read as
   cf__direct_units_amx reads a tap's pair rows: T steps of one tap and one chunk, the kernel
   packed to match, wf[oc / 16][step][oc % 16][p % 16].  cosmoflow.cfg's first conv: 54 pairs
   in 4 steps of 16, where a chunk of channels would take 27 steps of 2 pairs.  The copy is
   an im2col of one row's chunk, in the L1 cache (X: 8 KiB a step). */
#define CF__FOLD_XW 128
#define CF__FOLD_MAX_STEPS 32
static int cf__fold_steps(const cf__conv_call *c) { return (((c->in.c + 1) / 2) * cf__kvol(c->g) + 15) / 16; }
static size_t cf__fold_x_words(const cf__conv_call *c) { return (size_t)cf__fold_steps(c) * 16 * CF__FOLD_XW; }
static size_t cf__wf_words(const cf__conv_call *c) {
    return cf__r16((size_t)(c->out.c + 15) / 16 * 256 * cf__fold_steps(c));
}
static void cf__pack_kernel_folded(uint32_t *wf, const cf__conv_call *c) {
    int C = c->in.c, taps = cf__kvol(c->g), K2 = (C + 1) / 2 * taps, steps = cf__fold_steps(c), oc, p;
    for (oc = 0; oc < (c->out.c + 15) / 16 * 16; oc++)
        for (p = 0; p < 16 * steps; p++) {
            int cp = p / taps, t = p % taps;
            size_t at = ((size_t)oc * C + 2 * cp) * taps + t;   /* w[oc][2 cp][t] */
            wf[((size_t)(oc / 16) * steps + p / 16) * 256 + (oc % 16) * 16 + p % 16] =
                oc < c->out.c && p < K2 ? cf__pair(c->w[at], 2 * cp + 1 < C ? c->w[at + taps] : 0.0f) : 0;
        }
}
/* X for positions w0 .. of the row whose pair rows are rp (nw words copied a row) */
CF__BF16_TARGET static void cf__fold_x(uint32_t *X, const uint32_t *const *rp, int K2, int KW, int dil, int w0,
                                       int nw) {
    int p, i;
    for (p = 0; p < K2; p++) {   /* (64 bytes at a time: memcpy took 3 times as long, cosmoflow.cfg's first conv) */
        const uint32_t *from = rp[p / KW] + w0 + p % KW * dil;
        uint32_t *to = X + (size_t)p * CF__FOLD_XW;
        for (i = 0; i < nw; i += 16)
            _mm512_storeu_si512((void *)(to + i), _mm512_loadu_si512((const void *)(from + i)));
    }
}
static void cf__fold_fwd_amx(const cf__conv_call *f, const uint32_t *wf, uint32_t *ws) {
    cf_shape in = f->in, out = f->out;
    const cf_geom *g = f->g;
    int C2 = (in.c + 1) / 2, K2 = C2 * cf__kvol(g), steps = cf__fold_steps(f), ns;
    size_t Wp = cf__direct_wp(out, g), OWp = (size_t)(out.w + 31) / 32 * 32, P = cf__positions(out),
           in_sz = cf_shape_size(in), xw = cf__fold_x_words(f), rsz;
    long rows = (long)f->B * out.d * out.h, r;
    cf__direct_amx_call d = {f->y, f->half, P, wf, out.c, steps, 1, 1, 1, 0, CF__FOLD_XW, f->b, 0, f->act, f->slope};
    ns = cf__ring_ns(in, g, Wp, (size_t)((const uint32_t *)(const void *)(f->ws + f->ws_floats) - ws) -
                                      (size_t)cf__nthreads() * xw, C2, C2);
    rsz = cf__ring_size(g, Wp, ns, C2, C2) + xw;
    CF__OMP(omp parallel num_threads(cf__nthreads()))
    {
        uint32_t *X = ws + (size_t)cf__thread_id() * rsz;
        const uint32_t *xp[CF__FOLD_MAX_STEPS];
        float acc[CF__FOLD_XW / 32 * 1024] __attribute__((aligned(64)));   /* (the row's blocks' sums: 16 KiB) */
        cf__amx_unit u = {0, 0, xp, NULL};
        cf__direct_amx_call dt = d;   /* (the thread's: its OW changes with the chunk) */
        cf__ring pr = cf__ring_at(X + xw, g, Wp, ns, C2, C2);
        int s;
        memset(X, 0, sizeof(uint32_t) * xw);   /* (the pairs past K2 stay zeros) */
        for (s = 0; s < steps; s++) xp[s] = X + (size_t)s * 16 * CF__FOLD_XW;
        cf__amx_tiles_on();
        CF__OMP(omp for schedule(static))
        for (r = 0; r < rows; r++) {
            int bi = (int)(r / ((long)out.d * out.h)), od = (int)(r / out.h % out.d), oh = (int)(r % out.h), w0;
            size_t y0 = (size_t)bi * out.c * P + ((size_t)od * out.h + oh) * out.w;
            cf__ring_for(&pr, cf__elt(f->x, f->x_half, (size_t)bi * in_sz), f->x_half, bi, in.c, in, g, od, oh,
                         cf__pair_row);
            for (w0 = 0; w0 < out.w; w0 += CF__FOLD_XW) {
                cf__fold_x(X, pr.rp, K2, g->k[2], g->dil[2], w0,
                           (int)(OWp - (size_t)w0 < CF__FOLD_XW ? OWp - (size_t)w0 : CF__FOLD_XW));
                dt.OW = out.w - w0 < CF__FOLD_XW ? out.w - w0 : CF__FOLD_XW;
                u.y0 = y0 + (size_t)w0;
                cf__direct_units_amx(&dt, &u, 1, 0, NULL, 0, out.c, acc);
            }
        }
        cf__amx_tiles_off();
    }
}
/* Where it goes: fewer than 16 input channels (16 or more: the kernel above), rows of stride 1,
   at most CF__FOLD_MAX_STEPS steps (X 256 KiB a thread) */
static int cf__bf16_fold_fwd_applies(const cf__conv_call *c) {
    size_t need;
    if (!cf__bf16_gemm_applies(c) || !cf__bf16_amx_on() || c->groups != 1 || cf__pointwise_applies(c) ||
        c->in.c >= 16 || c->g->s[2] != 1 || cf__fold_steps(c) > CF__FOLD_MAX_STEPS)
        return 0;
    need = cf__wf_words(c) + (size_t)cf__nthreads() * (cf__fold_x_words(c) +
           cf__ring_size(c->g, cf__direct_wp(c->out, c->g), cf__ring_slots(c->g), (c->in.c + 1) / 2,
                                       (c->in.c + 1) / 2));
    return need <= cf__amx_ws_floats(c);
}
static void cf__bf16_fold_fwd_run(const cf__conv_call *c) {
    uint32_t *wf = cf__amx_ws(c);
    cf__pack_kernel_folded(wf, c);
    cf__fold_fwd_amx(c, wf, wf + cf__wf_words(c));
}
#endif
/* the GEMM paths (tiles, pointwise) with the bf16 GEMM */
static int cf__bf16_pointwise_applies(const cf__conv_call *c) {
    return cf__bf16_gemm_applies(c) && cf__pointwise_applies(c);
}
/* the output stored rounded: by the GEMM when no bias or activation pass follows it, else by that pass */
static void cf__bf16_pointwise_fwd(const cf__conv_call *c) {
    int bare = !c->b && c->act == CF_ACT_LINEAR;
    cf__pointwise_fwd_with(c, bare ? cf__sgemm_bf16_rounded : cf__sgemm_bf16, !bare);
}
static void cf__bf16_pointwise_bww(const cf__conv_call *c) { cf__pointwise_bww_with(c, cf__sgemm_bf16); }
static void cf__bf16_pointwise_bwd(const cf__conv_call *c) { cf__pointwise_bwd_with(c, cf__sgemm_bf16_rounded); }
/* The same three on operands stored in 16 bits (section 9, halves): y or dy (half), x (x_half)
   and dx (dx_half) read by the bf16 GEMM's packing and written by its store, the same sums as
   above.  Its buffers are the workspace's (a GEMM on 16-bit operands cannot fall back on
   cf_sgemm).  The GEMM stores a 16-bit y or dx rounded, so its sum must be one chunk (at most
   2 CF__GEMM_KC channels in, or out for dx) with no bias and no activation after it: a conv
   before a batch norm.  A 16-bit y of a longer sum, or with a bias or an activation, is made
   a block of columns at a time in fp32 in the workspace after the GEMM's buffers: there the
   bias, the activation and the rounding, as fp32 storage's, then stored in 16 bits (a sum
   does not depend on how the columns are cut). */
static int cf__bf16_pw_half_applies(const cf__conv_call *c) {
    return (c->half || c->x_half || c->dx_half) && !c->x_raw && cf__bf16_pointwise_applies(c) &&
           c->ws_floats >= cf__gemm_bf16_ws_floats();
}
/* whether the GEMM stores y in 16 bits itself (else the blocks, below) */
static int cf__bf16_pw_y16(const cf__conv_call *c) {
    return !c->b && c->act == CF_ACT_LINEAR && (c->in.c / c->groups + 1) / 2 <= CF__GEMM_KC;
}
static int cf__bf16_pw_half_fwd_applies(const cf__conv_call *c) {   /* (the blocks: at least 32 columns) */
    return cf__bf16_pw_half_applies(c) &&
           (!c->half || cf__bf16_pw_y16(c) ||
            c->ws_floats >= cf__gemm_bf16_ws_floats() + (size_t)c->out.c / c->groups * 32);
}
static void cf__bf16_pw_half_fwd_blocks(const cf__conv_call *c) {
    int Cg = c->in.c / c->groups, OCg = c->out.c / c->groups, bi, gi, r;
    size_t P = cf__positions(c->out), in_sz = cf_shape_size(c->in),
        cols = (c->ws_floats - cf__gemm_bf16_ws_floats()) / OCg, p0;
    float *block = c->ws + cf__gemm_bf16_ws_floats();
    if (cols > P) cols = P;
    for (bi = 0; bi < c->B; bi++)
        for (gi = 0; gi < c->groups; gi++)
            for (p0 = 0; p0 < P; p0 += cols) {
                size_t n = P - p0 < cols ? P - p0 : cols, at = ((size_t)bi * c->out.c + (size_t)gi * OCg) * P + p0;
                cf__gemm_call yg = {0, 0, OCg, (int)n, Cg, c->w + (size_t)gi * OCg * Cg, Cg,
                                    cf__elt(c->x, c->x_half, bi * in_sz + (size_t)gi * Cg * P + p0), (int)P, 0.0f,
                                    block, (int)n, 0, NULL, c->x_half ? CF__GEMM_HALF_B : 0, NULL};
                cf__sgemm_bf16_r(&yg, c->ws);
                cf__bias_act_p(block, c->b ? c->b + (size_t)gi * OCg : NULL, OCg, n, n, c->act, c->slope, 0);
                CF__OMP(omp parallel for schedule(static))
                for (r = 0; r < OCg; r++)
                    cf__narrow_run((cf_bf16 *)(void *)c->y + at + (size_t)r * P, block + (size_t)r * n, n);
            }
}
static int cf__bf16_pw_half_bwd_applies(const cf__conv_call *c) {
    return cf__bf16_pw_half_applies(c) && (!c->dx_half || (c->out.c / c->groups + 1) / 2 <= CF__GEMM_KC);
}
static void cf__bf16_pw_half_fwd(const cf__conv_call *c) {
    int Cg = c->in.c / c->groups, OCg = c->out.c / c->groups, bi, gi,
        h = (c->x_half ? CF__GEMM_HALF_B : 0) | (c->half ? CF__GEMM_HALF_C : 0);
    int bare = !c->b && c->act == CF_ACT_LINEAR;   /* rounded by the GEMM, as cf__bf16_pointwise_fwd */
    size_t P = cf__positions(c->out), in_sz = cf_shape_size(c->in);
    if (c->half && !cf__bf16_pw_y16(c)) { cf__bf16_pw_half_fwd_blocks(c); return; }
    for (bi = 0; bi < c->B; bi++) {
        for (gi = 0; gi < c->groups; gi++) {
            cf__gemm_call yg = {0, 0, OCg, (int)P, Cg, c->w + (size_t)gi * OCg * Cg, Cg,
                                cf__elt(c->x, c->x_half, bi * in_sz + (size_t)gi * Cg * P), (int)P, 0.0f,
                                cf__elt(c->y, c->half, ((size_t)bi * c->out.c + (size_t)gi * OCg) * P), (int)P,
                                         bare, NULL, h, NULL};
            cf__sgemm_bf16_r(&yg, c->ws);
        }
        if (!c->half) cf__bias_act_p(c->y + (size_t)bi * c->out.c * P, c->b, c->out.c, P, P, c->act, c->slope, !bare);
    }
}
static void cf__bf16_pw_half_bww(const cf__conv_call *c) {
    int Cg = c->in.c / c->groups, OCg = c->out.c / c->groups, bi, gi,
        h = (c->half ? CF__GEMM_HALF_A : 0) | (c->x_half ? CF__GEMM_HALF_B : 0);
    size_t P = cf__positions(c->out), in_sz = cf_shape_size(c->in);
    for (bi = 0; bi < c->B; bi++)
        for (gi = 0; gi < c->groups; gi++) {
            cf__gemm_call dwg = {0, 1, OCg, Cg, (int)P,
                                 cf__elt(c->dy, c->half, ((size_t)bi * c->out.c + (size_t)gi * OCg) * P), (int)P,
                                 cf__elt(c->x, c->x_half, bi * in_sz + (size_t)gi * Cg * P), (int)P, 1.0f,
                                 c->dw + (size_t)gi * OCg * Cg, Cg, 0, NULL, h, NULL};
            cf__sgemm_bf16_r(&dwg, c->ws);
        }
}
static void cf__bf16_pw_half_bwd(const cf__conv_call *c) {   /* (a 16-bit dx is stored: its only writer) */
    int Cg = c->in.c / c->groups, OCg = c->out.c / c->groups, bi, gi,
        h = (c->half ? CF__GEMM_HALF_B : 0) | (c->dx_half ? CF__GEMM_HALF_C : 0);
    size_t P = cf__positions(c->out), in_sz = cf_shape_size(c->in);
    for (bi = 0; bi < c->B; bi++)
        for (gi = 0; gi < c->groups; gi++) {
            cf__gemm_call dxg = {1, 0, Cg, (int)P, OCg, c->w + (size_t)gi * OCg * Cg, Cg,
                                 cf__elt(c->dy, c->half, ((size_t)bi * c->out.c + (size_t)gi * OCg) * P), (int)P,
                                 c->dx_store || c->dx_half ? 0.0f : 1.0f,
                                          cf__elt(c->dx, c->dx_half, bi * in_sz + (size_t)gi * Cg * P), (int)P,
                                 1, NULL, h, NULL};
            cf__sgemm_bf16_r(&dxg, c->ws);
        }
}
/* Backward-data of a strided 1x1 convolution in bf16: cf__strided_pw_bands with the bf16 GEMM
   (dy read as stored, in 16 bits or 32), each dx row rounded as it is written.  DeepCAM's
   residual branches (64 -> 128, 128 -> 256 and 256 -> 728 at stride 2) ran im2col's loop:
   the GEMM into tiles, col2im into a dx the dispatcher zeroed, then rounded in a pass of its
   own (docs/performance.md, "bf16").  The GEMM's buffers first in ws, then a band of output
   rows. */
static int cf__bf16_strided_pw_applies(const cf__conv_call *c) {
    return cf__bf16_gemm_applies(c) && !c->dx_half && cf__strided_pw_geom(c) &&
           cf__gemm_bf16_ws_floats() + (size_t)c->in.c * c->out.w <= c->ws_floats;
}
static void cf__strided_pw_gemm_bf16(const cf__gemm_call *g, float *gws) { cf__sgemm_bf16_r(g, gws); }
static void cf__bf16_strided_pw_bwd(const cf__conv_call *c) {
    size_t gws = cf__gemm_bf16_ws_floats();
    cf__strided_pw_bands(c, c->ws + gws, c->ws_floats - gws, cf__strided_pw_gemm_bf16, cf__round_floats_bf16);
}
/* The tiles, the whole-sample GEMM (cols) and im2col's backward-data on operands stored in 16
   bits or an input not yet rounded (section 9, halves), the same sums: a forward's y when it
   has no bias or activation (the GEMM rounds it as it stores: one chunk of pairs), a backward's
   dy (the GEMM packs it from 16 bits), the network's input (x_raw: the GEMM's packing rounds it
   as it reads it); never a 16-bit x or dx (im2col reads and col2im writes fp32).  The GEMM's
   buffers come from the workspace, after what the path takes there. */
static int cf__bf16_y_half_ok(const cf__conv_call *c) {
    return !c->half || (!c->b && c->act == CF_ACT_LINEAR &&
                        (c->in.c / c->groups * cf__kvol(c->g) + 1) / 2 <= CF__GEMM_KC);
}
static int cf__bf16_tiles_fwd_applies(const cf__conv_call *c) {
    if (!cf__bf16_gemm_applies(c) || !cf__tiles_fwd_applies(c) || c->x_half || !cf__bf16_y_half_ok(c)) return 0;
    return !(c->half || c->x_raw) || cf__fwd_tiles_floats(c) + cf__gemm_bf16_ws_floats() <= c->ws_floats;
}
static int cf__bf16_tiles_bww_applies(const cf__conv_call *c) {
    if (!cf__bf16_gemm_applies(c) || !cf__tiles_bww_applies(c) || c->x_half) return 0;
    return !(c->half || c->x_raw) || cf__bww_tiles_floats(c) + cf__gemm_bf16_ws_floats() <= c->ws_floats;
}
static int cf__bf16_tiles_bwd_applies(const cf__conv_call *c) {
    return cf__bf16_gemm_applies(c) && cf__tiles_bwd_applies(c);
}
static void cf__bf16_tiles_fwd(const cf__conv_call *c) { cf__tiles_fwd_with(c, cf__sgemm_bf16, 1); }
static void cf__bf16_tiles_bww(const cf__conv_call *c) { cf__tiles_bww_with(c, cf__sgemm_bf16); }
static void cf__bf16_tiles_bwd(const cf__conv_call *c) { cf__tiles_bwd_with(c, cf__sgemm_bf16, 1); }
/* Backward-weights without im2col's buffer:  dw^T (K x OC) += col (K x P) dy^T (P x OC), in
   tiles of CF__BWW_TILE positions.  The tile's im2col rows are packed into pairs of positions
   straight from x (cf__pack_taps: a tap's row is a stretch of an input row, zeros where it
   reaches into the padding); dy's tile is B, transposed by cf__pack_b.  Rows of even length keep
   each pair of positions in one output row, unit stride along w keeps a tap's row contiguous.
   Each thread sums its tiles (dealt statically) into its own dw^T in ws, added into dw in
   thread order at the end: the result does not depend on timing.  Against the tiles path, no
   im2col tile is written and read back, and the transposition is of dy's OC rows, not col's K. */
static size_t cf__taps_bww_floats(const cf__conv_call *c) {   /* per thread: dw^T, Ap, Bp */
    size_t K = (size_t)c->in.c * cf__kvol(c->g), nq = CF__BWW_TILE / 2;
    return K * c->out.c + K * nq + nq * (((size_t)c->out.c + 31) / 32 * 32);
}
static int cf__bf16_taps_bww_applies(const cf__conv_call *c) {
    return cf__bf16_gemm_applies(c) && c->groups == 1 && c->out.w % 2 == 0 && c->g->s[2] == 1 &&
           (size_t)cf__nthreads() * cf__taps_bww_floats(c) <= c->ws_floats;
}
/* the input row that the im2col rows of channel c, taps kd, kh read for segment sg, or NULL
   where it lies in the padding */
static const float *cf__tap_row(const float *x, int half, int c, int kd, int kh, const cf__seg *sg, cf_shape in,
                                const cf_geom *g) {
    int id = sg->od * g->s[0] - g->pb[0] + kd * g->dil[0], ih = sg->oh * g->s[1] - g->pb[1] + kh * g->dil[1];
    if (id < 0 || id >= in.d || ih < 0 || ih >= in.h) return NULL;
    return cf__elt(x, half, (((size_t)c * in.d + id) * in.h + ih) * in.w);
}
/* Ap[k][j / 2] = the pair of im2col(x)'s row k at tile positions j, j + 1 (n positions from p0).
   The tile's row segments are found once (even lengths: at most half the tile's positions);
   a tap's in-bounds part of a segment, unit stride, is [lo, hi) = [-w0, W - w0) clipped.
   (half: x is stored in 16 bits.)  The taps kw = 0 .. KW - 1 of one (c, kd, kh) read the same
   input row, shifted: the row is found once per segment for the KW of them, and the next
   (c, kd, kh)'s rows are fetched ahead while these are packed (as the pools': 15 % off these
   layers).  Found per tap, with its divisions, the rows cost cosmoflow.cfg's 32 -> 64 conv 8 %
   of its backward-weights (88 -> 81 ms, docs/performance.md, "bf16"). */
CF__BF16_TARGET static void cf__pack_taps(uint32_t *Ap, const float *x, int half, cf_shape in, cf_shape out,
                                          const cf_geom *g, size_t p0, size_t n) {
    int KD = g->k[0], KH = g->k[1], KW = g->k[2], K = in.c * cf__kvol(g), k, kw, ns = 0, s, t, c = 0, kd = 0, kh = 0;
    cf__seg sg[CF__BWW_TILE / 2];
    const float *row[CF__BWW_TILE / 2], *next[CF__BWW_TILE / 2];
    size_t j = 0;
    while (j < n && cf__next_seg(&sg[ns], p0 + j, n - j, out)) j += (size_t)sg[ns++].len;
    for (s = 0; s < ns; s++) row[s] = cf__tap_row(x, half, 0, 0, 0, &sg[s], in, g);
    for (k = 0; k < K; k += KW) {   /* rows k .. k + KW - 1 of im2col(x): channel c, taps kd, kh */
        int nc = c, nkd = kd, nkh = kh + 1;   /* the next rows' */
        if (nkh == KH) { nkh = 0; if (++nkd == KD) { nkd = 0; nc++; } }
        for (s = 0; s < ns; s++) {
            /* (used when ow0 < in.w) */
            size_t len = (size_t)(sg[s].len < in.w - sg[s].ow0 ? sg[s].len : in.w - sg[s].ow0);
            next[s] = nc < in.c ? cf__tap_row(x, half, nc, nkd, nkh, &sg[s], in, g) : NULL;
            if (next[s] && sg[s].ow0 < in.w)
                cf__prefetch_floats(cf__elt(next[s], half, (size_t)sg[s].ow0), half ? (len + 1) / 2 : len, 0);
        }
        for (kw = 0; kw < KW; kw++) {
            uint32_t *dst = Ap + (size_t)(k + kw) * (n / 2);
            for (s = 0; s < ns; dst += sg[s].len / 2, s++) {
                const float *r = row[s];   /* r[w0 + t]: the tap of the segment's position t, read for lo <= t < hi */
                int w0 = sg[s].ow0 + kw * g->dil[2] - g->pb[2], len = sg[s].len, lo = 0, hi = 0;
                if (r) {
                    lo = w0 < 0 ? -w0 : 0;
                    hi = in.w - w0 < len ? in.w - w0 : len;
                }
                for (t = 0; t < len; t += 32) {
                    __m512i v = _mm512_setzero_si512();
                    if (lo < hi && half)
                        v = cf__pairs16_within_half((const cf_bf16 *)(const void *)r + w0 + t, lo - t, hi - t);
                    else if (lo < hi) v = cf__pairs16_within(r + w0 + t, lo - t, hi - t);
                    _mm512_mask_storeu_epi32(dst + t / 2, cf__lanes((len - t) / 2), v);
                }
            }
        }
        for (s = 0; s < ns; s++) row[s] = next[s];
        c = nc; kd = nkd; kh = nkh;
    }
}
static void cf__bf16_taps_bww(const cf__conv_call *c) {   /* db: the dispatcher's */
    int K = c->in.c * cf__kvol(c->g), OC = c->out.c, nth = cf__nthreads();
    size_t P = cf__positions(c->out), tile = CF__BWW_TILE, per = cf__taps_bww_floats(c), i;
    long ntiles = (long)((P + tile - 1) / tile), t;
    int z, form = cf__bf16_gemm_form();
    /* every thread's, should one not run */
    for (z = 0; z < nth; z++) memset(c->ws + per * z, 0, sizeof(float) * K * OC);
    CF__OMP(omp parallel num_threads(nth))
    {
        float *dwt = c->ws + per * cf__thread_id();
        uint32_t *Ap = (uint32_t *)(dwt + (size_t)K * OC), *Bp = Ap + (size_t)K * (tile / 2);
        CF__OMP(omp for schedule(static))
        for (t = 0; t < c->B * ntiles; t++) {
            size_t bi = (size_t)(t / ntiles), p0 = (size_t)(t % ntiles) * tile, n = P - p0 < tile ? P - p0 : tile;
            const float *dy = cf__elt(c->dy, c->half, bi * cf_shape_size(c->out) + p0);
            cf__gemm_call dwg = {0, 1, K, OC, (int)n, NULL, 0, dy, (int)P, 1.0f, dwt, OC, 0, NULL,
                                 c->half ? CF__GEMM_HALF_B : 0, NULL};
            cf__pack_taps(Ap, cf__elt(c->x, c->x_half, bi * cf_shape_size(c->in)), c->x_half, c->in, c->out, c->g, p0,
                          n);
            cf__pack_b(Bp, &dwg, 0, (int)n / 2, 0, OC, NULL);
            cf__gemm_bf16_block(&dwg, OC, (int)n / 2, Ap, (int)n / 2, Bp, form);
        }
    }
    CF__OMP(omp parallel for schedule(static))
    for (i = 0; i < (size_t)OC * K; i++) {   /* dw[oc][k] += dw^T[k][oc] of each thread, in order */
        size_t oc = i / K, k = i % K;
        int th;
        for (th = 0; th < nth; th++) c->dw[i] += c->ws[per * th + k * OC + oc];
    }
}
/* The rows backward-weights (above, with the fp32 kernel) on bf16 operands: held in 16 bits, a
   32-bit word of a row holds two neighbouring positions, and vdpbf16ps of a word of dy's row
   and a word of x's row read kw elements further along adds two of the sum's products. */
/* Not where the GEMM runs on AMX tiles (there the rows go to the tiles, cf__bf16_rows_amx, or to
   the taps' path): the taps' path (the GEMM's block) was 1.4-4x faster than these rows on every
   layer measured (Intel Xeon with AMX, bin/onednn-peer --precision bf16: cosmoflow.cfg's 4 -> 32
   at 128^3 94 -> 65 ms, 32 -> 64 at 64^3 130 -> 45; DeepCAM's 304 -> 256 at 192x288 318 -> 81). */
static int cf__bf16_rows_bww_applies(const cf__conv_call *c) {   /* (even rows: no pair holds a padded position) */
    return cf__bf16_gemm_applies(c) && !cf__bf16_amx_on() && c->out.w % 2 == 0 && cf__rows_bww_fits(c, 2);
}
/* acc + the products of the pairs of a and b in the lanes m, lane by lane: the dot step with
   both operands loaded (cf__dot_step's two forms, odd halves first) */
CF__BF16_TARGET CF__INLINE __m512 cf__dot_vv(__m512 acc, const cf__pairs_x *a, const cf__pairs_x *b, __mmask16 m,
                                             int fma) {
    if (fma) return _mm512_mask3_fmadd_ps(a->even, b->even, _mm512_mask3_fmadd_ps(a->odd, b->odd, acc, m), m);
    return _mm512_mask_dpbf16_ps(acc, m, (__m512bh)a->p, (__m512bh)b->p);
}
/* cf__rows_f32_fill rounded to bf16: dyb[oc][r] OWp / 2 pair words, xb[c][kd][r] XW 16-bit
   values (x, dy may be stored in 16 bits, x not yet rounded: x_raw) */
CF__BF16_TARGET static void cf__rows_bf16_fill(uint32_t *dyb, uint16_t *xb, const cf__conv_call *c,
                                               const cf__rows_bww_shape *s, int bi, int od, int oh0, int nb) {
    const cf_geom *g = c->g;
    int OW = c->out.w, W = c->in.w, pb = g->pb[2], ch, r, t, kd;
    size_t P = cf__positions(c->out), Pin = cf__positions(c->in);
    for (ch = 0; ch < c->out.c; ch++)
        for (r = 0; r < nb; r++) {
            size_t at = ((size_t)bi * c->out.c + ch) * P + ((size_t)od * c->out.h + oh0 + r) * OW;
            uint32_t *d = dyb + ((size_t)ch * s->band + r) * (s->OWp / 2);
            for (t = 0; t < s->OWp; t += 32)
                _mm512_storeu_si512(d + t / 2, c->half ? cf__pairs16_within_half((const cf_bf16 *)(const void *)c->dy
                                                                                     + at + t, 0, OW - t)
                                                       : cf__pairs16_within(c->dy + at + t, 0, OW - t));
        }
    for (ch = 0; ch < c->in.c; ch++)
        for (kd = 0; kd < g->k[0]; kd++)
            for (r = 0; r < s->XR; r++) {
                int id = od * g->s[0] - g->pb[0] + kd, ih = oh0 * g->s[1] - g->pb[1] + r;
                uint16_t *d = xb + (((size_t)ch * g->k[0] + kd) * s->XR + r) * s->XW;
                size_t at = ((size_t)bi * c->in.c + ch) * Pin + ((size_t)id * c->in.h + ih) * W;
                for (t = 0; t < s->XW; t += 32) {   /* values t .. t + 31: the input's w = t - pb .. */
                    __m512i v = _mm512_setzero_si512();
                    if (id >= 0 && id < c->in.d && ih >= 0 && ih < c->in.h)
                        v = c->x_half ? cf__pairs16_within_half((const cf_bf16 *)(const void *)c->x + at + t - pb,
                                                                pb - t, W + pb - t)
                                      : cf__pairs16_within(c->x + at + t - pb, pb - t, W + pb - t);
                    _mm512_storeu_si512(d + t, v);
                }
            }
}
/* cf__rows_f32_block on the pairs: per 32 positions 3 loads of x, 8 of dy, 24 dot steps (the
   pairs past the row's positions masked off) */
CF__BF16_TARGET CF__INLINE void cf__rows_bf16_block(float *dwt, const uint32_t *dyb, const uint16_t *xb,
                                                    const cf__conv_call *c, const cf__rows_bww_shape *s, int nb,
                                                    int oc0, int tr, int fma) {
    int KW = c->g->k[2], K = c->in.c * cf__kvol(c->g), no = c->out.c - oc0 < 8 ? c->out.c - oc0 : 8;
    int kh = tr % c->g->k[1], kdc = tr / c->g->k[1], kw0, r, p, o;   /* kdc = ch KD + kd: xb's block of rows */
    for (kw0 = 0; kw0 < KW; kw0 += 3) {
        int nk = KW - kw0 < 3 ? KW - kw0 : 3;
        __m512 a[8][3];
        CF__ROWS_ZERO(a)
        for (r = 0; r < nb; r++) {
            const uint16_t *xr = xb + ((size_t)kdc * s->XR + (size_t)r * c->g->s[1] + kh) * s->XW + kw0;
            const uint32_t *d[8];   /* the block's dy rows r (the last block repeats a row, unstored) */
            for (o = 0; o < 8; o++) d[o] = dyb + ((size_t)(oc0 + (o < no ? o : 0)) * s->band + r) * (s->OWp / 2);
            for (p = 0; p < c->out.w; p += 32) {
                cf__pairs_x x0 = cf__pairs_x_of(_mm512_loadu_si512(xr + p), fma),
                    x1 = cf__pairs_x_of(_mm512_loadu_si512(xr + p + 1), fma),
                    x2 = cf__pairs_x_of(_mm512_loadu_si512(xr + p + 2), fma);
                __mmask16 m = cf__lanes((c->out.w - p) / 2);
#define CF__DV(o) {                                                                                                   \
        cf__pairs_x y = cf__pairs_x_of(_mm512_loadu_si512(d[o] + p / 2), fma);                                        \
        a[o][0] = cf__dot_vv(a[o][0], &y, &x0, m, fma);                                                               \
        a[o][1] = cf__dot_vv(a[o][1], &y, &x1, m, fma);                                                               \
        a[o][2] = cf__dot_vv(a[o][2], &y, &x2, m, fma); }
                CF__DV(0) CF__DV(1) CF__DV(2) CF__DV(3) CF__DV(4) CF__DV(5) CF__DV(6) CF__DV(7)
#undef CF__DV
            }
        }
        CF__ROWS_FLUSH(dwt + (size_t)oc0 * K + (size_t)tr * KW + kw0)
    }
}
CF__BF16_TARGET static void cf__rows_bf16_item(float *dwt, void *dyb, void *xb, const cf__conv_call *c,
                                               const cf__rows_bww_shape *s, int bi, int od, int oh0, int nb, int fma) {
    int oc0, tr, T = c->in.c * c->g->k[0] * c->g->k[1];
    cf__rows_bf16_fill((uint32_t *)dyb, (uint16_t *)xb, c, s, bi, od, oh0, nb);
    for (oc0 = 0; oc0 < c->out.c; oc0 += 8)
        for (tr = 0; tr < T; tr++) {
            int id = od * c->g->s[0] - c->g->pb[0] + tr / c->g->k[1] % c->g->k[0];
            if (id < 0 || id >= c->in.d) continue;   /* (its rows all zeros) */
            if (fma) cf__rows_bf16_block(dwt, (const uint32_t *)dyb, (const uint16_t *)xb, c, s, nb, oc0, tr, 1);
            else cf__rows_bf16_block(dwt, (const uint32_t *)dyb, (const uint16_t *)xb, c, s, nb, oc0, tr, 0);
        }
}
static void cf__bf16_rows_bww(const cf__conv_call *c) {   /* db: the dispatcher's */
    cf__rows_bww_run(c, 2, cf__rows_bf16_item, cf__bf16_fma());
}
#ifdef CF__AMX
/* ---- backward-weights on AMX tiles, on the rows path's band buffers (cf__rows_bf16_fill).  A
   32-bit word of an input row xb holds two neighbouring positions, so 32 positions from any
   element are a tile row: op(A) is 16 channels' rows of the band for taps (kd, kh), read kw
   elements further along (rows a channel's KD XR XW values apart); op(B) is dy's pairs of
   positions transposed, dyT[r][pair][OC] (made from dyb, 16 x 16 words at a time); the sums
   dw^T[c][oc] of one tap for 32 channels x 32 filters sit in tiles 0-3 while a band's rows
   pass, four tdpbf16ps per 32 positions, loaded from and stored back to the thread's sums,
   laid out [tap][c / 16][oc / 16][16 x 16] and added into dw in thread order at the end.
   Where: the rows path's conditions but for the width, filters a multiple of 16, channels a
   multiple of 16 or few: C KD <= 16 (cosmoflow.cfg's first conv, 4 x 3), where the taps kd fold
   into a tile's rows (xb's rows (c, kd) of one r lie XR XW values apart: row c KD + kd of op(A),
   the rows past C KD read beyond xb, into sums never stored), the tiles' taps are (kh, kw) and
   the sums [tap][0][oc / 16][(c, kd) x 16]; every thread's sums and buffers in the workspace. */
static int cf__rows_amx_fold(const cf__conv_call *c) { return c->in.c % 16 && c->in.c * c->g->k[0] <= 16; }
/* floats of a thread's sums: dw's, or (folded) 16 rows (c, kd) a tap (kh, kw) */
static size_t cf__rows_amx_acc(const cf__conv_call *c) {
    return cf__rows_amx_fold(c) ? (size_t)c->g->k[1] * c->g->k[2] * c->out.c * 16
                                : (size_t)c->in.c * cf__kvol(c->g) * c->out.c;
}
/* a thread's floats: the rows path's (its dw: the sums), dyT, 16 rows of x's slack (the fold's reads) */
static size_t cf__rows_amx_per(const cf__conv_call *c, const cf__rows_bww_shape *s) {
    return s->per - (size_t)c->in.c * cf__kvol(c->g) * c->out.c + cf__rows_amx_acc(c) + s->dy_floats +
           (size_t)16 * s->XR * s->XW / 2;
}
#define CF__AMX_BAND_BYTES ((size_t)3 << 19)
static cf__rows_bww_shape cf__rows_amx_shape(const cf__conv_call *c) {
    cf__rows_bww_shape s = cf__rows_bww_shape_of(c, 2);
    while (s.band > 1 && 4 * (2 * s.dy_floats + (size_t)c->in.c * c->g->k[0] * s.XR * s.XW / 2) > CF__AMX_BAND_BYTES)
        s = cf__rows_bww_shape_band(c, 2, s.band - 1);
    return s;
}
static int cf__bf16_rows_amx_applies(const cf__conv_call *c) {
    const cf_geom *g = c->g;
    cf__rows_bww_shape s;
    if (!cf__bf16_gemm_applies(c) || !cf__bf16_amx_on() || c->groups != 1 || g->s[2] != 1 || g->dil[0] > 1 ||
        g->dil[1] > 1 || g->dil[2] > 1 || cf__pointwise_applies(c) || (c->in.c % 16 && !cf__rows_amx_fold(c)) ||
        c->out.c % 16)
        return 0;
    s = cf__rows_amx_shape(c);
    return s.band * (s.OWp / 32) >= 16 && (size_t)cf__nthreads() * cf__rows_amx_per(c, &s) <= c->ws_floats;
}
/* dyT[r][j][oc] = dyb[oc][r][j] for the band's nb rows of OWp / 2 pairs and OC filters */
CF__BF16_TARGET static void cf__rows_amx_transpose(uint32_t *dyT, const uint32_t *dyb, int OC,
                                                   const cf__rows_bww_shape *s, int nb) {
    int J = s->OWp / 2, r, j, oc, i;
    for (r = 0; r < nb; r++)
        for (oc = 0; oc < OC; oc += 16)
            for (j = 0; j < J; j += 16) {
                __m512i v[16];
                for (i = 0; i < 16; i++) v[i] = _mm512_loadu_si512(dyb + ((size_t)(oc + i) * s->band + r) * J + j);
                cf__transpose16(v);
                for (i = 0; i < 16; i++) _mm512_storeu_si512(dyT + ((size_t)r * J + j + i) * OC + oc, v[i]);
            }
}
/* the sums of tap t = (kd, kh, kw) (folded: (kh, kw)) for 32 channels from c0 (folded: the rows
   (c, kd)) and 32 filters from oc0 (16 each at the end) over the band's nb rows, in acc */
CF__AMX_TARGET static void cf__rows_amx_block(float *acc, const uint32_t *dyT, const uint16_t *xb,
                                              const cf__conv_call *c, const cf__rows_bww_shape *s, int nb, int t,
                                              int c0, int oc0) {
    const cf_geom *g = c->g;
    int fold = cf__rows_amx_fold(c), KD = g->k[0], KH = g->k[1], KW = g->k[2], kh = t / KW % KH, kw = t % KW;
    int kd = fold ? 0 : t / (KH * KW), J = s->OWp / 2, OC = c->out.c, r, p;
    int nc = fold || c->in.c - c0 < 32 ? 16 : 32, no = OC - oc0 < 32 ? 16 : 32;
    /* values between op(A)'s rows: channels' rows, or (folded) rows (c, kd) */
    size_t cs = (size_t)(fold ? 1 : KD) * s->XR * s->XW, blocks = (size_t)OC / 16, cblocks = fold ? 1 : c->in.c / 16;
    float *s00 = acc + (((size_t)t * cblocks + c0 / 16) * blocks + oc0 / 16) * 256, *s01 = s00 + 256,
          *s10 = s00 + blocks * 256, *s11 = s10 + 256;
    _tile_loadd(0, s00, 64);
    if (no > 16) _tile_loadd(1, s01, 64);
    if (nc > 16) _tile_loadd(2, s10, 64);
    if (nc > 16 && no > 16) _tile_loadd(3, s11, 64);
    for (r = 0; r < nb; r++) {
        const uint16_t *xr = xb + (((size_t)c0 * KD + kd) * s->XR + (size_t)r * g->s[1] + kh) * s->XW + kw;
        const uint32_t *dr = dyT + (size_t)r * J * OC + oc0;
        for (p = 0; p < c->out.w; p += 32) {
            _tile_loadd(4, xr + p, cs * 2);
            _tile_loadd(6, dr + (size_t)(p / 2) * OC, OC * 4);
            _tile_dpbf16ps(0, 4, 6);
            if (no > 16) { _tile_loadd(7, dr + (size_t)(p / 2) * OC + 16, OC * 4); _tile_dpbf16ps(1, 4, 7); }
            if (nc > 16) {
                _tile_loadd(5, xr + p + 16 * cs, cs * 2);
                _tile_dpbf16ps(2, 5, 6);
                if (no > 16) _tile_dpbf16ps(3, 5, 7);
            }
        }
    }
    _tile_stored(0, s00, 64);
    if (no > 16) _tile_stored(1, s01, 64);
    if (nc > 16) _tile_stored(2, s10, 64);
    if (nc > 16 && no > 16) _tile_stored(3, s11, 64);
}
/* one band into the thread's sums acc: its buffers dyb, xb, then dyT */
CF__BF16_TARGET static void cf__rows_amx_item(float *acc, uint32_t *dyb, uint16_t *xb, uint32_t *dyT,
                                              const cf__conv_call *c, const cf__rows_bww_shape *s, int bi, int od,
                                              int oh0, int nb) {
    const cf_geom *g = c->g;
    int t, c0, oc0;
    cf__rows_bf16_fill(dyb, xb, c, s, bi, od, oh0, nb);
    cf__rows_amx_transpose(dyT, dyb, c->out.c, s, nb);
    for (t = 0; t < (cf__rows_amx_fold(c) ? g->k[1] * g->k[2] : cf__kvol(g)); t++) {
        int id = od * g->s[0] - g->pb[0] + t / (g->k[1] * g->k[2]);
        if (!cf__rows_amx_fold(c) && (id < 0 || id >= c->in.d)) continue;   /* (its rows all zeros) */
        for (c0 = 0; c0 < c->in.c; c0 += 32)
            for (oc0 = 0; oc0 < c->out.c; oc0 += 32)
                cf__rows_amx_block(acc, dyT, xb, c, s, nb, t, c0, oc0);
    }
}
static void cf__bf16_rows_amx(const cf__conv_call *c) {   /* db: the dispatcher's */
    cf__rows_bww_shape s = cf__rows_amx_shape(c);
    int C = c->in.c, OC = c->out.c, kvol = cf__kvol(c->g), nth = cf__nthreads(), fold = cf__rows_amx_fold(c), ob;
    int bands = (c->out.h + s.band - 1) / s.band;
    size_t per = cf__rows_amx_per(c, &s), na = cf__rows_amx_acc(c);
    long items = (long)c->B * c->out.d * bands, t;
    CF__OMP(omp parallel num_threads(nth))
    {
        float *acc = c->ws + per * cf__thread_id(), *dyb = cf__line_aligned(acc + na);
        uint16_t *xb = (uint16_t *)(void *)(dyb + s.dy_floats);
        uint32_t *dyT = (uint32_t *)(void *)(xb + (size_t)C * c->g->k[0] * s.XR * s.XW);
        memset(acc, 0, sizeof(float) * na);
        cf__amx_tiles_on();
        CF__OMP(omp for schedule(static))
        for (t = 0; t < items; t++) {
            int bi = (int)(t / ((long)c->out.d * bands)), od = (int)(t / bands % c->out.d);
            int oh0 = (int)(t % bands) * s.band, nb = c->out.h - oh0 < s.band ? c->out.h - oh0 : s.band;
            cf__rows_amx_item(acc, (uint32_t *)(void *)dyb, xb, dyT, c, &s, bi, od, oh0, nb);
        }
        cf__amx_tiles_off();
    }
    /* dw[oc][c][t] += each thread's sums, in thread order: a block of 16 filters at a time, their
       sums of one (c, t) a line (an element at a time, its place computed by four divisions:
       cosmoflow.cfg's 128 -> 256, 3.5 MiB of sums, 4 ms; this way 1) */
    CF__OMP(omp parallel for schedule(static))
    for (ob = 0; ob < OC / 16; ob++) {
        int ch, tap, o, th, khw = kvol / c->g->k[0];
        for (ch = 0; ch < C; ch++)
            for (tap = 0; tap < kvol; tap++) {
                size_t at = fold   /* (folded: tap (kh, kw), row (c, kd)) */
                    ? ((size_t)(tap % khw) * (OC / 16) + ob) * 256 + (size_t)(ch * c->g->k[0] + tap / khw) * 16
                    : (((size_t)tap * (C / 16) + ch / 16) * (OC / 16) + ob) * 256 + (size_t)(ch % 16) * 16;
                for (o = 0; o < 16; o++) {
                    float *d = c->dw + ((size_t)(16 * ob + o) * C + ch) * kvol + tap;
                    for (th = 0; th < nth; th++) *d += c->ws[per * th + at + o];
                }
            }
    }
}
#endif
/* what the tiles leave (few positions, groups): the im2col loops with the bf16 GEMM.
   The forward's activation and rounding follow the loop over samples [bi, B) (the loop adds
   the bias; elementwise, the bits of applying them tile by tile); db is the dispatcher's. */
static void cf__bf16_im2col_fwd_from(const cf__conv_call *c, int bi) {
    size_t P = cf__positions(c->out);
    float *y = c->y + (size_t)bi * cf_shape_size(c->out);
    cf__im2col_gemm_forward(y, c->x + (size_t)bi * cf_shape_size(c->in), c->w, c->b, c->B - bi, c->in, c->out, c->g,
                       c->groups, c->ws, c->ws_floats, cf__sgemm_bf16);
    cf__bias_act_p(y, NULL, (c->B - bi) * c->out.c, P, P, c->act, c->slope, 1);
}
static void cf__bf16_im2col_fwd(const cf__conv_call *c) { cf__bf16_im2col_fwd_from(c, 0); }
static void cf__bf16_im2col_bww(const cf__conv_call *c) {
    cf__im2col_gemm_backward_weights(c->dw, c->dy, c->x, c->B, c->in, c->out, c->g, c->groups, c->ws,
                                     c->ws_floats,
                                cf__sgemm_bf16);
}
static int cf__bf16_im2col_bwd_applies(const cf__conv_call *c) {
    size_t K = (size_t)c->in.c / c->groups * cf__kvol(c->g);
    if (!cf__bf16_gemm_applies(c) || c->dx_half) return 0;
    return !c->half || K * cf__tile(K, cf__positions(c->out), c->ws_floats) + cf__gemm_bf16_ws_floats() <= c->ws_floats;
}
/* dy stored in 16 bits: the bf16 GEMM packs each tile of dy from there (cf__gemm_halves), its
   buffers after the tile.  Section 3's loop cannot take it: it addresses dy in floats and hands
   its GEMM fp32 operands, and widening dy first would need the fp32 copy the plan stored it in
   16 bits to save.  The same tiles, GEMMs and col2im as that loop, sample and group s at once. */
static void cf__bf16_im2col_bwd_half(const cf__conv_call *c) {
    int Cg = c->in.c / c->groups, OCg = c->out.c / c->groups, K = Cg * cf__kvol(c->g), s;
    size_t P = cf__positions(c->out), tile = cf__tile((size_t)K, P, c->ws_floats), p0, n;
    for (s = 0; s < c->B * c->groups; s++)   /* (sample s / groups, group s % groups) */
        for (p0 = 0; p0 < P; p0 += n) {
            const cf_bf16 *dys = (const cf_bf16 *)(const void *)c->dy + (size_t)s * OCg * P + p0;
            size_t cols = P - p0 < tile ? P - p0 : tile;   /* the tile's positions */
            cf__gemm_call colg = {1, 0, K, (int)cols, OCg, c->w + (size_t)(s % c->groups) * OCg * K, K,
                                  (const float *)(const void *)dys, (int)P, 0.0f, c->ws, (int)cols, 0, NULL,
                                  CF__GEMM_HALF_B, NULL};
            n = cols;
            cf__gemm_halves(&colg, c->ws + K * tile);
            cf__col2im(c->dx + (size_t)s * Cg * cf__positions(c->in), c->ws, Cg, c->in, c->out, c->g, p0, n);
        }
}
static void cf__bf16_im2col_bwd(const cf__conv_call *c) {
    if (c->half) cf__bf16_im2col_bwd_half(c);
    else cf__im2col_gemm_backward_data(c->dx, c->dy, c->w, c->B, c->in, c->out, c->g, c->groups, c->ws,
                                  c->ws_floats,
                                  cf__sgemm_bf16);
}
/* The same GEMMs over all of a sample's positions at once, im2col's buffer never written: the
   bf16 GEMM makes op(B)'s rows from x as it packs them (cf__col_src), forward y = w col and
   backward-weights dw += dy col^T.  The references make col in tiles of the workspace: 455 of
   the 3456 positions of DeepCAM's ASPP convolutions (2048 channels x 9 taps), every tile's
   GEMM packing all of w again (forward) or adding into all of dw (backward-weights), and col
   (255 MB there) written and read back on the way. */
static int cf__bf16_cols_applies(const cf__conv_call *c) { return cf__bf16_gemm_applies(c) && c->groups == 1; }
/* (halves: the GEMM's buffers and made rows in the workspace) */
static int cf__bf16_cols_fwd_applies(const cf__conv_call *c) {
    if (!cf__bf16_cols_applies(c) || c->x_half || !cf__bf16_y_half_ok(c)) return 0;
    return !(c->half || c->x_raw) ||
           cf__gemm_bf16_ws_floats() + (size_t)cf__nthreads() * 16 * CF__COL_ROW <= c->ws_floats;
}
static void cf__bf16_cols_fwd(const cf__conv_call *c) {
    int K = c->in.c * cf__kvol(c->g), bi;
    size_t P = cf__positions(c->out);
    for (bi = 0; bi < c->B; bi++) {
        const float *x = c->x + (size_t)bi * cf_shape_size(c->in);
        float *y = cf__elt(c->y, c->half, (size_t)bi * cf_shape_size(c->out));
        cf__col_src col = {x, c->in, c->out, c->g};
        cf__gemm_call yg = {0, 0, c->out.c, (int)P, K, c->w, K, NULL, 0, 0.0f, y, (int)P, 0, &col, 0, NULL};
        if (c->half || c->x_raw) {   /* (its buffers in the workspace: it runs) */
            yg.rnd = c->half;
            yg.halves = c->half ? CF__GEMM_HALF_C : 0;
            cf__sgemm_bf16_r(&yg, c->ws);
            if (!c->half) cf__bias_act_p(y, c->b, c->out.c, P, P, c->act, c->slope, 1);
            continue;
        }
        if (cf__sgemm_bf16_r(&yg, NULL)) {   /* no room: this sample on, by tiles */
            cf__bf16_im2col_fwd_from(c, bi);
            return;
        }
        cf__bias_act_p(y, c->b, c->out.c, P, P, c->act, c->slope, 1);
    }
}
static void cf__bf16_cols_bww(const cf__conv_call *c) {   /* db: the dispatcher's */
    int K = c->in.c * cf__kvol(c->g), bi;
    size_t P = cf__positions(c->out);
    for (bi = 0; bi < c->B; bi++) {
        const float *x = c->x + (size_t)bi * cf_shape_size(c->in), *dy = c->dy + (size_t)bi * cf_shape_size(c->out);
        cf__col_src col = {x, c->in, c->out, c->g};
        cf__gemm_call dwg = {0, 1, c->out.c, K, (int)P, dy, (int)P, NULL, 0, 1.0f, c->dw, K, 0, &col, 0, NULL};
        if (cf__sgemm_bf16_r(&dwg, NULL)) {   /* no room: this sample on, by tiles */
            cf__im2col_gemm_backward_weights(c->dw, dy, x, c->B - bi, c->in, c->out, c->g, 1, c->ws, c->ws_floats,
                                        cf__sgemm_bf16);
            return;
        }
    }
}
/* backward-data of a stride-1 convolution: the forward of dy with the flipped kernel
   (cf__flipped_call) on the GEMM with op(B) made from dy, dx rounded as it is stored (added
   into dx or stored); dy and dx in 32 bits.  Against the direct kernel on DeepCAM's ASPP and
   decoder: 1.0-1.25x (docs/performance.md).  2-D only: in 3-D the direct kernel, building each
   pair row once (cf__ring_ns), beats it at cosmoflow.cfg's 128 -> 256 at 16^3 (20-21 ms
   against 28-29), and the tiles at its 256 -> 512 at 8^3, where the direct kernel does not fit
   (15.4-17.4 against 19.0-20.8).  Where the GEMM's buffers cannot be had, the reference for
   the rest of the batch. */
static int cf__bf16_cols_bwd_applies(const cf__conv_call *c) {
    cf_geom gt;
    return cf__bf16_cols_applies(c) && !c->half && !c->dx_half && cf__flipped_geom(c->g, &gt) &&
           cf__flipped_floats(c) < c->ws_floats && c->in.c >= 64 && c->in.d == 1;
}
static void cf__bf16_cols_bwd(const cf__conv_call *c) {
    cf_geom gt;
    cf__conv_call f;
    int K = c->out.c * cf__kvol(c->g), bi;
    size_t P = cf__positions(c->in);
    cf__flipped_geom(c->g, &gt);
    cf__flip_kernel(c->ws, c->w, c->in.c, c->out.c, cf__kvol(c->g));
    f = cf__flipped_call(c, &gt);
    for (bi = 0; bi < c->B; bi++) {
        cf__col_src col = {f.x + (size_t)bi * cf_shape_size(f.in), f.in, f.out, f.g};
        cf__gemm_call g = {0, 0, f.out.c, (int)P, K, f.w, K, NULL, 0, c->dx_store ? 0.0f : 1.0f,
                           f.y + (size_t)bi * cf_shape_size(f.out), (int)P, 1, &col, 0, NULL};
        if (cf__sgemm_bf16_r(&g, NULL)) {   /* no room: this sample on, by the reference (then rounded) */
            size_t in_sz = cf_shape_size(c->in);
            if (c->dx_store) memset(c->dx + bi * in_sz, 0, sizeof(float) * (c->B - bi) * in_sz);
            cf_ref_conv_backward_data(c->dx + bi * in_sz, c->dy + bi * cf_shape_size(c->out), c->w, c->B - bi, c->in,
                                      c->out, c->g, 1, c->ws, c->ws_floats);
            cf_bf16_round(c->dx + bi * in_sz, (c->B - bi) * in_sz);
            return;
        }
    }
}
#else
static size_t cf__gemm_bf16_thread_floats(void) { return 0; }   /* (no bf16 GEMM: no call asks) */
#endif /* CF__BF16 */

/* ---- pooling: windows that never leave the input (CosmoFlow's 2x2x2 stride-2 pools) need
   no bounds tests; max and average then run in loops of their own. */
static int cf__pool_inside_applies(const cf__pool_call *c) {
    const cf_geom *g = c->g;
    int a, o[3], n[3];
    o[0] = c->out.d; o[1] = c->out.h; o[2] = c->out.w; n[0] = c->in.d; n[1] = c->in.h; n[2] = c->in.w;
    for (a = 0; a < 3; a++)
        if (g->pb[a] != 0 || (o[a] - 1) * g->s[a] + (g->k[a] - 1) * g->dil[a] >= n[a]) return 0;
    return 1;
}
static void cf__pool_inside_fwd(const cf__pool_call *c) {
    const cf_geom *g = c->g;
    cf_shape in = c->in, out = c->out;
    int plane, kvol = cf__kvol(g);
    CF__OMP(omp parallel for schedule(static))
    for (plane = 0; plane < c->B * in.c; plane++) {
        const float *xp = c->x + (size_t)plane * in.d * in.h * in.w;
        float *yp = c->y + (size_t)plane * cf__positions(out);
        int od, oh, ow, kd, kh, kw;
        for (od = 0; od < out.d; od++) for (oh = 0; oh < out.h; oh++) for (ow = 0; ow < out.w; ow++) {
            const float *w0 = xp + ((size_t)od * g->s[0] * in.h + (size_t)oh * g->s[1]) * in.w + (size_t)ow * g->s[2];
            float best = -INFINITY;
            double sum = 0.0;
            for (kd = 0; kd < g->k[0]; kd++) for (kh = 0; kh < g->k[1]; kh++) {
                const float *r = w0 + ((size_t)kd * g->dil[0] * in.h + (size_t)kh * g->dil[1]) * in.w;
                if (c->is_max) for (kw = 0; kw < g->k[2]; kw++) {
                    float v = r[kw * g->dil[2]];
                    best = v > best ? v : best;
                }
                else for (kw = 0; kw < g->k[2]; kw++) sum += r[kw * g->dil[2]];
            }
            yp[((size_t)od * out.h + oh) * out.w + ow] = c->is_max ? best : (float)(sum / kvol);
        }
    }
}
static void cf__pool_inside_bwd(const cf__pool_call *c) {
    const cf_geom *g = c->g;
    cf_shape in = c->in, out = c->out;
    int plane, kvol = cf__kvol(g);
    CF__OMP(omp parallel for schedule(static))
    for (plane = 0; plane < c->B * in.c; plane++) {
        const float *xp = c->x + (size_t)plane * in.d * in.h * in.w;
        float *dxp = c->dx + (size_t)plane * in.d * in.h * in.w;
        const float *yp = c->y + (size_t)plane * cf__positions(out), *dyp = c->dy + (size_t)plane * cf__positions(out);
        int od, oh, ow, kd, kh, kw, done;
        for (od = 0; od < out.d; od++) for (oh = 0; oh < out.h; oh++) for (ow = 0; ow < out.w; ow++) {
            size_t o = ((size_t)od * out.h + oh) * out.w + ow;
            size_t w0 = ((size_t)od * g->s[0] * in.h + (size_t)oh * g->s[1]) * in.w + (size_t)ow * g->s[2];
            float share = dyp[o] / (float)kvol, m = yp[o];
            if (dyp[o] == 0.0f) continue;   /* nothing to add (dropout, leaky's zeros) */
            for (done = 0, kd = 0; kd < g->k[0] && !done; kd++) for (kh = 0; kh < g->k[1] && !done; kh++) {
                size_t r = w0 + ((size_t)kd * g->dil[0] * in.h + (size_t)kh * g->dil[1]) * in.w;
                if (!c->is_max) { for (kw = 0; kw < g->k[2]; kw++) dxp[r + (size_t)kw * g->dil[2]] += share; continue; }
                for (kw = 0; kw < g->k[2]; kw++)
                    if (xp[r + (size_t)kw * g->dil[2]] == m) {
                        dxp[r + (size_t)kw * g->dil[2]] += dyp[o];
                        done = 1;
                        break;
                    }
            }
        }
    }
}

/* ---- depthwise backward with a stride of 1 along the width (kind "direct").  The reference
   indexes its input rows with the stride, x[row + t * s + off], which the compiler reads as a
   gather; here each tap's in-bounds run is contiguous, x[row + t + off], and one pass over it
   both adds the tap's dw term and scatters its dx term: plain vector loops, about 4x the
   reference (docs/performance.md).  The same products, each row's dw sum in vector order. */
static int cf__dw_rows_applies(const cf__conv_call *c) { return c->g->s[2] == 1; }
/* one output row dyr against one input row xr (row kh of channel c's kernel: wk, dwk) */
static void cf__dw_row_bwd(float *dxr, float *dwk, const float *dyr, const float *xr, const float *wk, int KW, int dil,
                           int pad, int in_w, int out_w) {
    int kw, t;
    for (kw = 0; kw < KW; kw++) {
        int off = kw * dil - pad, lo = off < 0 ? -off : 0, hi = out_w < in_w - off ? out_w : in_w - off;
        float acc = 0.0f, wv = wk[kw];
        if (dxr) {
            CF__OMP(omp simd reduction(+:acc))
            for (t = lo; t < hi; t++) { acc += dyr[t] * xr[t + off]; dxr[t + off] += wv * dyr[t]; }
        } else {
            CF__OMP(omp simd reduction(+:acc))
            for (t = lo; t < hi; t++) acc += dyr[t] * xr[t + off];
        }
        dwk[kw] += acc;
    }
}
static void cf__dw_rows_bwd(const cf__conv_call *c) {
    const cf_geom *g = c->g;
    cf_shape in = c->in, out = c->out;
    int KD = g->k[0], KH = g->k[1], KW = g->k[2], ch;
    size_t iv = cf__positions(in), ov = cf__positions(out);
    CF__OMP(omp parallel for schedule(static))
    for (ch = 0; ch < in.c; ch++) {   /* a channel's dw and dx belong to one thread */
        int bi, od, oh, kd, kh;
        for (bi = 0; bi < c->B; bi++) {
            size_t plane = (size_t)bi * in.c + ch;
            /* stored: the sums below start from 0 */
            if (c->dx && c->dx_store) memset(c->dx + plane * iv, 0, sizeof(float) * iv);
            for (od = 0; od < out.d; od++) for (oh = 0; oh < out.h; oh++)
                for (kd = 0; kd < KD; kd++) for (kh = 0; kh < KH; kh++) {
                    int id = od * g->s[0] - g->pb[0] + kd * g->dil[0], ih = oh * g->s[1] - g->pb[1] + kh * g->dil[1];
                    size_t row, k;
                    if (id < 0 || id >= in.d || ih < 0 || ih >= in.h) continue;
                    row = ((size_t)id * in.h + ih) * in.w; k = ((size_t)ch * KD * KH + (size_t)kd * KH + kh) * KW;
                    cf__dw_row_bwd(c->dx ? c->dx + plane * iv + row : NULL, c->dw + k,
                                   c->dy + plane * ov + ((size_t)od * out.h + oh) * out.w, c->x + plane * iv + row,
                                   c->w + k, KW, g->dil[2], g->pb[2], in.w, out.w);
                }
            /* the plane's dx is whole: rounded while in cache */
            if (c->bf16 && c->dx) cf__round_run(c->dx + plane * iv, iv);
        }
    }
}

/* ---- depthwise forward, the reference's loops with each plane rounded to bf16 once whole when
   rnd (a bf16 network's output): the activation and the rounding while the plane is in cache
   (kind "bf16" for the shapes the 3x3 kernel below leaves, and that kernel's fallback) */
/* plane pl: sample pl / C, channel pl % C */
static void cf__dw_plane_rounded(const cf__conv_call *c, int pl, int rnd) {
    int ch = pl % c->in.c;
    size_t iv = cf__positions(c->in), ov = cf__positions(c->out);
    float *y = c->y + (size_t)pl * ov;
    cf__dw_plane_forward(y, c->x + (size_t)pl * iv, c->w + (size_t)ch * cf__kvol(c->g), c->b ? c->b[ch] : 0.0f, c->in,
                         c->out, c->g);
    cf__act_floats(y, ov, c->act, c->slope);
    if (rnd) cf__round_run(y, ov);
}
static int cf__dw_rounded_applies(const cf__conv_call *c) { return c->bf16; }
static void cf__dw_rounded_fwd(const cf__conv_call *c) {
    int pl;
    CF__OMP(omp parallel for schedule(static))
    for (pl = 0; pl < c->B * c->in.c; pl++) cf__dw_plane_rounded(c, pl, 1);
}

/* ---- depthwise forward, 3x3 taps with a stride of 1 or 2 along the width (kind "direct";
   DeepCAM's and Tiramisu's depthwise convolutions, DeepCAM's strided ones).  The reference adds
   each tap's run into the output row, so every output goes through a load and a store per tap;
   here each output sums its 9 taps in a register, from three rows of its plane, which is first
   copied once, zero-padded, into a buffer of the thread's.  With a stride of 2 along the width
   each padded row is kept as its even columns, then its odd ones, so that every tap reads a
   contiguous run (padded column 2 t + kw dil is element t + kw dil / 2 of the half of its
   parity) where the reference's x[2 t + off] is read as a gather.  The same products added in
   the same order (bias, then taps (kh, kw)); a tap in the padding adds w * 0, which the
   reference skips: the same bits (but a zero's sign, and where w is not finite).  2.1x the
   reference on DeepCAM's 728 x 48 x 72 planes (docs/performance.md). */
static int cf__dw3x3_applies(const cf__conv_call *c) {
    const cf_geom *g = c->g;
    int a, ok = g->k[0] == 1 && g->k[1] == 3 && g->k[2] == 3 && (g->s[2] == 1 || g->s[2] == 2) && c->in.d == 1 &&
            c->out.d == 1 && g->pb[0] == 0;
    for (a = 1; a < 3; a++) ok = ok && g->pb[a] >= 0 && g->pa[a] >= 0;
    return ok;
}
/* where padded column j of a padded row (Wp floats) is kept: j, or with a stride of 2 along the
   width, the even columns first ((Wp + 1) / 2 of them), then the odd ones */
static size_t cf__dw_col(int j, int s2, int Wp) {
    return s2 == 2 ? (size_t)(j & 1) * ((Wp + 1) / 2) + (size_t)(j >> 1) : (size_t)j;
}
/* n values of row src (16 bits when half: widened) into padded row to from column j0: with a
   stride of 2, src[t] to column j0 + t's half, as two loops of a stride of 2 */
static void cf__dw_row_in(float *to, const float *src, int half, int n, int j0, int s2, int Wp) {
    const cf_bf16 *h = (const cf_bf16 *)(const void *)src;
    int t0, k;
    if (s2 == 1) {
        if (half) cf__widen_run(to + j0, h, (size_t)n);
        else memcpy(to + j0, src, sizeof(float) * n);
        return;
    }
    for (t0 = 0; t0 < 2 && t0 < n; t0++) {   /* t = t0 + 2 k: column j0 + t0 + 2 k */
        float *r = to + cf__dw_col(j0 + t0, 2, Wp);
        int m = (n - t0 + 1) / 2;
        if (half)
            for (k = 0; k < m; k++) { uint32_t u = (uint32_t)h[t0 + 2 * k] << 16; memcpy(r + k, &u, 4); }
        else
            for (k = 0; k < m; k++) r[k] = src[t0 + 2 * k];
    }
}
/* the reverse for fp32 values: to[t] = padded row from's column j0 + t, t < n */
static void cf__dw_row_out(float *to, const float *from, int n, int j0, int s2, int Wp) {
    int t0, k;
    if (s2 == 1) { memcpy(to, from + j0, sizeof(float) * n); return; }
    for (t0 = 0; t0 < 2 && t0 < n; t0++) {
        const float *r = from + cf__dw_col(j0 + t0, 2, Wp);
        int m = (n - t0 + 1) / 2;
        for (k = 0; k < m; k++) to[t0 + 2 * k] = r[k];
    }
}
/* where the nine taps' runs of output row oh start in a padded plane (rows of Wp): element t
   of run o[kh 3 + kw] is padded element (oh s1 + kh dil1, t s2 + kw dil2) */
static void cf__dw3x3_taps(size_t *o, int Wp, int oh, const cf_geom *g) {
    int kh, kw;
    for (kh = 0; kh < 3; kh++)
        for (kw = 0; kw < 3; kw++)
            o[kh * 3 + kw] = (size_t)(oh * g->s[1] + kh * g->dil[1]) * Wp + cf__dw_col(kw * g->dil[2], g->s[2], Wp);
}
/* output row y (n values) from its nine taps' runs o in the padded plane pad */
static void cf__dw3x3_row(float *y, const float *pad, const size_t *o, const float *w, float bias, int n) {
    const float *p0 = pad + o[0], *p1 = pad + o[1], *p2 = pad + o[2], *p3 = pad + o[3], *p4 = pad + o[4],
                *p5 = pad + o[5], *p6 = pad + o[6], *p7 = pad + o[7], *p8 = pad + o[8];
    int t;
    CF__OMP(omp simd)
    for (t = 0; t < n; t++) {
        float a = bias;
        a += w[0] * p0[t]; a += w[1] * p1[t]; a += w[2] * p2[t];
        a += w[3] * p3[t]; a += w[4] * p4[t]; a += w[5] * p5[t];
        a += w[6] * p6[t]; a += w[7] * p7[t]; a += w[8] * p8[t];
        y[t] = a;
    }
}
/* the padded plane: Hp = pb + H + pa rows of Wp = pb + W + pa floats, input row h at row pb + h,
   column pb (stride 2 along the width: each row split by parity, cf__dw_col).  16-bit
   operands (section 9, halves: x_half, half): x widened as it is copied in, each output row
   computed into row (out.w floats) and rounded as it is stored in 16 bits: the same bits */
static void cf__dw3x3_plane(float *yc, float *pad, float *row, int Wp, const float *xc, const float *wc, float bias,
                            const cf__conv_call *c) {
    const cf_geom *g = c->g;
    int h, oh;
    for (h = 0; h < c->in.h; h++)
        cf__dw_row_in(pad + (size_t)(h + g->pb[1]) * Wp, cf__elt(xc, c->x_half, (size_t)h * c->in.w), c->x_half,
                      c->in.w, g->pb[2], g->s[2], Wp);
    for (oh = 0; oh < c->out.h; oh++) {
        size_t o[9];
        float *yr = c->half ? row : yc + (size_t)oh * c->out.w;
        cf__dw3x3_taps(o, Wp, oh, g);
        cf__dw3x3_row(yr, pad, o, wc, bias, c->out.w);
        cf__act_floats(yr, (size_t)c->out.w, c->act, c->slope);
        if (c->half) cf__narrow_run((cf_bf16 *)(void *)yc + (size_t)oh * c->out.w, yr, (size_t)c->out.w);
    }
    /* rounded once, the plane still in cache */
    if (c->bf16 && !c->half) cf__round_run(yc, (size_t)c->out.h * c->out.w);
}
/* a thread's buffers of a 16-bit call: the workspace (the plan has checked its room, section 9;
   no fallback reads 16 bits), else allocated (NULL: none) */
static float *cf__dw_buffers(const cf__conv_call *c, size_t per) {
    if (c->half || c->x_half || c->dx_half) return c->ws + per * cf__thread_id();
    return (float *)CF_MALLOC(sizeof(float) * per);
}
static void cf__dw_buffers_free(const cf__conv_call *c, float *p) {
    if (!(c->half || c->x_half || c->dx_half)) CF_FREE(p);
}
/* a thread's floats: the padded plane and an output row */
static size_t cf__dw3x3_fwd_floats(const cf__conv_call *c) {
    return (size_t)(c->g->pb[2] + c->in.w + c->g->pa[2]) * (c->g->pb[1] + c->in.h + c->g->pa[1]) + (size_t)c->out.w;
}
/* 16-bit operands: the threads' buffers in the workspace */
static int cf__dw3x3_half_applies(const cf__conv_call *c) {
    return (c->half || c->x_half || c->dx_half) && cf__dw3x3_applies(c) && c->bf16 && !c->x_raw &&
           (size_t)cf__nthreads() * cf__dw3x3_fwd_floats(c) <= c->ws_floats;
}
static void cf__dw3x3_fwd(const cf__conv_call *c) {
    const cf_geom *g = c->g;
    int Wp = g->pb[2] + c->in.w + g->pa[2], Hp = g->pb[1] + c->in.h + g->pa[1], planes = c->B * c->in.c;
    size_t iv = cf__positions(c->in), ov = cf__positions(c->out);
    CF__OMP(omp parallel num_threads(cf__nthreads()))
    {
        float *pad = cf__dw_buffers(c, cf__dw3x3_fwd_floats(c));   /* the padded plane, then an output row */
        int pl;
        /* the padding stays zero: only the inside is copied */
        if (pad) memset(pad, 0, sizeof(float) * (size_t)Wp * Hp);
        CF__OMP(omp for schedule(static))
        for (pl = 0; pl < planes; pl++) {   /* plane pl: sample pl / C, channel pl % C */
            int ch = pl % c->in.c;
            float bias = c->b ? c->b[ch] : 0.0f;
            if (pad)
                cf__dw3x3_plane(cf__elt(c->y, c->half, (size_t)pl * ov), pad, pad + (size_t)Wp * Hp, Wp,
                                cf__elt(c->x, c->x_half, (size_t)pl * iv), c->w + (size_t)ch * 9, bias, c);
            else cf__dw_plane_rounded(c, pl, c->bf16);   /* no room: the reference on this one plane */
        }
        cf__dw_buffers_free(c, pad);
    }
}

/* Its backward.  dx with a stride of 1: input row ih gets, for kh = 2, 1, 0 (output rows
   oh = ih + pb - kh dil ascending, the reference's order) and kw = 0, 1, 2, the products
   w[kh][kw] dy[oh][ih's column + pb - kw dil]: 9 products summed in a register onto dx's value,
   from the plane of dy copied zero-padded (2 dil on each side).  With a stride of 2: dx's plane
   is copied into a padded plane laid out as x's (cf__dw_col), each tap's run of it gets
   w dy[oh] added, in the reference's order (oh, kh, kw), the padding's terms dropped when the
   inside is copied back.  Both the same bits as the reference.  dw: the 9 sums of dy times the
   padded input, in 9 vector accumulators over the plane (the order of a vector sum: within 1e-6
   of the sum of |terms|, as the rows path). */
static int cf__dw3x3_bwd_applies(const cf__conv_call *c) { return cf__dw3x3_applies(c); }
static int cf__dw3x3_gathers(const cf__conv_call *c) { return c->g->s[1] == 1 && c->g->s[2] == 1; }
/* 16-bit operands (section 9, halves): dy (half) widened as it is copied into dq, a 16-bit dx
   (stored: its only writer) computed a row at a time into row and rounded as it is stored */
static void cf__dw3x3_plane_dx(float *dxc, float *dq, float *row, int Wq, const float *dyc, const float *wc,
                               const cf__conv_call *c) {
    const cf_geom *g = c->g;
    int oh, ih, iw, kh, dh = g->dil[1], d = g->dil[2];
    for (oh = 0; oh < c->out.h; oh++)
        cf__dw_row_in(dq + (size_t)(oh + 2 * dh) * Wq, cf__elt(dyc, c->half, (size_t)oh * c->out.w), c->half,
                      c->out.w, 2 * d, 1, Wq);
    for (ih = 0; ih < c->in.h; ih++) {
        const float *q[3];   /* q[kh][j]: dy[oh][j - 2 d] of kh's output row oh, shifted to ih's columns */
        float *xr = c->dx_half ? row : dxc + (size_t)ih * c->in.w;
        int store = c->dx_store || c->dx_half;
        for (kh = 0; kh < 3; kh++) q[kh] = dq + (size_t)(ih + g->pb[1] - kh * dh + 2 * dh) * Wq + 2 * d + g->pb[2];
        CF__OMP(omp simd)
        for (iw = 0; iw < c->in.w; iw++) {
            float a = store ? 0.0f : xr[iw];
            a += wc[6] * q[2][iw]; a += wc[7] * q[2][iw - d]; a += wc[8] * q[2][iw - 2 * d];
            a += wc[3] * q[1][iw]; a += wc[4] * q[1][iw - d]; a += wc[5] * q[1][iw - 2 * d];
            a += wc[0] * q[0][iw]; a += wc[1] * q[0][iw - d]; a += wc[2] * q[0][iw - 2 * d];
            xr[iw] = a;
        }
        if (c->dx_half) cf__narrow_run((cf_bf16 *)(void *)dxc + (size_t)ih * c->in.w, xr, (size_t)c->in.w);
    }
    /* the plane is whole: rounded, still in cache */
    if (c->bf16 && !c->dx_half) cf__round_run(dxc, (size_t)c->in.h * c->in.w);
}
/* (a stride of 2: dp a padded plane of Wp x Hp, row a row of the wider of dy and dx) */
static void cf__dw3x3_plane_dx_strided(float *dxc, float *dp, float *row, int Wp, int Hp, const float *dyc,
                                       const float *wc, const cf__conv_call *c) {
    const cf_geom *g = c->g;
    int h, oh, k, t, W = c->in.w, s2 = g->s[2];
    if (c->dx_store || c->dx_half) memset(dp, 0, sizeof(float) * Wp * Hp);
    else
        for (h = 0; h < c->in.h; h++)
            cf__dw_row_in(dp + (size_t)(h + g->pb[1]) * Wp, dxc + (size_t)h * W, 0, W, g->pb[2], s2, Wp);
    for (oh = 0; oh < c->out.h; oh++) {
        const float *dy = c->half ? row : dyc + (size_t)oh * c->out.w;
        size_t o[9];
        if (c->half) cf__widen_run(row, (const cf_bf16 *)(const void *)dyc + (size_t)oh * c->out.w, (size_t)c->out.w);
        cf__dw3x3_taps(o, Wp, oh, g);
        for (k = 0; k < 9; k++) {
            float *q = dp + o[k], wv = wc[k];
            CF__OMP(omp simd)
            for (t = 0; t < c->out.w; t++) q[t] += wv * dy[t];
        }
    }
    for (h = 0; h < c->in.h; h++) {
        float *xr = c->dx_half ? row : dxc + (size_t)h * W;
        cf__dw_row_out(xr, dp + (size_t)(h + g->pb[1]) * Wp, W, g->pb[2], s2, Wp);
        if (c->dx_half) cf__narrow_run((cf_bf16 *)(void *)dxc + (size_t)h * W, xr, (size_t)W);
    }
    if (c->bf16 && !c->dx_half) cf__round_run(dxc, (size_t)c->in.h * W);
}
/* (16 bits: x widened as it is copied into xq, each row of dy into row first) */
static void cf__dw3x3_plane_dw(float *dwc, float *xq, float *row, int Wp, const float *xc, const float *dyc,
                               const cf__conv_call *c) {
    const cf_geom *g = c->g;
    int h, oh, t;
    float a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0, a8 = 0;
    for (h = 0; h < c->in.h; h++)
        cf__dw_row_in(xq + (size_t)(h + g->pb[1]) * Wp, cf__elt(xc, c->x_half, (size_t)h * c->in.w), c->x_half,
                      c->in.w, g->pb[2], g->s[2], Wp);
    for (oh = 0; oh < c->out.h; oh++) {
        const float *dy = c->half ? row : dyc + (size_t)oh * c->out.w;
        const float *r0, *r1, *r2, *r3, *r4, *r5, *r6, *r7, *r8;
        size_t o[9];
        if (c->half) cf__widen_run(row, (const cf_bf16 *)(const void *)dyc + (size_t)oh * c->out.w, (size_t)c->out.w);
        cf__dw3x3_taps(o, Wp, oh, g);
        r0 = xq + o[0]; r1 = xq + o[1]; r2 = xq + o[2]; r3 = xq + o[3]; r4 = xq + o[4]; r5 = xq + o[5];
        r6 = xq + o[6]; r7 = xq + o[7]; r8 = xq + o[8];
        CF__OMP(omp simd reduction(+:a0, a1, a2, a3, a4, a5, a6, a7, a8))
        for (t = 0; t < c->out.w; t++) {
            a0 += dy[t] * r0[t]; a1 += dy[t] * r1[t]; a2 += dy[t] * r2[t];
            a3 += dy[t] * r3[t]; a4 += dy[t] * r4[t]; a5 += dy[t] * r5[t];
            a6 += dy[t] * r6[t]; a7 += dy[t] * r7[t]; a8 += dy[t] * r8[t];
        }
    }
    dwc[0] += a0; dwc[1] += a1; dwc[2] += a2; dwc[3] += a3; dwc[4] += a4; dwc[5] += a5; dwc[6] += a6; dwc[7] += a7;
    dwc[8] += a8;
}
/* a thread's floats: the padded plane of x, the padded plane of dy (stride 1) or of dx (2), a
   row of the wider of dy and dx */
static size_t cf__dw3x3_bwd_floats(const cf__conv_call *c) {
    const cf_geom *g = c->g;
    size_t xp = (size_t)(g->pb[2] + c->in.w + g->pa[2]) * (g->pb[1] + c->in.h + g->pa[1]);
    return xp + (cf__dw3x3_gathers(c) ? (size_t)(c->out.w + 4 * g->dil[2]) * (c->out.h + 4 * g->dil[1]) : xp) +
           (size_t)(c->in.w > c->out.w ? c->in.w : c->out.w);
}
static int cf__dw3x3_half_bwd_applies(const cf__conv_call *c) {
    return (c->half || c->x_half || c->dx_half) && cf__dw3x3_bwd_applies(c) && c->bf16 && !c->x_raw &&
           (size_t)cf__nthreads() * cf__dw3x3_bwd_floats(c) <= c->ws_floats;
}
static void cf__dw3x3_bwd(const cf__conv_call *c) {
    const cf_geom *g = c->g;
    int Wp = g->pb[2] + c->in.w + g->pa[2], Hp = g->pb[1] + c->in.h + g->pa[1], Wq = c->out.w + 4 * g->dil[2],
        Hq = c->out.h + 4 * g->dil[1], gathers = cf__dw3x3_gathers(c);
    size_t iv = cf__positions(c->in), ov = cf__positions(c->out), per = cf__dw3x3_bwd_floats(c);
    int nth = cf__nthreads(), halves = c->half || c->x_half || c->dx_half;
    /* each thread's padded planes of x and dy or dx (16 bits: the workspace's) */
    float *buf = halves ? c->ws : (float *)CF_MALLOC(sizeof(float) * per * nth);
    if (!buf && gathers) { cf__dw_rows_bwd(c); return; }          /* no room: the rows path (it stores dx too) */
    if (!buf) {   /* (a stride of 2 along the width: the reference, dx zeroed first when stored) */
        if (c->dx && c->dx_store) cf__zero_floats(c->dx, (size_t)c->B * iv);
        cf_ref_dwconv_backward(c->dx, c->dw, NULL, c->dy, c->x, c->w, c->B, c->in, c->out, g);
        if (c->bf16 && c->dx) cf__round_run(c->dx, (size_t)c->B * iv);
        return;
    }
    CF__OMP(omp parallel num_threads(nth))
    {
        float *xq = buf + per * cf__thread_id(), *dq = xq + (size_t)Wp * Hp;
        float *row = dq + (gathers ? (size_t)Wq * Hq : (size_t)Wp * Hp);
        int ch, bi;
        memset(xq, 0, sizeof(float) * per);   /* the padding stays zero: only the inside is copied */
        CF__OMP(omp for schedule(static))
        for (ch = 0; ch < c->in.c; ch++)   /* a channel's dw and dx belong to one thread */
            for (bi = 0; bi < c->B; bi++) {
                size_t plane = (size_t)bi * c->in.c + ch;
                cf__dw3x3_plane_dw(c->dw + (size_t)ch * 9, xq, row, Wp, cf__elt(c->x, c->x_half, plane * iv),
                                   cf__elt(c->dy, c->half, plane * ov), c);
                if (c->dx && gathers)
                    cf__dw3x3_plane_dx(cf__elt(c->dx, c->dx_half, plane * iv), dq, row, Wq,
                                       cf__elt(c->dy, c->half, plane * ov), c->w + (size_t)ch * 9, c);
                else if (c->dx)
                    cf__dw3x3_plane_dx_strided(cf__elt(c->dx, c->dx_half, plane * iv), dq, row, Wp, Hp,
                                               cf__elt(c->dy, c->half, plane * ov), c->w + (size_t)ch * 9, c);
            }
    }
    if (!halves) CF_FREE(buf);
}

/* ---- depthwise 3x3, stride 1, in AVX-512 registers (kind "direct"; DeepCAM's middle flow: 728
   channels at 48 x 72, 50 of them a step, and its other stride-1 depthwise 3x3s).  No padded
   copy: each tap's run is read from x's row itself by a masked load (the lanes in the padding
   read as 0), a 16-bit operand widened as it is loaded.  Four output rows at once: each of the
   6 input rows they read is loaded once (3 shifted vectors) for the up to 3 of the 4 rows that
   use it, the 9 weights in registers, 4 independent sums; the forward and the data gradient
   add the reference's products in its order (the same bits, but a zero's sign and a w that is
   not finite, as the kernel above), dw sums in 9 vector accumulators a plane.  The backward
   takes dw and dx of a plane together (x, dy read from memory once).  A bf16 call's y and dx
   are rounded as they are stored.  The kernel above sums each output in one chain of 9
   dependent adds, 8 wide, its weights loaded again each step (perf annotate), after copying
   the plane.  On 728 x 48 x 72, 2 threads, the two alternated in one process (the AMD EPYC
   host of docs/performance.md, loaded by other tenants): fp32 forward 1.47-1.93x, backward
   (dw + dx) 1.40-1.77x; bf16 with y and dy in 16 bits 1.64-1.97x and 1.25-1.92x, and 1.16-1.45x
   more with the rounding as stored.  bin/onednn-peer --model models/deepcam.cfg --layer 43,
   old and new kernels alternated: oneDNN / ours, fp32 forward 0.66 -> 1.13, backward 0.70 ->
   1.04; bf16 0.32 -> 0.89 and 0.45 -> 1.01 (docs/performance.md, "Depthwise 3x3, stride 1, in
   AVX-512 registers"). */
#ifdef CF__AVX512
#ifdef CF__BF16   /* (the bf16 conversion runs only where the CPU has it: cf__dwv_rnd) */
#define CF__DWV_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
#else
#define CF__DWV_TARGET __attribute__((target("avx512f,avx512bw,avx512vl")))
#endif
static int cf__dwv_applies(const cf__conv_call *c) {
    return cf__dw3x3_applies(c) && c->g->s[1] == 1 && c->g->s[2] == 1 && c->g->dil[1] == 1 && cf__has_avx512() &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
}
/* a thread's floats: 4 rows of the wider of x and y (a 16-bit output, dx, is made there) */
static size_t cf__dwv_floats(const cf__conv_call *c) { return (size_t)4 * (c->in.w > c->out.w ? c->in.w : c->out.w); }
static int cf__dwv_half_applies(const cf__conv_call *c) {
    return (c->half || c->x_half || c->dx_half) && cf__dwv_applies(c) && c->bf16 && !c->x_raw &&
           (size_t)cf__nthreads() * cf__dwv_floats(c) <= c->ws_floats;
}
/* lanes j of a vector whose element at + j of a row of n lies in the row */
CF__INLINE __mmask16 cf__dwv_in(long at, long n) {
    return (__mmask16)(cf__lanes((int)(n - at)) & ~cf__lanes((int)-at));
}
/* 16 values of row r from element at, the lanes outside m 0 (half: 16-bit values, widened) */
CF__DWV_TARGET CF__INLINE __m512 cf__dwv_load(const float *r, long at, __mmask16 m, int half) {
    if (half) {
        __m256i h = _mm256_maskz_loadu_epi16(m, (const cf_bf16 *)(const void *)r + at);
        return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xffff, _mm512_maskz_cvtepu16_epi32(0xffff, h), 16));
    }
    return _mm512_maskz_loadu_ps(m, r + at);
}
/* the three taps' vectors v[kw] = row i of plane p (rows of n, half: 16 bits) from element
   at - kw step, m[kw] its lanes in the row; 0 when row i is outside the plane's h rows */
CF__DWV_TARGET CF__INLINE int cf__dwv_row3(__m512 *v, const float *p, int half, long i, int h, long n, long at,
                                           long step, const __mmask16 *m) {
    const float *r;
    if (i < 0 || i >= h) return 0;
    r = cf__elt(p, half, (size_t)i * n);
    v[0] = cf__dwv_load(r, at, m[0], half); v[1] = cf__dwv_load(r, at - step, m[1], half);
    v[2] = cf__dwv_load(r, at - 2 * step, m[2], half);
    return 1;
}
/* Whether the kernels fetch the next four rows' new input rows (and dy's, for dw) ahead, at each
   column: where a plane of x is 48 KB or more as stored (DeepCAM's fp32 planes from 96x144 on,
   its 16-bit ones from 192x288 on), which waited on those loads (`perf annotate`: a third of
   the forward's samples on two 16-bit loads).  The kernels with and without, in one process:
   forward, 16-bit x and y, 256x192x288 4.0 -> 3.0 ms, fp32 5.8 -> 4.8; backward 6.5 -> 5.4 and
   8.8 -> 8.2.  Smaller planes sit in the L2 cache, where the fetches cost (fp32 48x72 forward
   0.43-0.49 -> 0.48-0.58, 16-bit 96x144 backward 3.6-3.8 -> 3.8) (docs/performance.md). */
static int cf__dwv_ahead(const cf__conv_call *c, int half) {
    return cf__positions(c->in) * (half ? 2 : 4) >= (size_t)48 * 1024;
}
/* how a bf16 call's sums are stored, rounded as they are stored when the CPU converts to bf16
   (cf__round_run's instruction, the same bits): 1 in fp32, 2 in 16 bits; 0: as they are (fp32,
   or rounded by a pass after) */
static int cf__dwv_rnd(const cf__conv_call *c, int half) {
#ifdef CF__BF16
    if (c->bf16 && cf__kind_on[CF__K_BF16] && cf__has_bf16()) return half ? 2 : 1;
#endif
    (void)c; (void)half;
    return 0;
}
/* 16 sums v into lanes m of element i of p: as they are (rnd 0), rounded to bf16 (1), or rounded
   and stored in 16 bits (2: p holds 16-bit values) */
CF__DWV_TARGET CF__INLINE void cf__dwv_store(float *p, size_t i, __mmask16 m, __m512 v, int rnd) {
#ifdef CF__BF16
    if (rnd) {
        __m256i h = (__m256i)_mm512_cvtneps_pbh(v);
        if (rnd == 2) { _mm256_mask_storeu_epi16((cf_bf16 *)(void *)p + i, m, h); return; }
        v = _mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xffff, _mm512_maskz_cvtepu16_epi32(0xffff, h), 16));
    }
#endif
    (void)rnd;
    _mm512_mask_storeu_ps(p + i, m, v);
}
/* the six rows that four rows of a plane read (row j serves row r as kh = j - r, or 2 - (j - r)
   for dx), written out so that the sums stay in registers: LOAD(j) loads row j's three taps,
   USE(r, q) adds them to row r's sums, q = j - r */
#define CF__DWV_ROWS(LOAD, USE)                                                                                       \
    if (LOAD(0)) { USE(0, 0) }                                                                                       \
    if (LOAD(1)) { USE(0, 1) USE(1, 0) }                                                                             \
    if (LOAD(2)) { USE(0, 2) USE(1, 1) USE(2, 0) }                                                                   \
    if (LOAD(3)) { USE(1, 2) USE(2, 1) USE(3, 0) }                                                                   \
    if (LOAD(4)) { USE(2, 2) USE(3, 1) }                                                                             \
    if (LOAD(5)) { USE(3, 2) }
/* acc += the three products of kernel row kh (w in wv) in order kw = 0, 1, 2, as the reference
   adds them, written as it writes them (a compiler that contracts its a += w x contracts these) */
#define CF__DWV_ADD3(acc, kh) \
    acc += wv[(kh) * 3] * v[0]; acc += wv[(kh) * 3 + 1] * v[1]; acc += wv[(kh) * 3 + 2] * v[2];
/* output rows oh0 .. oh0 + 3 of a plane into yr (rows of out.w; those past out.h not stored;
   stored as rnd says): bias, then the taps (kh, kw) in order; input row oh0 - pb + j serves
   output row r as kh = j - r */
CF__DWV_TARGET CF__INLINE void cf__dwv_fwd_rows(float *yr, const float *xc, int xh, const float *wc, float bias,
                                                int oh0, int rnd, const cf__conv_call *c) {
    const cf_geom *g = c->g;
    int W = c->in.w, OW = c->out.w, nr = c->out.h - oh0 < 4 ? c->out.h - oh0 : 4, t0, k, ahead = cf__dwv_ahead(c, xh);
    long d = g->dil[2], pw = g->pb[2], i0 = (long)oh0 - g->pb[1];
    __m512 wv[9];
    for (k = 0; k < 9; k++) wv[k] = _mm512_set1_ps(wc[k]);
    for (t0 = 0; t0 < OW; t0 += 16) {
        __m512 a0 = _mm512_set1_ps(bias), a1 = a0, a2 = a0, a3 = a0, v[3];
        long at = t0 - pw;   /* (tap kw reads from at + kw d) */
        __mmask16 m[3];
        m[0] = cf__dwv_in(at, W); m[1] = cf__dwv_in(at + d, W); m[2] = cf__dwv_in(at + 2 * d, W);
        /* the four input rows the next four output rows read and these do not, fetched ahead */
        for (k = 6; k < 10 && at >= 0 && ahead; k++)
            if (i0 + k < c->in.h) CF__PREFETCH(cf__elt(xc, xh, (size_t)(i0 + k) * W + (size_t)at), 0);
#define CF__DWV_LOAD(j) cf__dwv_row3(v, xc, xh, i0 + (j), c->in.h, W, at, -d, m)
#define CF__DWV_USE(r, q) CF__DWV_ADD3(a##r, q)
        CF__DWV_ROWS(CF__DWV_LOAD, CF__DWV_USE)
#undef CF__DWV_LOAD
#undef CF__DWV_USE
        cf__dwv_store(yr, (size_t)t0, cf__lanes(OW - t0), a0, rnd);
        if (nr > 1) cf__dwv_store(yr, (size_t)OW + t0, cf__lanes(OW - t0), a1, rnd);
        if (nr > 2) cf__dwv_store(yr, (size_t)2 * OW + t0, cf__lanes(OW - t0), a2, rnd);
        if (nr > 3) cf__dwv_store(yr, (size_t)3 * OW + t0, cf__lanes(OW - t0), a3, rnd);
    }
}
CF__DWV_TARGET static void cf__dwv_fwd_plane(float *yr, const float *xc, const float *wc, float bias, int oh0,
                                             int rnd, const cf__conv_call *c) {
    /* (each form its own copy: the stores' form known where they are compiled) */
    if (c->x_half && rnd == 2) cf__dwv_fwd_rows(yr, xc, 1, wc, bias, oh0, 2, c);
    else if (c->x_half && rnd == 1) cf__dwv_fwd_rows(yr, xc, 1, wc, bias, oh0, 1, c);
    else if (c->x_half) cf__dwv_fwd_rows(yr, xc, 1, wc, bias, oh0, 0, c);
    else if (rnd == 2) cf__dwv_fwd_rows(yr, xc, 0, wc, bias, oh0, 2, c);
    else if (rnd == 1) cf__dwv_fwd_rows(yr, xc, 0, wc, bias, oh0, 1, c);
    else cf__dwv_fwd_rows(yr, xc, 0, wc, bias, oh0, 0, c);
}
static void cf__dwv_fwd(const cf__conv_call *c) {
    /* (an activation: applied, then rounded, by passes over the rows in cache) */
    int planes = c->B * c->in.c, halves = c->half || c->x_half || c->dx_half,
        rnd = c->act == CF_ACT_LINEAR ? cf__dwv_rnd(c, c->half) : 0;
    size_t iv = cf__positions(c->in), ov = cf__positions(c->out), per = cf__dwv_floats(c);
    CF__OMP(omp parallel num_threads(cf__nthreads()))
    {
        float *buf = halves ? c->ws + per * cf__thread_id() : NULL;   /* 16 bits: rows made here, then stored */
        int pl, oh0;
        CF__OMP(omp for schedule(static))
        for (pl = 0; pl < planes; pl++) {   /* plane pl: sample pl / C, channel pl % C */
            int ch = pl % c->in.c;
            const float *xc = cf__elt(c->x, c->x_half, (size_t)pl * iv);
            for (oh0 = 0; oh0 < c->out.h; oh0 += 4) {
                size_t n = (size_t)(c->out.h - oh0 < 4 ? c->out.h - oh0 : 4) * c->out.w;
                float *yr = c->half ? buf : c->y + (size_t)pl * ov + (size_t)oh0 * c->out.w;
                if (rnd == 2) yr = cf__elt(c->y, 1, (size_t)pl * ov + (size_t)oh0 * c->out.w);
                cf__dwv_fwd_plane(yr, xc, c->w + (size_t)ch * 9, c->b ? c->b[ch] : 0.0f, oh0, rnd, c);
                if (rnd) continue;
                cf__act_floats(yr, n, c->act, c->slope);   /* then rounded, the rows in cache */
                if (c->half) cf__narrow_run((cf_bf16 *)(void *)c->y + (size_t)pl * ov + (size_t)oh0 * c->out.w, yr, n);
                else if (c->bf16) cf__round_run(yr, n);
            }
        }
    }
}
/* the sum of a vector's 16 lanes, in lane order */
CF__DWV_TARGET CF__INLINE float cf__dwv_sum(__m512 v) {
    float t[16], a = 0.0f;
    int k;
    _mm512_storeu_ps(t, v);
    for (k = 0; k < 16; k++) a += t[k];
    return a;
}
/* dw of a plane: dw[kh][kw] += sum over output rows oh and columns t of dy[oh][t] times x's
   element (oh - pb + kh, t - pb + kw dil), 9 vector sums; four rows of dy at once, each x row
   loaded once for them */
CF__DWV_TARGET CF__INLINE void cf__dwv_dw(float *dwc, const float *xc, int xh, const float *dyc, int dyh,
                                          const cf__conv_call *c) {
    const cf_geom *g = c->g;
    int W = c->in.w, OW = c->out.w, OH = c->out.h, oh0, t0, k, ahead = cf__dwv_ahead(c, xh);
    long d = g->dil[2], pw = g->pb[2];
    __m512 s00 = _mm512_setzero_ps(), s01 = s00, s02 = s00, s10 = s00, s11 = s00, s12 = s00, s20 = s00, s21 = s00,
           s22 = s00;
    for (oh0 = 0; oh0 < OH; oh0 += 4)
        for (t0 = 0; t0 < OW; t0 += 16) {
            __m512 e0, e1, e2, e3, v[3];
            __mmask16 m[3], mo = cf__lanes(OW - t0);
            long at = t0 - pw, i0 = (long)oh0 - g->pb[1];
            m[0] = cf__dwv_in(at, W); m[1] = cf__dwv_in(at + d, W); m[2] = cf__dwv_in(at + 2 * d, W);
            for (k = 0; k < 4 && at >= 0 && ahead; k++) {   /* the next four rows' new ones */
                if (i0 + 6 + k < c->in.h) CF__PREFETCH(cf__elt(xc, xh, (size_t)(i0 + 6 + k) * W + (size_t)at), 0);
                if (oh0 + 4 + k < OH) CF__PREFETCH(cf__elt(dyc, dyh, (size_t)(oh0 + 4 + k) * OW + (size_t)t0), 0);
            }
            /* (rows past the plane: no lanes, 0) */
            e0 = cf__dwv_load(cf__elt(dyc, dyh, (size_t)oh0 * OW), t0, mo, dyh);
            e1 = cf__dwv_load(cf__elt(dyc, dyh, (size_t)(oh0 + 1) * OW), t0, oh0 + 1 < OH ? mo : 0, dyh);
            e2 = cf__dwv_load(cf__elt(dyc, dyh, (size_t)(oh0 + 2) * OW), t0, oh0 + 2 < OH ? mo : 0, dyh);
            e3 = cf__dwv_load(cf__elt(dyc, dyh, (size_t)(oh0 + 3) * OW), t0, oh0 + 3 < OH ? mo : 0, dyh);
#define CF__DWV_LOAD(j) cf__dwv_row3(v, xc, xh, i0 + (j), c->in.h, W, at, -d, m)
#define CF__DWV_USE(r, q)                          \
    s##q##0 = _mm512_fmadd_ps(e##r, v[0], s##q##0); \
    s##q##1 = _mm512_fmadd_ps(e##r, v[1], s##q##1); \
    s##q##2 = _mm512_fmadd_ps(e##r, v[2], s##q##2);
            CF__DWV_ROWS(CF__DWV_LOAD, CF__DWV_USE)
#undef CF__DWV_LOAD
#undef CF__DWV_USE
        }
    dwc[0] += cf__dwv_sum(s00); dwc[1] += cf__dwv_sum(s01); dwc[2] += cf__dwv_sum(s02);
    dwc[3] += cf__dwv_sum(s10); dwc[4] += cf__dwv_sum(s11); dwc[5] += cf__dwv_sum(s12);
    dwc[6] += cf__dwv_sum(s20); dwc[7] += cf__dwv_sum(s21); dwc[8] += cf__dwv_sum(s22);
}
/* dx rows ih0 .. ih0 + 3 of a plane into xr (rows of in.w; those past in.h not stored): dx's
   value (0 when stored), then for kh = 2, 1, 0 (output row ih + pb - kh ascending) and kw = 0,
   1, 2 the product w[kh][kw] dy[oh][ih's column + pb - kw dil]; output row ih0 + pb - 2 + j
   serves dx row r as kh = 2 - (j - r) */
CF__DWV_TARGET CF__INLINE void cf__dwv_dx_rows(float *xr, const float *dyc, int dyh, const float *wc, int ih0,
                                               int store, int rnd, const cf__conv_call *c) {
    const cf_geom *g = c->g;
    int W = c->in.w, OW = c->out.w, nr = c->in.h - ih0 < 4 ? c->in.h - ih0 : 4, t0, k;
    long d = g->dil[2], pw = g->pb[2], o0 = (long)ih0 + g->pb[1] - 2;
    __m512 wv[9];
    for (k = 0; k < 9; k++) wv[k] = _mm512_set1_ps(wc[k]);
    for (t0 = 0; t0 < W; t0 += 16) {
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, v[3];
        __mmask16 m[3], mi = cf__lanes(W - t0);
        long at = t0 + pw;   /* (tap kw reads dy from at - kw d) */
        m[0] = cf__dwv_in(at, OW); m[1] = cf__dwv_in(at - d, OW); m[2] = cf__dwv_in(at - 2 * d, OW);
        if (!store) {
            a0 = _mm512_maskz_loadu_ps(mi, xr + t0);
            if (nr > 1) a1 = _mm512_maskz_loadu_ps(mi, xr + (size_t)W + t0);
            if (nr > 2) a2 = _mm512_maskz_loadu_ps(mi, xr + (size_t)2 * W + t0);
            if (nr > 3) a3 = _mm512_maskz_loadu_ps(mi, xr + (size_t)3 * W + t0);
        }
#define CF__DWV_LOAD(j) cf__dwv_row3(v, dyc, dyh, o0 + (j), c->out.h, OW, at, d, m)
#define CF__DWV_USE(r, q) CF__DWV_ADD3(a##r, 2 - (q))
        CF__DWV_ROWS(CF__DWV_LOAD, CF__DWV_USE)
#undef CF__DWV_LOAD
#undef CF__DWV_USE
        cf__dwv_store(xr, (size_t)t0, mi, a0, rnd);
        if (nr > 1) cf__dwv_store(xr, (size_t)W + t0, mi, a1, rnd);
        if (nr > 2) cf__dwv_store(xr, (size_t)2 * W + t0, mi, a2, rnd);
        if (nr > 3) cf__dwv_store(xr, (size_t)3 * W + t0, mi, a3, rnd);
    }
}
/* a plane's dw and dx; buf: 4 rows of the thread's (a 16-bit dx is made there) */
CF__DWV_TARGET static void cf__dwv_bwd_plane(float *dwc, float *dxc, float *buf, const float *xc, const float *dyc,
                                             const float *wc, const cf__conv_call *c) {
    int ih0, store = c->dx_store || c->dx_half, rnd = cf__dwv_rnd(c, c->dx_half);
    if (c->x_half && c->half) cf__dwv_dw(dwc, xc, 1, dyc, 1, c);
    else if (c->x_half) cf__dwv_dw(dwc, xc, 1, dyc, 0, c);
    else if (c->half) cf__dwv_dw(dwc, xc, 0, dyc, 1, c);
    else cf__dwv_dw(dwc, xc, 0, dyc, 0, c);
    if (!dxc) return;
    for (ih0 = 0; ih0 < c->in.h; ih0 += 4) {
        size_t n = (size_t)(c->in.h - ih0 < 4 ? c->in.h - ih0 : 4) * c->in.w;
        float *xr = c->dx_half ? buf : dxc + (size_t)ih0 * c->in.w;
        if (rnd == 2) xr = cf__elt(dxc, 1, (size_t)ih0 * c->in.w);
        if (c->half && rnd == 2) cf__dwv_dx_rows(xr, dyc, 1, wc, ih0, store, 2, c);
        else if (c->half && rnd == 1) cf__dwv_dx_rows(xr, dyc, 1, wc, ih0, store, 1, c);
        else if (c->half) cf__dwv_dx_rows(xr, dyc, 1, wc, ih0, store, 0, c);
        else if (rnd == 2) cf__dwv_dx_rows(xr, dyc, 0, wc, ih0, store, 2, c);
        else if (rnd == 1) cf__dwv_dx_rows(xr, dyc, 0, wc, ih0, store, 1, c);
        else cf__dwv_dx_rows(xr, dyc, 0, wc, ih0, store, 0, c);
        if (rnd) continue;
        if (c->dx_half) cf__narrow_run((cf_bf16 *)(void *)dxc + (size_t)ih0 * c->in.w, xr, n);
        else if (c->bf16) cf__round_run(xr, n);   /* rounded, the rows in cache */
    }
}
/* a backward's planes shared out by channel (a channel's dw and dx belong to one thread), each
   thread with per floats of the workspace when the call has 16-bit operands (else none) */
typedef void (*cf__dw_plane_bwd_fn)(float *dwc, float *dxc, float *buf, const float *xc, const float *dyc,
                                    const float *wc, const cf__conv_call *c);
static void cf__dw_planes_bwd(const cf__conv_call *c, size_t per, cf__dw_plane_bwd_fn plane_bwd) {
    int halves = c->half || c->x_half || c->dx_half;
    size_t iv = cf__positions(c->in), ov = cf__positions(c->out);
    CF__OMP(omp parallel num_threads(cf__nthreads()))
    {
        float *buf = halves ? c->ws + per * cf__thread_id() : NULL;
        int ch, bi;
        CF__OMP(omp for schedule(static))
        for (ch = 0; ch < c->in.c; ch++)
            for (bi = 0; bi < c->B; bi++) {
                size_t plane = (size_t)bi * c->in.c + ch;
                plane_bwd(c->dw + (size_t)ch * 9, c->dx ? cf__elt(c->dx, c->dx_half, plane * iv) : NULL, buf,
                          cf__elt(c->x, c->x_half, plane * iv), cf__elt(c->dy, c->half, plane * ov),
                          c->w + (size_t)ch * 9, c);
            }
    }
}
static void cf__dwv_bwd(const cf__conv_call *c) { cf__dw_planes_bwd(c, cf__dwv_floats(c), cf__dwv_bwd_plane); }

/* ---- depthwise 3x3 of stride 2 and padding 1 in AVX-512 registers (kind "direct"; DeepCAM's
   three strided depthwise convolutions, 128 to 728 channels at 384x576 to 96x144).  The
   padded-plane kernel above copies each plane of x, and of dx, into a plane split by column
   parity element by element, and dx back the same way: on 128 planes of 384x576 those copies
   took most of its time (perf annotate).  Here 32 values of a row are two loads, and two
   permutes give their even and odd columns: output column t reads input columns 2 t - 1 + kw,
   so tap kw = 1 reads the even ones, kw = 2 the odd ones, kw = 0 the odd ones a lane later
   (the previous block's last odd column first; 0 at the row's start, the padding).  Forward:
   each output row from its three input rows, the bias then the taps (kh, kw) in the
   reference's order.  dw: 9 vector sums over the plane, as the kernels above.  dx: each row
   computed once, from dx's value (0 when stored), its even columns the products of kw = 1,
   its odd ones those of kw = 0 then 2, for the output rows that read it in the reference's
   order (an odd row ih: kh = 2 of output row (ih - 1) / 2, then kh = 0 of (ih + 1) / 2; an
   even one kh = 1 of ih / 2); the two halves interleaved by two permutes and stored.  Outputs
   rounded as stored in a bf16 call.  The same bits as the reference, but a zero's sign and a w
   that is not finite (a tap in the padding adds w x 0 where the reference adds nothing; dw's
   lanes past the output row are zeroed).  The input rows of the next output row are fetched ahead:
   on 128 x 384 x 576 it was memory-bound without it (backward 12.9 -> 10.1 ms, in one process).
   Against the padded-plane kernel, 2 threads, best of 15 in one process, fp32 (bf16 with y, dy
   and dx in 16 bits alike): 128 x 384 x 576 forward 7.5 -> 6.7 ms, backward 18.8 -> 11.3;
   256 x 192 x 288 4.5 -> 2.7 and 9.2 -> 4.9; 728 x 96 x 144 4.0 -> 2.2 and 9.0 -> 4.8. */
static int cf__dws_applies(const cf__conv_call *c) {
    const cf_geom *g = c->g;
    return cf__dw3x3_applies(c) && g->s[1] == 2 && g->s[2] == 2 && g->dil[1] == 1 && g->dil[2] == 1 &&
           g->pb[1] == 1 && g->pb[2] == 1 && cf__has_avx512() && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl");
}
/* 16-bit operands: a row of the thread's in the workspace (where a 16-bit dx is made when the
   CPU cannot round as it stores) */
static int cf__dws_half_applies(const cf__conv_call *c) {
    return (c->half || c->x_half || c->dx_half) && cf__dws_applies(c) && c->bf16 && !c->x_raw &&
           (size_t)cf__nthreads() * c->in.w <= c->ws_floats;
}
/* the even columns (ev[j] = r[at + 2 j]) and the odd ones (od[j] = r[at + 2 j + 1]) of 32
   values of row r (n long; half: 16 bits) from element at, those past the row 0 */
CF__DWV_TARGET CF__INLINE void cf__dws_split(__m512 *ev, __m512 *od, const float *r, long at, long n, int half) {
    const __m512i e = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0),
        o = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    __m512 lo = cf__dwv_load(r, at, cf__dwv_in(at, n), half),
           hi = cf__dwv_load(r, at + 16, cf__dwv_in(at + 16, n), half);
    *ev = _mm512_permutex2var_ps(lo, e, hi);
    *od = _mm512_permutex2var_ps(lo, o, hi);
}
/* od a lane later, prev's last lane first: tap kw = 0's columns */
CF__DWV_TARGET CF__INLINE __m512 cf__dws_later(__m512 od, __m512 prev) {
    return _mm512_castsi512_ps(_mm512_alignr_epi32(_mm512_castps_si512(od), _mm512_castps_si512(prev), 15));
}
/* output row oh of a plane into yr (out.w values, stored as rnd says): the bias, then the taps
   (kh, kw) in the reference's order */
CF__DWV_TARGET CF__INLINE void cf__dws_fwd_row(float *yr, const float *xc, int xh, const float *wc, float bias, int oh,
                                               int rnd, const cf__conv_call *c) {
    int W = c->in.w, H = c->in.h, OW = c->out.w, t0;
    long ih = 2L * oh - 1;
    const float *r0 = ih >= 0 ? cf__elt(xc, xh, (size_t)ih * W) : NULL,
                *r1 = ih + 1 < H ? cf__elt(xc, xh, (size_t)(ih + 1) * W) : NULL,
                *r2 = ih + 2 < H ? cf__elt(xc, xh, (size_t)(ih + 2) * W) : NULL;
    __m512 w00 = _mm512_set1_ps(wc[0]), w01 = _mm512_set1_ps(wc[1]), w02 = _mm512_set1_ps(wc[2]),
           w10 = _mm512_set1_ps(wc[3]), w11 = _mm512_set1_ps(wc[4]), w12 = _mm512_set1_ps(wc[5]),
           w20 = _mm512_set1_ps(wc[6]), w21 = _mm512_set1_ps(wc[7]), w22 = _mm512_set1_ps(wc[8]);
    __m512 p0 = _mm512_setzero_ps(), p1 = p0, p2 = p0;   /* each row's odd columns of the block before */
    if (ih + 4 < H)   /* the two rows the next output row reads first, fetched ahead */
        cf__prefetch_floats(cf__elt(xc, xh, (size_t)(ih + 3) * W), (size_t)(xh ? W : 2 * W), 0);
    for (t0 = 0; t0 < OW; t0 += 16) {
        __m512 a = _mm512_set1_ps(bias), ev, od;
#define CF__DWS_ROW(kh)                                                                                               \
        if (r##kh) {                                                                                                  \
            cf__dws_split(&ev, &od, r##kh, 2L * t0, W, xh);                                                           \
            a += w##kh##0 * cf__dws_later(od, p##kh); a += w##kh##1 * ev; a += w##kh##2 * od;                         \
            p##kh = od;                                                                                               \
        }
        CF__DWS_ROW(0) CF__DWS_ROW(1) CF__DWS_ROW(2)
#undef CF__DWS_ROW
        cf__dwv_store(yr, (size_t)t0, cf__lanes(OW - t0), a, rnd);
    }
}
CF__DWV_TARGET static void cf__dws_fwd_plane(float *yp, float *buf, const float *xc, const float *wc, float bias,
                                             int rnd, const cf__conv_call *c) {
    int oh, OW = c->out.w;
    for (oh = 0; oh < c->out.h; oh++) {
        float *yr = rnd == 2 ? cf__elt(yp, 1, (size_t)oh * OW) : c->half ? buf : yp + (size_t)oh * OW;
        if (c->x_half) cf__dws_fwd_row(yr, xc, 1, wc, bias, oh, rnd, c);
        else cf__dws_fwd_row(yr, xc, 0, wc, bias, oh, rnd, c);
        if (rnd) continue;
        cf__act_floats(yr, (size_t)OW, c->act, c->slope);   /* then rounded, the row in cache */
        if (c->half) cf__narrow_run((cf_bf16 *)(void *)yp + (size_t)oh * OW, yr, (size_t)OW);
        else if (c->bf16) cf__round_run(yr, (size_t)OW);
    }
}
static void cf__dws_fwd(const cf__conv_call *c) {
    /* (an activation: applied, then rounded, by passes over the rows in cache) */
    int planes = c->B * c->in.c, halves = c->half || c->x_half || c->dx_half,
        rnd = c->act == CF_ACT_LINEAR ? cf__dwv_rnd(c, c->half) : 0;
    size_t iv = cf__positions(c->in), ov = cf__positions(c->out);
    CF__OMP(omp parallel num_threads(cf__nthreads()))
    {
        float *buf = halves ? c->ws + (size_t)c->in.w * cf__thread_id() : NULL;   /* 16 bits: a row made here */
        int pl;
        CF__OMP(omp for schedule(static))
        for (pl = 0; pl < planes; pl++) {   /* plane pl: sample pl / C, channel pl % C */
            int ch = pl % c->in.c;
            cf__dws_fwd_plane(cf__elt(c->y, c->half, (size_t)pl * ov), buf, cf__elt(c->x, c->x_half, (size_t)pl * iv),
                              c->w + (size_t)ch * 9, c->b ? c->b[ch] : 0.0f, rnd, c);
        }
    }
}
/* dw of a plane: dw[kh][kw] += the sum over output rows oh and columns t of dy[oh][t] times
   x[2 oh - 1 + kh][2 t - 1 + kw], in 9 vector sums (the lanes past the output row: 0, x too) */
CF__DWV_TARGET CF__INLINE void cf__dws_dw(float *dwc, const float *xc, int xh, const float *dyc, int dyh,
                                          const cf__conv_call *c) {
    int W = c->in.w, H = c->in.h, OW = c->out.w, OH = c->out.h, oh, t0;
    __m512 s00 = _mm512_setzero_ps(), s01 = s00, s02 = s00, s10 = s00, s11 = s00, s12 = s00, s20 = s00, s21 = s00,
           s22 = s00;
    for (oh = 0; oh < OH; oh++) {
        const float *dyr = cf__elt(dyc, dyh, (size_t)oh * OW), *r0 = NULL, *r1 = NULL, *r2 = NULL;
        __m512 p0 = _mm512_setzero_ps(), p1 = p0, p2 = p0;   /* each row's odd columns of the block before */
        long ih = 2L * oh - 1;
        if (ih >= 0) r0 = cf__elt(xc, xh, (size_t)ih * W);
        if (ih + 1 < H) r1 = cf__elt(xc, xh, (size_t)(ih + 1) * W);
        if (ih + 2 < H) r2 = cf__elt(xc, xh, (size_t)(ih + 2) * W);
        if (ih + 4 < H)   /* the two rows the next output row reads first, fetched ahead */
            cf__prefetch_floats(cf__elt(xc, xh, (size_t)(ih + 3) * W), (size_t)(xh ? W : 2 * W), 0);
        for (t0 = 0; t0 < OW; t0 += 16) {
            __mmask16 mo = cf__lanes(OW - t0);
            __m512 e = cf__dwv_load(dyr, t0, mo, dyh), ev, od;
#define CF__DWS_ROW(kh)                                                                                               \
            if (r##kh) {                                                                                              \
                cf__dws_split(&ev, &od, r##kh, 2L * t0, W, xh);                                                       \
                s##kh##0 = _mm512_fmadd_ps(e, _mm512_maskz_mov_ps(mo, cf__dws_later(od, p##kh)), s##kh##0);           \
                s##kh##1 = _mm512_fmadd_ps(e, _mm512_maskz_mov_ps(mo, ev), s##kh##1);                                 \
                s##kh##2 = _mm512_fmadd_ps(e, _mm512_maskz_mov_ps(mo, od), s##kh##2);                                 \
                p##kh = od;                                                                                           \
            }
            CF__DWS_ROW(0) CF__DWS_ROW(1) CF__DWS_ROW(2)
#undef CF__DWS_ROW
        }
    }
    dwc[0] += cf__dwv_sum(s00); dwc[1] += cf__dwv_sum(s01); dwc[2] += cf__dwv_sum(s02);
    dwc[3] += cf__dwv_sum(s10); dwc[4] += cf__dwv_sum(s11); dwc[5] += cf__dwv_sum(s12);
    dwc[6] += cf__dwv_sum(s20); dwc[7] += cf__dwv_sum(s21); dwc[8] += cf__dwv_sum(s22);
}
/* dx row ih of a plane into xr (in.w values, stored as rnd says): dx's value (0 when stored),
   then the products of the output rows that read the row, in the reference's order */
CF__DWV_TARGET CF__INLINE void cf__dws_dx_row(float *xr, const float *dyc, int dyh, const float *wc, int ih,
                                              int store, int rnd, const cf__conv_call *c) {
    const __m512i lo = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0),
        hi = _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8);
    int W = c->in.w, OW = c->out.w, OH = c->out.h, n = 0, k, t0, oh[2], kh[2];
    const float *dyr[2];
    __m512 w0[2], w1[2], w2[2];
    if (ih % 2 && (ih - 1) / 2 < OH) { oh[n] = (ih - 1) / 2; kh[n++] = 2; }
    if (ih % 2 && (ih + 1) / 2 < OH) { oh[n] = (ih + 1) / 2; kh[n++] = 0; }
    if (ih % 2 == 0 && ih / 2 < OH) { oh[n] = ih / 2; kh[n++] = 1; }
    for (k = 0; k < n; k++) {
        dyr[k] = cf__elt(dyc, dyh, (size_t)oh[k] * OW);
        w0[k] = _mm512_set1_ps(wc[kh[k] * 3]); w1[k] = _mm512_set1_ps(wc[kh[k] * 3 + 1]);
        w2[k] = _mm512_set1_ps(wc[kh[k] * 3 + 2]);
    }
    for (t0 = 0; 2 * t0 < W; t0 += 16) {
        __m512 ev = _mm512_setzero_ps(), od = ev;   /* dx's even and odd columns from 2 t0 */
        if (!store) cf__dws_split(&ev, &od, xr, 2L * t0, W, 0);
        for (k = 0; k < n; k++) {
            __m512 d = cf__dwv_load(dyr[k], t0, cf__dwv_in(t0, OW), dyh),
                   dn = cf__dwv_load(dyr[k], t0 + 1, cf__dwv_in(t0 + 1, OW), dyh);
            ev += w1[k] * d;
            od += w0[k] * dn;
            od += w2[k] * d;
        }
        cf__dwv_store(xr, (size_t)2 * t0, cf__dwv_in(2L * t0, W), _mm512_permutex2var_ps(ev, lo, od), rnd);
        cf__dwv_store(xr, (size_t)2 * t0 + 16, cf__dwv_in(2L * t0 + 16, W), _mm512_permutex2var_ps(ev, hi, od), rnd);
    }
}
/* a plane's dw and dx; buf: a row of the thread's (a 16-bit dx is made there) */
CF__DWV_TARGET static void cf__dws_bwd_plane(float *dwc, float *dxc, float *buf, const float *xc, const float *dyc,
                                             const float *wc, const cf__conv_call *c) {
    int ih, W = c->in.w, store = c->dx_store || c->dx_half, rnd = cf__dwv_rnd(c, c->dx_half);
    /* (each form its own copy: the loads' form known where they are compiled) */
    if (c->x_half && c->half) cf__dws_dw(dwc, xc, 1, dyc, 1, c);
    else if (c->x_half) cf__dws_dw(dwc, xc, 1, dyc, 0, c);
    else if (c->half) cf__dws_dw(dwc, xc, 0, dyc, 1, c);
    else cf__dws_dw(dwc, xc, 0, dyc, 0, c);
    if (!dxc) return;
    for (ih = 0; ih < c->in.h; ih++) {
        float *xr = rnd == 2 ? cf__elt(dxc, 1, (size_t)ih * W) : c->dx_half ? buf : dxc + (size_t)ih * W;
        if (c->half) cf__dws_dx_row(xr, dyc, 1, wc, ih, store, rnd, c);
        else cf__dws_dx_row(xr, dyc, 0, wc, ih, store, rnd, c);
        if (rnd) continue;
        if (c->dx_half) cf__narrow_run((cf_bf16 *)(void *)dxc + (size_t)ih * W, xr, (size_t)W);
        else if (c->bf16) cf__round_run(xr, (size_t)W);   /* rounded, the row in cache */
    }
}
static void cf__dws_bwd(const cf__conv_call *c) { cf__dw_planes_bwd(c, (size_t)c->in.w, cf__dws_bwd_plane); }
#endif /* CF__AVX512 */

/* ---- max pooling with disjoint 2x2 windows on height and width and 1 or 2 on depth (k = s,
   dilation 1, inside the input): CosmoFlow's 2x2x2 pools and 2-D 2x2 ones.  Each output row
   reads its window as pairs from 2 or 4 input rows, where the general loops spend more on
   counting taps than on the comparisons.  The same comparisons in the same order: the same
   first maximum. */
static int cf__pool_pairs_applies(const cf__pool_call *c) {
    const cf_geom *g = c->g;
    int a;
    if (!c->is_max || !cf__pool_inside_applies(c)) return 0;
    for (a = 0; a < 3; a++) if (g->dil[a] != 1 || g->k[a] != g->s[a]) return 0;
    return g->k[1] == 2 && g->k[2] == 2 && (g->k[0] == 1 || g->k[0] == 2);
}
/* the input rows of output row (od, oh) of one plane (half: stored in 16 bits): rows[kd*2 + kh], KD*2 of them */
static int cf__pool_rows(const float **rows, const float *xp, int half, int od, int oh, int KD, cf_shape in) {
    int kd, kh;
    for (kd = 0; kd < KD; kd++) for (kh = 0; kh < 2; kh++)
        rows[kd * 2 + kh] = cf__elt(xp, half, ((size_t)(od * KD + kd) * in.h + (size_t)(oh * 2 + kh)) * in.w);
    return KD * 2;
}
/* The input rows of output row oh + 1 (two rows down), when it is in this slice, fetched ahead
   for writing (rw 1) or reading: the pools' passes over memory ran at about a fifth of its
   bandwidth on the 2-core AMD EPYC machine of docs/performance.md without it (cosmoflow.cfg's
   first fused pool backward 55-83 -> 17-22 ms, its forward 15.5 -> 11.5 ms). */
static void cf__pool_rows_ahead(const float *const *rows, int half, int nr, int oh, cf_shape in, cf_shape out, int rw) {
    int q;
    if (oh + 1 >= out.h) return;
    for (q = 0; q < nr; q++)
        cf__prefetch_floats(cf__elt(rows[q], half, (size_t)2 * in.w), half ? (size_t)(in.w + 1) / 2 : (size_t)in.w, rw);
}
static void cf__pool_pairs_fwd(const cf__pool_call *c) {
    cf_shape in = c->in, out = c->out;
    int plane;
    CF__OMP(omp parallel for schedule(static))
    for (plane = 0; plane < c->B * in.c; plane++) {
        const float *xp = c->x + (size_t)plane * in.d * in.h * in.w, *rows[4];
        float *yp = c->y + (size_t)plane * cf__positions(out);
        int od, oh, ow, q, nr;
        for (od = 0; od < out.d; od++) for (oh = 0; oh < out.h; oh++) {
            float *yr = yp + ((size_t)od * out.h + oh) * out.w;
            nr = cf__pool_rows(rows, xp, 0, od, oh, c->g->k[0], in);
            cf__pool_rows_ahead(rows, 0, nr, oh, in, out, 0);
            for (ow = 0; ow < out.w; ow++) {
                float best = -INFINITY;
                for (q = 0; q < nr; q++) {
                    float a = rows[q][2 * ow], b = rows[q][2 * ow + 1];
                    best = a > best ? a : best;
                    best = b > best ? b : best;
                }
                yr[ow] = best;
            }
        }
    }
}
#ifdef CF__BF16
/* The same on an input stored in 16 bits (section 9, halves), 16 outputs at a time: in each
   of the rows, 32 inputs (16 windows' pairs) are one load, the pair's first the low half of a
   word, its second the high; the comparisons in the scalar loop's order, NaN never chosen.
   The output in fp32 or (y_half) in 16 bits: a maximum of bf16 values is one of them. */
static int cf__pool_pairs_half_applies(const cf__pool_call *c) {
    return c->half && cf__has_bf16() && cf__pool_pairs_applies(c);
}
/* one plane (the threads' loop outside: Clang outlines a parallel loop's body into a function
   without the target attribute, where AVX-512 values do not compile) */
CF__BF16_TARGET static void cf__pool_pairs_half_plane(const cf__pool_call *c, int plane) {
    cf_shape in = c->in, out = c->out;
    const float *xp = cf__elt(c->x, 1, (size_t)plane * in.d * in.h * in.w), *rows[4];
    int od, oh, ow, q, nr;
    for (od = 0; od < out.d; od++) for (oh = 0; oh < out.h; oh++) {
        float *yr = cf__elt(c->y, c->y_half,
                            (size_t)plane * cf__positions(out) + ((size_t)od * out.h + oh) * out.w);
        nr = cf__pool_rows(rows, xp, 1, od, oh, c->g->k[0], in);
        cf__pool_rows_ahead(rows, 1, nr, oh, in, out, 0);
        for (ow = 0; ow < out.w; ow += 16) {
            __m512 best = _mm512_set1_ps(-INFINITY);
            for (q = 0; q < nr; q++) {
                __m512i v = cf__pairs16_half((const cf_bf16 *)(const void *)rows[q] + 2 * ow, 2 * (out.w - ow));
                __m512 a = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16)),
                    b = _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32((int)0xffff0000u)));
                /* best = a > best ? a : best */
                best = _mm512_mask_mov_ps(best, _mm512_cmp_ps_mask(a, best, _CMP_GT_OQ), a);
                best = _mm512_mask_mov_ps(best, _mm512_cmp_ps_mask(b, best, _CMP_GT_OQ), b);
            }
            if (c->y_half) cf__store_half((cf_bf16 *)(void *)yr + ow, cf__lanes(out.w - ow), best);
            else _mm512_mask_storeu_ps(yr + ow, cf__lanes(out.w - ow), best);
        }
    }
}
static void cf__pool_pairs_half_fwd(const cf__pool_call *c) {
    int plane;
    CF__OMP(omp parallel for schedule(static))
    for (plane = 0; plane < c->B * c->in.c; plane++) cf__pool_pairs_half_plane(c, plane);
}
#endif
#endif /* !CF_REFERENCE */
/* ---- the transposed convolution: section 3's loops with another GEMM (the bf16 GEMM where a
   convolution's bf16 GEMM path would be picked: kind bf16 on, and cf__bf16_gemm_applies), its
   dx stored (store: beta 0) and, by the bf16 GEMM that rounds as it stores, rounded.  x and
   dx may be stored in 16 bits (x_half, dx_half; section 9, halves): then the bf16 GEMM packs x
   from 16 bits and stores dx in 16 bits, rounded (a sum of one chunk: out.c k^3 <= 2
   CF__GEMM_KC), its buffers in gws (the workspace's second half), the same sums. */
static void cf__gemm_halves(const cf__gemm_call *gemm, float *gws) {
#ifdef CF__BF16
    int rc = cf__sgemm_bf16_r(gemm, gws);
    CF_ASSERT(rc == 0);   /* (gws has the room: the plan checked, cf__deconv_takes_halves) */
    (void)rc;
#else
    (void)gemm; (void)gws;
    CF_ASSERT(!"16-bit operands without the bf16 GEMM");
#endif
}
/* ---- y and dy stored in 16 bits (2-D; section 9, halves), the sums those of fp32 storage, made
   in a band of H output rows in fp32 after the GEMM's buffers in the workspace's second half.
   The forward's tiles go down the input's rows, each adding into the output rows [first,
   first + H) (first: where its first input row's taps begin), so the rows above a tile's first
   are complete: rounded and stored in 16 bits as the band moves down.  The backward widens
   the dy rows a tile's im2col reads into the band (zeros in the padding).  The band stands
   for output rows [lo, lo + H): col2im and im2col see an output H rows tall, padded pb + lo
   above. */
/* H: the most output rows one tile's taps reach */
static int cf__band_rows(cf_shape in, const cf_geom *g, size_t tile) {
    size_t rows = (tile + in.w - 2) / in.w + 1;   /* input rows a run of tile positions touches, at most */
    if (rows > (size_t)in.h) rows = (size_t)in.h;
    return (int)(rows - 1) * g->s[1] + (g->k[1] - 1) * g->dil[1] + 1;
}
static int cf__band_first(cf_shape in, const cf_geom *g, size_t p0) { return (int)(p0 / in.w) * g->s[1] - g->pb[1]; }
/* output rows [r0, r1) of the band (at lo) rounded into y16's, rows past OH left */
static void cf__band_store(cf_bf16 *y16, float *band, int C, int H, int W, int OH, int lo, int r0, int r1) {
    int c;
    if (r1 > OH) r1 = OH;
    if (r0 >= r1) return;
    CF__OMP(omp parallel for schedule(static))
    for (c = 0; c < C; c++)
        cf__narrow_run(y16 + ((size_t)c * OH + r0) * W, band + ((size_t)c * H + (r0 - lo)) * W, (size_t)(r1 - r0) * W);
}
/* output rows [r0, r1) that no tap reaches (a stride longer than the kernel, output padding):
   the bias, rounded, as fp32 storage has them */
static void cf__band_bias_rows(cf_bf16 *y16, const float *b, int C, int W, int OH, int r0, int r1) {
    int c;
    if (r1 > OH) r1 = OH;
    for (c = 0; c < C && r0 < r1; c++) {
        size_t k;
        cf_bf16 v = cf_bf16_from_f32(b ? b[c] : 0.0f);
        for (k = (size_t)r0 * W; k < (size_t)r1 * W; k++) y16[(size_t)c * OH * W + k] = v;
    }
}
/* the band moved from lo down to lo + m: its first m rows stored (past H: rows no tap reached),
   the rest moved up, the new rows the bias */
static void cf__band_move(cf_bf16 *y16, float *band, const float *b, int C, int H, int W, int OH, int lo, int m) {
    int c;
    cf__band_store(y16, band, C, H, W, OH, lo, lo, lo + (m < H ? m : H));
    if (m > H) cf__band_bias_rows(y16, b, C, W, OH, lo + H, lo + m);
    if (m > H) m = H;
    CF__OMP(omp parallel for schedule(static))
    for (c = 0; c < C; c++) {
        float *bc = band + (size_t)c * H * W;
        size_t k;
        memmove(bc, bc + (size_t)m * W, sizeof(float) * (H - m) * W);
        for (k = (size_t)(H - m) * W; k < (size_t)H * W; k++) bc[k] = b ? b[c] : 0.0f;
    }
}
/* dy16's rows [lo, lo + H) widened into the band, rows outside the output zero */
static void cf__band_widen(float *band, const cf_bf16 *dy16, int C, int H, int W, int OH, int lo) {
    int c;
    CF__OMP(omp parallel for schedule(static))
    for (c = 0; c < C; c++) {
        int r;
        for (r = 0; r < H; r++) {
            float *d = band + ((size_t)c * H + r) * W;
            if (lo + r < 0 || lo + r >= OH) memset(d, 0, sizeof(float) * W);
            else cf__widen_run(d, dy16 + ((size_t)c * OH + lo + r) * W, (size_t)W);
        }
    }
}
/* c: the transposed convolution (cf__deconv_make), its y stored in 16 bits when c->half (a
   band, above), x when c->x_half; col: its workspace */
static void cf__deconv_forward_with(const cf__conv_call *c, cf__gemm_fn gemm) {
    float *y = c->y, *col = c->ws;
    const float *x = c->x, *w = c->w, *b = c->b;
    int y_half = c->half, x_half = c->x_half, B = c->B;
    cf_shape in = c->in, out = c->out;
    const cf_geom *g = c->g;
    size_t ws_floats = c->ws_floats;
    int K = out.c * g->k[0] * g->k[1] * g->k[2], bi, oc, H = 0, lo = 0;
    size_t P = (size_t)in.d * in.h * in.w, Q = (size_t)out.d * out.h * out.w, tile = cf__tile((size_t)K, P, ws_floats),
        p0, q;
    float *band = col + ws_floats + cf__pointwise_ws_floats();
    cf_shape bs = out;
    cf_geom bg = *g;
    if (y_half) H = bs.h = cf__band_rows(in, g, tile);
    for (bi = 0; bi < B; bi++) {
        const float *xb = cf__elt(x, x_half, (size_t)bi * in.c * P);
        float *yb = cf__elt(y, y_half, (size_t)bi * out.c * Q), *to = y_half ? band : yb;
        if (y_half) { lo = 0; cf__band_move(NULL, band, b, out.c, H, out.w, 0, 0, H); }   /* (rows of bias) */
        else for (oc = 0; oc < out.c; oc++) for (q = 0; q < Q; q++) yb[(size_t)oc * Q + q] = b ? b[oc] : 0.0f;
        for (p0 = 0; p0 < P; p0 += tile) {
            size_t n = P - p0 < tile ? P - p0 : tile;
            int first = cf__band_first(in, g, p0);
            if (y_half && first > lo) {
                cf__band_move((cf_bf16 *)(void *)yb, band, b, out.c, H, out.w, out.h, lo, first - lo);
                lo = first;
            }
            bg.pb[1] = g->pb[1] + lo;
            if (x_half) {
                cf__gemm_call colg = {1, 0, K, (int)n, in.c, w, K, cf__elt(xb, 1, p0), (int)P, 0.0f, col, (int)n,
                                      0, NULL, CF__GEMM_HALF_B, NULL};
                cf__gemm_halves(&colg, col + ws_floats);
            } else gemm(1, 0, K, (int)n, in.c, w, K, xb + p0, (int)P, 0.0f, col, (int)n);
            cf__col2im(to, col, out.c, bs, in, &bg, p0, n);
        }
        if (y_half) {
            cf__band_store((cf_bf16 *)(void *)yb, band, out.c, H, out.w, out.h, lo, lo, lo + H);
            cf__band_bias_rows((cf_bf16 *)(void *)yb, b, out.c, out.w, out.h, lo + H, out.h);
        }
    }
}
/* (c->half: dy stored in 16 bits, read through a band, above; dx stored, not added, when
   c->dx_store; db: the bias's gradient, or NULL) */
static void cf__deconv_backward_with(const cf__conv_call *c, float *db, cf__gemm_fn gemm, cf__gemm_fn gemm_dx) {
    float *dx = c->dx, *dw = c->dw, *col = c->ws;
    const float *dy = c->dy, *x = c->x, *w = c->w;
    int dx_half = c->dx_half, dy_half = c->half, x_half = c->x_half, B = c->B, store = c->dx_store;
    cf_shape in = c->in, out = c->out;
    const cf_geom *g = c->g;
    size_t ws_floats = c->ws_floats;
    int K = out.c * g->k[0] * g->k[1] * g->k[2], bi, oc;
    size_t P = (size_t)in.d * in.h * in.w, Q = (size_t)out.d * out.h * out.w, tile = cf__tile((size_t)K, P, ws_floats),
        p0, q;
    float *band = col + ws_floats + cf__pointwise_ws_floats();
    cf_shape bs = out;
    cf_geom bg = *g;
    if (dy_half) bs.h = cf__band_rows(in, g, tile);
    for (bi = 0; bi < B; bi++) {
        const float *xb = cf__elt(x, x_half, (size_t)bi * in.c * P),
            *dyb = cf__elt(dy, dy_half, (size_t)bi * out.c * Q);
        for (oc = 0; oc < out.c && db; oc++) {   /* (in this order in both storages) */
            double s = 0.0;
            for (q = 0; q < Q; q++)
                s += dy_half ? cf_f32_from_bf16(((const cf_bf16 *)(const void *)dyb)[(size_t)oc * Q + q])
                        : dyb[(size_t)oc * Q + q];
            db[oc] += (float)s;
        }
        for (p0 = 0; p0 < P; p0 += tile) {
            size_t n = P - p0 < tile ? P - p0 : tile;
            if (dy_half) {
                bg.pb[1] = g->pb[1] + cf__band_first(in, g, p0);
                cf__band_widen(band, (const cf_bf16 *)(const void *)dyb, out.c, bs.h, out.w, out.h,
                               cf__band_first(in, g, p0));
                cf__im2col(col, band, out.c, bs, in, &bg, p0, n);
            } else cf__im2col(col, dyb, out.c, out, in, g, p0, n);
            if (x_half) {
                cf__gemm_call dwg = {0, 1, in.c, K, (int)n, cf__elt(xb, 1, p0), (int)P, col, (int)n, 1.0f, dw, K,
                                     0, NULL, CF__GEMM_HALF_A, NULL};
                cf__gemm_halves(&dwg, col + ws_floats);
            } else gemm(0, 1, in.c, K, (int)n, xb + p0, (int)P, col, (int)n, 1.0f, dw, K);
            if (dx && dx_half) {   /* (stored: its only writer) */
                cf__gemm_call dxg = {0, 0, in.c, (int)n, K, w, K, col, (int)n, 0.0f,
                                     cf__elt(dx, 1, (size_t)bi * in.c * P + p0), (int)P, 1, NULL, CF__GEMM_HALF_C,
                                     NULL};
                cf__gemm_halves(&dxg, col + ws_floats);
            } else if (dx)
                gemm_dx(0, 0, in.c, (int)n, K, w, K, col, (int)n, store ? 0.0f : 1.0f, dx + (size_t)bi * in.c * P + p0,
                        (int)P);
        }
    }
}
#ifndef CF_REFERENCE
/* ---- the fused backward of act + max pool with disjoint windows inside the input (k = s,
   no padding, dilation 1), in place: xg holds the pool's input x = act(z) (B, C, D, H, W) on
   entry and dL/dz on return.  Each window's first maximum gets act's gradient of dy[o] at
   y[o] (equal to x there: what cf_act_backward would compute), the rest of the window and
   inputs no window covers get 0.  dy, y (B, C, OD, OH, OW).  The memory plan decides where
   it is used (section 9, fusion). */
#ifdef CF__AVX512
/* The pairs windows of n <= 16 outputs from ow0 at once, as the loop below does them one at a
   time: in each of the nr rows, the output's two inputs; the first input in that order equal
   to its maximum m[i] gets d[i], every other input 0.  The 32 inputs of a row are two vectors,
   lane 2i + j the pair's j of output i; m and d are spread to match (cf__pool_spread), and
   cf__pool_first tells, vector by vector, which lanes get d. */
typedef struct { __m512 m2[2], d2[2]; __mmask16 valid[2], found[2]; } cf__pool_win16;
__attribute__((target("avx512f"))) static inline cf__pool_win16 cf__pool_spread(int n, const float *m, const float *d) {
    const __m512i lo = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0),
        hi = _mm512_add_epi32(lo, _mm512_set1_epi32(8));
    __m512 mv = _mm512_maskz_loadu_ps(cf__lanes(n), m), dv = _mm512_maskz_loadu_ps(cf__lanes(n), d);
    cf__pool_win16 w;
    w.m2[0] = _mm512_permutexvar_ps(lo, mv); w.m2[1] = _mm512_permutexvar_ps(hi, mv);
    w.d2[0] = _mm512_permutexvar_ps(lo, dv); w.d2[1] = _mm512_permutexvar_ps(hi, dv);
    w.valid[0] = cf__lanes(2 * n); w.valid[1] = cf__lanes(2 * n - 16);
    w.found[0] = w.found[1] = 0;
    return w;
}
/* the lanes of e, vector h of a row, that get d: equal to their maximum, the first of a pair
   when both are, in an output that has no input yet */
__attribute__((target("avx512f"))) static inline __mmask16 cf__pool_first(cf__pool_win16 *w, int h, __m512 e) {
    __mmask16 eq = (__mmask16)(_mm512_mask_cmp_ps_mask(w->valid[h], e, w->m2[h], _CMP_EQ_OQ) & ~w->found[h]);
    eq = (__mmask16)(eq & ~((eq & 0x5555u) << 1));   /* of a pair both equal: the first */
    /* the output has its input */
    w->found[h] = (__mmask16)(w->found[h] | eq | ((eq & 0x5555u) << 1) | ((eq & 0xaaaau) >> 1));
    return eq;
}
__attribute__((target("avx512f"))) static void cf__pool_pairs_write16(const float **rows, int nr, int ow0, int n,
                                                                      const float *m, const float *d) {
    cf__pool_win16 w = cf__pool_spread(n, m, d);
    int q, h;
    for (q = 0; q < nr; q++)
        for (h = 0; h < 2; h++) {
            float *e = (float *)rows[q] + 2 * ow0 + 16 * h;
            __mmask16 eq = cf__pool_first(&w, h, _mm512_maskz_loadu_ps(w.valid[h], e));
            _mm512_mask_storeu_ps(e, w.valid[h], _mm512_maskz_mov_ps(eq, w.d2[h]));
        }
}
#ifdef CF__BF16
/* the same on rows stored in 16 bits (section 9, halves); d holds bf16 values */
CF__BF16_TARGET static void cf__pool_pairs_write16_half(cf_bf16 *const *rows, int nr, int ow0, int n, const float *m,
                                                        const float *d) {
    cf__pool_win16 w = cf__pool_spread(n, m, d);
    int q, h;
    for (q = 0; q < nr; q++)
        for (h = 0; h < 2; h++) {
            cf_bf16 *e = rows[q] + 2 * ow0 + 16 * h;
            __mmask16 eq = cf__pool_first(&w, h, cf__load_half(e, w.valid[h]));
            cf__store_half(e, w.valid[h], _mm512_maskz_mov_ps(eq, w.d2[h]));
        }
}
#endif
#endif
#define CF__POOL_RUN 256   /* outputs whose m and d are made at once (each loop the compiler vectorizes) */
#ifdef CF__AVX512
/* output row (od, oh) of a plane whose windows are pairs in nr rows (rows point into xg): a
   run of the row's outputs, their maxima m and gradients d, then the windows 16 at a time */
static void cf__pool_fused_row16(const cf__pool_fused_call *f, const float **rows, int nr, const float *yp,
                                 const float *dyp, int od, int oh) {
    size_t o0 = ((size_t)od * f->out.h + oh) * f->out.w;
    int run, ow;
    cf__pool_rows_ahead(rows, f->half, nr, oh, f->in, f->out, 1);
    for (run = 0; run < f->out.w; run += CF__POOL_RUN) {
        float d[CF__POOL_RUN], m[CF__POOL_RUN];
        int nrun = f->out.w - run < CF__POOL_RUN ? f->out.w - run : CF__POOL_RUN;
        if (f->y_half) cf__widen_run(m, (const cf_bf16 *)(const void *)yp + o0 + run, (size_t)nrun);
        else memcpy(m, yp + o0 + run, sizeof(float) * nrun);
        if (f->dy_half) cf__widen_run(d, (const cf_bf16 *)(const void *)dyp + o0 + run, (size_t)nrun);
        else memcpy(d, dyp + o0 + run, sizeof(float) * nrun);
        cf__act_backward_run(d, m, (size_t)nrun, f->act, f->slope);
        if (f->bf16) cf__round_run(d, (size_t)nrun);
        for (ow = 0; ow < nrun; ow += 16) {
            int n = nrun - ow < 16 ? nrun - ow : 16;
#ifdef CF__BF16
            if (f->half) {
                cf_bf16 *r16[4];
                int i;
                for (i = 0; i < nr; i++) r16[i] = (cf_bf16 *)(void *)rows[i];
                cf__pool_pairs_write16_half(r16, nr, run + ow, n, m + ow, d + ow);
                continue;
            }
#endif
            cf__pool_pairs_write16(rows, nr, run + ow, n, m + ow, d + ow);
        }
    }
}
#endif
/* output row (od, oh) of plane xp one output at a time: the window's first maximum gets d,
   the rest 0 (pairs: the window as pairs from nr rows, rows point into xg, ours to write) */
static void cf__pool_fused_row(const cf__pool_fused_call *f, float *xp, const float **rows, int nr, const float *yp,
                               const float *dyp, int od, int oh, int pairs) {
    cf_shape in = f->in, out = f->out;
    int KD = f->g->k[0], KH = f->g->k[1], KW = f->g->k[2], ow, kd, kh, kw;
    for (ow = 0; ow < out.w; ow++) {
        size_t o = ((size_t)od * out.h + oh) * out.w + ow, at = (size_t)-1;
        float m = yp[o], d = cf__act_df(dyp[o], m, f->act, f->slope);
        if (f->bf16) d = cf_f32_from_bf16(cf_bf16_from_f32(d));   /* stored rounded: dL/dz of a bf16 network's conv */
        if (pairs) {
            int q, j, found = 0;
            for (q = 0; q < nr; q++) for (j = 0; j < 2; j++) {
                float *e = (float *)rows[q] + 2 * ow + j;
                if (!found && *e == m) { *e = d; found = 1; }
                else *e = 0.0f;
            }
            continue;
        }
        for (kd = 0; kd < KD; kd++) for (kh = 0; kh < KH; kh++) {
            float *r = xp + ((size_t)(od * KD + kd) * in.h + (size_t)(oh * KH + kh)) * in.w + (size_t)ow * KW;
            for (kw = 0; kw < KW; kw++) {
                if (at == (size_t)-1 && r[kw] == m) at = (size_t)(r + kw - xp);
                r[kw] = 0.0f;
            }
        }
        if (at != (size_t)-1) xp[at] = d;
    }
}
/* inputs past the last whole window (odd sizes) get no gradient */
static void cf__pool_fused_past(const cf__pool_fused_call *f, float *xp) {
    cf_shape in = f->in, out = f->out;
    int KD = f->g->k[0], KH = f->g->k[1], KW = f->g->k[2], id, ih, iw;
    if (out.d * KD < in.d || out.h * KH < in.h || out.w * KW < in.w)
        for (id = 0; id < in.d; id++)
            for (ih = 0; ih < in.h; ih++)
                for (iw = 0; iw < in.w; iw++)
                    if (id >= out.d * KD || ih >= out.h * KH || iw >= out.w * KW)
                        xp[((size_t)id * in.h + ih) * in.w + iw] = 0.0f;
}
/* one plane (sample and channel) of xg, row by row */
static void cf__pool_fused_plane(const cf__pool_fused_call *f, int plane, int pairs) {
    float *xp = cf__elt(f->xg, f->half, (size_t)plane * f->in.d * f->in.h * f->in.w);
    const float *yp = cf__elt(f->y, f->y_half, (size_t)plane * cf__positions(f->out));
    const float *dyp = cf__elt(f->dy, f->dy_half, (size_t)plane * cf__positions(f->out));
    int od, oh;
    for (od = 0; od < f->out.d; od++) for (oh = 0; oh < f->out.h; oh++) {
        const float *rows[4];
        int nr = pairs ? cf__pool_rows(rows, xp, f->half, od, oh, f->g->k[0], f->in) : 0;
#ifdef CF__AVX512
        if (pairs && cf__has_avx512()) { cf__pool_fused_row16(f, rows, nr, yp, dyp, od, oh); continue; }
#endif
        cf__pool_fused_row(f, xp, rows, nr, yp, dyp, od, oh, pairs);
    }
    cf__pool_fused_past(f, xp);
}
static void cf__pool_fused_backward_run(const cf__pool_fused_call *f) {
    cf__pool_call pc = cf__pool_make(f->B, f->in, f->out, f->g, 1);
    int plane, pairs = cf__pool_pairs_applies(&pc);
    CF_ASSERT(!(f->half || f->dy_half || f->y_half) || cf__maxpool_inplace_takes_half(&pc));
    CF__OMP(omp parallel for schedule(static))
    for (plane = 0; plane < f->B * f->in.c; plane++) cf__pool_fused_plane(f, plane, pairs);
}
#endif

#endif /* CF__IMPLEMENTED */
#endif /* CF_IMPLEMENTATION */

/*
MIT License. Copyright (c) 2026 the cosmoflow.h authors.
Permission is hereby granted, free of charge, to any person obtaining a copy of this software
and associated documentation files (the "Software"), to deal in the Software without
restriction, including without limitation the rights to use, copy, modify, merge, publish,
distribute, sublicense, and/or sell copies of the Software, and to permit persons to whom the
Software is furnished to do so, subject to the following conditions: The above copyright
notice and this permission notice shall be included in all copies or substantial portions of
the Software.  THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND.
*/
