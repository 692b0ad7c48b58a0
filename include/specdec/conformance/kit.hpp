//! \file conformance/kit.hpp
//! \brief The conformance kit's entry points: run every check on a chain or tree verifier and get a
//! report (conformance/report.hpp).
//!
//! \code
//!   #include <specdec/conformance/kit.hpp>
//!   auto report = specdec::conformance::check_chain_verifier(
//!       "my sampler", my_verifier, specdec::conformance::guarantee::lossless());
//!   std::cout << specdec::conformance::to_text(report);   // or to_json(report)
//! \endcode
//! Checks (docs/conformance.md says what each proves and how much it detects):
//!   `exact_law/<config>`    the law of the first H emitted tokens (chi-squared, or greedy token for token)
//!   determinism, batch_invariance, independence/{request_id,seed,step}   seeded verifiers only
//!   `bad_input/<case>`      the catalogue of conformance/bad_input.hpp
//!   impossible_tokens       the rare-event check of conformance/impossible_tokens.hpp (chains)
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <utility>
#include <string>
#include <vector>

#include "specdec/conformance/bad_input.hpp"
#include "specdec/conformance/drafting.hpp"
#include "specdec/conformance/impossible_tokens.hpp"
#include "specdec/conformance/interface.hpp"
#include "specdec/conformance/law.hpp"
#include "specdec/conformance/options.hpp"
#include "specdec/conformance/report.hpp"
#include "specdec/conformance/seeding.hpp"

namespace specdec::conformance {

namespace detail {

inline void add(report& r, check_result c, const kit_options& o) {
  if (o.progress) *o.progress << "  " << (c.passed ? "pass " : "FAIL ") << c.name << "  " << c.summary << "\n";
  r.checks.push_back(std::move(c));
}

//! The model of a configuration of probability rows.
inline model_tables probability_tables(const law_config& c) { return model_tables(c.model); }

//! The checks every form shares: exact laws on `configs`, determinism and batch invariance on 64
//! requests beside 64 others of the first config's model, and the bad-input catalogue.
//! `make_tables(config)` builds a config's model; `append_request(batch, tables, spec, config)`
//! drafts one chain or tree.
template <class Inputs, class Verifier, class MakeTables, class EmptyBatch, class AppendRequest>
void run_common(report& r, const Verifier& verify, const guarantee& g, const kit_options& o,
                const std::vector<law_config>& configs, const std::vector<bad_input_case<Inputs>>& cases,
                const Inputs& neighbours, MakeTables make_tables, EmptyBatch empty_batch, AppendRequest append_request) {
  for (const auto& c : configs) {
    const std::string name = "exact_law/" + c.model.name;
    if (o.wants(name)) add(r, check_law<Inputs>(name, verify, g, c, make_tables(c), o, empty_batch, append_request), o);
  }
  if (o.seeded && (o.wants("determinism") || o.wants("batch_invariance"))) {
    const law_config& c = configs.front();
    const model_tables m = make_tables(c);
    Inputs batch = empty_batch(m.vocab());
    for (std::uint64_t k = 0; k < 128; ++k)
      append_request(batch, m, request_spec{k % m.vocab(), 1 + k % 4, o.seed + 1 + k % 3, 100000 + k, k % 7}, c);
    for (auto& check : check_determinism<Inputs>("", verify, batch, 64))
      if (o.wants(check.name)) add(r, std::move(check), o);
  }
  for (auto& check : check_bad_inputs<Inputs>(verify, cases, neighbours, o)) r.checks.push_back(std::move(check));
}

}  // namespace detail

//! Runs the kit on a chain verifier: exact laws on three Markov pairs, determinism and batch
//! invariance, independence of requests that differ only in seed, request id or step, the bad-input
//! catalogue, and the impossible-token check.
inline report check_chain_verifier(const std::string& name, const chain_verifier& verify, const guarantee& g,
                                   const kit_options& o = {}) {
  if (g.kind == claim::stated_law && !g.law) throw std::invalid_argument("conformance: a stated-law guarantee needs its law");
  report r{name, g.name, {}};
  const auto empty_batch = [](std::size_t V) { return empty_chain_batch(V); };
  const auto append = [&o](chain_inputs& in, const model_tables& m, const request_spec& s, const law_config&) {
    append_chain_request(in, m, s, o.seed);
  };
  detail::run_common<chain_inputs>(r, verify, g, o, chain_law_configs(o.seed), chain_bad_inputs(o), detail::chain_neighbours(o),
                                   detail::probability_tables, empty_batch, append);
  if (o.seeded && g.kind != claim::greedy) {
    const std::pair<identity_part, const char*> parts[] = {{identity_part::request_id, "independence/request_id"},
                                                           {identity_part::seed, "independence/seed"},
                                                           {identity_part::step, "independence/step"}};
    for (const auto& [part, check_name] : parts)
      if (o.wants(check_name)) detail::add(r, check_independence(verify, part, o), o);
  }
  bool claim_forbids_zero = true;  // does the claim give token 0 of p = (0, 1), q = (1, 0) no mass?
  if (g.kind == claim::stated_law) {
    const double p[] = {0.0, 1.0}, q[] = {1.0, 0.0};
    double accepted[2], corrected[2];
    g.law(p, q, accepted, corrected);
    claim_forbids_zero = accepted[0] + corrected[0] == 0.0;
  }
  if (o.impossible_token_trials > 0 && claim_forbids_zero && o.wants("impossible_tokens"))
    detail::add(r, check_impossible_tokens(verify, o), o);
  return r;
}

//! Runs the kit on a tree verifier (siblings drawn as `o.tree_sampling` says): exact laws on three
//! Markov pairs with trees of several shapes, determinism and batch invariance, and the tree
//! bad-input catalogue. Claims: lossless or greedy.
inline report check_tree_verifier(const std::string& name, const tree_verifier& verify, const guarantee& g,
                                  const kit_options& o = {}) {
  if (g.kind == claim::stated_law)
    throw std::invalid_argument("conformance: trees are checked against lossless or greedy claims");
  report r{name, g.name, {}};
  const auto empty_batch = [&o](std::size_t V) { return empty_tree_batch(V, o.tree_sampling); };
  const auto append = [&o](tree_inputs& in, const model_tables& m, const request_spec& s, const law_config& c) {
    append_tree_request(in, m, s, c.branching, o.seed);
  };
  detail::run_common<tree_inputs>(r, verify, g, o, tree_law_configs(o.seed), tree_bad_inputs(o), detail::tree_neighbours(o),
                                  detail::probability_tables, empty_batch, append);
  return r;
}

}  // namespace specdec::conformance
