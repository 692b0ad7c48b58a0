// specdec.Decoder: the step decoder (decode/batch_decoder.hpp) over the library's reference models
// (a random Markov model, n-gram models trained on text), one speculative round per `step()`, each
// request's round reported as an event. The models are C++ (no Python call inside a step), so a step
// runs without the GIL, one step of a decoder at a time.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/variant.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <variant>
#include <vector>

#include "numpy_out.hpp"
#include "rules.hpp"
#include "specdec/acceptance/concepts.hpp"
#include "specdec/acceptance/mtad.hpp"
#include "specdec/decode/batch_decoder.hpp"
#include "specdec/decode/verification_stage.hpp"
#include "specdec/draft/beam.hpp"
#include "specdec/draft/model_free.hpp"
#include "specdec/draft/prompt_lookup.hpp"
#include "specdec/draft/suffix_drafter.hpp"
#include "specdec/draft/tree.hpp"
#include "specdec/draft/tree_shape.hpp"
#include "specdec/errors.hpp"
#include "specdec/model/sequence.hpp"
#include "specdec/models/markov.hpp"
#include "specdec/models/ngram.hpp"

namespace nb = nanobind;
using namespace nb::literals;
using specdec::token_id;
using specdec_python::rule_spec;
using specdec_python::to_numpy;

namespace {

// What a call into Python raised, in one line ("KeyError: 'the model broke'"); with the GIL held.
std::string error_text(const std::exception& e) {
  if (const auto* p = dynamic_cast<const nb::python_error*>(&e)) {
    const nb::handle type = p->type();
    return std::string(nb::str(type.attr("__name__")).c_str()) + ": " + nb::str(p->value()).c_str();
  }
  return e.what();
}

// Copies the first n entries of a float32 or float64 array returned by Python's `who` into `out`.
template <class Array>
void copy_as_float(const Array& a, std::size_t n, std::span<float> out, const char* who) {
  if (a.dtype() == nb::dtype<float>())
    std::copy_n(static_cast<const float*>(a.data()), n, out.begin());
  else if (a.dtype() == nb::dtype<double>())
    std::transform(static_cast<const double*>(a.data()), static_cast<const double*>(a.data()) + n, out.begin(),
                   [](double x) { return static_cast<float>(x); });
  else
    throw specdec::error(std::string(who) + " returned an array that is not float32 or float64");
}

// A model written in Python: `next_logits(context)` with the context as a new int32 array returns
// the next token's logits, `vocab_size` float32 or float64 entries (any array nanobind can import).
// The decoder calls it without the GIL held, so each call takes the GIL. What the callable raises, or
// a result of the wrong shape or dtype, becomes a row of NaN (the decoder ends that request with
// `invalid_row`, its batch-mates run on) and its text is kept for `take_errors`.
class python_model {
 public:
  python_model(nb::callable next_logits, std::size_t vocab_size) : next_logits_(std::move(next_logits)), vocab_(vocab_size) {
    if (vocab_ == 0) throw specdec::error("vocab_size must be >= 1");
  }

  std::size_t vocab_size() const noexcept { return vocab_; }

  void next_logits(std::span<const token_id> context, std::span<float> logits) const {
    const nb::gil_scoped_acquire gil;
    try {
      auto copy = std::make_unique<token_id[]>(context.size());
      std::copy(context.begin(), context.end(), copy.get());
      const nb::object result = next_logits_(to_numpy(std::move(copy), {context.size()}));
      nb::ndarray<nb::ro, nb::ndim<1>, nb::c_contig, nb::device::cpu> row;
      if (!nb::try_cast(result, row, false)) throw specdec::error("next_logits returned no 1-d C-contiguous CPU array");
      if (row.size() != vocab_)
        throw specdec::error("next_logits returned " + std::to_string(row.size()) +
                             " logits, not vocab_size = " + std::to_string(vocab_));
      copy_as_float(row, vocab_, logits, "next_logits");
    } catch (const std::exception& e) {  // nb::python_error included (destroyed here, with the GIL held)
      std::fill(logits.begin(), logits.end(), std::numeric_limits<float>::quiet_NaN());
      const std::lock_guard lock(errors_->mutex);
      errors_->texts.push_back(error_text(e));
    }
  }

  void next_probs(std::span<const token_id> context, std::span<double> probs) const {
    std::vector<float> logits(vocab_);
    next_logits(context, logits);
    const float top = *std::max_element(logits.begin(), logits.end());
    double sum = 0.0;
    for (std::size_t v = 0; v < vocab_; ++v) sum += probs[v] = std::exp(static_cast<double>(logits[v] - top));
    for (double& p : probs) p /= sum;
  }

  // The errors kept since the last call, oldest first.
  std::vector<std::string> take_errors() const {
    const std::lock_guard lock(errors_->mutex);
    return std::exchange(errors_->texts, {});
  }

