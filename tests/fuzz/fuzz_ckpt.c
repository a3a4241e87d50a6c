#include "fuzz_common.h"
/* checkpoints for a fixed small model (the seed corpus holds one written for it) */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const char *cfg = "[net]\ninput=2x4x4\n[conv]\nfilters=3\nsize=3\npad=1\n[batchnorm]\nactivation=relu\n[conv]\nfilters=2\nsize=1\n";
    cf_net net;
    cf_train_state st;
    char *text = NULL;
    cf_shape in;
    if (cf_net_parse(&net, cfg, "fuzz-model", NULL)) abort();
    cf_checkpoint_load(fuzz_file(data, size), &net, &st);
    if (cf_checkpoint_cfg(fuzz_file(data, size), &text, &in) == CF_OK) CF_FREE(text);
    cf_net_free(&net);
    return 0;
}
