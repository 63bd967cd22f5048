"""The learner: the learning rate over the run, the optimizer, the loss, one gradient step.

Loss = cross-entropy of the policy against the search's improved policy + mean
squared error of the value times ``learner.value_weight`` (1 as AlphaZero), over N
sampled positions; weight decay lives in the
optimizer (decoupled for AdamW, added to the gradient for SGD). The policy's softmax
runs over all 2,187 actions (illegal ones have target 0, as in AlphaZero's pseudocode)
or over each position's legal moves, recomputed from the stored board and hands
(``learner.policy_over``). A network with a legality head (``model.legality_head``)
adds that head's loss: binary cross-entropy of a sigmoid per action against the
recomputed legal moves, averaged over the 2,187 actions, so the trunk still learns
which moves exist when the policy's softmax no longer sees the illegal ones. A network
with a material head (``model.material_head``) adds the squared error of its output
against tanh(material / ``MATERIAL_SCALE``), the mover's material balance in pawns
``model.material_plies`` plies later (``replay.future_material``), times
``model.material_weight``: the value's hidden layer then has to count material and see
which pieces are about to change hands. A network with an occupancy head
(``model.occupancy_head``) adds the cross-entropy of each square's predicted occupant
(empty, the mover's piece, the opponent's) ``model.occupancy_plies`` plies later
(``replay.future_occupancy``), averaged over the 81 squares, times
``model.occupancy_weight``: a target on every square of the trunk, as KataGo's
ownership head, where a piece left to be taken shows as a square that changes sides.
A network with a reply head (``model.reply_head``) adds the cross-entropy of its
logits against the opponent's search policy at the next ply (``replay.next_policy``),
over the positions whose next ply was searched in full, times ``model.reply_weight``
(KataGo's opponent policy target): the trunk learns what the opponent plays next.
With ``learner.policy_surprise`` s > 0 each full search's policy cross-entropy is
weighed (1 - s) + s * KL_i / mean KL, KL_i the divergence of the network's policy from
the search's target (KataGo's surprise weighting, with the learner's own policy as the
prior): the positions where the search found what the network does not yet see count
more, and the weights average 1 over the batch.

The learning rate follows the run's progress p = games finished / ``budget_games``
(the same progress that moves start-scheme phases), so a schedule ends exactly when
the budget is spent whatever the games' length: cosine from ``lr`` down to
``lr * final_rate_fraction`` (``lr * (f + (1 - f) (1 + cos(pi p)) / 2)``; f = 0 is the plain cosine),
step ``lr * decay^(fractions passed)``, or constant, times a linear warm-up over the
first ``warmup_steps`` learner steps that starts above 0.
"""

import math
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import optax
from jax import Array

from az.train.replay import Batch
from envs import env, movegen

MATERIAL_SCALE = 10.0  # pawns: a rook ahead maps to tanh(1) = 0.76


def learning_rate(config, progress: Array, step: Array) -> Array:
    """The rate at training progress ``progress`` in [0, 1] for learner step ``step``
    (counted from 0); ``config`` is the ``learner`` section. Positive until p = 1."""
    progress = jnp.clip(jnp.asarray(progress, jnp.float32), 0.0, 1.0)
    if config.schedule == "cosine":
        floor = config.final_rate_fraction
        rate = config.learning_rate * (floor + (1.0 - floor) * 0.5 * (1.0 + jnp.cos(math.pi * progress)))
    elif config.schedule == "step":
        passed = sum((progress >= f).astype(jnp.float32) for f in config.step_fractions)
        rate = config.learning_rate * config.step_decay**passed
    else:
        rate = jnp.full_like(progress, config.learning_rate)
    warm = jnp.minimum(1.0, (jnp.asarray(step, jnp.float32) + 1.0) / max(config.warmup_steps, 1))
    return rate * warm


