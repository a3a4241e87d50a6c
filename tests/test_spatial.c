/* A sample split across ranks (cf_net_set_spatial) against one rank: run under mpirun with P
   ranks, every rank trains the same network twice, split (K ranks a sample, D = P / K groups of
   B samples) and whole (one rank's run of all D B samples, computed on every rank alike), with
   the same SGD steps, and compares the loss of every step, every gradient after the first and
   every weight after the last: within 1e-5 relative (fp32); bf16, within 1e-2 (a boundary
   plane's input gradient is rounded on each rank, then added and rounded again: a few bf16
   ulps, 2^-8 each, where one rank rounds once; bf16 runs of a few steps then drift apart as
   any two bf16 computations that round one value differently do, so bf16 is checked after
   one step).
   A network split before its weights are drawn has the same ones.  With CF_SPATIAL_TMP set (a
   directory), the split network's checkpoint (written by its group's first rank, the others
   sending their rows of a split [dense]) loads into a whole network and into another split
   one with every value as the split network holds it.
   usage: test_spatial MODEL SHAPE K B STEPS [periodic] [bf16]
   Last line "N passed, M failed" (rank 0). */
#define CF_IMPLEMENTATION
#include "cosmoflow.h"
#include "check.h"
#include <stdlib.h>
#include <string.h>

/* worst over the tensors of |a - b| / max |b| of the tensor: a in the split network's layout,
   b in the whole one's; a [dense] whose rows the split shares (fewer weights in the split
   network): this rank's rows */
