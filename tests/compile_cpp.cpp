// stb compile test as C++ (two translation units: this one and compile_b.c included below)
#define CF_IMPLEMENTATION
#include "cosmoflow.h"
#include "compile_b.c"
#include <cstdio>
int main() {
    cf_net net;
    int rc = cf_net_parse(&net, "[net]\ninput=1x4x4\n[dense]\noutputs=2\n", "inline", NULL);
    int ok = rc == CF_OK && net.n_params == 34 && other_unit() == 42;
    cf_net_free(&net);
    std::printf("compile test (C++)\n%s\n", ok ? "1 passed, 0 failed" : "0 passed, 1 failed");
    return ok ? 0 : 1;
}
