"""Evaluates a checkpoint by a match against an engine, a baseline player or another checkpoint.

Writes Elo with its interval, per-opening scores, game records (KIF, CSA) and the paper's plots.

    python eval.py --checkpoint runs/x[@STEP] --opponent usi:/usr/games/fairy-stockfish?nodes=1000 \
        --openings data/openings.tsv --out eval/x_vs_fs1k
    python eval.py --checkpoint runs/x --opponent greedy --games 40 --simulations 32
    python eval.py --checkpoint runs/x --opponent greedy --search max_num_considered_actions=4
    python eval.py --player heuristic?depth=2 --opponent heuristic --openings data/openings.tsv
"""

import argparse
import sys


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    first = p.add_mutually_exclusive_group(required=True)
    first.add_argument("--checkpoint", help="WORKDIR[@STEP] of the agent (default step: latest)")
    first.add_argument("--player", help="any player spec instead of a checkpoint, e.g. heuristic?depth=2 (see --opponent)")
    p.add_argument("--opponent", required=True,
                   help="checkpoint:WORKDIR[@STEP] | usi:PATH?option=value&nodes=N | fairy-stockfish?nodes=N | "
                   "gpsusi?depth=D | heuristic[:WEIGHTS][?depth=D] | random | greedy (the other player).")
    p.add_argument("--openings", default=None,
                   help="data/openings.tsv, or a file of SFEN / 'startpos moves' lines (default: the start position).")
    p.add_argument("--games", type=int, default=None, help="games in all (default: each opening twice)")
    p.add_argument("--simulations", type=int, default=800, help="search simulations per move of our agents.")
    p.add_argument("--search", action="append", default=[], metavar="FIELD=VALUE",
                   help="a playing-search setting of our agents in place of their snapshot's config.search, e.g. "
                   "value_scale=0.5 (max_num_considered_actions, value_scale, considered_drops, considered_captures, "
                   "history_window, material_utility); repeatable.")
    p.add_argument("--concurrency", type=int, default=1, help="games played at once.")
    p.add_argument("--out", default=None, help="directory for results.json, games/, plots (default eval/<names>)")
    p.add_argument("--resume", action="store_true", help="finish an interrupted match in --out.")
    p.add_argument("--seed", type=int, default=0, help="seeds the players' random choices.")
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    for name in ("games", "simulations", "concurrency"):
        value = getattr(args, name)
        if value is not None and value < 1:
            print(f"error: --{name} must be >= 1, got {value}", file=sys.stderr)
            return 2
    from az.play import evaluate

    try:
        evaluate.run_match(args)
    except evaluate.EvalError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
