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

``RejectionSampler`` has the call shape of vLLM V1's class: ``forward(metadata, draft_probs, logits,
sampling_metadata)`` reads vLLM's ``SpecDecodeMetadata`` and ``SamplingMetadata`` fields (any
objects with those attribute names) and returns ``SamplerOutput(sampled_token_ids,
logprobs_tensors=None)``; ``install(runner)`` puts it in place of a V1 model runner's
``rejection_sampler`` (docs/python.md, "Swapping it into vLLM").
"""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING, Any, Iterable, NamedTuple, Optional, Union

import numpy as np

import specdec

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

GREEDY_TEMPERATURE = 1e-5  # temperatures below this are greedy


class SpecDecodeIndices(NamedTuple):
    """Where each request's rows are in the logits [N + B, V]."""

    cu_num_draft_tokens: np.ndarray  # int64 [B], prefix sums of num_draft_tokens
    target_logits_indices: np.ndarray  # int64 [N], the rows of the drafted positions
    bonus_logits_indices: np.ndarray  # int64 [B], the bonus rows


def spec_decode_indices(num_draft_tokens: ArrayLike) -> SpecDecodeIndices:
    """The index arrays of vLLM's ``SpecDecodeMetadata`` for drafts of these lengths."""
    nd = np.asarray(num_draft_tokens, dtype=np.int64)
    if nd.ndim != 1 or (nd < 0).any():
        raise ValueError("num_draft_tokens: expected a 1-D array of counts >= 0")
    cu_sampled = np.cumsum(nd + 1)
    first = cu_sampled - nd - 1  # each request's first row
    target = np.concatenate([np.arange(f, f + n) for f, n in zip(first, nd)] or [np.zeros(0, np.int64)])
    return SpecDecodeIndices(np.cumsum(nd), target.astype(np.int64), cu_sampled - 1)


def parse_output(output_token_ids: ArrayLike, vocab_size: int) -> list[list[int]]:
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


