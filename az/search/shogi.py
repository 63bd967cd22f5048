"""Everything the search knows of shogi, behind the loops' interface.

The loops (``az.search.gumbel``, ``az.search.puct``, ``az.search.reference``) see a
root's prior logits [B, A], value [B], embedding and ``invalid_actions`` [B, A], a
``recurrent_fn`` and a mask of reserved actions. This module makes them from the games
and the network (``make_model``): the network forward over games, the tree embedding,
the model step (env step + network), the promotion twins (``always_promote``), the
reserved drops and captures (``considered_drops``, ``considered_captures``), and the
mates in one: at the root (``with_mate_in_one``; ``with_mate`` for mates found
elsewhere, as the agent's mate in three) and in the tree (``mate_in_tree``).

The tree's embedding is the game ``State`` with its repetition history cut to a short
window (``history_window`` plies) and its legal mask packed to bits (``tree_embedding``),
so a node holds the board, hands and a few hashes in 588 bytes, never an observation;
observations are computed only to evaluate the network.

Shapes: B games, A = 2187 actions. Values are from the side to move's view, in [-1, 1].
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Callable, NamedTuple

import jax
import jax.numpy as jnp
import mctx
import ml_collections
import numpy as np
from jax import Array

from envs import env, mate, movegen

if TYPE_CHECKING:
    from az.search import SearchResult

Params = dict
# (params, (board planes packed [B, 648] uint8, flags [B, 57] bool)) -> (logits [B, A], value [B])
ApplyFn = Callable[[Params, Array], tuple[Array, Array]]


@dataclasses.dataclass(frozen=True, kw_only=True)
class ShogiKnowledge:
    """What the search knows of shogi beyond the rules (``config.search``'s fields)."""

    history_window: int = 16  # plies of repetition history the tree judges
    mate_in_one: bool = False  # a root with a mate in one plays it (``with_mate_in_one``)
    mate_in_tree: bool = False  # a node whose side to move has a mate in one is won (a mate search per simulation)
    always_promote: bool = False  # pawns, bishops and rooks that may promote do (``searched_moves``)
    considered_drops: int = 0  # Gumbel: the root considers that many drops, the best by gumbel + logit
    considered_captures: int = 0  # ... and that many captures, the best by gumbel + logit
    # Weight of the material head's forecast in every value the search reads (KataGo's
    # score utility, with material as the score): (value + w * material) / (1 + w).
    material_utility: float = 0.0


def rules_from_config(env_config: ml_collections.ConfigDict) -> env.Rules:
    """The game rules of a run's ``config.env``, with the full repetition history."""
    return env.Rules(
        max_length=env_config.max_length,
        declaration=env_config.declaration,
        history=env_config.max_length + 1,
        movegen=env_config.movegen,
    )


def mask_logits(logits: Array, legal: Array) -> Array:
    """Illegal actions get the lowest logit: [B, A] -> [B, A]."""
    return jnp.where(legal, logits, jnp.finfo(logits.dtype).min)


def searched_moves(games: env.State, always_promote: bool = False) -> tuple[Array, Array]:
    """(the moves a search considers [B, A] bool, the plain twins left out [B, A] bool).

    All legal moves; with ``always_promote``, without the plain moves of pawns, bishops
    and rooks that may promote (``movegen.unpromoted_twins``), as engines search.
    """
    legal = games.legal_action_mask
    if not always_promote:
        return legal, jnp.zeros_like(legal)
    twins = jax.vmap(lambda s: movegen.unpromoted_twins(s.x))(games)
    return legal & ~twins, twins


def with_promoted_twins(logits: Array, twins: Array) -> Array:
    """Each left-out plain move's prior goes to its promoted twin (the logits' log-sum):
    the network's "this piece there" is played promoted. [B, A], [B, A] -> [B, A]."""
    batch = logits.shape[0]
    planes = logits.reshape(batch, 27, 81)
    plain_twins = twins.reshape(batch, 27, 81)[:, :10]
    promoted = jnp.where(plain_twins, jnp.logaddexp(planes[:, 10:20], planes[:, :10]), planes[:, 10:20])
    return jnp.concatenate([planes[:, :10], promoted, planes[:, 20:]], axis=1).reshape(logits.shape)


def network_forward(apply_fn: ApplyFn, params: Params, games: env.State, rules: env.Rules, *,
                    always_promote: bool = False) -> tuple[Array, Array]:
    """The network over ``games`` [B]: masked logits [B, A] and value [B] of the side to
    move (observed by ``rules``'s move generator); only ``searched_moves`` get a logit
    above the lowest."""
    logits, value = apply_fn(params, jax.vmap(lambda s: env.observe_parts(s, rules))(games))
    searched, twins = searched_moves(games, always_promote)
    if always_promote:
        logits = with_promoted_twins(logits, twins)
    return mask_logits(logits, searched), value


def with_mate_in_one(result: SearchResult, games: env.State, *, num_simulations: int) -> SearchResult:
    """A root with a mate in one plays it: the move, a one-hot policy and visits, Q and
    values +1 (the side to move wins)."""
    found, action = mate.mate_in_one(games)
    return with_mate(result, found, action, num_simulations=num_simulations)


def with_mate(result: SearchResult, found: Array, action: Array, *, num_simulations: int) -> SearchResult:
    """``with_mate_in_one`` given the mates, ``mate.mate_in_one``'s (found [B], action [B])."""
    one_hot = jax.nn.one_hot(action, result.policy.shape[-1], dtype=jnp.bool_) & found[:, None]
    won = jnp.where(found, 1.0, 0.0)
    return result.replace(
        action=jnp.where(found, action, result.action),
        policy=jnp.where(found[:, None], one_hot.astype(result.policy.dtype), result.policy),
        visit_counts=jnp.where(found[:, None], one_hot * max(num_simulations, 1), result.visit_counts),
        q=jnp.where(one_hot, 1.0, result.q),
        chosen_q=jnp.where(found, won, result.chosen_q),
        search_value=jnp.where(found, won, result.search_value),
        pv=jnp.where(found[:, None], jnp.full_like(result.pv, -1).at[:, 0].set(action), result.pv),
        mate=found,
    )


def tree_embedding(games: env.State, history_window: int) -> env.State:
    """What a search tree stores of ``games`` [B]: a ``history_window``-ply repetition
    history, board and hands as int8, and the legal mask packed 8 actions to a byte
    ([B, 274] uint8; the next step recomputes it, so only a finished game's copy is
    ever used)."""
    return _packed(jax.vmap(lambda s: env.with_history(s, history_window))(games))


def _packed(games: env.State) -> env.State:
    x = games.x
    return games._replace(x=x._replace(board=x.board.astype(jnp.int8), hand=x.hand.astype(jnp.int8),
                                       legal_action_mask=jnp.packbits(x.legal_action_mask, axis=-1)))


def _from_tree_embedding(games: env.State) -> env.State:
    x = games.x
    mask = jnp.unpackbits(x.legal_action_mask, axis=-1, count=env.NUM_ACTIONS).astype(jnp.bool_)
    return games._replace(x=x._replace(board=x.board.astype(jnp.int32), hand=x.hand.astype(jnp.int32),
                                       legal_action_mask=mask))


def make_recurrent_fn(apply_fn: ApplyFn, tree_rules: env.Rules, *, mate_in_tree: bool = False,
                      always_promote: bool = False) -> mctx.RecurrentFn:
    """mctx's model step: play the action, evaluate the child with the network. The
    embeddings it takes and returns are ``tree_embedding``s.

    reward: the mover's reward; discount: -1 between the players, 0 once the game is
    over, when the value is 0 too. Priors are masked at every node (mctx masks only
    the root). With ``mate_in_tree`` a child whose side to move has a mate in one is
    worth +1 to it, whatever the network says; ``always_promote``: as in ``network_forward``.
    """
    step = jax.vmap(lambda s, a: env.step(s, a, tree_rules))

    def recurrent_fn(params, rng_key, action, games):
        del rng_key
        mover = games.current_player
        children = step(_from_tree_embedding(games), action)
        logits, value = network_forward(apply_fn, params, children, tree_rules, always_promote=always_promote)
        if mate_in_tree:
            value = jnp.where(mate.mate_in_one(children)[0], 1.0, value)
        reward = jnp.take_along_axis(children.rewards, mover[:, None], axis=1)[:, 0]
        done = children.done
        output = mctx.RecurrentFnOutput(
            reward=reward,
            discount=jnp.where(done, 0.0, -1.0),
            prior_logits=logits,
            value=jnp.where(done, 0.0, value),
        )
        return output, _packed(children)  # the history is the tree's window already

    return recurrent_fn


def with_material_utility(apply_fn: ApplyFn, weight: float) -> ApplyFn:
    """``apply_fn`` whose value is (value + weight * material) / (1 + weight): the
    material head's forecast (``model.material_head``) read as a second utility, so the
    search tells a piece about to be lost from a safe one before the value has learned
    to; the sum stays in [-1, 1], below a won terminal's 1."""

    def apply(params: Params, observation) -> tuple[Array, Array]:
        logits, value, aux = apply_fn(params, observation, with_aux=True)
        return logits, (value + weight * aux["material"]) / (1.0 + weight)

    return apply


class ShogiModel(NamedTuple):
    """Shogi as the search loops see it (``make_model``)."""

    # (params, games [B]) -> (prior logits [B, A], value [B], tree embedding; invalid_actions [B, A])
    root: Callable[[Params, env.State], tuple[mctx.RootFnOutput, Array]]
    recurrent_fn: mctx.RecurrentFn  # on tree embeddings
    # games [B] -> classes of actions the root considers however low their prior, each
    # (mask [A] or [B, A] bool, how many): the drops and the captures
    reserved: Callable[[env.State], tuple[tuple[Array, int], ...]]
    # (result, games [B], num_simulations) -> result, with the root's mates in one played
    finish: Callable[[SearchResult, env.State, int], SearchResult]


def make_model(apply_fn: ApplyFn, rules: env.Rules, knowledge: ShogiKnowledge) -> ShogiModel:
    """The root, model step and reserved actions of a search under ``rules`` with
    ``knowledge``: the tree judges repetition within ``history_window`` plies, every
    other rule is ``rules``'s. The mates in one need the dense move generator."""
    if (knowledge.mate_in_one or knowledge.mate_in_tree) and rules.movegen != "dense":
        raise ValueError(f"mate in one needs the dense move generator, not {rules.movegen!r}")
    always_promote = knowledge.always_promote
    tree_rules = dataclasses.replace(rules, history=knowledge.history_window)
    if knowledge.material_utility:
        apply_fn = with_material_utility(apply_fn, knowledge.material_utility)

    def root(params: Params, games: env.State) -> tuple[mctx.RootFnOutput, Array]:
        logits, value = network_forward(apply_fn, params, games, rules, always_promote=always_promote)
        searched, _ = searched_moves(games, always_promote)
        embedding = tree_embedding(games, knowledge.history_window)
        return mctx.RootFnOutput(prior_logits=logits, value=value, embedding=embedding), ~searched

    def finish(result: SearchResult, games: env.State, num_simulations: int) -> SearchResult:
        if not knowledge.mate_in_one:
            return result
        return with_mate_in_one(result, games, num_simulations=num_simulations)

    return ShogiModel(
        root=root,
        recurrent_fn=make_recurrent_fn(apply_fn, tree_rules, mate_in_tree=knowledge.mate_in_tree,
                                       always_promote=always_promote),
        reserved=lambda games: ((movegen.DROP_ACTIONS, knowledge.considered_drops),
                                (jax.vmap(lambda s: movegen.capture_actions(s.x.board))(games),
                                 knowledge.considered_captures)),
        finish=finish,
    )
