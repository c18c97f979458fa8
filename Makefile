# The two commands of README.md: `make demo` and `make test`. Both install what is missing first.
PRESET ?= release
BUILD_DIR := build/$(PRESET)
JOBS ?= $(shell nproc)

.PHONY: deps build demo test validate bench fuzz clean

deps:
	@scripts/install-deps.sh build

build: deps
	@cmake --preset $(PRESET) >/dev/null
	@cmake --build --preset $(PRESET) -j $(JOBS)

demo: build
	$(BUILD_DIR)/headroom estimate resnet50 --batch 32 --mode train --optimizer adam

test: build
	@scripts/install-deps.sh browser
	@ctest --preset $(PRESET) -j $(JOBS)

validate: build
	@scripts/install-deps.sh validate
	/usr/bin/python3 validation/run.py --out validation/measured.json

bench: build
	$(BUILD_DIR)/headroom_bench

fuzz:
	fuzz/run_onnx_fuzz.sh

clean:
	rm -rf build
