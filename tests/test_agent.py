"""The agent's compiled programs kept as serialized executables across processes."""

import json
import os
import pathlib
import subprocess
import sys
import textwrap

ROOT = pathlib.Path(__file__).resolve().parents[1]

# One process: the program of shape ("probe",) for the source digest argv[2] (repeated),
# compiled or loaded by ``agent._compiled_program`` with JAX's cache in argv[1]; it prints
# whether it was loaded, whether it is serialized now and whether it computes right.
PROCESS = textwrap.dedent("""
    import json, os, sys
    import jax, jax.numpy as jnp, numpy as np
    jax.config.update("jax_compilation_cache_dir", sys.argv[1])
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)  # the tiny program is cached too
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    from az.play import agent
    agent._source_digest = lambda: sys.argv[2] * 64
    x = jax.ShapeDtypeStruct((16, 16), jnp.float32)
    path = agent._executable_path(("probe",))
    loaded = os.path.exists(path)
    program = agent._compiled_program(("probe",), lambda a: jnp.sin(a) @ a, (x,), jax.tree.structure(x))
    a = np.linspace(-1, 1, 256, dtype=np.float32).reshape(16, 16)
    right = bool(np.allclose(np.asarray(program(a)), np.sin(a) @ a, atol=1e-5))
    print(json.dumps({"loaded": loaded, "serialized": os.path.exists(path), "right": right}))
""")


def _process(cache: str, digest: str) -> dict:
    done = subprocess.run([sys.executable, "-c", PROCESS, cache, digest], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, JAX_PLATFORMS="cpu"))
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_programs_load_in_a_later_process_and_an_upgrade_serializes_its_own(tmp_path):
    cache = str(tmp_path / "jax_cache")
    first = _process(cache, "a")
    assert first == {"loaded": False, "serialized": True, "right": True}
    again = _process(cache, "a")
    assert again == {"loaded": True, "serialized": True, "right": True}
    # Other source, the same program: JAX's cache holds it, yet the new version must
    # serialize its own executable, or every later start reads JAX's cache (slower).
    upgraded = _process(cache, "b")
    assert upgraded == {"loaded": False, "serialized": True, "right": True}
    assert _process(cache, "b")["loaded"]


PARSER = textwrap.dedent("""
    import json, os, sys
    import jax
    jax.config.update("jax_compilation_cache_dir", sys.argv[1])
    from az.play import agent
    from envs import env, notation
    rules = env.Rules(max_length=64, history=8)
    paths = [agent._executable_path((kind, rules)) for kind in ("setup", "move")]
    loaded = all(os.path.exists(path) for path in paths)
    agent.install_parser(rules)
    state = notation.from_position("startpos moves 7g7f 3c3d 8h2b+", rules)
    print(json.dumps({"loaded": loaded, "serialized": all(os.path.exists(path) for path in paths),
                      "sfen": notation.to_sfen(state), "ply": int(state.ply)}))
""")


def test_the_parser_programs_load_in_a_later_process(tmp_path):
    """The engine's position set-up and move programs: serialized by the first process,
    loaded by the next, and either way the position comes out as cshogi plays it."""
    cache = str(tmp_path / "jax_cache")
    expected = "lnsgkgsnl/1r5+B1/pppppp1pp/6p2/9/2P6/PP1PPPPPP/7R1/LNSGKGSNL w B 4"
    runs = []
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", PARSER, cache], cwd=ROOT, capture_output=True, text=True,
                              timeout=300, env=dict(os.environ, JAX_PLATFORMS="cpu"))
        assert done.returncode == 0, done.stderr[-2000:]
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    assert runs[0] == {"loaded": False, "serialized": True, "sfen": expected, "ply": 3}
    assert runs[1] == {"loaded": True, "serialized": True, "sfen": expected, "ply": 3}
