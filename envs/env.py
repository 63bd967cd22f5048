"""A jittable, vmappable shogi environment with the real rules.

One game is a ``State``; batch it with ``jax.vmap``. Shapes below are for one game;
A = 2187 actions (pgx's dlshogi encoding, see ``envs.movegen``), H = the length of
the repetition history (``Rules.history``).

Rules (``Rules``): fourfold repetition is a draw unless one side checked with every
move through it (that side loses); a side to move with no legal move loses (pawn-drop
mate is never legal); the entering-king declaration (CSA 27-point rule) wins for the
side to move when enabled; a game reaching ``max_length`` plies is a draw flagged
``truncated``.

Import it through ``envs.shogi``, which adds the host-side API of ``envs.notation``.
"""

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import Array

from envs import endings, movegen
from envs.movegen import NUM_ACTIONS, OBSERVATION_SHAPE, GameState  # noqa: F401 (re-exported)

# Why a game ended: State.end_reason. step() never resigns: self-play's resignation does.
ONGOING, MATE, REPETITION, PERPETUAL_CHECK, DECLARATION, MAX_LENGTH, RESIGNATION = range(7)
END_REASONS = ("ongoing", "mate", "repetition", "perpetual_check", "declaration", "max_length", "resignation")


@dataclasses.dataclass(frozen=True)
class Rules:
    """Static rule settings; hashable, so they can close over jitted functions."""

    max_length: int = 512  # plies from the start position; then a draw, truncated
    declaration: bool = True  # entering-king declaration (CSA 27 points) wins
    repetitions: int = 4  # occurrences of one position that end the game
    perpetual_check_loses: bool = True  # else a perpetual-check repetition is a draw
    history: int = 513  # hashes kept for repetition; >= max_length + 1 is exact
    movegen: str = "dense"  # move generator: "dense" (envs.dense) or "pgx" (the reference)

    def __post_init__(self):
        for name in ("max_length", "history"):
            if getattr(self, name) < 1:
                raise ValueError(f"Rules.{name} must be >= 1, got {getattr(self, name)}")
        if self.movegen not in movegen.CORES:
            raise ValueError(f"Rules.movegen must be one of {sorted(movegen.CORES)}, got {self.movegen!r}")
        if self.repetitions < 2:
            raise ValueError(f"Rules.repetitions must be >= 2, got {self.repetitions}")


class State(NamedTuple):
    """One game. ``x`` is pgx's position in the mover's frame (see ``envs.movegen``)."""

    x: GameState  # board [81] int32, hand [2, 7] int32, color [] int32, legal mask [A] bool
    rewards: Array  # [2] float32 by colour (0 black, 1 white), of the last transition
    terminated: Array  # [] bool, the game was decided or drawn by the rules
    truncated: Array  # [] bool, the game reached Rules.max_length
    end_reason: Array  # [] int32, one of ONGOING..MAX_LENGTH
    checked: Array  # [] bool, the side to move is in check
    hash: Array  # [2] uint32, hash of the position (envs.endings.position_hash)
    history: Array  # [H, 2] uint32, hash of the position at ply p in slot p % H
    check_history: Array  # [H] bool, the mover of that position was in check
    start_scheme: Array  # [] int32, index of the start scheme that began this game
    start_move_number: Array  # [] int32, SFEN move number of the start position

    @property
    def current_player(self) -> Array:
        """Side to move: 0 black (sente), 1 white (gote). [] int32."""
        return self.x.color

    @property
    def legal_action_mask(self) -> Array:
        return self.x.legal_action_mask

    @property
    def ply(self) -> Array:
        """Plies played since the start position. [] int32."""
        return self.x.step_count

    @property
    def done(self) -> Array:
        return self.terminated | self.truncated


