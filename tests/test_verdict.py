"""The study's verdict: simulated studies that break its assumptions (label-biased seeds, heavy
tails, a shared test set), degenerate cases, the paper's 100 runs, the published demo, sweeps.

Rates measured over simulated studies are held to two-sided tolerances of about 2 standard
errors around the rate the rule states."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from seedvar.config import load_config
from seedvar.data.sets import load_evaluation_sets
from seedvar.metrics import bias_free_accuracy
from seedvar.report.wording import HEAVY_TAILS, note, reason_text
from seedvar.results.evidence import from_rates
from seedvar.stats.bounds import ALPHA, SEED_FLOOR, variance_bound
from seedvar.stats.noise import Noise, confusion, label_auc
from seedvar.stats.power import detection_power, minimum_seeds
from seedvar.stats.simulate import (
    BIAS_FREE,
    DESIGN,
    EQUAL_DESIGN,
    REFERENCE,
    TESTED,
    Truth,
    study,
)
from seedvar.stats.sweep import sweep_verdict
from seedvar.stats.verdict import verdict

ROOT = Path(__file__).resolve().parents[1]
PAPER_RUNS = ROOT / "data/offline/reference/mccoy2020_runs.csv"
HANS_ONLY = ["diagnostics.snli=null", "diagnostics.glue_diagnostic=null"]
PER_COLUMN = ALPHA / DESIGN.comparisons  # one-sided level of each bound (Bonferroni)


def _se(rate: float, n: int) -> float:
    return math.sqrt(rate * (1 - rate) / n)


def table_study(
    tested: np.ndarray, reference: np.ndarray, free: np.ndarray | None = None, noise=1e-8
) -> tuple[pd.DataFrame, dict[str, Noise]]:
    """A seeds table given directly (the bias-free column the tested one, unless given) with
    a known evaluation-noise variance for every column."""
    table = pd.DataFrame(
        {REFERENCE: reference, TESTED: tested, BIAS_FREE: tested if free is None else free}
    )
    given = Noise(noise, (noise,) * len(table), "given")
    return table, dict.fromkeys(table.columns, given)


def _outcomes(truth: Truth, studies: int, resamples: int = 100, design=DESIGN) -> dict[str, int]:
    counts: dict[str, int] = {}
    for index in range(studies):
        table, noise, _ = study(truth, index, resamples)
        rule = verdict(table, noise, design).reason.rule
        counts[rule] = counts.get(rule, 0) + 1
    return counts


@pytest.mark.parametrize(
    "truth",
    [
        Truth(examples=400, sensitivity=0.0, criterion_std=1.0),  # the demo: no discrimination
        Truth(examples=400, sensitivity=1.0, criterion_std=1.0),  # the paper's sensitivity
        Truth(examples=400, sensitivity=1.0, criterion_std=1.0, heavy_tails=True),
    ],
    ids=["d 0", "d 1", "d 1, heavy tails"],
)
def test_a_pure_threshold_shift_never_reproduces(truth: Truth):
    """20 studies of 12 seeds on a shared test set that differ only in how readily they
    answer label 1: the raw column spreads in nearly all (label bias), the verdict never says
    reproduces (a rule on the raw column alone would in nearly all). The rates over 200
    studies are benchmarks/verdict_rates.py's (docs/verdict.md: 100 % label bias)."""
    counts = _outcomes(truth, 20)
    assert counts.get("passes", 0) == 0, counts
    assert counts.get("label bias", 0) >= 18, counts


def test_seeds_that_generalize_differently_reproduce():
    """Seeds whose sensitivity varies (std 0.6) and whose criterion does not: 20 seeds
    reproduce in most of 30 studies; the same seeds with their criterion varying as well
    still do (the bias-free column carries the difference). Over 200 studies both pass in
    100 % (benchmarks/verdict_rates.py, docs/verdict.md)."""
    moving = _outcomes(Truth(seeds=20, sensitivity_std=0.6), 30)
    assert moving.get("passes", 0) >= 27, moving
    both = _outcomes(Truth(seeds=20, sensitivity_std=0.6, criterion_std=0.5), 30)
    assert both.get("passes", 0) >= 27, both


