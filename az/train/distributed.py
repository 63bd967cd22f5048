"""Joining the processes of a multi-host run.

Must run before anything touches a JAX backend — importing ``envs`` does (pgx builds
tables on the device at import) — so ``train.py`` calls it before importing the trainer.
"""

import jax


def initialize(coordinator_address=None, num_processes=None, process_id=None) -> None:
    """``jax.distributed.initialize``; TPU pods and SLURM find their peers themselves.

    CPU arrays are exchanged through gloo collectives (accelerators use their own).
    """
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(coordinator_address=coordinator_address, num_processes=num_processes, process_id=process_id)
