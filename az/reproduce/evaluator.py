"""The evaluator process, on the CPU beside the trainers: plays each variant's chosen
snapshots against the reference as soon as they are saved.

    python -m az.reproduce.evaluator WORKDIR        # started by reproduce.py

Nothing else imports this module: ``python -m`` runs it as ``__main__``.
"""

import os
import sys
import time
from typing import NamedTuple

from az import workdir as workdir_lib
from az.reproduce import children, progress
from az.reproduce.balance import start_set_balance
from az.reproduce.plan import OPENINGS, REPO, Plan, read_plan, variant_config


class PendingMatch(NamedTuple):
    variant: str
    run_dir: str
    step: int
    games: int


def pending_matches(workdir: str, plan: Plan, configs: dict, opponent: str) -> tuple[list[PendingMatch], bool]:
    """(the matches still to play, in the plan's order; whether every variant is trained)."""
    pending, all_trained = [], True
    for variant in plan.variants:
        run_dir = os.path.join(workdir, variant)
        trained = progress.is_trained(run_dir, configs[variant].budget_games)
        all_trained &= trained
        steps = progress.run_steps(run_dir, configs[variant].budget_games, plan.points, trained)
        for step in steps:
            games = progress.match_games(plan, steps, step, trained)
            if progress.match_summary(progress.match_dir(run_dir, opponent, step), games) is None:
                pending.append(PendingMatch(variant, run_dir, step, games))
    return pending, all_trained


def play_match(plan: Plan, match: PendingMatch, reference, openings, *, known_left: int, programs) -> None:
    """Plays (or resumes) one snapshot's match against ``reference`` and prints its line;
    ``programs`` (``az.play.programs.Programs``) holds the compiled searches every snapshot shares."""
    from az.play import match as match_lib
    from az.play import players as players_lib

    started = time.time()
    first = players_lib.parse_player(f"checkpoint:{match.run_dir}@{match.step}", num_simulations=plan.simulations,
                                     slots=plan.concurrency, programs=programs)
    out_dir = progress.match_dir(match.run_dir, reference.name, match.step)
    try:
        summary = match_lib.Match(first, reference, openings, out_dir, games=match.games,
                                  concurrency=plan.concurrency, resume=True, progress=False).run()
    finally:
        first.close()
    line = match_lib.format_summary(first.name, reference.name, summary).splitlines()[0]
    print(f"{match.variant}@{match.step}: {line} [{time.time() - started:.0f} s, {known_left} known left]", flush=True)


def run_evaluator(workdir: str, *, poll_seconds: float = 5.0) -> int:
    """Plays each variant's chosen snapshots as they appear until all variants are trained
    and evaluated; first the start sets' balance (Table 2). Returns the exit status."""
    from az.play import match as match_lib
    from az.play import players as players_lib
    from az.play.programs import Programs
    from az.play.usi_client import EngineFailure

    plan = read_plan(workdir)
    workdir_lib.enable_compilation_cache(os.path.join(workdir, "jax_cache"))
    configs = {v: variant_config(v, plan.preset) for v in plan.variants}
    # SIGTERM (the runner stopping or gone) ends this process at once: results are written
    # game by game, and the engines quit when their input closes.
    try:
        if plan.opponent.startswith("usi:"):
            start_set_balance(workdir, plan)
        openings = match_lib.load_openings(os.path.join(REPO, OPENINGS))
        programs = Programs()  # one compiled search per variant's config, shared by its snapshots
        reference = players_lib.parse_player(plan.opponent, num_simulations=plan.simulations,
                                             slots=plan.concurrency, seed=1, programs=programs)
    except (ValueError, EngineFailure) as e:
        print(f"error: {e}", flush=True)
        return 1
    try:
        while True:
            pending, all_trained = pending_matches(workdir, plan, configs, reference.name)
            if not pending:
                if all_trained:
                    return 0
                time.sleep(poll_seconds)
                continue
            play_match(plan, pending[0], reference, openings, known_left=len(pending) - 1, programs=programs)
    except (ValueError, EngineFailure) as e:
        print(f"error: {e}", flush=True)
        return 1
    finally:
        reference.close()


def main(argv=None) -> int:
    """``python -m az.reproduce.evaluator WORKDIR``: the runner's evaluator process."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m az.reproduce.evaluator WORKDIR (started by reproduce.py)", file=sys.stderr)
        return 2
    return run_evaluator(argv[0])


if __name__ == "__main__":
    children.exit_at_once(main())
