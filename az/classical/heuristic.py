"""The classical player: the evolved linear evaluation with a full-width search.

Depth 1 plays the child with the best ``h(child, w)``; depth 2 the child whose worst
reply (the opponent answering with the grandchild that ``h`` likes least for us) is
best. A move that mates is played at once; a reply that mates us rules a move out
unless every move allows one. Ties are broken at random (seeded).

Weights live in a JSON file ``{"weights": {feature name: value}, ...}`` as written by
the GA (``az.classical.run``): ``data/heuristic_weights.json`` ships with the project.
"""

import json
import os

import numpy as np

from az.classical import features as feats

SHIPPED_WEIGHTS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                               "data", "heuristic_weights.json")
MATE = 1e9


def load_weights(path: str | None = None) -> np.ndarray:
    """Weights [F] float32 from a weights file, a GA workdir (its ``weights.json``) or,
    with no path, the shipped file. ValueError names the file when it is not usable."""
    path = path or SHIPPED_WEIGHTS
    if os.path.isdir(path):
        path = os.path.join(path, "weights.json")
    try:
        with open(path) as f:
            named = json.load(f)["weights"]
    except FileNotFoundError:
        raise ValueError(f"heuristic weights {path!r}: no such file (a GA workdir holds weights.json)") from None
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        raise ValueError(f"heuristic weights {path!r}: not a weights file ({e})") from None
    missing = [n for n in feats.NAMES if n not in named]
    if missing:
        raise ValueError(f"heuristic weights {path!r}: missing {', '.join(missing[:3])}")
    return np.array([float(named[n]) for n in feats.NAMES], np.float32)


def move_values(board: np.ndarray, hand: np.ndarray, legal_mask: np.ndarray, weights: np.ndarray, depth: int):
    """(actions [M], values [M]) of one position (board [81], hand [2, 7], mask [2187])."""
    actions = np.nonzero(legal_mask)[0].astype(np.int32)
    m = len(actions)
    boards, hands = np.broadcast_to(board, (m, 81)), np.broadcast_to(hand, (m, 2, 7))
    f, mates, _, child_board, child_hand = feats.expand(boards, hands, actions)
    values = np.where(mates, MATE, f @ weights)
    if depth == 1 or mates.any():
        return actions, values
    parent, replies = np.nonzero(feats.legal_masks(child_board, child_hand))
    # h scores a position for the side that just moved (as the GA fitted it): a reply is
    # scored for the opponent, and our value of it is the negation.
    f2, mated, _, _, _ = feats.expand(child_board[parent], child_hand[parent], replies.astype(np.int32))
    worst = np.where(mated, -MATE, -(f2 @ weights))
    values = np.full(m, np.inf)
    np.minimum.at(values, parent, worst)
    return actions, values


def choose(board, hand, legal_mask, weights, depth: int, rng: np.random.Generator) -> int:
    """The action the heuristic plays in one position."""
    actions, values = move_values(np.asarray(board), np.asarray(hand), np.asarray(legal_mask), weights, depth)
    best = np.flatnonzero(values == values.max())
    return int(actions[rng.choice(best)])
