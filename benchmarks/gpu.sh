#!/usr/bin/env bash
# GPU benchmark, under 5 minutes on one H100/H200-class GPU: seedvar fine-tuning BERT-base
# (random weights) at batch 32 on real MNLI pairs, eager and torch.compile: tokens/s, MFU
# against the GPU's measured bf16 matmul peak, projected hours per seed and for 100 seeds on
# 1 and 8 GPUs, and the gain from several seeds at once.
# Writes benchmarks/results/gpu.json. Needs: pip install -e '.[offline]' (the tokenizer).
set -euo pipefail
cd "$(dirname "$0")/.."
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
python benchmarks/gpu.py --steps "${STEPS:-200}" --sharing 1 2 4 8
