// A verification rule of one's own on the step decoder, set per request (decode/verification_stage.hpp).
//
// Part 1, a chain rule: `power_rule{beta}` accepts a draft x with probability min(1, (p(x) / q(x))^beta)
// and resamples from the residual norm(max(0, p - a)), a(v) = q(v) min(1, (p(v) / q(v))^beta) (beta = 1
// is strict speculative sampling, beta < 1 accepts more and is lossy). Nothing else is needed: any type
// with `family`, `accepts` and `accepted_mass` (acceptance/concepts.hpp) converts to a request's
// `acceptance`; with `operator==`, requests with equal parameters share one batched verify call.
// Part 2, a stage of one's own: `counting_stage` wraps any acceptance and counts its verify calls and
// the drafts they accepted (a derived `verification_stage`: the decoder calls it once per phase).
// The table: per rule, tokens per target call, drafts accepted of those drafted, and the total
// variation of the first emitted token's empirical law from the target's (0 up to noise when lossless).
//   specdec_user_rule [--smoke]
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <specdec/specdec.hpp>

#include "markov_models.hpp"

namespace {

using specdec::token_id;
constexpr std::size_t V = 8;

// A chain rule of one's own (rule_family::rejection): min(1, (p / q)^beta).
struct power_rule {
  static constexpr specdec::rule_family family = specdec::rule_family::rejection;
  double beta = 1.0;
  double accept_probability(double p, double q) const { return q <= 0.0 ? 0.0 : std::min(1.0, std::pow(p / q, beta)); }
  bool accepts(double p, double q, double u) const { return u < accept_probability(p, q); }
  double accepted_mass(double p, double q) const { return q * accept_probability(p, q); }
  bool operator==(const power_rule&) const = default;
};

// A stage of one's own: the inner acceptance's behaviour, with its verify calls and accepted drafts counted.
class counting_stage final : public specdec::verification_stage {
 public:
  explicit counting_stage(specdec::request_acceptance inner) : inner_(std::move(inner)) {}
  specdec::stage_traits traits() const override { return inner_.stage()->traits(); }
  bool check_draft(const specdec::stage_request& r, specdec::verification_buffers& b) const override {
    return inner_.stage()->check_draft(r, b);
  }
  void verify(const specdec::host_policy& policy, std::span<specdec::stage_request* const> group,
              specdec::verification_buffers& b) const override {
    inner_.stage()->verify(policy, group, b);
    ++calls;
    for (const specdec::stage_request* r : group) accepted += r->accepted;
  }
  mutable std::size_t calls = 0, accepted = 0;

 private:
  specdec::request_acceptance inner_;
};

struct row {
  std::string name;
  specdec::request_acceptance acceptance;
};

}  // namespace

int main(int argc, char** argv) {
  const bool smoke = argc > 1 && std::strcmp(argv[1], "--smoke") == 0;
  const std::size_t requests = smoke ? 200 : 4000, tokens = smoke ? 8 : 32;
  const auto target = specdec::make_model(V, specdec_examples::markov_logits(2.0, 0.0));
  const auto draft = specdec::make_model(V, specdec_examples::markov_logits(2.0, 0.9));
  const auto counter = std::make_shared<const counting_stage>(specdec::strict);
  const std::vector<row> rows{{"strict (library)", specdec::strict},
                              {"power_rule{1.0} (own, = strict)", power_rule{1.0}},
                              {"power_rule{0.5} (own, lossy)", power_rule{0.5}},
                              {"counting_stage(strict) (own stage)", counter}};

  // The target's law of the first token after the prompt.
  const std::vector<token_id> prompt{3};
  std::vector<float> logits(V), p(V);
  target.next_logits(std::span<const token_id>(prompt), std::span<float>(logits));
  if (specdec::warp_logits(std::span<const float>(logits), std::span<float>(p), specdec::warp_params{}) !=
      specdec::row_status::ok)
    return 1;

  std::printf("%-36s %12s %12s %10s\n", "rule", "tokens/call", "accepted", "TV(first)");
  for (const row& r : rows) {
    specdec::recomputing_sequence_model<decltype(target)> t(target);
    specdec::recomputing_sequence_model<decltype(draft)> q(draft);
    specdec::batch_decoder decoder(specdec::exec::seq, t, q, specdec::strict);
    for (std::size_t i = 0; i < requests; ++i) {
      specdec::request_options o;
      o.prompt = prompt;
      o.seed = 2026;
      o.request_id = static_cast<std::uint32_t>(i);
      o.gamma = 4;
      o.max_new_tokens = tokens;
      o.acceptance = r.acceptance;  // the rule, per request
      decoder.add(std::move(o));
    }
    std::vector<double> first(V, 0.0);
    std::size_t emitted = 0, calls = 0, drafted = 0, accepted = 0;
    while (decoder.active() > 0)
      for (const specdec::step_event& e : decoder.step()) {
        const auto all = decoder.tokens(e.request);
        if (!e.tokens.empty() && all.size() == e.tokens.size()) first[static_cast<std::size_t>(all[0])] += 1.0;
        emitted += e.tokens.size();
        calls += e.target_logits.empty() ? 0 : 1;
        if (e.finished != specdec::finish_reason::none) {
          drafted += decoder.stats(e.request).drafted;
          accepted += decoder.stats(e.request).accepted;
        }
      }
    double tv = 0.0;
    for (std::size_t v = 0; v < V; ++v) tv += 0.5 * std::abs(first[v] / static_cast<double>(requests) - p[v]);
    std::printf("%-36s %12.3f %6zu/%-6zu %10.4f\n", r.name.c_str(), static_cast<double>(emitted) / static_cast<double>(calls),
                accepted, drafted, tv);
  }
  std::printf("counting_stage: %zu verify calls (one per step for its whole batch), %zu drafts accepted\n", counter->calls,
              counter->accepted);
  return 0;
}
