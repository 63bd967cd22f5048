"""The measurements of ``bench/device_bench.py`` that run in-process, one part per process:

    python bench/device_parts.py {self-play,search,env,learner} ROWS_JSON [--quick]

``device_bench.py`` starts one such process per part, so each has the device to itself
(JAX takes most of a GPU's memory when it starts); it writes its rows to ROWS_JSON after
each measurement. Seconds are medians of ``repeats`` calls after the compile
(``timing.compile_and_time``); ``per_s`` is positions (roots, states, steps) a second.
"""

import argparse
import json
import sys

import jax
import jax.numpy as jnp

import env_bench  # bench/, beside this file
import search_bench
import train_bench
from timing import compile_and_time
from az import network as network_lib
from az import search as search_lib
from az.network import AZNet
from az.train import selfplay as selfplay_lib
from az.train import trainer as trainer_lib
from envs import env, notation, starts

# selfplay: (n, m, plies a timed call) at each of ``batches``; the first of ``nets`` plays
# (the paper's 6x64), every one's forward is timed; the search part runs at batches[0].
FULL = dict(env_batches=(1024, 4096, 16384), pgx_batch=1024, env_plies=16, batches=(1024, 2048, 4096),
            selfplay=(64, 16, 8), nets=((6, 64), (10, 128)), dtype="bfloat16", preset="gpu", repeats=3)
QUICK = dict(env_batches=(64,), pgx_batch=64, env_plies=2, batches=(8,), selfplay=(4, 4, 2), nets=((1, 8), (1, 16)),
             dtype="float32", preset="smoke", repeats=1)
PARTS = ("self-play", "search", "env", "learner")


def peak_memory() -> int | None:
    stats = jax.devices()[0].memory_stats() or {}
    return stats.get("peak_bytes_in_use")


def bench_env(p: dict):
    rules = env.Rules()
    for batch in p["env_batches"]:
        run = env_bench.make_our_run(p["env_plies"], rules)
        state = jax.tree.map(lambda a: jnp.broadcast_to(a, (batch, *a.shape)),
                             notation.from_sfen(notation.STARTPOS_SFEN, rules))
        timed = compile_and_time(run, (state, jax.random.key(batch)), p["repeats"])
        yield {"what": "env step+mask+obs", "batch": batch, "per_s": batch * p["env_plies"] / timed.seconds,
               "compile_s": timed.compile_s}
    init, run = env_bench.make_pgx_run(p["env_plies"])
    batch = p["pgx_batch"]
    timed = compile_and_time(run, (init(jax.random.split(jax.random.key(0), batch)), jax.random.key(1)), p["repeats"])
    yield {"what": "pgx env.step", "batch": batch, "per_s": batch * p["env_plies"] / timed.seconds,
           "compile_s": timed.compile_s}


def bench_selfplay(p: dict):
    """At each batch: every network's forward, then self-play with the first, and its
    fraction of the network-only bound (the forward's positions/s over n + 1 calls a ply)."""
    sims, considered, plies = p["selfplay"]
    rules = env.Rules()
    start = starts.make_start_fn("shogi816k", rules)
    nets = [AZNet(num_blocks=blocks, channels=channels, dtype=jnp.dtype(p["dtype"])) for blocks, channels in p["nets"]]
    params = [network_lib.init_params(net, jax.random.key(0)) for net in nets]
    search = search_lib.make_search(nets[0].apply, rules, search_lib.SearchSettings(
        num_simulations=sims, max_num_considered_actions=considered))
    selfplay = jax.jit(selfplay_lib.make_selfplay(search, start, rules, sample_visits_plies=0, num_plies=plies,
                                                  game_budget=10**9, num_schemes=1))
    key = jax.random.key(2)
    for batch in p["batches"]:
        games = jax.jit(jax.vmap(start, in_axes=(0, None)))(jax.random.split(jax.random.key(1), batch), 0.0)
        observation = jax.jit(jax.vmap(lambda s: env.observe_parts(s, rules)))(games)
        forward_per_s = []
        for net, net_params, (blocks, channels) in zip(nets, params, p["nets"]):
            timed = compile_and_time(jax.jit(net.apply), (net_params, observation), p["repeats"] + 7)
            forward_per_s.append(batch / timed.seconds)
            yield {"what": f"forward {blocks}x{channels} {p['dtype']}", "batch": batch, "per_s": batch / timed.seconds,
                   "compile_s": timed.compile_s}
        resign = selfplay_lib.init_resign(key, batch, threshold=-0.9, no_resign_fraction=0.1)
        timed = compile_and_time(selfplay, (params[0], games, resign, key, jnp.int32(0)), p["repeats"])
        per_s, bound = batch * plies / timed.seconds, forward_per_s[0] / (sims + 1)
        blocks, channels = p["nets"][0]
        yield {"what": f"self-play {blocks}x{channels} {p['dtype']}", "batch": batch, "simulations": sims,
               "per_s": per_s, "bound_per_s": bound, "of_bound": per_s / bound, "compile_s": timed.compile_s,
               "bytes_per_game": timed.memory_bytes / batch, "peak_bytes": peak_memory()}


def bench_search(p: dict):
    """One search at the first self-play batch with each loop (bench/search_bench.py):
    mctx's, the full tree's (az.search.reference) and the compact tree, the first network."""
    sims, considered, _ = p["selfplay"]
    batch, (blocks, channels) = p["batches"][0], p["nets"][0]
    c = search_bench.compare(batch=batch, simulations=sims, considered=considered, blocks=blocks, channels=channels,
                             dtype=p["dtype"], repeats=p["repeats"])
    for name, r in c.loops.items():
        yield {"what": f"search {blocks}x{channels}, {search_bench.LABELS[name]}", "batch": batch,
               "simulations": sims, "per_s": batch / r.search_s, "compile_s": r.compile_s, "own_s": r.own_s,
               "model_s": c.env_s + c.network_s, "free_s": r.free_s, "deepest_path": r.deepest_path,
               "bytes_per_game": r.bytes_per_game}


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
    args = (state.params, state.opt_state, jnp.int32(0), replay, jnp.float32(0.1), key)
    timed = compile_and_time(jax.jit(trainer.learner_step), args, p["repeats"] + 2)
    yield {"what": f"learner step :{p['preset']}", "batch": config.learner.batch_size, "per_s": 1 / timed.seconds,
           "compile_s": timed.compile_s, "peak_bytes": peak_memory()}


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