 private:
  struct error_log {
    std::mutex mutex;
    std::vector<std::string> texts;
  };
  nb::callable next_logits_;
  std::size_t vocab_;
  std::shared_ptr<error_log> errors_ = std::make_shared<error_log>();
};

// A reference model behind one type: a Markov model, an n-gram model or a model written in Python,
// shared by every Python object and decoder that holds it.
class reference_model {
 public:
  explicit reference_model(std::shared_ptr<const specdec::markov_model> m) : model_(std::move(m)) {}
  explicit reference_model(std::shared_ptr<const specdec::ngram_model> m) : model_(std::move(m)) {}
  explicit reference_model(std::shared_ptr<const python_model> m) : model_(std::move(m)) {}

  std::size_t vocab_size() const {
    return std::visit([](const auto& m) { return static_cast<std::size_t>(m->vocab_size()); }, model_);
  }
  void next_logits(std::span<const token_id> context, std::span<float> logits) const {
    std::visit([&](const auto& m) { m->next_logits(context, logits); }, model_);
  }
  void next_probs(std::span<const token_id> context, std::span<double> probs) const {
    std::visit([&](const auto& m) { m->next_probs(context, probs); }, model_);
  }
  // The n-gram model's vocabulary, or null for a Markov model.
  const specdec::vocabulary* words() const {
    const auto* n = std::get_if<std::shared_ptr<const specdec::ngram_model>>(&model_);
    return n != nullptr ? &(*n)->vocab() : nullptr;
  }
  // The errors a model written in Python raised since the last call (none for the C++ models).
  std::vector<std::string> take_errors() const {
    const auto* p = std::get_if<std::shared_ptr<const python_model>>(&model_);
    return p != nullptr ? (*p)->take_errors() : std::vector<std::string>{};
  }

 private:
  std::variant<std::shared_ptr<const specdec::markov_model>, std::shared_ptr<const specdec::ngram_model>,
               std::shared_ptr<const python_model>>
      model_;
};

// A KV-cached model written in Python (a SequenceModel, model/sequence.hpp): `model.forward(appends)`
// gets a list of (sequence, tokens, rows) tuples (tokens a new int32 array; the sequence's state so far
// is the model's own) and returns the rows asked for, one after the other, as a [sum of rows, V]
// float32 or float64 array; `model.rollback(sequence, n)` drops a sequence's last n tokens and
// `model.release(sequence)` frees it. The lengths are kept here. The decoder calls it without the GIL
// held, so each call takes the GIL. What a call raises, or a result of the wrong shape or dtype, is kept
// for `take_errors`: a failed forward gives NaN rows (every request of that forward ends with
// `invalid_row`, its sequence released), a failed rollback makes that sequence's next rows NaN.
class python_sequence_model {
 public:
  python_sequence_model(nb::object model, std::size_t vocab_size) : model_(std::move(model)), vocab_(vocab_size) {
    if (vocab_ == 0) throw specdec::error("vocab_size must be >= 1");
    for (const char* name : {"forward", "rollback", "release"})
      if (!nb::hasattr(model_, name) || !PyCallable_Check(model_.attr(name).ptr()))
        throw nb::type_error((std::string("model: has no callable '") + name + "' (forward, rollback, release)").c_str());
  }

  std::size_t vocab_size() const noexcept { return vocab_; }
  std::size_t length(specdec::sequence_id s) const {
    const auto it = lengths_.find(s);
    return it == lengths_.end() ? 0 : it->second;
  }

  void forward(std::span<const specdec::sequence_append> appends, std::span<float> logits) {
    const std::size_t rows = specdec::detail::check_rows(appends, logits.size(), vocab_);
    for (const auto& a : appends) specdec::detail::check_append(a, length(a.sequence), vocab_);
    for (const auto& a : appends) lengths_[a.sequence] += a.tokens.size();
    const nb::gil_scoped_acquire gil;
    try {
      nb::list batch;
      for (const auto& a : appends) {
        auto copy = std::make_unique<token_id[]>(a.tokens.size());
        std::copy(a.tokens.begin(), a.tokens.end(), copy.get());
        batch.append(nb::make_tuple(a.sequence, to_numpy(std::move(copy), {a.tokens.size()}), a.rows));
      }
      const nb::object result = model_.attr("forward")(batch);
      nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu> out;
      if (!nb::try_cast(result, out, false) || out.ndim() != 2 || out.shape(0) != rows || out.shape(1) != vocab_)
        throw specdec::error("forward returned no C-contiguous CPU array of shape (" + std::to_string(rows) + ", " +
                             std::to_string(vocab_) + ") (the rows asked for, one after the other)");
      copy_as_float(out, rows * vocab_, logits, "forward");
    } catch (const std::exception& e) {  // nb::python_error included (destroyed here, with the GIL held)
      std::fill(logits.begin(), logits.end(), std::numeric_limits<float>::quiet_NaN());
      keep_error(error_text(e));
      return;
    }
    std::size_t row = 0;
    for (const auto& a : appends) {  // a sequence whose rollback failed: its rows cannot be trusted
      if (broken_.contains(a.sequence))
        std::fill_n(logits.begin() + static_cast<std::ptrdiff_t>(row * vocab_), a.rows * vocab_,
                    std::numeric_limits<float>::quiet_NaN());
      row += a.rows;
    }
  }

