"""The learner's schedule over the run's progress, its optimizer, clipping, and the replay ratio."""

import math

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
import pytest

from az.train import config as config_lib
from az.train import learner
from configs import default


def learner_config(**changes) -> ml_collections.ConfigDict:
    c = default.get_config().learner
    c.warmup_steps = 10
    c.learning_rate = 0.02
    for key, value in changes.items():
        c[key] = value
    return c


def rate(config, progress, step=1000) -> float:
    return float(learner.learning_rate(config, jnp.float32(progress), jnp.int32(step)))


def test_learning_rate__cosine_follows_progress_and_ends_with_the_budget():
    c = learner_config(schedule="cosine")
    assert rate(c, 0.0) == pytest.approx(0.02)
    assert rate(c, 0.25) == pytest.approx(0.02 * (1 + math.cos(math.pi / 4)) / 2, rel=1e-6)
    assert rate(c, 0.5) == pytest.approx(0.01, rel=1e-6)
    assert rate(c, 0.999) > 0  # never 0 while the budget is not spent
    assert rate(c, 1.0) == pytest.approx(0.0, abs=1e-9)
    assert rate(c, 1.7) == rate(c, 1.0)  # progress is clipped to the budget


def test_learning_rate__cosine_with_a_floor_ends_at_its_fraction():
    c = learner_config(schedule="cosine", final_rate_fraction=0.2)
    assert rate(c, 0.0) == pytest.approx(0.02)
    assert rate(c, 0.5) == pytest.approx(0.004 + 0.016 * 0.5, rel=1e-6)
    assert rate(c, 1.0) == pytest.approx(0.004, rel=1e-6)
    rates = [rate(c, p) for p in np.linspace(0, 1, 11)]
    assert all(a > b for a, b in zip(rates, rates[1:]))  # still falls all the way


def test_learning_rate__step_drops_exactly_at_its_fractions():
    c = learner_config(schedule="step", step_fractions=(0.5, 0.75), step_decay=0.1)
    assert rate(c, 0.4999) == pytest.approx(0.02)
    assert rate(c, 0.5) == pytest.approx(0.002)  # not shifted by the warm-up
    assert rate(c, 0.7499) == pytest.approx(0.002)
    assert rate(c, 0.75) == pytest.approx(0.0002)
    assert rate(c, 1.0) == pytest.approx(0.0002)


def test_learning_rate__warm_up_is_linear_in_steps_and_starts_above_zero():
    c = learner_config(schedule="constant", warmup_steps=10)
    rates = [rate(c, 0.0, step) for step in range(12)]
    np.testing.assert_allclose(rates, [0.002 * min(k + 1, 10) for k in range(12)], rtol=1e-6)
    assert rate(learner_config(schedule="constant", warmup_steps=0), 0.3, 0) == pytest.approx(0.02)


@pytest.mark.parametrize("optimizer", ["sgd", "adamw"])
def test_update__equals_optax_with_the_same_rate(optimizer):
    """A step of our optimizer at rate r equals optax's own at r (Nesterov SGD with
    weight decay added to the gradient; AdamW with decoupled decay)."""
    c = learner_config(optimizer=optimizer, weight_decay=0.1, momentum=0.9)
    params = {"w": jnp.array([1.0, -2.0, 3.0])}
    grads = [{"w": jnp.array([0.5, 0.25, -1.0])}, {"w": jnp.array([-0.3, 0.2, 0.1])}]
    reference = (optax.adamw(0.05, weight_decay=0.1) if optimizer == "adamw" else
                 optax.chain(optax.add_decayed_weights(0.1), optax.sgd(0.05, momentum=0.9, nesterov=True)))
    ours = learner.make_optimizer(c)
    p_ours, p_ref = params, params
    s_ours, s_ref = ours.init(params), reference.init(params)
    for g in grads:
        d, s_ours = ours.update(g, s_ours, p_ours)
        p_ours = optax.apply_updates(p_ours, jax.tree.map(lambda x: 0.05 * x, d))
        u, s_ref = reference.update(g, s_ref, p_ref)
        p_ref = optax.apply_updates(p_ref, u)
    np.testing.assert_allclose(p_ours["w"], p_ref["w"], rtol=1e-6)


