//! \file backend/seq/verify.hpp
//! \brief The sequential chain verifier: the reference oracle of every backend.
//!
//! Per request: the chain walk every backend runs (backend/walks/chain.hpp; block verification:
//! walks/block.hpp), through `chain_walk_ops`, tests the drafted positions with the rule, stops at the
//! first rejection and says what to emit there (residual, argmax or target sample; after n_b
//! acceptances the bonus); seq draws a rejection rule's residual or bonus (`emit_rejection`).
//! Only the rows that are needed are read: two scalars per drafted position and, at the stopping
//! position, one target row (and one draft row for rejection rules). A target sample (sample-and-match's,
//! every bonus) from logits is the backend's `sample_logits` of the row: no warped row is written
//! where the backend's sampler does not need one (docs/reference/sampling-contract.md).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <vector>

#include "specdec/acceptance/block.hpp"
#include "specdec/acceptance/concepts.hpp"
#include "specdec/acceptance/draft_side.hpp"
#include "specdec/acceptance/position_test.hpp"
#include "specdec/acceptance/status.hpp"
#include "specdec/acceptance/typical.hpp"
#include "specdec/backend/walks/block.hpp"
#include "specdec/backend/walks/chain.hpp"
#include "specdec/backend/walks/steps.hpp"
#include "specdec/core/batch.hpp"
#include "specdec/distributions/softmax.hpp"
#include "specdec/distributions/warp.hpp"
#include "specdec/random/stream.hpp"
#include "specdec/sampling/residual.hpp"
#include "specdec/sampling/sample_logits.hpp"

namespace specdec::backend::seq {

//! A row handed to the verifier, and whether it was usable.
template <class T>
struct row_ref {
  std::span<const T> values;  //!< the row's entries
  bool usable = true;         //!< false when warping found the row unusable
};

//! The target's probabilities at one position as the rules that read p(x) and draw residuals take
//! them: a row, or (from logits, where the backend's sampler filters sparsely) the kept tokens and
//! their probabilities, every other entry being 0.
template <class T>
struct target_probabilities {
  row_ref<T> values;                    //!< the row, or the kept tokens' probabilities
  std::span<const token_id> kept = {};  //!< the kept tokens (increasing), when `sparse`
  bool sparse = false;                  //!< whether only the kept tokens are stored

