"""The training loop end to end on the ``smoke`` presets (tiny, CPU-sized).

Each config compiles its iteration once (~15-25 s on a 2-core CPU, more under
load), so runs are shared through the module-scoped ``smoke_runs`` fixture, which
also keeps the run's ``Trainer``: tests that need more iterations continue the
run with its compiled ``iteration`` instead of compiling again.
"""

import importlib
import json
import math
import os
import shutil

import jax
import numpy as np
import pytest

from az import workdir as workdir_lib
from az.measure import diversity
from az.train import checkpoint as checkpoint_lib
from az.train import config as config_lib
from az.train import loop
from az.train import metrics as metrics_lib
from az.train import trainer as trainer_lib
from envs import env

CONFIGS = ("base", "exploration_puct", "exploration_sh", "randomstart2", "shogi816k", "shogi816k_randomstart2")
FAST = ("base",)  # in the normal suite; the others are slow


def smoke_config(name: str):
    return importlib.import_module(f"configs.{name}").get_config("smoke")


def read_jsonl(workdir) -> list[dict]:
    with open(os.path.join(workdir, "metrics.jsonl"), encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def checkpoint_steps(workdir) -> list[int]:
    directory = os.path.join(workdir, "checkpoints")
    return sorted(int(d) for d in os.listdir(directory) if d.isdigit())


def assert_finite(metrics: dict):
    for key, value in metrics.items():
        if isinstance(value, float):
            assert math.isfinite(value), f"{key} = {value}"


@pytest.fixture(scope="module", autouse=True)
def _restore_compilation_cache():
    """``loop.train`` points JAX's process-wide persistent cache into its workdir;
    give the rest of the test session its previous settings back."""
    names = (
        "jax_compilation_cache_dir",
        "jax_persistent_cache_min_compile_time_secs",
        "jax_persistent_cache_min_entry_size_bytes",
    )
    saved = {name: getattr(jax.config, name) for name in names}
    yield
    for name, value in saved.items():
        jax.config.update(name, value)
    try:
        from jax._src import compilation_cache

        compilation_cache.reset_cache()
    except (ImportError, AttributeError):  # private API; only hygiene
        pass


class Run:
    def __init__(self, workdir, metrics, trainer):
        self.workdir, self.metrics, self.trainer = str(workdir), metrics, trainer


@pytest.fixture(scope="module")
def smoke_runs(tmp_path_factory):
    """``get(name)``: a finished 2-iteration smoke run of that config (run once)."""
    runs = {}

    def get(name: str) -> Run:
        if name not in runs:
            made = []
            real = trainer_lib.make_trainer

            def capture(config, mesh):
                made.append(real(config, mesh))
                return made[-1]

            workdir = tmp_path_factory.mktemp(f"smoke_{name}")
            with pytest.MonkeyPatch.context() as mp:
                mp.setattr(trainer_lib, "make_trainer", capture)
                metrics = loop.train(smoke_config(name), str(workdir), max_iterations=2)
            assert len(made) == 1
            runs[name] = Run(workdir, metrics, made[0])
        return runs[name]

    return get


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=() if n in FAST else pytest.mark.slow) for n in CONFIGS]
)
def test_train__smoke_preset_trains_two_iterations(smoke_runs, name):
    config = smoke_config(name)
    run = smoke_runs(name)
    m = run.metrics
    assert_finite(m)
    batch, plies = config.selfplay.num_games, config.selfplay.plies_per_iteration
    assert m["positions"] == 2 * batch * plies
    lines = read_jsonl(run.workdir)
    assert m["games_finished"] == sum(line["selfplay/finished"] for line in lines)
    steps = config_lib.steps_per_iteration(config)
    assert steps == 2  # replay ratio 1: 2 x 32 positions sampled per 8 x 8 generated
    assert m["learner_steps"] == steps * sum(line["learned"] for line in lines)
    # The untrained network (0) and the save when the run ends, both as a
    # full checkpoint and as a params-only snapshot.
    assert checkpoint_steps(run.workdir) == [0, 2]
    assert workdir_lib.snapshot_steps(run.workdir) == [0, 2]
    assert [line["iteration"] for line in lines] == [1, 2]
    # The init's unstarted games begin at the first ply; none is scored as a game.
    assert all(line["selfplay/finished_at_start"] == 0 for line in lines)
    assert [line["positions"] for line in lines] == [batch * plies, 2 * batch * plies]
    for line in lines:
        assert_finite(line)
    with open(os.path.join(run.workdir, "config.json"), encoding="utf-8") as f:
        assert json.load(f)["name"] == name
    # Every scheme of the start spec has its outcome counters.
    for scheme in run.trainer.scheme_names:
        assert f"selfplay/scheme/{scheme}/draw" in m
    # Teacher agreement every config.teacher.every_iterations (2): iteration 2 only.
    assert config.teacher.every_iterations == 2
    assert "teacher/top1" not in lines[0]
    teacher_line = lines[1]
    for key in ("top1", "top3", "value_sign_accuracy"):
        assert 0 <= teacher_line[f"teacher/{key}"] <= 1
    assert teacher_line["teacher/top1"] <= teacher_line["teacher/top3"]
    assert -1 <= teacher_line["teacher/value_rank_correlation"] <= 1
    assert teacher_line["teacher/seconds"] > 0


