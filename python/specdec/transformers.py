"""specdec.transformers: speculative decoding of transformers models, verified by specdec.

``generate`` is a decoding loop for transformers' ``custom_generate`` extension point: passed as a
callable to ``model.generate``, it receives the inputs and the generation config transformers
prepared (versions whose ``generate`` takes a callable ``custom_generate``; tested with transformers
5.24.0 and torch 2.15.0 on CPU)::

    out = model.generate(input_ids, custom_generate=specdec.transformers.generate,
                         drafter="ngram", max_new_tokens=64, do_sample=False)
    out = model.generate(input_ids, attention_mask=mask, custom_generate=specdec.transformers.generate,
                         draft_model=small_model, gamma=4, seeds=[7, 8], request_ids=[0, 1],
                         max_new_tokens=64, do_sample=True, temperature=0.7, top_p=0.9)

The result is transformers' layout: a LongTensor [B, prompt + new] of each row's prompt (as given,
left padding included) and its new tokens, padded on the right with the pad token. With
``return_stats=True`` it is ``(sequences, [RequestStats per row])``.

**The loop.** Each request (row; its left padding removed through ``attention_mask``) runs on its own
KV caches (a ``DynamicCache`` per model, cropped back to the accepted prefix after every round;
models whose cache cannot be cropped, such as linear-attention layers, are not supported). A round:
the drafter proposes up to ``gamma`` tokens; one target forward scores the context tokens the cache
lacks and the drafts; ``specdec.verify_from_logits`` accepts a prefix of the drafts and emits one
more token (the correction or the bonus). Drafters: ``draft_model`` (a transformers model with the
target's vocabulary, sampled with the request's addressed stream), ``"ngram"`` (prompt lookup) or
``"suffix"`` (a per-request suffix tree); the last two cost no model call (specdec.drafters).

**Rules.** ``Greedy()`` when ``do_sample`` is False; else ``Strict()`` with a draft model (q: the
draft's warped rows) and ``SampleAndMatch()`` with a model-free drafter. Any chain rule may be
passed as ``rule``; a rule that reads q gets a model-free drafter's one-hot q (never a frequency).
Sampling parameters are the generation config's temperature, top_k, top_p and min_p, applied by
specdec (``warp_logits``) to target and draft logits alike; any other logits processor, and stopping
criteria other than the length and the EOS tokens, are refused with a ValueError (transformers would
apply them to a law this loop does not verify).

**Randomness.** Request b draws from its seed ``seeds[b]`` and id ``request_ids[b]`` (default: its
row), never from torch's generator: round r's draft samples and accept tests use step r, and the
target's own samples (sample-and-match's, the bonus) are keyed by the output position they decide
(``sample_keys="output_position"``). Hence with Greedy or SampleAndMatch a request emits exactly what
target-only decoding (``gamma=0``) emits with the same seed and id, whatever the drafter, up to the
float differences between scoring k tokens in one forward and one at a time (tests/python/
test_transformers.py measures the agreement). ``sample_keys="round"`` keys them by the round instead.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch

import specdec
from . import drafters as _drafters

__all__ = ["generate", "RequestStats", "DRAFTERS", "SequenceModel", "sequence_model"]

DRAFTERS: tuple[str, ...] = ("ngram", "suffix")

# Logits processors whose effect specdec applies itself (warp_logits), and stopping criteria the loop
# applies itself: anything else in transformers' prepared lists is refused.
_WARPERS = {"TemperatureLogitsWarper", "TopKLogitsWarper", "TopPLogitsWarper", "MinPLogitsWarper"}
_OWN_STOPS = {"MaxLengthCriteria", "EosTokenCriteria"}


@dataclass
class RequestStats:
    """What one request's loop did."""

    new_tokens: int = 0       #: tokens generated (EOS included)
    rounds: int = 0           #: verification rounds (target forwards)
    drafted: int = 0          #: tokens drafted
    accepted: int = 0         #: drafts accepted
    draft_forwards: int = 0   #: draft model forwards (0 for model-free drafters)

    @property
    def tokens_per_round(self) -> float:
        """New tokens per target forward."""
        return self.new_tokens / self.rounds if self.rounds else 0.0


