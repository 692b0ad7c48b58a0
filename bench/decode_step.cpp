// The step decoder's own cost (decode/batch_decoder.hpp): one speculative round for B requests
// (gamma = 4, T = 1, strict rule, the simd policy when built with specdec::simd, else seq) on
// models that replay precomputed logit rows (Gumbel-distributed logits, a memcpy per row, so the models cost next to nothing).
// Per step: the whole step, the models' forwards, draft sampling (warping each draft row and
// drawing from it), the verification call (verify_from_logits), and the rest: the decoder's own
// bookkeeping; with `bookkeeping_over_verify` and the heap allocations per step after warm-up
// (a counting operator new). B = 1, 64, 256; V = 32000, 128256.
//   bench_decode_step [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <span>
#include <vector>

#include "specdec/acceptance/strict.hpp"
#include "specdec/decode/batch_decoder.hpp"
#include "specdec/random/stream.hpp"

// ---- allocation counting --------------------------------------------------------------------------
namespace {
std::atomic<std::size_t> g_allocations{0};
}  // namespace

// noinline: GCC 12 inlines these into the standard library's containers and then reports free() on
// a pointer from operator new (-Wmismatched-new-delete), not knowing that this operator new mallocs.
[[gnu::noinline]] void* operator new(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
[[gnu::noinline]] void operator delete(void* p) noexcept { std::free(p); }  // NOLINT: pairs with the operator new above
[[gnu::noinline]] void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace {

using specdec::sequence_append;
using specdec::sequence_id;
using specdec::token_id;

//! A SequenceModel that writes rows from a pool of precomputed logit rows, picked by (sequence,
//! position): a model whose forward costs one row copy.
class replay_model {
 public:
  replay_model(std::size_t vocab, std::uint64_t seed, double shift) : vocab_(vocab), pool_(pool_rows * vocab) {
    // The target's and the draft's pools share a base; `shift` makes the draft differ a little.
    specdec::random::philox_stream base(specdec::random::stream_address{0xDEC0DE, 0, 0, 0, specdec::random::purpose::user});
    specdec::random::philox_stream noise(specdec::random::stream_address{seed, 1, 0, 0, specdec::random::purpose::user});
    for (float& x : pool_) x = static_cast<float>(3.0 * base.gumbel() + shift * noise.gumbel());
  }
  std::size_t vocab_size() const { return vocab_; }
  std::size_t length(sequence_id s) const { return s < lengths_.size() ? lengths_[s] : 0; }
  void forward(std::span<const sequence_append> appends, std::span<float> logits) {
    std::size_t out = 0;
    for (const auto& a : appends) {
      if (a.sequence >= lengths_.size()) lengths_.resize(a.sequence + 1, 0);
      lengths_[a.sequence] += a.tokens.size();
      for (std::size_t k = 0; k < a.rows; ++k, ++out) {
        const std::size_t position = lengths_[a.sequence] - a.rows + k;
        const std::size_t row = (a.sequence * 7919 + position * 104729) % pool_rows;
        std::memcpy(logits.data() + out * vocab_, pool_.data() + row * vocab_, vocab_ * sizeof(float));
      }
    }
  }
  void rollback(sequence_id s, std::size_t n) { lengths_[s] -= n; }
  void release(sequence_id s) { lengths_[s] = 0; }

 private:
  static constexpr std::size_t pool_rows = 64;
  std::size_t vocab_;
  std::vector<float> pool_;
  std::vector<std::size_t> lengths_;
};

#if SPECDEC_ENABLE_SIMD
constexpr auto policy = specdec::exec::simd;
#else
constexpr auto policy = specdec::exec::seq;
#endif

void bm_decode_step(benchmark::State& state) {
  const auto B = static_cast<std::size_t>(state.range(0)), V = static_cast<std::size_t>(state.range(1));
  replay_model target(V, 1, 0.0), draft(V, 2, 0.8);
  specdec::batch_decoder decoder(policy, target, draft, specdec::strict);
  for (std::size_t b = 0; b < B; ++b) {
    specdec::request_options o;
    o.prompt = {static_cast<token_id>(b % V)};
    o.seed = 7;
    o.request_id = static_cast<std::uint32_t>(b);
    o.gamma = 4;
    o.max_new_tokens = std::size_t{1} << 30;
    decoder.add(std::move(o));
  }
  for (int i = 0; i < 3; ++i) decoder.step();  // warm-up: buffers reach their size
  specdec::step_timing sum;
  std::size_t steps = 0, tokens = 0;
  const std::size_t allocations_before = g_allocations.load();
  for (auto _ : state) {
    for (const auto& e : decoder.step()) tokens += e.tokens.size();
    const auto& t = decoder.last_step_timing();
    sum.draft_forward += t.draft_forward;
    sum.draft_sampling += t.draft_sampling;
    sum.target_forward += t.target_forward;
    sum.verification += t.verification;
    sum.total += t.total;
    ++steps;
  }
  const double n = static_cast<double>(steps);
  state.counters["allocs_per_step"] = static_cast<double>(g_allocations.load() - allocations_before) / n;
  state.counters["forwards_us"] = 1e6 * (sum.draft_forward + sum.target_forward) / n;
  state.counters["draft_sampling_us"] = 1e6 * sum.draft_sampling / n;
  state.counters["verify_us"] = 1e6 * sum.verification / n;
  state.counters["bookkeeping_us"] = 1e6 * sum.bookkeeping() / n;
  state.counters["bookkeeping_over_verify"] = sum.bookkeeping() / sum.verification;
  state.counters["tokens_per_step"] = static_cast<double>(tokens) / n;
}
BENCHMARK(bm_decode_step)
    ->ArgNames({"B", "V"})
    ->ArgsProduct({{1, 64, 256}, {32000, 128256}})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(1.0);

}  // namespace

BENCHMARK_MAIN();
