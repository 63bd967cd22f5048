"""Shogi816K: every game starts from a Chess960-like shuffle of the back two ranks
(rook and bishop on rank 8, the rest of rank 9 permuted; white the 180-degree rotation).

    python train.py --config configs/shogi816k.py --workdir runs/shogi816k
    python train.py --config configs/shogi816k.py:cpu --workdir runs/shogi816k_cpu   # `make train`
"""

from configs import default


def get_config(arg=None):
    c = default.get_config(arg)
    c.name = "shogi816k"
    c.env.start = "shogi816k"
    return c
