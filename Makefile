# andrea - build, test, install.
#
#   make               every executable into bin/ (CUDA part wherever nvcc is found)
#   make test          set up missing Debian packages, build, run every test
#   make demo          set up, build, run the demo
#   make install PREFIX=/usr/local DESTDIR=
#   make CUDA=0        CPU-only build;  make BLAS=none  without OpenBLAS
#                      (BLAS=openblas-openmp or openblas picks the build)
#   make PNG=0         without libgd (andrea-show --png then reports it)
#   make MVEC=0        without glibc's libmvec (the default model is then
#                      drawn with scalar libm; the values are the same)
#   make test-gpu      on a GPU machine: the stage suites with --device cuda,
#                      the kernel harnesses, compute-sanitizer; one summary line
#   make bench-codec   the stream codec vs zlib's compress2 and gzip -1
#                      (CODEC_ARGS='-s 8 -r 1' for a quick run)
#   make bench-gpu     on a GPU machine: each stage's kernels vs PyTorch
#   make bench-mask    on a GPU machine: the mask's store layouts vs a copy
#   make bench-auto    on a GPU machine: --device auto vs cpu and cuda
#                      (BENCH_ARGS='REPS BUDGET_S')
#   make bench-train-gpu  on a GPU machine: andrea-train's step vs PyTorch
#                      (BENCH_ARGS='andrea-120m bf16 --runs 3': medians)
#   make bench-train-ab  on a GPU machine: andrea-train against another build
#                      or setting of itself, alternating, with the compiled
#                      model as reference (BENCH_ARGS='base=ROOT:dir new=')
#   make bench-train-ranks  on a machine with GPUs: andrea-train --gpus N
#                      vs PyTorch DDP (torchrun), loss curves, a rank killed
#                      (BENCH_ARGS='andrea-12m bf16' picks some configurations)
#   make bench-train-profile  on a GPU machine: one step's kernels, andrea's
#                      (ncu) beside the compiled model's (torch.profiler);
#                      BENCH_ARGS='andrea-120m 8449 fp32'
#   make bench-train-timeline  on a GPU machine: one step's wall time on the
#                      device's clock, busy and idle, the gaps between
#                      kernels (CUPTI) beside the compiled model's
#                      (torch.profiler); BENCH_ARGS as bench-train-profile,
#                      '--sequence ...' also andrea's step kernel by kernel
#   make bench-generate   andrea-generate's decode tokens/s vs NumPy (CPU) and,
#                      where PyTorch sees a GPU, PyTorch eager and HF generate
#   make bench-forward    embed | block -l all | logits vs NumPy / PyTorch
#                      (both: BENCH_ARGS='andrea-12m cpu 1 --quick' and so on)
#   make bench-tokenize   andrea-tokenize's encoding MB/s vs Hugging Face
#                      tokenizers (BENCH_ARGS='--mb 4 --vocab 8192')
#   make bench-attention  andrea-attention vs the four stages and NumPy (CPU)
#                      and, where PyTorch sees a GPU, its kernel vs SDPA
#   make bench-analysis   andrea-patch's layer x head sweep vs the same sweep
#                      with hooks in NumPy (CPU) and PyTorch (GPU; BENCH_ARGS=cuda)
#   make bench-stages     each CPU stage vs NumPy, the pipeline at T = 1024,
#                      then at T = 4096 and 16384, B = 1 and 4, with peak
#                      memory (BENCH_ARGS='4096 1' picks rows; ~10 min)
#
# Nothing is detected through dpkg: nvcc is looked up on PATH, in
# $CUDA_HOME/bin and in /usr/local/cuda*/bin; OpenBLAS and libgd are used
# when their headers are present.  A machine with only the CUDA toolkit and
# zlib gets CUDA=1 BLAS=none PNG=0 by itself.

PREFIX  ?= /usr/local
DESTDIR ?=
CC      ?= cc
PYTHON  ?= /usr/bin/python3
# the GPU machine's python3 (NumPy, PyTorch) is whichever comes first on PATH
GPU_PYTHON ?= python3

