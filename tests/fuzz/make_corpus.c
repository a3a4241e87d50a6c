/* Writes the seed corpus of make fuzz into DIR/{npy,tfrecord,cfg,ckpt}/: valid files of each
   format (small), so the fuzzers start from the real structure.  Usage: make_corpus DIR */
#define CF_IMPLEMENTATION
#define CF_USE_ZLIB
#include "../../cosmoflow.h"
#include <sys/stat.h>
int main(int argc, char **argv) {
    char p[4096];
    const char *d = argc > 1 ? argv[1] : "corpus";
    static const char *cfg = "[net]\ninput=2x4x4\n[conv]\nfilters=3\nsize=3\npad=1\n[batchnorm]\nactivation=relu\n[conv]\nfilters=2\nsize=1\n";
    const char *sub[4] = {"npy", "tfrecord", "cfg", "ckpt"};
    int i;
    cf_net net;
    cf_array a;
    float v[6] = {1, 2, 3, 4, 5, 6};
    int16_t x[4 * 4 * 4 * 4];
    unsigned char ex[4096];
    size_t n;
    FILE *f;
    mkdir(d, 0777);
    for (i = 0; i < 4; i++) { snprintf(p, sizeof p, "%s/%s", d, sub[i]); mkdir(p, 0777); }
    memset(&a, 0, sizeof a);
    a.dtype = CF_F32; a.ndim = 2; a.shape[0] = 2; a.shape[1] = 3; a.count = 6; a.data = v;
    snprintf(p, sizeof p, "%s/npy/f32.npy", d); if (cf_npy_write(p, &a)) return 1;
    for (i = 0; i < 256; i++) x[i] = (int16_t)(i % 5);
    n = cf_example_encode(ex, "x", x, sizeof x, "y", v, 4, 0);
    snprintf(p, sizeof p, "%s/tfrecord/plain.tfrecord", d); if (cf_tfrecord_write(p, ex, n, 0)) return 1;
    snprintf(p, sizeof p, "%s/tfrecord/gzip.tfrecord", d); if (cf_tfrecord_write(p, ex, n, 1)) return 1;
    snprintf(p, sizeof p, "%s/cfg/small.cfg", d);
    f = fopen(p, "w"); if (!f) return 1; fputs(cfg, f); fclose(f);
    snprintf(p, sizeof p, "%s/cfg/seg.cfg", d);
    f = fopen(p, "w"); if (!f) return 1;
    fputs("[net]\ninput=4x8x8\nloss=softmax_ce\n[conv]\nfilters=4\nsize=3\ngroups=4\npad=1\n[gap]\n[broadcast]\nlike=0\n[route]\nlayers=input,2\n"
          "[deconv]\nfilters=3\nsize=3\nstride=2\npad=1\noutput_padding=1\n", f);
    fclose(f);
    if (cf_net_parse(&net, cfg, "corpus", NULL)) return 1;
    cf_net_init(&net, 3);
    snprintf(p, sizeof p, "%s/ckpt/small.cfck", d); if (cf_checkpoint_save(p, &net, NULL)) return 1;
    cf_net_free(&net);
    return 0;
}
