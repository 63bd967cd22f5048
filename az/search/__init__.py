"""Batched tree search over the true environment as the model: the one search API.

``make_search`` builds ``search(params, rng_key, games) -> SearchResult`` once from
the run's ``Rules``, a ``SearchSettings`` (the algorithm) and a ``ShogiKnowledge`` (what
the search knows of shogi); ``search_from_config`` builds it from ``config.search``.
Self-play, the evaluation agent, the USI engine and the reports use only that. Nothing
outside this package reads a search tree or knows which loop ran.

The modules:
- ``gumbel``: Gumbel MuZero on a compact tree (K children per node, exact for
  Gumbel's selection rules): the production Gumbel search.
- ``puct``: PUCT on mctx's full [B, N, A] tree, and the batched loop that runs it
  (PUCT's tie-breaking noise can send a visit to any action).
- ``reference``: Gumbel MuZero on the full tree, the reference that tests and
  benchmarks hold the compact tree against (``make_reference_search``).
- ``halving``: sequential halving's visit schedule (Gumbel's root).
- ``shogi``: everything shogi (network forward, tree embedding, model step, mates in
  one, promotion twins, reserved drops). The loops know no game.

Shapes: B games, A = 2187 actions, N = num_simulations + 1 nodes, K slots per compact
node, L = ``pv_length``. Values are from the side to move's view, in [-1, 1].
"""

import dataclasses
from typing import Callable, NamedTuple

import chex
import jax
import jax.numpy as jnp
import mctx
import ml_collections
from jax import Array

from az.search import gumbel, puct, reference, shogi
from az.search.gumbel import VALUE_SCALE
from az.search.puct import with_dirichlet_noise
from az.search.shogi import (ApplyFn, Params, ShogiKnowledge, make_recurrent_fn, network_forward,
                             rules_from_config, searched_moves, tree_embedding, with_mate, with_mate_in_one)
from envs import env

ALGORITHMS = ("gumbel", "puct")

__all__ = [
    "ALGORITHMS", "ApplyFn", "Params", "SearchFn", "SearchResult", "SearchSettings", "ShogiKnowledge",
    "make_recurrent_fn", "make_reference_search", "make_search", "network_forward", "rules_from_config",
    "search_from_config", "searched_moves", "settings_from_config", "tree_embedding", "with_dirichlet_noise",
    "with_mate", "with_mate_in_one",
]


@chex.dataclass(frozen=True)
class SearchResult:
    """What one search says about each root."""

    action: Array  # [B] int32, the move to play: the search's choice (Gumbel), the most
    # visited move (PUCT), or the prior's best move when num_simulations == 0
    policy: Array  # [B, A] float32, the improved policy (the policy target); 0 off the legal moves
    visit_counts: Array  # [B, A] int32, root visits per action
    q: Array  # [B, A] float32, Q of each root action (0 where unvisited)
    chosen_q: Array  # [B] float32, Q of ``action`` (the search value if it was not visited)
    root_value: Array  # [B] float32, the network's value of the root
    search_value: Array  # [B] float32, the root's value after the search
    pv: Array  # [B, L] int32, ``action`` then the most visited reply at each node; -1 past the tree
    noise_tv: Array  # [B] float32, total variation between the root prior searched and the network's
    mate: Array  # [B] bool, the root had a mate (in one, or three in play), which is the move (with_mate)


SearchFn = Callable[[Params, Array, env.State], SearchResult]  # (params, rng_key, games [B]) -> result


@dataclasses.dataclass(frozen=True, kw_only=True)
class SearchSettings:
    """The search algorithm and its knobs (``config.search``'s fields, and ``pv_length``)."""

    algorithm: str = "gumbel"  # "gumbel" (Gumbel MuZero, sequential halving) or "puct" (AlphaZero)
    num_simulations: int  # n; 0 searches nothing: the prior's best legal move
    max_num_considered_actions: int = 16  # m, Gumbel's root
    first_visits: int = 1  # Gumbel: visits of each considered root action before halving drops any
    gumbel_scale: float = 1.0  # Gumbel noise at the root
    value_scale: float = VALUE_SCALE  # Gumbel's c_scale: sigma(q) = (50 + max N) c_scale q
    dirichlet_alpha: float = 0.15  # PUCT's root noise, over the legal moves only (``with_dirichlet_noise``)
    dirichlet_fraction: float = 0.25  # PUCT: root prior = (1 - f) * prior + f * Dirichlet; 0: no noise
    pv_length: int = 1  # L, plies of the principal variation reported

    def __post_init__(self):
        if self.algorithm not in ALGORITHMS:
            raise ValueError(f"search.algorithm must be 'gumbel' or 'puct', got {self.algorithm!r}")
        if self.first_visits < 1:
            raise ValueError(f"search.first_visits must be >= 1, got {self.first_visits}")
        if self.num_simulations < 0 or self.pv_length < 1:
            raise ValueError(f"num_simulations must be >= 0 and pv_length >= 1, got {self.num_simulations}, "
                             f"{self.pv_length}")


