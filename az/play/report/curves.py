"""Curves over training games: Elo against references (the paper's Fig. 2), one match per
snapshot, and the teacher agreement the trainer logged."""

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


def plot_elo_curve(curves: dict, path: str, baseline: dict | None = None) -> None:
    """``curves``: label -> list of (games, elo, low, high, score[, step]); Elo and score
    over training games. ``baseline``: curves of an earlier run, drawn dashed beside."""
    fig, (ax_elo, ax_score) = plt.subplots(1, 2, figsize=(11, 4))
    clip = 1500  # an infinite Elo (old results at 0% or 100%) is drawn at the clip
    drawn = [(name, points, "-") for name, points in curves.items()]
    drawn += [(name, points, "--") for name, points in (baseline or {}).items()]
    palette, colors = plt.rcParams["axes.prop_cycle"].by_key()["color"], {}
    for name, points, style in drawn:
        opponent = name.split(" vs ", 1)[-1]  # a baseline's curve takes the colour of its opponent's
        color = colors.setdefault(opponent, palette[len(colors) % len(palette)])
        points = sorted(points)
        games = [p[0] for p in points]
        elo, low, high = (np.clip(np.asarray([p[i] for p in points], np.float64), -clip, clip) for i in (1, 2, 3))
        ax_elo.errorbar(games, elo, yerr=[elo - low, high - elo], marker="o", capsize=3, label=name, ls=style,
                        color=color)
        ax_score.plot(games, [p[4] for p in points], marker="o", label=name, ls=style, color=color)
    ax_elo.axhline(0, color="gray", lw=1, ls="--")
    ax_elo.set_ylim(-clip - 100, clip + 100)
    ax_elo.set_ylabel(f"Elo difference (95% interval, clipped at +-{clip})")
    ax_score.axhline(0.5, color="gray", lw=1, ls="--")
    ax_score.set_ylim(-0.02, 1.02)
    ax_score.set_ylabel("score (points per game)")
    _save_over_games(fig, (ax_elo, ax_score), path)


def _save_over_games(fig, axes, path: str) -> None:
    """Panels whose x axis is training games: label, legend, write the PNG."""
    for ax in axes:
        ax.set_xlabel("training games")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def elo_curve(workdirs: list[str], opponents: list[str], *, games: int | None, simulations: int,
              openings: str | None, concurrency: int, path: str, steps: list[int] | None = None,
              baseline: dict | None = None) -> dict:
    """Plays saved checkpoints of each run against each opponent and plots Elo over games.

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
                rows = {r["iteration"]: r for r in read_metrics(workdir)}
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
                    played = rows[step]["games_finished"] if step in rows else 0
                    points.append((played, s["elo"], s["elo_low"], s["elo_high"], s["score"], step))
                    line = match_lib.format_summary(first.name, second.name, s).splitlines()[0]
                    print(f"{workdir}@{step} ({played} games): {line}", flush=True)
                curves[f"{os.path.basename(workdir.rstrip('/'))} vs {second.name}"] = points
        finally:
            second.close()
    plot_elo_curve(curves, path, baseline)
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


def plot_teacher_curve(workdirs: list[str], path: str) -> None:
    """The teacher agreement the trainer logged over training games, with the baselines."""
    from az.measure import agreement, teacher as teacher_lib

    fig, (ax_policy, ax_value) = plt.subplots(1, 2, figsize=(11, 4))
    drawn = 0
    for workdir in workdirs:
        rows = [r for r in read_metrics(workdir) if "teacher/top1" in r]
        if not rows:
            continue
        drawn += 1
        name = os.path.basename(workdir.rstrip("/"))
        games = [r["games_finished"] for r in rows]
        ax_policy.plot(games, [100 * r["teacher/top1"] for r in rows], marker=".", label=f"{name} top-1")
        ax_policy.plot(games, [100 * r["teacher/top3"] for r in rows], marker=".", ls="--", label=f"{name} top-3")
        ax_value.plot(games, [r["teacher/value_sign_accuracy"] for r in rows], marker=".",
                      label=f"{name} value sign (|score| >= {agreement.DECIDED_CP} cp)")
        ax_value.plot(games, [r["teacher/value_rank_correlation"] for r in rows], marker=".", ls="--",
                      label=f"{name} value-score rank correlation")
    if not drawn:
        raise ValueError(f"no teacher metrics in {', '.join(workdirs)} (config.teacher.every_iterations = 0?)")
    for (line, value), style in zip(agreement.baselines(teacher_lib.load()).items(), (":", "--", "-.")):
        ax_policy.axhline(100 * value, color="gray", ls=style, lw=1, label=line)
    ax_policy.set_ylabel("policy agreement with the teacher, held-out (%)")
    ax_value.axhline(0.5, color="gray", lw=1, ls=":")
    ax_value.set_ylim(-0.25, 1.05)  # a rank correlation can be negative early in a run
    _save_over_games(fig, (ax_policy, ax_value), path)
