"""Table 2: black's advantage over the start sets by the reference engine, measured once
by the evaluator and kept in ``WORKDIR/balance.json``."""

import json
import os
import time

from az.reproduce.plan import BALANCE_STARTS, Plan


def start_set_balance(workdir: str, plan: Plan) -> dict:
    """Black's advantage by the reference engine over the start sets (Table 2), kept in
    balance.json: {start set: [score per position]}; empty with ``balance_positions`` 0."""
    from az.play import report

    path = os.path.join(workdir, "balance.json")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    values = {}
    if plan.balance_positions:
        for start in BALANCE_STARTS:
            sfens = report.start_positions(start, plan.balance_positions)
            if len(sfens) > plan.balance_positions:  # random_start(2) lists all 900: an even sample
                sfens = sfens[:: len(sfens) // plan.balance_positions][: plan.balance_positions]
            started = time.time()
            values[start] = report.engine_scores(sfens, plan.opponent, jobs=plan.concurrency)
            print(f"balance: {start}, {len(sfens)} positions [{time.time() - started:.0f} s]", flush=True)
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(values, f)
    os.replace(path + ".tmp", path)
    return values
