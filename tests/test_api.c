/* The C API misused as a careless caller would: every exported function given NULL, a value
   out of range, NaN, or an object that was freed or never made either returns an error whose
   reason names the problem and asserts nothing, or (a function that returns nothing) sets the
   reason and trips the assert that names its precondition (CF_ASSERT is caught here instead
   of aborting), and never crashes.  Built twice by make test: plainly and under AddressSanitizer and
   UndefinedBehaviorSanitizer.  Last line "N passed, M failed". */
#include <stdio.h>
#include <string.h>
#include <math.h>
#include <time.h>
static int asserts_tripped;
static char last_assert[256];
static void api_assert(const char *what) { asserts_tripped++; snprintf(last_assert, sizeof last_assert, "%s", what); }
#define CF_ASSERT(x) ((x) ? (void)0 : api_assert(#x))
#define CF_IMPLEMENTATION
#include "cosmoflow.h"
#include "check.h"

static const char *model = "[net]\ninput=3x1x1\nloss=mse\n[flatten]\n[dense]\noutputs=4\n";
static const char *reason(void) { return cf_failure_reason(); }
static int says(const char *words) { return strstr(cf_failure_reason(), words) != NULL; }
/* a function that returns nothing: the reason set and the assert tripped */
#define TRIPS(call, words, what) do { int a0 = asserts_tripped; cf_fail("-"); call; \
    CHECK(asserts_tripped == a0 + 1 && says(words), "%s: an assert naming it and the reason '%s' (%s)", what, words, reason()); } while (0)
/* a function that returns a value: refused is its error value (the condition), the reason,
   and no assert (the contract: CF_ASSERT only where nothing can be returned) */
#define REFUSES(refused, words, what) do { int a0 = asserts_tripped, r0; cf_fail("-"); r0 = (refused); \
    CHECK(r0 && asserts_tripped == a0 && says(words), "%s: the error value, the reason '%s' and no assert (%s; %d asserts)", what, words, reason(), \
          asserts_tripped - a0); } while (0)

static void test_config(void) {
    static const struct { const char *what, *words; } cases[] = {
        {"lr NaN", "lr:"}, {"lr -5", "lr:"}, {"momentum NaN", "momentum:"}, {"beta1 3", "betas:"}, {"beta2 1", "betas:"}, {"eps 0", "eps:"},
        {"decay factor NaN", "decay"}, {"optimizer -7", "optimizer"}, {"grad_lag 7", "grad_lag:"}, {"t_max 0 (cosine)", "t_max:"},
        {"17 milestones", "milestones"}, {"precision 9", "precision"}, {"warmup_epochs -1", "warmup_epochs:"}, {"weight_decay -3", "weight_decay"},
    };
    int k;
    cf_net net;
    cf_trainer tr;
    CHECK(cf_net_parse(&net, model, "api", NULL) == CF_OK && cf_net_init(&net, 1) == CF_OK, "parse: %s", reason());
    for (k = 0; k < (int)(sizeof cases / sizeof cases[0]); k++) {
        cf_train_config c;
        cf_train_defaults(&c);
        switch (k) {
        case 0: c.lr = NAN; break;
        case 1: c.lr = -5; break;
        case 2: c.momentum = NAN; break;
        case 3: c.beta1 = 3; break;
        case 4: c.beta2 = 1; break;
        case 5: c.eps = 0; break;
        case 6: c.decay_factor[1] = NAN; break;
        case 7: c.optimizer = -7; break;
        case 8: c.grad_lag = 7; break;
        case 9: c.per_step = 1; c.sched.type = CF_SCHED_COSINE; c.sched.t_max = 0; break;
        case 10: c.sched.n_milestones = 17; break;
        case 11: c.precision = 9; break;
        case 12: c.warmup_epochs = -1; break;
        default: c.weight_decay = -3; break;
        }
        CHECK(cf_train_init(&tr, &net, &c) == CF_ERR && says(cases[k].words), "cf_train_init refuses %s, naming it: %s", cases[k].what, reason());
        CHECK(tr.priv == NULL, "a refused trainer holds nothing (%s)", cases[k].what);
    }
    {
        cf_train_config c;
        char tiny[3];
        cf_train_defaults(&c);
        CHECK(cf_train_config_set(&c, NULL, "1") == CF_ERR && cf_train_config_set(&c, "lr", NULL) == CF_ERR && cf_train_config_set(NULL, "lr", "1") == CF_ERR,
              "cf_train_config_set: NULL key, value or settings refused");
        CHECK(cf_train_config_get(&c, "lr", tiny, sizeof tiny) == CF_ERR && says("needs") && tiny[0] == 0,
              "cf_train_config_get into a 3-byte buffer: refused, nothing half-written: %s", reason());
        CHECK(cf_train_config_get(&c, NULL, tiny, sizeof tiny) == CF_ERR, "cf_train_config_get: NULL key refused");
    }
    cf_net_free(&net);
}

