"""The paper's figures as PNG files, from training workdirs and match results.

    python -m az.play.report curve    --workdir runs/x [--workdir runs/y] --opponent SPEC [--opponent SPEC2] [--games N]
    python -m az.play.report heatmaps --workdir runs/x [--points 3]
    python -m az.play.report balance  --start "random_start(2)" --engine "usi:/usr/games/fairy-stockfish?nodes=100000" [--positions 200]
    python -m az.play.report balance  --start shogi816k --checkpoint runs/x
    python -m az.play.report teacher  runs/x@0 runs/x [--simulations 0,16] [--one-ply] [--split heldout]
    python -m az.play.report losses   eval/x_vs_greedy [eval/y_vs_greedy]
    python -m az.play.report ladder   runs/x [--rungs "random,greedy,heuristic?depth=1"] [--games N]

curve: Elo against a reference over training games (Fig. 2), one match per checkpoint,
kept in WORKDIR/eval/ so a rerun only plays what is missing. heatmaps: where each side's
king and rooks stand at ply 30 at points of training and their entropy over training
(Figs. 6-8), from the trainer's metrics. balance: the distribution of black's advantage
over a start scheme's positions (Fig. 4, Table 2), by an engine's score at fixed nodes or a
network's value. teacher: agreement of snapshots' policies and searches with the teacher
set's moves (fairy-stockfish at 100k nodes), with 95% intervals, by game phase, for drops
and promotions, and by the start scheme of the position's game, beside the random, greedy
and GA-heuristic baselines. ``curve`` also draws the teacher agreement the trainer
logged, and with no --opponent only that. losses: how the first player of a match
(eval.py's --checkpoint) lost each game it lost: walked into a mate in one where another
move avoided it, or was mated with every move refuted, or otherwise; and its material
balance over the plies after the opening line, drawn beside the table. ladder: snapshots
placed among the shipped players (random = 0) by one joint Bradley-Terry fit over every
match, each snapshot playing only its neighbouring rungs.
"""

import matplotlib

matplotlib.use("Agg")  # before any module of the package imports pyplot: files only, no display

from az.play.report.balance import engine_scores, network_values, plot_balance, start_positions  # noqa: E402
from az.play.report.curves import (  # noqa: E402
    elo_curve,
    plot_elo_curve,
    plot_teacher_curve,
    read_baselines,
    read_metrics,
)
from az.play.report.heatmaps import heatmap_parts, plot_heatmaps, pooled_entropy  # noqa: E402
from az.play.report.matches import (  # noqa: E402
    balance_after_opening,
    loss_cause,
    match_losses,
    mates_in_one,
    plot_balance_after_opening,
    plot_openings,
)
from az.play.report.teacher_report import plot_teacher, teacher_agreement  # noqa: E402
from az.play.report.cli import build_parser, main  # noqa: E402  (after the figures it calls)

__all__ = [
    "balance_after_opening", "build_parser", "elo_curve", "engine_scores", "heatmap_parts", "loss_cause", "main",
    "match_losses", "mates_in_one", "network_values", "plot_balance", "plot_balance_after_opening", "plot_elo_curve",
    "plot_heatmaps", "plot_openings", "plot_teacher", "plot_teacher_curve", "pooled_entropy", "read_baselines",
    "read_metrics", "start_positions", "teacher_agreement",
]
