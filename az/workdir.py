"""What a training workdir holds, and how training and playing reach it.

    WORKDIR/
      config.json          the run's config
      metrics.jsonl        one line of metrics per iteration (and tensorboard/)
      checkpoints/STEP/    the whole TrainState, the last ``checkpoint.keep``: for resuming
      snapshots/STEP/      parameters (and their moving average when the run keeps one) and
                           config only, every ``checkpoint.every_iterations`` and at the
                           end; never removed: for evaluation and play
      jax_cache/           the persistent compilation cache, shared by training and the engine

``WORKDIR[@STEP]`` names a snapshot (the latest without ``@STEP``). Nothing here imports
JAX or orbax at module level, so the USI engine parses specs before loading anything heavy.
"""

import json
import os
import sys

SNAPSHOTS = "snapshots"
_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class SnapshotError(ValueError):
    """A snapshot that cannot be found or loaded; the message names it."""


def parse_spec(spec: str) -> tuple[str, int | None]:
    """``WORKDIR[@STEP]`` -> (workdir, step or None for the latest).

    A relative WORKDIR missing from the working directory but present in the repository
    (``runs/x``) is taken from there: GUIs start engines in folders of their choosing.
    """
    workdir, at, step = spec.rpartition("@")
    if not (at and step.isascii() and step.isdigit()):  # str.isdigit takes '²', which int() refuses
        workdir, step = spec, None  # no step, or an '@' that belongs to the path
    if workdir and not os.path.isabs(workdir) and not os.path.isdir(workdir):
        in_repo = os.path.join(_REPO, workdir)
        if os.path.isdir(in_repo):
            workdir = in_repo
    return workdir, int(step) if step is not None else None


def snapshot_dir(workdir: str) -> str:
    return os.path.abspath(os.path.join(workdir, SNAPSHOTS))


def snapshot_steps(workdir: str) -> list[int]:
    """Steps of the finished snapshots, ascending (orbax renames a snapshot into place
    only once it is complete)."""
    directory = snapshot_dir(workdir)
    if not os.path.isdir(directory):
        return []
    return sorted(int(name) for name in os.listdir(directory) if name.isascii() and name.isdigit())


def metrics_rows(workdir: str) -> list[dict]:
    """The run's ``metrics.jsonl``, the last row of each iteration (a resumed run repeats
    some), by iteration; [] before the first. Safe to read while training writes: a line
    cut short is skipped."""
    path = os.path.join(workdir, "metrics.jsonl")
    if not os.path.exists(path):
        return []
    latest = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                row = json.loads(line)
            except ValueError:
                continue
            latest[row["iteration"]] = row
    return [latest[k] for k in sorted(latest)]


def snapshot_problem(spec: str) -> str | None:
    """A one-line complaint when ``spec`` names no snapshot (cheap: no JAX); else None."""
    workdir, step = parse_spec(spec)
    steps = snapshot_steps(workdir)
    if not steps:
        return f"checkpoint {spec!r}: no snapshots in {snapshot_dir(workdir)}"
    if step is not None and step not in steps:
        return f"checkpoint {spec!r}: no snapshot of step {step} (have {_ranges(steps)})"
    return None


def _ranges(steps: list[int]) -> str:
    return ", ".join(map(str, steps)) if len(steps) <= 8 else f"{steps[0]}, {steps[1]}, ..., {steps[-1]}"


SNAPSHOT_ITEMS = ("params", "ema_params", "config", "version")
SNAPSHOT_FORMAT = 1  # raised when a snapshot's layout changes; older ones stay readable


def package_version() -> str:
    try:
        from importlib.metadata import version

        return version("azshogi")
    except Exception:  # not installed (a bare checkout on sys.path)
        return "unknown"


def fill_config_defaults(saved: dict) -> tuple[dict, list[str]]:
    """An older run's config with the fields added since filled from ``configs/default.py``
    (new fields default to the behaviour before them): (config dict, the fields filled)."""
    from configs import default

    filled = []

    def merge(into: dict, defaults: dict, prefix: str):
        for key, value in defaults.items():
            if isinstance(value, dict):
                if not isinstance(into.get(key), dict):
                    into[key] = {}
                merge(into[key], value, f"{prefix}{key}.")
            elif key not in into:
                into[key] = value
                filled.append(f"{prefix}{key} = {value!r}")

    merged = json.loads(json.dumps(saved))
    merge(merged, json.loads(default.get_config().to_json()), "")
    return merged, filled


def save_snapshot(workdir: str, step: int, params, config, ema_params=None) -> None:
    """Writes ``snapshots/STEP`` (params and config) atomically; every process of a
    multi-host run calls it. A step already saved (before a SIGKILL, say) is kept:
    a resumed run recomputes the same parameters."""
    if step in snapshot_steps(workdir):
        return
    import orbax.checkpoint as ocp

    manager = ocp.CheckpointManager(
        snapshot_dir(workdir),
        options=ocp.CheckpointManagerOptions(create=True, enable_async_checkpointing=False),
        item_names=SNAPSHOT_ITEMS,
    )
    items = {"params": ocp.args.StandardSave(params), "config": ocp.args.JsonSave(json.loads(config.to_json())),
             "version": ocp.args.JsonSave({"azshogi": package_version(), "format": SNAPSHOT_FORMAT})}
    if ema_params is not None:
        items["ema_params"] = ocp.args.StandardSave(ema_params)
    try:
        manager.save(step, args=ocp.args.Composite(**items), force=True)
        manager.wait_until_finished()
    finally:
        manager.close()


