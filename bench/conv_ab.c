/* conv_ab: two versions of cosmoflow.h in one process, their first layer's convolution timed
   alternately, to compare a kernel change where the host's load moves single timings by
   +-30 % (bench/conv_ab.sh builds and runs it).  Compiled three times: with -DCF_AB_SIDE=old
   and -DCF_AB_SIDE=new against the two headers (CF_STATIC keeps each version's functions to
   its object), and once without, the main program.  Each side builds the same bf16 network
   from a cfg, training mode, the input gradient computed when asked; a repetition is one
   cf_net_forward + cf_net_backward, layer 0's forward, backward-weights and backward-data
   timed by cf_net_set_layer_hook.  Old runs first in even repetitions, new in odd ones.
   Printed per operation: the medians of old and new ms and of the pairs' old / new ratios
   (above 1: new is faster), and the ratios' range.  A cfg whose first conv is followed by a
   max pool stores that conv's output and gradient in 16 bits, as cosmoflow.cfg does. */
#include <stdio.h>
#include <stdlib.h>
#ifdef CF_AB_SIDE
#define CF_STATIC
#define CF_IMPLEMENTATION
#include "cosmoflow.h"
#include <time.h>
#define CF_AB_CAT2(a, b) a##b
#define CF_AB_CAT(a, b) CF_AB_CAT2(a, b)
static double t0, acc[3];
static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}
static void hook(cf_net *net, int i, int phase, void *ctx) {
    (void)net; (void)ctx;
    if (i != 0) return;
    if (phase == 0 || phase == 2) t0 = now_s();
    else if (phase == 1) acc[0] += now_s() - t0;
    else if (phase == 4) { acc[1] += now_s() - t0; t0 = now_s(); }   /* between backward-weights and -data */
    else if (phase == 3) acc[2] += now_s() - t0;
}
typedef struct { cf_net net; float *x, *dy, *dx; } side;
void *CF_AB_CAT(make_, CF_AB_SIDE)(const char *cfg, int dinput) {
    side *s = (side *)calloc(1, sizeof *s);
    size_t nx, ny, i;
    if (!s || cf_net_load_cfg(&s->net, cfg, NULL) || cf_net_init(&s->net, 1) ||
        cf_net_set_precision(&s->net, CF_BF16)) {
        fprintf(stderr, "conv_ab: %s\n", cf_failure_reason());
        exit(1);
    }
    cf_net_set_mode(&s->net, CF_MODE_TRAIN);
    nx = cf_shape_size(s->net.input); ny = (size_t)s->net.n_outputs;
    s->x = (float *)malloc(nx * sizeof(float)); s->dy = (float *)malloc(ny * sizeof(float));
    s->dx = (float *)calloc(nx, sizeof(float));
    if (!s->x || !s->dy || !s->dx) { fprintf(stderr, "conv_ab: out of memory\n"); exit(1); }
    for (i = 0; i < nx; i++) s->x[i] = (float)((i * 7919) % 1000) / 500 - 1;
    for (i = 0; i < ny; i++) s->dy[i] = (float)((i * 104729) % 1000) / 500 - 1;
    if (dinput) cf_net_set_input_grad(&s->net, s->dx);
    cf_net_set_layer_hook(&s->net, hook, NULL);
    return s;
}
void CF_AB_CAT(step_, CF_AB_SIDE)(void *p, double ms[3]) {
    side *s = (side *)p;
    int k;
    acc[0] = acc[1] = acc[2] = 0;
    cf_net_zero_grad(&s->net);
    if (!cf_net_forward(&s->net, s->x, 1) || cf_net_backward(&s->net, s->dy)) {
        fprintf(stderr, "conv_ab: %s\n", cf_failure_reason());
        exit(1);
    }
    for (k = 0; k < 3; k++) ms[k] = 1e3 * acc[k];
}
#else
void *make_old(const char *cfg, int dinput);
void *make_new(const char *cfg, int dinput);
void step_old(void *p, double ms[3]);
void step_new(void *p, double ms[3]);
static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
static double median(double *v, int n) { qsort(v, (size_t)n, sizeof *v, cmp); return v[n / 2]; }
int main(int argc, char **argv) {
    static const char *op[3] = {"fwd", "bwd-w", "bwd-d"};
    double t[2][3][100], ratio[3][100], ms[3];
    void *s[2];
    int reps, dinput, r, v, k;
    if (argc != 4 || (reps = atoi(argv[2])) < 1 || reps > 100) {
        fprintf(stderr, "usage: conv_ab CFG REPS DINPUT (REPS 1-100; DINPUT 1: compute the input gradient)\n");
        return 1;
    }
    dinput = atoi(argv[3]);
    s[0] = make_old(argv[1], dinput); s[1] = make_new(argv[1], dinput);
    step_old(s[0], ms); step_new(s[1], ms);   /* untimed: plans, workspaces, the bf16 probe */
    for (r = 0; r < reps; r++)
        for (v = 0; v < 2; v++) {
            int w = (r + v) % 2;
            if (w) step_new(s[1], ms); else step_old(s[0], ms);
            for (k = 0; k < 3; k++) t[w][k][r] = ms[k];
        }
    printf("%s, %d repetitions:\n", argv[1], reps);
    for (k = 0; k < 3; k++) {
        double lo = 1e30, hi = 0;
        for (r = 0; r < reps && t[0][k][r] < 0.01; r++) {}
        if (r == reps) continue;   /* not run (backward-data without the input gradient) */
        for (r = 0; r < reps; r++) {
            ratio[k][r] = t[0][k][r] / t[1][k][r];
            if (ratio[k][r] < lo) lo = ratio[k][r];
            if (ratio[k][r] > hi) hi = ratio[k][r];
        }
        printf("  %-5s old %8.2f ms  new %8.2f ms  old/new %.3f (%.3f-%.3f)\n", op[k], median(t[0][k], reps),
               median(t[1][k], reps), median(ratio[k], reps), lo, hi);
    }
    return 0;
}
#endif
