"""The compiled training loop: self-play T plies -> replay -> K learner steps.

One ``TrainState`` pytree goes through one jitted ``iteration(state) -> (state,
metrics)`` with the state donated; the host only logs and checkpoints between
iterations. Data parallel over every device: games, the replay's game columns and
minibatches are sharded on the mesh's ``data`` axis, parameters are replicated.
"""

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from jax import Array
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from az import network as network_lib
from az import search as search_lib
from az.train import config as config_lib
from az.train import learner as learner_lib
from az.train import replay as replay_lib
from az.train import selfplay as selfplay_lib
from envs import env, starts


class TrainState(NamedTuple):
    params: Any
    opt_state: Any
    games: env.State  # [B] running games
    replay: replay_lib.Replay  # [R, B]
    rng_key: Array  # [2] uint32
    iteration: Array  # [] int32, iterations done
    games_finished: Array  # [] int32
    positions: Array  # [] int32, plies played in self-play
    learner_steps: Array  # [] int32
    resign: selfplay_lib.Resign  # per game [B], and the resign threshold
    ema_params: Any  # an exponential moving average of params (learner.ema_decay > 0), else None


class Trainer(NamedTuple):
    """The run's compiled pieces, built once from a validated config."""

    config: ml_collections.ConfigDict
    scheme_names: tuple
    init: Callable[[], TrainState]  # jitted, lands sharded
    iteration: "BudgetedIteration"  # (state) -> (state, metrics), jitted, donates its input
    state_sharding: Any
    abstract_state: Any  # ShapeDtypeStructs with shardings, for restoring
    # The iteration's pieces, unjitted, to time each alone (bench/train_bench.py):
    selfplay: Callable  # (params, games, resign, rng_key, games_finished) -> (games, resign, games_finished, plies, stats)
    relabel: Callable  # replay -> replay with value targets
    learner_step: Callable  # (params, opt_state, step, replay, progress, rng_key) -> (params, opt_state, loss, info)
    learner_steps_per_iteration: int  # K
    # Teacher-set agreement of the parameters that play (the average where kept): state ->
    # device scalars (``TeacherAgreement``); None when off.
    teacher: Callable[[TrainState], dict] | None


def reduced_search_settings(search_config: ml_collections.ConfigDict) -> dict:
    """``search_from_config``'s overrides for the playout caps' reduced search. It visits
    only its ``reduced_simulations`` best considered actions, so with
    ``reduced_considered_captures`` it considers exactly that many, its best captures among
    them; otherwise it keeps the full search's m and reservations (unvisited there).
    ``reduced_gumbel_scale`` >= 0 sets its root noise apart from the full search's."""
    s = search_config
    settings = {"num_simulations": s.reduced_simulations}
    if s.reduced_gumbel_scale >= 0:
        settings["gumbel_scale"] = s.reduced_gumbel_scale
    if s.reduced_considered_captures:
        settings.update(max_num_considered_actions=s.reduced_simulations, considered_drops=0,
                        considered_captures=s.reduced_considered_captures)
    return settings


def _make_selfplay(config: ml_collections.ConfigDict, apply_fn, rules, spec: starts.StartSpec, start,
                   mesh: Mesh, abstract: "TrainState") -> Callable:
    """Self-play of the config: the search, playout caps, resignation and the mate guard,
    each device playing the games it holds (``shard_map``). Left to the compiler, the
    search's gathers and scatters over a sharded batch became about 180 all-gathers an
    iteration (docs/benchmarks.md)."""
    def make_search(num_simulations: int, **overrides):
        return search_lib.search_from_config(config.search, apply_fn, rules, num_simulations=num_simulations,
                                             **overrides)

    capped = config.selfplay.full_search_fraction < 1
    local = selfplay_lib.selfplay_from_config(
        config.selfplay,
        make_search(config.search.num_simulations),
        start,
        rules,
        reduced_search=make_search(**reduced_search_settings(config.search)) if capped else None,
        game_budget=config.budget_games,
        num_schemes=len(spec.leaves),
        guard_candidates=config.search.max_num_considered_actions,
        axis_name="data",
        num_shards=mesh.size,
    )
    per_game = lambda tree: jax.tree.map(lambda leaf: P("data") if leaf.ndim >= 1 else P(), tree)  # noqa: E731
    in_specs = (P(), per_game(abstract.games), per_game(abstract.resign), P(), P(), P())
    out_specs = (per_game(abstract.games), per_game(abstract.resign), P(), P(None, "data"), P())
    # check_vma off: the scan's statistics vary per device until summed at its end.
    sharded = jax.shard_map(local, mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_vma=False)

    def selfplay(params, games, resign, rng_key, games_finished, budget=config.budget_games):
        return sharded(params, games, resign, rng_key, games_finished, jnp.asarray(budget, jnp.int32))

    return selfplay