def test_noise_alone_on_a_shared_set_never_reproduces_and_can_say_does_not():
    """No seed effect, 40 seeds: evaluation noise passes at most at the stated rate, and each
    study either rules the effect out (every upper bound below the margin) or names the seeds
    that would decide it. 50 studies here; over 200, 86.5 % are ruled out and none passes
    (benchmarks/verdict_rates.py, docs/verdict.md)."""
    counts = _outcomes(Truth(seeds=40), 50)
    assert counts.get("passes", 0) <= 50 * (PER_COLUMN + 2 * _se(PER_COLUMN, 50)), counts
    assert counts.get("ruled out", 0) >= 0.75 * 50, counts
    assert set(counts) <= {"passes", "ruled out", "undecided"}, counts


def test_heavy_tailed_seeds_at_the_margin_pass_at_most_at_the_stated_rate():
    """12 seeds whose tested accuracy has Student-t(3) seed effects with a std exactly at the
    margin (the 1-point floor; the reference is flat): the bound, chi-square and Bonett's
    whichever is more cautious, passes at most PER_COLUMN + 2 SE of 2,000 studies; the
    chi-square bound alone passes far more often (what the rule guards against)."""
    rng = np.random.default_rng(11)
    studies, k = 2000, 12
    draws = 0.5 + 0.01 * rng.standard_t(3, (studies, k)) / math.sqrt(3)
    passed = chi_square_only = 0
    for values in draws:
        table, noise = table_study(values, np.full(k, 0.84))
        passed += verdict(table, noise, DESIGN).reason.rule in ("passes", "few seeds")
        lower = float(values.var(ddof=1)) * (k - 1)
        chi_square_only += math.sqrt(lower / stats.chi2.ppf(1 - PER_COLUMN, k - 1)) > 0.01
    tolerance = PER_COLUMN + 2 * _se(PER_COLUMN, studies)
    assert passed / studies <= tolerance, passed
    assert chi_square_only / studies > 2 * PER_COLUMN, chi_square_only


def test_normal_seeds_at_the_margin_pass_at_the_stated_rate():
    """The same with normal seeds: the rate is PER_COLUMN within 2 SE from above, and the
    more cautious bound costs at most half of it (not an empty test)."""
    rng = np.random.default_rng(12)
    studies, k = 2000, 12
    draws = rng.normal(0.5, 0.01, (studies, k))
    passed = sum(
        verdict(*table_study(values, np.full(k, 0.84)), DESIGN).reason.rule == "passes"
        for values in draws
    )
    rate = passed / studies
    assert PER_COLUMN / 2 - 2 * _se(PER_COLUMN, studies) <= rate
    assert rate <= PER_COLUMN + 2 * _se(PER_COLUMN, studies)


def test_the_bound_is_the_more_cautious_of_chi_square_and_bonett():
    values = np.array([0.50, 0.50, 0.51, 0.49, 0.50, 0.50, 0.50, 0.50, 0.50, 0.62, 0.5, 0.5])
    k = len(values)
    chi_low = values.var(ddof=1) * (k - 1) / stats.chi2.ppf(0.99, k - 1)
    chi_high = values.var(ddof=1) * (k - 1) / stats.chi2.ppf(0.01, k - 1)
    assert variance_bound(values, 0.99) < chi_low  # one outlier: Bonett is the lower
    assert variance_bound(values, 0.01) > chi_high
    few = values[: SEED_FLOOR - 1]
    chi_few = few.var(ddof=1) * (SEED_FLOOR - 2) / stats.chi2.ppf(0.99, SEED_FLOOR - 2)
    assert variance_bound(few, 0.99) == pytest.approx(chi_few)  # below SEED_FLOOR


