#!/usr/bin/env bash
# Re-issue every published verdict under the current rules, from the committed seeds (their
# per-example predictions) or, where those were not kept, from the committed seeds tables.
# Writes docs/results/reissued-2026-12/<study>.json (verdict.json as `seedvar aggregate` or
# `seedvar verdict --json` writes it) and, from predictions, <study>.seeds.csv.
# Run from the repository root in the environment (. .venv/bin/activate): about 15 minutes on
# 2 cores. Only the studies named as arguments, if any (e.g. inoculation-3000 paper).
set -euo pipefail
R=docs/results
OUT=$R/reissued-2026-12
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$OUT"
wanted() { [ $# -eq 0 ] || [[ " $* " == *" $STUDY "* ]]; }
seeds() { python -c "print(list(range($1)))"; }

# aggregate STUDY PROFILE N FOLDER... -- SETTINGS...: the study's N seeds from seed folders
aggregate() {
  local study=$1 profile=$2 n=$3 runs=$WORK/$1/runs
  shift 3
  mkdir -p "$runs"
  while [ "$1" != "--" ]; do cp -r "$1" "$runs/"; shift; done
  shift
  seedvar aggregate --profile "$profile" --set "seeds=$(seeds "$n")" --set "output_dir=$runs" \
    "$@" --results "$WORK/$study/results"
  cp "$WORK/$study/results/verdict.json" "$OUT/$study.json"
  cp "$WORK/$study/results/seeds.csv" "$OUT/$study.seeds.csv"
}

I=$R/inoculation
CONTROL=$OUT/inoculation-control.seeds.csv
with_control() { if [ -f "$CONTROL" ]; then echo "--set plan.control=$CONTROL"; fi; }

STUDY=inoculation-control
if wanted "$@" && [ -d "$I/control/seeds" ]; then
  aggregate $STUDY inoculation 12 "$I"/control/seeds/seed-* -- --set data.augment_examples=0 \
    --set 'plan.held_in=[]'  # no rule shown: its plan, as its seeds recorded it
fi
STUDY=inoculation-3000
if wanted "$@"; then
  # shellcheck disable=SC2046
  aggregate $STUDY inoculation 16 "$I"/lexical-3000/seeds/seed-* -- $(with_control)
fi
STUDY=inoculation-1000
if wanted "$@"; then
  # shellcheck disable=SC2046
  aggregate $STUDY inoculation 24 "$I"/pilot/lexical-1000/seeds/seed-* \
    "$I"/sweep/lexical-1000/seeds/seed-* -- --set data.augment_examples=1000 \
    $(with_control)
fi
STUDY=inoculation-300
if wanted "$@"; then
  # shellcheck disable=SC2046
  aggregate $STUDY inoculation 24 "$I"/pilot/lexical-300/seeds/seed-* \
    "$I"/lexical-300/seeds/seed-* "$I"/sweep/lexical-300/seeds/seed-* -- \
    --set data.augment_examples=300 $(with_control)
fi
STUDY=cpu-rerun
if wanted "$@"; then
  aggregate $STUDY cpu 12 "$R"/cpu-study-2026-12/seeds/seed-* --
fi
# From seeds tables of rates (no per-example scores kept): binomial noise, the equal-variance
# counterpart, the main effect over the subcases' rates.
STUDY=demo
if wanted "$@"; then
  seedvar verdict --profile demo "$R/demo/results/seeds.csv" --json "$OUT/$STUDY.json"
fi
STUDY=rte-rerun
if wanted "$@"; then
  seedvar verdict --profile rte --set diagnostics.glue_diagnostic=null \
    "$R/rte-2026-12/results/seeds.csv" --json "$OUT/$STUDY.json"
fi
STUDY=paper
if wanted "$@"; then
  seedvar verdict --profile cpu --set diagnostics.snli=null --set diagnostics.glue_diagnostic=null \
    data/offline/reference/mccoy2020_runs.csv --json "$OUT/$STUDY.json"
fi