def rejection_sample(draft_token_ids: ArrayLike, num_draft_tokens: ArrayLike, draft_probs: Optional[ArrayLike],
                     logits: ArrayLike, *, seeds: ArrayLike, request_ids: ArrayLike, steps: ArrayLike,
                     temperature: Optional[ArrayLike] = None, top_k: Optional[ArrayLike] = None,
                     top_p: Optional[ArrayLike] = None, backend: Optional[str] = None,
                     return_status: bool = False) -> Union[np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """vLLM-layout rejection sampling (see the module comment).

    draft_token_ids [N]; num_draft_tokens [B]; draft_probs [N, V] or None; logits [N + B, V]
    (float32/float64, C-contiguous, read in place); temperature, top_k, top_p: [B] or None (top_k 0
    and top_p 1 disable); seeds, request_ids, steps as ``specdec.verify``. Returns int32
    [B, max_spec_len + 1] padded with -1 (and the uint8 ``specdec.Status`` per request with
    ``return_status``). A batch that mixes greedy and sampled requests is verified as two
    sub-batches (their rows gathered, a copy); a request's tokens are the same either way.
    """
    greedy = None
    if temperature is not None:
        t = np.asarray(temperature)
        if t.ndim != 1:
            raise ValueError(f"temperature: expected a 1-D array, got shape {t.shape}")
        greedy = t.astype(np.float64) < GREEDY_TEMPERATURE
    return _rejection_sample(draft_token_ids, num_draft_tokens, draft_probs, logits, greedy, seeds=seeds,
                             request_ids=request_ids, steps=steps, temperature=temperature, top_k=top_k, top_p=top_p,
                             backend=backend, return_status=return_status)


def _rejection_sample(draft_token_ids, num_draft_tokens, draft_probs, logits, greedy, *, seeds, request_ids, steps,
                      temperature, top_k, top_p, backend, return_status):
    """rejection_sample with the greedy requests given by a mask (None: all of them)."""
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
    if greedy is None:
        greedy = np.ones(B, bool)
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


# ---- vLLM V1's RejectionSampler call shape ----------------------------------------------------------


class SamplerOutput(NamedTuple):
    """vLLM's ``SamplerOutput``: ``sampled_token_ids`` int32 [B, max_spec_len + 1] padded with -1
    (a torch tensor when the logits were one, else numpy); ``logprobs_tensors`` is always None
    (logprobs are not computed)."""

    sampled_token_ids: object
    logprobs_tensors: object = None


def _seed_of(generator, name):
    """A request's seed from vLLM's per-request generator (a ``torch.Generator`` seeded with the
    request's ``SamplingParams.seed``: its ``initial_seed()``), or an int given directly."""
    if isinstance(generator, (int, np.integer)) and not isinstance(generator, bool):
        seed = int(generator)
    elif callable(getattr(generator, "initial_seed", None)):
        seed = int(generator.initial_seed())
    else:
        raise TypeError(f"{name}: expected a torch.Generator (its initial_seed() is the request's seed) or an int, "
                        f"got {type(generator).__name__}")
    if not 0 <= seed < 2**64:
        raise ValueError(f"{name}: seed {seed} does not fit in uint64")
    return seed


def _request_key(rid):
    """A request id as specdec's uint32 request number: ints as they are, strings (vLLM's ``req_id``)
    by CRC-32 of their UTF-8 bytes (stable across processes, unlike ``hash``)."""
    if isinstance(rid, (int, np.integer)) and not isinstance(rid, bool):
        if not 0 <= int(rid) < 2**32:
            raise ValueError(f"request_ids: {rid} does not fit in uint32 (pass strings to have them hashed)")
        return int(rid)
    if isinstance(rid, str):
        return zlib.crc32(rid.encode("utf-8"))
    raise TypeError(f"request_ids: expected ints or strings, got {type(rid).__name__}")


def _host(x, name):
    """A small metadata array (token ids, counts, temperatures) as numpy: numpy-convertible values,
    or a tensor that has ``.cpu()`` (a torch tensor on any device, copied to the host)."""
    if x is None:
        return None
    if not isinstance(x, np.ndarray) and callable(getattr(x, "cpu", None)):
        x = x.cpu()
        x = x.numpy() if callable(getattr(x, "numpy", None)) else x
    a = np.asarray(x)
    if a.dtype == object:
        raise TypeError(f"{name}: expected a numeric array, got {type(x).__name__}")
    return a


class RejectionSampler:
    """vLLM V1's ``RejectionSampler`` call shape over specdec's verifier (CPU, numpy or DLPack rows).

    ``forward(metadata, draft_probs, logits, sampling_metadata)`` (also ``__call__``):

    - ``metadata``: vLLM's ``SpecDecodeMetadata`` fields ``draft_token_ids`` [N],
      ``num_draft_tokens`` (list of B counts), ``cu_num_draft_tokens`` [B] (inclusive prefix sums) and,
      when present, ``target_logits_indices`` [N] and ``bonus_logits_indices`` [B], which must be
      the packed layout (request b's n_b rows then its bonus row); ``max_spec_len`` sizes the output.
    - ``draft_probs``: [N, V] or None (a greedy drafter: q one-hot on each draft, vLLM's draft_prob = 1).
    - ``logits``: [N + B, V] float32/float64, C-contiguous, in CPU memory (read in place).
    - ``sampling_metadata``: ``temperature`` [B] or None, ``all_greedy``, ``all_random``, ``top_k``
      and ``top_p`` [B] or None, ``generators`` (batch index -> the seeded request's
      ``torch.Generator``, whose ``initial_seed()`` is its ``SamplingParams.seed``, or an int seed).

    Requests are greedy when ``all_greedy``, never when ``all_random``, else where the temperature is
    below 1e-5 (vLLM's GREEDY_TEMPERATURE is 0 in recent releases and -1 in early V1 ones: both are).
    Each request draws from its own stream (seed, request id, step): the seed from its generator
    (``default_seed`` for requests without one); the request id from ``request_ids`` (ints, or
    vLLM's ``req_id`` strings, hashed with CRC-32), which ``install`` takes from the runner's input
    batch; the step from ``steps`` or, when None, from a counter per request id that this object keeps
    (0 the first time a request is seen, then 1, 2, ...). So a request's tokens depend on its seed, id
    and how many steps it has taken, not on its batch. ``forget(request_ids)`` drops finished requests'
    counters. Not done here, unlike vLLM: logits processors (penalties, bad words, allowed tokens,
    min-p) and logprobs; the bonus token is drawn from the warped bonus row by specdec itself.
    """

    def __init__(self, default_seed: Any = 0, *, backend: Optional[str] = None) -> None:
        self.default_seed = _seed_of(default_seed, "default_seed")
        self.backend = backend
        self._steps: dict[int, int] = {}

    def forget(self, request_ids: Iterable[Union[int, np.integer, str]]) -> None:
        """Drops the step counters of these (finished) requests."""
        for rid in request_ids:
            self._steps.pop(_request_key(rid), None)

    def __call__(self, *args: Any, **kwargs: Any) -> SamplerOutput:
        return self.forward(*args, **kwargs)

    def forward(self, metadata: Any, draft_probs: Optional[ArrayLike], logits: ArrayLike, sampling_metadata: Any, *,
                request_ids: Optional[Iterable[Union[int, np.integer, str]]] = None,
                steps: Optional[ArrayLike] = None) -> SamplerOutput:
        drafts = _host(metadata.draft_token_ids, "metadata.draft_token_ids")
        nd = _host(metadata.num_draft_tokens, "metadata.num_draft_tokens")
        if drafts.ndim != 1:
            raise ValueError(f"metadata.draft_token_ids: expected a 1-D array, got shape {drafts.shape}")
        if nd.ndim != 1 or (nd.size and (nd.dtype.kind not in "iu" or nd.min() < 0)):
            raise ValueError("metadata.num_draft_tokens: expected B counts >= 0")
        B = nd.shape[0]
        idx = spec_decode_indices(nd)
        cu = _host(getattr(metadata, "cu_num_draft_tokens", None), "metadata.cu_num_draft_tokens")
        if cu is not None and not np.array_equal(cu.astype(np.int64), idx.cu_num_draft_tokens):
            raise ValueError("metadata.cu_num_draft_tokens: not the prefix sums of metadata.num_draft_tokens")
        if int(idx.cu_num_draft_tokens[-1] if B else 0) != drafts.shape[0]:
            raise ValueError(f"metadata.draft_token_ids: expected {int(nd.sum())} tokens (sum of num_draft_tokens), "
                             f"got {drafts.shape[0]}")
        for field, want in (("target_logits_indices", idx.target_logits_indices),
                            ("bonus_logits_indices", idx.bonus_logits_indices)):
            got = _host(getattr(metadata, field, None), f"metadata.{field}")
            if got is not None and not np.array_equal(got.astype(np.int64), want):
                raise ValueError(f"metadata.{field}: the logits are not in the packed layout (request b's drafted "
                                 f"rows then its bonus row); expected {want.tolist()}")
        max_spec_len = int(getattr(metadata, "max_spec_len", nd.max() if B else 0))
        if B and max_spec_len < int(nd.max()):
            raise ValueError(f"metadata.max_spec_len: {max_spec_len} is below the longest draft ({int(nd.max())})")

        sm = sampling_metadata
        temperature = _host(getattr(sm, "temperature", None), "sampling_metadata.temperature")
        if bool(getattr(sm, "all_greedy", False)):
            greedy, temperature = np.ones(B, bool), None
        else:
            if temperature is None:
                raise ValueError("sampling_metadata.temperature: required unless all_greedy")
            if temperature.shape != (B,):
                raise ValueError(f"sampling_metadata.temperature: expected shape ({B},), got {temperature.shape}")
            greedy = (np.zeros(B, bool) if bool(getattr(sm, "all_random", False))
                      else temperature.astype(np.float64) < GREEDY_TEMPERATURE)
        top_k = _host(getattr(sm, "top_k", None), "sampling_metadata.top_k")
        top_p = _host(getattr(sm, "top_p", None), "sampling_metadata.top_p")

        seeds = np.full(B, self.default_seed, np.uint64)
        for b, g in (getattr(sm, "generators", None) or {}).items():
            if not 0 <= int(b) < B:
                raise ValueError(f"sampling_metadata.generators: batch index {b} outside [0, {B})")
            seeds[int(b)] = _seed_of(g, f"sampling_metadata.generators[{b}]")
        if request_ids is None:
            raise ValueError("request_ids: required (the batch's request ids, e.g. vLLM's input_batch.req_ids; "
                             "install(runner) passes them)")
        rids = list(request_ids)
        if len(rids) != B:
            raise ValueError(f"request_ids: expected {B} ids, got {len(rids)}")
        keys = np.array([_request_key(r) for r in rids], np.uint32)
        if len(set(keys.tolist())) != B:
            raise ValueError("request_ids: two requests of the batch have the same id (or CRC-32)")
        if steps is None:
            step_arr: Any = np.array([self._steps.get(k, 0) for k in keys.tolist()], np.uint32)
        else:
            step_arr = steps
        out = _rejection_sample(drafts, nd, draft_probs, logits, greedy, seeds=seeds, request_ids=keys,
                                steps=step_arr, temperature=temperature, top_k=top_k, top_p=top_p,
                                backend=self.backend, return_status=False)
        if steps is None:
            for k, s in zip(keys.tolist(), step_arr.tolist()):
                self._steps[k] = s + 1
        if out.shape[1] < max_spec_len + 1:  # vLLM's width: max_spec_len + 1 whatever this batch drafted
            out = np.concatenate([out, np.full((B, max_spec_len + 1 - out.shape[1]), -1, np.int32)], axis=1)
        if type(logits).__module__.split(".")[0] == "torch":
            import torch  # only when the caller's logits are torch tensors

            out = torch.from_numpy(out)
        return SamplerOutput(out)

    @staticmethod
    def parse_output(output_token_ids: ArrayLike, vocab_size: int, discard_req_indices: Iterable[int] = (),
                     logprobs_tensors: Any = None) -> list[list[int]]:
        """vLLM's ``RejectionSampler.parse_output``: each request's tokens without the -1 padding and
        ids >= vocab_size (requests in ``discard_req_indices`` get empty lists)."""
        t = _host(output_token_ids, "output_token_ids")
        out = parse_output(t, vocab_size)
        for i in discard_req_indices:
            out[int(i)] = []
        return out

    def install(self, runner: Any) -> Any:
        """Puts this sampler in place of ``runner.rejection_sampler`` (a vLLM V1 GPUModelRunner, or any
        object with ``rejection_sampler`` and ``input_batch.req_ids``); each call then passes the
        batch's request ids. Returns the object it replaced."""
        if not hasattr(runner, "rejection_sampler"):
            raise TypeError(f"runner: has no rejection_sampler attribute ({type(runner).__name__})")
        previous = runner.rejection_sampler
        sampler = self

        def bound(metadata, draft_probs, logits, sampling_metadata):
            B = len(metadata.num_draft_tokens)
            return sampler.forward(metadata, draft_probs, logits, sampling_metadata,
                                   request_ids=list(runner.input_batch.req_ids)[:B])

        # the runner calls rejection_sampler.parse_output too
        bound.parse_output = self.parse_output  # type: ignore[attr-defined]
        bound.specdec_sampler = self  # type: ignore[attr-defined]
        runner.rejection_sampler = bound
        return previous
