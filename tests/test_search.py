"""``az.search`` over the true environment: an untrained network still finds a mate in
one, and a fixed-seed search gives the stored (golden) result.

The mate positions have few legal moves (10 each, two of them mate), so with m >= 10
considered actions and n = 2m simulations every legal move is visited: the search
must then see the mate's reward (+1, discount 0) whatever the network says, pick a
mating move and report its Q as +1 from the mover's view.
"""

import json
import pathlib

import cshogi
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from az import network as network_lib
from az import search as search_lib
from az.network import AZNet
from az.train import trainer
from configs import shogi816k_randomstart2
from envs import env, movegen, notation, shogi

RULES = env.Rules()
# Black to move: gold 3c-2b (or pawn 2c-2b+) mates the king on 1a.
BLACK_MATES = "8k/9/6GP1/9/9/9/9/9/K8 b - 1"
# The same position rotated, white to move: gold 7g-8h (or pawn 8g-8h+) mates on 9i.
WHITE_MATES = "8k/9/9/9/9/9/1pg6/9/K8 w - 1"
SFENS = (BLACK_MATES, WHITE_MATES)
M = 16  # >= the 10 legal moves of each position
N = 2 * M
NET = AZNet(num_blocks=1, channels=8, value_hidden=8)


def mating_moves(sfen: str) -> set[str]:
    """The side to move's mates in one, by cshogi."""
    board = cshogi.Board(sfen)
    assert board.mate_move_in_1ply(), f"{sfen}: cshogi finds no mate in one"
    mates = set()
    for move in board.legal_moves:
        board.push(move)
        if board.is_game_over():
            mates.add(cshogi.move_to_usi(move))
        board.pop()
    assert cshogi.move_to_usi(board.mate_move_in_1ply()) in mates
    return mates


def stack(states):
    return jax.tree.map(lambda *a: jnp.stack(a), *states)


@pytest.fixture(scope="module")
def games():
    return stack([shogi.from_sfen(s, RULES) for s in SFENS])


@pytest.fixture(scope="module")
def host_games():
    return [shogi.from_sfen(s, RULES) for s in SFENS]


@pytest.fixture(scope="module")
def step_batch():
    return jax.jit(jax.vmap(lambda s, a: env.step(s, a, RULES)))


def init_params(seed: int):
    return network_lib.init_params(NET, jax.random.key(seed))


def make_gumbel_search():
    return search_lib.make_search(NET.apply, RULES, search_lib.SearchSettings(
        algorithm="gumbel", num_simulations=N, max_num_considered_actions=M, gumbel_scale=0.0, pv_length=3))


@pytest.fixture(scope="module")
def gumbel_search():
    return jax.jit(make_gumbel_search())


def test_mate_positions__have_few_legal_moves_and_two_mates():
    for sfen in SFENS:
        board = cshogi.Board(sfen)
        assert len(list(board.legal_moves)) == 10
        assert len(mating_moves(sfen)) == 2
        assert set(shogi.legal_moves(shogi.from_sfen(sfen, RULES))) == {
            cshogi.move_to_usi(m) for m in board.legal_moves
        }


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_search__gumbel_finds_mate_in_one_for_both_colours(gumbel_search, games, host_games, step_batch, seed):
    out = gumbel_search(init_params(seed), jax.random.key(seed), games)
    action = np.asarray(out.action)
    visits = np.asarray(out.visit_counts)
    legal = np.asarray(games.legal_action_mask)
    assert (visits[legal] >= 1).all(), "precondition: every legal move is visited"
    assert (visits[~legal] == 0).all()

    for i, sfen in enumerate(SFENS):
        usi = shogi.action_to_usi(host_games[i], int(action[i]))
        assert usi in mating_moves(sfen), f"{sfen}: chose {usi}, not a mate"

    children = step_batch(games, out.action)
    assert np.asarray(children.terminated).all()
    np.testing.assert_array_equal(np.asarray(children.end_reason), [env.MATE, env.MATE])
    mover = np.asarray(games.current_player)
    np.testing.assert_array_equal(mover, [0, 1])
    np.testing.assert_array_equal(np.asarray(children.rewards)[np.arange(2), mover], [1.0, 1.0])
    np.testing.assert_array_equal(np.asarray(children.rewards)[np.arange(2), 1 - mover], [-1.0, -1.0])