  //! p(x). \pre x in [0, V)
  double at(token_id x) const {
    if (!sparse) return static_cast<double>(values.values[static_cast<std::size_t>(x)]);
    const auto it = std::lower_bound(kept.begin(), kept.end(), x);
    return it != kept.end() && *it == x ? static_cast<double>(values.values[static_cast<std::size_t>(it - kept.begin())]) : 0.0;
  }
};

//! The scratch of one request's target rows from logits: the warped row, or a sparse filter's kept
//! tokens, weights and probabilities; and which row's probabilities it holds, so that reading them
//! again costs nothing (`warped_logit_rows::probabilities`).
template <class T>
struct logit_row_scratch {
  std::vector<T> row;              //!< a warped row
  std::vector<token_id> kept;      //!< the kept tokens of a sparse filter
  std::vector<double> weights;     //!< their weights
  std::vector<T> probabilities;    //!< their probabilities
  const T* held_row = nullptr;     //!< the logits row whose probabilities `held` views, or null
  target_probabilities<T> held{};  //!< that row's probabilities (views into this scratch)
};

//! Rows read directly from a probability batch.
template <class T>
struct probability_rows {
  const chain_batch<T>& batch;  //!< the batch the rows are read from
  std::size_t b;                //!< the request
  //! Target row i of request b (probabilities, as given).
  row_ref<T> target(std::size_t i) { return {batch.target_row(b, i), true}; }
  //! Target row i's probabilities: the row itself.
  target_probabilities<T> probabilities(std::size_t i) { return {target(i)}; }
  //! Draft row i of request b (q, as given).
  row_ref<T> draft(std::size_t i) { return {batch.draft_row(b, i), true}; }
  //! q_i(x_i) without reading row i, when the caller gave it (never here).
  std::optional<double> draft_at_token(std::size_t) const { return std::nullopt; }
};

//! The whole-row steps of a verification, as seq performs them. A backend supplies a struct with the
//! same static members (backend/simd/verify.hpp does) and reuses the walks through `chain_walk_ops`:
//! the accept/reject logic, stream addressing and status flags exist once (backend/walks/).
struct seq_kernels {
  //! sum_v double(row_v).
  template <class T>
  static double row_sum(std::span<const T> row) {
    double s = 0.0;
    for (const T x : row) s += static_cast<double>(x);
    return s;
  }
  //! Some entry > 0.
  template <class T>
  static bool has_mass(std::span<const T> row) {
    for (const T x : row)
      if (static_cast<double>(x) > 0.0) return true;
    return false;
  }
  //! A row greedy can take the argmax of: no NaN, infinite or negative entry, and some entry > 0.
  template <class T>
  static bool greedy_usable(std::span<const T> row) {
    bool mass = false;
    for (const T x : row) {
      const double v = static_cast<double>(x);
      if (!(v >= 0.0) || !std::isfinite(v)) return false;
      mass = mass || v > 0.0;
    }
    return mass;
  }
  //! `greedy_usable` and, for a usable row, `argmax` in one pass over the row (the entries are then
  //! finite and >= 0, so the first largest entry is the argmax).
  template <class T>
  static walks::greedy_row greedy_row(std::span<const T> row) {
    bool mass = false;
    std::size_t best = 0;
    double best_value = -1.0;
    for (std::size_t i = 0; i < row.size(); ++i) {
      const double v = static_cast<double>(row[i]);
      if (!(v >= 0.0) || !std::isfinite(v)) return {false, no_token};
      mass = mass || v > 0.0;
      if (v > best_value) {
        best_value = v;
        best = i;
      }
    }
    if (!mass) return {false, no_token};
    return {true, static_cast<token_id>(best)};
  }
  //! No NaN, infinite or negative entry.
  template <class T>
  static bool weights_usable(std::span<const T> row) {
    for (const T x : row)
      if (!specdec::detail::usable_weight(static_cast<double>(x))) return false;
    return true;
  }
  //! The index of the largest entry (lowest on ties; -1 for an empty or all-NaN row): `specdec::argmax`.
  template <class T>
  static std::ptrdiff_t argmax(std::span<const T> row) {
    return specdec::argmax(row);
  }
  //! A sample of the row with the uniform u in [0, 1): `specdec::sample_categorical`.
  template <class T>
  static sample_result sample_categorical(std::span<const T> row, double u) {
    return specdec::sample_categorical(row, u);
  }
  //! A sample of the row with the entries `masked` (sorted, distinct) left out.
  template <class T>
  static sample_result sample_masked(std::span<const T> row, std::span<const token_id> masked, double u) {
    return specdec::sample_masked(row, masked, u);
  }
  //! A sample of the rule's residual norm(max(0, p - accepted_mass(p, q))) with the uniform u; falls back to p when it has no
  //! mass.
  template <class Rule, class T>
  static residual_result sample_residual(std::span<const T> p, std::span<const T> q, const Rule& rule, double u) {
    return specdec::sample_residual(
        p, q, [&rule](double pv, double qv) { return rule.accepted_mass(pv, qv); }, u);
  }
  //! probs = warp(softmax(logits / T)) with the parameters w (`specdec::warp_logits`); the status says whether the row was
  //! usable.
  template <class T, class U>
  static row_status warp_logits(std::span<const T> logits, std::span<U> probs, const warp_params& w) {
    return specdec::warp_logits(logits, probs, w);
  }
  //! One token from the logits with the parameters w and the uniform u, as `specdec::sample_logits` draws it (the
  //! warped row in `scratch`).
  template <class T>
  static sample_result sample_logits(std::span<const T> logits, const warp_params& w, double u, logit_row_scratch<T>& scratch) {
    return specdec::sample_logits(logits, w, u, scratch.row);
  }
  //! The probabilities of warp(softmax(logits / T)) with the parameters w: the `warp_logits` row, in `scratch`.
  template <class T>
  static target_probabilities<T> probabilities(std::span<const T> logits, const warp_params& w, logit_row_scratch<T>& scratch) {
    scratch.row.resize(logits.size());
    const row_status s = warp_logits(logits, std::span<T>(scratch.row), w);
    return {{std::span<const T>(scratch.row), s == row_status::ok}};
  }
};

namespace detail {
//! A sample of the rule's residual norm(max(0, p - accepted_mass(p, q))) with the uniform u, falling back to p
//! when it has no mass: `K::sample_residual` on a row; on kept tokens, the same token, status and flags from
//! their entries alone (the others weigh max(0, 0 - a) = +0, which changes no sum of the sampling contract)
//! once q is known to be usable everywhere.
template <class K, class Rule, class T>
residual_result sample_residual_of(const target_probabilities<T>& p, std::span<const T> q, const Rule& rule, double u) {
  if (!p.sparse) return K::sample_residual(p.values.values, q, rule, u);
  if (!K::weights_usable(q)) return {{no_token, row_status::not_finite, std::numeric_limits<double>::quiet_NaN()}, false};
  thread_local std::vector<double> weights;
  weights.resize(p.kept.size());
  const std::span<const T> pk = p.values.values;
  for (std::size_t j = 0; j < p.kept.size(); ++j)
    weights[j] =
        specdec::detail::residual_weight(static_cast<double>(pk[j]), static_cast<double>(q[static_cast<std::size_t>(p.kept[j])]),
                                         [&rule](double pv, double qv) { return rule.accepted_mass(pv, qv); });
  residual_result r{sample_sparse(q.size(), p.kept, weights, u), false};
  if (r.sample.status == row_status::no_mass) {
    for (std::size_t j = 0; j < p.kept.size(); ++j) weights[j] = static_cast<double>(pk[j]);
    r.sample = sample_sparse(q.size(), p.kept, weights, u);
    r.used_fallback = true;
  }
  return r;
}
}  // namespace detail

//! Target rows warped from logits on demand (only the rows that are read), into a scratch row; the
//! draft side as `draft_side` describes it (acceptance/draft_side.hpp): logits warped on demand too,
//! or the q rows themselves, and optionally q_i(x_i) given so that row i is read only where needed.
template <class T, class Kernels = seq_kernels>
struct warped_logit_rows {
  const chain_batch<T>& batch;           //!< the batch the rows are read from
  std::size_t b;                         //!< the request
  warp_params target_params;             //!< the warp of the target's logits
  const warp_params* draft_params;       //!< null: the draft rows are q itself
  std::span<const T> q_at_drafts;        //!< empty, or q_i(x_i) per draft row of the batch
  logit_row_scratch<T>& target_scratch;  //!< holds the last target row's warp
  std::vector<T>& draft_scratch;         //!< holds the last warped draft row
  //! Target row i of request b, warped into `target_scratch`.
  row_ref<T> target(std::size_t i) {
    target_scratch.held_row = nullptr;
    return warp(batch.target_row(b, i), target_params, target_scratch.row);
  }
  //! Target row i's probabilities as the backend warps them (`Kernels::probabilities`: a row, or kept tokens);
  //! computed once when read twice in a row (block verification's scan stops at the last row of its
  //! forward pass). \pre `target_scratch.held_row` was reset since the request's logits were last written
  //! (`verify_from_logits_with` resets it for each request)
  target_probabilities<T> probabilities(std::size_t i) {
    const std::span<const T> logits = batch.target_row(b, i);
    if (target_scratch.held_row != logits.data()) {
      target_scratch.held_row = nullptr;  // (while the kernel overwrites the scratch)
      target_scratch.held = Kernels::probabilities(logits, target_params, target_scratch);
      target_scratch.held_row = logits.data();
    }
    return target_scratch.held;
  }
  //! A sample of target row i with the uniform u, drawn from the logits as the backend's `sample_logits` draws it
  //! (docs: the sampling contract, verification from logits).
  sample_result sample_target(std::size_t i, double u) {
    target_scratch.held_row = nullptr;
    return Kernels::sample_logits(batch.target_row(b, i), target_params, u, target_scratch);
  }
  //! Draft row i of request b: q itself, or its logits warped into `draft_scratch`.
  row_ref<T> draft(std::size_t i) {
    if (draft_params == nullptr) return {batch.draft_row(b, i), true};
    return warp(batch.draft_row(b, i), *draft_params, draft_scratch);
  }
  //! q_i(x_i) of draft row i from `q_at_drafts`, or nothing when that is empty.
  std::optional<double> draft_at_token(std::size_t i) const {
    if (q_at_drafts.empty()) return std::nullopt;
    return static_cast<double>(q_at_drafts[batch.layout.draft_row(b, i)]);
  }

