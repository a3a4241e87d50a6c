/* cosmoflow.h - a small, exact 2-D/3-D convolutional network framework in one C header.
   Reproduces CosmoFlow (3-D CNN regression of cosmological parameters) and DeepCAM (2-D
   segmentation of climate snapshots: DeepLabv3+, Tiramisu).  No warranty; MIT licence at the
   end of the file.

   USE
     In exactly one C or C++ file:
         #define CF_IMPLEMENTATION
         #include "cosmoflow.h"
     Everywhere else just #include "cosmoflow.h".

   OPTIONS (define before the implementation include)
     CF_USE_CBLAS   call cblas_sgemm (OpenBLAS); otherwise a naive sgemm is used.
                    The naive sgemm is always compiled as cf_sgemm_naive: it is the test oracle.
                    With OpenMP, large convolutions call it from several threads at once
                    and expect it to run single-threaded inside a parallel region
                    (OpenBLAS's OpenMP build, MKL and BLIS do; a pthreads OpenBLAS gives the
                    same numbers, but may start threads of its own on busy cores).
     CF_USE_MPI     data parallelism through MPI (cf_dist_*); otherwise one process.
     CF_USE_ZLIB    gzip TFRecords (gzopen); without it only plain TFRecords are read.
     CF_NO_DIRECT_CONV   no direct convolution kernels.  They are compiled with GCC or Clang
                    when the target has AVX2 and FMA (-march=x86-64-v3 or native) and run
                    stride-1 convolutions without im2col; cf_conv_set_direct(0) turns them
                    off at run time.
     CF_STATIC      make every function static (private copy per translation unit).
     CF_MALLOC(n), CF_FREE(p)   allocator overrides (define both or neither).
     CF_ASSERT(x)   internal-invariant check (default: assert).

   CONVENTIONS
     * Activations are float32 NCDHW; a 2-D network is the case D = 1.
     * All parameters live in one buffer (net->params), their gradients in a second with the
       same offsets (net->grads), the optimizer state in a third (net->opt, two slots per
       parameter).  Layers hold offsets.  Data parallelism is one allreduce over net->grads.
       Batch-norm running statistics, which are saved but not trained, have their own buffer
       (net->stats).
     * Kernels are plain functions over raw pointers with a shape comment; backward kernels
       ACCUMULATE (+=) into gradients.  cf_net_zero_grad() clears them.
     * Library functions never exit(): they return CF_OK (0) or CF_ERR (-1) and leave a
       message in cf_failure_reason().

   TABLE OF CONTENTS
     1. Basics: errors, allocation, PRNG, CRC32C
     2. Dense linear algebra: sgemm (naive + cblas)
     3. Kernels: convolution (N-d im2col/col2im, tiled; large ones in per-thread tiles
                 with a single-threaded sgemm each), pooling, dense, activations,
                 dropout, losses; batch norm, depthwise and transposed convolution,
                 weighted softmax cross-entropy, IoU
     4. Networks: cfg parser, the memory plan (outputs and gradients in one arena planned
                 over the step's timeline; cheap outputs recomputed in backward instead of
                 kept; conv + max-pool gradients fused in place), forward, backward,
                 initializers
     5. Optimizers: Keras-form momentum SGD, Adam/AdamW, LAMB, LARC; DeepCAM's schedules
     6. Files: .npy, checkpoints, weights directories, TFRecord + tf.train.Example,
               CosmoFlow and DeepCAM samples
     7. Distributed: MPI wrappers (one process without CF_USE_MPI)
*/
#ifndef CF_INCLUDE_COSMOFLOW_H
#define CF_INCLUDE_COSMOFLOW_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define CF_VERSION "0.1.0"

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

/* ---------------------------------------------------------------- 1. basics */
CFDEF const char *cf_failure_reason(void);
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

/* ---------------------------------------------------------------- 2. sgemm */
/* Row-major C = alpha * op(A) * op(B) + beta * C;  op(A) is M x K, op(B) is K x N. */
CFDEF void cf_sgemm(int transA, int transB, int M, int N, int K, float alpha,
                    const float *A, int lda, const float *B, int ldb, float beta,
                    float *C, int ldc);
CFDEF void cf_sgemm_naive(int transA, int transB, int M, int N, int K, float alpha,
                          const float *A, int lda, const float *B, int ldb, float beta,
                          float *C, int ldc);

/* ---------------------------------------------------------------- 3. kernels */
typedef struct { int c, d, h, w; } cf_shape;   /* one sample; d = 1 for 2-D */
CFDEF size_t cf_shape_size(cf_shape s);

/* Geometry of a convolution or pooling window, per axis (0 = depth, 1 = height, 2 = width). */
typedef struct {
    int k[3];        /* kernel size */
    int s[3];        /* stride */
    int dil[3];      /* dilation */
    int pb[3], pa[3];/* zero padding before / after */
} cf_geom;
CFDEF int cf_geom_out(const cf_geom *g, int axis, int in); /* output size along an axis */

enum { CF_ACT_LINEAR, CF_ACT_RELU, CF_ACT_LEAKY, CF_ACT_TANH };

/* x (B, C, D, H, W)  w (OC, C/groups, KD, KH, KW)  b (OC) or NULL  y (B, OC, OD, OH, OW)
   col: workspace of ws_floats floats (the im2col tile; any size >= kernel volume * C/groups) */
CFDEF void cf_conv_forward(float *y, const float *x, const float *w, const float *b,
                           int B, cf_shape in, cf_shape out, const cf_geom *g, int groups,
                           float *col, size_t ws_floats);
/* the same with the activation act (CF_ACT_*, slope for leaky) applied to each tile of the
   output while it is still in cache, instead of a separate pass over the whole output */
CFDEF void cf_conv_forward_act(float *y, const float *x, const float *w, const float *b,
                               int B, cf_shape in, cf_shape out, const cf_geom *g, int groups,
                               float *col, size_t ws_floats, int act, float slope);
/* dy (B, OC, OD, OH, OW); accumulates dx (may be NULL: skipped), dw, db (may be NULL).
   col, dcol: two workspaces of ws_floats floats each.  It is the two halves below, which
   share nothing (cf-bench times them apart): */
CFDEF void cf_conv_backward(float *dx, float *dw, float *db, const float *dy, const float *x,
                            const float *w, int B, cf_shape in, cf_shape out, const cf_geom *g,
                            int groups, float *col, float *dcol, size_t ws_floats);
/* backward-weights: dw += dy x im2col(x)^T, db += sum of dy (db may be NULL) */
CFDEF void cf_conv_backward_weights(float *dw, float *db, const float *dy, const float *x,
                                    int B, cf_shape in, cf_shape out, const cf_geom *g, int groups,
                                    float *col, size_t ws_floats);
/* The direct convolution kernels (stride 1 along the width, no im2col; compiled where the
   target has AVX2 and FMA) are used where they apply unless switched off here: 0 sends
   every convolution through im2col + GEMM (to compare the two; tests do).  Not thread-safe. */
CFDEF void cf_conv_set_direct(int on);
/* backward-data: dx += col2im(w^T x dy) */
CFDEF void cf_conv_backward_data(float *dx, const float *dy, const float *w, int B, cf_shape in,
                                 cf_shape out, const cf_geom *g, int groups, float *dcol, size_t ws_floats);
/* x (B, C, D, H, W) -> y (B, C, OD, OH, OW); max picks the first maximum of a window;
   average divides by the number of in-bounds elements (TensorFlow's rule). */
CFDEF void cf_pool_forward(float *y, const float *x, int B, cf_shape in, cf_shape out,
                           const cf_geom *g, int is_max);
CFDEF void cf_pool_backward(float *dx, const float *dy, const float *x, const float *y, int B,
                            cf_shape in, cf_shape out, const cf_geom *g, int is_max);
/* x (B, IN)  w (OUT, IN)  b (OUT) or NULL  y (B, OUT) */
CFDEF void cf_dense_forward(float *y, const float *x, const float *w, const float *b,
                            int B, int IN, int OUT);
CFDEF void cf_dense_backward(float *dx, float *dw, float *db, const float *dy, const float *x,
                             const float *w, int B, int IN, int OUT);
/* Elementwise activation in place on n values; backward turns dy into dy * f'(.) using the
   OUTPUT y (valid for relu, leaky with slope > 0, tanh). */
CFDEF void cf_act_forward(float *y, size_t n, int act, float slope);
CFDEF void cf_act_backward(float *dy, const float *y, size_t n, int act, float slope);
/* Inverted dropout: y = x * mask / (1 - rate); the mask is a hash of (seed, index), so it is
   recomputed in backward instead of stored. */
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
   sync: NULL (per-rank statistics, the
   DeepCAM reference's default) or a reduction over ranks.
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
/* Depthwise convolution (groups = C = OC): a direct loop over taps, since im2col would copy
   every input value kvol times to feed a GEMM with one row.
   x (B, C, D, H, W)  w (C, 1, KD, KH, KW)  b (C) or NULL  y (B, C, OD, OH, OW) */
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
                             float *col, size_t ws_floats);
CFDEF void cf_deconv_backward(float *dx, float *dw, float *db, const float *dy, const float *x,
                              const float *w, int B, cf_shape in, cf_shape out, const cf_geom *g,
                              float *col, size_t ws_floats);
/* Per-pixel weighted softmax cross-entropy averaged over all B*P pixels: the DeepCAM
   reference's torch.mean of the weighted per-pixel losses (not divided by the sum of the
   weights, unlike PyTorch's reduction='mean').  z (B, K, P) logits; labels (B, P) class ids
   stored as floats; w (K) or NULL for 1.  dz (may be NULL) receives dL/dz.  Returns the loss,
   or NAN when a label is not an integer in [0, K). */
CFDEF double cf_loss_softmax_ce(float *dz, const float *z, const float *labels, const float *w,
                                int B, int K, size_t P);
/* pred[p] = argmax_k z[k, p] (the first maximum).  z (K, P) */
CFDEF void cf_argmax_classes(int *pred, const float *z, int K, size_t P);
/* Mean IoU of ONE sample as MLPerf DeepCAM: the mean over all K classes (background
   included) of tp/(tp+fp+fn), a class absent from both prediction and label counting 1. */
CFDEF double cf_iou_sample(const int *pred, const float *label, size_t n, int K);

/* ---------------------------------------------------------------- 4. networks */
enum {
    CF_L_CONV, CF_L_MAXPOOL, CF_L_AVGPOOL, CF_L_DENSE, CF_L_FLATTEN, CF_L_DROPOUT,
    CF_L_ACT, CF_L_SCALE, CF_L_ROUTE, CF_L_ADD, CF_L_BATCHNORM, CF_L_DECONV, CF_L_GAP,
    CF_L_BROADCAST, CF_L_AFFINE, CF_L_NTYPES
};
enum { CF_INIT_GLOROT_UNIFORM, CF_INIT_KAIMING_UNIFORM, CF_INIT_KAIMING_NORMAL,
       CF_INIT_TORCH, CF_INIT_ZEROS, CF_INIT_CONST };
enum { CF_LOSS_MSE, CF_LOSS_L1, CF_LOSS_SOFTMAX_CE };
#define CF_MAX_CLASSES 16

typedef struct {
    int type;
    int line;                 /* line of its section in the cfg */
    int src[CF_MAX_SRC];      /* input layer indices; -1 = network input */
    int n_src;
    cf_shape in, out;         /* per sample */
    cf_geom g;                /* conv / pool geometry */
    char pad_mode[16];        /* "same", "valid" or explicit (kept for --input-shape) */
    int pad_spec[6];          /* explicit padding, as written */
    int filters, groups, has_bias;
    int act;  float slope;    /* fused activation (conv, dense, act layer) */
    float factor;             /* scale layer */
    float rate;               /* dropout rate */
    int l2;                   /* 1: the optimizer's L2 applies to this layer's kernel */
    int outpad[3];            /* deconv: output padding (extra rows at the end) */
    int like;                 /* broadcast: the layer whose spatial size the output takes */
    float momentum, eps;      /* batchnorm */
    int init, bias_init; float bias_value;
    size_t w_off, w_n, b_off, b_n;  /* into params / grads / opt (b_n = 0: no bias) */
    size_t s_off, s_n;        /* batchnorm: running mean (C) then running var (C), into stats */
    size_t y_off;             /* output, into acts (per batch; cf__plan_memory) */
    size_t dy_off;            /* output gradient, into dacts (the same arena) */
    int last_use;             /* largest index of a layer reading this output */
    int recompute_at;         /* >= 0: this output is not kept after forward; it is recomputed
                                 just before that layer's backward (cf__plan_memory); -1: kept */
    int fwd_end;              /* the output's first life ends at this time (cf__plan_memory) */
    int pool_fused;           /* 1: read only by a max pool with disjoint windows, whose backward
                                 writes this layer's pre-activation gradient over its output
                                 (no dacts buffer; see cf__plan_fusion) */
} cf_layer;

typedef struct cf_net {
    char *cfg_text;           /* the model text, embedded in checkpoints */
    char *cfg_name;
    cf_shape input;
    int n_outputs;            /* per sample */
    int loss;                 /* CF_LOSS_* */
    int n_layers;
    cf_layer *layers;
    size_t n_params;
    float *params, *grads, *opt;     /* same offsets; opt holds 2 * n_params: SGD's velocity,
                                        or Adam's first moments then second moments */
    size_t n_stats;                  /* batchnorm running statistics: not trained, saved */
    float *stats, *bn_save;          /* bn_save: the batch mean and 1/std of the last forward */
    int bn_train;                    /* batchnorm: 1 batch statistics (training), 0 running */
    cf_bn_sync bn_sync;              /* reduce != NULL: synchronized batch norm over ranks */
    int n_targets;                   /* per sample: n_outputs, or H*W class ids (softmax_ce) */
    float class_w[CF_MAX_CLASSES];   /* softmax_ce: per-class weights */
    int batch;                       /* what the arena is planned for */
    size_t n_acts;                   /* arena floats in use for this batch: outputs and gradients */
    size_t cap_acts;                 /* allocated */
    float *acts, *dacts;             /* one arena: dacts == acts; y_off and dy_off index it */
    int keep_acts;                   /* 1: every output stays valid from forward to the next
                                        forward (cf_net_output of any layer, cf_net_forward_from,
                                        cf_net_first_nonfinite_output); no fusion, no
                                        recomputation: more memory.  0 (default): outputs live
                                        only while the step needs them.  Read by forward. */
    int plan_flags;                  /* the fusion/keep settings the current plan was made with */
    size_t ws_floats;                /* per im2col workspace */
    float *ws;                       /* 2 * ws_floats */
    const float *x;                  /* current input (B, C, D, H, W), caller's memory */
    int training;                    /* dropout on */
    uint64_t seed, step;             /* dropout masks hash (seed, step, layer) */
    /* optional: called in backward just before layer i's own backward runs, when
       dacts[i] holds the complete gradient of that layer's output (cf-check uses it) */
    void (*backward_hook)(struct cf_net *net, int layer, void *ctx);
    void *hook_ctx;
    /* optional: called around every layer's work, phase 0/1 before/after its forward, 2/3
       before/after its backward, and 4 inside a convolution's backward, between its
       backward-weights and backward-data (cf-bench times layers with it) */
    void (*layer_hook)(struct cf_net *net, int layer, int phase, void *ctx);
    void *layer_ctx;
    int no_fuse;                     /* 1: never fuse a layer's gradient into its max pool */
    int acts_clobbered;              /* backward has reused the outputs' memory (until forward) */
    int recomputing;                 /* inside a backward-time recomputation of an output */
} cf_net;

/* Parse a cfg text (name used in error messages).  shape_override may be NULL.
   Parameters are allocated and zero; call cf_net_init to draw the initial weights. */
CFDEF int cf_net_parse(cf_net *net, const char *text, const char *name,
                       const cf_shape *shape_override);
CFDEF int cf_net_load_cfg(cf_net *net, const char *path, const cf_shape *shape_override);
CFDEF int cf_parse_shape(const char *s, cf_shape *out);     /* "CxDxHxW" or "CxHxW" */
CFDEF void cf_net_free(cf_net *net);
CFDEF void cf_net_init(cf_net *net, uint64_t seed);
CFDEF int cf_net_set_batch(cf_net *net, int B);             /* (re)allocates activations */
/* Floats of the arena (outputs and output gradients) a batch of B needs, under the default
   plan or with keep_acts = 1.  Allocates nothing; not between a forward and its backward
   (the next forward plans again).  Returns (size_t)-1 when out of memory. */
CFDEF size_t cf_net_arena_floats(cf_net *net, int B, int keep_acts);
/* Synchronized batch norm through reduce (a sum over ranks, e.g. cf_dist_sum_reduce); NULL
   turns it off.  Allocates the reduction buffer. */
CFDEF int cf_net_sync_bn(cf_net *net, void (*reduce)(double *buf, int n, void *ctx), void *ctx);
CFDEF const float *cf_net_forward(cf_net *net, const float *x, int B);  /* returns output */
CFDEF const float *cf_net_forward_from(cf_net *net, int first);       /* after forward() with keep_acts */
/* dout (B, n_outputs): dL/d(output).  Accumulates into grads. */
CFDEF void cf_net_backward(cf_net *net, const float *dout);
CFDEF void cf_net_zero_grad(cf_net *net);
CFDEF float *cf_net_output(cf_net *net, int layer);         /* acts of a layer */
CFDEF const char *cf_layer_type_name(int type);
CFDEF double cf_layer_flops(const cf_layer *l);             /* forward, per sample */
/* Numerics guard: the first layer whose output (after a forward) or whose parameters'
   gradient (after a backward; params = 1: the parameters themselves) holds a NaN or Inf,
   or -1 when all are finite.  Outputs are all checked only when the forward ran with
   keep_acts = 1; otherwise only those still in memory (cf-train re-runs a failed batch so). */
CFDEF int cf_net_first_nonfinite_output(const cf_net *net);
CFDEF int cf_net_first_nonfinite_param(const cf_net *net, int params);
/* Parameter tensors in network order: index -> layer, kind ("weight"/"bias"), offset,
   count and PyTorch shape.  Returns the number of tensors, or -1 when i is out of range. */
typedef struct { int layer; const char *kind; size_t off, n; int ndim; int shape[5]; int stats; } cf_tensor;
/* stats = 1: the tensor lives in net->stats (batchnorm running statistics; no gradient) */
CFDEF int cf_net_tensors(const cf_net *net, cf_tensor *out, int max);
/* One step of loss + backward from a target (B, n_outputs); returns the loss. */
CFDEF double cf_net_loss(cf_net *net, const float *target, float *dout);

/* ---------------------------------------------------------------- 5. optimizer */
/* Keras SGD: v = m*v - lr*(g + 2*l2*w [layers with l2=1]);  w += v */
CFDEF void cf_sgd_step(cf_net *net, float lr, float momentum, float l2);
/* Adam as torch.optim.Adam (decoupled = 0: wd adds wd*w to the gradient) or AdamW
   (decoupled = 1: w *= 1 - lr*wd first).  t: this step's number, counted from 1. */
CFDEF void cf_adam_step(cf_net *net, float lr, float beta1, float beta2, float eps, float wd,
                        int decoupled, uint64_t t);
/* LAMB as NVIDIA apex FusedLAMB (the DeepCAM reference): gradients clipped to a global norm
   of max_grad_norm (0: no clipping), Adam moments with bias correction, update
   u = m^/(sqrt(v^)+eps) + wd*w, then per tensor w -= lr * (|w|/|u|) * u (the trust ratio
   is 1 when a norm is 0 or wd = 0).  Returns the global gradient norm before clipping.
   The gradient buffer is overwritten with the updates u. */
CFDEF double cf_lamb_step(cf_net *net, float lr, float beta1, float beta2, float eps, float wd,
                          float max_grad_norm, uint64_t t);
/* LARC (the 2018 climate code, clip mode): per tensor, g *= min(eta |w| / |g|, 1);
   a tensor with a zero norm is left alone.  Run before the optimizer step. */
CFDEF void cf_larc_scale(cf_net *net, float eta);
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

/* ---------------------------------------------------------------- 6. files */
enum { CF_F32, CF_I16, CF_U8, CF_I64 };
typedef struct {
    int dtype, ndim;
    int64_t shape[CF_MAX_DIMS];
    size_t count;             /* elements */
    void *data;
} cf_array;
CFDEF size_t cf_dtype_size(int dtype);
CFDEF int cf_npy_read(const char *path, cf_array *a);
CFDEF int cf_npy_write(const char *path, const cf_array *a);      /* atomic */
CFDEF void cf_array_free(cf_array *a);
CFDEF int cf_npy_read_f32(const char *path, float **data, size_t *count); /* any float32 */

/* Write to path.tmp.<pid>, flush, fsync, rename; on failure nothing at path changes. */
typedef struct { FILE *f; char *path, *tmp; int failed; } cf_atomic_file;
CFDEF int cf_atomic_open(cf_atomic_file *af, const char *path);
CFDEF int cf_atomic_write(cf_atomic_file *af, const void *p, size_t n);
CFDEF int cf_atomic_commit(cf_atomic_file *af);   /* always closes */
CFDEF void cf_atomic_abort(cf_atomic_file *af);

typedef struct { uint64_t step, epoch, seed; double best; } cf_train_state;
CFDEF int cf_checkpoint_save(const char *path, const cf_net *net, const cf_train_state *st);
/* Loads parameters and optimizer state into an already built net; the checkpoint's model
   must have the same tensors.  st may be NULL. */
CFDEF int cf_checkpoint_load(const char *path, cf_net *net, cf_train_state *st);
/* Reads only the cfg text embedded in a checkpoint (malloc'd; caller frees with CF_FREE). */
CFDEF int cf_checkpoint_cfg(const char *path, char **cfg_text, cf_shape *input);
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
CFDEF void cf_cosmo_free(cf_cosmo_sample *smp);
/* channels-last (S,S,S,C) int16 -> (C,S,S,S) float: log(1 + x), or x / mean(x) when
   apply_log = 0 (the two branches of the reference's _parse_data), or with apply_log = 2
   log(1 + x) - log(1 + mean_c), mean_c the sample's mean of channel c: log counts around 0 */
CFDEF void cf_cosmo_to_input(float *out, const int16_t *x, int S, int C, int apply_log);

/* DeepCAM samples in the numpy layout (NVIDIA's convert_hdf52npy): data-X.npy float32
   (H, W, C) channels-last and label-X.npy float32 (H, W) class ids beside it.  path names the
   data file.  x and y are malloc'd; the labels are checked to be integers in [0, n_classes). */
typedef struct { float *x, *y; int h, w, c; } cf_climate_sample;
CFDEF int cf_climate_read(const char *path, cf_climate_sample *smp, int n_classes);
CFDEF void cf_climate_free(cf_climate_sample *smp);
/* (H, W, C) -> (C, H, W) with the reference's normalization (x - min[c]) / (max[c] - min[c]) */
CFDEF void cf_climate_to_input(float *out, const float *x, int H, int W, int C,
                               const float *minval, const float *maxval);
/* Per-channel minimum and maximum: DIR/stats_minval.npy and DIR/stats_maxval.npy, float32
   (C,) (cf-convert h52npy writes them from the reference's stats.h5, cf-synth climate from
   its samples).  Looks in dir, then in its parent (train/ and validation/ share them). */
CFDEF int cf_climate_stats(const char *dir, float *minval, float *maxval, int C);