def _update_fn(grad_clip):
    """make_update on a 'network' that ignores its input: logits w, value tanh(v)."""

    def apply_fn(params, observations):
        n = observations[0].shape[0]  # (board planes [N, 9, 9, 62], flags [N, 57])
        return jnp.broadcast_to(params["w"], (n, 2187)), jnp.broadcast_to(jnp.tanh(params["v"]), (n,))

    from envs import env

    return learner.make_update(apply_fn, learner.make_optimizer(learner_config(optimizer="sgd", momentum=0.0,
                                                                                weight_decay=0.0)),
                               env.Rules(), grad_clip=grad_clip)


@pytest.mark.parametrize("grad_clip, clipped", [(0.0, False), (1e6, False), (1e-3, True)])
def test_update__reports_the_norm_before_clipping_and_whether_it_clipped(grad_clip, clipped):
    from az.train.replay import Batch

    rng = np.random.default_rng(0)
    batch = Batch(board=jnp.asarray(rng.integers(-1, 28, (4, 81)), jnp.int8), hand=jnp.zeros((4, 2, 7), jnp.int8),
                  policy=jax.nn.one_hot(jnp.asarray([5, 5, 7, 9]), 2187), policy_weight=jnp.ones(4),
                  value=jnp.asarray([1.0, -1.0, 0.0, 1.0]))
    params = {"w": jnp.full((2187,), 0.1), "v": jnp.float32(0.3)}
    update = jax.jit(_update_fn(grad_clip))
    new, _, _, info = update(params, update_state(params), batch, jnp.float32(0.5))
    assert float(info.grad_norm) > 0.5
    assert float(info.clipped) == float(clipped)
    assert float(info.learning_rate) == 0.5
    moved = np.sqrt(sum(float(((a - b) ** 2).sum()) for a, b in zip(jax.tree.leaves(new), jax.tree.leaves(params))))
    expected = 0.5 * (min(float(info.grad_norm), grad_clip) if grad_clip > 0 else float(info.grad_norm))
    assert moved == pytest.approx(expected, rel=1e-4)  # plain SGD moves rate x (clipped) gradient


def update_state(params):
    return learner.make_optimizer(learner_config(optimizer="sgd", momentum=0.0, weight_decay=0.0)).init(params)


def test_replay_ratio__sets_the_learner_steps():
    c = default.get_config()  # paper: 1024 games x 32 plies, batch 1024
    assert c.learner.replay_ratio == 1.0
    assert config_lib.steps_per_iteration(c) == 32
    c.learner.replay_ratio = 0.25
    assert config_lib.steps_per_iteration(c) == 8
    smoke = default.get_config("smoke")
    assert config_lib.steps_per_iteration(smoke) == 2  # 2 x 32 samples per 8 x 8 positions
    smoke.learner.replay_ratio = 0.1  # a quarter step per iteration: not reachable
    with pytest.raises(config_lib.ConfigError, match=r"^config\.learner\.replay_ratio = 0\.1: .*nearest: 0\.5"):
        config_lib.validate(smoke, 1)


