"""What a finished reproduction draws: Figs. 2-4, the heatmaps, results.md and
results.json (Table 2, the final matches, the training time per variant)."""

import dataclasses
import json
import os

from az import workdir as workdir_lib
from az.reproduce import progress
from az.reproduce.balance import start_set_balance
from az.reproduce.durations import format_duration
from az.reproduce.plan import OPENINGS, Plan, ReproductionError, variant_config


def elo_curve(run_dir: str, variant: str, plan: Plan, opponent: str) -> list[tuple]:
    """One variant's evaluated snapshots: [(games, elo, elo_low, elo_high, score, step)]
    in training order; ReproductionError when a match is not finished."""
    config = variant_config(variant, plan.preset)
    rows = workdir_lib.metrics_rows(run_dir)
    games_at = {r["iteration"]: r["games_finished"] for r in rows}
    steps = progress.run_steps(run_dir, config.budget_games, plan.points, True)
    points = []
    for step in steps:
        s = progress.match_summary(progress.match_dir(run_dir, opponent, step),
                                   progress.match_games(plan, steps, step, True))
        if s is None:
            raise ReproductionError(f"{variant}@{step}: its match against {opponent} is not finished; run again")
        points.append((games_at.get(step, 0), s["elo"], s["elo_low"], s["elo_high"], s["score"], step))
    return points


def draw_figures(workdir: str, plan: Plan, timings: dict, opponent: str) -> dict:
    """Figs. 2-4, the heatmaps, results.md and results.json from the finished runs."""
    from az.play import report

    figures = os.path.join(workdir, "figures")
    os.makedirs(figures, exist_ok=True)
    run_dirs = [os.path.join(workdir, v) for v in plan.variants]
    rows_of = {v: workdir_lib.metrics_rows(d) for v, d in zip(plan.variants, run_dirs)}
    curves = {v: elo_curve(d, v, plan, opponent) for v, d in zip(plan.variants, run_dirs)}
    finals = {v: progress.match_summary(progress.match_dir(d, opponent, curves[v][-1][-1]), plan.final_games)
              for v, d in zip(plan.variants, run_dirs)}
    # Labelled without " vs ": plot_elo_curve colours curves by opponent, and here all have one.
    report.plot_elo_curve({f"{v} against {opponent}": p for v, p in curves.items()},
                          os.path.join(figures, "fig2_elo.png"))
    teacher_drawn = any("teacher/top1" in r for rows in rows_of.values() for r in rows)
    if teacher_drawn:
        report.plot_teacher_curve(run_dirs, os.path.join(figures, "fig2_teacher.png"))
    plot_openings_by_variant(finals, os.path.join(figures, "fig3_openings.png"), opponent=opponent)
    report.plot_heatmaps(run_dirs, os.path.join(figures, "heatmaps.png"))
    balance_values = start_set_balance(workdir, plan) if plan.opponent.startswith("usi:") else {}
    table2 = report.plot_balance(balance_values, os.path.join(figures, "fig4_balance.png"), unit="cp") \
        if balance_values else {}
    results = {"plan": dataclasses.asdict(plan), "opponent": opponent, "table2": table2, "variants": {}}
    for variant in plan.variants:
        rows, s = rows_of[variant], finals[variant]
        teacher = [r for r in rows if "teacher/top1" in r]
        results["variants"][variant] = {
            "iterations": rows[-1]["iteration"], "games": rows[-1]["games_finished"],
            "training_seconds": timings.get(variant), "final": {k: s[k] for k in (
                "games", "wins", "draws", "losses", "score", "elo", "elo_low", "elo_high")},
            "teacher_top1": teacher[-1]["teacher/top1"] if teacher else None, "curve": curves[variant],
        }
    with open(os.path.join(workdir, "results.json"), "w", encoding="utf-8") as f:
        json.dump(results, f, indent=1)
    with open(os.path.join(workdir, "results.md"), "w", encoding="utf-8") as f:
        f.write(results_markdown(results, teacher_drawn))
    return results


def results_markdown(results: dict, teacher: bool) -> str:
    """results.md from results.json's contents; ``teacher``: whether fig2_teacher.png was drawn."""
    plan = results["plan"]
    lines = [f"# Reproduction at preset `{plan['preset']}`", "",
             f"Final snapshots against {results['opponent']} at {plan['simulations']} simulations, "
             f"{plan['final_games']} games from `{OPENINGS}` (both colours):", "",
             "| variant | iterations | games | training time | +W =D -L | score | Elo [95%] | teacher top-1 |",
             "|---|---|---|---|---|---|---|---|"]
    for variant, r in results["variants"].items():
        f = r["final"]
        seconds = r["training_seconds"]
        top1 = f"{100 * r['teacher_top1']:.1f}%" if r["teacher_top1"] is not None else "-"
        lines.append(f"| {variant} | {r['iterations']} | {r['games']} | "
                     f"{format_duration(seconds) if seconds is not None else '-'} | "
                     f"+{f['wins']} ={f['draws']} -{f['losses']} | {f['score']:.3f} | "
                     f"{f['elo']:+.0f} [{f['elo_low']:+.0f}, {f['elo_high']:+.0f}] | {top1} |")
    if results["table2"]:
        lines += ["", "## Table 2: black's advantage over the start sets (cp, by the reference engine)", "",
                  "| start set | positions | mean | std |", "|---|---|---|---|"]
        for start, row in results["table2"].items():
            lines.append(f"| `{start}` | {row['positions']} | {row['mean']:+.1f} | {row['std']:.1f} |")
    lines += ["", "![Fig. 2](figures/fig2_elo.png)"]
    if teacher:
        lines.append("![teacher agreement](figures/fig2_teacher.png)")
    lines += ["![Fig. 3](figures/fig3_openings.png)"]
    if results["table2"]:
        lines.append("![Fig. 4](figures/fig4_balance.png)")
    lines.append("![Figs. 6-8](figures/heatmaps.png)")
    return "\n".join(lines) + "\n"


def plot_openings_by_variant(finals: dict, path: str, *, opponent: str) -> None:
    """The final snapshots' score per opening, one bar per variant (Fig. 3)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    openings = list(dict.fromkeys(name for s in finals.values() for name in s["openings"]))
    height = 0.8 / max(1, len(finals))
    fig, ax = plt.subplots(figsize=(8, 0.5 * len(openings) * max(1, len(finals)) ** 0.5 + 1.5))
    for i, (variant, s) in enumerate(finals.items()):
        scores = [s["openings"].get(name, {}).get("score", np.nan) for name in openings]
        rows = np.arange(len(openings)) + i * height
        ax.barh(rows, scores, height=height, label=f"{variant} ({s['score']:.2f})")
        for row, name, score in zip(rows, openings, scores):
            if name in s["openings"]:  # the results, so that a score of 0 shows too
                o = s["openings"][name]
                ax.text(min(score, 0.9) + 0.01, row, f"+{o['wins']} ={o['draws']} -{o['losses']}", va="center",
                        fontsize=6)
    ax.set_yticks(np.arange(len(openings)) + 0.4 - height / 2, openings, fontsize=8)
    ax.axvline(0.5, color="gray", lw=1, ls="--")
    ax.set_xlim(0, 1)
    ax.invert_yaxis()
    ax.set_xlabel(f"score against {opponent} (final snapshots)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
