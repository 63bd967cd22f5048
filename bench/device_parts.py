"""The measurements of ``bench/device_bench.py`` that run in-process, one part per process:

    python bench/device_parts.py {self-play,search,env,learner} ROWS_JSON [--quick]

``device_bench.py`` starts one such process per part, so each has the device to itself
(JAX takes most of a GPU's memory when it starts); it writes its rows to ROWS_JSON.
"""

import argparse
import json
import sys
import time

import jax
import jax.numpy as jnp

import env_bench  # bench/, beside this file
import search_bench
import train_bench
from timing import median_seconds
from az import network as network_lib
from az import search as search_lib
from az.network import AZNet
from az.train import selfplay as selfplay_lib
from az.train import trainer as trainer_lib
from envs import env, notation, starts

FULL = dict(env_batches=(1024, 4096, 16384), pgx_batch=1024, env_plies=16, selfplay=(1024, 64, 16, 8),
            nets=((6, 64), (10, 128)), dtype="bfloat16", preset="gpu", repeats=3)
QUICK = dict(env_batches=(64,), pgx_batch=64, env_plies=2, selfplay=(8, 4, 4, 2), nets=((1, 8), (1, 16)),
             dtype="float32", preset="smoke", repeats=1)
PARTS = ("self-play", "search", "env", "learner")




def _compiled(fn, *args):
    start = time.perf_counter()
    jax.block_until_ready(fn(*args))
    return time.perf_counter() - start


def peak_memory() -> int | None:
    stats = jax.devices()[0].memory_stats() or {}
    return stats.get("peak_bytes_in_use")


def bench_env(p: dict):
    rules = env.Rules()
    for batch in p["env_batches"]:
        run = env_bench.make_our_run(p["env_plies"], rules)
        state = jax.tree.map(lambda a: jnp.broadcast_to(a, (batch, *a.shape)),
                             notation.from_sfen(notation.STARTPOS_SFEN, rules))
        key = jax.random.key(batch)
        compile_s = _compiled(run, state, key)
        seconds = median_seconds(lambda: run(state, key), p["repeats"])
        yield {"what": "env step+mask+obs", "batch": batch, "per_s": batch * p["env_plies"] / seconds,
               "compile_s": compile_s}
    init, run = env_bench.make_pgx_run(p["env_plies"])
    batch = p["pgx_batch"]
    state = init(jax.random.split(jax.random.key(0), batch))
    key = jax.random.key(1)
    compile_s = _compiled(run, state, key)
    seconds = median_seconds(lambda: run(state, key), p["repeats"])
    yield {"what": "pgx env.step", "batch": batch, "per_s": batch * p["env_plies"] / seconds, "compile_s": compile_s}


def bench_selfplay(p: dict):
    games, sims, considered, plies = p["selfplay"]
    rules = env.Rules()
    start = starts.make_start_fn("shogi816k", rules)
    for blocks, channels in p["nets"]:
        net = AZNet(num_blocks=blocks, channels=channels, dtype=jnp.dtype(p["dtype"]))
        params = network_lib.init_params(net, jax.random.key(0))
        search = search_lib.make_search(net.apply, rules, num_simulations=sims, max_num_considered_actions=considered)
        selfplay = jax.jit(selfplay_lib.make_selfplay(search, start, rules, sample_visits_plies=0, num_plies=plies,
                                                      game_budget=10**9, num_schemes=1))
        state = jax.jit(jax.vmap(start, in_axes=(0, None)))(jax.random.split(jax.random.key(1), games), 0.0)
        key = jax.random.key(2)
        track = selfplay_lib.init_resign(key, games, threshold=-0.9, no_resign_fraction=0.1)
        compile_s = _compiled(selfplay, params, state, track, key, jnp.int32(0))
        seconds = median_seconds(lambda: selfplay(params, state, track, key, jnp.int32(0)), p["repeats"])
        yield {"what": f"self-play {blocks}x{channels} {p['dtype']}", "batch": games, "simulations": sims,
               "per_s": games * plies / seconds, "compile_s": compile_s, "peak_bytes": peak_memory()}
        # The network alone at the search's batch: a ply makes sims + 1 such calls, so this
        # against the ply's time says how much of the search is the network.
        observation = jax.jit(jax.vmap(lambda s: env.observe_parts(s, rules)))(state)
        forward = jax.jit(net.apply)
        compile_s = _compiled(forward, params, observation)
        seconds = median_seconds(lambda: forward(params, observation), p["repeats"] + 7)
        yield {"what": f"forward {blocks}x{channels} {p['dtype']}", "batch": games, "per_s": games / seconds,
               "compile_s": compile_s}


def bench_search(p: dict):
    """One search with mctx's loop and with az.mcts's, the 6x64 network, at the self-play batch."""
    games, sims, considered, _ = p["selfplay"]
    blocks, channels = p["nets"][0]
    r = search_bench.compare(batch=games, simulations=sims, considered=considered, blocks=blocks, channels=channels,
                             dtype=p["dtype"], repeats=p["repeats"])
    for name, label in (("mctx_loop", "mctx's loop"), ("az_mcts", "az.mcts")):
        yield {"what": f"search {blocks}x{channels}, {label}", "batch": games, "simulations": sims,
               "per_s": games / r[f"{name}_s"], "compile_s": r[f"{name}_compile_s"], "own_s": r[f"{name}_own_s"],
               "model_s": r["env_s"] + r["network_s"]}


def bench_learner(p: dict):
    from configs import shogi816k

    config = shogi816k.get_config(p["preset"])
    trainer = trainer_lib.make_trainer(config, trainer_lib.make_mesh())
    state = trainer.init()
    key = jax.random.PRNGKey(1)
    # A step's cost does not depend on what the positions are: empty boards (all-zero plies,
    # each played and searched in full) spare a compile and a run of the whole self-play.
    shapes = jax.eval_shape(trainer.selfplay, state.params, state.games, state.resign, key, state.games_finished)[3]
    plies = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)
    plies = plies._replace(played=jnp.ones_like(plies.played), full_search=jnp.ones_like(plies.full_search))
    replay = jax.jit(trainer.relabel)(train_bench._with_targets(state.replay, plies))
    step = jax.jit(trainer.learner_step)

    def one():
        return step(state.params, state.opt_state, jnp.int32(0), replay, jnp.float32(0.1), key)

    compile_s = _compiled(one)
    seconds = median_seconds(one, p["repeats"] + 2)
    yield {"what": f"learner step :{p['preset']}", "batch": config.learner.batch_size, "per_s": 1 / seconds,
           "compile_s": compile_s, "peak_bytes": peak_memory()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("part", choices=PARTS)
    parser.add_argument("rows", help="JSON file for the part's rows")
    parser.add_argument("--quick", action="store_true", help="CPU sizes")
    args = parser.parse_args(argv)
    p = QUICK if args.quick else FULL
    device = jax.devices()[0]
    rows = []
    parts = {"self-play": bench_selfplay, "search": bench_search, "env": bench_env, "learner": bench_learner}
    for row in parts[args.part](p):
        row.update(device=device.device_kind, backend=jax.default_backend(), jax=jax.__version__)
        rows.append(row)
        print(json.dumps(row), flush=True)
        with open(args.rows, "w", encoding="utf-8") as f:  # after each row: a crash later keeps it
            json.dump(rows, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