class _CachedModel:
    """A causal LM with one request's KV cache: ``forward(tokens, rows)`` appends the tokens and
    returns the logits of the last ``rows`` of them as float32 numpy [rows, V]; ``keep(n)`` crops the
    cache to its first n positions."""

    def __init__(self, model):
        import transformers

        self.model = model
        try:
            self.cache = transformers.DynamicCache(config=model.config)
        except TypeError:  # transformers 4.x
            self.cache = transformers.DynamicCache()
        params = inspect.signature(model.forward).parameters
        self._cache_arg = "cache" if "cache" in params else "past_key_values"
        self._logits_to_keep = "logits_to_keep" in params

    @property
    def length(self) -> int:
        return int(self.cache.get_seq_length())

    def forward(self, tokens, rows: int) -> np.ndarray:
        ids = torch.tensor([list(tokens)], dtype=torch.long, device=self.model.device)
        kwargs = {self._cache_arg: self.cache, "use_cache": True}
        if self._logits_to_keep:  # the output layer runs on those rows only (a prompt's other rows are not needed)
            kwargs["logits_to_keep"] = rows
        logits = self.model(input_ids=ids, **kwargs).logits[0, -rows:]
        return logits.detach().to("cpu", torch.float32).contiguous().numpy()

    def keep(self, n: int) -> None:
        if n < self.length:
            self.cache.crop(n - self.length)  # a negative count removes that many (transformers 4.x and 5.x)


class SequenceModel:
    """A transformers causal LM as a KV-cached model for ``specdec.Decoder`` (the protocol of
    ``specdec.decoder.python_sequence_model``): one ``DynamicCache`` per sequence, made on its first
    append, cropped by ``rollback`` and dropped by ``release``. ``forward(appends)`` runs one model
    forward per append (appends of different sequences are not batched into one forward), with the
    output layer on the rows asked for only."""

    def __init__(self, model):
        self.model = model
        self._caches: dict[int, _CachedModel] = {}

    def forward(self, appends: list[tuple[int, np.ndarray, int]]) -> np.ndarray:
        rows = []
        for sequence, tokens, n in appends:
            cache = self._caches.get(sequence)
            if cache is None:
                cache = self._caches[sequence] = _CachedModel(self.model)
            with torch.no_grad():
                out = cache.forward(tokens.tolist(), max(n, 1))  # a forward yields a row: one is dropped when none is asked
            if n:
                rows.append(out)
        V = self.model.config.vocab_size
        return np.concatenate(rows) if rows else np.zeros((0, V), np.float32)

    def rollback(self, sequence: int, n: int) -> None:
        cache = self._caches[sequence]
        cache.keep(cache.length - n)

    def release(self, sequence: int) -> None:
        self._caches.pop(sequence, None)


def sequence_model(model) -> specdec.decoder.PythonSequenceModel:
    """``model`` (a transformers causal LM whose logits have ``model.config.vocab_size`` entries) as a
    ``specdec.Decoder`` target or draft with a KV cache per request: every drafter of the decoder but
    token trees runs on it (``specdec.decoder.python_sequence_model``)."""
    return specdec.decoder.python_sequence_model(SequenceModel(model), int(model.config.vocab_size))


def _check_lists(logits_processor, stopping_criteria):
    for p in logits_processor or []:
        if type(p).__name__ not in _WARPERS:
            raise ValueError(f"logits_processor: {type(p).__name__} is not supported by specdec.transformers.generate "
                             "(it applies temperature, top_k, top_p and min_p itself)")
    for c in stopping_criteria or []:
        if type(c).__name__ not in _OWN_STOPS:
            raise ValueError(f"stopping_criteria: {type(c).__name__} is not supported by specdec.transformers.generate "
                             "(it stops at max_new_tokens / max_length and the EOS tokens)")


def _warp(config):
    if not getattr(config, "do_sample", False):
        return dict(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0)
    return dict(temperature=float(config.temperature if config.temperature is not None else 1.0),
                top_k=int(config.top_k or 0), top_p=float(config.top_p if config.top_p is not None else 1.0),
                min_p=float(config.min_p or 0.0))


def _eos_ids(config):
    eos = config.eos_token_id
    if eos is None:
        return set()
    if torch.is_tensor(eos):
        eos = eos.tolist()
    return {int(e) for e in (eos if isinstance(eos, (list, tuple)) else [eos])}


