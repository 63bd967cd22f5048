"""What the command-line entry points share: config paths, one-line flag errors."""

import os
import sys

from absl import flags

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def use_cpu_cores() -> int | None:
    """Before JAX starts: a CPU host becomes one JAX device per core it may use, unless
    ``XLA_FLAGS`` (--xla_force_host_platform_device_count) or ``JAX_NUM_CPU_DEVICES``
    already sets the count; a run's mesh then takes as many as its config divides
    (``az.train.trainer.make_mesh``). XLA runs each convolution on one core, so only one
    device per core keeps every core busy (docs/benchmarks.md). Accelerators are
    untouched. Returns the count set, or None."""
    if "xla_force_host_platform_device_count" in os.environ.get("XLA_FLAGS", "") or "JAX_NUM_CPU_DEVICES" in os.environ:
        return None
    count = len(os.sched_getaffinity(0))
    os.environ["JAX_NUM_CPU_DEVICES"] = str(count)  # read when JAX is imported
    if "jax" in sys.modules:  # imported already: set it directly, if no backend has started
        try:
            sys.modules["jax"].config.update("jax_num_cpu_devices", count)
        except RuntimeError:  # started: the host keeps the devices it has
            return None
    return count


def resolve_config_path(argv: list[str]) -> list[str]:
    """Lets ``--config shogi816k.py`` find ``configs/shogi816k.py``."""
    here = ROOT
    out = list(argv)
    for i, arg in enumerate(out):
        value, prefix = None, None
        if arg == "--config" and i + 1 < len(out):
            value, prefix, index = out[i + 1], "", i + 1
        elif arg.startswith("--config="):
            value, prefix, index = arg[len("--config="):], "--config=", i
        if value is None:
            continue
        path, colon, preset = value.partition(":")
        if not os.path.exists(path):
            for candidate in (os.path.join("configs", path), os.path.join(here, "configs", path)):
                if os.path.exists(candidate):
                    out[index] = prefix + candidate + colon + preset
                    break
            else:
                sys.exit(f"error: --config: no config file {path!r} (also looked in configs/)")
    return out


def unknown_override(argv: list[str]) -> str | None:
    """The first ``--config.a.b=...`` override whose field the config lacks."""
    import importlib.util

    spec_text = next((a.split("=", 1)[1] for a in argv if a.startswith("--config=")), None)
    if spec_text is None and "--config" in argv:
        spec_text = argv[argv.index("--config") + 1]
    if spec_text is None:
        return None
    path, _, preset = spec_text.partition(":")
    module_spec = importlib.util.spec_from_file_location("_config", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    config = module.get_config(preset or None)
    for arg in argv:
        if not arg.startswith("--config."):
            continue
        field = arg[len("--config."):].split("=", 1)[0]
        node = config
        for part in field.split("."):
            if not hasattr(node, "keys") or part not in node.keys():
                return field
            node = node[part]
    return None


HELP_FLAGS = ("--help", "-?", "--helpshort", "--helpfull", "--helpxml")


def parse_flags(argv: list[str]) -> list[str]:
    """absl's parsing, with one-line errors instead of tracebacks."""
    try:
        return flags.FLAGS(argv)
    except SystemExit as e:  # absl's help flags print and exit 1; asking for help is no error
        if e.code == 1 and any(a.split("=")[0] in HELP_FLAGS for a in argv[1:]):
            sys.exit(0)
        raise
    except flags.Error as e:
        lines = [line.strip() for line in str(e).splitlines() if line.strip()]
        if len(lines) > 1:  # a traceback from loading the config file: keep its last line
            head = lines[0].split(": Error whilst")[0]
            sys.exit(f"error: {head}: {lines[-1]}")
        sys.exit(f"error: {e}")
    except Exception as e:  # a config file or override that does not load
        try:
            field = unknown_override(argv)
        except Exception:
            field = None
        if field:
            sys.exit(f"error: --config.{field}: no such config field")
        sys.exit(f"error: --config: {type(e).__name__}: {e}")