static void test_lifecycle(void) {
    cf_net net, zero;
    cf_trainer tr, ztr;
    cf_train_config c;
    cf_step_result r;
    float x[6] = {1, 2, 3, -1, 0, 1}, t[8] = {0}, d[8] = {0};
    memset(&zero, 0, sizeof zero); memset(&ztr, 0, sizeof ztr);
    cf_net_parse(&net, model, "api", NULL); cf_net_init(&net, 1);
    cf_train_defaults(&c);
    CHECK(cf_train_step(&ztr, x, t, 2, &r) == CF_ERR && says("cf_train_init"), "cf_train_step on a zeroed trainer: %s", reason());
    CHECK(cf_train_init(&tr, &zero, &c) == CF_ERR && says("cf_net_parse"), "cf_train_init with a zeroed network: %s", reason());
    CHECK(cf_train_init(&tr, &net, &c) == CF_OK, "cf_train_init: %s", reason());
    CHECK(cf_train_step(&tr, NULL, t, 2, &r) == CF_ERR && cf_train_step(&tr, x, NULL, 2, &r) == CF_ERR && cf_train_step(&tr, x, t, 2, NULL) == CF_ERR,
          "cf_train_step with NULL x, target or result: refused");
    CHECK(cf_train_step(&tr, x, t, 0, &r) == CF_ERR && cf_train_step(&tr, x, t, -1, &r) == CF_ERR, "cf_train_step with a batch of 0 or -1: %s", reason());
    CHECK(cf_train_step(&tr, x, t, 2, &r) == CF_OK && r.status == CF_STEP_UPDATED && cf_net_step(&net) == 1 && cf_net_updates(&net) == 1,
          "a step: updated, step 1, update 1");
    cf_net_free(&net);
    CHECK(cf_train_step(&tr, x, t, 2, &r) == CF_ERR && says("cf_net_parse"), "cf_train_step after cf_net_free: %s", reason());
    CHECK(cf_net_forward(&net, x, 2) == NULL && says("freed"), "cf_net_forward on a freed network: %s", reason());
    CHECK(cf_net_predict(&net, x, 2) == NULL && says("freed"), "cf_net_predict on a freed network: %s", reason());
    CHECK(isnan(cf_net_loss(&net, t, d)) && says("freed"), "cf_net_loss on a freed network: %s", reason());
    CHECK(cf_net_backward(&net, d) == CF_ERR && cf_net_init(&net, 1) == CF_ERR && cf_net_set_dropout(&net, 0.5f) == CF_ERR, "backward, init, set_dropout on a freed network");
    TRIPS(cf_net_zero_grad(&net), "cf_net_zero_grad", "cf_net_zero_grad on a freed network");
    TRIPS(cf_net_set_mode(&zero, CF_MODE_TRAIN), "cf_net_set_mode", "cf_net_set_mode on a zeroed network");
    REFUSES(cf_sgd_step(&net, 0.1f, 0.9f, 0.0f) == CF_ERR, "cf_sgd_step", "cf_sgd_step on a freed network");
    REFUSES(cf_larc_scale(&net, 0.002f) == CF_ERR, "cf_larc_scale", "cf_larc_scale on a freed network");
    REFUSES(cf_net_first_nonfinite_output(&net) == -1, "cf_net_first_nonfinite_output", "cf_net_first_nonfinite_output on a freed network");
    CHECK(cf_adam_step(&net, 0.1f, 0.9f, 0.999f, 1e-8f, 0.0f, 0, 1) == CF_ERR && says("cf_adam_step"), "cf_adam_step on a freed network: CF_ERR, %s", reason());
    CHECK(cf_net_step(&net) == 0 && says("cf_net_step"), "cf_net_step of a freed network: 0, %s", reason());
    cf_train_free(&tr);
    CHECK(cf_train_step(&tr, x, t, 2, &r) == CF_ERR && says("cf_train_init"), "cf_train_step after cf_train_free: %s", reason());
    CHECK(cf_train_epoch(&tr, 2) == CF_ERR && isnan(cf_train_lr(&tr, 2)), "cf_train_epoch, cf_train_lr after cf_train_free");
    cf_train_free(&tr); cf_net_free(&net); cf_net_free(&zero); cf_net_free(NULL); cf_train_free(NULL);
    CHECK(1, "freeing twice, freeing zeroed objects and NULL: nothing happens");
}

