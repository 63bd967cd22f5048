"""The learner: optimizer from the config, loss, and one gradient step.

Loss = cross-entropy of the policy against the search's improved policy + mean
squared error of the value, over N sampled positions; weight decay lives in the
optimizer (decoupled for AdamW, added to the gradient for SGD).
"""

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import optax
from jax import Array

from az.train.replay import Batch
from envs import env, movegen


def make_optimizer(config) -> optax.GradientTransformation:
    """``config``: the ``learner`` section (see configs/default.py)."""
    total = config.total_steps
    if config.schedule == "cosine":
        schedule = optax.warmup_cosine_decay_schedule(
            0.0, config.learning_rate, max(config.warmup_steps, 1), max(total, config.warmup_steps + 1)
        )
    elif config.schedule == "step":
        boundaries = {int(f * total): config.step_decay for f in config.step_fractions}
        decay = optax.piecewise_constant_schedule(config.learning_rate, boundaries)
        warmup = optax.linear_schedule(0.0, config.learning_rate, max(config.warmup_steps, 1))
        schedule = optax.join_schedules([warmup, decay], [config.warmup_steps])
    else:  # constant after warm-up
        schedule = optax.join_schedules(
            [optax.linear_schedule(0.0, config.learning_rate, max(config.warmup_steps, 1)),
             optax.constant_schedule(config.learning_rate)],
            [config.warmup_steps],
        )
    if config.optimizer == "adamw":
        core = optax.adamw(schedule, weight_decay=config.weight_decay)
    else:
        core = optax.chain(
            optax.add_decayed_weights(config.weight_decay),
            optax.sgd(schedule, momentum=config.momentum, nesterov=True),
        )
    return optax.chain(optax.clip_by_global_norm(config.grad_clip), core)


def observations(boards: Array, hands: Array, rules: env.Rules) -> Array:
    """[N, 81] int8, [N, 2, 7] int8 -> [N, 9, 9, 119] bool, by the rules' move generator."""

    def one(board, hand):
        x = movegen.GameState(board=board.astype(jnp.int32), hand=hand.astype(jnp.int32))
        return movegen.observe(x, rules.movegen)

    return jax.vmap(one)(boards, hands)


class LossInfo(NamedTuple):
    policy_loss: Array
    value_loss: Array
    policy_entropy: Array  # of the network's policy
    value_accuracy: Array  # sign agreement on decided positions


def loss_fn(apply_fn: Callable, params, batch: Batch, rules: env.Rules) -> tuple[Array, LossInfo]:
    logits, value = apply_fn(params, observations(batch.board, batch.hand, rules))
    log_p = jax.nn.log_softmax(logits)
    policy_loss = -(batch.policy * log_p).sum(-1).mean()
    value_loss = jnp.mean((value - batch.value) ** 2)
    entropy = -(jnp.exp(log_p) * log_p).sum(-1).mean()
    decided = jnp.abs(batch.value) > 0.5
    agree = jnp.sign(value) == jnp.sign(batch.value)
    accuracy = (agree & decided).sum() / jnp.maximum(decided.sum(), 1)
    return policy_loss + value_loss, LossInfo(policy_loss, value_loss, entropy, accuracy)


def make_update(apply_fn: Callable, optimizer: optax.GradientTransformation, rules: env.Rules):
    """``update(params, opt_state, batch) -> (params, opt_state, loss, LossInfo)``."""
    grad_fn = jax.value_and_grad(lambda p, b: loss_fn(apply_fn, p, b, rules), has_aux=True)

    def update(params, opt_state, batch: Batch):
        (loss, info), grads = grad_fn(params, batch)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss, info

    return update