def test_loss__policy_targets_only_from_full_searches():
    """Reduced-search positions add to the value loss, not the policy loss."""
    from az.train.replay import Batch
    from envs import env

    def apply_fn(params, observations):
        n = observations[0].shape[0]  # (board planes [N, 9, 9, 62], flags [N, 57])
        return jnp.broadcast_to(params["w"], (n, 2187)), jnp.broadcast_to(jnp.tanh(params["v"]), (n,))

    params = {"w": jnp.zeros(2187).at[5].set(2.0), "v": jnp.float32(0.0)}
    targets = jax.nn.one_hot(jnp.asarray([5, 9, 9, 5]), 2187)
    batch = Batch(board=jnp.full((4, 81), -1, jnp.int8), hand=jnp.zeros((4, 2, 7), jnp.int8), policy=targets,
                  policy_weight=jnp.asarray([1.0, 0.0, 0.0, 1.0]), value=jnp.asarray([1.0, -1.0, 1.0, -1.0]))
    loss, (policy_loss, value_loss, _, _, legality_loss, material_loss, _, _) = learner.loss_fn(
        apply_fn, params, batch, env.Rules())
    assert float(legality_loss) == 0.0 and float(material_loss) == 0.0  # no auxiliary heads
    log_p = jax.nn.log_softmax(params["w"])
    assert float(policy_loss) == pytest.approx(float(-log_p[5]), rel=1e-6)  # rows 0 and 3 only
    assert float(value_loss) == pytest.approx(1.0)  # all four rows: (0 - +-1)^2
    assert float(loss) == pytest.approx(float(policy_loss) + float(value_loss))


def test_loss__value_weight_scales_the_value_error_and_its_gradient_alone():
    """``value_weight`` k: the total is policy + k * value error; the value's parameter gets
    k times the gradient it gets at 1, the policy's the same."""
    from az.train.replay import Batch
    from envs import env

    def apply_fn(params, observations):
        n = observations[0].shape[0]
        return jnp.broadcast_to(params["w"], (n, 2187)), jnp.broadcast_to(jnp.tanh(params["v"]), (n,))

    params = {"w": jnp.zeros(2187).at[5].set(2.0), "v": jnp.float32(0.3)}
    batch = Batch(board=jnp.full((2, 81), -1, jnp.int8), hand=jnp.zeros((2, 2, 7), jnp.int8),
                  policy=jax.nn.one_hot(jnp.asarray([5, 9]), 2187), policy_weight=jnp.ones(2),
                  value=jnp.asarray([1.0, -0.5]))

    def loss_and_grad(k):
        fn = jax.value_and_grad(lambda p: learner.loss_fn(apply_fn, p, batch, env.Rules(), value_weight=k),
                                has_aux=True)
        (loss, parts), grads = fn(params)
        return float(loss), parts, grads

    value_error = np.mean((np.tanh(0.3) - np.array([1.0, -0.5])) ** 2)
    one, parts, grads_one = loss_and_grad(1.0)
    three, parts3, grads_three = loss_and_grad(3.0)
    assert float(parts3[1]) == pytest.approx(value_error, rel=1e-5)  # reported unweighted
    assert three == pytest.approx(float(parts[0]) + 3.0 * value_error, rel=1e-5)
    assert three - one == pytest.approx(2.0 * value_error, rel=1e-5)
    assert float(grads_three["v"]) == pytest.approx(3.0 * float(grads_one["v"]), rel=1e-5)
    np.testing.assert_allclose(grads_three["w"], grads_one["w"], rtol=1e-6)


def test_loss__reply_head_is_a_cross_entropy_over_the_positions_with_a_next_target():
    """``reply_weight`` k > 0: the reply head's cross-entropy against the next ply's policy,
    averaged over the rows whose weight is 1, joins the loss times k; a row without a
    next target moves nothing."""
    from az.train.replay import Batch
    from envs import env

    def apply_fn(params, observations, with_aux=False):
        n = observations[0].shape[0]
        logits, value = jnp.zeros((n, 2187)), jnp.zeros(n)
        return (logits, value, {"reply": jnp.broadcast_to(params["r"], (n, 2187))}) if with_aux else (logits, value)

    params = {"r": jnp.zeros(2187).at[5].set(2.0)}
    reply = jax.nn.one_hot(jnp.asarray([5, 9, 9]), 2187)
    batch = Batch(board=jnp.full((3, 81), -1, jnp.int8), hand=jnp.zeros((3, 2, 7), jnp.int8),
                  policy=jax.nn.one_hot(jnp.asarray([0, 0, 0]), 2187), policy_weight=jnp.ones(3),
                  value=jnp.zeros(3), reply=reply, reply_weight=jnp.asarray([1.0, 1.0, 0.0]))
    fn = jax.value_and_grad(lambda p: learner.loss_fn(apply_fn, p, batch, env.Rules(), reply_weight=0.5),
                            has_aux=True)
    (loss, parts), grads = jax.jit(fn)(params)
    log_p = np.asarray(jax.nn.log_softmax(params["r"]))
    expected = -(log_p[5] + log_p[9]) / 2  # the third row has no target
    assert float(parts[7]) == pytest.approx(expected, rel=1e-5)
    assert float(loss) == pytest.approx(float(parts[0]) + float(parts[1]) + 0.5 * expected, rel=1e-5)
    step = -np.asarray(grads["r"])
    # k times the rows' mean target less the softmax; the third row's target adds nothing.
    wanted = np.zeros(2187)
    wanted[[5, 9]] = 0.5
    np.testing.assert_allclose(step, 0.5 * (wanted - np.exp(log_p)), atol=1e-6)
    no_head = learner.loss_fn(apply_fn, params, batch, env.Rules())
    assert float(no_head[1][7]) == 0.0


