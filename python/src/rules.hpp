// What the extension's translation units share about rules and backends: the rule a Python rule
// object names (`rule_spec`), and calls with the C++ rule or execution policy it names.
#pragma once

#include <nanobind/nanobind.h>

#include <string>

#include "specdec/acceptance/block.hpp"
#include "specdec/acceptance/greedy.hpp"
#include "specdec/acceptance/lenient.hpp"
#include "specdec/acceptance/multi_candidate.hpp"
#include "specdec/acceptance/sample_and_match.hpp"
#include "specdec/acceptance/strict.hpp"
#include "specdec/acceptance/typical.hpp"
#include "specdec/exec/policy.hpp"

namespace specdec_python {

// The rule a Python rule object names: kind and up to three numbers and one small integer.
struct rule_spec {
  int kind;  // 0 strict, 1 lenient, 2 greedy, 3 sample-and-match, 4 block, 5 typical,
             // 6 recursive rejection, 7 k-seq, 8 target-only (6-8: trees only)
  double a, b, c;
  int d;
};

inline specdec::typical_rule typical_of(const rule_spec& r) {
  specdec::typical_rule t;
  t.epsilon = r.a;
  t.delta = r.b;
  t.log_offset = r.c;
  t.correction = r.d == 0 ? specdec::typical_correction::argmax : specdec::typical_correction::typical_sample;
  t.validate();
  return t;
}

// Calls f with the chain rule r names.
template <class F>
void with_rule(const rule_spec& r, F&& f) {
  switch (r.kind) {
    case 0: f(specdec::strict); return;
    case 1: f(specdec::lenient_rule{r.a}); return;
    case 2: f(specdec::greedy); return;
    case 3: f(specdec::sample_and_match); return;
    case 4: f(specdec::block); return;
    case 5: f(typical_of(r)); return;
    default: throw nanobind::type_error("rule: not a chain rule (RecursiveRejection, KSeq and TargetOnly verify trees only)");
  }
}

// Calls f with the tree rule r names.
template <class F>
void with_tree_rule(const rule_spec& r, F&& f) {
  switch (r.kind) {
    case 0: f(specdec::strict); return;
    case 2: f(specdec::greedy); return;
    case 3: f(specdec::sample_and_match); return;
    case 5: f(typical_of(r)); return;
    case 6: f(specdec::recursive_rejection); return;
    case 7: f(specdec::k_seq); return;
    case 8: f(specdec::target_only); return;
    default: throw nanobind::type_error("rule: Lenient and Block verify chains only");
  }
}

template <class F>
void with_policy(const std::string& backend, F&& f) {
  if (backend == "seq") return f(specdec::exec::seq);
#if SPECDEC_ENABLE_SIMD
  if (backend == "simd") return f(specdec::exec::simd);
#endif
  throw nanobind::value_error(("backend: '" + backend + "' is not built (available: " +
#if SPECDEC_ENABLE_SIMD
                               std::string("'seq', 'simd')")
#else
                               std::string("'seq')")
#endif
                                   )
                                  .c_str());
}

}  // namespace specdec_python
