"""Variance components of factorial seed designs, on simulated studies with known components."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from seedvar.config import load_config
from seedvar.report.wording import components_text, note
from seedvar.results.past_the_paper import (
    COMPONENT_COLUMNS,
    JOINT,
    component_table,
    diagonal_seeds,
)
from seedvar.results.record import noted
from seedvar.stats.components import (
    ALPHA,
    COMPONENTS,
    DRAWS,
    compare_sources,
    components,
    holm,
    mean_squares,
    noise_fit_p,
)

N_EXAMPLES = 1000
STUDIES = 1000  # simulated studies per rate; binomial SE of a rate near ALPHA: 0.7 points
FEW_DRAWS = 2000  # pivot draws per simulated study (the p-value's own error: < 0.5 points)
SE = float(np.sqrt(ALPHA * (1 - ALPHA) / STUDIES))


def _simulated(rng: np.random.Generator, shape: tuple[int, int], stds: tuple[float, ...]):
    """An init x data-order table of accuracies on N_EXAMPLES examples, binomial noise
    included, and that noise's variance as the aggregate estimates it."""
    init = rng.normal(0, stds[0], shape[0])[:, None]
    order = rng.normal(0, stds[1], shape[1])[None, :]
    interaction = rng.normal(0, stds[2], shape)
    truth = np.clip(0.7 + init + order + interaction, 0, 1)
    accuracy = rng.binomial(N_EXAMPLES, truth) / N_EXAMPLES
    return accuracy, float(np.mean(accuracy * (1 - accuracy) / N_EXAMPLES))


def test_mean_squares_by_hand():
    cells = np.array([[0.1, 0.2, 0.6], [0.3, 0.4, 0.5]])
    squares = mean_squares(cells)
    # row means 0.3, 0.4; column means 0.2, 0.3, 0.55; grand mean 0.35
    assert squares.init == pytest.approx(3 * (0.05**2 + 0.05**2) / 1)
    assert squares.order == pytest.approx(2 * (0.15**2 + 0.05**2 + 0.2**2) / 2)
    residuals = cells - np.array([[0.3], [0.4]]) - np.array([0.2, 0.3, 0.55]) + 0.35
    assert squares.residual == pytest.approx((residuals**2).sum() / 2)
    assert (squares.df_init, squares.df_order, squares.df_residual) == (1, 2, 2)
    with pytest.raises(ValueError, match="at least 2 init seeds"):
        mean_squares(np.ones((1, 4)))


@pytest.mark.parametrize(
    "shape, stds",
    [((3, 3), (0.03, 0.02, 0.01)), ((4, 4), (0.0, 0.03, 0.0)), ((4, 4), (0.05, 0.01, 0.02))],
)
def test_known_components_are_covered_at_the_stated_rate(shape, stds):
    """300 simulated studies: each component's 95 % interval holds its true std in 90-99 %
    of them (0.95 is 4 binomial standard errors from either end); a component that is truly 0
    sits on the boundary, where the interval reaches 0 more often: at least 90 %."""
    rng = np.random.default_rng(7)
    covered = np.zeros(3)
    for study in range(300):
        accuracy, noise = _simulated(rng, shape, stds)
        found = components("x", accuracy, noise, seed=study)
        assert [c.source for c in found] == list(COMPONENTS)
        covered += [c.std_low <= true <= c.std_high for c, true in zip(found, stds, strict=True)]
    rate = covered / 300
    assert np.all(rate >= 0.90), rate
    assert np.all((rate <= 0.99) | (np.array(stds) == 0)), rate


def test_a_large_component_is_found_and_named():
    """Init varies 8 points, data order not at all: the init interval excludes 0 and lies
    above the data-order one, and init holds most of the variance."""
    rng = np.random.default_rng(3)
    accuracy, noise = _simulated(rng, (4, 4), (0.08, 0.0, 0.0))
    init, order, interaction = components("x", accuracy, noise)
    assert init.std_low > 0.02 and init.std_low > order.std_high
    assert init.share is not None and init.share > 0.8
    assert interaction.std == pytest.approx(0.0, abs=0.01)


def test_noise_alone_gives_components_near_zero():
    rng = np.random.default_rng(5)
    accuracy, noise = _simulated(rng, (4, 4), (0.0, 0.0, 0.0))
    found = components("x", accuracy, noise)
    assert all(c.std_low == 0.0 for c in found)
    assert all(c.std < 0.02 for c in found)


