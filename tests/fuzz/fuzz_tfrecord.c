#include "fuzz_common.h"
/* the TFRecord framing (lengths, CRCs, gzip) and the tf.train.Example walk of each record */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    cf_tfrecord r;
    const unsigned char *rec, *xb;
    size_t len, xlen, ny;
    float y[8];
    if (cf_tfrecord_open(&r, fuzz_file(data, size)) != CF_OK) return 0;
    while (cf_tfrecord_next(&r, &rec, &len) > 0) {
        cf_example_bytes(rec, len, "x", &xb, &xlen);
        cf_example_floats(rec, len, "y", y, 8, &ny);
    }
    cf_tfrecord_close(&r);
    /* the raw bytes as an Example too, without the framing */
    cf_example_bytes(data, size, "x", &xb, &xlen);
    cf_example_floats(data, size, "y", y, 8, &ny);
    return 0;
}