def load_snapshot(spec: str):
    """(config, params on the first device, step) of the snapshot ``WORKDIR[@STEP]``: the
    moving average of the parameters where the run kept one, else the parameters."""
    problem = snapshot_problem(spec)
    if problem:
        raise SnapshotError(problem)
    import jax
    import ml_collections
    import orbax.checkpoint as ocp

    from az import network as network_lib

    workdir, step = parse_spec(spec)
    step = snapshot_steps(workdir)[-1] if step is None else step
    where = os.path.join(snapshot_dir(workdir), str(step))
    if not os.path.isdir(os.path.join(where, "config")) or not any(
            os.path.isdir(os.path.join(where, item)) for item in ("params", "ema_params")):
        raise SnapshotError(f"checkpoint {spec!r}: snapshot {where} has no config or no parameters; it is damaged "
                            "or not an azshogi snapshot")  # before orbax, which would also log a warning
    manager = ocp.CheckpointManager(snapshot_dir(workdir), item_names=SNAPSHOT_ITEMS)
    _quiet_failed_reads()
    try:
        if os.path.isdir(os.path.join(where, "version")):
            stamp = manager.restore(step, args=ocp.args.Composite(version=ocp.args.JsonRestore()))["version"]
            if stamp.get("format", 0) > SNAPSHOT_FORMAT:
                raise SnapshotError(f"checkpoint {spec!r}: made by azshogi {stamp.get('azshogi')} in snapshot format "
                                    f"{stamp['format']}; this azshogi ({package_version()}) reads up to "
                                    f"{SNAPSHOT_FORMAT}: update it")
        saved = manager.restore(step, args=ocp.args.Composite(config=ocp.args.JsonRestore()))["config"]
        saved, filled = fill_config_defaults(saved)
        if filled:
            print(f"note: {spec} predates config field(s) {', '.join(filled)}; using their defaults", file=sys.stderr)
        config = ml_collections.ConfigDict(_tuples(saved))
        config.distributed = False
        network = network_lib.make_network(config.model)
        abstract = jax.eval_shape(lambda key: network_lib.init_params(network, key), jax.random.PRNGKey(0))
        device = jax.sharding.SingleDeviceSharding(jax.devices()[0])
        abstract = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=device), abstract)
        item = "ema_params" if os.path.isdir(os.path.join(where, "ema_params")) else "params"
        params = manager.restore(step, args=ocp.args.Composite(**{item: ocp.args.StandardRestore(abstract)}))[item]
    except SnapshotError:
        raise
    except Exception as e:  # whatever a damaged or foreign snapshot makes orbax or flax raise
        lines = str(e).strip().splitlines() or [""]
        detail = lines[0].split(" See full TensorStore details")[0][:200]  # not TensorStore's spec dump
        raise SnapshotError(f"checkpoint {spec!r}: snapshot {where} cannot be read ({type(e).__name__}: {detail}); "
                            "it is damaged or not an azshogi snapshot") from None
    finally:
        manager.close()
    return config, params, step


def _quiet_failed_reads() -> None:
    """Keeps the reads of a damaged snapshot quiet (``load_snapshot`` reports the damage in
    one line): when one fails, orbax closes its event loop and leaves the others running,
    and they end in tracebacks on stderr, before and after that line (coroutines raising
    when collected, tasks whose exception nobody retrieved, callbacks into the closed loop)."""
    import logging

    previous = sys.unraisablehook
    if getattr(previous, "drops_orbax_reads", False):
        return

    def hook(unraisable):
        code = getattr(unraisable.object, "cr_code", None)
        orbax_read = code is not None and "orbax" in code.co_filename
        closed_loop = isinstance(unraisable.exc_value, RuntimeError) and "Event loop is closed" in str(
            unraisable.exc_value)
        if not (orbax_read or closed_loop):
            previous(unraisable)

    hook.drops_orbax_reads = True
    sys.unraisablehook = hook
    logging.getLogger("asyncio").addFilter(
        lambda record: not ("exception was never retrieved" in record.getMessage() and "orbax" in record.getMessage()))


def _tuples(d: dict) -> dict:
    """JSON lists back to the tuples configs hold."""
    return {k: _tuples(v) if isinstance(v, dict) else tuple(v) if isinstance(v, list) else v for k, v in d.items()}


def user_cache_dir() -> str:
    """The user's azshogi folder for what has no workdir (the classical engine's compiled
    programs, in its ``jax_cache``): ``$XDG_CACHE_HOME/azshogi``, else ``~/.cache/azshogi``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "azshogi")


def enable_compilation_cache(directory: str) -> bool:
    """Points JAX's persistent compilation cache at ``directory`` (created if need be), or
    at ``$JAX_COMPILATION_CACHE_DIR`` when that is set (one cache for many runs, as the
    test suite does); False when it cannot be written.

    The path is resolved first: JAX writes the cache's own path into every program's
    compile options, hence into its cache key, so runs that reach one cache through
    different links (``reproduce.py``'s variants) would never share an entry."""
    directory = os.path.realpath(os.environ.get("JAX_COMPILATION_CACHE_DIR") or directory)
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError:
        return False
    if not os.access(directory, os.W_OK):
        return False
    import jax

    jax.config.update("jax_compilation_cache_dir", directory)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return True
