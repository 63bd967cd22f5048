"""The training loop's transfer guard: nothing crosses between host and device inside an
iteration, except the reads that compiling makes of closed-over arrays on a first call
(on an accelerator; a CPU array is read in place, so the settings are what is checked)."""

import jax
import numpy as np
import pytest

from az.train import loop


def _settings() -> tuple[str, str, str]:
    c = jax.config
    return (c.jax_transfer_guard_host_to_device, c.jax_transfer_guard_device_to_device,
            c.jax_transfer_guard_device_to_host)


def test_transfer_guard__a_first_call_may_read_to_the_host_a_compiled_one_may_not():
    with loop.transfer_guard(compiled=False):
        assert _settings() == ("disallow", "disallow", "allow")
    with loop.transfer_guard(compiled=True):
        assert _settings() == ("disallow", "disallow", "disallow")
    assert "disallow" not in _settings(), "the guard ends with its block"


@pytest.mark.parametrize("compiled", [False, True])
def test_transfer_guard__host_to_device_is_always_refused(compiled):
    add_one = jax.jit(lambda x: x + 1)
    with pytest.raises(jax.errors.JaxRuntimeError, match="Disallowed host-to-device"):
        with loop.transfer_guard(compiled=compiled):
            add_one(np.ones(2))  # an implicit transfer: a host array into a program
