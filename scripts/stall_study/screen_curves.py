"""The logged teacher curves of a screen's runs (scripts/stall_study/gpu_screen.sh), each
arm's mean over its seeds at equal games: the runs of a screen stopped by its guard reach
different games, so arms are compared where all their seeds have been.

    python scripts/stall_study/screen_curves.py runs/screen --out docs/img/study_gpu_screen.png

Reads RUNS/NAME_sSEED/metrics.jsonl (or .jsonl.gz); writes the plot and, beside it as
.json, the binned means (policy top-1 on the held-out teacher positions, the value's rank
correlation with the teacher's scores), bins of ``--bin`` games up to the games every seed
of the arm reached.
"""

import argparse
import collections
import gzip
import json
import os
import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

MEASURES = {"teacher/top1": "policy top-1, held-out (%)", "teacher/value_rank_correlation": "value rank correlation"}


def read_rows(run: str) -> list[dict]:
    """The run's logged rows, from RUN/metrics.jsonl or, failing that, RUN/metrics.jsonl.gz."""
    path = os.path.join(run, "metrics.jsonl")
    opener = open if os.path.exists(path) else gzip.open
    path = path if os.path.exists(path) else path + ".gz"
    with opener(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def read_curve(run: str) -> list[dict]:
    """The run's logged rows that carry the teacher measures."""
    return [r for r in read_rows(run) if "teacher/top1" in r]


def save(fig, out: str, numbers: dict) -> None:
    """The plot at ``out`` and its numbers beside it as .json."""
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    with open(os.path.splitext(out)[0] + ".json", "w", encoding="utf-8") as f:
        json.dump(numbers, f, indent=1)
    print(f"wrote {out}")


def binned_means(runs_dir: str, bin_games: int) -> dict:
    """{arm: {"seeds": [...], "games": [bin centres], measure: [mean over seeds]}}."""
    arms = collections.defaultdict(dict)
    for name in sorted(os.listdir(runs_dir)):
        match = re.fullmatch(r"(.+)_s(\d+)", name)
        if match and os.path.isdir(os.path.join(runs_dir, name)):
            arms[match[1]][int(match[2])] = read_curve(os.path.join(runs_dir, name))
    out = {}
    for arm, seeds in arms.items():
        reach = min(rows[-1]["games_finished"] for rows in seeds.values())
        edges = range(0, reach - bin_games + 1, bin_games)
        table = {"seeds": sorted(seeds), "games": [lo + bin_games / 2 for lo in edges]}
        for key in MEASURES:
            table[key] = []
            for lo in edges:
                per_seed = [[r[key] for r in rows if lo <= r["games_finished"] < lo + bin_games] for rows in seeds.values()]
                per_seed = [sum(v) / len(v) for v in per_seed if v]
                table[key].append(sum(per_seed) / len(per_seed) if len(per_seed) == len(seeds) else None)
        out[arm] = table
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", help="the screen's runs folder (NAME_sSEED workdirs)")
    parser.add_argument("--out", required=True, help="the plot (PNG); its .json beside it")
    parser.add_argument("--bin", type=int, default=250, help="games per bin")
    args = parser.parse_args()
    if not os.path.isdir(args.runs):
        raise SystemExit(f"error: runs {args.runs!r}: no such folder")
    means = binned_means(args.runs, args.bin)
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    for ax, (key, label) in zip(axes, MEASURES.items()):
        for arm, table in means.items():
            scale = 100 if key == "teacher/top1" else 1
            points = [(g, v * scale) for g, v in zip(table["games"], table[key]) if v is not None]
            ax.plot(*zip(*points), marker=".", label=f"{arm} (seeds {','.join(map(str, table['seeds']))})")
        ax.set_xlabel("training games")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"mean over seeds, bins of {args.bin} games")
    save(fig, args.out, means)


if __name__ == "__main__":
    main()
