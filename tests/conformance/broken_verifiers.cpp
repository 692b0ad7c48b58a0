// SPECDEC_TEST_LABELS: statistical
// The conformance kit catches real bugs. A plain reference verifier of Leviathan et al.'s chain
// algorithm (strict rejection sampling), written here over the kit's engine-neutral inputs the way an
// engine would write it, without specdec::verify, passes every check of the kit: the positive control
// that shows the kit is fair to a verifier it has never seen. Then each switch below plants one bug
// that users reported against a peer engine, and the kit must fail the verifier and name the check:
//
//   (a) q in the ratio is not the distribution the draft was sampled from (transformers #47932)
//                                                                        -> exact_law/...
//   (b) residual max(0, p - q) subtracted by index after truncating and sorting q (llama.cpp)
//                                                                        -> exact_law/...
//   (c) an all-NaN target row laundered to token 0 without a report (vLLM #53029)
//                                                                        -> bad_input/target_row_all_nan
//   (d) one seed shared by every request of a batch (vLLM #6038, TensorRT-LLM)
//                                                                        -> independence/..., batch_invariance
//   (e) a float32 uniform that can be exactly 0, with the test u <= p/q   -> impossible_tokens
//   (f) seeds ignored: one global std::mt19937 advanced across calls      -> determinism
//   (g) per-path sampling on trees: every root-to-leaf path verified as an independent chain, the
//       longest result kept                                               -> exact_law/... (tree kit)
//
// The statistical failures must be wide, not at the edge of significance: their p-values are
// required to be below 1e-12 (the kit's alpha is 1e-6), also at the sanitizer build's sample scale.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "specdec/conformance/kit.hpp"
#include "specdec/conformance/specdec_verifiers.hpp"
#include "specdec/random/stream.hpp"
#include "support/sample_scale.hpp"

namespace {

namespace sc = specdec::conformance;
using specdec::token_id;
using specdec::random::purpose;
using specdec::random::request_stream;

// ---- the reference verifier ------------------------------------------------------------------------

//! The bugs a reference verifier can be built with (all off: the correct algorithm).
struct mutations {
  bool q_not_sampled = false;       //!< (a) ratio and residual use normalise(q^2), not the q the draft came from
  bool residual_by_index = false;   //!< (b) the residual subtracts q sorted in descending order, index by index
  bool nan_row_to_token0 = false;   //!< (c) an invalid target row emits token 0 instead of a report
  bool one_seed_for_all = false;    //!< (d) every request draws the coins of request 0's seed and id
  bool float32_uniform_le = false;  //!< (e) u = 24-bit float32 (may be exactly 0), accept iff u <= p/q
  bool global_generator = false;    //!< (f) coins from one std::mt19937 advanced across calls
};

//! Finite, non-negative entries with positive mass.
bool usable(std::span<const float> row) {
  double sum = 0.0;
  for (const float x : row) {
    if (!std::isfinite(x) || x < 0.0f) return false;
    sum += static_cast<double>(x);
  }
  return sum > 0.0;
}

std::vector<double> to_double(std::span<const float> row) { return std::vector<double>(row.begin(), row.end()); }

//! Inverse CDF of non-negative weights with positive sum (the kit's own drawing; zero weights are
//! never drawn).
std::size_t draw(const std::vector<double>& weights, double u) { return sc::detail::draw(weights, u); }

//! The coins of one chain: per-position Philox streams of (seed, request id, step), or the global
//! generator of mutation (f). `base` separates the chains of one request (the paths of a tree).
class chain_coins {
 public:
  chain_coins(const mutations& m, request_stream stream, std::uint32_t base, std::mt19937* global)
      : m_(m), stream_(stream), base_(base), global_(global) {}

  //! The uniform of the accept test at `position`.
  double accept(std::size_t position) {
    if (m_.global_generator) return from_global();
    auto s = stream_.open(base_ + static_cast<std::uint32_t>(position), purpose::accept);
    if (m_.float32_uniform_le) return static_cast<double>(static_cast<float>(s.next_u32() >> 8) * 0x1p-24f);
    return s.uniform();
  }
  //! The uniform of the correction or bonus draw at `position`.
  double resample(std::size_t position) {
    if (m_.global_generator) return from_global();
    return stream_.open(base_ + static_cast<std::uint32_t>(position), purpose::resample).uniform();
  }