 private:
  static row_ref<T> warp(std::span<const T> logits, const warp_params& w, std::vector<T>& scratch) {
    scratch.resize(logits.size());
    const row_status s = Kernels::warp_logits(logits, std::span<T>(scratch), w);
    return {std::span<const T>(scratch), s == row_status::ok};
  }
};

namespace detail {
inline bool usable_scalar(double v) noexcept { return v >= 0.0 && std::isfinite(v); }

//! The status bookkeeping every walk shares (chains, blocks, trees): row checks and emission.
template <class K, class T>
struct request_checks {
  verify_status& status;
  const verify_options& options;
  std::size_t vocab_size;

  //! Flags an unusable or (when checked) unnormalised row; false once the request has an error.
  bool row(const row_ref<T>& r) {
    if (!r.usable) status |= verify_status::invalid_row;
    if (options.check_normalisation && r.usable && !(std::abs(K::row_sum(r.values) - 1.0) <= options.normalisation_tolerance))
      status |= verify_status::not_normalised;
    return is_valid(status);
  }
  bool row(std::span<const T> values) { return row(row_ref<T>{values, true}); }
  //! Writes a sampled token, or flags the row it came from.
  void emit(const sample_result& s, token_id& slot) { walks::emit_sample(s, vocab_size, slot, status); }
  //! Whether every id is in [0, V); flags `bad_draft_token` otherwise.
  bool ids(std::span<const token_id> drafts) {
    for (const token_id x : drafts)
      if (!in_vocabulary(x, vocab_size)) {
        status |= verify_status::bad_draft_token;
        return false;
      }
    return true;
  }
};

//! The row checks of one operation of a walk's `Ops` (backend/walks/): `request_checks` on flags of
//! their own, which the operation returns (`take`) instead of adding them to the request's status.
template <class K, class T>
class operation_checks {
 public:
  operation_checks(const verify_options& options, std::size_t vocab_size) : checks_{flags_, options, vocab_size} {}
  operation_checks(const operation_checks&) = delete;  // `checks_` refers to `flags_`
  operation_checks& operator=(const operation_checks&) = delete;

