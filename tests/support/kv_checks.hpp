// The step decoder's model-state invariant, checked after a step for a running request: the target
// holds every committed token but the pending one, the draft model a prefix of them (nothing for a
// stage-drafted request), and both caches equal a fresh evaluation (kv_cached_model::consistent).
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <vector>

#include "specdec/model/sequence.hpp"

namespace specdec_test {

template <class Target, class Draft>
void require_kv_consistent(const Target& t, const Draft& q, specdec::sequence_id s,
                           const std::vector<specdec::token_id>& committed) {
  const auto tt = t.tokens(s), qt = q.tokens(s);
  REQUIRE(tt.size() + 1 == committed.size());
  REQUIRE(std::equal(tt.begin(), tt.end(), committed.begin()));
  REQUIRE(qt.size() < committed.size());
  REQUIRE(std::equal(qt.begin(), qt.end(), committed.begin()));
  REQUIRE(t.consistent(s));
  REQUIRE(q.consistent(s));
}

}  // namespace specdec_test
