"""specdec.verify_tree: token trees given by parents. Hand-computed greedy walks, chains as one-branch
trees, batch invariance, the emitted law of every lossless tree rule (chi-squared, through the
Python API) with a negative control that must fail, and the refusals. Parity with the C++ API is in
test_cpp_parity.py."""

import numpy as np
import pytest

import specdec
from conftest import chi2_critical, chi2_statistic, random_rows, sample_from


def test_greedy_walks_down_the_argmax_children(backend):
    # root -> 1 (token 1), 2 (token 2); 2 -> 3 (token 3). argmax p: root 2, node 2 -> 3, node 3 -> 0.
    parents = np.array([-1, 0, 0, 2])
    tokens = np.array([-1, 1, 2, 3])
    p = np.full((4, 4), 0.1, np.float32)
    p[0, 2] = p[1, 1] = p[2, 3] = p[3, 0] = 0.7
    r = specdec.verify_tree(specdec.Greedy(), parents, tokens, None, p, seeds=0, request_ids=[0], steps=0,
                            backend=backend)
    assert r.emitted(0) == [2, 3, 0]
    assert r.path[0].tolist() == [0, 2, 3]
    assert r.num_accepted.tolist() == [2] and r.status.tolist() == [0]


def test_a_rejected_root_emits_one_token_and_pads_the_path(backend):
    parents = np.array([-1, 0, 0, 1])
    tokens = np.array([-1, 0, 1, 2])
    p = np.full((4, 3), 0.1, np.float64)
    p[:, 2] = 0.8  # argmax 2 everywhere: neither child of the root (tokens 0, 1) is accepted
    r = specdec.verify_tree(specdec.Greedy(), parents, tokens, None, p, seeds=0, request_ids=[0], steps=0,
                            backend=backend)
    assert r.tokens[0].tolist() == [2, -1, -1] and r.path[0].tolist() == [0, -1, -1]
    assert r.num_accepted[0] == 0


def test_an_empty_batch_of_trees(backend):
    r = specdec.verify_tree(specdec.Strict(), [], [], np.zeros((0, 5)), np.zeros((0, 5)), seeds=0, request_ids=[],
                            steps=0, backend=backend)
    assert r.tokens.shape == (0, 1) and r.path.shape == (0, 1) and r.num_accepted.shape == (0,)


@pytest.mark.parametrize("rule", [specdec.Strict(), specdec.Greedy(), specdec.SampleAndMatch(), specdec.Typical()],
                         ids=repr)
def test_a_chain_as_a_one_branch_tree_gives_the_chain_tokens(rule, backend):
    rng = np.random.default_rng(5)
    B, n, V = 64, 4, 7
    q = random_rows(rng, (B, n, V), np.float64)
    p = random_rows(rng, (B, n + 1, V), np.float64)
    drafts = sample_from(rng, q).astype(np.int32)
    streams = dict(seeds=rng.integers(0, 2**63, B, dtype=np.uint64), request_ids=np.arange(B) * 3 + 1, steps=4)
    chain = specdec.verify(rule, drafts, q, p, backend=backend, **streams)
    parents = np.tile(np.arange(-1, n), (B, 1))  # [B, n + 1]: node i's parent is i - 1
    tokens = np.concatenate([np.full((B, 1), -1), drafts], axis=1)
    q_nodes = np.concatenate([q, random_rows(rng, (B, 1, V), np.float64)], axis=1)  # the leaf's row is never read
    tree = specdec.verify_tree(rule, parents, tokens, q_nodes, p, backend=backend, **streams)
    np.testing.assert_array_equal(tree.tokens, chain.tokens)
    np.testing.assert_array_equal(tree.num_accepted, chain.num_accepted)
    np.testing.assert_array_equal(tree.status, chain.status)
    for b in range(B):
        k = chain.num_accepted[b]
        assert tree.path[b].tolist() == list(range(k + 1)) + [-1] * (n - k)
    assert 0 < chain.num_accepted.sum() < B * n  # some accepted, some rejected


def test_a_tree_alone_equals_the_tree_in_a_shuffled_batch(backend):
    rng = np.random.default_rng(9)
    B, V = 30, 9
    num_nodes = rng.integers(1, 8, B)
    trees = []
    for n in num_nodes:
        parents = np.array([-1] + [int(rng.integers(0, i)) for i in range(1, n)])
        q = random_rows(rng, (n, V), np.float32)
        tokens = np.array([-1] + [int(sample_from(rng, q[parents[i]])) for i in range(1, n)])
        trees.append((parents, tokens, q, random_rows(rng, (n, V), np.float32)))
    seeds = rng.integers(0, 2**63, B, dtype=np.uint64)
    ids = rng.permutation(10**6)[:B]

    def run(order):
        cat = [np.concatenate([trees[b][k] for b in order]) for k in range(4)]
        return specdec.verify_tree(specdec.Strict(), cat[0], cat[1], cat[2], cat[3], num_nodes=num_nodes[order],
                                   seeds=seeds[order], request_ids=ids[order], steps=2, backend=backend)

    order = rng.permutation(B)
    batch = run(order)
    for row, b in enumerate(order):
        alone = run(np.array([b]))
        assert batch.emitted(row) == alone.emitted(0)
        assert batch.num_accepted[row] == alone.num_accepted[0]