static void test_arguments(void) {
    cf_net net;
    cf_shape s;
    float x[6] = {1, 2, 3, -1, 0, 1}, t[8] = {0}, tmp[8];
    double sums[2] = {0, 0};
    int out[8], bad;
    CHECK(cf_net_parse(&net, NULL, "api", NULL) == CF_ERR && says("NULL"), "cf_net_parse of NULL text: %s", reason());
    CHECK(cf_net_parse(NULL, model, "api", NULL) == CF_ERR, "cf_net_parse into NULL");
    CHECK(cf_net_parse(&net, model, NULL, NULL) == CF_OK, "cf_net_parse with no name: accepted");
    CHECK(isnan(cf_net_loss(&net, t, NULL)) && says("no forward"), "cf_net_loss before any forward: NAN, %s", reason());
    CHECK(cf_net_backward(&net, t) == CF_ERR && says("no forward"), "cf_net_backward before any forward: %s", reason());
    CHECK(cf_net_set_dropout(&net, NAN) == CF_ERR && cf_net_set_dropout(&net, 1.0f) == CF_ERR && cf_net_set_dropout(&net, -3.0f) == CF_ERR &&
          says("rate") && cf_net_set_dropout(&net, 0.5f) == CF_OK, "cf_net_set_dropout refuses NaN, 1 and -3: %s", reason());
    CHECK(cf_net_predict(&net, NULL, 2) == NULL && says("x is NULL"), "cf_net_predict of NULL x: %s", reason());
    CHECK(cf_net_forward(&net, x, 0) == NULL, "cf_net_forward of a batch of 0: %s", reason());
    CHECK(cf_eval_batch(&net, x, t, 2, sums, NULL) == CF_OK, "cf_eval_batch with bad NULL: accepted");
    CHECK(cf_eval_batch(&net, NULL, t, 2, sums, &bad) == CF_ERR && cf_eval_batch(&net, x, t, 2, NULL, &bad) == CF_ERR, "cf_eval_batch with NULL x or sums");
    CHECK(cf_net_output(&net, 99) == NULL && cf_net_output(&net, -1) == NULL && cf_net_output_grad(&net, 5) == NULL, "cf_net_output of a layer not there: NULL");
    CHECK(!strcmp(cf_net_path(&net, 7, CF_OP_FORWARD), "?"), "cf_net_path of a layer not there: ?");
    CHECK(cf_parse_shape(NULL, &s) == CF_ERR && cf_parse_shape("4x8x8", NULL) == CF_ERR, "cf_parse_shape of NULL");
    CHECK(cf_epoch_shard(out, 8, 1, 1, 0, 0, 1, 1) == -1 && says("rank"), "cf_epoch_shard over 0 ranks: %s", reason());
    CHECK(cf_epoch_shard(out, 8, 1, 1, 3, 2, 1, 1) == -1 && cf_epoch_shard(out, -1, 1, 1, 0, 1, 1, 1) == -1 && cf_epoch_shard(NULL, 8, 1, 1, 0, 1, 1, 1) == -1,
          "cf_epoch_shard: rank 3 of 2, n -1, out NULL: refused");
    CHECK(cf_cube_symmetry(tmp, tmp + 4, 1, 1, -1) == CF_ERR && cf_cube_symmetry(tmp, tmp + 4, 1, 1, 48) == CF_ERR && says("48"),
          "cf_cube_symmetry with code -1 and 48: %s", reason());
    CHECK(isnan(cf_lr_sched_at(NULL, 3)), "cf_lr_sched_at of NULL: NAN");
    CHECK(cf_checkpoint_save(NULL, &net, NULL) == CF_ERR && cf_checkpoint_load(NULL, &net, NULL) == CF_ERR && cf_npy_read(NULL, NULL) == CF_ERR &&
          cf_weights_export(&net, NULL) == CF_ERR, "file functions given NULL paths: refused");
    CHECK(cf_crc32c(0, NULL, 0) == 0, "cf_crc32c of nothing: 0");
    REFUSES(cf_crc32c(0, NULL, 5) == 0, "cf_crc32c", "cf_crc32c of NULL data");
    TRIPS(cf_bf16_round(NULL, 5), "cf_bf16_round", "cf_bf16_round of NULL");
    TRIPS(cf_net_set_mode(&net, 9), "CF_MODE", "cf_net_set_mode 9");
    cf_net_free(&net);
}