  void rollback(specdec::sequence_id s, std::size_t n) {
    SPECDEC_EXPECTS(n <= length(s), "specdec::SequenceModel: rollback past the start of the sequence");
    if (n == 0) return;
    lengths_[s] -= n;
    call("rollback", s, [&] { return model_.attr("rollback")(s, n); });
  }

  void release(specdec::sequence_id s) {
    lengths_.erase(s);
    broken_.erase(s);
    call("release", s, [&] { return model_.attr("release")(s); });
  }

  std::vector<std::string> take_errors() const {
    const std::lock_guard lock(errors_->mutex);
    return std::exchange(errors_->texts, {});
  }

 private:
  template <class F>
  void call(const char* what, specdec::sequence_id s, F&& f) {
    const nb::gil_scoped_acquire gil;
    try {
      f();
    } catch (const std::exception& e) {
      broken_.insert(s);
      keep_error(std::string(what) + ": " + error_text(e));
    }
  }
  void keep_error(std::string text) const {
    const std::lock_guard lock(errors_->mutex);
    errors_->texts.push_back(std::move(text));
  }

  struct error_log {
    std::mutex mutex;
    std::vector<std::string> texts;
  };
  nb::object model_;
  std::size_t vocab_;
  std::unordered_map<specdec::sequence_id, std::size_t> lengths_;
  std::unordered_set<specdec::sequence_id> broken_;
  std::shared_ptr<error_log> errors_ = std::make_shared<error_log>();
};

// A decoder's model: a reference model through the recomputing adapter (every row re-reads its
// context; tree appends too), or a KV-cached model written in Python (chains only).
class decoder_model {
 public:
  explicit decoder_model(const reference_model& m) : impl_(std::in_place_type<recomputing>, m) {}
  explicit decoder_model(std::shared_ptr<python_sequence_model> m) : impl_(std::move(m)) {}

  std::size_t vocab_size() const {
    return std::visit([](const auto& m) { return static_cast<std::size_t>(at(m).vocab_size()); }, impl_);
  }
  std::size_t length(specdec::sequence_id s) const {
    return std::visit([&](const auto& m) { return static_cast<std::size_t>(at(m).length(s)); }, impl_);
  }
  void forward(std::span<const specdec::sequence_append> appends, std::span<float> logits) {
    std::visit([&](auto& m) { at(m).forward(appends, logits); }, impl_);
  }
  void rollback(specdec::sequence_id s, std::size_t n) {
    std::visit([&](auto& m) { at(m).rollback(s, n); }, impl_);
  }
  void release(specdec::sequence_id s) {
    std::visit([&](auto& m) { at(m).release(s); }, impl_);
  }
  void commit_tree(specdec::sequence_id s, std::size_t n, std::span<const std::int32_t> keep) {
    auto* r = std::get_if<recomputing>(&impl_);
    if (r == nullptr) throw specdec::error("a model written in Python (python_sequence_model) takes no token trees");
    r->commit_tree(s, n, keep);
  }
  bool takes_tree_appends() const noexcept { return std::holds_alternative<recomputing>(impl_); }

 private:
  using recomputing = specdec::recomputing_sequence_model<reference_model>;
  static recomputing& at(recomputing& m) { return m; }
  static const recomputing& at(const recomputing& m) { return m; }
  static python_sequence_model& at(const std::shared_ptr<python_sequence_model>& m) { return *m; }
  std::variant<recomputing, std::shared_ptr<python_sequence_model>> impl_;
};

using sequence_model = decoder_model;

// A model as the decoder takes it: a reference model, or a KV-cached one written in Python.
using any_model = std::variant<reference_model, std::shared_ptr<python_sequence_model>>;

// A token array (int32 or int64, one dimension) or a Python sequence of ints, as token ids.
std::vector<token_id> token_list(const nb::handle& x, const char* name) {
  std::vector<token_id> out;
  for (nb::handle item : x) {
    const auto v = nb::cast<long long>(item);
    if (v < 0 || v > INT32_MAX) throw specdec::error(std::string(name) + ": a token id is negative or above 2^31 - 1");
    out.push_back(static_cast<token_id>(v));
  }
  return out;
}

// A context of token ids for the model-free drafters: an int32 or int64 1-d C-contiguous CPU array
// (numpy, torch through DLPack) is read in one pass; anything else is iterated as `token_list`.
std::vector<token_id> context_tokens(const nb::handle& x, const char* name) {
  const auto checked = [name](auto span) {
    std::vector<token_id> out(span.size());
    for (std::size_t i = 0; i < span.size(); ++i) {
      if (span[i] < 0 || span[i] > INT32_MAX)
        throw specdec::error(std::string(name) + ": a token id is negative or above 2^31 - 1");
      out[i] = static_cast<token_id>(span[i]);
    }
    return out;
  };
  using flat = nb::ndarray<nb::ndim<1>, nb::c_contig, nb::device::cpu>;
  flat a;
  if (nb::try_cast(x, a, false)) {
    if (a.dtype() == nb::dtype<std::int32_t>())
      return checked(std::span<const std::int32_t>(static_cast<const std::int32_t*>(a.data()), a.size()));
    if (a.dtype() == nb::dtype<std::int64_t>())
      return checked(std::span<const std::int64_t>(static_cast<const std::int64_t*>(a.data()), a.size()));
  }
  return token_list(x, name);
}

// Suffix-tree drafting for loops written in Python (draft/suffix_drafter.hpp): one request's tree,
// indexing only the tokens appended since the last call while the context extends what it saw.
class suffix_drafter {
 public:
  explicit suffix_drafter(const specdec::suffix_options& o) : options_(o), tree_(o.max_depth) {}

