"""Random games played in lockstep with cshogi, the oracle for legal moves and SFEN.

All games of a test are one vmapped ``State`` batch advanced by one
``jit(vmap(step))`` call per ply; each game's move is chosen on the host from cshogi's
legal moves (uniformly, or biased toward captures, drops, checks and promotions). At
every position of every game the legal USI set, the SFEN and the check flag must
match cshogi, and a game must end exactly when the rules say so.
"""

import collections

import cshogi
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from envs import env, notation, starts
from helpers import (
    cshogi_board,
    drop_move_number,
    our_moves,
    pick_move,
    reference_repetition,
    sfen_of_mover_frame,
    take,
    to_host,
)


def _shogi816k_sfens(seed: int, n: int, symmetry: str) -> list[str]:
    sample = jax.jit(jax.vmap(lambda k: starts.shogi816k_position(k, symmetry)))
    pos = to_host(sample(jax.random.split(jax.random.key(seed), n)))
    return [sfen_of_mover_frame(pos.board[i], pos.hand[i], pos.color[i], pos.move_number[i]) for i in range(n)]


def _starts(seed: int, openings, n_standard: int, n_816k: int, n_book: int) -> list[tuple[str, bool]]:
    """(start SFEN, biased) for each game: half of each group plays biased moves."""
    sfens = [notation.STARTPOS_SFEN] * n_standard
    sfens += _shogi816k_sfens(seed, n_816k - n_816k // 2, "rotation") + _shogi816k_sfens(seed + 1, n_816k // 2, "line")
    book = [row["final_sfen"] for row in openings]
    sfens += [book[i % len(book)] for i in range(n_book)]
    groups = [n_standard, n_816k, n_book]
    biased = np.concatenate([np.arange(n) % 2 == 1 for n in groups])
    return list(zip(sfens, biased.tolist()))


def run_lockstep(batched_step, games: list[tuple[str, bool]], max_plies: int, seed: int, rules=env.Rules()):
    """Plays the games in lockstep with cshogi, asserting agreement at every position.

    Returns statistics: positions compared, moves by kind, games by end reason.
    """
    rng = np.random.default_rng(seed)
    n = len(games)
    batch = jax.tree.map(lambda *a: jnp.stack(a), *[notation.from_sfen(sfen, rules) for sfen, _ in games])
    boards = [cshogi_board(sfen) for sfen, _ in games]
    keys = [[drop_move_number(b.sfen())] for b in boards]
    checks = [[b.is_check()] for b in boards]
    played = [[] for _ in range(n)]
    active = np.ones(n, bool)
    ended = {}  # game -> its state when it ended
    stats = collections.Counter()

    for ply in range(max_plies + 1):
        host = to_host(batch)
        actions = np.zeros(n, np.int32)  # ignored by finished games
        for g in np.flatnonzero(active):
            st, board = take(host, g), boards[g]

            def where():
                return f"game {g} from {games[g][0]!r} after moves {' '.join(played[g])!r}"

            assert notation.to_sfen(st) == board.sfen(), where()
            assert bool(st.checked) == board.is_check(), where()
            assert int(st.current_player) == board.turn, where()
            assert int(st.ply) == ply, where()
            done, reason, color = bool(st.terminated | st.truncated), int(st.end_reason), board.turn
            rewards = np.asarray(st.rewards)
            theirs = list(board.legal_moves)
            repetition = reference_repetition(keys[g], checks[g], rules.repetitions)
            if not theirs:  # the side to move has no legal move and loses
                expected = (True, False, env.MATE, -1.0)
            elif repetition is not None:
                expected = (True, False, env.PERPETUAL_CHECK if repetition else env.REPETITION, float(repetition))
            elif rules.declaration and board.is_nyugyoku():
                expected = (True, False, env.DECLARATION, 1.0)
            elif ply >= rules.max_length:
                expected = (False, True, env.MAX_LENGTH, 0.0)
            else:
                expected = (False, False, env.ONGOING, 0.0)
            got = (bool(st.terminated), bool(st.truncated), reason, float(rewards[color]))
            assert got == expected, where()
            assert rewards[1 - color] == -rewards[color], where()
            if done:
                stats[env.END_REASONS[reason]] += 1
                assert notation.legal_moves(st) == [], where()
                ended[g] = st
                active[g] = False
                continue
            ours = our_moves(st)
            if set(ours) != {cshogi.move_to_usi(m) for m in theirs}:
                theirs_usi = {cshogi.move_to_usi(m) for m in theirs}
                pytest.fail(
                    f"{where()}: legal moves differ; only ours {sorted(set(ours) - theirs_usi)}, "
                    f"only cshogi's {sorted(theirs_usi - set(ours))}"
                )
            stats["positions"] += 1
            if ply == max_plies:
                continue
            move = pick_move(rng, board, theirs, games[g][1])
            usi = cshogi.move_to_usi(move)
            stats["drops"] += cshogi.move_is_drop(move)
            stats["promotions"] += cshogi.move_is_promotion(move)
            stats["captures"] += (not cshogi.move_is_drop(move)) and board.piece(cshogi.move_to(move)) != cshogi.NONE
            actions[g] = ours[usi]
            board.push(move)
            played[g].append(usi)
            keys[g].append(drop_move_number(board.sfen()))
            checks[g].append(board.is_check())
            stats["checks"] += checks[g][-1]
        last_ply = ply
        if not active.any() or ply == max_plies:
            break
        batch = batched_step(batch, jnp.asarray(actions))

    # A finished game stays exactly as it ended, and its rewards are paid only once.
    final = to_host(batch)
    for g, st in ended.items():
        now = take(final, g)
        same = jax.tree.map(lambda a, b: np.array_equal(a, b), now._replace(rewards=st.rewards), st)
        assert all(jax.tree.leaves(same)), f"game {g} changed after it ended"
        if int(st.ply) < last_ply:  # stepped again after its end
            assert not np.asarray(now.rewards).any(), f"game {g} paid rewards again after it ended"
    stats["games"] = n
    return stats


@pytest.mark.parametrize("games", [pytest.param(128, id="128"), pytest.param(520, id="520", marks=pytest.mark.slow)])
def test_step__matches_cshogi_over_random_games(batched_step, openings, games):
    starts_ = _starts(seed=1, openings=openings, n_standard=games // 2, n_816k=games // 4, n_book=games // 4)
    assert len(starts_) == games
    stats = run_lockstep(batched_step, starts_, max_plies=300, seed=1)
    print(dict(stats))
    assert stats["positions"] >= 170 * games
    # The bias reaches the special cases: many drops, promotions and checks, and mates.
    for kind in ("drops", "promotions", "captures", "checks"):
        assert stats[kind] >= 2 * games, (kind, stats)
    assert stats["mate"] >= games // 17, stats


@pytest.mark.slow
def test_step__matches_cshogi_over_full_length_games(batched_step, openings):
    """Another 300 games to the 512-ply limit, where they are truncated."""
    games = _starts(seed=2, openings=openings, n_standard=150, n_816k=76, n_book=74)
    stats = run_lockstep(batched_step, games, max_plies=512, seed=2)
    print(dict(stats))
    assert stats["max_length"] >= 1, stats
    assert stats["mate"] >= 30, stats
