/* cf-bench: training-step throughput of a model (forward, backward, the application's optimizer: SGD for CosmoFlow, LAMB for DeepCAM) on random
   data, beside this machine's sgemm rate measured in the same run, and the peak memory; --plan P: the oracle (tools/plan.h). */
#ifndef CF_IMPLEMENTATION_LINKED   /* the Makefile links the implementation it compiled once (tools/cosmoflow.c) */
#define CF_IMPLEMENTATION
#endif
#include "cosmoflow.h"
#include "tool.h"
#include "plan.h"
#ifdef _OPENMP
#include <omp.h>
#endif
#ifdef CF_USE_CBLAS
extern void openblas_set_num_threads(int);
#endif

/* Which kernels the BLAS runs (a tool picks a newer set itself when OpenBLAS fell back to its
   SSE kernels and the user set none: tools/tool.h, "OpenBLAS's kernels") */
static void report_blas(void) {
#ifdef CF_USE_CBLAS
    const char *core = openblas_get_corename();
    printf("blas: OpenBLAS, %s kernels\n", core ? core : "unknown");
#else
    printf("blas: the naive sgemm (built without CF_USE_CBLAS)\n");
#endif
}

typedef struct {
    const char *model;
    int batch, steps, threads, has_shape, no_sgemm, no_direct, allreduce, layers, check_blas, reference, precision, alternate, spatial;
    long ar_floats, overlap;
    cf_shape shape;
    plan_options plan;
} options;
static tool_flag flags[28];
/* --link A,BW */
static void parse_link(const char *v, void *dst) {
    plan_link *l = (plan_link *)dst;
    char *end;
    l->alpha = strtod(v, &end);
    if (*end != ',' || !(l->alpha >= 0 && l->alpha < 1)) die("--link %s: latency in seconds (0 to 1), a comma, bandwidth in bytes/s", v);
    l->bw = strtod(end + 1, &end);
    if (*end || !(l->bw > 0 && l->bw < 1e15)) die("--link %s: bandwidth in bytes/s, above 0", v);
}

