"""Curves over training games or training minutes: Elo against references (the paper's
Fig. 2), one match per snapshot, and the teacher agreement the trainer logged. Over
minutes, runs that cost differently per game (a smaller network, a cheaper search) are
compared at equal wall time."""

import json
import os

import matplotlib.pyplot as plt
import numpy as np

from az import workdir as workdir_lib


def read_metrics(workdir: str) -> list[dict]:
    """The run's metrics by iteration (``workdir.metrics_rows``); ValueError when there are none."""
    path = os.path.join(workdir, "metrics.jsonl")
    if not os.path.isfile(path):
        raise ValueError(f"{path}: cannot read it (no such file)")
    rows = workdir_lib.metrics_rows(workdir)
    if not rows:
        raise ValueError(f"{path}: no metrics yet")
    return rows


# The x axes a curve can have: games finished, or minutes of training.
OVER = {"games": "training games", "minutes": "training minutes (the iterations' own time, compiling included)"}


def progress_by_iteration(rows: list[dict], over: str) -> dict[int, float]:
    """Iteration -> games finished by its end (``over="games"``) or minutes of training up
    to its end (``"minutes"``: the sum of the iterations' logged seconds, so time lost to
    a restart is not counted; the first iteration each process runs, the run's first and
    the first after a resume, includes compiling)."""
    if over == "games":
        return {r["iteration"]: r["games_finished"] for r in rows}
    if over != "minutes":
        raise ValueError(f"over={over!r}: choose one of {', '.join(OVER)}")
    minutes, total = {}, 0.0
    for r in rows:
        total += r.get("seconds", 0.0)
        minutes[r["iteration"]] = total / 60
    return minutes


def plot_elo_curve(curves: dict, path: str, baseline: dict | None = None, over: str = "games") -> None:
    """``curves``: label -> list of (games, elo, low, high, score[, step[, minutes]]); Elo
    and score over training games, or over training minutes (``over="minutes"``: the
    seventh field). ``baseline``: curves of an earlier run, drawn dashed beside."""
    fig, (ax_elo, ax_score) = plt.subplots(1, 2, figsize=(11, 4))
    clip = 1500  # an infinite Elo (old results at 0% or 100%) is drawn at the clip
    drawn = [(name, points, "-") for name, points in curves.items()]
    drawn += [(name, points, "--") for name, points in (baseline or {}).items()]
    palette, colors = plt.rcParams["axes.prop_cycle"].by_key()["color"], {}
    x_field = {"games": 0, "minutes": 6}[over]
    for name, points, style in drawn:
        opponent = name.split(" vs ", 1)[-1]  # a baseline's curve takes the colour of its opponent's
        color = colors.setdefault(opponent, palette[len(colors) % len(palette)])
        if any(len(p) <= x_field for p in points):
            raise ValueError(f"{name}: its points have no training minutes (written before they were kept)")
        points = sorted(points, key=lambda p: p[x_field])
        xs = [p[x_field] for p in points]
        elo, low, high = (np.clip(np.asarray([p[i] for p in points], np.float64), -clip, clip) for i in (1, 2, 3))
        ax_elo.errorbar(xs, elo, yerr=[elo - low, high - elo], marker="o", capsize=3, label=name, ls=style,
                        color=color)
        ax_score.plot(xs, [p[4] for p in points], marker="o", label=name, ls=style, color=color)
    ax_elo.axhline(0, color="gray", lw=1, ls="--")
    ax_elo.set_ylim(-clip - 100, clip + 100)
    ax_elo.set_ylabel(f"Elo difference (95% interval, clipped at +-{clip})")
    ax_score.axhline(0.5, color="gray", lw=1, ls="--")
    ax_score.set_ylim(-0.02, 1.02)
    ax_score.set_ylabel("score (points per game)")
    _save_over(fig, (ax_elo, ax_score), path, over)