NVCC      ?= $(shell command -v nvcc 2>/dev/null || ls $${CUDA_HOME:-/usr/local/cuda}/bin/nvcc /usr/local/cuda*/bin/nvcc 2>/dev/null | head -n 1)
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))
CUDA      ?= $(if $(NVCC),1,0)
CBLAS_H   := $(wildcard /usr/include/cblas.h /usr/include/*/cblas.h /usr/include/openblas/cblas.h)
OPENBLAS_OMP := $(wildcard /usr/lib/*/openblas-openmp/libopenblas.so.0)
BLAS      ?= $(if $(CBLAS_H),$(if $(OPENBLAS_OMP),openblas-openmp,openblas),none)
PNG       ?= $(if $(wildcard /usr/include/gd.h /usr/include/*/gd.h),1,0)
# jansson reads the JSON of imported models (safetensors headers, config.json)
JSON      ?= $(if $(wildcard /usr/include/jansson.h /usr/include/*/jansson.h),1,0)
# PCRE2 cuts text into pieces for GPT-2's tokenizer (its Unicode classes)
PCRE      ?= $(if $(wildcard /usr/include/pcre2.h /usr/include/*/pcre2.h),1,0)
# glibc's vector math (libmvec) draws the default model four lanes at a time
MVEC      ?= $(if $(wildcard /usr/lib/*/libmvec.so /lib/*/libmvec.so /usr/lib64/libmvec.so),1,0)
SAN       ?= 0
# cuDNN's headers (the bf16 fused attention; the library is loaded at run
# time): the toolkit's, or CUDNN_INC= a folder holding cudnn_graph.h (on a
# machine with PyTorch: its nvidia/cudnn/include)
CUDNN_INC ?= $(patsubst %/cudnn_graph.h,%,$(firstword $(wildcard $(CUDA_HOME)/include/cudnn_graph.h /usr/include/cudnn_graph.h /usr/include/*/cudnn_graph.h)))
CUDNN     ?= $(if $(and $(filter 1,$(CUDA)),$(CUDNN_INC)),1,0)
# NCCL's header (training on several GPUs; the library is loaded at run
# time): the toolkit's, or NCCL_INC= a folder holding nccl.h (on a machine
# with PyTorch: its nvidia/nccl/include).  The flags' digest in CONFIG
# keeps the builds with and without it apart.
NCCL_INC  ?= $(patsubst %/nccl.h,%,$(firstword $(wildcard $(CUDA_HOME)/include/nccl.h /usr/include/nccl.h)))
NCCL      ?= $(if $(and $(filter 1,$(CUDA)),$(NCCL_INC)),1,0)

CFLAGS  ?= -O2 -g
CFLAGS  += -fno-trapping-math -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter -Wno-format-truncation -fopenmp-simd -Ilib -MMD -MP
LDLIBS  += -lz -lm

ifeq ($(SAN),1)
CFLAGS  += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDFLAGS += -fsanitize=address,undefined
endif
# The loops and the products run on andrea's own threads (lib/core/parallel.h),
# OpenBLAS on one thread; -fopenmp-simd takes OpenMP's simd pragmas only, so
# no OpenMP thread is ever started.  OpenBLAS's OpenMP build (BLAS=openblas-
# openmp) is preferred where installed: it starts no thread of its own,
# while the pthread build starts its pool as it loads, whose threads spin
# for ~0.1 s before they sleep.
ifeq ($(BLAS),openblas-openmp)
CFLAGS  += -DANDREA_CBLAS
LDLIBS  += -L$(dir $(OPENBLAS_OMP)) -Wl,-rpath,$(dir $(OPENBLAS_OMP)) -l:libopenblas.so.0
endif
ifeq ($(BLAS),openblas)
CFLAGS  += -DANDREA_CBLAS
LDLIBS  += -lopenblas
endif
ifeq ($(MVEC),1)
CFLAGS  += -DANDREA_MVEC
LDLIBS  += -lmvec
endif
ifeq ($(PNG),1)
CFLAGS  += -DANDREA_PNG
LDLIBS  += -lgd
endif
ifeq ($(JSON),1)
CFLAGS  += -DANDREA_JSON
LDLIBS  += -ljansson
endif
ifeq ($(PCRE),1)
CFLAGS  += -DANDREA_PCRE2
LDLIBS  += -lpcre2-8
endif
ifeq ($(CUDA),1)
CFLAGS  += -DANDREA_CUDA
NVFLAGS ?= -O2 -std=c++17 -arch=sm_90 -Xcompiler -Wall
NVFLAGS += -DANDREA_CUDA -Ilib -Ikernels -MMD -MP
ifeq ($(CUDNN),1)
NVFLAGS += -DANDREA_CUDNN -I$(CUDNN_INC)
endif
ifeq ($(NCCL),1)
NVFLAGS += -DANDREA_NCCL -I$(NCCL_INC)
endif
LDLIBS  += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudart -ldl -lstdc++
endif

