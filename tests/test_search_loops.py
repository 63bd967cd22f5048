"""The search loops: the same trees and policies as mctx's own loop, without its
per-level copies of the [B, N, A] arrays (``az.search.puct``'s loop, which also runs
``az.search.reference``) or without [B, N, A] arrays at all (``az.search.gumbel``'s
compact tree, K children per node); and sequential halving's schedule
(``az.search.halving``) as mctx's.

The model is synthetic and cheap to compile: a node's embedding is a random key, each
action's child draws its prior, value, reward and whether the game ended from it, so
trees are irregular (terminal nodes, revisits, roots with invalid actions).
"""

import functools
import re

import jax
import jax.numpy as jnp
import mctx
import numpy as np
import pytest

from az.search import gumbel, halving, puct, reference

B, A, N = 8, 12, 24  # roots, actions, simulations


def recurrent_fn(params, rng_key, action, embedding, num_actions=A):
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
        prior_logits=params * jax.vmap(lambda k: jax.random.normal(k, (num_actions,)))(logits_key),
        value=jnp.where(ended, 0.0, value),
    )
    return output, child


def make_root(num_actions=A):
    keys = jax.random.split(jax.random.key(5), 3)
    invalid = jax.random.bernoulli(keys[0], 0.3, (B, num_actions)).at[:, 0].set(False)
    invalid = invalid.at[1, 2:].set(True)  # a root with two legal moves: fewer than m considered
    root = mctx.RootFnOutput(
        prior_logits=jax.random.normal(keys[1], (B, num_actions)),
        value=jax.random.uniform(keys[2], (B,), minval=-1.0, maxval=1.0),
        embedding=jax.random.split(jax.random.key(9), B),
    )
    return root, invalid


