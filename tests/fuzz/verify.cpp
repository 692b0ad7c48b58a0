// Fuzz harness: chain verification from probabilities (`specdec::verify`, acceptance/verify.hpp)
// for every chain rule on seq and simd, ragged layouts built from arbitrary counts
// (`ragged_layout::packed` / `padded`, core/batch.hpp), and the single-chain verifiers that take rows
// from the caller: MTAD (`mtad_verify`), BiLD (`bild_verify`) and SPRINTER's last-token check
// (`check_last_token`).
//
// The first byte picks the entry. Invariants: no crash or sanitizer report; bad shapes and bad rule
// parameters throw specdec::error and nothing else throws; every output satisfies
// `check_chain_outputs` (chain_case.hpp); simd gives seq's tokens, counts and flags; a request's
// output does not depend on the rest of its batch; a second call gives the same outputs.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "specdec/acceptance/bild.hpp"
#include "specdec/acceptance/last_token.hpp"
#include "specdec/acceptance/mtad.hpp"
#include "specdec/acceptance/verify.hpp"
#include "specdec/core/batch.hpp"
#include "specdec/exec/policy.hpp"

#include "chain_case.hpp"
#include "fuzz_input.hpp"

namespace {

using namespace specdec_fuzz;

// Verifies `c` with `rule` on `policy`; false when the call threw (as documented) instead.
template <class Policy, class Rule, class T>
bool run_verify(const Policy& policy, const Rule& rule, const chain_case<T>& c, const specdec::verify_options& options,
                chain_out& out) {
  try {
    specdec::verify(policy, rule, c.batch(), c.streams, out.view(), options);
  } catch (const specdec::error&) {
    return false;
  }
  return true;
}

template <class T>
void fuzz_chain(byte_reader& in, bool large_vocab) {
  const chain_case<T> c = read_chain_case<T>(in, row_style::probabilities, large_vocab);
  specdec::verify_options options;
  options.check_normalisation = in.flag();
  if (in.byte() % 4 == 3) options.normalisation_tolerance = in.any_double();
  with_chain_rule(in, [&](const auto& rule) {
    using Rule = std::remove_cvref_t<decltype(rule)>;
    constexpr rule_traits traits = traits_of<Rule>();
    const bool rule_ok = valid_rule(rule);

    // A deliberately broken call: it throws exactly when a documented shape requirement fails.
    chain_out faulty(c.batch_size(), c.max_drafts());
    chain_call<T> call{c.batch(), c.streams, faulty.view()};
    if (apply_shape_fault(in, call)) {
      const bool ok = shapes_ok(call.batch, traits.reads_q, call.streams.size(), call.out) && rule_ok;
      bool threw = false;
      try {
        specdec::verify(specdec::exec::seq, rule, call.batch, call.streams, call.out, options);
      } catch (const specdec::error&) {
        threw = true;
      }
      FUZZ_CHECK(threw == !ok);
      return;
    }

    chain_out seq(c.batch_size(), c.max_drafts());
    const bool ran = run_verify(specdec::exec::seq, rule, c, options, seq);
    FUZZ_CHECK(ran == rule_ok);  // shapes are right: only bad rule parameters may throw
    if (!ran) return;
    check_chain_outputs(c, seq, traits, options.check_normalisation, std::span<const T>(c.p));

    // Every request verified alone gives its row of the batch.
    for (std::size_t b = 0; b < c.batch_size(); ++b) {
      const chain_case<T> one = c.single(b);
      chain_out alone(1, one.max_drafts());
      FUZZ_CHECK(run_verify(specdec::exec::seq, rule, one, options, alone));
      FUZZ_CHECK(alone.accepted[0] == seq.accepted[b] && alone.status[0] == seq.status[b]);
      const auto row = seq.row(b);
      for (std::size_t i = 0; i < row.size(); ++i) FUZZ_CHECK(row[i] == (i < alone.stride ? alone.tokens[i] : specdec::no_token));
    }

#if SPECDEC_ENABLE_SIMD
    // simd: seq's outputs (the normalisation check may differ only for sums within rounding of the
    // tolerance, backend/simd/verify.hpp).
    chain_out simd(c.batch_size(), c.max_drafts());
    FUZZ_CHECK(run_verify(specdec::exec::simd, rule, c, options, simd));
    const bool ambiguous = options.check_normalisation &&
                           (any_normalisation_ambiguous(std::span<const T>(c.p), c.V, options.normalisation_tolerance) ||
                            any_normalisation_ambiguous(std::span<const T>(c.q), c.V, options.normalisation_tolerance));
    if (!ambiguous) FUZZ_CHECK(simd == seq);
#endif

    // Scratch state kept between calls changes nothing.
    chain_out again(c.batch_size(), c.max_drafts());
    FUZZ_CHECK(run_verify(specdec::exec::seq, rule, c, options, again));
    FUZZ_CHECK(again == seq);
  });
}

// Arbitrary counts and padded widths: a layout is built, or specdec::error says why not; a built
// layout's row map is the documented one, and a verification with buffers of its sizes stays in them.
void fuzz_layout(byte_reader& in) {
  const std::size_t B = in.in_range<std::size_t>(0, 9);
  std::vector<std::int32_t> counts(B);
  for (auto& n : counts) n = in.flag() ? in.in_range<std::int32_t>(-2, 9) : static_cast<std::int32_t>(in.bits<std::uint32_t>());
  constexpr std::size_t top = std::size_t{1} << 63;
  const std::array<std::size_t, 8> widths{9,
                                          0,
                                          top,
                                          top - 1,
                                          std::numeric_limits<std::size_t>::max(),
                                          std::numeric_limits<std::size_t>::max() / 3,
                                          std::size_t{1} << 32,
                                          top / 3 + 1};
  const std::uint8_t how = in.byte();
  const bool packed = (how & 1u) != 0;
  const std::size_t width = (how & 2u) ? in.pick(widths) : in.in_range<std::size_t>(0, 12);
  bool negative = false, too_wide = false;
  std::int64_t total = 0;
  std::size_t longest = 0;
  for (const auto n : counts) {
    negative = negative || n < 0;
    too_wide = too_wide || (n >= 0 && static_cast<std::size_t>(n) > width);
    total += n;
    if (n > 0) longest = std::max(longest, static_cast<std::size_t>(n));
  }
  specdec::ragged_layout l;
  try {
    l = packed ? specdec::ragged_layout::packed(counts) : specdec::ragged_layout::padded(counts, width);
  } catch (const specdec::error&) {
    FUZZ_CHECK(negative || (!packed && too_wide) || (!packed && B > 0 && width >= std::numeric_limits<std::size_t>::max() / B));
    return;
  }
  FUZZ_CHECK(!negative && (packed || !too_wide));
  if (!packed && B > 0) FUZZ_CHECK(width < std::numeric_limits<std::size_t>::max() / B);  // its row counts fit
  FUZZ_CHECK(l.batch_size() == B && l.is_packed() == packed);
  FUZZ_CHECK(l.max_drafts() == (packed ? longest : width));
  std::size_t before = 0;
  for (std::size_t b = 0; b < B; ++b) {
    FUZZ_CHECK(l.num_drafts(b) == static_cast<std::size_t>(counts[b]));
    FUZZ_CHECK(l.draft_row(b, 0) == (packed ? before : b * width));
    FUZZ_CHECK(l.target_row(b, 0) == (packed ? before + b : b * (width + 1)));
    before += static_cast<std::size_t>(counts[b]);
  }
  FUZZ_CHECK(l.num_draft_rows() == (packed ? static_cast<std::size_t>(total) : B * width));
  FUZZ_CHECK(l.num_target_rows() == l.num_draft_rows() + B);
  if (packed) {  // reassigning reuses the buffers and gives the same layout
    specdec::ragged_layout again = specdec::ragged_layout::packed(std::vector<std::int32_t>{3});
    again.assign_packed(counts);
    FUZZ_CHECK(again.num_draft_rows() == l.num_draft_rows() && again.max_drafts() == l.max_drafts());
  }
  // Buffers of exactly the sizes the layout states (when they are small): greedy verifies inside them.
  const std::size_t V = 1 + how % 5;
  if (l.num_target_rows() > 64 || l.max_drafts() > 64) return;
  const std::vector<token_id> drafts(l.num_draft_rows(), 0);
  const std::vector<double> rows(l.num_target_rows() * V, 1.0 / static_cast<double>(V));
  const std::vector<specdec::random::request_stream> streams(B);
  chain_out out(B, l.max_drafts());
  const specdec::chain_batch<double> batch{l, V, drafts, {}, rows};
  try {
    specdec::verify(specdec::exec::seq, specdec::greedy, batch, streams, out.view());
  } catch (const specdec::error&) {
    FUZZ_CHECK(!shapes_ok(batch, false, B, out.view()));
    return;
  }
  FUZZ_CHECK(shapes_ok(batch, false, B, out.view()));
  for (std::size_t b = 0; b < B; ++b) FUZZ_CHECK(out.status[b] == verify_status::ok);
}

// One chain of n <= 8 drafts with its n + 1 target rows [n + 1][V] (and n draft rows).
template <class T>
struct single_chain {
  std::size_t V = 1;
  std::vector<token_id> drafts;
  std::vector<T> q, p;
  specdec::random::request_stream stream;
};

template <class T>
single_chain<T> read_single_chain(byte_reader& in) {
  single_chain<T> c;
  c.V = vocab_size(in, false);
  const std::size_t n = in.in_range<std::size_t>(0, 8);
  c.stream = {in.bits<std::uint32_t>(), in.byte(), in.byte()};
  c.q.resize(n * c.V);
  c.p.resize((n + 1) * c.V);
  for (std::size_t i = 0; i <= n; ++i) {
    const std::span<T> q_row = std::span<T>(c.q).subspan(std::min(i, n) * c.V, i < n ? c.V : 0);
    if (i < n) {
      c.drafts.push_back(token(in, c.V));
      fill_row<T>(in, q_row, row_style::probabilities);
    }
    fill_row<T>(in, std::span<T>(c.p).subspan(i * c.V, c.V), row_style::probabilities, std::span<const T>(q_row));
  }
  return c;
}

// What every single-chain result satisfies: bad ids refuse the request, the accepted drafts come
// first, a valid result ends with one token of positive probability in its row, an invalid one with
// none. Accepted drafts have p > 0 too unless `any_draft_passes` (BiLD with threshold +inf).
template <class T>
void check_single_result(const single_chain<T>& c, const specdec::chain_result& r, bool any_draft_passes = false) {
  const bool bad_ids = std::any_of(c.drafts.begin(), c.drafts.end(), [&](token_id x) { return !specdec::in_vocabulary(x, c.V); });
  if (bad_ids) {
    FUZZ_CHECK(r.status == verify_status::bad_draft_token && r.tokens.empty() && r.num_accepted == 0);
    return;
  }
  const auto k = static_cast<std::size_t>(r.num_accepted);
  FUZZ_CHECK(r.num_accepted >= 0 && k <= c.drafts.size());
  const bool valid = specdec::is_valid(r.status);
  FUZZ_CHECK(r.tokens.size() == k + (valid ? 1 : 0));
  for (std::size_t i = 0; i < r.tokens.size(); ++i) {
    if (i < k) FUZZ_CHECK(r.tokens[i] == c.drafts[i]);
    FUZZ_CHECK(specdec::in_vocabulary(r.tokens[i], c.V));
    if (i == k || !any_draft_passes) FUZZ_CHECK(static_cast<double>(c.p[i * c.V + static_cast<std::size_t>(r.tokens[i])]) > 0.0);
  }
}

// MTAD (acceptance/mtad.hpp): tau in [0, 1] or specdec::error; log q prefixes NaN or +inf throw.
template <class T>
void fuzz_mtad(byte_reader& in) {
  const single_chain<T> c = read_single_chain<T>(in);
  static constexpr std::array<double, 6> taus{0.5, 0.0, 1.0, 0.1, 1e-300, 0.9};
  const double tau = in.flag() ? in.any_double() : in.pick(taus);
  std::vector<double> log_q;
  double running = 0.0;
  for (std::size_t i = 0; i < c.drafts.size(); ++i) {
    running = in.byte() < 0xF0 ? running - static_cast<double>(in.byte()) / 32.0 : in.any_double();
    log_q.push_back(running);
  }
  const bool log_q_ok = std::none_of(log_q.begin(), log_q.end(), [](double x) { return std::isnan(x) || x == INFINITY; });
  try {
    const specdec::mtad_rule rule(tau);
    const auto r = specdec::mtad_verify(specdec::exec::seq, rule, std::span<const token_id>(c.drafts),
                                        std::span<const double>(log_q), std::span<const T>(c.p), c.V, c.stream);
    FUZZ_CHECK(tau >= 0.0 && tau <= 1.0 && log_q_ok);
    check_single_result(c, r);
    if (r.status == verify_status::bad_draft_token) return;
    if (has_flag(r.status, verify_status::draft_prob_zero))
      FUZZ_CHECK(std::find(log_q.begin(), log_q.end(), -INFINITY) != log_q.end());
    const auto k = static_cast<std::size_t>(r.num_accepted);
    if (k > 0) {  // the accepted prefix passes: min(0, log p(x_1:k) - log q(x_1:k)) > log tau (eq. 13)
      double log_p = 0.0;
      for (std::size_t i = 0; i < k; ++i)
        log_p += std::log(static_cast<double>(c.p[i * c.V + static_cast<std::size_t>(c.drafts[i])]));
      FUZZ_CHECK(rule.passes(log_p, log_q[k - 1]));
    }
  } catch (const specdec::error&) {
    FUZZ_CHECK(!(tau >= 0.0 && tau <= 1.0) || !log_q_ok);
  }
}

// BiLD (acceptance/bild.hpp): a threshold >= 0 or specdec::error; the emitted token is the argmax of
// its row, and a row without usable mass stops the run with invalid_row.
template <class T>
void fuzz_bild(byte_reader& in) {
  const single_chain<T> c = read_single_chain<T>(in);
  const double threshold = in.flag() ? in.any_double() : static_cast<double>(in.byte()) / 16.0;
  try {
    const specdec::bild_rule rule(threshold);
    const auto r = specdec::bild_verify(rule, std::span<const token_id>(c.drafts), std::span<const T>(c.p), c.V);
    FUZZ_CHECK(threshold >= 0.0);
    check_single_result(c, r, threshold == INFINITY);
    if (r.status == verify_status::bad_draft_token) return;
    const auto k = static_cast<std::size_t>(r.num_accepted);
    const auto row = std::span<const T>(c.p).subspan(k * c.V, c.V);
    if (specdec::is_valid(r.status)) {
      FUZZ_CHECK(r.tokens.back() == static_cast<token_id>(first_argmax(row)));
    } else {
      FUZZ_CHECK(!usable_row(row));
    }
  } catch (const specdec::error&) {
    FUZZ_CHECK(!(threshold >= 0.0));
  }
}

// SPRINTER's last-token check (acceptance/last_token.hpp): the kept token is the draft, a
// replacement has p > 0, an unusable scalar or row gives invalid_row and no token.
template <class T>
void fuzz_last_token(byte_reader& in) {
  const std::size_t V = vocab_size(in, false);
  std::vector<T> q(V), p(V);
  fill_row<T>(in, q, row_style::probabilities);
  fill_row<T>(in, p, row_style::probabilities, std::span<const T>(q));
  const token_id x = token(in, V);
  const std::uint32_t position = in.byte();
  const specdec::random::request_stream stream{in.bits<std::uint32_t>(), in.byte(), in.byte()};
  const auto r = specdec::check_last_token(x, std::span<const T>(q), std::span<const T>(p), position, stream);
  FUZZ_CHECK((r.token == specdec::no_token) == !specdec::is_valid(r.status) || r.status == verify_status::bad_draft_token);
  if (!specdec::in_vocabulary(x, V)) {
    FUZZ_CHECK(r.status == verify_status::bad_draft_token && r.token == specdec::no_token && !r.kept);
    return;
  }
  if (r.kept) FUZZ_CHECK(r.token == x);
  if (r.token != specdec::no_token) {
    FUZZ_CHECK(specdec::in_vocabulary(r.token, V));
    FUZZ_CHECK(static_cast<double>(p[static_cast<std::size_t>(r.token)]) > 0.0);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  byte_reader in(data, size);
  const std::uint8_t entry = in.byte();
  const bool as_float = (entry & 8u) != 0, large_vocab = (entry >> 4) == 0xF;
  switch (entry & 7u) {
    case 5: as_float ? fuzz_mtad<float>(in) : fuzz_mtad<double>(in); break;
    case 6: as_float ? fuzz_bild<float>(in) : fuzz_bild<double>(in); break;
    case 7:
      if (as_float)
        fuzz_last_token<float>(in);
      else if ((entry >> 4) % 2 == 0)
        fuzz_last_token<double>(in);
      else
        fuzz_layout(in);
      break;
    default: as_float ? fuzz_chain<float>(in, large_vocab) : fuzz_chain<double>(in, large_vocab); break;
  }
  return 0;
}