def test_chosen_q__is_plus_one_for_mates_and_less_for_other_moves(gumbel_search, games, host_games):
    out = gumbel_search(init_params(0), jax.random.key(0), games)
    np.testing.assert_allclose(np.asarray(out.chosen_q), [1.0, 1.0], atol=1e-6)
    np.testing.assert_array_equal(np.asarray(out.noise_tv), 0.0)  # Gumbel: no prior noise
    q = np.asarray(out.q)
    for i, sfen in enumerate(SFENS):
        mates = mating_moves(sfen)
        for usi in shogi.legal_moves(host_games[i]):
            a = shogi.usi_to_action(host_games[i], usi)
            if usi in mates:
                assert q[i, a] == pytest.approx(1.0, abs=1e-6), usi
            else:
                # The opponent is not mated: -1 < Q < 1 (an untrained value, negated).
                assert -1.0 < q[i, a] < 0.999, (usi, q[i, a])


def test_pv__starts_with_the_move_and_ends_where_the_game_does(gumbel_search, games, host_games):
    out = gumbel_search(init_params(0), jax.random.key(0), games)
    pv = np.asarray(out.pv)
    assert pv.shape == (2, 3)
    np.testing.assert_array_equal(pv[:, 0], np.asarray(out.action))
    np.testing.assert_array_equal(pv[:, 1:], -1)  # the move mates: no reply in the tree


@pytest.mark.slow  # its own compile (~40 s); PUCT's loop is checked fast against mctx (tests/test_search_loops.py)
def test_search__puct_returns_a_legal_action_and_weights_on_legal_moves():
    positions = [shogi.from_sfen(s, RULES) for s in (*SFENS, shogi.STARTPOS_SFEN)]
    batch = stack(positions)
    search = jax.jit(search_lib.make_search(NET.apply, RULES, search_lib.SearchSettings(algorithm="puct",
                                                                                        num_simulations=16)))
    out = search(init_params(0), jax.random.key(3), batch)
    assert np.asarray(out.noise_tv).min() > 0.05  # AlphaZero's root noise, over legal moves
    legal = np.asarray(batch.legal_action_mask)
    action = np.asarray(out.action)
    weights = np.asarray(out.policy)
    assert legal[np.arange(3), action].all()
    np.testing.assert_allclose(weights.sum(-1), 1.0, rtol=1e-5)
    assert (weights[~legal] == 0).all()
    assert (weights >= 0).all()
    # PUCT's weights are visit counts / n: 16 simulations over legal moves only.
    visits = np.asarray(out.visit_counts)
    assert visits.sum(-1).tolist() == [16, 16, 16]
    # AlphaZero plays the most visited move.
    np.testing.assert_array_equal(action, visits.argmax(-1))
    assert (visits[~legal] == 0).all()


def test_make_search__rejects_an_unknown_algorithm():
    with pytest.raises(ValueError, match="search.algorithm"):
        search_lib.make_search(NET.apply, RULES, search_lib.SearchSettings(algorithm="alphabeta", num_simulations=4))


def test_settings_from_config__reads_config_search_and_takes_overrides():
    from configs import default

    search_config = default.get_config().search
    settings, knowledge = search_lib.settings_from_config(search_config, num_simulations=3, gumbel_scale=0.0,
                                                          pv_length=2, always_promote=True)
    assert (settings.num_simulations, settings.gumbel_scale, settings.pv_length) == (3, 0.0, 2)
    assert settings.max_num_considered_actions == search_config.max_num_considered_actions
    assert knowledge.always_promote and knowledge.history_window == search_config.history_window
    with pytest.raises(TypeError, match="unknown settings"):
        search_lib.settings_from_config(search_config, full_tree=True)


@pytest.mark.slow  # a compile of its own (~20 s); no preset searches with 0 simulations
def test_search__zero_simulations_plays_the_priors_best_legal_move(games):
    params = init_params(0)
    search = search_lib.make_search(NET.apply, RULES, search_lib.SearchSettings(num_simulations=0))
    out = jax.jit(search)(params, jax.random.key(0), games)
    logits, value = search_lib.network_forward(NET.apply, params, games, RULES)
    np.testing.assert_array_equal(np.asarray(out.action), np.asarray(logits).argmax(-1))
    assert np.asarray(games.legal_action_mask)[np.arange(2), np.asarray(out.action)].all()
    np.testing.assert_allclose(np.asarray(out.root_value), np.asarray(value), rtol=1e-5)
    assert np.asarray(out.visit_counts).sum() == 0


