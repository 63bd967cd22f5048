"""The reference Gumbel MuZero: ``mctx.gumbel_muzero_policy`` on the full [B, N, A]
tree, run by ``az.search.puct``'s batched loop. Tests and benchmarks hold the compact
tree (``az.search.gumbel``) against it (tests/test_search.py, bench/search_bench.py);
nothing in training or play runs it.

It knows no game: a root's prior logits [B, A], value [B], embedding [B, ...],
``invalid_actions`` [B, A] and a ``recurrent_fn`` (mctx's contract).

Shapes: B roots, A actions, N = num_simulations + 1 nodes.
"""

import functools
from typing import Any

import jax
import jax.numpy as jnp
import mctx
from jax import Array

from az.search import puct
from az.search.gumbel import VALUE_SCALE, mask_invalid


def full_tree_gumbel_muzero(
    params: Any,
    rng_key: Array,
    root: mctx.RootFnOutput,
    recurrent_fn: mctx.RecurrentFn,
    *,
    num_simulations: int,
    invalid_actions: Array,
    max_num_considered_actions: int = 16,
    gumbel_scale: float = 1.0,
    value_scale: float = VALUE_SCALE,
) -> mctx.PolicyOutput:
    """Gumbel MuZero (sequential halving at the root): ``mctx.gumbel_muzero_policy`` on
    ``puct.search``'s loop. action [B] int32, action_weights [B, A] (the improved
    policy), the ``mctx.Tree`` as ``search_tree``. ``value_scale``:
    ``mctx.qtransform_completed_by_mix_value``'s."""
    qtransform = functools.partial(mctx.qtransform_completed_by_mix_value, value_scale=value_scale)
    root = root.replace(prior_logits=mask_invalid(root.prior_logits, invalid_actions))
    rng_key, gumbel_key = jax.random.split(rng_key)
    gumbel = gumbel_scale * jax.random.gumbel(gumbel_key, root.prior_logits.shape, root.prior_logits.dtype)
    tree = puct.search(
        params,
        rng_key,
        root=root,
        recurrent_fn=recurrent_fn,
        root_action_selection_fn=functools.partial(
            mctx.gumbel_muzero_root_action_selection,
            num_simulations=num_simulations,
            max_num_considered_actions=max_num_considered_actions,
            qtransform=qtransform,
        ),
        interior_action_selection_fn=functools.partial(
            mctx.gumbel_muzero_interior_action_selection, qtransform=qtransform
        ),
        num_simulations=num_simulations,
        invalid_actions=invalid_actions,
        extra_data=mctx.GumbelMuZeroExtraData(root_gumbel=gumbel),
    )
    visits = tree.summary().visit_counts
    completed_q = jax.vmap(qtransform, in_axes=(0, None))(tree, puct.Tree.ROOT_INDEX)
    # The final choice of sequential halving: among the actions with the most visits,
    # the best gumbel + logit + completed Q.
    logits = root.prior_logits - jnp.max(root.prior_logits, axis=-1, keepdims=True)
    most_visited = visits == jnp.max(visits, axis=-1, keepdims=True)
    score = jnp.maximum(-1e9, gumbel + logits + completed_q) + jnp.where(most_visited, 0.0, -jnp.inf)
    action = jnp.argmax(jnp.where(invalid_actions, -jnp.inf, score), axis=-1).astype(jnp.int32)
    weights = jax.nn.softmax(mask_invalid(root.prior_logits + completed_q, invalid_actions))
    return mctx.PolicyOutput(action=action, action_weights=weights, search_tree=tree)
