"""A wall-time budget (``train.py --budget_minutes``) becomes a game budget once, at the
start, and a resumed run keeps it (az/train/budget.py)."""

import json
import os

import jax
import pytest

from az.train import budget as budget_lib
from az.train import config as config_lib
from az.train import loop
from az.train import trainer as trainer_lib
from configs import default


def test_games_for__positions_over_game_length_less_the_games_still_running():
    # 100 s at 1,000 positions/s = 100,000 positions = 1,000 games of 100 plies, less 8 / 2 running.
    assert budget_lib.games_for(100.0, 1000.0, plies_per_game=100, num_games=8) == 996
    assert budget_lib.games_for(-5.0, 1000.0, plies_per_game=100, num_games=8) == 1  # compile outlasted it


def test_with_recorded__a_resumed_run_takes_the_recorded_count(tmp_path):
    config = default.get_config("smoke")
    assert budget_lib.with_recorded(config, str(tmp_path), 2.0) is config  # nothing recorded: unchanged
    (tmp_path / budget_lib.BUDGET_FILE).write_text(json.dumps({"budget_games": 321, "budget_minutes": 2.0}))
    for minutes in (None, 2.0):
        resumed = budget_lib.with_recorded(config, str(tmp_path), minutes)
        assert resumed.budget_games == 321
    assert config.budget_games == 64  # the caller's config is not changed
    with pytest.raises(config_lib.ConfigError, match=r"^--budget_minutes=3: .* 2 minutes \(321 games\)"):
        budget_lib.with_recorded(config, str(tmp_path), 3.0)


def test_train__budget_minutes_must_be_positive(tmp_path):
    with pytest.raises(config_lib.ConfigError, match=r"^--budget_minutes=0: must be > 0$"):
        loop.train(default.get_config("smoke"), str(tmp_path / "run"), budget_minutes=0)
    assert not (tmp_path / "run").exists()


def test_fit__records_the_count_and_keeps_the_compiled_program(tmp_path, monkeypatch):
    """The budget is an input of the compiled iteration: the fitted trainer runs the
    program already compiled (and probed), at the new count."""
    config = default.get_config("smoke")
    trainer = trainer_lib.make_trainer(config, trainer_lib.make_mesh())
    monkeypatch.setattr(budget_lib, "probe", lambda trainer: 1000.0)  # positions/s
    started = budget_lib.time.time() - 30.0  # 30 s of compile and probe
    fitted = budget_lib.fit(trainer, str(tmp_path), 1.5, started)
    record = json.loads((tmp_path / budget_lib.BUDGET_FILE).read_text())
    # About 60 s left at 1,000 positions/s, games of 24 plies (half the 48-ply limit), 8 running.
    assert record["budget_games"] == pytest.approx(60_000 / 24 - 4, rel=0.01)
    assert record["plies_per_game"] == 24 and record["replaces_budget_games"] == 64
    assert fitted.config.budget_games == fitted.iteration.budget_games == record["budget_games"]
    assert fitted.iteration._jitted is trainer.iteration._jitted
    assert trainer.config.budget_games == 64


def test_sizes__the_proxy_is_the_gpu_recipe_with_fewer_games_and_a_smaller_network():
    """cpu_short predicts gpu_short: the same search, games, replay window and learner
    steps per position (docs/results.md, the GPU recipe)."""
    gpu, cpu = (default.get_config(f"size={size},recipe=small") for size in ("gpu_short", "cpu_short"))
    for c in (gpu, cpu):
        config_lib.validate(c, num_devices=1)
    same = ("env.max_length", "search", "selfplay.plies_per_iteration", "learner", "replay.search_value_weight")
    for field in same:
        section, _, leaf = field.partition(".")
        assert (gpu[section][leaf] if leaf else gpu[section]) == (cpu[section][leaf] if leaf else cpu[section])
    for c in (gpu, cpu):
        rows = c.replay.capacity // c.selfplay.num_games
        assert rows == 512 and rows >= 2 * c.env.max_length
        assert config_lib.steps_per_iteration(c) * c.learner.batch_size == c.selfplay.num_games * 16
    assert (gpu.selfplay.num_games, cpu.selfplay.num_games) == (2048, 64)


def test_learning_state__labelling_leaves_every_row_a_target():
    """The probe's state: the iteration relabels the replay from game ends, and every row
    must keep its target there, or the probe would time iterations that skip the learner."""
    config = default.get_config("smoke")
    config.replay.min_positions = config.replay.capacity  # learning needs every row
    trainer = trainer_lib.make_trainer(config, trainer_lib.make_mesh())
    state = budget_lib.learning_state(trainer)
    labelled = trainer.relabel(state.replay)
    assert bool(labelled.value_known.all())
    leaves = jax.tree.leaves(state)  # the iteration donates them: no buffer twice
    assert len({leaf.unsafe_buffer_pointer() for leaf in leaves}) == len(leaves)