def _decisions(shape, stds, seed: int, columns: int = 1) -> np.ndarray:
    """STUDIES simulated studies of `columns` independent columns each: per study and column,
    +1 "init varies more", -1 "data order varies more", 0 none, Holm corrected per study."""
    rng = np.random.default_rng(seed)
    found = np.zeros((STUDIES, columns))
    for study in range(STUDIES):
        tests = []
        for column in range(columns):
            accuracy, _ = _simulated(rng, shape, stds)
            tests.append(
                compare_sources("x", accuracy, seed=study * columns + column, draws=FEW_DRAWS)
            )
        _, rejected = holm([t.p_value for t in tests])
        found[study] = [np.sign(t.difference_var) * r for t, r in zip(tests, rejected, strict=True)]
    return found


def test_init_is_found_to_vary_more_and_data_order_never_is():
    """Init std 6 points, data order 0 (asymmetric, so swapping rows and columns anywhere
    would turn the power into false "data order varies more"): in 1000 simulated 4 x 4
    studies, "data order varies more" at most ALPHA + 2 SE of them, "init varies more" in
    most."""
    found = _decisions((4, 4), (0.06, 0.0, 0.01), seed=21)[:, 0]
    power, wrong = np.mean(found == 1), np.mean(found == -1)
    assert wrong <= ALPHA + 2 * SE, wrong
    assert power >= 0.7, power


@pytest.mark.parametrize("shape", [(3, 3), (4, 4), (3, 4)])
def test_equal_sources_are_told_apart_at_alpha(shape):
    """Init and data order both 3 points (interaction 1, binomial noise): the test rejects
    in ALPHA ± 2 SE of 1000 simulated studies, in square designs and a 3 x 4 one."""
    rate = np.mean(_decisions(shape, (0.03, 0.03, 0.01), seed=22)[:, 0] != 0)
    assert abs(rate - ALPHA) <= 2 * SE, rate


def test_holm_keeps_the_family_wise_rate_over_three_columns():
    """Three columns, all with equal sources: some column is declared different in at most
    ALPHA + 2 SE of 1000 simulated 3 x 3 studies."""
    found = _decisions((3, 3), (0.03, 0.03, 0.0), seed=23, columns=3)
    rate = np.mean((found != 0).any(axis=1))
    assert rate <= ALPHA + 2 * SE, rate


def test_square_design_p_is_the_two_sided_f_test():
    """In an n x n design the generalized p-value is the classical F test of the init against
    the data-order mean square (to the pivot draws' error)."""
    rng = np.random.default_rng(4)
    for _ in range(5):
        accuracy, _ = _simulated(rng, (4, 4), (0.03, 0.02, 0.01))
        squares = mean_squares(accuracy)
        below = stats.f.cdf(squares.init / squares.order, 3, 3)
        found = compare_sources("x", accuracy)
        assert found.p_value == pytest.approx(2 * min(below, 1 - below), abs=0.01)
        assert found.difference_var == pytest.approx((squares.init - squares.order) / 4)


def test_holm_by_hand():
    adjusted, rejected = holm([0.01, 0.04, 0.03], 0.05)
    assert adjusted == pytest.approx([0.03, 0.06, 0.06])
    assert rejected == [True, False, False]
    assert holm([0.2, 0.001], 0.05) == ([0.2, 0.002], [False, True])
    assert holm([]) == ([], [])


def test_noise_fit_p_is_uniform_under_the_noise_model():
    """Normal noise of known variance, no interaction: p < ALPHA in ALPHA ± 2 SE of 1000
    simulated 4 x 4 studies."""
    rng = np.random.default_rng(24)
    noise_std = 0.015
    fits = [
        noise_fit_p(
            mean_squares(rng.normal(0, 0.03, (4, 1)) + rng.normal(0, noise_std, (4, 4))),
            noise_std**2,
        )
        for _ in range(STUDIES)
    ]
    rate = np.mean(np.array(fits) < ALPHA)
    assert abs(rate - ALPHA) <= 2 * SE, rate


