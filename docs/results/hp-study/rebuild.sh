#!/usr/bin/env bash
# Rebuild the hyperparameter study's confirmation from the committed seeds, without training:
# each configuration's verdict (seedvar aggregate, under the plan in plan.yaml) into
# docs/results/hp-study/<configuration>/results, then the configurations side by side
# (seedvar compare) into docs/results/hp-study/compare. Run from the repository root in the
# environment (. .venv/bin/activate): a few minutes a configuration on 2 cores.
# SEEDS='[100, ..., 123]' reads the second look.
set -euo pipefail
H=docs/results/hp-study
SEEDS=${SEEDS:-[100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111]}
compared=()
while read -r name learning_rate epochs warmup_ratio; do
  [ -d "$H/$name/seeds" ] || continue
  seedvar aggregate --profile hp-inoculation --set "seeds=$SEEDS" \
    --set "train.learning_rate=$learning_rate" --set "train.epochs=$epochs" \
    --set "train.warmup_ratio=$warmup_ratio" --set "output_dir=$H/$name/seeds" \
    --set "tracking.experiment=hp-study-$name" --results "$H/$name/results"
  compared+=("$name=$H/$name/results")
done < "$H/configurations.txt"
seedvar compare "${compared[@]}" --output "$H/compare"
