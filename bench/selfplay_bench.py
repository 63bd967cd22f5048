"""Self-play throughput: our compiled loop against the plain pgx + mctx loop, and on the
compact tree against the full tree, one process.

    python bench/selfplay_bench.py [--batch 64] [--simulations 16] [--plies 8] [--quick]

The reference is the loop pgx and mctx document: a vmapped pgx env, the full pgx
state as mctx's embedding, ``gumbel_muzero_policy``, and a Python loop over moves.
Both use the same network, batch and n. The network reads the observation packed
(``envs.env.observe_parts``); the reference converts the observation pgx's step has
already computed (``pgx_observation``: its 62 board planes packed to bytes, the 57
constant planes read at one square) rather than observing again with our env, so pgx's
loop pays for its own observation, once, plus a few byte operations. Prints
positions/s of each and the ratio (target: ours >= 1.0x), the same self-play with
Gumbel on the full [B, N, A] tree (``make_reference_search``, the loop before the
compact tree; target: the compact tree not slower), the split of our time between env,
network and search, and the search-tree memory per game of each.
``--quick`` runs tiny sizes as a smoke test (tests/test_bench.py).
"""

import argparse
import statistics
import time

import jax
import jax.numpy as jnp
import mctx
import pgx

from timing import median_seconds  # bench/, beside this file
from az import network as network_lib
from az import search as search_lib
from az.network import AZNet
from az.train import selfplay as selfplay_lib
from envs import env, movegen, starts

QUICK = dict(batch=4, simulations=4, considered=4, plies=2, blocks=1, channels=8, repeats=1)


def pgx_observation(state: pgx.State) -> tuple[jax.Array, jax.Array]:
    """pgx's observation [B, 9, 9, 119] in the network's form: the 62 board planes packed
    [B, 648] uint8, the 57 constant ones [B, 57] bool."""
    board = network_lib.BOARD_PLANES
    return movegen.pack_board_planes(state.observation[..., :board]), state.observation[:, 0, 0, board:]


