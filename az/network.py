"""AlphaZero-style residual network: policy logits in pgx's action order and a value.

Shapes: B positions; input [B, 9, 9, 119] (``envs.movegen.observe``), outputs
logits [B, 2187] float32 and value [B] float32 in [-1, 1] from the mover's view.
Normalisation is LayerNorm over channels, which has no batch statistics, so a
sharded batch computes exactly what one device would.
"""

import flax.linen as nn
import jax.numpy as jnp
from jax import Array

NUM_DIRECTIONS = 27  # pgx's action planes


class ResidualBlock(nn.Module):
    channels: int
    dtype: jnp.dtype

    @nn.compact
    def __call__(self, h: Array) -> Array:
        skip = h
        h = nn.Conv(self.channels, (3, 3), use_bias=False, dtype=self.dtype)(h)
        h = nn.relu(nn.LayerNorm(dtype=self.dtype)(h))
        h = nn.Conv(self.channels, (3, 3), use_bias=False, dtype=self.dtype)(h)
        h = nn.LayerNorm(dtype=self.dtype)(h)
        return nn.relu(h + skip)


class AZNet(nn.Module):
    """Stem conv, ``num_blocks`` residual blocks of ``channels``, policy and value heads."""

    num_blocks: int
    channels: int
    value_hidden: int = 256
    dtype: jnp.dtype = jnp.float32

    @nn.compact
    def __call__(self, observation: Array) -> tuple[Array, Array]:
        h = observation.astype(self.dtype)
        h = nn.Conv(self.channels, (3, 3), use_bias=False, dtype=self.dtype)(h)
        h = nn.relu(nn.LayerNorm(dtype=self.dtype)(h))
        for _ in range(self.num_blocks):
            h = ResidualBlock(self.channels, self.dtype)(h)

        # Policy: one plane per action direction. The observation is pgx's board turned
        # a quarter (spatial [rank, 8 - file]); turn it back to pgx's [file, rank] squares.
        p = nn.Conv(self.channels, (3, 3), dtype=self.dtype)(h)
        p = nn.relu(nn.LayerNorm(dtype=self.dtype)(p))
        p = nn.Conv(NUM_DIRECTIONS, (1, 1), dtype=self.dtype)(p)  # [B, 9, 9, 27]
        p = jnp.rot90(p, k=1, axes=(1, 2))  # [B, file, rank, 27]
        logits = p.reshape(p.shape[0], 81, NUM_DIRECTIONS).transpose(0, 2, 1).reshape(p.shape[0], -1)

        v = nn.Conv(4, (1, 1), dtype=self.dtype)(h)
        v = nn.relu(nn.LayerNorm(dtype=self.dtype)(v)).reshape(h.shape[0], -1)
        v = nn.relu(nn.Dense(self.value_hidden, dtype=self.dtype)(v))
        value = jnp.tanh(nn.Dense(1, dtype=self.dtype)(v))[:, 0]
        return logits.astype(jnp.float32), value.astype(jnp.float32)


def make_network(config) -> AZNet:
    """The network of a run's config (``config.model``)."""
    return AZNet(
        num_blocks=config.model.num_blocks,
        channels=config.model.channels,
        value_hidden=config.model.value_hidden,
        dtype=jnp.bfloat16 if config.model.dtype == "bfloat16" else jnp.float32,
    )


def init_params(network: AZNet, rng_key: Array) -> dict:
    """Fresh parameters (float32, whatever the compute dtype)."""
    return network.init(rng_key, jnp.zeros((1, 9, 9, 119), jnp.bool_))
