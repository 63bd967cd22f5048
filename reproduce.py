"""Reproduces the paper: trains its six variants, evaluates their snapshots while training
goes on, and draws Figs. 2-4, the heatmaps and Table 2 (see az/reproduce/).

    python reproduce.py --preset gpu --workdir runs/paper           # run again to resume
    python reproduce.py --preset smoke --workdir /tmp/paper          # the whole pipeline, tiny (CPU)
    python reproduce.py --preset cpu --variants base,shogi816k --workdir runs/paper_cpu
    python reproduce.py --preset gpu --workdir runs/paper --estimate-only   # its time, then exit
"""

import argparse
import sys


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] + " " + __doc__.splitlines()[1])
    p.add_argument("--preset", required=True, help="training preset of every variant: paper, gpu, cpu or smoke.")
    p.add_argument("--workdir", required=True, help="one folder for the runs, matches and figures; resumes from it.")
    p.add_argument("--variants", default=None,
                   help="comma-separated subset (default all six: base, exploration_puct, exploration_sh, "
                        "randomstart2, shogi816k, shogi816k_randomstart2)")
    p.add_argument("--opponent", default=None, help="the reference (a player spec as eval.py's; default per preset)")
    p.add_argument("--simulations", type=int, default=None, help="our search's simulations per move in evaluation.")
    p.add_argument("--games", type=int, default=None, help="games per evaluated snapshot.")
    p.add_argument("--final-games", type=int, default=None, help="games of each variant's final snapshot (Fig. 3)")
    p.add_argument("--points", type=int, default=None, help="snapshots evaluated per variant (>= 2)")
    p.add_argument("--balance-positions", type=int, default=None, help="positions per start set in Table 2 (0: none)")
    p.add_argument("--concurrency", type=int, default=None, help="evaluation games played at once.")
    p.add_argument("--parallel", type=int, default=None,
                   help="variants trained at once, each on an equal share of the GPUs (default 1: one after "
                        "another on all devices)")
    p.add_argument("--estimate-only", action="store_true",
                   help="probe each variant's training and the evaluation games, print the time the run would "
                        "take and exit (writes WORKDIR/estimate.json, no plan.json)")
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    from az import reproduce

    try:
        return reproduce.run_reproduction(
            args.workdir, args.preset, parallel=args.parallel, estimate_only=args.estimate_only,
            variants=args.variants, opponent=args.opponent,
            simulations=args.simulations, games=args.games, final_games=args.final_games, points=args.points,
            balance_positions=args.balance_positions, concurrency=args.concurrency)
    except reproduce.ReproductionError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
