#!/usr/bin/env bash
# The GPU check on a GPU machine without network or package index (benchmarks/gpu.py), within a
# budget of at most 8 minutes (BUDGET_S, default 480): every part written as it ends, so a run cut
# off keeps what it measured. It needs the repository and the tokenizer folder .gpu-check/tokenizer
# (git-ignored: carry it), written beforehand on a machine with the project installed by
#   python benchmarks/gpu.py --save-tokenizer .gpu-check/tokenizer
# Writes gpu-<GPU>.json into $OUT where that is set (a lent machine), else benchmarks/results/.
# Needs python3 with torch, lightning, transformers, pandas and pyarrow; nothing else.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -f .gpu-check/tokenizer/tokenizer_config.json ]; then
  echo "no .gpu-check/tokenizer: run 'python benchmarks/gpu.py --save-tokenizer .gpu-check/tokenizer' where the project is installed, and carry it" >&2
  exit 2
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1 | awk '{print tolower($2)}')
out="${OUT:-benchmarks/results}/gpu-${gpu:-unknown}.json"
PYTHONUNBUFFERED=1 python3 benchmarks/gpu.py --tokenizer .gpu-check/tokenizer \
  --budget-s "${BUDGET_S:-480}" --out "$out"
echo "wrote $out"
