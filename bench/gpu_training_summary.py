"""What a training run of bench/gpu_training.sh did, from its workdir: iterations, games,
positions/s with learning, the wall-time budget against what was spent, and the teacher
agreement it logged on the way.

    python bench/gpu_training_summary.py WORKDIR
"""

import json
import os
import statistics
import sys

from az import workdir as workdir_lib


def summary(workdir: str) -> list[str]:
    """The report's lines; one line naming the problem when the run logged nothing."""
    rows = workdir_lib.metrics_rows(workdir)
    if not rows:
        return [f"{workdir}: no metrics.jsonl rows (training did not reach its first iteration)"]
    last = rows[-1]
    learned = [r["positions_per_second"] for r in rows[1:] if r["learned"]]
    selfplay = [r["positions_per_second"] for r in rows[1:] if not r["learned"]]
    lines = [f"iterations {last['iteration']}, games {last['games_finished']:,}, positions {last['positions']:,}, "
             f"median positions/s with learning {statistics.median(learned) if learned else 0:,.0f}, "
             f"before learning started {statistics.median(selfplay) if selfplay else 0:,.0f}; "
             f"progress {last['progress']:.3f}, learning rate at the end {last['learner/learning_rate']:.2e}"]
    budget_path = os.path.join(workdir, "budget.json")
    if os.path.exists(budget_path):
        with open(budget_path, encoding="utf-8") as f:
            budget = json.load(f)
        spent = budget["seconds_before_training"] + sum(r["seconds"] + r.get("teacher/seconds", 0.0) for r in rows)
        lines.append(f"budget {budget['budget_minutes']:g} min -> {budget['budget_games']:,} games at "
                     f"{budget['positions_per_second']:,.0f} positions/s (probe); iterations and teacher took "
                     f"{spent:.0f} s of {60 * budget['budget_minutes']:.0f} with compile and probe; mean game "
                     f"length {last['positions'] / max(last['games_finished'], 1):.0f} plies "
                     f"(expected {budget['plies_per_game']:g})")
    for r in rows:
        if "teacher/top1" in r:
            lines.append(f"it {r['iteration']:4d} games {r['games_finished']:7,d} top1 {100 * r['teacher/top1']:.1f}% "
                         f"top3 {100 * r['teacher/top3']:.1f}% value sign {r['teacher/value_sign_accuracy']:.3f} "
                         f"rho {r['teacher/value_rank_correlation']:.3f}")
    return lines


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python bench/gpu_training_summary.py WORKDIR")
    print("\n".join(summary(sys.argv[1])))
