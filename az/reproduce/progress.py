"""What a variant's workdir says: whether it is trained, which snapshots are evaluated and
which of their matches are done. Read by the runner, the evaluator and the figures alike."""

import json
import os

from az import workdir as workdir_lib
from az.reproduce.plan import Plan


def is_trained(run_dir: str, budget_games: int) -> bool:
    """The budget is spent and the last iteration's snapshot saved."""
    rows = workdir_lib.metrics_rows(run_dir)
    return bool(rows) and rows[-1]["games_finished"] >= budget_games and \
        rows[-1]["iteration"] in workdir_lib.snapshot_steps(run_dir)


def evaluation_steps(rows: list[dict], saved: list[int], budget_games: int, points: int, trained: bool) -> list[int]:
    """Snapshot steps to evaluate: 0, the first saved snapshot at or past each of the
    ``points - 2`` evenly spaced game counts between, and the final one once trained."""
    games_at = {r["iteration"]: r["games_finished"] for r in rows}
    steps = [0] if 0 in saved else []
    for k in range(1, points - 1):
        target = budget_games * k / (points - 1)
        reached = [s for s in saved if s in games_at and games_at[s] >= target]
        if reached and reached[0] not in steps:
            steps.append(reached[0])
    if trained and saved and saved[-1] not in steps:
        steps.append(saved[-1])
    return steps


def run_steps(run_dir: str, budget_games: int, points: int, trained: bool) -> list[int]:
    """``evaluation_steps`` of the run in ``run_dir`` as it stands."""
    return evaluation_steps(workdir_lib.metrics_rows(run_dir), workdir_lib.snapshot_steps(run_dir), budget_games,
                            points, trained)


def match_games(plan: Plan, steps: list[int], step: int, trained: bool) -> int:
    """Games of the match of ``step``: the final snapshot's match is the long one."""
    return plan.final_games if trained and step == steps[-1] else plan.games


def match_dir(run_dir: str, opponent_name: str, step: int) -> str:
    from az.play import match as match_lib

    return os.path.join(run_dir, "eval", match_lib.slug(opponent_name), f"step_{step}")


def match_summary(out_dir: str, games: int) -> dict | None:
    """The summary of a finished match of at least ``games`` games in ``out_dir``, else None."""
    try:
        with open(os.path.join(out_dir, "results.json"), encoding="utf-8") as f:
            saved = json.load(f)
    except (OSError, ValueError):
        return None
    summary = saved.get("summary", {})
    return summary if summary.get("games", 0) >= games else None


def evaluation_progress(workdir: str, plan: Plan, configs: dict, opponent: str) -> str:
    """``DONE/TOTAL matches`` over all variants; an untrained variant counts all its points."""
    done = total = 0
    for variant in plan.variants:
        run_dir, config = os.path.join(workdir, variant), configs[variant]
        trained = is_trained(run_dir, config.budget_games)
        steps = run_steps(run_dir, config.budget_games, plan.points, trained)
        total += plan.points if not trained else len(steps)
        done += sum(match_summary(match_dir(run_dir, opponent, s), match_games(plan, steps, s, trained)) is not None
                    for s in steps)
    return f"{done}/{total} matches"