def test_loss__policy_over_legal_moves_ignores_illegal_logits():
    """``policy_over="legal"``: the softmax runs over the moves legal on the stored board and
    hands (30 at the start, 71 with a gold in hand: 41 empty squares more), illegal
    logits get no gradient; ``"all"`` takes the softmax over all 2,187 actions."""
    from az.train.replay import Batch
    from envs import env, movegen

    def apply_fn(params, observations):
        n = observations[0].shape[0]
        return jnp.broadcast_to(params["w"], (n, 2187)), jnp.zeros(n)

    start = movegen.GameState()
    hands = np.zeros((2, 2, 7), np.int8)
    hands[1, 0, 6] = 1  # the mover holds a gold
    rng = np.random.default_rng(1)
    params = {"w": jnp.asarray(rng.normal(size=2187), jnp.float32)}
    first_legal = int(np.flatnonzero(np.asarray(start.legal_action_mask))[0])
    batch = Batch(board=jnp.tile(start.board.astype(jnp.int8), (2, 1)), hand=jnp.asarray(hands),
                  policy=jax.nn.one_hot(jnp.asarray([first_legal, first_legal]), 2187), policy_weight=jnp.ones(2),
                  value=jnp.zeros(2))

    def loss_and_grad(policy_over):
        fn = jax.value_and_grad(lambda p: learner.loss_fn(apply_fn, p, batch, env.Rules(), policy_over=policy_over),
                                has_aux=True)
        (_, (policy_loss, *_)), grads = jax.jit(fn)(params)
        return float(policy_loss), np.asarray(grads["w"])

    legal = np.asarray(learner.legal_moves(batch.board, batch.hand, env.Rules()))
    assert legal.sum(-1).tolist() == [30, 71]
    w = np.asarray(params["w"], np.float64)
    loss, gradient = loss_and_grad("legal")
    expected = np.mean([np.log(np.exp(w[row]).sum()) - w[first_legal] for row in legal])
    assert loss == pytest.approx(expected, rel=1e-5)
    assert np.all(gradient[~legal.any(0)] == 0) and np.all(gradient[legal.any(0)] != 0)
    loss_all, gradient_all = loss_and_grad("all")
    assert loss_all == pytest.approx(np.log(np.exp(w).sum()) - w[first_legal], rel=1e-5)
    assert np.all(gradient_all != 0)


