"""Atomic, resumable checkpoints of the whole TrainState plus the config (orbax).

A checkpoint is written to a temporary directory and renamed when complete, so a
run killed mid-save (SIGKILL) resumes from the previous one. The manager never
removes anything but its own old steps. Each save also writes the params-only
snapshot that evaluation and play load (``az.workdir``); snapshots are never removed.
"""

import json
import os

import ml_collections
import orbax.checkpoint as ocp

from az import workdir as workdir_lib

# Fields that may change between a run and its resumption. Not budget_games: the learning
# rate and the start phases follow games finished / budget_games.
_MAY_CHANGE = ("checkpoint.", "distributed", "name", "teacher.")


class CheckpointMismatch(ValueError):
    """The workdir's checkpoint was made with a config that does not fit this one."""


def _flatten(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = list(v) if isinstance(v, tuple) else v
    return out


def config_differences(saved: dict, config: ml_collections.ConfigDict) -> list[str]:
    """'field: saved -> now' for every field that differs and matters. A field the saved
    config lacks (added to azshogi since) is not a difference: see ``new_fields``."""
    now = _flatten(json.loads(config.to_json()))
    before = _flatten(saved)
    diffs = []
    for key in sorted(set(now) | set(before)):
        if key.startswith(_MAY_CHANGE) or key not in before:
            continue
        if now.get(key, "<missing>") != before[key]:
            diffs.append(f"{key}: {before[key]!r} -> {now.get(key, '<missing>')!r}")
    return diffs


def new_fields(saved: dict, config: ml_collections.ConfigDict) -> list[str]:
    """'field = value' for the fields of ``config`` that the saved config predates."""
    now = _flatten(json.loads(config.to_json()))
    before = _flatten(saved)
    return [f"{key} = {now[key]!r}" for key in sorted(set(now) - set(before))]


class Checkpointer:
    """Saves and restores ``TrainState`` under ``workdir/checkpoints``."""

    def __init__(self, workdir: str, *, keep: int):
        self.workdir = workdir
        self.directory = os.path.abspath(os.path.join(workdir, "checkpoints"))
        self.manager = ocp.CheckpointManager(
            self.directory,
            options=ocp.CheckpointManagerOptions(max_to_keep=keep, create=True, enable_async_checkpointing=False),
            item_names=("state", "config"),
        )

    def latest_step(self) -> int | None:
        return self.manager.latest_step()

    def save(self, step: int, state, config: ml_collections.ConfigDict) -> None:
        """The whole state under ``checkpoints/STEP``, the parameters under ``snapshots/STEP``."""
        workdir_lib.save_snapshot(self.workdir, step, state.params, config, state.ema_params)
        self.manager.save(
            step,
            args=ocp.args.Composite(
                state=ocp.args.StandardSave(state), config=ocp.args.JsonSave(json.loads(config.to_json()))
            ),
            force=True,
        )
        self.manager.wait_until_finished()

    def restore(self, config: ml_collections.ConfigDict, abstract_state, step: int | None = None):
        """The state at ``step`` (default: latest); refuses a checkpoint of another config."""
        step = self.latest_step() if step is None else step
        saved = self.manager.restore(step, args=ocp.args.Composite(config=ocp.args.JsonRestore()))["config"]
        diffs = config_differences(saved, config)
        added = new_fields(saved, config)
        if added:
            print(f"note: the checkpoint predates config field(s) {'; '.join(added)}: resuming with these values",
                  flush=True)
        if diffs:
            raise CheckpointMismatch(
                f"{self.directory} holds step {step} of a different config ({'; '.join(diffs)}); "
                "use another --workdir or the same config"
            )
        try:
            restored = self.manager.restore(step, args=ocp.args.Composite(state=ocp.args.StandardRestore(abstract_state)))
        except ValueError as e:  # orbax: the saved tree is not this azshogi's TrainState
            detail = str(e).strip().splitlines()[0][:160] if str(e).strip() else ""
            raise CheckpointMismatch(
                f"{self.directory} holds step {step} in another state layout (an older azshogi? {detail}); "
                "its snapshots still evaluate, but training resumes only in a new --workdir"
            ) from None
        return restored["state"]

    def close(self):
        self.manager.close()
