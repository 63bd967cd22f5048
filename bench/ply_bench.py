"""Where a self-play ply's time goes, and how near the network runs to the device's speed.

    python bench/ply_bench.py [--config configs/shogi816k_randomstart2.py:cpu] [--config.FIELD=VALUE ...]
                              [--repeats 20] [--json PATH] [--quick]

On one device, at the games each device plays in training (``num_games`` over the
devices ``train.py`` would use), from positions some random plies into the preset's
starts, times the median of ``--repeats`` compiled calls of:
  * the FLOPs of the network's forward as the search calls it (observation, masked
    logits, value), by XLA's cost analysis;
  * a float32 matrix product of one trunk convolution's shape ([B x 81, 9C] x [9C, C]):
    the dense speed the device reaches at that size, in the same run;
  * the full and the reduced searches (the root's mate check included), each also with
    a network that costs nothing: the search's own work (tree, env steps, mate check),
    and the rest its n + 1 forwards, whose GFLOP/s this gives;
  * one env step and a batch of fresh starts.
Then each part's share of a ply at the preset's playout-cap mix. Targets: the searches
spend at least ``NETWORK_SHARE_TARGET`` of their time in the network (the loop around
it costs little), and the forward runs at ``ROOFLINE_TARGET`` or more of the matrix
product's GFLOP/s; exit status 1 when one is missed. ``--quick``: the ``:smoke`` preset
(unless ``--config`` names one), a few repeats, no target judged.
"""

import argparse
import json
import os
import sys

from az import cli

if __name__ == "__main__":  # the devices train.py runs on, set before JAX is imported
    cli.use_cpu_cores()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from ml_collections import config_flags  # noqa: E402

import search_bench  # bench/, beside this file  # noqa: E402
from timing import compile_and_time  # noqa: E402
from az import network as network_lib  # noqa: E402
from az import search as search_lib  # noqa: E402
from az.train import trainer as trainer_lib  # noqa: E402
from envs import env, starts  # noqa: E402

CONFIG = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "configs",
                      "shogi816k_randomstart2.py")
NETWORK_SHARE_TARGET = 0.8
ROOFLINE_TARGET = 0.6
RANDOM_PLIES = 40  # how far into a game the timed positions are


def midgame_positions(start, rules: env.Rules, batch: int, plies: int, seed: int = 1) -> env.State:
    """[batch] games from ``start`` after ``plies`` uniformly random legal moves (a game
    that would end stays where it was), so that the timed positions carry pieces in hand
    and checks as self-play's do."""
    key = jax.random.PRNGKey(seed)
    games = jax.jit(jax.vmap(start, in_axes=(0, None)))(jax.random.split(key, batch), jnp.float32(0))
    step = jax.jit(jax.vmap(lambda s, a: env.step(s, a, rules)))
    for _ in range(plies):
        key, k = jax.random.split(key)
        action = jax.random.categorical(k, jnp.where(games.legal_action_mask, 0.0, -jnp.inf))
        after = step(games, action)
        games = jax.tree.map(lambda new, old: jnp.where(after.done.reshape((-1,) + (1,) * (new.ndim - 1)), old, new),
                             after, games)
    return games


def flops(fn, args: tuple) -> float:
    """XLA's count of the floating-point operations of ``fn(*args)`` (0 when unknown)."""
    analysis = jax.jit(fn).lower(*args).compile().cost_analysis()
    if isinstance(analysis, (list, tuple)):
        analysis = analysis[0] if analysis else {}
    return float((analysis or {}).get("flops", 0.0))


