"""specdec.vllm: vLLM V1's packed layout, greedy and sampled requests, one-hot q for greedy drafts."""

import numpy as np
import pytest

import specdec
from specdec import vllm
from conftest import chi2_critical, chi2_statistic


def test_indices_of_vllms_worked_example():
    # vLLM's _calc_spec_decode_metadata example: num_draft_tokens [3, 0, 2, 0, 1]
    idx = vllm.spec_decode_indices([3, 0, 2, 0, 1])
    assert idx.cu_num_draft_tokens.tolist() == [3, 3, 5, 5, 6]
    assert idx.target_logits_indices.tolist() == [0, 1, 2, 5, 6, 9]
    assert idx.bonus_logits_indices.tolist() == [3, 4, 7, 8, 10]


def batch(rng, nd, V=30):
    N, B = int(sum(nd)), len(nd)
    logits = rng.standard_normal((N + B, V)) * 2
    q = specdec.softmax(rng.standard_normal((N, V)))
    drafts = np.array([rng.choice(V, p=row) for row in q], dtype=np.int64)
    return drafts, q, logits


def test_sampled_requests_are_verify_from_logits_on_the_packed_layout():
    rng = np.random.default_rng(1)
    nd = np.array([3, 0, 2, 0, 1])
    drafts, q, logits = batch(rng, nd)
    kw = dict(seeds=5, request_ids=np.arange(5) + 100, steps=2)
    t = np.array([0.7, 1.0, 1.3, 0.9, 1.0])
    out = vllm.rejection_sample(drafts, nd, q, logits, temperature=t, top_k=[0, 5, 10, 0, 3], top_p=[1, 0.9, 1, 1, 0.8],
                                **kw)
    ref = specdec.verify_from_logits(specdec.Strict(), drafts, logits, draft_probs=q, num_drafts=nd, temperature=t,
                                     top_k=[0, 5, 10, 0, 3], top_p=[1, 0.9, 1, 1, 0.8], **kw)
    assert out.dtype == np.int32 and out.shape == (5, 4)
    np.testing.assert_array_equal(out, ref.tokens)
    assert vllm.parse_output(out, 30) == [ref.emitted(b) for b in range(5)]


def test_greedy_equals_greedy_target_only_decoding():
    rng = np.random.default_rng(2)
    nd = np.array([4, 1, 0, 3])
    drafts, _, logits = batch(rng, nd, V=6)  # a small V: drafts often match the argmax
    out = vllm.rejection_sample(drafts, nd, None, logits, temperature=np.zeros(4), seeds=0, request_ids=np.arange(4),
                                steps=0)
    idx = vllm.spec_decode_indices(nd)
    starts = idx.cu_num_draft_tokens - nd
    for b in range(4):
        rows = logits[idx.bonus_logits_indices[b] - nd[b]: idx.bonus_logits_indices[b] + 1]
        expected = []
        for i in range(nd[b] + 1):  # target-only greedy decoding, stopped where the drafts diverge
            expected.append(int(rows[i].argmax()))
            if i == nd[b] or drafts[starts[b] + i] != expected[-1]:
                break
        assert vllm.parse_output(out[b:b + 1], 6)[0] == expected


def test_a_mixed_batch_gives_each_request_its_own_tokens():
    rng = np.random.default_rng(3)
    nd = np.array([2, 3, 1, 2, 0, 2])
    drafts, q, logits = batch(rng, nd)
    t = np.array([0.0, 0.8, 0.0, 1.2, 1.0, 0.0])
    kw = dict(seeds=np.arange(6) * 11, request_ids=np.arange(6) + 7, steps=np.arange(6))
    mixed = vllm.rejection_sample(drafts, nd, q, logits, temperature=t, **kw)
    idx = vllm.spec_decode_indices(nd)
    starts = idx.cu_num_draft_tokens - nd
    for b in range(6):
        d = slice(starts[b], starts[b] + nd[b])
        rows = slice(idx.bonus_logits_indices[b] - nd[b], idx.bonus_logits_indices[b] + 1)
        alone = vllm.rejection_sample(drafts[d], nd[b:b + 1], q[d], logits[rows], temperature=t[b:b + 1],
                                      seeds=kw["seeds"][b], request_ids=kw["request_ids"][b:b + 1],
                                      steps=kw["steps"][b])
        assert alone[0].tolist() == mixed[b, :nd[b] + 1].tolist()
    assert (mixed[4, 1:] == -1).all()


@pytest.mark.parametrize("draft", [0, 3])
def test_one_hot_q_for_greedy_drafts_emits_the_warped_target_law(draft):
    # A deterministic drafter (q one-hot, vLLM's draft_prob = 1): the first emitted token is distributed
    # as the target's warped row whatever the draft, here with temperature 0.7 and top-k 4.
    logits = np.log(np.array([0.05, 0.3, 0.1, 0.35, 0.15, 0.05]))
    n = 20_000
    out = vllm.rejection_sample(np.full(n, draft), np.ones(n, np.int64), None,
                                np.tile(np.stack([logits, logits]), (n, 1)), temperature=np.full(n, 0.7),
                                top_k=np.full(n, 4), seeds=3, request_ids=np.arange(n), steps=0)
    counts = np.bincount(out[:, 0], minlength=6)
    warped = specdec.warp_logits(logits, temperature=0.7, top_k=4)
    stat, dof = chi2_statistic(counts, warped)
    assert stat < chi2_critical(dof), stat
    # negative control: the unwarped target law is rejected
    stat, dof = chi2_statistic(counts, np.exp(logits))
    assert stat > chi2_critical(dof), stat


def test_bad_draft_ids_are_flagged_not_raised():
    logits = np.zeros((3, 4))
    out, status = vllm.rejection_sample(np.array([7, 1]), [1, 1], None, np.zeros((4, 4)), temperature=[1.0, 1.0],
                                        seeds=0, request_ids=[0, 1], steps=0, return_status=True)
    assert status[0] == specdec.Status.BAD_DRAFT_TOKEN and out[0].tolist() == [-1, -1]
    assert specdec.is_valid(status[1])
    with pytest.raises(ValueError, match="logits: expected shape"):
        vllm.rejection_sample(np.array([1]), [1], None, logits[None], seeds=0, request_ids=[0], steps=0)