def _state_sharding(abstract: TrainState, mesh: Mesh):
    """Games (and their resign state) split over ``data``, the replay's game columns too,
    everything else replicated."""
    replicated = NamedSharding(mesh, P())
    games_axis = NamedSharding(mesh, P("data"))
    columns_axis = NamedSharding(mesh, P(None, "data"))

    def sharding_of(path, leaf):
        names = [getattr(k, "name", None) for k in path]
        if names[0] in ("games", "resign") and leaf.ndim >= 1:
            return games_axis
        if names[0] == "replay" and leaf.ndim >= 2:
            return columns_axis
        return replicated

    return jax.tree_util.tree_map_with_path(sharding_of, abstract)


def _make_sampler(batch_size: int, mesh: Mesh, abstract_replay: replay_lib.Replay, *, mirror: bool,
                  material_plies: int, occupancy_plies: int = -1, reply: bool = False,
                  reduced_policy_weight: float = 0.0) -> Callable:
    """``sample(replay, rng_key) -> Batch [N]``, sharded: each data shard draws N / shards
    positions from its own game columns (uniformly among those with a target), so no
    collective moves the buffer and per-chip replay memory falls as 1 / shards. ``mirror``:
    half of them mirrored left to right; ``material_plies``, ``occupancy_plies`` >= 0: with
    the material or occupancy head's target; ``reply``: with the reply head's;
    ``reduced_policy_weight``: the reduced searches' policy weight (``replay.sample``)."""
    specs = jax.tree.map(lambda leaf: P(None, "data") if leaf.ndim >= 2 else P(), abstract_replay)
    shards = mesh.size

    def local(replay, rng_key):
        key = jax.random.fold_in(rng_key, jax.lax.axis_index("data"))
        return replay_lib.sample(replay, key, batch_size // shards, mirror=mirror, material_plies=material_plies,
                                 occupancy_plies=occupancy_plies, reply=reply,
                                 reduced_policy_weight=reduced_policy_weight)

    return jax.shard_map(local, mesh=mesh, in_specs=(specs, P()), out_specs=P("data"))


class Learned(NamedTuple):
    """What an iteration's K learner steps leave."""

    params: Any
    opt_state: Any
    learner_steps: Array  # [] int32
    ema_params: Any  # None without a weight average
    can_learn: Array  # [] bool, every shard had positions with targets: the steps were kept
    loss: Array  # [K] float32
    info: learner_lib.LossInfo  # [K] each


class LearnCarry(NamedTuple):
    params: Any
    opt_state: Any
    step: Array  # [] int32, learner steps done


def _make_learn(learner_step: Callable, steps: int, *, shards: int, unroll: bool, ema_decay: float,
                min_positions: int) -> Callable:
    """``learn(state, replay, progress, rng_key) -> Learned``: the K learner steps of an
    iteration, kept only once every shard has positions with targets (at least
    ``min_positions`` in all), and the weights' moving average (``ema_decay`` > 0)."""

    def learn(state: TrainState, replay: replay_lib.Replay, progress: Array, rng_key: Array) -> Learned:
        def learn_step(carry: LearnCarry, k: Array):
            params, opt_state, loss, info = learner_step(carry.params, carry.opt_state, carry.step, replay, progress, k)
            return LearnCarry(params, opt_state, carry.step + 1), (loss, info)

        # The K steps always run and their result is kept only once positions have
        # targets: on XLA's CPU backend a gradient step inside a cond branch or a rolled
        # loop costs about 20x the same step alone (bench/train_bench.py), so on a CPU the
        # steps are unrolled, and no backend puts them in a cond.
        # Never learn from blanks: every shard samples its own columns, so each needs targets.
        known = replay.value_known.sum()
        known_per_shard = replay.value_known.reshape(replay.value_known.shape[0], shards, -1).sum(axis=(0, 2))
        can_learn = (known >= max(min_positions, 1)) & (known_per_shard.min() > 0) & (steps > 0)
        keys = jax.random.split(rng_key, steps)
        operand = LearnCarry(state.params, state.opt_state, state.learner_steps)
        carry, (loss, info) = jax.lax.scan(learn_step, operand, keys, unroll=steps if unroll and steps else 1)
        params, opt_state = jax.tree.map(
            lambda new, old: jnp.where(can_learn, new, old), (carry.params, carry.opt_state),
            (state.params, state.opt_state)
        )
        loss, info = jax.tree.map(lambda x: jnp.where(can_learn, x, jnp.zeros_like(x)), (loss, info))
        ema = state.ema_params
        if ema_decay > 0:  # per learner step, applied once an iteration as decay^K
            keep = jnp.where(can_learn, ema_decay**steps, 1.0)
            ema = jax.tree.map(lambda e, p: keep * e + (1 - keep) * p, ema, params)
        learner_steps = state.learner_steps + jnp.where(can_learn, steps, 0)
        return Learned(params, opt_state, learner_steps, ema, can_learn, loss, info)

    return learn


