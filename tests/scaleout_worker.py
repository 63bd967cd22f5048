"""Run by tests/test_scaleout.py in a subprocess: trains a smoke config and dumps the parameters.

    python tests/scaleout_worker.py OUT.npz WORKDIR ITERATIONS [COORDINATOR NUM_PROCESSES PROCESS_ID]
"""

import sys


def smoke_config():
    from configs import base

    config = base.get_config("smoke")
    config.env.max_length = 8  # every game ends within an iteration, so each one learns
    config.replay.capacity = 8 * 8 * 4
    return config


def main():
    out, workdir, iterations = sys.argv[1], sys.argv[2], int(sys.argv[3])
    config = smoke_config()
    if len(sys.argv) > 4:
        from az.train import distributed

        config.distributed = True
        distributed.initialize(sys.argv[4], int(sys.argv[5]), int(sys.argv[6]))
    import jax
    import numpy as np

    from az.train import checkpoint, loop, trainer

    loop.train(config, workdir, max_iterations=iterations)
    built = trainer.make_trainer(config, trainer.make_mesh())
    ckpt = checkpoint.Checkpointer(workdir, keep=config.checkpoint.keep)
    state = ckpt.restore(config, built.abstract_state)
    ckpt.close()
    leaves = jax.tree_util.tree_leaves_with_path(state.params)
    arrays = {jax.tree_util.keystr(path): np.asarray(leaf.addressable_data(0)) for path, leaf in leaves}
    replay = {f"replay/{name}": np.asarray(jax.device_get(getattr(state.replay.plies, name)), np.float32)
              for name in ("board", "policy", "color")}
    replay["replay/value_target"] = np.asarray(jax.device_get(state.replay.value_target))
    replay["replay/filled"] = np.asarray(jax.device_get(state.replay.filled))
    np.savez(out, iteration=np.asarray(state.iteration.addressable_data(0)),
             games_finished=np.asarray(state.games_finished.addressable_data(0)), **arrays, **replay)


if __name__ == "__main__":
    main()