def reference_loop(net, params, batch: int, simulations: int, considered: int):
    """pgx + mctx as their documentation shows them."""
    pgx_env = pgx.make("shogi")
    step = jax.vmap(pgx_env.step)

    def recurrent_fn(params, rng_key, action, state):
        del rng_key
        player = state.current_player
        state = step(state, action)
        logits, value = net.apply(params, pgx_observation(state))
        logits = jnp.where(state.legal_action_mask, logits, jnp.finfo(logits.dtype).min)
        reward = state.rewards[jnp.arange(batch), player]
        value = jnp.where(state.terminated, 0.0, value)
        discount = jnp.where(state.terminated, 0.0, -1.0)
        return mctx.RecurrentFnOutput(reward=reward, discount=discount, prior_logits=logits, value=value), state

    @jax.jit
    def search(params, rng_key, state):
        logits, value = net.apply(params, pgx_observation(state))
        root = mctx.RootFnOutput(prior_logits=logits, value=value, embedding=state)
        return mctx.gumbel_muzero_policy(
            params, rng_key, root, recurrent_fn, num_simulations=simulations,
            invalid_actions=~state.legal_action_mask, max_num_considered_actions=considered,
        )

    init = jax.jit(jax.vmap(pgx_env.init))
    play = jax.jit(jax.vmap(pgx_env.step))
    state = init(jax.random.split(jax.random.PRNGKey(1), batch))
    return search, play, state


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--simulations", type=int, default=16)
    parser.add_argument("--considered", type=int, default=16)
    parser.add_argument("--plies", type=int, default=8, help="plies per timed call")
    parser.add_argument("--blocks", type=int, default=2)
    parser.add_argument("--channels", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help=f"a smoke test: {QUICK}")
    args = parser.parse_args(argv)
    p = QUICK if args.quick else vars(args)
    b, n, t, considered = p["batch"], p["simulations"], p["plies"], p["considered"]
    print(f"backend {jax.default_backend()}, batch {b}, n={n}, m={considered}, {t} plies per call, "
          f"net {p['blocks']}x{p['channels']}")

    net = AZNet(num_blocks=p["blocks"], channels=p["channels"], value_hidden=64)
    params = network_lib.init_params(net, jax.random.PRNGKey(0))
    rules = env.Rules()

    # Ours: the self-play scan of the trainer, on the compact tree and on the full one.
    start = starts.make_start_fn("standard", rules)
    games = jax.jit(jax.vmap(start, in_axes=(0, None)))(jax.random.split(jax.random.PRNGKey(2), b), 0.0)
    key = jax.random.PRNGKey(3)
    track = selfplay_lib.init_resign(key, b, threshold=-0.9, no_resign_fraction=0.1)
    searches, selfplays, compiles = {}, {}, {}
    for full_tree in (False, True):
        make = search_lib.make_reference_search if full_tree else search_lib.make_search
        searches[full_tree] = make(net.apply, rules, search_lib.SearchSettings(
            algorithm="gumbel", num_simulations=n, max_num_considered_actions=considered))
        selfplays[full_tree] = jax.jit(selfplay_lib.make_selfplay(
            searches[full_tree], start, rules, sample_visits_plies=0, num_plies=t, game_budget=10**9, num_schemes=1))
        compile_start = time.perf_counter()
        jax.block_until_ready(selfplays[full_tree](params, games, track, key, jnp.int32(0)))
        compiles[full_tree] = time.perf_counter() - compile_start
    selfplay, search, ours_compile = selfplays[False], searches[False], compiles[False]

    # Reference: Python loop over moves, its search compiled ahead of time (for its memory too).
    ref_search, ref_play, ref_state = reference_loop(net, params, b, n, considered)
    compile_start = time.perf_counter()
    ref_search = ref_search.lower(params, key, ref_state).compile()

    def reference_plies():
        state, k = ref_state, key
        for _ in range(t):
            k, sub = jax.random.split(k)
            out = ref_search(params, sub, state)
            state = ref_play(state, out.action)
        return state

    jax.block_until_ready(reference_plies())
    ref_compile = time.perf_counter() - compile_start

    ours_times, full_times, ref_times = [], [], []
    for _ in range(p["repeats"]):  # interleaved against machine noise
        ours_times.append(median_seconds(lambda: selfplay(params, games, track, key, jnp.int32(0)), 1))
        full_times.append(median_seconds(lambda: selfplays[True](params, games, track, key, jnp.int32(0)), 1))
        ref_times.append(median_seconds(reference_plies, 1))
    ours_s, full_s, ref_s = (statistics.median(times) for times in (ours_times, full_times, ref_times))
    ours_pps, full_pps, ref_pps = b * t / ours_s, b * t / full_s, b * t / ref_s

    # Where our time goes: one env step and one network evaluation per simulation.
    step = jax.jit(jax.vmap(lambda s, a: env.step(s, a, rules)))
    actions = jnp.argmax(games.legal_action_mask, axis=-1)
    forward = jax.jit(lambda p, g: search_lib.network_forward(net.apply, p, g, rules))
    env_s = median_seconds(lambda: step(games, actions), p["repeats"] + 2)
    net_s = median_seconds(lambda: forward(params, games), p["repeats"] + 2)
    per_ply = ours_s / t
    env_share = min(1.0, env_s * (n + 1) / per_ply)
    net_share = min(1.0 - env_share, net_s * (n + 1) / per_ply)

    ours_memory = jax.jit(search).lower(params, key, games).compile().memory_analysis()
    ref_memory = ref_search.memory_analysis()

    print(f"compile: ours {ours_compile:.1f} s, full tree {compiles[True]:.1f} s, reference {ref_compile:.1f} s")
    print(f"positions/s: ours {ours_pps:,.1f}, reference {ref_pps:,.1f}, ratio {ours_pps / ref_pps:.2f}x "
          f"[{'PASS' if ours_pps >= ref_pps else 'FAIL'} >= 1.0x]")
    print(f"positions/s: compact tree {ours_pps:,.1f}, full tree {full_pps:,.1f}, ratio {ours_pps / full_pps:.2f}x "
          f"[{'PASS' if ours_pps >= full_pps else 'FAIL'} >= 1.0x]")
    print(f"our time per ply: env {env_share:.0%}, network {net_share:.0%}, "
          f"search bookkeeping and the rest {1 - env_share - net_share:.0%}")
    print(f"search working memory per game (XLA temporaries): ours {ours_memory.temp_size_in_bytes / b / 1024:,.1f} kB, "
          f"reference {ref_memory.temp_size_in_bytes / b / 1024:,.1f} kB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
