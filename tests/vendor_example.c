/* The README's "using the header in your own C program" example, compiled and run by make test. */
#define CF_IMPLEMENTATION   /* in one .c file; CF_USE_CBLAS, CF_USE_MPI, CF_USE_ZLIB optional */
#include "cosmoflow.h"
#include <stdlib.h>

int main(void) {
    cf_net net;
    if (cf_net_load_cfg(&net, "models/cosmoflow-small.cfg", NULL)) { puts(cf_failure_reason()); return 1; }
    cf_net_init(&net, 42);
    size_t n = cf_shape_size(net.input), i;
    float *x = malloc(n * sizeof(float)), t[4] = {0.5f, -0.5f, 0.1f, 0.0f}, dout[4];
    for (i = 0; i < n; i++) x[i] = (float)(i % 7) / 7;        /* (1, C, D, H, W) */
    const float *y = cf_net_forward(&net, x, 1);            /* (1, 4) */
    double loss = cf_net_loss(&net, t, dout);
    cf_net_zero_grad(&net);
    cf_net_backward(&net, dout);                             /* gradients in net.grads */
    cf_sgd_step(&net, 0.01f, 0.9f, 0.0f);
    printf("%g %g\n", y[0], loss);
    printf("%s\n", loss > 0 && net.grads[0] != 0 ? "1 passed, 0 failed" : "0 passed, 1 failed");
    cf_net_free(&net); free(x);
}
