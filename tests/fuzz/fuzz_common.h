/* libFuzzer harnesses for the readers that take files from other programs (make fuzz).
   Each writes the fuzzer's bytes to a private temporary file and calls the reader: any
   result is fine, a crash, a sanitizer report or a leak is a bug. */
#include <stdlib.h>
/* an allocation of more than 256 MB is refused (the library reports it): a fuzzed model of
   billions of weights tests the error path, not the machine's memory (-rss_limit_mb) */
static void *fuzz_malloc(size_t n) { return n > ((size_t)256 << 20) ? NULL : malloc(n); }
#define CF_MALLOC(n) fuzz_malloc(n)
#define CF_FREE(p) free(p)
#define CF_IMPLEMENTATION
#define CF_USE_ZLIB
#include "../../cosmoflow.h"
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
