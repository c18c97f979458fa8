# The two commands of README.md: `make demo` and `make test`. Both install what is missing first.
PRESET ?= release
BUILD_DIR := build/$(PRESET)
JOBS ?= $(shell nproc)

.PHONY: deps build demo test test-asan validate validate-gpu bench fuzz fuzz-smoke clean

deps:
	@scripts/install-deps.sh build

build: deps
	@cmake --preset $(PRESET) >/dev/null
	@cmake --build --preset $(PRESET) -j $(JOBS)

demo: build
	$(BUILD_DIR)/headroom estimate resnet50 --batch 32 --mode train --optimizer adam

# The fuzz runs come first so that ctest's summary is the last thing printed.
test: build fuzz-smoke
	@scripts/install-deps.sh browser
	@scripts/install-deps.sh validate
	@ctest --preset $(PRESET) -j $(JOBS)

# The C++ suite under AddressSanitizer + UndefinedBehaviorSanitizer: the asan preset (clang, -O1,
# -fno-sanitize-recover=all, so any report fails the test that triggered it), the same build that
# holds the libFuzzer targets of fuzz-smoke, so `make test` has compiled its libraries already. The
# CLI tests run the sanitized headroom binary too. Left out: the Python tests and the one that loads
# the instrumented fake NVML into python3 (Debian's python3 is not instrumented: importing the
# instrumented extension needs the ASan runtime preloaded and CPython's own allocations then read as
# leaks; the C++ they call is the library this suite covers) and install_staged (a release build).
# The two 70B layout searches run here too since a family is rejected at its first candidate whose
# model state exceeds the budget (docs/distributed.md): 18 s sanitized, where they took over 7
# minutes each before.
ASAN_ENV := ASAN_OPTIONS=halt_on_error=1:detect_leaks=1 \
            UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
test-asan: deps
	@scripts/install-deps.sh fuzz
	@scripts/install-deps.sh browser
	@cmake --preset asan >/dev/null
	@cmake --build --preset asan -j $(JOBS) --target headroom_tests
	@$(ASAN_ENV) ctest --preset asan -j $(JOBS) -E '^(python\..*|install_staged|FakeNvml.ValidationProbeReadsBothProcessLayouts)$$'

# Every libFuzzer target (ONNX, chain, graph and workload JSON) for 30 s each.
fuzz-smoke:
	@scripts/install-deps.sh fuzz
	@fuzz/run_fuzz.sh 30 all > build/fuzz-smoke.log 2>&1 || (tail -40 build/fuzz-smoke.log; exit 1)
	@grep -E "^fuzzing|stat::number_of_executed_units" build/fuzz-smoke.log

validate: build
	@scripts/install-deps.sh validate
	/usr/bin/python3 validation/run.py --out validation/measured.json
	/usr/bin/python3 validation/hf_generate.py
	/usr/bin/python3 validation/hf_lora.py

# Every validation case that fits the visible CUDA GPU -> validation/measured_cuda.json (docs/gpu.md).
# Any Python with torch (1.13 to 2.x) and CUDA: TORCH_PYTHON=... overrides the search (evaluated
# only here: importing torch takes seconds).
TORCH_PYTHON ?= $(shell for p in /usr/bin/python3 python3 python; do \
	$$p -c 'import torch' >/dev/null 2>&1 && command -v $$p && break; done)
validate-gpu:
	@test -n "$(TORCH_PYTHON)" || { echo "validate-gpu: no Python with torch found (set TORCH_PYTHON=/path/to/python)" >&2; exit 1; }
	@$(TORCH_PYTHON) validation/cuda_run.py $(VALIDATE_GPU_ARGS)

bench: build
	$(BUILD_DIR)/headroom_bench

# Each target for FUZZ_SECONDS (default 600); FUZZ_TARGET=onnx|chain|graph|workload picks one.
FUZZ_SECONDS ?= 600
FUZZ_TARGET ?= all
fuzz:
	@scripts/install-deps.sh fuzz
	fuzz/run_fuzz.sh $(FUZZ_SECONDS) $(FUZZ_TARGET)

clean:
	rm -rf build
