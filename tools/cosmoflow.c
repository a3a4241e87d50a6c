/* The header's implementation as one translation unit: the Makefile compiles it once per
   configuration (bin/cosmoflow.o) and links it into every tool, which then compiles only its
   own code.  A tool built alone (cc tools/cf_train.c ...) defines CF_IMPLEMENTATION itself. */
#define CF_IMPLEMENTATION
#include "cosmoflow.h"
