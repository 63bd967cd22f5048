"""A rating ladder: snapshots placed among the shipped players by one joint Elo fit.

The rungs are players whose strength does not change (``random``, ``greedy``,
``heuristic?depth=D``, ``fairy-stockfish?nodes=N``, ``gpsusi?depth=D``), listed weakest
first. Every match result, of snapshots and rungs alike, goes into one Bradley-Terry fit
(``az.play.elo.fit_ratings``, random = 0), so a snapshot's rating draws on every game
it and its neighbours played, not on one match against one reference.

The schedule: each snapshot climbs from the rung where the previous snapshot of its run
stopped, one rung up while it scores above half, one down while it scores below, until
it has a rung it beats and one that beats it (or reaches an end); each pair of adjacent
rungs from random up to the highest rung any snapshot played plays one match, so every
rating is tied to random by a chain of games. Matches are kept in MATCHES/<first>_vs_<second>
as ``eval.py`` writes them (``results.json``), so a rerun plays only what is missing, and
any folder ``eval.py`` wrote can be added to the fit as it is.
"""

import glob
import json
import os
import re
from typing import NamedTuple

import matplotlib.pyplot as plt
import numpy as np

from az import workdir as workdir_lib
from az.play import elo as elo_lib

DEFAULT_RUNGS = ("random", "greedy", "heuristic?depth=1", "heuristic?depth=2", "fairy-stockfish?nodes=10000",
                 "fairy-stockfish?nodes=100000", "gpsusi?depth=4")
SNAPSHOT_NAME = re.compile(r"(?P<workdir>.+)@(?P<step>\d+) n=(?P<simulations>\d+)")  # AgentPlayer's name
POINTS = {"win": 1.0, "draw": 0.5, "loss": 0.0}


class LadderSettings(NamedTuple):
    """How the ladder's matches are played."""

    matches_dir: str  # where the ladder's own matches are kept
    openings: str | None  # openings file (None: the standard start)
    games: int | None  # games a match (None: each opening twice)
    simulations: int  # search simulations a move of the snapshots
    concurrency: int = 1


def rung_name(spec: str) -> str:
    """The name a rung's player records in a match (``heuristic?depth=2`` plays as ``heuristic d2``)."""
    head, _, query = spec.partition("?")
    if head == "heuristic":
        return f"heuristic d{dict(p.split('=', 1) for p in query.split('&') if '=' in p).get('depth', '1')}"
    return spec


def read_match(path: str) -> elo_lib.PairResult:
    """The finished games of one recorded match (an ``eval.py`` folder or its results.json)."""
    file = os.path.join(path, "results.json") if os.path.isdir(path) else path
    try:
        with open(file, encoding="utf-8") as f:
            saved = json.load(f)
        games = saved["games"]
        points = sum(POINTS[g["result"]] for g in games)
        return elo_lib.PairResult(str(saved["first"]), str(saved["second"]), len(games), points)
    except OSError as e:
        raise ValueError(f"match {file}: cannot read it ({e.strerror})") from None
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(f"match {file}: not a match eval.py wrote ({type(e).__name__}: {e})") from None


def read_matches(paths: list[str]) -> list[elo_lib.PairResult]:
    """Every recorded match in ``paths``: match folders, or folders holding them at any depth."""
    found = []
    for path in paths:
        if not os.path.exists(path):
            raise ValueError(f"match folder {path}: no such file or directory")
        files = [path] if os.path.isfile(path) else sorted(glob.glob(os.path.join(path, "**", "results.json"),
                                                                    recursive=True))
        if not files:
            raise ValueError(f"match folder {path}: no results.json in it (an eval.py --out folder?)")
        found += [r for r in map(read_match, files) if r.games > 0]
    return found


def expand_snapshots(specs: list[str]) -> list[tuple[str, int]]:
    """(workdir, step) for each ``WORKDIR@STEP``, and every saved snapshot of a bare ``WORKDIR``."""
    chosen = []
    for spec in specs:
        problem = workdir_lib.snapshot_problem(spec)
        if problem:
            raise ValueError(problem)
        workdir, step = workdir_lib.parse_spec(spec)
        chosen += [(workdir, step)] if step is not None else [(workdir, s) for s in workdir_lib.snapshot_steps(workdir)]
    return chosen


class _Matches:
    """Plays or resumes one match per pair of specs, kept in the settings' folder."""

    def __init__(self, settings: LadderSettings):
        from az.play import match as match_lib
        from az.play import programs as programs_lib

        self.settings, self.match_lib = settings, match_lib
        self.openings = match_lib.load_openings(settings.openings)
        self.programs = programs_lib.Programs()  # the snapshots of one config share their compiled searches
        self.players = {}

    def player(self, spec: str):
        from az.play import players as players_lib

        if spec not in self.players:
            self.players[spec] = players_lib.parse_player(spec, num_simulations=self.settings.simulations,
                                                          slots=self.settings.concurrency, programs=self.programs)
        return self.players[spec]

    def score(self, first_spec: str, second_spec: str) -> float:
        """The first player's score over the match (played now unless already recorded)."""
        first, second = self.player(first_spec), self.player(second_spec)
        slug = self.match_lib.slug
        out = os.path.join(self.settings.matches_dir, f"{slug(first.name)}_vs_{slug(second.name)}")
        match = self.match_lib.Match(first, second, self.openings, out, games=self.settings.games,
                                     concurrency=self.settings.concurrency, resume=True, progress=False)
        summary = match.run()
        print(self.match_lib.format_summary(first.name, second.name, summary).splitlines()[0], flush=True)
        return summary["score"]

    def close(self):
        for player in self.players.values():
            player.close()


