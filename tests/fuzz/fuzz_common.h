/* libFuzzer harnesses for the readers that take files from other programs (make fuzz).
   Each writes the fuzzer's bytes to a private temporary file and calls the reader: any
   result is fine, a crash, a sanitizer report or a leak is a bug. */
#define CF_IMPLEMENTATION
#define CF_USE_ZLIB
#include "../../cosmoflow.h"
#include <stdlib.h>
#include <unistd.h>

static const char *fuzz_file(const uint8_t *data, size_t size) {
    static char path[64];
    FILE *f;
    if (!path[0]) snprintf(path, sizeof path, "/tmp/cf-fuzz-%d", (int)getpid());
    f = fopen(path, "wb");
    if (!f) abort();
    if (size && fwrite(data, 1, size, f) != size) abort();
    fclose(f);
    return path;
}
