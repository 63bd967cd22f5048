"""The command line of ``python -m az.play.report`` (see the package's docstring)."""

import argparse
import json
import os
import sys

from az.play.report.balance import engine_scores, network_values, plot_balance, start_positions
from az.play.report.curves import OVER, elo_curve, plot_teacher_curve, read_baselines, read_metrics
from az.play.report.heatmaps import plot_heatmaps
from az.play.report.ladder import DEFAULT_RUNGS, LadderSettings, ladder
from az.play.report.matches import match_losses, plot_balance_after_opening
from az.play.report.teacher_report import plot_teacher, teacher_agreement


def build_parser() -> argparse.ArgumentParser:
    from az.play import report

    parser = argparse.ArgumentParser(prog="python -m az.play.report", description=report.__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("curve", help="Elo over training games (Fig. 2).")
    c.add_argument("--workdir", action="append", required=True, help="a training run (repeat for several).")
    c.add_argument("--opponent", action="append", default=[],
                   help="a reference player, as eval.py's --opponent (repeat for several; none: only the logged "
                        "teacher agreement).")
    c.add_argument("--games", type=int, default=None, help="games per snapshot (default: each opening twice).")
    c.add_argument("--simulations", type=int, default=800, help="search simulations per move of the snapshots.")
    c.add_argument("--openings", default=None, help="openings file, as eval.py's (default: the start position).")
    c.add_argument("--concurrency", type=int, default=1, help="games played at once.")
    c.add_argument("--steps", default=None, help="comma-separated checkpoint steps (default: all saved)")
    c.add_argument("--out", default="elo_curve.png", help="the plot; its .json beside it.")
    c.add_argument("--baseline", action="append", default=[],
                   help="PATH.json[:LABEL] of an earlier `curve` run, drawn dashed (repeatable).")
    c.add_argument("--over", choices=sorted(OVER), default="games",
                   help="the x axis: training games, or minutes of training (runs of different cost at equal "
                        "wall time).")
    h = sub.add_parser("heatmaps", help="king/rook squares at ply 30 and their entropy (Figs. 6-8).")
    h.add_argument("--workdir", action="append", required=True, help="a training run (repeat for several).")
    h.add_argument("--points", type=int, default=3, help="equal parts of each run's games, one heatmap each.")
    h.add_argument("--out", default="heatmaps.png", help="the plot.")
    b = sub.add_parser("balance", help="black's advantage over a start scheme (Fig. 4, Table 2).")
    b.add_argument("--start", action="append", required=True, help="a start scheme (repeat for several).")
    b.add_argument("--engine", default=None, help="usi:PATH?nodes=N (score in cp).")
    b.add_argument("--checkpoint", default=None, help="WORKDIR[@STEP] (network value).")
    b.add_argument("--positions", type=int, default=200, help="positions per start scheme.")
    b.add_argument("--jobs", type=int, default=1, help="engine processes at a time.")
    b.add_argument("--reuse-engine", action="store_true",
                   help="one engine process per job, usinewgame between positions (gpsusi starts slowly).")
    b.add_argument("--seed", type=int, default=0, help="seeds the sampled start schemes.")
    b.add_argument("--out", default="balance.png", help="the plot; its .json beside it.")
    t = sub.add_parser("teacher", help="agreement of snapshots with the teacher set's moves.")
    t.add_argument("checkpoints", nargs="+", metavar="WORKDIR[@STEP]", help="the snapshots to measure.")
    t.add_argument("--simulations", default="0,16", help="comma-separated simulation counts; 0 is the policy alone.")
    t.add_argument("--one-ply", action="store_true",
                   help="also the value alone: the move after which it rates the position best, of all legal moves.")
    t.add_argument("--split", default="heldout", choices=("heldout", "fit", "all", "test"),
                   help="the teacher set's part (test: data/teacher_test.tsv, for a final figure only).")
    t.add_argument("--positions", type=int, default=0, help="the first N positions of the split (0: all)")
    t.add_argument("--out", default="teacher.png", help="the plot; its .json beside it.")
    la = sub.add_parser("ladder", help="snapshots rated among the shipped players by one joint Elo fit.")
    la.add_argument("snapshots", nargs="*", metavar="WORKDIR[@STEP]",
                    help="the snapshots to rate (a bare WORKDIR: all its snapshots).")
    la.add_argument("--rungs", default=",".join(DEFAULT_RUNGS),
                    help="comma-separated player specs, weakest first (default %(default)s)")
    la.add_argument("--matches", action="append", default=[], metavar="DIR",
                    help="recorded matches to add to the fit (eval.py --out folders, or folders of them)")
    la.add_argument("--no-play", action="store_true", help="fit the recorded matches only.")
    la.add_argument("--games", type=int, default=None, help="games a match (default: each opening twice)")
    la.add_argument("--simulations", type=int, default=800, help="search simulations a move of the snapshots.")
    la.add_argument("--openings", default="data/openings.tsv", help="(default data/openings.tsv)")
    la.add_argument("--concurrency", type=int, default=1, help="games played at once.")
    la.add_argument("--out", default="ladder.png",
                    help="the plot; its .json and its matches (OUT_matches/, one folder per openings file) beside it.")
    lo = sub.add_parser("losses", help="how the first player of matches lost (mates in one walked into) and its "
                                       "material after the opening line.")
    lo.add_argument("matches", nargs="+", metavar="MATCH_DIR", help="eval.py --out directories.")
    lo.add_argument("--out", default="losses.json", help="the table, as JSON; the material plot beside it (.png).")
    return parser


def main(argv=None) -> int:
    from az.play.usi_client import EngineFailure

    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "curve":
            has_teacher = any("teacher/top1" in r for w in args.workdir for r in read_metrics(w))
            if args.opponent:
                elo_curve(args.workdir, args.opponent, games=args.games, simulations=args.simulations,
                          openings=args.openings, concurrency=args.concurrency, path=args.out,
                          steps=[int(x) for x in args.steps.split(",")] if args.steps else None,
                          baseline=read_baselines(args.baseline), over=args.over)
            if has_teacher or not args.opponent:
                teacher_out = os.path.splitext(args.out)[0] + "_teacher.png" if args.opponent else args.out
                plot_teacher_curve(args.workdir, teacher_out, args.over)
                if args.opponent:
                    print(f"wrote {teacher_out}")
        elif args.command == "teacher":
            try:
                simulations = [int(x) for x in args.simulations.split(",")]
            except ValueError:
                parser.error(f"--simulations {args.simulations!r}: comma-separated integers")
            if any(n < 0 for n in simulations):
                parser.error(f"--simulations {args.simulations!r}: counts must be >= 0")
            from az.measure import teacher as teacher_lib

            summary = teacher_agreement(args.checkpoints, simulations, split=args.split, positions=args.positions,
                                        one_ply=args.one_ply,
                                        teacher_path=teacher_lib.TEST_PATH if args.split == "test" else None)
            plot_teacher(summary, args.out)
            with open(os.path.splitext(args.out)[0] + ".json", "w", encoding="utf-8") as f:
                json.dump(summary, f, indent=1)
        elif args.command == "ladder":
            for name in ("games", "simulations", "concurrency"):
                if (getattr(args, name) or 1) < 1:
                    parser.error(f"--{name} must be >= 1")
            settings = LadderSettings(os.path.splitext(args.out)[0] + "_matches", args.openings, args.games,
                                      args.simulations, args.concurrency)
            ladder(args.snapshots, [r for r in args.rungs.split(",") if r], settings, recorded=args.matches,
                   play=not args.no_play, path=args.out)
        elif args.command == "losses":
            table = {match_dir: match_losses(match_dir) for match_dir in args.matches}
            with open(args.out, "w", encoding="utf-8") as f:
                json.dump(table, f, indent=1)
            plot_balance_after_opening(table, os.path.splitext(args.out)[0] + ".png")
            print(json.dumps({d: {k: v for k, v in t.items() if k != "balance"} for d, t in table.items()}, indent=1))
        elif args.command == "heatmaps":
            plot_heatmaps(args.workdir, args.out, points=args.points)
        else:
            if (args.engine is None) == (args.checkpoint is None):
                parser.error("balance needs exactly one of --engine or --checkpoint")
            values = {}
            for start in args.start:
                sfens = start_positions(start, args.positions, args.seed)
                values[start] = (engine_scores(sfens, args.engine, jobs=args.jobs, reuse=args.reuse_engine) if args.engine
                                 else network_values(sfens, args.checkpoint))
            table = plot_balance(values, args.out, unit="cp" if args.engine else "value")
            with open(os.path.splitext(args.out)[0] + ".json", "w", encoding="utf-8") as f:
                json.dump({"engine": args.engine, "checkpoint": args.checkpoint, "table": table, "values": values}, f)
            print(json.dumps(table, indent=1))
    except (ValueError, EngineFailure) as e:  # EngineFailure: an engine that crashed or hung after starting
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"wrote {args.out}")
    return 0
