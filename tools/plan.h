/* cf-bench --plan P: the oracle.  For each split of P ranks into groups of K ranks a sample
   and D = P / K samples at once (--spatial K), the step time and the memory a rank needs,
   predicted before any allocation is spent, and the best split that fits (docs/mpi.md, "The
   oracle"; after Kahira et al. 2021, docs/references.md).  The model:

     step = over x compute(K) + halos(K) + features(K) + the gradient's averaging(P, D)

   compute(K): one training step of the network on one rank's slab, measured here: the same
     network with an input of depth D/K (a slab's FLOP: 'same' padding where the split has
     halos; its dense layer F/K wide where the split's holds 1/K of the rows), one thread,
     after a warm-up step; over = ranks a node / cores a node when above 1 (ranks sharing a
     core take turns).
   halos(K): per convolution before the [flatten], forward and (when its input has a
     gradient) backward, two MPI_Sendrecv of its halo planes (docs/math.md, "Halos"):
     2 (alpha + bytes / BW); batch norm's sums, two small allreduces a layer.
   features(K): the [flatten]'s allgather of B F floats, and the split [dense]'s gather of its
     rows and allreduce of its part of dx (B F floats).
   averaging: MPICH's large-message allreduce, 2 log2(p) alpha + 2 (p - 1) / p n / BW, over the
     P ranks for the replicated parameters and over the D ranks that hold the same rows of a
     split [dense].
   memory a rank: the plan (cf_net_arena_floats: outputs and gradients of a slab; the split's
     buffers, cf_net_spatial_floats; parameters, gradients and SGD's momentum, each of this
     rank's layout), the input batch of slabs, and --overhead MB for the process, MPI and
     OpenBLAS.
   The link (alpha, BW) comes from --link or from two sizes of cf-bench --allreduce measured
   on it (bench/oracle.sh). */
#ifndef CF_PLAN_H
#define CF_PLAN_H

static double median(double *v, int n);   /* cf-bench's (sorts v) */
typedef struct { double alpha, bw; } plan_link;   /* seconds a message, bytes a second */
typedef struct {
    const char *model;
    cf_shape shape;
    int has_shape, P, B, cores, ranks_per_node, steps;
    double mem_limit_mb, overhead_mb;
    int limit_is_machines;   /* mem_limit_mb is this machine's memory over the ranks a node (no --mem-limit) */
    plan_link link;
} plan_options;
typedef struct { int K, D, fits; double compute, halos, features, averaging, step, mem_mb; } plan_row;

static double plan_log2(int p) { return log((double)p) / log(2.0); }
/* MPICH's allreduce of bytes over p ranks (Rabenseifner), and an allgather of bytes in all */
static double plan_allreduce(const plan_link *L, int p, double bytes) {
    return p < 2 || bytes <= 0 ? 0 : 2 * plan_log2(p) * L->alpha + 2.0 * (p - 1) / p * bytes / L->bw;
}
static double plan_allgather(const plan_link *L, int p, double bytes) {
    return p < 2 ? 0 : plan_log2(p) * L->alpha + (double)(p - 1) / p * bytes / L->bw;
}
/* one step of net (whole, or a slab's proxy) on this rank, seconds: the median of steps after
   a warm-up step, one thread, SGD at a tiny rate */
