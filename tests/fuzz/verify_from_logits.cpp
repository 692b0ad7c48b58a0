// Fuzz harness: chain verification from logits (`specdec::verify_from_logits`, acceptance/verify.hpp)
// with per-request warping (temperature, top-k, top-p, min-p; any values, invalid ones included) for
// every chain rule, on seq and simd.
//
// Invariants: no crash or sanitizer report; invalid parameters and bad shapes throw specdec::error
// and nothing else throws; the outputs satisfy `check_chain_outputs` on the rows as the policy warps
// them; the contract of verification from logits (docs/reference/sampling-contract.md) holds
// literally: when every row warps to a usable row, the result is `verify` on the rows warped by the
// same policy's `warp_logits`, except that every target sample (sample-and-match's, each bonus) is
// the policy's `sample_logits` of the row with the same uniform; a request's output does not depend
// on its batch; simd equals seq token for token (its warped rows and its samples from logits are seq's
// bit for bit: docs/reference/sampling-contract.md, "From logits to weights").
#include <cstddef>
#include <cstdint>
#include <limits>
#include <algorithm>
#include <span>
#include <utility>
#include <vector>

#include "specdec/acceptance/verify.hpp"
#include "specdec/distributions/warp.hpp"
#include "specdec/exec/policy.hpp"
#include "specdec/sampling/with_policy.hpp"
#if SPECDEC_ENABLE_SIMD
#include "specdec/backend/simd/warp.hpp"
#include "specdec/exec/simd.hpp"
#endif

#include "chain_case.hpp"
#include "fuzz_input.hpp"

