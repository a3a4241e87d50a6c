/* Table-driven malformed files: for each format a valid file is written, then damaged every
   way this table lists - cut at every length, every byte flipped (structure bytes of the
   larger files), huge lengths, zero and negative dimensions, wrong dtypes, an empty file, a
   directory - and read back.  Every damaged read must either fail with a message naming the
   file, or (for a flip inside payload data that no checksum covers) succeed; never crash or
   read out of bounds (this program also runs under AddressSanitizer in make test). */
#define CF_IMPLEMENTATION
#ifndef CF_USE_ZLIB
#define CF_USE_ZLIB
#endif
#include "cosmoflow.h"
#include "check.h"
#include <stdlib.h>
#include <sys/stat.h>

static char dir[64];
static unsigned char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    unsigned char *b;
    long len;
    if (!f) return NULL;
    fseek(f, 0, SEEK_END); len = ftell(f); fseek(f, 0, SEEK_SET);
    b = (unsigned char *)malloc((size_t)len + 1);
    if (fread(b, 1, (size_t)len, f) != (size_t)len) { fclose(f); free(b); return NULL; }
    fclose(f);
    *n = (size_t)len;
    return b;
}
static void spit(const char *path, const unsigned char *b, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) { printf("cannot write %s\n", path); exit(1); }
    if (n) fwrite(b, 1, n, f);
    fclose(f);
}

/* a reader: 0 = accepted, -1 = refused (with cf_failure_reason set) */
typedef int (*reader)(const char *path);
static int read_npy(const char *p) { cf_array a; int rc = cf_npy_read(p, &a); if (!rc) cf_array_free(&a); return rc; }
static int read_cosmo(const char *p) { cf_cosmo_sample s; int rc = cf_cosmo_read(p, &s); if (!rc) cf_cosmo_free(&s); return rc; }
static int read_climate(const char *p) { cf_climate_sample s; int rc = cf_climate_read(p, &s, 3); if (!rc) cf_climate_free(&s); return rc; }
static int read_ckpt(const char *p) {
    cf_net net;
    int rc;
    if (cf_net_parse(&net, "[net]\ninput=2x4x4\n[conv]\nfilters=3\nsize=3\npad=1\n[batchnorm]\n", "m", NULL)) return -2;
    rc = cf_checkpoint_load(p, &net, NULL);
    cf_net_free(&net);
    return rc;
}

/* damage `good` (a copy of the valid file at path) and read it back after each change */
static void damage(const char *what, const char *path, reader rd, int must_fail_truncated, size_t flip_limit) {
    size_t n, i, bad_msg = 0, accepted_cut = 0, tried = 0;
    unsigned char *good = slurp(path, &n), *b;
    if (!good) { CHECK(0, "%s: cannot read the valid file", what); return; }
    CHECK(rd(path) == 0, "%s: the valid file reads (%s)", what, cf_failure_reason());
    b = (unsigned char *)malloc(n + 1);
    for (i = 0; i < n; i++) {                   /* cut at every length */
        spit(path, good, i);
        tried++;
        if (rd(path) == 0) accepted_cut++;
        else if (!strstr(cf_failure_reason(), path)) bad_msg++;
    }
    CHECK(!must_fail_truncated || accepted_cut == 0, "%s: all %zu truncations refused (%zu accepted)", what, tried, accepted_cut);
    for (i = 0; i < n && i < flip_limit; i++) {  /* flip every bit pattern of one byte at a time */
        memcpy(b, good, n);
        b[i] ^= 0xff;
        spit(path, b, n);
        if (rd(path) != 0 && !strstr(cf_failure_reason(), path)) bad_msg++;
    }
    spit(path, good, 0);                         /* empty */
    CHECK(rd(path) != 0 && strstr(cf_failure_reason(), path), "%s: an empty file is refused, naming it (%s)", what, cf_failure_reason());
    CHECK(bad_msg == 0, "%s: every refusal names the file (%zu do not)", what, bad_msg);
    spit(path, good, n);
    free(good); free(b);
}

static void npy_header(const char *path, const char *dict) {   /* a v1 npy with this header and 64 data bytes */
    unsigned char b[512];
    size_t hl = strlen(dict), pad = 16 - (10 + hl + 1) % 16, tot;
    memcpy(b, "\x93NUMPY\x01\x00", 8);
    tot = hl + (pad == 16 ? 0 : pad) + 1;
    b[8] = (unsigned char)tot; b[9] = 0;
    memcpy(b + 10, dict, hl);
    memset(b + 10 + hl, ' ', tot - hl - 1);
    b[10 + tot - 1] = '\n';
    memset(b + 10 + tot, 0, 64);
    spit(path, b, 10 + tot + 64);
}

