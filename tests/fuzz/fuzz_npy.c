#include "fuzz_common.h"
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    cf_array a;
    if (cf_npy_read(fuzz_file(data, size), &a) == CF_OK) cf_array_free(&a);
    return 0;
}
