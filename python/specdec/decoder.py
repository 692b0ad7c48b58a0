"""specdec.decoder: the step decoder over the library's reference models, one round per ``step()``.

The C++ step decoder (decode/batch_decoder.hpp) runs a batch of requests, each with its own prompt,
seed, draft length, sampling parameters, drafter and rule; each ``step()`` runs one speculative round
for every running request and returns what each emitted as a ``StepEvent``. The models are the
library's reference models (``random_markov_model``, ``ngram_pair`` trained on text), evaluated in
C++: a step runs without the GIL; or models written in Python: ``python_model`` (a callable from the
context to the next token's logits, called for each row with the whole context) or
``python_sequence_model`` (a KV-cached model: each step appends only the new tokens of every
sequence, all of a batch's appends in one call), called with the GIL taken. Drafters: ``"model"`` (the draft model, batched chain drafting),
``"ngram"`` (prompt lookup over the request's prompt and output), ``"suffix"`` (a suffix tree over
them, chains), ``"suffix_tree"`` (its trees, verified as trees by a rule that reads no q), ``"tree"``
(EAGLE-2's dynamic tree over the draft model, verified likewise), ``"static_tree"`` (a full tree
from the draft model, its candidates drawn as the tree rule needs: i.i.d., without replacement or
top-k) and ``"mtad"`` (MTAD's beams over the
draft model, verified by its joint rule: lossy by design). A
model-free drafter hands a rule that reads q (Strict, Lenient, Block) the one-hot q of its
deterministic draft, never its frequencies, so every lossless rule stays lossless.

The target's own samples are keyed by the request's output position (``sample_keys="output_position"``,
the default): with Greedy or SampleAndMatch, a request's tokens are those of target-only decoding
(gamma 0) with the same seed, whatever drafter it uses and whatever else runs in the batch.
"""

from __future__ import annotations

import warnings
from typing import Callable, Iterable, NamedTuple, Optional, Sequence, Union

import numpy as np

from . import _core
from . import _Rule, _CHAIN_RULES, _backend, Status, Strict

__all__ = ["ReferenceModel", "PythonSequenceModel", "random_markov_model", "ngram_pair", "python_model",
           "python_sequence_model", "Decoder", "StepEvent", "DRAFTERS"]

ReferenceModel = _core.ReferenceModel
PythonSequenceModel = _core.PythonSequenceModel
DRAFTERS: tuple[str, ...] = ("model", "ngram", "suffix", "suffix_tree", "tree", "static_tree", "mtad")


def random_markov_model(vocab_size: int, order: int = 1, *, seed: int = 0, concentration: float = 1.0,
                        zero_fraction: float = 0.0) -> ReferenceModel:
    """A Markov model of order ``order`` over ``vocab_size`` tokens whose rows are symmetric
    Dirichlet(``concentration``) draws (models/markov.hpp); ``zero_fraction`` zeroes entries first.
    Deterministic in its arguments."""
    return _core.random_markov_model(int(vocab_size), int(order), int(seed), float(concentration), float(zero_fraction))


def ngram_pair(texts: Sequence[str], *, target_order: int = 4, draft_order: int = 2,
               max_words: int = 0) -> tuple[ReferenceModel, ReferenceModel]:
    """A target and a draft n-gram model (interpolated Kneser-Ney, models/ngram.hpp) trained on
    ``texts`` with one word vocabulary (at most ``max_words`` words; 0: all); ``encode``/``decode``
    map text to token ids and back."""
    if isinstance(texts, str):
        raise TypeError("texts: a sequence of strings, not one string")
    return tuple(_core.ngram_pair([str(t) for t in texts], int(target_order), int(draft_order), int(max_words)))


def python_model(next_logits: Callable[[np.ndarray], np.ndarray], vocab_size: int) -> ReferenceModel:
    """A model written in Python for ``Decoder``: ``next_logits(context)`` gets the context (prompt and
    output so far, a new int32 array) and returns the next token's logits, ``vocab_size`` float32 or
    float64 entries (-inf masks a token). The decoder calls it once per row it scores (no KV cache: the
    whole context each time), taking the GIL for each call. If it raises or returns the wrong shape or
    dtype, that row becomes NaN: the request ends with ``Status.INVALID_ROW`` (finished "error"), the
    other requests run on, and ``Decoder.step`` warns with the error's text (RuntimeWarning). The
    decoder holds its lock during the call: the callable must not call back into the same decoder."""
    if not callable(next_logits):
        raise TypeError(f"next_logits: must be callable, got {type(next_logits).__name__}")
    return _core.python_model(next_logits, int(vocab_size))


