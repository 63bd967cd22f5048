"""Self-play: B games in parallel for T plies, one ``lax.scan``.

Games carry over between calls; a game that ends is replaced at once by a new one
from the start scheme, so the batch stays full. Per ply it records the position,
the search's improved policy and value (``replay.Plies``) and game statistics.

A start that is already over (a ``random_start(N)`` line that reached mate, a book
position that is mate or can declare) is never played: it counts as a finished game
with its true result and is replaced, and its row gives no training position.
"""

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
from jax import Array

from az import diversity
from az.search import SearchResult
from az.train import replay as replay_lib
from envs import env


class Stats(NamedTuple):
    """Counts over the plies of one call (summed over games)."""

    finished: Array  # [] int32, games that ended
    length_sum: Array  # [] int32, their lengths in plies
    end_reasons: Array  # [6] int32, by env.END_REASONS
    black_wins: Array  # [] int32
    white_wins: Array  # [] int32
    draws: Array  # [] int32
    by_scheme: Array  # [S, 3] int32, (black win, white win, draw) per start scheme
    squares: Array  # [2, 2, 81] int32, (black, white) x (king, rook) at ply 30, black's frame
    reached_ply30: Array  # [] int32, games that reached ply 30
    finished_at_start: Array  # [] int32, games whose start position was already over
    noise_tv: Array  # [] float32, summed over plies and games: how far root noise moved the prior


def empty_stats(num_schemes: int) -> Stats:
    zero = jnp.int32(0)
    return Stats(
        finished=zero,
        length_sum=zero,
        end_reasons=jnp.zeros(len(env.END_REASONS), jnp.int32),
        black_wins=zero,
        white_wins=zero,
        draws=zero,
        by_scheme=jnp.zeros((num_schemes, 3), jnp.int32),
        squares=jnp.zeros((2, 2, 81), jnp.int32),
        reached_ply30=zero,
        finished_at_start=zero,
        noise_tv=jnp.float32(0),
    )


class Carry(NamedTuple):
    games: env.State  # [B]
    rng_key: Array
    games_finished: Array  # [] int32, since the start of training
    stats: Stats


def make_selfplay(
    search: Callable,
    start: Callable[[Array, Array], env.State],
    rules: env.Rules,
    *,
    sample_visits_plies: int,
    num_plies: int,
    game_budget: int,
    num_schemes: int,
) -> Callable:
    """``selfplay(params, games, rng_key, games_finished) -> (games, games_finished, plies [T, B], stats)``.

    Moves: the search's action, except in the first ``sample_visits_plies`` plies of a
    game, where a move is sampled in proportion to the root visit counts (the
    paper's Exploration variants).
    """
    step = jax.vmap(lambda s, a: env.step(s, a, rules))
    start_batch = jax.vmap(start, in_axes=(0, None))

    def choose(result: SearchResult, games: env.State, key: Array) -> Array:
        if sample_visits_plies == 0:
            return result.action
        visits = result.visit_counts  # [B, A]
        sampled = jax.random.categorical(key, jnp.where(visits > 0, jnp.log(visits), -jnp.inf))
        return jnp.where(games.ply < sample_visits_plies, sampled, result.action)

    def play_one(params, carry: Carry, _):
        key, k_search, k_choose, k_start = jax.random.split(carry.rng_key, 4)
        games = carry.games
        result = search(params, k_search, games)
        action = choose(result, games, k_choose)
        sampled_q = jnp.take_along_axis(result.q, action[:, None], axis=1)[:, 0]  # a visited move
        played_q = jnp.where(action == result.action, result.chosen_q, sampled_q)
        over = games.done  # only a fresh start can be over here: its result stands, unplayed
        after = step(games, action)
        after = jax.tree.map(lambda old, new: jnp.where(_expand(over, new), old, new), games, after)
        ended = after.done
        outcome_black = after.rewards[:, 0]
        plies = replay_lib.Plies(
            board=games.x.board.astype(jnp.int8),
            hand=games.x.hand.astype(jnp.int8),
            color=games.current_player.astype(jnp.int8),
            policy=result.policy.astype(jnp.bfloat16),
            search_value=played_q,
            played=~over,
            starts_game=games.ply == 0,
            ends_game=ended,
            truncated=after.truncated,
            outcome_black=outcome_black,
        )
        black_win = ended & (outcome_black > 0)
        white_win = ended & (outcome_black < 0)
        draw = ended & (outcome_black == 0)
        s = carry.stats
        scheme = jax.nn.one_hot(games.start_scheme, num_schemes, dtype=jnp.int32)  # [B, S]
        outcome = jnp.stack([black_win, white_win, draw], axis=-1).astype(jnp.int32)  # [B, 3]
        stats = Stats(
            finished=s.finished + ended.sum(),
            length_sum=s.length_sum + jnp.where(ended, after.ply, 0).sum(),
            end_reasons=s.end_reasons
            + (jax.nn.one_hot(after.end_reason, len(env.END_REASONS), dtype=jnp.int32) * ended[:, None]).sum(0),
            black_wins=s.black_wins + black_win.sum(),
            white_wins=s.white_wins + white_win.sum(),
            draws=s.draws + draw.sum(),
            by_scheme=s.by_scheme + scheme.T @ outcome,
            squares=s.squares + diversity.square_counts(after),
            reached_ply30=s.reached_ply30 + (after.ply == diversity.PLY).sum(),
            finished_at_start=s.finished_at_start + over.sum(),
            noise_tv=s.noise_tv + jnp.where(over, 0.0, result.noise_tv).sum(),
        )
        finished = carry.games_finished + ended.sum()
        progress = jnp.minimum(finished / game_budget, 1.0)
        fresh = start_batch(jax.random.split(k_start, ended.shape[0]), progress)
        games = jax.tree.map(lambda new, old: jnp.where(_expand(ended, new), new, old), fresh, after)
        return Carry(games, key, finished, stats), plies

    def selfplay(params, games: env.State, rng_key: Array, games_finished: Array):
        carry = Carry(games, rng_key, games_finished, empty_stats(num_schemes))
        carry, plies = jax.lax.scan(lambda c, x: play_one(params, c, x), carry, None, length=num_plies)
        return carry.games, carry.games_finished, plies, carry.stats

    return selfplay


def _expand(mask: Array, like: Array) -> Array:
    return mask.reshape(mask.shape + (1,) * (like.ndim - 1))