PARAMS = jnp.float32(2.0)
POLICIES = {
    "gumbel": (
        lambda key, root, invalid: reference.full_tree_gumbel_muzero(
            PARAMS, key, root, recurrent_fn, num_simulations=N, invalid_actions=invalid, max_num_considered_actions=4),
        lambda key, root, invalid: mctx.gumbel_muzero_policy(PARAMS, key, root, recurrent_fn, num_simulations=N,
                                                             invalid_actions=invalid, max_num_considered_actions=4),
    ),
    # c_scale 1.0 (mctx's default is 0.1): Q outweighs the prior.
    "gumbel_value_scale": (
        lambda key, root, invalid: reference.full_tree_gumbel_muzero(
            PARAMS, key, root, recurrent_fn, num_simulations=N, invalid_actions=invalid, max_num_considered_actions=4,
            value_scale=1.0),
        lambda key, root, invalid: mctx.gumbel_muzero_policy(
            PARAMS, key, root, recurrent_fn, num_simulations=N, invalid_actions=invalid, max_num_considered_actions=4,
            qtransform=functools.partial(mctx.qtransform_completed_by_mix_value, value_scale=1.0)),
    ),
    "puct": (
        lambda key, root, invalid: puct.puct(PARAMS, key, root, recurrent_fn, num_simulations=N,
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


def test_full_tree__same_tree_and_policy_as_mctx(compiled):
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
        if name.startswith("gumbel"):
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


def test_full_tree__loop_copies_no_tree_sized_array(compiled):
    """mctx's batched backward copies visit and value arrays on every level; ours writes
    B values per level in place."""
    name, (ours, theirs) = compiled
    del name
    assert loop_copies_of_edge_arrays(ours) == 0
    assert loop_copies_of_edge_arrays(theirs) >= 2  # the check can fail: it sees mctx's copies


# The compact tree ----------------------------------------------------------------

WIDE = 64  # actions of the model for the compact tree: K = N_WIDE - 1 = 15 < WIDE slots
N_WIDE, M_WIDE = 16, 4


@pytest.fixture(scope="module")
def compact_and_mctx():
    """(compact, mctx) Gumbel searches, compiled for A = 64 actions (K = 15 < A)."""
    model = functools.partial(recurrent_fn, num_actions=WIDE)
    kw = dict(num_simulations=N_WIDE, max_num_considered_actions=M_WIDE)
    root, invalid = make_root(WIDE)
    fns = (lambda k, r, i: gumbel.gumbel_muzero(PARAMS, k, r, model, invalid_actions=i, **kw),
           lambda k, r, i: mctx.gumbel_muzero_policy(PARAMS, k, r, model, invalid_actions=i, **kw))
    return [jax.jit(fn).lower(jax.random.key(0), root, invalid).compile() for fn in fns]


def test_compact_tree__same_search_as_mctx(compact_and_mctx):
    ours, theirs = compact_and_mctx
    num_actions, sims = WIDE, N_WIDE
    root, invalid = make_root(num_actions)
    for seed in range(3):
        key = jax.random.key(seed)
        got, expected = ours(key, root, invalid), theirs(key, root, invalid)
        tree, tree_expected = got.search_tree, expected.search_tree
        assert tree.num_slots == min(num_actions, sims - 1)
        summary, summary_expected = gumbel.summarize(tree), tree_expected.summary()
        np.testing.assert_array_equal(got.action, expected.action)
        np.testing.assert_array_equal(summary.visit_counts, summary_expected.visit_counts)
        # The improved policy's sums run over K slots instead of A actions: float rounding.
        np.testing.assert_allclose(got.action_weights, expected.action_weights, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(summary.qvalues, summary_expected.qvalues, rtol=1e-6, atol=1e-6)
        for field in ("node_visits", "parents"):
            np.testing.assert_array_equal(getattr(tree, field), getattr(tree_expected, field), err_msg=field)
        for field in ("node_values", "raw_values"):
            np.testing.assert_allclose(getattr(tree, field), getattr(tree_expected, field), rtol=1e-6, atol=1e-6,
                                       err_msg=field)
        # Every expanded child sits in its parent's slot for its action.
        nodes = np.flatnonzero(np.asarray(tree_expected.parents[0]) >= 0)
        for node in nodes:
            parent, action = int(tree_expected.parents[0, node]), int(tree_expected.action_from_parent[0, node])
            slot = np.flatnonzero(np.asarray(tree.children_index[0, parent]) == node)
            assert slot.size == 1 and int(tree.children_actions[0, parent, slot[0]]) == action
    visits = np.asarray(summary.visit_counts)
    assert visits[1].max() > sims // 4, "the two-move root sends many visits to one child"
    assert np.asarray(tree.children_index >= 0).sum(axis=-1).max() >= 3, "some node has several children"


def test_compact_tree__value_scale_as_mctx_and_it_matters(compact_and_mctx):
    """c_scale 1.0 in the compact tree: mctx's search with that transform, and not the
    search at the default 0.1 (the knob reaches the selection and the improved policy)."""
    model = functools.partial(recurrent_fn, num_actions=WIDE)
    kw = dict(num_simulations=N_WIDE, max_num_considered_actions=M_WIDE)
    root, invalid = make_root(WIDE)
    key = jax.random.key(1)
    got = jax.jit(lambda k, r, i: gumbel.gumbel_muzero(PARAMS, k, r, model, invalid_actions=i, value_scale=1.0,
                                                       **kw))(key, root, invalid)
    qtransform = functools.partial(mctx.qtransform_completed_by_mix_value, value_scale=1.0)
    expected = jax.jit(lambda k, r, i: mctx.gumbel_muzero_policy(PARAMS, k, r, model, invalid_actions=i,
                                                                 qtransform=qtransform, **kw))(key, root, invalid)
    np.testing.assert_array_equal(got.action, expected.action)
    np.testing.assert_array_equal(gumbel.summarize(got.search_tree).visit_counts,
                                  expected.search_tree.summary().visit_counts)
    np.testing.assert_allclose(got.action_weights, expected.action_weights, rtol=1e-6, atol=1e-7)
    default = compact_and_mctx[0](key, root, invalid)
    assert np.abs(np.asarray(default.action_weights) - np.asarray(got.action_weights)).max() > 1e-2
    assert (np.asarray(default.action_weights).max(-1) < np.asarray(got.action_weights).max(-1)).all(), \
        "a larger c_scale sharpens the improved policy"


def test_compact_tree__reserved_actions_are_considered_however_low_their_prior():
    """``num_reserved`` 2 of a class (shogi's drops) whose prior sits 30 logits below the
    rest: the two best of them by gumbel + logit get the first round's visit each; without
    the reservation none is visited."""
    model = functools.partial(recurrent_fn, num_actions=WIDE)
    root, invalid = make_root(WIDE)
    reserved = np.arange(WIDE) >= 48
    root = root.replace(prior_logits=root.prior_logits - 30.0 * reserved)
    key = jax.random.key(3)

    def visits(num_reserved):
        out = gumbel.gumbel_muzero(PARAMS, key, root, model, invalid_actions=invalid, num_simulations=N_WIDE,
                                   max_num_considered_actions=M_WIDE, reserved=((reserved, num_reserved),))
        return np.asarray(gumbel.summarize(out.search_tree).visit_counts)

    assert visits(0)[:, reserved].sum() == 0
    got = visits(2)
    noise = jax.random.gumbel(jax.random.split(key)[1], root.prior_logits.shape)  # the search's own noise
    scores = np.where(np.asarray(invalid) | ~reserved, -np.inf, np.asarray(noise + root.prior_logits))
    for row in range(scores.shape[0]):
        valid = int(np.isfinite(scores[row]).sum())
        if valid == 0:
            assert got[row, reserved].sum() == 0
            continue
        best = set(np.argsort(-scores[row])[: min(2, valid)].tolist())
        assert set(np.flatnonzero(got[row] * reserved).tolist()) == best, row
    with pytest.raises(ValueError, match="num_reserved 2 needs reserved_actions"):
        gumbel.gumbel_muzero(PARAMS, key, root, model, invalid_actions=invalid, num_simulations=N_WIDE,
                             max_num_considered_actions=M_WIDE, reserved=((None, 2),))


def test_compact_tree__two_reserved_classes_one_per_root():
    """Two classes at once, the second a mask per root [B, A] (shogi's captures): each
    class's best valid actions by gumbel + logit are considered, a root with one valid
    action of a class lifts just that one, and the rest of the m slots go by gumbel + logit."""
    model = functools.partial(recurrent_fn, num_actions=WIDE)
    root, invalid = make_root(WIDE)
    first = np.arange(WIDE) >= 56
    rng = np.random.default_rng(0)
    second = (rng.random((root.value.shape[0], WIDE)) < 0.1) & ~first[None]
    second[0] = False
    second[0, 5] = True  # one action of the class in the first root
    low = first[None] | second
    root = root.replace(prior_logits=root.prior_logits - 30.0 * low)
    key = jax.random.key(4)
    out = gumbel.gumbel_muzero(PARAMS, key, root, model, invalid_actions=invalid, num_simulations=N_WIDE,
                               max_num_considered_actions=6, reserved=((first, 2), (jnp.asarray(second), 2)))
    got = np.asarray(gumbel.summarize(out.search_tree).visit_counts) > 0
    noise = jax.random.gumbel(jax.random.split(key)[1], root.prior_logits.shape)
    scores = np.where(np.asarray(invalid), -np.inf, np.asarray(noise + root.prior_logits))
    for row in range(scores.shape[0]):
        lifted = set()
        for mask in (first, second[row]):
            class_scores = np.where(mask, scores[row], -np.inf)
            lifted |= set(np.argsort(-class_scores)[: min(2, int(np.isfinite(class_scores).sum()))].tolist())
        others = np.where(np.isin(np.arange(WIDE), list(lifted)), -np.inf, scores[row])
        free = min(6, int(np.isfinite(scores[row]).sum())) - len(lifted)
        expected = lifted | set(np.argsort(-others)[:free].tolist())
        assert set(np.flatnonzero(got[row]).tolist()) == expected, row


def test_compact_tree__slots_cover_the_most_visited_node():
    """K = min(A, max(m, n - 1)): a root with one legal move sends all n simulations to
    one child, whose n - 1 can all go to different actions."""
    assert gumbel.num_slots(2187, 64, 16) == 63
    assert gumbel.num_slots(2187, 8, 16) == 16
    assert gumbel.num_slots(12, 24, 4) == 12


def test_compact_tree__backward_is_the_sequential_backup():
    """The associative scan over a path gives what a walk from the leaf to the root
    gives, with rewards and discounts that are not ±1 or 0."""
    rng = np.random.default_rng(0)
    batch, nodes, width = 4, 9, 9
    depth = np.array([1, 3, 5, 8])
    path = np.zeros((batch, width), np.int32)
    for b in range(batch):
        path[b, 1: depth[b] + 1] = rng.permutation(np.arange(1, nodes))[: depth[b]]
    values, visits = rng.normal(size=(batch, nodes)).astype(np.float32), rng.integers(1, 5, (batch, nodes))
    rewards, discounts = rng.normal(size=(batch, nodes)).astype(np.float32), rng.normal(size=(batch, nodes))
    tree = gumbel.CompactTree(
        node_visits=jnp.asarray(visits, jnp.int32), raw_values=jnp.asarray(values), node_values=jnp.asarray(values),
        parents=None, rewards=jnp.asarray(rewards), discounts=jnp.asarray(discounts, jnp.float32), other_prior=None,
        children_index=None, children_actions=None, children_priors=None, root_scores=None, root_valid=None,
        root_invalid_actions=None, embeddings=None)
    got = gumbel._backward(tree, jnp.asarray(path), jnp.asarray(depth, jnp.int32))
    expected_values, expected_visits = values.astype(np.float64), visits.copy()
    for b in range(batch):
        g = values[b, path[b, depth[b]]]
        for j in range(depth[b] - 1, -1, -1):
            below, node = path[b, j + 1], path[b, j]
            g = rewards[b, below] + discounts[b, below] * g
            expected_values[b, node] = (values[b, node] * visits[b, node] + g) / (visits[b, node] + 1)
            expected_visits[b, node] += 1
    np.testing.assert_array_equal(got.node_visits, expected_visits)
    np.testing.assert_allclose(got.node_values, expected_values, rtol=1e-5, atol=1e-5)
    assert (np.asarray(got.node_values) != values).sum() == depth.sum()  # the leaf and other nodes unchanged


def test_halving__first_visits_lengthens_only_the_first_phase():
    """m = 8: at n = 16, two rounds of all eight spend every simulation (mctx: eight, four,
    then two actions); at n = 40 the later phases keep mctx's rounds; at n = 64 the first
    phase already has two rounds, so the schedule is mctx's."""
    assert halving.considered_visits(8, 16, 2) == (0,) * 8 + (1,) * 8
    assert halving.considered_visits(8, 16) == (0,) * 8 + (1,) * 4 + (2, 2, 3, 3)
    expected = [0] * 8 + [1] * 8 + [2] * 4 + [3] * 4 + [4] * 4 + sum(([v] * 2 for v in range(5, 11)), [])
    assert halving.considered_visits(8, 40, 2) == tuple(expected)
    assert halving.considered_visits(8, 64, 2) == halving.considered_visits(8, 64)
    assert halving.considered_visits(8, 12, 2) == (0,) * 8 + (1,) * 4  # n short of two rounds: the best four
    table = halving.considered_visits_table(8, 16, 2)
    assert table.shape == (9, 16) and tuple(table[8]) == (0,) * 8 + (1,) * 8


@pytest.mark.parametrize("max_num_considered_actions", [0, 1, 2, 3, 4, 5, 7, 8, 16, 17, 32])
def test_halving__considered_visits_as_mctx(max_num_considered_actions):
    """The visit schedule of sequential halving, written here, against mctx's own table
    (mctx's private module, imported as an oracle in this test only)."""
    from mctx._src import seq_halving

    for num_simulations in (1, 2, 3, 4, 7, 8, 15, 16, 24, 32, 50, 64, 100, 128, 200, 800):
        got = halving.considered_visits_table(max_num_considered_actions, num_simulations)
        expected = np.asarray(seq_halving.get_table_of_considered_visits(max_num_considered_actions, num_simulations))
        assert got.shape == (max_num_considered_actions + 1, num_simulations)
        np.testing.assert_array_equal(got, expected, err_msg=f"m={max_num_considered_actions}, n={num_simulations}")