def test_material_utility__the_search_reads_value_and_material_forecast_blended(games):
    net = AZNet(num_blocks=1, channels=8, value_hidden=8, material_head=True)
    params = network_lib.init_params(net, jax.random.key(1))
    settings = search_lib.SearchSettings(num_simulations=0)
    plain = jax.jit(search_lib.make_search(net.apply, RULES, settings))(params, jax.random.key(0), games)
    knowledge = search_lib.ShogiKnowledge(material_utility=3.0)
    blended = jax.jit(search_lib.make_search(net.apply, RULES, settings, knowledge=knowledge))(
        params, jax.random.key(0), games)
    observation = jax.vmap(lambda s: env.observe_parts(s, RULES))(games)
    _, value, aux = net.apply(params, observation, with_aux=True)
    assert not np.allclose(np.asarray(aux["material"]), np.asarray(value), atol=1e-3)  # the blend is visible
    np.testing.assert_allclose(np.asarray(plain.root_value), np.asarray(value), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(blended.root_value), (np.asarray(value) + 3.0 * np.asarray(aux["material"])) / 4.0,
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(np.asarray(blended.action), np.asarray(plain.action))  # the prior is untouched


# Golden: a fixed-seed search on fixed positions gives the stored result -------------

GOLDEN = pathlib.Path(__file__).parent / "golden" / "search.json"
GOLDEN_SFENS = (shogi.STARTPOS_SFEN, "ln3kbnl/1r1sg1g2/p2p2spp/1pp1ppp2/9/2PPP1P2/PPSG1P1PP/2G2S1R1/LNBK3NL b - 25")


def golden_result(search):
    """``search`` (the mate tests' Gumbel search, n=32, m=16) on the golden positions
    with a seeded network: what the golden file holds."""
    games = stack([shogi.from_sfen(s, RULES) for s in GOLDEN_SFENS])
    out = search(init_params(7), jax.random.key(11), games)
    visits = np.asarray(out.visit_counts)
    return {
        "action": np.asarray(out.action).tolist(),
        "visited": [np.flatnonzero(v).tolist() for v in visits],
        "visit_counts": [v[v > 0].tolist() for v in visits],
        "pv": np.asarray(out.pv).tolist(),
        "chosen_q": np.asarray(out.chosen_q).tolist(),
        "root_value": np.asarray(out.root_value).tolist(),
        "search_value": np.asarray(out.search_value).tolist(),
        "policy_of_visited": [np.asarray(out.policy)[i, np.flatnonzero(v)].tolist() for i, v in enumerate(visits)],
    }


def test_search__fixed_seed_gives_the_golden_result(gumbel_search):
    """Regenerate after an intended change: ``python tests/test_search.py``."""
    expected = json.loads(GOLDEN.read_text())
    got = golden_result(gumbel_search)
    for key in ("action", "visited", "visit_counts", "pv"):
        assert got[key] == expected[key], key
    for key in ("chosen_q", "root_value", "search_value", "policy_of_visited"):
        for g, e in zip(got[key], expected[key]):
            np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5, err_msg=key)


# The compact tree against the full one, on positions from games ---------------------

# Positions from seeded random games (cshogi): 143-221 legal moves, 105-178 of them drops.
WIDE_SFENS = (
    "1n2k1bn1/1g5gl/1ppr2spp/6p2/P3p3P/2P6/1PGPPPP2/3SGR1S1/1+lS2K1NL w L2Pbn2p 52",
    "ln4sn1/3g2k1l/2p2p1pp/pp1p5/9/2P3P2/PP1PGPN1P/R6R1/LNSGK1G1L b BS3Pbsp 45",
    "ln2k1snl/L1s3gb1/2p3p1p/5g3/1p1pp1Pp1/2P6/3PP2PP/6GRL/2BK1PSN1 b RGNPs3p 53",
    "ln1g1g3/2rsk2+L1/p1p1p2p1/l2p1R3/N8/1p1P5/P1PKPP3/LB7/1NSG2SN1 b BGS3P4p 43",
)


