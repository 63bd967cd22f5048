"""Elo difference from match results, with a 95% interval from paired openings.

Each opening is played twice with colours swapped; the pair's score (0, 0.5, ..., 2)
is the unit of sampling, which removes most of the variance the opening itself adds.
"""

import math
from typing import NamedTuple


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


def estimate(pair_points: list[float], single_points: list[float] = ()) -> EloEstimate:
    """Elo from per-pair points (each in [0, 2]) and unpaired games' points (each in [0, 1]).

    The interval is a normal approximation on the mean score, mapped through the
    logistic curve; with fewer than two units the interval is infinite.
    """
    units = [p / 2 for p in pair_points] + list(single_points)
    weights = [2] * len(pair_points) + [1] * len(single_points)
    games = sum(weights)
    if games == 0:
        return EloEstimate(math.nan, math.nan, -math.inf, math.inf, 0)
    score = sum(u * w for u, w in zip(units, weights)) / games
    n = len(units)
    if n < 2:
        return EloEstimate(score, elo_from_score(score), -math.inf, math.inf, games)
    mean = sum(units) / n
    variance = sum((u - mean) ** 2 for u in units) / (n - 1)
    half = 1.96 * math.sqrt(variance / n)
    return EloEstimate(
        score, elo_from_score(score), elo_from_score(score - half), elo_from_score(score + half), games
    )