  request_checks<K, T>& checks() { return checks_; }
  //! The flags set since the last call.
  verify_status take() {
    const verify_status f = flags_;
    flags_ = verify_status::ok;
    return f;
  }

 private:
  verify_status flags_ = verify_status::ok;
  request_checks<K, T> checks_;
};

//! The draft's q at position i of a walk: q_i(x_i) from the caller when the rows provider has it, and
//! row i read (and checked) once, only when it is needed (acceptance/draft_side.hpp).
template <class K, class T, class Rows>
class draft_position {
 public:
  draft_position(Rows& rows, request_checks<K, T>& checks, std::size_t i) : rows_(rows), checks_(checks), i_(i) {}
  //! Row i; nullptr when it is unusable (the request's status says why).
  const row_ref<T>* row() {
    if (!row_) {
      row_ = rows_.draft(i_);
      usable_ = checks_.row(*row_);
    }
    return usable_ ? &*row_ : nullptr;
  }
  //! q_i(x): given, or read from row i; nullopt when the row is unusable.
  std::optional<double> at(token_id x) {
    if (const std::optional<double> given = rows_.draft_at_token(i_)) return given;
    const row_ref<T>* r = row();
    if (r == nullptr) return std::nullopt;
    return static_cast<double>(r->values[static_cast<std::size_t>(x)]);
  }

