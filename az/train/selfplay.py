"""Self-play: B games in parallel for T plies, one ``lax.scan``.

Games carry over between calls; a game that has ended is replaced by a new one from
the start scheme at the beginning of the next ply, so the batch stays full (and a
trainer can hand in ``unstarted_games``: each starts at the first ply). Per ply
it records the position, the search's improved policy and value (``replay.Plies``) and
game statistics.

A start that is already over (a ``random_start(N)`` line that reached mate, a book
position that is mate or can declare) is never played: it counts as a finished game
with its true result and is replaced, and its row gives no training position.

Resignation (``Resign``): the side to move resigns when the root value and the
chosen move's Q both stay below ``threshold`` for ``plies`` of its consecutive moves.
A share of games (``no_resign_fraction``) never resigns; for every position where the
side to move would have resigned there, the game's end says whether it then lost. The
share of such positions where it did not (false resignations) moves the threshold on
the device toward ``target``.

Playout caps (KataGo): a ply is searched with the full number of simulations with
probability ``full_search_fraction``, else with the reduced search, for the whole batch
(one compiled search per cap); only full searches give policy targets.

Data parallel (``axis_name``, inside ``shard_map`` over ``num_shards`` devices): each
device plays its own B / num_shards games and no collective runs inside a search. Its
random draws fold in the device's index, all but the playout cap's coin, which stays
common so every device searches a ply alike; the game count (which moves the start
schedule), the statistics and the resignation calibration are summed over the devices.

Mates in one walked into (``avoid_mates``, the config's ``selfplay.avoid_mates_in_one``;
``replace_moves_allowing_mate``): the chosen move is stepped and the position after it
checked for the opponent's mate in one (``envs.mate``); where there is one, the next
moves of the improved policy are tried in its order, up to ``guard_candidates`` moves in all, and the first that allows none is
played instead. The policy target loses the moves found to allow a mate in one. This is
what the playing agent does (``az.play.agent``), on the device; it needs the dense core.
Measured (docs/stall_study.md, mate checks): most guarded games are drawn at the length
limit, so it stays off.
"""

import functools
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
from jax import Array

from az.measure import diversity
from az.search import SearchResult
from az.train import replay as replay_lib
from envs import env, mate

THRESHOLD_STEP = 0.01  # how far one iteration moves the resign threshold
THRESHOLD_RANGE = (-0.999, -0.5)
CHECK_DECAY = 0.95  # per iteration: the false-resignation rate follows recent games
MIN_CHECKED = 20.0  # would-resign positions seen before the threshold moves


class Stats(NamedTuple):
    """Counts over the plies of one call (summed over games)."""

    finished: Array  # [] int32, games that ended
    length_sum: Array  # [] int32, their lengths in plies
    end_reasons: Array  # [7] int32, by env.END_REASONS
    black_wins: Array  # [] int32
    white_wins: Array  # [] int32
    draws: Array  # [] int32
    by_scheme: Array  # [S, 3] int32, (black win, white win, draw) per start scheme
    squares: Array  # [2, 2, 81] int32, (black, white) x (king, rook) at ply 30, black's frame
    reached_ply30: Array  # [] int32, games that reached ply 30
    finished_at_start: Array  # [] int32, games whose start position was already over
    noise_tv: Array  # [] float32, summed over plies and games: how far root noise moved the prior
    mates_played: Array  # [] int32, roots with a mate in one, played without a search
    mates_avoided: Array  # [] int32, chosen moves that allowed a mate in one, replaced
    full_searches: Array  # [] int32, plies searched with the full number of simulations
    resign_checked: Array  # [] int32, would-resign positions of finished no-resign games
    resign_false: Array  # [] int32, ... where that side did not lose


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
        mates_played=zero,
        mates_avoided=zero,
        full_searches=zero,
        resign_checked=zero,
        resign_false=zero,
    )


class Resign(NamedTuple):
    """Resignation per game [B] and the threshold's calibration (scalars)."""

    no_resign: Array  # [B] bool, this game never resigns: it checks the rule
    below: Array  # [B, 2] int32, consecutive moves of each colour valued below the threshold
    would: Array  # [B, 2] int32, positions where each colour would have resigned (no-resign games)
    threshold: Array  # [] float32
    checked: Array  # [] float32, would-resign positions of finished no-resign games (decaying sum)
    false: Array  # [] float32, ... where that colour did not lose


