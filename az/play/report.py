"""The paper's figures as PNG files, from training workdirs and match results.

    python -m az.play.report curve    --workdir runs/x [--workdir runs/y] --opponent SPEC [--opponent SPEC2] [--games N]
    python -m az.play.report heatmaps --workdir runs/x [--points 3]
    python -m az.play.report balance  --start "random_start(2)" --engine "usi:/usr/games/fairy-stockfish?nodes=100000" [--positions 200]
    python -m az.play.report balance  --start shogi816k --checkpoint runs/x
    python -m az.play.report teacher  runs/x@0 runs/x [--simulations 0,16] [--one-ply] [--split heldout]
    python -m az.play.report losses   eval/x_vs_greedy [eval/y_vs_greedy]

curve: Elo against a reference over training games (Fig. 2), one match per checkpoint,
kept in WORKDIR/eval/ so a rerun only plays what is missing. heatmaps: where each side's
king and rooks stand at ply 30 at points of training and their entropy over training
(Figs. 6-8), from the trainer's metrics. balance: the distribution of black's advantage
over a start scheme's positions (Fig. 4, Table 2), by an engine's score at fixed nodes or a
network's value. teacher: agreement of snapshots' policies and searches with the teacher
set's moves (fairy-stockfish at 100k nodes), with 95% intervals, by game phase and for drops
and promotions, beside the random, greedy and GA-heuristic baselines. ``curve`` also draws
the teacher agreement the trainer logged, and with no --opponent only that. losses: how
the first player of a match (eval.py's --checkpoint) lost each game it lost: walked into a
mate in one where another move avoided it, or was mated with every move refuted, or
otherwise.
"""

import argparse
import functools
import json
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from az import workdir as workdir_lib  # noqa: E402
from az.measure import diversity  # noqa: E402

FILES = "987654321"
RANKS = "abcdefghi"