 private:
  Rows& rows_;
  request_checks<K, T>& checks_;
  std::size_t i_;
  std::optional<row_ref<T>> row_;
  bool usable_ = false;
};

//! Greedy's view of row p with the row kernels `K`: `K::greedy_row` (one pass) where they have it, else
//! `greedy_usable`, then `argmax`.
template <class K, class T>
walks::greedy_row greedy_of(std::span<const T> p) {
  if constexpr (requires { K::greedy_row(p); }) {
    return K::greedy_row(p);
  } else {
    if (!K::greedy_usable(p)) return {false, no_token};
    return {true, static_cast<token_id>(K::argmax(p))};
  }
}

//! The token typical acceptance emits from the row p whose threshold is `threshold` (finite):
//! argmax p, or a sample of p restricted to p(v) >= threshold with u, the (position, resample) uniform.
template <class K, class T>
sample_result typical_emission(const typical_rule& rule, std::span<const T> p, double threshold, double u) {
  if (rule.correction == typical_correction::argmax) {
    const walks::greedy_row g = greedy_of<K>(p);
    if (!g.usable) return {no_token, row_status::not_finite, 0.0};
    return {g.token, row_status::ok, 1.0};
  }
  return sample_by_weights(
      p.size(),
      [&](std::size_t v) {
        const double x = static_cast<double>(p[v]);
        return x >= threshold ? x : 0.0;
      },
      u);
}

//! Rows that draw their target samples themselves (`warped_logit_rows`: from the logits).
template <class Rows>
concept draws_target_samples = requires(Rows& rows, std::size_t i, double u) {
  rows.sample_target(i, u);
};

//! A target sample of position i with the uniform u: the rows' `sample_target` when they have one
//! (from logits: the backend's `sample_logits`, no warped row), else `K::sample_categorical` on row i,
//! read and checked. nullopt when row i fails its check (the status says why); a sample whose status
//! is not ok is flagged when it is emitted.
template <class K, class T, class Rows>
std::optional<sample_result> target_sample(Rows& rows, request_checks<K, T>& checks, std::size_t i, double u) {
  if constexpr (draws_target_samples<Rows>) {
    return rows.sample_target(i, u);
  } else {
    const row_ref<T> p = rows.target(i);
    if (!checks.row(p)) return std::nullopt;
    return K::sample_categorical(p.values, u);
  }
}

//! The target-row operations of the walks' `Ops` (backend/walks/) with seq's row checks: row p_i read
//! and checked (`check_target`), its argmax (`greedy`) and a target sample (`sample_target`). Each
//! operation returns the flags of the rows it read.
template <class K, class T, class Rows>
class target_row_ops {
 public:
  target_row_ops(Rows& rows, const verify_options& options, std::size_t vocab_size) : rows_(rows), op_(options, vocab_size) {}

  verify_status check_target(std::int32_t i) {
    const row_ref<T> target = rows_.target(static_cast<std::size_t>(i));
    p_ = target.values;
    op_.checks().row(target);
    return op_.take();
  }
  walks::greedy_row greedy(std::int32_t) const { return greedy_of<K>(p_); }
  walks::row_draw<sample_result> sample_target(std::int32_t i, double u) {
    const std::optional<sample_result> y = target_sample(rows_, op_.checks(), static_cast<std::size_t>(i), u);
    if (!y) return {op_.take()};
    return {verify_status::ok, *y};
  }

 protected:
  Rows& rows_;
  operation_checks<K, T> op_;
  std::span<const T> p_;  // the last target row `check_target` read
};

//! The rows of one chain as the chain walks read them (backend/walks/chain.hpp and block.hpp, `Ops`):
//! seq's row checks, its draft side (q_i(x_i) given or read, acceptance/draft_side.hpp) and the
//! samplers of the row kernels `K`. Each operation returns the flags of the rows it read.
template <class K, class T, class Rows>
class chain_walk_ops : public target_row_ops<K, T, Rows> {
  using base = target_row_ops<K, T, Rows>;
  using base::op_;
  using base::p_;
  using base::rows_;
  // From logits a target sample is the backend's `sample_logits` of the row, which reports an unusable
  // row itself; no probability row is read (or summed) for it.
  static constexpr bool samples_logits = draws_target_samples<Rows>;

 public:
  using base::base;