def python_sequence_model(model: object, vocab_size: int) -> PythonSequenceModel:
    """A KV-cached model written in Python for ``Decoder`` (C++ ``SequenceModel``, model/sequence.hpp).
    ``model`` has three methods:

    - ``forward(appends)``: ``appends`` is a list of ``(sequence, tokens, rows)`` tuples, applied in
      order: sequence (an int) grows by ``tokens`` (a new int32 array) and the logits after each of
      its last ``rows`` positions are asked for. Returns them all, append 0's rows first, as one
      [sum of rows, vocab_size] float32 or float64 array. One call per decoder forward: the target's
      call scores every request's pending tokens and drafts at once, a draft step every request's next
      position at once.
    - ``rollback(sequence, n)``: drops the sequence's last n tokens (rejected drafts).
    - ``release(sequence)``: frees it (a finished request); a later append starts it from nothing.

    The decoder keeps each sequence's length and checks appends (tokens in the vocabulary) before
    calling. If a call raises or ``forward`` returns the wrong shape or dtype, the rows of that call
    become NaN (its requests end with ``Status.INVALID_ROW``, finished "error"), a failed rollback
    makes that sequence's next rows NaN, and ``Decoder.step`` warns with the error's text
    (RuntimeWarning). Token trees (``"suffix_tree"``, ``"tree"``, ``"static_tree"``) need a target that takes tree
    appends, so they run on reference models and ``python_model`` only; ``"tree"``, ``"static_tree"`` and ``"mtad"``
    draft from a stateless draft model (a reference model or ``python_model``). The decoder holds
    its lock during the calls: they must not call back into the same decoder."""
    return _core.PythonSequenceModel(model, int(vocab_size))


class StepEvent(NamedTuple):
    """What one request's round did in a ``step()``."""

    request: int             #: the request's handle (``Decoder.add``)
    tokens: np.ndarray       #: int32 tokens emitted this step
    finished: Optional[str]  #: None while running; "length", "stop_token", "cancelled" or "error"
    status: Status           #: the round's verification flags
    drafted: int             #: tokens drafted this round
    verified: int            #: drafts the target judged
    draft_steps: int         #: draft steps charged this round
    target_positions: int    #: positions the target scored for the request (0: no target call)


