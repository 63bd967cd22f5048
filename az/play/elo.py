"""Elo difference from match results, with a 95% interval that stays finite at 0% and 100%.

Each opening is played twice with colours swapped; the pair's score (0, 0.5, ..., 2)
is the unit of sampling, which removes most of the variance the opening itself adds.

The interval is the Jeffreys interval (the 2.5% and 97.5% quantiles of
Beta(x + 1/2, n - x + 1/2)) for the mean score p over an effective sample of n units
with x = p n: n is the number of units (pairs and unpaired games) divided by the design
effect d = s^2 / (p (1 - p)), the observed variance of a unit's score over that of a
win/loss coin of the same mean (d < 1 when pairs and draws make results steadier; d = 1
when no variance can be observed, as at 24-0). Unlike the normal approximation it is
finite at 0% and 100%, and its coverage is close to 95% (Brown, Cai and DasGupta 2001).
Bounds are mapped through the logistic curve. The point estimate is the Elo of the mean
score, or of the interval's median at 0% and 100%, where the score's own is infinite.
"""

import math
from typing import NamedTuple

from scipy import stats


class EloEstimate(NamedTuple):
    score: float  # mean points per game, in [0, 1]
    elo: float  # difference, positive when the player is stronger
    low: float  # 95% interval
    high: float
    games: int


def elo_from_score(score: float) -> float:
    """Logistic Elo difference for an expected score; +-inf at 1 and 0."""
    if score <= 0:
        return -math.inf
    if score >= 1:
        return math.inf
    return -400.0 * math.log10(1.0 / score - 1.0)


def jeffreys_interval(score: float, n: float, level: float = 0.95) -> tuple[float, float, float]:
    """(low, median, high) of the Jeffreys interval for a mean score over ``n`` units."""
    posterior = stats.beta(score * n + 0.5, (1.0 - score) * n + 0.5)
    tail = (1.0 - level) / 2
    return float(posterior.ppf(tail)), float(posterior.median()), float(posterior.ppf(1.0 - tail))


def effective_units(units: list[float]) -> float:
    """The number of units divided by the design effect (see the module docstring)."""
    n = len(units)
    mean = sum(units) / n
    variance = sum((u - mean) ** 2 for u in units) / n
    coin = mean * (1 - mean)
    return n * coin / variance if variance > 0 and coin > 0 else float(n)


def estimate(pair_points: list[float], single_points: list[float] = ()) -> EloEstimate:
    """Elo from per-pair points (each in [0, 2]) and unpaired games' points (each in [0, 1])."""
    units = [p / 2 for p in pair_points] + list(single_points)
    weights = [2] * len(pair_points) + [1] * len(single_points)
    games = sum(weights)
    if games == 0:
        return EloEstimate(math.nan, math.nan, -math.inf, math.inf, 0)
    score = sum(u * w for u, w in zip(units, weights)) / games
    low, median, high = jeffreys_interval(score, effective_units(units))
    point = elo_from_score(score if 0 < score < 1 else median)
    return EloEstimate(score, point, elo_from_score(low), elo_from_score(high), games)