@pytest.mark.slow  # two compiles of a real search (~2 minutes on a 2-core CPU)
def test_compact_tree__same_search_as_the_full_tree_on_positions_with_drops():
    for sfen in WIDE_SFENS:
        board = cshogi.Board(sfen)
        assert len(list(board.legal_moves)) > 100
        assert any(cshogi.move_is_drop(m) for m in board.legal_moves)
    games = stack([shogi.from_sfen(s, RULES) for s in (shogi.STARTPOS_SFEN, *WIDE_SFENS)])
    settings = search_lib.SearchSettings(num_simulations=48, max_num_considered_actions=8, pv_length=4)
    compact, full = (jax.jit(make(NET.apply, RULES, settings))
                     for make in (search_lib.make_search, search_lib.make_reference_search))
    for seed in range(2):
        params, key = init_params(seed), jax.random.key(seed)
        got, expected = compact(params, key, games), full(params, key, games)
        for field in ("action", "visit_counts", "pv"):
            np.testing.assert_array_equal(getattr(got, field), getattr(expected, field), err_msg=field)
        # Sums over the visited children run over K slots instead of A actions: rounding.
        for field in ("policy", "q", "chosen_q", "search_value"):
            np.testing.assert_allclose(getattr(got, field), getattr(expected, field), rtol=1e-5, atol=1e-6,
                                       err_msg=field)
        assert (np.asarray(got.pv)[:, 2] >= 0).any(), "the trees are deep enough for a PV of 3"


@pytest.mark.parametrize("field", ["considered_drops", "considered_captures"])
def test_reserved_actions__need_the_gumbel_search_on_the_compact_tree(field):
    knowledge = search_lib.ShogiKnowledge(**{field: 2})
    for make, algorithm in ((search_lib.make_search, "puct"), (search_lib.make_reference_search, "gumbel")):
        with pytest.raises(ValueError, match=f"{field}=2 needs the Gumbel search on the compact tree"):
            make(NET.apply, RULES, search_lib.SearchSettings(algorithm=algorithm, num_simulations=4),
                 knowledge=knowledge)


def test_first_visits__needs_the_gumbel_search_on_the_compact_tree():
    for make, algorithm in ((search_lib.make_search, "puct"), (search_lib.make_reference_search, "gumbel")):
        with pytest.raises(ValueError, match="first_visits=2 needs the Gumbel search on the compact tree"):
            make(NET.apply, RULES, search_lib.SearchSettings(algorithm=algorithm, num_simulations=4, first_visits=2))
    with pytest.raises(ValueError, match="first_visits must be >= 1"):
        search_lib.SearchSettings(num_simulations=4, first_visits=0)


@pytest.mark.slow  # a compile of its own (~20 s)
def test_first_visits__every_considered_action_is_visited_twice():
    """n = 16, m = 8 on positions with many legal moves: with first_visits = 2 the root
    visits eight actions twice each, the eight the search without it starts from (the
    best by gumbel + logit, so the same with the same key), where that search gives
    four of them one visit only."""
    games = stack([shogi.from_sfen(s, RULES) for s in WIDE_SFENS])
    params = init_params(0)

    def visits(first_visits):
        search = jax.jit(search_lib.make_search(NET.apply, RULES, search_lib.SearchSettings(
            num_simulations=16, max_num_considered_actions=8, first_visits=first_visits)))
        return np.asarray(search(params, jax.random.key(3), games).visit_counts)

    twice, halved = visits(2), visits(1)
    for row in range(len(WIDE_SFENS)):
        assert sorted(twice[row][twice[row] > 0].tolist()) == [2] * 8, row
        np.testing.assert_array_equal(np.flatnonzero(twice[row]), np.flatnonzero(halved[row]), err_msg=str(row))
        assert sorted(halved[row][halved[row] > 0].tolist()) == [1, 1, 1, 1, 2, 2, 4, 4], row


