"""Batched tree search with mctx over the true environment as the model.

B games, A = 2187 actions. The tree's embedding is the game ``State`` with its
repetition history cut to a short window (``history_window`` plies), so a node holds
the board, hands, legal mask and a few hashes, never an observation; observations
are computed only to evaluate the network.
"""

import functools
from typing import Callable

import jax
import jax.numpy as jnp
import mctx
from jax import Array

from envs import env

Params = dict
# (params, observations [B, 9, 9, 119]) -> (logits [B, A], value [B])
ApplyFn = Callable[[Params, Array], tuple[Array, Array]]


def mask_logits(logits: Array, legal: Array) -> Array:
    """Illegal actions get the lowest logit: [B, A] -> [B, A]."""
    return jnp.where(legal, logits, jnp.finfo(logits.dtype).min)


def evaluate(apply_fn: ApplyFn, params: Params, games: env.State) -> tuple[Array, Array]:
    """Masked logits [B, A] and value [B] of the side to move."""
    logits, value = apply_fn(params, jax.vmap(env.observe)(games))
    return mask_logits(logits, games.legal_action_mask), value


def make_recurrent_fn(apply_fn: ApplyFn, tree_rules: env.Rules) -> mctx.RecurrentFn:
    """mctx's model step: play the action, evaluate the child with the network.

    reward: the mover's reward; discount: -1 between the players, 0 once the game is
    over, when the value is 0 too. Priors are masked at every node (mctx masks only
    the root).
    """
    step = jax.vmap(functools.partial(env.step, rules_=tree_rules))

    def recurrent_fn(params, rng_key, action, games):
        del rng_key
        mover = games.current_player
        children = step(games, action)
        logits, value = evaluate(apply_fn, params, children)
        reward = jnp.take_along_axis(children.rewards, mover[:, None], axis=1)[:, 0]
        done = children.done
        output = mctx.RecurrentFnOutput(
            reward=reward,
            discount=jnp.where(done, 0.0, -1.0),
            prior_logits=logits,
            value=jnp.where(done, 0.0, value),
        )
        return output, children

    return recurrent_fn


def make_search(
    apply_fn: ApplyFn,
    rules: env.Rules,
    *,
    algorithm: str,
    num_simulations: int,
    max_num_considered_actions: int = 16,
    gumbel_scale: float = 1.0,
    dirichlet_alpha: float = 0.15,
    dirichlet_fraction: float = 0.25,
    history_window: int = 16,
) -> Callable[[Params, Array, env.State], mctx.PolicyOutput]:
    """``search(params, rng_key, games [B]) -> mctx.PolicyOutput`` (action [B],
    action_weights [B, A], search_tree).

    ``algorithm``: "gumbel" (Gumbel MuZero, sequential halving over
    ``max_num_considered_actions``) or "puct" (MuZero's PUCT with Dirichlet noise).
    """
    tree_rules = env.Rules(
        max_length=rules.max_length,
        declaration=rules.declaration,
        repetitions=rules.repetitions,
        perpetual_check_loses=rules.perpetual_check_loses,
        history=history_window,
    )
    recurrent_fn = make_recurrent_fn(apply_fn, tree_rules)
    shorten = jax.vmap(functools.partial(env.with_history, size=history_window))

    def search(params: Params, rng_key: Array, games: env.State) -> mctx.PolicyOutput:
        logits, value = evaluate(apply_fn, params, games)
        root = mctx.RootFnOutput(prior_logits=logits, value=value, embedding=shorten(games))
        invalid_actions = ~games.legal_action_mask
        if algorithm == "gumbel":
            return mctx.gumbel_muzero_policy(
                params,
                rng_key,
                root,
                recurrent_fn,
                num_simulations=num_simulations,
                invalid_actions=invalid_actions,
                max_num_considered_actions=max_num_considered_actions,
                gumbel_scale=gumbel_scale,
            )
        if algorithm == "puct":
            return mctx.muzero_policy(
                params,
                rng_key,
                root,
                recurrent_fn,
                num_simulations=num_simulations,
                invalid_actions=invalid_actions,
                dirichlet_alpha=dirichlet_alpha,
                dirichlet_fraction=dirichlet_fraction,
            )
        raise ValueError(f"search.algorithm must be 'gumbel' or 'puct', got {algorithm!r}")

    return search


def chosen_q(policy_output: mctx.PolicyOutput, action: Array) -> Array:
    """The search's Q of ``action`` at the root, from the mover's view: [B]."""
    q = policy_output.search_tree.summary().qvalues
    return jnp.take_along_axis(q, action[:, None], axis=1)[:, 0]