@pytest.fixture(scope="module")
def base_continued(smoke_runs):
    """The base smoke run restored from its checkpoint and continued to iteration 6
    (48 plies = the smoke max_length) with its compiled ``iteration``: every game
    passes ply 30 (iteration 4) and ends by iteration 6. Returns the host metrics of
    iterations 3..6 and the final state."""
    run = smoke_runs("base")
    trainer = run.trainer
    checkpointer = checkpoint_lib.Checkpointer(run.workdir, keep=3)
    try:
        state = checkpointer.restore(trainer.config, trainer.abstract_state)
    finally:
        checkpointer.close()
    assert int(state.iteration) == 2
    lines = []
    for _ in range(4):
        state, metrics = trainer.iteration(state)
        lines.append(metrics_lib.host_metrics(jax.device_get(metrics), trainer.scheme_names))
    return lines, state


def test_iteration__compiles_once_also_after_a_restore(smoke_runs, base_continued):
    trainer = smoke_runs("base").trainer
    _, state = base_continued
    # loop.train ran iterations 1-2 from init(); the fixture ran 3-6 from a restored
    # checkpoint: one compile of each function in all.
    assert int(state.iteration) == 6
    assert trainer.init._cache_size() == 1
    assert trainer.iteration._cache_size() == 1, "the iteration was compiled more than once"