def test_identical_seeds_have_no_seed_variance_and_do_not_reproduce():
    table, noise, design = study(Truth(seeds=12, examples=300), 0, 100)
    same = table.iloc[[0] * 12].reset_index(drop=True)
    result = verdict(same, noise, design)
    rows = {row.column: row for row in result.columns}
    assert rows[TESTED].observed_std == 0.0 and rows[TESTED].seed_std == 0.0
    assert "exceeds the observed spread" in note(rows[TESTED].note)
    assert result.outcome != "reproduces"


def test_fewer_seeds_than_the_floor_give_no_conclusive_outcome():
    rng = np.random.default_rng(3)
    k = SEED_FLOOR - 1
    table, noise = table_study(rng.normal(0.5, 0.2, k).clip(0, 1), np.full(k, 0.84))
    result = verdict(table, noise, DESIGN)
    assert result.outcome == "inconclusive" and result.reason.rule == "few seeds"
    assert result.reason.numbers["would"] == "reproduces"
    assert reason_text(result.reason).startswith(
        f"inconclusive: the test says 'reproduces', but {k} seeds are fewer than the 5 its "
        "bounds keep their level with; the seed-std lower bound of"
    )


def test_a_reference_not_above_its_majority_class_is_inconclusive():
    """RTE dev: 277 pairs, majority class 52.7 %. A mean of 55 % is within noise of it; 62 %
    is not (one-sided z test with one seed's binomial error)."""
    rng = np.random.default_rng(4)
    k, n = 12, 277
    design = DESIGN.__class__(
        DESIGN.reference, DESIGN.tested, {REFERENCE: 0.527}, DESIGN.bias_free, "AUC"
    )
    for mean, learned in ((0.55, False), (0.62, True)):
        table, noise = table_study(rng.normal(0.5, 0.2, k).clip(0, 1), np.full(k, mean))
        noise[REFERENCE] = Noise(1e-6, (mean * (1 - mean) / n,) * k, "binomial")
        result = verdict(table, noise, design)
        assert (result.reason.rule != "near chance") == learned
    assert result.reason.rule == "passes"
    unlearned = verdict(*table_study(np.full(k, 0.5), np.full(k, 0.55)), design)
    assert unlearned.reason.numbers["chance"] == 0.527 or unlearned.reason.rule != "near chance"


def test_a_diagnostic_at_chance_is_inconclusive():
    """Raw and bias-free columns flat at 0.5 with a sampling error of 2 points per seed: no
    seed is above chance, so the study cannot say the seeds generalize alike."""
    k = 12
    table, noise = table_study(np.full(k, 0.5), np.full(k, 0.84))
    noise[BIAS_FREE] = Noise(1e-6, (0.02**2,) * k, "given")
    result = verdict(table, noise, DESIGN)
    assert result.reason.rule == "diagnostic at chance"
    assert "significantly above chance" in reason_text(result.reason)
    noise[BIAS_FREE] = Noise(1e-6, (0.002**2,) * k, "given")
    above = verdict(table.assign(**{BIAS_FREE: 0.6}), noise, DESIGN)
    assert above.reason.rule != "diagnostic at chance"


def test_one_class_seed_is_inconclusive():
    table, noise, design = study(Truth(seeds=12, examples=200), 1, 50)
    shares = {"mnli_matched": [0.4] * 11 + [0.97]}
    result = verdict(table, noise, design, shares)
    assert result.reason.rule == "one class"
    assert reason_text(result.reason) == (
        "inconclusive: 1 of 12 seeds predict one class on at least 95% of a set "
        "(seed 11 on mnli_matched: 97.0%)"
    )
    with pytest.raises(ValueError, match="'hans' has 3 shares for 12 seeds"):
        verdict(table, noise, design, {"hans": [0.5] * 3})