class _GumbelLoop(NamedTuple):
    """A Gumbel MuZero loop and how to read its tree."""

    policy: Callable  # gumbel.gumbel_muzero's signature, less the reserved actions unless ``reserves``
    summarize: Callable  # tree -> visit_counts [B, A], qvalues [B, A], value [B]
    principal_variation: Callable  # (tree, action [B], L) -> [B, L]
    reserves: bool  # takes ``reserved``


_COMPACT_TREE = _GumbelLoop(gumbel.gumbel_muzero, gumbel.summarize, gumbel.principal_variation, reserves=True)
_FULL_TREE = _GumbelLoop(reference.full_tree_gumbel_muzero, lambda tree: tree.summary(), puct.principal_variation,
                         reserves=False)


# The fields of ``config.search`` that the playing agent's search is built from (the rest
# only shape self-play: noise, simulations per move, mates in the tree, promotions).
PLAYING_FIELDS = ("max_num_considered_actions", "first_visits", "value_scale", "considered_drops",
                  "considered_captures", "history_window", "material_utility")


def playing_field_problem(search_config: ml_collections.ConfigDict, material_head: bool) -> tuple[str, str] | None:
    """The first of ``PLAYING_FIELDS`` whose value no search can use, as (field, why);
    None when all are usable. Training's config check and the agent's overrides share it."""
    s = search_config
    checks = (
        ("max_num_considered_actions", s.max_num_considered_actions >= 1, "must be >= 1"),
        ("first_visits", isinstance(s.first_visits, int) and s.first_visits >= 1, "must be an integer >= 1"),
        ("value_scale", s.value_scale > 0, "must be > 0"),
        ("history_window", s.history_window >= 1, "must be >= 1"),
        ("considered_drops", 0 <= s.considered_drops <= s.max_num_considered_actions,
         f"must be in [0, search.max_num_considered_actions = {s.max_num_considered_actions}]"),
        ("considered_captures", 0 <= s.considered_captures <= s.max_num_considered_actions - s.considered_drops,
         f"must be in [0, search.max_num_considered_actions - search.considered_drops = "
         f"{s.max_num_considered_actions - s.considered_drops}]"),
        ("material_utility", s.material_utility >= 0, "must be >= 0"),
        ("material_utility", not s.material_utility or material_head, "needs model.material_head = True"),
    )
    return next(((field, why) for field, ok, why in checks if not ok), None)


def search_from_config(search_config: ml_collections.ConfigDict, apply_fn: ApplyFn, rules: env.Rules,
                       **overrides) -> SearchFn:
    """``make_search`` with a run's ``config.search``; ``overrides`` replace any field of
    ``SearchSettings`` or ``ShogiKnowledge`` (e.g. ``num_simulations``, ``gumbel_scale=0.0``
    to play, ``pv_length``, which the config does not hold)."""
    settings, knowledge = settings_from_config(search_config, **overrides)
    return make_search(apply_fn, rules, settings, knowledge=knowledge)


def settings_from_config(search_config: ml_collections.ConfigDict,
                         **overrides) -> tuple[SearchSettings, ShogiKnowledge]:
    """(``SearchSettings``, ``ShogiKnowledge``) of ``config.search``, with ``overrides``."""
    fields = {cls: [f.name for f in dataclasses.fields(cls)] for cls in (SearchSettings, ShogiKnowledge)}
    unknown = sorted(set(overrides) - {name for names in fields.values() for name in names})
    if unknown:
        raise TypeError(f"search_from_config: unknown settings {unknown}")
    values = {name: search_config[name] for names in fields.values() for name in names if name != "pv_length"}
    values.update(overrides)
    settings, knowledge = ({name: values[name] for name in names if name in values} for names in fields.values())
    return SearchSettings(**settings), ShogiKnowledge(**knowledge)


def make_search(apply_fn: ApplyFn, rules: env.Rules, settings: SearchSettings, *,
                knowledge: ShogiKnowledge = ShogiKnowledge()) -> SearchFn:
    """``search(params, rng_key, games [B]) -> SearchResult`` under ``rules`` (the tree
    judges repetition within ``knowledge.history_window`` plies).

    ``settings.algorithm`` "gumbel" runs Gumbel MuZero on the compact tree
    (``gumbel.gumbel_muzero``), "puct" AlphaZero's PUCT with ``with_dirichlet_noise`` at
    the root (``puct.puct``). ``knowledge.considered_drops`` and ``considered_captures`` need Gumbel.
    """
    return _make_search(apply_fn, rules, settings, knowledge, _COMPACT_TREE)


