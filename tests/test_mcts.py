"""``az.mcts``: the same trees and policies as mctx's own loop, without its per-level
copies of the [B, N, A] arrays.

The model is synthetic and cheap to compile: a node's embedding is a random key, each
action's child draws its prior, value, reward and whether the game ended from it, so
trees are irregular (terminal nodes, revisits, roots with invalid actions).
"""

import re

import jax
import jax.numpy as jnp
import mctx
import numpy as np
import pytest

from az import mcts

B, A, N = 8, 12, 24  # roots, actions, simulations


def recurrent_fn(params, rng_key, action, embedding):
    del rng_key
    child = jax.vmap(jax.random.fold_in)(embedding, action)
    logits_key, value_key, reward_key, end_key = (jax.vmap(jax.random.split, in_axes=(0, None))(child, 4)[:, i]
                                                  for i in range(4))
    ended = jax.vmap(lambda k: jax.random.bernoulli(k, 0.15))(end_key)
    value = jax.vmap(lambda k: jax.random.uniform(k, minval=-1.0, maxval=1.0))(value_key)
    reward = jnp.where(ended, jax.vmap(lambda k: jax.random.choice(k, jnp.array([-1.0, 0.0, 1.0])))(reward_key), 0.0)
    output = mctx.RecurrentFnOutput(
        reward=reward,
        discount=jnp.where(ended, 0.0, -1.0),
        prior_logits=params * jax.vmap(lambda k: jax.random.normal(k, (A,)))(logits_key),
        value=jnp.where(ended, 0.0, value),
    )
    return output, child


def make_root():
    keys = jax.random.split(jax.random.key(5), 3)
    invalid = jax.random.bernoulli(keys[0], 0.3, (B, A)).at[:, 0].set(False)
    root = mctx.RootFnOutput(
        prior_logits=jax.random.normal(keys[1], (B, A)),
        value=jax.random.uniform(keys[2], (B,), minval=-1.0, maxval=1.0),
        embedding=jax.random.split(jax.random.key(9), B),
    )
    return root, invalid


PARAMS = jnp.float32(2.0)
POLICIES = {
    "gumbel": (
        lambda key, root, invalid: mcts.gumbel_muzero(PARAMS, key, root, recurrent_fn, num_simulations=N,
                                                      invalid_actions=invalid, max_num_considered_actions=4),
        lambda key, root, invalid: mctx.gumbel_muzero_policy(PARAMS, key, root, recurrent_fn, num_simulations=N,
                                                             invalid_actions=invalid, max_num_considered_actions=4),
    ),
    "puct": (
        lambda key, root, invalid: mcts.puct(PARAMS, key, root, recurrent_fn, num_simulations=N,
                                               invalid_actions=invalid),
        lambda key, root, invalid: mctx.muzero_policy(PARAMS, key, root, recurrent_fn, num_simulations=N,
                                                      invalid_actions=invalid, dirichlet_fraction=0.0),
    ),
}


@pytest.fixture(scope="module", params=sorted(POLICIES))
def compiled(request):
    """(ours, mctx's), each lowered and compiled once for the module."""
    root, invalid = make_root()
    key = jax.random.key(3)
    return request.param, [jax.jit(fn).lower(key, root, invalid).compile() for fn in POLICIES[request.param]]


def test_mcts__same_tree_and_policy_as_mctx(compiled):
    name, (ours, theirs) = compiled
    root, invalid = make_root()
    for seed in range(3):
        key = jax.random.key(seed)
        got, expected = ours(key, root, invalid), theirs(key, root, invalid)
        tree, tree_expected = got.search_tree, expected.search_tree
        assert int(tree.node_visits[:, 0].min()) == N + 1, "every simulation reached the root"
        assert bool((tree_expected.children_discounts == 0).any()), "the model ends some games"
        for field in ("node_visits", "parents", "action_from_parent", "children_index", "children_visits"):
            np.testing.assert_array_equal(getattr(tree, field), getattr(tree_expected, field), err_msg=field)
        for field in ("node_values", "raw_values", "children_values", "children_prior_logits", "children_rewards"):
            np.testing.assert_allclose(getattr(tree, field), getattr(tree_expected, field), rtol=1e-6, atol=1e-6,
                                       err_msg=field)
        np.testing.assert_allclose(got.action_weights, expected.action_weights, rtol=1e-6, atol=1e-7)
        if name == "gumbel":
            np.testing.assert_array_equal(got.action, expected.action)
        else:  # mctx samples from the visits; AlphaZero plays the most visited
            np.testing.assert_array_equal(got.action, np.argmax(tree_expected.summary().visit_counts, axis=-1))
        assert not np.asarray(invalid)[np.arange(B), np.asarray(got.action)].any()


def loop_copies_of_edge_arrays(compiled) -> int:
    """Copies of a [B, N + 1, A] array inside loop bodies (not the entry computation)."""
    hlo = compiled.as_text()
    entry = hlo[hlo.index("\nENTRY"):]
    entry = entry[: entry.find("\n}\n")]
    shape = rf"\[{B},{N + 1},{A}\]"
    return len(re.findall(rf"\S+{shape}\S* copy\(", hlo)) - len(re.findall(rf"\S+{shape}\S* copy\(", entry))


def test_mcts__loop_copies_no_tree_sized_array(compiled):
    """mctx's batched backward copies visit and value arrays on every level; ours writes
    B values per level in place."""
    name, (ours, theirs) = compiled
    del name
    assert loop_copies_of_edge_arrays(ours) == 0
    assert loop_copies_of_edge_arrays(theirs) >= 2  # the check can fail: it sees mctx's copies
