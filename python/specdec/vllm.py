"""Rejection sampling in vLLM V1's packed layout, with numpy arrays (vLLM need not be installed).

vLLM's model runner lays the logits of a speculative step out as [N + B, V]: request b's n_b drafted
positions, then its bonus position, request after request (``target_logits_indices`` and
``bonus_logits_indices`` of its ``SpecDecodeMetadata``); ``draft_probs`` is [N, V] or None, and the
output is int32 [B, max_spec_len + 1] padded with -1. That is specdec's packed layout, so
``rejection_sample`` is ``specdec.verify_from_logits`` with vLLM's conventions:

- a request whose temperature is below 1e-5 (or every request when ``temperature`` is None) is
  verified greedily (accept while the draft is the target's argmax; emit the argmax);
- the others by the strict rule on the target rows warped with their temperature, top-k and top-p;
- ``draft_probs=None`` (greedy drafters: n-gram, EAGLE's default) means q is one-hot on the draft, as
  vLLM's ``draft_prob = 1``: accept x with probability p(x), else sample p with x removed.

Randomness differs from vLLM's on purpose: instead of a torch generator per seeded request, every
request brings (seed, request id, step), and its tokens do not depend on its batch.
Not built: a class with ``RejectionSampler.forward(metadata, draft_probs, logits, sampling_metadata)``
taking torch tensors, and its installation into vLLM (docs/python.md).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

import specdec

GREEDY_TEMPERATURE = 1e-5  # temperatures below this are greedy


class SpecDecodeIndices(NamedTuple):
    """Where each request's rows are in the logits [N + B, V]."""

    cu_num_draft_tokens: np.ndarray  # int64 [B], prefix sums of num_draft_tokens
    target_logits_indices: np.ndarray  # int64 [N], the rows of the drafted positions
    bonus_logits_indices: np.ndarray  # int64 [B], the bonus rows


def spec_decode_indices(num_draft_tokens) -> SpecDecodeIndices:
    """The index arrays of vLLM's ``SpecDecodeMetadata`` for drafts of these lengths."""
    nd = np.asarray(num_draft_tokens, dtype=np.int64)
    if nd.ndim != 1 or (nd < 0).any():
        raise ValueError("num_draft_tokens: expected a 1-D array of counts >= 0")
    cu_sampled = np.cumsum(nd + 1)
    first = cu_sampled - nd - 1  # each request's first row
    target = np.concatenate([np.arange(f, f + n) for f, n in zip(first, nd)] or [np.zeros(0, np.int64)])
    return SpecDecodeIndices(np.cumsum(nd), target.astype(np.int64), cu_sampled - 1)


def parse_output(output_token_ids, vocab_size: int) -> list[list[int]]:
    """Each request's emitted tokens: the -1 padding (and any id >= vocab_size) dropped."""
    t = np.asarray(output_token_ids)
    return [[int(x) for x in row if 0 <= x < vocab_size] for row in t]


def _one_hot_rows(draft_token_ids, V, dtype):
    """q one-hot on each draft (vLLM's draft_prob = 1); ids outside [0, V) get a zero row and are
    flagged by the verifier."""
    q = np.zeros((len(draft_token_ids), V), dtype=dtype)
    ok = (draft_token_ids >= 0) & (draft_token_ids < V)
    q[np.flatnonzero(ok), draft_token_ids[ok]] = 1.0
    return q


def rejection_sample(draft_token_ids, num_draft_tokens, draft_probs, logits, *, seeds, request_ids, steps,
                     temperature=None, top_k=None, top_p=None, backend=None, return_status=False):
    """vLLM-layout rejection sampling (see the module comment).

    draft_token_ids [N]; num_draft_tokens [B]; draft_probs [N, V] or None; logits [N + B, V]
    (float32/float64, C-contiguous, read in place); temperature, top_k, top_p: [B] or None (top_k 0
    and top_p 1 disable); seeds, request_ids, steps as ``specdec.verify``. Returns int32
    [B, max_spec_len + 1] padded with -1 (and the uint8 ``specdec.Status`` per request with
    ``return_status``). A batch that mixes greedy and sampled requests is verified as two
    sub-batches (their rows gathered, a copy); a request's tokens are the same either way.
    """
    drafts = np.asarray(draft_token_ids)
    nd = np.asarray(num_draft_tokens)
    if nd.ndim != 1:
        raise ValueError(f"num_draft_tokens: expected a 1-D array, got shape {nd.shape}")
    B = nd.shape[0]
    shape = specdec._shape("logits", logits)
    if len(shape) != 2:
        raise ValueError(f"logits: expected shape (N + B, V), got {shape}")
    V = shape[1]
    seeds = np.broadcast_to(np.asarray(seeds), (B,))
    steps = np.broadcast_to(np.asarray(steps), (B,))
    ids = np.asarray(request_ids)
    greedy = np.ones(B, bool) if temperature is None else np.asarray(temperature, np.float64) < GREEDY_TEMPERATURE
    if temperature is not None and np.asarray(temperature).shape != (B,):
        raise ValueError(f"temperature: expected shape ({B},), got {np.asarray(temperature).shape}")
    temp = np.ones(B) if temperature is None else np.where(greedy, 1.0, np.asarray(temperature, np.float64))
    top_k = np.zeros(B, np.int64) if top_k is None else np.asarray(top_k)
    top_p = np.ones(B) if top_p is None else np.asarray(top_p, np.float64)
    if draft_probs is None:
        draft_probs = _one_hot_rows(drafts.astype(np.int64), V, np.dtype(getattr(logits, "dtype", np.float32)))

    W = (int(nd.max()) if B else 0) + 1
    tokens = np.full((B, W), -1, np.int32)
    status = np.zeros(B, np.uint8)

    def run(rule, rows, r_drafts, r_q, r_logits, r_nd):
        kw = dict(num_drafts=r_nd, seeds=seeds[rows], request_ids=ids[rows], steps=steps[rows], backend=backend)
        if isinstance(rule, specdec.Strict):
            kw.update(temperature=temp[rows], top_k=top_k[rows], top_p=top_p[rows], draft_probs=r_q)
        r = specdec.verify_from_logits(rule, r_drafts, r_logits, **kw)
        tokens[rows, :r.tokens.shape[1]] = r.tokens
        status[rows] = r.status

    for rule, mask in ((specdec.Greedy(), greedy), (specdec.Strict(), ~greedy)):
        rows = np.flatnonzero(mask)
        if len(rows) == 0:
            continue
        if len(rows) == B:  # the whole batch: read the caller's arrays in place
            run(rule, rows, drafts, draft_probs, logits, nd)
            continue
        idx = spec_decode_indices(nd)
        starts = idx.cu_num_draft_tokens - nd
        draft_rows = np.concatenate([np.arange(starts[b], starts[b] + nd[b]) for b in rows]).astype(np.int64)
        logit_rows = np.concatenate([np.arange(idx.bonus_logits_indices[b] - nd[b], idx.bonus_logits_indices[b] + 1)
                                     for b in rows])
        run(rule, rows, drafts[draft_rows], np.ascontiguousarray(np.asarray(draft_probs)[draft_rows]),
            np.ascontiguousarray(np.asarray(logits)[logit_rows]), nd[rows])
    return (tokens, status) if return_status else tokens