def make_reference_search(apply_fn: ApplyFn, rules: env.Rules, settings: SearchSettings, *,
                          knowledge: ShogiKnowledge = ShogiKnowledge()) -> SearchFn:
    """For tests and benchmarks: ``make_search`` with Gumbel on the full [B, N, A] tree
    (``reference.full_tree_gumbel_muzero``), the search the compact tree is held
    against. The same results; PUCT is ``make_search``'s."""
    return _make_search(apply_fn, rules, settings, knowledge, _FULL_TREE)


def _make_search(apply_fn: ApplyFn, rules: env.Rules, settings: SearchSettings, knowledge: ShogiKnowledge,
                 gumbel_loop: _GumbelLoop) -> SearchFn:
    for field in ("considered_drops", "considered_captures"):
        if getattr(knowledge, field) and (settings.algorithm != "gumbel" or not gumbel_loop.reserves):
            raise ValueError(f"{field}={getattr(knowledge, field)} needs the Gumbel search on the compact tree")
    if settings.first_visits != 1 and (settings.algorithm != "gumbel" or not gumbel_loop.reserves):
        raise ValueError(f"first_visits={settings.first_visits} needs the Gumbel search on the compact tree")
    model = shogi.make_model(apply_fn, rules, knowledge)

    def search(params: Params, rng_key: Array, games: env.State) -> SearchResult:
        root, invalid_actions = model.root(params, games)
        if settings.num_simulations == 0:
            result = _policy_only(root.prior_logits, root.value, settings.pv_length)
        else:
            result = _search_tree(params, rng_key, root, invalid_actions, model.reserved(games), model, settings,
                                  gumbel_loop)
        return model.finish(result, games, settings.num_simulations)

    return search


def _search_tree(params: Params, rng_key: Array, root: mctx.RootFnOutput, invalid_actions: Array, reserved: tuple,
                 model: shogi.ShogiModel, settings: SearchSettings, gumbel_loop: _GumbelLoop) -> SearchResult:
    """The loop of ``settings.algorithm`` from ``root``, read into a ``SearchResult``;
    ``reserved``: the root's reserved classes of actions (``ShogiModel.reserved``)."""
    s = settings
    noise_tv = jnp.zeros_like(root.value)
    if s.algorithm == "gumbel":
        out = gumbel_loop.policy(params, rng_key, root, model.recurrent_fn, num_simulations=s.num_simulations,
                                 invalid_actions=invalid_actions,
                                 max_num_considered_actions=s.max_num_considered_actions,
                                 gumbel_scale=s.gumbel_scale, value_scale=s.value_scale,
                                 **(dict(reserved=reserved, first_visits=s.first_visits) if gumbel_loop.reserves
                                    else {}))
        summary = gumbel_loop.summarize(out.search_tree)
        pv = gumbel_loop.principal_variation(out.search_tree, out.action, s.pv_length)
    else:  # the noise goes into the root prior; AlphaZero plays the most visited move
        if s.dirichlet_fraction > 0:
            rng_key, noise_key = jax.random.split(rng_key)
            logits, noise_tv = with_dirichlet_noise(noise_key, root.prior_logits, ~invalid_actions,
                                                    alpha=s.dirichlet_alpha, fraction=s.dirichlet_fraction)
            root = root.replace(prior_logits=logits)
        out = puct.puct(params, rng_key, root, model.recurrent_fn, num_simulations=s.num_simulations,
                        invalid_actions=invalid_actions)
        summary = out.search_tree.summary()
        pv = puct.principal_variation(out.search_tree, out.action, s.pv_length)
    action, visits = out.action, summary.visit_counts
    picked = jnp.take_along_axis(summary.qvalues, action[:, None], axis=1)[:, 0]
    visited = jnp.take_along_axis(visits, action[:, None], axis=1)[:, 0] > 0
    return SearchResult(
        action=action,
        policy=out.action_weights,
        visit_counts=visits,
        q=summary.qvalues,
        chosen_q=jnp.where(visited, picked, summary.value),
        root_value=root.value,
        search_value=summary.value,
        pv=pv,
        noise_tv=noise_tv,
        mate=jnp.zeros_like(noise_tv, dtype=jnp.bool_),
    )


def _policy_only(logits: Array, value: Array, pv_length: int) -> SearchResult:
    """No search: the prior's best move, the prior as the policy, the network's value."""
    action = jnp.argmax(logits, axis=-1).astype(jnp.int32)
    batch, actions = logits.shape
    return SearchResult(
        action=action,
        policy=jax.nn.softmax(logits, axis=-1),
        visit_counts=jnp.zeros((batch, actions), jnp.int32),
        q=jnp.zeros((batch, actions), jnp.float32),
        chosen_q=value,
        root_value=value,
        search_value=value,
        pv=jnp.concatenate([action[:, None], jnp.full((batch, pv_length - 1), -1, jnp.int32)], axis=1),
        noise_tv=jnp.zeros((batch,), jnp.float32),
        mate=jnp.zeros((batch,), jnp.bool_),
    )
