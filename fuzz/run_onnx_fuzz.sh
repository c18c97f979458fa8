#!/bin/sh
# Builds the ONNX importer's libFuzzer target (clang, AddressSanitizer) in build/fuzz and runs it
# for a bounded time. New inputs go to build/fuzz/corpus/onnx; the checked-in seeds in
# fuzz/corpus/onnx are only read. Crashes land in build/fuzz/artifacts/.
#
#   fuzz/run_onnx_fuzz.sh [SECONDS] [extra libFuzzer flags...]     (default 60 seconds)
set -eu
cd "$(dirname "$0")/.."
seconds=${1:-60}
[ $# -gt 0 ] && shift
if ! command -v clang++ >/dev/null 2>&1; then
  echo "clang++ is needed (apt-get install clang)" >&2
  exit 1
fi
cmake -S . -B build/fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ -DHEADROOM_FUZZ=ON >/dev/null
cmake --build build/fuzz -j "$(nproc)" --target onnx_import_fuzz
mkdir -p build/fuzz/corpus/onnx build/fuzz/artifacts
exec build/fuzz/onnx_import_fuzz build/fuzz/corpus/onnx fuzz/corpus/onnx \
  -max_total_time="$seconds" -max_len=65536 -rss_limit_mb=2048 -timeout=10 \
  -artifact_prefix=build/fuzz/artifacts/ -print_final_stats=1 "$@"
