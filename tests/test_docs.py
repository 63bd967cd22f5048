"""Every command the README and docs/reproduction.md show is one the code accepts.

Each ``python ...`` command of their shell blocks and inline code is parsed by the real
entry point's parser (argparse's, or train.py's config file, preset and overrides), with
the docs' stand-in names replaced (``configs/VARIANT.py`` -> base, ``[@STEP]`` -> none),
and nothing runs. An option renamed or dropped in the code, a config field or preset
that no longer exists, fails here. Running them is the other tests' work (train.py,
eval.py, report, the engine and reproduce.py each run at smoke size somewhere).
"""

import argparse
import importlib
import os
import re
import shlex

import pytest

from az import cli

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = ("README.md", os.path.join("docs", "reproduction.md"))

# The docs' stand-in names (VARIANT, [@STEP], ...) and what a runnable command has there.
STAND_INS = [
    (r"\[:smoke\|:cpu\|:gpu\]", ":smoke"), (r"\[:gpu\]", ":gpu"), (r"\[@STEP\]", ""),
    (r"\[--config\.FIELD=VALUE \.\.\.\]", ""), (r"\[--sfen SFEN\]", ""), (r"\bVARIANT\b", "base"),
    (r"\$v\b", "base"), (r"\$W\b", "runs/shogi816k_cpu"), (r"runs/NAME", "runs/x"),
]


def documented_commands() -> list[tuple[str, str]]:
    """(doc, command) for each python command the docs show."""
    found = []
    for doc in DOCS:
        with open(os.path.join(ROOT, doc), encoding="utf-8") as f:
            text = f.read()
        lines = []
        for block in re.findall(r"```(?:sh|bash)\n(.*?)```", text, re.S):
            lines += block.replace("\\\n", " ").splitlines()
        lines += re.findall(r"`((?:JAX_PLATFORMS=cpu )?python [^`]*)`", text)
        for line in lines:
            line = re.sub(r"\s+#.*$", "", line).strip()
            line = re.sub(r"^JAX_PLATFORMS=cpu ", "", line)
            if not line.startswith(("python ", ".venv-tpu/bin/python ")) or line.endswith("...") \
                    or line.startswith("python -m venv"):
                continue
            for pattern, value in STAND_INS:
                line = re.sub(pattern, value, line)
            found.append((doc, line.strip()))
    return found


COMMANDS = documented_commands()


def test_the_docs_show_the_commands_users_run():
    shown = {command.split()[1] if command.split()[1] != "-m" else command.split()[2] for _, command in COMMANDS}
    assert {"train.py", "eval.py", "reproduce.py", "az.play.report", "az.play.engine"} <= shown, shown
    assert len(COMMANDS) >= 25


def _argparse_parser(entry: str) -> argparse.ArgumentParser | None:
    modules = {"eval.py": "eval", "reproduce.py": "reproduce", "-m az.play.report": "az.play.report",
               "-m az.play.engine": "az.play.engine.engine", "-m envs.perft": "envs.perft"}
    return importlib.import_module(modules[entry]).build_parser() if entry in modules else None


@pytest.mark.parametrize("doc,command", COMMANDS, ids=[f"{os.path.basename(d)}:{c[:60]}" for d, c in COMMANDS])
def test_documented_command_parses(doc, command, monkeypatch):
    monkeypatch.chdir(ROOT)
    words = shlex.split(command)[1:]
    entry, args = (" ".join(words[:2]), words[2:]) if words[0] == "-m" else (words[0], words[1:])
    if entry == "-c":
        compile(args[0], "<doc>", "exec")
        return
    parser = _argparse_parser(entry)
    if parser is not None:
        try:
            parser.parse_args(args)
        except SystemExit as e:
            pytest.fail(f"{doc}: `{command}` is refused by its parser (exit {e.code})")
        return
    assert os.path.exists(entry), f"{doc}: `{command}`: no {entry}"
    if "--config" not in " ".join(args):
        return  # a benchmark with its defaults
    # train.py, evolve.py, bench/tpu_plan.py: the config file, its preset and every override.
    resolved = cli.resolve_config_path(args)
    spec = next(a.split("=", 1)[1] for a in resolved if a.startswith("--config=")) if any(
        a.startswith("--config=") for a in resolved) else resolved[resolved.index("--config") + 1]
    path, _, preset = spec.partition(":")
    assert os.path.exists(path), f"{doc}: `{command}`: no config file {path}"
    module = importlib.import_module("configs." + os.path.splitext(os.path.basename(path))[0])
    module.get_config(preset or None)  # an unknown preset raises
    assert cli.unknown_override(resolved) is None, f"{doc}: `{command}`: {cli.unknown_override(resolved)} is no field"
    if entry == "train.py":
        assert "--workdir" in " ".join(args), f"{doc}: `{command}` lacks --workdir, which train.py requires"


@pytest.mark.parametrize("entry", ["eval.py", "reproduce.py", "-m az.play.report", "-m az.play.engine", "-m envs.perft"])
def test_help_is_whole(entry):
    """Each entry point's --help ends its description with a full sentence and names
    every option."""
    parser = _argparse_parser(entry)
    assert parser.description and parser.description.rstrip().endswith((".", ")")), parser.description
    parser.format_help()