def test_one_seed_gives_none_with_a_reason():
    table, noise, design = study(Truth(seeds=1, examples=200), 2, 50)
    result = verdict(table, noise, design)
    assert result.outcome == "inconclusive" and result.tests == () and result.margin is None
    assert all(note(row.note) == "one seed: no across-seed variance" for row in result.columns)


def test_power_uses_the_reference_seed_std_and_matches_simulation():
    """The power rule counts the reference's own seed std: a spread reference asks for more
    seeds; at the minimum the analytic power is the simulated one."""
    ref_noise, tested_noise, comparisons = 0.84 * 0.16 / 9815, 0.3 * 0.7 / 5000, 2
    flat = minimum_seeds(0.0, ref_noise, tested_noise, comparisons)
    spread = minimum_seeds(0.004**2, ref_noise, tested_noise, comparisons)
    assert flat is not None and spread is not None and spread > flat
    k = spread
    rng = np.random.default_rng(7)
    studies, passed = 400, 0
    for _ in range(studies):
        reference = rng.normal(0.84, math.sqrt(0.004**2 + ref_noise), k)
        tested = rng.normal(0.3, math.sqrt(0.05**2 + tested_noise), k)
        table, noise = table_study(tested, reference)
        noise[REFERENCE] = Noise(ref_noise, (ref_noise,) * k, "given")
        noise[TESTED] = noise[BIAS_FREE] = Noise(tested_noise, (tested_noise,) * k, "given")
        passed += verdict(table, noise, DESIGN).reason.rule == "passes"
    power = detection_power(k, 0.004**2, ref_noise, tested_noise, comparisons)
    assert passed / studies == pytest.approx(power, abs=2.5 * _se(power, studies) + 0.02)


def _paper_declaration():
    config = load_config(None, ["output_dir=/tmp/unused", *[f for f in HANS_ONLY]], "cpu")
    return config, load_evaluation_sets(config)[0]


def test_paper_runs_reproduce_with_the_bias_control():
    """McCoy et al.'s 100 runs: every heuristic's non-entailed column and its bias-free
    accuracy pass (binomial noise: the rates are all there is)."""
    config, examples = _paper_declaration()
    evidence = from_rates(config, pd.read_csv(PAPER_RUNS), examples)
    result = verdict(evidence.table, evidence.noise, evidence.design)
    assert result.outcome == "reproduces" and result.margin == pytest.approx(0.01)
    numbers = result.reason.numbers
    assert numbers["bounds"]["Lexical (nonent)"] == pytest.approx(0.106, abs=1e-3)
    assert numbers["bias_free"] == {
        "Lexical (nonent) [bias-free]": pytest.approx(0.055, abs=1e-3),
        "Subseq (nonent) [bias-free]": pytest.approx(0.036, abs=1e-3),
        "Constituent (nonent) [bias-free]": pytest.approx(0.030, abs=1e-3),
    }
    free = evidence.table["Lexical (nonent) [bias-free]"]
    assert free.std() == pytest.approx(0.0647, abs=1e-3)  # about 6 points across runs
    assert evidence.design.majority["MNLI dev acc."] == pytest.approx(0.3545, abs=1e-4)


def test_the_published_demo_is_label_bias():
    """The demo's 4 published seeds: HANS non-entailed accuracy ranges 8-92 % while the
    bias-free accuracy stays at 48-58 %: the verdict names label bias."""
    config = load_config(None, ["output_dir=/tmp/unused"], "demo")
    table = pd.read_csv(ROOT / "docs/results/demo/results/seeds.csv")
    evidence = from_rates(config, table, load_evaluation_sets(config)[0])
    result = verdict(evidence.table, evidence.noise, evidence.design)
    assert result.reason.rule == "label bias"
    assert result.reason.numbers["bias_free_lower"] == 0.0


def _sweep_config(rng: np.random.Generator, spread: float, k: int = 12):
    table, noise = table_study(rng.normal(0.5, spread, k).clip(0, 1), np.full(k, 0.84))
    return table, noise