static int n_flags;
static void flag_table(options *o) {
    tool_flag f[] = {
        {"--model", "M.cfg", FLAG_STR, &o->model, 0, 0, "network", NULL, NULL},
        {"--input-shape", "S", FLAG_SHAPE, &o->shape, 0, 0, "CxDxHxW or CxHxW (default: the cfg's)", NULL, &o->has_shape},
        {"--batch", "B", FLAG_INT, &o->batch, 1, 4096, "samples per step", NULL, NULL},
        {"--steps", "N", FLAG_INT, &o->steps, 0, 1000000, "timed steps after one warm-up step (0: none, e.g. with --allreduce alone)", NULL, NULL},
        {"--threads", "T", FLAG_INT, &o->threads, 0, 1024, "OpenMP and OpenBLAS threads (default 0: as the environment sets)", NULL, NULL},
        {"--no-sgemm", NULL, FLAG_SET, &o->no_sgemm, 1, 0, "skip the sgemm rate (reports 0; otherwise one 2048^3 product after each timed step, their median)", NULL, NULL},
        {"--no-direct", NULL, FLAG_SET, &o->no_direct, 1, 0, "no direct convolution kernels (fast path 'direct' off), to compare", NULL, NULL},
        {"--reference", NULL, FLAG_SET, &o->reference, 1, 0, "every operation through its reference (all fast paths off), to compare", NULL, NULL},
        PRECISION_FLAG(&o->precision),
        BF16_FORM_FLAG,
        {"--alternate", NULL, FLAG_SET, &o->alternate, 1, 0, "also the same network in the other precision, its steps alternated with these in this process (each first every other time), each timed apart: "
         "a line 'alternated: fp32 F bf16 B samples/s ...' (medians; a host whose speed drifts slows both alike); peak_rss_mb is then both networks'", NULL, NULL},
        {"--allreduce", NULL, FLAG_SET, &o->allreduce, 1, 0, "also time the averaging of the gradient buffer, the library's way and the others (medians of 8; run under mpirun): last 'allreduce_ms A grad_mb G ranks P'", NULL, NULL},
        {"--spatial", "K", FLAG_INT, &o->spatial, 1, 65536, "each sample split by depth across K ranks (run under mpirun; cf-train --spatial): rates are a group's, "
         "peak_rss_mb the largest rank's, and a line 'spatial K D per-rank peak_rss_mb min .. max'", NULL, NULL},
        COMM_TIMEOUT_FLAG,
        {"--plan", "P", FLAG_INT, &o->plan.P, 1, 1 << 20, "the oracle: for each split of P ranks (K a sample, D = P / K samples at once), the predicted step time and memory a rank, "
         "and the best split that fits; one process (docs/mpi.md, 'The oracle'); last line 'plan: best K=.. D=.. ...'", NULL, NULL},
        {"--link", "A,BW", FLAG_CALL, &o->plan.link, 0, 0, "--plan: the link's latency in s and bandwidth in bytes/s (default 5e-6,1e10; bench/oracle.sh measures one)", parse_link, NULL},
        {"--mem-limit", "MB", FLAG_DOUBLE, &o->plan.mem_limit_mb, 1, 1e9, "--plan: memory a rank may take (default: this machine's over --ranks-per-node)", NULL, NULL},
        {"--overhead", "MB", FLAG_DOUBLE, &o->plan.overhead_mb, 0, 1e6, "--plan: a process's memory beyond the plan and its batch: MPI, OpenBLAS, the program", NULL, NULL},
        {"--cores", "C", FLAG_INT, &o->plan.cores, 1, 1 << 20, "--plan: cores a node (default: this machine's)", NULL, NULL},
        {"--ranks-per-node", "R", FLAG_INT, &o->plan.ranks_per_node, 1, 1 << 20, "--plan: ranks a node (default P: one node)", NULL, NULL},
        {"--overlap", "N", FLAG_LONG, &o->overlap, 0, 1L << 30, "the step's gradient averaged in buckets of >= N floats during backward (cf-train --overlap)", NULL, NULL},
        {"--allreduce-floats", "N", FLAG_LONG, &o->ar_floats, 1, 1L << 30, "--allreduce of N floats instead of the model's gradient (two sizes give a link's latency and bandwidth)", NULL, NULL},
        {"--layers", NULL, FLAG_SET, &o->layers, 1, 0, "per layer: forward, backward-weights, backward-data ms, GFLOP/s, share, the paths taken; totals per type", NULL, NULL},
        {"--check-blas", NULL, FLAG_SET, &o->check_blas, 1, 0, "only check the BLAS: sgemm of several shapes, all four transposes, against a double-precision loop; exit 1 if wrong", NULL, NULL},
    };
    n_flags = (int)(sizeof f / sizeof f[0]);
    memcpy(flags, f, sizeof f);
}
static void usage(void) {
    flag_help("usage: cf-bench [--model M.cfg] [--input-shape S] [--batch B] [--steps N] [--threads T] [flags]", flags, n_flags,
              "last line: samples_per_s X gflops_per_s Y sgemm_peak_pct Z peak_rss_mb R\n");
}

/* --check-blas: the BLAS's sgemm against a double-precision loop (blas_check in tools/tool.h).
   Run before trusting a kernel set's speed. */
/* The core's peak: 12 independent chains of fp32 FMA, and of vdpbf16ps (32 multiply-adds
   each), on one thread; GFLOP/s counting a multiply-add as 2.  Printed by --check-blas, the
   ceiling a bf16 step's rate is measured against (docs/performance.md, "bf16"). */
#if defined(__x86_64__) && (defined(__clang__) ? __clang_major__ >= 9 : defined(__GNUC__) && __GNUC__ >= 10)
#include <immintrin.h>
#define PEAK_CHAINS(op, x)                                                                         \
    __m512 a[12]; int i; long k; double t;                                                          \
    for (i = 0; i < 12; i++) a[i] = _mm512_setzero_ps();                                            \
    t = now_s();                                                                                    \
    for (k = 0; k < n; k++) { for (i = 0; i < 12; i++) a[i] = op; __asm__ volatile("" : "+v"(x)); } \
    t = now_s() - t;                                                                                \
    for (i = 1; i < 12; i++) a[0] = _mm512_add_ps(a[0], a[i]);                                      \
    peak_sink = _mm512_reduce_add_ps(a[0]);
