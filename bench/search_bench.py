"""One search at the paper's settings: ``az.mcts``'s loop against mctx's own, same run.

    python bench/search_bench.py [--batch 256] [--simulations 64] [--considered 16]
                                 [--blocks 6] [--channels 64] [--dtype float32]

Both searches get the same roots (Shogi816K starts), network, model step and keys, and
return the same tree (tests/test_mcts.py); only the loop differs. mctx backs values up
with a vmapped while loop that copies the [B, N, A] visit and value arrays on every
level; ``az.mcts`` scatters B values per level. Prints seconds per search of each, the
network's and the env's share, and each loop's own time (search minus model; target:
ours at least 5x less). Exits 1 on a missed target.
"""

import argparse
import dataclasses
import time

import jax
import jax.numpy as jnp
import mctx

from timing import median_seconds  # bench/, beside this file
from az import mcts
from az import network as network_lib
from az import search as search_lib
from az.network import AZNet
from envs import env, starts



def compare(*, batch: int, simulations: int, considered: int, blocks: int, channels: int, dtype: str,
            repeats: int = 3) -> dict:
    """Seconds per search of each loop, and of the model alone (env steps, network calls)."""
    rules = env.Rules()
    net = AZNet(num_blocks=blocks, channels=channels, dtype=jnp.dtype(dtype))
    params = network_lib.init_params(net, jax.random.key(0))
    start = starts.make_start_fn("shogi816k", rules)
    games = jax.jit(jax.vmap(start, in_axes=(0, None)))(jax.random.split(jax.random.key(1), batch), 0.0)
    recurrent_fn = search_lib.make_recurrent_fn(net.apply, dataclasses.replace(rules, history=16))

    def searcher(policy):
        @jax.jit
        def search(params, rng_key, games):
            logits, value = search_lib.evaluate(net.apply, params, games, rules)
            root = mctx.RootFnOutput(prior_logits=logits, value=value,
                                     embedding=jax.vmap(lambda s: env.with_history(s, 16))(games))
            out = policy(params, rng_key, root, recurrent_fn, num_simulations=simulations,
                         invalid_actions=~games.legal_action_mask, max_num_considered_actions=considered)
            return out.action, out.action_weights

        return search

    key = jax.random.key(2)
    result = {}
    for name, policy in (("mctx_loop", mctx.gumbel_muzero_policy), ("az_mcts", mcts.gumbel_muzero)):
        search = searcher(policy)
        compile_start = time.perf_counter()
        jax.block_until_ready(search(params, key, games))
        result[f"{name}_compile_s"] = time.perf_counter() - compile_start
        result[f"{name}_s"] = median_seconds(lambda: search(params, key, games), repeats)

    step = jax.jit(jax.vmap(lambda s, a: env.step(s, a, rules)))
    actions = jnp.argmax(games.legal_action_mask, axis=-1).astype(jnp.int32)
    evaluate = jax.jit(lambda p, g: search_lib.evaluate(net.apply, p, g, rules))
    jax.block_until_ready((step(games, actions), evaluate(params, games)))
    result["env_s"] = median_seconds(lambda: step(games, actions), repeats + 2) * simulations
    result["network_s"] = median_seconds(lambda: evaluate(params, games), repeats + 2) * (simulations + 1)
    # The loop's own time: what is left after the model. On a CPU the network hides it;
    # on an H100 it was 85% of a ply with mctx's loop.
    for name in ("mctx_loop", "az_mcts"):
        result[f"{name}_own_s"] = max(result[f"{name}_s"] - result["env_s"] - result["network_s"], 1e-3)
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--simulations", type=int, default=64)
    parser.add_argument("--considered", type=int, default=16)
    parser.add_argument("--blocks", type=int, default=6)
    parser.add_argument("--channels", type=int, default=64)
    parser.add_argument("--dtype", default="float32", help="bfloat16 on accelerators")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    print(f"backend {jax.default_backend()}, B={args.batch}, n={args.simulations}, m={args.considered}, "
          f"net {args.blocks}x{args.channels} {args.dtype}", flush=True)
    r = compare(batch=args.batch, simulations=args.simulations, considered=args.considered, blocks=args.blocks,
                channels=args.channels, dtype=args.dtype, repeats=args.repeats)
    for name, label in (("mctx_loop", "mctx loop"), ("az_mcts", "az.mcts")):
        print(f"{label:10s} {r[f'{name}_s']:.3f} s per search (compile and first call {r[f'{name}_compile_s']:.1f} s)")
    ratio = r["mctx_loop_own_s"] / r["az_mcts_own_s"]
    print(f"the model alone: {args.simulations} env steps {r['env_s']:.3f} s, "
          f"{args.simulations + 1} network calls {r['network_s']:.3f} s")
    print(f"the loop's own time: mctx {r['mctx_loop_own_s']:.3f} s, az.mcts {r['az_mcts_own_s']:.3f} s")
    print(f"whole search: az.mcts {r['mctx_loop_s'] / r['az_mcts_s']:.2f}x faster; "
          f"loop's own time {ratio:.1f}x less [{'PASS' if ratio >= 5.0 else 'FAIL'} >= 5x]")
    return 0 if ratio >= 5.0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