def test_loss__legality_head_learns_the_recomputed_legal_moves():
    """``legality=True``: the head's loss is the binary cross-entropy of a sigmoid per
    action against the legal moves recomputed from the stored position, averaged over
    the 2,187 actions, and is added to the total; its gradient reaches only the head's
    logits (here a parameter of its own), which move up on legal moves, down elsewhere."""
    from az.train.replay import Batch
    from envs import env, movegen

    def apply_fn(params, observations, with_aux=False):
        n = observations[0].shape[0]
        out = jnp.broadcast_to(params["w"], (n, 2187)), jnp.zeros(n)
        return (*out, {"legality": jnp.broadcast_to(params["legal"], (n, 2187))}) if with_aux else out

    start = movegen.GameState()
    first_legal = int(np.flatnonzero(np.asarray(start.legal_action_mask))[0])
    batch = Batch(board=start.board.astype(jnp.int8)[None], hand=jnp.zeros((1, 2, 7), jnp.int8),
                  policy=jax.nn.one_hot(jnp.asarray([first_legal]), 2187), policy_weight=jnp.ones(1),
                  value=jnp.zeros(1))
    rng = np.random.default_rng(2)
    params = {"w": jnp.zeros(2187), "legal": jnp.asarray(rng.normal(size=2187), jnp.float32)}
    fn = jax.value_and_grad(lambda p: learner.loss_fn(apply_fn, p, batch, env.Rules(), legality=True), has_aux=True)
    (loss, (policy_loss, value_loss, _, _, legality_loss, _, _, _)), grads = jax.jit(fn)(params)

    legal = np.asarray(start.legal_action_mask)
    z = np.asarray(params["legal"], np.float64)
    expected = np.mean(np.log1p(np.exp(-np.where(legal, z, -z))))
    assert float(legality_loss) == pytest.approx(expected, rel=1e-5)
    assert float(loss) == pytest.approx(float(policy_loss) + float(value_loss) + expected, rel=1e-5)
    assert float(policy_loss) == pytest.approx(np.log(2187), rel=1e-5)  # the policy still over all actions
    step = -np.asarray(grads["legal"])
    assert np.all(step[legal] > 0) and np.all(step[~legal] < 0)


def test_loss__material_head_regresses_the_scaled_future_material():
    """``material_weight`` > 0: the head's squared error against tanh(material / 10) joins
    the total times that weight, and its gradient pulls the head's output toward that target."""
    from az.train.replay import Batch
    from envs import env

    def apply_fn(params, observations, with_aux=False):
        n = observations[0].shape[0]
        out = jnp.zeros((n, 2187)), jnp.zeros(n)
        return (*out, {"material": jnp.tanh(params["m"])}) if with_aux else out

    balance = jnp.asarray([10.0, -5.0, 0.0])
    batch = Batch(board=jnp.full((3, 81), -1, jnp.int8), hand=jnp.zeros((3, 2, 7), jnp.int8),
                  policy=jnp.zeros((3, 2187)), policy_weight=jnp.zeros(3), value=jnp.zeros(3), material=balance)
    params = {"m": jnp.asarray([0.0, 0.0, 0.5])}
    fn = jax.value_and_grad(lambda p: learner.loss_fn(apply_fn, p, batch, env.Rules(), material_weight=3.0),
                            has_aux=True)
    (loss, parts), grads = jax.jit(fn)(params)
    target = np.tanh(np.asarray(balance) / learner.MATERIAL_SCALE)
    expected = np.mean((np.tanh([0.0, 0.0, 0.5]) - target) ** 2)
    assert float(parts[5]) == pytest.approx(expected, rel=1e-5)
    assert float(loss) == pytest.approx(float(parts[0]) + float(parts[1]) + 3.0 * expected, rel=1e-5)
    assert np.all(np.sign(-np.asarray(grads["m"])) == np.sign(target - np.tanh([0.0, 0.0, 0.5])))