/* The references' sharding: a fresh permutation of all n files every epoch, identical on
   every rank (same seed), then files[rank::size].  Writes the rank's indices into out
   (n/size of them when drop_remainder, so every rank takes the same number of steps) and
   returns their count.  shuffle = 0 keeps the order (validation). */
CFDEF int cf_epoch_shard(int *out, int n, uint64_t seed, int epoch, int rank, int size,
                         int shuffle, int drop_remainder);

/* ---------------------------------------------------------------- 7. distributed */
CFDEF int cf_dist_init(int *argc, char ***argv);
CFDEF void cf_dist_finalize(void);
CFDEF int cf_dist_rank(void);
CFDEF int cf_dist_size(void);
CFDEF void cf_dist_allreduce_mean(float *buf, size_t n);   /* in place */
CFDEF void cf_dist_allreduce_sum_d(double *buf, int n);
CFDEF void cf_dist_sum_reduce(double *buf, int n, void *ctx);   /* the same, as a cf_net_sync_bn callback */
CFDEF void cf_dist_bcast(float *buf, size_t n);            /* from rank 0 */
CFDEF void cf_dist_abort(int code);
CFDEF void cf_dist_barrier(void);
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
   Returns 0 at the first step (nothing to apply yet; skip the update), 1 otherwise.
   Zero-initialize the struct; cf_dist_grad_lag_free releases it. */
typedef struct { float *buf[2]; int cur, pending; void *req; } cf_grad_lag;
CFDEF int cf_dist_grad_lag(cf_net *net, cf_grad_lag *lag);
CFDEF void cf_dist_grad_lag_free(cf_grad_lag *lag);

#endif /* CF_INCLUDE_COSMOFLOW_H */

/* ================================================================ implementation */
#ifdef CF_IMPLEMENTATION
#ifndef CF__IMPLEMENTED
#define CF__IMPLEMENTED

#include <stdlib.h>
#include <string.h>
#include <stdarg.h>
#include <math.h>
#include <errno.h>
#include <ctype.h>
#include <sys/stat.h>
#include <unistd.h>
#include <fcntl.h>
#include <dirent.h>

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

/* ================================================================ 1. basics */
static CF__TLS char cf__err[1024];

CFDEF const char *cf_failure_reason(void) { return cf__err[0] ? cf__err : "no error"; }

CFDEF int cf_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cf__err, sizeof cf__err, fmt, ap);
    va_end(ap);
    return CF_ERR;
}

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

