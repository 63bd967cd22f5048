"""The package layout's promises: which package may import which (playing and measuring
never import training, the search loops know no game, the engine's protocol half never
imports JAX, nothing reaches into another project's private modules), short files and
functions, and configs that import without path edits."""

import ast
import pathlib
import subprocess
import sys

from conftest import ROOT

PLAY = ROOT / "az" / "play"


def _imported_modules(path: pathlib.Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "import_module":
            names.update(arg.value for arg in node.args if isinstance(arg, ast.Constant))
    return names


def test_play__never_imports_train():
    files = sorted(PLAY.rglob("*.py"))
    assert len(files) >= 10
    for path in files:
        bad = sorted(m for m in _imported_modules(path) if m == "az.train" or m.startswith("az.train."))
        assert not bad, f"{path.relative_to(ROOT)} imports {bad}"
    # And at run time: every module of az.play loaded, none of az.train.
    modules = [".".join(p.relative_to(ROOT).with_suffix("").parts) for p in files if p.name != "__main__.py"]
    code = "import sys\n" + "".join(f"import {m}\n" for m in modules) + (
        "print(sorted(m for m in sys.modules if m.startswith('az.train')))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "[]"


def test_engine__protocol_half_imports_no_jax():
    heavy = ("jax", "jaxlib", "numpy", "envs", "cshogi", "orbax", "flax", "mctx")
    code = (
        "import sys\n"
        "from az.play.engine import clock, engine, protocol\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {heavy!r}))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd="/", capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "[]"


def test_configs__import_from_anywhere():
    code = "from configs import shogi816k; print(shogi816k.get_config('smoke').env.start)"
    result = subprocess.run([sys.executable, "-c", code], cwd="/", capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "shogi816k"


# Which package may import which (a prefix of the importer -> prefixes it must never import).
# The search loops know no game; measurement and play never depend on training; the
# environment depends on nothing of the trainer.
FORBIDDEN_IMPORTS = {
    "envs": ("az",),
    "az.search": ("az.train", "az.play", "az.measure", "az.reproduce", "az.classical"),
    "az.search.gumbel": ("envs", "az.network", "az.search.shogi"),
    "az.search.puct": ("envs", "az.network", "az.search.shogi"),
    "az.search.reference": ("envs", "az.network", "az.search.shogi"),
    "az.measure": ("az.train", "az.reproduce"),
    "az.play": ("az.train", "az.reproduce"),
    "az.classical": ("az.train", "az.play", "az.reproduce"),
    "az.train": ("az.play", "az.reproduce"),
}
PRIVATE_PARTS = ("mctx._src", "pgx._src")  # other projects' private modules
MAX_FILE_LINES, MAX_FUNCTION_LINES = 450, 80


def _package_files() -> list[pathlib.Path]:
    files = [p for top in ("az", "envs") for p in sorted((ROOT / top).rglob("*.py"))]
    return files + [ROOT / name for name in ("train.py", "eval.py", "evolve.py", "reproduce.py")]


def _module_name(path: pathlib.Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def test_packages__import_only_what_the_layout_allows():
    expected = {"az.search", "az.search.gumbel", "az.search.puct", "az.search.reference", "az.search.shogi",
                "az.measure", "az.measure.teacher", "az.measure.agreement", "az.reproduce", "az.play.programs"}
    modules = {_module_name(p) for p in _package_files()}
    assert expected <= modules, sorted(expected - modules)
    problems = []
    for path in _package_files():
        importer = _module_name(path)
        imported = _imported_modules(path)
        for prefix, forbidden in FORBIDDEN_IMPORTS.items():
            if _within(importer, prefix):
                problems += [f"{importer} imports {m}" for m in imported for f in forbidden if _within(m, f)]
        problems += [f"{importer} imports {m}" for m in imported for p in PRIVATE_PARTS if _within(m, p)]
    assert not problems, "\n".join(sorted(set(problems)))


def test_packages__files_and_functions_stay_short():
    long_ones = []
    for path in _package_files():
        text = path.read_text(encoding="utf-8")
        if text.count("\n") > MAX_FILE_LINES:
            long_ones.append(f"{path.relative_to(ROOT)}: {text.count(chr(10))} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    long_ones.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: {length} lines")
    assert not long_ones, "\n".join(long_ones)