def _iteration_metrics(config: ml_collections.ConfigDict, state: TrainState, *, can_learn, loss, info, stats,
                       progress, steps: int) -> dict:
    """The device scalars and small arrays an iteration reports (``state``: after it)."""
    num_positions = config.selfplay.num_games * config.selfplay.plies_per_iteration
    rate_now = learner_lib.learning_rate(config.learner, progress, state.learner_steps)
    searched = jnp.maximum(num_positions - stats.finished_at_start, 1)
    return {
        "learned": can_learn,
        "progress": progress,
        "loss": loss.mean(),
        "policy_loss": info.policy_loss.mean(),
        "value_loss": info.value_loss.mean(),
        "policy_entropy": info.policy_entropy.mean(),
        "value_accuracy": info.value_accuracy.mean(),
        **({"legality_loss": info.legality_loss.mean()} if config.model.legality_head else {}),
        **({"material_loss": info.material_loss.mean()} if config.model.material_head else {}),
        **({"occupancy_loss": info.occupancy_loss.mean()} if config.model.occupancy_head else {}),
        **({"reply_loss": info.reply_loss.mean()} if config.model.reply_head else {}),
        "learner/learning_rate": jnp.where(can_learn, info.learning_rate[-1], rate_now) if steps else rate_now,
        "learner/grad_norm": info.grad_norm.mean(),
        "learner/grad_norm_max": info.grad_norm.max() if steps else jnp.float32(0),
        "learner/clipped_fraction": info.clipped.mean(),
        # positions sampled per position generated, over the whole run
        "learner/replay_ratio": state.learner_steps.astype(jnp.float32)
        * config.learner.batch_size
        / state.positions.astype(jnp.float32),
        "replay_positions_with_target": state.replay.value_known.sum(),
        "games_finished": state.games_finished,
        "positions": state.positions,
        "learner_steps": state.learner_steps,
        **{f"selfplay/{k}": v for k, v in stats._asdict().items()},
        "selfplay/noise_tv": stats.noise_tv / searched,  # mean over searched plies
        "selfplay/resign_threshold": state.resign.threshold,
        # would-resign positions of no-resign games whose side did not lose (recent, decaying)
        "selfplay/false_resign_rate": state.resign.false / jnp.maximum(state.resign.checked, 1e-9),
    }


class TeacherAgreement:
    """``teacher(state) -> {"teacher/top1", ...}``: agreement of the parameters that play
    (the average where kept) with the held-out teacher positions (az/measure/agreement.py),
    as device scalars. Holds the probe, loaded and placed (replicated) on the first call."""

    def __init__(self, teacher_config: ml_collections.ConfigDict, apply_fn, rules, mesh: Mesh, *,
                 always_promote: bool):
        from az.measure import agreement
        from az.measure import teacher as teacher_lib

        replicated = NamedSharding(mesh, P())
        self._load_probe = lambda: jax.tree.map(
            lambda a: jax.device_put(np.asarray(a), replicated),
            agreement.make_probe(teacher_lib.load(), rules, positions=teacher_config.positions))
        self._measure = jax.jit(
            lambda params, probe: agreement.network_agreement(apply_fn, params, probe, rules,
                                                              always_promote=always_promote),
            out_shardings=replicated)
        self._probe = None

    def __call__(self, state: TrainState) -> dict:
        if self._probe is None:
            self._probe = self._load_probe()
        params = state.ema_params if state.ema_params is not None else state.params
        return {f"teacher/{k}": v for k, v in self._measure(params, self._probe).items()}


