//! \file tests/fuzz/chain_case.hpp
//! \brief What the chain-verification harnesses share: a ragged batch decoded from the input, the
//! rules, shape faults, the output buffers and the invariants every output must satisfy.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "specdec/acceptance/block.hpp"
#include "specdec/acceptance/greedy.hpp"
#include "specdec/acceptance/lenient.hpp"
#include "specdec/acceptance/sample_and_match.hpp"
#include "specdec/acceptance/status.hpp"
#include "specdec/acceptance/strict.hpp"
#include "specdec/acceptance/typical.hpp"
#include "specdec/acceptance/verify.hpp"
#include "specdec/core/batch.hpp"
#include "specdec/errors.hpp"
#include "specdec/random/stream.hpp"

#include "fuzz_input.hpp"

namespace specdec_fuzz {

using specdec::token_id;
using specdec::verify_status;

//! A ragged chain batch that owns its buffers. Padding rows hold NaN and padding ids -7, so a
//! verifier that read them would flag the request (and differ from the request verified alone).
template <class T>
struct chain_case {
  std::size_t V = 1;
  bool packed = true;
  std::size_t width = 0;  // padded layout: drafts per request slot
  std::vector<std::int32_t> num_drafts;
  std::vector<token_id> drafts;
  std::vector<T> q, p;
  std::vector<specdec::random::request_stream> streams;

  std::size_t batch_size() const { return num_drafts.size(); }
  std::size_t max_drafts() const {
    if (!packed) return width;
    std::size_t m = 0;
    for (const auto n : num_drafts) m = std::max(m, static_cast<std::size_t>(n));
    return m;
  }
  specdec::ragged_layout layout() const {
    return packed ? specdec::ragged_layout::packed(num_drafts) : specdec::ragged_layout::padded(num_drafts, width);
  }
  specdec::chain_batch<T> batch() const { return {layout(), V, drafts, q, p}; }
  //! The same batch with other rows (e.g. warped ones) in the same layout.
  specdec::chain_batch<T> batch(std::span<const T> draft_rows, std::span<const T> target_rows) const {
    return {layout(), V, drafts, draft_rows, target_rows};
  }

  //! Request b's drafts and rows.
  std::span<const token_id> drafts_of(std::size_t b) const {
    return std::span<const token_id>(drafts).subspan(layout().draft_row(b, 0), static_cast<std::size_t>(num_drafts[b]));
  }
  //! Request b alone, packed.
  chain_case single(std::size_t b) const {
    chain_case c;
    c.V = V;
    const auto l = layout();
    const auto n = static_cast<std::size_t>(num_drafts[b]);
    c.num_drafts = {num_drafts[b]};
    c.streams = {streams[b]};
    for (std::size_t i = 0; i < n; ++i) {
      c.drafts.push_back(drafts[l.draft_row(b, i)]);
      c.q.insert(c.q.end(), q.begin() + static_cast<std::ptrdiff_t>(l.draft_row(b, i) * V),
                 q.begin() + static_cast<std::ptrdiff_t>((l.draft_row(b, i) + 1) * V));
    }
    for (std::size_t i = 0; i <= n; ++i)
      c.p.insert(c.p.end(), p.begin() + static_cast<std::ptrdiff_t>(l.target_row(b, i) * V),
                 p.begin() + static_cast<std::ptrdiff_t>((l.target_row(b, i) + 1) * V));
    return c;
  }
};

//! Decodes a batch: B <= 8 requests of <= 8 drafts (<= 2 of <= 3 with a large V), packed or padded,
//! rows of the given style; each request's draft row i is followed by its target row i, which may
//! copy it (p == q).
template <class T>
chain_case<T> read_chain_case(byte_reader& in, row_style style, bool large_vocab) {
  chain_case<T> c;
  c.V = vocab_size(in, large_vocab);
  const std::size_t B = in.in_range<std::size_t>(0, large_vocab ? 2 : 8);
  const std::int32_t longest = large_vocab ? 3 : 8;
  c.packed = !in.flag();
  c.num_drafts.resize(B);
  for (auto& n : c.num_drafts) n = in.in_range<std::int32_t>(0, longest);
  if (!c.packed) {
    std::int32_t widest = 0;
    for (const auto n : c.num_drafts) widest = std::max(widest, n);
    c.width = static_cast<std::size_t>(widest) + in.in_range<std::size_t>(0, 2);
  }
  const std::uint32_t seed = in.bits<std::uint32_t>();
  const std::size_t V = c.V;
  std::vector<T> row(V);
  for (std::size_t b = 0; b < B; ++b) {
    c.streams.push_back({seed, static_cast<std::uint32_t>(b) + 97u * in.byte(), in.byte()});
    const auto n = static_cast<std::size_t>(c.num_drafts[b]);
    for (std::size_t i = 0; i <= n; ++i) {
      std::vector<T> q_row;
      if (i < n) {
        c.drafts.push_back(token(in, V));
        q_row.resize(V);
        fill_row<T>(in, q_row, style);
        c.q.insert(c.q.end(), q_row.begin(), q_row.end());
      }
      fill_row<T>(in, row, style, q_row);
      c.p.insert(c.p.end(), row.begin(), row.end());
    }
    if (!c.packed) {
      const std::size_t pad = c.width - n;
      c.drafts.insert(c.drafts.end(), pad, -7);
      c.q.insert(c.q.end(), pad * V, std::numeric_limits<T>::quiet_NaN());
      c.p.insert(c.p.end(), pad * V, std::numeric_limits<T>::quiet_NaN());
    }
  }
  return c;
}

//! The output buffers of a chain verification, pre-filled with values no verifier writes.
struct chain_out {
  std::size_t stride = 1;
  std::vector<token_id> tokens;
  std::vector<std::int32_t> accepted;
  std::vector<verify_status> status;