def plot_openings(summary: dict, path: str, *, title: str = "") -> None:
    """Per-opening score of the first player (the paper's Fig. 3)."""
    openings = summary["openings"]
    names = list(openings)
    scores = [openings[n]["score"] for n in names]
    fig, ax = plt.subplots(figsize=(7, 0.45 * len(names) + 1.5))
    ax.barh(names, scores, color="tab:blue")
    ax.axvline(0.5, color="gray", lw=1, ls="--")
    for i, n in enumerate(names):
        o = openings[n]
        ax.text(min(scores[i], 0.93) + 0.01, i, f"+{o['wins']} ={o['draws']} -{o['losses']}", va="center", fontsize=8)
    ax.set_xlim(0, 1)
    ax.invert_yaxis()
    ax.set_xlabel("score")
    elo = summary.get("elo")
    ax.set_title(f"{title}\nElo {elo:+.0f} [{summary['elo_low']:+.0f}, {summary['elo_high']:+.0f}]"
                 if elo is not None and math.isfinite(elo) else title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def read_metrics(workdir: str) -> list[dict]:
    """The run's metrics by iteration (``workdir.metrics_rows``); ValueError when there are none."""
    path = os.path.join(workdir, "metrics.jsonl")
    if not os.path.isfile(path):
        raise ValueError(f"{path}: cannot read it (no such file)")
    rows = workdir_lib.metrics_rows(workdir)
    if not rows:
        raise ValueError(f"{path}: no metrics yet")
    return rows


def heatmap_parts(rows: list[dict], points: int) -> list[tuple[int, np.ndarray]]:
    """Ply-30 squares summed over ``points`` equal parts of a run's iterations:
    [(games finished at the part's end, counts [2 sides, 2 kinds, 81])]."""
    squares = np.asarray([r["diversity/squares"] for r in rows])  # [I, 2, 2, 81]
    return [(rows[part[-1]]["games_finished"], squares[part].sum(0))
            for part in np.array_split(np.arange(len(rows)), points) if len(part)]


def pooled_entropy(rows: list[dict], side: int, kind: int) -> tuple[int, list[float]]:
    """(window, entropy in bits per iteration of the squares pooled over the last
    ``window`` iterations): only a few games reach ply 30 per iteration."""
    squares = np.asarray([r["diversity/squares"] for r in rows])[:, side, kind]  # [I, 81]
    window = max(1, len(rows) // 20)
    return window, [diversity.entropy_bits(squares[max(0, i - window + 1): i + 1].sum(0)) for i in range(len(rows))]


def plot_heatmaps(workdirs: list[str], path: str, *, points: int = 3) -> None:
    """King and rook squares at ply 30, summed over equal parts of each run, plus entropy curves."""
    kinds = [("black", "king", 0, 0), ("black", "rook", 0, 1), ("white", "king", 1, 0), ("white", "rook", 1, 1)]
    runs = [(w, read_metrics(w)) for w in workdirs]
    parts = [(w, heatmap_parts(rows, points)) for w, rows in runs]
    panel_rows = sum(len(p) for _, p in parts) + 1
    fig, axes = plt.subplots(panel_rows, 4, figsize=(10, 2.4 * panel_rows), squeeze=False)
    row = 0
    for workdir, run_parts in parts:
        for games, total in run_parts:
            for col, (side, kind, s, k) in enumerate(kinds):
                ax = axes[row, col]
                ax.imshow(diversity.board_grid(total[s, k]), cmap="magma")
                ax.set_xticks(range(9), FILES, fontsize=6)
                ax.set_yticks(range(9), RANKS, fontsize=6)
                ax.set_title(f"{os.path.basename(workdir.rstrip('/'))} {side} {kind}\n"
                             f"to {games} games, H={diversity.entropy_bits(total[s, k]):.2f} bits", fontsize=7)
            row += 1
    for col, (side, kind, s, k) in enumerate(kinds):
        ax = axes[row, col]
        for workdir, rows in runs:
            window, bits = pooled_entropy(rows, s, k)
            ax.plot([r["games_finished"] for r in rows], bits, label=os.path.basename(workdir.rstrip("/")))
        ax.set_title(f"{side} {kind} entropy (bits, {window}-iteration windows)", fontsize=8)
        ax.set_xlabel("games", fontsize=7)
        ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


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

    curves = {}
    opening_list = match_lib.load_openings(openings)
    for opponent in opponents:
        second = players_lib.parse_player(opponent, num_simulations=simulations, slots=concurrency, seed=1)
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
                    out = os.path.join(workdir, "eval", _slug(second.name), f"step_{step}")
                    first = players_lib.parse_player(f"checkpoint:{workdir}@{step}", num_simulations=simulations,
                                                     slots=concurrency)
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


def _slug(text: str) -> str:
    import re

    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_")[:60]


def start_positions(start: str, count: int, seed: int = 0) -> list[str]:
    """SFENs of a start scheme: all 900 for random_start(2), else ``count`` samples."""
    import jax

    from envs import env, notation, starts

    spec = starts.parse_start(start)
    if len(spec.leaves) == 1 and isinstance(spec.leaves[0], starts.RandomStart) and spec.leaves[0].plies == 2:
        import cshogi

        board, sfens = cshogi.Board(), []
        for m1 in list(board.legal_moves):
            board.push(m1)
            for m2 in list(board.legal_moves):
                board.push(m2)
                sfens.append(board.sfen())
                board.pop()
            board.pop()
        return sfens
    fn = jax.jit(jax.vmap(starts.make_start_fn(spec, env.Rules()), in_axes=(0, None)))
    states = fn(jax.random.split(jax.random.PRNGKey(seed), count), 0.0)
    return [notation.to_sfen(jax.tree.map(lambda a: a[i], states)) for i in range(count)]


def engine_scores(sfens: list[str], engine: str, *, jobs: int = 1, reuse: bool = False) -> list[float]:
    """Black's score in centipawns by a USI engine, ``jobs`` processes at a time.

    By default a fresh process per position (fairy-stockfish's fixed-node evaluation
    depends on earlier searches in a process); ``reuse`` keeps one process per job with
    ``usinewgame`` between positions, for engines slow to start (gpsusi: 1.5 s)."""
    import concurrent.futures
    import threading

    from az.play import players as players_lib
    from az.play.usi_client import UsiClient

    player = players_lib.parse_player(engine)
    local, opened = threading.local(), []

    def score_of(sfen: str) -> float:
        process = getattr(local, "process", None) if reuse else None
        if process is None:
            process = UsiClient(player.path, player.options)
            if reuse:
                local.process = process
                opened.append(process)
        try:
            process.send("usinewgame")
            score = None
            for line in process.think(f"position sfen {sfen}", player.go_command, player.move_timeout):
                if line.startswith("info") and " score " in line and " multipv " not in line.replace(" multipv 1 ", " "):
                    parts = line.split()
                    kind, value = parts[parts.index("score") + 1], parts[parts.index("score") + 2]
                    score = float(value) if kind == "cp" else math.copysign(30000, float(value.replace("+", "") or 1))
        finally:
            if not reuse:
                process.close()
        if score is None:
            raise ValueError(f"{engine} gave no score for {sfen}")
        return score if sfen.split()[1] == "b" else -score

    try:
        with concurrent.futures.ThreadPoolExecutor(max(1, jobs)) as pool:
            return list(pool.map(score_of, sfens))
    finally:
        for process in opened:
            process.close()


def network_values(sfens: list[str], checkpoint: str) -> list[float]:
    """Black's value in [-1, 1] by a trained network."""
    import jax

    from az.play import agent as agent_lib
    from envs import notation

    agent = agent_lib.load_agent(checkpoint)
    states = [notation.from_sfen(s, agent.rules) for s in sfens]
    policy = agent.search(0, batch=len(states), history=agent.rules.history)
    value = np.asarray(policy(agent.params, jax.random.PRNGKey(0), agent_lib.stack_states(states)).root_value)
    color = np.asarray([int(s.current_player) for s in states])
    return list(np.where(color == 0, value, -value).astype(float))


def plot_balance(values: dict, path: str, *, unit: str) -> dict:
    """Histograms of black's advantage per start scheme; returns mean/std per scheme."""
    fig, ax = plt.subplots(figsize=(7, 4))
    table = {}
    # Shared bins, so that the sets' widths compare; the rare blunder positions beyond
    # the clip are counted in the edge bins and named in the legend.
    clip = 1000.0 if unit == "cp" else 1.0
    widest = max(float(np.abs(np.asarray(v, np.float64)).max()) for v in values.values())
    bins = np.linspace(-min(widest, clip), min(widest, clip), 61)
    for name, v in values.items():
        v = np.asarray(v, np.float64)
        table[name] = {"positions": int(v.size), "mean": float(v.mean()), "std": float(v.std())}
        beyond = int((np.abs(v) > bins[-1]).sum())
        label = f"{name}: mean {v.mean():+.1f}, std {v.std():.1f}" + (f" ({beyond} beyond ±{bins[-1]:g})" if beyond else "")
        ax.hist(np.clip(v, bins[0], bins[-1]), bins=bins, alpha=0.45, label=label)
    ax.set_xlabel(f"black's advantage ({unit})")
    ax.set_ylabel("positions")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return table


def _in_batches(choose, games, size: int) -> np.ndarray:
    """``choose(first, games [size]) -> actions [size]`` over ``games`` [P] in batches of
    ``size`` (the last padded with the last position, so one compile serves all): [P]."""
    import jax

    count = jax.tree.leaves(games)[0].shape[0]
    parts = []
    for first in range(0, count, size):
        index = np.minimum(np.arange(first, first + size), count - 1)
        parts.append(np.asarray(choose(first, jax.tree.map(lambda a: a[index], games)))[: min(size, count - first)])
    return np.concatenate(parts)


def teacher_agreement(checkpoints: list[str], simulations: list[int], *, split: str = "heldout", positions: int = 0,
                      batch: int = 64, teacher_path: str | None = None, one_ply: bool = False) -> dict:
    """Agreement of each snapshot's policy (0 simulations) and search (Gumbel, no noise, as
    evaluation plays) with the teacher's moves, and with ``one_ply`` of its value alone over
    every legal move (``agreement.one_ply_choice``, "value 1 ply"): checkpoint ->
    "policy"/"search N"/"value 1 ply" -> breakdown;
    and how often each plays a drop ("drops": checkpoint -> label -> share with its interval;
    "teacher_drops": the teacher's share) and promotes when its move could go either way
    ("promotions", "teacher_promotions": the same shares over such moves)."""
    import jax

    from az.measure import agreement, teacher as teacher_lib
    from az.play import agent as agent_lib
    from envs import movegen

    teacher_set = teacher_lib.load(teacher_path) if teacher_path else teacher_lib.load()
    chosen = teacher_set if split == "all" else teacher_set.select(getattr(teacher_set, split))
    if positions > 0:
        chosen = chosen.select(np.arange(min(positions, chosen.size)))
    results, drop_shares, promotion_shares, probes, policies = {}, {}, {}, {}, {}
    for spec in checkpoints:
        agent = agent_lib.load_agent(spec)
        if agent.rules not in probes:
            probes[agent.rules] = agreement.make_probe(chosen, agent.rules, split="all")
        probe = probes[agent.rules]
        best = np.asarray(probe.best)
        rows, drops, promotions = {}, {}, {}
        legal = np.asarray(probe.games.legal_action_mask)
        teacher_promotions = agreement.promotion_choices(best, legal)
        for n in simulations + (["value 1 ply"] if one_ply else []):
            if n == "value 1 ply":
                width = -(-int(legal.sum(axis=1).max()) // 8) * 8
                key = ("1 ply", agent.config.to_json(), width)
                if key not in policies:
                    policies[key] = jax.jit(functools.partial(
                        agreement.one_ply_choice, agent.network.apply, rules=agent.rules, width=width))
                one_ply_fn = policies[key]
                # 8 positions a call (8 x width children).
                choices = _in_batches(lambda first, games: one_ply_fn(agent.params, games), probe.games, 8)
                label = n
            elif n == 0:
                key = agent.config.to_json()  # one compile per network, whatever the snapshot
                if key not in policies:
                    policies[key] = jax.jit(functools.partial(
                        agreement.per_position, agent.network.apply, rules=agent.rules,
                        always_promote=True))  # as the agent plays
                rank, choice, _ = policies[key](agent.params, probe)
                choices = np.asarray(choice)
                label = "policy"
            else:
                search = agent.search(n, batch=batch, history=agent.rules.history)
                choices = _in_batches(
                    lambda first, games: search(agent.params, jax.random.PRNGKey(first), games).action,
                    probe.games, batch)
                label = f"search {n}"
            rows[label] = agreement.breakdown(choices == best, chosen)
            dropped = movegen.DROP_ACTIONS[choices]
            low, high = agreement.wilson_interval(int(dropped.sum()), len(dropped))
            drops[label] = {"share": float(dropped.mean()), "low": low, "high": high, "positions": len(dropped)}
            promoted, could = agreement.promotion_choices(choices, legal)
            low, high = agreement.wilson_interval(promoted, could)
            promotions[label] = {"share": promoted / could if could else math.nan, "low": low, "high": high,
                                 "positions": could}
            a = rows[label]["all"]
            print(f"{agent.name} {label}: {100 * a['agreement']:.1f}% [{100 * a['low']:.1f}, {100 * a['high']:.1f}] "
                  f"of {a['positions']}; plays a drop in {100 * dropped.mean():.1f}% "
                  f"(teacher {100 * chosen.drop.mean():.1f}%); promotes {promoted} of the {could} moves "
                  f"it could play either way (teacher {teacher_promotions[0]} of {teacher_promotions[1]})", flush=True)
        results[agent.name] = rows
        drop_shares[agent.name] = drops
        promotion_shares[agent.name] = promotions
    return {"split": split, "positions": chosen.size, "teacher_set": chosen.path,
            "baselines": agreement.baselines(teacher_set) if split == "heldout" and positions == 0 else {},
            "results": results, "drops": drop_shares, "teacher_drops": float(chosen.drop.mean()),
            "promotions": promotion_shares, "teacher_promotions": teacher_promotions[0] / max(teacher_promotions[1], 1)}


def plot_teacher(summary: dict, path: str) -> None:
    """Bars with 95% intervals: each snapshot's policy and searches, overall and by group."""
    results = summary["results"]
    groups = list(next(iter(next(iter(results.values())).values())))
    bars = [(name, label, rows[label]) for name, rows in results.items() for label in rows]
    fig, ax = plt.subplots(figsize=(max(7, 1.1 * len(groups) * max(len(bars), 1) / 2), 4.5))
    width = 0.8 / len(bars)
    for i, (name, label, table) in enumerate(bars):
        x = np.arange(len(groups)) + (i - (len(bars) - 1) / 2) * width
        y = np.asarray([100 * table[g]["agreement"] for g in groups])
        low = np.asarray([100 * table[g]["low"] for g in groups])
        high = np.asarray([100 * table[g]["high"] for g in groups])
        ax.bar(x, y, width, yerr=[y - low, high - y], capsize=2, label=f"{name} {label}")
    for (line, value), style in zip(summary.get("baselines", {}).items(), (":", "--", "-.")):
        ax.axhline(100 * value, color="gray", ls=style, lw=1, label=f"{line} (all, held-out)")
    counts = results[bars[0][0]][bars[0][1]]
    ax.set_xticks(np.arange(len(groups)), [f"{g.replace(' (', chr(10) + '(')}\n{counts[g]['positions']} positions"
                                           for g in groups], fontsize=7)
    ax.set_ylabel("top-1 agreement with the teacher (%)")
    ax.set_title(f"teacher agreement, {summary['split']} positions ({summary['positions']})", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


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


def mates_in_one(board) -> list[int]:
    """The side to move's mating moves on a cshogi board (pawn-drop mates are illegal there)."""
    mates = []
    for move in list(board.legal_moves):
        board.push(move)
        if board.is_game_over():
            mates.append(move)
        board.pop()
    return mates


def loss_cause(start_sfen: str, moves: list[str], reason: str) -> str:
    """Why the side that made the second-to-last of ``moves`` (USI, from ``start_sfen``) lost
    a game that ended on ``reason``: ``avoidable_drop_mate`` / ``avoidable_mate`` (that move
    let the opponent mate in one, which it did with a drop / a board move, where another
    legal move allowed no mate in one), ``forced_mate`` (every legal move allowed one),
    ``deeper_mate`` (mated, but that move allowed no mate in one), else ``reason``."""
    import cshogi

    from envs import notation

    if reason != "mate" or len(moves) < 2:
        return reason
    board, _ = notation.play_line(start_sfen, moves[:-2])
    last = board.move_from_usi(moves[-2])

    def refuted(move) -> bool:
        board.push(move)
        mated = bool(mates_in_one(board))
        board.pop()
        return mated

    if not refuted(last):
        return "deeper_mate"
    if all(refuted(move) for move in list(board.legal_moves) if move != last):
        return "forced_mate"
    board.push(last)
    drop = cshogi.move_is_drop(board.move_from_usi(moves[-1]))
    return "avoidable_drop_mate" if drop else "avoidable_mate"


def match_losses(match_dir: str) -> dict:
    """Counts of ``loss_cause`` over the games the first player of the match in
    ``match_dir`` (eval.py's --out: results.json, games/*.csa) lost."""
    import cshogi.CSA

    path = os.path.join(match_dir, "results.json")
    if not os.path.isfile(path):
        raise ValueError(f"{match_dir}: no results.json (expected the --out directory of eval.py)")
    with open(path, encoding="utf-8") as f:
        games = json.load(f)["games"]
    causes: dict = {}
    for game in games:
        if game["result"] != "loss":
            continue
        record = cshogi.CSA.Parser.parse_file(os.path.join(match_dir, "games", game["csa"]))[0]
        reason = game["reason"] if game["plies"] >= 2 else "opening"  # no move of its own to judge
        cause = loss_cause(record.sfen, game["moves"], reason)
        causes[cause] = causes.get(cause, 0) + 1
    return {"games": len(games), "losses": sum(causes.values()), "causes": causes}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("curve", help="Elo over training games (Fig. 2)")
    c.add_argument("--workdir", action="append", required=True)
    c.add_argument("--opponent", action="append", default=[],
                   help="repeat for several references; none: only the logged teacher agreement")
    c.add_argument("--games", type=int, default=None)
    c.add_argument("--simulations", type=int, default=800)
    c.add_argument("--openings", default=None)
    c.add_argument("--concurrency", type=int, default=1)
    c.add_argument("--steps", default=None, help="comma-separated checkpoint steps (default: all saved)")
    c.add_argument("--out", default="elo_curve.png")
    c.add_argument("--baseline", action="append", default=[],
                   help="PATH.json[:LABEL] of an earlier `curve` run, drawn dashed (repeatable)")
    h = sub.add_parser("heatmaps", help="king/rook squares at ply 30 and their entropy (Figs. 6-8)")
    h.add_argument("--workdir", action="append", required=True)
    h.add_argument("--points", type=int, default=3)
    h.add_argument("--out", default="heatmaps.png")
    b = sub.add_parser("balance", help="black's advantage over a start scheme (Fig. 4, Table 2)")
    b.add_argument("--start", action="append", required=True)
    b.add_argument("--engine", default=None, help="usi:PATH?nodes=N (score in cp)")
    b.add_argument("--checkpoint", default=None, help="WORKDIR[@STEP] (network value)")
    b.add_argument("--positions", type=int, default=200)
    b.add_argument("--jobs", type=int, default=1, help="engine processes at a time")
    b.add_argument("--reuse-engine", action="store_true",
                   help="one engine process per job, usinewgame between positions (gpsusi starts slowly)")
    b.add_argument("--seed", type=int, default=0, help="for sampled start schemes")
    b.add_argument("--out", default="balance.png")
    t = sub.add_parser("teacher", help="agreement of snapshots with the teacher set's moves")
    t.add_argument("checkpoints", nargs="+", metavar="WORKDIR[@STEP]")
    t.add_argument("--simulations", default="0,16", help="comma-separated; 0 is the policy alone")
    t.add_argument("--one-ply", action="store_true",
                   help="also the value alone: the move after which it rates the position best, of all legal moves")
    t.add_argument("--split", default="heldout", choices=("heldout", "fit", "all"))
    t.add_argument("--positions", type=int, default=0, help="the first N positions of the split (0: all)")
    t.add_argument("--out", default="teacher.png")
    lo = sub.add_parser("losses", help="how the first player of matches lost (mates in one walked into)")
    lo.add_argument("matches", nargs="+", metavar="MATCH_DIR", help="eval.py --out directories")
    lo.add_argument("--out", default="losses.json")
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
                          baseline=read_baselines(args.baseline))
            if has_teacher or not args.opponent:
                teacher_out = os.path.splitext(args.out)[0] + "_teacher.png" if args.opponent else args.out
                plot_teacher_curve(args.workdir, teacher_out)
                if args.opponent:
                    print(f"wrote {teacher_out}")
        elif args.command == "teacher":
            try:
                simulations = [int(x) for x in args.simulations.split(",")]
            except ValueError:
                parser.error(f"--simulations {args.simulations!r}: comma-separated integers")
            if any(n < 0 for n in simulations):
                parser.error(f"--simulations {args.simulations!r}: counts must be >= 0")
            summary = teacher_agreement(args.checkpoints, simulations, split=args.split, positions=args.positions,
                                        one_ply=args.one_ply)
            plot_teacher(summary, args.out)
            with open(os.path.splitext(args.out)[0] + ".json", "w", encoding="utf-8") as f:
                json.dump(summary, f, indent=1)
        elif args.command == "losses":
            table = {match_dir: match_losses(match_dir) for match_dir in args.matches}
            with open(args.out, "w", encoding="utf-8") as f:
                json.dump(table, f, indent=1)
            print(json.dumps(table, indent=1))
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


if __name__ == "__main__":
    sys.exit(main())