@pytest.mark.slow  # a compile of its own (~20 s)
def test_considered_drops__the_root_searches_drops_its_prior_ranks_last():
    """A network whose drops sit 30 logits below every board move: the root visits two
    drops of each position (all of them hold pieces in hand), the best two by logit."""
    drops = jnp.asarray(movegen.DROP_ACTIONS)

    def apply_without_drops(params, observation):
        logits, value = NET.apply(params, observation)
        return logits.reshape(logits.shape[0], -1) - 30.0 * drops, value

    games = stack([shogi.from_sfen(s, RULES) for s in WIDE_SFENS])
    search = jax.jit(search_lib.make_search(
        apply_without_drops, RULES, search_lib.SearchSettings(num_simulations=16, max_num_considered_actions=8,
                                                              gumbel_scale=0.0),
        knowledge=search_lib.ShogiKnowledge(considered_drops=2)))
    params = init_params(0)
    visits = np.asarray(search(params, jax.random.key(0), games).visit_counts)
    logits = np.asarray(search_lib.network_forward(apply_without_drops, params, games, RULES)[0])
    legal = np.asarray(games.legal_action_mask)
    for row in range(len(WIDE_SFENS)):
        drop_logits = np.where(legal[row] & movegen.DROP_ACTIONS, logits[row], -np.inf)
        assert set(np.flatnonzero(visits[row] * movegen.DROP_ACTIONS).tolist()) == set(
            np.argsort(-drop_logits)[:2].tolist()), row
        board_best = np.max(np.where(legal[row] & ~movegen.DROP_ACTIONS, logits[row], -np.inf))
        assert drop_logits.max() < board_best - 20, "the drops are the prior's last moves"


def _captures_last():
    """(games [B], captures [B, A] bool, apply_fn): WIDE_SFENS, each with a capture, and a
    network whose captures sit 30 logits below every other move."""
    games = stack([shogi.from_sfen(s, RULES) for s in WIDE_SFENS])
    captures = np.asarray(jax.vmap(lambda s: movegen.capture_actions(s.x.board))(games))
    assert (np.asarray(games.legal_action_mask) & captures).any(-1).all(), "each position has a capture"

    def apply_without_captures(params, observation):
        logits, value = NET.apply(params, observation)
        return logits.reshape(logits.shape[0], -1) - 30.0 * jnp.asarray(captures), value

    return games, captures, apply_without_captures


def _capture_logits(apply_fn, params, games, captures):
    """[B, A]: the network's logits at each position's legal captures, -inf elsewhere."""
    logits = np.asarray(search_lib.network_forward(apply_fn, params, games, RULES)[0])
    return np.where(np.asarray(games.legal_action_mask) & captures, logits, -np.inf)


@pytest.mark.slow  # two compiles of a real search (a few minutes on a 2-core CPU)
def test_considered_captures__the_root_searches_captures_its_prior_ranks_last():
    """A network whose captures sit 30 logits below every other move: with two reserved
    captures the root visits the two best captures of each position by logit, beside two
    reserved drops; without, none."""
    games, captures, apply_without_captures = _captures_last()

    def visits(considered_captures):
        search = jax.jit(search_lib.make_search(
            apply_without_captures, RULES,
            search_lib.SearchSettings(num_simulations=16, max_num_considered_actions=8, gumbel_scale=0.0),
            knowledge=search_lib.ShogiKnowledge(considered_drops=2, considered_captures=considered_captures)))
        return np.asarray(search(params, jax.random.key(0), games).visit_counts)

    params = init_params(0)
    assert (visits(0) * captures).sum() == 0
    got = visits(2)
    for row, capture_logits in enumerate(_capture_logits(apply_without_captures, params, games, captures)):
        best = np.argsort(-capture_logits)[: min(2, int(np.isfinite(capture_logits).sum()))]
        assert set(np.flatnonzero(got[row] * captures[row]).tolist()) == set(best.tolist()), row
        assert (got[row] * movegen.DROP_ACTIONS).astype(bool).sum() >= 2, "the reserved drops are still searched"