  chain_out(std::size_t batch_size, std::size_t max_drafts)
      : stride(max_drafts + 1),
        tokens(batch_size * stride, -99),
        accepted(batch_size, -99),
        status(batch_size, static_cast<verify_status>(0xE0)) {}
  specdec::chain_outputs view() { return {tokens, accepted, status}; }
  std::span<const token_id> row(std::size_t b) const { return std::span<const token_id>(tokens).subspan(b * stride, stride); }
  bool operator==(const chain_out&) const = default;
};

//! What the invariants need to know about a rule.
struct rule_traits {
  specdec::rule_family family = specdec::rule_family::rejection;
  bool reads_q = true;
};

template <class Rule>
constexpr rule_traits traits_of() {
  return {Rule::family, specdec::reads_draft_distribution<Rule>};
}

//! A typical-acceptance rule with fuzzed parameters (any double, including invalid ones).
inline specdec::typical_rule read_typical_rule(byte_reader& in) {
  specdec::typical_rule rule;
  const std::uint8_t how = in.byte();
  if (how & 1u) rule.epsilon = in.any_double();
  if (how & 2u) rule.delta = in.any_double();
  if (how & 4u) rule.log_offset = in.any_double();
  if (how & 8u) rule.correction = specdec::typical_correction::typical_sample;
  return rule;
}

//! Decodes a chain rule and calls fn(rule). Returns false when the rule cannot be built (a lenience
//! outside (0, inf) throws specdec::error, as documented).
template <class Fn>
bool with_chain_rule(byte_reader& in, Fn&& fn) {
  switch (in.byte() % 6) {
    case 0: fn(specdec::strict); return true;
    case 1: {
      static constexpr std::array<double, 6> usual{0.5, 1.0, 2.0, 3.0, 1e-300, 1e300};
      const double l = in.flag() ? in.any_double() : in.pick(usual);
      const bool valid = std::isfinite(l) && l > 0.0;
      try {
        const specdec::lenient_rule rule(l);
        FUZZ_CHECK(valid);
        fn(rule);
      } catch (const specdec::error&) {
        FUZZ_CHECK(!valid);
        return false;
      }
      return true;
    }
    case 2: fn(specdec::greedy); return true;
    case 3: fn(specdec::sample_and_match); return true;
    case 4: fn(specdec::block); return true;
    default: {
      fn(read_typical_rule(in));
      return true;
    }
  }
}

//! Whether a typical rule's parameters are in their documented domain (`typical_rule::validate`).
inline bool valid_rule(const specdec::typical_rule& r) {
  return std::isfinite(r.epsilon) && r.epsilon >= 0.0 && std::isfinite(r.delta) && r.delta >= 0.0 &&
         std::isfinite(r.log_offset) && r.log_offset >= 0.0;
}
template <class Rule>
bool valid_rule(const Rule&) {
  return true;
}

//! The documented shape requirements of `specdec::verify` (acceptance/verify.hpp, "\throws"): the
//! call must throw specdec::error exactly when one fails. Written with divisions, so that no
//! product can wrap around.
template <class T>
bool shapes_ok(const specdec::chain_batch<T>& batch, bool reads_q, std::size_t num_streams, const specdec::chain_outputs& out) {
  const auto& l = batch.layout;
  const std::size_t V = batch.vocab_size, B = l.batch_size();
  const auto holds_rows = [V](std::size_t size, std::size_t rows) { return size % V == 0 && size / V == rows; };
  if (V == 0) return false;
  // Padded widths whose row counts do not fit in size_t cannot describe any buffer.
  if (!l.is_packed() && B > 0 && l.max_drafts() >= std::numeric_limits<std::size_t>::max() / B) return false;
  const std::size_t draft_rows = l.num_draft_rows(), target_rows = l.num_target_rows();
  if (batch.draft_tokens.size() != draft_rows || !holds_rows(batch.target_rows.size(), target_rows)) return false;
  if ((reads_q || !batch.draft_rows.empty()) && !holds_rows(batch.draft_rows.size(), draft_rows)) return false;
  if (num_streams != B) return false;
  if (B == 0 ? !out.tokens.empty()
             : out.tokens.size() % (l.max_drafts() + 1) != 0 || out.tokens.size() / (l.max_drafts() + 1) != B)
    return false;
  return out.num_accepted.size() == B && out.status.size() == B;
}

//! The invariants of request b's output (status.hpp, tests/acceptance/bad_input.cpp): tokens in
//! [0, V) or -1; a request with an id outside [0, V) is refused whole; the accepted drafts come
//! first, then one correction or bonus token when valid, then -1; flags only where the rule and the
//! options can raise them. `target_rows` (the rows the verifier read, as probabilities, in the
//! batch's layout; empty to skip) adds: every emitted token has p > 0 in the row it came from, and
//! greedy emits the argmax of its rows.
template <class T>
void check_chain_outputs(const chain_case<T>& c, const chain_out& o, const rule_traits& rule, bool check_normalisation,
                         std::span<const T> target_rows) {
  const auto layout = c.layout();
  const std::size_t V = c.V;
  FUZZ_CHECK(o.stride == c.max_drafts() + 1);
  for (std::size_t b = 0; b < c.batch_size(); ++b) {
    const auto row = o.row(b);
    const auto drafts = c.drafts_of(b);
    const std::size_t n = drafts.size();
    const verify_status s = o.status[b];
    const std::int32_t k = o.accepted[b];
    for (const token_id t : row) FUZZ_CHECK(t == specdec::no_token || specdec::in_vocabulary(t, V));
    const bool bad_ids = std::any_of(drafts.begin(), drafts.end(), [V](token_id x) { return !specdec::in_vocabulary(x, V); });
    if (bad_ids) {
      FUZZ_CHECK(s == verify_status::bad_draft_token && k == 0);
      for (const token_id t : row) FUZZ_CHECK(t == specdec::no_token);
      continue;
    }
    FUZZ_CHECK(!has_flag(s, verify_status::bad_draft_token));
    FUZZ_CHECK((static_cast<std::uint8_t>(s) & 0xE0u) == 0);  // no undefined bit
    FUZZ_CHECK(k >= 0 && static_cast<std::size_t>(k) <= n);
    const auto accepted = static_cast<std::size_t>(k);
    const bool valid = specdec::is_valid(s);
    for (std::size_t i = 0; i < accepted; ++i) FUZZ_CHECK(row[i] == drafts[i]);
    if (valid) FUZZ_CHECK(specdec::in_vocabulary(row[accepted], V));
    for (std::size_t i = accepted + (valid ? 1 : 0); i < row.size(); ++i) FUZZ_CHECK(row[i] == specdec::no_token);
    if (has_flag(s, verify_status::not_normalised)) FUZZ_CHECK(check_normalisation);
    if (has_flag(s, verify_status::draft_prob_zero)) FUZZ_CHECK(rule.reads_q);
    if (has_flag(s, verify_status::residual_fallback))
      FUZZ_CHECK(rule.family == specdec::rule_family::rejection || rule.family == specdec::rule_family::block);
    if (target_rows.empty()) continue;
    const auto p = [&](std::size_t i) { return target_rows.subspan(layout.target_row(b, i) * V, V); };
    // Every emitted token has p > 0 in its row: accepted drafts, and the correction or bonus.
    for (std::size_t i = 0; i < accepted + (valid ? 1 : 0); ++i)
      FUZZ_CHECK(static_cast<double>(p(i)[static_cast<std::size_t>(row[i])]) > 0.0);
    if (rule.family == specdec::rule_family::greedy) {
      if (valid) {
        for (std::size_t i = 0; i <= accepted; ++i) {
          FUZZ_CHECK(usable_row(p(i)));
          FUZZ_CHECK(row[i] == static_cast<token_id>(first_argmax(p(i))));
        }
        if (accepted < n) FUZZ_CHECK(row[accepted] != drafts[accepted]);
      } else if (!has_flag(s, verify_status::not_normalised)) {
        FUZZ_CHECK(!usable_row(p(accepted)));
      }
    }
  }
}

}  // namespace specdec_fuzz

