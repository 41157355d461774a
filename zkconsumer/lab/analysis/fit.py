"""Polynomial least squares for the herd's per-change costs: a·N² + b·N + c (ZooKeeper requests) or a·N + b.

The costs are polynomials by construction (docs/join-cost.md): a ZooKeeper join costs M² + 7·M + 3·P + 3 requests,
the coordinator's 2·N + 3 coordination requests. So the analysis fits the polynomial itself and reports its
coefficients and residuals, where a power law's exponent (with a t interval, as if the points were noisy draws
from c·N^k) would describe the mix of the N² and 3·P terms at the sizes that happened to be run, not the protocol.

The fit is made from moments Spark can aggregate (n, Σxᵏ for k ≤ 2d, Σxᵏ·y for k ≤ d, Σy²), so the job need not
gather the points: the normal equations (XᵀX)β = Xᵀy are solved by Gaussian elimination with partial pivoting
(no numpy here), and the residual sum of squares is yᵀy - βᵀXᵀy (`residual_sum` recomputes it
where that difference of large numbers would lose the digits of tiny residuals).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class PolyFit:
    coefficients: tuple[float, ...]  # lowest power first: (c, b, a) for a·x² + b·x + c
    n: int  # points fitted
    rss: float  # residual sum of squares
    residual_df: int  # n minus the number of coefficients

    @property
    def degree(self) -> int:
        return len(self.coefficients) - 1

    @property
    def rms_residual(self) -> float | None:
        """sqrt(rss / residual_df): the residuals' standard deviation, None without a residual degree of freedom."""
        return math.sqrt(self.rss / self.residual_df) if self.residual_df > 0 else None

    def __call__(self, x: float) -> float:
        return sum(c * x**k for k, c in enumerate(self.coefficients))

    def formula(self, variable: str = "N", digits: int = 2) -> str:
        terms = []
        for k in range(self.degree, -1, -1):
            c = self.coefficients[k]
            power = "" if k == 0 else variable if k == 1 else f"{variable}²" if k == 2 else f"{variable}^{k}"
            terms.append(f"{c:.{digits}f}" + (f"·{power}" if power else ""))
        return " + ".join(terms).replace("+ -", "- ")


def solve(matrix: list[list[float]], rhs: list[float]) -> list[float] | None:
    """x with matrix·x = rhs, or None when the matrix is singular (fewer distinct x than coefficients)."""
    size = len(rhs)
    a = [[*row, r] for row, r in zip(matrix, rhs, strict=True)]
    scale = max((abs(v) for row in matrix for v in row), default=0.0) or 1.0
    for col in range(size):
        pivot = max(range(col, size), key=lambda r: abs(a[r][col]))
        if abs(a[pivot][col]) <= 1e-12 * scale:
            return None
        a[col], a[pivot] = a[pivot], a[col]
        for r in range(col + 1, size):
            factor = a[r][col] / a[col][col]
            for c in range(col, size + 1):
                a[r][c] -= factor * a[col][c]
    x = [0.0] * size
    for r in range(size - 1, -1, -1):
        x[r] = (a[r][size] - sum(a[r][c] * x[c] for c in range(r + 1, size))) / a[r][r]
    return x


def fit_from_moments(degree: int, power_sums: Sequence[float], cross_sums: Sequence[float], syy: float,
                     distinct_x: int) -> PolyFit | None:
    """`power_sums[k]` = Σxᵏ for k = 0..2·degree (so power_sums[0] = n), `cross_sums[k]` = Σxᵏ·y for k = 0..degree.
    None with fewer distinct x than coefficients: such a fit would pass through the points whatever they are."""
    if len(power_sums) != 2 * degree + 1 or len(cross_sums) != degree + 1:
        raise ValueError(f"a degree-{degree} fit needs {2 * degree + 1} power sums and {degree + 1} cross sums")
    n = round(power_sums[0])
    if distinct_x < degree + 1:
        return None
    beta = solve([[power_sums[i + j] for j in range(degree + 1)] for i in range(degree + 1)], list(cross_sums))
    if beta is None:
        return None
    rss = max(0.0, syy - sum(b * s for b, s in zip(beta, cross_sums, strict=True)))
    return PolyFit(tuple(beta), n, rss, n - (degree + 1))


def fit_polynomial(xs: Sequence[float], ys: Sequence[float], degree: int) -> PolyFit | None:
    """The same fit from points, its residual sum recomputed from the points themselves."""
    if len(xs) != len(ys):
        raise ValueError("xs and ys differ in length")
    power = [sum(x**k for x in xs) for k in range(2 * degree + 1)]
    cross = [sum(x**k * y for x, y in zip(xs, ys, strict=True)) for k in range(degree + 1)]
    fit = fit_from_moments(degree, power, cross, sum(y * y for y in ys), len(set(xs)))
    if fit is None:
        return None
    return residual_sum(fit, sum((y - fit(x)) ** 2 for x, y in zip(xs, ys, strict=True)))


def residual_sum(fit: PolyFit, rss: float) -> PolyFit:
    """`fit` with its residual sum of squares computed another way (from the points, or from per-x means and
    spreads: Σ over x of [within-x sum of squares + count·(mean - fit(x))²])."""
    return PolyFit(fit.coefficients, fit.n, rss, fit.residual_df)