static double worst_tensor_err(const cf_net *split, const cf_net *whole, const float *a, const float *b, int *where) {
    int i, r = 0;
    double worst = 0;
    cf_net_spatial(split, &r, NULL);
    *where = -1;
    for (i = 0; i < whole->n_layers; i++) {
        const cf_layer *ls = &split->layers[i], *lw = &whole->layers[i];
        size_t row = ls->w_n == lw->w_n ? 0 : cf_shape_size(lw->in), rows = row ? ls->w_n / row : 0;   /* a shared [dense]: rows of row weights */
        double e;
        if (ls->w_n && (e = check_relerr(a + ls->w_off, b + lw->w_off + (size_t)r * rows * row, ls->w_n)) > worst) { worst = e; *where = i; }
        if (ls->b_n && (e = check_relerr(a + ls->b_off, b + lw->b_off + (size_t)r * rows, ls->b_n)) > worst) { worst = e; *where = i; }
    }
    return worst;
}
int main(int argc, char **argv) {
    cf_net whole, split, early;
    cf_shape shape;
    cf_train_config cfg;
    cf_trainer tw, ts;
    cf_step_result rw, rs;
    int P, rank, K, B, steps, D, g, r, d0, step, periodic, bf16, where, k;
    size_t per, nx, plane, i;
    float *x_all, *t_all, *x_mine;
    double tol, worst_loss = 0, eg = 0, ew = 0, eo;
    cf_rng rng = cf_rng_seed(7);
    cf_dist_init(&argc, &argv);
    P = cf_dist_size(); rank = cf_dist_rank();
    if (argc < 6) { if (!rank) puts("usage: test_spatial MODEL SHAPE K B STEPS [periodic] [bf16]"); cf_dist_finalize(); return 2; }
    K = atoi(argv[3]); B = atoi(argv[4]); steps = atoi(argv[5]);
    periodic = argc > 6 && !strcmp(argv[6], "periodic");
    bf16 = (argc > 6 && !strcmp(argv[argc - 1], "bf16"));
    tol = bf16 ? 1e-2 : 1e-5;
    D = P / K; g = rank / K;
    if (cf_parse_shape(argv[2], &shape) || cf_net_load_cfg(&whole, argv[1], &shape) || cf_net_load_cfg(&split, argv[1], &shape)) {
        printf("rank %d: %s\n", rank, cf_failure_reason()); cf_dist_abort(1); return 1;
    }
    cf_net_init(&whole, 1); cf_net_init(&split, 1);
    if (cf_net_load_cfg(&early, argv[1], &shape)) { printf("rank %d: %s\n", rank, cf_failure_reason()); cf_dist_abort(1); return 1; }
    if (periodic && cf_net_set_spatial(&whole, 1, 1)) { printf("%s\n", cf_failure_reason()); cf_dist_abort(1); }
    if (cf_net_set_spatial(&split, K, periodic)) {   /* the refusal is what a caller gets too */
        if (!rank) printf("refused: %s\n", cf_failure_reason());
        cf_dist_finalize();
        return 3;
    }
    cf_net_spatial(&split, &r, &d0);
    CHECK(cf_net_set_spatial(&early, K, periodic) == CF_OK && cf_net_init(&early, 1) == CF_OK && early.n_params == split.n_params &&
          !memcmp(early.params, split.params, split.n_params * sizeof(float)), "rank %d: split before its weights are drawn, the same weights (%zu of them)", rank, early.n_params);
    cf_net_free(&early);
    CHECK(r == rank % K && d0 == r * (shape.d / K), "rank %d: slab %d from plane %d", rank, r, d0);
    per = cf_shape_size(shape); nx = (size_t)D * B * per; plane = (size_t)shape.h * shape.w;
    x_all = (float *)malloc(nx * sizeof(float)); t_all = (float *)malloc((size_t)D * B * whole.n_outputs * sizeof(float));
    x_mine = (float *)malloc(nx / D / K * sizeof(float) + 4);
    for (i = 0; i < nx; i++) x_all[i] = cf_rng_uniform(&rng) * 2;
    for (i = 0; i < (size_t)D * B * whole.n_outputs; i++) t_all[i] = cf_rng_uniform(&rng) * 1.6f - 0.8f;
    for (k = 0; k < B; k++) {   /* this group's samples, this rank's planes of them */
        int c;
        for (c = 0; c < shape.c; c++)
            memcpy(x_mine + (((size_t)k * shape.c + c) * (shape.d / K)) * plane, x_all + ((size_t)(g * B + k) * per) + ((size_t)c * shape.d + d0) * plane,
                   (size_t)(shape.d / K) * plane * sizeof(float));
    }
    cf_train_defaults(&cfg);
    cfg.optimizer = CF_OPT_SGD; cfg.lr = 0.001; cfg.warmup_epochs = 0; cfg.n_decay = 0; cfg.base_batch = 0; cfg.precision = bf16 ? CF_BF16 : CF_FP32;
    CHECK(cf_train_init(&tw, &whole, &cfg) == CF_OK && cf_train_init(&ts, &split, &cfg) == CF_OK, "trainers: %s", cf_failure_reason());
    cf_train_epoch(&tw, 1); cf_train_epoch(&ts, 1);
    for (step = 1; step <= steps; step++) {
        double loss = 0;
        CHECK(cf_train_step(&tw, x_all, t_all, D * B, &rw) == CF_OK, "whole step %d: %s", step, cf_failure_reason());
        CHECK(cf_train_step(&ts, x_mine, t_all + (size_t)g * B * whole.n_outputs, B, &rs) == CF_OK, "split step %d: %s", step, cf_failure_reason());
        loss = rs.loss / P;
        cf_dist_allreduce_sum_d(&loss, 1);   /* the groups' losses, each counted on its K ranks: their mean */
        if (fabs(loss - rw.loss) / fabs(rw.loss) > worst_loss) worst_loss = fabs(loss - rw.loss) / fabs(rw.loss);
        if (step == 1) eg = worst_tensor_err(&split, &whole, split.grads, whole.grads, &where);
    }
    ew = worst_tensor_err(&split, &whole, split.params, whole.params, &where);
    {   /* predictions on the split net equal the whole net's on this group's samples */
        const float *yw, *ys;
        float *keep = (float *)malloc((size_t)D * B * whole.n_outputs * sizeof(float));
        yw = cf_net_predict(&whole, x_all, D * B);
        memcpy(keep, yw, (size_t)D * B * whole.n_outputs * sizeof(float));
        ys = cf_net_predict(&split, x_mine, B);
        eo = check_relerr(ys, keep + (size_t)g * B * whole.n_outputs, (size_t)B * whole.n_outputs);
        free(keep);
    }
    {   /* the worst over the ranks */
        double w[4];
        w[0] = worst_loss; w[1] = eg; w[2] = ew; w[3] = eo;
        cf_dist_allreduce_max_d(w, 4);
        worst_loss = w[0]; eg = w[1]; ew = w[2]; eo = w[3];
    }
    if (!rank) {
        CHECK(worst_loss <= tol, "K=%d D=%d%s%s: loss of every step, worst relative difference %.2e (bound %g)", K, D, periodic ? " periodic" : "", bf16 ? " bf16" : "", worst_loss, tol);
        CHECK(eg <= tol, "K=%d D=%d: every gradient after step 1, worst relative difference %.2e", K, D, eg);
        CHECK(ew <= tol, "K=%d D=%d: every weight after %d steps, worst relative difference %.2e", K, D, steps, ew);
        CHECK(eo <= tol, "K=%d D=%d: predictions, worst relative difference %.2e", K, D, eo);
        printf("spatial K=%d D=%d %s%s%s: loss %.2e gradients %.2e weights %.2e (layer %d) predictions %.2e (bound %g); %zu of %zu parameters a rank\n", K, D, argv[1],
               periodic ? " periodic" : "", bf16 ? " bf16" : "", worst_loss, eg, ew, where, eo, tol, split.n_params, whole.n_params);
    }
    if (getenv("CF_SPATIAL_TMP")) {   /* the split network's checkpoint, whole, and back */
        char path[4096];
        cf_net back, back2;
        double eb = 1;
        int ok2 = 0;
        snprintf(path, sizeof path, "%s/split.cfck", getenv("CF_SPATIAL_TMP"));
        if (g == 0) CHECK(cf_checkpoint_save(rank == 0 ? path : NULL, &split, NULL) == CF_OK, "rank %d: the split checkpoint: %s", rank, cf_failure_reason());
        cf_dist_barrier();
        if (!cf_net_load_cfg(&back, argv[1], &shape) && !cf_checkpoint_load(path, &back, NULL)) eb = worst_tensor_err(&split, &back, split.params, back.params, &where);
        if (!cf_net_load_cfg(&back2, argv[1], &shape) && !cf_net_set_spatial(&back2, K, periodic) && !cf_checkpoint_load(path, &back2, NULL))
            ok2 = back2.n_params == split.n_params && !memcmp(back2.params, split.params, split.n_params * sizeof(float)) &&
                  back2.opt_slots == split.opt_slots && !memcmp(back2.opt, split.opt, (size_t)split.opt_slots * split.n_params * sizeof(float));
        CHECK(eb == 0, "rank %d: the split network's checkpoint into a whole one: its values exactly (worst %.2e): %s", rank, eb, cf_failure_reason());
        CHECK(ok2, "rank %d: and into a split one: the same parameters and optimizer state, byte for byte", rank);
        cf_net_free(&back); cf_net_free(&back2);
    }
    {   /* every rank's failures counted on rank 0 (each printed its own) */
        double fails = check_failed;
        cf_dist_allreduce_sum_d(&fails, 1);
        check_failed = (int)fails;
    }
    cf_train_free(&tw); cf_train_free(&ts); cf_net_free(&whole); cf_net_free(&split);
    free(x_all); free(t_all); free(x_mine);
    cf_dist_finalize();
    return rank ? 0 : check_summary();
}
