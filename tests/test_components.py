"""Variance components of factorial seed designs, on simulated studies with known components."""

from __future__ import annotations

import numpy as np
import pytest

from seedvar.study.components import COMPONENTS, components, mean_squares

N_EXAMPLES = 1000


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