def make_optimizer(config) -> optax.GradientTransformation:
    """The update direction for a learning rate of 1 (the step multiplies it by the
    rate of the run's progress); ``config`` is the ``learner`` section."""
    if config.optimizer == "adamw":
        return optax.chain(optax.scale_by_adam(), optax.add_decayed_weights(config.weight_decay), optax.scale(-1.0))
    return optax.chain(
        optax.add_decayed_weights(config.weight_decay),
        optax.trace(decay=config.momentum, nesterov=True),
        optax.scale(-1.0),
    )


def _by_position(fn: Callable, boards: Array, hands: Array, rules: env.Rules):
    """``fn(position, move generator)`` over [N, 81] int8 boards and [N, 2, 7] int8 hands."""

    def one(board, hand):
        x = movegen.GameState(board=board.astype(jnp.int32), hand=hand.astype(jnp.int32))
        return fn(x, rules.movegen)

    return jax.vmap(one)(boards, hands)


def observations(boards: Array, hands: Array, rules: env.Rules) -> Array:
    """[N, 81] int8, [N, 2, 7] int8 -> the network's input (board planes packed
    [N, 648] uint8, flags [N, 57]), by the rules' move generator."""
    return _by_position(movegen.observe_parts, boards, hands, rules)


def legal_moves(boards: Array, hands: Array, rules: env.Rules) -> Array:
    """[N, 81] int8, [N, 2, 7] int8 -> [N, A] bool, the mover's legal moves."""
    return _by_position(movegen.legal_action_mask, boards, hands, rules)


class LossInfo(NamedTuple):
    """One learner step's diagnostics (scalars)."""

    policy_loss: Array
    value_loss: Array
    policy_entropy: Array  # of the network's policy
    value_accuracy: Array  # sign agreement on decided positions
    legality_loss: Array  # the legality head's cross-entropy (0 without the head)
    material_loss: Array  # the material head's squared error (0 without the head)
    occupancy_loss: Array  # the occupancy head's cross-entropy per square (0 without the head)
    reply_loss: Array  # the reply head's cross-entropy over the positions with a target (0 without)
    grad_norm: Array  # global gradient norm before clipping
    clipped: Array  # 1.0 when clipping scaled the gradient down, else 0.0
    learning_rate: Array


def loss_fn(apply_fn: Callable, params, batch: Batch, rules: env.Rules, *,
            policy_over: str = "all", legality: bool = False, material_weight: float = 0.0,
            occupancy_weight: float = 0.0, policy_surprise: float = 0.0,
            value_weight: float = 1.0, reply_weight: float = 0.0) -> tuple[Array, tuple]:
    observation = observations(batch.board, batch.hand, rules)
    legality_loss = material_loss = occupancy_loss = reply_loss = jnp.float32(0)
    material, occupancy, reply = material_weight > 0, occupancy_weight > 0, reply_weight > 0
    if legality or material or occupancy or reply:
        logits, value, aux = apply_fn(params, observation, with_aux=True)
    else:
        logits, value = apply_fn(params, observation)
    if policy_over == "legal" or legality:
        legal = legal_moves(batch.board, batch.hand, rules)
    if legality:
        legality_loss = optax.sigmoid_binary_cross_entropy(aux["legality"], legal.astype(jnp.float32)).mean()
    if material:
        material_loss = jnp.mean((aux["material"] - jnp.tanh(batch.material / MATERIAL_SCALE)) ** 2)
    if occupancy:
        occupancy_loss = optax.softmax_cross_entropy_with_integer_labels(aux["occupancy"], batch.occupancy).mean()
    if reply:
        reply_cross_entropy = -(batch.reply * jax.nn.log_softmax(aux["reply"])).sum(-1)
        reply_loss = (batch.reply_weight * reply_cross_entropy).sum() / jnp.maximum(batch.reply_weight.sum(), 1.0)
    if policy_over == "legal":
        # A finite fill keeps a row without legal moves finite (its target is 0 anyway).
        logits = jnp.where(legal, logits, -1e9)
    log_p = jax.nn.log_softmax(logits)
    # Reduced searches give policy targets only at replay.reduced_policy_weight > 0; values come from all.
    cross_entropy = -(batch.policy * log_p).sum(-1)
    weight = batch.policy_weight
    if policy_surprise > 0:
        weight = weight * surprise_weights(cross_entropy, batch.policy, weight, policy_surprise)
    policy_loss = (weight * cross_entropy).sum() / jnp.maximum(batch.policy_weight.sum(), 1.0)
    value_loss = jnp.mean((value - batch.value) ** 2)
    entropy = -(jnp.exp(log_p) * log_p).sum(-1).mean()
    decided = jnp.abs(batch.value) > 0.5
    agree = jnp.sign(value) == jnp.sign(batch.value)
    accuracy = (agree & decided).sum() / jnp.maximum(decided.sum(), 1)
    total = policy_loss + value_weight * value_loss + legality_loss + material_weight * material_loss
    return (total + occupancy_weight * occupancy_loss + reply_weight * reply_loss,
            (policy_loss, value_loss, entropy, accuracy, legality_loss, material_loss, occupancy_loss, reply_loss))


