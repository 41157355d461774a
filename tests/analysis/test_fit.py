"""The herd's polynomial fits and the closed forms they are drawn against, without Spark."""

from __future__ import annotations

import random

import pytest

from zkconsumer.lab.analysis.closed_forms import closed_form
from zkconsumer.lab.analysis.fit import fit_from_moments, fit_polynomial, solve

NS = [1, 2, 4, 8, 16, 32, 64]
P = 72


def test_a_quadratic_is_recovered_with_no_residual() -> None:
    """Ours rebalance-only, M = N + 1: (N+1)² + 7(N+1) + 3P + 3 = N² + 9N + 3P + 11."""
    fit = fit_polynomial(NS, [closed_form("zk", "threads", "zk_requests_per_change", n, P).value for n in NS], 2)
    assert fit is not None and fit.degree == 2
    a0, a1, a2 = fit.coefficients
    assert (a2, a1, a0) == (pytest.approx(1.0), pytest.approx(9.0), pytest.approx(3 * P + 11))
    assert fit.rss == pytest.approx(0.0, abs=1e-12) and fit.residual_df == len(NS) - 3
    assert fit.formula() == f"1.00·N² + 9.00·N + {3 * P + 11:.2f}"


def test_noisy_points_give_the_coefficients_back_with_residuals_the_size_of_the_noise() -> None:
    rng = random.Random(11)
    xs = [n for n in NS for _ in range(5)]
    noise = [rng.gauss(0, 3.0) for _ in xs]
    fit = fit_polynomial(xs, [2 * x * x + 5 * x + 40 + e for x, e in zip(xs, noise, strict=True)], 2)
    assert fit is not None
    a0, a1, a2 = fit.coefficients
    assert a2 == pytest.approx(2.0, abs=0.01) and a1 == pytest.approx(5.0, abs=0.5) and a0 == pytest.approx(40, abs=3)
    assert fit.rss > 0
    assert fit.rms_residual == pytest.approx(3.0, rel=0.35)  # the residuals' spread is the noise's, not 0
    # the fit minimises the residual sum: nudging a coefficient makes it larger
    nudged = sum((y - (a2 * x * x + (a1 + 0.1) * x + a0)) ** 2
                 for x, y in zip(xs, [2 * x * x + 5 * x + 40 + e for x, e in zip(xs, noise, strict=True)], strict=True))
    assert nudged > fit.rss


def test_a_line_and_the_coordinators_closed_form() -> None:
    fit = fit_polynomial(NS, [closed_form("coordinator", "processes", "kafka_coordination_per_change", n, P).value
                              for n in NS], 1)
    assert fit is not None and fit.coefficients == (pytest.approx(3.0), pytest.approx(2.0))  # 2N + 3
    assert fit.rms_residual == pytest.approx(0.0, abs=1e-9)


def test_the_moments_give_the_fit_the_points_give() -> None:
    rng = random.Random(5)
    xs = [float(n) for n in NS]
    ys = [n * n + rng.uniform(-10, 10) for n in NS]
    direct = fit_polynomial(xs, ys, 2)
    moments = fit_from_moments(2, [sum(x**k for x in xs) for k in range(5)],
                               [sum(x**k * y for x, y in zip(xs, ys, strict=True)) for k in range(3)],
                               sum(y * y for y in ys), len(set(xs)))
    assert direct is not None and moments is not None
    assert moments.coefficients == pytest.approx(direct.coefficients)
    assert moments.rss == pytest.approx(direct.rss, rel=1e-6)


def test_no_fit_through_fewer_sizes_than_coefficients() -> None:
    assert fit_polynomial([4, 4, 4], [10, 11, 12], 1) is None
    assert fit_polynomial([1, 2, 1, 2], [1, 4, 1, 4], 2) is None  # a parabola through two sizes is any parabola
    exact = fit_polynomial([1, 2, 4], [1, 4, 16], 2)
    assert exact is not None and exact.residual_df == 0 and exact.rms_residual is None
    assert solve([[1.0, 2.0], [2.0, 4.0]], [1.0, 2.0]) is None


@pytest.mark.parametrize(("design", "mode", "n", "expected"), [
    ("zk", "threads", 2, 9 + 21 + 3 * P + 3),  # M = 3: M² + 7M + 3P + 3
    ("zk", "processes", 2, 9 + 27 + 3 * P + 3),  # with fetchers: M² + 9M + 3P + 3
    ("original", "threads", 2, 9 + 33 + 3 * P + 2),  # M² + 11M + 3P + 2 (B = 1)
    ("original", "processes", 2, 9 + 39 + 3 * P + 2),  # M² + 13M + 3P + 2
    ("coordinator", "processes", 5, 13),  # 2N + 3
])
def test_each_designs_closed_form_is_the_documented_one(design: str, mode: str, n: int, expected: int) -> None:
    """docs/join-cost.md and the README's headline: a changed formula must fail here."""
    metric = "kafka_coordination_per_change" if design == "coordinator" else "zk_requests_per_change"
    form = closed_form(design, mode, metric, n, P)
    assert form is not None and form.value == expected
