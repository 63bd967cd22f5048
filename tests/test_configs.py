"""Every preset of every config file is a contract: it validates, and its whole training
iteration traces to the right shapes without compiling (``jax.eval_shape`` allocates
nothing, so the paper-scale presets are checked on a CPU too). Bad values fail early
with one line naming the field, in the library and on the command line.
"""

import importlib
import json
import os
import pathlib
import re
import subprocess
import sys

import jax
import pytest

from az.train import config as config_lib
from az.train import trainer as trainer_lib
from configs import default
from envs import env

ROOT = pathlib.Path(__file__).resolve().parents[1]
CONFIGS = ("base", "exploration_puct", "exploration_sh", "randomstart2", "shogi816k", "shogi816k_randomstart2")
PRESETS = tuple(default.ALIASES)  # paper, gpu, cpu, smoke

# What each variant changes relative to base (besides its name), as the paper says.
VARIANTS = {
    "base": {},
    "exploration_puct": {"search.algorithm": "puct", "selfplay.sample_visits_plies": 30},
    "exploration_sh": {"selfplay.sample_visits_plies": 30},
    "randomstart2": {"env.start": "random_start(2)"},
    "shogi816k": {"env.start": "shogi816k"},
    "shogi816k_randomstart2": {"env.start": "shogi816k@0.6 > random_start(2)"},
}


def get_config(name: str, preset: str | None = None):
    return importlib.import_module(f"configs.{name}").get_config(preset)


def flat(config) -> dict:
    def walk(d, prefix=""):
        for k, v in d.items():
            if isinstance(v, dict):
                yield from walk(v, f"{prefix}{k}.")
            else:
                yield f"{prefix}{k}", v

    return dict(walk(json.loads(config.to_json())))


@pytest.fixture(scope="module")
def mesh():
    return trainer_lib.make_mesh()


# Contracts of the config files -----------------------------------------------------


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("name", CONFIGS)
def test_config__preset_validates(name, preset):
    config = get_config(name, preset)
    config_lib.validate(config, num_devices=1)
    assert config.name == name


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("name", CONFIGS)
def test_config__variant_differs_from_base_only_as_the_paper_says(name, preset):
    base, variant = flat(get_config("base", preset)), flat(get_config(name, preset))
    diffs = {k: variant[k] for k in base if variant[k] != base[k] and k != "name"}
    expected = dict(VARIANTS[name])
    if name == "exploration_puct":
        for field in ("search.considered_drops", "search.considered_captures"):
            if base[field]:
                expected[field] = 0  # the small recipe's reserved drops and captures are Gumbel's
    assert diffs == expected
    assert set(base) == set(variant)


@pytest.mark.parametrize("name", CONFIGS)
def test_config__paper_scale_search(name):
    c = get_config(name)  # no preset: paper scale
    assert c.search.num_simulations == 64
    assert c.search.max_num_considered_actions == 16
    expected_algorithm = "puct" if name == "exploration_puct" else "gumbel"
    assert c.search.algorithm == expected_algorithm
    assert c.selfplay.sample_visits_plies == (30 if name.startswith("exploration") else 0)
    assert flat(c) == flat(get_config(name, "paper"))


def test_config__unknown_preset_is_refused():
    with pytest.raises(ValueError, match="unknown preset 'huge'"):
        get_config("base", "huge")


# Presets: size and recipe, and the aliases -------------------------------------------


def test_preset__aliases_resolve_field_for_field_as_pinned():
    """tests/golden/presets.json holds what each alias resolved to before size and recipe
    became two axes: the runs that resume from those snapshots see the same config."""
    golden = json.loads((ROOT / "tests" / "golden" / "presets.json").read_text())
    for spec, fields in golden.items():
        path, _, preset = spec.partition(":")
        name = pathlib.Path(path).stem
        assert json.loads(get_config(name, preset).to_json()) == fields, spec


@pytest.mark.parametrize("alias", PRESETS)
def test_preset__alias_equals_its_expansion(alias):
    assert flat(get_config("base", alias)) == flat(get_config("base", default.ALIASES[alias]))