def test_an_inconclusive_configuration_is_not_a_pass():
    rng = np.random.default_rng(5)
    passing = _sweep_config(rng, 0.2)
    few = _sweep_config(rng, 0.0001, k=3)  # too few seeds to say anything
    tables = {"a": passing[0], **{f"b{i}": few[0] for i in range(9)}}
    noise = {"a": passing[1], **{f"b{i}": few[1] for i in range(9)}}
    result = sweep_verdict(tables, noise, DESIGN)
    assert result.outcome == "inconclusive"
    assert reason_text(result.reason).startswith(
        "inconclusive: of 10 configurations that learned the task, "
    )
    every = sweep_verdict(
        {"a": passing[0], "c": passing[0]}, {"a": passing[1], "c": passing[1]}, DESIGN
    )
    assert every.outcome == "reproduces"


def test_sweep_configurations_said_to_reproduce_hold_family_wise():
    """300 sweeps of 10 configurations whose tested std sits at the margin: some
    configuration is named as reproducing in at most alpha + 2 SE of the sweeps."""
    rng = np.random.default_rng(6)
    sweeps, named = 300, 0
    for _ in range(sweeps):
        configs = {f"c{i}": _sweep_config(rng, 0.01) for i in range(10)}
        result = sweep_verdict(
            {n: c[0] for n, c in configs.items()}, {n: c[1] for n, c in configs.items()}, DESIGN
        )
        named += any(v.outcome == "reproduces" for v in result.verdicts.values())
    assert named / sweeps <= ALPHA + 2 * _se(ALPHA, sweeps)


def test_seedvar_verdict_decides_a_published_table_or_names_the_problem(tmp_path, capsys):
    from seedvar.cli import main

    hans_only = [x for f in HANS_ONLY for x in ("--set", f)]
    out = tmp_path / "verdict.json"
    assert (
        main(["verdict", "--profile", "cpu", *hans_only, str(PAPER_RUNS), "--json", str(out)]) == 0
    )
    assert capsys.readouterr().out.startswith(f"100 runs of {PAPER_RUNS}: reproduces: ")
    import json

    record = json.loads(out.read_text())
    assert record["rule"] == "passes" and record["noise_method"]["MNLI dev acc."].startswith(
        "binomial"
    )
    # the heuristic, from the 30 subcases' rates: Lexical's and Constituent's seed main effects
    # stand against the seed x subcase interaction, Subseq's does not
    assert set(record["numbers"]["main_p"]) == {"Lexical (nonent)", "Constituent (nonent)"}
    tests = {test["column"]: test["heuristic"] for test in record["tests"]}
    assert tests["Subseq (nonent)"]["main_p"] == pytest.approx(0.079, abs=0.001)
    assert tests["Constituent (nonent)"]["main_p"] == pytest.approx(0.0017, abs=0.0001)
    assert main(["verdict", "--profile", "cpu", str(PAPER_RUNS)]) == 2  # lacks SNLI, GLUE columns
    assert "the table has no column 'SNLI dev acc.'" in capsys.readouterr().err
    assert main(["verdict", "--profile", "demo", str(tmp_path / "none.csv")]) == 2
    assert (
        capsys.readouterr().err.strip().endswith("no such file; give a CSV table, one row per run")
    )