/* an update that makes a weight infinite reports CF_STEP_DIVERGED, not CF_STEP_UPDATED */
static void test_diverged(void) {
    cf_net net;
    cf_trainer tr;
    cf_train_config c;
    cf_step_result r;
    float x[6] = {1, 2, 3, -1, 0, 1}, t[8] = {0};
    char why[256];
    cf_net_parse(&net, model, "api", NULL); cf_net_init(&net, 1);
    cf_train_defaults(&c);
    c.lr = 0.001; c.warmup_epochs = 0;
    cf_train_init(&tr, &net, &c);
    cf_train_epoch(&tr, 1);
    net.params[net.layers[1].b_off] = 3.0e38f;   /* a bias near FLT_MAX, its momentum too */
    net.opt[net.layers[1].b_off] = 1.7e38f;
    CHECK(cf_train_step(&tr, x, t, 2, &r) == CF_OK && r.status == CF_STEP_DIVERGED && r.layer == 1 && cf_net_updates(&net) == 1,
          "a bias pushed past FLT_MAX by its update: CF_STEP_DIVERGED at layer 1 (status %d, layer %d)", r.status, r.layer);
    cf_train_explain(&tr, &r, x, 2, why, sizeof why);
    CHECK(strstr(why, "the update made layer 1") != NULL, "cf_train_explain says the update did it: %s", why);
    cf_train_free(&tr); cf_net_free(&net);
}

/* the overlapped averaging keeps the caller's backward hook */
static int hook_calls;
static void hook(cf_net *net, int layer, void *ctx) { (void)net; (void)layer; (void)ctx; hook_calls++; }
static void test_hooks(void) {
    cf_net net;
    float x[6] = {1, 2, 3, -1, 0, 1}, t[8] = {0}, d[8];
    cf_net_parse(&net, model, "api", NULL); cf_net_init(&net, 1);
    cf_net_set_backward_hook(&net, hook, NULL);
    cf_net_forward(&net, x, 2); cf_net_loss(&net, t, d);
    cf_dist_overlap_begin(&net, 4);
    cf_net_backward(&net, d);
    cf_dist_overlap_end(&net);
    cf_net_forward(&net, x, 2); cf_net_loss(&net, t, d);
    cf_net_backward(&net, d);
    CHECK(hook_calls == 2 * net.n_layers, "the caller's hook ran in both backwards, overlapped and not (%d calls)", hook_calls);
    cf_net_free(&net);
}

/* the schedules in O(1): a late step costs what an early one does */
static void test_schedule_cost(void) {
    cf_lr_sched s;
    clock_t t0;
    double lr, lr_late, secs;
    memset(&s, 0, sizeof s);
    s.type = CF_SCHED_COSINE; s.base_lr = 0.01; s.t_max = 1000; s.warmup_factor = 1; s.warmup_steps = 10;
    t0 = clock();
    lr = cf_lr_sched_at(&s, 10);
    lr_late = cf_lr_sched_at(&s, (uint64_t)1 << 49);
    secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
    CHECK(isfinite(lr) && isfinite(lr_late) && lr_late >= 0 && lr_late <= 0.01 && secs < 1.0, "cosine at step 2^49: %g, in %.3f s", lr_late, secs);
}

/* The contract: every function that returns a value, given what it cannot use, returns its
   error with the reason and asserts nothing (CF_ASSERT stays for the void functions) */