def _changed(preset: str) -> set:
    paper, other = flat(get_config("base")), flat(get_config("base", preset))
    return {k for k in paper if paper[k] != other[k]}


def test_preset__sizes_and_recipes_set_disjoint_fields():
    """A size sets only how big, a recipe only which algorithm: no field is both's."""
    sized = set().union(*(_changed(f"size={s}") for s in default.SIZES))
    recipes = set().union(*(_changed(f"recipe={r}") for r in default.RECIPES))
    assert sized and recipes and not sized & recipes, sized & recipes
    assert {k.split(".")[0] for k in recipes} <= {"search", "selfplay", "model", "replay", "learner"}


@pytest.mark.parametrize("recipe", list(default.RECIPES))
@pytest.mark.parametrize("size", list(default.SIZES))
def test_preset__every_size_with_every_recipe_validates(size, recipe):
    config = get_config("base", f"size={size},recipe={recipe}")
    config_lib.validate(config, num_devices=1)
    sized, cooked = flat(get_config("base", f"size={size}")), flat(get_config("base", f"recipe={recipe}"))
    paper = flat(get_config("base"))
    both = {k: (sized[k] if sized[k] != paper[k] else cooked[k]) for k in paper}
    assert flat(config) == both  # the two axes compose


@pytest.mark.parametrize(
    "preset, culprit",
    [
        ("huge", "unknown preset 'huge'"),
        ("size=huge", "unknown size 'huge'"),
        ("sise=cpu", "unknown key 'sise'"),
        ("cpu,recipe=fast", "unknown recipe 'fast'"),
    ],
)
def test_preset__bad_spelling_is_one_line_naming_the_culprit(preset, culprit):
    with pytest.raises(config_lib.ConfigError) as e:
        get_config("base", preset)
    assert culprit in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_train_cli__help_says_what_each_alias_expands_to():
    """train.py's docstring (its --help) spells out every alias as configs/default.py does."""
    text = (ROOT / "train.py").read_text()
    for alias, expansion in default.ALIASES.items():
        assert re.search(rf":{alias} += {re.escape(expansion)}\b", text), alias


# The whole iteration traces, without compiling -------------------------------------


def _trace(name, preset, mesh):
    config = get_config(name, preset)
    trainer = trainer_lib.make_trainer(config, mesh)
    state, metrics = jax.eval_shape(trainer.iteration, trainer.abstract_state)
    assert trainer.iteration._cache_size() == 0, "eval_shape must not compile"
    assert trainer.init._cache_size() == 0
    return config, trainer, state, metrics


def _trace_cases():
    """Tracing takes 4-10 s a case on a 2-core CPU. The normal suite traces every
    paper preset (nothing else can check those on a CPU) and the cpu preset that
    ``make train`` runs; the smoke presets are compiled and run by
    tests/test_trainer.py. The rest are slow tests."""
    for name in CONFIGS:
        for preset in PRESETS:
            fast = preset == "paper" or (name, preset) == ("shogi816k", "cpu")
            yield pytest.param(name, preset, marks=() if fast else pytest.mark.slow, id=f"{name}-{preset}")


@pytest.mark.parametrize("name, preset", list(_trace_cases()))
def test_trainer__iteration_traces_without_compiling(name, preset, mesh):
    config, trainer, state, metrics = _trace(name, preset, mesh)
    # The state comes back with the shapes, dtypes (and structure) it went in with.
    same = jax.tree.map(lambda a, b: (a.shape, a.dtype) == (b.shape, b.dtype), state, trainer.abstract_state)
    assert all(jax.tree.leaves(same))
    b = config.selfplay.num_games
    rows = config.replay.capacity // b
    assert state.replay.plies.board.shape == (rows, b, 81)
    assert state.replay.plies.policy.shape == (rows, b, 2187)
    assert state.games.x.board.shape == (b, 81)
    assert metrics["selfplay/squares"].shape == (2, 2, 81)
    assert metrics["selfplay/end_reasons"].shape == (len(env.END_REASONS),)
    assert metrics["selfplay/by_scheme"].shape == (len(trainer.scheme_names), 3)
    assert metrics["loss"].shape == ()


# Bad values: one line naming the field ---------------------------------------------