  std::vector<token_id> draft(const std::vector<token_id>& context, std::size_t limit) {
    specdec::index_context(tree_, context);
    specdec::suffix_speculate(tree_, context, limit, options_, found_, work_);
    return found_.tokens;
  }

 private:
  specdec::suffix_options options_;
  specdec::suffix_tree tree_;
  specdec::suffix_draft found_;
  specdec::suffix_workspace work_;
};

// A new int32 NumPy array holding `tokens`.
nb::ndarray<nb::numpy, token_id> token_array(const std::vector<token_id>& tokens) {
  auto data = std::make_unique<token_id[]>(tokens.size());
  std::copy(tokens.begin(), tokens.end(), data.get());
  return to_numpy(std::move(data), {tokens.size()});
}

// The drafter a request names.
enum class drafter_kind { model, ngram, suffix, suffix_tree, tree, static_tree, mtad };

drafter_kind drafter_of(const std::string& name) {
  if (name == "model") return drafter_kind::model;
  if (name == "ngram") return drafter_kind::ngram;
  if (name == "suffix") return drafter_kind::suffix;
  if (name == "suffix_tree") return drafter_kind::suffix_tree;
  if (name == "tree") return drafter_kind::tree;
  if (name == "static_tree") return drafter_kind::static_tree;
  if (name == "mtad") return drafter_kind::mtad;
  throw nb::value_error(
      ("drafter: '" + name + "' is not one of 'model', 'ngram', 'suffix', 'suffix_tree', 'tree', 'static_tree', 'mtad'").c_str());
}

// What `add` takes beyond the prompt (Python's keyword arguments, checked in specdec/decoder.py).
struct request_spec {
  std::uint64_t seed = 0;
  std::uint32_t request_id = 0;
  std::size_t gamma = 4;
  std::size_t max_new_tokens = 64;
  specdec::warp_params target{};
  specdec::warp_params draft{};
  std::string drafter = "model";
  std::optional<rule_spec> rule;
  std::size_t ngram_min = 1, ngram_max = 3;
  specdec::suffix_options suffix{};
  bool round_keys = false;
  std::size_t tree_width = 4, tree_nodes = 16;  // "tree": EAGLE-2's frontier width and kept nodes
  std::size_t beams = 4;                        // "mtad": beams W
  double tau = 0.5;                             // "mtad": the joint rule's threshold
};

// One decoder on one policy. The models are held here, the sequence adapters refer to them.
template <class Policy>
class policy_decoder {
 public:
  policy_decoder(Policy policy, const any_model& target, const std::optional<any_model>& draft, const rule_spec& rule)
      : target_model_(reference_of(target)),
        draft_model_(draft ? reference_of(*draft) : target_model_),
        has_draft_(draft.has_value()),
        rule_(rule),
        target_(model_of(target, target_model_)),
        draft_(model_of(draft ? *draft : target, draft_model_, !draft)) {
    specdec_python::with_rule(rule,
                              [&](const auto& r) { decoder_ = std::make_unique<decoder_type>(policy, target_, draft_, r); });
  }

