"""Every command line's ``--help`` names each of its options with a help text that is a
whole sentence (ending in a full stop, or a closing parenthesis, as ``test_docs``
requires of descriptions), and bad input gives one line naming the culprit, no traceback:
a damaged snapshot through ``eval.py``, an engine that crashes under ``report curve``.
"""

import argparse
import importlib
import json
import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
ARGPARSE_CLIS = {"eval.py": "eval", "reproduce.py": "reproduce", "-m az.play.report": "az.play.report.cli",
                 "-m az.play.engine": "az.play.engine.engine", "-m envs.perft": "envs.perft"}
ABSL_CLIS = ["train.py", "evolve.py"]


def is_sentence(text: str | None) -> bool:
    return bool(text and text.strip()) and text.rstrip().endswith((".", ")"))


def parsers(parser: argparse.ArgumentParser, name: str):
    """(name, parser) of ``parser`` and of each of its subcommands, depth first."""
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield from parsers(sub, f"{name} {sub_name}")


def option_problems(parser: argparse.ArgumentParser, name: str) -> list[str]:
    """What the rendered help of ``parser`` lacks: an option it does not show, an option
    without a whole-sentence help, a subcommand without one."""
    problems, shown = [], parser.format_help()
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                if choice.dest not in shown:
                    problems.append(f"{name}: subcommand {choice.dest} is not in --help")
                if not is_sentence(choice.help):
                    problems.append(f"{name} {choice.dest}: help {choice.help!r} is no sentence")
            continue
        label = "/".join(action.option_strings) or action.metavar or action.dest
        for option in action.option_strings or [action.metavar or action.dest]:
            if option not in shown:
                problems.append(f"{name}: {option} is not in --help")
        if not is_sentence(action.help):
            problems.append(f"{name}: {label}: help {action.help!r} is no sentence")
    return problems


NOT_YET: dict[str, str] = {}  # an entry point whose help is known to lack a sentence, and why


@pytest.mark.parametrize("entry", [pytest.param(entry, marks=pytest.mark.xfail(reason=NOT_YET[entry]))
                                   if entry in NOT_YET else entry for entry in ARGPARSE_CLIS])
def test_cli_help__every_option_is_shown_with_a_sentence(entry, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))  # eval.py and reproduce.py are modules of the repository's root
    parser = importlib.import_module(ARGPARSE_CLIS[entry]).build_parser()
    problems = [p for name, sub in parsers(parser, entry) for p in option_problems(sub, name)]
    assert problems == []


_FLAGS_OF = (
    "import importlib, json, sys\n"
    "from absl import flags\n"
    "module = importlib.import_module(sys.argv[1])\n"
    "print(json.dumps({f.name: f.help for f in flags.FLAGS.get_key_flags_for_module(module)}))\n"
)


@pytest.mark.parametrize("script", ABSL_CLIS)
def test_cli_help__every_absl_flag_is_shown_with_a_sentence(script):
    """train.py and evolve.py (absl): each flag the script defines is in its ``--help``
    with a whole sentence; ``--config.FIELD=VALUE`` overrides are named in the usage."""
    defined = subprocess.run([sys.executable, "-c", _FLAGS_OF, script[:-3]], cwd=ROOT, capture_output=True,
                             text=True, timeout=60, check=True)
    flags = json.loads(defined.stdout)
    shown = subprocess.run([sys.executable, script, "--help"], cwd=ROOT, capture_output=True, text=True,
                           timeout=60)
    assert shown.returncode == 0 and "Traceback" not in shown.stderr, shown.stderr  # help is no error
    assert "config" in flags and "workdir" in flags, flags
    assert [name for name in flags if f"--{name}:" not in shown.stdout] == []
    assert [f"--{name}: {text!r}" for name, text in flags.items() if not is_sentence(text)] == []
    assert "--config.FIELD=VALUE" in shown.stdout


# Bad input end to end: one line on stderr naming the culprit, no traceback ------------


def one_error_line(process: subprocess.Popen) -> str:
    """The one line a failed command wrote to stderr (its exit status non-zero)."""
    _, err = process.communicate(timeout=600)
    lines = [line for line in err.splitlines() if line.strip()]
    assert process.returncode != 0 and "Traceback" not in err and len(lines) == 1, err[-3000:]
    assert lines[0].startswith("error: "), lines
    return lines[0]


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory) -> pathlib.Path:
    """A workdir with one snapshot: the smoke config's untrained network (no training)."""
    import jax

    from az import network as network_lib
    from az import workdir as workdir_lib
    from configs import base

    config = base.get_config("smoke")
    params = network_lib.init_params(network_lib.make_network(config.model), jax.random.PRNGKey(0))
    path = tmp_path_factory.mktemp("snapshot") / "run"
    workdir_lib.save_snapshot(str(path), 0, params, config)
    return path


def _cli(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


@pytest.mark.slow  # ~20 s on a busy 2-core CPU: a snapshot saved, two eval.py processes loading JAX and orbax
def test_eval_cli__a_damaged_snapshot_is_one_line_naming_it(snapshot, tmp_path):
    """Its parameter files cut in half (orbax's reads fail in many threads), or its config
    garbled: eval.py exits non-zero with one line naming the snapshot."""
    truncated, garbled = tmp_path / "truncated", tmp_path / "garbled"
    shutil.copytree(snapshot, truncated)
    shutil.copytree(snapshot, garbled)
    for file in (truncated / "snapshots" / "0" / "params").rglob("*"):
        if file.is_file() and file.parent.name == "d":
            file.write_bytes(file.read_bytes()[: file.stat().st_size // 2])
    for file in (garbled / "snapshots" / "0" / "config").iterdir():
        if file.name != "commit_success.txt":
            file.write_text('{"model": [garbage')
    common = ["--opponent", "random", "--games", "1", "--simulations", "2"]
    runs = {truncated: _cli("eval.py", "--player", f"checkpoint:{truncated}", *common, "--out", str(tmp_path / "a")),
            garbled: _cli("eval.py", "--checkpoint", str(garbled), *common, "--out", str(tmp_path / "b"))}
    for workdir, process in runs.items():
        line = one_error_line(process)
        assert f"{workdir}/snapshots/0 cannot be read" in line and "damaged" in line, line
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_report_curve__an_opponent_engine_that_crashes_is_one_line(tmp_path, capsys):
    """``report curve`` against an engine that exits at once, or prints garbage and exits:
    one line naming the engine (as ``report balance`` for an engine dying mid-search)."""
    from az.play import report

    workdir = tmp_path / "run"
    (workdir / "snapshots" / "0").mkdir(parents=True)
    (workdir / "metrics.jsonl").write_text(json.dumps({"iteration": 0, "games_finished": 0}) + "\n")
    engines = {"exits": "exit 3", "garbage": "printf 'garbage \\377\\376\\n'; head -c 300 /dev/urandom; exit 0"}
    for name, body in engines.items():
        script = tmp_path / f"{name}.sh"
        script.write_text(f"#!/bin/sh\n{body}\n")
        script.chmod(0o755)
        code = report.main(["curve", "--workdir", str(workdir), "--opponent", f"usi:{script}?nodes=1",
                            "--simulations", "2", "--out", str(tmp_path / f"{name}.png")])
        err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
        assert code == 1 and len(err) == 1, err
        assert err[0].startswith("error: ") and str(script) in err[0] and "exited" in err[0], err
