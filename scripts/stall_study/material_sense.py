"""How much a snapshot's value (or material head) moves when a piece changes hands
(docs/stall_study.md#a-capture-quiescence-at-play).

    python scripts/stall_study/material_sense.py SNAPSHOT [--positions 200] [--head value|material]

On held-out teacher positions (``data/teacher.tsv``, split ``heldout``), one random piece of
a kind is taken off the board and put in the other side's hand, as a capture would leave it
(positions the change makes illegal are skipped). Printed: the mean and median change of
the side to move's value, and how often it moves the expected way, beside the spread of the
value over the positions themselves.
"""
import argparse
import csv
import random

import jax
import numpy as np

from az.play import agent as agent_lib
from az.search.shogi import network_forward
from envs import env, notation

KINDS = (("P", "pawn"), ("SG", "silver or gold"), ("BR", "bishop or rook"))
HAND_ORDER = "RBGSNLPrbgsnlp"


def _cells(rank: str) -> list[str]:
    cells, i = [], 0
    while i < len(rank):
        if rank[i].isdigit():
            cells += ["."] * int(rank[i])
            i += 1
        else:
            width = 2 if rank[i] == "+" else 1
            cells.append(rank[i:i + width])
            i += width
    return cells


def _rank(cells: list[str]) -> str:
    text, empty = "", 0
    for cell in cells:
        if cell == ".":
            empty += 1
            continue
        text += (str(empty) if empty else "") + cell
        empty = 0
    return text + (str(empty) if empty else "")


def captured(sfen: str, kinds: str, of_mover: bool, rng: random.Random) -> str | None:
    """``sfen`` with one of the mover's (or the opponent's) ``kinds`` in the other side's
    hand; None where it has none."""
    board, side, hand, number = sfen.split()
    ranks = [_cells(r) for r in board.split("/")]
    owner_black = (side == "b") == of_mover
    spots = [(i, j) for i, r in enumerate(ranks) for j, c in enumerate(r)
             if c != "." and c[-1].upper() in kinds and c[-1].isupper() == owner_black]
    if not spots:
        return None
    i, j = rng.choice(spots)
    piece, ranks[i][j] = ranks[i][j][-1], "."
    counts: dict[str, int] = {}
    k = 0
    while hand != "-" and k < len(hand):
        digits = ""
        while hand[k].isdigit():
            digits += hand[k]
            k += 1
        counts[hand[k]] = counts.get(hand[k], 0) + int(digits or 1)
        k += 1
    taken = piece.lower() if owner_black else piece.upper()  # the captor's colour
    counts[taken] = counts.get(taken, 0) + 1
    hand = "".join((str(counts[c]) if counts[c] > 1 else "") + c for c in HAND_ORDER if counts.get(c))
    return " ".join(["/".join(_rank(r) for r in ranks), side, hand, number])


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("snapshot")
    p.add_argument("--positions", type=int, default=200)
    p.add_argument("--head", choices=("value", "material"), default="value")
    args = p.parse_args()
    agent = agent_lib.load_agent(args.snapshot)
    rules = env.Rules()
    parser = notation.parser(rules)
    apply = agent.network.apply
    if args.head == "material":
        apply = lambda params, observation: (lambda out: (out[0], out[2]["material"]))(  # noqa: E731
            agent.network.apply(params, observation, with_aux=True))
    forward = jax.jit(lambda params, games: network_forward(apply, params, games, rules)[1])

    def values(sfens):
        return np.asarray(forward(agent.params, agent_lib.stack_states([parser.from_sfen(s) for s in sfens])))

    def legal(sfen):
        try:
            parser.from_sfen(sfen)
            return True
        except ValueError:
            return False

    with open("data/teacher.tsv", encoding="utf-8") as f:
        rows = [r["sfen"] for r in csv.DictReader(f, delimiter="\t") if r["split"] == "heldout"]
    rng = random.Random(0)
    rows = rng.sample(rows, min(args.positions, len(rows)))
    base = values(rows)
    print(f"{args.snapshot}, its {args.head} over {len(rows)} held-out positions: spread (sd) {base.std():.3f}")
    for kinds, label in KINDS:
        for of_mover in (True, False):
            pairs = [(k, s) for k, s in ((k, captured(r, kinds, of_mover, rng)) for k, r in enumerate(rows))
                     if s and legal(s)]
            change = values([s for _, s in pairs]) - base[[k for k, _ in pairs]]
            expected = change < 0 if of_mover else change > 0
            whose = "the mover's" if of_mover else "the opponent's"
            print(f"  {whose} {label} taken ({len(pairs)}): "
                  f"mean {change.mean():+.3f}, median {np.median(change):+.3f}, the expected way {expected.mean():.2f}")


if __name__ == "__main__":
    main()