static volatile float peak_sink;
__attribute__((target("avx512f"))) static double peak_fma(long n) {
    __m512 x = _mm512_set1_ps(1.0001f), y = _mm512_set1_ps(0.999f);
    PEAK_CHAINS(_mm512_fmadd_ps(a[i], x, y), x)
    return 12.0 * n * 16 * 2 / t / 1e9;
}
__attribute__((target("avx512f,avx512bf16"))) static double peak_bf16(long n) {
    __m512bh x = (__m512bh)_mm512_set1_epi32(0x3f803f80), y = (__m512bh)_mm512_set1_epi32(0x3c003c00);
    PEAK_CHAINS(_mm512_dpbf16_ps(a[i], x, y), x)
    return 12.0 * n * 32 * 2 / t / 1e9;
}
static void peak_probe(void) {
    double f, b;
    if (!__builtin_cpu_supports("avx512f")) { printf("peak: no AVX-512\n"); return; }
    f = peak_fma(20000000);
    if (!__builtin_cpu_supports("avx512bf16")) { printf("peak per core: fp32 FMA %.1f GFLOP/s; no AVX512_BF16\n", f); return; }
    b = peak_bf16(20000000);
    printf("peak per core: fp32 FMA %.1f GFLOP/s, bf16 vdpbf16ps %.1f GFLOP/s (%.2fx)\n", f, b, b / f);
}
#else
static void peak_probe(void) { printf("peak: not probed (x86-64 with GCC or Clang only)\n"); }
#endif

static int check_blas(void) {
    int bad = blas_check(1);   /* tools/tool.h: the same check a tool runs before it picks a kernel set */
    printf("check-blas: %s (8 shapes x 4 transposes, tolerance 1e-5 of each entry's |A||B| sum)\n", bad ? "FAILED" : "passed");
    peak_probe();
    return bad ? 1 : 0;
}

/* The machine's practical sgemm rate, GFLOP/s: one square 2048^3 product.  cf-bench takes the
   median of one such product after each timed step (outside the step's time), so the rate and
   the steps see the machine alike: on a shared virtual machine its speed drifts by 30 % within
   minutes, and a single reading before the steps made the same binary's conv share of it swing
   from 56 % to 71 %. */
typedef struct { float *a, *b, *c; int n; } sgemm_bufs;
static double sgemm_rate(sgemm_bufs *s) {
    double t;
    if (!s->a) {
        s->n = 2048;
        s->a = (float *)calloc((size_t)s->n * s->n, 4); s->b = (float *)calloc((size_t)s->n * s->n, 4); s->c = (float *)calloc((size_t)s->n * s->n, 4);
        if (!s->a || !s->b || !s->c) die("out of memory for the sgemm measurement");
        cf_sgemm(0, 0, s->n, s->n, s->n, 1.0f, s->a, s->n, s->b, s->n, 0.0f, s->c, s->n);   /* warm-up: BLAS buffers, threads */
    }
    t = now_s();
    cf_sgemm(0, 0, s->n, s->n, s->n, 1.0f, s->a, s->n, s->b, s->n, 0.0f, s->c, s->n);
    return 2.0 * s->n * s->n * s->n / (now_s() - t) / 1e9;
}
static double median(double *v, int n) {
    int i, j;
    for (i = 0; i < n; i++) for (j = i + 1; j < n; j++) if (v[j] < v[i]) { double t = v[i]; v[i] = v[j]; v[j] = t; }
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* per-layer timing through the network's layer hook: t[3i] forward, t[3i+1] backward (for a
   convolution: its backward-weights), t[3i+2] a convolution's backward-data; seconds */
