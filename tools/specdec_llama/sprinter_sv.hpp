// specdec-llama's set-up of SPRINTER and SV on llama.cpp (docs/llama-cpp.md): what each method learns
// or measures on the model pair before decoding.
//
// SPRINTER (Zhong, Teku and Tandon, section 3.2 and A.5): the verifier is trained on the pair's own
// acceptance labels. learn::generate_verifier_data draws prefixes from the training prompts (the four
// categories of section 3.2: as cut, completed by the draft, by the target, or by either), drafts x
// from the draft's row q, labels it 1 iff q(x) <= lambda p(x) with the target's row p, and stores the
// features s(x, prefix) of the draft model's row q (draft/verifier.hpp's draft_row_features: the
// draft's probability of x, its rank, the row's top probabilities and entropy); train_linear_verifier
// fits the linear verifier (Adam, early stopping). Both models are read through prefix_cached_model
// lanes of contexts of their own, freed after training.
//
// SV (Kim et al., section 5 and 7.4): the acceptance estimator P(accept | S, A) is fitted on profiling
// samples of the pair (llama_cpp::profile_sv_estimator, integrations/llama_cpp/sv_profile.hpp: standard
// SD with gamma_max drafts per round, S and A from the companion, x = min(1, p/q) of every drafted
// position), on adaptive bins; the target's latency for one call scoring P positions is measured on
// this machine (median of 3 forwards for P = 1, 2, 4, ...), as are a draft step and a companion call,
// and SV's batch scheduler reads them.
//
// Training needs specdec::learn (Eigen): without it (SPECDEC_LLAMA_HAS_LEARN unset) the tool refuses
// --method sprinter by name.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <functional>
#include <span>
#include <vector>

#include <specdec/specdec.hpp>
#include <specdec/decode/sv.hpp>
#include <specdec/estimate/acceptance_estimator.hpp>
#if defined(SPECDEC_LLAMA_HAS_LEARN)
#include <specdec/learn/generate.hpp>
#include <specdec/learn/roc.hpp>
#include <specdec/learn/train.hpp>
#endif
#include <specdec/model/prefix_cached_model.hpp>
#include <specdec/optimize/latency_table.hpp>
#include <specdec/integrations/llama_cpp.hpp>
#include <specdec/integrations/llama_cpp/sv_profile.hpp>

namespace specdec_llama {

namespace lc = specdec::llama_cpp;
using specdec::token_id;
using llama_view = specdec::prefix_cached_model<lc::sequence_model>;

// SPRINTER's verifier as the tool holds it: a trained learn::linear_verifier behind a function.
using sprinter_verifier = specdec::function_verifier<std::function<double(std::span<const float>)>>;

#if defined(SPECDEC_LLAMA_HAS_LEARN)
// A `Model` that reads `m` with `lead` in front of every context: learn/'s prefixes start anywhere in
// a document, the empty prefix included, and llama.cpp has no row before a first token. The lead is
// the prompts' first token (BOS where the vocabulary adds one), which the documents then leave out.
template <class M>
class led_model {
 public:
  led_model(const M& m, token_id lead) : m_(&m), lead_(lead) {}
  std::size_t vocab_size() const { return m_->vocab_size(); }
  void next_logits(std::span<const token_id> context, std::span<float> logits) const {
    context_.assign(1, lead_);
    context_.insert(context_.end(), context.begin(), context.end());
    m_->next_logits(std::span<const token_id>(context_), logits);
  }

