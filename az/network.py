"""AlphaZero-style residual network: policy logits in pgx's action order and a value.

Shapes: B positions; input pgx's 119 observation planes in two parts
(``envs.env.observe_parts``): the 62 that vary over the board, packed 8 to a byte
[B, 648] uint8, and the 57 that are constant on it (hands, check) as flags [B, 57];
outputs logits [B, 2187]
float32 and value [B] float32 in [-1, 1] from the mover's view. Normalisation is
LayerNorm over channels, which has no batch statistics, so a sharded batch computes
exactly what one device would.
"""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from jax import Array

from envs import movegen

NUM_DIRECTIONS = 27  # pgx's action planes
BOARD_PLANES, FLAGS = 62, 57  # of the 119 observation planes
SIDE_PLANES = 31  # each side's board planes: 14 pieces, 14 attacks by kind, attacked >= 1, 2, 3 times
KING = 7  # pgx's piece order

# _TAPS[i, j, dy, dx]: a 3x3 kernel's tap (dy, dx) at output square (i, j) falls on the board.
_SQUARES = np.arange(9)
_ON = (_SQUARES[:, None] + np.arange(3)[None, :] - 1 >= 0) & (_SQUARES[:, None] + np.arange(3)[None, :] - 1 <= 8)
_TAPS = (_ON[:, None, :, None] & _ON[None, :, None, :]).astype(np.float32)  # [9, 9, 3, 3]


def threat_planes(planes: Array) -> Array:
    """The observation's board planes [..., 9, 9, 62] bool -> [..., 9, 9, 4] bool: for the
    mover, then the opponent, (1) its pieces other than the king that the other side
    attacks more often than it defends them (the observation's counts, capped at 3: the
    classical evaluation's "hanging"), and (2) its pieces attacked by a kind of lower
    greedy value (``movegen.PIECE_VALUES``; the king is no such attacker, as it takes only
    what is undefended). Both are pieces that a capture may win."""
    values = movegen.PIECE_VALUES
    out = []
    for side, other in ((0, SIDE_PLANES), (SIDE_PLANES, 0)):
        pieces = planes[..., side:side + 14]
        defended = planes[..., side + 28:side + 31].astype(jnp.int32).sum(-1)
        attacked = planes[..., other + 28:other + 31].astype(jnp.int32).sum(-1)
        not_king = jnp.asarray(np.arange(14) != KING)
        hanging = (pieces & not_king).any(-1) & (attacked > defended)
        cheaper = jnp.zeros_like(hanging)
        for kind in range(14):
            lesser = [other + 14 + q for q in range(14) if q != KING and values[q] < values[kind]]
            if kind != KING and lesser:
                cheaper = cheaper | (pieces[..., kind] & planes[..., lesser].any(-1))
        out += [hanging, cheaper]
    return jnp.stack(out, -1)