  specdec::request_handle add(std::vector<token_id> prompt, std::vector<token_id> stop_tokens, const request_spec& spec) {
    specdec::request_options o;
    o.prompt = std::move(prompt);
    o.stop_tokens = std::move(stop_tokens);
    o.seed = spec.seed;
    o.request_id = spec.request_id;
    o.gamma = spec.gamma;
    o.max_new_tokens = spec.max_new_tokens;
    o.target_params = spec.target;
    o.draft_params = spec.draft;
    o.sample_keys = spec.round_keys ? specdec::target_sample_keys::round : specdec::target_sample_keys::output_position;
    const rule_spec rule = spec.rule.value_or(rule_);
    const std::size_t V = target_.vocab_size();
    const drafter_kind kind = drafter_of(spec.drafter);
    const bool model_tree = kind == drafter_kind::tree || kind == drafter_kind::static_tree || kind == drafter_kind::mtad;
    if (model_tree && !has_draft_)
      throw specdec::error("drafter '" + spec.drafter + "' needs a draft model (Decoder(target, draft))");
    if (model_tree && !draft_model_)
      throw specdec::error("drafter '" + spec.drafter +
                           "' drafts from a stateless draft model (a reference model or python_model), not a "
                           "python_sequence_model");
    std::shared_ptr<void> owned;  // the request's drafter, when its stage refers to one (kept until it finishes)
    if (kind == drafter_kind::static_tree) {
      // A static full tree (draft/tree.hpp): `gamma` levels of `tree_width` children per node, the
      // candidates drawn as the rule needs them to stay lossless (the file comment's table): i.i.d. from
      // q for SpecInfer's multi-step sampling (Strict) and K-SEQ, without replacement for recursive
      // rejection, the top-k of q for the rules that read no q.
      specdec_python::with_tree_rule(rule, [&](const auto& r) {
        using R = std::decay_t<decltype(r)>;
        constexpr specdec::tree_method method = specdec::tree_method_of<R>::value;
        const specdec::tree_sampling sampling =
            method == specdec::tree_method::multi_step || method == specdec::tree_method::k_seq ? specdec::tree_sampling::iid
            : method == specdec::tree_method::recursive_rejection ? specdec::tree_sampling::without_replacement
                                                                  : specdec::tree_sampling::top_k;
        if (spec.tree_width == 0) throw specdec::error("tree_width must be >= 1");
        auto d = std::make_shared<specdec::static_tree_drafter<reference_model>>(
            *draft_model_,
            specdec::tree_shape::full(std::vector<std::size_t>(std::max<std::size_t>(spec.gamma, 1), spec.tree_width)),
            spec.draft, sampling);
        o.set_stages(specdec::tree_drafter_stage(*d), specdec::tree_acceptance{r});
        owned = std::move(d);
      });
    } else if (kind == drafter_kind::suffix_tree || kind == drafter_kind::tree) {
      // EAGLE-2's dynamic tree (draft/tree.hpp): top-k candidates of the draft's unwarped rows, `gamma` - 1
      // expansions; like the suffix tree's, its siblings are not draws from q, so only rules that read no q.
      specdec_python::with_tree_rule(rule, [&](const auto& r) {
        using R = std::decay_t<decltype(r)>;
        if constexpr (specdec::tree_reads_draft<R>) {
          throw specdec::error("drafter '" + spec.drafter +
                               "' drafts no q: its rule must be TargetOnly, Greedy, SampleAndMatch or Typical");
        } else if (kind == drafter_kind::suffix_tree) {
          o.set_stages(specdec::suffix_tree_stage(spec.suffix), specdec::tree_acceptance{r});
        } else {
          const specdec::dynamic_tree_params params{
              .depth = std::max<std::size_t>(spec.gamma, 1) - 1, .top_k = spec.tree_width, .total_tokens = spec.tree_nodes};
          try {
            specdec::validate(params);
          } catch (const specdec::error& e) {  // named as Python names them
            throw specdec::error(std::string("tree_width (top_k), tree_nodes (total_tokens): ") + e.what());
          }
          auto d = std::make_shared<specdec::dynamic_tree_drafter<reference_model>>(*draft_model_, params);
          o.set_stages(specdec::tree_drafter_stage(*d), specdec::tree_acceptance{r});
          owned = std::move(d);
        }
      });
    } else if (kind == drafter_kind::mtad) {
      // MTAD (seed 003): W beams over the draft, rows warped with the target's parameters (one warper for
      // both sides, its appendix F), the joint rule with threshold tau; a lossy method by design.
      if (spec.rule) throw specdec::error("drafter 'mtad' verifies with MTAD's joint rule (tau); drop rule");
      auto d = std::make_shared<specdec::beam_drafter<reference_model>>(
          *draft_model_, specdec::beam_params{.width = spec.beams, .warp = spec.target});
      o.drafter = specdec::beam_stage(*d);
      o.acceptance = specdec::mtad_rule(spec.tau);
      owned = std::move(d);
    } else {
      specdec_python::with_rule(rule, [&](const auto& r) {
        using R = std::decay_t<decltype(r)>;
        if (spec.rule) o.acceptance = r;
        // A model-free drafter's drafts are a function of the context: a rule that reads q gets the
        // one-hot q of that law (draft/model_free.hpp), never the drafter's frequencies.
        const std::size_t one_hot = specdec::reads_draft_distribution<R> ? V : 0;
        if (kind == drafter_kind::ngram)
          o.drafter = specdec::prompt_lookup_stage({.min_n = spec.ngram_min,
                                                    .max_n = spec.ngram_max,
                                                    .k = std::max<std::size_t>(spec.gamma, 1),
                                                    .one_hot_vocab = one_hot});
        else if (kind == drafter_kind::suffix)
          o.drafter = one_hot > 0 ? specdec::draft_stage(specdec::with_one_hot_q(specdec::suffix_chain_stage(spec.suffix), V))
                                  : specdec::draft_stage(specdec::suffix_chain_stage(spec.suffix));
        else if (!has_draft_ && spec.gamma > 0)
          throw specdec::error("drafter 'model' needs a draft model (Decoder(target, draft)), or gamma = 0");
      });
    }
    const specdec::request_handle h = decoder_->add(std::move(o));
    if (owned) drafters_[h] = std::move(owned);
    return h;
  }

  // One step; the events copied out (their spans live until the next step).
  template <class Visit>
  void step(Visit&& visit) {
    for (const specdec::step_event& e : decoder_->step()) {
      visit(e);
      if (e.finished != specdec::finish_reason::none) drafters_.erase(e.request);
    }
  }
  std::size_t active() const noexcept { return decoder_->active(); }
  void cancel(specdec::request_handle h) { decoder_->cancel(h); }
  std::vector<token_id> tokens(specdec::request_handle h) const {
    const auto t = decoder_->tokens(h);
    return {t.begin(), t.end()};
  }
  specdec::decode_stats stats(specdec::request_handle h) const { return decoder_->stats(h); }