def climb(score, snapshot: str, rungs: list[str], start: int) -> dict[int, float]:
    """Rung index -> the snapshot's score against it: from ``start``, up while it scores
    above half, down while below, each rung at most once (``score(a, b)``: a's score)."""
    scores, i = {}, start
    while True:
        scores[i] = score(snapshot, rungs[i])
        if scores[i] > 0.5 and i + 1 < len(rungs) and i + 1 not in scores:
            i += 1
        elif scores[i] < 0.5 and i > 0 and i - 1 not in scores:
            i -= 1
        else:
            return scores


def play_ladder(snapshots: list[tuple[str, int]], rungs: list[str], settings: LadderSettings) -> None:
    """Plays the schedule of the module docstring into ``settings.matches_dir``."""
    matches = _Matches(settings)
    try:
        highest, start_of_run = 0 if snapshots else len(rungs) - 1, {}  # no snapshots: rate the rungs
        for workdir, step in snapshots:
            scores = climb(matches.score, f"checkpoint:{workdir}@{step}", rungs, start_of_run.get(workdir, 0))
            start_of_run[workdir] = max([i for i, s in scores.items() if s >= 0.5], default=0)
            highest = max(highest, *scores)
        for lower in range(highest):
            matches.score(rungs[lower + 1], rungs[lower])
    finally:
        matches.close()


def training_games(workdir: str, step: int) -> int | None:
    """Games the run had finished when it saved the snapshot of ``step`` (None: no metrics)."""
    if step == 0:
        return 0  # the untrained network: no metrics row precedes the first iteration
    row = {r["iteration"]: r for r in workdir_lib.metrics_rows(workdir)}.get(step)
    return row.get("games_finished") if row else None


def ladder_table(ratings: dict[str, elo_lib.Rating]) -> str:
    """The ratings, strongest first, as a markdown table."""
    lines = ["| player | Elo | 95% interval | games |", "|---|---|---|---|"]
    for name, r in sorted(ratings.items(), key=lambda item: -item[1].elo):
        lines.append(f"| {name} | {r.elo:+.0f} | {r.low:+.0f} .. {r.high:+.0f} | {r.games} |")
    return "\n".join(lines)


def plot_ladder(ratings: dict[str, elo_lib.Rating], rungs: list[str], path: str) -> None:
    """Each run's snapshots over training games (steps where a run logged no metrics), with
    95% intervals, and the rungs as horizontal lines (their intervals shaded)."""
    runs = {}
    for name, rating in ratings.items():
        if (m := SNAPSHOT_NAME.fullmatch(name)):
            workdir, step = m["workdir"], int(m["step"])
            label = f"{os.path.basename(workdir.rstrip('/'))} n={m['simulations']}"
            runs.setdefault(label, []).append((training_games(workdir, step), step, rating))
    fig, ax = plt.subplots(figsize=(8, 5))
    by_steps = False
    for label, points in sorted(runs.items()):
        by_steps |= any(games is None for games, _, _ in points)
        points.sort(key=lambda p: p[1])
        x = [p[1] if by_steps or p[0] is None else p[0] for p in points]
        elo = np.asarray([p[2].elo for p in points])
        ax.errorbar(x, elo, yerr=[elo - [p[2].low for p in points], [p[2].high for p in points] - elo],
                    marker="o", capsize=3, label=label)
    for name in (rung_name(r) for r in rungs):
        if name in ratings:
            ax.axhline(ratings[name].elo, color="gray", ls="--", lw=1)
            ax.axhspan(ratings[name].low, ratings[name].high, color="gray", alpha=0.08, lw=0)
            ax.annotate(f"{name} {ratings[name].elo:+.0f}", (1.0, ratings[name].elo),
                        xycoords=("axes fraction", "data"), xytext=(4, 0), textcoords="offset points", va="center",
                        fontsize=7)
    ax.set_xlabel("snapshot step" if by_steps else "training games")
    ax.set_ylabel("Elo (random = 0), 95% interval")
    ax.set_title("rating ladder: one joint fit over every match")
    if runs:
        ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def ladder(snapshot_specs: list[str], rungs: list[str], settings: LadderSettings, *, recorded: list[str],
           play: bool, path: str) -> dict:
    """Plays what the schedule needs (when ``play``), fits every match of the ladder's
    folder and ``recorded``, writes the plot (``path``) and its JSON beside it; returns that."""
    snapshots = expand_snapshots(snapshot_specs)
    if play:
        play_ladder(snapshots, rungs, settings)
    folders = [settings.matches_dir] if os.path.isdir(settings.matches_dir) else []
    results = read_matches(folders + recorded)
    if not results:
        raise ValueError("no games to rate: play the ladder or pass --matches folders")
    ratings = elo_lib.fit_ratings(results)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    plot_ladder(ratings, rungs, path)
    summary = {"ratings": {name: r._asdict() for name, r in ratings.items()},
               "matches": [r._asdict() for r in results], "anchor": "random",
               "snapshot_games": {f"{w}@{s}": training_games(w, s) for w, s in snapshots}}
    with open(os.path.splitext(path)[0] + ".json", "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=1)
    print(ladder_table(ratings), flush=True)
    return summary