 private:
  double from_global() {
    // 53 bits from two words (MT19937's genrand_res53).
    const std::uint32_t hi = static_cast<std::uint32_t>((*global_)()) >> 5, lo = static_cast<std::uint32_t>((*global_)()) >> 6;
    return (static_cast<double>(hi) * 67108864.0 + static_cast<double>(lo)) * 0x1p-53;
  }
  mutations m_;
  request_stream stream_;
  std::uint32_t base_;
  std::mt19937* global_;
};

//! One drafted chain: drafts x_i from rows q_i, target rows p_0 .. p_n.
struct chain_rows {
  std::vector<token_id> drafts;
  std::vector<std::span<const float>> q, p;
};

//! Leviathan et al.'s algorithm on one chain (rows already validated, except as (c) skips).
std::vector<token_id> strict_chain(const chain_rows& c, chain_coins& coins, const mutations& m) {
  std::vector<token_id> out;
  for (std::size_t i = 0;; ++i) {
    if (m.nan_row_to_token0 && !usable(c.p[i])) {  // (c): argmax / an inverse CDF through NaNs gives 0
      out.push_back(0);
      return out;
    }
    const std::vector<double> p = to_double(c.p[i]);
    if (i == c.drafts.size()) {  // every draft accepted: the bonus token from p
      out.push_back(static_cast<token_id>(draw(p, coins.resample(i))));
      return out;
    }
    std::vector<double> q = to_double(c.q[i]);
    if (m.q_not_sampled) {  // (a): e.g. a temperature or top-k applied to the row but not to the sampler
      double s = 0.0;
      for (double& x : q) s += x *= x;
      for (double& x : q) x /= s;
    }
    const auto x = static_cast<std::size_t>(c.drafts[i]);
    const double ratio = p[x] / q[x], u = coins.accept(i);
    if (m.float32_uniform_le ? u <= ratio : u < ratio) {
      out.push_back(c.drafts[i]);
      continue;
    }
    if (m.residual_by_index) std::sort(q.begin(), q.end(), std::greater<>());  // (b): q's order lost
    std::vector<double> residual(p.size());
    double mass = 0.0;
    for (std::size_t v = 0; v < p.size(); ++v) mass += residual[v] = std::max(0.0, p[v] - q[v]);
    out.push_back(static_cast<token_id>(draw(mass > 0.0 ? residual : p, coins.resample(i))));
    return out;
  }
}

request_stream identity(const sc::request_identities& in, std::size_t b, const mutations& m) {
  const std::size_t who = m.one_seed_for_all ? 0 : b;  // (d)
  return request_stream{in.seeds[who], static_cast<std::uint32_t>(in.request_ids[who]), static_cast<std::uint32_t>(in.steps[b])};
}

bool in_vocabulary(token_id t, std::size_t V) { return t >= 0 && static_cast<std::size_t>(t) < V; }

//! The reference chain verifier with `m` planted.
sc::chain_verifier reference_chain_verifier(const mutations& m = {}) {
  auto global = std::make_shared<std::mt19937>(12345u);
  return [m, global](const sc::chain_inputs& in) {
    std::vector<sc::verdict> out(in.batch_size());
    for (std::size_t b = 0; b < in.batch_size(); ++b) {
      const auto n = static_cast<std::size_t>(in.num_drafts[b]);
      chain_rows c;
      bool ok = true;
      for (std::size_t i = 0; i < n; ++i) {
        c.drafts.push_back(in.draft_tokens[in.draft_index(b, i)]);
        c.q.push_back(in.draft_row(b, i));
        ok = ok && in_vocabulary(c.drafts.back(), in.vocab_size) && usable(c.q.back());
      }
      for (std::size_t i = 0; i <= n; ++i) {
        c.p.push_back(in.target_row(b, i));
        ok = ok && (m.nan_row_to_token0 || usable(c.p.back()));
      }
      if (!ok) {
        out[b].reported = true;
        continue;
      }
      chain_coins coins(m, identity(in, b, m), 0, global.get());
      out[b].tokens = strict_chain(c, coins, m);
    }
    return out;
  };
}

//! (g) A tree verifier that verifies each root-to-leaf path as an independent chain (strict rule,
//! fresh coins per path) and keeps the longest result: each path alone is lossless, the maximum is not.
sc::tree_verifier per_path_tree_verifier() {
  return [](const sc::tree_inputs& in) {
    const mutations none{};
    std::vector<sc::verdict> out(in.batch_size());
    for (std::size_t b = 0; b < in.batch_size(); ++b) {
      const auto n = static_cast<std::size_t>(in.num_nodes[b]);
      std::vector<bool> has_child(n, false);
      bool ok = true;
      for (std::size_t k = 0; k < n; ++k) {
        ok = ok && usable(in.draft_row(b, k)) && usable(in.target_row(b, k));
        if (k == 0) continue;
        ok = ok && in_vocabulary(in.tokens[in.node_index(b, k)], in.vocab_size);
        has_child[static_cast<std::size_t>(in.parents[in.node_index(b, k)])] = true;
      }
      if (!ok) {
        out[b].reported = true;
        continue;
      }
      std::uint32_t path_index = 0;
      for (std::size_t leaf = 0; leaf < n; ++leaf) {
        if (has_child[leaf]) continue;
        std::vector<std::size_t> path;  // root .. leaf
        for (auto k = static_cast<std::int32_t>(leaf); k >= 0; k = in.parents[in.node_index(b, static_cast<std::size_t>(k))])
          path.insert(path.begin(), static_cast<std::size_t>(k));
        chain_rows c;
        for (std::size_t i = 0; i < path.size(); ++i) {
          c.p.push_back(in.target_row(b, path[i]));
          if (i + 1 == path.size()) break;
          c.q.push_back(in.draft_row(b, path[i]));
          c.drafts.push_back(in.tokens[in.node_index(b, path[i + 1])]);
        }
        chain_coins coins(none, identity(in, b, none), 256 * path_index++, nullptr);
        auto tokens = strict_chain(c, coins, none);
        if (tokens.size() > out[b].tokens.size()) out[b].tokens = std::move(tokens);
      }
    }
    return out;
  };
}

// ---- helpers -------------------------------------------------------------------------------------------

sc::kit_options options(std::vector<std::string> only = {}) {
  sc::kit_options o;
  o.law_requests = specdec_test::scaled_sample_count(100000);
  o.impossible_token_trials = 0;
  o.only = std::move(only);
  return o;
}

//! The names of the failed checks, and the p-value of each statistical one, for the log.
std::string failures(const sc::report& r) {
  std::string s;
  for (const auto& c : r.checks) {
    if (c.passed) continue;
    s += "  failed " + c.name;
    if (!std::isnan(c.figure("p_value"))) {
      char buf[96];
      std::snprintf(buf, sizeof buf, " (chi2 = %.6g, dof = %.0f, p = %.3g)", c.figure("chi2"), c.figure("dof"),
                    c.figure("p_value"));
      s += buf;
    }
    s += "\n";
  }
  return s;
}

//! The check `name` exists and failed.
void require_failed(const sc::report& r, const std::string& name) {
  INFO("check " << name);
  const sc::check_result* c = r.find(name);
  REQUIRE(c != nullptr);
  CHECK_FALSE(c->passed);
}

//! The statistical check `name` failed by a wide margin: p-value below 1e-12 (alpha = 1e-6).
void require_failed_widely(const sc::report& r, const std::string& name) {
  require_failed(r, name);
  const double p = r.find(name)->figure("p_value");
  INFO("check " << name << ": p = " << p << ", chi2 = " << r.find(name)->figure("chi2"));
  CHECK(p < 1e-12);
}

}  // namespace