static double plan_step_time(cf_net *net, int B, int steps) {
    size_t nx = (size_t)B * cf_shape_size(net->input), nt = (size_t)B * net->n_targets, k;
    float *x = (float *)malloc(nx * 4 + 4), *t = (float *)malloc(nt * 4 + 4);
    double *s = (double *)calloc((size_t)steps + 1, sizeof(double)), med;
    cf_rng r = cf_rng_seed(3);
    cf_train_config tc;
    cf_trainer tr;
    cf_step_result res;
    int i;
    if (!x || !t || !s) die("out of memory for the plan's timing");
    for (k = 0; k < nx; k++) x[k] = cf_rng_uniform(&r);
    for (k = 0; k < nt; k++) t[k] = cf_rng_uniform(&r) * 2 - 1;
    cf_train_defaults(&tc);
    tc.lr = 1e-6; tc.base_batch = 0; tc.warmup_epochs = 0; tc.n_decay = 0;
    TRY(cf_train_init(&tr, net, &tc));
    for (i = 0; i <= steps; i++) {
        double t0 = now_s();
        TRY(cf_train_step(&tr, x, t, B, &res));
        if (i) s[i - 1] = now_s() - t0;
    }
    med = median(s, steps);
    cf_train_free(&tr);
    free(x); free(t); free(s);
    return med;
}
/* compute(K): the network with a slab's depth as its input */
static double plan_compute(const plan_options *o, const cf_shape *whole, int K) {
    cf_net proxy;
    cf_shape slab = *whole;
    double t;
    slab.d = whole->d / K;
    TRY(cf_net_load_cfg(&proxy, o->model, &slab));
    cf_net_init(&proxy, 1);
    t = plan_step_time(&proxy, o->B, o->steps);
    cf_net_free(&proxy);
    return t;
}
/* the communication and memory of one split from its plan (one process: the slabs' shapes
   only, cf_net_set_spatial); whole: the unsplit network, for the shared [dense]'s size.
   CF_ERR when the split is refused (the reason printed) */
