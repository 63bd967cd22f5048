"""Teacher-set agreement (az/measure/agreement.py): the probe, the policy and value measures against
hand-made networks with known answers, intervals and the by-phase breakdown."""

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from az.measure import agreement, teacher
from envs import env, notation

RULES = env.Rules()
POSITIONS = 24


@pytest.fixture(scope="module")
def shipped():
    return teacher.load()


@pytest.fixture(scope="module")
def probe(shipped):
    return agreement.make_probe(shipped, RULES, positions=POSITIONS)


def test_probe__batched_states_match_one_by_one_setup(shipped, probe):
    held = shipped.select(shipped.heldout)
    assert probe.best.shape == (POSITIONS,) and probe.score.shape == (POSITIONS,)
    np.testing.assert_array_equal(np.asarray(probe.score), held.score_cp[:POSITIONS])
    np.testing.assert_array_equal(np.asarray(probe.decided), np.abs(held.score_cp[:POSITIONS]) >= 300)
    for i in (0, 7, POSITIONS - 1):
        one = notation.from_sfen(held.sfens[i], RULES)
        batched = jax.tree.map(lambda a: np.asarray(a)[i], probe.games)
        for a, b in zip(jax.tree.leaves(batched), jax.tree.leaves(one)):
            np.testing.assert_array_equal(a, np.asarray(b))
        assert notation.action_to_usi(one, int(probe.best[i])) == held.best_moves[i]


def test_probe__the_test_split_is_read_only_where_asked(shipped):
    """The shipped set holds fit and held-out rows only: the test part is a file of its own
    (``teacher.load_split('test')``), so asking this set for it is one line naming that."""
    with pytest.raises(ValueError, match="teacher split 'test'"):
        agreement.make_probe(shipped, RULES, split="test")


def test_probe__rejects_an_unknown_split(shipped):
    with pytest.raises(ValueError, match="validation"):
        agreement.make_probe(shipped, RULES, split="validation")


def _fake_apply(probe, *, best_rank: int, value_sign: float):
    """A network whose policy ranks the teacher's move ``best_rank``-th among the legal
    moves and whose value is ``value_sign * score / 30000``."""
    legal = np.asarray(probe.games.legal_action_mask)
    best = np.asarray(probe.best)
    logits = np.where(legal, 0.0, -1e9).astype(np.float32)
    for i in range(len(best)):
        others = [a for a in np.flatnonzero(legal[i]) if a != best[i]]
        for r, a in enumerate(others[:best_rank]):  # these beat the teacher's move
            logits[i, a] = 10.0 - r
        logits[i, best[i]] = 5.0
    value = value_sign * np.asarray(probe.score) / 30000.0

    def apply_fn(params, observation):
        return jnp.asarray(logits), jnp.asarray(value, jnp.float32)

    return apply_fn


@pytest.mark.parametrize("best_rank", [0, 2, 3])
def test_network_agreement__top_k_from_the_teacher_moves_rank(probe, best_rank):
    legal_counts = np.asarray(probe.games.legal_action_mask).sum(1)
    rank = np.minimum(best_rank, legal_counts - 1)  # a position with few moves ranks it higher
    m = agreement.network_agreement(_fake_apply(probe, best_rank=best_rank, value_sign=1.0), None, probe, RULES)
    assert float(m["top1"]) == pytest.approx(np.mean(rank == 0))
    assert float(m["top3"]) == pytest.approx(np.mean(rank < 3))
    if best_rank == 3:
        assert float(m["top3"]) < 1.0


def test_network_agreement__value_sign_and_rank_correlation(probe):
    assert bool(np.asarray(probe.decided).any())
    right = agreement.network_agreement(_fake_apply(probe, best_rank=0, value_sign=1.0), None, probe, RULES)
    wrong = agreement.network_agreement(_fake_apply(probe, best_rank=0, value_sign=-1.0), None, probe, RULES)
    assert float(right["value_sign_accuracy"]) == 1.0 and float(wrong["value_sign_accuracy"]) == 0.0
    # Distinct scores rank perfectly one way or the other.
    if len(np.unique(np.asarray(probe.score))) == POSITIONS:
        assert float(right["value_rank_correlation"]) == pytest.approx(1.0)
        assert float(wrong["value_rank_correlation"]) == pytest.approx(-1.0)


def test_rank_correlation__matches_pearson_of_ranks():
    x = np.asarray([0.3, -1.0, 2.5, 0.1, 7.0, -3.0])
    y = np.asarray([1.0, 0.0, 3.0, 5.0, 4.0, 2.0])
    rx, ry = np.argsort(np.argsort(x)), np.argsort(np.argsort(y))
    expected = np.corrcoef(rx, ry)[0, 1]
    assert float(agreement.rank_correlation(jnp.asarray(x), jnp.asarray(y))) == pytest.approx(expected, abs=1e-6)


def test_wilson_interval__known_values():
    low, high = agreement.wilson_interval(5, 10)
    assert (low, high) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    low, high = agreement.wilson_interval(0, 10)
    assert low == 0.0 and high == pytest.approx(0.2775, abs=1e-4)
    assert all(math.isnan(v) for v in agreement.wilson_interval(0, 0))


