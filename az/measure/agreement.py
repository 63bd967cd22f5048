"""Agreement with the teacher set: how often a network (or its search) plays fairy-stockfish's
move, and how well its value tells won positions from lost ones.

MEASUREMENT only (the teacher set never feeds training). The trainer logs
``network_agreement`` every ``config.teacher.every_iterations``; ``az.play.report teacher``
measures snapshots' policies and searches with binomial intervals.

    probe = agreement.make_probe(teacher.load(), rules, split="heldout")
    metrics = agreement.network_agreement(net.apply, params, probe, rules)   # device scalars

P below is the number of probe positions.
"""

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array

from az import search as search_lib
from az.measure import teacher as teacher_lib
from envs import env

DECIDED_CP = 300  # |score| from which a position counts as won or lost for the value's sign
PHASES = (("opening (ply < 30)", 0, 30), ("middlegame (ply 30-79)", 30, 80), ("endgame (ply >= 80)", 80, 10**9))


class Probe(NamedTuple):
    """Teacher positions on the device, ready for a batched forward pass or search."""

    games: env.State  # [P] the positions (no move history)
    best: Array  # [P] int32, fairy-stockfish's move as an action
    score: Array  # [P] float32, its score from the mover's view (cp; mates +/-(30000 - N))
    decided: Array  # [P] bool, |score| >= DECIDED_CP


def make_probe(teacher_set: teacher_lib.TeacherSet, rules: env.Rules, *, split: str = "heldout",
               positions: int = 0) -> Probe:
    """The ``split`` ("heldout", "fit", "test" or "all") positions, the first ``positions``
    of them when > 0 (the file is ordered by game, so a prefix is whole games). The test
    positions are a file of their own (``teacher.load_split("test")``): only a final figure
    reads them."""
    if split not in ("heldout", "fit", "test", "all"):
        raise ValueError(f"teacher split {split!r}: choose heldout, fit, test or all")
    chosen = teacher_set if split == "all" else teacher_set.select(getattr(teacher_set, split))
    if chosen.size == 0:
        raise ValueError(f"teacher split {split!r}: {teacher_set.path} has no such positions"
                         + (f" (they are in {teacher_lib.TEST_PATH})" if split == "test" else ""))
    if positions > 0:
        chosen = chosen.select(np.arange(min(positions, chosen.size)))
    games, best = teacher_lib.to_device(chosen, rules)
    score = np.asarray(chosen.score_cp, np.float32)
    return Probe(games=games, best=best, score=jnp.asarray(score), decided=jnp.asarray(np.abs(score) >= DECIDED_CP))


def _ranks(x: Array) -> Array:
    return jnp.argsort(jnp.argsort(x)).astype(jnp.float32)


def rank_correlation(x: Array, y: Array) -> Array:
    """Spearman's rho of two [P] vectors (ties ranked by position; no tie correction)."""
    rx, ry = _ranks(x), _ranks(y)
    rx, ry = rx - rx.mean(), ry - ry.mean()
    return (rx * ry).sum() / jnp.maximum(jnp.sqrt((rx * rx).sum() * (ry * ry).sum()), 1e-9)


def per_position(apply_fn, params, probe: Probe, rules: env.Rules, *,
                 always_promote: bool = False) -> tuple[Array, Array, Array]:
    """(rank of the teacher's move in the policy [P] int32 (0: the top move), the policy's
    choice [P] int32, the value [P] float32). The policy is the one the search starts
    from (``search.network_forward``, with ``always_promote`` as the run searches)."""
    logits, value = search_lib.network_forward(apply_fn, params, probe.games, rules, always_promote=always_promote)
    logits = logits.astype(jnp.float32)
    best_logit = jnp.take_along_axis(logits, probe.best[:, None], axis=1)
    # Moves strictly above the teacher's, and equal ones before it (argmax takes the first).
    above = (logits > best_logit) | ((logits == best_logit) & (jnp.arange(logits.shape[1]) < probe.best[:, None]))
    return above.sum(axis=1).astype(jnp.int32), jnp.argmax(logits, axis=1), value.astype(jnp.float32)


