"""Checks a training config before anything compiles; each error is one line naming the field."""

import math

import ml_collections

from az import search as search_lib
from envs import starts


class ConfigError(ValueError):
    """A config value that cannot run; the message names the field."""


def _require(ok: bool, field: str, value, what: str):
    if not ok:
        raise ConfigError(f"config.{field} = {value!r}: {what}")


def cpu_devices(config: ml_collections.ConfigDict, cores: int) -> int:
    """How many JAX devices a CPU host of ``cores`` cores runs ``config`` on: one per core,
    as many as divide the games in parallel and the learner's batch. XLA runs each
    convolution on one core, so only one device per core keeps every core busy
    (docs/benchmarks.md); an unusable config gets 1, and ``validate`` names its field."""
    try:
        games, batch = int(config.selfplay.num_games), int(config.learner.batch_size)
    except (AttributeError, TypeError, ValueError):
        return 1
    if games < 1 or batch < 1:
        return 1
    unit = math.gcd(games, batch)
    return max((d for d in range(1, max(int(cores), 1) + 1) if unit % d == 0), default=1)


def validate(config: ml_collections.ConfigDict, num_devices: int) -> None:
    """Raises ConfigError, naming the field, for the first value the run cannot use."""
    c = config
    _require(isinstance(c.seed, int), "seed", c.seed, "must be an integer")
    _require(c.budget_games >= 1, "budget_games", c.budget_games, "must be >= 1")
    _validate_env(c)
    _validate_search(c)
    _validate_selfplay(c, num_devices)
    _validate_model(c)
    _validate_replay(c)
    _validate_learner(c, num_devices)
    _validate_run(c)


def _validate_env(c: ml_collections.ConfigDict) -> None:
    try:
        spec = starts.parse_start(c.env.start)
        for leaf in spec.leaves:
            if isinstance(leaf, starts.Book):
                starts.load_book(leaf.path)
    except ValueError as e:
        raise ConfigError(f"config.env.start = {c.env.start!r}: {e}") from None
    _require(c.env.max_length >= 1, "env.max_length", c.env.max_length, "must be >= 1")
    _require(c.env.movegen in ("dense", "pgx"), "env.movegen", c.env.movegen, "must be 'dense' or 'pgx'")


def _validate_search(c: ml_collections.ConfigDict) -> None:
    s = c.search
    _require(s.algorithm in ("gumbel", "puct"), "search.algorithm", s.algorithm, "must be 'gumbel' or 'puct'")
    _require(s.num_simulations >= 1, "search.num_simulations", s.num_simulations, "must be >= 1")
    problem = search_lib.playing_field_problem(s, c.model.material_head)
    if problem is not None:
        field, why = problem
        _require(False, f"search.{field}", s[field], why)
    _require(s.gumbel_scale >= 0, "search.gumbel_scale", s.gumbel_scale, "must be >= 0")
    _require(s.dirichlet_alpha > 0, "search.dirichlet_alpha", s.dirichlet_alpha, "must be > 0")
    _require(0 <= s.dirichlet_fraction <= 1, "search.dirichlet_fraction", s.dirichlet_fraction, "must be in [0, 1]")
    for field in ("mate_in_one", "mate_in_tree"):
        _require(not s[field] or c.env.movegen == "dense", f"search.{field}", s[field], "needs env.movegen = 'dense'")
    for field in ("considered_drops", "considered_captures", "reduced_considered_captures"):
        _require(not s[field] or s.algorithm == "gumbel", f"search.{field}", s[field],
                 "needs search.algorithm = 'gumbel'")