class Decoder:
    """The step decoder over a target and (optionally) a draft model of one vocabulary: reference
    models, ``python_model``s or ``python_sequence_model``s (KV-cached, one call per forward).

    ``rule`` is the default rule of its requests (a chain rule: Strict, Lenient, Greedy,
    SampleAndMatch, Block or Typical); ``backend`` "seq" or "simd" (the default where built).
    Without a draft model every request must use a model-free drafter (or gamma 0)."""

    def __init__(self, target: Union[ReferenceModel, PythonSequenceModel],
                 draft: Optional[Union[ReferenceModel, PythonSequenceModel]] = None, *, rule: _Rule = Strict(),
                 backend: Optional[str] = None):
        if not isinstance(rule, _CHAIN_RULES):
            raise TypeError(f"rule: a chain rule ({', '.join(r.__name__ for r in _CHAIN_RULES)}), got {type(rule).__name__}")
        self._decoder = _core.Decoder(target, draft, rule._spec(), _backend(backend))
        self._models = (target,) if draft is None else (target, draft)
        self.vocab_size: int = target.vocab_size

    def add(self, prompt: Iterable[int], *, seed: int = 0, request_id: int = 0, gamma: int = 4,
            max_new_tokens: int = 64, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0,
            min_p: float = 0.0, draft_temperature: Optional[float] = None, drafter: str = "model",
            rule: Optional[_Rule] = None, stop_tokens: Iterable[int] = (), ngram: tuple[int, int] = (1, 3),
            suffix_depth: int = 24, suffix_min_probability: float = 0.1,
            sample_keys: str = "output_position", tree_width: int = 4, tree_nodes: int = 16, beams: int = 4,
            tau: float = 0.5) -> int:
        """Adds a request; it runs from the next ``step()``. Returns its handle.

        ``seed`` and ``request_id`` name its random streams; ``gamma`` drafts per round; the target's
        rows are warped with ``temperature``/``top_k``/``top_p``/``min_p`` (the draft's with the same,
        or ``draft_temperature``); ``drafter`` one of ``DRAFTERS``; ``rule`` overrides the decoder's
        (``suffix_tree`` and ``tree`` take TargetOnly, Greedy, SampleAndMatch or Typical; ``static_tree``
        any tree rule, its ``gamma`` levels of ``tree_width`` children drawn as the rule needs; ``mtad`` takes
        none: its joint rule with threshold ``tau`` in [0, 1] decides); ``ngram`` the (min, max)
        n-gram lengths of prompt lookup; ``tree_width`` the dynamic tree's frontier width and children
        per expanded node, ``tree_nodes`` the drafted nodes it keeps, ``gamma`` - 1 its expansions
        (draft/tree.hpp: top-k candidates of the draft's unwarped rows); ``beams`` MTAD's beam count W,
        its rows warped with the target's parameters; ``sample_keys`` "output_position" or "round" (the addressing
        before output keys: tokens then depend on where rounds start). A bad argument raises
        ValueError (specdec.Error) or TypeError naming it."""
        if drafter not in DRAFTERS:
            raise ValueError(f"drafter: must be one of {DRAFTERS}, got {drafter!r}")
        if rule is not None and not isinstance(rule, _Rule):
            raise TypeError(f"rule: a rule object (specdec.Strict(), ...), got {type(rule).__name__}")
        if sample_keys not in ("output_position", "round"):
            raise ValueError(f"sample_keys: 'output_position' or 'round', got {sample_keys!r}")
        lo, hi = ngram
        target = [float(temperature), float(top_k), float(top_p), float(min_p)]
        draft = list(target) if draft_temperature is None else [float(draft_temperature)] + target[1:]
        spec = _core.RequestSpec(int(seed), int(request_id), int(gamma), int(max_new_tokens), target, draft, drafter,
                                 None if rule is None else rule._spec(), int(lo), int(hi), int(suffix_depth),
                                 float(suffix_min_probability), sample_keys == "round", int(tree_width),
                                 int(tree_nodes), int(beams), float(tau))
        return self._decoder.add(prompt, stop_tokens, spec)

    def step(self) -> list[StepEvent]:
        """One round for every running request; finished requests are reported once, then dropped.
        Warns (RuntimeWarning) when a model written in Python failed during the round."""
        events = [StepEvent(r, t, f, Status(s), d, v, ds, tp) for (r, t, f, s, d, v, ds, tp) in self._decoder.step()]
        errors = [e for m in self._models for e in m.take_errors()]
        if errors:
            warnings.warn(f"specdec.Decoder: a model written in Python failed {len(errors)} time(s); the requests it "
                          f"was scoring end with INVALID_ROW. First: {errors[0]}", RuntimeWarning, stacklevel=2)
        return events

    def run(self) -> dict[int, np.ndarray]:
        """Steps until no request runs; returns every request's tokens by handle."""
        out: dict[int, list[np.ndarray]] = {}
        while self.active:
            for e in self.step():
                out.setdefault(e.request, []).append(e.tokens)
        return {h: np.concatenate(parts) if parts else np.zeros(0, np.int32) for h, parts in out.items()}

    @property
    def active(self) -> int:
        """Requests added and not yet reported finished."""
        return self._decoder.active()

    def cancel(self, request: int) -> None:
        """Cancels a running request: the next step reports it finished ("cancelled")."""
        self._decoder.cancel(int(request))

    def tokens(self, request: int) -> np.ndarray:
        """Every token the request emitted so far (readable until the step after it finished)."""
        return self._decoder.tokens(int(request))

    def stats(self, request: int) -> dict:
        """The request's counters: iterations, target_calls, target_positions, draft_calls, drafted,
        accepted, emitted, drafted_at, accepted_at."""
        return self._decoder.stats(int(request))
