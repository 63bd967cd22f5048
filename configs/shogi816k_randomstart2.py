"""Shogi816K->RandomStart2, the paper's best variant: Shogi816K starts for the first 60%
of the game budget, RandomStart2 starts after.

    python train.py --config configs/shogi816k_randomstart2.py --workdir runs/shogi816k_randomstart2

The GPU recipe, five minutes on one GPU (docs/results.md, the GPU recipe), and its CPU proxy:

    python train.py --config configs/shogi816k_randomstart2.py:size=gpu_short,recipe=small --workdir runs/gpu_short \
        --budget_minutes 5
    python train.py --config configs/shogi816k_randomstart2.py:size=cpu_short,recipe=small --workdir runs/gpu_proxy \
        --budget_minutes 20
"""

from configs import default


def get_config(arg=None):
    c = default.get_config(arg)
    c.name = "shogi816k_randomstart2"
    c.env.start = "shogi816k@0.6 > random_start(2)"
    return c
