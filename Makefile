# Two commands do all set-up on a fresh Debian 12 machine:
#   make demo   installs what is missing, builds Release, measures this machine
#               once (trident calibrate), trains the branchy CNN as a graph
#               pipeline on 5 processes and writes its report
#   make test   installs what is missing, builds, runs every test
BUILD ?= build
JOBS ?= 2
CMAKE_FLAGS ?=

.PHONY: deps configure build test demo bench bench-plan fuzz clean

deps:
	@bash scripts/install-deps.sh

configure: deps
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) >/dev/null

build: configure
	@cmake --build $(BUILD) -j$(JOBS)

test: build
	@cd $(BUILD) && ctest --output-on-failure -j$(JOBS) --timeout 900

demo: build
	@$(BUILD)/tools/trident/trident calibrate --if-missing
	@$(BUILD)/tools/trident/trident train --config examples/fmnist-inception.yaml
	@$(BUILD)/tools/trident/trident report runs/fmnist-inception

bench: build
	@bash bench/run.sh

bench-plan: build
	@$(BUILD)/bench/plan_bench summit-v100 16
	@$(BUILD)/bench/plan_optimality 200 1

# Each libFuzzer target for 5 minutes (make test runs them for 20 s each).
fuzz: deps
	@FUZZ_BUILD=$(BUILD)/fuzz bash scripts/fuzz.sh 300

clean:
	@rm -rf $(BUILD)
