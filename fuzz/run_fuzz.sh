#!/bin/sh
# Builds the libFuzzer targets in the asan preset's build (build/asan: clang, AddressSanitizer and
# UndefinedBehaviorSanitizer, halting on the first report; the same build runs the sanitized test
# suite, make test-asan) and runs one or all of them for a bounded time each, one after another. New inputs go to build/fuzz/corpus/TARGET; the
# checked-in seeds (fuzz/corpus/TARGET, plus the inputs of tests/ and examples/) are only read.
# Crashes land in build/fuzz/artifacts/TARGET-*. Final stats go to build/fuzz/TARGET.log.
#
#   fuzz/run_fuzz.sh [SECONDS] [TARGET|all] [extra libFuzzer flags...]   (default 60 s, all)
#
# Targets: onnx (onnx_import_fuzz), chain (chain_json_fuzz), graph (graph_json_fuzz),
# workload (workload_json_fuzz), hf (hf_config_fuzz), options (option_text_fuzz).
set -eu
cd "$(dirname "$0")/.."
seconds=${1:-60}
which=${2:-all}
[ $# -gt 0 ] && shift
[ $# -gt 0 ] && shift
if ! command -v clang++ >/dev/null 2>&1; then
  echo "clang++ is needed (apt-get install clang)" >&2
  exit 1
fi
case "$which" in
  all) targets="onnx chain graph workload hf options" ;;
  onnx|chain|graph|workload|hf|options) targets=$which ;;
  *) echo "run_fuzz.sh: unknown target '$which' (onnx, chain, graph, workload, hf, options or all)" >&2; exit 2 ;;
esac
binary() {
  case "$1" in
    onnx) echo onnx_import_fuzz ;;
    hf) echo hf_config_fuzz ;;
    options) echo option_text_fuzz ;;
    *) echo "$1_json_fuzz" ;;
  esac
}
cmake --preset asan >/dev/null
bins=""
for t in $targets; do bins="$bins $(binary "$t")"; done
# shellcheck disable=SC2086
cmake --build --preset asan -j "$(nproc)" --target $bins
mkdir -p build/fuzz/artifacts
for t in $targets; do
  seeds="fuzz/corpus/$t"
  # The JSON formats' seeds also include every example and test input of that kind.
  case "$t" in
    onnx) extra="tests/data/onnx" ;;
    hf) extra="data/hf-configs validation/hf-configs" ;;
    *) extra="" ;;
  esac
  mkdir -p "build/fuzz/corpus/$t"
  echo "fuzzing $t for $seconds s" >&2
  # -max_len 65536: the seeds of tests/data/onnx are larger and are read truncated.
  # shellcheck disable=SC2086
  "build/asan/$(binary "$t")" "build/fuzz/corpus/$t" "$seeds" $extra \
    -max_total_time="$seconds" -max_len=65536 -rss_limit_mb=2048 -timeout=10 \
    -artifact_prefix="build/fuzz/artifacts/$t-" -print_final_stats=1 "$@" \
    > "build/fuzz/$t.log" 2>&1 || { tail -40 "build/fuzz/$t.log" >&2; exit 1; }
  grep -E "stat::number_of_executed_units|cov: " "build/fuzz/$t.log" | tail -2 >&2
done