@pytest.mark.parametrize(
    "truth",
    [
        Truth(examples=400, criterion_std=1.0, signal_std=2.0),
        Truth(examples=400, criterion_std=1.0, signal_std=0.5, evidence="gumbel"),
    ],
    ids=["unequal variances", "unequal variances, Gumbel"],
)
def test_a_threshold_moves_the_equal_variance_measure_not_the_auc(truth: Truth):
    """One seed's evidence, its threshold moved across the range: the AUC stays put, the
    equal-variance bias-free accuracy moves by points. 60 studies of 12 seeds differing only
    in their threshold: decided on the equal-variance measure most say "reproduces" (the
    rule before the AUC); on the AUC none does."""
    rng = np.random.default_rng(0)
    gold = np.repeat([0, 1], 2000)
    own = rng.normal(0, 1, 4000) * np.where(gold == 1, truth.signal_std, 1.0)
    evidence = gold - 0.5 + rng.normal(0, 0.7, 4000) + own
    scores = np.stack([-evidence, evidence], axis=-1)
    equal = [
        float(bias_free_accuracy(confusion(gold, (evidence > c).astype(int)[None], 2))[0])
        for c in (-1.0, 0.0, 1.0)
    ]
    aucs = {float(label_auc(scores + c, gold, np.ones((1, 4000)))[0]) for c in (-1.0, 0.0, 1.0)}
    assert len(aucs) == 1 and max(equal) - min(equal) > 0.03, (aucs, equal)
    old = _outcomes(truth, 60, resamples=50, design=EQUAL_DESIGN)
    new = _outcomes(truth, 60, resamples=50)
    assert old.get("passes", 0) >= 30, old
    assert new.get("passes", 0) == 0 and new.get("label bias", 0) >= 55, new


def _paired_tables(rng, k: int, std: float, raw_noise: float, free_noise: float):
    """A raw column and its counterpart with the same true seed std (one seed effect, no
    label bias), each with its own evaluation noise; a flat reference (margin: the floor)."""
    effect = rng.normal(0, std, k)
    raw = 0.5 + effect + rng.normal(0, raw_noise, k)
    free = 0.7 + effect + rng.normal(0, free_noise, k)
    table, noise = table_study(raw, np.full(k, 0.84), free)
    noise[TESTED] = Noise(raw_noise**2, (raw_noise**2,) * k, "given")
    noise[BIAS_FREE] = Noise(free_noise**2, (free_noise**2,) * k, "given")
    return table, noise


@pytest.mark.parametrize("k, std", [(12, 0.015), (20, 0.02)])
def test_equal_raw_and_bias_free_spreads_are_not_called_label_bias(k: int, std: float):
    """500 studies whose raw column and counterpart share one seed effect (1.5-2 points), the
    counterpart noisier (0.8 points against 0.3): the old rule named label bias whenever the
    raw column passed and the counterpart did not (13-40 %); the paired test at most alpha."""
    rng = np.random.default_rng(21)
    rules = [verdict(*_paired_tables(rng, k, std, 0.003, 0.008), DESIGN) for _ in range(500)]
    raw_only = sum(r.reason.rule in ("label bias", "not separated") for r in rules)
    named = sum(r.reason.rule == "label bias" for r in rules)
    assert raw_only >= 50  # where the old rule said label bias
    assert named / 500 <= ALPHA + 2 * _se(ALPHA, 500), named


def test_a_real_effect_of_1_5_points_at_12_seeds_is_not_ruled_out():
    """500 studies of 12 seeds with a seed std of 1.5 points in both columns, above the
    1-point margin: the old rule said "does not reproduce" in most; the equivalence bound
    rules it out at most at its per-column level."""
    rng = np.random.default_rng(22)
    rules = [verdict(*_paired_tables(rng, 12, 0.015, 0.003, 0.003), DESIGN) for _ in range(500)]
    ruled_out = sum(r.reason.rule == "ruled out" for r in rules)
    assert ruled_out / 500 <= PER_COLUMN + 2 * _se(PER_COLUMN, 500), ruled_out
    undecided = next(r for r in rules if r.reason.rule == "undecided")
    assert undecided.reason.numbers["rule_out_seeds"] is None  # 1.5 points: never below 1
    assert "no number up to 200 would rule out every column" in reason_text(undecided.reason)


