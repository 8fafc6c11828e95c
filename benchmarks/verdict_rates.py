"""The verdict's error rates on simulated studies whose truth is known, written into
docs/verdict.md (between its `rates` and `bounds` markers):
`python benchmarks/verdict_rates.py [STUDIES]` (`--smoke DIR`: one study a kind, few samples,
into a copy of docs/verdict.md in DIR).

Each kind of study (seedvar.stats.simulate: signal detection on a shared test set) is
simulated STUDIES times (default 200) through the same noise estimate (a paired bootstrap of
RESAMPLES resamples, against a study's 1,000) and verdict a study gets; the table gives the
share of studies each rule decided, with its Monte-Carlo standard error. A second table
measures the seed-std bounds themselves: how often the one-sided bound at the per-column
level of the paper's design (1.25 %) falls on the wrong side of a true seed std, for normal,
Student-t(3) and lognormal seeds, by number of seeds (BOUND_SAMPLES samples each). Takes
about 6 minutes on one core (329 s on an Intel Xeon).
"""

from __future__ import annotations

import argparse
import platform
import re
import shutil
import time
from collections import Counter
from pathlib import Path

import numpy as np
import smoke

from seedvar.stats.bounds import variance_bound
from seedvar.stats.simulate import Truth, study
from seedvar.stats.verdict import verdict

RESAMPLES = 100
BOUND_SAMPLES = 20_000
NOMINAL = 0.0125  # alpha 0.05 over the 4 bounds of the paper's design (MNLI-m, 3 heuristics)
BOUND_SEEDS = (4, 5, 6, 8, 12, 20, 40, 100)

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


def _rate(count: int, studies: int) -> str:
    """A share in % with its Monte-Carlo standard error (binomial; for 0 or all, the
    rule-of-three 95 % bound instead)."""
    if count == 0:
        return f"0 (< {300 / studies:.1f})"
    if count == studies:
        return f"100 (> {100 - 300 / studies:.1f})"
    rate = count / studies
    return f"{100 * rate:.1f} ± {100 * (rate * (1 - rate) / studies) ** 0.5:.1f}"


def rates(studies: int, resamples: int) -> str:
    """The table, one row per kind of study, in markdown: % of studies per deciding rule."""
    header = "| study | " + " | ".join(RULES) + " |"
    rows = [header, "|" + "---|" * (len(RULES) + 1)]
    for name, truth in KINDS.items():
        counts: Counter[str] = Counter()
        for index in range(studies):
            table, noise, design = study(truth, index, resamples)
            counts[verdict(table, noise, design).reason.rule] += 1
        missing = set(counts) - set(RULES)
        assert not missing, missing  # every deciding rule has its column
        cells = [_rate(counts[r], studies) for r in RULES]
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
        print(rows[-1], flush=True)
    return "\n".join(rows)


def _draws(rng: np.random.Generator, kind: str, k: int, samples: int) -> np.ndarray:
    """`samples` samples of k seeds with std 1."""
    if kind == "t3":
        return rng.standard_t(3, (samples, k)) / np.sqrt(3.0)
    if kind == "lognormal":
        return rng.lognormal(0.0, 1.0, (samples, k)) / np.sqrt((np.e - 1) * np.e)
    return rng.standard_normal((samples, k))


def bounds(samples: int) -> str:
    """% of `samples` samples (seed std exactly 1, no evaluation noise) whose one-sided lower
    bound is above 1 (a false "passes" at the margin) and whose upper bound is below 1 (a false
    "ruled out" at the null margin), nominal NOMINAL each; and the upper bound's rate at a
    true seed std 1.5 times the null margin."""
    rng = np.random.default_rng(0)
    kinds = ("normal", "t3", "lognormal")
    header = "| seeds | " + " | ".join(
        f"{kind}: lower > std | {kind}: upper < std | {kind}: upper < std / 1.5" for kind in kinds
    )
    rows = [header + " |", "|" + "---|" * (3 * len(kinds) + 1)]
    for k in BOUND_SEEDS:
        cells = []
        for kind in kinds:
            x = _draws(rng, kind, k, samples)
            lower = np.mean(variance_bound(x, 1 - NOMINAL) > 1)
            upper = np.mean(variance_bound(x, NOMINAL) < 1)
            wider = np.mean(variance_bound(1.5 * x, NOMINAL) < 1)
            cells += [f"{100 * v:.2f}" for v in (lower, upper, wider)]
        rows.append(f"| {k} | " + " | ".join(cells) + " |")
        print(rows[-1], flush=True)
    return "\n".join(rows)


def cpu_model() -> str:
    """The CPU's model name, as /proc/cpuinfo gives it (else the machine type)."""
    cpuinfo = Path("/proc/cpuinfo")
    lines = cpuinfo.read_text().splitlines() if cpuinfo.exists() else []
    names = [line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")]
    return names[0] if names else platform.machine()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("studies", type=int, nargs="?", default=200, help="studies per kind")
    smoke.add_option(parser)
    args = parser.parse_args()
    studies, resamples, samples, doc = args.studies, RESAMPLES, BOUND_SAMPLES, DOC
    if args.smoke:
        studies, resamples, samples, doc = 1, 20, 500, args.smoke / DOC.name
        shutil.copy(DOC, doc)
    started = time.time()
    levels = bounds(samples)
    bound_note = (
        f"{samples:,} samples per cell, nominal {100 * NOMINAL:g} % each; "
        f"{time.time() - started:.0f} s."
    )
    print(bound_note, flush=True)
    started = time.time()
    table = rates(studies, resamples)
    note = (
        f"% of {studies:,} simulated studies per row (± one Monte-Carlo standard error; for "
        f"0 %, the 95 % upper bound), {Truth().examples:,} examples per label, "
        f"{resamples} bootstrap resamples; `python benchmarks/verdict_rates.py {studies}`, "
        f"{time.time() - started:.0f} s on {cpu_model()} (Python "
        f"{platform.python_version()})."
    )
    text = doc.read_text()
    for marker, body in (("rates", f"{table}\n\n{note}"), ("bounds", f"{levels}\n\n{bound_note}")):
        block = f"<!-- {marker}:start -->\n{body}\n<!-- {marker}:end -->"
        pattern = rf"<!-- {marker}:start -->.*<!-- {marker}:end -->"
        found = re.search(pattern, text, flags=re.S)
        if found:
            text = text[: found.start()] + block + text[found.end() :]
        else:
            text += f"\n{block}\n"
    doc.write_text(text)
    print(note)


if __name__ == "__main__":
    main()
