// SPRINTER's last-token check (acceptance/last_token.hpp) is the chain walk's test of one position:
// for a chain of one draft, check_last_token keeps x exactly when verify_chain(exec::seq, strict, ...)
// accepts it, emits the same token and reports the same status, seed for seed, on ordinary rows and
// on the edge cases the walk defines (q(x) = 0 rejects without a draw; p(x) > 1 is not checked).
#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "specdec/specdec.hpp"

namespace {

using specdec::token_id;
using specdec::verify_status;
using specdec::random::request_stream;

struct last_token_case {
  const char* name;
  std::vector<double> q, p;
  token_id x;
};

//! Over 1000 seeds: check_last_token at position 0 against verify_chain on the chain (x) with rows q
//! and (p, p); returns how many seeds kept x.
int compare_with_chain(const last_token_case& c) {
  const std::size_t V = c.p.size();
  std::vector<double> target_rows = c.p;
  target_rows.insert(target_rows.end(), c.p.begin(), c.p.end());  // row 1: the bonus row, never reached when x is judged
  const std::vector<token_id> drafts{c.x};
  int kept = 0;
  for (std::uint64_t seed = 0; seed < 1000; ++seed) {
    CAPTURE(c.name, seed);
    const request_stream stream{seed, 3, 7};
    const specdec::last_token_result got =
        specdec::check_last_token(c.x, std::span<const double>(c.q), std::span<const double>(c.p), 0, stream);
    const specdec::chain_result want =
        specdec::verify_chain(specdec::exec::seq, specdec::strict, drafts, c.q, target_rows, V, stream);
    CHECK(got.kept == (want.num_accepted == 1));
    CHECK(got.status == want.status);
    CHECK(got.token == (want.tokens.empty() ? specdec::no_token : want.tokens.front()));
    kept += got.kept ? 1 : 0;
  }
  return kept;
}

}  // namespace

TEST_CASE("check_last_token: q(x) = 0 rejects x as verify_chain does, in every seed", "[acceptance][last_token]") {
  // The residual max(0, p - q) = (0.5, 0) still emits token 0, as a correction, not a kept draft.
  const last_token_case c{"q(x) = 0", {0.0, 1.0}, {0.5, 0.5}, 0};
  CHECK(compare_with_chain(c) == 0);
  const auto r =
      specdec::check_last_token(c.x, std::span<const double>(c.q), std::span<const double>(c.p), 0, request_stream{1, 0, 0});
  CHECK(r.status == verify_status::draft_prob_zero);
  CHECK(r.token == 0);
}

TEST_CASE("check_last_token: p(x) > 1 is judged as verify_chain judges it, in every seed", "[acceptance][last_token]") {
  const last_token_case c{"p(x) > 1", {0.5, 0.5}, {1.5, 0.25}, 0};
  CHECK(compare_with_chain(c) == 1000);  // min(1, p/q) = 1: always kept, never invalid_row
}

TEST_CASE("check_last_token: ordinary rows, edge rows and q without mass match verify_chain", "[acceptance][last_token]") {
  const std::vector<last_token_case> cases{
      {"q > p at x", {0.7, 0.2, 0.1}, {0.3, 0.3, 0.4}, 0},
      {"q < p at x", {0.1, 0.6, 0.3}, {0.5, 0.2, 0.3}, 0},
      {"p(x) = 0", {0.5, 0.5, 0.0}, {0.0, 0.5, 0.5}, 1},
      {"p = q: no residual mass", {0.25, 0.75}, {0.25, 0.75}, 1},
      {"q(x) = 0 and q without mass", {0.0, 0.0}, {0.5, 0.5}, 0},
      {"p(x) NaN", {0.5, 0.5}, {std::numeric_limits<double>::quiet_NaN(), 0.5}, 0},
      {"q(x) negative", {-0.5, 0.5}, {0.5, 0.5}, 0},
  };
  for (const auto& c : cases) compare_with_chain(c);
}

TEST_CASE("check_last_token's precondition names the function once", "[acceptance][last_token][contracts]") {
  // The message names its function itself, so SPECDEC_EXPECTS does not prefix it again (contracts.hpp);
  // a message that does not is prefixed with the function's name.
  const std::vector<double> row{0.5, 0.5}, shorter{1.0};
  const auto message = [](auto&& call) -> std::string {
    try {
      call();
    } catch (const specdec::error& e) {
      return e.what();
    }
    return "";
  };
  const std::string last = message([&] {
    (void)specdec::check_last_token(0, std::span<const double>(row), std::span<const double>(shorter), 0, request_stream{});
  });
  CHECK(last.rfind("specdec::check_last_token: p and q must be rows of one length V >= 1 [", 0) == 0);
  std::vector<double> out(1);
  const std::string law = message([&] { specdec::sprinter_token_distribution(row, shorter, row, out); });
  CHECK(law.rfind("sprinter_token_distribution: p, q, accept_prob and out must have one non-zero length [", 0) == 0);
}
