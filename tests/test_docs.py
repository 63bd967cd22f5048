"""The docs hold: every command they show runs, every link resolves, the README is a guide.

Each ``python ...`` command of the shell blocks and inline code of the README and the
guides in ``DOCS`` is parsed by the real entry point's parser (argparse's, or train.py's
config file, preset and overrides), with the docs' stand-in names replaced
(``configs/VARIANT.py`` -> base, ``[@STEP]`` -> none): an option renamed or dropped in
the code, a config field or preset that no longer exists, fails here in a second. The
slow test below then runs each one, cut to smoke size (``smoke_size``), in a sandbox laid
out as the repository whose named workdirs hold a smoke run: the commands work, not only
parse. The fast tests check that links between the docs resolve (files and section
anchors), that the doc sections code comments cite exist, that the stall study's scripts
import, and that the README stays a short guide: at most ``README_MAX_LINES`` lines, none
of the words of a lab notebook.
"""

import argparse
import glob
import importlib
import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest

from az import cli

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = ("README.md", os.path.join("docs", "reproduction.md"), os.path.join("docs", "results.md"))
README_MAX_LINES = 400
NOTEBOOK_WORDS = re.compile(r"\b(issues?|rounds?|sessions?)\b", re.I)  # belong in docs/, not in the guide

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


# --- Running them (slow): each documented command, cut to smoke size, in a sandbox. ---

SMOKE_TRAINING = ["--config.budget_games=16"]


def smoke_size(command: str) -> list[str] | None:
    """The documented command as argv at smoke size, or None where the docs' command
    needs what CI lacks (a TPU virtualenv). Sizes shrink (presets -> :smoke, games,
    simulations, positions, engine nodes and depths, perft depth, benchmarks --quick,
    the paper runner to one variant); options, paths and players stay as shown."""
    words = shlex.split(command)
    if words[0] != "python":
        return None  # .venv-tpu/bin/python: make test-plan runs bench/tpu_plan.py
    if "--help" in words:
        return words  # prints and exits: already smoke-sized
    entry = words[2] if words[1] == "-m" else words[1]
    out, i = [], 0
    while i < len(words):
        word = words[i]
        value = words[i + 1] if i + 1 < len(words) else None
        if word == "--config" and value and entry in ("train.py",):
            out += [word, value.split(":")[0] + ":smoke"]
            i += 2
            continue
        if word in ("--simulations",):
            out += [word, ",".join("2" if n != "0" else "0" for n in value.split(","))]
            i += 2
            continue
        if word in ("--games", "--positions", "--final-games"):
            out += [word, "2"]
            i += 2
            continue
        if word == "--steps":
            i += 2  # every saved snapshot of the smoke run
            continue
        if word == "--budget_minutes":
            out += [word, "0.05"]  # less than the compile: a budget of one game
            i += 2
            continue
        if word == "--concurrency":
            out += [word, "2"]
            i += 2
            continue
        if word == "--preset":
            out += [word, "smoke", "--variants", "base", "--points", "2"]
            i += 2
            continue
        if word == "--depth" and entry == "envs.perft":
            out += [word, "2"]
            i += 2
            continue
        if word.startswith("/tmp/"):
            word = "runs/" + os.path.basename(word)  # inside the sandbox
        out.append(re.sub(r"nodes=\d+", "nodes=1", re.sub(r"LimitDepth=\d+", "LimitDepth=1", word)))
        i += 1
    if entry == "train.py":
        out += SMOKE_TRAINING
    if entry.startswith("bench/"):
        out.append("--quick")
    if entry in ("eval.py",) and "--games" not in out:
        out += ["--games", "2"]
    plays = entry == "eval.py" or (entry == "az.play.report" and out[3] == "curve" and "--opponent" in out)
    if plays and "--concurrency" not in out:
        out += ["--concurrency", "2"]  # a search batch of 2, not the default 8, at the sandbox's -O0
    if plays and "--simulations" not in out:
        out += ["--simulations", "2"]  # not the default 800
    if entry == "az.play.report" and out[3] in ("balance", "teacher") and "--positions" not in out:
        out += ["--positions", "2"]
    return out


def _fresh_folder(argv: list[str], option: str, folder: str) -> list[str]:
    """The command with a fresh folder of its own after ``option``: two documented commands
    train runs/base with different overrides, which a shared workdir would refuse to
    resume, and a match may not overwrite the one the sandbox played for ``report losses``."""
    if option not in argv:
        return argv
    i = argv.index(option)
    return argv[:i + 1] + [folder] + argv[i + 2:]


RUNNABLE = []
for _doc, _command in COMMANDS:
    _argv = smoke_size(_command)
    if _argv is not None and _argv not in [a for _, _, a in RUNNABLE]:
        RUNNABLE.append((_doc, _command, _argv))