 private:
  using decoder_type = specdec::batch_decoder<Policy, sequence_model, sequence_model>;

  // The stateless model behind `m`, or none for a model written in Python with a KV cache.
  static std::optional<reference_model> reference_of(const any_model& m) {
    const auto* r = std::get_if<reference_model>(&m);
    return r != nullptr ? std::optional(*r) : std::nullopt;
  }
  // The decoder's model of `m`: the recomputing adapter over `reference` (m's own stateless model), or
  // m's Python model. A draft that is not given (`placeholder`) and would share the target's Python
  // model gets a recomputing adapter instead: the decoder releases both sides' sequences, and only
  // model-free drafters or gamma 0 run without a draft, so it is never asked for a row.
  static sequence_model model_of(const any_model& m, const std::optional<reference_model>& reference, bool placeholder = false) {
    if (reference) return sequence_model(*reference);
    const auto& python = std::get<std::shared_ptr<python_sequence_model>>(m);
    if (placeholder) return sequence_model(placeholder_model(python->vocab_size()));
    return sequence_model(python);
  }
  // A Markov model of order 0 over V tokens, for the draft side no request asks rows of.
  static const reference_model& placeholder_model(std::size_t V) {
    static std::unordered_map<std::size_t, std::unique_ptr<reference_model>> kept;  // one per V, never freed
    static std::mutex mutex;
    const std::lock_guard lock(mutex);
    auto& m = kept[V];
    if (!m)
      m = std::make_unique<reference_model>(
          std::make_shared<const specdec::markov_model>(specdec::random_markov_model(V, 0, 0, 1.0, 0.0)));
    return *m;
  }

  std::optional<reference_model> target_model_, draft_model_;
  bool has_draft_;
  rule_spec rule_;
  sequence_model target_, draft_;
  std::unique_ptr<decoder_type> decoder_;
  std::unordered_map<specdec::request_handle, std::shared_ptr<void>> drafters_;  // stages' drafters, by request
};

// The Python object: a decoder on the backend it was made for; one step (or add) at a time.
class decoder {
 private:
  // f(the decoder) without the GIL (no Python object is touched inside), one call at a time; the GIL
  // is released before the lock is taken, so a thread waiting for the lock never holds it.
  template <class F>
  auto locked(F&& f) {
    const nb::gil_scoped_release no_gil;
    const std::lock_guard lock(mutex_);
    return std::visit([&](auto& p) { return f(*p); }, impl_);
  }


 public:
  decoder(const any_model& target, const std::optional<any_model>& draft, const rule_spec& rule, const std::string& backend) {
    const auto vocab = [](const any_model& m) { return std::visit([](const auto& x) { return vocab_of(x); }, m); };
    if (draft && vocab(*draft) != vocab(target)) throw specdec::error("the target and the draft must share the vocabulary");
    specdec_python::with_policy(
        backend, [&](auto policy) { impl_ = std::make_unique<policy_decoder<decltype(policy)>>(policy, target, draft, rule); });
  }

  specdec::request_handle add(const nb::handle& prompt, const nb::handle& stop_tokens, const request_spec& spec) {
    std::vector<token_id> p = token_list(prompt, "prompt"), stops = token_list(stop_tokens, "stop_tokens");
    return locked([&](auto& d) { return d.add(std::move(p), std::move(stops), spec); });
  }

  // The step's events as tuples (request, tokens, finished, status, drafted, verified, draft_steps,
  // target_positions), specdec/decoder.py makes them StepEvents.
  nb::list step() {
    struct event {
      specdec::request_handle request;
      std::vector<token_id> tokens;
      specdec::finish_reason finished;
      specdec::verify_status status;
      std::size_t drafted, verified, draft_steps, target_positions;
    };
    std::vector<event> events;
    locked([&](auto& d) {
      d.step([&](const specdec::step_event& e) {
        events.push_back({e.request,
                          {e.tokens.begin(), e.tokens.end()},
                          e.finished,
                          e.status,
                          e.drafted,
                          e.verified,
                          e.draft_steps,
                          e.target_positions});
      });
    });
    nb::list out;
    for (event& e : events) {
      out.append(nb::make_tuple(e.request, token_array(e.tokens), finish_name(e.finished), static_cast<unsigned>(e.status),
                                e.drafted, e.verified, e.draft_steps, e.target_positions));
    }
    return out;
  }

