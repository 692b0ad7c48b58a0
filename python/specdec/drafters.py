"""specdec.drafters: drafters that cost no model call, for decode loops written in Python.

Both propose a continuation of a request's context (prompt and output so far) as int32 token ids,
computed in C++ from the same headers the step decoder uses (draft/prompt_lookup.hpp,
draft/suffix_drafter.hpp). A context is an int32 or int64 1-d array (numpy; torch CPU tensors
through DLPack) or a sequence of ints.

Guarantee: the drafts are a deterministic function of the context (and, for ``SuffixDrafter``, of
what it indexed), drawn with no randomness. The output law stays exactly the target's with Greedy,
SampleAndMatch, or Strict / Block given the one-hot q of each draft (``one_hot_q``); the suffix
tree's frequencies are never a q.
"""

from __future__ import annotations

import numpy as np

from . import _core

__all__ = ["prompt_lookup", "SuffixDrafter", "one_hot_q"]


def prompt_lookup(context, *, min_n: int = 1, max_n: int = 3, k: int = 8) -> np.ndarray:
    """N-gram prompt lookup: for n = max_n down to min_n, the most recent earlier occurrence of the
    context's last n tokens (scanning backward from the end, as llama.cpp does; vLLM takes the
    earliest) proposes the up to k tokens that followed it; no match proposes nothing. Example:
    context [1, 2, 3, 4, 2, 3], min_n 2, max_n 3, k 4 proposes [4, 2, 3]. Raises ``specdec.Error``
    naming the parameter when min_n < 1, max_n < min_n or k < 1."""
    return _core.prompt_lookup(context, int(min_n), int(max_n), int(k))


class SuffixDrafter:
    """Suffix-tree drafting (SuffixDecoding, Oliaro et al., arXiv 2411.04975) over one request's
    context, drafting chains: the longest-scoring continuation of the context's tail, each token at
    least ``min_probability`` likely along its path, at most ``floor(factor * m)`` tokens for a match
    of m tokens (and ``max_spec``, and the call's ``limit``). ``draft`` indexes only the tokens
    appended since its last call while the context extends the one it saw, and re-indexes a context
    that does not (another request, a rewound one). Memory: at most 1 + L * max_depth nodes for a
    context of L tokens. Defaults are vLLM's SuffixDecoding settings."""

    def __init__(self, *, max_depth: int = 24, max_spec: int = 32, factor: float = 1.0, min_probability: float = 0.1,
                 min_match: int = 1):
        self._d = _core.SuffixDrafter(int(max_depth), int(max_spec), float(factor), float(min_probability),
                                      int(min_match))

    def draft(self, context, limit: int) -> np.ndarray:
        """The chain proposed after ``context``, at most ``limit`` tokens (int32; empty when nothing matches)."""
        return self._d.draft(context, int(limit))


def one_hot_q(drafts, vocab_size: int, dtype=np.float32) -> np.ndarray:
    """The q rows of deterministic drafts, [len(drafts), vocab_size]: all mass on each drafted token
    (the law a deterministic draft was drawn from), for rules that read q."""
    d = np.asarray(drafts, dtype=np.int64).reshape(-1)
    if d.size and (d.min() < 0 or d.max() >= vocab_size):
        raise ValueError(f"drafts: token ids must lie in [0, {vocab_size})")
    q = np.zeros((d.size, int(vocab_size)), dtype)
    q[np.arange(d.size), d] = 1
    return q