def make_trainer(config: ml_collections.ConfigDict, mesh: Mesh) -> Trainer:
    """The run's compiled pieces; ConfigError names a bad field before anything is built."""
    config_lib.validate(config, mesh.size)
    rules = search_lib.rules_from_config(config.env)
    spec = starts.parse_start(config.env.start)
    start = starts.make_start_fn(spec, rules)
    net = network_lib.make_network(config.model)
    optimizer = learner_lib.make_optimizer(config.learner)
    init = _make_init(config, net, optimizer, start)
    abstract = jax.eval_shape(init)
    state_sharding = _state_sharding(abstract, mesh)
    abstract_state = jax.tree.map(
        lambda leaf, sharding: jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=sharding), abstract, state_sharding
    )
    selfplay = _make_selfplay(config, net.apply, rules, spec, start, mesh, abstract)

    def relabel(replay: replay_lib.Replay) -> replay_lib.Replay:
        return replay_lib.label(
            replay,
            search_value_weight=config.replay.search_value_weight,
            truncated_value=config.replay.truncated_value,
            reduced_search_value_weight=config.replay.reduced_search_value_weight,
            search_value_plies=config.replay.search_value_plies,
        )

    learner_step = _make_learner_step(config, net.apply, optimizer, rules, mesh, abstract.replay)
    steps = config_lib.steps_per_iteration(config)
    learn = _make_learn(learner_step, steps, shards=mesh.size, unroll=mesh.devices.flat[0].platform == "cpu",
                        ema_decay=config.learner.ema_decay, min_positions=config.replay.min_positions)
    iteration = _make_iteration(config, selfplay, relabel, learn, steps)
    replicated = NamedSharding(mesh, P())
    init_jit = jax.jit(init, out_shardings=state_sharding)
    iteration_jit = jax.jit(iteration, in_shardings=(state_sharding, replicated),
                            out_shardings=(state_sharding, replicated), donate_argnums=0)
    teacher = None
    if config.teacher.every_iterations > 0:
        teacher = TeacherAgreement(config.teacher, net.apply, rules, mesh, always_promote=config.search.always_promote)
    return Trainer(config, spec.names, init_jit, BudgetedIteration(iteration_jit, config.budget_games, replicated),
                   state_sharding, abstract_state, selfplay, relabel, learner_step, steps, teacher)


class BudgetedIteration:
    """``iteration(state) -> (state, metrics)``: the jitted iteration, which donates its
    input, at the game budget ``budget_games``. The budget is an input of the compiled
    program, not a constant in it, so ``with_budget`` gives the same program another budget
    without compiling again: a wall-time budget becomes games only once the program has been
    compiled and timed (az/train/budget.py)."""

    def __init__(self, jitted: Callable, budget_games: int, sharding: NamedSharding):
        self._jitted, self.budget_games, self._sharding = jitted, int(budget_games), sharding
        self._budget = None  # the device scalar, made on the first call (lowering needs none)

    def __call__(self, state: TrainState) -> tuple[TrainState, dict]:
        if self._budget is None:
            self._budget = jax.jit(lambda: jnp.int32(self.budget_games), out_shardings=self._sharding)()
        return self._jitted(state, self._budget)

    def lower(self, state):
        return self._jitted.lower(state, jax.ShapeDtypeStruct((), jnp.int32, sharding=self._sharding))

    def _cache_size(self) -> int:
        return self._jitted._cache_size()

    @property
    def compiled(self) -> bool:
        """Has a call compiled the program (at any budget: the budget is an input)?"""
        return self._cache_size() > 0

    def with_budget(self, budget_games: int) -> "BudgetedIteration":
        return BudgetedIteration(self._jitted, budget_games, self._sharding)


def with_budget(trainer: Trainer, budget_games: int) -> Trainer:
    """``trainer`` for a run of ``budget_games`` games: the same compiled programs."""
    config = trainer.config.copy_and_resolve_references()
    config.budget_games = int(budget_games)
    return trainer._replace(config=config, iteration=trainer.iteration.with_budget(budget_games))


