"""Where each side's king and rooks stand at ply 30 (the paper's Figs. 6-8), from the
trainer's metrics: the squares summed over parts of a run, and their entropy over training."""

import os

import matplotlib.pyplot as plt
import numpy as np

from az.measure import diversity
from az.play.report.curves import read_metrics

FILES = "987654321"
RANKS = "abcdefghi"


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