def test_power_is_monotone_in_seeds_and_zero_below_the_floor():
    """The cpu study's design (MNLI-m noise 0.22 points, tested 0.74, 9 comparisons): the
    power never falls with a seed more from 4 to 40 (it fell from 0.87 at 9 seeds to 0.64 at
    10), is 0 below the floor, and the power rule's seeds are the first to reach 80 %."""
    design = (0.0, 0.0022**2, 0.0074**2, 9)
    power = [detection_power(k, *design) for k in range(4, 41)]
    assert all(b >= a for a, b in zip(power, power[1:], strict=False)), power
    assert power[: SEED_FLOOR - 4] == [0.0] * (SEED_FLOOR - 4)
    needed = minimum_seeds(*design)
    assert needed is not None and needed >= SEED_FLOOR
    assert power[needed - 4] >= 0.8 > power[needed - 5]


@pytest.mark.parametrize("kind", ["t3", "lognormal"])
def test_the_floor_is_where_the_combined_bound_keeps_its_level(kind: str):
    """20,000 samples of heavy-tailed seeds with a seed std of exactly 1: at 4 seeds the
    chi-square bound (all there is) exceeds 1 far more often than the nominal 1.25 %; from
    the floor (5) on, the combined chi-square/Bonett bound does not."""
    rng = np.random.default_rng(23)
    nominal = 0.0125

    def draws(k: int) -> np.ndarray:
        if kind == "t3":
            return rng.standard_t(3, (20000, k)) / math.sqrt(3)
        return rng.lognormal(0, 1, (20000, k)) / math.sqrt((math.e - 1) * math.e)

    below = float(np.mean(variance_bound(draws(SEED_FLOOR - 1), 1 - nominal) > 1))
    assert below > 2 * nominal, below
    for k in (SEED_FLOOR, SEED_FLOOR + 1, 8, 12, 20):
        rate = float(np.mean(variance_bound(draws(k), 1 - nominal) > 1))
        assert rate <= nominal + 2 * _se(nominal, 20000), (k, rate)


@pytest.mark.parametrize("kind, low, high", [("t3", 0.02, 0.17), ("lognormal", 0.12, 0.225)])
def test_the_upper_bound_is_anti_conservative_for_heavy_tails(kind: str, low: float, high: float):
    """The measured weakness of "ruled out", as the verdict's reason and docs/verdict.md state
    it: 20,000 samples of heavy-tailed seeds with a seed std of exactly 1 at 6-100 seeds have
    their combined upper bound (nominal 1.25 %) below 1 in 2-17 % (t3) and 12-23 %
    (lognormal) of samples, within 1 point; normal seeds keep the level."""
    rng = np.random.default_rng(24)
    nominal = 0.0125
    rates = []
    for k in (6, 8, 12, 20, 40, 100):
        if kind == "t3":
            x = rng.standard_t(3, (20000, k)) / math.sqrt(3)
        else:
            x = rng.lognormal(0, 1, (20000, k)) / math.sqrt((math.e - 1) * math.e)
        rates.append(float(np.mean(variance_bound(x, nominal) < 1)))
        normal = float(np.mean(variance_bound(rng.standard_normal((20000, k)), nominal) < 1))
        assert normal <= nominal + 2 * _se(nominal, 20000), (k, normal)
    assert min(rates) == pytest.approx(low, abs=0.01), rates
    assert max(rates) == pytest.approx(high, abs=0.01), rates
    assert HEAVY_TAILS.endswith("2-17 % and 12-23 % of simulated studies at 6-100 seeds")
    table, noise = table_study(np.full(40, 0.5), np.full(40, 0.84))
    noise[BIAS_FREE] = Noise(1e-6, (0.002**2,) * 40, "given")
    ruled_out = verdict(table.assign(**{BIAS_FREE: 0.6}), noise, DESIGN)
    assert ruled_out.reason.rule == "ruled out"
    assert reason_text(ruled_out.reason).endswith(
        f"if their seed effects are not heavy-tailed ({HEAVY_TAILS})"
    )