# ---- the law of the first emitted token: p, whatever the siblings, for the lossless rules ----------

P = np.array([0.5, 0.3, 0.1, 0.05, 0.03, 0.02])
Q = P[::-1].copy()  # far from p: most siblings are rejected
K = 3  # children of the root


def one_level_trees(rng, siblings, B):
    """B trees of a root and K children whose tokens `siblings(rng, B)` chooses ([B, K]); the root's
    rows are P and Q, the children's target rows random (their bonus tokens are not tested)."""
    V = len(P)
    tokens = np.concatenate([np.full((B, 1), -1), siblings(rng, B)], axis=1)
    p = np.concatenate([np.broadcast_to(P, (B, 1, V)), random_rows(rng, (B, K, V))], axis=1).astype(np.float64)
    q = np.concatenate([np.broadcast_to(Q, (B, 1, V)), random_rows(rng, (B, K, V))], axis=1).astype(np.float64)
    parents = np.tile([-1] + [0] * K, (B, 1))
    return parents, tokens, np.ascontiguousarray(q), np.ascontiguousarray(p)


def iid(rng, B):
    return sample_from(rng, np.broadcast_to(Q, (B, K, len(Q))))


def without_replacement(rng, B):
    # Gumbel top-k: the order of the k largest log q + Gumbel is sequential sampling without replacement
    keys = np.log(Q) + rng.gumbel(size=(B, len(Q)))
    return np.argsort(-keys, axis=1)[:, :K]


def top_k_of_q(rng, B):
    return np.tile(np.argsort(-Q, kind="stable")[:K], (B, 1))


def first_token_statistic(rule, siblings, seed, B=20000):
    rng = np.random.default_rng(seed)
    parents, tokens, q, p = one_level_trees(rng, siblings, B)
    r = specdec.verify_tree(rule, parents, tokens, q, p, seeds=seed, request_ids=np.arange(B), steps=0)
    assert specdec.is_valid(r.status).all()
    counts = np.bincount(r.tokens[:, 0], minlength=len(P))
    assert 0 < (r.num_accepted > 0).sum() < B  # the test sees both outcomes
    return chi2_statistic(counts, P)


@pytest.mark.parametrize("rule, siblings", [
    (specdec.Strict(), iid), (specdec.KSeq(), iid), (specdec.RecursiveRejection(), without_replacement),
    (specdec.TargetOnly(), top_k_of_q), (specdec.SampleAndMatch(), top_k_of_q)],
    ids=lambda x: getattr(x, "__name__", repr(x)))
def test_lossless_tree_rules_emit_the_target_law(rule, siblings):
    stat, dof = first_token_statistic(rule, siblings, seed=31)
    assert stat < chi2_critical(dof), (stat, dof)


def test_negative_control_strict_on_siblings_not_drawn_from_q_fails():
    # multi-step sampling assumes i.i.d. siblings from q; the top-k of q breaks the law
    stat, dof = first_token_statistic(specdec.Strict(), top_k_of_q, seed=31)
    assert stat > chi2_critical(dof), (stat, dof)


# ---- refusals -------------------------------------------------------------------------------------


def small_tree(V=3):
    return np.array([-1, 0, 0]), np.array([-1, 0, 1]), np.full((3, V), 1 / V), np.full((3, V), 1 / V)


def test_chain_only_and_tree_only_rules_are_refused_where_they_do_not_apply():
    parents, tokens, q, p = small_tree()
    for rule in (specdec.Lenient(0.5), specdec.Block()):
        with pytest.raises(TypeError, match="rule"):
            specdec.verify_tree(rule, parents, tokens, q, p, seeds=0, request_ids=[0], steps=0)
    for rule in (specdec.RecursiveRejection(), specdec.KSeq(), specdec.TargetOnly()):
        with pytest.raises(TypeError, match="rule"):
            specdec.verify(rule, np.array([[0]]), np.full((1, 1, 3), 1 / 3), np.full((1, 2, 3), 1 / 3), seeds=0,
                           request_ids=[0], steps=0)


