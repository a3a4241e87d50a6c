# cosmoflow.h - build, test, demo.   make | make test | make demo | make MPI=0 | make HDF5=0 | make FFTW=0 | make BLAS=0 | make MPICC=...
#
# What the machine has (MPI, libhdf5, OpenBLAS's OpenMP build, the CPU) is decided each time
# make runs, and the tools depend on bin/.config, which changes only when that decision does:
# a build after `make MPI=0`, or after packages were installed, rebuilds them.  make demo and
# make test install what is missing first (as root; otherwise they say what to install) and
# then run make again, so the packages they installed are seen.  The header's implementation is
# compiled once per configuration (bin/cosmoflow.o) and linked into the six tools; make -j2
# builds it beside the tools' own code.
CC      ?= cc
CXX     ?= c++
MACHINE := $(shell $(CC) -dumpmachine 2>/dev/null)
# x86-64-v3 (AVX2 + FMA, any x86 since 2013) for the direct convolution kernels; other CPUs
# (aarch64, ...) build the portable code.  CFLAGS='-O3 -march=x86-64-v2' for older x86.
ARCHFLAG = $(if $(findstring x86_64,$(MACHINE)),-march=x86-64-v3)
CFLAGS  ?= -O3 $(ARCHFLAG) -g
ARCH     = $(filter -march=%,$(CFLAGS))
WARN     = -std=c99 -D_POSIX_C_SOURCE=200809L -Wall -Wextra
OMP      = -fopenmp
# OpenBLAS: on when its cblas.h and its library are found.  Without it make stops, naming the
# package and BLAS=0, which builds on the header's own sgemm (the same numbers' definition,
# several times slower): a slow build is chosen, never fallen into.
BLAS_FOUND := $(shell printf '\043include <cblas.h>\n' | $(CC) -E -x c - > /dev/null 2>&1 && \
                $(CC) -print-file-name=libopenblas.so | grep -q / && echo 1)
BLAS    ?= $(if $(BLAS_FOUND),1,missing)
BLASDEF  = $(if $(filter 0,$(BLAS)),,-DCF_USE_CBLAS)
DEFS     = $(BLASDEF) -DCF_USE_ZLIB
# OpenBLAS's OpenMP build when it is installed (Debian: libopenblas-openmp-dev): its threads are
# the same OpenMP pool as our own parallel loops, so the two take turns on the cores instead of
# spinning against each other.  OPENBLAS_OMP= (empty) links the system default instead.
OPENBLAS_OMP ?= $(wildcard /usr/lib/$(shell $(CC) -print-multiarch 2>/dev/null)/openblas-openmp)
comma   := ,
BLASLIB  = $(if $(OPENBLAS_OMP),-L$(OPENBLAS_OMP) -Wl$(comma)-rpath$(comma)$(OPENBLAS_OMP)) -lopenblas
LIBS     = $(if $(filter 0,$(BLAS)),,$(BLASLIB)) -lz -lm -lpthread

# MPI: the MPI wrapper compiler MPICC (default: Debian's MPICH one when installed, else
# mpicc; Open MPI: make MPICC=mpicc.openmpi).  MPI and HDF5 are on when found; MPI=0 / HDF5=0
# turn them off.
MPICC ?= $(if $(shell command -v mpicc.mpich 2>/dev/null),mpicc.mpich,mpicc)
MPI   ?= $(if $(shell command -v $(firstword $(MPICC)) 2>/dev/null),1,0)
HDF5  ?= $(if $(shell pkg-config --exists hdf5 2>/dev/null && echo y),1,0)
ifeq ($(MPI),1)
  TOOLCC = $(MPICC)
  DEFS  += -DCF_USE_MPI
else
  TOOLCC = $(CC)
endif
ifeq ($(HDF5),1)
  DEFS  += -DCF_USE_HDF5 $(shell pkg-config --cflags hdf5)
  LIBS  += $(shell pkg-config --libs hdf5)
endif

# FFTW (single precision) for cf-synth's particle-mesh universes only; FFTW=0 builds without
# it (the lognormal universes alone)
FFTW  ?= $(if $(shell pkg-config --exists fftw3f 2>/dev/null && echo y),1,0)
ifeq ($(FFTW),1)
  SYNTHDEFS = -DCF_USE_FFTW $(shell pkg-config --cflags fftw3f)
  SYNTHLIBS = $(shell pkg-config --libs fftw3f)
endif