@pytest.mark.slow  # two compiles of a 4-simulation search
def test_reduced_considered_captures__the_reduced_search_visits_the_best_capture():
    """The playout caps' reduced search (n = 4 of the recipe's m = 8) visits its four best
    considered actions by gumbel + logit, so the full search's reserved captures go
    unvisited there when the prior ranks captures last; with
    ``search.reduced_considered_captures = 1`` it visits each position's best capture."""
    games, captures, apply_without_captures = _captures_last()

    def visits(reduced_considered_captures):
        config = shogi816k_randomstart2.get_config("cpu").search
        config.mate_in_one = False  # the test network's own moves, not the mate search's
        config.material_utility = 0.0
        config.reduced_considered_captures = reduced_considered_captures
        settings = trainer.reduced_search_settings(config)
        assert settings["num_simulations"] == 4 and config.max_num_considered_actions == 8
        search = jax.jit(search_lib.search_from_config(config, apply_without_captures, RULES, gumbel_scale=0.0,
                                                       **settings))
        return np.asarray(search(params, jax.random.key(0), games).visit_counts)

    params = init_params(0)
    assert (visits(0) * captures).sum() == 0
    got = visits(1)
    for row, capture_logits in enumerate(_capture_logits(apply_without_captures, params, games, captures)):
        assert np.flatnonzero(got[row] * captures[row]).tolist() == [int(np.argmax(capture_logits))], row
        assert got[row].sum() == 4 and (got[row] > 0).sum() == 4, "four actions, one visit each"


if __name__ == "__main__":
    GOLDEN.parent.mkdir(exist_ok=True)
    GOLDEN.write_text(json.dumps(golden_result(jax.jit(make_gumbel_search())), indent=1) + "\n")
    print(f"wrote {GOLDEN}")


# PUCT's root noise over the legal moves only ------------------------------------------

NOISE_SFENS = {  # positions with about 20, 80 and 150 legal moves
    21: "ln1s2gnl/1r1g1ksb1/ppppppp1p/7p1/7P1/9/PPPPPPP1P/LBSG2G1R/1N1K2SNL b - 23",
    78: "+L4k3/2+P5+p/P+l3K1Pp/+P1n2p2+p/1R1pR3+p/1ng1+psP2/SgP6/1P+n3+b2/1SG+lS1+P2 b 3Pbgnl 1",
    152: "+P3kS+P1B/1p1+b3+r1/P5L2/1+p+P1+p1lpP/2+S4+pN/4g3S/gPP3n2/1+P+r1PP2+P/+n1+n2GK2 b S2L2Pg 1",
}


NOISE_SAMPLES = 4000
# Compiled once for all three positions (the same shapes).
_noise_logits = jax.jit(lambda params, games: search_lib.network_forward(NET.apply, params, games, RULES)[0])
_noisy_priors = jax.jit(lambda key, logits, legal: jax.vmap(
    lambda k: search_lib.with_dirichlet_noise(k, logits, legal, alpha=0.15, fraction=0.25)
)(jax.random.split(key, NOISE_SAMPLES)))


@pytest.mark.slow  # 4,000 noise samples a position (~35 s each on a 2-core CPU)
@pytest.mark.parametrize("legal_moves", [21, 78, 152])
def test_dirichlet_noise__moves_the_prior_as_alphazeros_noise_does(legal_moves):
    """Mean total variation between noisy and clean root priors, against numpy's own
    Dirichlet over the legal moves; illegal actions get no mass."""
    state = shogi.from_sfen(NOISE_SFENS[legal_moves], RULES)
    legal = np.asarray(state.legal_action_mask)
    assert legal.sum() == legal_moves
    logits = _noise_logits(init_params(3), stack([state]))
    samples = NOISE_SAMPLES
    noisy, tv = _noisy_priors(jax.random.key(legal_moves), logits, legal[None])
    noisy_p = np.asarray(jax.nn.softmax(noisy, axis=-1))[:, 0]
    assert noisy_p[:, ~legal].max() == 0.0
    np.testing.assert_allclose(noisy_p.sum(-1), 1.0, rtol=1e-5)
    prior = np.asarray(jax.nn.softmax(logits, axis=-1))[0, legal].astype(np.float64)
    dirichlet = np.random.default_rng(0).dirichlet(np.full(legal_moves, 0.15), size=samples)
    expected = 0.25 * 0.5 * np.abs(dirichlet - prior).sum(-1).mean()
    assert np.asarray(tv).mean() == pytest.approx(expected, rel=0.03)
    assert expected > 0.12  # far from mctx's spread over all 2187 actions (about 0.002)



