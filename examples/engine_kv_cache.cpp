// An engine with its own KV cache plugged into specdec's step decoder (docs/engine.md).
//
// `toy_engine` stands for an inference engine: it keeps, per sequence, the state each appended
// position produced (here the position's next-token logits; a transformer keeps keys and values),
// evaluates only the positions appended to it, and drops rejected positions on rollback. It
// implements specdec::SequenceModel directly. Two of them (a target and a cheaper, less accurate
// draft) run 8 requests of different seeds, temperatures and draft lengths through
// specdec::batch_decoder, one speculative round per step().
//   specdec_engine_kv_cache [--smoke]
#include <cmath>
#include <cstdio>
#include <cstring>
#include <span>
#include <unordered_map>
#include <vector>

#include <specdec/specdec.hpp>

namespace {

using specdec::sequence_append;
using specdec::sequence_id;
using specdec::token_id;

class toy_engine {
 public:
  toy_engine(std::size_t vocab, double sharpness) : vocab_(vocab), sharpness_(sharpness) {}

  std::size_t vocab_size() const { return vocab_; }
  std::size_t length(sequence_id s) const {
    const auto it = cache_.find(s);
    return it == cache_.end() ? 0 : it->second.tokens.size();
  }
  std::size_t evaluated_positions() const { return evaluated_; }

  // One batched step: append each sequence's tokens, evaluating only the new positions, and copy out
  // the rows asked for (the last `rows` appended positions of each append, in order).
  void forward(std::span<const sequence_append> appends, std::span<float> logits) {
    std::size_t out = 0;
    for (const sequence_append& a : appends) {
      kv& c = cache_[a.sequence];
      for (const token_id t : a.tokens) {
        c.tokens.push_back(t);
        c.rows.resize(c.tokens.size() * vocab_);
        evaluate(c.tokens, std::span<float>(c.rows).last(vocab_));
        ++evaluated_;
      }
      const std::size_t first = c.tokens.size() - a.rows;
      std::memcpy(logits.data() + out * vocab_, c.rows.data() + first * vocab_, a.rows * vocab_ * sizeof(float));
      out += a.rows;
    }
  }
  void rollback(sequence_id s, std::size_t n) {
    kv& c = cache_.at(s);
    c.tokens.resize(c.tokens.size() - n);
    c.rows.resize(c.tokens.size() * vocab_);
  }
  void release(sequence_id s) { cache_.erase(s); }

 private:
  struct kv {
    std::vector<token_id> tokens;
    std::vector<float> rows;
  };
  // The "network": next-token logits from the last two tokens.
  void evaluate(std::span<const token_id> context, std::span<float> row) const {
    const double a = context.back(), b = context.size() > 1 ? context[context.size() - 2] : 0.0;
    for (std::size_t v = 0; v < vocab_; ++v)
      row[v] = static_cast<float>(sharpness_ * std::cos(0.37 * double(v) * (a + 1.0) + 0.11 * b));
  }

  std::size_t vocab_;
  double sharpness_;
  std::unordered_map<sequence_id, kv> cache_;
  std::size_t evaluated_ = 0;
};
static_assert(specdec::SequenceModel<toy_engine>);

}  // namespace

int main(int argc, char** argv) {
  const bool smoke = argc > 1 && std::strcmp(argv[1], "--smoke") == 0;
  const std::size_t V = 64, requests = 8, max_new = smoke ? 24 : 64;
  toy_engine target(V, 3.0), draft(V, 2.6);
  specdec::batch_decoder decoder(specdec::exec::seq, target, draft, specdec::strict);
  for (std::uint32_t i = 0; i < requests; ++i) {
    specdec::request_options o;
    o.prompt = {static_cast<token_id>(i), static_cast<token_id>(3 * i + 1)};
    o.seed = 2026;
    o.request_id = i;
    o.gamma = 2 + i % 4;
    o.max_new_tokens = max_new;
    o.target_params.temperature = 0.6 + 0.1 * (i % 4);
    o.draft_params.temperature = o.target_params.temperature;
    decoder.add(std::move(o));
  }
  std::size_t steps = 0, emitted = 0;
  while (decoder.active() > 0) {
    for (const specdec::step_event& e : decoder.step()) {
      emitted += e.tokens.size();
      if (e.finished != specdec::finish_reason::none) {
        const auto& s = decoder.stats(e.request);
        std::printf("request %llu: %zu tokens in %zu rounds (%.2f per target call, acceptance %.2f)\n",
                    static_cast<unsigned long long>(e.request), decoder.tokens(e.request).size(), s.iterations,
                    s.tokens_per_target_call(), s.acceptance_rate());
      }
    }
    ++steps;
  }
  std::printf("%zu steps, %zu tokens; the target evaluated %zu positions, the draft %zu\n", steps, emitted,
              target.evaluated_positions(), draft.evaluated_positions());
  return emitted == requests * max_new ? 0 : 1;
}