def _make_init(config: ml_collections.ConfigDict, net, optimizer, start) -> Callable[[], TrainState]:
    """``init() -> TrainState``: fresh parameters, unstarted games, an empty replay."""
    num_games = config.selfplay.num_games
    rows = config.replay.capacity // num_games

    def init() -> TrainState:
        key = jax.random.PRNGKey(config.seed)
        k_params, _, k_run = jax.random.split(key, 3)
        params = network_lib.init_params(net, k_params)
        games = selfplay_lib.unstarted_games(start, num_games)  # each starts at the first ply
        return TrainState(
            params=params,
            opt_state=optimizer.init(params),
            games=games,
            replay=replay_lib.init(rows, num_games),
            rng_key=k_run,
            iteration=jnp.int32(0),
            games_finished=jnp.int32(0),
            positions=jnp.int32(0),
            learner_steps=jnp.int32(0),
            resign=selfplay_lib.init_resign(
                jax.random.fold_in(k_run, 1),
                num_games,
                threshold=config.selfplay.resign_threshold,
                no_resign_fraction=config.selfplay.no_resign_fraction,
            ),
            ema_params=params if config.learner.ema_decay > 0 else None,
        )

    return init


def _make_learner_step(config: ml_collections.ConfigDict, apply_fn, optimizer, rules, mesh: Mesh,
                       abstract_replay: replay_lib.Replay) -> Callable:
    """``learner_step(params, opt_state, step, replay, progress, rng_key) -> (params,
    opt_state, loss, info)``: one sharded minibatch and one gradient step at the rate of
    the run's progress."""
    model = config.model
    update = learner_lib.make_update(apply_fn, optimizer, rules, grad_clip=config.learner.grad_clip,
                                     policy_over=config.learner.policy_over, legality=model.legality_head,
                                     material_weight=model.material_weight if model.material_head else 0.0,
                                     occupancy_weight=model.occupancy_weight if model.occupancy_head else 0.0,
                                     policy_surprise=config.learner.policy_surprise,
                                     value_weight=config.learner.value_weight,
                                     reply_weight=model.reply_weight if model.reply_head else 0.0)
    sample = _make_sampler(config.learner.batch_size, mesh, abstract_replay, mirror=config.replay.mirror,
                           material_plies=model.material_plies if model.material_head else -1,
                           occupancy_plies=model.occupancy_plies if model.occupancy_head else -1,
                           reply=model.reply_head, reduced_policy_weight=config.replay.reduced_policy_weight)

    def learner_step(params, opt_state, step, replay, progress, rng_key):
        batch = sample(replay, rng_key)
        rate = learner_lib.learning_rate(config.learner, progress, step)
        return update(params, opt_state, batch, rate)

    return learner_step


def _make_iteration(config: ml_collections.ConfigDict, selfplay: Callable, relabel: Callable, learn: Callable,
                    steps: int) -> Callable[[TrainState], tuple[TrainState, dict]]:
    """``iteration(state, budget_games) -> (state, metrics)``: self-play T plies, relabel, K
    learner steps; ``budget_games`` [] int32, the run's game budget."""
    positions = config.selfplay.num_games * config.selfplay.plies_per_iteration

    def iteration(state: TrainState, budget_games: Array) -> tuple[TrainState, dict]:
        key, k_selfplay, k_learn = jax.random.split(state.rng_key, 3)
        games, resign, games_finished, plies, stats = selfplay(
            state.params, state.games, state.resign, k_selfplay, state.games_finished, budget_games
        )
        replay = relabel(replay_lib.add(state.replay, plies))
        progress = jnp.minimum(games_finished / budget_games, 1.0)  # drives the learning rate
        learned = learn(state, replay, progress, k_learn)
        new_state = TrainState(
            params=learned.params,
            opt_state=learned.opt_state,
            games=games,
            replay=replay,
            rng_key=key,
            iteration=state.iteration + 1,
            games_finished=games_finished,
            positions=state.positions + positions,
            learner_steps=learned.learner_steps,
            resign=resign,
            ema_params=learned.ema_params,
        )
        metrics = _iteration_metrics(config, new_state, can_learn=learned.can_learn, loss=learned.loss,
                                     info=learned.info, stats=stats, progress=progress, steps=steps)
        return new_state, metrics

    return iteration


def make_mesh(config: ml_collections.ConfigDict | None = None) -> Mesh:
    """Every device on a ``data`` axis; on a single CPU host with ``config``, as many of
    its CPU devices as the config's games and batch divide (``config.cpu_devices``)."""
    devices = jax.devices()
    if config is not None and jax.process_count() == 1 and devices[0].platform == "cpu":
        devices = devices[: config_lib.cpu_devices(config, len(devices))]
    return Mesh(np.asarray(devices), ("data",))