typedef struct { double *t, start; int split; } layer_clock;
static void time_layer(cf_net *net, int layer, int phase, void *ctx) {
    layer_clock *lc = (layer_clock *)ctx;
    double now = now_s();
    (void)net;
    if (phase == 0 || phase == 2) { lc->start = now; lc->split = 0; }
    else if (phase == 1) lc->t[3 * layer] += now - lc->start;
    else if (phase == 4) { lc->t[3 * layer + 1] += now - lc->start; lc->start = now; lc->split = 1; }   /* weights done, data starts */
    else lc->t[3 * layer + (lc->split ? 2 : 1)] += now - lc->start;   /* no phase 4: the whole backward */
}
/* one training step, its seconds */
static double timed_step(cf_trainer *tr, const float *x, const float *t, int B, cf_step_result *res) {
    double t0 = now_s();
    TRY(cf_train_step(tr, x, t, B, res));
    return now_s() - t0;
}
static double rate(double flops, double s) { return s > 0 ? flops / s / 1e9 : 0; }
/* a layer's FLOPs in one training step of B samples: forward + backward-weights +
   backward-data, except that a layer reading the network input computes no input gradient */
static double step_flops(const cf_layer *l, int B) { return cf_layer_flops(l) * B * (l->src[0] < 0 ? 2 : 3); }
/* One row per layer: forward, backward-weights (bwd-w) and backward-data (bwd-d) ms and
   GFLOP/s (other layers: their whole backward under bwd-w), share of the step; then totals
   per layer type with their rate as a percentage of the sgemm peak measured in this run. */
static void layer_table(const cf_net *net, const double *t, int steps, int B, double step_s, double peak) {
    int i, ty;
    printf("%-4s %-10s %-18s %9s %9s %9s %8s %8s %8s %7s  %s\n", "#", "type", "output", "fwd ms", "bwd-w ms", "bwd-d ms",
           "fwd GF/s", "bwd-w", "bwd-d", "share", "paths");
    for (i = 0; i < net->n_layers; i++) {
        const cf_layer *l = &net->layers[i];
        double f = t[3 * i] / steps, bw = t[3 * i + 1] / steps, bd = t[3 * i + 2] / steps, fl = cf_layer_flops(l) * B;
        int conv = l->type == CF_L_CONV;
        char shp[48];
        snprintf(shp, sizeof shp, "%dx%dx%dx%d", l->out.c, l->out.d, l->out.h, l->out.w);
        printf("%-4d %-10s %-18s %9.2f %9.2f %9.2f %8.1f %8.1f %8.1f %6.1f%%  %s, %s, %s\n", i, cf_layer_type_name(l->type), shp, 1e3 * f,
               1e3 * bw, 1e3 * bd, rate(fl, f), rate(conv ? fl : 2 * fl, bw), rate(l->src[0] < 0 ? 0 : fl, bd), 100 * (f + bw + bd) / step_s,
               cf_net_path(net, i, CF_OP_FORWARD), cf_net_path(net, i, CF_OP_BACKWARD_WEIGHTS), cf_net_path(net, i, CF_OP_BACKWARD_DATA));
    }
    printf("by type:\n");
    for (ty = 0; ty < CF_L_NTYPES; ty++) {
        double f = 0, b = 0, fl = 0;
        int n = 0;
        for (i = 0; i < net->n_layers; i++) {
            const cf_layer *l = &net->layers[i];
            if (l->type != ty) continue;
            f += t[3 * i] / steps; b += (t[3 * i + 1] + t[3 * i + 2]) / steps; n++;
            fl += step_flops(l, B);
        }
        if (!n) continue;
        printf("  %-10s %4d layers %10.1f ms fwd %10.1f ms bwd %8.1f GF/s", cf_layer_type_name(ty), n, 1e3 * f, 1e3 * b, rate(fl, f + b));
        if (peak > 0 && (ty == CF_L_CONV || ty == CF_L_DECONV || ty == CF_L_DENSE)) printf(" %5.1f%% of sgemm", 100 * rate(fl, f + b) / peak);
        printf(" %6.1f%% of the step\n", 100 * (f + b) / step_s);
    }
}

/* --allreduce: one data-parallel step's communication alone, the averaging of n floats, in
   the library's way (the mean in chunks of 4 MiB) and the others measured against it
   (docs/mpi.md, "The allreduce"): the library before (one in-place MPI_Allreduce of the whole
   buffer, then the division), the sum alone in chunks of 1 and 16 MiB, one call into a
   buffer kept between calls.  Rounds alternate the variants, after a barrier each;
   the first round sets up buffers and is not counted; medians.  The library's line keeps the
   form 'allreduce_ms A grad_mb G ranks P'. */
