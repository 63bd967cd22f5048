"""How a run's self-play games end over training, from its logged rows: per bin of finished
games, their mean length, the share ending in mate, repetition, the ply limit and
resignation, the share drawn, the share started from RandomStart2 and the mean learning
rate. It shows a run whose self-play drifts into draws (repetitions, games cut at the
limit) and when, against the start schedule and the rate's decay.

    python scripts/stall_study/endings.py runs/a runs/b --bin 1500 --out docs/img/endings.png

Reads RUN/metrics.jsonl (or .jsonl.gz) with every iteration's row; prints one markdown
table per run and writes the plot and, beside it as .json, the table's numbers.
"""

import argparse
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from screen_curves import read_rows as read_logged_rows, save  # noqa: E402

REASONS = ("mate", "repetition", "max_length", "resignation", "declaration", "perpetual_check")
LATE_SCHEME = "random_start(2)"


def read_rows(run: str) -> list[dict]:
    """The run's logged rows, every iteration (a study's data files keep only teacher rows)."""
    if not any(os.path.exists(os.path.join(run, name)) for name in ("metrics.jsonl", "metrics.jsonl.gz")):
        raise SystemExit(f"error: run {run!r}: no metrics.jsonl(.gz)")
    rows = read_logged_rows(run)
    if not any("selfplay/finished" in r for r in rows):
        raise SystemExit(f"error: run {run!r}: its rows have no selfplay/finished (a data file keeps only teacher rows)")
    return rows


def binned_endings(rows: list[dict], bin_games: int) -> list[dict]:
    """One dict per bin of ``bin_games`` finished games (by ``games_finished`` at the row):
    ``games`` (the bin's first), ``finished``, ``plies`` (mean length) and shares of the
    finished games: each of ``REASONS``, ``draw``, ``late_scheme``; ``learning_rate``, the
    mean over the bin's rows that trained."""
    bins: dict[int, dict] = {}
    for r in rows:
        if "selfplay/finished" not in r:
            continue
        b = bins.setdefault(r["games_finished"] // bin_games, {"finished": 0, "plies": 0, "draw": 0, "late": 0, "lr": [],
                                                             **{k: 0 for k in REASONS}})
        b["finished"] += r["selfplay/finished"]
        b["plies"] += r["selfplay/length_sum"]
        b["draw"] += r["selfplay/draws"]
        b["late"] += sum(r.get(f"selfplay/scheme/{LATE_SCHEME}/{o}", 0) for o in ("black_win", "white_win", "draw"))
        for k in REASONS:
            b[k] += r.get(f"selfplay/end/{k}", 0)
        if r.get("learned"):
            b["lr"].append(r["learner/learning_rate"])
    table = []
    for index in sorted(bins):
        b = bins[index]
        n = b["finished"]
        if n == 0:
            continue
        table.append({
            "games": index * bin_games,
            "finished": n,
            "plies": b["plies"] / n,
            **{k: b[k] / n for k in REASONS},
            "draw": b["draw"] / n,
            "late_scheme": b["late"] / n,
            "learning_rate": sum(b["lr"]) / len(b["lr"]) if b["lr"] else None,
        })
    return table


def markdown(name: str, table: list[dict]) -> str:
    lines = [f"{name}", "", "| games | plies | mate | repetition | ply limit | resigned | drawn | RandomStart2 | rate |",
             "|---|---|---|---|---|---|---|---|---|"]
    for t in table:
        rate = "-" if t["learning_rate"] is None else f"{t['learning_rate']:.4f}"
        lines.append(f"| {t['games']:,} | {t['plies']:.0f} | {t['mate']:.1%} | {t['repetition']:.1%} | {t['max_length']:.1%} "
                     f"| {t['resignation']:.1%} | {t['draw']:.1%} | {t['late_scheme']:.0%} | {rate} |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", help="training workdirs")
    parser.add_argument("--out", required=True, help="the plot (PNG); its .json beside it")
    parser.add_argument("--bin", type=int, default=1000, help="finished games per bin")
    args = parser.parse_args()
    if args.bin < 1:
        raise SystemExit(f"error: --bin {args.bin}: must be >= 1")
    tables = {}
    for run in args.runs:
        if not os.path.isdir(run):
            raise SystemExit(f"error: run {run!r}: no such folder")
        tables[os.path.basename(os.path.normpath(run))] = binned_endings(read_rows(run), args.bin)
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    for name, table in tables.items():
        centres = [t["games"] + args.bin / 2 for t in table]
        line, = axes[0].plot(centres, [100 * t["draw"] for t in table], marker=".", label=f"{name}: drawn")
        axes[0].plot(centres, [100 * t["repetition"] for t in table], ls="--", color=line.get_color(), label=f"{name}: repetition")
        axes[1].plot(centres, [t["plies"] for t in table], marker=".", color=line.get_color(), label=name)
        print(markdown(name, table) + "\n")
    axes[0].set_ylabel("self-play games (%)")
    axes[1].set_ylabel("mean plies a game")
    for ax in axes:
        ax.set_xlabel("training games")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"how self-play's games end, bins of {args.bin:,} games")
    save(fig, args.out, tables)


if __name__ == "__main__":
    main()