# Objects of each configuration live apart; build/config names the one the
# executables in bin/ were last linked with, so switching relinks them.  The
# key holds every switch and a digest of the compilers' flags, so that
# `make MVEC=0` or another CFLAGS after `make` never reuses stale objects.
FLAGS_KEY := $(shell printf '%s' '$(CC) $(CFLAGS) | $(NVCC) $(NVFLAGS) | $(LDLIBS)' | cksum | cut -d' ' -f1)
CONFIG   := cuda$(CUDA)-cudnn$(CUDNN)-$(BLAS)-png$(PNG)-json$(JSON)-pcre$(PCRE)-mvec$(MVEC)-san$(SAN)-$(FLAGS_KEY)
BUILD    := build/$(CONFIG)
$(shell mkdir -p build; [ "$$(cat build/config 2>/dev/null)" = "$(CONFIG)" ] || echo "$(CONFIG)" > build/config)

LIB_SRC  := $(wildcard lib/*/*.c)
CU_SRC   := $(if $(filter 1,$(CUDA)),$(wildcard kernels/common/*.cu kernels/ops/*.cu kernels/forward/*.cu kernels/train/*.cu))
CMD_SRC  := $(wildcard cmd/*.c)
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o) $(CU_SRC:%.cu=$(BUILD)/%.o)
BINS     := $(CMD_SRC:cmd/%.c=bin/%)
UNITS    := $(patsubst tests/unit/%.c,build/tests/%,$(wildcard tests/unit/*.c))
BENCHES  := $(patsubst bench/%.c,build/bench/%,$(wildcard bench/*.c))
MAN1     := $(wildcard man/man1/*.1)
MAN5     := $(wildcard man/man5/*.5)
MAN7     := $(wildcard man/man7/*.7)
# kernels/check/NAME_check.cu -> build/kernels/NAME-check; bench/gpu.cu
KCHECKS  := $(if $(filter 1,$(CUDA)),$(patsubst kernels/check/%_check.cu,build/kernels/%-check,$(wildcard kernels/check/*_check.cu)))
GPUBENCH := $(if $(filter 1,$(CUDA)),build/bench/gpu build/bench/mask-layouts build/bench/cuda-start)

all: $(BINS) $(UNITS) $(BENCHES) $(KCHECKS) $(GPUBENCH)

$(BUILD)/libandrea.a: $(LIB_OBJ)
	rm -f $@
	ar rcs $@ $^

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c -o $@ $<

$(BUILD)/%.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) -c -o $@ $<

bin/%: $(BUILD)/cmd/%.o $(BUILD)/libandrea.a build/config
	@mkdir -p bin
	$(CC) $(LDFLAGS) -o $@ $< $(BUILD)/libandrea.a $(LDLIBS)

build/tests/%: $(BUILD)/tests/unit/%.o $(BUILD)/libandrea.a build/config
	@mkdir -p build/tests
	$(CC) $(LDFLAGS) -o $@ $< $(BUILD)/libandrea.a $(LDLIBS)

build/bench/%: $(BUILD)/bench/%.o $(BUILD)/libandrea.a build/config
	@mkdir -p build/bench
	$(CC) $(LDFLAGS) -o $@ $< $(BUILD)/libandrea.a $(LDLIBS)

build/kernels/%-check: $(BUILD)/kernels/check/%_check.o $(BUILD)/libandrea.a build/config
	@mkdir -p build/kernels
	$(CC) $(LDFLAGS) -o $@ $< $(BUILD)/libandrea.a $(LDLIBS)

kernels: $(KCHECKS)

# The GPU suite: no Debian packages, no pytest needed (tests/run-gpu.sh)
test-gpu: all
	@test "$(CUDA)" = 1 || { echo "test-gpu: this build has no CUDA (nvcc not found; CUDA=1?)"; exit 1; }
	PYTHON=$(GPU_PYTHON) bash tests/run-gpu.sh

bench-gpu: all
	@test "$(CUDA)" = 1 || { echo "bench-gpu: this build has no CUDA (nvcc not found; CUDA=1?)"; exit 1; }
	PYTHON=$(GPU_PYTHON) sh bench/run-gpu.sh

bench-mask: all
	@test "$(CUDA)" = 1 || { echo "bench-mask: this build has no CUDA (nvcc not found; CUDA=1?)"; exit 1; }
	build/bench/mask-layouts

bench-train-ranks: all
	@test "$(CUDA)" = 1 || { echo "bench-train-ranks: this build has no CUDA (nvcc not found; CUDA=1?)"; exit 1; }
	$(GPU_PYTHON) bench/train-ranks.py

bench-train-gpu: all
	@test "$(CUDA)" = 1 || { echo "bench-train-gpu: this build has no CUDA (nvcc not found; CUDA=1?)"; exit 1; }
	PYTHON=$(GPU_PYTHON) sh bench/run-train-gpu.sh $(BENCH_ARGS)

bench-train-ab: all
	@test "$(CUDA)" = 1 || { echo "bench-train-ab: this build has no CUDA (nvcc not found; CUDA=1?)"; exit 1; }
	$(GPU_PYTHON) bench/train-ab.py $(BENCH_ARGS)

bench-train-profile: all
	@test "$(CUDA)" = 1 || { echo "bench-train-profile: this build has no CUDA (nvcc not found; CUDA=1?)"; exit 1; }
	$(GPU_PYTHON) bench/train-profile.py $(BENCH_ARGS)

bench-train-timeline: all
	@test "$(CUDA)" = 1 || { echo "bench-train-timeline: this build has no CUDA (nvcc not found; CUDA=1?)"; exit 1; }
	$(GPU_PYTHON) bench/train-timeline.py $(BENCH_ARGS)

# CPU rows everywhere, GPU rows where PyTorch sees a GPU (and CUDA=1)
bench-generate: all
	PYTHON=$(GPU_PYTHON) sh bench/run-generate.sh $(BENCH_ARGS)

bench-forward: all
	PYTHON=$(GPU_PYTHON) sh bench/run-forward.sh $(BENCH_ARGS)

bench-tokenize: all
	$(PYTHON) bench/tokenizing.py $(BENCH_ARGS)

# cmd/help/*.h: each tool's --help, from its man page (needs man)
help:
	$(PYTHON) tools/gen-help.py

# examples/experiments/*.sh: each experiment of andrea(7) as a table and a
# figure, into EXP_OUT (./experiments)
experiments: all
	@for s in examples/experiments/*.sh; do echo "== $$s"; PYTHON=$(PYTHON) sh $$s || exit 1; done

bench-attention: all $(KCHECKS)
	PYTHON=$(GPU_PYTHON) $(GPU_PYTHON) bench/attention.py $(BENCH_ARGS)

bench-analysis: all
	$(GPU_PYTHON) bench/analysis.py $(BENCH_ARGS)

# bench/run-NAME.sh runs one benchmark against its in-run reference
bench-%: all
	sh bench/run-$*.sh $(BENCH_ARGS)

setup:
	sh tools/setup.sh

test: setup
	$(MAKE) all
	$(PYTHON) -m pytest -q -p no:cacheprovider tests

# the build on every core: the demo itself takes seconds
demo: setup
	$(MAKE) -j$$(nproc 2>/dev/null || echo 2) all
	sh tools/demo.sh

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1 \
		$(DESTDIR)$(PREFIX)/share/man/man5 $(DESTDIR)$(PREFIX)/share/man/man7
	install -m 755 $(BINS) $(DESTDIR)$(PREFIX)/bin
	install -m 644 $(MAN1) $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 644 $(MAN5) $(DESTDIR)$(PREFIX)/share/man/man5
	install -m 644 $(MAN7) $(DESTDIR)$(PREFIX)/share/man/man7

clean:
	rm -rf build bin

# make fuzz: the libFuzzer targets (fuzz/README)
include fuzz/fuzz.mk

.PHONY: all setup test test-gpu bench-gpu bench-mask bench-train-gpu bench-train-ab bench-train-ranks bench-train-profile bench-train-timeline bench-generate \
	bench-forward bench-tokenize bench-attention bench-analysis experiments help kernels demo install clean
.SECONDARY:
-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