static void test_contract(void) {
    cf_net net;
    cf_geom g;
    cf_shape a = {1, 1, 4, 4}, none = {0, 1, 4, 4};
    float x[6] = {1, 2, 3, -1, 0, 1};
    memset(&g, 0, sizeof g);
    g.k[0] = g.k[1] = g.k[2] = 1; g.s[0] = g.s[1] = g.s[2] = 1; g.dil[0] = g.dil[1] = g.dil[2] = 1;
    CHECK(cf_net_parse(&net, model, "api", NULL) == CF_OK && cf_net_init(&net, 1) == CF_OK, "parse: %s", reason());
    REFUSES(cf_adam_step(&net, 0.1f, 0.9f, 0.999f, 1e-8f, 0.0f, 0, 0) == CF_ERR, "t counts", "cf_adam_step with t = 0");
    REFUSES(isnan(cf_lamb_step(&net, 0.1f, 0.9f, 0.999f, 1e-6f, 0.0f, 1.0f, 0)), "t counts", "cf_lamb_step with t = 0");
    REFUSES(cf_rng_u64(NULL) == 0, "cf_rng_u64", "cf_rng_u64 of NULL");
    REFUSES(cf_geom_out(NULL, 0, 8) == 0, "cf_geom_out", "cf_geom_out of a NULL geometry");
    REFUSES(cf_geom_out(&g, 3, 8) == 0, "cf_geom_out", "cf_geom_out on axis 3");
    REFUSES(cf_layer_flops(NULL) == 0.0, "cf_layer_flops", "cf_layer_flops of NULL");
    REFUSES(cf_net_output(&net, 99) == NULL, "cf_net_output", "cf_net_output of layer 99");
    REFUSES(cf_net_output_grad(&net, -1) == NULL, "cf_net_output_grad", "cf_net_output_grad of layer -1");
    REFUSES(cf_net_forward_from(&net, 0) == NULL, "cf_net_forward_from", "cf_net_forward_from before any forward");
    REFUSES(!strcmp(cf_net_path(&net, 7, CF_OP_FORWARD), "?"), "cf_net_path", "cf_net_path of layer 7");
    REFUSES(!strcmp(cf_conv_path(CF_OP_FORWARD, 0, a, a, &g, 1, 64), "?"), "cf_conv_path", "cf_conv_path of a batch of 0");
    REFUSES(!strcmp(cf_conv_path(CF_OP_FORWARD, 1, none, a, &g, 1, 64), "?"), "cf_conv_path", "cf_conv_path of 0 input channels");
    REFUSES(!strcmp(cf_conv_path(9, 1, a, a, &g, 1, 64), "?"), "CF_OP_", "cf_conv_path of op 9");
    REFUSES(!strcmp(cf_pool_path(CF_OP_FORWARD, none, a, &g, 1), "?"), "cf_pool_path", "cf_pool_path of 0 channels");
    REFUSES(!strcmp(cf_pool_path(CF_OP_FORWARD, a, a, NULL, 1), "?"), "cf_pool_path", "cf_pool_path of a NULL geometry");
    CHECK(strcmp(cf_conv_path(CF_OP_FORWARD, 1, a, a, &g, 1, 64), "?") && strcmp(cf_pool_path(CF_OP_FORWARD, a, a, &g, 1), "?"),
          "cf_conv_path and cf_pool_path of good shapes: a path, not '?'");
    TRIPS(cf_dropout(x, x, 6, -1.0f, 1), "cf_dropout", "cf_dropout with rate -1 (a void function: the assert)");
    TRIPS(cf_dropout(x, x, 6, NAN, 1), "cf_dropout", "cf_dropout with rate NaN");
    cf_net_free(&net);
}

/* The building blocks of a step check their arguments against the table of ranges
   cf_train_init uses: what cf_train_config_set refuses, they refuse, and nothing moves */