def init_resign(rng_key: Array, games: int, *, threshold: float, no_resign_fraction: float) -> Resign:
    return Resign(
        no_resign=jax.random.uniform(rng_key, (games,)) < no_resign_fraction,
        below=jnp.zeros((games, 2), jnp.int32),
        would=jnp.zeros((games, 2), jnp.int32),
        threshold=jnp.float32(threshold),
        checked=jnp.float32(0),
        false=jnp.float32(0),
    )


def resign_ply(track: Resign, value: Array, mover: Array, *, plies: int) -> tuple[Resign, Array]:
    """One ply: ``value`` [B] (the side to move's, e.g. max of root value and chosen Q),
    ``mover`` [B] its colour. Returns (track, resigns [B]: the mover resigns now); where
    a no-resign game's mover would have, ``track.would`` counts the position."""
    side = jax.nn.one_hot(mover, 2, dtype=jnp.int32)  # [B, 2]
    low = (value < track.threshold)[:, None]
    below = jnp.where(side == 1, jnp.where(low, track.below + 1, 0), track.below)
    trigger = (below * side).sum(axis=1) >= plies
    would = trigger & track.no_resign
    return track._replace(below=below, would=track.would + side * would[:, None]), trigger & ~track.no_resign


def resign_game_ends(track: Resign, ended: Array, outcome_black: Array, fresh_no_resign: Array):
    """Scores the would-resign positions of games that ended (``outcome_black`` [B], +1
    black won) and resets their rows for the next game. Returns (track, checked, false)."""
    lost = jnp.stack([outcome_black < 0, outcome_black > 0], axis=1)  # [B, 2]: black lost, white lost
    counted = jnp.where(ended[:, None], track.would, 0)
    checked = counted.sum()
    false = jnp.where(lost, 0, counted).sum()
    reset = ended[:, None]
    track = track._replace(
        no_resign=jnp.where(ended, fresh_no_resign, track.no_resign),
        below=jnp.where(reset, 0, track.below),
        would=jnp.where(reset, 0, track.would),
    )
    return track, checked, false


def calibrate(track: Resign, checked: Array, false: Array, *, target: float) -> Resign:
    """Moves the threshold once per call: lower (resign less) while the recent
    false-resignation rate exceeds ``target``, higher while it is under half of it."""
    total = CHECK_DECAY * track.checked + checked
    wrong = CHECK_DECAY * track.false + false
    rate = wrong / jnp.maximum(total, 1e-9)
    move = jnp.where(rate > target, -THRESHOLD_STEP, jnp.where(rate < target / 2, THRESHOLD_STEP / 4, 0.0))
    threshold = jnp.where(total >= MIN_CHECKED, jnp.clip(track.threshold + move, *THRESHOLD_RANGE), track.threshold)
    return track._replace(threshold=threshold, checked=total, false=wrong)


class Carry(NamedTuple):
    games: env.State  # [B]
    resign: Resign
    rng_key: Array
    games_finished: Array  # [] int32, since the start of training
    stats: Stats


def unstarted_games(start: Callable[[Array, Array], env.State], games: int) -> env.State:
    """[games] games that are over without having been played, shaped like ``start``'s:
    self-play replaces each by a fresh start at its first ply (nothing recorded, nothing
    counted), so a trainer's init need not compile the start scheme a second time."""
    one = jax.eval_shape(start, jax.random.PRNGKey(0), jnp.float32(0))
    blank = jax.tree.map(lambda leaf: jnp.zeros((games, *leaf.shape), leaf.dtype), one)
    return blank._replace(terminated=jnp.ones((games,), bool))