def _bad(field: str, value, preset="smoke"):
    config = get_config("base", preset)
    node = config
    *parents, leaf = field.split(".")
    for part in parents:
        node = node[part]
    node[leaf] = value
    return config


@pytest.mark.parametrize(
    "field, value, num_devices",
    [
        ("search.num_simulations", 0, 1),
        ("search.max_num_considered_actions", 0, 1),
        ("search.algorithm", "minimax", 1),
        ("search.value_scale", 0.0, 1),
        ("search.considered_drops", 5, 1),  # more than the smoke preset's m = 4
        ("search.considered_drops", -1, 1),
        ("search.considered_captures", 5, 1),  # more than m = 4 less the preset's 0 drops
        ("search.considered_captures", -1, 1),
        ("search.material_utility", -0.5, 1),
        ("search.material_utility", 1.0, 1),  # the smoke preset's network has no material head
        ("selfplay.num_games", 10, 4),  # not divisible by 4 devices
        ("env.start", "shogi960", 1),  # unknown start scheme
        ("env.start", "random_start(2) +", 1),  # malformed spec
        ("replay.capacity", 8 * 8 - 8, 1),  # smaller than one iteration (8 games x 8 plies)
        ("replay.capacity", 8 * 8 * 3 + 1, 1),  # not a multiple of one iteration
        ("learner.batch_size", 30, 4),
        ("replay.truncated_value", "last", 1),
        ("learner.policy_over", "legal_only", 1),
        ("learner.policy_surprise", 1.5, 1),
        ("learner.policy_surprise", -0.1, 1),
        ("learner.value_weight", 0.0, 1),
        ("learner.final_rate_fraction", 1.0, 1),
        ("learner.final_rate_fraction", -0.1, 1),
        ("replay.reduced_search_value_weight", -0.5, 1),
        ("replay.reduced_search_value_weight", 1.5, 1),
        ("replay.search_value_plies", -1, 1),
        ("search.first_visits", 0, 1),
        ("replay.search_value_plies", 64, 1),  # the smoke replay holds 64 rows
        ("model.material_plies", 64, 1),  # the smoke replay holds 64 rows
        ("model.material_plies", -1, 1),
        ("model.material_weight", 0.0, 1),
        ("model.reply_weight", 0.0, 1),
        ("model.occupancy_plies", 0, 1),
        ("model.occupancy_plies", 64, 1),
        ("model.occupancy_weight", -1.0, 1),
    ],
)
def test_validate__bad_value_gives_one_line_naming_the_field(field, value, num_devices):
    with pytest.raises(config_lib.ConfigError) as e:
        config_lib.validate(_bad(field, value), num_devices=num_devices)
    message = str(e.value)
    assert message.startswith(f"config.{field} = {value!r}:"), message
    assert "\n" not in message


@pytest.mark.parametrize(
    "field, preset, value, why",
    [
        ("search.reduced_considered_captures", "cpu", 5, "must be in [0, search.reduced_simulations = 4]"),
        ("search.reduced_considered_captures", "cpu", -1, "must be in [0, search.reduced_simulations = 4]"),
        ("search.reduced_considered_captures", "smoke", 1, "needs playout caps (selfplay.full_search_fraction < 1)"),
        ("search.reduced_gumbel_scale", "cpu", -0.5, "must be -1 (search.gumbel_scale) or >= 0"),
        ("search.reduced_gumbel_scale", "smoke", 0.0, "needs playout caps (selfplay.full_search_fraction < 1)"),
        ("replay.reduced_policy_weight", "cpu", 1.5, "must be in [0, 1]"),
        ("replay.reduced_policy_weight", "cpu", -0.5, "must be in [0, 1]"),
        ("replay.reduced_policy_weight", "smoke", 0.5, "needs playout caps (selfplay.full_search_fraction < 1)"),
    ],
)
def test_validate__reduced_search_fields_bad_values(field, preset, value, why):
    with pytest.raises(config_lib.ConfigError) as e:
        config_lib.validate(_bad(field, value, preset), num_devices=1)
    assert str(e.value) == f"config.{field} = {value!r}: {why}"