def _validate_selfplay(c: ml_collections.ConfigDict, num_devices: int) -> None:
    s = c.search
    p = c.selfplay
    _require(p.num_games >= 1, "selfplay.num_games", p.num_games, "must be >= 1")
    _require(
        p.num_games % num_devices == 0,
        "selfplay.num_games",
        p.num_games,
        f"must be divisible by the device count ({num_devices})",
    )
    _require(p.plies_per_iteration >= 1, "selfplay.plies_per_iteration", p.plies_per_iteration, "must be >= 1")
    _require(p.sample_visits_plies >= 0, "selfplay.sample_visits_plies", p.sample_visits_plies, "must be >= 0")
    _require(0 < p.full_search_fraction <= 1, "selfplay.full_search_fraction", p.full_search_fraction, "must be in (0, 1]")
    if p.full_search_fraction < 1:
        _require(
            1 <= s.reduced_simulations < s.num_simulations,
            "search.reduced_simulations",
            s.reduced_simulations,
            f"must be in [1, search.num_simulations = {s.num_simulations})",
        )
    captures = s.reduced_considered_captures
    _require(0 <= captures <= s.reduced_simulations, "search.reduced_considered_captures", captures,
             f"must be in [0, search.reduced_simulations = {s.reduced_simulations}]")
    _require(not captures or p.full_search_fraction < 1, "search.reduced_considered_captures", captures,
             "needs playout caps (selfplay.full_search_fraction < 1)")
    noise = s.reduced_gumbel_scale
    _require(noise == -1 or noise >= 0, "search.reduced_gumbel_scale", noise, "must be -1 (search.gumbel_scale) or >= 0")
    _require(noise == -1 or p.full_search_fraction < 1, "search.reduced_gumbel_scale", noise,
             "needs playout caps (selfplay.full_search_fraction < 1)")
    _require(noise == -1 or s.algorithm == "gumbel", "search.reduced_gumbel_scale", noise,
             "needs search.algorithm = 'gumbel'")
    _require(-1 <= p.resign_threshold <= 0, "selfplay.resign_threshold", p.resign_threshold, "must be in [-1, 0]")
    _require(p.resign_plies >= 1, "selfplay.resign_plies", p.resign_plies, "must be >= 1")
    _require(0 <= p.no_resign_fraction <= 1, "selfplay.no_resign_fraction", p.no_resign_fraction, "must be in [0, 1]")
    _require(0 < p.false_resign_target < 1, "selfplay.false_resign_target", p.false_resign_target, "must be in (0, 1)")
    _require(not p.avoid_mates_in_one or c.env.movegen == "dense", "selfplay.avoid_mates_in_one",
             p.avoid_mates_in_one, "needs env.movegen = 'dense'")


def _validate_model(c: ml_collections.ConfigDict) -> None:
    m = c.model
    _require(m.num_blocks >= 0, "model.num_blocks", m.num_blocks, "must be >= 0")
    _require(m.channels >= 1, "model.channels", m.channels, "must be >= 1")
    _require(m.value_hidden >= 1, "model.value_hidden", m.value_hidden, "must be >= 1")
    _require(m.dtype in ("float32", "bfloat16"), "model.dtype", m.dtype, "must be 'float32' or 'bfloat16'")
    _require(-20.0 <= m.drop_logit_init <= 20.0, "model.drop_logit_init", m.drop_logit_init, "must be in [-20, 20]")
    _require(m.policy_bias in ("plane", "action"), "model.policy_bias", m.policy_bias, "must be 'plane' or 'action'")


def _validate_replay(c: ml_collections.ConfigDict) -> None:
    """The replay's fields, and the auxiliary heads' horizons, which the replay must hold."""
    p, m = c.selfplay, c.model
    r = c.replay
    per_iteration = p.num_games * p.plies_per_iteration
    _require(
        r.capacity >= per_iteration,
        "replay.capacity",
        r.capacity,
        f"is smaller than one iteration ({p.num_games} games x {p.plies_per_iteration} plies = {per_iteration})",
    )
    _require(
        r.capacity % per_iteration == 0,
        "replay.capacity",
        r.capacity,
        f"must be a multiple of one iteration's positions ({per_iteration})",
    )
    _require(0 <= r.min_positions <= r.capacity, "replay.min_positions", r.min_positions, "must be in [0, capacity]")
    _require(
        0 <= r.search_value_weight <= 1, "replay.search_value_weight", r.search_value_weight, "must be in [0, 1]"
    )
    _require(
        r.reduced_search_value_weight == -1 or 0 <= r.reduced_search_value_weight <= 1,
        "replay.reduced_search_value_weight",
        r.reduced_search_value_weight,
        "must be in [0, 1], or -1 for search_value_weight's",
    )
    _require(0 <= r.reduced_policy_weight <= 1, "replay.reduced_policy_weight", r.reduced_policy_weight,
             "must be in [0, 1]")
    _require(r.reduced_policy_weight == 0 or p.full_search_fraction < 1, "replay.reduced_policy_weight",
             r.reduced_policy_weight, "needs playout caps (selfplay.full_search_fraction < 1)")
    _require(r.reduced_policy_weight == 0 or c.search.algorithm == "gumbel", "replay.reduced_policy_weight",
             r.reduced_policy_weight, "needs search.algorithm = 'gumbel' (a few PUCT visits are no target)")
    _require(
        isinstance(r.search_value_plies, int) and 0 <= r.search_value_plies < r.capacity // p.num_games,
        "replay.search_value_plies",
        r.search_value_plies,
        f"must be an integer in [0, {r.capacity // p.num_games}), the replay's rows",
    )
    _require(
        r.truncated_value in ("zero", "search"), "replay.truncated_value", r.truncated_value, "must be 'zero' or 'search'"
    )
    _require(isinstance(m.material_plies, int) and 0 <= m.material_plies < r.capacity // p.num_games,
             "model.material_plies", m.material_plies,
             f"must be an integer in [0, replay rows = {r.capacity // p.num_games})")
    _require(m.material_weight > 0, "model.material_weight", m.material_weight, "must be > 0")
    _require(m.reply_weight > 0, "model.reply_weight", m.reply_weight, "must be > 0")
    _require(isinstance(m.occupancy_plies, int) and 1 <= m.occupancy_plies < r.capacity // p.num_games,
             "model.occupancy_plies", m.occupancy_plies,
             f"must be an integer in [1, replay rows = {r.capacity // p.num_games})")
    _require(m.occupancy_weight > 0, "model.occupancy_weight", m.occupancy_weight, "must be > 0")


