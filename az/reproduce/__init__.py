"""The paper's six training runs, their evaluation and its figures in one command.

    python reproduce.py --preset gpu --workdir runs/paper        # resumes when run again

Trains the variants one after another, each on all of the machine's accelerators, with
``train.py`` (``configs/VARIANT.py:PRESET``). Beside it, an evaluator process on the CPU
(``JAX_PLATFORMS=cpu``) plays chosen snapshots against the reference engine as soon as
they are saved, so the figures need no second pass over the runs. At the end it draws:

    figures/fig2_elo.png        Elo against the reference over training games (Fig. 2)
    figures/fig2_teacher.png    agreement with the teacher set over training games
    figures/fig3_openings.png   the final snapshots' score per opening (Fig. 3)
    figures/fig4_balance.png    black's advantage over the start sets (Fig. 4, Table 2)
    figures/heatmaps.png        king and rook squares at ply 30 (Figs. 6-8)
    results.md, results.json    Table 2, the final matches, training time per variant

What a run keeps in WORKDIR:

    plan.json                   its settings; a rerun must ask for the same
    estimate.json               the time it will take, measured before training (see below)
    probe/                      the probe's logs and metrics (VARIANT.log, eval.log)
    VARIANT/                    a train.py workdir each; matches in VARIANT/eval/OPPONENT/step_K
    VARIANT/train.log           train.py's output
    balance.json, eval.log      the evaluator's start-set scores and its output
    timings.json                training seconds per variant over all the runner's starts

Every part resumes: training from its checkpoints, matches game by game, the balance
table whole. Killing the runner (even SIGKILL) stops its children with SIGTERM, on which
training saves. Before training, every start probes what is left: a few iterations of
each variant still to train and a few evaluation games, in scratch folders under probe/,
never in the variants' workdirs; it prints the time training, evaluation and the whole
will take (``--estimate-only``: that, then exit). The first variant's measured
iterations refine it; the evaluator prints each match's pace.

The parts, by role:

    plan.py        Plan, make_plan, plan.json (load_or_save_plan, read_plan), variant_config
    runner.py      Runner (trains, keeps the evaluator beside, draws); run_reproduction
    children.py    the runner's child processes, started under supervise.py
    supervise.py   run in each child first: SIGTERM when the runner dies, the child's lock
    training.py    one variant's train.py as the runner watches it; device_shares
    evaluator.py   the evaluator process (run_evaluator), ``python -m az.reproduce.evaluator``
    progress.py    what a variant's workdir says: trained, snapshots to evaluate, matches done
    balance.py     Table 2's start-set balance
    durations.py   iterations needed, the in-run estimate line, timings.json
    probe.py       the probe before training (estimate_run); match_probe.py its games
    estimate.py    the timeline from the probe's measures, its printed block, estimate.json
    figures.py     Figs. 2-4, the heatmaps, results.md and results.json

supervise.py, evaluator.py and match_probe.py run as ``python -m``: this package does not import them.
"""

from az.reproduce import estimate
from az.reproduce.balance import start_set_balance
from az.reproduce.durations import format_duration, iterations_needed
from az.reproduce.figures import draw_figures, plot_openings_by_variant, results_markdown
from az.reproduce.plan import (BALANCE_STARTS, EVALUATION, OPENINGS, SMOKE_XLA_FLAGS, VARIANTS, Plan,
                               ReproductionError, load_or_save_plan, make_plan, opponent_name, read_plan,
                               variant_config)
from az.reproduce.progress import evaluation_steps, is_trained, match_dir, match_summary
from az.reproduce.runner import Runner, run_reproduction
from az.reproduce.training import device_shares
