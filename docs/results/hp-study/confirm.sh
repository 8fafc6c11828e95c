#!/usr/bin/env bash
# The confirmation (plan.yaml): the three configurations, each on the fresh seeds of the
# hp-inoculation profile (100-111), trained in turn into runs/hp-study/<configuration>/ and
# tracked in the MLflow experiment hp-study-<configuration>. A finished seed is adopted, never
# retrained, so the script resumes where it stopped. `bash docs/results/hp-study/save.sh`
# keeps the published seeds, without weights, under docs/results/hp-study/<configuration>/.
# The configurations: configurations.txt (name, learning rate, epochs, warmup ratio); the best
# is the search's trial 6 (search/trials.csv), by the plan's rule.
# Run from the repository root in the environment (. .venv/bin/activate). The seeds are named
# here, since params.yaml's own list would win over the profile's; SEEDS='[112, ..., 123]'
# trains the second look's.
set -euo pipefail
SEEDS=${SEEDS:-[100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111]}
while read -r name learning_rate epochs warmup_ratio; do
  echo "== $name: learning_rate=$learning_rate epochs=$epochs warmup_ratio=$warmup_ratio"
  seedvar launch --profile hp-inoculation \
    --set "train.learning_rate=$learning_rate" --set "train.epochs=$epochs" \
    --set "train.warmup_ratio=$warmup_ratio" --set "output_dir=runs/hp-study/$name" \
    --set "tracking.experiment=hp-study-$name" --set "seeds=$SEEDS" "$@"
done < docs/results/hp-study/configurations.txt