@pytest.mark.slow  # compiles the mate check (~40 s); tests/test_mate.py checks the check itself fast
def test_with_mate_in_one__a_root_with_a_mate_plays_it(gumbel_search, games, host_games):
    with_mate = jax.jit(lambda out, games: search_lib.with_mate_in_one(out, games, num_simulations=N))
    out = gumbel_search(init_params(1), jax.random.key(1), games)
    mated = with_mate(out, games)
    assert np.asarray(mated.mate).all()
    for i, sfen in enumerate(SFENS):
        action = int(mated.action[i])
        assert shogi.action_to_usi(host_games[i], action) in mating_moves(sfen)
        np.testing.assert_array_equal(np.flatnonzero(np.asarray(mated.policy[i])), [action])
        np.testing.assert_array_equal(np.flatnonzero(np.asarray(mated.visit_counts[i])), [action])
        assert float(mated.chosen_q[i]) == 1.0 and float(mated.q[i, action]) == 1.0
        assert int(mated.pv[i, 0]) == action and (np.asarray(mated.pv[i, 1:]) == -1).all()
    start = stack([shogi.from_sfen(shogi.STARTPOS_SFEN, RULES)] * 2)  # no mate: the search's result stands
    plain = gumbel_search(init_params(1), jax.random.key(1), start)
    kept = with_mate(plain, start)  # the same shapes: no second compile
    assert not np.asarray(kept.mate).any()
    for a, b in zip(jax.tree.leaves(plain), jax.tree.leaves(kept)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


# Always promote: pawns, bishops and rooks that may promote do -----------------------

# After 7g7f 3c3d black may take the bishop with 8h2b or 8h2b+ (and go to 3c either way).
BISHOP_EXCHANGE = "lnsgkgsnl/1r5b1/pppppp1pp/6p2/9/2P6/PP1PPPPPP/1B5R1/LNSGKGSNL b - 3"


def test_always_promote__plain_twins_leave_the_search_and_give_their_prior_to_the_promotion():
    sfens = (BISHOP_EXCHANGE, BLACK_MATES, WHITE_MATES)
    games = stack([shogi.from_sfen(s, RULES) for s in sfens])
    host = [shogi.from_sfen(s, RULES) for s in sfens]
    twin_moves = [{"8h2b", "8h3c"}, {"2c2b"}, {"8g8h"}]
    searched, twins = jax.jit(search_lib.searched_moves, static_argnums=1)(games, True)
    for i, state in enumerate(host):
        actions = notation.legal_actions(state)
        assert {usi for usi, a in actions.items() if twins[i, a]} == twin_moves[i]
        assert {usi for usi, a in actions.items() if searched[i, a]} == set(actions) - twin_moves[i]

    params = init_params(3)
    plain, _ = search_lib.network_forward(NET.apply, params, games, RULES)
    folded, _ = search_lib.network_forward(NET.apply, params, games, RULES, always_promote=True)
    plain, folded, twins = np.asarray(plain), np.asarray(folded), np.asarray(twins)
    lowest = np.finfo(folded.dtype).min
    rows, cols = np.nonzero(twins)
    promoted = cols + 10 * 81
    np.testing.assert_allclose(folded[rows, promoted], np.logaddexp(plain[rows, promoted], plain[rows, cols]),
                               rtol=1e-6)
    assert (folded[rows, cols] == lowest).all()
    untouched = np.ones_like(twins)
    untouched[rows, cols] = untouched[rows, promoted] = False
    np.testing.assert_array_equal(folded[untouched], plain[untouched])

    for n in (0, N):
        settings = search_lib.SearchSettings(num_simulations=n, max_num_considered_actions=M, gumbel_scale=0.0)
        search = jax.jit(search_lib.make_search(NET.apply, RULES, settings,
                                                knowledge=search_lib.ShogiKnowledge(always_promote=True)))
        out = search(params, jax.random.key(0), games)
        assert not twins[np.arange(3), np.asarray(out.action)].any()
        assert np.asarray(out.visit_counts)[twins].sum() == 0
        assert np.asarray(out.policy)[twins].max() < 1e-6
    np.testing.assert_array_equal(np.asarray(out.visit_counts).sum(-1), N)