static int plan_split(const plan_options *o, const cf_net *whole, int K, plan_row *row) {
    cf_net net;
    int i, D = row->D, B = o->B, shard = -1;
    size_t shard_n = 0, arena;
    double halo = 0, feat = 0;
    TRY(cf_net_load_cfg(&net, o->model, o->has_shape ? &o->shape : NULL));
    if (K > 1 && cf_net_set_spatial(&net, K, 0)) { printf("K=%d: %s\n", K, cf_failure_reason()); cf_net_free(&net); return CF_ERR; }
    for (i = 0; K > 1 && i < net.n_layers && net.layers[i].type != CF_L_FLATTEN; i++) {
        const cf_layer *l = &net.layers[i];
        double plane = 4.0 * B * l->in.c * l->in.h * l->in.w;
        if (l->type == CF_L_CONV) {   /* hb = pb planes to the next rank, ha = d (k - 1) - pb + 1 - s to the previous */
            int hb = l->g.pb[0], ha = l->g.dil[0] * (l->g.k[0] - 1) - l->g.pb[0] + 1 - l->g.s[0];
            double once = (hb ? o->link.alpha + hb * plane / o->link.bw : 0) + (ha ? o->link.alpha + ha * plane / o->link.bw : 0);
            halo += once * (l->src[0] >= 0 ? 2 : 1);   /* and back in backward, when the input has a gradient */
        }
        if (l->type == CF_L_BATCHNORM) halo += 2 * plan_allreduce(&o->link, K, 16.0 * l->in.c);
    }
    if (K > 1 && i < net.n_layers) {   /* the [flatten]'s gather; a split [dense] after it */
        double F = (double)cf_shape_size(whole->layers[i].in);
        feat = plan_allgather(&o->link, K, 4.0 * B * F);
        if (i + 1 < net.n_layers && net.layers[i + 1].w_n < whole->layers[i + 1].w_n) {
            shard = i + 1;
            shard_n = net.layers[shard].w_n + net.layers[shard].b_n;
            feat += plan_allgather(&o->link, K, 4.0 * B * net.layers[shard].out.c) + plan_allreduce(&o->link, K, 4.0 * B * F);
        }
    }
    row->halos = halo; row->features = feat;
    row->averaging = plan_allreduce(&o->link, o->P, 4.0 * (double)(net.n_params - shard_n)) + plan_allreduce(&o->link, D, 4.0 * (double)shard_n);
    arena = cf_net_arena_floats(&net, B, 0);   /* ((size_t)-1: a slab too large for one rank) */
    row->mem_mb = arena == (size_t)-1 ? INFINITY : 4e-6 * ((double)arena + (double)cf_net_spatial_floats(&net, B) + 3.0 * (double)net.n_params +
                                                           (double)B * cf_shape_size(net.input) / K) + o->overhead_mb;
    cf_net_free(&net);
    return CF_OK;
}
/* this machine's memory, MB (a proxy that would not fit is not timed) */
static double plan_machine_mb(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    double kb = 0;
    while (f && fgets(line, sizeof line, f)) if (sscanf(line, "MemTotal: %lf kB", &kb) == 1) break;
    if (f) fclose(f);
    return kb > 0 ? kb / 1024 : 1e9;
}
/* every split of P that the network allows, predicted; the best that fits named last */
static void plan_run(const plan_options *o) {
    cf_net whole;
    plan_row rows[32];
    int n = 0, K, best = -1, kmax, rpn = o->ranks_per_node > 0 ? o->ranks_per_node : o->P, untimed_fit = 0;
    int mb_digits = o->mem_limit_mb < 10 ? 2 : 0;   /* a limit below 1 MB shown as itself, not as 0 */
    double over = rpn > o->cores ? (double)rpn / o->cores : 1.0, here = plan_machine_mb();
    TRY(cf_net_load_cfg(&whole, o->model, o->has_shape ? &o->shape : NULL));
    kmax = cf_net_spatial_max(&whole, o->P);
    printf("plan: %s, input %dx%dx%dx%d, batch %d a group, %d ranks (%d a node, %d cores a node), link alpha %.3g s, %.3g GB/s, memory limit %.*f MB a rank\n",
           o->model, whole.input.c, whole.input.d, whole.input.h, whole.input.w, o->B, o->P, rpn, o->cores, o->link.alpha, o->link.bw / 1e9, mb_digits, o->mem_limit_mb);
    printf("%-5s %-5s %11s %9s %11s %11s %10s %12s %10s %s\n", "K", "D", "compute_s", "halos_s", "features_s", "averaging_s", "step_s", "samples_s", "mem_mb", "fits");
    for (K = 1; K <= kmax && n < 32; K++) {
        plan_row *r = &rows[n];
        if (o->P % K || whole.input.d % K) continue;
        r->K = K; r->D = o->P / K;
        if (plan_split(o, &whole, K, r)) continue;
        r->fits = r->mem_mb <= o->mem_limit_mb;
        /* a slab this machine cannot hold is not timed (compute nan) */
        r->compute = r->mem_mb <= 0.8 * here ? over * plan_compute(o, &whole.input, K) : NAN;
        r->step = r->compute + r->halos + r->features + r->averaging;
        if (isfinite(r->compute))
            printf("%-5d %-5d %11.4f %9.4f %11.4f %11.4f %10.4f %12.4f %10.1f %s\n", K, r->D, r->compute, r->halos, r->features, r->averaging, r->step,
                   (double)o->B * r->D / r->step, r->mem_mb, r->fits ? "yes" : "no");
        else   /* no step time, so no rate: the row says so rather than nan */
            printf("%-5d %-5d %11s %9.4f %11.4f %11.4f %10s %12s %10.1f %s\n", K, r->D, "(not timed)", r->halos, r->features, r->averaging, "-", "-",
                   r->mem_mb, r->fits ? "yes" : "no");
        untimed_fit += r->fits && !isfinite(r->step);
        if (r->fits && isfinite(r->step) && (best < 0 || (double)o->B * r->D / r->step > (double)o->B * rows[best].D / rows[best].step)) best = n;
        n++;
    }
    if (best < 0 && untimed_fit)   /* fits the limit given, but not this machine */
        printf("plan: no split of %d ranks that fits %.*f MB a rank could be timed: each is too large for this machine's memory (time it on a node that holds a rank's slab)\n",
               o->P, mb_digits, o->mem_limit_mb);
    else if (best < 0 && o->limit_is_machines)   /* more ranks on this one node would only shrink the limit */
        printf("plan: no split of %d ranks fits %.*f MB a rank (this machine's memory shared by %d ranks a node: give --ranks-per-node R, "
               "the ranks on each node, or --mem-limit MB; or a smaller batch)\n", o->P, mb_digits, o->mem_limit_mb, rpn);
    else if (best < 0) printf("plan: no split of %d ranks fits %.*f MB a rank (more ranks, for a larger split K, or a smaller batch)\n", o->P, mb_digits, o->mem_limit_mb);
    else printf("plan: best K=%d D=%d: %.4f s a step, %.4f samples/s, %.1f MB a rank\n", rows[best].K, rows[best].D, rows[best].step,
                (double)o->B * rows[best].D / rows[best].step, rows[best].mem_mb);
    cf_net_free(&whole);
}
#endif
