#!/usr/bin/env bash
# The GPU check on a GPU machine without network or package index (benchmarks/gpu.py): it needs
# the repository and the tokenizer folder .gpu-check/tokenizer, written beforehand on a machine
# with the project installed by `python benchmarks/gpu.py --save-tokenizer .gpu-check/tokenizer`.
# Writes benchmarks/results/gpu-<GPU>.json (or into $OUT where that is set). About 5 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1 | awk '{print tolower($2)}')
PYTHONUNBUFFERED=1 python3 benchmarks/gpu.py --tokenizer .gpu-check/tokenizer \
  --out "${OUT:-benchmarks/results}/gpu-${gpu}.json"
