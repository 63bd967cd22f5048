"""Self-play throughput: our compiled loop against the plain pgx + mctx loop, one process.

    python bench/selfplay_bench.py [--batch 64] [--simulations 16] [--plies 8]

The reference is the loop pgx and mctx document: a vmapped pgx env, the full pgx
state as mctx's embedding, ``gumbel_muzero_policy``, and a Python loop over moves.
Both use the same network, batch and n. Prints positions/s of each and the ratio
(target: ours >= 1.0x), the split of our time between env, network and search, and
the search-tree memory per game of each.
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
from envs import env, starts



def reference_loop(net, params, batch: int, simulations: int, considered: int):
    """pgx + mctx as their documentation shows them."""
    pgx_env = pgx.make("shogi")
    step = jax.vmap(pgx_env.step)

    def recurrent_fn(params, rng_key, action, state):
        del rng_key
        player = state.current_player
        state = step(state, action)
        logits, value = net.apply(params, (state.observation[..., :62], state.observation[:, 0, 0, 62:]))
        logits = jnp.where(state.legal_action_mask, logits, jnp.finfo(logits.dtype).min)
        reward = state.rewards[jnp.arange(batch), player]
        value = jnp.where(state.terminated, 0.0, value)
        discount = jnp.where(state.terminated, 0.0, -1.0)
        return mctx.RecurrentFnOutput(reward=reward, discount=discount, prior_logits=logits, value=value), state

    @jax.jit
    def search(params, rng_key, state):
        logits, value = net.apply(params, (state.observation[..., :62], state.observation[:, 0, 0, 62:]))
        root = mctx.RootFnOutput(prior_logits=logits, value=value, embedding=state)
        return mctx.gumbel_muzero_policy(
            params, rng_key, root, recurrent_fn, num_simulations=simulations,
            invalid_actions=~state.legal_action_mask, max_num_considered_actions=considered,
        )

    init = jax.jit(jax.vmap(pgx_env.init))
    play = jax.jit(jax.vmap(pgx_env.step))
    state = init(jax.random.split(jax.random.PRNGKey(1), batch))
    return search, play, state


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--simulations", type=int, default=16)
    parser.add_argument("--considered", type=int, default=16)
    parser.add_argument("--plies", type=int, default=8, help="plies per timed call")
    parser.add_argument("--blocks", type=int, default=2)
    parser.add_argument("--channels", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    b, n, t = args.batch, args.simulations, args.plies
    print(f"backend {jax.default_backend()}, batch {b}, n={n}, m={args.considered}, {t} plies per call, "
          f"net {args.blocks}x{args.channels}")

    net = AZNet(num_blocks=args.blocks, channels=args.channels, value_hidden=64)
    params = network_lib.init_params(net, jax.random.PRNGKey(0))
    rules = env.Rules()

    # Ours: the self-play scan of the trainer.
    start = starts.make_start_fn("standard", rules)
    search = search_lib.make_search(net.apply, rules, algorithm="gumbel", num_simulations=n,
                                    max_num_considered_actions=args.considered)
    selfplay = jax.jit(selfplay_lib.make_selfplay(
        search, start, rules, sample_visits_plies=0, num_plies=t,
        game_budget=10**9, num_schemes=1))
    games = jax.jit(jax.vmap(start, in_axes=(0, None)))(jax.random.split(jax.random.PRNGKey(2), b), 0.0)
    key = jax.random.PRNGKey(3)
    compile_start = time.perf_counter()
    track = selfplay_lib.init_resign(key, b, threshold=-0.9, no_resign_fraction=0.1)
    jax.block_until_ready(selfplay(params, games, track, key, jnp.int32(0)))
    ours_compile = time.perf_counter() - compile_start

    # Reference: Python loop over moves.
    ref_search, ref_play, ref_state = reference_loop(net, params, b, n, args.considered)

    def reference_plies():
        state, k = ref_state, key
        for _ in range(t):
            k, sub = jax.random.split(k)
            out = ref_search(params, sub, state)
            state = ref_play(state, out.action)
        return state

    compile_start = time.perf_counter()
    jax.block_until_ready(reference_plies())
    ref_compile = time.perf_counter() - compile_start

    ours_times, ref_times = [], []
    for _ in range(args.repeats):  # interleaved against machine noise
        ours_times.append(median_seconds(lambda: selfplay(params, games, track, key, jnp.int32(0)), 1))
        ref_times.append(median_seconds(reference_plies, 1))
    ours_s, ref_s = statistics.median(ours_times), statistics.median(ref_times)
    ours_pps, ref_pps = b * t / ours_s, b * t / ref_s

    # Where our time goes: one env step and one network evaluation per simulation.
    step = jax.jit(jax.vmap(lambda s, a: env.step(s, a, rules)))
    actions = jnp.argmax(games.legal_action_mask, axis=-1)
    evaluate = jax.jit(lambda p, g: search_lib.evaluate(net.apply, p, g, rules))
    env_s = median_seconds(lambda: step(games, actions), args.repeats + 2)
    net_s = median_seconds(lambda: evaluate(params, games), args.repeats + 2)
    per_ply = ours_s / t
    env_share = min(1.0, env_s * (n + 1) / per_ply)
    net_share = min(1.0 - env_share, net_s * (n + 1) / per_ply)

    ours_memory = jax.jit(search).lower(params, key, games).compile().memory_analysis()
    ref_memory = ref_search.lower(params, key, ref_state).compile().memory_analysis()

    print(f"compile: ours {ours_compile:.1f} s, reference {ref_compile:.1f} s")
    print(f"positions/s: ours {ours_pps:,.0f}, reference {ref_pps:,.0f}, ratio {ours_pps / ref_pps:.2f}x "
          f"[{'PASS' if ours_pps >= ref_pps else 'FAIL'} >= 1.0x]")
    print(f"our time per ply: env {env_share:.0%}, network {net_share:.0%}, "
          f"search bookkeeping and the rest {1 - env_share - net_share:.0%}")
    print(f"search working memory per game (XLA temporaries): ours {ours_memory.temp_size_in_bytes / b / 1024:,.1f} kB, "
          f"reference {ref_memory.temp_size_in_bytes / b / 1024:,.1f} kB")


if __name__ == "__main__":
    main()