def _save_over(fig, axes, path: str, over: str) -> None:
    """Panels whose x axis is training games or minutes: label, legend, write the PNG."""
    for ax in axes:
        ax.set_xlabel(OVER[over])
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def elo_curve(workdirs: list[str], opponents: list[str], *, games: int | None, simulations: int,
              openings: str | None, concurrency: int, path: str, steps: list[int] | None = None,
              baseline: dict | None = None, over: str = "games") -> dict:
    """Plays saved checkpoints of each run against each opponent and plots Elo over games
    (or minutes: ``over``).

    Checkpoints are the run's snapshots (all, or ``steps``). Matches are kept in
    WORKDIR/eval/<opponent>/step_<K>; finished ones are not replayed. ``baseline``
    (label -> points, as this writes them) is drawn dashed beside, for comparing runs.
    """
    from az.play import match as match_lib
    from az.play import players as players_lib
    from az.play import programs as programs_lib

    curves = {}
    opening_list = match_lib.load_openings(openings)
    programs = programs_lib.Programs()  # every snapshot of a config plays the same compiled search
    for opponent in opponents:
        second = players_lib.parse_player(opponent, num_simulations=simulations, slots=concurrency, seed=1,
                                          programs=programs)
        try:
            for workdir in workdirs:
                rows = read_metrics(workdir)
                games_at = progress_by_iteration(rows, "games")
                minutes_at = progress_by_iteration(rows, "minutes")
                saved = workdir_lib.snapshot_steps(workdir)
                missing = [s for s in steps or () if s not in saved]
                if not saved or missing:
                    raise ValueError(f"{workdir}: no snapshot of step(s) {missing or 'any'} (have {saved})")
                chosen = saved if steps is None else steps
                points = []
                for step in chosen:
                    out = os.path.join(workdir, "eval", match_lib.slug(second.name), f"step_{step}")
                    first = players_lib.parse_player(f"checkpoint:{workdir}@{step}", num_simulations=simulations,
                                                     slots=concurrency, programs=programs)
                    try:
                        m = match_lib.Match(first, second, opening_list, out, games=games, concurrency=concurrency,
                                            resume=True, progress=False)
                        s = m.run()
                    finally:
                        first.close()
                    played = games_at.get(step, 0)
                    points.append((played, s["elo"], s["elo_low"], s["elo_high"], s["score"], step,
                                   round(minutes_at.get(step, 0.0), 2)))
                    line = match_lib.format_summary(first.name, second.name, s).splitlines()[0]
                    print(f"{workdir}@{step} ({played} games): {line}", flush=True)
                curves[f"{os.path.basename(workdir.rstrip('/'))} vs {second.name}"] = points
        finally:
            second.close()
    plot_elo_curve(curves, path, baseline, over)
    with open(os.path.splitext(path)[0] + ".json", "w", encoding="utf-8") as f:
        json.dump(curves, f, indent=1)
    return curves


def read_baselines(specs: list[str]) -> dict:
    """Curves of earlier runs from ``PATH.json[:LABEL]`` specs, each label prefixed."""
    curves = {}
    for spec in specs:
        path, _, label = spec.partition(".json:")
        path = path if path.endswith(".json") else path + ".json"
        try:
            with open(path, encoding="utf-8") as f:
                saved = json.load(f)
        except (OSError, ValueError) as e:
            raise ValueError(f"--baseline {spec!r}: cannot read {path} ({e})") from None
        for name, points in saved.items():
            curves[f"{label or os.path.basename(path)}: {name}"] = points
    return curves


def plot_teacher_curve(workdirs: list[str], path: str, over: str = "games") -> None:
    """The teacher agreement the trainer logged over training games (or minutes:
    ``over``), with the baselines."""
    from az.measure import agreement, teacher as teacher_lib

    fig, (ax_policy, ax_value) = plt.subplots(1, 2, figsize=(11, 4))
    drawn = 0
    for workdir in workdirs:
        every = read_metrics(workdir)
        x_at = progress_by_iteration(every, over)
        rows = [r for r in every if "teacher/top1" in r]
        if not rows:
            continue
        drawn += 1
        name = os.path.basename(workdir.rstrip("/"))
        xs = [x_at[r["iteration"]] for r in rows]
        ax_policy.plot(xs, [100 * r["teacher/top1"] for r in rows], marker=".", label=f"{name} top-1")
        ax_policy.plot(xs, [100 * r["teacher/top3"] for r in rows], marker=".", ls="--", label=f"{name} top-3")
        ax_value.plot(xs, [r["teacher/value_sign_accuracy"] for r in rows], marker=".",
                      label=f"{name} value sign (|score| >= {agreement.DECIDED_CP} cp)")
        ax_value.plot(xs, [r["teacher/value_rank_correlation"] for r in rows], marker=".", ls="--",
                      label=f"{name} value-score rank correlation")
    if not drawn:
        raise ValueError(f"no teacher metrics in {', '.join(workdirs)} (config.teacher.every_iterations = 0?)")
    for (line, value), style in zip(agreement.baselines(teacher_lib.load()).items(), (":", "--", "-.")):
        ax_policy.axhline(100 * value, color="gray", ls=style, lw=1, label=line)
    ax_policy.set_ylabel("policy agreement with the teacher, held-out (%)")
    ax_value.axhline(0.5, color="gray", lw=1, ls=":")
    ax_value.set_ylim(-0.25, 1.05)  # a rank correlation can be negative early in a run
    _save_over(fig, (ax_policy, ax_value), path, over)