/* whether the last read failed naming `path` and saying `words` */
static int refused(int rc, const char *path, const char *words) {
    return rc != 0 && strstr(cf_failure_reason(), path) && strstr(cf_failure_reason(), words);
}

/* TFRecord files that hold more than the one sample the reader expects, or a gzip member
   followed by bytes that are not a second member: refused, not silently cut. */
static void loose_records(const unsigned char *ex, size_t n) {
    unsigned char *two, *b, *dup;
    size_t m, k;
    char p[256];
    snprintf(p, sizeof p, "%s/one.tfrecord", dir); cf_tfrecord_write(p, ex, n, 0);
    b = slurp(p, &m);
    two = (unsigned char *)malloc(2 * m);
    memcpy(two, b, m); memcpy(two + m, b, m);
    snprintf(p, sizeof p, "%s/two.tfrecord", dir); spit(p, two, 2 * m);
    CHECK(refused(read_cosmo(p), p, "more than one record"), "tfrecord: a second record is refused (%s)", cf_failure_reason());
    free(b);
    snprintf(p, sizeof p, "%s/gz.tfrecord", dir); cf_tfrecord_write(p, ex, n, 1);
    b = slurp(p, &m);
    memcpy(two, b, m); memcpy(two + m, "garbage!", 8);
    spit(p, two, m + 8);
    CHECK(refused(read_cosmo(p), p, "after the gzip"), "tfrecord: bytes after the gzip member are refused (%s)", cf_failure_reason());
    free(b);
    /* a duplicated feature: the Example's feature map entry for "x" written twice */
    dup = (unsigned char *)malloc(2 * n + 64);
    memcpy(dup, ex, n);
    k = n;
    {   /* an Example is one field 1 (Features) holding entries (field 1); append the first entry again */
        const unsigned char *q = ex;
        size_t len = 0, hdr, shift = 0, i = 1, elen = 0, eshift = 0, ehdr;
        while (q[i] & 0x80) { len |= (size_t)(q[i] & 0x7f) << shift; shift += 7; i++; }
        len |= (size_t)q[i] << shift; hdr = i + 1;
        i = hdr + 1;
        while (ex[i] & 0x80) { elen |= (size_t)(ex[i] & 0x7f) << eshift; eshift += 7; i++; }
        elen |= (size_t)ex[i] << eshift; ehdr = i + 1 - hdr;
        if (hdr + len == n) {   /* rewrite: Features = entries + first entry again */
            size_t nl = len + ehdr + elen, o = 0;
            dup[o++] = ex[0];
            while (nl >= 0x80) { dup[o++] = (unsigned char)(nl | 0x80); nl >>= 7; }
            dup[o++] = (unsigned char)nl;
            memcpy(dup + o, ex + hdr, len); o += len;
            memcpy(dup + o, ex + hdr, ehdr + elen); o += ehdr + elen;
            k = o;
        }
    }
    snprintf(p, sizeof p, "%s/dup.tfrecord", dir); cf_tfrecord_write(p, dup, k, 0);
    CHECK(k > n && refused(read_cosmo(p), p, "twice"), "tfrecord: a feature given twice is refused (%s)", cf_failure_reason());
    free(dup); free(two);
}

/* FIFOs and devices given where a file is read: refused by name at once, never a blocked open */
static void special_files(void) {
    static const char *names[] = {"f.npy", "f.tfrecord", "data-f.npy", "f.cfck", "f.cfg", "label-f.npy"};
    char p[256];
    size_t k;
    for (k = 0; k < sizeof names / sizeof *names; k++) {
        cf_net net;
        int rc;
        snprintf(p, sizeof p, "%s/%s", dir, names[k]);
        if (mkfifo(p, 0600)) { CHECK(0, "mkfifo %s", p); continue; }
        switch (k) {
        case 0: rc = read_npy(p); break;
        case 1: rc = read_cosmo(p); break;
        case 2: rc = read_climate(p); break;
        case 3: rc = read_ckpt(p); break;
        case 4: rc = cf_net_load_cfg(&net, p, NULL); if (!rc) cf_net_free(&net); break;
        default: {  /* a regular data file whose label file is a FIFO */
            char d[256];
            cf_array a;
            float v[2 * 3 * 4] = {0};
            memset(&a, 0, sizeof a);
            a.dtype = CF_F32; a.ndim = 3; a.shape[0] = 2; a.shape[1] = 3; a.shape[2] = 4; a.count = 24; a.data = v;
            snprintf(d, sizeof d, "%s/data-f.npy", dir); cf_npy_write(d, &a);
            rc = read_climate(d);
            remove(d);
        }
        }
        CHECK(refused(rc, p, "not a regular file"), "a FIFO as %s is refused at once (%s)", names[k], cf_failure_reason());
        remove(p);
    }
    CHECK(refused(read_npy("/dev/zero"), "/dev/zero", "not a regular file"), "a device as npy is refused (%s)", cf_failure_reason());
}

