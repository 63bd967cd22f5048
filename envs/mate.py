"""Mate in one and in three, batched and jittable: a checking move after which the
opponent has no legal move, or after which every reply allows one.

``mate_in_one(games [B]) -> (found [B], action [B])``. The dense core gives the legal
moves that check (``envs.dense.checks``); they are played ``width`` * B at a time,
taken in order from one queue over the whole batch (a [width * B] batch through the
core), and the opponent's legal moves counted, until every checking move has been tried
or its game has a mate. A pawn-drop mate is no mate: that drop is illegal and never
among the candidates. Cost per root: one legal-and-check analysis, then ``width`` env
steps per round (rounds: the batch's checking moves over ``width`` * B, rounded up;
bench/mate_bench.py measures it).
``mate_in_three(games [B], rules)`` answers each reply to each check with ``mate_in_one``.
"""

import jax
import jax.numpy as jnp
from jax import Array, lax

from envs import dense, env, movegen


def checking_moves(games: env.State) -> Array:
    """Legal moves that give check: [B, A] bool (none once a game has ended)."""
    _, checking = jax.vmap(dense.checks)(games.x.board, games.x.hand)
    return checking & ~games.done[:, None]


def mate_in_one(games: env.State, *, width: int = 4) -> tuple[Array, Array]:
    """(found [B] bool, action [B] int32: the lowest mating action, 0 where none).

    The checking moves of the whole batch form one queue, game by game and each game's
    in ascending action order; each round plays the next ``width`` * B of them. A round
    costs the same whether its moves come from one game or many, so the number of rounds
    follows the batch's total of checking moves, not its largest game's count (a root
    with dozens of checking drops would otherwise cost every game of the batch as much)."""
    x = games.x
    batch = x.board.shape[0]
    slots = width * batch
    queue_index = jnp.arange(batch * movegen.NUM_ACTIONS, dtype=jnp.int32)  # game * A + action
    no_action = movegen.NUM_ACTIONS

    def more(carry):
        remaining, _ = carry
        return remaining.any()

    def round_(carry):
        remaining, lowest = carry
        queued = remaining.reshape(-1)
        rank = jnp.cumsum(queued, dtype=jnp.int32) - 1
        slot = jnp.where(queued & (rank < slots), rank, slots)  # past the end: dropped
        picked = jnp.zeros(slots, jnp.int32).at[slot].set(queue_index, mode="drop")
        valid = jnp.arange(slots) < queued.sum()
        game, action = picked // movegen.NUM_ACTIONS, picked % movegen.NUM_ACTIONS
        before = jax.tree.map(lambda a: a[game], x)
        after = jax.vmap(lambda x, a: movegen.advance(x, a, "dense")[0])(before, action)
        mated = valid & ~after.legal_action_mask.any(axis=-1)  # [slots]
        lowest = lowest.at[game].min(jnp.where(mated, action, no_action))
        # Later moves of a game are higher actions: once it has a mate they are not needed.
        remaining = (queued & (rank >= slots)).reshape(batch, -1) & (lowest == no_action)[:, None]
        return remaining, lowest

    start = (checking_moves(games), jnp.full(batch, no_action, jnp.int32))
    _, lowest = lax.while_loop(more, round_, start)
    found = lowest < no_action
    return found, jnp.where(found, lowest, 0)


def mate_in_three(games: env.State, rules: env.Rules, *, max_checks: int = 32, max_evasions: int = 32,
                  replies_per_root: int = 8, width: int = 8) -> tuple[Array, Array]:
    """A check after which every reply allows a mate in one, or a check that mates:
    (found [B] bool, action [B] int32: a mate at once where there is one, else the lowest
    mate in three; 0 where none).

    Checks and replies are played by ``env.step`` under ``rules`` with the games' own
    history, so a check that ends the game by repetition (a draw or a perpetual-check
    loss), a reply that escapes so, and the ply limit count as in the game (the final mate
    cannot repeat a position: the game would have ended there). Bounded: the
    ``max_checks`` lowest checking actions of a root are tried, and only checks with at
    most ``max_evasions`` replies, so a mate beyond that is missed, never invented.

    The (check, reply) pairs of all roots form one queue [B * C, E] (C = max_checks,
    E = max_evasions). Each round answers ``replies_per_root`` * B of the earliest untested
    replies (first replies before second ones) with ``mate_in_one`` and drops a check at
    its first reply without a mate, until no check has an untested reply. Cost per root:
    about one ``mate_in_one`` per checking move where there is no mate in three (some
    30 ms on one CPU core at B = 1 in middle games).
    """
    batch = games.x.board.shape[0]
    actions = jnp.arange(movegen.NUM_ACTIONS, dtype=jnp.int32)
    step = jax.vmap(lambda s, a: env.step(s, a, rules))

    def lowest(mask: Array, k: int) -> tuple[Array, Array]:
        priority, picked = lax.top_k(jnp.where(mask, movegen.NUM_ACTIONS - actions, 0), k)
        return picked.astype(jnp.int32), priority > 0

    def won(games: env.State, side: Array) -> Array:
        return games.done & (jnp.take_along_axis(games.rewards, side[:, None], axis=1)[:, 0] > 0)

    checks, check_valid = lowest(checking_moves(games), max_checks)  # [B, C]
    pairs = batch * max_checks
    each_check = jax.tree.map(lambda a: jnp.repeat(a, max_checks, axis=0), games)
    after_check = step(each_check, checks.reshape(pairs))  # [B * C]
    attacker = jnp.repeat(games.current_player, max_checks)
    mated_at_once = check_valid.reshape(pairs) & won(after_check, attacker)
    replies, reply_valid = lowest(after_check.legal_action_mask, max_evasions)  # [B * C, E]
    too_many = after_check.legal_action_mask.sum(axis=-1) > max_evasions
    open_check = check_valid.reshape(pairs) & ~after_check.done & ~too_many
    untested = reply_valid & open_check[:, None]  # [B * C, E]
    rank = jnp.broadcast_to(jnp.arange(max_evasions), untested.shape).reshape(-1)
    slots = replies_per_root * batch
    no_pair = pairs  # an index past the end: scatters there are dropped

    def more(carry):
        untested, alive = carry
        return (untested & alive[:, None]).any()

    def round_(carry):
        untested, alive = carry
        todo = (untested & alive[:, None]).reshape(-1)
        priority, item = lax.top_k(jnp.where(todo, max_evasions - rank, 0), slots)
        valid = priority > 0
        pair = item // max_evasions
        reply = replies.reshape(-1)[item]
        before = jax.tree.map(lambda a: a[pair], after_check)
        after_reply = step(before, jnp.where(valid, reply, 0))
        found, _ = mate_in_one(after_reply, width=width)
        mated = won(after_reply, attacker[pair]) | (~after_reply.done & found)
        refuted = valid & ~mated
        alive = alive.at[jnp.where(refuted, pair, no_pair)].set(False, mode="drop")
        untested = untested.reshape(-1).at[jnp.where(valid, item, untested.size)].set(False, mode="drop")
        return untested.reshape(pairs, max_evasions), alive

    _, alive = lax.while_loop(more, round_, (untested, open_check))
    at_once = mated_at_once.reshape(batch, max_checks)
    proven = at_once | (open_check & alive).reshape(batch, max_checks)
    found = proven.any(axis=1)
    first = jnp.argmax(jnp.where(at_once.any(axis=1, keepdims=True), at_once, proven), axis=1)  # at once first
    action = jnp.where(found, jnp.take_along_axis(checks, first[:, None], axis=1)[:, 0], 0)
    return found, action