namespace specdec_fuzz {

//! The arguments of one verification call, views into a case and its outputs.
template <class T>
struct chain_call {
  specdec::chain_batch<T> batch;
  std::span<const specdec::random::request_stream> streams;
  specdec::chain_outputs out;
};

//! Spare streams for a fault that passes one stream too many.
inline const std::array<specdec::random::request_stream, 9> spare_streams{};

//! Sometimes (about 1 input in 8) breaks one shape of the call: a wrong V (among them powers of two
//! whose products with the row counts wrap around to 0, with empty rows), a row or id missing,
//! missing or extra streams, outputs of the wrong size. Returns whether it did.
template <class T>
bool apply_shape_fault(byte_reader& in, chain_call<T>& call) {
  const std::uint8_t kind = in.byte();
  if (kind < 0xE0) return false;
  constexpr std::size_t top = std::size_t{1} << 63;
  auto& b = call.batch;
  switch (kind % 8) {
    case 0: {
      const std::array<std::size_t, 8> sizes{
          b.vocab_size + 1, b.vocab_size - 1, 0, top, top >> 1, std::size_t{1} << 32, std::numeric_limits<std::size_t>::max(),
          top + (top >> 1)};
      b.vocab_size = in.pick(sizes);
      if (b.vocab_size >= (std::size_t{1} << 32)) {
        b.target_rows = {};
        if (in.flag()) b.draft_rows = {};
      }
      break;
    }
    case 1: b.target_rows = b.target_rows.first(b.target_rows.size() - (b.target_rows.empty() ? 0 : 1)); break;
    case 2: b.draft_rows = {}; break;
    case 3: b.draft_rows = b.draft_rows.first(b.draft_rows.size() - std::min(b.draft_rows.size(), b.vocab_size)); break;
    case 4: b.draft_tokens = b.draft_tokens.first(b.draft_tokens.size() - (b.draft_tokens.empty() ? 0 : 1)); break;
    case 5: call.streams = call.streams.first(call.streams.size() - (call.streams.empty() ? 0 : 1)); break;
    case 6: call.streams = std::span(spare_streams).first(std::min(spare_streams.size(), call.streams.size() + 1)); break;
    default:
      if (in.flag())
        call.out.tokens = call.out.tokens.first(call.out.tokens.size() - (call.out.tokens.empty() ? 0 : 1));
      else
        call.out.status = call.out.status.first(call.out.status.size() - (call.out.status.empty() ? 0 : 1));
      break;
  }
  return true;
}

}  // namespace specdec_fuzz