def init_from(x: GameState, rules: Rules, *, start_scheme=0, start_move_number=1) -> State:
    """A consistent state for any position: mask, check, hash, terminal status.

    ``x.legal_action_mask`` is recomputed; ``x.step_count`` is reset to 0.
    """
    mask, checked = movegen.analyze(x, rules.movegen)
    x = x._replace(step_count=jnp.int32(0), legal_action_mask=mask)
    h = endings.position_hash(x)
    history = jnp.zeros((rules.history, endings.HASH_WORDS), jnp.uint32).at[0].set(h)
    check_history = jnp.zeros((rules.history,), jnp.bool_).at[0].set(checked)
    no_move = ~x.legal_action_mask.any()
    declared = endings.can_declare(x, checked) if rules.declaration else jnp.bool_(False)
    terminated = no_move | declared
    result = jnp.where(no_move, -1.0, jnp.where(declared, 1.0, 0.0))
    return State(
        x=x,
        rewards=_by_colour(result, x.color),
        terminated=terminated,
        truncated=jnp.bool_(False),
        end_reason=jnp.where(no_move, MATE, jnp.where(declared, DECLARATION, ONGOING)).astype(jnp.int32),
        checked=checked,
        hash=h,
        history=history,
        check_history=check_history,
        start_scheme=jnp.int32(start_scheme),
        start_move_number=jnp.int32(start_move_number),
    )


def _by_colour(result_for_mover: Array, color: Array) -> Array:
    """[2] rewards by colour from a result seen by the side to move."""
    mover = jnp.stack([result_for_mover, -result_for_mover]).astype(jnp.float32)
    return jnp.where(color == 0, mover, mover[::-1])


def step(state: State, action: Array, rules: Rules) -> State:
    """Plays a legal ``action``. A finished game stays as it is, with zero rewards."""
    x, checked = movegen.advance(state.x, action, rules.movegen)
    ply = x.step_count
    h = endings.position_hash(x)
    written = jnp.arange(rules.history) == ply % rules.history  # a mask, not a scatter
    history = jnp.where(written[:, None], h, state.history)
    check_history = jnp.where(written, checked, state.check_history)

    no_move = ~x.legal_action_mask.any()
    repeated, repetition_result = endings.repetition_outcome(
        history, check_history, ply, repetitions=rules.repetitions
    )
    repeated &= ~no_move
    if not rules.perpetual_check_loses:
        repetition_result = jnp.zeros_like(repetition_result)
    declared = ~no_move & ~repeated
    declared &= endings.can_declare(x, checked) if rules.declaration else jnp.bool_(False)
    terminated = no_move | repeated | declared
    truncated = ~terminated & (ply >= rules.max_length)

    result = jnp.where(no_move, -1.0, jnp.where(repeated, repetition_result, jnp.where(declared, 1.0, 0.0)))
    reason = jnp.select(
        [no_move, repeated & (repetition_result != 0), repeated, declared, truncated],
        [MATE, PERPETUAL_CHECK, REPETITION, DECLARATION, MAX_LENGTH],
        ONGOING,
    ).astype(jnp.int32)
    played = state._replace(
        x=x,
        rewards=_by_colour(result, x.color),
        terminated=terminated,
        truncated=truncated,
        end_reason=reason,
        checked=checked,
        hash=h,
        history=history,
        check_history=check_history,
    )
    finished = state._replace(rewards=jnp.zeros_like(state.rewards))
    return jax.tree.map(lambda a, b: jnp.where(state.done, a, b), finished, played)


def observe(state: State, rules: Rules) -> Array:
    """Network input from the mover's view: [9, 9, 119] bool (pgx's planes), by the
    rules' move generator."""
    return movegen.observe(state.x, rules.movegen)


def observe_parts(state: State, rules: Rules) -> tuple[Array, Array]:
    """``observe`` as the network reads it: (board planes [9, 9, 62] bool, flags [57] bool)."""
    return movegen.observe_parts(state.x, rules.movegen)


def with_history(state: State, size: int) -> State:
    """The same game keeping only the last ``size`` positions' hashes.

    For search trees: repetition is then judged within that window (dlshogi judges
    it within 16 plies in search), while the game itself keeps its full history.
    """
    old = state.history.shape[0]
    plies = state.ply - jnp.arange(size)  # newest first
    valid = (plies >= 0) & (jnp.arange(size) < old)
    slots_new = jnp.where(valid, plies % size, size)  # out of range -> dropped
    history = jnp.zeros((size, endings.HASH_WORDS), jnp.uint32).at[slots_new].set(
        state.history[plies % old], mode="drop"
    )
    check_history = jnp.zeros((size,), jnp.bool_).at[slots_new].set(state.check_history[plies % old], mode="drop")
    return state._replace(history=history, check_history=check_history)
