/* stb compile test: CF_STATIC makes every function private to this file */
#define CF_IMPLEMENTATION
#include "cosmoflow.h"
int main(void) {
    int ok = cf_crc32c(0, "123456789", 9) == 0xE3069283u;
    printf("compile test (CF_STATIC)\n%s\n", ok ? "1 passed, 0 failed" : "0 passed, 1 failed");
    return ok ? 0 : 1;
}