TEST_CASE("the reference chain verifier passes the whole kit (positive control)", "[conformance][broken]") {
  auto o = options();
  o.impossible_token_trials = std::uint64_t{1} << 22;
  const auto report = sc::check_chain_verifier("reference strict", reference_chain_verifier(), sc::guarantee::lossless(), o);
  INFO(sc::to_text(report));
  REQUIRE(report.passed());
  for (const char* name : {"exact_law/v4_gamma1to4", "exact_law/v3_far_draft_gamma2", "exact_law/v8_close_draft_gamma5",
                           "determinism", "batch_invariance", "independence/request_id", "independence/seed", "independence/step",
                           "bad_input/target_row_all_nan", "impossible_tokens"}) {
    INFO(name);
    CHECK(report.find(name) != nullptr);
  }
}

TEST_CASE("(a) q not the distribution actually sampled fails exact_law", "[conformance][broken]") {
  mutations m;
  m.q_not_sampled = true;
  const auto report =
      sc::check_chain_verifier("q not sampled", reference_chain_verifier(m), sc::guarantee::lossless(), options({"exact_law/"}));
  INFO(sc::to_text(report));
  INFO(failures(report));
  REQUIRE_FALSE(report.passed());
  require_failed_widely(report, "exact_law/v4_gamma1to4");
  require_failed_widely(report, "exact_law/v3_far_draft_gamma2");
  require_failed_widely(report, "exact_law/v8_close_draft_gamma5");
}

TEST_CASE("(b) residual subtracted by index after truncation fails exact_law", "[conformance][broken]") {
  mutations m;
  m.residual_by_index = true;
  const auto report = sc::check_chain_verifier("residual by index", reference_chain_verifier(m), sc::guarantee::lossless(),
                                               options({"exact_law/"}));
  INFO(sc::to_text(report));
  INFO(failures(report));
  REQUIRE_FALSE(report.passed());
  require_failed_widely(report, "exact_law/v4_gamma1to4");
  require_failed_widely(report, "exact_law/v3_far_draft_gamma2");
  require_failed_widely(report, "exact_law/v8_close_draft_gamma5");
}