def test_every_documented_command_is_cut_to_smoke_size():
    """The slow test runs what ``smoke_size`` makes of each command: no paper-size
    preset, match, engine budget or position count survives it."""
    assert len(RUNNABLE) >= 25
    for _, command, argv in RUNNABLE:
        text = " ".join(argv)
        assert not re.search(r"nodes=(?!1\b)|LimitDepth=(?!1\b)", text), command
        for option in ("--games", "--positions", "--final-games", "--concurrency"):
            if option in argv:
                assert int(argv[argv.index(option) + 1]) <= 2, command
        if "--simulations" in argv:
            assert all(int(n) <= 2 for n in argv[argv.index("--simulations") + 1].split(",")), command
        elif argv[1] == "eval.py" or "--opponent" in argv:
            pytest.fail(f"{command}: its default simulations (800) survive")
        if argv[1] == "train.py" and "--help" not in argv:
            assert argv[argv.index("--config") + 1].endswith(":smoke") and SMOKE_TRAINING[0] in argv, command
        if argv[1] == "reproduce.py":
            assert argv[argv.index("--preset") + 1] == "smoke" and "--variants" in argv, command
        assert not any(word.startswith("/tmp/") for word in argv), command


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    """A folder laid out as the repository (code and data linked, docs/data copied, an
    empty docs/img, fresh runs/) in which every workdir the docs name holds one smoke run
    and every match folder a ``report losses`` command reads holds a two-game match."""
    from az import reproduce

    root = tmp_path_factory.mktemp("docs_sandbox")
    for name in os.listdir(ROOT):
        if name not in ("runs", "docs", "eval", ".git") and not name.startswith("."):
            os.symlink(os.path.join(ROOT, name), root / name)
    os.symlink(os.path.join(ROOT, ".venv"), root / ".venv") if os.path.exists(os.path.join(ROOT, ".venv")) else None
    (root / "docs" / "img").mkdir(parents=True)
    shutil.copytree(os.path.join(ROOT, "docs", "data"), root / "docs" / "data")
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=ROOT,
               XLA_FLAGS=f"{reproduce.SMOKE_XLA_FLAGS} {os.environ.get('XLA_FLAGS', '')}".strip())
    for match_dir in sorted({a[a.index("losses") + 1] for _, _, a in RUNNABLE if "losses" in a}):
        played = subprocess.run(
            [sys.executable, "eval.py", "--player", "random", "--opponent", "greedy", "--games", "2",
             "--out", match_dir], cwd=root, env=env, capture_output=True, text=True, timeout=600)
        assert played.returncode == 0, played.stdout[-2000:] + played.stderr[-2000:]
    trained = subprocess.run(
        [sys.executable, "train.py", "--config", "configs/shogi816k.py:smoke", "--workdir", "runs/_smoke",
         *SMOKE_TRAINING], cwd=root, env=env, capture_output=True, text=True, timeout=900)
    assert trained.returncode == 0, trained.stdout[-2000:] + trained.stderr[-2000:]
    named = {m for _, c, a in RUNNABLE if a[1] not in ("train.py", "reproduce.py")  # these make their own
             for m in re.findall(r"runs/[a-z0-9_]+", c)}
    for workdir in sorted(named - {"runs/_smoke"}):
        shutil.copytree(root / "runs" / "_smoke", root / workdir, symlinks=True)
    return root, env


def _run_engine(argv: list[str], cwd, env) -> str:
    """Starts the USI engine, asks for a move from the start position and quits."""
    engine = subprocess.Popen([sys.executable, *argv[1:]], cwd=cwd, env=env, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1)
    seen = []

    def until(prefix: str):
        for line in engine.stdout:
            seen.append(line)
            if line.startswith(prefix):
                return line
        raise AssertionError(f"no {prefix!r} from {argv}: {''.join(seen)[-2000:]} {engine.stderr.read()[-2000:]}")

    try:
        engine.stdin.write("usi\n")
        until("usiok")
        engine.stdin.write("isready\n")
        until("readyok")
        engine.stdin.write("usinewgame\nposition startpos moves 7g7f\ngo btime 0 wtime 0 byoyomi 2000\n")
        move = until("bestmove").split()[1]
        engine.stdin.write("quit\n")
        engine.stdin.flush()
        assert engine.wait(timeout=60) == 0
    finally:
        engine.kill()
    return move


# The paper runner at smoke size runs once, killed and resumed, in tests/test_reproduce.py.
RUN_HERE = [r for r in RUNNABLE if r[2][1] != "reproduce.py"]


@pytest.mark.slow
@pytest.mark.promise
@pytest.mark.parametrize("doc,command,argv", RUN_HERE,
                         ids=[f"{os.path.basename(d)}:{' '.join(a[1:4])[:50]}" for d, _, a in RUN_HERE])
