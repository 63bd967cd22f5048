"""What a match's results say: the first player's score per opening (the paper's Fig. 3)
and how it lost the games it lost (mates in one walked into, or forced)."""

import json
import math
import os

import matplotlib.pyplot as plt


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
