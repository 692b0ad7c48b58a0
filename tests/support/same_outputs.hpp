//! \file tests/support/same_outputs.hpp
//! \brief Test support: two verifications' outputs (tokens, accepted counts, statuses) must be equal.
#pragma once

#include <catch2/catch.hpp>

#include "support/batch_builder.hpp"

namespace specdec_test {

inline void require_same_outputs(const owned_outputs& a, const owned_outputs& b) {
  REQUIRE(a.tokens == b.tokens);
  REQUIRE(a.num_accepted == b.num_accepted);
  REQUIRE(a.status == b.status);
}

}  // namespace specdec_test
