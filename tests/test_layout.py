"""The package layout's promises: playing never imports training, the engine's protocol
half never imports JAX, and the configs import without path edits."""

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
