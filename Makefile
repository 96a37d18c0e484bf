# Two commands do all set-up on a fresh Debian 12 machine:
#   make demo   installs what is missing, builds Release, measures this machine
#               once (trident calibrate), trains the branchy CNN as a graph
#               pipeline on 5 processes and writes its report
#   make test   installs what is missing, builds, runs every test
BUILD ?= build
JOBS ?= 2
PREFIX ?= /usr/local
CMAKE_FLAGS ?=
# The build links the CPU libraries of the `torch` wheel in the project
# environment (scripts/install-peers.sh: a virtual environment with that
# torch, torchvision and numpy, which the tests' Python runs too); see
# Note [One LibTorch] in docs/design.md.

.PHONY: deps configure build install test test-quick test-models demo bench-build bench bench-plan fuzz build-cuda check-cuda-build gpu-check clean
CUDA_BUILD ?= build-cuda

deps:
	@bash scripts/install-deps.sh

configure: deps
	@py=$$(bash scripts/install-peers.sh | tail -1) && \
	  torch=$$($$py -c 'import torch, os; print(os.path.dirname(torch.__file__))') && \
	  cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release -DTRIDENT_TORCH_DIR=$$torch -DTRIDENT_PYTHON=$$py $(CMAKE_FLAGS) >/dev/null

build: configure
	@cmake --build $(BUILD) -j$(JOBS)

# `trident` on the PATH: PREFIX/bin/trident (the exporter installs with pip: pip install ./tools/export).
install: build
	@cmake --install $(BUILD) --prefix $(PREFIX)

# Every test: unit tests (GoogleTest, fuzz replays) and integration tests, overlapped -j$(JOBS).
test: build
	@cd $(BUILD) && ctest --output-on-failure -j$(JOBS) --timeout 900

# The inner loop: unit tests and the integration tests labelled quick (seconds each).
test-quick: build
	@cd $(BUILD) && ctest --output-on-failure -j$(JOBS) --timeout 900 -L 'unit|quick'

# Every torchvision classifier exports, and the smallest of each family trains
# like PyTorch (docs/own-model.md, "Coverage"); about 14 minutes.
test-models: build
	@py=$$(grep -m1 '^TRIDENT_PYTHON:' $(BUILD)/CMakeCache.txt | cut -d= -f2) && \
	  $$py tools/export/test/aten_model_test.py $(BUILD)/tools/trident/trident --exports && \
	  $$py tools/export/test/aten_model_test.py $(BUILD)/tools/trident/trident --all

demo: build
	@$(BUILD)/tools/trident/trident calibrate --if-missing
	@$(BUILD)/tools/trident/trident train --config examples/fmnist-inception.yaml
	@$(BUILD)/tools/trident/trident report runs/fmnist-inception

# The benchmark programs (left out of `build`; bench/run_*.sh build what they use).
bench-build: build
	@cmake --build $(BUILD) -j$(JOBS) --target bench_programs

bench: bench-build
	@bash bench/run.sh

bench-plan: bench-build
	@$(BUILD)/bench/plan_bench summit-v100 16
	@$(BUILD)/bench/plan_optimality 200 1

# Each libFuzzer target for 5 minutes in a clang build with sanitizers (make test
# replays the corpus and regressions only); run it before a change to a parser lands.
fuzz: deps
	@FUZZ_BUILD=$(BUILD)-fuzz bash scripts/fuzz.sh 300

# The CUDA variant (docs/gpu.md): LibTorch 2.x from a CUDA torch wheel (the
# peer environment's, or TRIDENT_TORCH=<a wheel's torch directory>), NCCL.
# No GPU is needed to compile and link it.
build-cuda:
	@JOBS=$(JOBS) bash scripts/build-cuda.sh $(CUDA_BUILD)

# Compiles and links the CUDA variant, then runs its CPU tests: the unit
# tests and the GPU check's dry run.
check-cuda-build: build-cuda
	@cd $(CUDA_BUILD) && ctest --output-on-failure -j$(JOBS) --timeout 900 -L unit
	@bash scripts/gpu-check.sh --cpu --build $(CUDA_BUILD) --python "$$(bash scripts/install-peers.sh | tail -1)"

# On a machine with an NVIDIA GPU and a CUDA PyTorch (python3, or PY=...).
gpu-check:
	@bash scripts/gpu-check.sh --python $(or $(PY),python3)

clean:
	@rm -rf $(BUILD) $(BUILD)-fuzz
