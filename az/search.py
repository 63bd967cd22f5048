"""Batched tree search over the true environment as the model: the one search API.

``make_search`` builds ``search(params, rng_key, games) -> SearchResult`` once from
the run's ``Rules``; self-play, the evaluation agent, the USI engine and the reports
use only that. Nothing outside this module reads mctx's tree or knows which algorithm
ran.

Shapes: B games, A = 2187 actions, L = ``pv_length``. Values are from the side to
move's view, in [-1, 1].

Gumbel MuZero runs on ``az.gumbel_tree``'s compact tree (K children per node, exact
for Gumbel's selection rules); PUCT on ``az.mcts``'s full [B, N, A] tree, since its
tie-breaking noise can send a visit to any action.

The tree's embedding is the game ``State`` with its repetition history cut to a short
window (``history_window`` plies) and its legal mask packed to bits (``tree_embedding``),
so a node holds the board, hands and a few hashes in 588 bytes, never an observation;
observations are computed only to evaluate the network.
"""

import dataclasses
import functools
from typing import Callable

import chex
import jax
import jax.numpy as jnp
import mctx
import ml_collections
from jax import Array

from az import gumbel_tree, mcts
from az import network as network_lib
from envs import env, mate, movegen

Params = dict
# (params, (board planes packed [B, 648] uint8, flags [B, 57] bool)) -> (logits [B, A], value [B])
ApplyFn = Callable[[Params, Array], tuple[Array, Array]]
ALGORITHMS = ("gumbel", "puct")


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


def rules_from_config(config: ml_collections.ConfigDict) -> env.Rules:
    """The game rules of a run's config (``config.env``), with the full repetition history."""
    return env.Rules(
        max_length=config.env.max_length,
        declaration=config.env.declaration,
        history=config.env.max_length + 1,
        movegen=config.env.movegen,
    )


def search_from_config(config: ml_collections.ConfigDict, *, rules: env.Rules | None = None, **overrides):
    """``make_search`` for a run: its network, its rules (or ``rules``) and its
    ``config.search``; ``overrides`` replace any of ``make_search``'s settings (e.g.
    ``num_simulations``, ``gumbel_scale=0.0`` to play)."""
    s = config.search
    settings = dict(
        algorithm=s.algorithm,
        num_simulations=s.num_simulations,
        max_num_considered_actions=s.max_num_considered_actions,
        gumbel_scale=s.gumbel_scale,
        value_scale=s.value_scale,
        dirichlet_alpha=s.dirichlet_alpha,
        dirichlet_fraction=s.dirichlet_fraction,
        history_window=s.history_window,
        mate_in_one=s.mate_in_one,
        mate_in_tree=s.mate_in_tree,
        always_promote=s.always_promote,
        considered_drops=s.considered_drops,
        pv_length=1,
    )
    unknown = sorted(set(overrides) - set(settings))
    if unknown:
        raise TypeError(f"search_from_config: unknown settings {unknown}")
    settings.update(overrides)
    rules = rules_from_config(config) if rules is None else rules
    return make_search(network_lib.make_network(config).apply, rules, **settings)


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


def evaluate(apply_fn: ApplyFn, params: Params, games: env.State, rules: env.Rules, *,
             always_promote: bool = False) -> tuple[Array, Array]:
    """Masked logits [B, A] and value [B] of the side to move (observed by ``rules``'s
    move generator); only ``searched_moves`` get a logit above the lowest."""
    logits, value = apply_fn(params, jax.vmap(lambda s: env.observe_parts(s, rules))(games))
    searched, twins = searched_moves(games, always_promote)
    if always_promote:
        logits = with_promoted_twins(logits, twins)
    return mask_logits(logits, searched), value