def _validate_learner(c: ml_collections.ConfigDict, num_devices: int) -> None:
    p = c.selfplay
    per_iteration = p.num_games * p.plies_per_iteration
    lr = c.learner
    _require(lr.batch_size >= 1, "learner.batch_size", lr.batch_size, "must be >= 1")
    _require(
        lr.batch_size % num_devices == 0,
        "learner.batch_size",
        lr.batch_size,
        f"must be divisible by the device count ({num_devices})",
    )
    _require(lr.replay_ratio >= 0, "learner.replay_ratio", lr.replay_ratio, "must be >= 0")
    if lr.replay_ratio > 0:
        steps = steps_per_iteration(c)
        reached = steps * lr.batch_size / per_iteration
        _require(
            abs(reached - lr.replay_ratio) <= 0.25 * lr.replay_ratio,
            "learner.replay_ratio",
            lr.replay_ratio,
            f"{lr.batch_size}-position steps reach only multiples of {lr.batch_size / per_iteration:g} "
            f"per iteration of {per_iteration} positions (nearest: {reached:g}); change learner.batch_size",
        )
    _require(lr.optimizer in ("sgd", "adamw"), "learner.optimizer", lr.optimizer, "must be 'sgd' or 'adamw'")
    _require(lr.learning_rate > 0, "learner.learning_rate", lr.learning_rate, "must be > 0")
    _require(0 <= lr.momentum < 1, "learner.momentum", lr.momentum, "must be in [0, 1)")
    _require(lr.weight_decay >= 0, "learner.weight_decay", lr.weight_decay, "must be >= 0")
    _require(lr.warmup_steps >= 0, "learner.warmup_steps", lr.warmup_steps, "must be >= 0")
    _require(lr.schedule in ("cosine", "step", "constant"), "learner.schedule", lr.schedule, "must be cosine|step|constant")
    _require(
        0 <= lr.final_rate_fraction < 1, "learner.final_rate_fraction", lr.final_rate_fraction, "must be in [0, 1)"
    )
    _require(
        all(0 < f < 1 for f in lr.step_fractions), "learner.step_fractions", lr.step_fractions, "must lie in (0, 1)"
    )
    _require(0 <= lr.ema_decay < 1, "learner.ema_decay", lr.ema_decay, "must be in [0, 1) (0: no average)")
    _require(lr.grad_clip >= 0, "learner.grad_clip", lr.grad_clip, "must be >= 0 (0: no clipping)")
    _require(lr.policy_over in ("all", "legal"), "learner.policy_over", lr.policy_over, "must be 'all' or 'legal'")
    _require(0 <= lr.policy_surprise <= 1, "learner.policy_surprise", lr.policy_surprise, "must be in [0, 1] (0: off)")
    _require(lr.value_weight > 0, "learner.value_weight", lr.value_weight, "must be > 0")


def _validate_run(c: ml_collections.ConfigDict) -> None:
    """Teacher measurements and checkpoints."""
    _require(c.teacher.every_iterations >= 0, "teacher.every_iterations", c.teacher.every_iterations, "must be >= 0")
    _require(c.teacher.positions >= 0, "teacher.positions", c.teacher.positions, "must be >= 0 (0: all)")
    _require(c.checkpoint.every_iterations >= 1, "checkpoint.every_iterations", c.checkpoint.every_iterations, ">= 1")
    _require(c.checkpoint.keep >= 1, "checkpoint.keep", c.checkpoint.keep, "must be >= 1")


def steps_per_iteration(config) -> int:
    """K, the learner steps per iteration: ``replay_ratio`` samples per generated position."""
    positions = config.selfplay.num_games * config.selfplay.plies_per_iteration
    if config.learner.replay_ratio <= 0:
        return 0
    return max(1, round(config.learner.replay_ratio * positions / config.learner.batch_size))