  walks::row_scalar target_at(std::int32_t i, token_id x) {
    const target_probabilities<T> p = rows_.probabilities(index(i));
    if (!op_.checks().row(p.values)) return {op_.take()};
    return {verify_status::ok, p.at(x)};
  }
  walks::row_scalar draft_at(std::int32_t i, token_id x) {
    draft_.emplace(rows_, op_.checks(), index(i));
    const std::optional<double> q = draft_->at(x);
    if (!q) return {op_.take()};
    return {verify_status::ok, *q};
  }
  //! \pre `draft_at(i, ...)` was the last draft read
  verify_status draft_has_mass(std::int32_t) {
    const row_ref<T>* row = draft_->row();
    if (row != nullptr && !K::has_mass(row->values)) op_.checks().status |= verify_status::invalid_row;
    return op_.take();
  }
  //! Samples the residual at once with u (seq's sampler returns the token with the mass) and keeps it
  //! for `draw_residual`.
  walks::residual_mass residual_mass(std::int32_t i, double inverse_weight, double u) {
    const target_probabilities<T> p = rows_.probabilities(index(i));
    if (!op_.checks().row(p.values)) return {op_.take()};
    const row_ref<T> q = rows_.draft(index(i));
    if (!op_.checks().row(q)) return {op_.take()};
    residual_ = sample_residual_of<K>(p, q.values, block_residual{inverse_weight}, u);
    return {verify_status::ok, residual_.sample.mass, residual_.used_fallback};
  }
  walks::row_draw<sample_result> draw_residual(std::int32_t, double, double) const {
    return {verify_status::ok, residual_.sample, residual_.used_fallback};
  }
  void barrier() const {}

  // ---- chain.hpp's operations beyond block.hpp's
  verify_status check_bonus(std::int32_t i) {
    if constexpr (samples_logits)
      return verify_status::ok;
    else
      return this->check_target(i);
  }
  //! The bonus of a rejection rule, p_i sampled with u. \pre `check_bonus(i)` found the row usable
  sample_result draw_bonus(std::int32_t i, double u) {
    if constexpr (samples_logits)
      return rows_.sample_target(index(i), u);
    else
      return K::sample_categorical(p_, u);
  }
  //! A token of the rule's residual at position i with u (p itself when it has no mass: `fallback`);
  //! reads (and checks) row q_i unless `draft_at(i, ...)` or `draft_has_mass(i)` did.
  //! \pre `draft_at(i, ...)` was the last draft read
  template <class Rule>
  walks::row_draw<sample_result> draw_rule_residual(std::int32_t i, const Rule& rule, double u) {
    const row_ref<T>* q = draft_->row();
    if (q == nullptr) return {op_.take()};
    const residual_result r = sample_residual_of<K>(rows_.probabilities(index(i)), q->values, rule, u);
    return {verify_status::ok, r.sample, r.used_fallback};
  }
  using base::check_target;
  double typical_threshold(const typical_rule& rule, std::int32_t) const { return rule.threshold(p_); }
  double target_value(std::int32_t, token_id x) const { return static_cast<double>(p_[static_cast<std::size_t>(x)]); }
  sample_result typical_correction(const typical_rule& rule, std::int32_t, double threshold, double u) const {
    return typical_emission<K>(rule, p_, threshold, u);
  }

 private:
  static std::size_t index(std::int32_t i) { return static_cast<std::size_t>(i); }