/* cfg text a user might write by mistake, each refused naming file, line and what is wrong (or,
   for a byte-order mark, accepted) */
static void cfg_rows(void) {
    static const struct { const char *text, *words; } rows[] = {
        {"[net]\ninput=4x8x8x8\ninput=4x8x8x8\n[conv]\nfilters=2\nsize=3\n", "m.cfg:3: key 'input' given twice in [net] (first at line 2)"},
        {"[net]\ninput=4x8x8x8\n[conv]\nfilters=2\nsize=3\nsize=5\n", "m.cfg:6: key 'size' given twice"},
        {"[net]\ninput=4x8x8x8\n[conv]\nfilters=2\nsize=2000000000\npad=same\n", "m.cfg:5"},
        {"[net]\ninput=4x8x8x8\n[conv]\nfilters=2000000000\nsize=3\n[conv]\nfilters=2000000000\nsize=3\n", "m.cfg"},
        {"[net]\ninput=4x1024x1024x1024\n[flatten]\n[route]\nlayers=-1,-1\n", "m.cfg"},
        {"[net]\ninput=1000000x1000000x8x8\n[conv]\nfilters=2\nsize=3\n", "m.cfg:2"},
        {"[net]\ninput=4x8x8x8\n[conv]\nfilters=2\nsize=3\n[flatten]\n[route]\nlayers=-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1,-1\n", "m.cfg:8: layers="},
    };
    size_t k;
    for (k = 0; k < sizeof rows / sizeof *rows; k++) {
        cf_net net;
        int rc = cf_net_parse(&net, rows[k].text, "m.cfg", NULL);
        if (!rc) cf_net_free(&net);
        CHECK(rc != 0 && strstr(cf_failure_reason(), rows[k].words) && !strstr(strstr(cf_failure_reason(), "m.cfg") + 1, "m.cfg:"),
              "cfg row %zu refused with '%s', the file named once (%s)", k, rows[k].words, cf_failure_reason());
    }
    {
        cf_net net;
        int rc = cf_net_parse(&net, "\xef\xbb\xbf[net]\ninput=4x8x8x8\n[conv]\nfilters=2\nsize=3\n", "m.cfg", NULL);
        CHECK(rc == 0, "cfg: a UTF-8 byte-order mark is skipped (%s)", rc ? cf_failure_reason() : "ok");
        if (!rc) cf_net_free(&net);
    }
}