def test_malformed_trees_and_shapes_are_errors_naming_the_argument():
    parents, tokens, q, p = small_tree()
    call = dict(seeds=0, request_ids=[0], steps=0)
    with pytest.raises(specdec.Error, match="parent"):  # node 1's parent is not an earlier node
        specdec.verify_tree(specdec.Strict(), np.array([-1, 2, 0]), tokens, q, p, **call)
    with pytest.raises(specdec.Error, match="root"):
        specdec.verify_tree(specdec.Strict(), np.array([0, 0, 0]), tokens, q, p, **call)
    with pytest.raises(ValueError, match="target_probs"):
        specdec.verify_tree(specdec.Strict(), parents, tokens, q, p[:2], **call)
    with pytest.raises(ValueError, match="draft_probs"):
        specdec.verify_tree(specdec.Strict(), parents, tokens, q[:, :2], p, **call)
    with pytest.raises(ValueError, match="draft_probs"):  # Strict reads q
        specdec.verify_tree(specdec.Strict(), parents, tokens, None, p, **call)
    with pytest.raises(ValueError, match="tokens"):
        specdec.verify_tree(specdec.Strict(), parents, tokens[:2], q, p, **call)
    with pytest.raises(ValueError, match="num_nodes"):
        specdec.verify_tree(specdec.Strict(), parents, tokens, q, p, num_nodes=[2, 2], seeds=0, request_ids=[0, 1],
                            steps=0)
    with pytest.raises(ValueError, match="num_nodes"):
        specdec.verify_tree(specdec.Strict(), parents[None], tokens[None], q[None], p[None], num_nodes=[3], **call)
    with pytest.raises(ValueError, match="request_ids"):
        specdec.verify_tree(specdec.Strict(), parents, tokens, q, p, seeds=0, request_ids=[0, 1], steps=0)
    with pytest.raises(TypeError, match="target_probs"):
        specdec.verify_tree(specdec.Strict(), parents, tokens, q, p.astype(np.float16), **call)
    with pytest.raises(TypeError, match="parents"):
        specdec.verify_tree(specdec.Strict(), parents.astype(float), tokens, q, p, **call)


# ---- verify_tree_from_logits: the first token's law is the warped target row (chi-squared at fixed
# seeds, a false-failure rate of about 1e-4 each; the negative control must fail) ----------------------

WARP = dict(temperature=0.7, top_k=4)  # on the root: P's two smallest entries cut, the rest sharpened


def first_token_statistic_from_logits(rule, siblings, seed, law, B=20000):
    """As first_token_statistic, with the target rows given as logits (log P at the root) and warped
    with WARP; the statistic is against `law`."""
    rng = np.random.default_rng(seed)
    parents, tokens, q, p = one_level_trees(rng, siblings, B)
    r = specdec.verify_tree_from_logits(rule, parents, tokens, q, np.log(p), seeds=seed, request_ids=np.arange(B),
                                        steps=0, **WARP)
    assert specdec.is_valid(r.status).all()
    assert 0 < (r.num_accepted > 0).sum() < B
    return chi2_statistic(np.bincount(r.tokens[:, 0], minlength=len(P)), law)


@pytest.mark.parametrize("rule, siblings", [
    (specdec.Strict(), iid), (specdec.KSeq(), iid), (specdec.RecursiveRejection(), without_replacement),
    (specdec.TargetOnly(), top_k_of_q), (specdec.SampleAndMatch(), top_k_of_q)],
    ids=lambda x: getattr(x, "__name__", repr(x)))
def test_tree_rules_from_logits_emit_the_warped_target_law(rule, siblings):
    warped = specdec.warp_logits(np.log(P), **WARP)
    assert (warped[4:] == 0).all()  # the warp does cut the tail
    stat, dof = first_token_statistic_from_logits(rule, siblings, 32, warped)
    assert stat < chi2_critical(dof), (stat, dof)


def test_negative_control_tree_from_logits_is_not_the_unwarped_law():
    # the same run tested against P itself (the warp ignored) must fail
    stat, dof = first_token_statistic_from_logits(specdec.Strict(), iid, 32, P)
    assert stat > chi2_critical(dof), (stat, dof)


def test_tree_from_logits_without_a_warp_is_verify_tree_on_the_softmax(backend):
    rng = np.random.default_rng(40)
    parents, tokens, q, p = one_level_trees(rng, iid, 200)
    logits = np.log(p) + rng.uniform(-3, 3, (200, 1, 1))  # a constant shift per row: the same softmax
    kw = dict(seeds=4, request_ids=np.arange(200), steps=1, backend=backend)
    a = specdec.verify_tree_from_logits(specdec.Strict(), parents, tokens, q, logits, **kw)
    b = specdec.verify_tree(specdec.Strict(), parents, tokens, q, specdec.softmax(logits.reshape(-1, len(P))).reshape(
        p.shape), **kw)
    np.testing.assert_array_equal(a.tokens, b.tokens)
    np.testing.assert_array_equal(a.num_accepted, b.num_accepted)


def test_tree_from_logits_refusals_name_the_argument():
    parents, tokens, q, p = small_tree()
    call = dict(seeds=0, request_ids=[0], steps=0)
    with pytest.raises(ValueError, match="target_logits"):
        specdec.verify_tree_from_logits(specdec.Strict(), parents, tokens, q, p[:2], **call)
    with pytest.raises(TypeError, match="target_logits"):
        specdec.verify_tree_from_logits(specdec.Strict(), parents, tokens, q, p.astype(np.float16), **call)
    with pytest.raises(ValueError, match="temperature"):
        specdec.verify_tree_from_logits(specdec.Strict(), parents, tokens, q, p, temperature=[1.0, 1.0], **call)
    with pytest.raises(ValueError, match="top_k"):
        specdec.verify_tree_from_logits(specdec.Strict(), parents, tokens, q, p, top_k=-1, **call)
    with pytest.raises(TypeError, match="draft_probs"):
        specdec.verify_tree_from_logits(specdec.Strict(), parents, tokens, q.astype(np.float32), p, **call)
