"""RandomStart2: every game starts two uniformly random plies from the standard start
(the 900 such positions, equally likely).

    python train.py --config configs/randomstart2.py --workdir runs/randomstart2
"""

from configs import default


def get_config(arg=None):
    c = default.get_config(arg)
    c.name = "randomstart2"
    c.env.start = "random_start(2)"
    return c