  std::optional<draft_position<K, T, Rows>> draft_;  // the last position whose q was read
  residual_result residual_;                         // the last residual drawn
};

//! Block verification of one chain (acceptance/block.hpp): the walk of backend/walks/block.hpp on
//! the rows `rows`. Writes tokens[0..] and returns the accepted count.
template <class K, class T, class Rows>
std::int32_t verify_block_one(Rows& rows, std::span<const token_id> drafts, const random::request_stream& stream,
                              std::span<token_id> tokens, request_checks<K, T>& checks) {
  thread_local std::vector<double> weight;
  weight.resize(drafts.size() + 1);
  chain_walk_ops<K, T, Rows> ops(rows, checks.options, checks.vocab_size);
  const walks::block_walk_result r = walks::walk_block(ops, drafts.data(), static_cast<std::int32_t>(drafts.size()),
                                                       checks.vocab_size, stream, weight.data(), true);
  checks.status |= r.status;
  for (std::size_t j = 0; j < tokens.size(); ++j) tokens[j] = walks::block_output_token(drafts.data(), r, j);
  return r.accepted;
}

//! The correction or bonus a rejection rule's walk stopped for (`kind`, backend/walks/chain.hpp),
//! drawn with the (stop, resample) uniform into `slot`: the bonus, a sample of p_n; or a token of the
//! rule's residual, once q is known to have mass when q(x) = 0 (a q without mass is unusable, not a
//! residual of p: status.hpp).
template <class K, class Rule, class T, class Rows>
void emit_rejection(const Rule& rule, chain_walk_ops<K, T, Rows>& ops, const walks::chain_walk_result& w,
                    const random::request_stream& stream, token_id& slot, request_checks<K, T>& checks) {
  const double u = walks::first_uniform(stream, w.stop, random::purpose::resample);
  if (w.kind == walks::chain_stop::bonus) {
    checks.emit(ops.draw_bonus(w.stop, u), slot);
    return;
  }
  if (w.kind == walks::chain_stop::residual_q_zero) {
    checks.status |= ops.draft_has_mass(w.stop);
    if (!is_valid(checks.status)) return;
  }
  const walks::row_draw<sample_result> d = ops.draw_rule_residual(w.stop, rule, u);
  checks.status |= d.flags;
  if (!is_valid(checks.status)) return;
  if (d.fallback) checks.status |= verify_status::residual_fallback;
  checks.emit(d.sample, slot);
}

//! Verifies one request's chain of `n` drafts with the row kernels `K`: the chain walk of
//! backend/walks/chain.hpp (block verification: block.hpp's), then the token it asks for. Writes
//! tokens[0..] and returns the accepted count.
template <class K, AcceptanceRule Rule, class T, class Rows>
std::int32_t verify_one(const Rule& rule, Rows& rows, std::span<const token_id> drafts, std::size_t vocab_size,
                        const random::request_stream& stream, std::span<token_id> tokens, verify_status& status,
                        const verify_options& options) {
  for (token_id& t : tokens) t = no_token;
  request_checks<K, T> checks{status, options, vocab_size};
  if constexpr (Rule::family == rule_family::block) {
    return verify_block_one<K, T>(rows, drafts, stream, tokens, checks);
  } else {
    chain_walk_ops<K, T, Rows> ops(rows, options, vocab_size);
    const auto n = static_cast<std::int32_t>(drafts.size());
    walks::chain_walk_result w;
    if constexpr (Rule::family == rule_family::rejection)
      w = walks::walk_rejection(rule, ops, drafts.data(), n, vocab_size, stream);
    else if constexpr (Rule::family == rule_family::typical)
      w = walks::walk_typical(rule, ops, drafts.data(), n, vocab_size, stream);
    else
      w = walks::walk_target_choice<Rule::family>(ops, drafts.data(), n, vocab_size, stream);
    status |= w.status;
    for (std::size_t j = 0; j < tokens.size(); ++j) tokens[j] = walks::chain_output_token(drafts.data(), w.stop, w.emitted, j);
    if constexpr (Rule::family == rule_family::rejection)
      if (w.kind != walks::chain_stop::none)
        emit_rejection(rule, ops, w, stream, tokens[static_cast<std::size_t>(w.stop)], checks);
    return w.stop;
  }
}

template <class T>
void check_shapes(const chain_batch<T>& batch, bool reads_q, std::span<const random::request_stream> streams,
                  const chain_outputs& out) {
  const std::size_t B = batch.layout.batch_size(), V = batch.vocab_size;
  SPECDEC_EXPECTS(V > 0, "vocab_size must be > 0");
  SPECDEC_EXPECTS(batch.draft_tokens.size() == batch.layout.num_draft_rows(), "draft_tokens has the wrong length for the layout");
  SPECDEC_EXPECTS(specdec::detail::holds_rows(batch.target_rows.size(), batch.layout.num_target_rows(), V),
                  "target rows: size is not num_target_rows * vocab_size (V mismatch?)");
  if (reads_q || !batch.draft_rows.empty())
    SPECDEC_EXPECTS(specdec::detail::holds_rows(batch.draft_rows.size(), batch.layout.num_draft_rows(), V),
                    "draft rows: size is not num_draft_rows * vocab_size (V mismatch?)");
  SPECDEC_EXPECTS(streams.size() == B, "one request_stream per request is required");
  SPECDEC_EXPECTS(out.tokens.size() == B * (batch.layout.max_drafts() + 1), "output tokens must be B * (max_drafts + 1)");
  SPECDEC_EXPECTS(out.num_accepted.size() == B && out.status.size() == B, "num_accepted and status need one entry per request");
}

//! Runs `verify_one` for every request with the rows that `make_rows(b)` provides. A rule with
//! parameters (typical acceptance) is validated first, as tree verification does.
template <class K, AcceptanceRule Rule, class T, class MakeRows>
void verify_each(const Rule& rule, const chain_batch<T>& batch, std::span<const random::request_stream> streams,
                 const chain_outputs& out, const verify_options& options, MakeRows&& make_rows) {
  if constexpr (Rule::family == rule_family::typical) rule.validate();
  const std::size_t stride = batch.layout.max_drafts() + 1;
  for (std::size_t b = 0; b < batch.layout.batch_size(); ++b) {
    auto rows = make_rows(b);
    const auto drafts = batch.draft_tokens.subspan(batch.layout.draft_row(b, 0), batch.layout.num_drafts(b));
    out.status[b] = verify_status::ok;
    out.num_accepted[b] = verify_one<K, Rule, T>(rule, rows, drafts, batch.vocab_size, streams[b],
                                                 out.tokens.subspan(b * stride, stride), out.status[b], options);
  }
}

//! Chain verification from probabilities with the row kernels `K`.
template <class K, AcceptanceRule Rule, class T>
void verify_with(const Rule& rule, const chain_batch<T>& batch, std::span<const random::request_stream> streams,
                 const chain_outputs& out, const verify_options& options) {
  check_shapes(batch, reads_draft_distribution<Rule>, streams, out);
  verify_each<K>(rule, batch, streams, out, options, [&](std::size_t b) { return probability_rows<T>{batch, b}; });
}

//! Chain verification from logits with the row kernels `K`, warping each target row that is read;
//! the draft side as `draft` says (acceptance/draft_side.hpp).
template <class K, AcceptanceRule Rule, class T>
void verify_from_logits_with(const Rule& rule, const chain_batch<T>& batch, std::span<const warp_params> target_params,
                             const draft_side<T>& draft, std::span<const random::request_stream> streams,
                             const chain_outputs& out, const verify_options& options) {
  check_shapes(batch, reads_draft_distribution<Rule>, streams, out);
  const std::size_t B = batch.layout.batch_size();
  SPECDEC_EXPECTS(target_params.size() == B, "one warp_params per request is required");
  const bool draft_logits = draft.rows == draft_rows_kind::logits;
  SPECDEC_EXPECTS(!draft_logits || draft.params.empty() || draft.params.size() == B,
                  "draft_params must be empty (same as target) or one per request");
  SPECDEC_EXPECTS(draft.q_at_drafts.empty() || draft.q_at_drafts.size() == batch.draft_tokens.size(),
                  "q_at_drafts must be empty or hold one value per draft row");
  for (const auto& w : target_params) validate(w);
  if (draft_logits)
    for (const auto& w : draft.params) validate(w);
  // Two scratch rows per thread, kept from call to call: a decode loop calling this every step
  // allocates nothing once they are V long.
  thread_local logit_row_scratch<T> target_scratch;
  thread_local std::vector<T> draft_scratch;
  verify_each<K>(rule, batch, streams, out, options, [&](std::size_t b) {
    const warp_params* draft_params = !draft_logits ? nullptr : draft.params.empty() ? &target_params[b] : &draft.params[b];
    target_scratch.held_row = nullptr;  // (a caller may rewrite its logits between calls, in place)
    return warped_logit_rows<T, K>{batch, b, target_params[b], draft_params, draft.q_at_drafts, target_scratch, draft_scratch};
  });
}
}  // namespace detail

//! Sequential chain verification from probabilities.
template <AcceptanceRule Rule, class T>
void verify(const Rule& rule, const chain_batch<T>& batch, std::span<const random::request_stream> streams,
            const chain_outputs& out, const verify_options& options) {
  detail::verify_with<seq_kernels>(rule, batch, streams, out, options);
}

//! Sequential chain verification from logits, warping each target row that is read with the request's
//! parameters; the draft side as `draft` says (acceptance/draft_side.hpp).
template <AcceptanceRule Rule, class T>
void verify_from_logits(const Rule& rule, const chain_batch<T>& batch, std::span<const warp_params> target_params,
                        const draft_side<T>& draft, std::span<const random::request_stream> streams, const chain_outputs& out,
                        const verify_options& options) {
  detail::verify_from_logits_with<seq_kernels>(rule, batch, target_params, draft, streams, out, options);
}

}  // namespace specdec::backend::seq
