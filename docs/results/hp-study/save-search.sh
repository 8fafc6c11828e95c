#!/usr/bin/env bash
# Keep the hyperparameter search's state in git, so that another machine resumes it: the Optuna
# storage (a consistent copy of sweeps/hp-inoculation.db, taken with SQLite's backup while the
# sweep may run) and every finished trial seed's folder without its weights (model/), as
# docs/results/hp-study/search/. To resume elsewhere, put them back and run the same command:
#   cp docs/results/hp-study/search/optuna.db sweeps/hp-inoculation.db
#   cp -r docs/results/hp-study/search/trials/. sweeps/hp-inoculation-search/
#   seedvar sweep --profile hp-inoculation --output docs/results/hp-study/search
# Run from the repository root in the environment (. .venv/bin/activate).
set -euo pipefail
OUT=docs/results/hp-study/search
mkdir -p "$OUT/trials"
python - <<'PY'
import sqlite3
source = sqlite3.connect("sweeps/hp-inoculation.db")
with sqlite3.connect("docs/results/hp-study/search/optuna.db") as copy:
    source.backup(copy)
PY
for seed in sweeps/hp-inoculation-search/*/seed-*; do
  [ -f "$seed/manifest.json" ] || continue  # published seeds only (a manifest is written last)
  trial=$(basename "$(dirname "$seed")")
  mkdir -p "$OUT/trials/$trial"
  rm -rf "${OUT:?}/trials/$trial/$(basename "$seed")"
  cp -r "$seed" "$OUT/trials/$trial/"
  rm -rf "$OUT/trials/$trial/$(basename "$seed")/model"
done
python - <<'PY'
import optuna
study = optuna.load_study(
    study_name="hp-inoculation-search", storage="sqlite:///docs/results/hp-study/search/optuna.db"
)
table = study.trials_dataframe(attrs=("number", "state", "value", "params", "duration"))
table.to_csv("docs/results/hp-study/search/trials.csv", index=False)
print(table.to_string(index=False))
PY