int main(void) {
    char p[256], q[256];
    cf_array a;
    float v[16 * 4 * 6];
    int16_t x[4 * 4 * 4 * 4];
    unsigned char ex[4096];
    size_t n, k;
    cf_net net;
    snprintf(dir, sizeof dir, "/tmp/cf-malformed-%d", (int)getpid());
    mkdir(dir, 0777);
    for (k = 0; k < sizeof v / sizeof *v; k++) v[k] = (float)(k % 7);
    /* npy */
    memset(&a, 0, sizeof a);
    a.dtype = CF_F32; a.ndim = 2; a.shape[0] = 4; a.shape[1] = 6; a.count = 24; a.data = v;
    snprintf(p, sizeof p, "%s/a.npy", dir); cf_npy_write(p, &a);
    damage("npy", p, read_npy, 1, 128);
    {   /* header tables: each must be refused with a message naming the file */
        static const char *dicts[] = {
            "{'descr': '<f8', 'fortran_order': False, 'shape': (4,), }",          /* unsupported dtype */
            "{'descr': '<f4', 'fortran_order': True, 'shape': (4,), }",           /* Fortran order */
            "{'descr': '<f4', 'fortran_order': False, 'shape': (-4,), }",         /* negative dimension */
            "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999,), }",/* more data than the file */
            "{'descr': '<f4', 'fortran_order': False, 'shape': (4000000000, 4000000000, 4000000000), }", /* product overflows */
            "{'descr': '<f4', 'fortran_order': False, }",                         /* no shape */
            "{'descr': '<f4', 'fortran_order': False, 'shape': (4, }",            /* malformed tuple */
        };
        for (k = 0; k < sizeof dicts / sizeof *dicts; k++) {
            snprintf(q, sizeof q, "%s/h%zu.npy", dir, k);
            npy_header(q, dicts[k]);
            CHECK(read_npy(q) != 0 && strstr(cf_failure_reason(), q), "npy header %zu refused, naming the file: %s", k, cf_failure_reason());
        }
        CHECK(read_npy(dir) != 0 && strstr(cf_failure_reason(), dir), "npy: a directory given as a file is refused (%s)", cf_failure_reason());
    }
    /* TFRecord, plain and gzip: every cut refused (lengths and CRCs), every flip caught by a CRC or the Example walk */
    for (k = 0; k < 256; k++) x[k] = (int16_t)(k % 5);
    n = cf_example_encode(ex, "x", x, sizeof x, "y", v, 4, 0);
    snprintf(p, sizeof p, "%s/r.tfrecord", dir); cf_tfrecord_write(p, ex, n, 0);
    damage("tfrecord (plain)", p, read_cosmo, 1, 100000);
    snprintf(p, sizeof p, "%s/g.tfrecord", dir); cf_tfrecord_write(p, ex, n, 1);
    damage("tfrecord (gzip)", p, read_cosmo, 1, 100000);
    {   /* a record announcing a huge length */
        unsigned char h[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f};
        snprintf(q, sizeof q, "%s/huge.tfrecord", dir); spit(q, h, sizeof h);
        CHECK(read_cosmo(q) != 0 && strstr(cf_failure_reason(), q), "tfrecord: a huge length is refused (%s)", cf_failure_reason());
    }
    loose_records(ex, n);
    special_files();
    cfg_rows();
    /* checkpoints: every cut and every flipped byte caught (the CRC covers everything) */
    if (cf_net_parse(&net, "[net]\ninput=2x4x4\n[conv]\nfilters=3\nsize=3\npad=1\n[batchnorm]\n", "m", NULL) == 0) {
        cf_net_init(&net, 1);
        snprintf(p, sizeof p, "%s/c.cfck", dir); cf_checkpoint_save(p, &net, NULL);
        cf_net_free(&net);
        {
            size_t before = (size_t)check_failed, m;
            unsigned char *good = slurp(p, &m), *b = (unsigned char *)malloc(m);
            size_t i, accepted = 0;
            damage("checkpoint", p, read_ckpt, 1, 0);
            for (i = 0; i < m; i++) { memcpy(b, good, m); b[i] ^= 0x01; spit(p, b, m); accepted += read_ckpt(p) == 0; }
            CHECK(accepted == 0, "checkpoint: all %zu single-bit flips refused (%zu accepted)", m, accepted);
            spit(p, good, m);
            free(good); free(b);
            (void)before;
        }
    }
    /* DeepCAM numpy pairs: data of the wrong rank/dtype, labels of the wrong shape or values */
    memset(&a, 0, sizeof a);
    a.dtype = CF_F32; a.ndim = 3; a.shape[0] = 4; a.shape[1] = 6; a.shape[2] = 16; a.count = 384; a.data = v;
    snprintf(p, sizeof p, "%s/data-x.npy", dir); cf_npy_write(p, &a);
    a.ndim = 2; a.shape[2] = 0; a.count = 24;
    for (k = 0; k < 24; k++) v[k] = (float)(k % 3);
    snprintf(q, sizeof q, "%s/label-x.npy", dir); cf_npy_write(q, &a);
    damage("climate data", p, read_climate, 1, 128);
    damage("climate labels (read through the data file)", q, read_npy, 1, 128);
    v[5] = 7.0f; cf_npy_write(q, &a);
    CHECK(read_climate(p) != 0 && strstr(cf_failure_reason(), "label 7"), "climate: a label outside the classes is named (%s)", cf_failure_reason());
    a.shape[1] = 5; a.count = 20; cf_npy_write(q, &a);
    CHECK(read_climate(p) != 0 && strstr(cf_failure_reason(), q), "climate: labels of another shape are refused (%s)", cf_failure_reason());
    { char cmd[128]; snprintf(cmd, sizeof cmd, "rm -rf %s", dir); if (system(cmd)) {} }
    return check_summary();
}
