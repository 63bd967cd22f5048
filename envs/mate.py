"""Mate in one, batched and jittable: a legal move after which the opponent has no legal move.

``mate_in_one(games [B]) -> (found [B], action [B])``. The dense core gives the legal
moves that check (``envs.dense.checks``); up to ``width`` of them per game are played at
once (a [B, width] batch through the core) and the opponent's legal moves counted,
until every checking move has been tried or a mate found. A pawn-drop mate is no mate:
that drop is illegal and never among the candidates. Cost per root: one legal-and-check
analysis, then ``width`` env steps per round (rounds: the largest number of checking
moves in the batch over ``width``; bench/mate_bench.py measures it).
"""

import jax
import jax.numpy as jnp
from jax import Array, lax

from envs import dense, env, movegen


def checking_moves(games: env.State) -> Array:
    """Legal moves that give check: [B, A] bool (none once a game has ended)."""
    _, checking = jax.vmap(dense.checks)(games.x.board, games.x.hand)
    return checking & ~games.done[:, None]


def mate_in_one(games: env.State, *, width: int = 8) -> tuple[Array, Array]:
    """(found [B] bool, action [B] int32: the lowest mating action, 0 where none)."""
    x = games.x
    actions = jnp.arange(movegen.NUM_ACTIONS, dtype=jnp.int32)
    batch = x.board.shape[0]

    def more(carry):
        remaining, _, _ = carry
        return remaining.any()

    def round_(carry):
        remaining, found, action = carry
        # The ``width`` lowest remaining checking moves of each game.
        priority, picked = lax.top_k(jnp.where(remaining, movegen.NUM_ACTIONS - actions, 0), width)
        valid = priority > 0
        picked = picked.astype(jnp.int32)
        repeated = jax.tree.map(lambda a: jnp.broadcast_to(a[:, None], (batch, width) + a.shape[1:]), x)
        after = jax.vmap(jax.vmap(lambda x, a: movegen.advance(x, a, "dense")[0]))(repeated, jnp.where(valid, picked, 0))
        mated = valid & ~after.legal_action_mask.any(axis=-1)  # [B, width]
        hit = mated.any(axis=1)
        first = jnp.take_along_axis(picked, jnp.argmax(mated, axis=1)[:, None], axis=1)[:, 0]
        action = jnp.where(hit & ~found, first, action)
        found = found | hit
        last = jnp.max(jnp.where(valid, picked, -1), axis=1)
        remaining = remaining & (actions > last[:, None]) & ~found[:, None]
        return remaining, found, action

    start = (checking_moves(games), jnp.zeros(batch, jnp.bool_), jnp.zeros(batch, jnp.int32))
    _, found, action = lax.while_loop(more, round_, start)
    return found, action
