"""Plans a TPU run without a TPU: per-chip HBM, the cost model's bytes and flops, collectives.

    .venv-tpu/bin/python bench/tpu_plan.py --config configs/shogi816k.py[:PRESET] --topology v5e:2x2 \\
        [--config.FIELD=VALUE ...]

libtpu compiles for any TPU topology on a machine without one (``make tpu-venv`` builds
``.venv-tpu``, a virtual environment with ``jax[tpu]``; libtpu stays out of the main one,
where it would probe for a TPU whenever JAX starts). For the config and topology this
compiles ``init`` and ``iteration`` for all the topology's chips and for one, and prints:
  * per-chip HBM of each (arguments, outputs, temporaries, and whether it fits the chip);
  * XLA's cost model (bytes accessed, flops) on one chip at the config's batch for the
    env step with its legal mask, the observation, the network's forward pass and one
    learner step (its "optimal seconds" is left out: it is unreliable around loops);
  * every collective of the many-chip iteration with its operand size.
"""

import argparse
import os
import re
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")  # compile for the TPU topology; run nothing on one

import jax  # noqa: E402
import numpy as np  # noqa: E402
from absl import flags as absl_flags  # noqa: E402
from jax.experimental import topologies  # noqa: E402
from jax.sharding import Mesh, SingleDeviceSharding  # noqa: E402
from ml_collections import config_flags  # noqa: E402

from az import network as network_lib  # noqa: E402
from az import search as search_lib  # noqa: E402
from az.train import config as config_lib  # noqa: E402
from az.train import trainer as trainer_lib  # noqa: E402
from envs import env  # noqa: E402

GIB = 2**30
MIB = 2**20
HBM_GIB = {"v4": 32, "v5e": 16, "v5litepod": 16, "v5p": 95, "v6e": 32}  # per chip
COLLECTIVE = re.compile(  # the result shape may be a tuple: XLA combines gradient all-reduces
    r"=\s*(\(.*?\)|\S+?)\s+(all-gather|all-reduce|all-to-all|collective-permute|reduce-scatter)(?:-start)?\("
)
DTYPE_BYTES = {"pred": 1, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "bf16": 2, "f16": 2, "s32": 4, "u32": 4, "f32": 4,
               "s64": 8, "u64": 8, "f64": 8}


def shape_bytes(text: str) -> int:
    """Bytes of an HLO shape such as ``bf16[64,1024,2187]{2,1,0}`` or a tuple of them."""
    total = 0
    for dtype, dims in re.findall(r"([a-z]+\d*)\[([\d,]*)\]", text):
        if dtype in DTYPE_BYTES:
            total += DTYPE_BYTES[dtype] * int(np.prod([int(d) for d in dims.split(",") if d] or [1]))
    return total


def collectives(hlo: str) -> list[tuple[str, int, str]]:
    """(op, bytes, shape) of every collective in a compiled HLO text."""
    return [(op, shape_bytes(shape), shape) for shape, op in COLLECTIVE.findall(hlo)]


def cost(compiled) -> tuple[float, float]:
    """(bytes accessed, flops) by XLA's cost model."""
    analysis = compiled.cost_analysis()
    if isinstance(analysis, list):
        analysis = analysis[0]
    return float(analysis.get("bytes accessed", 0.0)), float(analysis.get("flops", 0.0))


def memory(compiled) -> dict:
    m = compiled.memory_analysis()
    return {"arguments": m.argument_size_in_bytes, "outputs": m.output_size_in_bytes,
            "aliased": m.alias_size_in_bytes, "temporaries": m.temp_size_in_bytes}


def on(device, tree):
    """ShapeDtypeStructs of ``tree`` placed on one device."""
    sharding = SingleDeviceSharding(device)
    return jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=sharding), tree)


