"""The verdict's error rates on simulated studies whose truth is known, written into
docs/verdict.md (between its `rates` markers): `python benchmarks/verdict_rates.py [STUDIES]`.

Each kind of study (seedvar.study.simulate: signal detection on a shared test set) is
simulated STUDIES times (default 1,000) through the same noise estimate and verdict a study
gets; the table counts the rule that decided. Takes about 10 minutes on 2 cores.
"""

from __future__ import annotations

import platform
import re
import sys
import time
from collections import Counter
from pathlib import Path

from seedvar.study.simulate import Truth, study
from seedvar.study.verdict import verdict

DOC = Path(__file__).resolve().parents[1] / "docs" / "verdict.md"
KINDS = {
    "no seed effect, 12 seeds": Truth(),
    "no seed effect, 40 seeds": Truth(seeds=40),
    "threshold only (criterion std 1), no discrimination (d 0)": Truth(
        sensitivity=0.0, criterion_std=1.0
    ),
    "threshold only (criterion std 1), d 1 (the paper's runs)": Truth(criterion_std=1.0),
    "threshold only, d 1, heavy-tailed (t3) seeds": Truth(criterion_std=1.0, heavy_tails=True),
    "threshold only, d 1, unequal variances (label 1's evidence std 2)": Truth(
        criterion_std=1.0, signal_std=2.0
    ),
    "threshold only, d 1, Gumbel evidence, label 1's std 0.5": Truth(
        criterion_std=1.0, signal_std=0.5, evidence="gumbel"
    ),
    "generalization (d std 0.6), 12 seeds": Truth(sensitivity_std=0.6),
    "generalization (d std 0.6), 20 seeds": Truth(seeds=20, sensitivity_std=0.6),
    "generalization and threshold (d std 0.6, criterion std 0.5), 20 seeds": Truth(
        seeds=20, sensitivity_std=0.6, criterion_std=0.5
    ),
    "generalization, heavy-tailed, 20 seeds": Truth(
        seeds=20, sensitivity_std=0.6, heavy_tails=True
    ),
    "generalization (d std 0.6), 4 seeds": Truth(seeds=4, sensitivity_std=0.6),
}
RULES = [
    "passes",
    "label bias",
    "not separated",
    "diagnostic at chance",
    "few seeds",
    "undecided",
    "ruled out",
]


def rates(studies: int) -> str:
    """The table, one row per kind of study, in markdown."""
    header = "| study | " + " | ".join(RULES) + " |"
    rows = [header, "|" + "---|" * (len(RULES) + 1)]
    for name, truth in KINDS.items():
        counts: Counter[str] = Counter()
        for index in range(studies):
            table, noise, design = study(truth, index)
            counts[verdict(table, noise, design).reason.rule] += 1
        rows.append(f"| {name} | " + " | ".join(str(counts[r]) for r in RULES) + " |")
        print(rows[-1], flush=True)
    return "\n".join(rows)


def cpu_model() -> str:
    """The CPU's model name, as /proc/cpuinfo gives it (else the machine type)."""
    cpuinfo = Path("/proc/cpuinfo")
    lines = cpuinfo.read_text().splitlines() if cpuinfo.exists() else []
    names = [line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")]
    return names[0] if names else platform.machine()


def main() -> None:
    studies = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    started = time.time()
    table = rates(studies)
    note = (
        f"{studies:,} simulated studies per row, {Truth().examples:,} examples per label; "
        f"`python benchmarks/verdict_rates.py {studies}`, {time.time() - started:.0f} s on "
        f"{cpu_model()} (Python {platform.python_version()})."
    )
    text = DOC.read_text()
    block = f"<!-- rates:start -->\n{table}\n\n{note}\n<!-- rates:end -->"
    DOC.write_text(re.sub(r"<!-- rates:start -->.*<!-- rates:end -->", block, text, flags=re.S))
    print(note)


if __name__ == "__main__":
    main()