static void test_building_blocks(void) {
    static const struct { const char *key, *text; float v; } pairs[] = {
        {"momentum", "-0.1", -0.1f}, {"momentum", "0", 0.0f}, {"momentum", "0.5", 0.5f}, {"momentum", "1.5", 1.5f}, {"momentum", "nan", NAN},
        {"l2", "-1", -1.0f}, {"l2", "1000", 1000.0f}, {"l2", "1001", 1001.0f},
        {"larc", "-1", -1.0f}, {"larc", "0.002", 0.002f}, {"larc", "1000", 1000.0f}, {"larc", "2000", 2000.0f}, {"larc", "inf", INFINITY},
        {"eps", "0", 0.0f}, {"eps", "1e-08", 1e-8f}, {"eps", "1", 1.0f}, {"eps", "2", 2.0f},
        {"weight_decay", "-3", -3.0f}, {"weight_decay", "0.01", 0.01f}, {"weight_decay", "11", 11.0f},
        {"max_grad_norm", "-1", -1.0f}, {"max_grad_norm", "0", 0.0f}, {"max_grad_norm", "nan", NAN},
    };
    cf_net net;
    cf_trainer tr;
    cf_train_config c;
    cf_lr_sched s;
    float x[6] = {1, 2, 3, -1, 0, 1}, t[8] = {0}, d[8], w0[64], g0[64];
    size_t n;
    int k;
    CHECK(cf_net_parse(&net, model, "api", NULL) == CF_OK && cf_net_init(&net, 1) == CF_OK && net.n_params <= 64, "parse: %s", reason());
    n = net.n_params;
    cf_net_forward(&net, x, 2); cf_net_loss(&net, t, d); cf_net_zero_grad(&net); cf_net_backward(&net, d);
    memcpy(w0, net.params, n * sizeof(float)); memcpy(g0, net.grads, n * sizeof(float));
    REFUSES(cf_sgd_step(&net, NAN, 0.9f, 0.0f) == CF_ERR, "lr", "cf_sgd_step with lr NaN");
    REFUSES(cf_sgd_step(&net, -0.1f, 0.9f, 0.0f) == CF_ERR, "lr", "cf_sgd_step with lr -0.1");
    REFUSES(cf_sgd_step(&net, INFINITY, 0.9f, 0.0f) == CF_ERR, "lr", "cf_sgd_step with lr inf");
    REFUSES(cf_sgd_step(&net, 0.1f, 2.0f, 0.0f) == CF_ERR, "momentum", "cf_sgd_step with momentum 2");
    REFUSES(cf_sgd_step(&net, 0.1f, 0.9f, NAN) == CF_ERR, "l2", "cf_sgd_step with l2 NaN");
    REFUSES(cf_larc_scale(&net, -1.0f) == CF_ERR, "larc", "cf_larc_scale with eta -1");
    REFUSES(cf_adam_step(&net, NAN, 0.9f, 0.999f, 1e-8f, 0.0f, 0, 1) == CF_ERR, "lr", "cf_adam_step with lr NaN");
    REFUSES(cf_adam_step(&net, 0.1f, 1.0f, 0.999f, 1e-8f, 0.0f, 0, 1) == CF_ERR, "betas", "cf_adam_step with beta1 1");
    REFUSES(cf_adam_step(&net, 0.1f, 0.9f, -0.5f, 1e-8f, 0.0f, 0, 1) == CF_ERR, "betas", "cf_adam_step with beta2 -0.5");
    REFUSES(cf_adam_step(&net, 0.1f, 0.9f, 0.999f, 0.0f, 0.0f, 0, 1) == CF_ERR, "eps", "cf_adam_step with eps 0");
    REFUSES(cf_adam_step(&net, 0.1f, 0.9f, 0.999f, 1e-8f, -1.0f, 1, 1) == CF_ERR, "weight_decay", "cf_adam_step with weight decay -1");
    REFUSES(cf_adam_step(&net, 0.1f, 0.9f, 0.999f, 1e-8f, 0.0f, 2, 1) == CF_ERR, "decoupled", "cf_adam_step with decoupled 2");
    REFUSES(isnan(cf_lamb_step(&net, 0.1f, 0.9f, 0.999f, 1e-6f, 0.01f, NAN, 1)), "max_grad_norm", "cf_lamb_step with max_grad_norm NaN");
    REFUSES(isnan(cf_lamb_step(&net, -1.0f, 0.9f, 0.999f, 1e-6f, 0.01f, 1.0f, 1)), "lr", "cf_lamb_step with lr -1");
    CHECK(!memcmp(w0, net.params, n * sizeof(float)) && !memcmp(g0, net.grads, n * sizeof(float)), "the refused steps changed no weight and no gradient");
    CHECK(cf_sgd_step(&net, 0.1f, 0.9f, 0.0f) == CF_OK && memcmp(w0, net.params, n * sizeof(float)) && cf_larc_scale(&net, 0.002f) == CF_OK &&
          cf_adam_step(&net, 0.1f, 0.9f, 0.999f, 1e-8f, 0.0f, 1, 1) == CF_OK && !isnan(cf_lamb_step(&net, 0.1f, 0.9f, 0.999f, 1e-6f, 0.01f, 1.0f, 1)),
          "the steps with good arguments: CF_OK, the weights moved (%s)", reason());
    /* one table, two callers: a value the settings refuse, the building block refuses */
    for (k = 0; k < (int)(sizeof pairs / sizeof pairs[0]); k++) {
        const char *key = pairs[k].key;
        float v = pairs[k].v;
        int set_ok, block_ok;
        cf_train_defaults(&c);
        set_ok = cf_train_config_set(&c, key, pairs[k].text) == CF_OK;
        if (!strcmp(key, "momentum")) block_ok = cf_sgd_step(&net, 0.0f, v, 0.0f) == CF_OK;
        else if (!strcmp(key, "l2")) block_ok = cf_sgd_step(&net, 0.0f, 0.0f, v) == CF_OK;
        else if (!strcmp(key, "larc")) block_ok = cf_larc_scale(&net, v) == CF_OK;
        else if (!strcmp(key, "eps")) block_ok = cf_adam_step(&net, 0.0f, 0.9f, 0.999f, v, 0.0f, 0, 1) == CF_OK;
        else if (!strcmp(key, "weight_decay")) block_ok = cf_adam_step(&net, 0.0f, 0.9f, 0.999f, 1e-8f, v, 1, 1) == CF_OK;
        else block_ok = !isnan(cf_lamb_step(&net, 0.0f, 0.9f, 0.999f, 1e-6f, 0.0f, v, 1));
        CHECK(set_ok == block_ok, "%s %s: cf_train_config_set %s, the building block %s (%s)", key, pairs[k].text, set_ok ? "takes it" : "refuses it",
              block_ok ? "takes it" : "refuses it", reason());
    }
    /* the schedules and sizes */
    cf_train_defaults(&c);
    CHECK(cf_train_init(&tr, &net, &c) == CF_OK, "cf_train_init: %s", reason());
    REFUSES(isnan(cf_train_lr(&tr, -4)), "batch", "cf_train_lr with a global batch of -4");
    REFUSES(isnan(cf_train_lr(&tr, 0)), "batch", "cf_train_lr with a global batch of 0");
    CHECK(cf_train_lr(&tr, 64) > 0, "cf_train_lr with a global batch of 64: %g", cf_train_lr(&tr, 64));
    cf_train_free(&tr);
    REFUSES(cf_net_spatial_floats(&net, -1) == (size_t)-1, "batch", "cf_net_spatial_floats of a batch of -1");
    REFUSES(cf_net_arena_floats(&net, 0, 0) == (size_t)-1, "batch", "cf_net_arena_floats of a batch of 0");
    CHECK(cf_net_spatial_floats(&net, 2) == 0 && cf_net_arena_floats(&net, 2, 0) != (size_t)-1, "the sizes of a batch of 2: given");
    for (k = 0; k < 6; k++) {
        static const char *words[6] = {"decay_rate", "eta_min", "lr", "warmup_factor", "milestone", "t_max"};
        memset(&s, 0, sizeof s);
        s.type = CF_SCHED_MULTISTEP; s.base_lr = 0.01; s.gamma = 0.1; s.warmup_factor = 1; s.t_max = 100;
        s.n_milestones = 1; s.milestones[0] = 5;
        switch (k) {
        case 0: s.gamma = NAN; break;
        case 1: s.type = CF_SCHED_COSINE; s.eta_min = -1; break;
        case 2: s.base_lr = NAN; break;
        case 3: s.warmup_steps = 4; s.warmup_factor = 0; break;
        case 4: s.milestones[0] = -3; break;
        default: s.type = CF_SCHED_COSINE; s.t_max = (long)1 << 41; break;
        }
        REFUSES(isnan(cf_lr_sched_at(&s, 7)), words[k], words[k]);
    }
    cf_net_free(&net);
}

int main(void) {
    test_config();
    test_contract();
    test_building_blocks();
    test_lifecycle();
    test_arguments();
    test_diverged();
    test_hooks();
    test_schedule_cost();
    return check_summary();
}