def test_loss__occupancy_head_is_a_cross_entropy_per_square():
    """``occupancy_weight`` > 0: the mean over positions and squares of the softmax
    cross-entropy of the head's three logits against each square's later occupant joins
    the total times that weight, and its gradient raises the target's logit."""
    from az.train.replay import Batch
    from envs import env

    def apply_fn(params, observations, with_aux=False):
        n = observations[0].shape[0]
        out = jnp.zeros((n, 2187)), jnp.zeros(n)
        return (*out, {"occupancy": jnp.broadcast_to(params["o"], (n, 81, 3))}) if with_aux else out

    occupancy = jnp.asarray(np.random.default_rng(0).integers(0, 3, (2, 81)), jnp.int32)
    batch = Batch(board=jnp.full((2, 81), -1, jnp.int8), hand=jnp.zeros((2, 2, 7), jnp.int8),
                  policy=jnp.zeros((2, 2187)), policy_weight=jnp.zeros(2), value=jnp.zeros(2), occupancy=occupancy)
    logits = np.zeros((81, 3), np.float32)
    logits[:, 1] = 1.0  # every square predicts the mover's piece most
    fn = jax.value_and_grad(lambda p: learner.loss_fn(apply_fn, p, batch, env.Rules(), occupancy_weight=0.5),
                            has_aux=True)
    (loss, parts), grads = jax.jit(fn)({"o": jnp.asarray(logits)})
    log_p = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    expected = -np.mean(np.take_along_axis(np.broadcast_to(log_p, (2, 81, 3)), np.asarray(occupancy)[..., None], -1))
    assert float(parts[6]) == pytest.approx(expected, rel=1e-5)
    assert float(loss) == pytest.approx(float(parts[0]) + float(parts[1]) + 0.5 * expected, rel=1e-5)
    step = -np.asarray(grads["o"])
    both = np.asarray(occupancy)[0] == np.asarray(occupancy)[1]  # squares whose two targets agree
    target = np.asarray(occupancy)[0][both]
    assert np.all(step[both][np.arange(both.sum()), target] > 0)


def test_loss__surprise_weighs_each_target_by_how_far_the_network_is_from_it():
    """``policy_surprise`` s: a full search's cross-entropy counts (1 - s) + s * KL / mean
    KL over the positions with a target; s = 0 is the plain mean, reduced searches still
    count nothing, and the weights carry no gradient."""
    from az.train.replay import Batch
    from envs import env

    def apply_fn(params, observations):
        n = observations[0].shape[0]
        return jnp.broadcast_to(params["w"], (n, 2187)), jnp.zeros(n)

    params = {"w": jnp.zeros(2187).at[5].set(4.0).at[9].set(1.0)}
    soft = jnp.zeros(2187).at[5].set(0.5).at[9].set(0.5)
    targets = jnp.stack([jax.nn.one_hot(5, 2187), jax.nn.one_hot(9, 2187), soft, jax.nn.one_hot(11, 2187)])
    full = jnp.asarray([1.0, 1.0, 1.0, 0.0])
    batch = Batch(board=jnp.full((4, 81), -1, jnp.int8), hand=jnp.zeros((4, 2, 7), jnp.int8), policy=targets,
                  policy_weight=full, value=jnp.zeros(4))
    log_p = np.asarray(jax.nn.log_softmax(params["w"]), np.float64)
    cross_entropy = np.array([-log_p[5], -log_p[9], -(log_p[5] + log_p[9]) / 2])
    kl = cross_entropy - np.array([0.0, 0.0, np.log(2.0)])
    assert np.all(kl > 0) and kl[1] > kl[2] > kl[0]

    def policy_loss(surprise):
        fn = lambda p: learner.loss_fn(apply_fn, p, batch, env.Rules(), policy_surprise=surprise)[1][0]
        return float(fn(params)), jax.grad(fn)(params)["w"]

    plain, plain_grad = policy_loss(0.0)
    assert plain == pytest.approx(cross_entropy.mean(), rel=1e-5)
    for s in (0.5, 1.0):
        weights = (1 - s) + s * kl / kl.mean()
        loss, grad = policy_loss(s)
        assert loss == pytest.approx((weights * cross_entropy).sum() / 3, rel=1e-5)
        # The gradient is the weighted sum of each row's own gradient, the weights held fixed.
        rows = [np.asarray(jax.grad(lambda p, t=t: -(t * jax.nn.log_softmax(p["w"])).sum())(params)["w"])
                for t in targets[:3]]
        np.testing.assert_allclose(grad, sum(w * r for w, r in zip(weights, rows)) / 3, atol=1e-6)
    np.testing.assert_allclose(learner.surprise_weights(jnp.asarray(cross_entropy, jnp.float32), targets[:3],
                                                        full[:3], 1.0).mean(), 1.0, rtol=1e-5)