def plan(config, topology: str) -> int:
    kind = topology.split(":")[0]
    if kind not in HBM_GIB:
        sys.exit(f"error: --topology {topology!r}: expected one of {', '.join(HBM_GIB)} with a shape, e.g. v5e:2x2")
    try:
        devices = topologies.get_topology_desc(topology_name=topology, platform="tpu").devices
    except Exception as e:  # no libtpu, or a shape the chip does not come in
        sys.exit(f"error: --topology {topology!r}: {str(e).splitlines()[0]} (run with .venv-tpu: make tpu-venv)")
    hbm = HBM_GIB[kind] * GIB
    chips = len(devices)
    try:
        config_lib.validate(config, chips)
    except config_lib.ConfigError as e:
        sys.exit(f"error: {e}")
    b, t = config.selfplay.num_games, config.selfplay.plies_per_iteration
    k = config_lib.steps_per_iteration(config)
    print(f"topology {topology}: {chips} chips of {devices[0].device_kind}, {HBM_GIB[kind]} GiB HBM each")
    print(f"config {config.name}: {b} games x {t} plies, n={config.search.num_simulations}, "
          f"{config.model.num_blocks}x{config.model.channels} {config.model.dtype}, K={k} steps of "
          f"{config.learner.batch_size}, replay {config.replay.capacity} positions", flush=True)

    many = trainer_lib.make_trainer(config, Mesh(np.asarray(devices), ("data",)))
    one = trainer_lib.make_trainer(config, Mesh(np.asarray(devices[:1]), ("data",)))
    compiled = {}
    for name, trainer in ((f"{chips} chips", many), ("1 chip", one)):
        compiled[name] = (trainer.init.lower().compile(), trainer.iteration.lower(trainer.abstract_state).compile())
        print(f"compiled init and iteration for {name}", flush=True)

    print(f"\nper-chip HBM (GiB)        {'':>6}" + "".join(f"{name:>16}" for name in compiled))
    fits = True
    for part, index in (("init", 0), ("iteration", 1)):
        rows = {name: memory(c[index]) for name, c in compiled.items()}
        for key in ("arguments", "outputs", "temporaries"):
            print(f"  {part:10s} {key:12s}" + "".join(f"{rows[n][key] / GIB:16.3f}" for n in compiled))
        totals = {n: r["arguments"] + r["outputs"] - r["aliased"] + r["temporaries"] for n, r in rows.items()}
        print(f"  {part:10s} {'total':12s}" + "".join(
            f"{totals[n] / GIB:11.3f} {'fits' if totals[n] <= hbm else 'OVER':>4}" for n in compiled))
        fits &= totals[f"{chips} chips"] <= hbm
    temps = {n: memory(c[1])["temporaries"] for n, c in compiled.items()}
    print(f"iteration temporaries per chip, {chips} chips / 1 chip: {temps[f'{chips} chips'] / max(temps['1 chip'], 1):.2f}")

    device = devices[0]
    rules = search_lib.rules_from_config(config.env)
    games = on(device, jax.tree.map(lambda a: a, one.abstract_state.games))
    actions = jax.ShapeDtypeStruct((b,), np.int32, sharding=SingleDeviceSharding(device))
    net = network_lib.make_network(config.model)
    params = on(device, one.abstract_state.params)
    observations = on(device, jax.eval_shape(lambda: network_lib.example_observation(b)))
    state = on(device, one.abstract_state)
    pieces = {
        f"env step + mask (B={b})": (jax.vmap(lambda s, a: env.step(s, a, rules)), (games, actions)),
        f"observation (B={b})": (jax.vmap(lambda s: env.observe_parts(s, rules)), (games,)),
        f"network forward (B={b})": (net.apply, (params, observations)),
        f"learner step (N={config.learner.batch_size})": (
            lambda s, key: one.learner_step(s.params, s.opt_state, s.learner_steps, s.replay, 0.5, key),
            (state, jax.ShapeDtypeStruct((2,), np.uint32, sharding=SingleDeviceSharding(device)))),
    }
    print("\ncost model on one chip          bytes accessed      GFLOP")
    for name, (fn, args) in pieces.items():
        accessed, flops = cost(jax.jit(fn).lower(*args).compile())
        print(f"  {name:30s} {accessed / MIB:11.1f} MiB {flops / 1e9:10.2f}", flush=True)

    found = collectives(compiled[f"{chips} chips"][1].as_text())
    print(f"\ncollectives in the {chips}-chip iteration: {len(found)}")
    by_op: dict = {}
    for op, size, shape in found:
        by_op.setdefault((op, shape), []).append(size)
    for (op, shape), sizes in sorted(by_op.items(), key=lambda kv: -kv[1][0]):
        shown = shape if len(shape) <= 100 else shape[:97] + "..."  # combined all-reduces are long tuples
        print(f"  {op:18s} x{len(sizes):<3d} {sizes[0] / MIB:10.3f} MiB  {shown}")
    largest = max((size for _, size, _ in found), default=0)
    print(f"largest collective operand: {largest / MIB:.3f} MiB; the iteration "
          f"{'fits' if fits else 'does NOT fit'} {HBM_GIB[kind]} GiB per chip")
    return 0 if fits else 1


def main(argv) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topology", default="v5e:2x2", help="TPU kind and shape, e.g. v5e:2x2, v5p:2x2x1, v4:2x2x1")
    args, rest = parser.parse_known_args(argv[1:])
    config = config_flags.DEFINE_config_file("config", None, "config file, e.g. configs/shogi816k.py:smoke")
    absl_flags.mark_flag_as_required("config")
    try:
        absl_flags.FLAGS([argv[0], *rest])
    except absl_flags.Error as e:
        sys.exit(f"error: {str(e).splitlines()[0]}")
    return plan(config.value, args.topology)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
