//! \file tests/support/sequence_enumeration.hpp
//! \brief Test support: the Markov pairs and exact sequence laws of specdec/conformance/sequence_law.hpp
//! under the names the tests use.
#pragma once

#include "specdec/conformance/sequence_law.hpp"

namespace specdec_test {

using specdec::conformance::block_emission_distribution;
using specdec::conformance::make_markov_pair;
using specdec::conformance::markov_pair;
using specdec::conformance::max_abs_difference;
using specdec::conformance::num_sequences;
using specdec::conformance::random_stochastic_table;
using specdec::conformance::sequence_cell;
using specdec::conformance::speculative_sequence_distribution;
using specdec::conformance::target_sequence_distribution;

}  // namespace specdec_test
