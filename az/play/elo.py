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

``fit_ratings`` rates many players at once from all their pairwise results (one
Bradley-Terry fit, anchored at one player), for ``python -m az.play.report ladder``.
"""

import math
from typing import NamedTuple

import numpy as np
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


# One joint fit over many players ----------------------------------------------------------

ELO_PER_NAT = 400.0 / math.log(10.0)  # Elo = 400 log10(odds): one unit of log-odds in Elo
PRIOR_GAMES = 0.5  # a virtual drawn game added to each pair that played: keeps 40-0 finite


class PairResult(NamedTuple):
    """Games between two players: ``points`` of ``first`` (win 1, draw 1/2) over ``games``."""

    first: str
    second: str
    games: int
    points: float


class Rating(NamedTuple):
    elo: float  # the anchor's is 0
    low: float  # 95% interval (the anchor's is [0, 0]: errors add up along the chain to it)
    high: float
    games: int  # real games played (the virtual draws not counted)


def _pair_totals(results: list[PairResult], names: list[str], prior_games: float):
    """[K, K] games and points of the row player against the column player."""
    index = {name: i for i, name in enumerate(names)}
    games, points = np.zeros((len(names), len(names))), np.zeros((len(names), len(names)))
    for r in results:
        if r.first == r.second:
            raise ValueError(f"a match of {r.first!r} against itself")
        if not 0 <= r.points <= r.games:
            raise ValueError(f"{r.first} vs {r.second}: {r.points} points in {r.games} games")
        i, j = index[r.first], index[r.second]
        games[i, j] += r.games
        games[j, i] += r.games
        points[i, j] += r.points
        points[j, i] += r.games - r.points
    played = games > 0
    return games + prior_games * played, points + prior_games / 2 * played


def _linked(games: np.ndarray, start: int) -> set:
    """The players a chain of played pairs links to ``start``."""
    seen, todo = {start}, [start]
    while todo:
        i = todo.pop()
        for j in np.flatnonzero(games[i] > 0):
            if int(j) not in seen:
                seen.add(int(j))
                todo.append(int(j))
    return seen


def fit_ratings(results: list[PairResult], *, anchor: str = "random", prior_games: float = PRIOR_GAMES,
                level: float = 0.95) -> dict[str, Rating]:
    """Ratings of every player of ``results`` by one Bradley-Terry (logistic Elo) fit.

    Maximum likelihood over all games at once: player i scores against j with probability
    1 / (1 + 10^((r_j - r_i) / 400)), a draw counting as half a win and half a loss.
    ``anchor`` is held at 0. Each pair that played gets ``prior_games`` virtual drawn
    games, so a pair where one side won every game gives a finite, wide gap. Intervals:
    the normal approximation from the inverse Hessian of the log-likelihood (the observed
    information), games taken as independent. ValueError when ``anchor`` did not play or
    a player is linked to it by no chain of games.
    """
    names = sorted({r.first for r in results} | {r.second for r in results})
    if anchor not in names:
        raise ValueError(f"no games of {anchor!r}: the ratings are anchored at {anchor} = 0")
    games, points = _pair_totals(results, names, prior_games)
    a = names.index(anchor)
    unlinked = sorted(set(range(len(names))) - _linked(games, a))
    if unlinked:
        listed = ", ".join(repr(names[i]) for i in unlinked)
        raise ValueError(f"no chain of games links {listed} to {anchor!r}: their ratings are undefined")
    free = np.array([i for i in range(len(names)) if i != a], np.int64)
    theta = np.zeros(len(names))  # log-odds units

    def log_likelihood(t):
        diff = t[:, None] - t[None, :]
        return float((points * -np.logaddexp(0.0, -diff)).sum())

    hessian = np.zeros((len(free), len(free)))
    for _ in range(100):  # Newton's method on a concave function: a handful of steps
        p = 1.0 / (1.0 + np.exp(-(theta[:, None] - theta[None, :])))
        gradient = (points - games * p).sum(axis=1)[free]
        weight = games * p * (1 - p)
        full = weight - np.diag(weight.sum(axis=1))  # the log-likelihood's Hessian
        hessian = full[np.ix_(free, free)]
        step = np.linalg.solve(-hessian, gradient) if len(free) else np.zeros(0)
        before, scale = log_likelihood(theta), 1.0
        while scale > 1e-6:
            trial = theta.copy()
            trial[free] += scale * step
            if log_likelihood(trial) >= before - 1e-12:
                break
            scale /= 2
        theta = trial
        if np.max(np.abs(scale * step), initial=0.0) < 1e-10:
            break
    covariance = np.linalg.inv(-hessian) if len(free) else np.zeros((0, 0))
    sd = np.zeros(len(names))
    sd[free] = np.sqrt(np.diag(covariance))
    z = float(stats.norm.ppf(0.5 + level / 2))
    real = (games - prior_games * (games > 0)).sum(axis=1)
    elo = theta * ELO_PER_NAT
    return {name: Rating(float(elo[i]), float(elo[i] - z * sd[i] * ELO_PER_NAT),
                         float(elo[i] + z * sd[i] * ELO_PER_NAT), int(round(real[i])))
            for i, name in enumerate(names)}