def test_breakdown__phases_and_starts_partition_the_positions(shipped):
    held = shipped.select(shipped.heldout)
    hits = np.arange(held.size) % 3 == 0
    table = agreement.breakdown(hits, held)
    assert table["all"]["positions"] == held.size
    assert table["all"]["agreement"] == pytest.approx(hits.mean())
    phases = [name for name, _, _ in agreement.PHASES]
    assert sum(table[p]["positions"] for p in phases) == held.size
    assert table["drops"]["positions"] == int(held.drop.sum())
    starts = [name for name in table if name.startswith("from ")]
    assert sorted(starts) == ["from random_start(2)", "from shogi816k", "from standard"]
    assert sum(table[s]["positions"] for s in starts) == held.size
    assert sum(table[s]["agreement"] * table[s]["positions"] for s in starts) == pytest.approx(hits.sum())
    for row in table.values():
        assert row["low"] <= row["agreement"] <= row["high"]


def test_baselines__random_is_the_mean_inverse_move_count(shipped):
    lines = agreement.baselines(shipped)
    held = shipped.select(shipped.heldout)
    assert lines["random"] == pytest.approx(np.mean(1.0 / held.legal_moves))
    assert 0.15 < lines["greedy"] < lines["GA heuristic"] < 0.5  # from data/heuristic_weights.json


def test_promotion_choices__match_cshogi_on_every_legal_move(shipped, probe):
    """Each legal move of the probe positions counts as 'could promote' exactly when cshogi
    lists both its promoted and its plain version, and as promoted when it is the former."""
    import cshogi

    held = shipped.select(shipped.heldout)
    masks = np.asarray(probe.games.legal_action_mask)
    boards, colors = np.asarray(probe.games.x.board), np.asarray(probe.games.current_player)
    total_could = 0
    for i in range(POSITIONS):
        board = cshogi.Board(held.sfens[i])
        legal_usi = {cshogi.move_to_usi(m) for m in board.legal_moves}
        actions = np.flatnonzero(masks[i])
        expected_promoted = expected_could = 0
        for a in actions:
            usi = notation.board_action_to_usi(boards[i], int(colors[i]), int(a))
            plain = usi.rstrip("+")
            both = "*" not in usi and plain in legal_usi and plain + "+" in legal_usi
            expected_could += both
            expected_promoted += both and usi.endswith("+")
        promoted, could = agreement.promotion_choices(actions, np.repeat(masks[i:i + 1], len(actions), axis=0))
        assert (promoted, could) == (expected_promoted, expected_could), held.sfens[i]
        assert could == 2 * promoted  # every pair is counted from both sides
        total_could += could
    assert total_could > 0  # the probe holds positions where a move can go either way


def _observation_value(seed: int = 0):
    """A network whose value is a fixed random function of the observation (uniform policy)."""
    rng = np.random.default_rng(seed)
    # Small enough that tanh stays off its flat ends (packed board bytes reach 255).
    w_board, w_flags = (jnp.asarray(rng.normal(size=n) / scale, jnp.float32) for n, scale in ((648, 3000), (57, 30)))

    def apply_fn(params, observation):
        board, flags = observation
        value = jnp.tanh(board.astype(jnp.float32) @ w_board + flags.astype(jnp.float32) @ w_flags)
        return jnp.zeros((board.shape[0], 2187), jnp.float32), value

    return apply_fn


@pytest.fixture(scope="module")
def one_ply(shipped, probe):
    """(the first 4 probe positions, 4 positions with a mate in one, the compiled choice
    of ``_observation_value``'s value): one shape for both tests."""
    mates, _ = teacher.to_device(shipped.select(np.flatnonzero(shipped.mate == 1)[:4]), RULES)
    games = jax.tree.map(lambda a: a[:4], probe.games)
    most = max(int(np.asarray(g.legal_action_mask).sum(1).max()) for g in (games, mates))
    choose = jax.jit(functools.partial(agreement.one_ply_choice, _observation_value(), None, rules=RULES,
                                       width=-(-most // 8) * 8))
    return games, mates, choose


def test_one_ply_choice__the_move_whose_position_the_value_rates_best(one_ply):
    """Against stepping every legal move one at a time: the move that minimizes the value
    of the position after it (seen by the opponent)."""
    games, _, choose = one_ply
    apply_fn = _observation_value()
    chosen = np.asarray(choose(games))

    @jax.jit
    def value_after(game, action):
        child = jax.tree.map(lambda a: a[None], env.step(game, action, RULES))
        return apply_fn(None, jax.vmap(lambda s: env.observe_parts(s, RULES))(child))[1][0]

    for i in range(4):
        game = jax.tree.map(lambda a: a[i], games)
        scores = {int(a): -float(value_after(game, a)) for a in np.flatnonzero(np.asarray(game.legal_action_mask))}
        best = max(scores.values())
        assert np.isclose(scores[int(chosen[i])], best, atol=1e-6), (i, scores[int(chosen[i])], best)
        assert sum(np.isclose(v, best, atol=1e-6) for v in scores.values()) == 1  # the choice is not a tie


def test_one_ply_choice__plays_a_mate_in_one(one_ply):
    """A move that mates ends the game with +1 for the mover, above any value."""
    _, mates, choose = one_ply
    chosen = choose(mates)
    after = jax.vmap(lambda g, a: env.step(g, a, RULES))(mates, chosen)
    np.testing.assert_array_equal(np.asarray(after.terminated), True)
    np.testing.assert_array_equal(np.asarray(after.rewards)[np.arange(4), np.asarray(mates.current_player)], 1.0)