def surprise_weights(cross_entropy: Array, target: Array, policy_weight: Array, surprise: float) -> Array:
    """Each position's policy weight [N] from its cross-entropy [N] against ``target``
    [N, A] and whether it has a target (``policy_weight`` [N], 0 or 1): (1 - s) + s *
    KL_i / mean KL over the positions with a target, KL_i = cross-entropy - the target's
    entropy. No gradient flows through the weights."""
    target_entropy = -jnp.where(target > 0, target * jnp.log(jnp.where(target > 0, target, 1.0)), 0.0).sum(-1)
    kl = jax.lax.stop_gradient(jnp.maximum(cross_entropy - target_entropy, 0.0))
    mean_kl = (policy_weight * kl).sum() / jnp.maximum(policy_weight.sum(), 1.0)
    return (1.0 - surprise) + surprise * kl / jnp.maximum(mean_kl, 1e-6)


def make_update(apply_fn: Callable, optimizer: optax.GradientTransformation, rules: env.Rules, *, grad_clip: float,
                policy_over: str = "all", legality: bool = False, material_weight: float = 0.0,
                occupancy_weight: float = 0.0, policy_surprise: float = 0.0, value_weight: float = 1.0,
                reply_weight: float = 0.0):
    """``update(params, opt_state, batch, learning_rate) -> (params, opt_state, loss, LossInfo)``.

    ``grad_clip`` > 0 scales the gradient down to that global norm when it is larger
    (0: never); ``legality``: the network has a legality head to train; ``material_weight``
    > 0: it has a material head, whose loss counts this much; ``occupancy_weight`` > 0:
    the same for an occupancy head; ``policy_surprise``: ``surprise_weights``' s;
    ``value_weight``: the value's squared error counts this much; ``reply_weight`` > 0: the
    network has a reply head, whose cross-entropy counts this much."""
    grad_fn = jax.value_and_grad(
        lambda p, b: loss_fn(apply_fn, p, b, rules, policy_over=policy_over, legality=legality,
                             material_weight=material_weight, occupancy_weight=occupancy_weight,
                             policy_surprise=policy_surprise, value_weight=value_weight,
                             reply_weight=reply_weight),
        has_aux=True)

    def update(params, opt_state, batch: Batch, rate: Array):
        (loss, parts), grads = grad_fn(params, batch)
        norm = optax.tree.norm(grads)
        clipped = jnp.bool_(False)
        if grad_clip > 0:
            clipped = norm > grad_clip
            scale = jnp.where(clipped, grad_clip / norm, 1.0)
            grads = jax.tree.map(lambda g: g * scale.astype(g.dtype), grads)
        direction, opt_state = optimizer.update(grads, opt_state, params)
        params = optax.apply_updates(params, jax.tree.map(lambda d: rate * d, direction))
        info = LossInfo(*parts, grad_norm=norm, clipped=clipped.astype(jnp.float32), learning_rate=rate)
        return params, opt_state, loss, info

    return update
