"""The conformance kit from Python: checks any chain or tree verifier, written with specdec or not,
against the law it claims (docs/conformance.md says what each check proves). The kit (C++,
include/specdec/conformance/kit.hpp) calls the verifier directly with numpy arrays; no files.

    def my_verifier(inputs):            # inputs: ChainInputs (packed layout, float32 rows)
        ...
        return tokens, reported         # int [B, W] padded with -1, bool [B]  (or a specdec.VerifyResult)

    report = specdec.conformance.check_chain_verifier(my_verifier, "lossless")
    assert report.passed, report.text

``check_chain_logits_verifier`` does it for verifiers from logits (``ChainLogitInputs``: logits and
each side's warping parameters), ``check_tree_verifier`` for tree verifiers (``TreeInputs``: trees
given by parents).

Built when Boost.Math was found at build time and SPECDEC_PYTHON_CONFORMANCE is on (``AVAILABLE``).
"""

from __future__ import annotations

import json as _json
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Optional, Sequence, Union

import numpy as np

import specdec
from . import _core

if TYPE_CHECKING:
    from . import _Rule

AVAILABLE: bool = bool(_core.HAS_CONFORMANCE)


class ChainInputs(NamedTuple):
    """One batch of the kit: request b drafted num_drafts[b] tokens from its q rows. Packed layout:
    request b's drafts and draft rows start at offsets[b], its target rows at offsets[b] + b (n_b rows
    and its bonus row). seeds, request_ids and steps are uint64."""

    vocab_size: int
    num_drafts: np.ndarray  # int32 [B]
    offsets: np.ndarray  # int64 [B + 1]
    draft_tokens: np.ndarray  # int32 [N]
    draft_rows: np.ndarray  # float32 [N, V]
    target_rows: np.ndarray  # float32 [N + B, V]
    seeds: np.ndarray  # uint64 [B]
    request_ids: np.ndarray  # uint64 [B]
    steps: np.ndarray  # uint64 [B]


class ChainLogitInputs(NamedTuple):
    """A batch of chains from logits: ``ChainInputs``' arrays with rows of logits (-inf masks a
    token) in draft_rows and target_rows; request b's q and p are those rows warped by its draft_* and
    target_* parameters in specdec's order (temperature, then top-k, top-p, min-p; ``specdec.warp_logits``),
    and each draft was sampled from its warped draft row."""

    vocab_size: int
    num_drafts: np.ndarray  # int32 [B]
    offsets: np.ndarray  # int64 [B + 1]
    draft_tokens: np.ndarray  # int32 [N]
    draft_rows: np.ndarray  # float32 [N, V] logits
    target_rows: np.ndarray  # float32 [N + B, V] logits
    seeds: np.ndarray  # uint64 [B]
    request_ids: np.ndarray  # uint64 [B]
    steps: np.ndarray  # uint64 [B]
    target_temperature: np.ndarray  # float64 [B]
    target_top_k: np.ndarray  # int32 [B]
    target_top_p: np.ndarray  # float64 [B]
    target_min_p: np.ndarray  # float64 [B]
    draft_temperature: np.ndarray  # float64 [B]
    draft_top_k: np.ndarray  # int32 [B]
    draft_top_p: np.ndarray  # float64 [B]
    draft_min_p: np.ndarray  # float64 [B]


class TreeInputs(NamedTuple):
    """One batch of trees: request b's num_nodes[b] nodes start at offsets[b] (packed), node 0 the root
    (parent -1, token -1), every other parent an earlier node (local ids). Node n's draft row is the
    distribution its children were drawn from (as ``sampling`` says: "independent" or
    "without_replacement"), its target row the target's after the path to n."""

    vocab_size: int
    sampling: str
    num_nodes: np.ndarray  # int32 [B]
    offsets: np.ndarray  # int64 [B + 1]
    parents: np.ndarray  # int32 [N]
    tokens: np.ndarray  # int32 [N]
    draft_rows: np.ndarray  # float32 [N, V]
    target_rows: np.ndarray  # float32 [N, V]
    seeds: np.ndarray  # uint64 [B]
    request_ids: np.ndarray  # uint64 [B]
    steps: np.ndarray  # uint64 [B]


class Report(NamedTuple):
    """The kit's verdict: ``passed``, the text report and the JSON report (docs/conformance.md)."""

    passed: bool
    text: str
    json: str

    @property
    def checks(self) -> dict[str, bool]:
        """Each check's name (``exact_law/<config>``, ``determinism``, ...) and whether it passed."""
        return {c["name"]: bool(c["passed"]) for c in _json.loads(self.json)["checks"]}


def _streams(inputs):
    """specdec's streams hold request ids and steps as uint32: the kit's are taken modulo 2**32."""
    return dict(seeds=inputs.seeds, request_ids=inputs.request_ids.astype(np.uint32),
                steps=inputs.steps.astype(np.uint32))