def one_ply_choice(apply_fn, params, games: env.State, rules: env.Rules, *, width: int) -> Array:
    """[B] int32: for each position, the legal move after which the value rates the mover's
    position best (minus the value of the position after it; a move that ends the game
    scores its result), tried over every legal move, the prior unused: how well the
    value alone ranks moves. ``width`` >= the most legal moves of any position."""
    legal = games.legal_action_mask
    moves = jnp.argsort(~legal, axis=1, stable=True)[:, :width]  # [B, W] the legal actions first
    valid = jnp.take_along_axis(legal, moves, axis=1)
    children = jax.vmap(lambda game, actions: jax.vmap(lambda a: env.step(game, a, rules))(actions))(games, moves)
    flat = jax.tree.map(lambda x: x.reshape(-1, *x.shape[2:]), children)
    _, value = apply_fn(params, jax.vmap(lambda s: env.observe_parts(s, rules))(flat))
    after = -value.astype(jnp.float32).reshape(moves.shape)
    mover = jnp.broadcast_to(games.current_player[:, None, None], (*moves.shape, 1))
    result = jnp.take_along_axis(children.rewards, mover, axis=2)[..., 0]
    score = jnp.where(valid, jnp.where(children.terminated | children.truncated, result, after), -jnp.inf)
    return jnp.take_along_axis(moves, jnp.argmax(score, axis=1)[:, None], axis=1)[:, 0].astype(jnp.int32)


def network_agreement(apply_fn, params, probe: Probe, rules: env.Rules, *, always_promote: bool = False) -> dict:
    """Device scalars: policy top-1 and top-3 agreement, the value's sign accuracy on decided
    positions (|score| >= 300 cp) and the value-score rank correlation."""
    rank, _, value = per_position(apply_fn, params, probe, rules, always_promote=always_promote)
    decided = probe.decided.astype(jnp.float32)
    right_sign = (jnp.sign(value) == jnp.sign(probe.score)).astype(jnp.float32)
    return {
        "top1": (rank == 0).mean(),
        "top3": (rank < 3).mean(),
        "value_sign_accuracy": (right_sign * decided).sum() / jnp.maximum(decided.sum(), 1),
        "value_rank_correlation": rank_correlation(value, probe.score),
    }


def wilson_interval(hits: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The 95% Wilson score interval of a binomial proportion (0..1); (nan, nan) for n = 0."""
    if n == 0:
        return math.nan, math.nan
    p = hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def breakdown(hits: np.ndarray, teacher_set: teacher_lib.TeacherSet) -> dict:
    """Agreement with intervals overall, by game phase, for drops and promotions, and by
    the start scheme of the position's game ("from standard", "from shogi816k", ...: a
    run's start schedule shows up as a gap between them): name -> {"agreement", "low",
    "high", "positions"}; ``hits`` [P] bool per position."""
    hits = np.asarray(hits, bool)
    groups = {"all": np.ones(len(hits), bool)}
    for name, low, high in PHASES:
        groups[name] = (teacher_set.ply >= low) & (teacher_set.ply < high)
    groups["drops"] = teacher_set.drop
    groups["promotions"] = teacher_set.promotion
    starts = np.asarray(teacher_set.start)
    for scheme in sorted(set(teacher_set.start)):
        groups[f"from {scheme}"] = starts == scheme
    out = {}
    for name, mask in groups.items():
        n, k = int(mask.sum()), int(hits[mask].sum())
        low, high = wilson_interval(k, n)
        out[name] = {"agreement": k / n if n else math.nan, "low": low, "high": high, "positions": n}
    return out


def promotion_choices(actions: np.ndarray, legal_action_mask: np.ndarray) -> tuple[int, int]:
    """(promoted, could_promote): of the board moves in ``actions`` [P] whose other version
    (promoted or not: the same piece, squares and direction) is legal too, how many promote.
    pgx's directions 10-19 are 0-9 with promotion, so the pair is 810 actions apart."""
    actions = np.asarray(actions)
    direction = actions // 81
    board_move = direction < 20
    other = np.where(board_move, np.where(direction >= 10, actions - 810, actions + 810), actions)
    could = board_move & np.asarray(legal_action_mask)[np.arange(len(actions)), other]
    return int((could & (direction >= 10)).sum()), int(could.sum())


def baselines(teacher_set: teacher_lib.TeacherSet, heuristic_weights: str | None = None) -> dict:
    """Reference agreements on the held-out positions, for plots: ``random`` (the expected
    share of a uniformly random legal move), and ``greedy`` and ``GA heuristic`` as the
    shipped heuristic's weights file records them (absent when it cannot be read)."""
    import json
    import os

    held = teacher_set.select(teacher_set.heldout)
    lines = {"random": float(np.mean(1.0 / held.legal_moves))}
    path = heuristic_weights or os.path.join(os.path.dirname(teacher_lib.DEFAULT_PATH), "heuristic_weights.json")
    try:
        with open(path, encoding="utf-8") as f:
            summary = json.load(f)
        lines["greedy"] = float(summary["greedy_heldout"]["all"])
        lines["GA heuristic"] = float(summary["heldout"]["all"])
    except (OSError, ValueError, KeyError):
        pass
    return lines