TEST_CASE("(c) a NaN row laundered to token 0 fails bad_input/target_row_all_nan", "[conformance][broken]") {
  mutations m;
  m.nan_row_to_token0 = true;
  const auto report =
      sc::check_chain_verifier("NaN to token 0", reference_chain_verifier(m), sc::guarantee::lossless(), options({"bad_input/"}));
  INFO(sc::to_text(report));
  INFO(failures(report));
  REQUIRE_FALSE(report.passed());
  require_failed(report, "bad_input/target_row_all_nan");
  // The draft-side cases are unaffected.
  CHECK(report.find("bad_input/draft_row_all_nan")->passed);
}

TEST_CASE("(d) one seed shared by all requests fails independence and batch_invariance", "[conformance][broken]") {
  mutations m;
  m.one_seed_for_all = true;
  const auto report = sc::check_chain_verifier("one seed for all", reference_chain_verifier(m), sc::guarantee::lossless(),
                                               options({"independence/", "batch_invariance", "determinism"}));
  INFO(sc::to_text(report));
  INFO(failures(report));
  REQUIRE_FALSE(report.passed());
  require_failed_widely(report, "independence/request_id");
  require_failed_widely(report, "independence/seed");
  require_failed(report, "batch_invariance");
  CHECK(report.find("determinism")->passed);  // the same batch again gives the same tokens
}

TEST_CASE("(e) a float32 uniform that can be 0 with u <= p/q fails impossible_tokens", "[conformance][broken]") {
  mutations m;
  m.float32_uniform_le = true;
  auto o = options({"impossible_tokens"});
  // The default 2^27 trials; the check stops at the first violation. At the kit's default seed, 9 of
  // the 2^27 coins are exactly 0 (8 expected), the first at trial 2862873: caught in the 44th call.
  o.impossible_token_trials = sc::kit_options{}.impossible_token_trials;
  const auto report = sc::check_chain_verifier("float32 u <= p/q", reference_chain_verifier(m), sc::guarantee::lossless(), o);
  INFO(sc::to_text(report));
  REQUIRE_FALSE(report.passed());
  require_failed(report, "impossible_tokens");
  const double trials = report.find("impossible_tokens")->figure("trials");
  INFO("caught within " << trials << " trials");
  CHECK(trials < static_cast<double>(o.impossible_token_trials));
}

TEST_CASE("(f) seeds ignored for a global generator fails determinism", "[conformance][broken]") {
  mutations m;
  m.global_generator = true;
  const auto report = sc::check_chain_verifier("global mt19937", reference_chain_verifier(m), sc::guarantee::lossless(),
                                               options({"determinism", "batch_invariance", "independence/"}));
  INFO(sc::to_text(report));
  INFO(failures(report));
  REQUIRE_FALSE(report.passed());
  require_failed(report, "determinism");
  require_failed(report, "batch_invariance");
}

TEST_CASE("(g) per-path sampling on trees fails the tree kit's exact_law", "[conformance][broken][tree]") {
  const auto o = options({"exact_law/"});
  SECTION("specdec's tree verifier passes the same checks (control)") {
    const auto report = sc::check_tree_verifier("tree strict", sc::specdec_tree_verifier(specdec::exec::seq, specdec::strict),
                                                sc::guarantee::lossless(), o);
    INFO(sc::to_text(report));
    REQUIRE(report.passed());
  }
  SECTION("per-path sampling fails") {
    const auto report = sc::check_tree_verifier("per-path tree", per_path_tree_verifier(), sc::guarantee::lossless(), o);
    INFO(sc::to_text(report));
    INFO(failures(report));
    REQUIRE_FALSE(report.passed());
    require_failed_widely(report, "exact_law/v4_tree_2x2");
    require_failed_widely(report, "exact_law/v3_tree_wide_root");
    require_failed_widely(report, "exact_law/v6_tree_deep");
  }
  SECTION("per-path sampling passes the rest of the tree kit (the law is what it breaks)") {
    auto rest = options();
    rest.only = {"determinism", "batch_invariance", "bad_input/"};
    const auto report = sc::check_tree_verifier("per-path tree", per_path_tree_verifier(), sc::guarantee::lossless(), rest);
    INFO(sc::to_text(report));
    REQUIRE(report.passed());
    CHECK(report.find("determinism") != nullptr);
    CHECK(report.find("bad_input/tree_root_row_all_nan") != nullptr);
  }
}
