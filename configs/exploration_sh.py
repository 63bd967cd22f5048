"""Exploration-SH: Gumbel search; the first 30 plies of each game sample moves in
proportion to the root visit counts of sequential halving, then play the search's move.

    python train.py --config configs/exploration_sh.py --workdir runs/exploration_sh
"""

from configs import default


def get_config(arg=None):
    c = default.get_config(arg)
    c.name = "exploration_sh"
    c.selfplay.sample_visits_plies = 30
    return c
