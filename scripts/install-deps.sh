#!/usr/bin/env bash
# Installs the Debian packages headroom needs, and only the missing ones.
# As root it runs apt-get; otherwise it prints the one command to run and fails.
# Usage: scripts/install-deps.sh [build|validate|browser|fuzz|all]
set -euo pipefail
what="${1:-build}"
build_pkgs=(cmake g++ make libgtest-dev libgmock-dev libbenchmark-dev libfmt-dev nlohmann-json3-dev
            libcli11-dev libxxhash-dev pkg-config libonnx-dev libprotobuf-dev protobuf-compiler coinor-libcbc-dev
            libjemalloc-dev pybind11-dev python3-dev python3-pytest zsh)
# libjemalloc-dev: the CLI's and the benchmarks' malloc (CMakeLists.txt, docs/speed.md).
# zsh: tests/install checks the generated zsh completion parses (zsh -n).
# The Python package's tests in `make test` capture torch/torchvision modules (and run examples/gemel_digits.py
# on scikit-learn's bundled digits); measuring needs torch.
validate_pkgs=(python3-torch python3-torchvision python3-onnx python3-sklearn)
# The HTML page tests lay out the report, plan and pack pages in headless Chromium at 390, 1280 and
# 2560 px and measure them from the DOM (--dump-dom; no chromedriver needed) (`make test`).
browser_pkgs=(chromium)
# The ONNX importer's libFuzzer target (clang with compiler-rt), run for a bounded time by `make test`.
fuzz_pkgs=(clang libclang-rt-14-dev)
case "$what" in
  build) pkgs=("${build_pkgs[@]}") ;;
  validate) pkgs=("${validate_pkgs[@]}") ;;
  browser) pkgs=("${browser_pkgs[@]}") ;;
  fuzz) pkgs=("${fuzz_pkgs[@]}") ;;
  all) pkgs=("${build_pkgs[@]}" "${validate_pkgs[@]}" "${browser_pkgs[@]}" "${fuzz_pkgs[@]}") ;;
  *) echo "install-deps.sh: unknown set '$what' (build, validate, browser, fuzz or all)" >&2; exit 2 ;;
esac
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -eq 0 ]; then
  echo "installing: ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "missing Debian packages; run: sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
