# The two commands of README.md: `make demo` and `make test`. Both install what is missing first.
PRESET ?= release
BUILD_DIR := build/$(PRESET)
JOBS ?= $(shell nproc)

.PHONY: deps build demo test validate validate-gpu bench fuzz fuzz-smoke clean

deps:
	@scripts/install-deps.sh build

build: deps
	@cmake --preset $(PRESET) >/dev/null
	@cmake --build --preset $(PRESET) -j $(JOBS)

demo: build
	$(BUILD_DIR)/headroom estimate resnet50 --batch 32 --mode train --optimizer adam

# The importer fuzz run comes first so that ctest's summary is the last thing printed.
test: build fuzz-smoke
	@scripts/install-deps.sh browser
	@scripts/install-deps.sh validate
	@ctest --preset $(PRESET) -j $(JOBS)

fuzz-smoke:
	@scripts/install-deps.sh fuzz
	@fuzz/run_onnx_fuzz.sh 30 > build/fuzz-smoke.log 2>&1 || (tail -40 build/fuzz-smoke.log; exit 1)
	@grep -E "stat::number_of_executed_units|Done" build/fuzz-smoke.log | head -2

validate: build
	@scripts/install-deps.sh validate
	/usr/bin/python3 validation/run.py --out validation/measured.json

# Every validation case that fits the visible CUDA GPU -> validation/measured_cuda.json (docs/gpu.md).
# Any Python with torch (1.13 to 2.x) and CUDA: TORCH_PYTHON=... overrides the search (evaluated
# only here: importing torch takes seconds).
TORCH_PYTHON ?= $(shell for p in /usr/bin/python3 python3 python; do \
	$$p -c 'import torch' >/dev/null 2>&1 && command -v $$p && break; done)
validate-gpu:
	@test -n "$(TORCH_PYTHON)" || { echo "validate-gpu: no Python with torch found (set TORCH_PYTHON=/path/to/python)" >&2; exit 1; }
	@$(TORCH_PYTHON) validation/cuda_run.py

bench: build
	$(BUILD_DIR)/headroom_bench

fuzz:
	fuzz/run_onnx_fuzz.sh

clean:
	rm -rf build
