"""What a match's results say: the first player's score per opening (the paper's Fig. 3),
how it lost the games it lost (mates in one walked into, or forced) and how its material
went once the opening line ended."""

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


# The material summary: the balance's mean over BALANCE_PLIES plies after the opening, and
# the share of games at least BEHIND_BY down BEHIND_AT plies after it (a piece lost for
# nothing counts twice: off its owner's board and into the captor's hand, so 10 is a silver).
BALANCE_PLIES, BEHIND_AT, BEHIND_BY = 40, 10, 10


def balance_after_opening(start_sfen: str, moves: list[str], opening_plies: int, color: str,
                          horizon: int = BALANCE_PLIES) -> list[int]:
    """[horizon + 1] ``color``'s material balance (``players.material``: P 1, L 3, N 4,
    S 5, G 6, B 8, R 10, promoted pieces more; board and hands) 0..horizon plies after the
    first ``opening_plies`` of ``moves``; a game that ended sooner keeps its last balance."""
    import cshogi

    from az.play.players import material
    from envs import notation

    side = cshogi.BLACK if color == "black" else cshogi.WHITE
    board, _ = notation.play_line(start_sfen, moves[:opening_plies])
    balances = [material(board, side)]
    for move in moves[opening_plies:opening_plies + horizon]:
        parsed = board.move_from_usi(move)
        if not parsed or not board.is_legal(parsed):  # an illegal last move, which lost the game
            break
        board.push(parsed)
        balances.append(material(board, side))
    return balances + [balances[-1]] * (horizon + 1 - len(balances))


def match_losses(match_dir: str) -> dict:
    """Counts of ``loss_cause`` over the games the first player of the match in
    ``match_dir`` (eval.py's --out: results.json, games/*.csa) lost, and its material
    after the opening line over all games: ``balance`` [BALANCE_PLIES + 1], the mean
    balance each ply after it, and ``behind``, the share of games BEHIND_BY or more down
    BEHIND_AT plies after it (``balance_after_opening``)."""
    import cshogi.CSA

    path = os.path.join(match_dir, "results.json")
    if not os.path.isfile(path):
        raise ValueError(f"{match_dir}: no results.json (expected the --out directory of eval.py)")
    with open(path, encoding="utf-8") as f:
        results = json.load(f)
    games = results["games"]
    players = " vs ".join(results[k] for k in ("first", "second") if results.get(k))
    causes: dict = {}
    balances = []
    for game in games:
        record = cshogi.CSA.Parser.parse_file(os.path.join(match_dir, "games", game["csa"]))[0]
        # ``plies`` counts the moves played after the opening line, which ``moves`` begins with.
        balances.append(balance_after_opening(record.sfen, game["moves"], len(game["moves"]) - game["plies"],
                                              game["player_color"]))
        if game["result"] != "loss":
            continue
        reason = game["reason"] if game["plies"] >= 2 else "opening"  # no move of its own to judge
        cause = loss_cause(record.sfen, game["moves"], reason)
        causes[cause] = causes.get(cause, 0) + 1
    mean = [round(sum(column) / len(column), 2) for column in zip(*balances)] if balances else []
    behind = sum(b[BEHIND_AT] <= -BEHIND_BY for b in balances) / len(balances) if balances else 0.0
    return {"games": len(games), "losses": sum(causes.values()), "causes": causes,
            "players": players, "balance": mean, "behind": round(behind, 3)}


def plot_balance_after_opening(tables: dict, path: str) -> None:
    """The first player's mean material balance over the plies after the opening line, one
    line per match (``match_losses``'s tables by match directory), the legend below."""
    import textwrap

    fig, ax = plt.subplots(figsize=(7, 4))
    for match_dir, table in tables.items():
        label = f"{table['players'] or match_dir}: {100 * table['behind']:.0f}% of {table['games']} games " \
                f"<= -{BEHIND_BY} at {BEHIND_AT}"
        ax.plot(range(len(table["balance"])), table["balance"], label=textwrap.fill(label, 90))
    ax.axhline(0, color="gray", lw=1, ls="--")
    ax.axvline(BEHIND_AT, color="gray", lw=0.5, ls=":")
    ax.set_xlabel("plies after the opening line")
    ax.set_ylabel("first player's material balance (P 1 ... R 10)")
    ax.set_title("material after the opening (games that ended hold their last balance)", fontsize=9)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.15))
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
