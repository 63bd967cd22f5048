"""Base: Gumbel AlphaZero from the standard start (n=64, m=16), the paper's baseline.

    python train.py --config configs/base.py --workdir runs/base
    python train.py --config configs/base.py:smoke --workdir /tmp/smoke   # ~2 min on a CPU
"""

from configs import default


def get_config(arg=None):
    c = default.get_config(arg)
    c.name = "base"
    return c
