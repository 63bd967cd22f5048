"""The shogi environment: the jittable game (``envs.env``) and its host-side API.

On the device (jit/vmap): ``Rules``, ``State``, ``init_from``, ``step``, ``observe``,
``with_history``; start positions in ``envs.starts``.
On the host: ``from_sfen``, ``from_position``, ``to_sfen``, ``legal_moves``,
``action_to_usi``, ``usi_to_action`` (``envs.notation``), and game records ``to_kif``,
``to_csa``, ``to_usi_position`` (``envs.records``).
"""

from envs.env import (  # noqa: F401
    END_REASONS,
    NUM_ACTIONS,
    OBSERVATION_SHAPE,
    GameState,
    Rules,
    State,
    init_from,
    observe,
    step,
    with_history,
)
from envs.env import DECLARATION, MATE, MAX_LENGTH, ONGOING, PERPETUAL_CHECK, REPETITION, RESIGNATION  # noqa: F401
from envs.notation import (  # noqa: F401
    STARTPOS_SFEN,
    action_to_usi,
    from_position,
    from_sfen,
    legal_moves,
    parse_sfen,
    to_sfen,
    usi_to_action,
)
from envs.records import to_csa, to_kif, to_usi_position  # noqa: F401