@torch.no_grad()
def generate(model, input_ids, logits_processor=None, stopping_criteria=None, generation_config=None, *,
             draft_model=None, drafter: Optional[str] = None, gamma: int = 4, rule=None, seeds=0, request_ids=None,
             sample_keys: str = "output_position", ngram_min: int = 1, ngram_max: int = 3, suffix_max_depth: int = 24,
             suffix_min_probability: float = 0.1, backend: Optional[str] = None, return_stats: bool = False,
             streamer=None, **model_kwargs):
    """Speculative decoding of ``model`` (see the module's text). ``input_ids`` [B, L] (left-padded
    where ``attention_mask`` says so); ``generation_config`` (default: the model's) gives do_sample,
    temperature, top_k, top_p, min_p, max_new_tokens / max_length, eos_token_id and pad_token_id.
    Exactly one of ``draft_model`` and ``drafter`` ("ngram" or "suffix") may be given; neither decodes
    with the target alone (one token per forward, through the same verification). ``gamma``: most
    tokens drafted per round (>= 0). ``seeds`` (uint64) and ``request_ids`` (uint32): a scalar or one
    per row. Returns the sequences (and the stats with ``return_stats``)."""
    import transformers

    if streamer is not None:
        raise ValueError("streamer: not supported by specdec.transformers.generate")
    if draft_model is not None and drafter is not None:
        raise ValueError("draft_model, drafter: give at most one")
    if drafter is not None and drafter not in DRAFTERS:
        raise ValueError(f"drafter: one of {DRAFTERS}, got {drafter!r}")
    if not isinstance(gamma, int) or gamma < 0:
        raise ValueError(f"gamma: an integer >= 0, got {gamma!r}")
    if sample_keys not in ("output_position", "round"):
        raise ValueError(f"sample_keys: 'output_position' or 'round', got {sample_keys!r}")
    if drafter == "ngram":
        _drafters.prompt_lookup([], min_n=ngram_min, max_n=ngram_max, k=1)  # checks the parameters
    _check_lists(logits_processor, stopping_criteria)
    config = generation_config if generation_config is not None else model.generation_config
    if isinstance(config, dict):
        config = transformers.GenerationConfig(**config)
    if getattr(config, "num_beams", 1) not in (None, 1):
        raise ValueError("generation_config.num_beams: specdec.transformers.generate decodes one sequence per row")
    if input_ids.ndim != 2 or input_ids.shape[1] == 0:
        raise ValueError(f"input_ids: a [B, L] tensor with L >= 1, got shape {tuple(input_ids.shape)}")
    B, L = input_ids.shape
    if config.max_new_tokens is not None:
        max_new = int(config.max_new_tokens)
    elif config.max_length is not None:
        max_new = int(config.max_length) - L
    else:
        raise ValueError("generation_config: set max_new_tokens or max_length")
    max_new = max(max_new, 0)
    sampling = bool(getattr(config, "do_sample", False))
    if rule is None:
        if not sampling:
            rule = specdec.Greedy()
        else:
            rule = specdec.Strict() if draft_model is not None else specdec.SampleAndMatch()
    warp = _warp(config)
    eos = _eos_ids(config)
    pad = config.pad_token_id if config.pad_token_id is not None else (min(eos) if eos else 0)
    seeds = specdec._ints("seeds", seeds, B, np.uint64, 0, 2**64 - 1).tolist()  # the core entries' checks
    request_ids = specdec._ints("request_ids", np.arange(B) if request_ids is None else request_ids, B, np.uint32, 0,
                                2**32 - 1).tolist()
    mask = model_kwargs.get("attention_mask")
    rows, stats = [], []
    for b in range(B):
        prompt = input_ids[b] if mask is None else input_ids[b][mask[b].bool()]
        if prompt.numel() == 0:
            raise ValueError(f"input_ids: row {b} has no token (attention_mask is all 0)")
        loop = _RequestLoop(model, draft_model, drafter, rule, warp, seeds[b], request_ids[b], sample_keys, backend,
                            ngram_min, ngram_max, suffix_max_depth, suffix_min_probability)
        new, s = loop.run(prompt.tolist(), gamma, max_new, eos)
        rows.append(new)
        stats.append(s)
    width = max((len(r) for r in rows), default=0)
    out = torch.full((B, L + width), int(pad), dtype=torch.long, device=input_ids.device)
    out[:, :L] = input_ids
    for b, r in enumerate(rows):
        out[b, L:L + len(r)] = torch.tensor(r, dtype=torch.long)
    return (out, stats) if return_stats else out


