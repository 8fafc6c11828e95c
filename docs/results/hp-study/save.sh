#!/usr/bin/env bash
# Keep the confirmation's published seeds (a manifest is written last) without their weights
# under docs/results/hp-study/<configuration>/seeds/, so that a fresh clone re-issues every
# verdict without training. Run from the repository root after, or while, confirm.sh runs.
set -euo pipefail
for seed in runs/hp-study/*/seed-*; do
  [ -f "$seed/manifest.json" ] || continue
  kept="docs/results/hp-study/$(basename "$(dirname "$seed")")/seeds/$(basename "$seed")"
  [ -f "$kept/manifest.json" ] && continue
  mkdir -p "$(dirname "$kept")"
  rm -rf "$kept.partial" && cp -r "$seed" "$kept.partial" && rm -rf "$kept.partial/model"
  mv "$kept.partial" "$kept"
  echo "kept $kept"
done