def test_documented_command_runs_at_smoke_size(doc, command, argv, sandbox, fairy_stockfish, gpsusi):
    """The command the docs show, at smoke size, exits 0 (the engine: answers a move)."""
    root, env = sandbox
    n = RUNNABLE.index((doc, command, argv))
    if argv[1] == "train.py":
        argv = _fresh_folder(argv, "--workdir", f"runs/_train{n}")
    if argv[1] == "eval.py":
        argv = _fresh_folder(argv, "--out", f"eval/_match{n}")
    if argv[1:3] == ["-m", "az.play.engine"]:
        move = _run_engine(argv, root, env)
        assert re.fullmatch(r"[1-9][a-i][1-9][a-i]\+?|[PLNSGBR]\*[1-9][a-i]|resign|win", move), move
        return
    done = subprocess.run([sys.executable, *argv[1:]], cwd=root, env=env, capture_output=True, text=True,
                          timeout=1200)
    assert done.returncode == 0, f"{doc}: `{' '.join(argv)}` (from `{command}`) failed:\n" \
        + done.stdout[-2000:] + done.stderr[-2000:]


# --- The docs themselves (fast). ---

def _markdown_files() -> list[str]:
    return ["README.md"] + sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "**", "*.md"),
                                                                               recursive=True))


def heading_anchors(path: str) -> set[str]:
    """GitHub's anchors of a markdown file's headings: lower case, punctuation but - and _
    dropped, spaces to hyphens."""
    with open(path, encoding="utf-8") as f:
        text = re.sub(r"```.*?```", "", f.read(), flags=re.S)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
            for h in re.findall(r"^#{1,6} (.+)$", text, re.M)}


def _links(doc: str) -> list[str]:
    with open(os.path.join(ROOT, doc), encoding="utf-8") as f:
        text = re.sub(r"```.*?```", "", f.read(), flags=re.S)
    return [t for t in re.findall(r"\]\(([^)\s]+)\)", text) if not re.match(r"[a-z]+:", t)]


@pytest.mark.parametrize("doc", _markdown_files())
def test_links_resolve(doc):
    """Every relative link and image of the README and docs/ names a file that exists, and
    every #anchor a heading of its target."""
    for link in _links(doc):
        path, _, anchor = link.partition("#")
        target = os.path.normpath(os.path.join(ROOT, os.path.dirname(doc), path)) if path else os.path.join(ROOT, doc)
        assert os.path.exists(target), f"{doc}: link to {link}: no {os.path.relpath(target, ROOT)}"
        if anchor:
            assert target.endswith(".md"), f"{doc}: {link}: an anchor into a file that is not markdown"
            assert anchor in heading_anchors(target), f"{doc}: {link}: no such heading in {path or doc}"


def test_the_readme_is_a_short_guide():
    """The README gives instructions; studies, measurements and their history live in docs/."""
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        lines = f.read().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines (at most {README_MAX_LINES})"
    found = [f"{n}: {line.strip()}" for n, line in enumerate(lines, 1) if NOTEBOOK_WORDS.search(line)]
    assert not found, "README.md reads as a lab notebook:\n" + "\n".join(found)


def cited_sections() -> list[tuple[str, str, str]]:
    """(file, doc, section) for each ``(docs/X.md, SECTION)`` or ``docs/X.md#anchor`` that
    code and configs cite; SECTION may list several, split by ';'."""
    found = []
    for pattern in ("*.py", "az/**/*.py", "envs/**/*.py", "configs/*.py", "bench/*.py", "scripts/**/*.py"):
        for path in glob.glob(os.path.join(ROOT, pattern), recursive=True):
            with open(path, encoding="utf-8") as f:
                text = re.sub(r"\s*\n\s*#?\s*", " ", f.read())  # comments that wrap
            rel = os.path.relpath(path, ROOT)
            for doc, anchor in re.findall(r"(docs/[\w/]+\.md)#([\w-]+)", text):
                found.append((rel, doc, anchor))
            for doc, rest in re.findall(r"\((docs/[\w/]+\.md), ([^\n]{1,120})", text):
                depth, end = 1, 0
                for end, char in enumerate(rest):
                    depth += {"(": 1, ")": -1}.get(char, 0)
                    if depth == 0:
                        break
                for section in rest[:end].split(";"):
                    found.append((rel, doc, section.strip()))
    return found


def test_cited_doc_sections_exist():
    """A comment that cites a doc's section by name (``docs/stall_study.md, value targets``)
    or anchor names a heading of that doc, so the reader lands where the evidence is."""
    missing = []
    for source, doc, section in cited_sections():
        anchors = heading_anchors(os.path.join(ROOT, doc))
        anchor = re.sub(r"[^\w\- ]", "", section.lower()).replace(" ", "-")
        if anchor not in anchors:
            missing.append(f"{source}: {doc}, {section!r}")
    assert not missing, "cited sections that are no heading:\n" + "\n".join(missing)


@pytest.mark.parametrize("script", sorted(glob.glob(os.path.join(ROOT, "scripts", "stall_study", "*.py"))),
                         ids=os.path.basename)
def test_stall_study_scripts_import(script):
    """The stall study's probes still import against the code they drive."""
    pytest.importorskip("cshogi")
    spec = importlib.util.spec_from_file_location(os.path.splitext(os.path.basename(script))[0], script)
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
