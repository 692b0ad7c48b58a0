// Determinism (docs/design.md, 'Randomness'): same seed, same tokens; different seeds, different tokens; and a
// request's tokens do not depend on the other requests of its batch, on its index in the batch, or
// on the layout.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "specdec/specdec.hpp"
#include "support/batch_builder.hpp"

namespace {

using specdec::token_id;
using specdec::random::philox_stream;
using specdec::random::purpose;
using specdec::random::request_stream;
using specdec::random::stream_address;
using specdec_test::build_batch;
using specdec_test::owned_batch;
using specdec_test::owned_outputs;
using specdec_test::request_data;

// A request with n drafts over V tokens: rows from Philox stream (data_seed, id), draft tokens sampled
// from q. Its randomness for verification is request_stream{seed, id, step}.
request_data<double> make_request(std::size_t V, std::size_t n, std::uint64_t data_seed, std::uint32_t id, std::uint64_t seed,
                                  std::uint32_t step = 0) {
  philox_stream s(stream_address{data_seed, id, 0, 0, purpose::user});
  request_data<double> r;
  r.stream = request_stream{seed, id, step};
  for (std::size_t i = 0; i < n; ++i) {
    auto q = specdec_test::random_probability_row<double>(s, V, 0.2);
    r.drafts.push_back(specdec::sample_categorical(std::span<const double>(q), s.uniform()).token);
    r.draft_rows.push_back(std::move(q));
    r.target_rows.push_back(specdec_test::random_probability_row<double>(s, V, 0.2));
  }
  r.target_rows.push_back(specdec_test::random_probability_row<double>(s, V, 0.2));
  return r;
}

struct request_output {
  std::vector<token_id> tokens;
  std::int32_t accepted;
  specdec::verify_status status;
  bool operator==(const request_output&) const = default;
};

template <class Rule>
std::vector<request_output> verify_all(const Rule& rule, const std::vector<request_data<double>>& reqs, std::size_t V,
                                       bool packed, std::size_t width = 0) {
  const auto b = build_batch(reqs, V, packed, width);
  owned_outputs o(b);
  specdec::verify(specdec::exec::seq, rule, b.view(), b.stream_span(), o.view());
  std::vector<request_output> out;
  for (std::size_t r = 0; r < reqs.size(); ++r) out.push_back({o.emitted(r), o.num_accepted[r], o.status[r]});
  return out;
}

using specdec_test::for_each_rule;

}  // namespace

TEST_CASE("same seed, same output (repeated)", "[acceptance][seeds]") {
  constexpr std::size_t V = 40;
  for (const std::size_t gamma : {1u, 3u, 6u}) {
    std::vector<request_data<double>> reqs;
    for (std::uint32_t id = 0; id < 32; ++id) reqs.push_back(make_request(V, gamma, 0xDA7A, id, 0x5EED));
    for_each_rule([&](const auto& rule, const char* name) {
      CAPTURE(name, gamma);
      const auto first = verify_all(rule, reqs, V, true);
      for (int rep = 0; rep < 20; ++rep) REQUIRE(verify_all(rule, reqs, V, true) == first);
    });
  }
}

TEST_CASE("different seeds give different outputs", "[acceptance][seeds]") {
  // p and q far apart so that most requests reject somewhere and draw a correction: over 200 requests
  // the outputs of two seeds cannot all agree (the chance that they do is astronomically small).
  constexpr std::size_t V = 100, B = 200;
  const auto make_batch = [&](std::uint64_t seed, std::uint32_t step) {
    std::vector<request_data<double>> reqs;
    for (std::uint32_t id = 0; id < B; ++id) reqs.push_back(make_request(V, 3, 0xDA7B, id, seed, step));
    return reqs;
  };
  const auto count_differences = [](const std::vector<request_output>& a, const std::vector<request_output>& b) {
    std::size_t d = 0;
    for (std::size_t i = 0; i < a.size(); ++i) d += a[i].tokens != b[i].tokens;
    return d;
  };
  const auto base = make_batch(1, 0), other_seed = make_batch(2, 0), other_step = make_batch(1, 1);
  for_each_rule([&](const auto& rule, const char* name) {
    CAPTURE(name);
    if (std::string(name) == "greedy") return;  // greedy draws nothing: seeds do not matter
    const auto a = verify_all(rule, base, V, true);
    const auto ds = count_differences(a, verify_all(rule, other_seed, V, true));
    const auto dt = count_differences(a, verify_all(rule, other_step, V, true));
    CAPTURE(ds, dt);
    CHECK(ds > B / 4);
    CHECK(dt > B / 4);
  });
  // Greedy ignores the seed entirely.
  CHECK(verify_all(specdec::greedy, base, V, true) == verify_all(specdec::greedy, other_seed, V, true));
  // Different request ids with identical data also decorrelate.
  auto renamed = base;
  for (auto& r : renamed) r.stream.request += 100000;
  const auto a = verify_all(specdec::strict, base, V, true), b = verify_all(specdec::strict, renamed, V, true);
  CHECK(count_differences(a, b) > B / 4);
}

TEST_CASE("batch-composition invariance: a request's output does not depend on its batch", "[acceptance][seeds]") {
  constexpr std::size_t V = 64;
  for (std::uint32_t target_id = 0; target_id < 12; ++target_id) {
    const std::size_t n = target_id % 6;
    const auto me = make_request(V, n, 0xC0DE, 5000 + target_id, 0xFEED);
    // Neighbours: other requests with other ids, other data, other seeds and other numbers of drafts.
    std::vector<request_data<double>> neighbours;
    for (std::uint32_t j = 0; j < 9; ++j)
      neighbours.push_back(make_request(V, (j * 5 + target_id) % 8, 0xBEEF + j, j, j % 2 == 0 ? 0xFEED : 0xABCD));
    for_each_rule([&](const auto& rule, const char* name) {
      CAPTURE(name, target_id, n);
      const auto alone = verify_all(rule, std::vector{me}, V, true).front();
      CHECK(specdec::is_valid(alone.status));
      for (std::size_t position : {0u, 3u, 9u}) {
        auto batch = neighbours;
        batch.insert(batch.begin() + static_cast<std::ptrdiff_t>(position), me);
        CAPTURE(position);
        CHECK(verify_all(rule, batch, V, true)[position] == alone);
        CHECK(verify_all(rule, batch, V, false, 8)[position] == alone);
      }
      // Reversed order of the neighbours, and the same request twice in one batch.
      auto reversed = neighbours;
      std::reverse(reversed.begin(), reversed.end());
      reversed.push_back(me);
      reversed.insert(reversed.begin(), me);
      const auto out = verify_all(rule, reversed, V, false, 7);
      CHECK(out.front() == alone);
      CHECK(out.back() == alone);
    });
  }
}