def specdec_verifier(rule: _Rule, backend: Optional[str] = None) -> Callable[[ChainInputs], specdec.VerifyResult]:
    """A chain verifier calling ``specdec.verify`` with `rule` (the kit's positive control)."""

    def verify(inputs: ChainInputs) -> specdec.VerifyResult:
        q = inputs.draft_rows if rule.reads_q else None
        return specdec.verify(rule, inputs.draft_tokens, q, inputs.target_rows, num_drafts=inputs.num_drafts,
                              backend=backend, **_streams(inputs))

    return verify


def specdec_logits_verifier(rule: _Rule,
                            backend: Optional[str] = None) -> Callable[[ChainLogitInputs], specdec.VerifyResult]:
    """A chain verifier from logits calling ``specdec.verify_from_logits`` with `rule` and each side's
    warping parameters."""

    def verify(inputs: ChainLogitInputs) -> specdec.VerifyResult:
        draft: dict[str, Any] = {}
        if rule.reads_q:
            draft = dict(draft_logits=inputs.draft_rows, draft_temperature=inputs.draft_temperature,
                         draft_top_k=inputs.draft_top_k, draft_top_p=inputs.draft_top_p,
                         draft_min_p=inputs.draft_min_p)
        return specdec.verify_from_logits(rule, inputs.draft_tokens, inputs.target_rows, num_drafts=inputs.num_drafts,
                                          temperature=inputs.target_temperature, top_k=inputs.target_top_k,
                                          top_p=inputs.target_top_p, min_p=inputs.target_min_p, backend=backend,
                                          **draft, **_streams(inputs))

    return verify


def specdec_tree_verifier(rule: _Rule, backend: Optional[str] = None) -> Callable[[TreeInputs], specdec.TreeResult]:
    """A tree verifier calling ``specdec.verify_tree`` with `rule`."""

    def verify(inputs: TreeInputs) -> specdec.TreeResult:
        return specdec.verify_tree(rule, inputs.parents, inputs.tokens, inputs.draft_rows if rule.reads_q else None,
                                   inputs.target_rows, num_nodes=inputs.num_nodes, backend=backend, **_streams(inputs))

    return verify


def _normalise(result, B):
    """(tokens int32 [B, W] padded with -1, reported bool [B]) from what a verifier returned."""
    if isinstance(result, (specdec.VerifyResult, specdec.TreeResult)):
        tokens, reported = result.tokens, ~specdec.is_valid(result.status)
    else:
        if not (isinstance(result, tuple) and len(result) == 2):
            raise TypeError(f"must return (tokens, reported) or a specdec result, got {type(result).__name__}")
        tokens, reported = result
    if not isinstance(tokens, np.ndarray):  # a list of token lists
        if len(tokens) != B:
            raise ValueError(f"returned {len(tokens)} token lists for a batch of {B} requests")
        padded = np.full((B, max((len(t) for t in tokens), default=0) + 1), -1, np.int32)
        for b, t in enumerate(tokens):
            padded[b, :len(t)] = t
        tokens = padded
    if tokens.ndim != 2 or tokens.shape[0] != B:
        raise ValueError(f"returned tokens of shape {tokens.shape} for a batch of {B} requests (expected [B, W])")
    reported = np.asarray(reported, bool)
    if reported.shape not in ((), (B,)):
        raise ValueError(f"returned reported flags of shape {reported.shape} for a batch of {B} requests")
    return np.ascontiguousarray(tokens, np.int32), np.ascontiguousarray(np.broadcast_to(reported, (B,)))


def check_chain_verifier(verifier: Callable[[ChainInputs], Union[specdec.VerifyResult, tuple[Any, Any]]],
                         guarantee: Union[str, specdec.Lenient] = "lossless", *, name: str = "python verifier",
                         seeded: bool = True, reads_draft_probs: bool = True, alpha: float = 1e-6,
                         seed: int = 20261125, law_requests: int = 100_000, batch_size: int = 2000,
                         independence_pairs: int = 20_000, impossible_token_trials: int = 2**27,
                         only: Sequence[str] = ()) -> Report:
    """Runs the kit on `verifier` (a callable taking a ``ChainInputs`` and returning (tokens, reported)
    or a ``specdec.VerifyResult``) for `guarantee`: "lossless", "greedy" or a ``specdec.Lenient(l)``
    (its stated law). The options are the kit's (kit_options): ``only`` restricts the checks by name
    prefix ("exact_law", "determinism", "batch_invariance", "independence", "bad_input",
    "impossible_tokens"). A ValueError from the verifier counts as reporting every request of that
    call, as the kit counts a C++ exception; any other exception, or a result of the wrong type or
    shape, stops the run at once and is raised. Returns a ``Report``."""
    return _run("chain", ChainInputs, verifier, guarantee, name, seeded, reads_draft_probs, alpha, seed, law_requests,
                batch_size, independence_pairs, impossible_token_trials, "independent", only)


