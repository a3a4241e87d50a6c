#include "fuzz_common.h"
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    cf_net net;
    char *text = (char *)malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = 0;
    /* a model small enough to run: parse, and if it parses and is small, one forward pass */
    if (cf_net_parse(&net, text, "fuzz.cfg", NULL) == CF_OK) {
        size_t n = cf_shape_size(net.input);
        if (n <= 4096 && net.n_params <= 100000) {
            int ok = 1, i;
            for (i = 0; i < net.n_layers; i++) if (cf_shape_size(net.layers[i].out) > 65536) ok = 0;
            if (ok) {
                float *x = (float *)calloc(n, sizeof(float));
                cf_net_init(&net, 1);
                if (x) cf_net_forward(&net, x, 1);
                free(x);
            }
        }
        cf_net_free(&net);
    }
    free(text);
    return 0;
}
