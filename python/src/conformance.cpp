// specdec._core.check_verifier: the conformance kit (include/specdec/conformance/kit.hpp and, for
// verifiers from logits, conformance/logits.hpp) on a Python verifier, called directly with numpy arrays (no files). Built when Boost.Math is found
// (specdec::conformance links specdec::stats). The GIL stays held: the kit calls Python for every batch.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "numpy_out.hpp"
#include "specdec/acceptance/lenient.hpp"
#include "specdec/conformance/kit.hpp"
#include "specdec/conformance/logits.hpp"
#include "specdec/conformance/stop_run.hpp"

namespace nb = nanobind;
using namespace nb::literals;
namespace sc = specdec::conformance;

namespace {

// A numpy copy of a vector, with the given shape.
template <class T>
nb::ndarray<nb::numpy, T> copy(const std::vector<T>& v, std::initializer_list<std::size_t> shape) {
  std::unique_ptr<T[]> data(new T[v.size()]);
  std::copy(v.begin(), v.end(), data.get());
  return specdec_python::to_numpy(std::move(data), shape);
}

// The requests' identities, as numpy arrays in `d`.
void add_identities(nb::dict& d, const sc::request_identities& in, std::size_t B) {
  d["seeds"] = copy(in.seeds, {B});
  d["request_ids"] = copy(in.request_ids, {B});
  d["steps"] = copy(in.steps, {B});
}

// The kit's chain batch for the Python callable, as a dict of numpy arrays (packed layout, float32 rows).
nb::dict to_python(const sc::chain_inputs& in) {
  const std::size_t B = in.batch_size(), N = in.draft_tokens.size(), V = in.vocab_size;
  nb::dict d;
  d["vocab_size"] = V;
  d["num_drafts"] = copy(in.num_drafts, {B});
  d["offsets"] = copy(in.offsets, {in.offsets.size()});
  d["draft_tokens"] = copy(in.draft_tokens, {N});
  d["draft_rows"] = copy(in.draft_rows, {N, V});
  d["target_rows"] = copy(in.target_rows, {N + B, V});
  add_identities(d, in, B);
  return d;
}

// The kit's chain batch from logits: the chain's arrays (rows of logits, -inf masking a token) and
// each side's warping parameters per request.
nb::dict to_python(const sc::chain_logit_inputs& in) {
  nb::dict d = to_python(static_cast<const sc::chain_inputs&>(in));
  const std::size_t B = in.batch_size();
  const auto side = [&](const std::vector<specdec::warp_params>& w, const std::string& prefix) {
    std::vector<double> t(B), p(B), m(B);
    std::vector<std::int32_t> k(B);
    for (std::size_t b = 0; b < B; ++b) {
      t[b] = w[b].temperature;
      k[b] = w[b].top_k;
      p[b] = w[b].top_p;
      m[b] = w[b].min_p;
    }
    d[(prefix + "temperature").c_str()] = copy(t, {B});
    d[(prefix + "top_k").c_str()] = copy(k, {B});
    d[(prefix + "top_p").c_str()] = copy(p, {B});
    d[(prefix + "min_p").c_str()] = copy(m, {B});
  };
  side(in.target_warp, "target_");
  side(in.draft_warp, "draft_");
  return d;
}

// The kit's tree batch (parents, local ids, packed request after request; float32 rows per node).
nb::dict to_python(const sc::tree_inputs& in) {
  const std::size_t B = in.batch_size(), N = in.parents.size(), V = in.vocab_size;
  nb::dict d;
  d["vocab_size"] = V;
  d["sampling"] = in.sampling == sc::sibling_sampling::independent ? "independent" : "without_replacement";
  d["num_nodes"] = copy(in.num_nodes, {B});
  d["offsets"] = copy(in.offsets, {in.offsets.size()});
  d["parents"] = copy(in.parents, {N});
  d["tokens"] = copy(in.tokens, {N});
  d["draft_rows"] = copy(in.draft_rows, {N, V});
  d["target_rows"] = copy(in.target_rows, {N, V});
  add_identities(d, in, B);
  return d;
}

// The callable returns (tokens int32 [B, W] padded with -1, reported bool [B]).
std::vector<sc::verdict> from_python(const nb::object& result, std::size_t B) {
  const auto pair = nb::cast<nb::tuple>(result);
  const auto tokens = nb::cast<nb::ndarray<const std::int32_t, nb::ndim<2>, nb::c_contig>>(pair[0]);
  const auto reported = nb::cast<nb::ndarray<const bool, nb::ndim<1>, nb::c_contig>>(pair[1]);
  if (tokens.shape(0) != B || reported.shape(0) != B)
    throw nb::value_error("verifier: one row of tokens and one flag per request");
  std::vector<sc::verdict> out(B);
  const std::size_t W = tokens.shape(1);
  for (std::size_t b = 0; b < B; ++b) {
    for (std::size_t j = 0; j < W && tokens(b, j) != -1; ++j) out[b].tokens.push_back(tokens(b, j));
    out[b].reported = reported(b);
  }
  return out;
}

// Runs the kit on a verifier of `form` "chain", "chain_logits" or "tree"; returns (passed, text
// report, JSON report), or None when the callable stopped the run (it returned None: the Python side
// holds the exception to raise).
nb::object check_verifier(const std::string& form, const std::string& name, nb::callable verifier, const std::string& claim,
                          std::optional<double> lenience, double alpha, std::uint64_t seed, std::size_t law_requests,
                          std::size_t batch_size, std::size_t independence_pairs, std::uint64_t impossible_token_trials,
                          bool seeded, bool reads_draft_probs, bool without_replacement, const std::vector<std::string>& only) {
  const bool tree = form == "tree";
  if (!tree && form != "chain" && form != "chain_logits") throw nb::value_error("form: 'chain', 'chain_logits' or 'tree'");
  sc::guarantee g;
  if (claim == "lossless")
    g = sc::guarantee::lossless();
  else if (claim == "greedy")
    g = sc::guarantee::greedy();
  else if (claim == "lenient" && lenience && !tree)
    g = sc::guarantee::of_rule(specdec::lenient_rule{*lenience}, "lenient l = " + std::to_string(*lenience));
  else
    throw nb::value_error(tree ? "guarantee: 'lossless' or 'greedy'" : "guarantee: 'lossless', 'greedy' or Lenient(l)");
  const sc::kit_options o{
      .alpha = alpha,
      .seed = seed,
      .law_requests = law_requests,
      .batch_size = batch_size,
      .independence_pairs = independence_pairs,
      .impossible_token_trials = impossible_token_trials,
      .seeded = seeded,
      .reads_draft_probs = reads_draft_probs,
      .tree_sampling = without_replacement ? sc::sibling_sampling::without_replacement : sc::sibling_sampling::independent,
      .only = only};
  const auto call = [&verifier](const auto& in) {
    const nb::object result = verifier(to_python(in));
    if (result.is_none()) throw sc::stop_run{"the Python verifier raised"};
    // it raised ValueError (refusing the batch): a throw to the kit, as a C++ verifier's exception is
    if (nb::isinstance<nb::str>(result)) throw std::invalid_argument(nb::cast<std::string>(result));
    return from_python(result, in.batch_size());
  };
  try {
    const sc::report r = tree                     ? sc::check_tree_verifier(name, sc::tree_verifier(call), g, o)
                         : form == "chain_logits" ? sc::check_chain_logits_verifier(name, sc::chain_logits_verifier(call), g, o)
                                                  : sc::check_chain_verifier(name, sc::chain_verifier(call), g, o);
    return nb::make_tuple(r.passed(), sc::to_text(r), sc::to_json(r));
  } catch (const sc::stop_run&) {
    return nb::none();
  }
}

}  // namespace

void bind_conformance(nb::module_& m) {
  m.def("check_verifier", &check_verifier, "form"_a, "name"_a, "verifier"_a, "claim"_a, "lenience"_a.none(), "alpha"_a, "seed"_a,
        "law_requests"_a, "batch_size"_a, "independence_pairs"_a, "impossible_token_trials"_a, "seeded"_a, "reads_draft_probs"_a,
        "without_replacement"_a, "only"_a);
}