def with_dirichlet_noise(rng_key: Array, logits: Array, legal: Array, *, alpha: float, fraction: float):
    """AlphaZero's root exploration: ``(1 - fraction) * prior + fraction * Dir(alpha)``
    with the Dirichlet over the legal moves only.

    (mctx's ``muzero_policy`` spreads its noise over all A actions and masks afterwards,
    so only about L/A of it reaches the L legal moves.) Returns the noisy logits [B, A]
    (illegal ones lowest) and the total variation [B] by which the prior moved.
    """
    prior = jax.nn.softmax(logits, axis=-1)
    log_gamma = jax.random.loggamma(rng_key, alpha, logits.shape)  # stable for small alpha
    noise = jax.nn.softmax(jnp.where(legal, log_gamma, -jnp.inf), axis=-1)
    noisy = (1.0 - fraction) * prior + fraction * noise
    total_variation = 0.5 * jnp.abs(noisy - prior).sum(axis=-1)
    return mask_logits(jnp.log(jnp.maximum(noisy, jnp.finfo(noisy.dtype).tiny)), legal), total_variation


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
    worth +1 to it, whatever the network says; ``always_promote``: as in ``evaluate``.
    """
    step = jax.vmap(lambda s, a: env.step(s, a, tree_rules))

    def recurrent_fn(params, rng_key, action, games):
        del rng_key
        mover = games.current_player
        children = step(_from_tree_embedding(games), action)
        logits, value = evaluate(apply_fn, params, children, tree_rules, always_promote=always_promote)
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


def _principal_variation(tree: mctx.Tree, action: Array, length: int) -> Array:
    """The full tree's (``gumbel_tree.principal_variation`` reads the compact one).
    [B, length]: ``action``, then the most visited child at each node; -1 once a
    node is unexpanded or its game has ended."""
    batch = jnp.arange(action.shape[0])
    actions = [action]
    child = tree.children_index[batch, 0, action]
    for _ in range(length - 1):
        ok = child >= 0
        node = jnp.maximum(child, 0)
        ok &= ~tree.embeddings.done[batch, node]
        visits = tree.children_visits[batch, node]
        best = jnp.argmax(visits, axis=-1).astype(action.dtype)
        ok &= visits[batch, best] > 0
        actions.append(jnp.where(ok, best, -1))
        child = jnp.where(ok, tree.children_index[batch, node, best], -1)
    return jnp.stack(actions, axis=1)


def make_search(
    apply_fn: ApplyFn,
    rules: env.Rules,
    *,
    algorithm: str = "gumbel",
    num_simulations: int,
    max_num_considered_actions: int = 16,
    gumbel_scale: float = 1.0,
    value_scale: float = mcts.VALUE_SCALE,
    dirichlet_alpha: float = 0.15,
    dirichlet_fraction: float = 0.25,
    history_window: int = 16,
    pv_length: int = 1,
    mate_in_one: bool = False,
    mate_in_tree: bool = False,
    always_promote: bool = False,
    considered_drops: int = 0,
    full_tree: bool = False,
) -> Callable[[Params, Array, env.State], SearchResult]:
    """``search(params, rng_key, games [B]) -> SearchResult``.

    ``algorithm``: "gumbel" (Gumbel MuZero, sequential halving over
    ``max_num_considered_actions``, Gumbel noise scaled by ``gumbel_scale``, Q weighed
    against the prior by ``value_scale``: sigma(q) = (50 + max N) value_scale q) or "puct"
    (AlphaZero's PUCT, with ``with_dirichlet_noise`` at the root). ``num_simulations == 0`` searches nothing:
    the prior's best legal move. The tree judges repetition within ``history_window``
    plies; every other rule is ``rules``'s. ``mate_in_one``: a root with a mate in one
    plays it (``with_mate_in_one``); ``mate_in_tree``: the tree scores a node whose side
    to move has a mate in one as won (a mate search per simulation). Both need the dense
    move generator. ``always_promote``: pawns, bishops and rooks that may promote always
    do, in the tree and at the root (``searched_moves``). ``considered_drops`` (Gumbel):
    the root always considers that many drops, the best by gumbel + logit, however low the
    prior ranks them (``gumbel_tree.gumbel_muzero``'s reserved actions). ``full_tree``: Gumbel on
    ``az.mcts``'s [B, N, A] tree, the reference that tests and benchmarks hold the compact
    tree against (the same search).
    """
    if algorithm not in ALGORITHMS:
        raise ValueError(f"search.algorithm must be 'gumbel' or 'puct', got {algorithm!r}")
    if num_simulations < 0 or pv_length < 1:
        raise ValueError(f"num_simulations must be >= 0 and pv_length >= 1, got {num_simulations}, {pv_length}")
    if considered_drops and (algorithm != "gumbel" or full_tree):
        raise ValueError(f"considered_drops={considered_drops} needs the Gumbel search on the compact tree")
    if (mate_in_one or mate_in_tree) and rules.movegen != "dense":
        raise ValueError(f"mate in one needs the dense move generator, not {rules.movegen!r}")
    tree_rules = dataclasses.replace(rules, history=history_window)
    recurrent_fn = make_recurrent_fn(apply_fn, tree_rules, mate_in_tree=mate_in_tree, always_promote=always_promote)

    def policy_only(logits: Array, value: Array) -> SearchResult:
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

    def search(params: Params, rng_key: Array, games: env.State) -> SearchResult:
        result = search_tree(params, rng_key, games)
        return with_mate_in_one(result, games, num_simulations=num_simulations) if mate_in_one else result

    def search_tree(params: Params, rng_key: Array, games: env.State) -> SearchResult:
        logits, value = evaluate(apply_fn, params, games, rules, always_promote=always_promote)
        if num_simulations == 0:
            return policy_only(logits, value)
        searched, _ = searched_moves(games, always_promote)
        invalid_actions = ~searched
        noise_tv = jnp.zeros_like(value)
        if algorithm == "puct" and dirichlet_fraction > 0:
            rng_key, k_noise = jax.random.split(rng_key)
            logits, noise_tv = with_dirichlet_noise(
                k_noise, logits, searched, alpha=dirichlet_alpha, fraction=dirichlet_fraction
            )
        root = mctx.RootFnOutput(prior_logits=logits, value=value, embedding=tree_embedding(games, history_window))
        compact = algorithm == "gumbel" and not full_tree
        if algorithm == "gumbel":
            policy = (functools.partial(gumbel_tree.gumbel_muzero, reserved_actions=movegen.DROP_ACTIONS,
                                        num_reserved=considered_drops) if compact else mcts.gumbel_muzero)
            out = policy(params, rng_key, root, recurrent_fn, num_simulations=num_simulations,
                         invalid_actions=invalid_actions, max_num_considered_actions=max_num_considered_actions,
                         gumbel_scale=gumbel_scale, value_scale=value_scale)
        else:  # the noise is in the root prior already; AlphaZero plays the most visited move
            out = mcts.puct(params, rng_key, root, recurrent_fn, num_simulations=num_simulations,
                            invalid_actions=invalid_actions)
        if compact:
            summary = gumbel_tree.summarize(out.search_tree)
            pv = gumbel_tree.principal_variation(out.search_tree, out.action, pv_length)
        else:
            summary = out.search_tree.summary()
            pv = _principal_variation(out.search_tree, out.action, pv_length)
        visits = summary.visit_counts
        action = out.action
        picked = jnp.take_along_axis(summary.qvalues, action[:, None], axis=1)[:, 0]
        visited = jnp.take_along_axis(visits, action[:, None], axis=1)[:, 0] > 0
        return SearchResult(
            action=action,
            policy=out.action_weights,
            visit_counts=visits,
            q=summary.qvalues,
            chosen_q=jnp.where(visited, picked, summary.value),
            root_value=value,
            search_value=summary.value,
            pv=pv,
            noise_tv=noise_tv,
            mate=jnp.zeros_like(noise_tv, dtype=jnp.bool_),
        )

    return search
