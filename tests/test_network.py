"""The network reads the observation in two parts; its first layer equals a plain 3x3
convolution over all 119 planes with the same kernel."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from az import network as network_lib
from envs import env, movegen, notation

SFENS = (
    notation.STARTPOS_SFEN,
    "ln1gk1snl/2s3gb1/2pppppp1/pr6p/9/P6RP/1PPPPPP2/1BG3S2/LNS1KG1NL b Pp 23",
    "l6nl/5+P1gk/2np1S3/p1p4Pp/3P2Sp1/1PPb2P1P/P5GS1/R8/LN4bKL w RGgsn5p 1",
)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_stem__equals_a_convolution_over_all_119_planes(dtype, observe_fn):
    rules = env.Rules()
    states = [notation.from_sfen(s, rules) for s in SFENS]
    full = jnp.stack([observe_fn(s) for s in states])  # [3, 9, 9, 119]
    observe_parts = jax.jit(lambda s: env.observe_parts(s, rules))  # eager, each op would compile alone
    board_bytes, flags = jax.tree.map(lambda *a: jnp.stack(a), *[observe_parts(s) for s in states])
    assert board_bytes.shape == (3, 648) and board_bytes.dtype == jnp.uint8
    planes = movegen.unpack_board_planes(board_bytes)
    np.testing.assert_array_equal(full[..., :62], planes)
    np.testing.assert_array_equal(movegen.pack_board_planes(full[..., :62]), board_bytes)
    np.testing.assert_array_equal(full[..., 62:], jnp.broadcast_to(flags[:, None, None], (3, 9, 9, 57)))
    assert flags.any()  # hands and check are in the flags
    stem = network_lib.Stem(channels=16, dtype=dtype)
    params = stem.init(jax.random.key(0), board_bytes, flags)
    kernel = params["params"]["kernel"]
    assert kernel.shape == (3, 3, 119, 16)
    ours = stem.apply(params, board_bytes, flags).astype(jnp.float32)
    reference = jax.lax.conv_general_dilated(full.astype(jnp.float32), kernel, (1, 1), "SAME",
                                             dimension_numbers=("NHWC", "HWIO", "NHWC"))
    tolerance = 1e-5 if dtype == jnp.float32 else 5e-2
    np.testing.assert_allclose(ours, reference, rtol=tolerance, atol=tolerance)


def test_network__parameters_are_laid_out_as_a_plain_first_convolution():
    """Snapshots made before the stem read two parts still load: the same parameter tree."""
    net = network_lib.AZNet(num_blocks=1, channels=8, value_hidden=8)
    params = network_lib.init_params(net, jax.random.key(0))
    assert params["params"]["Conv_0"]["kernel"].shape == (3, 3, 119, 8)
    logits, value = net.apply(params, network_lib.example_observation(2))
    assert logits.shape == (2, 2187) and value.shape == (2,)


def test_network__action_bias_moves_only_its_own_action():
    """policy_bias="action": one learned bias per action (2,187) in place of one per plane."""
    net = network_lib.AZNet(num_blocks=0, channels=4, value_hidden=4, policy_bias="action")
    params = network_lib.init_params(net, jax.random.key(0))
    assert params["params"]["policy_bias"].shape == (2187,)
    assert "bias" not in params["params"]["Conv_2"]
    observation = network_lib.example_observation(2)
    before, _ = net.apply(params, observation)
    params["params"]["policy_bias"] = params["params"]["policy_bias"].at[1234].set(3.0)
    after, _ = net.apply(params, observation)
    np.testing.assert_allclose(after - before, np.where(np.arange(2187) == 1234, 3.0, 0.0)[None].repeat(2, 0), atol=1e-6)


@pytest.mark.parametrize("policy_bias", ["plane", "action"])
def test_network__drop_logit_init_lowers_only_the_drops(policy_bias):
    """drop_logit_init=-4: an untrained network's drop logits (directions 20-26) start 4
    lower than with 0, every other logit the same."""
    observation = network_lib.example_observation(2)
    logits = {}
    for init in (0.0, -4.0):
        net = network_lib.AZNet(num_blocks=0, channels=4, value_hidden=4, policy_bias=policy_bias, drop_logit_init=init)
        logits[init], _ = net.apply(network_lib.init_params(net, jax.random.key(0)), observation)
    is_drop = np.arange(2187) >= 20 * 81
    np.testing.assert_allclose(logits[-4.0] - logits[0.0], np.where(is_drop, -4.0, 0.0)[None].repeat(2, 0), atol=1e-5)


def test_network__legality_head_reads_the_policy_planes_in_the_same_action_order():
    """legality_head=True adds a 1x1 head beside the policy's; with the policy's own
    kernel and bias it gives the policy's logits action for action, so its output is in
    the policy's action order. Search's two outputs are unchanged by the head."""
    net = network_lib.AZNet(num_blocks=0, channels=4, value_hidden=4, legality_head=True)
    params = network_lib.init_params(net, jax.random.key(0))
    observation = network_lib.example_observation(2)
    observation = (jax.random.randint(jax.random.key(1), observation[0].shape, 0, 256).astype(jnp.uint8),
                   observation[1])
    logits, value = net.apply(params, observation)
    params["params"]["Legality"] = dict(params["params"]["Conv_2"])
    with_head = net.apply(params, observation, with_aux=True)
    assert len(with_head) == 3 and list(with_head[2]) == ["legality"] and with_head[2]["legality"].shape == (2, 2187)
    np.testing.assert_allclose(with_head[0], logits, atol=1e-6)
    np.testing.assert_allclose(with_head[1], value, atol=1e-6)
    np.testing.assert_allclose(with_head[2]["legality"], logits, atol=1e-5)
    plain = network_lib.AZNet(num_blocks=0, channels=4, value_hidden=4)
    plain_params = network_lib.init_params(plain, jax.random.key(0))
    assert "Legality" not in plain_params["params"]
    assert plain.apply(plain_params, observation, with_aux=True)[2] == {}


def _with_and_without_head(head_param, **head):
    """A small network with an auxiliary head and one without, on the same key: asserts the
    head adds only `head_param` and leaves the policy and value as they were. Returns the
    network, its parameters, an observation batch of 3, and the value and aux outputs."""
    net = network_lib.AZNet(num_blocks=1, channels=4, value_hidden=8, **head)
    params = network_lib.init_params(net, jax.random.key(0))
    plain = network_lib.AZNet(num_blocks=1, channels=4, value_hidden=8)
    plain_params = network_lib.init_params(plain, jax.random.key(0))
    assert set(params["params"]) == set(plain_params["params"]) | {head_param}
    observation = (jax.random.randint(jax.random.key(1), (3, 648), 0, 256).astype(jnp.uint8),
                   jax.random.bernoulli(jax.random.key(2), 0.3, (3, 57)))
    logits, value, aux = net.apply(params, observation, with_aux=True)
    plain_logits, plain_value = plain.apply(
        {"params": {k: v for k, v in params["params"].items() if k != head_param}}, observation)
    np.testing.assert_allclose(logits, plain_logits, atol=1e-6)
    np.testing.assert_allclose(value, plain_value, atol=1e-6)
    return net, params, observation, value, aux


def test_network__material_head_reads_the_value_heads_hidden_layer():
    """material_head=True adds a tanh unit on the value's hidden layer: given the value's
    own output weights it gives the value, so it reads that layer; other weights give
    another output. The policy and value, and their parameter names, are unchanged."""
    net, params, observation, value, aux = _with_and_without_head("Material", material_head=True)
    assert aux["material"].shape == (3,) and np.all(np.abs(aux["material"]) <= 1)
    assert not np.allclose(aux["material"], value)
    params["params"]["Material"] = dict(params["params"]["Dense_1"])
    np.testing.assert_allclose(net.apply(params, observation, with_aux=True)[2]["material"], value, atol=1e-6)


def test_network__reply_head_reads_the_policy_planes_turned_into_the_opponents_frame():
    """reply_head=True adds a 1x1 head on the policy's hidden planes turned half a turn:
    given the policy's own kernel and bias it gives, for each direction, the policy's
    logit on square 80 - s at square s (the opponent's frame). The policy and value are
    unchanged."""
    net, params, observation, value, aux = _with_and_without_head("Reply", reply_head=True)
    assert list(aux) == ["reply"] and aux["reply"].shape == (3, 2187)
    params["params"]["Reply"] = dict(params["params"]["Conv_2"])
    logits, _, aux = net.apply(params, observation, with_aux=True)
    by_direction = np.asarray(logits).reshape(3, network_lib.NUM_DIRECTIONS, 81)
    np.testing.assert_allclose(np.asarray(aux["reply"]).reshape(3, network_lib.NUM_DIRECTIONS, 81),
                               by_direction[:, :, ::-1], atol=1e-5)
    assert not np.allclose(by_direction, by_direction[:, :, ::-1])


def test_network__value_pool_widens_only_the_values_hidden_layer_with_each_channels_mean_and_max():
    """value_pool=True: the value's hidden layer reads 2C more inputs, the trunk's mean and
    max per channel; with their weights at 0 the value is the plain network's, and the
    policy never changes; with them it moves."""
    kwargs = dict(num_blocks=1, channels=4, value_hidden=8)
    pooled, plain = network_lib.AZNet(**kwargs, value_pool=True), network_lib.AZNet(**kwargs)
    params = network_lib.init_params(pooled, jax.random.key(0))
    plain_params = network_lib.init_params(plain, jax.random.key(0))
    kernel = np.asarray(params["params"]["Dense_0"]["kernel"])
    plain_kernel = np.asarray(plain_params["params"]["Dense_0"]["kernel"])
    assert kernel.shape == (plain_kernel.shape[0] + 2 * 4, 8)
    observation = (jax.random.randint(jax.random.key(1), (3, 648), 0, 256).astype(jnp.uint8),
                   jax.random.bernoulli(jax.random.key(2), 0.3, (3, 57)))
    logits, value = pooled.apply(params, observation)
    params["params"]["Dense_0"]["kernel"] = jnp.asarray(kernel).at[-8:].set(0.0)
    zeroed_logits, zeroed_value = pooled.apply(params, observation)
    params["params"]["Dense_0"]["kernel"] = jnp.asarray(kernel[:-8])
    plain_logits, plain_value = plain.apply(params, observation)
    np.testing.assert_allclose(zeroed_value, plain_value, atol=1e-6)
    np.testing.assert_allclose(logits, plain_logits, atol=1e-6)
    np.testing.assert_allclose(zeroed_logits, plain_logits, atol=1e-6)
    assert not np.allclose(value, plain_value)


def test_planes_to_squares__turns_the_observation_back_to_pgx_squares():
    """The observation's planes, turned back by the helper the policy and the occupancy
    head share, sit on pgx's squares: each of the mover's piece planes (0-13) and the
    opponent's (31-44) is where the board holds that piece, in positions that are not
    symmetric."""
    rules = env.Rules()
    observe_parts = jax.jit(lambda s: env.observe_parts(s, rules))
    for sfen in SFENS[1:]:
        state = notation.from_sfen(sfen, rules)
        board_bytes, _ = observe_parts(state)
        squares = np.asarray(network_lib.planes_to_squares(movegen.unpack_board_planes(board_bytes[None])))[0]
        board = np.asarray(state.x.board)
        for piece in range(14):
            np.testing.assert_array_equal(squares[:, piece], board == piece)
            np.testing.assert_array_equal(squares[:, 31 + piece], board == 14 + piece)


def test_network__occupancy_head_gives_three_logits_a_square_and_leaves_search_alone():
    """occupancy_head=True adds a 1x1 head on the trunk, three logits per square; the
    policy and value, and their parameter names, are unchanged."""
    net, params, observation, value, aux = _with_and_without_head("Occupancy", occupancy_head=True)
    assert list(aux) == ["occupancy"] and aux["occupancy"].shape == (3, 81, 3)


def test_threat_planes__hanging_agrees_with_the_classical_feature():
    """The hanging planes, valued at greedy's prices, are the classical evaluation's
    "hanging" and "threatened" features (tested there against a slow reference), on
    positions of random games with both colours to move."""
    from az.classical import features as features_lib
    from envs import bitplanes, dense

    boards, hands = _random_game_positions(48)
    words, _ = dense.observation_planes(bitplanes.piece_planes(jnp.asarray(boards)))
    planes = bitplanes.unpack(words.reshape(62 * 81, -1), len(boards)).reshape(len(boards), 62, 9, 9)
    threat = np.asarray(network_lib.threat_planes(jnp.moveaxis(planes, 1, -1)))  # [N, 9, 9, 4]
    values = movegen.PIECE_VALUES
    planes = np.asarray(planes)
    own_value = (planes[:, :14] * values[None, :, None, None]).sum(1)
    opp_value = (planes[:, 31:45] * values[None, :, None, None]).sum(1)
    names = list(features_lib.NAMES)
    reference = np.asarray(features_lib.features_batch(jnp.asarray(boards), jnp.asarray(hands)))
    np.testing.assert_allclose(-(own_value * threat[..., 0]).sum((1, 2)), reference[:, names.index("hanging")])
    np.testing.assert_allclose((opp_value * threat[..., 2]).sum((1, 2)), reference[:, names.index("threatened")])
    assert threat[..., 0].any() and threat[..., 2].any()


def _random_game_positions(count: int, seed: int = 0):
    """Positions along seeded random legal games (cshogi), as pgx holds them in the mover's
    frame: boards [count, 81], hands [count, 2, 7]."""
    import random

    import cshogi

    rules = env.Rules()
    rng = random.Random(seed)
    boards, hands = [], []
    while len(boards) < count:
        board = cshogi.Board()
        for _ in range(rng.randint(20, 90)):
            moves = list(board.legal_moves)
            if not moves or board.is_draw():
                break
            board.push(rng.choice(moves))
        if list(board.legal_moves):
            state = notation.from_sfen(board.sfen(), rules)
            boards.append(np.asarray(state.x.board))
            hands.append(np.asarray(state.x.hand))
    return np.stack(boards), np.stack(hands)


@pytest.mark.parametrize("sfen, square, side, plane, expected", [
    # A black silver on 5e under a white pawn on 5d, defended by a gold: a cheaper attacker.
    ("4k4/9/9/4p4/4S4/4G4/9/9/4K4 b - 1", "5e", "mover", 1, True),
    # ... the same silver is defended once and attacked once: not hanging.
    ("4k4/9/9/4p4/4S4/4G4/9/9/4K4 b - 1", "5e", "mover", 0, False),
    # A black gold under a white rook, undefended: hanging, but the rook is no cheaper.
    ("4k4/4r4/9/9/4G4/9/9/9/K8 b - 1", "5e", "mover", 0, True),
    ("4k4/4r4/9/9/4G4/9/9/9/K8 b - 1", "5e", "mover", 1, False),
    # White to move: its bishop on 5e, attacked by a black pawn on 5f, is the mover's.
    ("4k4/9/9/9/4b4/4P4/9/9/4K4 w - 1", "5e", "mover", 1, True),
    # Black to move: the same bishop is the opponent's, attacked by a cheaper piece and
    # undefended (planes 2 and 3).
    ("4k4/9/9/9/4b4/4P4/9/9/4K4 b - 1", "5e", "opponent", 0, True),
    ("4k4/9/9/9/4b4/4P4/9/9/4K4 b - 1", "5e", "opponent", 1, True),
    # A king attacks a lone gold: hanging, yet the king is no cheaper attacker.
    ("9/9/9/9/4G4/3k5/9/9/K8 b - 1", "5e", "mover", 0, True),
    ("9/9/9/9/4G4/3k5/9/9/K8 b - 1", "5e", "mover", 1, False),
])
def test_threat_planes__mark_the_pieces_a_capture_may_win(sfen, square, side, plane, expected):
    rules = env.Rules()
    state = notation.from_sfen(sfen, rules)
    board_bytes, _ = jax.jit(lambda s: env.observe_parts(s, rules))(state)
    planes = movegen.unpack_board_planes(board_bytes[None])
    threat = np.asarray(network_lib.planes_to_squares(network_lib.threat_planes(planes)))[0]  # [81, 4]
    file, rank = int(square[0]), "abcdefghi".index(square[1])
    index = (file - 1) * 9 + rank  # pgx's square: file * 9 + rank, from the first file and rank
    if state.x.color == 1:
        index = 80 - index  # pgx keeps the board in the mover's frame
    assert bool(threat[index, plane + (2 if side == "opponent" else 0)]) == expected
    # Nowhere else on these boards does a capture win anything of that kind.
    others = np.delete(threat[:, plane + (2 if side == "opponent" else 0)], index)
    assert not others.any()


def test_network__threat_planes_widen_only_the_stems_kernel():
    """threat_planes=True adds four input channels to the first convolution and nothing
    else; with their kernel rows zero the outputs are the plain network's."""
    net = network_lib.AZNet(num_blocks=1, channels=8, value_hidden=8, threat_planes=True)
    params = network_lib.init_params(net, jax.random.key(0))
    plain = network_lib.AZNet(num_blocks=1, channels=8, value_hidden=8)
    plain_params = network_lib.init_params(plain, jax.random.key(0))
    kernel = params["params"]["Conv_0"]["kernel"]
    assert kernel.shape == (3, 3, 123, 8)
    rules = env.Rules()
    observation = jax.tree.map(lambda *a: jnp.stack(a), *[
        jax.jit(lambda s: env.observe_parts(s, rules))(notation.from_sfen(s, rules)) for s in SFENS])
    widened = jax.tree.map(lambda a: a, plain_params)
    plain_kernel = plain_params["params"]["Conv_0"]["kernel"]
    widened["params"]["Conv_0"]["kernel"] = jnp.concatenate(
        [plain_kernel[:, :, :62], jnp.zeros((3, 3, 4, 8)), plain_kernel[:, :, 62:]], axis=2)
    for ours, theirs in zip(net.apply(widened, observation), plain.apply(plain_params, observation)):
        np.testing.assert_allclose(ours, theirs, atol=1e-5)
    assert not np.allclose(net.apply(params, observation)[1], net.apply(widened, observation)[1])