def test_train__metrics_have_diversity_histograms_and_end_reasons(smoke_runs, base_continued):
    config = smoke_config("base")
    lines, state = base_continued
    lines = read_jsonl(smoke_runs("base").workdir) + lines  # iterations 1-2 as loop.train logged them
    assert int(state.positions) == 6 * config.selfplay.num_games * config.selfplay.plies_per_iteration
    reasons = env.END_REASONS[1:]
    for line in lines:
        squares = np.asarray(line["diversity/squares"])
        assert squares.shape == (2, 2, 81)
        # One king per side on the board in every game that reached ply 30.
        assert squares[0, 0].sum() == squares[1, 0].sum() == line["selfplay/reached_ply30"]
        assert (squares[:, 1].sum(-1) <= 2 * line["selfplay/reached_ply30"]).all()
        ends = [line[f"selfplay/end/{reason}"] for reason in reasons]
        assert sum(ends) == line["selfplay/finished"]
        wins = line["selfplay/black_wins"] + line["selfplay/white_wins"] + line["selfplay/draws"]
        assert wins == line["selfplay/finished"]
        for s, side in enumerate(("black", "white")):
            for k, kind in enumerate(("king", "rook")):
                bits = line[f"diversity/{side}_{kind}_entropy_bits"]
                if squares[s, k].sum() == 0:
                    assert bits is None  # no piece counted at ply 30: no distribution
                else:
                    assert bits == pytest.approx(diversity.entropy_bits(squares[s, k]))
    reached = sum(line["selfplay/reached_ply30"] for line in lines)
    finished = sum(line["selfplay/finished"] for line in lines)
    assert reached > 0 and finished >= config.selfplay.num_games
    assert sum(line["selfplay/end/max_length"] for line in lines) > 0
    assert lines[-1]["games_finished"] == finished == int(state.games_finished)
    # A spread of king squares has positive entropy; counts match the histogram.
    at_30 = [line for line in lines if line["selfplay/reached_ply30"] > 0]
    squares = np.asarray(at_30[0]["diversity/squares"])
    p = squares[0, 0][squares[0, 0] > 0] / squares[0, 0].sum()
    assert at_30[0]["diversity/black_king_entropy_bits"] == pytest.approx(float(-(p * np.log2(p)).sum()))
    # Learning starts once games have ended; its loss is finite.
    learned = [line for line in lines if line["learned"]]
    assert learned, "no iteration learned"
    steps = config_lib.steps_per_iteration(config)
    assert lines[-1]["learner_steps"] == steps * len(learned)
    for line in learned:
        assert math.isfinite(line["loss"]) and line["loss"] > 0
        # The default clip does not bind: a positive, unclipped gradient at a positive rate.
        assert line["learner/clipped_fraction"] == 0.0 and line["learner/grad_norm"] > 0
        assert 0 < line["learner/learning_rate"] <= config.learner.learning_rate
        assert line["learner/replay_ratio"] == pytest.approx(line["learner_steps"] * config.learner.batch_size
                                                             / line["positions"])
    # Progress is games finished over the budget, which the learning rate follows.
    for line in lines:
        assert line["progress"] == pytest.approx(min(line["games_finished"] / config.budget_games, 1.0))
        assert line["selfplay/finished_at_start"] == 0 and line["selfplay/noise_tv"] == 0.0  # Gumbel: no noise