class _RequestLoop:
    """One request's speculative loop (see the module's text)."""

    def __init__(self, model, draft_model, drafter, rule, warp, seed, request_id, sample_keys, backend, ngram_min,
                 ngram_max, suffix_max_depth, suffix_min_probability):
        self.target = _CachedModel(model)
        self.draft = _CachedModel(draft_model) if draft_model is not None else None
        self.drafter, self.rule, self.warp, self.backend = drafter, rule, warp, backend
        self.stream = dict(seeds=seed, request_ids=[request_id])
        self.output_keys = sample_keys == "output_position"
        self.ngram = (ngram_min, ngram_max)
        self.suffix = (_drafters.SuffixDrafter(max_depth=suffix_max_depth, min_probability=suffix_min_probability)
                       if drafter == "suffix" else None)

    def _propose(self, context, k, step):
        """(drafts, draft_logits [k, V] or None): up to k drafted tokens."""
        if k == 0:
            return [], None
        if self.drafter == "ngram":
            return _drafters.prompt_lookup(context, min_n=self.ngram[0], max_n=self.ngram[1], k=k).tolist(), None
        if self.drafter == "suffix":
            return self.suffix.draft(context, k).tolist(), None
        if self.draft is None:
            return [], None
        drafts, rows = [], []
        feed = context[self.draft.length:]
        for i in range(k):
            row = self.draft.forward(feed, 1)[0]
            if isinstance(self.rule, specdec.Greedy):
                t = int(np.argmax(row))
            else:
                t = int(specdec.sample_logits(row[None], steps=step, position=i, purpose=specdec.Purpose.DRAFT,
                                              backend=self.backend, **self.stream, **self.warp).tokens[0])
            if t < 0:  # the draft's row had no usable mass: draft no further
                break
            drafts.append(t)
            rows.append(row)
            feed = [t]
        return drafts, (np.stack(rows) if rows else None)

    def run(self, context, gamma, max_new, eos):
        stats = RequestStats()
        new = []
        while len(new) < max_new:
            k = min(gamma, max_new - len(new) - 1)  # a round emits at most k + 1 tokens
            drafts, draft_logits = self._propose(context, k, stats.rounds)
            stats.draft_forwards += len(draft_logits) if draft_logits is not None else 0
            logits = self.target.forward(context[self.target.length:] + drafts, len(drafts) + 1)
            V = logits.shape[1]
            if any(t >= V for t in drafts):
                raise ValueError(f"a drafted token is outside the target's vocabulary of {V}")
            side = {}
            if self.rule.reads_q:
                side = (dict(draft_logits=draft_logits[None], **{"draft_" + k_: v for k_, v in self.warp.items()})
                        if draft_logits is not None else dict(draft_probs=_drafters.one_hot_q(drafts, V)[None]))
            res = specdec.verify_from_logits(
                self.rule, np.asarray([drafts], np.int32).reshape(1, len(drafts)), logits[None], steps=stats.rounds,
                output_positions=len(new) if self.output_keys else None, backend=self.backend, **self.stream,
                **self.warp, **side)
            if not specdec.is_valid(res.status[0]):
                raise ValueError(f"request {self.stream['request_ids'][0]}: verification failed with status "
                                 f"{specdec.Status(int(res.status[0]))!r} (a NaN or empty logits row?)")
            accepted = int(res.num_accepted[0])
            emitted = res.emitted(0)
            self.target.keep(len(context) + accepted)
            if self.draft is not None:
                self.draft.keep(min(self.draft.length, len(context) + accepted))
            stats.rounds += 1
            stats.drafted += len(drafts)
            stats.accepted += accepted
            for t in emitted:
                new.append(t)
                context.append(t)
                if t in eos or len(new) == max_new:
                    stats.new_tokens = len(new)
                    return new, stats
        stats.new_tokens = len(new)
        return new, stats