def replace_moves_allowing_mate(games: env.State, action: Array, preference: Array, skip: Array, step: Callable,
                       *, candidates: int) -> tuple[Array, env.State, Array]:
    """The move to play in each game of ``games`` [B], on the device.

    ``action`` [B] is played unless the opponent then has a mate in one; there, the legal
    moves that ``preference`` [B, A] ranks highest are tried in turn (``candidates`` moves
    in all, ``action`` the first) and the first that allows no mate in one is played.
    Where all of them allow one, ``action`` stays. Rows where ``skip`` [B] are not checked.
    ``step(games, actions)`` steps a batch.

    Returns (played [B] int32, after: ``games`` stepped by it, refuted [B, A] bool: the
    moves found to allow a mate in one, only where another move was played instead).
    One step and one mate check of the whole batch per round; a second round only while
    some game's move is refuted.
    """
    batch, num_actions = preference.shape
    rows = jnp.arange(batch)
    legal = games.legal_action_mask
    rank = jnp.where(legal, preference, -jnp.inf).at[rows, action].set(jnp.inf)
    order = jax.lax.top_k(rank, candidates)[1].astype(jnp.int32)  # [B, K], action first
    tries = jnp.minimum(legal.sum(axis=1), candidates)

    def allows_mate(actions: Array) -> tuple[env.State, Array]:
        after = step(games, actions)
        return after, ~after.done & mate.mate_in_one(after)[0]

    after, refuted = allows_mate(action)
    refuted = refuted & ~skip
    seen = jnp.zeros((batch, num_actions), bool).at[rows, action].set(refuted)

    def more(carry):
        k, _, _, open_, _ = carry
        return (k < candidates) & (open_ & (k < tries)).any()

    def next_move(carry):
        k, played, after, open_, seen = carry
        trying = open_ & (k < tries)
        move = jnp.where(trying, order[:, jnp.minimum(k, candidates - 1)], played)
        moved, mated = allows_mate(move)
        found = trying & ~mated
        seen = seen.at[rows, move].set(seen[rows, move] | (trying & mated))
        played = jnp.where(found, move, played)
        after = jax.tree.map(lambda new, old: jnp.where(_expand(found, new), new, old), moved, after)
        return k + 1, played, after, open_ & ~found, seen

    _, played, after, still, seen = jax.lax.while_loop(more, next_move, (1, action, after, refuted, seen))
    return played, after, seen & ~still[:, None]