# oneDNN (libdnnl-dev), for bench/onednn_peer.c alone: the peer make bench times every
# convolution layer against (bin/onednn-peer); neither the header nor the tools use it.  On when
# its header and its library are found; ONEDNN=0 leaves the peer out.
ONEDNN_FOUND := $(shell printf '\043include <oneapi/dnnl/dnnl.h>\n' | $(CC) -E -x c - > /dev/null 2>&1 && \
                  $(CC) -print-file-name=libdnnl.so | grep -q / && echo 1)
ONEDNN ?= $(if $(ONEDNN_FOUND),1,0)
PEERS   = $(if $(filter 1,$(ONEDNN)),bin/onednn-peer)

TOOLS  = cf-train cf-eval cf-convert cf-synth cf-check cf-bench
BINS   = $(addprefix bin/,$(TOOLS))
# the tools the PyTorch comparisons run again in a CF_REFERENCE build (no fast path compiled in)
REFBINS = bin/ref/cf-check bin/ref/cf-convert
TESTS  = bin/test_core bin/test_core_naive bin/test_core_asan bin/test_compile bin/test_compile_cpp bin/test_static \
         bin/test_augment bin/test_malformed_asan bin/test_oom bin/test_oom_asan bin/test_threads bin/test_api bin/test_api_asan
TOOLSRC = tools/tool.h tools/data.h tools/mllog.h tools/draw.h tools/synth_climate.h tools/fft.h tools/spectrum.h cosmoflow.h

all: $(BINS)

# the configuration the binaries were built with; rewritten only when it changes
CONFIG = $(TOOLCC) | $(CC) | $(CFLAGS) | $(DEFS) | $(LIBS) | $(SYNTHDEFS) $(SYNTHLIBS)
bin/.config: FORCE | bin
	@if [ "$(BLAS)" = missing ]; then echo "make: OpenBLAS not found (cblas.h, libopenblas): apt-get install libopenblas-dev, or make BLAS=0 to build on the header's own sgemm, several times slower" >&2; exit 1; fi
	@printf '%s\n' '$(CONFIG)' | cmp -s - $@ || printf '%s\n' '$(CONFIG)' > $@
FORCE:

# the header's implementation, once per configuration: bin/cosmoflow.o for the tools, and
# bin/ref/cosmoflow.o without the fast paths (CF_REFERENCE); each tool compiles only its own
# code (CF_IMPLEMENTATION_LINKED: the tool does not define CF_IMPLEMENTATION itself)
bin/cosmoflow.o: tools/cosmoflow.c cosmoflow.h bin/.config | bin
	$(TOOLCC) $(WARN) $(CFLAGS) $(OMP) $(DEFS) -I. -c -o $@ $<
bin/ref/cosmoflow.o: tools/cosmoflow.c cosmoflow.h bin/.config | bin
	@mkdir -p bin/ref
	$(TOOLCC) $(WARN) $(CFLAGS) $(OMP) $(DEFS) -DCF_REFERENCE -I. -c -o $@ $<
LINKED = -DCF_IMPLEMENTATION_LINKED
bin/cf-%: tools/cf_%.c bin/cosmoflow.o $(TOOLSRC) bin/.config | bin
	$(TOOLCC) $(WARN) $(CFLAGS) $(OMP) $(DEFS) $(LINKED) -I. -o $@ $< bin/cosmoflow.o $(LIBS)
bin/cf-synth: tools/cf_synth.c tools/synth_pm.h tools/fft.h bin/cosmoflow.o $(TOOLSRC) bin/.config | bin
	$(TOOLCC) $(WARN) $(CFLAGS) $(OMP) $(DEFS) $(SYNTHDEFS) $(LINKED) -I. -o $@ $< bin/cosmoflow.o $(LIBS) $(SYNTHLIBS)
bin/ref/cf-%: tools/cf_%.c bin/ref/cosmoflow.o $(TOOLSRC) bin/.config | bin
	$(TOOLCC) $(WARN) $(CFLAGS) $(OMP) $(DEFS) -DCF_REFERENCE $(LINKED) -I. -o $@ $< bin/ref/cosmoflow.o $(LIBS)

# the oneDNN peer: one process with the header's implementation compiled in (no MPI), OpenBLAS
# as the tools link it, and -ldnnl
bin/onednn-peer: bench/onednn_peer.c cosmoflow.h bin/.config | bin
	$(CC) $(WARN) $(CFLAGS) $(OMP) $(BLASDEF) -I. -o $@ $< $(if $(filter 0,$(BLAS)),,$(BLASLIB)) -ldnnl -lm -lpthread