def check_chain_logits_verifier(verifier: Callable[[ChainLogitInputs], Union[specdec.VerifyResult, tuple[Any, Any]]],
                                guarantee: Union[str, specdec.Lenient] = "lossless", *,
                                name: str = "python logits verifier", seeded: bool = True,
                                reads_draft_probs: bool = True, alpha: float = 1e-6, seed: int = 20261125,
                                law_requests: int = 100_000, batch_size: int = 2000,
                                only: Sequence[str] = ()) -> Report:
    """Runs the kit's logits checks on `verifier` (a callable taking a ``ChainLogitInputs`` and returning
    (tokens, reported) or a ``specdec.VerifyResult``): exact laws on Markov pairs of logits under three
    warping configurations (top-k against top-p, top-p against min-p, both sides alike), determinism,
    batch invariance and the logits bad-input catalogue. `guarantee` and errors as
    ``check_chain_verifier``; the coins' independence and the impossible-token check do not depend on
    the rows' form and are ``check_chain_verifier``'s. Returns a ``Report``."""
    return _run("chain_logits", ChainLogitInputs, verifier, guarantee, name, seeded, reads_draft_probs, alpha, seed,
                law_requests, batch_size, 0, 0, "independent", only)


def check_tree_verifier(verifier: Callable[[TreeInputs], Union[specdec.TreeResult, tuple[Any, Any]]],
                        guarantee: Union[str, specdec.Lenient] = "lossless", *,
                        sampling: str = "independent", name: str = "python tree verifier", seeded: bool = True,
                        reads_draft_probs: bool = True, alpha: float = 1e-6, seed: int = 20261125,
                        law_requests: int = 100_000, batch_size: int = 2000, only: Sequence[str] = ()) -> Report:
    """Runs the kit's tree checks on `verifier` (a callable taking a ``TreeInputs`` and returning
    (tokens, reported) or a ``specdec.TreeResult``): exact laws on trees of several shapes, determinism
    and batch invariance, the tree bad-input catalogue. `guarantee`: "lossless" or "greedy";
    `sampling`: how the kit draws each node's children, "independent" (i.i.d. from q: SpecInfer's
    multi-step sampling, K-SEQ) or "without_replacement" (recursive rejection). Errors as
    ``check_chain_verifier``. Returns a ``Report``."""
    if sampling not in ("independent", "without_replacement"):
        raise ValueError(f"sampling: 'independent' or 'without_replacement', got {sampling!r}")
    if isinstance(guarantee, specdec.Lenient):
        raise ValueError("guarantee: trees are checked against 'lossless' or 'greedy'")
    return _run("tree", TreeInputs, verifier, guarantee, name, seeded, reads_draft_probs, alpha, seed, law_requests,
                batch_size, 0, 0, sampling, only)


def _run(form, inputs_type, verifier, guarantee, name, seeded, reads_draft_probs, alpha, seed, law_requests, batch_size,
         independence_pairs, impossible_token_trials, sampling, only):
    if not AVAILABLE:
        raise RuntimeError("specdec.conformance was not built (Boost.Math was not found, "
                           "or SPECDEC_PYTHON_CONFORMANCE=OFF)")
    if not callable(verifier):
        raise TypeError(f"verifier: must be callable ({inputs_type.__name__} -> (tokens, reported)), "
                        f"got {type(verifier).__name__}")
    if isinstance(guarantee, specdec.Lenient):
        claim, lenience = "lenient", float(guarantee.lenience)
    elif guarantee in ("lossless", "greedy"):
        claim, lenience = guarantee, None
    else:
        raise ValueError(f"guarantee: 'lossless', 'greedy' or specdec.Lenient(l), got {guarantee!r}")
    failure = []

    def call(batch):
        inputs = inputs_type(**batch)
        B = len(inputs.seeds)
        try:
            result = verifier(inputs)
        except ValueError as e:  # the verifier refused the batch: a throw, as a C++ exception is to the kit
            return f"ValueError: {e}"  # (every request of the call counts as reported)
        except BaseException as e:  # noqa: BLE001 (raised again below)
            failure.append(e)
            return None  # stops the run
        try:
            return _normalise(result, B)
        except (TypeError, ValueError) as e:
            failure.append(type(e)(f"verifier: {e}"))
            return None

    ret = _core.check_verifier(form, name, call, claim, lenience, float(alpha), int(seed), int(law_requests),
                               int(batch_size), int(independence_pairs), int(impossible_token_trials), bool(seeded),
                               bool(reads_draft_probs), sampling == "without_replacement", list(only))
    if failure:
        raise failure[0]
    passed, text, js = ret
    return Report(bool(passed), text, js)