def test_resume__continues_exactly_moving_average_included(smoke_runs, base_continued, tmp_path, monkeypatch):
    """Six iterations straight equal two, a checkpoint, a restore and four more (the
    fixture), parameters and their moving average alike; the snapshot keeps the average.
    The straight run measured the teacher set at 2, 4 and 6 and the fixture never did:
    measuring does not touch training."""
    trainer = smoke_runs("base").trainer
    monkeypatch.setattr(trainer_lib, "make_trainer", lambda config, mesh: trainer)  # no second compile
    config = smoke_config("base")
    loop.train(config, str(tmp_path), max_iterations=6)
    checkpointer = checkpoint_lib.Checkpointer(str(tmp_path), keep=3)
    try:
        straight = checkpointer.restore(config, trainer.abstract_state)
    finally:
        checkpointer.close()
    _, resumed = base_continued
    assert [line["iteration"] for line in read_jsonl(tmp_path) if "teacher/top1" in line] == [2, 4, 6]
    assert int(straight.iteration) == int(resumed.iteration) == 6
    assert config.learner.ema_decay > 0 and straight.ema_params is not None
    for a, b in zip(jax.tree.leaves((straight.params, straight.ema_params)),
                    jax.tree.leaves((resumed.params, resumed.ema_params))):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    moved = [float(np.abs(np.asarray(e) - np.asarray(p)).max())
             for e, p in zip(jax.tree.leaves(straight.ema_params), jax.tree.leaves(straight.params))]
    assert max(moved) > 0  # an average lags the parameters it follows
    _, snapshot, _ = workdir_lib.load_snapshot(str(tmp_path))
    for a, b in zip(jax.tree.leaves(snapshot), jax.tree.leaves(straight.ema_params)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.slow
def test_train__policy_over_legal_with_the_auxiliary_heads_trains_with_finite_losses(tmp_path):
    """The legal-only policy loss and the three auxiliary heads compiled into the whole
    loop: the learner recomputes the sampled positions' legal moves, their material and
    their squares' occupants a few plies on, and the opponent's next search; losses stay finite, the policy loss is about
    the log of a position's legal-move count, far below the all-actions loss's start
    (about log 2187 = 7.7), the legality head's loss is logged and falls, below log 2 =
    0.69 (a sigmoid at 0) within five iterations of learning, the material head's falls
    too, and the occupancy head's falls below log 3 (three classes at even odds)."""
    config = smoke_config("base")
    config.learner.policy_over = "legal"
    config.model.legality_head = True
    config.model.material_head = True
    config.model.occupancy_head = True
    config.model.reply_head = True
    config.model.reply_weight = 1.0
    loop.train(config, str(tmp_path), max_iterations=10)  # learning starts at iteration 6
    learned = [line for line in read_jsonl(tmp_path) if line["learned"]]
    assert len(learned) >= 4
    for line in learned:
        assert_finite(line)
        assert 0 < line["policy_loss"] < 6.0
        assert line["legality_loss"] > 0 and line["material_loss"] >= 0
    assert learned[-1]["legality_loss"] < min(learned[0]["legality_loss"], math.log(2))
    assert learned[-1]["material_loss"] < learned[0]["material_loss"]
    assert learned[-1]["occupancy_loss"] < min(learned[0]["occupancy_loss"], math.log(3))
    assert 0 < learned[-1]["reply_loss"] < math.log(2187)  # the opponent's next move, over all actions


@pytest.mark.slow
def test_train__playout_caps_search_some_plies_in_full(tmp_path):
    """Half the plies (chosen per ply for the whole batch) get the full search."""
    config = smoke_config("base")
    config.selfplay.full_search_fraction = 0.5
    loop.train(config, str(tmp_path), max_iterations=3)
    lines = read_jsonl(tmp_path)
    full = sum(line["selfplay/full_searches"] for line in lines)
    plies = len(lines) * config.selfplay.plies_per_iteration
    assert 0 < full < plies, (full, plies)


def test_train__self_play_switches_of_the_smoke_preset_show_in_its_metrics(smoke_runs, base_continued):
    """Every ply searched in full (no playout caps); resignation calibrates a threshold."""
    config = smoke_config("base")
    lines = read_jsonl(smoke_runs("base").workdir) + base_continued[0]
    full = sum(line["selfplay/full_searches"] for line in lines)
    assert full == len(lines) * config.selfplay.plies_per_iteration
    for line in lines:
        assert -1 <= line["selfplay/resign_threshold"] <= -0.5
        assert 0 <= line["selfplay/false_resign_rate"] <= 1
        assert line["selfplay/resign_false"] <= line["selfplay/resign_checked"]


def test_train__refuses_a_checkpoint_of_another_config(smoke_runs, tmp_path):
    workdir = tmp_path / "other"
    shutil.copytree(smoke_runs("base").workdir, workdir)
    config = smoke_config("base")
    config.search.num_simulations = 8
    with pytest.raises(checkpoint_lib.CheckpointMismatch, match=r"search\.num_simulations: 4 -> 8"):
        loop.train(config, str(workdir), max_iterations=3)
    assert checkpoint_steps(workdir) == checkpoint_steps(smoke_runs("base").workdir)
    assert len(read_jsonl(workdir)) == 2


def test_restore__a_checkpoint_of_an_older_state_layout_is_a_one_line_error(smoke_runs, tmp_path):
    """A training state saved before the replay gained a field (here: the replay without
    ``truncated``) names the checkpoint instead of orbax's tree mismatch."""
    import typing

    run = smoke_runs("base")
    checkpointer = checkpoint_lib.Checkpointer(run.workdir, keep=3)
    try:
        state = checkpointer.restore(run.trainer.config, run.trainer.abstract_state)
    finally:
        checkpointer.close()
    fields = [f for f in state.replay.plies._fields if f != "truncated"]
    OlderPlies = typing.NamedTuple("Plies", [(f, jax.Array) for f in fields])
    older = state._replace(replay=state.replay._replace(
        plies=OlderPlies(*(getattr(state.replay.plies, f) for f in fields))))
    checkpointer = checkpoint_lib.Checkpointer(str(tmp_path), keep=3)
    try:
        checkpointer.save(2, older, run.trainer.config)
        with pytest.raises(checkpoint_lib.CheckpointMismatch, match=r"step 2 in another state layout") as raised:
            checkpointer.restore(run.trainer.config, run.trainer.abstract_state)
    finally:
        checkpointer.close()
    assert "\n" not in str(raised.value)


def test_train__refuses_to_resume_with_another_game_budget(smoke_runs, tmp_path):
    """The learning rate and start phases follow games finished / budget_games."""
    workdir = tmp_path / "other"
    shutil.copytree(smoke_runs("base").workdir, workdir)
    config = smoke_config("base")
    config.budget_games *= 2
    with pytest.raises(checkpoint_lib.CheckpointMismatch, match=r"budget_games: 64 -> 128"):
        loop.train(config, str(workdir), max_iterations=3)


def test_train__non_finite_loss_stops_the_run_and_keeps_the_last_good_checkpoint(smoke_runs, tmp_path, monkeypatch):
    """The loop's guard, driven by the base run's compiled iteration whose second call
    reports a NaN loss (so this test compiles nothing of its own)."""
    trainer = smoke_runs("base").trainer
    calls = []

    def poisoned(state):
        state, metrics = trainer.iteration(state)
        calls.append(1)
        if len(calls) == 2:
            nan = jax.device_put(np.float32(np.nan))
            metrics = {**metrics, "learned": jax.device_put(np.bool_(True)), "loss": nan}
        return state, metrics

    poisoned.compiled = trainer.iteration.compiled  # the loop's transfer guard asks
    monkeypatch.setattr(trainer_lib, "make_trainer", lambda config, mesh: trainer._replace(iteration=poisoned))
    config = smoke_config("base")
    config.checkpoint.every_iterations = 1
    with pytest.raises(loop.NonFiniteLoss, match=r"at iteration 2;.*checkpoint \(iteration 1\)"):
        loop.train(config, str(tmp_path), max_iterations=4)
    assert checkpoint_steps(tmp_path) == [0, 1]  # no checkpoint of the diverged state
    assert [line["iteration"] for line in read_jsonl(tmp_path)] == [1]


def _drop_saved_field(directory, section: str) -> int:
    """Removes ``section`` from every JSON config orbax saved under ``directory`` (as a run
    made before that field existed); returns how many files changed."""
    changed = 0
    for root, _, files in os.walk(directory):
        for name in files:
            path = os.path.join(root, name)
            try:
                with open(path, encoding="utf-8") as f:
                    saved = json.load(f)
            except (UnicodeDecodeError, ValueError):
                continue
            if isinstance(saved, dict) and section in saved and "selfplay" in saved:
                del saved[section]
                with open(path, "w", encoding="utf-8") as f:
                    json.dump(saved, f)
                changed += 1
    return changed


def test_resume__a_run_older_than_a_config_field_resumes_with_it_noted(smoke_runs, tmp_path, monkeypatch, capsys):
    trainer = smoke_runs("base").trainer
    workdir = tmp_path / "old"
    shutil.copytree(smoke_runs("base").workdir, workdir)
    assert _drop_saved_field(workdir / "checkpoints" / "2" / "config", "teacher") == 1
    assert _drop_saved_field(workdir / "snapshots" / "2" / "config", "teacher") == 1
    monkeypatch.setattr(trainer_lib, "make_trainer", lambda config, mesh: trainer)  # no second compile
    metrics = loop.train(smoke_config("base"), str(workdir), max_iterations=3)
    assert metrics["positions"] == 3 * 8 * 8
    out = capsys.readouterr().out
    assert "predates config field(s) teacher.every_iterations = 2; teacher.positions = 64" in out
    config, _, step = workdir_lib.load_snapshot(f"{workdir}@2")  # play fills the field too
    assert step == 2 and config.teacher.every_iterations == 10
    assert "predates config field(s) teacher.every_iterations = 10, teacher.positions = 0;" in capsys.readouterr().err


def test_load_snapshot__damaged_or_newer_snapshots_are_one_line_errors(smoke_runs, tmp_path):
    workdir = tmp_path / "damaged"
    shutil.copytree(smoke_runs("base").workdir, workdir)
    for item in ("params", "ema_params"):
        for root, _, files in os.walk(workdir / "snapshots" / "2" / item):
            for name in files:
                with open(os.path.join(root, name), "wb") as f:
                    f.write(b"\x00garbage")
    with pytest.raises(workdir_lib.SnapshotError, match=r"snapshot .*2 cannot be read .*damaged") as error:
        workdir_lib.load_snapshot(f"{workdir}@2")
    assert "\n" not in str(error.value)
    # A snapshot of a future format names both versions.
    version_dir = workdir / "snapshots" / "0" / "version"
    for path in [os.path.join(r, n) for r, _, files in os.walk(version_dir) for n in files]:
        try:
            with open(path, encoding="utf-8") as f:
                stamp = json.load(f)
        except (UnicodeDecodeError, ValueError):
            continue
        if isinstance(stamp, dict) and "format" in stamp:
            assert stamp["format"] == workdir_lib.SNAPSHOT_FORMAT and stamp["azshogi"]
            stamp["format"] = workdir_lib.SNAPSHOT_FORMAT + 1
            with open(path, "w", encoding="utf-8") as f:
                json.dump(stamp, f)
            break
    else:
        pytest.fail(f"no version stamp under {version_dir}")
    with pytest.raises(workdir_lib.SnapshotError, match=r"snapshot format 2; this azshogi .* reads up to 1"):
        workdir_lib.load_snapshot(f"{workdir}@0")


def test_train__sigterm_finishes_the_iteration_saves_and_returns(smoke_runs, tmp_path, monkeypatch, capsys):
    """TPU preemption: SIGTERM during an iteration ends the run after it, with a checkpoint
    of that iteration; running again resumes there (the base run's compiled iteration)."""
    import signal

    trainer = smoke_runs("base").trainer
    calls = []

    def preempted(state):
        state, metrics = trainer.iteration(state)
        calls.append(1)
        if len(calls) == 1:  # during the first iteration
            os.kill(os.getpid(), signal.SIGTERM)
        return state, metrics

    preempted.compiled = trainer.iteration.compiled  # the loop's transfer guard asks
    monkeypatch.setattr(trainer_lib, "make_trainer", lambda config, mesh: trainer._replace(iteration=preempted))
    config = smoke_config("base")
    config.checkpoint.every_iterations = 1000
    before = signal.getsignal(signal.SIGTERM)
    loop.train(config, str(tmp_path), max_iterations=5)
    assert signal.getsignal(signal.SIGTERM) is before  # the handler is the caller's again
    assert "SIGTERM: saved iteration 1 to" in capsys.readouterr().out
    assert checkpoint_steps(tmp_path) == [0, 1]
    assert [line["iteration"] for line in read_jsonl(tmp_path)] == [1]
    monkeypatch.setattr(trainer_lib, "make_trainer", lambda config, mesh: trainer)
    loop.train(config, str(tmp_path), max_iterations=2)
    assert checkpoint_steps(tmp_path) == [0, 1, 2]
    assert [line["iteration"] for line in read_jsonl(tmp_path)] == [1, 2]