bin:
	mkdir -p bin

# ---- tests: kernels, gradients, PyTorch references, and the stb compile matrix
bin/test_core: tests/test_core.c tests/check.h cosmoflow.h bin/.config | bin
	$(CC) $(WARN) $(CFLAGS) $(OMP) $(BLASDEF) -DCF_USE_ZLIB -I. -o $@ $< $(LIBS)
bin/test_core_naive: tests/test_core.c tests/check.h cosmoflow.h bin/.config | bin
	$(CC) $(WARN) $(CFLAGS) -DCF_USE_ZLIB -I. -o $@ $< -lz -lm
bin/test_compile: tests/compile_a.c tests/compile_b.c cosmoflow.h | bin
	$(CC) -std=c99 -pedantic -Wall -Wextra -Wshadow -Werror $(ARCH) -I. -o $@ tests/compile_a.c tests/compile_b.c -lm
bin/test_compile_cpp: tests/compile_cpp.cpp tests/compile_b.c cosmoflow.h | bin
	$(CXX) -std=c++11 -pedantic -Wall -Wextra -Wshadow -Werror $(ARCH) -I. -o $@ tests/compile_cpp.cpp -lm
bin/test_static: tests/compile_static.c cosmoflow.h | bin
	$(CC) -std=c99 -pedantic -Wall -Wextra -Werror $(ARCH) -DCF_STATIC -I. -o $@ $< -lm
bin/test_augment: tests/test_augment.c cosmoflow.h | bin
	$(CC) $(WARN) -O2 -DCF_USE_ZLIB -I. -o $@ $< -lz -lm


# The core tests under AddressSanitizer and UndefinedBehaviorSanitizer (naive sgemm, so the
# sanitizers see every multiply; no OpenMP, whose runtime ASan does not model).
bin/test_core_asan: tests/test_core.c tests/check.h cosmoflow.h | bin
	$(CC) $(WARN) -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined \
	    -DCF_USE_ZLIB -I. -o $@ $< -lz -lm
# every allocation refused in turn (tests/test_oom.c), with OpenMP's threads, and serially
# under the sanitizers (nothing leaked on the error paths); with the fast paths ($(ARCH))
bin/test_oom: tests/test_oom.c tests/check.h cosmoflow.h bin/.config | bin
	$(CC) $(WARN) $(CFLAGS) $(OMP) $(BLASDEF) -I. -Itests -o $@ $< $(LIBS)
bin/test_oom_asan: tests/test_oom.c tests/check.h cosmoflow.h | bin
	$(CC) $(WARN) -O1 -g $(ARCH) -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined \
	    -I. -Itests -o $@ $< -lm
# the C API misused (tests/test_api.c), plainly and under the sanitizers
bin/test_api: tests/test_api.c tests/check.h cosmoflow.h | bin
	$(CC) $(WARN) -O1 -g -I. -Itests -o $@ $< -lm
bin/test_api_asan: tests/test_api.c tests/check.h cosmoflow.h | bin
	$(CC) $(WARN) -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined -I. -Itests -o $@ $< -lm
# several threads parsing and planning at once, under ThreadSanitizer (no OpenMP: its runtime
# is not instrumented)
bin/test_threads: tests/test_threads.c tests/check.h cosmoflow.h | bin
	$(CC) $(WARN) -O1 -g -fsanitize=thread -I. -Itests -o $@ $< -lm -lpthread
bin/test_malformed_asan: tests/test_malformed.c tests/check.h cosmoflow.h | bin
	$(CC) $(WARN) -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined \
	    -DCF_USE_ZLIB -I. -Itests -o $@ $< -lz -lm

# make test: the test packages first (tools/deps.sh test), then everything built as this
# machine now allows, then every suite (tests/run.sh).  Last line "N passed, M failed" (",
# K skipped" when suites could not run, the line above naming them).
test: deps-test
	@$(MAKE) --no-print-directory test-built
test-built: all $(REFBINS) $(TESTS) $(PEERS)
	@sh tests/run.sh
test-asan: bin/test_core_asan bin/test_malformed_asan bin/test_oom_asan
	ASAN_OPTIONS=detect_leaks=1 bin/test_core_asan
	ASAN_OPTIONS=detect_leaks=1 bin/test_malformed_asan
	ASAN_OPTIONS=detect_leaks=1 bin/test_oom_asan