@pytest.mark.parametrize("field, value", [("search.reduced_considered_captures", 1),
                                          ("search.reduced_gumbel_scale", 0.0),
                                          ("replay.reduced_policy_weight", 0.5)])
def test_validate__reduced_search_fields_need_gumbel(field, value):
    config = _bad(field, value, "cpu")
    config.search.algorithm = "puct"
    config.search.considered_drops = config.search.considered_captures = 0
    with pytest.raises(config_lib.ConfigError, match=rf"{field} = {value}: needs search.algorithm"):
        config_lib.validate(config, num_devices=1)


def test_reduced_search_settings__keep_the_full_search_unless_captures_are_reserved():
    search = get_config("base", "cpu").search
    assert trainer_lib.reduced_search_settings(search) == {"num_simulations": 4}
    search.reduced_considered_captures = 1
    assert trainer_lib.reduced_search_settings(search) == {
        "num_simulations": 4, "max_num_considered_actions": 4, "considered_drops": 0, "considered_captures": 1}


def test_reduced_search_settings__reduced_gumbel_scale_sets_only_the_reduced_noise():
    search = get_config("base", "cpu").search
    search.reduced_gumbel_scale = 0.0
    assert trainer_lib.reduced_search_settings(search) == {"num_simulations": 4, "gumbel_scale": 0.0}
    assert search.gumbel_scale == 1.0


def test_validate__capacity_message_says_what_one_iteration_is():
    with pytest.raises(config_lib.ConfigError, match=r"smaller than one iteration \(8 games x 8 plies = 64\)"):
        config_lib.validate(_bad("replay.capacity", 32), num_devices=1)


def test_validate__num_games_divisible_by_the_devices_is_fine():
    config = _bad("selfplay.num_games", 16)
    config.replay.capacity = 16 * 8 * 4
    config_lib.validate(config, num_devices=4)


def test_make_trainer__validates_before_building(mesh):
    with pytest.raises(config_lib.ConfigError, match=r"^config\.search\.num_simulations"):
        trainer_lib.make_trainer(_bad("search.num_simulations", -1), mesh)


# train.py on the command line -------------------------------------------------------


def run_train(*args, workdir):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        [sys.executable, str(ROOT / "train.py"), *args, f"--workdir={workdir}", "--max_iterations=1"],
        cwd=workdir.parent,  # not the repo: the config is found through configs/
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


@pytest.mark.parametrize(
    "args, culprit",
    [
        (["--config", "base.py:smoke", "--config.search.foo=1"], "--config.search.foo: no such config field"),
        (["--config", "base.py:smoke", "--config.search.num_simulations=0"], "config.search.num_simulations = 0"),
        (["--config", "nonexistent.py:smoke"], "no config file 'nonexistent.py'"),
        (["--config=base.py:smoke", "--config.search.num_simulations=abc"], "--config.search.num_simulations=abc"),
        (["--config", "base.py:size=huge"], "unknown size 'huge'"),
    ],
    ids=["unknown_field", "bad_value", "missing_file", "unparsable_value", "unknown_size"],
)
def test_train_cli__bad_config_is_one_error_line(tmp_path, args, culprit):
    result = run_train(*args, workdir=tmp_path / "run")
    assert result.returncode != 0
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error:"), lines[0]
    assert culprit in lines[0], lines[0]
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_cpu_devices__one_per_core_that_divides_games_and_batch():
    config = get_config("default", "cpu")  # 64 games, batches of 256
    assert config_lib.cpu_devices(config, 1) == 1
    assert config_lib.cpu_devices(config, 2) == 2
    assert config_lib.cpu_devices(config, 3) == 2  # 3 divides neither
    assert config_lib.cpu_devices(config, 96) == 64
    config.selfplay.num_games = 0  # unusable: validate names it; the host keeps one device
    assert config_lib.cpu_devices(config, 8) == 1


def test_use_cpu_cores__a_count_the_user_set_wins(monkeypatch):
    from az import cli

    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=4")
    assert cli.use_cpu_cores() is None
    monkeypatch.delenv("XLA_FLAGS")
    monkeypatch.setenv("JAX_NUM_CPU_DEVICES", "3")
    assert cli.use_cpu_cores() is None
