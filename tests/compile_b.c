/* stb compile test, translation unit 2: declarations only, calling the shared implementation */
#include "cosmoflow.h"
int other_unit(void) { cf_shape s = {2, 3, 7, 1}; return (int)cf_shape_size(s); }
