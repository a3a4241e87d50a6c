/* Several threads at once on the library, under ThreadSanitizer (make test builds this with
   -fsanitize=thread): each thread parses every model of models/ and one with an 8-source
   [route] and a 5-source [add] many times, plans each for a batch (the memory plan), runs a
   CRC32C, and compares every network it built with the one the main thread built first,
   layer by layer.  A parser with shared state (strtok, a static buffer) gives wrong networks
   here, and ThreadSanitizer reports the race.  Also: a caller's own strtok loop around
   cf_net_parse keeps its place.  Last line "N passed, M failed". */
#define CF_IMPLEMENTATION
#include "cosmoflow.h"
#include "check.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define MAXM 16
#define THREADS 4
static const char *route8 =
    "[net]\ninput=2x8x8\n"
    "[conv]\nfilters=1\nsize=1\n[conv]\nfilters=2\nsize=1\n[conv]\nfilters=3\nsize=1\n[conv]\nfilters=1\nsize=1\n"
    "[conv]\nfilters=2\nsize=1\n[conv]\nfilters=1\nsize=1\n[conv]\nfilters=4\nsize=1\n[conv]\nfilters=2\nsize=1\n"
    "[route]\nlayers=0, 1,2 ,3,4,5,6,7\n"            /* 16 channels from 8 sources */
    "[conv]\nfilters=4\nsize=3\npad=same\n"
    "[add]\nlayers=-1, -1,-1,-1,-1\n"                /* 5 sources */
    "[route]\nlayers=input,-1\n";                     /* 2 + 4 channels */
static char *texts[MAXM], *names[MAXM];
static cf_shape shapes[MAXM];
static int n_models;
static cf_net ref[MAXM];
static int iterations = 60;

/* whether a and b are the same network: every layer's type, sources and shapes, the counts */
static int same_net(const cf_net *a, const cf_net *b) {
    int i, k;
    if (a->n_layers != b->n_layers || a->n_params != b->n_params || a->n_stats != b->n_stats || a->n_outputs != b->n_outputs) return 0;
    for (i = 0; i < a->n_layers; i++) {
        const cf_layer *x = &a->layers[i], *y = &b->layers[i];
        if (x->type != y->type || x->n_src != y->n_src || memcmp(&x->in, &y->in, sizeof x->in) || memcmp(&x->out, &y->out, sizeof x->out) ||
            x->w_off != y->w_off || x->w_n != y->w_n || x->b_n != y->b_n || memcmp(&x->g, &y->g, sizeof x->g))
            return 0;
        for (k = 0; k < x->n_src; k++) if (x->src[k] != y->src[k]) return 0;
    }
    return 1;
}
typedef struct { int wrong, failed, crc_wrong; } result;
static void *worker(void *arg) {
    result *r = (result *)arg;
    static const char crc_text[] = "123456789";
    int it, m;
    for (it = 0; it < iterations; it++)
        for (m = 0; m < n_models; m++) {
            cf_net net;
            if (cf_net_parse(&net, texts[m], names[m], shapes[m].c ? &shapes[m] : NULL)) { r->failed++; continue; }
            if (!same_net(&net, &ref[m])) r->wrong++;
            if (it % 20 == 0 && cf_net_arena_floats(&net, 1, 0) == (size_t)-1) r->failed++;   /* the memory plan, at once in every thread */
            if (cf_crc32c(0, crc_text, 9) != 0xe3069283u) r->crc_wrong++;
            cf_net_free(&net);
        }
    return NULL;
}
static char *read_all(const char *path) {
    FILE *f = fopen(path, "rb");
    long n;
    char *b;
    if (!f) return NULL;
    fseek(f, 0, SEEK_END); n = ftell(f); fseek(f, 0, SEEK_SET);
    b = (char *)malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) { free(b); b = NULL; }
    if (b) b[n] = 0;
    fclose(f);
    return b;
}
/* a caller's own strtok loop with cf_net_parse inside it: the loop keeps its place */
static void test_callers_strtok(void) {
    char list[] = "a,b,c";
    const char *tok;
    int seen = 0;
    for (tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
        cf_net net;
        if (!cf_net_parse(&net, route8, tok, NULL)) cf_net_free(&net);
        seen++;
    }
    CHECK(seen == 3, "a caller's strtok loop around cf_net_parse saw %d of its 3 items", seen);
}
int main(int argc, char **argv) {
    static const struct { const char *path, *shape; } models[] = {
        {"models/cosmoflow-small.cfg", "4x16x16x16"}, {"models/deepcam-small.cfg", "16x32x48"}, {"models/cosmoflow-v07.cfg", "4x32x32x32"},
    };
    pthread_t th[THREADS];
    result res[THREADS];
    int m, t, wrong = 0, failed = 0, crc_wrong = 0;
    if (argc > 1) iterations = atoi(argv[1]);
    for (m = 0; m < (int)(sizeof models / sizeof models[0]); m++) {
        texts[n_models] = read_all(models[m].path);
        CHECK(texts[n_models] != NULL, "%s: readable", models[m].path);
        if (!texts[n_models]) continue;
        names[n_models] = (char *)models[m].path;
        memset(&shapes[n_models], 0, sizeof shapes[n_models]);
        if (models[m].shape) cf_parse_shape(models[m].shape, &shapes[n_models]);
        n_models++;
    }
    texts[n_models] = (char *)route8; names[n_models] = (char *)"route8"; memset(&shapes[n_models], 0, sizeof shapes[0]); n_models++;
    for (m = 0; m < n_models; m++) {
        int rc = cf_net_parse(&ref[m], texts[m], names[m], shapes[m].c ? &shapes[m] : NULL);
        CHECK(rc == CF_OK, "%s parses: %s", names[m], cf_failure_reason());
    }
    CHECK(ref[n_models - 1].layers[8].n_src == 8 && ref[n_models - 1].layers[8].out.c == 16 && ref[n_models - 1].layers[10].n_src == 5 &&
          ref[n_models - 1].layers[11].n_src == 2 && ref[n_models - 1].layers[11].src[0] == -1 && ref[n_models - 1].layers[11].out.c == 6,
          "the 8-source route: 8 sources, 16 channels; the add: 5 sources; input,-1: 6 channels");
    memset(res, 0, sizeof res);
    for (t = 0; t < THREADS; t++) CHECK(pthread_create(&th[t], NULL, worker, &res[t]) == 0, "thread %d starts", t);
    for (t = 0; t < THREADS; t++) { pthread_join(th[t], NULL); wrong += res[t].wrong; failed += res[t].failed; crc_wrong += res[t].crc_wrong; }
    CHECK(wrong == 0 && failed == 0, "%d threads x %d iterations x %d models: %d wrong networks, %d failed parses or plans", THREADS, iterations, n_models,
          wrong, failed);
    CHECK(crc_wrong == 0, "CRC32C in %d threads at once: %d wrong", THREADS, crc_wrong);
    test_callers_strtok();
    for (m = 0; m < n_models; m++) cf_net_free(&ref[m]);
    for (m = 0; m < n_models - 1; m++) free(texts[m]);
    return check_summary();
}