  std::size_t active() {
    return locked([](auto& d) { return d.active(); });
  }
  void cancel(specdec::request_handle h) {
    locked([&](auto& d) { d.cancel(h); });
  }
  nb::ndarray<nb::numpy, token_id> tokens(specdec::request_handle h) {
    const std::vector<token_id> t = locked([&](auto& d) { return d.tokens(h); });
    return token_array(t);
  }
  nb::dict stats(specdec::request_handle h) {
    const specdec::decode_stats s = locked([&](auto& d) { return d.stats(h); });
    nb::dict out;
    out["iterations"] = s.iterations;
    out["target_calls"] = s.target_calls;
    out["target_positions"] = s.target_positions;
    out["draft_calls"] = s.draft_calls;
    out["drafted"] = s.drafted;
    out["accepted"] = s.accepted;
    out["emitted"] = s.emitted;
    out["drafted_at"] = s.drafted_at;
    out["accepted_at"] = s.accepted_at;
    return out;
  }

 private:
  static std::size_t vocab_of(const reference_model& m) { return m.vocab_size(); }
  static std::size_t vocab_of(const std::shared_ptr<python_sequence_model>& m) { return m->vocab_size(); }
  static nb::object finish_name(specdec::finish_reason f) {
    switch (f) {
      case specdec::finish_reason::none: return nb::none();
      case specdec::finish_reason::length: return nb::str("length");
      case specdec::finish_reason::stop_token: return nb::str("stop_token");
      case specdec::finish_reason::cancelled: return nb::str("cancelled");
      case specdec::finish_reason::error: return nb::str("error");
    }
    return nb::none();
  }
  std::variant<std::unique_ptr<policy_decoder<specdec::exec::sequenced_policy>>
#if SPECDEC_ENABLE_SIMD
               ,
               std::unique_ptr<policy_decoder<specdec::exec::simd_policy<>>>
#endif
               >
      impl_;
  std::mutex mutex_;
};

// The model's next-token row after `context` as a new NumPy array: its logits (float) or its
// probabilities (double).
template <class T>
nb::ndarray<nb::numpy, T> next_row(const reference_model& model, const nb::handle& context) {
  const std::vector<token_id> c = context_tokens(context, "context");
  for (const token_id t : c)
    if (static_cast<std::size_t>(t) >= model.vocab_size()) throw specdec::error("context: a token is outside the vocabulary");
  auto row = std::make_unique<T[]>(model.vocab_size());
  const std::span<T> out(row.get(), model.vocab_size());
  if constexpr (std::is_same_v<T, float>)
    model.next_logits(c, out);
  else
    model.next_probs(c, out);
  return to_numpy(std::move(row), {model.vocab_size()});
}

}  // namespace