CFDEF cf_rng cf_rng_seed(uint64_t seed) { cf_rng r; r.s = seed; return r; }
CFDEF uint64_t cf_hash64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
CFDEF uint64_t cf_rng_u64(cf_rng *r) { r->s += 0x9e3779b97f4a7c15ULL; return cf_hash64(r->s); }
CFDEF float cf_rng_uniform(cf_rng *r) { return (float)(cf_rng_u64(r) >> 40) * (1.0f / 16777216.0f); }
CFDEF double cf_rng_uniform64(cf_rng *r) { return (double)(cf_rng_u64(r) >> 11) * (1.0 / 9007199254740992.0); }
CFDEF double cf_rng_normal(cf_rng *r) {
    double u1 = 1.0 - cf_rng_uniform64(r), u2 = cf_rng_uniform64(r); /* u1 in (0, 1] */
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* CRC32C (Castagnoli, reflected polynomial 0x82F63B78), bytewise table. */
CFDEF uint32_t cf_crc32c(uint32_t crc, const void *data, size_t n) {
    static uint32_t table[256];
    static int ready = 0;
    const unsigned char *p = (const unsigned char *)data;
    size_t i;
    if (!ready) {
        uint32_t k, c; int j;
        for (k = 0; k < 256; k++) {
            c = k;
            for (j = 0; j < 8; j++) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
            table[k] = c;
        }
        ready = 1;  /* benign race: every thread writes the same table */
    }
    crc = ~crc;
    for (i = 0; i < n; i++) crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
    return ~crc;
}
CFDEF uint32_t cf_crc32c_masked(const void *data, size_t n) {
    uint32_t c = cf_crc32c(0, data, n);
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
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
        for (i = 0; i < M; i++) for (j = 0; j < N; j++) C[(size_t)i * ldc + j] *= beta;
        return;
    }
    cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans,
                M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
#else
    cf_sgemm_naive(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
#endif
}

/* ================================================================ 3. kernels */
CFDEF size_t cf_shape_size(cf_shape s) { return (size_t)s.c * s.d * s.h * s.w; }

CFDEF int cf_geom_out(const cf_geom *g, int axis, int in) {
    int span = g->dil[axis] * (g->k[axis] - 1) + 1;
    int padded = in + g->pb[axis] + g->pa[axis];
    if (padded < span) return 0;
    return (padded - span) / g->s[axis] + 1;
}

/* The output positions of a tile, p0 .. p0+n-1 (flattened over OD, OH, OW), are walked one
   output row (fixed od, oh) at a time: within a row only ow changes, so each kernel tap reads
   a strided run of one input row; the in-bounds part [t_lo, t_hi) is computed once instead of
   testing every element. */
typedef struct { int od, oh, ow0, len; } cf__seg;
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
   output position p0 + j.  Out-of-bounds taps read zero. */
static void cf__im2col(float *col, const float *x, int C, cf_shape in, cf_shape out,
                       const cf_geom *g, size_t p0, size_t n) {
    int KD = g->k[0], KH = g->k[1], KW = g->k[2];
    int rows = C * KD * KH * KW;
    int r;
    CF__OMP(omp parallel for schedule(static))
    for (r = 0; r < rows; r++) {
        int kw = r % KW, kh = (r / KW) % KH, kd = (r / (KW * KH)) % KD, c = r / (KW * KH * KD);
        const float *xc = x + (size_t)c * in.d * in.h * in.w;
        float *dst = col + (size_t)r * n;
        int sw = g->s[2], offw = kw * g->dil[2] - g->pb[2];
        size_t j = 0;
        cf__seg sg;
        while (j < n && cf__next_seg(&sg, p0 + j, n - j, out)) {
            int id = sg.od * g->s[0] - g->pb[0] + kd * g->dil[0], ih = sg.oh * g->s[1] - g->pb[1] + kh * g->dil[1];
            float *d = dst + j;
            int t, lo, hi;
            if (id < 0 || id >= in.d || ih < 0 || ih >= in.h) { memset(d, 0, sizeof(float) * sg.len); j += sg.len; continue; }
            const float *src = xc + ((size_t)id * in.h + ih) * in.w + offw;   /* src[ow*sw] is the tap */
            cf__row_range(sg.ow0, sg.len, sw, offw, in.w, &lo, &hi);
            for (t = 0; t < lo; t++) d[t] = 0.0f;
            if (sw == 1) memcpy(d + lo, src + sg.ow0 + lo, sizeof(float) * (hi - lo));
            else for (t = lo; t < hi; t++) d[t] = src[(size_t)(sg.ow0 + t) * sw];
            for (t = hi; t < sg.len; t++) d[t] = 0.0f;
            j += sg.len;
        }
    }
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
   (Tiles sized for the L2 cache instead, 1-4 MiB, were measured slower on CosmoFlow here:
   OpenBLAS's per-call packing and thread start-up outweigh the cache hits.) */
static size_t cf__tile(size_t rows, size_t P, size_t ws_floats) {
    size_t n = ws_floats / (rows ? rows : 1);
    if (n < 1) n = 1;
    return n < P ? n : P;
}

/* A 1x1x1 kernel with stride 1 and no padding: im2col would copy x unchanged, so the GEMMs
   read x and write dx in place (DeepCAM's pointwise convolutions are half its layers). */
static int cf__pointwise(const cf_geom *g) {
    int a;
    for (a = 0; a < 3; a++) if (g->k[a] != 1 || g->s[a] != 1 || g->pb[a] || g->pa[a]) return 0;
    return 1;
}

/* y[r][p] = act(y[r][p] + b[r]) for rows r < rows, columns p < n of a (rows, stride) block:
   the bias and activation of one tile, applied right after its GEMM wrote it */
static void cf__bias_act(float *y, const float *b, int rows, size_t n, size_t stride, int act, float slope) {
    int r;
    CF__OMP(omp parallel for schedule(static) if(rows * n > 32768))
    for (r = 0; r < rows; r++) {
        float *yr = y + (size_t)r * stride, v = b ? b[r] : 0.0f;
        size_t p;
        if (v != 0.0f) for (p = 0; p < n; p++) yr[p] += v;
        cf_act_forward(yr, n, act, slope);   /* its own parallel loop stays inactive in here */
    }
}

/* ---- Per-thread tiles.  A large convolution is cut into tiles of output positions that the
   threads take whole: each builds its own im2col tile, small enough to stay in its cache, and
   runs a single-threaded sgemm on it (a BLAS called inside an OpenMP parallel region runs on
   the calling thread: OpenBLAS's OpenMP build does, as do MKL and BLIS; OpenBLAS's pthreads
   build stays correct but may oversubscribe the cores).  Why: one big threaded sgemm over
   the whole tile reads its im2col matrix from memory, and with CosmoFlow's first layer
   (M = 32 filters, K = 108) it splits badly between threads.  Measured on CosmoFlow here (2
   threads, GFLOP/s, one big sgemm -> per-thread tiles): 4->32 at 128^3 backward-weights
   63 -> 102; 32->64 at 64^3 forward 94 -> 125, backward-weights 130 -> 146; 64->128 at 32^3
   forward 126 -> 144.  One thread gains too (small tiles stay in cache): 4->16 at 32^3
   forward 24 -> 30, backward-weights 24 -> 36.  Each helper returns 0, doing nothing, when
   the sample has too few tiles to share or the workspace cannot hold them; the caller then
   takes the one-big-sgemm path below. */
#define CF__TILE_FLOATS ((size_t)1 << 20)   /* forward: K x tile ~ 4 MiB, at least 1024 columns */
#define CF__BWW_TILE 256                    /* backward-weights: 256 columns measured best for K = 108 .. 3456 */
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

/* The forward tiling of P output positions with K im2col rows: the tile's columns, and the
   number of tiles, or 0 when there are fewer than 2 per thread or ws_floats cannot hold one
   im2col tile per thread. */
static long cf__fwd_tiles(int K, size_t P, size_t ws_floats, size_t *tile) {
    int nth = cf__nthreads();
    long ntiles;
    *tile = CF__TILE_FLOATS / (size_t)K;
    if (*tile < 1024) *tile = 1024;
    ntiles = (long)((P + *tile - 1) / *tile);
    return ntiles < 2 * nth || (size_t)nth * K * *tile > ws_floats ? 0 : ntiles;
}

/* One sample, groups = 1:  y (OC, P) = beta*y + w (OC, K) x im2col(x) (K, P), then bias and
   act per tile.  Tiles write disjoint columns of y, so any thread may take any tile. */
static int cf__conv_tiles(float *y, const float *x, const float *w, const float *b, float beta,
                          cf_shape in, cf_shape out, const cf_geom *g, float *ws, size_t ws_floats,
                          int act, float slope) {
    int K = in.c * g->k[0] * g->k[1] * g->k[2];
    size_t P = (size_t)out.d * out.h * out.w, tile;
    long ntiles = cf__fwd_tiles(K, P, ws_floats, &tile), t;
    if (!ntiles) return 0;
    CF__OMP(omp parallel num_threads(cf__nthreads()))
    {
        float *col = ws + (size_t)cf__thread_id() * K * tile;
        CF__OMP(omp for schedule(dynamic, 1))
        for (t = 0; t < ntiles; t++) {
            size_t p0 = (size_t)t * tile, n = P - p0 < tile ? P - p0 : tile;
            cf__im2col(col, x, in.c, in, out, g, p0, n);   /* its own parallel loop stays inactive in here */
            cf_sgemm(0, 0, out.c, (int)n, K, 1.0f, w, K, col, (int)n, beta, y + p0, (int)P);
            if (b || act != CF_ACT_LINEAR) cf__bias_act(y + p0, b, out.c, n, P, act, slope);
        }
    }
    return 1;
}

/* One sample, groups = 1:  dw (OC, K) += dy (OC, P) x im2col(x)^T (P, K).  Thread 0 adds into
   dw, the others into zeroed copies after their tiles in ws, summed into dw in thread order at
   the end; tiles are dealt statically, so the result is the same in every run. */
static int cf__conv_bww_tiles(float *dw, const float *dy, const float *x, cf_shape in, cf_shape out,
                              const cf_geom *g, float *ws, size_t ws_floats) {
    int K = in.c * g->k[0] * g->k[1] * g->k[2], nth = cf__nthreads();
    size_t P = (size_t)out.d * out.h * out.w, tile = CF__BWW_TILE, wsz = (size_t)out.c * K, i;
    long ntiles = (long)((P + tile - 1) / tile), t;
    float *acc;
    if (ntiles < 2 * nth || (size_t)nth * K * tile + (size_t)(nth - 1) * wsz > ws_floats) return 0;
    acc = ws + (size_t)nth * K * tile;
    if (nth > 1) memset(acc, 0, sizeof(float) * (nth - 1) * wsz);
    CF__OMP(omp parallel num_threads(nth))
    {
        int me = cf__thread_id();
        float *col = ws + (size_t)me * K * tile, *a = me ? acc + (size_t)(me - 1) * wsz : dw;
        CF__OMP(omp for schedule(static))
        for (t = 0; t < ntiles; t++) {
            size_t p0 = (size_t)t * tile, n = P - p0 < tile ? P - p0 : tile;
            cf__im2col(col, x, in.c, in, out, g, p0, n);
            cf_sgemm(0, 1, out.c, K, (int)n, 1.0f, dy + p0, (int)P, col, (int)n, 1.0f, a, K);
        }
    }
    if (nth > 1) {
        CF__OMP(omp parallel for schedule(static))
        for (i = 0; i < wsz; i++) {
            int th;
            for (th = 1; th < nth; th++) dw[i] += acc[(size_t)(th - 1) * wsz + i];
        }
    }
    return 1;
}

/* ---- Direct convolution (no im2col) for a stride of 1 along the width.  With few input
   channels im2col + GEMM is slow: CosmoFlow's first layer (4 -> 32 channels, K = 108) writes
   a 900 MB im2col matrix per sample that the BLAS then packs again, for a GEMM of only 32
   rows (measured 45-76 GFLOP/s against 110 for this kernel on the same 2 cores).  Here each
   output row (od, oh) first gathers the input rows its taps read, zero-padded, into a small
   per-thread buffer R (cf__direct_rows: C x KD x KH rows; 80 KiB for CosmoFlow); then blocks of
   4 output channels x 16 positions are summed over all taps in registers: per tap 2 vector
   loads and 4 broadcasts feed 8 multiply-adds.  Written with GCC/Clang vector types (8
   floats) and compiled only where the target has AVX2 and FMA (-march=x86-64-v3 or native);
   elsewhere, or with CF_NO_DIRECT_CONV, im2col + GEMM does everything.  Used for the forward
   pass (where R is small: cf__direct_ok) and the stride-1 backward-data (the forward of dy
   with the flipped kernel, below), where out.w >= 16.  Measured on CosmoFlow's shapes (2 threads, one process, forward direct
   / GEMM ms): 4 -> 32 at 128^3 164 / 269; 32 -> 64 at 64^3 266 / 293 (backward-data 274 /
   364); 64 -> 128 at 32^3 114 / 127; 128 -> 256 at 16^3 58 / 66.  (A direct backward-weights
   with per-thread partial sums was tried: 219 / 226 ms at 4 -> 32, 386 / 275 at 32 -> 64, so
   weight gradients stay with im2col + GEMM.) */
static int cf__direct_on = 1;
CFDEF void cf_conv_set_direct(int on) { cf__direct_on = on; }
#if defined(__GNUC__) && defined(__AVX2__) && defined(__FMA__) && !defined(CF_NO_DIRECT_CONV)
#define CF__DIRECT 1
#if defined(__clang__)
#define CF__CONTRACT                  /* clang fuses a += b * c into one FMA by default */
#else
#define CF__CONTRACT __attribute__((optimize("fp-contract=fast")))   /* GCC's ISO C mode does not */
#endif
typedef float cf__v8 __attribute__((vector_size(32)));
/* unaligned 8-float load and store (memcpy is a builtin: always inlined, even into the
   CF__CONTRACT kernels, which GCC will not inline other functions into) */
#define CF__LD8(v, p) memcpy(&(v), (p), sizeof(cf__v8))
#define CF__ST8(p, v) memcpy((p), &(v), sizeof(cf__v8))

/* R (T = C*KD*KH rows of Wp floats): row t = (c, kd, kh) holds the input row that output row
   (od, oh) reads through taps (kd, kh) of channel c, shifted right by the width's padding
   and zero elsewhere; a row outside the input is all zeros.  x: (C, D, H, W), one sample. */
static void cf__direct_rows(float *R, size_t Wp, const float *x, int C, cf_shape in, const cf_geom *g, int od, int oh) {
    int c, kd, kh;
    float *r = R;
    for (c = 0; c < C; c++) for (kd = 0; kd < g->k[0]; kd++) for (kh = 0; kh < g->k[1]; kh++, r += Wp) {
        int id = od * g->s[0] - g->pb[0] + kd * g->dil[0], ih = oh * g->s[1] - g->pb[1] + kh * g->dil[1];
        memset(r, 0, Wp * sizeof(float));
        if (id >= 0 && id < in.d && ih >= 0 && ih < in.h)
            memcpy(r + g->pb[2], x + (((size_t)c * in.d + id) * in.h + ih) * in.w, (size_t)in.w * sizeof(float));
    }
}

/* One output row:  y[oc][w] (+)= sum over t < T, kw < KW of w[oc][t KW + kw] R[t][w + kw dil]
   for oc < OC, w < OW (rows of y ystride apart; R readable up to OW rounded up to 32, plus
   (KW-1) dil).  accumulate = 0: y = act(sum + b[oc]) (b may be NULL); 1: y += sum.
   Written once for a vector type VT of VW floats and instantiated twice below: blocks of 4
   output channels x 2 VW positions, 8 accumulators (AVX2: 8 x 8 floats; AVX-512: 8 x 16). */
#define CF__DIRECT_FWD_ROW(NAME, VT, VW, ATTR)                                                                       \
ATTR static void NAME(float *y, size_t ystride, const float *R, size_t Wp, int T, int KW, int dil, const float *w,  \
                      int OC, int OW, const float *b, int accumulate, int act, float slope) {                         \
    int K = T * KW, oc0, w0, t, kw, o, j;                                                                             \
    float out[4][2 * VW];                                                                                             \
    for (oc0 = 0; oc0 < OC; oc0 += 4) {                                                                               \
        int no = OC - oc0 < 4 ? OC - oc0 : 4;   /* the last block may have fewer channels: rows repeat, unstored */   \
        const float *w_0 = w + (size_t)oc0 * K, *w_1 = no > 1 ? w_0 + K : w_0;                                       \
        const float *w_2 = no > 2 ? w_0 + 2 * K : w_0, *w_3 = no > 3 ? w_0 + 3 * K : w_0;                           \
        for (w0 = 0; w0 < OW; w0 += 2 * VW) {                                                                         \
            VT a00 = {0.0f}, a01 = {0.0f}, a10 = {0.0f}, a11 = {0.0f}, a20 = {0.0f}, a21 = {0.0f}, a30 = {0.0f}, a31 = {0.0f}; \
            for (t = 0; t < T; t++) {                                                                                 \
                const float *r = R + (size_t)t * Wp + w0;                                                             \
                const float *q0 = w_0 + t * KW, *q1 = w_1 + t * KW, *q2 = w_2 + t * KW, *q3 = w_3 + t * KW;           \
                for (kw = 0; kw < KW; kw++) {   /* per tap: 2 vector loads, 4 broadcasts, 8 multiply-adds */          \
                    VT x0, x1;                                                                                        \
                    memcpy(&x0, r + kw * dil, sizeof x0); memcpy(&x1, r + kw * dil + VW, sizeof x1);                  \
                    a00 += q0[kw] * x0; a01 += q0[kw] * x1;                                                           \
                    a10 += q1[kw] * x0; a11 += q1[kw] * x1;                                                           \
                    a20 += q2[kw] * x0; a21 += q2[kw] * x1;                                                           \
                    a30 += q3[kw] * x0; a31 += q3[kw] * x1;                                                           \
                }                                                                                                     \
            }                                                                                                         \
            memcpy(out[0], &a00, sizeof a00); memcpy(out[0] + VW, &a01, sizeof a01);                                  \
            memcpy(out[1], &a10, sizeof a10); memcpy(out[1] + VW, &a11, sizeof a11);                                  \
            memcpy(out[2], &a20, sizeof a20); memcpy(out[2] + VW, &a21, sizeof a21);                                  \
            memcpy(out[3], &a30, sizeof a30); memcpy(out[3] + VW, &a31, sizeof a31);                                  \
            for (o = 0; o < no; o++) {   /* the block's valid part (the last block may pass OW) */                    \
                float *yr = y + (size_t)(oc0 + o) * ystride + w0, bo = b ? b[oc0 + o] : 0.0f;                        \
                int n = OW - w0 < 2 * VW ? OW - w0 : 2 * VW;                                                          \
                if (accumulate) for (j = 0; j < n; j++) yr[j] += out[o][j];                                           \
                else for (j = 0; j < n; j++) {   /* as cf_act_forward */                                              \
                    float v = out[o][j] + bo;                                                                         \
                    yr[j] = act == CF_ACT_RELU ? (v > 0.0f ? v : 0.0f) : act == CF_ACT_LEAKY ? (v > 0.0f ? v : slope * v) \
                          : act == CF_ACT_TANH ? tanhf(v) : v;                                                        \
                }                                                                                                     \
            }                                                                                                         \
        }                                                                                                             \
    }                                                                                                                 \
}
CF__DIRECT_FWD_ROW(cf__direct_fwd_row8, cf__v8, 8, CF__CONTRACT)
/* The same for AVX-512, chosen at run time when the CPU has it and the row has at least 32
   positions (measured 1.2-2x the AVX2 kernel at CosmoFlow's shapes): the x86-64-v3 build runs
   on AVX2 machines, and oneDNN's kernels, PyTorch's, use AVX-512 where they find it. */
#if defined(__x86_64__) && !defined(CF_NO_AVX512)
#define CF__AVX512 1
typedef float cf__v16 __attribute__((vector_size(64)));
#if defined(__clang__)
#define CF__CONTRACT512 __attribute__((target("avx512f")))
#else
#define CF__CONTRACT512 __attribute__((target("avx512f"), optimize("fp-contract=fast")))
#endif
CF__DIRECT_FWD_ROW(cf__direct_fwd_row16, cf__v16, 16, CF__CONTRACT512)
static int cf__has_avx512(void) {
    static int has = -1;
    if (has < 0) has = __builtin_cpu_supports("avx512f") ? 1 : 0;
    return has;
}
#endif

/* floats of one row of R: the output row rounded up to 32, plus the kernel's reach */
static size_t cf__direct_wp(cf_shape out, const cf_geom *g) {
    return ((size_t)out.w + 31) / 32 * 32 + (size_t)(g->k[2] - 1) * g->dil[2];
}
/* Whether cf__direct_fwd applies: stride 1 along the width, rows of 16 or more, one R per
   thread in ws, and R at most max_r floats.  The forward pass passes CF__DIRECT_FWD_MAX_R,
   64 Ki floats (256 KiB): with many input channels im2col + GEMM has a long K and the BLAS
   its best shape, while R outgrows the L2 cache.  DeepCAM (cf-bench --layers, direct / GEMM
   forward ms): 32 -> 64 channels at 384 x 576 (R 55 Ki floats) 66 / 75, but 64 -> 128 (111 Ki)
   79 / 70, the dilated 2048 -> 256 ASPP convolutions (R 504-648 Ki) 460-577 / 289-305,
   304 -> 256 at 192 x 288 554-691 / 521-554; CosmoFlow's layers have R of 19-21 Ki floats.
   The stride-1 backward-data passes no limit: its alternative, GEMM + col2im, is slower (the
   same DeepCAM layers' backward-data: 346-447 / 467-573 ms). */
#define CF__DIRECT_FWD_MAX_R 65536
static int cf__direct_ok(cf_shape in, cf_shape out, const cf_geom *g, size_t ws_floats, size_t max_r) {
    size_t rsz = (size_t)in.c * g->k[0] * g->k[1] * cf__direct_wp(out, g);
    return cf__direct_on && g->s[2] == 1 && out.w >= 16 && rsz <= max_r && (size_t)cf__nthreads() * rsz <= ws_floats;
}
/* y (B, OC, OD, OH, OW) (+)= conv(x, w) with w (OC, C, KD, KH, KW): rows shared out between
   the threads, each with its own R in ws.  Only where cf__direct_ok says it applies. */
static void cf__direct_fwd(float *y, const float *x, const float *w, const float *b, int accumulate, int B, cf_shape in,
                           cf_shape out, const cf_geom *g, float *ws, int act, float slope) {
    int T = in.c * g->k[0] * g->k[1], KW = g->k[2];
    size_t Wp = cf__direct_wp(out, g), rsz = (size_t)T * Wp;
    size_t P = (size_t)out.d * out.h * out.w, in_sz = cf_shape_size(in);
    long rows = (long)B * out.d * out.h, r;
    void (*row)(float *, size_t, const float *, size_t, int, int, int, const float *, int, int, const float *, int, int, float) =
        cf__direct_fwd_row8;
#ifdef CF__AVX512
    if (out.w >= 32 && cf__has_avx512()) row = cf__direct_fwd_row16;
#endif
    CF__OMP(omp parallel num_threads(cf__nthreads()))
    {
        float *R = ws + (size_t)cf__thread_id() * rsz;
        CF__OMP(omp for schedule(static))
        for (r = 0; r < rows; r++) {
            int bi = (int)(r / ((long)out.d * out.h)), od = (int)(r / out.h % out.d), oh = (int)(r % out.h);
            cf__direct_rows(R, Wp, x + (size_t)bi * in_sz, in.c, in, g, od, oh);
            row(y + (size_t)bi * out.c * P + ((size_t)od * out.h + oh) * out.w, P, R, Wp, T, KW, g->dil[2],
                w, out.c, out.w, b, accumulate, act, slope);
        }
    }
}

#else
#define CF__DIRECT_FWD_MAX_R 0
static int cf__direct_ok(cf_shape in, cf_shape out, const cf_geom *g, size_t ws_floats, size_t max_r) {
    (void)in; (void)out; (void)g; (void)ws_floats; (void)max_r;
    return 0;
}
static void cf__direct_fwd(float *y, const float *x, const float *w, const float *b, int accumulate, int B, cf_shape in,
                           cf_shape out, const cf_geom *g, float *ws, int act, float slope) {
    (void)y; (void)x; (void)w; (void)b; (void)accumulate; (void)B; (void)in; (void)out; (void)g; (void)ws; (void)act; (void)slope;
}
#endif

/* One sample, groups = 1, stride 1:  dx += the input gradient, computed as a forward
   convolution of dy with the kernel flipped on every axis and its two channel axes swapped,
   w' (C, OC, KD, KH, KW), padded (k-1)*dil - pb before and (k-1)*dil - pa after.  Its tiles
   write disjoint parts of dx, so they share out like the forward's (col2im's scatter-add
   would have threads adding into the same elements).  w' goes at the front of ws. */
static int cf__conv_bwd_tiles(float *dx, const float *dy, const float *w, cf_shape in, cf_shape out,
                              const cf_geom *g, float *ws, size_t ws_floats) {
    int a, kvol = g->k[0] * g->k[1] * g->k[2], c, oc, k, direct;
    size_t wsz = (size_t)in.c * out.c * kvol, tile;
    cf_geom gt = *g;
    for (a = 0; a < 3; a++) {
        gt.pb[a] = (g->k[a] - 1) * g->dil[a] - g->pb[a];
        gt.pa[a] = (g->k[a] - 1) * g->dil[a] - g->pa[a];
        if (g->s[a] != 1 || gt.pb[a] < 0 || gt.pa[a] < 0) return 0;
    }
    /* decided before the kernel is flipped, so a refusal costs nothing: the direct kernel
       (the forward of dy, which has out's shape, into dx), else per-thread tiles */
    if (wsz >= ws_floats) return 0;
    direct = cf__direct_ok(out, in, &gt, ws_floats - wsz, (size_t)-1);
    if (!direct && !cf__fwd_tiles(out.c * kvol, cf_shape_size(in) / in.c, ws_floats - wsz, &tile)) return 0;
    /* w'[c][oc][k] = w[oc][c][kvol-1-k]: flipping every axis of a C-order kernel reverses its flat index */
    for (oc = 0; oc < out.c; oc++)
        for (c = 0; c < in.c; c++)
            for (k = 0; k < kvol; k++)
                ws[((size_t)c * out.c + oc) * kvol + k] = w[((size_t)oc * in.c + c) * kvol + kvol - 1 - k];
    if (direct) { cf__direct_fwd(dx, dy, ws, NULL, 1, 1, out, in, &gt, ws + wsz, CF_ACT_LINEAR, 0.0f); return 1; }
    return cf__conv_tiles(dx, dy, ws, NULL, 1.0f, out, in, &gt, ws + wsz, ws_floats - wsz, CF_ACT_LINEAR, 0.0f);
}

CFDEF void cf_conv_forward_act(float *y, const float *x, const float *w, const float *b,
                               int B, cf_shape in, cf_shape out, const cf_geom *g, int groups,
                               float *col, size_t ws_floats, int act, float slope) {
    int Cg = in.c / groups, OCg = out.c / groups;
    int K = Cg * g->k[0] * g->k[1] * g->k[2];
    size_t P = (size_t)out.d * out.h * out.w, in_sz = cf_shape_size(in), tile = cf__tile((size_t)K, P, ws_floats);
    int bi, gi;
    if (groups == 1 && !cf__pointwise(g) && cf__direct_ok(in, out, g, ws_floats, CF__DIRECT_FWD_MAX_R)) {
        cf__direct_fwd(y, x, w, b, 0, B, in, out, g, col, act, slope);
        return;
    }
    for (bi = 0; bi < B; bi++) {
        float *yb = y + (size_t)bi * out.c * P;
        size_t p0;
        if (cf__pointwise(g)) {   /* y[g] (OCg, P) = w[g] (OCg, Cg) x x[g] (Cg, P) */
            for (gi = 0; gi < groups; gi++)
                cf_sgemm(0, 0, OCg, (int)P, Cg, 1.0f, w + (size_t)gi * OCg * Cg, Cg, x + bi * in_sz + (size_t)gi * Cg * P, (int)P,
                         0.0f, yb + (size_t)gi * OCg * P, (int)P);
            cf__bias_act(yb, b, out.c, P, P, act, slope);
            continue;
        }
        if (groups == 1 && cf__conv_tiles(yb, x + bi * in_sz, w, b, 0.0f, in, out, g, col, ws_floats, act, slope)) continue;
        for (p0 = 0; p0 < P; p0 += tile) {
            size_t n = P - p0 < tile ? P - p0 : tile;
            for (gi = 0; gi < groups; gi++) {
                cf__im2col(col, x + bi * in_sz + (size_t)gi * Cg * in.d * in.h * in.w, Cg, in, out, g, p0, n);
                /* y[g] (OCg, n) = w[g] (OCg, K) x col (K, n) */
                cf_sgemm(0, 0, OCg, (int)n, K, 1.0f, w + (size_t)gi * OCg * K, K, col, (int)n, 0.0f,
                         yb + (size_t)gi * OCg * P + p0, (int)P);
            }
            cf__bias_act(yb + p0, b, out.c, n, P, act, slope);
        }
    }
}

CFDEF void cf_conv_forward(float *y, const float *x, const float *w, const float *b,
                           int B, cf_shape in, cf_shape out, const cf_geom *g, int groups,
                           float *col, size_t ws_floats) {
    cf_conv_forward_act(y, x, w, b, B, in, out, g, groups, col, ws_floats, CF_ACT_LINEAR, 0.0f);
}

CFDEF void cf_conv_backward_weights(float *dw, float *db, const float *dy, const float *x,
                                    int B, cf_shape in, cf_shape out, const cf_geom *g, int groups,
                                    float *col, size_t ws_floats) {
    int Cg = in.c / groups, OCg = out.c / groups;
    int K = Cg * g->k[0] * g->k[1] * g->k[2];
    size_t P = (size_t)out.d * out.h * out.w, in_sz = cf_shape_size(in), tile = cf__tile((size_t)K, P, ws_floats);
    int bi, gi, oc;
    for (bi = 0; bi < B; bi++) {
        const float *dyb = dy + (size_t)bi * out.c * P;
        size_t p0;
        if (db) {
            CF__OMP(omp parallel for schedule(static))
            for (oc = 0; oc < out.c; oc++) {
                double s = 0.0;
                size_t p;
                for (p = 0; p < P; p++) s += dyb[(size_t)oc * P + p];
                db[oc] += (float)s;
            }
        }
        for (gi = 0; gi < groups; gi++) {
            size_t xoff = bi * in_sz + (size_t)gi * Cg * in.d * in.h * in.w;
            const float *dyg = dyb + (size_t)gi * OCg * P;
            if (cf__pointwise(g)) {   /* dw[g] (OCg, Cg) += dy[g] (OCg, P) x x[g]^T (P, Cg) */
                cf_sgemm(0, 1, OCg, Cg, (int)P, 1.0f, dyg, (int)P, x + xoff, (int)P, 1.0f, dw + (size_t)gi * OCg * Cg, Cg);
                continue;
            }
            if (groups == 1 && cf__conv_bww_tiles(dw, dyg, x + xoff, in, out, g, col, ws_floats)) continue;
            for (p0 = 0; p0 < P; p0 += tile) {   /* dw[g] (OCg, K) += dy[g] (OCg, n) x col^T (n, K); col recomputed, not stored */
                size_t n = P - p0 < tile ? P - p0 : tile;
                cf__im2col(col, x + xoff, Cg, in, out, g, p0, n);
                cf_sgemm(0, 1, OCg, K, (int)n, 1.0f, dyg + p0, (int)P, col, (int)n, 1.0f, dw + (size_t)gi * OCg * K, K);
            }
        }
    }
}

CFDEF void cf_conv_backward_data(float *dx, const float *dy, const float *w, int B, cf_shape in,
                                 cf_shape out, const cf_geom *g, int groups, float *dcol, size_t ws_floats) {
    int Cg = in.c / groups, OCg = out.c / groups;
    int K = Cg * g->k[0] * g->k[1] * g->k[2];
    size_t P = (size_t)out.d * out.h * out.w, in_sz = cf_shape_size(in), tile = cf__tile((size_t)K, P, ws_floats);
    int bi, gi;
    for (bi = 0; bi < B; bi++)
        for (gi = 0; gi < groups; gi++) {
            size_t xoff = bi * in_sz + (size_t)gi * Cg * in.d * in.h * in.w, p0;
            const float *dyg = dy + (size_t)bi * out.c * P + (size_t)gi * OCg * P, *wg = w + (size_t)gi * OCg * K;
            if (cf__pointwise(g)) {   /* dx[g] (Cg, P) += w[g]^T (Cg, OCg) x dy[g] (OCg, P), in place */
                cf_sgemm(1, 0, Cg, (int)P, OCg, 1.0f, wg, Cg, dyg, (int)P, 1.0f, dx + xoff, (int)P);
                continue;
            }
            if (groups == 1 && cf__conv_bwd_tiles(dx + xoff, dyg, wg, in, out, g, dcol, ws_floats)) continue;
            for (p0 = 0; p0 < P; p0 += tile) {   /* dcol (K, n) = w[g]^T (K, OCg) x dy[g] (OCg, n); scatter-add into dx */
                size_t n = P - p0 < tile ? P - p0 : tile;
                cf_sgemm(1, 0, K, (int)n, OCg, 1.0f, wg, K, dyg + p0, (int)P, 0.0f, dcol, (int)n);
                cf__col2im(dx + xoff, dcol, Cg, in, out, g, p0, n);
            }
        }
}

CFDEF void cf_conv_backward(float *dx, float *dw, float *db, const float *dy, const float *x,
                            const float *w, int B, cf_shape in, cf_shape out, const cf_geom *g,
                            int groups, float *col, float *dcol, size_t ws_floats) {
    cf_conv_backward_weights(dw, db, dy, x, B, in, out, g, groups, col, ws_floats);
    if (dx) cf_conv_backward_data(dx, dy, w, B, in, out, g, groups, dcol, ws_floats);
}

/* Is every window of the pooling inside the input (no padding taps)?  Then the loops below
   need no bounds tests; CosmoFlow's 2x2x2 stride-2 pools are this case. */
static int cf__pool_inside(const cf_geom *g, cf_shape in, cf_shape out) {
    int a, o[3], n[3];
    o[0] = out.d; o[1] = out.h; o[2] = out.w; n[0] = in.d; n[1] = in.h; n[2] = in.w;
    for (a = 0; a < 3; a++)
        if (g->pb[a] != 0 || (o[a] - 1) * g->s[a] + (g->k[a] - 1) * g->dil[a] >= n[a]) return 0;
    return 1;
}

/* Disjoint 2x2 windows on height and width, and 1 or 2 on depth (k = s, no padding, no
   dilation): CosmoFlow's 2x2x2 pools and 2-D 2x2 ones.  Their loops below read each window as
   pairs from 2 or 4 input rows: the general loops spend more on counting taps than on the
   comparisons (cosmoflow.cfg's first pool: forward 37 -> 17 ms, fused backward 91 -> 68 ms
   here, as cf-bench --layers measured them). */
static int cf__pool_pairs(const cf_geom *g) {
    int a;
    for (a = 0; a < 3; a++) if (g->pb[a] || g->dil[a] != 1 || g->k[a] != g->s[a]) return 0;
    return g->k[1] == 2 && g->k[2] == 2 && (g->k[0] == 1 || g->k[0] == 2);
}
/* the input rows of output row (od, oh) of one plane: rows[kd*2 + kh], KD*2 of them */
static int cf__pool_rows(const float **rows, const float *xp, int od, int oh, int KD, cf_shape in) {
    int kd, kh;
    for (kd = 0; kd < KD; kd++) for (kh = 0; kh < 2; kh++)
        rows[kd * 2 + kh] = xp + ((size_t)(od * KD + kd) * in.h + (size_t)(oh * 2 + kh)) * in.w;
    return KD * 2;
}

CFDEF void cf_pool_forward(float *y, const float *x, int B, cf_shape in, cf_shape out,
                           const cf_geom *g, int is_max) {
    int plane, inside = cf__pool_inside(g, in, out);
    if (is_max && cf__pool_pairs(g)) {
        CF__OMP(omp parallel for schedule(static))
        for (plane = 0; plane < B * in.c; plane++) {
            const float *xp = x + (size_t)plane * in.d * in.h * in.w, *rows[4];
            float *yp = y + (size_t)plane * out.d * out.h * out.w;
            int od, oh, ow, q, nr;
            for (od = 0; od < out.d; od++) for (oh = 0; oh < out.h; oh++) {
                float *yr = yp + ((size_t)od * out.h + oh) * out.w;
                nr = cf__pool_rows(rows, xp, od, oh, g->k[0], in);
                for (ow = 0; ow < out.w; ow++) {
                    float best = -INFINITY;
                    for (q = 0; q < nr; q++) {   /* the same comparisons, in the same order, as the loop below */
                        float a = rows[q][2 * ow], b = rows[q][2 * ow + 1];
                        best = a > best ? a : best;
                        best = b > best ? b : best;
                    }
                    yr[ow] = best;
                }
            }
        }
        return;
    }
    CF__OMP(omp parallel for schedule(static))
    for (plane = 0; plane < B * in.c; plane++) {
        const float *xp = x + (size_t)plane * in.d * in.h * in.w;
        float *yp = y + (size_t)plane * out.d * out.h * out.w;
        int od, oh, ow, kd, kh, kw;
        for (od = 0; od < out.d; od++) for (oh = 0; oh < out.h; oh++) for (ow = 0; ow < out.w; ow++) {
            float best = -INFINITY; double sum = 0.0; int cnt = 0;
            if (inside) {   /* fast path: all taps valid; max and average in separate loops */
                const float *w0 = xp + ((size_t)od * g->s[0] * in.h + (size_t)oh * g->s[1]) * in.w + (size_t)ow * g->s[2];
                for (kd = 0; kd < g->k[0]; kd++) for (kh = 0; kh < g->k[1]; kh++) {
                    const float *r = w0 + ((size_t)kd * g->dil[0] * in.h + (size_t)kh * g->dil[1]) * in.w;
                    if (is_max) for (kw = 0; kw < g->k[2]; kw++) { float v = r[kw * g->dil[2]]; best = v > best ? v : best; }
                    else for (kw = 0; kw < g->k[2]; kw++) sum += r[kw * g->dil[2]];
                }
                cnt = g->k[0] * g->k[1] * g->k[2];
            } else
            for (kd = 0; kd < g->k[0]; kd++) for (kh = 0; kh < g->k[1]; kh++) for (kw = 0; kw < g->k[2]; kw++) {
                int id = od * g->s[0] - g->pb[0] + kd * g->dil[0];
                int ih = oh * g->s[1] - g->pb[1] + kh * g->dil[1];
                int iw = ow * g->s[2] - g->pb[2] + kw * g->dil[2];
                if (id < 0 || id >= in.d || ih < 0 || ih >= in.h || iw < 0 || iw >= in.w) continue;
                float v = xp[((size_t)id * in.h + ih) * in.w + iw];
                if (v > best) best = v;
                sum += v; cnt++;
            }
            yp[((size_t)od * out.h + oh) * out.w + ow] = is_max ? best : (cnt ? (float)(sum / cnt) : 0.0f);
        }
    }
}

/* Max pooling's backward finds the window's first maximum again (equal to the stored output)
   instead of keeping an argmax array: same answer, no memory. */
CFDEF void cf_pool_backward(float *dx, const float *dy, const float *x, const float *y, int B,
                            cf_shape in, cf_shape out, const cf_geom *g, int is_max) {
    int plane, inside = cf__pool_inside(g, in, out);
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
            if (inside) {   /* fast path: all taps valid, one pass */
                size_t w0 = ((size_t)od * g->s[0] * in.h + (size_t)oh * g->s[1]) * in.w + (size_t)ow * g->s[2];
                float share = dyp[o] / (float)(g->k[0] * g->k[1] * g->k[2]), m = yp[o];
                if (dyp[o] == 0.0f) continue;   /* nothing to add (dropout, leaky's zeros) */
                for (kd = 0; kd < g->k[0] && !done; kd++) for (kh = 0; kh < g->k[1] && !done; kh++) {
                    size_t r = w0 + ((size_t)kd * g->dil[0] * in.h + (size_t)kh * g->dil[1]) * in.w;
                    if (!is_max) { for (kw = 0; kw < g->k[2]; kw++) dxp[r + (size_t)kw * g->dil[2]] += share; continue; }
                    for (kw = 0; kw < g->k[2]; kw++)
                        if (xp[r + (size_t)kw * g->dil[2]] == m) { dxp[r + (size_t)kw * g->dil[2]] += dyp[o]; done = 1; break; }
                }
                continue;
            }
            /* pass 0 counts in-bounds taps (average); pass 1 distributes the gradient */
            for (pass = 0; pass < 2 && !done; pass++)
                for (kd = 0; kd < g->k[0] && !done; kd++) for (kh = 0; kh < g->k[1] && !done; kh++)
                    for (kw = 0; kw < g->k[2] && !done; kw++) {
                        int id = od * g->s[0] - g->pb[0] + kd * g->dil[0];
                        int ih = oh * g->s[1] - g->pb[1] + kh * g->dil[1];
                        int iw = ow * g->s[2] - g->pb[2] + kw * g->dil[2];
                        if (id < 0 || id >= in.d || ih < 0 || ih >= in.h || iw < 0 || iw >= in.w) continue;
                        size_t i = ((size_t)id * in.h + ih) * in.w + iw;
                        if (pass == 0) { cnt++; continue; }
                        if (is_max) { if (xp[i] == yp[o]) { dxp[i] += dyp[o]; done = 1; } }
                        else dxp[i] += dyp[o] / (float)cnt;
                    }
        }
    }
}

/* The fused backward of act + max pool with disjoint windows (k = s, no padding, dilation 1),
   in place: xg holds the pool's input x = act(z) (B, C, D, H, W) on entry and dL/dz on return.
   Each window's first maximum gets dy[o] * act'(y[o]) (y[o] equals x there, so this is what
   cf_act_backward would compute), the rest of the window and any rows the windows do not
   cover get 0.  dy, y (B, C, OD, OH, OW). */
static void cf__maxpool_backward_fused(float *xg, const float *dy, const float *y, int B, cf_shape in, cf_shape out,
                                       const cf_geom *g, int act, float slope) {
    int plane, KD = g->k[0], KH = g->k[1], KW = g->k[2], pairs = cf__pool_pairs(g);
    CF__OMP(omp parallel for schedule(static))
    for (plane = 0; plane < B * in.c; plane++) {
        float *xp = xg + (size_t)plane * in.d * in.h * in.w;
        const float *yp = y + (size_t)plane * out.d * out.h * out.w, *dyp = dy + (size_t)plane * out.d * out.h * out.w;
        int od, oh, ow, kd, kh, kw, id, ih, iw;
        for (od = 0; od < out.d; od++) for (oh = 0; oh < out.h; oh++) {
            const float *rows[4];
            int nr = pairs ? cf__pool_rows(rows, xp, od, oh, KD, in) : 0;
            for (ow = 0; ow < out.w; ow++) {
                size_t o = ((size_t)od * out.h + oh) * out.w + ow, at = (size_t)-1;
                float m = yp[o], d = dyp[o];
                if (act == CF_ACT_RELU) d = m > 0.0f ? d : 0.0f;   /* the formulas of cf_act_backward */
                else if (act == CF_ACT_LEAKY) d = m > 0.0f ? d : slope * d;
                else if (act == CF_ACT_TANH) d *= 1.0f - m * m;
                if (pairs) {   /* the window as pairs from 2 or 4 rows (rows point into xg, ours to write) */
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
        if (out.d * KD < in.d || out.h * KH < in.h || out.w * KW < in.w)
        for (id = 0; id < in.d; id++) for (ih = 0; ih < in.h; ih++) for (iw = 0; iw < in.w; iw++)
            if (id >= out.d * KD || ih >= out.h * KH || iw >= out.w * KW) xp[((size_t)id * in.h + ih) * in.w + iw] = 0.0f;
    }
}

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

/* Elementwise passes only stream memory; both cores stream faster than one, so the loops
   over large tensors are split between the OpenMP threads. */
#define CF__PAR_FOR(n) CF__OMP(omp parallel for schedule(static) if((n) > 65536))
CFDEF void cf_act_forward(float *y, size_t n, int act, float slope) {
    long i, m = (long)n;
    switch (act) {
    case CF_ACT_RELU: CF__PAR_FOR(m) for (i = 0; i < m; i++) y[i] = y[i] > 0.0f ? y[i] : 0.0f; break;
    case CF_ACT_LEAKY: CF__PAR_FOR(m) for (i = 0; i < m; i++) y[i] = y[i] > 0.0f ? y[i] : slope * y[i]; break;
    case CF_ACT_TANH: CF__PAR_FOR(m) for (i = 0; i < m; i++) y[i] = tanhf(y[i]); break;
    default: break;
    }
}

CFDEF void cf_act_backward(float *dy, const float *y, size_t n, int act, float slope) {
    long i, m = (long)n;
    switch (act) {
    case CF_ACT_RELU: CF__PAR_FOR(m) for (i = 0; i < m; i++) dy[i] = y[i] > 0.0f ? dy[i] : 0.0f; break;
    case CF_ACT_LEAKY: CF__PAR_FOR(m) for (i = 0; i < m; i++) dy[i] = y[i] > 0.0f ? dy[i] : slope * dy[i]; break;
    case CF_ACT_TANH: CF__PAR_FOR(m) for (i = 0; i < m; i++) dy[i] *= 1.0f - y[i] * y[i]; break;
    default: break;
    }
}

/* keep element i when hash(seed, i) >= rate; scale kept elements by 1/(1-rate).
   Forward: y = dropout(x).  Backward: dx += dropout(dy) with the same seed (see cf_net_backward). */
CFDEF void cf_dropout(float *y, const float *x, size_t n, float rate, uint64_t seed) {
    float scale = rate < 1.0f ? 1.0f / (1.0f - rate) : 0.0f;
    size_t i;
    for (i = 0; i < n; i++) {
        float u = (float)(cf_hash64(seed ^ (0x9e3779b97f4a7c15ULL * (i + 1))) >> 40) * (1.0f / 16777216.0f);
        y[i] = u >= rate ? x[i] * scale : 0.0f;
    }
}

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
/* sum over (B, P) of f(x) for one channel, in float per chunk of 1024 (SIMD), chunks in double */
static double cf__bn_sum(const float *x, int B, int C, int c, size_t P, float center, int squared) {
    double s = 0.0;
    size_t r, p, R = 1024;
    int b;
    for (b = 0; b < B; b++) {
        const float *xc = x + ((size_t)b * C + c) * P;
        for (r = 0; r < P; r += R) {
            float acc = 0.0f;
            size_t e = r + R < P ? r + R : P;
            if (squared) {
                CF__OMP(omp simd reduction(+:acc))
                for (p = r; p < e; p++) acc += (xc[p] - center) * (xc[p] - center);
            } else {
                CF__OMP(omp simd reduction(+:acc))
                for (p = r; p < e; p++) acc += xc[p];
            }
            s += acc;
        }
    }
    return s;
}

/* y = gamma (x - mean) invstd + beta = a x + sh per channel: batch norm's normalizing pass,
   also what rebuilds a batch norm's output in backward (the same bits) */
static void cf__bn_apply(float *y, const float *x, const float *gamma, const float *beta,
                         const float *mean, const float *invstd, int B, int C, size_t P) {
    int c;
    CF__OMP(omp parallel for schedule(static))
    for (c = 0; c < C; c++) {
        float a = gamma[c] * invstd[c], sh = beta[c] - mean[c] * a;
        size_t p;
        int b;
        for (b = 0; b < B; b++) {
            const float *xc = x + ((size_t)b * C + c) * P;
            float *yc = y + ((size_t)b * C + c) * P;
            for (p = 0; p < P; p++) yc[p] = a * xc[p] + sh;
        }
    }
}

CFDEF void cf_bn_forward(float *y, const float *x, const float *gamma, const float *beta,
                         float *rmean, float *rvar, float *save_mean, float *save_invstd,
                         int B, int C, size_t P, int train, float momentum, float eps,
                         const cf_bn_sync *sync) {
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
            save_mean[c] = (float)mean;
            save_invstd[c] = (float)(1.0 / sqrt(var + eps));
            rmean[c] = (float)((1.0 - momentum) * rmean[c] + momentum * mean);
            rvar[c] = (float)((1.0 - momentum) * rvar[c] + momentum * (n > 1 ? var * n / (n - 1) : var));  /* unbiased */
        }
    } else {   /* the running statistics are the ones used */
        for (c = 0; c < C; c++) { save_mean[c] = rmean[c]; save_invstd[c] = (float)(1.0 / sqrt((double)rvar[c] + eps)); }
    }
    cf__bn_apply(y, x, gamma, beta, save_mean, save_invstd, B, C, P);
}

/* With xhat = (x - mean) invstd and n values per channel (train mode; the mean and variance
   depend on x):  dgamma = sum dy xhat,  dbeta = sum dy,
   dx = gamma invstd (dy - sum(dy)/n - xhat sum(dy xhat)/n), the sums over the global batch
   when synchronized.  Eval mode: the statistics are constants, dx = gamma invstd dy. */
CFDEF void cf_bn_backward(float *dx, float *dgamma, float *dbeta, const float *dy, const float *x,
                          const float *gamma, const float *mean, const float *invstd,
                          int B, int C, size_t P, int train, const cf_bn_sync *sync) {
    int c;
    double *sums = sync ? sync->work : NULL, n = (double)B * P;
    if (sync && train) {   /* the global sums of dy and dy xhat first */
        CF__OMP(omp parallel for schedule(static))
        for (c = 0; c < C; c++) {
            double sdy = 0.0, sdyx = 0.0;
            size_t p;
            int b;
            for (b = 0; b < B; b++) {
                const float *xc = x + ((size_t)b * C + c) * P, *dyc = dy + ((size_t)b * C + c) * P;
                for (p = 0; p < P; p++) { sdy += dyc[p]; sdyx += dyc[p] * ((xc[p] - mean[c]) * invstd[c]); }
            }
            dgamma[c] += (float)sdyx;   /* this rank's share; the gradient allreduce adds the rest */
            dbeta[c] += (float)sdy;
            sums[c] = sdy; sums[C + c] = sdyx;
        }
        sums[2 * C] = n;
        sync->reduce(sums, 2 * C + 1, sync->ctx);
        n = sums[2 * C];
    }
    CF__OMP(omp parallel for schedule(static))
    for (c = 0; c < C; c++) {
        double sdy = 0.0, sdyx = 0.0;
        float m = mean[c], is = invstd[c], k, k1, k2;
        size_t p;
        int b;
        if (sync && train) { sdy = sums[c]; sdyx = sums[C + c]; }
        else {
            for (b = 0; b < B; b++) {
                const float *xc = x + ((size_t)b * C + c) * P, *dyc = dy + ((size_t)b * C + c) * P;
                for (p = 0; p < P; p++) { sdy += dyc[p]; sdyx += dyc[p] * ((xc[p] - m) * is); }
            }
            dgamma[c] += (float)sdyx;
            dbeta[c] += (float)sdy;
        }
        if (!dx) continue;
        k = gamma[c] * is;
        k1 = train ? (float)(sdy / n) : 0.0f;
        k2 = train ? (float)(sdyx / n) : 0.0f;
        for (b = 0; b < B; b++) {
            const float *xc = x + ((size_t)b * C + c) * P, *dyc = dy + ((size_t)b * C + c) * P;
            float *dxc = dx + ((size_t)b * C + c) * P;
            for (p = 0; p < P; p++) dxc[p] += k * (dyc[p] - k1 - (xc[p] - m) * is * k2);
        }
    }
}

/* ---- depthwise convolution: for each output row and tap, one strided run of an input row
   (the in-bounds part computed once by cf__row_range, as in im2col). */
CFDEF void cf_dwconv_forward(float *y, const float *x, const float *w, const float *b,
                             int B, cf_shape in, cf_shape out, const cf_geom *g) {
    int C = in.c, c, KD = g->k[0], KH = g->k[1], KW = g->k[2];
    size_t iv = (size_t)in.d * in.h * in.w, ov = (size_t)out.d * out.h * out.w;
    CF__OMP(omp parallel for schedule(static))
    for (c = 0; c < C; c++) {
        const float *wc = w + (size_t)c * KD * KH * KW;
        int bi, od, oh, kd, kh, kw, t, lo, hi;
        for (bi = 0; bi < B; bi++) {
            const float *xc = x + ((size_t)bi * C + c) * iv;
            float *yc = y + ((size_t)bi * C + c) * ov;
            size_t p;
            for (p = 0; p < ov; p++) yc[p] = b ? b[c] : 0.0f;
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
    }
}

CFDEF void cf_dwconv_backward(float *dx, float *dw, float *db, const float *dy, const float *x,
                              const float *w, int B, cf_shape in, cf_shape out, const cf_geom *g) {
    int C = in.c, c, KD = g->k[0], KH = g->k[1], KW = g->k[2];
    size_t iv = (size_t)in.d * in.h * in.w, ov = (size_t)out.d * out.h * out.w;
    CF__OMP(omp parallel for schedule(static))
    for (c = 0; c < C; c++) {   /* a channel's dw and dx belong to one thread */
        const float *wc = w + (size_t)c * KD * KH * KW;
        float *dwc = dw + (size_t)c * KD * KH * KW;
        int bi, od, oh, kd, kh, kw, t, lo, hi;
        for (bi = 0; bi < B; bi++) {
            const float *xc = x + ((size_t)bi * C + c) * iv, *dyc = dy + ((size_t)bi * C + c) * ov;
            float *dxc = dx ? dx + ((size_t)bi * C + c) * iv : NULL;
            size_t p;
            if (db) { double s = 0.0; for (p = 0; p < ov; p++) s += dyc[p]; db[c] += (float)s; }
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
    size_t P = (size_t)in.d * in.h * in.w, Q = (size_t)out.d * out.h * out.w, tile = cf__tile((size_t)K, P, ws_floats), p0, q;
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
    size_t P = (size_t)in.d * in.h * in.w, Q = (size_t)out.d * out.h * out.w, tile = cf__tile((size_t)K, P, ws_floats), p0, q;
    for (bi = 0; bi < B; bi++) {
        const float *xb = x + (size_t)bi * in.c * P, *dyb = dy + (size_t)bi * out.c * Q;
        if (db) for (oc = 0; oc < out.c; oc++) { double s = 0.0; for (q = 0; q < Q; q++) s += dyb[(size_t)oc * Q + q]; db[oc] += (float)s; }
        for (p0 = 0; p0 < P; p0 += tile) {
            size_t n = P - p0 < tile ? P - p0 : tile;
            cf__im2col(col, dyb, out.c, out, in, g, p0, n);          /* (K, n) */
            /* dw (C, K) += x (C, n) x col^T (n, K);  dx (C, n) += w (C, K) x col (K, n) */
            cf_sgemm(0, 1, in.c, K, (int)n, 1.0f, xb + p0, (int)P, col, (int)n, 1.0f, dw, K);
            if (dx) cf_sgemm(0, 0, in.c, (int)n, K, 1.0f, w, K, col, (int)n, 1.0f, dx + (size_t)bi * in.c * P + p0, (int)P);
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
    for (p = 0; p < P; p++) {
        int best = 0;
        for (k = 1; k < K; k++) if (z[(size_t)k * P + p] > z[(size_t)best * P + p]) best = k;
        pred[p] = best;
    }
}

CFDEF double cf_iou_sample(const int *pred, const float *label, size_t n, int K) {
    double iou = 0.0;
    int k;
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

/* ================================================================ 4. networks */
static const char *cf__type_names[CF_L_NTYPES] = {
    "conv", "maxpool", "avgpool", "dense", "flatten", "dropout", "activation", "scale", "route", "add",
    "batchnorm", "deconv", "gap", "broadcast", "affine"
};
CFDEF const char *cf_layer_type_name(int type) {
    return type >= 0 && type < CF_L_NTYPES ? cf__type_names[type] : "?";
}

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
    int n = 0, cap = 0, line = 0;
    char *p = buf;
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
            if (!close || *cf__trim(close + 1)) { cf__free_sections(secs, n); return cf_fail("%s:%d: malformed section header '%s'", name, line, s); }
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
            if (!eq) { cf__free_sections(secs, n); return cf_fail("%s:%d: expected key=value, got '%s'", name, line, s); }
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
        if (*p == ',' || *p == 'x') p++;
        else if (*p) return -1;
    }
    return n;
}

static int cf__get_int(cf__section *s, const char *name, const char *key, int def, int lo, int hi, int *out) {
    cf__kv *kv = cf__find(s, key);
    int v[1];
    if (!kv) { *out = def; return CF_OK; }
    if (cf__ints(kv->val, v, 1) != 1) return cf_fail("%s:%d: %s=%s is not an integer", name, kv->line, key, kv->val);
    if (v[0] < lo || v[0] > hi) return cf_fail("%s:%d: %s=%d is out of range [%d, %d]", name, kv->line, key, v[0], lo, hi);
    *out = v[0];
    return CF_OK;
}

static int cf__get_float(cf__section *s, const char *name, const char *key, float def, float lo, float hi, float *out) {
    cf__kv *kv = cf__find(s, key);
    char *end;
    double v;
    if (!kv) { *out = def; return CF_OK; }
    v = strtod(kv->val, &end);
    if (end == kv->val || *end || !(v >= lo && v <= hi)) return cf_fail("%s:%d: %s=%s is not a number in [%g, %g]", name, kv->line, key, kv->val, lo, hi);
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
    else return cf_fail("%s:%d: %s=%s: give one value or one per spatial axis (%s)", name, kv->line, key, kv->val, is2d ? "HxW" : "DxHxW");
    for (i = 0; i < 3; i++) if (out[i] < lo || out[i] > 4096) return cf_fail("%s:%d: %s=%s is out of range", name, kv->line, key, kv->val);
    return CF_OK;
}

CFDEF int cf_parse_shape(const char *s, cf_shape *out) {
    int v[4], n = cf__ints(s, v, 4), i;
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
        if (!strcmp(l->pad_mode, "same")) {
            int o = (in[a] + l->g.s[a] - 1) / l->g.s[a];
            int total = (o - 1) * l->g.s[a] + span - in[a];
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
    else return cf_fail("%s:%d: pad=%s: use same, valid, N, before,after or one before,after pair per axis", name, kv->line, kv->val);
    for (i = 0; i < 6; i++) if (l->pad_spec[i] < 0 || l->pad_spec[i] > 4096) return cf_fail("%s:%d: pad=%s is out of range", name, kv->line, kv->val);
    return CF_OK;
}

static const char *cf__act_names[] = { "linear", "relu", "leaky", "tanh" };
static const char *cf__init_names[] = { "glorot_uniform", "kaiming_uniform", "kaiming_normal", "torch", "zeros" };
static const char *cf__loss_names[] = { "mse", "l1", "softmax_ce" };

/* the output shape of a layer, or the network input's for src < 0 */
static cf_shape cf__src_shape(const cf_net *net, int src) { return src < 0 ? net->input : net->layers[src].out; }

/* One section -> one layer; shapes follow from its inputs. */
static int cf__build_layer(cf_net *net, int idx, cf__section *s, const char *name) {
    cf_layer *l = &net->layers[idx];
    int is2d = net->input.d == 1, t, i, rc = CF_OK;
    for (t = 0; t < CF_L_NTYPES; t++) if (!strcmp(s->name, cf__type_names[t])) break;
    if (t == CF_L_NTYPES) return cf_fail("%s:%d: unknown section [%s]", name, s->line, s->name);
    memset(l, 0, sizeof *l);
    l->type = t; l->line = s->line; l->n_src = 1; l->src[0] = idx - 1;
    if (t == CF_L_ROUTE || t == CF_L_ADD) {
        cf__kv *kv = cf__find(s, "layers");
        char buf[256], *tok;
        int is_input[CF_MAX_SRC];
        if (!kv) return cf_fail("%s:%d: [%s] needs layers=", name, s->line, s->name);
        /* "input" names the network's input; negative numbers count back from this layer */
        snprintf(buf, sizeof buf, "%s", kv->val);
        l->n_src = 0;
        for (tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
            int v[1] = {-1}, k = l->n_src;
            while (*tok == ' ') tok++;
            if (k == CF_MAX_SRC) { l->n_src = -1; break; }
            is_input[k] = !strcmp(tok, "input");
            if (!is_input[k] && cf__ints(tok, v, 1) != 1) { l->n_src = -1; break; }
            l->src[k] = v[0];   /* the input: -1 */
            l->n_src = k + 1;
        }
        if (l->n_src < 1) return cf_fail("%s:%d: layers=%s is not a list of up to %d layer indices (or 'input')", name, kv->line, kv->val, CF_MAX_SRC);
        for (i = 0; i < l->n_src; i++) {
            if (is_input[i]) continue;
            if (l->src[i] < 0) l->src[i] += idx;   /* -1 = the previous layer */
            if (l->src[i] < 0 || l->src[i] >= idx) return cf_fail("%s:%d: layers=%s names a layer that is not before this one", name, kv->line, kv->val);
        }
    }
    l->in = l->src[0] < 0 ? net->input : net->layers[l->src[0]].out;
    l->out = l->in;
    l->groups = 1; l->act = CF_ACT_LINEAR; l->factor = 1.0f;
    switch (t) {
    case CF_L_CONV: {
        int d;
        if ((rc = cf__get_int(s, name, "filters", 0, 1, 1 << 20, &l->filters)) || (rc = cf__get_axes(s, name, "size", 1, is2d, 1, l->g.k)) ||
            (rc = cf__get_axes(s, name, "stride", 1, is2d, 1, l->g.s)) || (rc = cf__get_axes(s, name, "dilation", 1, is2d, 1, l->g.dil)) ||
            (rc = cf__parse_pad(s, name, l, is2d)) || (rc = cf__get_int(s, name, "groups", 1, 1, 1 << 20, &l->groups)) ||
            (rc = cf__get_int(s, name, "bias", 1, 0, 1, &l->has_bias)))
            return rc;
        if (!l->filters) return cf_fail("%s:%d: [conv] needs filters=", name, s->line);
        if (l->in.c % l->groups || l->filters % l->groups)
            return cf_fail("%s:%d: groups=%d does not divide %d input channels and %d filters", name, s->line, l->groups, l->in.c, l->filters);
        cf__resolve_pad(l, is2d);
        l->out.c = l->filters;
        l->out.d = cf_geom_out(&l->g, 0, l->in.d); l->out.h = cf_geom_out(&l->g, 1, l->in.h); l->out.w = cf_geom_out(&l->g, 2, l->in.w);
        d = l->in.c / l->groups * l->g.k[0] * l->g.k[1] * l->g.k[2];
        l->w_n = (size_t)l->filters * d;
        l->b_n = l->has_bias ? (size_t)l->filters : 0;
        break;
    }
    case CF_L_MAXPOOL: case CF_L_AVGPOOL:
        if ((rc = cf__get_axes(s, name, "size", 2, is2d, 1, l->g.k)) || (rc = cf__parse_pad(s, name, l, is2d))) return rc;
        for (i = 0; i < 3; i++) { l->g.s[i] = l->g.k[i]; l->g.dil[i] = 1; }
        if (cf__find(s, "stride") && (rc = cf__get_axes(s, name, "stride", 1, is2d, 1, l->g.s))) return rc;
        cf__resolve_pad(l, is2d);
        l->out.d = cf_geom_out(&l->g, 0, l->in.d); l->out.h = cf_geom_out(&l->g, 1, l->in.h); l->out.w = cf_geom_out(&l->g, 2, l->in.w);
        break;
    case CF_L_DENSE: {
        if ((rc = cf__get_int(s, name, "outputs", 0, 1, 1 << 24, &l->filters)) || (rc = cf__get_int(s, name, "bias", 1, 0, 1, &l->has_bias))) return rc;
        if (!l->filters) return cf_fail("%s:%d: [dense] needs outputs=", name, s->line);
        l->w_n = (size_t)l->filters * cf_shape_size(l->in);
        l->b_n = l->has_bias ? (size_t)l->filters : 0;
        l->out.c = l->filters; l->out.d = l->out.h = l->out.w = 1;
        break;
    }
    case CF_L_FLATTEN:
        l->out.c = (int)cf_shape_size(l->in); l->out.d = l->out.h = l->out.w = 1;
        break;
    case CF_L_DROPOUT:
        if ((rc = cf__get_float(s, name, "rate", 0.5f, 0.0f, 0.999f, &l->rate))) return rc;
        break;
    case CF_L_SCALE:
        if ((rc = cf__get_float(s, name, "factor", 1.0f, -1e30f, 1e30f, &l->factor))) return rc;
        break;
    case CF_L_ROUTE:
        l->out.c = 0;
        for (i = 0; i < l->n_src; i++) {
            cf_shape o = cf__src_shape(net, l->src[i]);
            if (o.d != l->in.d || o.h != l->in.h || o.w != l->in.w)
                return cf_fail("%s:%d: [route] inputs differ in spatial size", name, s->line);
            l->out.c += o.c;
        }
        break;
    case CF_L_ADD:
        for (i = 1; i < l->n_src; i++) {
            cf_shape o = cf__src_shape(net, l->src[i]);
            if (o.c != l->in.c || o.d != l->in.d || o.h != l->in.h || o.w != l->in.w)
                return cf_fail("%s:%d: [add] inputs differ in shape", name, s->line);
        }
        break;
    case CF_L_DECONV: {   /* output size: PyTorch's (in-1)*s - 2p + dil*(k-1) + 1 + output_padding */
        int a, io[3], oo[3];
        if ((rc = cf__get_int(s, name, "filters", 0, 1, 1 << 20, &l->filters)) || (rc = cf__get_axes(s, name, "size", 1, is2d, 1, l->g.k)) ||
            (rc = cf__get_axes(s, name, "stride", 1, is2d, 1, l->g.s)) || (rc = cf__get_axes(s, name, "dilation", 1, is2d, 1, l->g.dil)) ||
            (rc = cf__parse_pad(s, name, l, is2d)) || (rc = cf__get_axes(s, name, "output_padding", 0, is2d, 0, l->outpad)) ||
            (rc = cf__get_int(s, name, "bias", 1, 0, 1, &l->has_bias)))
            return rc;
        if (!l->filters) return cf_fail("%s:%d: [deconv] needs filters=", name, s->line);
        if (is2d) l->outpad[0] = 0;
        io[0] = l->in.d; io[1] = l->in.h; io[2] = l->in.w;
        for (a = 0; a < 3; a++) {
            int span = l->g.dil[a] * (l->g.k[a] - 1) + 1, st = l->g.s[a];
            if (l->outpad[a] && strcmp(l->pad_mode, "explicit"))
                return cf_fail("%s:%d: output_padding needs an explicit pad=", name, s->line);
            if (l->outpad[a] >= st && l->outpad[a] >= l->g.dil[a])
                return cf_fail("%s:%d: output_padding must be smaller than the stride or the dilation", name, s->line);
            if (!strcmp(l->pad_mode, "same")) {   /* TensorFlow conv2d_transpose 'same': out = in * stride */
                int total = (io[a] - 1) * st + span - io[a] * st;
                if (total < 0) total = 0;
                oo[a] = io[a] * st; l->g.pb[a] = total / 2; l->g.pa[a] = total - total / 2;
            } else {
                l->g.pb[a] = l->pad_spec[2 * a];
                l->g.pa[a] = l->pad_spec[2 * a + 1] - l->outpad[a];   /* output padding: rows not cropped at the end */
                if (l->g.pa[a] < 0) return cf_fail("%s:%d: output_padding larger than the padding after is not supported", name, s->line);
                oo[a] = (io[a] - 1) * st + span - l->g.pb[a] - l->g.pa[a];
            }
            if (is2d && a == 0) { oo[0] = 1; l->g.pb[0] = l->g.pa[0] = 0; }
        }
        l->out.c = l->filters; l->out.d = oo[0]; l->out.h = oo[1]; l->out.w = oo[2];
        l->w_n = (size_t)l->in.c * l->filters * l->g.k[0] * l->g.k[1] * l->g.k[2];
        l->b_n = l->has_bias ? (size_t)l->filters : 0;
        break;
    }
    case CF_L_BATCHNORM:
        if ((rc = cf__get_float(s, name, "momentum", 0.1f, 0.0f, 1.0f, &l->momentum)) ||
            (rc = cf__get_float(s, name, "eps", 1e-5f, 0.0f, 1.0f, &l->eps)))
            return rc;
        l->w_n = l->b_n = (size_t)l->in.c;   /* gamma, beta */
        l->s_n = 2 * (size_t)l->in.c;        /* running mean, running var */
        break;
    case CF_L_AFFINE:
        l->w_n = l->b_n = (size_t)l->in.c;   /* per-channel weight and bias */
        break;
    case CF_L_GAP:
        l->out.d = l->out.h = l->out.w = 1;
        break;
    case CF_L_BROADCAST: {
        if ((rc = cf__get_int(s, name, "like", 0, -idx, idx - 1, &l->like))) return rc;
        if (!cf__find(s, "like")) return cf_fail("%s:%d: [broadcast] needs like= (the layer whose spatial size to take)", name, s->line);
        if (l->like < 0) l->like += idx;
        if (l->like < 0 || l->like >= idx) return cf_fail("%s:%d: like= names a layer that is not before this one", name, s->line);
        if (l->in.d != 1 || l->in.h != 1 || l->in.w != 1) return cf_fail("%s:%d: [broadcast] needs an input of spatial size 1 (e.g. after [gap])", name, s->line);
        l->out.d = net->layers[l->like].out.d; l->out.h = net->layers[l->like].out.h; l->out.w = net->layers[l->like].out.w;
        break;
    }
    default: break;
    }
    /* fused or stand-alone activation */
    if (t == CF_L_CONV || t == CF_L_DENSE || t == CF_L_ACT || t == CF_L_DECONV || t == CF_L_BATCHNORM || t == CF_L_AFFINE) {
        if ((rc = cf__get_choice(s, name, "activation", cf__act_names, 4, CF_ACT_LINEAR, &l->act)) ||
            (rc = cf__get_float(s, name, "slope", 0.01f, 1e-6f, 1.0f, &l->slope)))
            return rc;
        if (l->act == CF_ACT_LEAKY && !cf__find(s, "slope"))
            return cf_fail("%s:%d: activation=leaky needs slope= (Keras uses 0.3, PyTorch 0.01)", name, s->line);
    }
    if (t == CF_L_CONV || t == CF_L_DENSE || t == CF_L_DECONV) {
        cf__kv *bi = cf__find(s, "bias_init");
        if ((rc = cf__get_choice(s, name, "init", cf__init_names, 5, CF_INIT_GLOROT_UNIFORM, &l->init)) ||
            (rc = cf__get_int(s, name, "l2", 0, 0, 1, &l->l2)))
            return rc;
        l->bias_init = CF_INIT_ZEROS;
        if (bi) {
            char *end;
            if (!strcmp(bi->val, "zeros")) l->bias_init = CF_INIT_ZEROS;
            else if (!strcmp(bi->val, "torch")) l->bias_init = CF_INIT_TORCH;
            else {
                l->bias_init = CF_INIT_CONST;
                l->bias_value = (float)strtod(bi->val, &end);
                if (end == bi->val || *end) return cf_fail("%s:%d: bias_init=%s: use zeros, torch or a number", name, bi->line, bi->val);
            }
        }
    }
    /* every key must have been understood: lookups mark what they read */
    for (i = 0; i < s->n_kv; i++)
        if (!s->kv[i].used) {
            int j, dup = 0;
            for (j = i + 1; j < s->n_kv; j++) dup |= !strcmp(s->kv[i].key, s->kv[j].key);
            return cf_fail("%s:%d: %s key '%s' in [%s]", name, s->kv[i].line, dup ? "repeated" : "unknown", s->kv[i].key, s->name);
        }
    if (!l->out.c || !l->out.d || !l->out.h || !l->out.w)
        return cf_fail("%s:%d: [%s] gets input %dx%dx%dx%d and would produce an empty output", name, s->line, s->name,
                       l->in.c, l->in.d, l->in.h, l->in.w);
    if ((double)cf_shape_size(l->out) > 2e9 || (double)l->w_n > 2e9)
        return cf_fail("%s:%d: [%s] is too large", name, s->line, s->name);
    return CF_OK;
}

/* ---- the memory plan
   One arena holds every layer's output and output gradient, each a block planned over one
   training step's timeline: the forward of layer i at time i, the loss at n, the backward
   of layer i at 2n - i.  An output lives from its forward to its last forward reader and,
   when backward reads it, on to the last backward that does: a conv, batch norm, dense or
   pool layer reads its input there, an activated layer its own output (the derivative is
   taken from y), a pool-fused conv finds its gradient in it.  A gradient lives from its last
   reader's backward (where it starts from zero) to its own layer's backward.  Blocks alive
   at the same time never share memory; the rest is reused (first fit, largest first).
   Cheap layers (batch norm, activation, add, route, ...) whose outputs backward reads are
   not kept across the step: their output is dropped after its forward readers and rebuilt
   from their inputs just before the first backward that reads it (cf_net_backward), so its
   memory serves other tensors in between.  The price is one more elementwise pass over
   those outputs.  keep_acts = 1 plans every output to live to the end of the step. */

/* what a layer's backward reads besides gradients: its input (src[0]) and/or its output */
static int cf__bwd_reads_input(const cf_layer *l) {
    switch (l->type) {
    case CF_L_CONV: case CF_L_DECONV: case CF_L_BATCHNORM: case CF_L_AFFINE: case CF_L_DENSE:
    case CF_L_MAXPOOL: case CF_L_AVGPOOL: return 1;
    default: return 0;
    }
}
static int cf__bwd_reads_output(const cf_layer *l) {
    switch (l->type) {
    case CF_L_ACT: case CF_L_MAXPOOL: case CF_L_AVGPOOL: return 1;
    case CF_L_CONV: case CF_L_DECONV: case CF_L_BATCHNORM: case CF_L_AFFINE: case CF_L_DENSE:
        return l->act != CF_ACT_LINEAR || l->pool_fused;
    default: return 0;
    }
}
/* layers whose output costs about one pass over their inputs to rebuild, changing no state
   (a depthwise conv is a direct loop over 9 taps: a few percent of its pointwise partner) */
static int cf__depthwise(const cf_layer *l);
static int cf__recomputable(const cf_layer *l) {
    switch (l->type) {
    case CF_L_BATCHNORM: case CF_L_ACT: case CF_L_ADD: case CF_L_ROUTE: case CF_L_SCALE:
    case CF_L_AFFINE: case CF_L_FLATTEN: case CF_L_DROPOUT: case CF_L_BROADCAST: return 1;
    case CF_L_CONV: return cf__depthwise(l);
    default: return 0;
    }
}

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

/* Can layer s's output be read at time t?  Yes when it is alive then, or when it can be
   rebuilt then from inputs that can (recursively): commit = 1 then moves (or adds) its
   rebuilding to t, so that it happens, in forward order, before whatever reads it. */
static int cf__available(cf_net *net, cf__blk *blk, int s, int t, int commit) {
    cf_layer *l = &net->layers[s];
    cf__blk *b = &blk[2 * s];
    int k, n = net->n_layers;
    if (cf__blk_alive(b, t)) return 1;
    if (net->keep_acts || !cf__recomputable(l) || s == n - 1 || t <= n || (b->n == 2 && t > b->t[2])) return 0;
    for (k = 0; k < l->n_src; k++) if (l->src[k] >= 0 && !cf__available(net, blk, l->src[k], t, commit)) return 0;
    if (commit) {
        if (b->n == 1) { b->n = 2; b->t[3] = t; }
        b->t[2] = t;
        l->recompute_at = 2 * n - t;
    }
    return 1;
}

/* Fills y_off, dy_off, recompute_at and fwd_end for net->batch; returns the arena size in
   floats, or (size_t)-1 when out of memory. */
static size_t cf__plan_memory(cf_net *net) {
    int n = net->n_layers, i, j, k, T = 2 * n + 1;   /* T: after the whole step */
    cf__blk *blk = CF__NEW(cf__blk, 2 * n);          /* 2i: output of layer i, 2i + 1: its gradient */
    int *order = CF__NEW(int, 2 * n), *hit = CF__NEW(int, 2 * n);
    size_t total = 0;
    if (!blk || !order || !hit) { CF_FREE(blk); CF_FREE(order); CF_FREE(hit); return (size_t)-1; }
    for (i = 0; i < n; i++) {
        cf_layer *l = &net->layers[i];
        cf__blk *o = &blk[2 * i], *g = &blk[2 * i + 1];
        int first = -1, last = -1;   /* the first and last backward times that read the output */
        if (cf__bwd_reads_output(l)) first = last = 2 * n - i;
        for (j = i + 1; j < n; j++) {
            const cf_layer *c = &net->layers[j];
            if (c->n_src && c->src[0] == i && cf__bwd_reads_input(c)) {
                if (first < 0 || 2 * n - j < first) first = 2 * n - j;
                if (2 * n - j > last) last = 2 * n - j;
            }
        }
        o->size = cf_shape_size(l->out) * net->batch;
        o->n = 1; o->t[0] = i; o->t[1] = l->last_use;   /* last_use = n for the output layer: the loss */
        l->recompute_at = -1;
        if (net->keep_acts) o->t[1] = T;
        else if (first >= 0 && cf__recomputable(l) && i < n - 1) {
            int ok = 1;   /* rebuilt from its inputs: they must be there then */
            for (k = 0; k < l->n_src; k++) if (l->src[k] >= 0 && !cf__available(net, blk, l->src[k], first, 0)) ok = 0;
            for (k = 0; k < l->n_src && ok; k++) if (l->src[k] >= 0) cf__available(net, blk, l->src[k], first, 1);
            if (ok) { o->n = 2; o->t[2] = first; o->t[3] = last; l->recompute_at = 2 * n - first; }
            else o->t[1] = last;
        } else if (last > o->t[1]) o->t[1] = last;
        l->fwd_end = o->t[1];
        g->size = l->pool_fused ? 0 : cf_shape_size(l->out) * net->batch;   /* fused: in the output */
        g->n = 1; g->t[0] = 2 * n - (l->last_use < n - 1 ? l->last_use : n - 1); g->t[1] = 2 * n - i;
    }
    for (i = 0; i < 2 * n; i++) order[i] = i;
    for (i = 1; i < 2 * n; i++) {   /* largest first (insertion sort: stable, n is small) */
        int v = order[i];
        for (j = i; j > 0 && blk[order[j - 1]].size < blk[v].size; j--) order[j] = order[j - 1];
        order[j] = v;
    }
    for (i = 0; i < 2 * n; i++) {   /* order[0..i) are placed */
        cf__blk *b = &blk[order[i]];
        int nh = 0;
        size_t off = 0;
        if (b->size) {
            for (j = 0; j < i; j++) if (cf__blk_meet(b, &blk[order[j]])) hit[nh++] = order[j];
            for (j = 1; j < nh; j++) {   /* the placed blocks alive with this one, by offset */
                int v = hit[j];
                for (k = j; k > 0 && blk[hit[k - 1]].off > blk[v].off; k--) hit[k] = hit[k - 1];
                hit[k] = v;
            }
            for (j = 0; j < nh; j++) {   /* the lowest gap that fits */
                const cf__blk *h = &blk[hit[j]];
                if (off + b->size <= h->off) break;
                if (h->off + h->size > off) off = h->off + h->size;
            }
        }
        b->off = off;
        if (off + b->size > total) total = off + b->size;
    }
    for (i = 0; i < n; i++) { net->layers[i].y_off = blk[2 * i].off; net->layers[i].dy_off = blk[2 * i + 1].off; }
    CF_FREE(blk); CF_FREE(order); CF_FREE(hit);
    return total;
}

/* Conv + max pool (CosmoFlow's pattern, where the conv outputs are the largest tensors): the
   pool's backward puts dy[o] at its window's first maximum and 0 elsewhere, and the conv's
   activation backward then multiplies by act'(y), which at that maximum is act'(pool output).
   When the pool is the conv's only reader and its windows are disjoint and inside (each conv
   output read by one window), the pool's backward can write that product straight over the
   conv's output, which backward no longer needs: the conv's gradient buffer (for CosmoFlow's
   first layer 256 MiB per sample), its zeroing and the activation pass disappear, and the
   gradients are bit for bit those of the separate passes.  Off with net->keep_acts (which
   keeps every output and gradient apart) or net->no_fuse. */
static void cf__plan_fusion(cf_net *net, int allow) {
    int i, j, a;
    for (i = 0; i < net->n_layers; i++) {
        cf_layer *l = &net->layers[i], *p;
        int readers = 0, ok;
        l->pool_fused = 0;
        if (!allow || l->type != CF_L_CONV || l->last_use >= net->n_layers) continue;
        for (j = i + 1; j < net->n_layers; j++) for (a = 0; a < net->layers[j].n_src; a++) readers += net->layers[j].src[a] == i;
        p = &net->layers[l->last_use];
        ok = readers == 1 && p->type == CF_L_MAXPOOL && p->n_src == 1;
        for (a = 0; a < 3 && ok; a++) ok = p->g.k[a] == p->g.s[a] && p->g.dil[a] == 1 && p->g.pb[a] == 0 && p->g.pa[a] == 0;
        l->pool_fused = ok;
    }
}

CFDEF int cf_net_set_batch(cf_net *net, int B) {
    int allow = !net->no_fuse && !net->keep_acts, flags = allow | net->keep_acts << 1;
    size_t na;
    if (B < 1) return cf_fail("batch %d < 1", B);
    if (B == net->batch && net->acts && flags == net->plan_flags) return CF_OK;
    cf__plan_fusion(net, allow);
    /* offsets depend on B; memory is only reallocated when it has to grow, so a smaller
       last batch (validation) costs no allocation */
    net->batch = B;
    na = cf__plan_memory(net);
    if (na == (size_t)-1) { net->batch = 0; return CF_ERR; }
    if (na > net->cap_acts) {
        CF_FREE(net->acts);
        net->dacts = NULL;
        if (!(net->acts = CF__NEW(float, na))) { net->batch = 0; net->cap_acts = 0; return CF_ERR; }
        net->cap_acts = na;
    }
    net->dacts = net->acts;
    net->n_acts = na;
    net->plan_flags = flags;
    return CF_OK;
}

CFDEF size_t cf_net_arena_floats(cf_net *net, int B, int keep_acts) {
    int keep = net->keep_acts, batch = net->batch;
    size_t na;
    net->keep_acts = keep_acts; net->batch = B < 1 ? 1 : B;
    cf__plan_fusion(net, !net->no_fuse && !keep_acts);
    na = cf__plan_memory(net);
    net->keep_acts = keep; net->batch = batch;
    net->plan_flags = -1;   /* the layers now hold this plan: the next forward plans anew */
    return na;
}

CFDEF int cf_net_sync_bn(cf_net *net, void (*reduce)(double *buf, int n, void *ctx), void *ctx) {
    int i, C = 0;
    CF_FREE(net->bn_sync.work);
    memset(&net->bn_sync, 0, sizeof net->bn_sync);
    if (!reduce) return CF_OK;
    for (i = 0; i < net->n_layers; i++) if (net->layers[i].type == CF_L_BATCHNORM && net->layers[i].in.c > C) C = net->layers[i].in.c;
    if (!(net->bn_sync.work = CF__NEW(double, 2 * C + 1))) return CF_ERR;
    net->bn_sync.reduce = reduce; net->bn_sync.ctx = ctx;
    return CF_OK;
}

CFDEF void cf_net_free(cf_net *net) {
    CF_FREE(net->bn_sync.work);
    CF_FREE(net->cfg_text); CF_FREE(net->cfg_name); CF_FREE(net->layers);
    CF_FREE(net->params); CF_FREE(net->grads); CF_FREE(net->opt);
    CF_FREE(net->stats); CF_FREE(net->bn_save);
    CF_FREE(net->acts); CF_FREE(net->ws);   /* dacts is the same arena */
    memset(net, 0, sizeof *net);
}

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
    if (K < 2 || K > CF_MAX_CLASSES) return cf_fail("%s: loss=softmax_ce needs 2 to %d output channels (classes), the last layer has %d", name, CF_MAX_CLASSES, K);
    for (k = 0; k < K; k++) net->class_w[k] = 1.0f;
    if ((!kv && K == 3) || (kv && !strcmp(kv->val, "reference"))) {
        if (K != 3) return cf_fail("%s:%d: class_weights=reference is for 3 classes; the model has %d", name, kv->line, K);
        for (k = 0; k < 3; k++) net->class_w[k] = (float)pow(freq[k], -0.125);
    } else if (kv && strcmp(kv->val, "uniform")) {
        const char *p = kv->val;
        for (k = 0; k < K; k++) {
            char *end;
            double v = strtod(p, &end);
            if (end == p || !(v >= 0 && v < 1e6)) break;
            net->class_w[k] = (float)v;
            p = end; while (*p == ' ') p++;
            if (*p == ',') p++;
        }
        if (k != K || *p) return cf_fail("%s:%d: class_weights=%s: give reference, uniform or %d non-negative numbers", name, kv->line, kv->val, K);
    }
    return CF_OK;
}

CFDEF int cf_net_parse(cf_net *net, const char *text, const char *name, const cf_shape *shape_override) {
    cf__section *secs = NULL;
    int n_secs = 0, i, rc;
    char *buf = cf__strdup(text);
    size_t off = 0;
    memset(net, 0, sizeof *net);
    if (!buf) return CF_ERR;
    rc = cf__split(buf, name, &secs, &n_secs);
    if (rc) { CF_FREE(buf); return rc; }
    if (!n_secs || strcmp(secs[0].name, "net")) { rc = cf_fail("%s:%d: the first section must be [net]", name, n_secs ? secs[0].line : 1); goto done; }
    {
        cf__kv *in = cf__find(&secs[0], "input");
        if (!in) { rc = cf_fail("%s:%d: [net] needs input=CxDxHxW", name, secs[0].line); goto done; }
        if (cf_parse_shape(in->val, &net->input)) { rc = cf_fail("%s:%d: input=%s: %s", name, in->line, in->val, cf_failure_reason()); goto done; }
        if ((rc = cf__get_choice(&secs[0], name, "loss", cf__loss_names, 3, CF_LOSS_MSE, &net->loss))) goto done;
        if (cf__find(&secs[0], "class_weights") && net->loss != CF_LOSS_SOFTMAX_CE) { rc = cf_fail("%s: class_weights= needs loss=softmax_ce", name); goto done; }
        for (i = 0; i < secs[0].n_kv; i++)
            if (!secs[0].kv[i].used) { rc = cf_fail("%s:%d: unknown key '%s' in [net]", name, secs[0].kv[i].line, secs[0].kv[i].key); goto done; }
        if (shape_override) {
            if ((shape_override->d == 1) != (net->input.d == 1) || shape_override->c != net->input.c) {
                rc = cf_fail("%s: --input-shape %dx%dx%dx%d does not fit the model's input %dx%dx%dx%d (same channels and dimensionality needed)",
                             name, shape_override->c, shape_override->d, shape_override->h, shape_override->w,
                             net->input.c, net->input.d, net->input.h, net->input.w);
                goto done;
            }
            net->input = *shape_override;
        }
    }
    net->n_layers = n_secs - 1;
    if (net->n_layers < 1) { rc = cf_fail("%s: no layers after [net]", name); goto done; }
    net->layers = CF__NEW(cf_layer, net->n_layers);
    if (!net->layers) { rc = CF_ERR; goto done; }
    for (i = 0; i < net->n_layers; i++) {
        cf_layer *l;
        int j;
        if ((rc = cf__build_layer(net, i, &secs[i + 1], name))) goto done;
        l = &net->layers[i];
        l->last_use = -1;
        for (j = 0; j < l->n_src; j++) if (l->src[j] >= 0) net->layers[l->src[j]].last_use = i;
        if (l->w_n) { l->w_off = off; off += l->w_n; }
        if (l->b_n) { l->b_off = off; off += l->b_n; }
        if (l->s_n) { l->s_off = net->n_stats; net->n_stats += l->s_n; }
    }
    net->layers[net->n_layers - 1].last_use = net->n_layers;  /* the loss reads the output */
    for (i = 0; i < net->n_layers; i++) if (net->layers[i].last_use < 0) net->layers[i].last_use = i;
    net->n_outputs = (int)cf_shape_size(net->layers[net->n_layers - 1].out);
    net->n_params = off;
    net->params = CF__NEW(float, off); net->grads = CF__NEW(float, off); net->opt = CF__NEW(float, 2 * off);
    net->stats = CF__NEW(float, net->n_stats + 1); net->bn_save = CF__NEW(float, net->n_stats + 1);
    net->n_targets = net->n_outputs;
    if (net->loss == CF_LOSS_SOFTMAX_CE && (rc = cf__class_weights(net, &secs[0], name))) goto done;
    net->cfg_text = cf__strdup(text); net->cfg_name = cf__strdup(name);
    {   /* workspace: the largest im2col tile any conv needs, capped by CF_WS_FLOATS */
        size_t ws = 1;
        for (i = 0; i < net->n_layers; i++) {
            cf_layer *l = &net->layers[i];
            size_t kvol = (size_t)l->g.k[0] * l->g.k[1] * l->g.k[2];
            if (l->type == CF_L_CONV) {
                size_t rows = (size_t)l->in.c / l->groups * kvol;
                size_t need = rows * cf__tile(rows, (size_t)l->out.d * l->out.h * l->out.w, CF_WS_FLOATS);
                if (need > ws) ws = need;
            }
            if (l->type == CF_L_DECONV) {   /* col rows: output channels x taps, over input positions */
                size_t rows = (size_t)l->out.c * kvol;
                size_t need = rows * cf__tile(rows, (size_t)l->in.d * l->in.h * l->in.w, CF_WS_FLOATS);
                if (need > ws) ws = need;
            }
        }
        net->ws_floats = ws;
        net->ws = CF__NEW(float, 2 * ws);
    }
    if (!net->params || !net->grads || !net->opt || !net->stats || !net->bn_save || !net->cfg_text || !net->cfg_name || !net->ws) rc = CF_ERR;
    net->seed = 0;
done:
    if (secs) for (i = 0; i < n_secs; i++) CF_FREE(secs[i].kv);
    CF_FREE(secs); CF_FREE(buf);
    if (rc) { char keep[1024]; memcpy(keep, cf__err, sizeof keep); cf_net_free(net); memcpy(cf__err, keep, sizeof keep); }
    return rc;
}

static char *cf__read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    char *buf;
    long n;
    if (!f) { cf_fail("%s: %s", path, strerror(errno)); return NULL; }
    if (fseek(f, 0, SEEK_END) || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET)) { fclose(f); cf_fail("%s: cannot read (not a regular file?)", path); return NULL; }
    if (n > (64L << 20)) { fclose(f); cf_fail("%s: %ld bytes is too large for a text file", path, n); return NULL; }
    buf = CF__NEW(char, (size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) { CF_FREE(buf); buf = NULL; cf_fail("%s: read error", path); }
    fclose(f);
    if (buf && strlen(buf) != (size_t)n) { CF_FREE(buf); cf_fail("%s: contains a NUL byte: not a text file", path); return NULL; }
    return buf;
}

CFDEF int cf_net_load_cfg(cf_net *net, const char *path, const cf_shape *shape_override) {
    char *text = cf__read_text(path);
    int rc;
    if (!text) return CF_ERR;
    rc = cf_net_parse(net, text, path, shape_override);
    CF_FREE(text);
    return rc;
}

/* fan_in / fan_out as PyTorch computes them: (C/groups)*kvol and OC*kvol */
static void cf__init_tensor(float *p, size_t n, int kind, double fan_in, double fan_out, float value, cf_rng *r) {
    size_t i;
    double a;
    switch (kind) {
    case CF_INIT_GLOROT_UNIFORM: a = sqrt(6.0 / (fan_in + fan_out)); for (i = 0; i < n; i++) p[i] = (float)((2.0 * cf_rng_uniform64(r) - 1.0) * a); break;
    case CF_INIT_KAIMING_UNIFORM: a = sqrt(6.0 / fan_in); for (i = 0; i < n; i++) p[i] = (float)((2.0 * cf_rng_uniform64(r) - 1.0) * a); break;
    case CF_INIT_KAIMING_NORMAL: a = sqrt(2.0 / fan_in); for (i = 0; i < n; i++) p[i] = (float)(cf_rng_normal(r) * a); break;
    case CF_INIT_TORCH: a = 1.0 / sqrt(fan_in); for (i = 0; i < n; i++) p[i] = (float)((2.0 * cf_rng_uniform64(r) - 1.0) * a); break;
    case CF_INIT_CONST: for (i = 0; i < n; i++) p[i] = value; break;
    default: for (i = 0; i < n; i++) p[i] = 0.0f; break;
    }
}

CFDEF void cf_net_init(cf_net *net, uint64_t seed) {
    int i;
    net->seed = seed;
    for (i = 0; i < net->n_layers; i++) {
        cf_layer *l = &net->layers[i];
        /* each layer's own stream: inserting a layer does not change the others' weights */
        cf_rng r = cf_rng_seed(cf_hash64(seed * 0x100000001b3ULL + (uint64_t)i));
        double kvol = (double)l->g.k[0] * l->g.k[1] * l->g.k[2], fan_in, fan_out;
        if (l->type == CF_L_BATCHNORM || l->type == CF_L_AFFINE) {   /* identity: scale 1, shift 0 */
            size_t c;
            for (c = 0; c < l->w_n; c++) { net->params[l->w_off + c] = 1.0f; net->params[l->b_off + c] = 0.0f; }
            for (c = 0; c < l->s_n / 2; c++) { net->stats[l->s_off + c] = 0.0f; net->stats[l->s_off + l->s_n / 2 + c] = 1.0f; }
            continue;
        }
        if (!l->w_n) continue;
        if (l->type == CF_L_CONV) { fan_in = (double)l->in.c / l->groups * kvol; fan_out = (double)l->filters * kvol; }
        else if (l->type == CF_L_DECONV) { fan_in = (double)l->filters * kvol; fan_out = (double)l->in.c * kvol; }  /* PyTorch: weight.size(1) * kvol */
        else { fan_in = (double)cf_shape_size(l->in); fan_out = l->filters; }
        cf__init_tensor(net->params + l->w_off, l->w_n, l->init, fan_in, fan_out, 0.0f, &r);
        if (l->b_n) cf__init_tensor(net->params + l->b_off, l->b_n, l->bias_init, fan_in, fan_out, l->bias_value, &r);
    }
    memset(net->opt, 0, 2 * net->n_params * sizeof(float));
}

CFDEF float *cf_net_output(cf_net *net, int layer) { return net->acts + net->layers[layer].y_off; }

static const float *cf__in(cf_net *net, int src) { return src < 0 ? net->x : net->acts + net->layers[src].y_off; }

static uint64_t cf__dropout_seed(const cf_net *net, int layer) {
    return cf_hash64(net->seed ^ cf_hash64(net->step * 1000003ULL + (uint64_t)layer + 1));
}

/* groups = in channels = out channels: the direct depthwise kernel instead of im2col + GEMM */
static int cf__depthwise(const cf_layer *l) { return l->groups > 1 && l->groups == l->in.c && l->filters == l->in.c; }

static void cf__forward_layer(cf_net *net, int i) {
    cf_layer *l = &net->layers[i];
    int B = net->batch, j;
    const float *x = cf__in(net, l->src[0]);
    float *y = net->acts + l->y_off;
    float *W = net->params + l->w_off, *bias = l->b_n ? net->params + l->b_off : NULL;
    size_t n_in = cf_shape_size(l->in) * B, n_out = cf_shape_size(l->out) * B, k;
    switch (l->type) {
    case CF_L_CONV:
        if (cf__depthwise(l)) cf_dwconv_forward(y, x, W, bias, B, l->in, l->out, &l->g);
        else { cf_conv_forward_act(y, x, W, bias, B, l->in, l->out, &l->g, l->groups, net->ws, net->ws_floats, l->act, l->slope); break; }
        cf_act_forward(y, n_out, l->act, l->slope);
        break;
    case CF_L_DECONV:
        cf_deconv_forward(y, x, W, bias, B, l->in, l->out, &l->g, net->ws, net->ws_floats);
        cf_act_forward(y, n_out, l->act, l->slope);
        break;
    case CF_L_BATCHNORM: {
        float *st = net->stats + l->s_off, *sv = net->bn_save + l->s_off;
        int C = l->in.c;
        if (net->recomputing)   /* the statistics of this step's forward; no running-stat move */
            cf__bn_apply(y, x, W, bias, sv, sv + C, B, C, cf_shape_size(l->in) / C);
        else cf_bn_forward(y, x, W, bias, st, st + C, sv, sv + C, B, C, cf_shape_size(l->in) / C, net->bn_train, l->momentum,
                           l->eps, net->bn_sync.reduce ? &net->bn_sync : NULL);
        cf_act_forward(y, n_out, l->act, l->slope);
        break;
    }
    case CF_L_AFFINE: {
        size_t P = cf_shape_size(l->in) / l->in.c;
        for (k = 0; k < n_out; k++) { size_t c = k / P % l->in.c; y[k] = W[c] * x[k] + bias[c]; }
        cf_act_forward(y, n_out, l->act, l->slope);
        break;
    }
    case CF_L_GAP: {   /* (B, C, P) -> (B, C) means */
        size_t P = cf_shape_size(l->in) / l->in.c, p;
        for (k = 0; k < n_out; k++) { double s = 0.0; for (p = 0; p < P; p++) s += x[k * P + p]; y[k] = (float)(s / P); }
        break;
    }
    case CF_L_BROADCAST: {   /* (B, C) -> (B, C, P): every position gets its channel's value */
        size_t P = cf_shape_size(l->out) / l->out.c, p;
        for (k = 0; k < n_in; k++) for (p = 0; p < P; p++) y[k * P + p] = x[k];
        break;
    }
    case CF_L_MAXPOOL: case CF_L_AVGPOOL:
        cf_pool_forward(y, x, B, l->in, l->out, &l->g, l->type == CF_L_MAXPOOL);
        break;
    case CF_L_DENSE:
        cf_dense_forward(y, x, W, bias, B, (int)cf_shape_size(l->in), l->filters);
        cf_act_forward(y, n_out, l->act, l->slope);
        break;
    case CF_L_FLATTEN: memcpy(y, x, n_in * sizeof(float)); break;
    case CF_L_DROPOUT:
        if (net->training && l->rate > 0.0f) cf_dropout(y, x, n_in, l->rate, cf__dropout_seed(net, i));
        else memcpy(y, x, n_in * sizeof(float));
        break;
    case CF_L_ACT: memcpy(y, x, n_in * sizeof(float)); cf_act_forward(y, n_out, l->act, l->slope); break;
    case CF_L_SCALE: for (k = 0; k < n_out; k++) y[k] = l->factor * x[k]; break;
    case CF_L_ROUTE: {   /* concatenate channels, sample by sample */
        int b;
        for (b = 0; b < B; b++) {
            float *dst = y + (size_t)b * cf_shape_size(l->out);
            for (j = 0; j < l->n_src; j++) {
                cf_shape s = cf__src_shape(net, l->src[j]);
                size_t m = cf_shape_size(s);
                memcpy(dst, cf__in(net, l->src[j]) + (size_t)b * m, m * sizeof(float));
                dst += m;
            }
        }
        break;
    }
    case CF_L_ADD:
        memcpy(y, x, n_out * sizeof(float));
        for (j = 1; j < l->n_src; j++) { const float *o = cf__in(net, l->src[j]); for (k = 0; k < n_out; k++) y[k] += o[k]; }
        break;
    default: CF_ASSERT(0);
    }
}

CFDEF const float *cf_net_forward_from(cf_net *net, int first) {
    int i;
    net->acts_clobbered = 0;
    for (i = first; i < net->n_layers; i++) {
        if (net->layer_hook) net->layer_hook(net, i, 0, net->layer_ctx);
        cf__forward_layer(net, i);
        if (net->layer_hook) net->layer_hook(net, i, 1, net->layer_ctx);
    }
    return net->acts + net->layers[net->n_layers - 1].y_off;
}

CFDEF const float *cf_net_forward(cf_net *net, const float *x, int B) {
    if (cf_net_set_batch(net, B)) return NULL;
    net->x = x;
    return cf_net_forward_from(net, 0);
}

static void cf__backward_layer(cf_net *net, int i) {
    cf_layer *l = &net->layers[i];
    int B = net->batch, j;
    /* a fused conv finds its pre-activation gradient over its output (cf__plan_fusion) */
    float *dy = l->pool_fused ? net->acts + l->y_off : net->dacts + l->dy_off;
    const float *y = net->acts + l->y_off, *x = cf__in(net, l->src[0]);
    float *dx = l->src[0] >= 0 ? net->dacts + net->layers[l->src[0]].dy_off : NULL;  /* no gradient for the input */
    float *W = net->params + l->w_off, *dW = net->grads + l->w_off, *db = l->b_n ? net->grads + l->b_off : NULL;
    size_t n_out = cf_shape_size(l->out) * B, k;
    switch (l->type) {
    case CF_L_CONV:
        if (!l->pool_fused) cf_act_backward(dy, y, n_out, l->act, l->slope);
        if (cf__depthwise(l)) cf_dwconv_backward(dx, dW, db, dy, x, W, B, l->in, l->out, &l->g);
        else {   /* the hook's phase 4 separates backward-weights from backward-data (cf-bench) */
            cf_conv_backward_weights(dW, db, dy, x, B, l->in, l->out, &l->g, l->groups, net->ws, net->ws_floats);
            if (net->layer_hook) net->layer_hook(net, i, 4, net->layer_ctx);
            if (dx) cf_conv_backward_data(dx, dy, W, B, l->in, l->out, &l->g, l->groups, net->ws + net->ws_floats, net->ws_floats);
        }
        break;
    case CF_L_DECONV:
        cf_act_backward(dy, y, n_out, l->act, l->slope);
        cf_deconv_backward(dx, dW, db, dy, x, W, B, l->in, l->out, &l->g, net->ws, net->ws_floats);
        break;
    case CF_L_BATCHNORM: {
        int C = l->in.c;
        float *mean = net->bn_save + l->s_off, *inv = mean + C;
        cf_act_backward(dy, y, n_out, l->act, l->slope);   /* mean, inv: what forward used */
        cf_bn_backward(dx, dW, db, dy, x, W, mean, inv, B, C, cf_shape_size(l->in) / C, net->bn_train,
                       net->bn_sync.reduce ? &net->bn_sync : NULL);
        break;
    }
    case CF_L_AFFINE: {
        size_t P = cf_shape_size(l->in) / l->in.c;
        cf_act_backward(dy, y, n_out, l->act, l->slope);
        for (k = 0; k < n_out; k++) {
            size_t c = k / P % l->in.c;
            dW[c] += dy[k] * x[k]; db[c] += dy[k];
            if (dx) dx[k] += W[c] * dy[k];
        }
        break;
    }
    case CF_L_GAP: {
        size_t P = cf_shape_size(l->in) / l->in.c, p;
        if (dx) for (k = 0; k < n_out; k++) for (p = 0; p < P; p++) dx[k * P + p] += dy[k] / (float)P;
        break;
    }
    case CF_L_BROADCAST: {
        size_t P = cf_shape_size(l->out) / l->out.c, p, n_in = cf_shape_size(l->in) * B;
        if (dx) for (k = 0; k < n_in; k++) { double s = 0.0; for (p = 0; p < P; p++) s += dy[k * P + p]; dx[k] += (float)s; }
        break;
    }
    case CF_L_MAXPOOL: case CF_L_AVGPOOL:
        if (l->src[0] >= 0 && net->layers[l->src[0]].pool_fused) {
            const cf_layer *s = &net->layers[l->src[0]];
            cf__maxpool_backward_fused(net->acts + s->y_off, dy, y, B, l->in, l->out, &l->g, s->act, s->slope);
        } else if (dx) cf_pool_backward(dx, dy, x, y, B, l->in, l->out, &l->g, l->type == CF_L_MAXPOOL);
        break;
    case CF_L_DENSE:
        cf_act_backward(dy, y, n_out, l->act, l->slope);
        cf_dense_backward(dx, dW, db, dy, x, W, B, (int)cf_shape_size(l->in), l->filters);
        break;
    case CF_L_ACT:
        cf_act_backward(dy, y, n_out, l->act, l->slope);
        if (dx) for (k = 0; k < n_out; k++) dx[k] += dy[k];
        break;
    case CF_L_FLATTEN: if (dx) for (k = 0; k < n_out; k++) dx[k] += dy[k]; break;
    case CF_L_DROPOUT:
        if (!dx) break;
        if (net->training && l->rate > 0.0f) {
            cf_dropout(dy, dy, n_out, l->rate, cf__dropout_seed(net, i));  /* same mask, same scale */
        }
        for (k = 0; k < n_out; k++) dx[k] += dy[k];
        break;
    case CF_L_SCALE: if (dx) for (k = 0; k < n_out; k++) dx[k] += l->factor * dy[k]; break;
    case CF_L_ROUTE: {
        int b;
        for (b = 0; b < B; b++) {
            const float *src = dy + (size_t)b * cf_shape_size(l->out);
            for (j = 0; j < l->n_src; j++) {
                size_t m = cf_shape_size(cf__src_shape(net, l->src[j]));
                if (l->src[j] >= 0) {   /* no gradient for the network input */
                    float *d = net->dacts + net->layers[l->src[j]].dy_off + (size_t)b * m;
                    for (k = 0; k < m; k++) d[k] += src[k];
                }
                src += m;
            }
        }
        break;
    }
    case CF_L_ADD:
        for (j = 0; j < l->n_src; j++) {
            float *d;
            if (l->src[j] < 0) continue;   /* the network input */
            d = net->dacts + net->layers[l->src[j]].dy_off;
            for (k = 0; k < n_out; k++) d[k] += dy[k];
        }
        break;
    default: CF_ASSERT(0);
    }
}

CFDEF void cf_net_backward(cf_net *net, const float *dout) {
    int i, j, n = net->n_layers;
    /* the plan is the one the forward used (a flag changed since takes effect at the next
       forward): the outputs backward reads are where that forward put them */
    for (i = n - 1; i >= 0; i--) {
        /* a gradient's life begins at its last consumer's step (the output's at the first
           step); it is accumulated, so it starts from zero */
        for (j = 0; j < n; j++) {
            int start = net->layers[j].last_use < n - 1 ? net->layers[j].last_use : n - 1;
            if (start == i && !net->layers[j].pool_fused)
                memset(net->dacts + net->layers[j].dy_off, 0, cf_shape_size(net->layers[j].out) * net->batch * sizeof(float));
        }
        net->acts_clobbered = 1;
        if (i == n - 1) memcpy(net->dacts + net->layers[i].dy_off, dout, (size_t)net->n_outputs * net->batch * sizeof(float));
        if (net->backward_hook) net->backward_hook(net, i, net->hook_ctx);
        if (net->layer_hook) net->layer_hook(net, i, 2, net->layer_ctx);
        /* outputs dropped after forward that this layer's backward is the first to read are
           rebuilt from their inputs, in forward order (cf__plan_memory) */
        for (j = 0; j <= i; j++)
            if (net->layers[j].recompute_at == i) { net->recomputing = 1; cf__forward_layer(net, j); net->recomputing = 0; }
        cf__backward_layer(net, i);
        if (net->layer_hook) net->layer_hook(net, i, 3, net->layer_ctx);
    }
}

CFDEF void cf_net_zero_grad(cf_net *net) { memset(net->grads, 0, net->n_params * sizeof(float)); }

CFDEF double cf_net_loss(cf_net *net, const float *target, float *dout) {
    const float *y = net->acts + net->layers[net->n_layers - 1].y_off;
    size_t n = (size_t)net->n_outputs * net->batch;
    if (net->loss == CF_LOSS_SOFTMAX_CE) {
        const cf_layer *l = &net->layers[net->n_layers - 1];
        return cf_loss_softmax_ce(dout, y, target, net->class_w, net->batch, l->out.c, (size_t)net->n_targets);
    }
    return net->loss == CF_LOSS_L1 ? cf_loss_l1(dout, y, target, n) : cf_loss_mse(dout, y, target, n);
}

CFDEF double cf_layer_flops(const cf_layer *l) {
    double P = (double)l->out.d * l->out.h * l->out.w;
    switch (l->type) {
    case CF_L_CONV: return 2.0 * l->in.c / l->groups * l->g.k[0] * l->g.k[1] * l->g.k[2] * l->out.c * P;
    case CF_L_DENSE: return 2.0 * (double)cf_shape_size(l->in) * l->filters;
    case CF_L_DECONV: return 2.0 * (double)cf_shape_size(l->in) * l->out.c * l->g.k[0] * l->g.k[1] * l->g.k[2];
    case CF_L_MAXPOOL: case CF_L_AVGPOOL: return (double)l->g.k[0] * l->g.k[1] * l->g.k[2] * cf_shape_size(l->out);
    default: return (double)cf_shape_size(l->out);
    }
}

static int cf__all_finite(const float *p, size_t n) {
    size_t i;
    float acc = 0.0f;
    for (i = 0; i < n; i++) acc += p[i] * 0.0f;   /* NaN or Inf anywhere makes it NaN */
    return acc == 0.0f;
}
CFDEF int cf_net_first_nonfinite_output(const cf_net *net) {
    int i, keep = net->plan_flags & 2;   /* the plan the last forward used */
    for (i = 0; i < net->n_layers; i++) {
        const cf_layer *l = &net->layers[i];
        /* only outputs that are still there: all of them with keep_acts, otherwise those
           alive at the end of the forward, and none after a backward */
        if (!keep && (net->acts_clobbered || l->fwd_end < net->n_layers - 1)) continue;
        if (!cf__all_finite(net->acts + l->y_off, cf_shape_size(l->out) * net->batch)) return i;
    }
    return -1;
}
CFDEF int cf_net_first_nonfinite_param(const cf_net *net, int params) {
    const float *base = params ? net->params : net->grads;
    int i;
    for (i = 0; i < net->n_layers; i++) {
        const cf_layer *l = &net->layers[i];
        if ((l->w_n && !cf__all_finite(base + l->w_off, l->w_n)) || (l->b_n && !cf__all_finite(base + l->b_off, l->b_n))) return i;
    }
    return -1;
}

CFDEF int cf_net_tensors(const cf_net *net, cf_tensor *out, int max) {
    int i, n = 0, is2d = net->input.d == 1;
    for (i = 0; i < net->n_layers; i++) {
        const cf_layer *l = &net->layers[i];
        cf_tensor t;
        int bn = l->type == CF_L_BATCHNORM, k;
        if (!l->w_n) continue;
        memset(&t, 0, sizeof t);
        t.layer = i; t.kind = bn ? "gamma" : "weight"; t.off = l->w_off; t.n = l->w_n;
        if (l->type == CF_L_CONV || l->type == CF_L_DECONV) {
            /* conv (OC, C/groups, k...), transposed conv (C, OC, k...) as PyTorch */
            t.shape[0] = l->type == CF_L_CONV ? l->filters : l->in.c;
            t.shape[1] = l->type == CF_L_CONV ? l->in.c / l->groups : l->filters;
            if (is2d) { t.ndim = 4; t.shape[2] = l->g.k[1]; t.shape[3] = l->g.k[2]; }
            else { t.ndim = 5; t.shape[2] = l->g.k[0]; t.shape[3] = l->g.k[1]; t.shape[4] = l->g.k[2]; }
        } else if (bn || l->type == CF_L_AFFINE) { t.ndim = 1; t.shape[0] = (int)l->w_n; }
        else { t.ndim = 2; t.shape[0] = l->filters; t.shape[1] = (int)cf_shape_size(l->in); }
        if (out && n < max) out[n] = t;
        n++;
        if (l->b_n) {
            memset(&t, 0, sizeof t);
            t.layer = i; t.kind = bn ? "beta" : "bias"; t.off = l->b_off; t.n = l->b_n; t.ndim = 1; t.shape[0] = (int)l->b_n;
            if (out && n < max) out[n] = t;
            n++;
        }
        for (k = 0; k < 2 && l->s_n; k++) {   /* running mean, running var */
            memset(&t, 0, sizeof t);
            t.layer = i; t.kind = k ? "running_var" : "running_mean"; t.stats = 1;
            t.off = l->s_off + k * (l->s_n / 2); t.n = l->s_n / 2; t.ndim = 1; t.shape[0] = (int)(l->s_n / 2);
            if (out && n < max) out[n] = t;
            n++;
        }
    }
    return n;
}

/* ================================================================ 5. optimizer */
CFDEF void cf_sgd_step(cf_net *net, float lr, float momentum, float l2) {
    int i;
    for (i = 0; i < net->n_layers; i++) {
        cf_layer *l = &net->layers[i];
        size_t k, off = l->w_off, n = l->w_n + l->b_n;   /* weight and bias are adjacent */
        if (!n) continue;
        for (k = 0; k < n; k++) {
            float g = net->grads[off + k];
            /* Keras kernel_regularizer l2: loss += l2*sum(w^2), so the gradient gains 2*l2*w */
            if (l->l2 && l2 != 0.0f && k < l->w_n) g += 2.0f * l2 * net->params[off + k];
            net->opt[off + k] = momentum * net->opt[off + k] - lr * g;
            net->params[off + k] += net->opt[off + k];
        }
    }
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

CFDEF void cf_adam_step(cf_net *net, float lr, float beta1, float beta2, float eps, float wd,
                        int decoupled, uint64_t t) {
    long k, n = (long)net->n_params;
    float *m = net->opt, *v = net->opt + n, *w = net->params;
    const float *gr = net->grads;
    float bc1 = (float)(1.0 - pow(beta1, (double)t)), sq2 = (float)sqrt(1.0 - pow(beta2, (double)t));
    float step = lr / bc1, decay = decoupled ? 1.0f - lr * wd : 1.0f, l2 = decoupled ? 0.0f : wd;
    CF__OMP(omp parallel for schedule(static))
    for (k = 0; k < n; k++) {
        float g = gr[k] + l2 * w[k];
        w[k] *= decay;
        m[k] = beta1 * m[k] + (1.0f - beta1) * g;
        v[k] = beta2 * v[k] + (1.0f - beta2) * g * g;
        /* torch: w -= lr/bc1 * m / (sqrt(v)/sqrt(bc2) + eps) */
        w[k] -= step * m[k] / (sqrtf(v[k]) / sq2 + eps);
    }
}

/* The update u of each tensor is needed twice (its norm, then the step), so pass 1 writes it
   over the gradient, which the step has consumed: no buffer the size of the model, and no
   second square root per parameter.  net->grads holds the updates afterwards. */
CFDEF double cf_lamb_step(cf_net *net, float lr, float beta1, float beta2, float eps, float wd,
                          float max_grad_norm, uint64_t t) {
    long k, n = (long)net->n_params;
    size_t off, cnt;
    float *m = net->opt, *v = net->opt + n, *gr = net->grads;
    float bc1 = (float)(1.0 - pow(beta1, (double)t)), bc2 = (float)(1.0 - pow(beta2, (double)t));
    double gn = 0.0;
    float inv_clip = 1.0f;
    int i = 0, part = 0;
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

CFDEF void cf_larc_scale(cf_net *net, float eta) {
    size_t k, off, cnt;
    int i = 0, part = 0;
    while (cf__next_tensor(net, &i, &part, &off, &cnt)) {
        double wn = 0.0, gn = 0.0, s;
        for (k = 0; k < cnt; k++) { wn += (double)net->params[off + k] * net->params[off + k]; gn += (double)net->grads[off + k] * net->grads[off + k]; }
        if (wn == 0.0 || gn == 0.0) continue;
        s = eta * sqrt(wn) / sqrt(gn);
        if (s < 1.0) for (k = 0; k < cnt; k++) net->grads[off + k] *= (float)s;
    }
}

/* The reference's torch schedulers, step by step.  Warmup (k <= W): base * k / W (factor 1) or
   base * ((factor - 1) k / W + 1).  After it the lr is CHAINED from the previous step's:
   multistep multiplies it by gamma at k = milestone + W + 1 (plain MultiStepLR, W = 0: at
   k = milestone); cosine applies torch's recurrence with k - W.  Note the warmup's first step
   has lr 0, as in the reference. */
CFDEF double cf_lr_sched_at(const cf_lr_sched *s, uint64_t k) {
    double lr = s->base_lr;
    uint64_t j;
    long W = s->warmup_steps;
    for (j = 0; j <= k; j++) {
        long e = (long)j;
        if (W > 0 && e <= W) {
            lr = s->warmup_factor == 1.0 ? s->base_lr * e / W : s->base_lr * ((s->warmup_factor - 1.0) * e / W + 1.0);
            continue;
        }
        if (s->type == CF_SCHED_MULTISTEP) {
            int m;
            for (m = 0; m < s->n_milestones; m++) if (e == s->milestones[m] + (W > 0 ? W + 1 : 0)) lr *= s->gamma;
        } else {
            long T = s->t_max, ee = W > 0 ? e - W : e;
            const double pi = 3.14159265358979323846;
            if (ee == 0) continue;   /* torch: the first step keeps the base lr */
            if ((ee - 1 - T) % (2 * T) == 0) lr = lr + (s->base_lr - s->eta_min) * (1.0 - cos(pi / T)) / 2.0;
            else lr = (1.0 + cos(pi * ee / T)) / (1.0 + cos(pi * (ee - 1) / T)) * (lr - s->eta_min) + s->eta_min;
        }
    }
    return lr;
}

/* ================================================================ 6. files */
CFDEF size_t cf_dtype_size(int dtype) {
    switch (dtype) { case CF_F32: return 4; case CF_I16: return 2; case CF_U8: return 1; case CF_I64: return 8; }
    return 0;
}
static const char *cf__dtype_descr[] = { "<f4", "<i2", "|u1", "<i8" };

CFDEF void cf_array_free(cf_array *a) { CF_FREE(a->data); memset(a, 0, sizeof *a); }

CFDEF int cf_atomic_open(cf_atomic_file *af, const char *path) {
    size_t n = strlen(path) + 32;
    memset(af, 0, sizeof *af);
    af->path = cf__strdup(path);
    af->tmp = CF__NEW(char, n);
    if (!af->path || !af->tmp) { CF_FREE(af->path); CF_FREE(af->tmp); return CF_ERR; }
    snprintf(af->tmp, n, "%s.tmp.%ld", path, (long)getpid());
    af->f = fopen(af->tmp, "wb");
    if (!af->f) {
        int rc = cf_fail("%s: cannot create (%s)", af->tmp, strerror(errno));
        CF_FREE(af->path); CF_FREE(af->tmp);
        return rc;
    }
    return CF_OK;
}
CFDEF int cf_atomic_write(cf_atomic_file *af, const void *p, size_t n) {
    if (af->failed) return CF_ERR;
    if (n && fwrite(p, 1, n, af->f) != n) { af->failed = 1; return cf_fail("%s: write failed (%s)", af->path, strerror(errno)); }
    return CF_OK;
}
CFDEF void cf_atomic_abort(cf_atomic_file *af) {
    if (af->f) fclose(af->f);
    if (af->tmp) remove(af->tmp);
    CF_FREE(af->path); CF_FREE(af->tmp);
    memset(af, 0, sizeof *af);
}
CFDEF int cf_atomic_commit(cf_atomic_file *af) {
    int ok = !af->failed && fflush(af->f) == 0 && fsync(fileno(af->f)) == 0;
    char reason[256];
    snprintf(reason, sizeof reason, "%s", strerror(errno));
    if (fclose(af->f) != 0) ok = 0;
    af->f = NULL;
    if (!ok) {
        int rc = af->failed ? CF_ERR : cf_fail("%s: write failed (%s); the previous file is untouched", af->path, reason);
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
    if (a->dtype < 0) return cf_fail("%s: unsupported dtype %.8s (need <f4, <i2, |u1 or <i8, little-endian)", path, d ? d : "?");
    fo = strchr(fo + 15, ':');
    while (fo && (*fo == ':' || *fo == ' ')) fo++;
    if (!fo || strncmp(fo, "False", 5)) return cf_fail("%s: Fortran-order arrays are not supported (save with C order)", path);
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
        if (end == sh || v < 0 || a->ndim == CF_MAX_DIMS) return cf_fail("%s: malformed or unsupported shape in npy header", path);
        if (v && a->count > ((size_t)1 << 40) / (size_t)v) return cf_fail("%s: shape too large", path);
        a->shape[a->ndim++] = v; a->count *= (size_t)v;
        sh = end;
    }
    return CF_OK;
}

CFDEF int cf_npy_read(const char *path, cf_array *a) {
    FILE *f = fopen(path, "rb");
    unsigned char pre[12];
    char *h = NULL;
    size_t hlen, pos, need;
    long fsize;
    struct stat st;
    memset(a, 0, sizeof *a);
    if (!f) return cf_fail("%s: %s", path, strerror(errno));
    if (fstat(fileno(f), &st) || !S_ISREG(st.st_mode)) { fclose(f); return cf_fail("%s: not a regular file", path); }
    fsize = (long)st.st_size;
    if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6)) { fclose(f); return cf_fail("%s: not an .npy file (bad magic)", path); }
    if (pre[6] == 1) { hlen = pre[8] | (size_t)pre[9] << 8; pos = 10; }
    else if (pre[6] == 2 || pre[6] == 3) {
        if (fread(pre + 10, 1, 2, f) != 2) { fclose(f); return cf_fail("%s: truncated npy header", path); }
        hlen = pre[8] | (size_t)pre[9] << 8 | (size_t)pre[10] << 16 | (size_t)pre[11] << 24; pos = 12;
    } else { fclose(f); return cf_fail("%s: npy version %d is not supported", path, pre[6]); }
    if (hlen > 1 << 20 || pos + hlen > (size_t)fsize) { fclose(f); return cf_fail("%s: npy header length %zu is impossible", path, hlen); }
    h = CF__NEW(char, hlen + 1);
    if (!h) { fclose(f); return CF_ERR; }
    if (fread(h, 1, hlen, f) != hlen) { CF_FREE(h); fclose(f); return cf_fail("%s: truncated npy header", path); }
    if (cf__npy_parse_header(path, h, a)) { CF_FREE(h); fclose(f); return CF_ERR; }
    CF_FREE(h);
    need = a->count * cf_dtype_size(a->dtype);
    if ((size_t)fsize - pos - hlen != need) {
        fclose(f);
        return cf_fail("%s: data is %ld bytes but the header's shape needs %zu (truncated or corrupt)", path, fsize - (long)(pos + hlen), need);
    }
    a->data = cf__calloc(need ? need : 1, 1);
    if (!a->data) { fclose(f); return CF_ERR; }
    if (need && fread(a->data, 1, need, f) != need) { fclose(f); cf_array_free(a); return cf_fail("%s: read error", path); }
    fclose(f);
    return CF_OK;
}

CFDEF int cf_npy_read_f32(const char *path, float **data, size_t *count) {
    cf_array a;
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
    n = snprintf(h, sizeof h, "{'descr': '%s', 'fortran_order': False, 'shape': (", cf__dtype_descr[a->dtype]);
    for (i = 0; i < a->ndim; i++) n += snprintf(h + n, sizeof h - n, "%lld%s", (long long)a->shape[i], a->ndim == 1 ? "," : (i + 1 < a->ndim ? ", " : ""));
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

/* ---- checkpoints: "CFCKPT02" | u64 cfg length | cfg text | i32 input C,D,H,W |
   u64 n_params, step, epoch, seed, n_stats | f64 best | params | stats | optimizer state
   (2 n_params) | CRC32C of everything before it.  ("CFCKPT01", the first format, had no
   stats and n_params of optimizer state; it is still read.) */
typedef struct { FILE *f; uint32_t crc; int bad; } cf__rd;
static int cf__rd_get(cf__rd *r, void *p, size_t n) {
    if (r->bad || fread(p, 1, n, r->f) != n) { r->bad = 1; return CF_ERR; }
    r->crc = cf_crc32c(r->crc, p, n);
    return CF_OK;
}
static int cf__wr_put(cf_atomic_file *af, uint32_t *crc, const void *p, size_t n) {
    *crc = cf_crc32c(*crc, p, n);
    return cf_atomic_write(af, p, n);
}

CFDEF int cf_checkpoint_save(const char *path, const cf_net *net, const cf_train_state *st) {
    cf_atomic_file af;
    uint32_t crc = 0;
    uint64_t u[6];
    int32_t shp[4];
    double best = st ? st->best : 0.0;
    if (cf_atomic_open(&af, path)) return CF_ERR;
    u[0] = strlen(net->cfg_text);
    cf__wr_put(&af, &crc, "CFCKPT02", 8);
    cf__wr_put(&af, &crc, &u[0], 8);
    cf__wr_put(&af, &crc, net->cfg_text, (size_t)u[0]);
    shp[0] = net->input.c; shp[1] = net->input.d; shp[2] = net->input.h; shp[3] = net->input.w;
    cf__wr_put(&af, &crc, shp, sizeof shp);
    u[1] = net->n_params; u[2] = st ? st->step : 0; u[3] = st ? st->epoch : 0; u[4] = st ? st->seed : net->seed; u[5] = net->n_stats;
    cf__wr_put(&af, &crc, &u[1], 5 * 8);
    cf__wr_put(&af, &crc, &best, 8);
    cf__wr_put(&af, &crc, net->params, net->n_params * sizeof(float));
    cf__wr_put(&af, &crc, net->stats, net->n_stats * sizeof(float));
    cf__wr_put(&af, &crc, net->opt, 2 * net->n_params * sizeof(float));
    cf_atomic_write(&af, &crc, 4);
    return cf_atomic_commit(&af);
}

static int cf__ckpt_header(cf__rd *r, const char *path, char **cfg, cf_shape *in, int *version) {
    char magic[8];
    uint64_t len;
    int32_t shp[4];
    if (cf__rd_get(r, magic, 8) || memcmp(magic, "CFCKPT0", 7) || (magic[7] != '1' && magic[7] != '2'))
        return cf_fail("%s: not a cosmoflow.h checkpoint (bad magic)", path);
    *version = magic[7] - '0';
    if (cf__rd_get(r, &len, 8) || len > (16u << 20)) return cf_fail("%s: corrupt checkpoint header", path);
    *cfg = CF__NEW(char, (size_t)len + 1);
    if (!*cfg) return CF_ERR;
    if (cf__rd_get(r, *cfg, (size_t)len) || cf__rd_get(r, shp, sizeof shp)) { CF_FREE(*cfg); *cfg = NULL; return cf_fail("%s: truncated checkpoint", path); }
    in->c = shp[0]; in->d = shp[1]; in->h = shp[2]; in->w = shp[3];
    return CF_OK;
}

CFDEF int cf_checkpoint_cfg(const char *path, char **cfg_text, cf_shape *input) {
    cf__rd r;
    int rc, version = 0;
    r.crc = 0; r.bad = 0;
    r.f = fopen(path, "rb");
    if (!r.f) return cf_fail("%s: %s", path, strerror(errno));
    rc = cf__ckpt_header(&r, path, cfg_text, input, &version);
    fclose(r.f);
    return rc;
}

/* same tensors (layer, kind, shape) in the same order? */
static int cf__same_model(const cf_net *a, const cf_net *b, const char *path) {
    int na = cf_net_tensors(a, NULL, 0), nb = cf_net_tensors(b, NULL, 0), i, j, rc = CF_OK;
    cf_tensor *ta = CF__NEW(cf_tensor, na + 1), *tb = CF__NEW(cf_tensor, nb + 1);
    if (!ta || !tb) { CF_FREE(ta); CF_FREE(tb); return CF_ERR; }
    cf_net_tensors(a, ta, na); cf_net_tensors(b, tb, nb);
    if (na != nb || a->n_params != b->n_params)
        rc = cf_fail("%s: made for a different model (%d tensors, %zu parameters; this model has %d tensors, %zu parameters)",
                     path, nb, b->n_params, na, a->n_params);
    for (i = 0; !rc && i < na; i++) {
        int same = ta[i].layer == tb[i].layer && !strcmp(ta[i].kind, tb[i].kind) && ta[i].ndim == tb[i].ndim;
        for (j = 0; same && j < ta[i].ndim; j++) same = ta[i].shape[j] == tb[i].shape[j];
        if (!same) rc = cf_fail("%s: made for a different model: tensor %d (layer %d %s) differs in shape or kind", path, i, ta[i].layer, ta[i].kind);
    }
    CF_FREE(ta); CF_FREE(tb);
    return rc;
}

CFDEF int cf_checkpoint_load(const char *path, cf_net *net, cf_train_state *st) {
    cf__rd r;
    char *cfg = NULL;
    cf_shape in;
    cf_net saved;
    uint64_t u[5];
    double best;
    uint32_t crc_file, crc;
    float *buf = NULL;
    int rc, version = 0;
    size_t n_opt, n_stats, total;
    r.crc = 0; r.bad = 0;
    r.f = fopen(path, "rb");
    if (!r.f) return cf_fail("%s: %s", path, strerror(errno));
    if ((rc = cf__ckpt_header(&r, path, &cfg, &in, &version))) { fclose(r.f); return rc; }
    rc = cf_net_parse(&saved, cfg, path, &in);
    CF_FREE(cfg);
    if (rc) { fclose(r.f); return cf_fail("%s: embedded model does not parse: %s", path, cf_failure_reason()); }
    rc = cf__same_model(net, &saved, path);
    cf_net_free(&saved);
    if (rc) { fclose(r.f); return rc; }
    if (cf__rd_get(&r, u, sizeof u) || cf__rd_get(&r, &best, 8) || u[0] != net->n_params || (version == 2 && u[4] != net->n_stats))
        { fclose(r.f); return cf_fail("%s: truncated or corrupt checkpoint", path); }
    n_stats = version == 2 ? net->n_stats : 0;
    n_opt = version == 2 ? 2 * net->n_params : net->n_params;
    total = net->n_params + n_stats + n_opt;
    buf = CF__NEW(float, total + 1);
    if (!buf) { fclose(r.f); return CF_ERR; }
    if (cf__rd_get(&r, buf, total * sizeof(float))) { CF_FREE(buf); fclose(r.f); return cf_fail("%s: truncated checkpoint", path); }
    crc = r.crc;
    if (fread(&crc_file, 1, 4, r.f) != 4 || crc_file != crc || fgetc(r.f) != EOF) {
        CF_FREE(buf); fclose(r.f);
        return cf_fail("%s: checksum mismatch or trailing bytes: the checkpoint is corrupt", path);
    }
    fclose(r.f);
    memcpy(net->params, buf, net->n_params * sizeof(float));
    memcpy(net->stats, buf + net->n_params, n_stats * sizeof(float));
    memset(net->opt, 0, 2 * net->n_params * sizeof(float));
    memcpy(net->opt, buf + net->n_params + n_stats, n_opt * sizeof(float));
    CF_FREE(buf);
    if (st) { st->step = u[1]; st->epoch = u[2]; st->seed = u[3]; st->best = best; }
    net->seed = u[3];
    net->step = u[1];   /* dropout masks continue where they stopped */
    return CF_OK;
}

static void cf__tensor_path(char *out, size_t n, const char *dir, int idx, const cf_tensor *t) {
    snprintf(out, n, "%s/%03d_%d_%s.npy", dir, idx, t->layer, t->kind);
}

CFDEF int cf_weights_export(const cf_net *net, const char *dir) {
    int nt = cf_net_tensors(net, NULL, 0), i, j;
    cf_tensor *t = CF__NEW(cf_tensor, nt + 1);
    char path[4096];
    if (!t) return CF_ERR;
    cf_net_tensors(net, t, nt);
    if (mkdir(dir, 0777) && errno != EEXIST) { CF_FREE(t); return cf_fail("%s: cannot create directory (%s)", dir, strerror(errno)); }
    for (i = 0; i < nt; i++) {
        cf_array a;
        memset(&a, 0, sizeof a);
        a.dtype = CF_F32; a.ndim = t[i].ndim; a.count = t[i].n; a.data = (t[i].stats ? net->stats : net->params) + t[i].off;
        for (j = 0; j < a.ndim; j++) a.shape[j] = t[i].shape[j];
        cf__tensor_path(path, sizeof path, dir, i, &t[i]);
        if (cf_npy_write(path, &a)) { CF_FREE(t); return CF_ERR; }
    }
    CF_FREE(t);
    return CF_OK;
}

CFDEF int cf_weights_import(cf_net *net, const char *dir) {
    int nt = cf_net_tensors(net, NULL, 0), i, j, found = 0;
    cf_tensor *t = CF__NEW(cf_tensor, nt + 1);
    float *tmp = CF__NEW(float, net->n_params + net->n_stats + 1);   /* params, then stats */
    char path[4096];
    DIR *dd;
    struct dirent *e;
    if (!t || !tmp) { CF_FREE(t); CF_FREE(tmp); return CF_ERR; }
    cf_net_tensors(net, t, nt);
    dd = opendir(dir);
    if (!dd) { CF_FREE(t); CF_FREE(tmp); return cf_fail("%s: %s", dir, strerror(errno)); }
    while ((e = readdir(dd)))   /* count tensor files, so a directory for a bigger model is refused */
        if (isdigit((unsigned char)e->d_name[0]) && strstr(e->d_name, ".npy")) found++;
    closedir(dd);
    if (found != nt) { CF_FREE(t); CF_FREE(tmp); return cf_fail("%s: holds %d tensor files; the model has %d tensors", dir, found, nt); }
    for (i = 0; i < nt; i++) {
        cf_array a;
        int ok;
        cf__tensor_path(path, sizeof path, dir, i, &t[i]);
        if (cf_npy_read(path, &a)) { CF_FREE(t); CF_FREE(tmp); return CF_ERR; }
        ok = a.dtype == CF_F32 && a.ndim == t[i].ndim;
        for (j = 0; ok && j < a.ndim; j++) ok = a.shape[j] == t[i].shape[j];
        if (!ok) {
            char want[128]; int n = 0;
            for (j = 0; j < t[i].ndim; j++) n += snprintf(want + n, sizeof want - n, "%s%d", j ? "x" : "", t[i].shape[j]);
            cf_array_free(&a); CF_FREE(t); CF_FREE(tmp);
            return cf_fail("%s: expected float32 of shape %s (PyTorch layout)", path, want);
        }
        memcpy(tmp + (t[i].stats ? net->n_params : 0) + t[i].off, a.data, t[i].n * sizeof(float));
        cf_array_free(&a);
    }
    memcpy(net->params, tmp, net->n_params * sizeof(float));   /* all or nothing */
    memcpy(net->stats, tmp + net->n_params, net->n_stats * sizeof(float));
    CF_FREE(t); CF_FREE(tmp);
    return CF_OK;
}

CFDEF int cf_weights_load(cf_net *net, const char *path) {
    struct stat st;
    if (stat(path, &st)) return cf_fail("%s: %s", path, strerror(errno));
    return S_ISDIR(st.st_mode) ? cf_weights_import(net, path) : cf_checkpoint_load(path, net, NULL);
}

/* ---- TFRecord: uint64 length | uint32 masked crc(length) | data | uint32 masked crc(data) */
static uint64_t cf__le64(const unsigned char *p) { uint64_t v = 0; int i; for (i = 7; i >= 0; i--) v = v << 8 | p[i]; return v; }
static uint32_t cf__le32(const unsigned char *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

#ifndef CF_MAX_FILE_BYTES
#define CF_MAX_FILE_BYTES ((size_t)1 << 31)   /* 2 GiB: larger inputs are refused, not allocated */
#endif

CFDEF int cf_tfrecord_open(cf_tfrecord *r, const char *path) {
    size_t cap = 1 << 20, len = 0;
    unsigned char *buf;
    struct stat st;
    memset(r, 0, sizeof *r);
    if (stat(path, &st)) return cf_fail("%s: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode)) return cf_fail("%s: not a regular file", path);
    buf = CF__NEW(unsigned char, cap);
    if (!buf) return CF_ERR;
#ifdef CF_USE_ZLIB
    {   /* gzread reads gzip members and passes plain files through unchanged */
        gzFile gz = gzopen(path, "rb");
        int errnum = 0;
        if (!gz) { CF_FREE(buf); return cf_fail("%s: %s", path, strerror(errno)); }
        for (;;) {
            int got;
            if (len == cap) {
                unsigned char *nb;
                if (cap >= CF_MAX_FILE_BYTES) { gzclose(gz); CF_FREE(buf); return cf_fail("%s: decompresses to more than %zu bytes", path, CF_MAX_FILE_BYTES); }
                nb = CF__NEW(unsigned char, 2 * cap);
                if (!nb) { gzclose(gz); CF_FREE(buf); return CF_ERR; }
                memcpy(nb, buf, len); CF_FREE(buf); buf = nb; cap *= 2;
            }
            got = gzread(gz, buf + len, (unsigned)(cap - len > (1u << 30) ? (1u << 30) : cap - len));
            if (got < 0) { const char *m = gzerror(gz, &errnum); char keep[200]; snprintf(keep, sizeof keep, "%s", m); gzclose(gz); CF_FREE(buf); return cf_fail("%s: gzip stream is corrupt (%s)", path, keep); }
            if (got == 0) break;
            len += (size_t)got;
        }
        gzerror(gz, &errnum);
        if (gzclose(gz) != Z_OK || errnum != Z_OK) { CF_FREE(buf); return cf_fail("%s: gzip stream is truncated or corrupt", path); }
    }
#else
    {
        FILE *f = fopen(path, "rb");
        size_t got;
        if (!f) { CF_FREE(buf); return cf_fail("%s: %s", path, strerror(errno)); }
        if (st.st_size > 2 && ((size_t)st.st_size > CF_MAX_FILE_BYTES)) { fclose(f); CF_FREE(buf); return cf_fail("%s: too large", path); }
        CF_FREE(buf);
        cap = (size_t)st.st_size + 1;
        buf = CF__NEW(unsigned char, cap);
        if (!buf) { fclose(f); return CF_ERR; }
        got = fread(buf, 1, cap, f);
        fclose(f);
        len = got;
        if (len >= 2 && buf[0] == 0x1f && buf[1] == 0x8b) { CF_FREE(buf); return cf_fail("%s: gzip file, but built without zlib (CF_USE_ZLIB)", path); }
    }
#endif
    r->buf = buf; r->len = len; r->pos = 0;
    r->path = cf__strdup(path);
    return r->path ? CF_OK : CF_ERR;
}

CFDEF int cf_tfrecord_next(cf_tfrecord *r, const unsigned char **data, size_t *len) {
    uint64_t n;
    size_t left = r->len - r->pos;
    const unsigned char *p = r->buf + r->pos;
    if (left == 0) return 0;
    if (left < 12) return cf_fail("%s: truncated record header at offset %zu", r->path, r->pos);
    n = cf__le64(p);
    if (cf__le32(p + 8) != cf_crc32c_masked(p, 8)) return cf_fail("%s: length CRC mismatch at offset %zu (corrupt file)", r->path, r->pos);
    if (n > left - 12 || left - 12 - n < 4) return cf_fail("%s: record at offset %zu claims %llu bytes, only %zu remain (truncated)", r->path, r->pos, (unsigned long long)n, left - 12);
    if (cf__le32(p + 12 + n) != cf_crc32c_masked(p + 12, (size_t)n)) return cf_fail("%s: data CRC mismatch in record at offset %zu (corrupt file)", r->path, r->pos);
    *data = p + 12; *len = (size_t)n;
    r->pos += 16 + (size_t)n;
    return 1;
}

CFDEF void cf_tfrecord_close(cf_tfrecord *r) { CF_FREE(r->buf); CF_FREE(r->path); memset(r, 0, sizeof *r); }

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
    int f, w, rc, f2, w2;
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
            if (has_key && fv) { *feat = fv; *flen = fl; return 1; }
        }
        if (rc < 0) return cf_fail("malformed protobuf in Features");
    }
    if (rc < 0) return cf_fail("malformed protobuf in Example");
    return cf_fail("feature '%s' is missing", key);
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
static unsigned char *cf__put_len(unsigned char *p, int field, size_t n) { *p++ = (unsigned char)(field << 3 | 2); return cf__put_varint(p, n); }
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
    unsigned char *framed = CF__NEW(unsigned char, n + 16), *out = framed;
    size_t outlen = n + 16;
    int rc;
    if (!framed) return CF_ERR;
    cf_tfrecord_frame(framed, rec, n);
#ifdef CF_USE_ZLIB
    if (gzip) {   /* one gzip member, as TensorFlow's TFRecordWriter(options='GZIP') writes; level 1:
                     on 32^3 x 4 counts twice as fast as level 6 for files 1.7 % larger */
        z_stream z;
        memset(&z, 0, sizeof z);
        outlen = deflateBound(&z, (uLong)(n + 16)) + 64;
        out = CF__NEW(unsigned char, outlen);
        if (!out || deflateInit2(&z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) { CF_FREE(out); CF_FREE(framed); return cf_fail("%s: zlib init failed", path); }
        z.next_in = framed; z.avail_in = (uInt)(n + 16); z.next_out = out; z.avail_out = (uInt)outlen;
        if (deflate(&z, Z_FINISH) != Z_STREAM_END) { deflateEnd(&z); CF_FREE(out); CF_FREE(framed); return cf_fail("%s: compression failed", path); }
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
static void cf__be32(unsigned char *p, uint32_t v) { p[0] = (unsigned char)(v >> 24); p[1] = (unsigned char)(v >> 16); p[2] = (unsigned char)(v >> 8); p[3] = (unsigned char)v; }
#endif
CFDEF int cf_png_write(const char *path, const unsigned char *rgb, int w, int h) {
#ifdef CF_USE_ZLIB
    size_t row = (size_t)w * 3 + 1, raw_n = row * h;
    unsigned char *raw = CF__NEW(unsigned char, raw_n), *z, hdr[13], len[4], crc[4];
    uLongf zn = compressBound((uLong)raw_n);
    cf_atomic_file af;
    int y, k;
    if (!raw) return CF_ERR;
    for (y = 0; y < h; y++) { raw[y * row] = 0; memcpy(raw + y * row + 1, rgb + (size_t)y * w * 3, (size_t)w * 3); }
    z = CF__NEW(unsigned char, zn);
    if (!z || compress2(z, &zn, raw, (uLong)raw_n, 6) != Z_OK) { CF_FREE(raw); CF_FREE(z); return cf_fail("%s: PNG compression failed", path); }
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
        cf_atomic_write(&af, len, 4); cf_atomic_write(&af, type, 4); cf_atomic_write(&af, data, n); cf_atomic_write(&af, crc, 4);
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
    if (count == 0 || (size_t)s * s * s * 4 != count) return cf_fail("%s: x holds %zu int16 values, not a (S,S,S,4) volume", path, count);
    *S = s;
    return CF_OK;
}

CFDEF int cf_cosmo_read(const char *path, cf_cosmo_sample *smp) {
    memset(smp, 0, sizeof *smp);
    smp->c = 4;
    if (cf__ends_with(path, "_data.npy")) {   /* the submitters' numpy layout */
        cf_array a, lab;
        char *lp = CF__NEW(char, strlen(path) + 8);
        size_t k;
        if (!lp) return CF_ERR;
        if (cf_npy_read(path, &a)) { CF_FREE(lp); return CF_ERR; }
        if (a.dtype != CF_I16 || a.ndim != 4 || a.shape[3] != 4 || a.shape[0] != a.shape[1] || a.shape[1] != a.shape[2]) {
            cf_array_free(&a); CF_FREE(lp);
            return cf_fail("%s: expected int16 of shape (S,S,S,4)", path);
        }
        memcpy(lp, path, strlen(path) - 9);
        strcpy(lp + strlen(path) - 9, "_label.npy");
        if (cf_npy_read(lp, &lab)) { cf_array_free(&a); CF_FREE(lp); return CF_ERR; }
        if (lab.dtype != CF_F32 || lab.count < 1 || lab.count > 8) {
            cf_array_free(&a); cf_array_free(&lab);
            { int rc = cf_fail("%s: expected float32 labels (1 to 8 values)", lp); CF_FREE(lp); return rc; }
        }
        for (k = 0; k < lab.count; k++) smp->y[k] = ((float *)lab.data)[k];
        smp->ny = (int)lab.count;
        smp->x = (int16_t *)a.data; smp->count = a.count; smp->s = (int)a.shape[0];
        cf_array_free(&lab); CF_FREE(lp);
        return CF_OK;
    } else {
        cf_tfrecord r;
        const unsigned char *rec, *xb;
        size_t rlen, xlen, ny = 0;
        int rc;
        if (cf_tfrecord_open(&r, path)) return CF_ERR;
        rc = cf_tfrecord_next(&r, &rec, &rlen);
        if (rc == 0) { cf_tfrecord_close(&r); return cf_fail("%s: no record in file", path); }
        if (rc < 0) { cf_tfrecord_close(&r); return CF_ERR; }
        if (cf_example_bytes(rec, rlen, "x", &xb, &xlen) || cf_example_floats(rec, rlen, "y", smp->y, 8, &ny)) {
            char keep[1024]; memcpy(keep, cf__err, sizeof keep);
            cf_tfrecord_close(&r);
            return cf_fail("%s: %.900s", path, keep);
        }
        if (xlen % 2 || cf__cosmo_shape(path, xlen / 2, &smp->s)) { cf_tfrecord_close(&r); return xlen % 2 ? cf_fail("%s: x has an odd number of bytes", path) : CF_ERR; }
        if (ny < 1) { cf_tfrecord_close(&r); return cf_fail("%s: y is empty", path); }
        smp->ny = (int)ny;
        smp->count = xlen / 2;
        smp->x = CF__NEW(int16_t, smp->count);
        if (!smp->x) { cf_tfrecord_close(&r); return CF_ERR; }
        memcpy(smp->x, xb, xlen);   /* little-endian int16, as on every supported host */
        cf_tfrecord_close(&r);
        return CF_OK;
    }
}

CFDEF void cf_cosmo_free(cf_cosmo_sample *smp) { CF_FREE(smp->x); memset(smp, 0, sizeof *smp); }

CFDEF int cf_climate_read(const char *path, cf_climate_sample *smp, int n_classes) {
    cf_array a, lab;
    const char *base = strrchr(path, '/');
    char *lp;
    size_t dirlen, k;
    memset(smp, 0, sizeof *smp);
    base = base ? base + 1 : path;
    if (strncmp(base, "data-", 5) || !cf__ends_with(base, ".npy")) return cf_fail("%s: not a DeepCAM data-*.npy file", path);
    if (cf_npy_read(path, &a)) return CF_ERR;
    if (a.dtype != CF_F32 || a.ndim != 3 || a.shape[0] < 1 || a.shape[1] < 1 || a.shape[2] < 1) {
        cf_array_free(&a);
        return cf_fail("%s: expected float32 of shape (H, W, C), channels last", path);
    }
    for (k = 0; k < a.count; k++)
        if (!isfinite(((float *)a.data)[k])) { cf_array_free(&a); return cf_fail("%s: value %zu is not finite", path, k); }
    dirlen = (size_t)(base - path);
    lp = CF__NEW(char, strlen(path) + 2);
    if (!lp) { cf_array_free(&a); return CF_ERR; }
    memcpy(lp, path, dirlen);
    strcpy(lp + dirlen, "label-");
    strcat(lp, base + 5);
    if (cf_npy_read(lp, &lab)) { cf_array_free(&a); CF_FREE(lp); return CF_ERR; }
    if (lab.dtype != CF_F32 || lab.ndim != 2 || lab.shape[0] != a.shape[0] || lab.shape[1] != a.shape[1]) {
        int rc = cf_fail("%s: expected float32 labels of shape (%d, %d) like its data file", lp, (int)a.shape[0], (int)a.shape[1]);
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

CFDEF void cf_climate_free(cf_climate_sample *smp) { CF_FREE(smp->x); CF_FREE(smp->y); memset(smp, 0, sizeof *smp); }

CFDEF void cf_climate_to_input(float *out, const float *x, int H, int W, int C,
                               const float *minval, const float *maxval) {
    size_t p, P = (size_t)H * W;
    int c;
    for (c = 0; c < C; c++) {
        float lo = minval[c], range = maxval[c] - minval[c];
        float inv = range > 0.0f ? 1.0f / range : 0.0f;   /* a constant channel becomes 0 */
        for (p = 0; p < P; p++) out[(size_t)c * P + p] = (x[p * C + c] - lo) * inv;
    }
}

static int cf__stats_pair(const char *dir, float *minval, float *maxval, int C) {
    static const char *names[2] = {"stats_minval.npy", "stats_maxval.npy"};
    int i;
    for (i = 0; i < 2; i++) {
        char path[4096];
        float *d = NULL;
        size_t n = 0;
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        if (cf_npy_read_f32(path, &d, &n)) return CF_ERR;
        if (n != (size_t)C) { CF_FREE(d); return cf_fail("%s: %zu values, the model has %d input channels", path, n, C); }
        memcpy(i ? maxval : minval, d, sizeof(float) * C);
        CF_FREE(d);
    }
    return CF_OK;
}

CFDEF int cf_climate_stats(const char *dir, float *minval, float *maxval, int C) {
    char path[4200], parent[4096];
    size_t n;
    struct stat st;
    snprintf(path, sizeof path, "%s/stats_minval.npy", dir);
    if (stat(path, &st) == 0) return cf__stats_pair(dir, minval, maxval, C);
    snprintf(parent, sizeof parent, "%s", dir);
    n = strlen(parent);
    while (n > 1 && parent[n - 1] == '/') parent[--n] = 0;
    snprintf(path, sizeof path, "%s/../stats_minval.npy", parent);
    if (n + 4 < sizeof parent && stat(path, &st) == 0) { strcat(parent, "/.."); return cf__stats_pair(parent, minval, maxval, C); }
    return cf_fail("%s: no stats_minval.npy / stats_maxval.npy here or in the parent directory "
                   "(cf-convert h52npy writes them from stats.h5)", dir);
}

CFDEF void cf_cosmo_to_input(float *out, const int16_t *x, int S, int C, int apply_log) {
    size_t vox = (size_t)S * S * S, v;
    double sum = 0.0;
    float scale = 1.0f, log1p_small[256];   /* log1pf of the counts 0..255 (most voxels hold 0-10) */
    int c, i;
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

CFDEF int cf_epoch_shard(int *out, int n, uint64_t seed, int epoch, int rank, int size,
                         int shuffle, int drop_remainder) {
    int *perm = CF__NEW(int, n + 1), i, k = 0, per = n / size;
    cf_rng r = cf_rng_seed(cf_hash64(seed ^ (0x5eedULL + (uint64_t)epoch * 0x9e3779b97f4a7c15ULL)));
    if (!perm) return -1;
    for (i = 0; i < n; i++) perm[i] = i;
    if (shuffle)   /* Fisher-Yates with our generator: the same order on every platform */
        for (i = n - 1; i > 0; i--) { int j = (int)(cf_rng_u64(&r) % (uint64_t)(i + 1)), t = perm[i]; perm[i] = perm[j]; perm[j] = t; }
    for (i = rank; i < n; i += size) {
        if (drop_remainder && k == per) break;
        out[k++] = perm[i];
    }
    CF_FREE(perm);
    return k;
}

/* ================================================================ 7. distributed */
#ifdef CF_USE_MPI
/* MPI starts only under a launcher (mpirun/mpiexec/srun set one of these); a program
   started on its own is one rank without touching MPI, so it also runs where MPI cannot
   start (no shared memory, a small ulimit, no network). */
static int cf__launched(void) {
    static const char *vars[] = {"PMI_RANK", "PMI_SIZE", "PMIX_RANK", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE", "SLURM_PROCID"};
    size_t i;
    for (i = 0; i < sizeof vars / sizeof *vars; i++) if (getenv(vars[i])) return 1;
    return 0;
}
CFDEF int cf_dist_init(int *argc, char ***argv) {
    int inited = 0, provided;
    MPI_Initialized(&inited);
    if (!inited && cf__launched() && MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) return cf_fail("MPI_Init_thread failed");
    return CF_OK;
}
CFDEF void cf_dist_finalize(void) { int i = 0, f = 0; MPI_Initialized(&i); MPI_Finalized(&f); if (i && !f) MPI_Finalize(); }
CFDEF int cf_dist_rank(void) { int r = 0, i = 0; MPI_Initialized(&i); if (i) MPI_Comm_rank(MPI_COMM_WORLD, &r); return r; }
CFDEF int cf_dist_size(void) { int s = 1, i = 0; MPI_Initialized(&i); if (i) MPI_Comm_size(MPI_COMM_WORLD, &s); return s; }
CFDEF void cf_dist_allreduce_mean(float *buf, size_t n) {
    int size = cf_dist_size();
    size_t off = 0, k;
    if (size == 1) return;
    while (off < n) {   /* MPI counts are int: reduce in chunks of at most 2^30 */
        int chunk = (int)(n - off > ((size_t)1 << 30) ? ((size_t)1 << 30) : n - off);
        MPI_Allreduce(MPI_IN_PLACE, buf + off, chunk, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        off += (size_t)chunk;
    }
    for (k = 0; k < n; k++) buf[k] /= (float)size;
}
CFDEF void cf_dist_allreduce_sum_d(double *buf, int n) { if (cf_dist_size() > 1) MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); }
CFDEF void cf_dist_sum_reduce(double *buf, int n, void *ctx) { (void)ctx; cf_dist_allreduce_sum_d(buf, n); }
CFDEF void cf_dist_bcast(float *buf, size_t n) {
    size_t off = 0;
    if (cf_dist_size() == 1) return;
    while (off < n) {
        int chunk = (int)(n - off > ((size_t)1 << 30) ? ((size_t)1 << 30) : n - off);
        MPI_Bcast(buf + off, chunk, MPI_FLOAT, 0, MPI_COMM_WORLD);
        off += (size_t)chunk;
    }
}
CFDEF void cf_dist_abort(int code) { int i = 0; MPI_Initialized(&i); if (i && cf_dist_size() > 1) MPI_Abort(MPI_COMM_WORLD, code); }
CFDEF void cf_dist_barrier(void) { if (cf_dist_size() > 1) MPI_Barrier(MPI_COMM_WORLD); }

/* state of the overlapped reduction: the not-yet-started prefix is grads[0, end) */
typedef struct { MPI_Request req[1024]; MPI_Status st[1024]; int n; size_t end, bucket; } cf__overlap;
static cf__overlap cf__ov;
static void cf__ov_start(float *buf, size_t lo, size_t hi) {
    while (hi > lo) {   /* chunks fit an int count and the request table */
        size_t n = hi - lo > ((size_t)1 << 30) ? ((size_t)1 << 30) : hi - lo;
        if (cf__ov.n == 1024) { MPI_Waitall(cf__ov.n, cf__ov.req, cf__ov.st); cf__ov.n = 0; }
        MPI_Iallreduce(MPI_IN_PLACE, buf + hi - n, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &cf__ov.req[cf__ov.n++]);
        hi -= n;
    }
}
/* called before layer i's backward: every layer after i is finished */
static void cf__ov_hook(cf_net *net, int i, void *ctx) {
    size_t done_from = net->n_params;
    int j, flag;
    (void)ctx;
    for (j = i + 1; j < net->n_layers; j++) if (net->layers[j].w_n) { done_from = net->layers[j].w_off; break; }
    if (done_from < cf__ov.end && cf__ov.end - done_from >= cf__ov.bucket) {
        cf__ov_start(net->grads, done_from, cf__ov.end);
        cf__ov.end = done_from;
    }
    if (cf__ov.n) MPI_Testall(cf__ov.n, cf__ov.req, &flag, cf__ov.st);   /* let MPI progress */
}
CFDEF void cf_dist_overlap_begin(cf_net *net, size_t bucket_floats) {
    cf__ov.n = 0; cf__ov.end = net->n_params; cf__ov.bucket = bucket_floats ? bucket_floats : 1;
    net->backward_hook = cf_dist_size() > 1 ? cf__ov_hook : NULL;
    net->hook_ctx = NULL;
}
CFDEF void cf_dist_overlap_end(cf_net *net) {
    size_t k;
    float inv;
    net->backward_hook = NULL;
    if (cf_dist_size() == 1) return;
    cf__ov_start(net->grads, 0, cf__ov.end);
    MPI_Waitall(cf__ov.n, cf__ov.req, cf__ov.st);
    inv = (float)cf_dist_size();
    for (k = 0; k < net->n_params; k++) net->grads[k] /= inv;   /* as cf_dist_allreduce_mean */
}

CFDEF int cf_dist_grad_lag(cf_net *net, cf_grad_lag *lag) {
    size_t k, n = net->n_params;
    int had = lag->pending, size = cf_dist_size(), next;
    float inv = 1.0f / (float)size;
    if (!lag->buf[0]) {
        lag->buf[0] = CF__NEW(float, n + 1); lag->buf[1] = CF__NEW(float, n + 1);
        lag->req = CF_MALLOC(sizeof(MPI_Request));
        if (!lag->buf[0] || !lag->buf[1] || !lag->req) return cf_fail("out of memory for the gradient lag buffers");
        CF_ASSERT(n < 2147483647u);
    }
    if (had && size > 1) MPI_Wait((MPI_Request *)lag->req, MPI_STATUS_IGNORE);   /* step t-1's sum */
    next = 1 - lag->cur;
    memcpy(lag->buf[next], net->grads, n * sizeof(float));
    if (size > 1) MPI_Iallreduce(MPI_IN_PLACE, lag->buf[next], (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, (MPI_Request *)lag->req);
    if (had) for (k = 0; k < n; k++) net->grads[k] = lag->buf[lag->cur][k] * inv;
    lag->cur = next;
    lag->pending = 1;
    return had;
}
CFDEF void cf_dist_grad_lag_free(cf_grad_lag *lag) {
    if (lag->pending && cf_dist_size() > 1) MPI_Wait((MPI_Request *)lag->req, MPI_STATUS_IGNORE);
    CF_FREE(lag->buf[0]); CF_FREE(lag->buf[1]); CF_FREE(lag->req);
    memset(lag, 0, sizeof *lag);
}
#else
CFDEF int cf_dist_init(int *argc, char ***argv) { (void)argc; (void)argv; return CF_OK; }
CFDEF void cf_dist_finalize(void) {}
CFDEF int cf_dist_rank(void) { return 0; }
CFDEF int cf_dist_size(void) { return 1; }
CFDEF void cf_dist_allreduce_mean(float *buf, size_t n) { (void)buf; (void)n; }
CFDEF void cf_dist_allreduce_sum_d(double *buf, int n) { (void)buf; (void)n; }
CFDEF void cf_dist_sum_reduce(double *buf, int n, void *ctx) { (void)ctx; cf_dist_allreduce_sum_d(buf, n); }
CFDEF void cf_dist_bcast(float *buf, size_t n) { (void)buf; (void)n; }
CFDEF void cf_dist_abort(int code) { (void)code; }
CFDEF void cf_dist_barrier(void) {}
CFDEF void cf_dist_overlap_begin(cf_net *net, size_t bucket_floats) { (void)net; (void)bucket_floats; }
CFDEF void cf_dist_overlap_end(cf_net *net) { (void)net; }

CFDEF int cf_dist_grad_lag(cf_net *net, cf_grad_lag *lag) {   /* one process: a delay line */
    size_t n = net->n_params;
    int had = lag->pending, next;
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
CFDEF void cf_dist_grad_lag_free(cf_grad_lag *lag) { CF_FREE(lag->buf[0]); CF_FREE(lag->buf[1]); memset(lag, 0, sizeof *lag); }
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