def main(argv) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--quick", action="store_true", help=":smoke, 3 repeats, no target (a smoke test)")
    parser.add_argument("--json", help="also write the figures to this file")
    args, rest = parser.parse_known_args(argv[1:])
    flags = config_flags.DEFINE_config_file("config", CONFIG + (":smoke" if args.quick else ":cpu"))
    from absl import flags as absl_flags

    absl_flags.FLAGS([argv[0], *rest])
    config = flags.value
    repeats = 3 if args.quick else args.repeats
    devices = trainer_lib.make_mesh(config).size
    batch = max(config.selfplay.num_games // devices, 1)
    rules = search_lib.rules_from_config(config.env)
    net = network_lib.make_network(config.model)
    params = network_lib.init_params(net, jax.random.PRNGKey(0))
    start = starts.make_start_fn(starts.parse_start(config.env.start), rules)
    games = midgame_positions(start, rules, batch, 4 if args.quick else RANDOM_PLIES)
    key = jax.random.PRNGKey(2)
    action = jax.random.categorical(key, jnp.where(games.legal_action_mask, 0.0, -jnp.inf))
    s = config.search
    n_full = s.num_simulations
    capped = config.selfplay.full_search_fraction < 1
    reduced_settings = trainer_lib.reduced_search_settings(s)
    n_reduced = reduced_settings["num_simulations"]
    print(f"{config.name}: {batch} games a device ({devices} {jax.default_backend()} device(s)), "
          f"{config.model.num_blocks}x{config.model.channels} {config.model.dtype}, n={n_full}"
          + (f", {n_reduced} in {1 - config.selfplay.full_search_fraction:.0%} of the plies" if capped else "")
          + f"; median of {repeats}", flush=True)

    def timed(fn, *fn_args) -> float:
        return compile_and_time(jax.jit(fn), fn_args, repeats).seconds

    forward = lambda p, g: search_lib.network_forward(net.apply, p, g, rules)  # noqa: E731
    forward_flops = flops(forward, (params, games))
    channels = config.model.channels
    lhs = jax.random.normal(key, (batch * 81, 9 * channels), jnp.float32)
    rhs = jax.random.normal(key, (9 * channels, channels), jnp.float32)
    dot_s = timed(jnp.dot, lhs, rhs)
    dot_gflops = 2 * lhs.shape[0] * lhs.shape[1] * rhs.shape[1] / dot_s / 1e9

    searches = {}  # name: (seconds, own seconds, forwards, share of the plies)
    kinds = [("full", n_full, {"num_simulations": n_full}, config.selfplay.full_search_fraction)]
    if capped:
        kinds.append(("reduced", n_reduced, reduced_settings, 1 - config.selfplay.full_search_fraction))
    for kind, n, settings, share in kinds:
        real = search_lib.search_from_config(s, net.apply, rules, **settings)
        free = search_lib.search_from_config(s, search_bench.free_network, rules, **settings)
        searches[f"{kind} search (n={n})"] = (timed(real, params, key, games), timed(free, params, key, games),
                                               n + 1, share)
    parts = {
        "env step": timed(jax.vmap(lambda g, a: env.step(g, a, rules)), games, action),
        "fresh starts": timed(lambda k: jax.vmap(start, in_axes=(0, None))(jax.random.split(k, batch), 0.5), key),
    }
    search_s = sum(seconds * share for seconds, _, _, share in searches.values())
    network_s = sum((seconds - own) * share for seconds, own, _, share in searches.values())
    calls = sum(forwards * share for _, _, forwards, share in searches.values())
    forward_s = network_s / calls  # one forward inside the searches
    forward_gflops = forward_flops / forward_s / 1e9
    roofline = forward_gflops / dot_gflops
    ply_s = search_s + sum(parts.values())
    network_share = network_s / search_s

    print(f"network forward      {1e3 * forward_s:8.2f} ms  {forward_flops / 1e9:.3f} GFLOP  "
          f"{forward_gflops:6.1f} GFLOP/s  (in the searches)")
    print(f"matrix product       {1e3 * dot_s:8.2f} ms  [{lhs.shape[0]}, {lhs.shape[1]}] x [{rhs.shape[0]}, "
          f"{rhs.shape[1]}]  {dot_gflops:6.1f} GFLOP/s")
    for name, (seconds, own, forwards, share) in searches.items():
        print(f"{name:20s} {1e3 * seconds:8.2f} ms  its own work {1e3 * own:7.2f} ms ({own / seconds:.0%}), "
              f"{forwards} forwards; in {share:.0%} of the plies")
    for name, seconds in parts.items():
        print(f"{name:20s} {1e3 * seconds:8.2f} ms")
    print(f"a ply: {1e3 * ply_s:.2f} ms; the network {network_s / ply_s:.0%}, the searches' own work "
          f"{(search_s - network_s) / ply_s:.0%}, env step and starts {sum(parts.values()) / ply_s:.0%}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"config": config.name, "device": jax.devices()[0].device_kind, "batch": batch,
                       "forward_s": forward_s, "forward_flops": forward_flops, "forward_gflops": forward_gflops,
                       "dot_gflops": dot_gflops, "roofline": roofline, "network_share": network_share,
                       "ply_s": ply_s, "parts_s": parts,
                       "searches": {k: {"seconds": v[0], "own_seconds": v[1], "forwards": v[2], "share": v[3]}
                                    for k, v in searches.items()}},
                      f, indent=2)
    judged = [("the searches' network share", network_share, NETWORK_SHARE_TARGET),
              ("forward / matrix product GFLOP/s", roofline, ROOFLINE_TARGET)]
    failed = False
    for name, value, target in judged:
        if args.quick:
            print(f"{name} = {value:.2f}  (not judged at --quick)")
        else:
            ok = value >= target
            failed |= not ok
            print(f"{name} = {value:.2f}  [{'PASS' if ok else 'FAIL'}: >= {target}]")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