namespace {

using namespace specdec_fuzz;

// The sampling parameters of a batch: one per request for the target, and for the draft none (the
// target's are used) or one per request.
struct batch_params {
  std::vector<specdec::warp_params> target, draft;
  const specdec::warp_params& draft_of(std::size_t b) const { return draft.empty() ? target[b] : draft[b]; }
  bool valid() const {
    return std::all_of(target.begin(), target.end(), valid_params) && std::all_of(draft.begin(), draft.end(), valid_params);
  }
  bool all_greedy() const {
    const auto greedy = [](const specdec::warp_params& w) { return w.temperature == 0.0; };
    return std::all_of(target.begin(), target.end(), greedy) && std::all_of(draft.begin(), draft.end(), greedy);
  }
};

// The rows of a case warped as `policy` warps them (zero rows where a row is unusable), and whether
// every row the rule may read warped to a usable row.
template <class T>
struct warped_rows {
  std::vector<T> q, p;
  bool all_usable = true;
  std::vector<specdec::row_status> statuses;  // of every row, in the order warped
};

// Warps one row as `Policy` does; a row reported usable must be a distribution.
template <class Policy, class T>
specdec::row_status warp_row(const Policy&, std::span<const T> logits, std::span<T> probs, const specdec::warp_params& w) {
  specdec::row_status s{};
#if SPECDEC_ENABLE_SIMD
  if constexpr (specdec::exec::backend_of<Policy> == specdec::exec::backend::simd)
    s = specdec::backend::simd::warp_logits<specdec::exec::simd_arch_t<Policy>>(logits, probs, w);
  else
#endif
    s = specdec::warp_logits(logits, probs, w);
  FUZZ_CHECK(s != specdec::row_status::ok || is_distribution(std::span<const T>(probs)));
  return s;
}

// Whether position i of a chain of n drafts is a target sample: drawn from the target's logits alone
// (sample-and-match at every position; the bonus of the rules that sample one from p).
inline bool is_target_sample(const rule_traits& rule, std::size_t i, std::size_t n) {
  return rule.family == specdec::rule_family::sample_and_match ||
         (i == n && (rule.family == specdec::rule_family::rejection || rule.family == specdec::rule_family::block));
}

// `verify`'s outputs on the warped rows (`direct`) with every target sample redrawn from the logits
// by `Policy`: what verification from logits returns when every row is usable.
template <class Policy, class T>
void redraw_target_samples(const Policy& policy, const chain_case<T>& c, const batch_params& params, const rule_traits& rule,
                           chain_out& direct) {
  using specdec::random::purpose;
  const auto l = c.layout();
  for (std::size_t b = 0; b < c.batch_size(); ++b) {
    const auto drafts = c.drafts_of(b);
    const std::size_t n = drafts.size();
    if (specdec::has_flag(direct.status[b], specdec::verify_status::bad_draft_token)) continue;
    const auto draw = [&](std::size_t i, purpose what) {
      const auto logits = std::span<const T>(c.p).subspan(l.target_row(b, i) * c.V, c.V);
      const specdec::sample_result y = specdec::sample_logits(policy, logits, params.target[b],
                                                              c.streams[b].open(static_cast<std::uint32_t>(i), what).uniform());
      FUZZ_CHECK(y.status == specdec::row_status::ok);  // (every row warps to a usable row here)
      return y.token;
    };
    const auto tokens = std::span<token_id>(direct.tokens).subspan(b * direct.stride, direct.stride);
    if (rule.family == specdec::rule_family::sample_and_match) {
      std::fill(tokens.begin(), tokens.end(), specdec::no_token);
      for (std::size_t i = 0; i <= n; ++i) {
        tokens[i] = draw(i, purpose::target_sample);
        direct.accepted[b] = static_cast<std::int32_t>(i);
        if (i == n || tokens[i] != drafts[i]) break;
      }
    } else if (is_target_sample(rule, static_cast<std::size_t>(direct.accepted[b]), n) && specdec::is_valid(direct.status[b])) {
      tokens[n] = draw(n, purpose::resample);
    }
  }
}

template <class Policy, class T>
warped_rows<T> warp_case(const Policy& policy, const chain_case<T>& c, const batch_params& params, bool reads_q) {
  warped_rows<T> w{std::vector<T>(c.q.size()), std::vector<T>(c.p.size()), true, {}};
  const auto l = c.layout();
  const std::size_t V = c.V;
  for (std::size_t b = 0; b < c.batch_size(); ++b) {
    const auto n = static_cast<std::size_t>(c.num_drafts[b]);
    for (std::size_t i = 0; i <= n; ++i) {
      const std::size_t t = l.target_row(b, i) * V;
      w.statuses.push_back(
          warp_row(policy, std::span<const T>(c.p).subspan(t, V), std::span<T>(w.p).subspan(t, V), params.target[b]));
      w.all_usable &= w.statuses.back() == specdec::row_status::ok;
      if (i == n) continue;
      const std::size_t d = l.draft_row(b, i) * V;
      w.statuses.push_back(
          warp_row(policy, std::span<const T>(c.q).subspan(d, V), std::span<T>(w.q).subspan(d, V), params.draft_of(b)));
      w.all_usable &= w.statuses.back() == specdec::row_status::ok || !reads_q;
    }
  }
  return w;
}

template <class Policy, class Rule, class T>
bool run_from_logits(const Policy& policy, const Rule& rule, const chain_case<T>& c, const batch_params& params,
                     const specdec::verify_options& options, chain_out& out) {
  try {
    specdec::verify_from_logits(policy, rule, c.batch(), params.target, params.draft, c.streams, out.view(), options);
  } catch (const specdec::error&) {
    return false;
  }
  return true;
}

// One policy's run: the outputs' invariants on the rows as that policy warps them, and the same
// outputs as `verify` on those rows when all of them are usable. Returns the outputs and the
// statuses of the warped rows.
template <class Policy, class Rule, class T>
std::pair<chain_out, std::vector<specdec::row_status>> check_policy(const Policy& policy, const Rule& rule,
                                                                    const chain_case<T>& c, const batch_params& params,
                                                                    const specdec::verify_options& options) {
  constexpr rule_traits traits = traits_of<Rule>();
  chain_out out(c.batch_size(), c.max_drafts());
  FUZZ_CHECK(run_from_logits(policy, rule, c, params, options, out));
  const warped_rows<T> w = warp_case(policy, c, params, traits.reads_q);
  // Samples from logits are draws from the kept weights, whose support is the warped row's: every
  // emitted token has p > 0 there.
  const std::vector<T>& emitted_from = w.p;
  check_chain_outputs(c, out, traits, options.check_normalisation, std::span<const T>(emitted_from));
  if (w.all_usable) {
    chain_out direct(c.batch_size(), c.max_drafts());
    specdec::verify(policy, rule, c.batch(w.q, w.p), c.streams, direct.view(), options);
    redraw_target_samples(policy, c, params, traits, direct);
    FUZZ_CHECK(direct == out);
  }
  return {out, w.statuses};
}

template <class T>
void fuzz_from_logits(byte_reader& in, bool large_vocab) {
  const chain_case<T> c = read_chain_case<T>(in, row_style::logits, large_vocab);
  batch_params params;
  for (std::size_t b = 0; b < c.batch_size(); ++b) params.target.push_back(warp_params(in, c.V));
  if (in.flag())
    for (std::size_t b = 0; b < c.batch_size(); ++b) params.draft.push_back(warp_params(in, c.V));
  specdec::verify_options options;
  options.check_normalisation = in.flag();
  with_chain_rule(in, [&](const auto& rule) {
    using Rule = std::remove_cvref_t<decltype(rule)>;
    const bool args_ok = valid_rule(rule) && params.valid();

    // Wrong numbers of parameters, or a broken shape: specdec::error exactly when documented.
    const std::uint8_t fault = in.byte();
    if (fault >= 0xF0) {
      batch_params wrong = params;
      if (fault % 2 == 0 && c.batch_size() > 0)
        wrong.target.pop_back();
      else if (fault % 4 == 1)
        wrong.target.emplace_back();
      else
        wrong.draft.resize(c.batch_size() + 1);
      chain_out out(c.batch_size(), c.max_drafts());
      FUZZ_CHECK(!run_from_logits(specdec::exec::seq, rule, c, wrong, options, out));
      return;
    }
    chain_out faulty(c.batch_size(), c.max_drafts());
    chain_call<T> call{c.batch(), c.streams, faulty.view()};
    if (apply_shape_fault(in, call)) {
      const bool ok = shapes_ok(call.batch, traits_of<Rule>().reads_q, call.streams.size(), call.out) && args_ok;
      bool threw = false;
      try {
        specdec::verify_from_logits(specdec::exec::seq, rule, call.batch, params.target, params.draft, call.streams, call.out,
                                    options);
      } catch (const specdec::error&) {
        threw = true;
      }
      FUZZ_CHECK(threw == !ok);
      return;
    }

    chain_out probe(c.batch_size(), c.max_drafts());
    const bool ran = run_from_logits(specdec::exec::seq, rule, c, params, options, probe);
    FUZZ_CHECK(ran == args_ok);
    if (!ran) return;
    const auto [seq, seq_statuses] = check_policy(specdec::exec::seq, rule, c, params, options);
    FUZZ_CHECK(seq == probe);

    // Every request verified alone gives its row of the batch.
    for (std::size_t b = 0; b < c.batch_size(); ++b) {
      const chain_case<T> one = c.single(b);
      batch_params own{{params.target[b]}, {}};
      if (!params.draft.empty()) own.draft = {params.draft[b]};
      chain_out alone(1, one.max_drafts());
      FUZZ_CHECK(run_from_logits(specdec::exec::seq, rule, one, own, options, alone));
      FUZZ_CHECK(alone.accepted[0] == seq.accepted[b] && alone.status[0] == seq.status[b]);
      const auto row = seq.row(b);
      for (std::size_t i = 0; i < row.size(); ++i) FUZZ_CHECK(row[i] == (i < alone.stride ? alone.tokens[i] : specdec::no_token));
    }

#if SPECDEC_ENABLE_SIMD
    // The simd warper reports the same status for every row (backend/simd/all.hpp: "statuses identical").
    const auto [simd, simd_statuses] = check_policy(specdec::exec::simd, rule, c, params, options);
    FUZZ_CHECK(simd_statuses == seq_statuses);
    FUZZ_CHECK(simd == seq);
#endif
  });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  byte_reader in(data, size);
  const std::uint8_t entry = in.byte();
  const bool large_vocab = (entry >> 4) == 0xF;
  if (entry & 1u)
    fuzz_from_logits<float>(in, large_vocab);
  else
    fuzz_from_logits<double>(in, large_vocab);
  return 0;
}
