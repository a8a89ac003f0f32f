# GPT-2 training in C. `make` builds the programs; `make test` checks them quickly (7-10
# minutes on 2 cores), `make test-all` runs the whole suite as CI does; `make help` lists every target.
#   make PORTABLE=1   builds for any x86-64 (no -march=native)
#   make MARCH=x86-64-v3   builds for another CPU than this one (here: any with AVX2, as Zen 3)
#   make NO_OMP=1     builds without OpenMP (single-threaded)

CC ?= gcc
ifeq ($(CC),cc)
  CC = gcc
endif
CFLAGS ?= -O3
CFLAGS += -std=gnu11 -Wall -Wextra -Wno-unused-function -Wno-unused-parameter
# Loops start on a 64-byte line: where the GEMM micro-kernel's loop began in its line was a
# matter of the code before it, and on AMD's Zen 3 one build's fp32 products ran 7.7% slower than
# the same code aligned (dev/cpu/gemm_ab, 2026-12-08; docs/speed.md).
CFLAGS += -falign-loops=64
LDLIBS = -lm -lz

MARCH ?= native
ifeq ($(PORTABLE),1)
  CFLAGS += -march=x86-64 -mtune=generic
else
  CFLAGS += -march=$(MARCH)
endif

# OpenMP: used when the compiler and libgomp can build and link a test program.
ifneq ($(NO_OMP),1)
  OMP_OK := $(shell printf '#include <omp.h>\nint main(void){return omp_get_max_threads()<1;}\n' | \
              $(CC) -fopenmp -x c - -o /dev/null 2>/dev/null && echo yes)
  ifeq ($(OMP_OK),yes)
    CFLAGS += -fopenmp
  else
    $(info OpenMP not found: building single-threaded)
  endif
endif

# MPI (data-parallel training, llmc/zero.h and llmc/collectives.h): train_gpt2 is built with mpicc and
# -DUSE_MPI when mpicc is found (NO_MPI=1: never); the same sources build without it.
ifneq ($(NO_MPI),1)
  MPICC := $(shell command -v mpicc 2>/dev/null)
endif
ifneq ($(MPICC),)
  TRAIN_CC = OMPI_CC=$(CC) $(MPICC)
  TRAIN_CFLAGS = -DUSE_MPI
else
  TRAIN_CC = $(CC)
endif

