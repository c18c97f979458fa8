#!/bin/sh
# Reproduces every trace quoted in ../pytorch-cpu-op-traces.md (Debian 12, torch 1.13 from Debian).
# Usage: sh run_all.sh [OUTDIR]   (default /tmp/headroom-results)
set -e
D=$(cd "$(dirname "$0")" && pwd); O=${1:-/tmp/headroom-results}; mkdir -p "$O"
export PYTHONDONTWRITEBYTECODE=1
P=/usr/bin/python3
$P "$D/conv.py" 1 > "$O/conv_t1.txt" 2>&1
$P "$D/conv.py" 2 > "$O/conv_t2.txt" 2>&1
$P "$D/conv_models.py" 1 > "$O/conv_models_t1.txt" 2>&1
$P "$D/conv_models.py" 2 > "$O/conv_models_t2.txt" 2>&1
BLOCK=8 ONEDNN_MAX_CPU_ISA=AVX2 $P "$D/conv_models.py" 1 > "$O/conv_models_avx2_t1.txt" 2>&1
$P "$D/conv_isa.py" > "$O/conv_isa_default.txt" 2>&1
ONEDNN_MAX_CPU_ISA=AVX2 $P "$D/conv_isa.py" > "$O/conv_isa_avx2.txt" 2>&1
$P "$D/conv_n1.py" > "$O/conv_n1.txt" 2>&1
$P "$D/ops.py" 1 > "$O/ops_t1.txt" 2>&1
$P "$D/ops.py" 2 > "$O/ops_t2.txt" 2>&1
$P "$D/threads_big.py" 1 > "$O/threads_big_t1.txt" 2>&1
$P "$D/threads_big.py" 2 > "$O/threads_big_t2.txt" 2>&1
$P "$D/engine.py" > "$O/engine.txt" 2>&1
$P "$D/optim.py" > "$O/optim.txt" 2>&1
$P "$D/loop.py" > "$O/loop.txt" 2>&1
$P "$D/resblock.py" > "$O/resblock.txt" 2>&1
$P "$D/densecat.py" > "$O/densecat.txt" 2>&1
$P "$D/attention.py" > "$O/attention.txt" 2>&1
echo "outputs in $O"
