"""An iteration's metrics on the host: flattened, written to ``metrics.jsonl`` and TensorBoard."""

import json
import math
import os

import jax
import numpy as np

from az.measure import diversity
from envs import env


def to_host(tree):
    """Replicated device values -> numpy, also when other processes hold the array."""
    return jax.tree.map(lambda a: np.asarray(a.addressable_data(0)), tree)


def host_metrics(metrics: dict, scheme_names: tuple) -> dict:
    """One iteration's device metrics (already on the host) as flat JSON-ready numbers.

    An entropy with no games behind it is None (JSON null), not a number.
    """
    m = {k: np.asarray(v) for k, v in metrics.items()}
    out = {k: v.item() for k, v in m.items() if v.ndim == 0}
    finished = int(m["selfplay/finished"])
    out["selfplay/mean_game_length"] = float(m["selfplay/length_sum"]) / finished if finished else None
    for reason, n in zip(env.END_REASONS[1:], m["selfplay/end_reasons"][1:]):
        out[f"selfplay/end/{reason}"] = int(n)
    for name, row in zip(scheme_names, m["selfplay/by_scheme"]):
        for outcome, n in zip(("black_win", "white_win", "draw"), row):
            out[f"selfplay/scheme/{name}/{outcome}"] = int(n)
    squares = m["selfplay/squares"]  # [2 sides, 2 kinds, 81]
    for s, side in enumerate(("black", "white")):
        for k, (kind, _) in enumerate(diversity.KINDS):
            bits = diversity.entropy_bits(squares[s, k])
            out[f"diversity/{side}_{kind}_entropy_bits"] = None if math.isnan(bits) else bits
    out["diversity/squares"] = squares.tolist()
    return out


class Writers:
    """``metrics.jsonl`` (one line per iteration) and TensorBoard scalars; process 0 only."""

    def __init__(self, workdir: str):
        self.enabled = jax.process_index() == 0
        if not self.enabled:
            return
        from tensorboardX import SummaryWriter

        self.jsonl = open(os.path.join(workdir, "metrics.jsonl"), "a", encoding="utf-8")
        self.tb = SummaryWriter(os.path.join(workdir, "tensorboard"))

    def write(self, step: int, metrics: dict):
        if not self.enabled:
            return
        self.jsonl.write(json.dumps({"iteration": step, **metrics}) + "\n")
        self.jsonl.flush()
        for k, v in metrics.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                self.tb.add_scalar(k, v, step)
        self.tb.flush()

    def close(self):
        if self.enabled:
            self.jsonl.close()
            self.tb.close()