def test_noise_above_the_residual_is_said_not_silently_zero():
    """A nearly additive table (residual std 0.2 points) under an evaluation noise of 1.5
    points: the interaction is 0 with a note that gives both numbers and the rejected fit."""
    rng = np.random.default_rng(8)
    cells = (
        0.7
        + rng.normal(0, 0.03, (4, 1))
        + rng.normal(0, 0.03, (1, 4))
        + rng.normal(0, 0.002, (4, 4))
    )
    init, order, interaction = components("x", cells, 0.015**2)
    residual = np.sqrt(mean_squares(cells).residual)
    assert interaction.std == 0.0 and interaction.std_low == 0.0
    assert interaction.note is not None
    assert note(interaction.note).startswith(
        f"evaluation noise 1.5 points exceeds the residual {100 * residual:.1f} points: "
        "the interaction is not identified; a residual this small under that noise has p = "
    )
    assert "the data reject the noise model" in note(interaction.note)
    assert init.note is None and order.note is None
    below = components("x", cells, 0.0001**2)[2]
    assert below.note is None and below.std > 0


def test_identical_cells_give_zero_components_and_the_note():
    cells = np.full((3, 3), 0.62)
    found = components("x", cells, 0.01**2)
    assert [(c.std, c.std_low, c.std_high, c.share) for c in found] == [(0.0, 0.0, 0.0, None)] * 3
    assert found[2].note is not None and "0.0 points: the interaction is not identified" in (
        note(found[2].note)
    )
    assert compare_sources("x", cells).p_value == 1.0


def _three_by_four():
    """A 3 x 4 factorial config and an accuracy for each of its init seeds."""
    config = load_config(
        None,
        [
            f"seeds={list(range(12))}",
            "factorial.init_seeds=[10, 11, 12]",
            "factorial.data_seeds=[20, 21, 22, 23]",
        ],
    )
    return config, {10: 0.6, 11: 0.7, 12: 0.8}


def test_component_table_puts_init_seeds_on_rows():
    """A 3 x 4 design whose accuracy depends only on the init seed, set through the config's
    own job -> (init, data) mapping: init 10 points, data order 0, p at its floor."""
    config, by_init = _three_by_four()
    table = pd.DataFrame(
        {
            "seed": list(range(12))[::-1],  # not in job order
            "x": [by_init[config.with_seed(k).train.init_seed] for k in range(12)][::-1],
        }
    )
    found = component_table(config, table, ["x"], {"x": 0.005**2})
    assert list(found.columns) == COMPONENT_COLUMNS
    found = found.set_index("source")
    assert found.loc["init", "std"] == pytest.approx(0.1)
    assert found.loc["data order", "std"] == 0.0 and found.loc["interaction", "std"] == 0.0
    assert note(found.loc["interaction", "note"]).startswith("evaluation noise 0.5 points exceeds")
    assert found.loc["init", "init_vs_order_p"] == 1 / DRAWS
    assert found.loc["init", "init_minus_order_var"] == pytest.approx(0.01)
    assert diagonal_seeds(config) == [0, 5, 10]


def test_component_table_of_joint_seeds_carries_the_note():
    config = load_config(None, ["seeds=[0, 1, 2, 3]"])
    table = pd.DataFrame({"seed": [0, 1, 2, 3], "x": [0.5, 0.5, 0.5, 0.5]})
    found = component_table(config, table, ["x"], {"x": 0.01**2})
    assert list(found.columns) == COMPONENT_COLUMNS and found["source"].tolist() == [JOINT]
    assert "exceeds the observed spread" in note(found["note"].item())


def test_components_text_names_the_larger_source_after_holm():
    """Two headline columns in a 3 x 4 design: one varies with the init seed only, one not at
    all; the first is told apart (Holm over both), the second not, its interaction noted."""
    config, by_init = _three_by_four()
    table = pd.DataFrame(
        {
            "seed": range(12),
            "a": [by_init[config.with_seed(k).train.init_seed] for k in range(12)],
            "b": [0.5] * 12,
        }
    )
    found = noted(component_table(config, table, ["a", "b"], {"a": 1e-4, "b": 1e-4}))
    text = components_text(found, ["a", "b"])
    assert "Holm corrected over 2 columns at family-wise 0.05" in text
    assert "a: init 10.0% [" in text
    assert f"init varies more (Holm-adjusted p = {2 / DRAWS:.2g})" in text
    assert "b: init 0.0% [0.0%, 0.0%]" in text
    assert "the interaction is not identified" in text
    assert text.endswith("no difference shown (Holm-adjusted p = 1).")
