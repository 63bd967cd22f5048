"""Run by tests/test_scaleout.py under XLA_FLAGS=--xla_force_host_platform_device_count=4:
compiles the learner step (or, with ``iteration``, the whole iteration) of a smoke config
with a large replay for 1 and for 4 devices, and prints per-device memory and the
collectives as JSON.

    python tests/sharding_worker.py [step|iteration]
"""

import json
import os
import runpy
import sys

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from configs import base
from az.train import trainer as trainer_lib

plan = runpy.run_path(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench",
                                   "tpu_plan.py"), run_name="tpu_plan")


def main():
    what = sys.argv[1] if len(sys.argv) > 1 else "step"
    config = base.get_config("smoke")
    config.replay.capacity = 8 * 8 * 256  # 16,384 positions: a buffer far larger than any other array
    out = {"buffer_bytes": sum(int(np.prod(leaf.shape)) * leaf.dtype.itemsize for leaf in jax.tree.leaves(
        jax.eval_shape(lambda: trainer_lib.make_trainer(config, Mesh(np.asarray(jax.devices()[:1]), ("data",)))
                       .init()).replay))}
    for devices in (1, 4):
        mesh = Mesh(np.asarray(jax.devices()[:devices]), ("data",))
        trainer = trainer_lib.make_trainer(config, mesh)
        if what == "iteration":
            compiled = trainer.iteration.lower(trainer.abstract_state).compile()
        else:
            replicated = NamedSharding(mesh, PartitionSpec())
            step = jax.jit(lambda s, key: trainer.learner_step(s.params, s.opt_state, s.learner_steps, s.replay,
                                                               0.5, key)[:3],
                           in_shardings=(trainer.state_sharding, replicated))
            key = jax.ShapeDtypeStruct((2,), np.uint32, sharding=replicated)
            compiled = step.lower(trainer.abstract_state, key).compile()
        out[str(devices)] = {**plan["memory"](compiled), "collectives": plan["collectives"](compiled.as_text())}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