#define AR_ROUNDS 9
static void ar_variant(int v, float *buf, float *kept, size_t n) {
#ifdef CF_USE_MPI
    size_t chunk = v == 2 ? (1u << 20) / 4 : v == 3 ? (16u << 20) / 4 : n, off, k;
    if (v == 0) { cf_dist_allreduce_mean(buf, n); return; }
    if (cf_dist_size() == 1) return;
    TOOL_WAIT("MPI_Allreduce (--allreduce's variants)");   /* (the watchdog's, --comm-timeout) */
    if (v == 4) MPI_Allreduce(buf, kept, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    for (off = 0; v != 4 && off < n; off += chunk)
        MPI_Allreduce(MPI_IN_PLACE, buf + off, (int)(n - off < chunk ? n - off : chunk), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    TOOL_WAITED;
    if (v == 1) for (k = 0; k < n; k++) buf[k] /= (float)cf_dist_size();   /* the library before: one call, then the mean */
#else
    (void)kept; (void)n;
    if (v == 0) cf_dist_allreduce_mean(buf, n);
#endif
}
static void allreduce_bench(size_t n) {
    static const char *names[5] = {"library", "before-one-call-then-divide", "sum-chunks-1MiB", "sum-chunks-16MiB", "sum-kept-buffer-one-call"};
    float *buf = (float *)calloc(n + 1, 4), *kept = (float *)calloc(n + 1, 4);
    double t[5][AR_ROUNDS], t0;
    int r, v;
    if (!buf || !kept) die("out of memory for %zu floats", n);
    for (r = 0; r < AR_ROUNDS; r++)
        for (v = 0; v < 5; v++) {
            cf_dist_barrier();
            t0 = now_s();
            ar_variant(v, buf, kept, n);
            t[v][r] = now_s() - t0;
        }
    for (v = 0; v < 5 && cf_dist_rank() == 0; v++) printf("allreduce_ms_%s %.3f\n", names[v], 1e3 * median(t[v] + 1, AR_ROUNDS - 1));
    if (cf_dist_rank() == 0) printf("allreduce_ms %.3f grad_mb %.2f ranks %d\n", 1e3 * median(t[0] + 1, AR_ROUNDS - 1), n * 4.0 / 1e6, cf_dist_size());
    free(buf); free(kept);
}

/* A flag that the chosen mode would not read is refused by name, never ignored: --plan is one
   process that times a slab's steps in fp32, and its layout flags are the plan's alone.
   A layout is a whole number of nodes of R ranks, R at most P. */
static void refuse_ignored(const options *o) {
    static const char *plan_only[] = {"--link", "--mem-limit", "--overhead", "--cores", "--ranks-per-node"};
    static const char *not_with_plan[] = {"--spatial", "--allreduce", "--allreduce-floats", "--alternate", "--layers", "--precision", "--overlap", "--check-blas"};
    size_t i;
    for (i = 0; i < sizeof plan_only / sizeof *plan_only; i++)
        if (!o->plan.P && flag_was_given(flags, n_flags, plan_only[i])) die("%s: a setting of the oracle; needs --plan P", plan_only[i]);
    for (i = 0; i < sizeof not_with_plan / sizeof *not_with_plan; i++)
        if (o->plan.P && flag_was_given(flags, n_flags, not_with_plan[i]))
            die("%s with --plan: the oracle times one process's fp32 steps on each split's slab; run %s without --plan", not_with_plan[i], not_with_plan[i]);
    if (!o->plan.P && o->ar_floats && !o->allreduce) die("--allreduce-floats %ld: the size of --allreduce's buffer; needs --allreduce", o->ar_floats);
    if (o->plan.ranks_per_node > o->plan.P && o->plan.P)
        die("--ranks-per-node %d: more than the %d ranks of --plan %d", o->plan.ranks_per_node, o->plan.P, o->plan.P);
    if (o->plan.ranks_per_node && o->plan.P % o->plan.ranks_per_node)
        die("--ranks-per-node %d: --plan %d's ranks do not fill whole nodes of %d (P must be a multiple of R)", o->plan.ranks_per_node, o->plan.P, o->plan.ranks_per_node);
}

int main(int argc, char **argv) {
    options o;
    int B, steps, threads, i, do_sgemm, do_ar, do_layers;
    const char *model;
    cf_net net;
    tool_init(argc, argv, "bench");
    memset(&o, 0, sizeof o);
    o.model = "models/cosmoflow.cfg"; o.batch = 1; o.steps = 3; o.spatial = 1;
    o.plan.link.alpha = 5e-6; o.plan.link.bw = 1e10; o.plan.overhead_mb = 40; o.plan.cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
    flag_table(&o);
    flag_parse(argc, argv, 1, flags, n_flags, usage, NULL, 0);
    refuse_ignored(&o);
    model = o.model; B = o.batch; steps = o.steps; threads = o.threads;
    do_sgemm = !o.no_sgemm; do_ar = o.allreduce; do_layers = o.layers;
    if (o.no_direct) cf_fast_path_set("direct", 0);
    if (o.reference) cf_fast_path_set("all", 0);
    if (threads) {
#ifdef _OPENMP
        omp_set_num_threads(threads);
#endif
#ifdef CF_USE_CBLAS
        openblas_set_num_threads(threads);
#endif
    }
    dist_start(&argc, &argv);
    if (cf_dist_rank() == 0) { report_blas(); printf("%s\n", precision_text(o.precision)); }
    if (o.check_blas) return check_blas();
    if (o.plan.P) {   /* the oracle: one process, one thread (the model's compute is a rank's) */
        one_process_only();
        o.plan.model = model; o.plan.B = B; o.plan.steps = steps > 0 ? steps : 1; o.plan.has_shape = o.has_shape; o.plan.shape = o.shape;
        if (o.plan.cores < 1) o.plan.cores = 1;
        if (!o.plan.mem_limit_mb) {
            o.plan.mem_limit_mb = plan_machine_mb() / (o.plan.ranks_per_node ? o.plan.ranks_per_node : o.plan.P);
            o.plan.limit_is_machines = 1;
        }
#ifdef _OPENMP
        omp_set_num_threads(1);
#endif
#ifdef CF_USE_CBLAS
        openblas_set_num_threads(1);
#endif
        plan_run(&o.plan);
        cf_dist_finalize();
        return 0;
    }
    TRY(cf_net_load_cfg(&net, model, o.has_shape ? &o.shape : NULL));
    if (o.spatial > 1 && o.alternate) die("--spatial with --alternate: the twin network is not split");
    if (o.spatial > 1 && cf_net_set_spatial(&net, o.spatial, 0)) die("--spatial %d: %s", o.spatial, cf_failure_reason());   /* before the weights: a rank holds its part */
    cf_net_init(&net, 1);
    if (do_ar) allreduce_bench(o.ar_floats ? (size_t)o.ar_floats : net.n_params);
    if (steps > 0) {
        size_t nx = (size_t)B * cf_shape_size(net.input) / (size_t)o.spatial, nt = (size_t)B * net.n_targets, k;   /* a rank's slabs */
        int seg = net.loss == CF_LOSS_SOFTMAX_CE;
        float *x = (float *)malloc(nx * 4), *t = (float *)malloc(nt * 4);
        double flops = 0, peak = 0, dt = 0, *rates = (double *)calloc((size_t)steps, sizeof(double));
        sgemm_bufs sb = {NULL, NULL, NULL, 0};
        cf_rng r = cf_rng_seed(3);
        layer_clock lc = {NULL, 0, 0};
        cf_train_config tc;
        cf_trainer tr, tr2;
        cf_net net2;
        double *t_own = NULL, *t_twin = NULL;
        cf_step_result res;
        if (!x || !t || !rates) die("out of memory for the batch");
        for (k = 0; k < nx; k++) x[k] = cf_rng_uniform(&r);
        for (k = 0; k < nt; k++) t[k] = seg ? (float)(cf_rng_u64(&r) % (uint64_t)net.n_classes) : cf_rng_uniform(&r) * 2 - 1;
        for (i = 0; i < net.n_layers; i++) flops += step_flops(&net.layers[i], B);
        /* the library's training step, as cf-train runs it, with the application's optimizer
           (SGD for CosmoFlow, LAMB for DeepCAM) at a constant tiny learning rate */
        cf_train_defaults(&tc);
        tc.lr = 1e-6; tc.base_batch = 0; tc.warmup_epochs = 0; tc.n_decay = 0; tc.overlap = o.overlap; tc.precision = o.precision;
        TRY(cf_train_init(&tr, &net, &tc));
        if (o.alternate) {   /* the twin: the same cfg and shape, the other precision */
            TRY(cf_net_load_cfg(&net2, model, o.has_shape ? &o.shape : NULL));
            cf_net_init(&net2, 1);
            tc.precision = o.precision == CF_BF16 ? CF_FP32 : CF_BF16;
            TRY(cf_train_init(&tr2, &net2, &tc));
            if (!(t_own = (double *)calloc((size_t)steps + 1, sizeof(double))) || !(t_twin = (double *)calloc((size_t)steps + 1, sizeof(double))))
                die("out of memory");
        }
        for (i = 0; i <= steps; i++) {
            double own;
            if (i == 1 && do_layers) {   /* step 0 warms up caches and allocates */
                lc.t = (double *)calloc(3 * net.n_layers, sizeof(double));
                cf_net_set_layer_hook(&net, time_layer, &lc);
            }
            if (o.alternate && i % 2) t_twin[i] = timed_step(&tr2, x, t, B, &res);   /* the twin first on odd steps: the order
                                                                                          of the two may matter, so each goes first half the time */
            own = timed_step(&tr, x, t, B, &res);
            if (o.alternate) {
                t_own[i] = own;
                if (i % 2 == 0) t_twin[i] = timed_step(&tr2, x, t, B, &res);
            }
            if (i == 0) continue;
            dt += own / steps;
            if (do_sgemm) rates[i - 1] = sgemm_rate(&sb);
        }
        if (do_sgemm) peak = median(rates, steps);
        free(rates); free(sb.a); free(sb.b); free(sb.c);
        if (do_layers && cf_dist_rank() == 0) layer_table(&net, lc.t, steps, B, dt, peak);
        if (o.alternate && steps > 0 && cf_dist_rank() == 0) {
            double own = B / median(t_own + 1, steps), twin = B / median(t_twin + 1, steps), f32 = o.precision == CF_BF16 ? twin : own;
            double b16 = o.precision == CF_BF16 ? own : twin;
            printf("alternated: fp32 %.4f bf16 %.4f samples/s, bf16/fp32 %.3f (medians of %d steps each, one process)\n", f32, b16, b16 / f32, steps);
        }
        if (o.alternate) { cf_train_free(&tr2); cf_net_free(&net2); }
        free(t_own); free(t_twin);
        free(lc.t);
        if (cf_dist_rank() == 0) printf("model %s input %dx%dx%dx%d batch %d: %.3f s/step, %.1f GFLOP/step, sgemm peak %.1f GFLOP/s\n",
               model, net.input.c, net.input.d, net.input.h, net.input.w, B, dt, flops / 1e9, peak);
        {   /* the largest and smallest rank's peak */
            double rss[2];
            rss[0] = peak_rss_mb(); rss[1] = -rss[0];
            cf_dist_allreduce_max_d(rss, 2);
            if (o.spatial > 1 && cf_dist_rank() == 0) printf("spatial %d groups %d per-rank peak_rss_mb %.0f .. %.0f (each rank %d of %d planes; GFLOP a rank's)\n",
                                                          o.spatial, cf_dist_size() / o.spatial, -rss[1], rss[0], net.input.d / o.spatial, net.input.d);
            if (cf_dist_rank() == 0) printf("samples_per_s %.4f gflops_per_s %.1f sgemm_peak_pct %.1f peak_rss_mb %.0f\n",
                                            B / dt, flops / dt / 1e9, peak > 0 ? 100.0 * flops / dt / 1e9 / peak : 0.0, rss[0]);
        }
        free(x); free(t);
        cf_train_free(&tr);
    }
    cf_net_free(&net);
    cf_dist_finalize();
    return 0;
}