# bf16: both conversions on all 2^32 inputs, against their definition and the instruction
# (make test checks a 2^24 sample)
test-bf16: bin/test_core
	bin/test_core --bf16-sweep
# a real Slurm time limit, then requeues (tests/test_slurm.sh's long case, about 6 minutes)
test-slurm-long: all
	@CF_SLURM_LONG=1 sh tests/test_slurm.sh
# every operation and network against PyTorch: measured error beside the asserted tolerance
agreement: all bin/test_core
	@sh tests/agreement.sh

# every command of docs/tour.md as written, in a fresh copy of the repository built from nothing
tour:
	@sh tests/test_tour.sh --fresh

# libFuzzer harnesses (clang) for the readers of other programs' files: npy, TFRecord +
# tf.train.Example, cfg (parse and one forward pass), checkpoints; each runs FUZZ_SECONDS
# from the seed corpus tests/fuzz/corpus/ (valid files written by tests/fuzz/make_corpus.c),
# new inputs kept in bin/fuzz-work/.
FUZZ_SECONDS ?= 60
FUZZERS = npy tfrecord cfg ckpt
bin/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz_common.h cosmoflow.h | bin
	clang -g -O1 -fsanitize=fuzzer,address,undefined -o $@ $< -lz -lm
bin/make_corpus: tests/fuzz/make_corpus.c cosmoflow.h | bin
	$(CC) -std=c99 -D_POSIX_C_SOURCE=200809L -O1 -o $@ $< -lz -lm
fuzz: $(addprefix bin/fuzz_,$(FUZZERS))
	@for f in $(FUZZERS); do mkdir -p bin/fuzz-work/$$f; echo "== fuzz $$f ($(FUZZ_SECONDS) s)"; \
	  bin/fuzz_$$f -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=4096 -max_len=4096 -print_final_stats=1 \
	    bin/fuzz-work/$$f tests/fuzz/corpus/$$f 2>&1 | grep -E 'stat::number_of_executed_units|ERROR|SUMMARY|Done' || exit 1; done

# This project's training-step figures beside the PyTorch peer's, measured in the same run.
bench: all $(PEERS)
	@sh bench/run.sh
# every convolution layer against oneDNN alone (bench/onednn.sh, also the part of make bench
# after the PyTorch table); without libdnnl-dev it says so in one line
bench-onednn: all $(PEERS)
	@sh bench/onednn.sh

demo: deps
	@$(MAKE) --no-print-directory all
	@sh tools/demo.sh
science: deps
	@$(MAKE) --no-print-directory all
	@sh tools/science.sh
science-crops: deps
	@$(MAKE) --no-print-directory all
	@sh tools/crops.sh
demo-climate: deps
	@$(MAKE) --no-print-directory all
	@sh tools/demo_climate.sh

demo-large: deps
	@$(MAKE) --no-print-directory all
	@sh tools/demo_large.sh

# make install PREFIX=/opt/cosmoflow: the header (include/), the tools (bin/), the models
# (share/cosmoflow/models/) and a pkg-config file (lib/pkgconfig/cosmoflow.pc) whose flags
# build a program that defines CF_IMPLEMENTATION with OpenBLAS and zlib.
PREFIX ?= /usr/local
install: all
	mkdir -p $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/cosmoflow/models $(DESTDIR)$(PREFIX)/lib/pkgconfig
	cp cosmoflow.h $(DESTDIR)$(PREFIX)/include/
	cp $(BINS) $(DESTDIR)$(PREFIX)/bin/
	cp models/*.cfg models/README.md $(DESTDIR)$(PREFIX)/share/cosmoflow/models/
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|'"$$(sed -n 's/#define CF_VERSION "\(.*\)"/\1/p' cosmoflow.h)"'|' \
	    tools/cosmoflow.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/cosmoflow.pc

# Installs the Debian packages when run as root and something is missing (deps-test: also
# those the tests use: PyTorch and NumPy for the reference numbers, valgrind, clang).
deps:
	@sh tools/deps.sh
deps-test:
	@sh tools/deps.sh test

clean:
	rm -rf bin

.PHONY: all test test-built test-slurm-long test-asan test-bf16 agreement tour bench bench-onednn demo demo-climate demo-large science science-crops deps deps-test clean install fuzz FORCE
