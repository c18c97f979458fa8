#!/usr/bin/env bash
# Installs a build into a DESTDIR staging folder, then checks what make install promises: the
# CLI runs (and reads an ONNX file through its plugin), a CMake project finds headroom and its peak for a built-in model equals the CLI's,
# the Python package imports from the staged dist-packages, and the man page and the bash and
# zsh completions are where man, bash-completion and zsh look for them.
# Usage: check_install.sh BUILD_DIR SOURCE_DIR PYTHON
set -euo pipefail
build="$1"; src="$2"; python="$3"
stage="$build/install-test"
rm -rf "$stage"
DESTDIR="$stage/root" cmake --install "$build" --prefix /usr/local >/dev/null
root="$stage/root/usr/local"
cli_peak=$("$root/bin/headroom" estimate "mlp:layers=2,dim=64" --json | "$python" -c 'import json,sys; print(json.load(sys.stdin)["peak_bytes"])')
# The installed CLI finds its ONNX plugin relative to itself (<prefix>/lib.../headroom).
"$root/bin/headroom" estimate "$src/tests/data/onnx/tiny_cnn_training.onnx" --json >/dev/null ||
  { echo "the installed CLI cannot read an ONNX file (plugin not found)"; exit 1; }
cmake -S "$src/tests/install/consumer" -B "$stage/consumer" -DCMAKE_PREFIX_PATH="$root" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$stage/consumer" -j 2 >/dev/null
lib_peak=$("$stage/consumer/consumer")
[ "$cli_peak" = "$lib_peak" ] || { echo "consumer peak $lib_peak != CLI peak $cli_peak"; exit 1; }
site=$(ls -d "$root"/lib/python3*/dist-packages)
py_peak=$(PYTHONPATH="$site" "$python" -c 'import headroom; print(headroom.estimate("mlp:layers=2,dim=64")["peak_bytes"])')
[ "$py_peak" = "$cli_peak" ] || { echo "python peak $py_peak != CLI peak $cli_peak"; exit 1; }
head -1 "$root/share/man/man1/headroom.1" | grep -q '^\.TH HEADROOM 1' || { echo "no man page"; exit 1; }
bash -n "$root/share/bash-completion/completions/headroom" || { echo "bash completion does not parse"; exit 1; }
head -1 "$root/share/zsh/site-functions/_headroom" | grep -q '^#compdef headroom' || { echo "no zsh completion"; exit 1; }
zsh -n "$root/share/zsh/site-functions/_headroom" || { echo "zsh completion does not parse"; exit 1; }
echo "installed: CLI, find_package(headroom) and the Python package agree on $cli_peak bytes"