def make_selfplay(
    search: Callable,
    start: Callable[[Array, Array], env.State],
    rules: env.Rules,
    *,
    sample_visits_plies: int,
    num_plies: int,
    game_budget: int,
    num_schemes: int,
    reduced_search: Callable | None = None,
    full_search_fraction: float = 1.0,
    resign: bool = False, resign_plies: int = 2, no_resign_fraction: float = 0.1, false_resign_target: float = 0.05,
    avoid_mates: bool = False, guard_candidates: int = 8,
    axis_name: str | None = None, num_shards: int = 1,
) -> Callable:
    """``selfplay(params, games, resign, rng_key, games_finished[, budget]) -> (games, resign,
    games_finished, plies [T, B], stats)``; ``budget`` [] int32 in place of ``game_budget``.

    Moves: the search's action, except in the first ``sample_visits_plies`` plies of a
    game, where a move is sampled in proportion to the root visit counts (the paper's
    Exploration variants). ``search`` and ``reduced_search``: ``search(params, key,
    games) -> SearchResult``; the reduced one serves the plies that playout-cap
    randomization does not search in full (``full_search_fraction`` < 1). With
    ``axis_name``: data parallel over ``num_shards`` devices (the module's docstring).
    """
    step = jax.vmap(lambda s, a: env.step(s, a, rules))
    start_batch = jax.vmap(start, in_axes=(0, None))

    def searched(params, k_cap: Array, k_search: Array, games: env.State) -> tuple[Array, SearchResult]:
        """(full: this ply's search is the full one [] bool, its result)."""
        full = jax.random.uniform(k_cap) < full_search_fraction
        if full_search_fraction < 1.0:
            return full, jax.lax.cond(full, search, reduced_search, params, k_search, games)
        return full, search(params, k_search, games)

    def move(games: env.State, result: SearchResult, over: Array, key: Array):
        """-> (action [B], after: ``games`` stepped by it, policy target [B, A], avoided [B]:
        the mate guard replaced the chosen move)."""
        action = _choose(result, games, key, sample_visits_plies=sample_visits_plies)
        if not avoid_mates:
            return action, step(games, action), result.policy, jnp.zeros_like(over)
        played, after, refuted = replace_moves_allowing_mate(games, action, result.policy, over, step,
                                                             candidates=guard_candidates)
        policy = jnp.where(refuted, 0.0, result.policy)
        policy = policy / jnp.maximum(policy.sum(axis=-1, keepdims=True), 1e-9)
        return played, after, policy, played != action

    def play_ply(params, budget, carry: Carry, _) -> tuple[Carry, replay_lib.Plies]:
        """Every game one ply on: restart the finished, search, move, resign, record, count."""
        key, k_cap, k_search, k_choose, k_start, k_resign = jax.random.split(carry.rng_key, 6)
        k_search, k_choose, k_start, k_resign = _per_device(axis_name, num_shards, k_search, k_choose, k_start, k_resign)
        progress = jnp.minimum(carry.games_finished / budget, 1.0)
        fresh = start_batch(jax.random.split(k_start, carry.games.done.shape[0]), progress)
        games = _where_games(carry.games.done, fresh, carry.games)
        full, result = searched(params, k_cap, k_search, games)
        over = games.done  # only a fresh start can be over here: its result stands, unplayed
        action, after, policy, avoided = move(games, result, over, k_choose)
        mover = games.current_player
        track, resigns = carry.resign, jnp.zeros_like(over)
        if resign:
            value = jnp.where(over | result.mate, 1.0, jnp.maximum(result.root_value, result.chosen_q))
            track, resigns = resign_ply(track, value, mover, plies=resign_plies)
        after = _resigned(games, _where_games(over, games, after), resigns, mover)
        plies = _record(games, after, policy, _played_q(result, action), over, full)
        fresh_no_resign = jax.random.uniform(k_resign, over.shape) < no_resign_fraction
        track, checked, false = resign_game_ends(track, after.done, after.rewards[:, 0], fresh_no_resign)
        stats = _count(carry.stats, games, after, result, num_schemes=num_schemes, over=over, avoided=avoided,
                       full=full, resign_checked=checked, resign_false=false)
        return Carry(after, track, key, carry.games_finished + _total(after.done.sum(), axis_name), stats), plies

    def selfplay(params, games: env.State, track: Resign, rng_key: Array, games_finished: Array, budget=game_budget):
        carry = Carry(games, track, rng_key, games_finished, empty_stats(num_schemes))
        carry, plies = jax.lax.scan(functools.partial(play_ply, params, budget), carry, None, length=num_plies)
        track, stats = carry.resign, _stats_total(carry.stats, axis_name)
        if resign:
            track = calibrate(track, stats.resign_checked, stats.resign_false, target=false_resign_target)
        return carry.games, track, carry.games_finished, plies, stats

    return selfplay


def _per_device(axis_name: str | None, num_shards: int, *keys: Array) -> tuple[Array, ...]:
    """``keys`` with the device's index folded in: its own games' draws (more than one shard)."""
    if num_shards <= 1:
        return keys
    shard = jax.lax.axis_index(axis_name)
    return tuple(jax.random.fold_in(k, shard) for k in keys)


def _total(count: Array, axis_name: str | None) -> Array:
    """A count over every device's games."""
    return count if axis_name is None else jax.lax.psum(count, axis_name)


def _stats_total(stats: Stats, axis_name: str | None) -> Stats:
    # full_searches counts plies, which every device searched alike.
    return jax.tree.map(lambda x: _total(x, axis_name), stats)._replace(full_searches=stats.full_searches)


def selfplay_from_config(config, search: Callable, start: Callable[[Array, Array], env.State], rules: env.Rules,
                         *, reduced_search: Callable | None, game_budget: int, num_schemes: int,
                         guard_candidates: int, axis_name: str | None = None, num_shards: int = 1) -> Callable:
    """``make_selfplay`` with a run's ``config.selfplay``; ``reduced_search`` serves the
    plies not searched in full (needed when ``config.full_search_fraction`` < 1)."""
    return make_selfplay(
        search,
        start,
        rules,
        sample_visits_plies=config.sample_visits_plies,
        num_plies=config.plies_per_iteration,
        game_budget=game_budget,
        num_schemes=num_schemes,
        reduced_search=reduced_search,
        full_search_fraction=config.full_search_fraction,
        resign=config.resign,
        resign_plies=config.resign_plies,
        no_resign_fraction=config.no_resign_fraction,
        false_resign_target=config.false_resign_target,
        avoid_mates=config.avoid_mates_in_one,
        guard_candidates=guard_candidates,
        axis_name=axis_name,
        num_shards=num_shards,
    )


