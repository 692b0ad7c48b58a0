// Fuzz harness: SPRINTER's learned verifier file reader, `learn::linear_verifier::load(std::istream&)`
// (learn/linear_verifier.hpp), on arbitrary text.
//
// Invariants: no crash or sanitizer report; a malformed file throws specdec::error and nothing else
// throws; memory use follows the file's size, not the feature count it declares; a model that loads
// has D >= 1 finite parameters with every scale > 0, scores in [0, 1], and `save` then `load` gives it
// back exactly (17 significant digits round-trip doubles).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "specdec/errors.hpp"
#include "specdec/learn/linear_verifier.hpp"

#include "fuzz_input.hpp"

namespace {

using specdec::learn::linear_verifier;

bool same(const linear_verifier& a, const linear_verifier& b) {
  return a.feature_size() == b.feature_size() && a.weights() == b.weights() && a.mean() == b.mean() && a.scale() == b.scale() &&
         a.bias() == b.bias();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  specdec_fuzz::byte_reader in(data, size);
  std::istringstream file{std::string(in.rest())};
  linear_verifier v;
  try {
    v = linear_verifier::load(file);
  } catch (const specdec::error&) {
    return 0;
  }
  const std::size_t D = v.feature_size();
  FUZZ_CHECK(D >= 1 && v.weights().allFinite() && v.mean().allFinite() && v.scale().allFinite() && std::isfinite(v.bias()));
  FUZZ_CHECK((v.scale().array() > 0.0).all());
  FUZZ_CHECK(D <= size);  // each feature needs text of its own
  std::vector<float> at_mean, zeros(D, 0.0f);
  for (const double m : v.mean()) at_mean.push_back(specdec_fuzz::to_row_value<float>(m));
  for (const auto& s : {at_mean, zeros}) {
    const double score = v.score(s);
    FUZZ_CHECK(std::isnan(score) || (score >= 0.0 && score <= 1.0));
  }
  std::ostringstream saved;
  v.save(saved);
  std::istringstream again(saved.str());
  FUZZ_CHECK(same(linear_verifier::load(again), v));
  return 0;
}