class Stem(nn.Module):
    """The first 3x3 convolution ("SAME") over all 119 planes, its kernel [3, 3, 119, C]
    as ``nn.Conv``'s. A plane that holds one value f everywhere contributes f times the
    sum of the taps that fall on the board at each square, so the 57 flags enter as a
    vector: nothing is broadcast to 9x9, and the convolution reads 62 channels, not 119.
    The 62 arrive packed ([B, 648] uint8) and are unpacked into the convolution's input.
    With ``threat`` the four ``threat_planes`` follow the 62 (kernel [3, 3, 123, C])."""

    channels: int
    dtype: jnp.dtype
    threat: bool = False

    @nn.compact
    def __call__(self, board_bytes: Array, flags: Array) -> Array:
        planes = movegen.unpack_board_planes(board_bytes)  # [B, 9, 9, 62]
        if self.threat:
            planes = jnp.concatenate([planes, threat_planes(planes)], -1)
        board = planes.shape[-1]
        kernel = self.param("kernel", nn.initializers.lecun_normal(), (3, 3, board + FLAGS, self.channels))
        kernel = kernel.astype(self.dtype)
        h = jax.lax.conv_general_dilated(
            planes.astype(self.dtype), kernel[:, :, :board], (1, 1), "SAME",
            dimension_numbers=("NHWC", "HWIO", "NHWC"),
        )
        per_square = jnp.einsum("ijyx,yxco->ijco", jnp.asarray(_TAPS, self.dtype), kernel[:, :, board:])
        return h + jnp.einsum("bc,ijco->bijo", flags.astype(self.dtype), per_square)


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
    value_pool: bool = False  # the value's hidden layer also reads the trunk's mean and max per channel
    dtype: jnp.dtype = jnp.float32
    policy_bias: str = "plane"  # "plane": one bias per direction; "action": one per action
    drop_logit_init: float = 0.0  # the drop planes' initial bias: an untrained prior on drops
    legality_head: bool = False  # a sigmoid per action that predicts which moves are legal
    material_head: bool = False  # the value head also predicts a material balance in [-1, 1]
    occupancy_head: bool = False  # the trunk also predicts each square's later occupant
    threat_planes: bool = False  # the stem also reads ``threat_planes``, derived from the observation
    reply_head: bool = False  # a second policy head: the opponent's policy at the next ply

    @nn.compact
    def __call__(self, observation: tuple[Array, Array], with_aux: bool = False):
        """-> (policy logits [B, 2187], value [B]), and with ``with_aux`` a dict of the
        auxiliary heads built, third: "legality" logits [B, 2187], "material" [B],
        "occupancy" logits [B, 81, 3] by square (empty, the mover's piece, the opponent's),
        "reply" logits [B, 2187] of the opponent's next move in the opponent's frame (the
        learner's auxiliary targets; search never asks)."""
        board_bytes, flags = observation  # [B, 648] uint8, [B, 57] bool
        h = Stem(self.channels, self.dtype, self.threat_planes, name="Conv_0")(board_bytes, flags)
        h = nn.relu(nn.LayerNorm(dtype=self.dtype)(h))
        for _ in range(self.num_blocks):
            h = ResidualBlock(self.channels, self.dtype)(h)

        # Policy: one plane per action direction. Names as before the stem read two
        # parts, so earlier snapshots still load.
        hidden = nn.Conv(self.channels, (3, 3), dtype=self.dtype, name="Conv_1")(h)
        hidden = nn.relu(nn.LayerNorm(dtype=self.dtype)(hidden))
        p = nn.Conv(NUM_DIRECTIONS, (1, 1), use_bias=self.policy_bias == "plane", dtype=self.dtype,
                    bias_init=self._direction_bias_init, name="Conv_2")(hidden)  # [B, 9, 9, 27]
        logits = _planes_to_actions(p)
        if self.policy_bias == "action":
            # A bias per (direction, square): the all-actions loss pushes a promotion down
            # on the squares where it can never be legal, not on the whole plane.
            logits = logits + self.param("policy_bias", self._action_bias_init, (movegen.NUM_ACTIONS,)).astype(self.dtype)
        aux = {}
        if self.legality_head:
            # From the policy's hidden planes: what makes a move legal is what the policy
            # must know to keep its mass on legal moves.
            aux["legality"] = _planes_to_actions(nn.Conv(NUM_DIRECTIONS, (1, 1), dtype=self.dtype, name="Legality")(hidden))

        if self.reply_head:
            # The opponent's frame is the board turned half a turn: square s is 80 - s, so
            # both spatial axes reversed put each square's features where its moves are.
            aux["reply"] = _planes_to_actions(nn.Conv(NUM_DIRECTIONS, (1, 1), dtype=self.dtype, name="Reply")(
                hidden[:, ::-1, ::-1, :]))

        if self.occupancy_head:
            # From the trunk itself: a target on every square, where the policy and value
            # heads each see a summary (KataGo's ownership head, for pieces about to fall).
            occupancy = nn.Conv(3, (1, 1), dtype=self.dtype, name="Occupancy")(h)  # [B, 9, 9, 3]
            aux["occupancy"] = planes_to_squares(occupancy)

        v = nn.Conv(4, (1, 1), dtype=self.dtype, name="Conv_3")(h)
        v = nn.relu(nn.LayerNorm(dtype=self.dtype)(v)).reshape(h.shape[0], -1)
        if self.value_pool:
            v = jnp.concatenate([v, h.mean((1, 2)), h.max((1, 2))], -1)
        v = nn.relu(nn.Dense(self.value_hidden, dtype=self.dtype)(v))
        value = jnp.tanh(nn.Dense(1, dtype=self.dtype)(v))[:, 0]
        if self.material_head:
            # From the value's own hidden layer, so that what counts material is there for
            # the value to read.
            aux["material"] = jnp.tanh(nn.Dense(1, dtype=self.dtype, name="Material")(v))[:, 0]
        if with_aux:
            return logits.astype(jnp.float32), value.astype(jnp.float32), {k: a.astype(jnp.float32) for k, a in aux.items()}
        return logits.astype(jnp.float32), value.astype(jnp.float32)

    def _direction_bias_init(self, key, shape, dtype=jnp.float32):
        """[27]: 0 for moves, ``drop_logit_init`` for the drop planes (20-26). With the loss
        over legal moves, an untrained network that prefers no move to a drop keeps its
        self-play from being mostly random drops (dozens per piece in hand)."""
        del key
        return jnp.where(jnp.arange(shape[0]) >= movegen.PAWN_DROP, self.drop_logit_init, 0.0).astype(dtype)

    def _action_bias_init(self, key, shape, dtype=jnp.float32):
        """[2187]: the direction's initial bias on each of its 81 squares."""
        return jnp.repeat(self._direction_bias_init(key, (NUM_DIRECTIONS,), dtype), 81)


def planes_to_squares(planes: Array) -> Array:
    """[B, 9, 9, C] planes over the observation's squares -> [B, 81, C] by pgx's square
    index (``file * 9 + rank``). The observation is pgx's board turned a quarter (spatial
    [rank, 8 - file]); turn it back."""
    return jnp.rot90(planes, k=1, axes=(1, 2)).reshape(planes.shape[0], 81, planes.shape[-1])


def _planes_to_actions(planes: Array) -> Array:
    """[B, 9, 9, 27] planes over the observation's squares -> [B, 2187] actions
    (direction * 81 + square)."""
    return planes_to_squares(planes).transpose(0, 2, 1).reshape(planes.shape[0], -1)


def make_network(config) -> AZNet:
    """The network of a run's ``model`` section (``config.model``)."""
    return AZNet(
        num_blocks=config.num_blocks,
        channels=config.channels,
        value_hidden=config.value_hidden,
        value_pool=config.value_pool,
        policy_bias=config.policy_bias,
        drop_logit_init=config.drop_logit_init,
        legality_head=config.legality_head,
        material_head=config.material_head,
        occupancy_head=config.occupancy_head,
        threat_planes=config.threat_planes,
        reply_head=config.reply_head,
        dtype=jnp.bfloat16 if config.dtype == "bfloat16" else jnp.float32,
    )


def example_observation(batch: int = 1) -> tuple[Array, Array]:
    """Zeros in the network's input form: ([batch, 648] uint8, [batch, 57] bool)."""
    return jnp.zeros((batch, movegen.BOARD_BYTES), jnp.uint8), jnp.zeros((batch, FLAGS), jnp.bool_)


def init_params(network: AZNet, rng_key: Array) -> dict:
    """Fresh parameters (float32, whatever the compute dtype)."""
    return network.init(rng_key, example_observation())
