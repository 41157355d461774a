"""The growth-exponent fit and its t quantile, without Spark."""

from __future__ import annotations

import math
import random

import pytest

from zkconsumer.lab.analysis.fit import fit_power_law, t_cdf_two_sided, t_quantile

# two-sided 95% critical values of Student's t (any statistics table)
T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 8: 2.306, 10: 2.228, 15: 2.131, 20: 2.086,
       30: 2.042, 60: 2.000, 120: 1.980}


@pytest.mark.parametrize(("df", "t"), sorted(T95.items()))
def test_t_quantile_matches_the_table(df: int, t: float) -> None:
    assert t_quantile(0.95, df) == pytest.approx(t, abs=1e-3)
    assert t_cdf_two_sided(t_quantile(0.95, df), df) == pytest.approx(0.95, abs=1e-9)


def test_a_quadratic_and_a_linear_series() -> None:
    ns = [1, 2, 4, 8, 16, 32]
    quadratic = fit_power_law(ns, [3 * n * n for n in ns])
    assert quadratic is not None
    assert quadratic.exponent == pytest.approx(2.0) and quadratic.coefficient == pytest.approx(3.0)
    assert quadratic.r2 == pytest.approx(1.0)
    linear = fit_power_law(ns, [2 * n + 0.0 for n in ns])
    assert linear is not None and linear.exponent == pytest.approx(1.0)


def test_the_interval_covers_the_exponent_of_noisy_data() -> None:
    rng = random.Random(7)
    ns = [1, 2, 4, 8, 16, 32, 64]
    fit = fit_power_law(ns, [5 * n**2 * math.exp(rng.gauss(0, 0.1)) for n in ns])
    assert fit is not None and fit.ci95_low is not None and fit.ci95_high is not None
    assert fit.ci95_low < 2.0 < fit.ci95_high
    assert fit.exponent == pytest.approx(2.0, abs=0.1)
    assert fit.ci95_high - fit.ci95_low == pytest.approx(2 * t_quantile(0.95, len(ns) - 2) * fit.exponent_se)


def test_no_fit_without_two_group_sizes() -> None:
    assert fit_power_law([4, 4, 4], [10, 11, 12]) is None
    assert fit_power_law([0, 4], [10, 0]) is None  # no logarithm of 0
    two = fit_power_law([2, 4], [4, 16])
    assert two is not None and two.exponent == pytest.approx(2.0) and two.ci95_low is None  # no residual df