 private:
  const M* m_;
  token_id lead_;
  mutable std::vector<token_id> context_;
};

// What trains SPRINTER's verifier.
struct sprinter_training_options {
  std::size_t examples = 2000;  // labelled drafted tokens (section 3.2's four prefix categories in turn)
  double lambda = 1.2;          // label: acceptable iff q(x) <= lambda p(x) (A.5 uses 1.2)
  double tau = 0.5;             // the threshold the report's rates are measured at
  specdec::warp_params draft_params{}, target_params{};
  std::uint64_t seed = 0;
  std::uint32_t ctx = 2048;
  int threads = 0;
  bool hidden_states = false;  // features: the draft's hidden state, then its row (else its row alone)
};

// A trained or loaded linear verifier as the tool's verifier.
inline sprinter_verifier as_sprinter_verifier(const specdec::learn::linear_verifier& v) {
  return specdec::make_verifier(
      v.feature_size(), std::function<double(std::span<const float>)>([v](std::span<const float> f) { return v.score(f); }));
}

// The features SPRINTER's verifier reads: the draft's row alone (draft_row_features), or the draft's
// last-layer hidden state before them (llama_cpp::hidden_state_features; the draft context then
// outputs hidden states). Their count.
inline std::size_t sprinter_feature_size(const lc::model& draft_model, bool hidden) {
  const std::size_t row = specdec::draft_row_features::size;
  return hidden ? static_cast<std::size_t>(llama_model_n_embd(draft_model.get())) + row : row;
}

// A verifier saved by --save-verifier (learn/linear_verifier.hpp's file format), checked to read the
// `expected` features the tool extracts.
// \throws specdec::error when the file is unreadable, malformed or of another feature count.
inline specdec::learn::linear_verifier load_sprinter_verifier(const std::filesystem::path& path, std::size_t expected) {
  auto v = specdec::learn::linear_verifier::load(path);
  if (v.feature_size() != expected)
    throw specdec::error("the verifier in " + path.string() + " reads " + std::to_string(v.feature_size()) +
                         " features; --method sprinter extracts " + std::to_string(expected));
  std::printf("sprinter verifier: loaded from %s (%zu features)\n", path.string().c_str(), v.feature_size());
  return v;
}

// Trains SPRINTER's linear verifier on draft_row_features of the pair's drafts after prefixes of
// `documents` and prints what it learnt (examples, acceptable fraction, validation loss, rates at tau).
inline specdec::learn::linear_verifier train_sprinter_verifier(const lc::model& target_model, const lc::model& draft_model,
                                                               std::span<const std::vector<token_id>> documents,
                                                               const sprinter_training_options& o) {
  constexpr std::uint32_t lanes = 2;
  const lc::context_options params{.context_per_sequence = o.ctx, .sequences = lanes, .threads = o.threads};
  lc::context target_ctx(target_model, params);
  lc::context draft_ctx(
      draft_model, {.context_per_sequence = o.ctx, .sequences = lanes, .threads = o.threads, .hidden_states = o.hidden_states});
  lc::sequence_model target_seq(target_ctx), draft_seq(draft_ctx);
  const llama_view target_lanes(target_seq, lanes), draft_lanes(draft_seq, lanes);
  const token_id lead = documents.front().front();
  const led_model<llama_view> target(target_lanes, lead), draft(draft_lanes, lead);
  std::vector<std::vector<token_id>> led_documents;
  for (const auto& d : documents) led_documents.emplace_back(d.begin() + (!d.empty() && d.front() == lead), d.end());
  const auto start = std::chrono::steady_clock::now();
  const auto generate = [&](auto& features) {
    return specdec::learn::generate_verifier_data(target, draft, features, std::span<const std::vector<token_id>>(led_documents),
                                                  {.examples = o.examples,
                                                   .lambda = o.lambda,
                                                   .draft_params = o.draft_params,
                                                   .target_params = o.target_params,
                                                   .seed = o.seed});
  };
  specdec::draft_row_features row_features;
  lc::hidden_state_features hidden_features(draft_lanes, draft_seq, lead);  // the led model's lead is in the lanes
  const auto data = o.hidden_states ? generate(hidden_features) : generate(row_features);
  const auto trained = specdec::learn::train_linear_verifier(data, {.seed = o.seed});
  std::vector<double> scores;
  for (std::size_t i = 0; i < data.size(); ++i) scores.push_back(trained.verifier.score(data.row(i)));
  const std::span<const std::uint8_t> labels(data.labels);
  const auto rates = specdec::learn::rates_at(std::span<const double>(scores), labels, o.tau);
  const double auc = specdec::learn::compute_roc(std::span<const double>(scores), labels).auc;
  std::printf(
      "sprinter verifier: %zu examples of %zu %s features (acceptable at lambda %.2f: %.3f), %zu epochs, validation loss %.4f; "
      "on its data: AUC %.3f, at tau %.2f true-positive rate %.3f, false-positive rate %.3f; %.2f s\n",
      data.size(), data.feature_size, o.hidden_states ? "hidden-state and row" : "row", o.lambda, data.positive_fraction(),
      trained.report.epochs, trained.report.best_validation_loss, auc, o.tau, rates.eta_tp, rates.eta_fp,
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return trained.verifier;
}
#endif

// What SV's length stage reads, measured on the pair (file comment).
struct sv_profile {
  specdec::estimate::acceptance_estimator estimator;
  specdec::optimize::latency_table target_latency;  // seconds of one target call scoring P positions
  double t_draft_step = 0.0, t_companion_step = 0.0;
};

// Median seconds of 3 forwards appending `n` tokens to sequence 0 of `m` (all n rows read), each
// rolled back after.
inline double median_forward_seconds(lc::sequence_model& m, std::span<const token_id> tokens, std::size_t n, std::size_t rows) {
  std::vector<token_id> appended;
  for (std::size_t i = 0; i < n; ++i) appended.push_back(tokens[i % tokens.size()]);
  std::vector<float> logits(rows * m.vocab_size());
  std::vector<double> t;
  for (int rep = 0; rep < 3; ++rep) {
    const specdec::sequence_append a{.sequence = 0, .tokens = appended, .rows = rows};
    const auto start = std::chrono::steady_clock::now();
    m.forward(std::span(&a, 1), logits);
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    m.rollback(0, n);
  }
  std::sort(t.begin(), t.end());
  return std::max(t[1], 1e-9);
}

// What profiles SV on the pair.
struct sv_profile_options {
  std::size_t gamma_max = 4;           // drafts per round, during profiling as at inference
  std::size_t tokens_per_prompt = 64;  // tokens generated per profiling prompt
  std::size_t bins = 5;                // adaptive bins per indicator (bins x bins cells)
  std::size_t batch = 1;               // requests per round at inference (the latency table reaches batch x (gamma_max + 1))
  specdec::warp_params draft_params{}, target_params{};
  std::uint64_t seed = 0;
  std::uint32_t ctx = 2048;
  int threads = 0;
  std::string load_estimator;  // a file written by `save_estimator`: the estimator is read, not profiled
  std::string save_estimator;  // where the profiled estimator is written (estimate/acceptance_estimator.hpp's format)
};

// SV's acceptance estimator: read from `o.load_estimator`, or fitted on profiling samples of the pair
// (printing the samples, bins and information gain) and written to `o.save_estimator` when set.
template <class Policy>
specdec::estimate::acceptance_estimator sv_estimator(Policy policy, lc::sequence_model& target_seq, lc::sequence_model& draft_seq,
                                                     const llama_view& companion, std::span<const std::vector<token_id>> prompts,
                                                     const sv_profile_options& o) {
  if (!o.load_estimator.empty()) {
    std::ifstream in(o.load_estimator);
    if (!in) throw specdec::error("cannot open the SV profile " + o.load_estimator);
    auto estimator = specdec::estimate::acceptance_estimator::load(in);
    std::printf("sv profile: estimator loaded from %s (%llu samples, %s bins, mean acceptance %.3f)\n", o.load_estimator.c_str(),
                static_cast<unsigned long long>(estimator.samples()), estimator.bins().name().c_str(), estimator.overall());
    return estimator;
  }
  auto profile = lc::profile_sv_estimator(policy, target_seq, draft_seq, companion, prompts,
                                          {.gamma = o.gamma_max,
                                           .tokens_per_prompt = o.tokens_per_prompt,
                                           .bins = o.bins,
                                           .draft_params = o.draft_params,
                                           .target_params = o.target_params,
                                           .seed = o.seed});
  const auto& estimator = profile.estimator;
  std::printf("sv profile: %zu drafted positions from %zu prompts, estimator on %s bins, mean acceptance %.3f, "
              "information gain I(X; S, A) %.3f of H(X) %.3f bits\n",
              static_cast<std::size_t>(profile.gain.samples), prompts.size(), estimator.bins().name().c_str(),
              estimator.overall(), profile.gain.gain, profile.gain.h_x);
  if (!o.save_estimator.empty()) {
    std::ofstream out(o.save_estimator);
    estimator.save(out);
    if (!out) throw specdec::error("cannot write the SV profile " + o.save_estimator);
    std::printf("sv profile: estimator saved to %s\n", o.save_estimator.c_str());
  }
  return std::move(profile.estimator);
}

// Profiles SV on the pair (file comment) with `companion` (a view over the companion's lanes): the
// estimator (`sv_estimator`), then the latencies, measured on this machine every run (they are the
// machine's, not the pair's), and prints them.
template <class Policy>
sv_profile profile_sv(Policy policy, const lc::model& target_model, const lc::model& draft_model,
                      const lc::model& companion_model, const llama_view& companion,
                      std::span<const std::vector<token_id>> prompts, const sv_profile_options& o) {
  const auto start = std::chrono::steady_clock::now();
  const lc::context_options params{.context_per_sequence = o.ctx, .sequences = 1, .threads = o.threads};
  lc::context target_ctx(target_model, params), draft_ctx(draft_model, params);
  lc::sequence_model target_seq(target_ctx), draft_seq(draft_ctx);
  auto estimator = sv_estimator(policy, target_seq, draft_seq, companion, prompts, o);
  // The target's latency for P positions scored in one call, P = 1, 2, 4, ... past batch x (gamma_max + 1).
  const std::span<const token_id> filler(prompts.front());
  std::vector<double> positions, seconds;
  for (std::size_t n = 1;; n *= 2) {
    positions.push_back(static_cast<double>(n));
    seconds.push_back(median_forward_seconds(target_seq, filler, n, n));
    if (n >= o.batch * (o.gamma_max + 1)) break;
  }
  for (std::size_t i = 1; i < seconds.size(); ++i) seconds[i] = std::max(seconds[i], seconds[i - 1]);  // a table never decreases
  const double draft_step = median_forward_seconds(draft_seq, filler, 1, 1);
  lc::context companion_ctx(companion_model, params);  // a companion call scores gamma_max positions
  lc::sequence_model companion_seq(companion_ctx);
  const double companion_step = median_forward_seconds(companion_seq, filler, o.gamma_max, o.gamma_max);
  std::printf(
      "sv profile: target call %.2f ms (1 position) .. %.2f ms (%g); draft step %.2f ms, companion call %.2f ms; %.2f s\n",
      1e3 * seconds.front(), 1e3 * seconds.back(), positions.back(), 1e3 * draft_step, 1e3 * companion_step,
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return {std::move(estimator), specdec::optimize::latency_table(std::move(positions), std::move(seconds)), draft_step,
          companion_step};
}

// A companion scoring each request's drafts with a call of its own: what `--no-gather` gives SV's
// length stage instead of the view's one `score_batch` forward for the batch.
template <class M>
struct per_request_scoring {
  const M* model;
  std::size_t vocab_size() const { return model->vocab_size(); }
  void next_logits(std::span<const token_id> context, std::span<float> logits) const { model->next_logits(context, logits); }
  void score(std::span<const token_id> context, std::span<const token_id> continuation, std::span<float> rows) const {
    model->score(context, continuation, rows);
  }
};

// Prints SV's verified lengths: rounds per length, the mean, and drafts dropped.
inline void print_sv_lengths(const specdec::sv_stats& sv) {
  std::printf("sv: verified lengths chosen (rounds per length):");
  for (std::size_t n = 0; n < sv.verified_length_counts.size(); ++n) std::printf(" %zu:%zu", n, sv.verified_length_counts[n]);
  std::printf("; mean %.3f of %zu drafted, %zu drafts dropped, %zu companion calls\n", sv.mean_verified_length(), sv.drafted,
              sv.dropped, sv.companion_calls);
}

}  // namespace specdec_llama
