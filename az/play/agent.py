"""A trained (or untrained) agent for evaluation: network parameters plus a greedy search.

``load_agent("runs/x@120")`` reads the parameters of a training checkpoint (not its
replay buffer) and the config it was trained with. ``Agent.search_fn`` plays by
Gumbel search with sequential halving and no Gumbel noise, as in the paper's
evaluation (800 simulations by default).
"""

import dataclasses
import functools
import json
import os

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import orbax.checkpoint as ocp
from jax import Array

from az import search as search_lib
from az import trainer as trainer_lib
from envs import env


class AgentError(ValueError):
    """A checkpoint that cannot be loaded; the message names it."""


@dataclasses.dataclass
class Agent:
    config: ml_collections.ConfigDict
    params: dict
    step: int  # training iteration of the parameters (0: untrained)
    name: str

    @functools.cached_property
    def network(self):
        return trainer_lib.make_network(self.config)

    @functools.cached_property
    def rules(self) -> env.Rules:
        return trainer_lib.rules_from(self.config)

    def search_fn(self, num_simulations: int = 800, max_num_considered_actions: int | None = None,
                  max_length: int = 256):
        """Jitted ``search(params, rng_key, games [B]) -> dict`` (greedy, no noise): action [B],
        root_value [B], search_value [B], visits [B, A], q [B, A].

        ``max_length``: the game's ply limit as the tree sees it (matches: 256, floodgate),
        not the training run's, so late positions of a long match are still searched."""
        return _compiled_search(self, num_simulations, max_num_considered_actions, max_length)


def _search_result(out, value):
    return {
        "action": out.action,  # [B] int32
        "root_value": value,  # [B] float32, network value of the root (mover's view)
        "search_value": out.search_tree.summary().value,  # [B] float32, after search
        "visits": out.search_tree.summary().visit_counts,  # [B, A] int32
        "q": out.search_tree.summary().qvalues,  # [B, A] float32
    }


_SEARCH_CACHE: dict = {}


def _compiled_search(agent: Agent, num_simulations: int, considered: int | None, max_length: int):
    considered = considered or agent.config.search.max_num_considered_actions
    key = (agent.config.to_json(), num_simulations, considered, max_length)  # same config, same network
    if key not in _SEARCH_CACHE:
        search = search_lib.make_search(
            agent.network.apply,
            dataclasses.replace(agent.rules, max_length=max_length, history=max_length + 1),
            algorithm="gumbel",
            num_simulations=num_simulations,
            max_num_considered_actions=considered,
            gumbel_scale=0.0,
            history_window=agent.config.search.history_window,
        )

        def run(params, rng_key: Array, games: env.State):
            out = search(params, rng_key, games)
            _, value = search_lib.evaluate(agent.network.apply, params, games)
            return _search_result(out, value)

        _SEARCH_CACHE[key] = jax.jit(run)
    return _SEARCH_CACHE[key]


def parse_spec(spec: str) -> tuple[str, int | None]:
    """``WORKDIR[@STEP]`` -> (workdir, step or None for the latest)."""
    workdir, at, step = spec.rpartition("@") if "@" in spec else (spec, "", "")
    if at and not step.isdigit():
        raise AgentError(f"checkpoint {spec!r}: STEP after '@' must be a number")
    return workdir, int(step) if at else None


def _config_from_dict(saved: dict) -> ml_collections.ConfigDict:
    def tuples(d):
        return {k: tuples(v) if isinstance(v, dict) else tuple(v) if isinstance(v, list) else v for k, v in d.items()}

    return ml_collections.ConfigDict(tuples(saved))


def load_agent(spec: str) -> Agent:
    """The agent of a training workdir's checkpoint (``WORKDIR[@STEP]``; default latest)."""
    workdir, step = parse_spec(spec)
    directory = os.path.abspath(os.path.join(workdir, "checkpoints"))
    if not os.path.isdir(directory):
        raise AgentError(f"checkpoint {spec!r}: no checkpoints in {directory}")
    manager = ocp.CheckpointManager(directory, item_names=("state", "config"))
    try:
        steps = manager.all_steps()
        if not steps:
            raise AgentError(f"checkpoint {spec!r}: {directory} holds no finished checkpoint")
        step = max(steps) if step is None else step
        if step not in steps and step != 0:
            raise AgentError(f"checkpoint {spec!r}: no step {step} (have {sorted(steps)})")
        saved = manager.restore(step if step in steps else max(steps),
                                args=ocp.args.Composite(config=ocp.args.JsonRestore()))["config"]
        config = _config_from_dict(saved)
        config.distributed = False
        if step not in steps:  # step 0 rotated out: the same seed rebuilds the same initial network
            return dataclasses.replace(untrained_agent(config), name=f"{workdir}@0")
        network = trainer_lib.make_network(config)
        abstract = jax.eval_shape(network.init, jax.random.PRNGKey(0), jnp.zeros((1, 9, 9, 119), jnp.bool_))
        item = {"params": abstract}
        restore_args = jax.tree.map(lambda _: ocp.ArrayRestoreArgs(sharding=_single_device()), item)
        restored = manager.restore(
            step,
            args=ocp.args.Composite(
                state=ocp.args.PyTreeRestore(item=item, restore_args=restore_args, partial_restore=True)
            ),
        )
    finally:
        manager.close()
    return Agent(config=config, params=restored["state"]["params"], step=step, name=f"{workdir}@{step}")


def untrained_agent(config: ml_collections.ConfigDict, seed: int | None = None) -> Agent:
    """The network a run starts from (same seed, same initialisation as ``trainer.init``)."""
    network = trainer_lib.make_network(config)
    key = jax.random.PRNGKey(config.seed if seed is None else seed)
    k_params, _, _ = jax.random.split(key, 3)
    params = network.init(k_params, jnp.zeros((1, 9, 9, 119), jnp.bool_))
    return Agent(config=config, params=params, step=0, name=f"{config.name}@0 (untrained)")


def agent_from_workdir_config(workdir: str) -> Agent:
    """The untrained network of a workdir's run, from its saved config.json."""
    path = os.path.join(workdir, "config.json")
    try:
        with open(path, encoding="utf-8") as f:
            config = _config_from_dict(json.load(f))
    except OSError as e:
        raise AgentError(f"checkpoint {workdir!r}: cannot read {path} ({e.strerror})") from None
    return untrained_agent(config)


def _single_device():
    return jax.sharding.SingleDeviceSharding(jax.devices()[0])


def stack_states(states: list[env.State]) -> env.State:
    """Host states (unbatched) -> one batch [B]."""
    return jax.tree.map(lambda *xs: jnp.stack([jnp.asarray(x) for x in xs]), *states)


def choose_moves(agent: Agent, states: list[env.State], *, num_simulations: int, rng_key: Array, pad_to: int):
    """Greedy search moves for a list of positions, padded to ``pad_to`` so one compile serves all.

    Returns one dict per position: action, root_value, search_value, visits, q.
    """
    if not states:
        return []
    batch = list(states) + [states[0]] * (pad_to - len(states))
    result = agent.search_fn(num_simulations)(agent.params, rng_key, stack_states(batch))
    result = jax.tree.map(np.asarray, result)
    return [{k: v[i] for k, v in result.items()} for i in range(len(states))]
