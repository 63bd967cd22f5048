"""What one reproduction runs: the variants, the preset and the evaluation's settings,
kept in ``WORKDIR/plan.json`` so that a rerun asks for the same."""

import dataclasses
import importlib
import json
import os
import types

VARIANTS = ("base", "exploration_puct", "exploration_sh", "randomstart2", "shogi816k", "shogi816k_randomstart2")
BALANCE_STARTS = ("random_start(2)", "0.5*shogi816k + 0.5*shogi816k(line)", "random_start(4)")
OPENINGS = "data/openings.tsv"
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class ReproductionError(ValueError):
    """A bad option or a run that cannot go on; the message says which."""


@dataclasses.dataclass(frozen=True)
class Plan:
    """What one reproduction runs. Evaluation: ``points`` snapshots per variant (the
    untrained network, the final one and evenly spaced training games between), each a
    match of ``games`` games, the final one of ``final_games`` (its per-opening scores
    are Fig. 3) at ``simulations`` simulations per move against ``opponent``."""

    preset: str
    variants: tuple[str, ...]
    opponent: str
    simulations: int
    games: int
    final_games: int
    points: int
    balance_positions: int
    concurrency: int


def _frozen(settings: dict) -> types.MappingProxyType:
    return types.MappingProxyType(settings)


# Evaluation per preset: the paper's 800 simulations and a round of 54 games per point
# (432, 8 rounds, for the final: 80% power for 50 Elo, docs/reproduction.md) where an
# accelerator trains; less where the CPU does both.
EVALUATION = _frozen({
    "paper": _frozen(dict(opponent="usi:/usr/games/fairy-stockfish?nodes=10000", simulations=800, games=54,
                          final_games=432, points=10, balance_positions=900, concurrency=8)),
    "gpu": _frozen(dict(opponent="usi:/usr/games/fairy-stockfish?nodes=10000", simulations=800, games=54,
                        final_games=432, points=10, balance_positions=900, concurrency=8)),
    "cpu": _frozen(dict(opponent="usi:/usr/games/fairy-stockfish?nodes=1000", simulations=16, games=54,
                        final_games=108, points=4, balance_positions=200, concurrency=2)),
    "smoke": _frozen(dict(opponent="usi:/usr/games/fairy-stockfish?nodes=100", simulations=2, games=2,
                          final_games=4, points=2, balance_positions=6, concurrency=1)),
})


# At smoke size compiling is nearly all of the work: its processes compile as the test
# suite does (Makefile's TEST_XLA_FLAGS: a third of the time; the programs run slower).
SMOKE_XLA_FLAGS = "--xla_backend_optimization_level=0 --xla_cpu_use_fusion_emitters=false"


def make_plan(preset: str, *, variants: str | None = None, **overrides) -> Plan:
    """The preset's plan with the given (non-None) overrides; ReproductionError names a bad value."""
    if preset not in EVALUATION:
        raise ReproductionError(f"--preset {preset!r}: choose from {', '.join(EVALUATION)}")
    chosen = tuple(v.strip() for v in variants.split(",")) if variants else VARIANTS
    unknown = [v for v in chosen if v not in VARIANTS]
    if unknown or not chosen or len(set(chosen)) != len(chosen):
        raise ReproductionError(f"--variants {variants!r}: a comma-separated subset of {', '.join(VARIANTS)}")
    settings = dict(EVALUATION[preset])
    settings.update({k: v for k, v in overrides.items() if v is not None})
    for name in ("simulations", "games", "final_games", "concurrency"):
        if settings[name] < 1:
            raise ReproductionError(f"--{name.replace('_', '-')} must be >= 1, got {settings[name]}")
    if settings["points"] < 2:
        raise ReproductionError(
            f"--points must be >= 2 (the untrained and the final snapshot), got {settings['points']}")
    if settings["balance_positions"] < 0:
        raise ReproductionError(f"--balance-positions must be >= 0, got {settings['balance_positions']}")
    return Plan(preset=preset, variants=chosen, **settings)


def load_or_save_plan(workdir: str, plan: Plan, *, save: bool = True) -> Plan:
    """The plan of ``workdir``: saved on the first run (with ``save``); a rerun must ask for the same."""
    path = os.path.join(workdir, "plan.json")
    wanted = dataclasses.asdict(plan)
    wanted["variants"] = list(plan.variants)
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            saved = json.load(f)
        differing = [f"{k}: {saved.get(k)!r} there, {v!r} now" for k, v in wanted.items() if saved.get(k) != v]
        if differing:
            raise ReproductionError(f"{workdir} holds a reproduction with other settings ({'; '.join(differing)}); "
                                    "rerun with the same options or use another --workdir")
        return plan
    if not save:
        return plan
    os.makedirs(workdir, exist_ok=True)
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(wanted, f, indent=1)
    os.replace(path + ".tmp", path)
    return plan


def read_plan(workdir: str) -> Plan:
    with open(os.path.join(workdir, "plan.json"), encoding="utf-8") as f:
        saved = json.load(f)
    saved["variants"] = tuple(saved["variants"])
    return Plan(**saved)


def variant_config(variant: str, preset: str):
    """``configs/VARIANT.py:PRESET`` as train.py reads it."""
    return importlib.import_module(f"configs.{variant}").get_config(None if preset == "paper" else preset)


def opponent_name(spec: str) -> str:
    """The reference's name as matches record it; ReproductionError for a player that
    cannot start (a missing engine binary, a bad option)."""
    import jax

    jax.config.update("jax_platforms", "cpu")  # this process never holds the trainers' accelerator
    from az.play import players as players_lib

    try:
        player = players_lib.parse_player(spec, num_simulations=1, seed=1)
    except ValueError as e:  # PlayerError, AgentError: one line naming the culprit
        raise ReproductionError(f"--opponent {spec!r}: {e}") from None
    player.close()
    return player.name