void bind_decoder(nb::module_& m) {
  nb::class_<reference_model>(m, "ReferenceModel")
      .def_prop_ro("vocab_size", &reference_model::vocab_size)
      .def("next_logits", &next_row<float>, "context"_a)
      .def("next_probs", &next_row<double>, "context"_a)
      .def("take_errors", &reference_model::take_errors)
      .def(
          "encode",
          [](const reference_model& model, const std::string& text) {
            if (model.words() == nullptr) throw specdec::error("encode: a Markov model has no words");
            const std::vector<token_id> t = model.words()->encode(text);
            return token_array(t);
          },
          "text"_a)
      .def(
          "decode",
          [](const reference_model& model, const nb::handle& tokens) {
            if (model.words() == nullptr) throw specdec::error("decode: a Markov model has no words");
            const std::vector<token_id> t = token_list(tokens, "tokens");
            for (const token_id x : t)
              if (static_cast<std::size_t>(x) >= model.vocab_size())
                throw specdec::error("tokens: a token is outside the vocabulary");
            return model.words()->decode(t);
          },
          "tokens"_a);

  m.def(
      "random_markov_model",
      [](int vocab_size, int order, std::uint64_t seed, double concentration, double zero_fraction) {
        const std::size_t V = specdec_python::non_negative(vocab_size, "vocab_size");
        const std::size_t k = specdec_python::non_negative(order, "order");
        return reference_model(std::make_shared<const specdec::markov_model>(
            specdec::random_markov_model(V, k, seed, concentration, zero_fraction)));
      },
      "vocab_size"_a, "order"_a, "seed"_a, "concentration"_a, "zero_fraction"_a);

  m.def(
      "python_model",
      [](nb::callable next_logits, int vocab_size) {
        return reference_model(
            std::make_shared<const python_model>(std::move(next_logits), specdec_python::non_negative(vocab_size, "vocab_size")));
      },
      "next_logits"_a, "vocab_size"_a);

  nb::class_<python_sequence_model>(m, "PythonSequenceModel")
      .def(
          "__init__",
          [](python_sequence_model* self, nb::object model, int vocab_size) {
            new (self) python_sequence_model(std::move(model), specdec_python::non_negative(vocab_size, "vocab_size"));
          },
          "model"_a, "vocab_size"_a)
      .def_prop_ro("vocab_size", &python_sequence_model::vocab_size)
      .def("take_errors", &python_sequence_model::take_errors);

  m.def(
      "ngram_pair",
      [](const std::vector<std::string>& texts, int target_order, int draft_order, int max_words) {
        specdec::ngram_pair p = specdec::make_ngram_pair(texts, specdec_python::non_negative(target_order, "target_order"),
                                                         specdec_python::non_negative(draft_order, "draft_order"),
                                                         specdec_python::non_negative(max_words, "max_words"));
        return nb::make_tuple(reference_model(std::make_shared<const specdec::ngram_model>(std::move(p.target))),
                              reference_model(std::make_shared<const specdec::ngram_model>(std::move(p.draft))));
      },
      "texts"_a, "target_order"_a, "draft_order"_a, "max_words"_a);

  m.def(
      "prompt_lookup",
      [](const nb::handle& context, int min_n, int max_n, int k) {
        const specdec::prompt_lookup_options o{.min_n = specdec_python::non_negative(min_n, "min_n"),
                                               .max_n = specdec_python::non_negative(max_n, "max_n"),
                                               .k = specdec_python::non_negative(k, "k")};
        specdec::validate(o);
        const std::vector<token_id> c = context_tokens(context, "context");
        std::vector<token_id> found;
        specdec::prompt_lookup(c, o, o.k, found);
        return token_array(found);
      },
      "context"_a, "min_n"_a, "max_n"_a, "k"_a);

  nb::class_<suffix_drafter>(m, "SuffixDrafter")
      .def(
          "__init__",
          [](suffix_drafter* self, int max_depth, int max_spec, double factor, double min_probability, int min_match) {
            specdec::suffix_options o;
            o.max_depth = specdec_python::non_negative(max_depth, "max_depth");
            o.max_spec = specdec_python::non_negative(max_spec, "max_spec");
            o.factor = factor;
            o.min_probability = min_probability;
            o.min_match = specdec_python::non_negative(min_match, "min_match");
            specdec::validate(o);
            new (self) suffix_drafter(o);
          },
          "max_depth"_a, "max_spec"_a, "factor"_a, "min_probability"_a, "min_match"_a)
      .def(
          "draft",
          [](suffix_drafter& d, const nb::handle& context, int limit) {
            return token_array(d.draft(context_tokens(context, "context"), specdec_python::non_negative(limit, "limit")));
          },
          "context"_a, "limit"_a);

  nb::class_<request_spec>(m, "RequestSpec")
      .def(
          "__init__",
          [](request_spec* self, std::uint64_t seed, std::uint32_t request_id, int gamma, int max_new_tokens,
             std::vector<double> target, std::vector<double> draft, std::string drafter, std::optional<rule_spec> rule,
             int ngram_min, int ngram_max, int suffix_depth, double suffix_min_probability, bool round_keys, int tree_width,
             int tree_nodes, int beams, double tau) {
            const auto warp = [](const std::vector<double>& w, const char* name) {
              if (w.size() != 4) throw specdec::error(std::string(name) + ": (temperature, top_k, top_p, min_p)");
              if (!(w[1] >= 0.0 && w[1] <= 2147483647.0)) throw specdec::error(std::string(name) + " top_k must be in [0, 2^31)");
              return specdec::warp_params{.temperature = w[0], .top_k = static_cast<int>(w[1]), .top_p = w[2], .min_p = w[3]};
            };
            specdec::suffix_options suffix;
            suffix.max_depth = specdec_python::non_negative(suffix_depth, "suffix_depth");
            suffix.min_probability = suffix_min_probability;
            specdec::validate(suffix);
            const specdec::prompt_lookup_options lookup{.min_n = specdec_python::non_negative(ngram_min, "ngram_min"),
                                                        .max_n = specdec_python::non_negative(ngram_max, "ngram_max")};
            specdec::validate(lookup);
            new (self) request_spec{.seed = seed,
                                    .request_id = request_id,
                                    .gamma = specdec_python::non_negative(gamma, "gamma"),
                                    .max_new_tokens = specdec_python::non_negative(max_new_tokens, "max_new_tokens"),
                                    .target = warp(target, "target"),
                                    .draft = warp(draft, "draft"),
                                    .drafter = std::move(drafter),
                                    .rule = rule,
                                    .ngram_min = lookup.min_n,
                                    .ngram_max = lookup.max_n,
                                    .suffix = suffix,
                                    .round_keys = round_keys,
                                    .tree_width = specdec_python::non_negative(tree_width, "tree_width"),
                                    .tree_nodes = specdec_python::non_negative(tree_nodes, "tree_nodes"),
                                    .beams = specdec_python::non_negative(beams, "beams"),
                                    .tau = tau};
          },
          "seed"_a, "request_id"_a, "gamma"_a, "max_new_tokens"_a, "target"_a, "draft"_a, "drafter"_a, "rule"_a.none(),
          "ngram_min"_a, "ngram_max"_a, "suffix_depth"_a, "suffix_min_probability"_a, "round_keys"_a, "tree_width"_a,
          "tree_nodes"_a, "beams"_a, "tau"_a);

  nb::class_<decoder>(m, "Decoder")
      .def(nb::init<const any_model&, const std::optional<any_model>&, const rule_spec&, const std::string&>(), "target"_a,
           "draft"_a.none(), "rule"_a, "backend"_a)
      .def("add", &decoder::add, "prompt"_a, "stop_tokens"_a, "spec"_a)
      .def("step", &decoder::step)
      .def("active", &decoder::active)
      .def("cancel", &decoder::cancel, "request"_a)
      .def("tokens", &decoder::tokens, "request"_a)
      .def("stats", &decoder::stats, "request"_a);
}
