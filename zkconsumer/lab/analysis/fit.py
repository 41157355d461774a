"""Growth exponents: least squares on log-log axes, with a Student-t confidence interval on the slope.

If requests per change grow as c * N^k, then log y = log c + k log N, and k is the slope of the fit. The fit is
made from the sums Spark aggregates (n, sum x, sum y, sum x^2, sum xy, sum y^2), so the job never gathers the
points themselves. The t quantile is computed exactly for integer degrees of freedom (the closed forms of
Abramowitz & Stegun 26.7.3-4, inverted by bisection): no SciPy needed for one number.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class PowerFit:
    exponent: float  # k in y = c * N^k
    coefficient: float  # c
    exponent_se: float | None  # standard error of k (None with fewer than 3 points)
    ci95_low: float | None
    ci95_high: float | None
    r2: float | None
    n: int


def t_cdf_two_sided(t: float, df: int) -> float:
    """P(|T| <= t) for Student's t with `df` degrees of freedom (integer df >= 1)."""
    if df < 1:
        raise ValueError("degrees of freedom must be >= 1")
    theta = math.atan(abs(t) / math.sqrt(df))
    c2 = math.cos(theta) ** 2
    if df % 2:  # odd: (2/pi) [theta + sin cos (1 + 2/3 cos^2 + 2*4/(3*5) cos^4 + ...)]
        term, total = 1.0, 1.0 if df > 1 else 0.0
        for k in range(1, (df - 1) // 2):
            term *= (2 * k) / (2 * k + 1) * c2
            total += term
        return (2 / math.pi) * (theta + math.sin(theta) * math.cos(theta) * total)
    term, total = 1.0, 1.0  # even: sin [1 + 1/2 cos^2 + 1*3/(2*4) cos^4 + ...]
    for k in range(1, df // 2):
        term *= (2 * k - 1) / (2 * k) * c2
        total += term
    return math.sin(theta) * total


def t_quantile(confidence: float, df: int) -> float:
    """The t such that P(|T| <= t) = confidence (e.g. 0.95 -> 2.776 for df = 4)."""
    low, high = 0.0, 1.0
    while t_cdf_two_sided(high, df) < confidence:
        high *= 2
    for _ in range(200):
        mid = (low + high) / 2
        if t_cdf_two_sided(mid, df) < confidence:
            low = mid
        else:
            high = mid
        if high - low < 1e-12:
            break
    return (low + high) / 2


def fit_from_sums(n: int, sx: float, sy: float, sxx: float, sxy: float, syy: float) -> PowerFit | None:
    """Least squares of y on x (both already logs); None when the x values do not vary."""
    if n < 2:
        return None
    sxx_c = sxx - sx * sx / n
    if sxx_c <= 1e-12:
        return None
    sxy_c = sxy - sx * sy / n
    syy_c = syy - sy * sy / n
    slope = sxy_c / sxx_c
    intercept = (sy - slope * sx) / n
    rss = max(0.0, syy_c - slope * sxy_c)
    r2 = 1 - rss / syy_c if syy_c > 1e-12 else 1.0
    se = low = high = None
    if n > 2:
        se = math.sqrt(rss / (n - 2) / sxx_c)
        half = t_quantile(0.95, n - 2) * se
        low, high = slope - half, slope + half
    return PowerFit(slope, math.exp(intercept), se, low, high, r2, n)


def fit_power_law(ns: Sequence[float], values: Sequence[float]) -> PowerFit | None:
    """The same fit from points (N, y); points with N <= 0 or y <= 0 have no logarithm and are left out."""
    points = [(math.log(x), math.log(y)) for x, y in zip(ns, values, strict=True) if x > 0 and y > 0]
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    return fit_from_sums(len(points), sum(xs), sum(ys), sum(x * x for x in xs), sum(x * y for x, y in points),
                         sum(y * y for y in ys))
