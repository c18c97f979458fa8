# The two commands of README.md: `make demo` and `make test`. Both install what is missing first.
PRESET ?= release
BUILD_DIR := build/$(PRESET)
JOBS ?= $(shell nproc)

.PHONY: deps build demo test validate bench fuzz fuzz-smoke clean

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
	@ctest --preset $(PRESET) -j $(JOBS)

fuzz-smoke:
	@scripts/install-deps.sh fuzz
	@fuzz/run_onnx_fuzz.sh 30 > build/fuzz-smoke.log 2>&1 || (tail -40 build/fuzz-smoke.log; exit 1)
	@grep -E "stat::number_of_executed_units|Done" build/fuzz-smoke.log | head -2

validate: build
	@scripts/install-deps.sh validate
	/usr/bin/python3 validation/run.py --out validation/measured.json
	/usr/bin/python3 validation/hf_generate.py
	/usr/bin/python3 validation/hf_lora.py

bench: build
	$(BUILD_DIR)/headroom_bench

fuzz:
	fuzz/run_onnx_fuzz.sh

clean:
	rm -rf build