PROGRAMS = train_gpt2 test_gpt2 generate test_kvcache test_sampler
PROGRAMS += eval  # loss, perplexity and HellaSwag of a model, without training
HEADERS = $(wildcard llmc/*.h)
# The data pipeline: GPT-2 BPE encoder (llmc/bpe.h) and the llm.c dataset writer.
# (Defined before `all`, whose prerequisites are expanded where the rule is read.)
TOOLS = tokenize prepare_data

.PHONY: all test test-all clean data bench bench-mpi bench-generate bench-tokenizer profile setup train soak help

all: $(PROGRAMS) $(TOOLS) ## the programs and the data tools (the default)

# Each target's line ends with "## what it does"; help lists them.
help: ## this list: every target, one line each
	@awk -F ':.*## ' '/^[a-zA-Z0-9_.-]+:.*## / { printf "  %-16s %s\n", $$1, $$2 }' $(firstword $(MAKEFILE_LIST))

train_gpt2: train_gpt2.c $(HEADERS) ## the trainer (with MPI when mpicc is found)
	$(TRAIN_CC) $(CFLAGS) $(TRAIN_CFLAGS) $< -o $@ $(LDLIBS)

test_gpt2: test_gpt2.c $(HEADERS) ## the model's check against PyTorch's reference files
	$(CC) $(CFLAGS) $< -o $@ $(LDLIBS)

eval: eval.c $(HEADERS) ## loss, perplexity and HellaSwag of a model
	$(CC) $(CFLAGS) $< -o $@ $(LDLIBS)

# Text from a prompt through the key/value cache, and its check against the full forward.
generate: generate.c $(HEADERS) ## text from a prompt through the key/value cache
	$(CC) $(CFLAGS) $< -o $@ $(LDLIBS)

test_kvcache: test_kvcache.c $(HEADERS) ## the key/value cache against the full forward pass
	$(CC) $(CFLAGS) $< -o $@ $(LDLIBS)

test_sampler: test_sampler.c $(HEADERS) ## the sampler's checks
	$(CC) $(CFLAGS) $< -o $@ $(LDLIBS)

# generate's tokens/s on GPT-2 124M against the memory-bandwidth bound and transformers' generate
# (KV cache, fp32 and bf16), whose greedy fp32 text must be generate's.
bench-generate: generate tokenize ## generate's tokens/s on GPT-2 124M against the bandwidth bound and transformers
	$(MAKE) -C dev/cpu read_bandwidth
	bash scripts/bench/bench_generate.sh


tokenize: tokenize.c $(HEADERS) ## the GPT-2 BPE encoder
	$(CC) $(CFLAGS) $< -o $@ $(LDLIBS)

prepare_data: prepare_data.c $(HEADERS) ## text to llm.c token shards
	$(CC) $(CFLAGS) $< -o $@ $(LDLIBS)

# Tiny Shakespeare and the GPT-2 vocabulary in data/ (see scripts/setup/setup_data.sh for
# TINYSHAKESPEARE_TXT and GPT2_VOCAB_DIR).
data: prepare_data ## Tiny Shakespeare and the GPT-2 vocabulary in data/
	bash scripts/setup/setup_data.sh

# The training step (fp32, bf16) against a tuned PyTorch 2's (eager and torch.compile, fp32 and
# bf16 autocast), both batch shapes, with a progress line per run (scripts/bench/bench.sh).
bench: train_gpt2 ## the training step, fp32 and bf16, against PyTorch 2's four modes
	$(MAKE) -C dev/cpu fma_peak core_to_core
	bash scripts/bench/bench.sh

# Data-parallel GPT-2 124M: 2 ranks x 1 thread against 1 rank x 2 threads (scripts/bench/bench_mpi.sh).
bench-mpi: train_gpt2 ## data-parallel GPT-2 124M: 2 ranks x 1 thread against 1 rank x 2 threads
	bash scripts/bench/bench_mpi.sh

# perf's view of a few GPT-2 124M steps: a build with symbols and frame pointers
# (kernels kept out of line so each shows under its own name), recorded after the
# warm-up step only (the trainer enables perf's events through a control FIFO), then
# the top of the report.
PROFILE_CFLAGS = $(CFLAGS) -g -fno-omit-frame-pointer -fno-inline-functions-called-once
profile: ## perf's view of a few GPT-2 124M steps, and the per-kernel times
	@mkdir -p build
	$(CC) $(PROFILE_CFLAGS) train_gpt2.c -o build/train_gpt2_profile $(LDLIBS)
	rm -f build/perf.ctl && mkfifo build/perf.ctl
	LLMC_PERF_CTL=build/perf.ctl perf record -g -D -1 --control fifo:build/perf.ctl -o build/perf.data \
		build/train_gpt2_profile -e d12 -b 4 -t 64 -x 4 -v 0 -s 0 --shuffle 0 --profile 1
	perf report -i build/perf.data --stdio --no-children -g none --percent-limit 0.3 2>/dev/null | grep -v '^$$' | head -n 40
	@echo "call graphs: perf report -i build/perf.data --no-children"
	@echo "per-kernel times of the same steps: the --profile tables above"


# Encoding speed on Tiny Shakespeare, single- and multi-threaded, in MB/s.
bench-tokenizer: tokenize ## the encoder's MB/s on Tiny Shakespeare, one thread and all
	bash scripts/bench/bench_tokenizer.sh

# A fresh machine: packages, build, data (scripts/setup/setup.sh).
setup: ## a fresh machine: packages, the Python venv, the build, the data
	bash scripts/setup/setup.sh

# The main job: a short real training run of GPT-2 d6 on Tiny Shakespeare.
train: train_gpt2 ## a short real training run of GPT-2 d6 on Tiny Shakespeare, and its loss plot
	./train_gpt2 -e d6 -b 8 -t 128 -x 300 -u 30 -l 1e-3 -q 0.1 -c 0.1 -v 50 -m 10 -s 100 -g 128 \
		-n 100 --keep 2 -o log_d6
	scripts/tools/plot_loss log_d6/main.log

# Every program and kernel path (fp32, bf16 native and emulated, the portable build) on
# small models with short runs and a few mutants each: TEST_QUICK=1 in every scripts/tests/test_*.sh.
test: all ## the quick tests: every program and kernel path, a few mutants (run_tests.sh --quick)
	bash scripts/tests/run_tests.sh --quick

# The whole suite (.ci/run): every config, build variant and mutant, the fuzzing, sanitizer
# and multi-host runs; about 45 minutes on 2 cores.
test-all: all ## the whole test suite, as CI runs it (scripts/tests/run_tests.sh)
	bash scripts/tests/run_tests.sh

# Training killed (SIGKILL, SIGTERM) at random moments and resumed, for SOAK_SECONDS
# (default 1800); the final model must equal an uninterrupted run's (scripts/tests/soak.sh).
soak: train_gpt2 ## training killed and resumed at random moments for SOAK_SECONDS
	bash scripts/tests/soak.sh

clean: ## removes the programs and build/
	rm -f $(PROGRAMS) $(TOOLS)
	rm -rf build

# ----------------------------------------------------------------------------
# Fuzzing and sanitizers (docs/testing.md, "Fuzzing" and "Sanitizers")

# libFuzzer harnesses, one per input the programs read (fuzz/fuzz_*.c), built with
# clang into build/fuzz/; `make fuzz` runs each for FUZZ_SECONDS, crash reproducers
# go to fuzz/crashes/<harness>/.
FUZZ_CC ?= clang
FUZZ_SECONDS ?= 60
FUZZ_CFLAGS = -std=gnu11 -g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined \
              -fno-sanitize-recover=all -Wall -Wno-unused-function -Wno-unused-parameter
FUZZERS = $(patsubst fuzz/%.c,build/fuzz/%,$(wildcard fuzz/fuzz_*.c))

build/fuzz/%: fuzz/%.c fuzz/fuzz_common.h $(HEADERS)
	@mkdir -p build/fuzz
	$(FUZZ_CC) $(FUZZ_CFLAGS) $< -o $@ $(LDLIBS)

.PHONY: fuzzers fuzz sanitize
fuzzers: $(FUZZERS) ## the libFuzzer harnesses in build/fuzz/ (clang)

fuzz: fuzzers ## runs each harness for FUZZ_SECONDS
	FUZZ_SECONDS=$(FUZZ_SECONDS) bash fuzz/run.sh

# make SANITIZE=1: every program built with AddressSanitizer and UBSan (any report
# is fatal) into build/sanitize/, beside the normal binaries.
SANITIZE_CFLAGS = $(CFLAGS) -g -O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all
SANITIZED = $(addprefix build/sanitize/,$(PROGRAMS) $(TOOLS))

build/sanitize/%: %.c $(HEADERS)
	@mkdir -p build/sanitize
	$(CC) $(SANITIZE_CFLAGS) $< -o $@ $(LDLIBS)

sanitize: $(SANITIZED) ## every program with ASan and UBSan in build/sanitize/

ifeq ($(SANITIZE),1)
  .DEFAULT_GOAL := sanitize
endif