def _choose(result: SearchResult, games: env.State, key: Array, *, sample_visits_plies: int) -> Array:
    """The move [B]: the search's, or in a game's first ``sample_visits_plies`` plies one
    sampled in proportion to the root visit counts (a mate in one is always played)."""
    if sample_visits_plies == 0:
        return result.action
    visits = result.visit_counts  # [B, A]
    sampled = jax.random.categorical(key, jnp.where(visits > 0, jnp.log(visits), -jnp.inf))
    return jnp.where((games.ply < sample_visits_plies) & ~result.mate, sampled, result.action)


def _played_q(result: SearchResult, action: Array) -> Array:
    """The search's Q of the move played [B]. A sampled move was visited; a move the mate
    guard put in place of a refuted one may not be: it gets the search's value."""
    visited = jnp.take_along_axis(result.visit_counts, action[:, None], axis=1)[:, 0] > 0
    sampled_q = jnp.take_along_axis(result.q, action[:, None], axis=1)[:, 0]
    return jnp.where(action == result.action, result.chosen_q, jnp.where(visited, sampled_q, result.search_value))


def _resigned(games: env.State, after: env.State, resigns: Array, mover: Array) -> env.State:
    """``after`` [B], where ``resigns``: the mover lost where it stands (the position of
    ``games``, which keeps the search's policy) by resignation."""
    lost = jnp.where(mover == 0, -1.0, 1.0)
    return after._replace(
        rewards=jnp.where(resigns[:, None], jnp.stack([lost, -lost], axis=1), after.rewards),
        terminated=after.terminated | resigns,
        truncated=after.truncated & ~resigns,
        end_reason=jnp.where(resigns, env.RESIGNATION, after.end_reason),
        x=jax.tree.map(lambda old, new: jnp.where(_expand(resigns, new), old, new), games.x, after.x),
    )


def _record(games: env.State, after: env.State, policy: Array, played_q: Array, over: Array,
            full: Array) -> replay_lib.Plies:
    """The replay's row of this ply [B]: the position before the move and its targets."""
    return replay_lib.Plies(
        board=games.x.board.astype(jnp.int8),
        hand=games.x.hand.astype(jnp.int8),
        color=games.current_player.astype(jnp.int8),
        policy=policy.astype(jnp.bfloat16),
        search_value=played_q,
        played=~over,
        full_search=jnp.broadcast_to(full, over.shape),
        starts_game=games.ply == 0,
        ends_game=after.done,
        truncated=after.truncated,
        outcome_black=after.rewards[:, 0],
    )


def _count(s: Stats, games: env.State, after: env.State, result: SearchResult, *, num_schemes: int, over: Array,
           avoided: Array, full: Array, resign_checked: Array, resign_false: Array) -> Stats:
    """``s`` plus this ply's games [B] (``games`` before the move, ``after`` it)."""
    ended = after.done
    outcome_black = after.rewards[:, 0]
    black_win = ended & (outcome_black > 0)
    white_win = ended & (outcome_black < 0)
    draw = ended & (outcome_black == 0)
    scheme = jax.nn.one_hot(games.start_scheme, num_schemes, dtype=jnp.int32)  # [B, S]
    outcome = jnp.stack([black_win, white_win, draw], axis=-1).astype(jnp.int32)  # [B, 3]
    return Stats(
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
        mates_played=s.mates_played + (result.mate & ~over).sum(),
        mates_avoided=s.mates_avoided + avoided.sum(),
        full_searches=s.full_searches + full.astype(jnp.int32),
        resign_checked=s.resign_checked + resign_checked,
        resign_false=s.resign_false + resign_false,
    )


def _where_games(mask: Array, new: env.State, old: env.State) -> env.State:
    """Per game [B]: ``new`` where ``mask``, else ``old``."""
    return jax.tree.map(lambda a, b: jnp.where(_expand(mask, a), a, b), new, old)


def _expand(mask: Array, like: Array) -> Array:
    return mask.reshape(mask.shape + (1,) * (like.ndim - 1))
