#!/usr/bin/env bash
# GPU benchmark (under 5 minutes on one H100/H200-class GPU): BERT-base training tokens/s,
# MFU, projected hours per seed and per 100 seeds, and the gain from several seeds at once.
# Writes benchmarks/results/gpu.json.
set -euo pipefail
cd "$(dirname "$0")/.."
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
python benchmarks/gpu.py --steps "${STEPS:-200}"
