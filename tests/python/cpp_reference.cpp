// The C++ side of tests/python/test_cpp_parity.py: runs the C++ library (exec::seq) on cases the
// test wrote and writes what it returns, so that the test compares the Python package with the C++
// API bit for bit.
//
//   cpp_reference DIR...   each DIR holds meta.txt and raw little-endian arrays (*.bin)
//
// meta.txt is one line:
//   verify KIND A B C D PACKED V DOUBLE MAX_DRAFTS   (KIND 0..5: strict, lenient, greedy,
//                                                     sample-and-match, block, typical)
//   verify_tree KIND A B C D V DOUBLE                 (KIND as verify, and 6..8: recursive rejection,
//                                                     k-seq, target-only)
//   verify_tree_logits KIND A B C D V DOUBLE          (the same from target logits: p holds logits, warped
//                                                     with temperature, top_k, top_p, min_p per tree)
//   sample_logits V DOUBLE POSITION PURPOSE
//   simulate_chain SEED FIRST DRAWS                   (simulate::sd::chain on alpha (f64), gamma (i32),
//                                                     stream (u32): out_hist (u64 [n][max gamma + 1]),
//                                                     out_mean (f64, E[T]), out_drafts (u64))
//   simulate_sprinter SEED FIRST DRAWS                (simulate::sprinter::verifier_chain on eta_tp,
//                                                     eta_fp, r, stream: out_mean (E[N]), out_drafts)
//   simulate_tokens LENIENCE GAMMA STREAM SEED FIRST DRAWS   (simulate::sd::token_process on rows p, q:
//                                                     out_first (u64 [V]), out_hist, out_first_accepted)
//   simulate_mtad ARGMAX SEED FIRST DRAWS             (simulate::mtad::run on rows p, q [n][V], tau (f64),
//                                                     gamma (i32), stream: out_hist (u64 [n][max gamma + 2]),
//                                                     out_mean, out_emitted, out_min, out_sum_log_p, out_sum_log_q)
//   simulate_tree SEED FIRST DRAWS                    (simulate::tree::walk of the tree parents (i32 [N]) on
//                                                     alphas [n][N], stream: out_hist (u64 [n][depth + 1]),
//                                                     out_last (u64 [n][N]), out_coins, out_mean)
//   simulate_block SEED FIRST DRAWS                   (simulate::block::verification on rows p, q, gamma,
//                                                     stream: out_block, out_token_wise (u64 [n][max gamma + 1]),
//                                                     out_gain (f64, E[tau - A]))
//   simulate_sprinter_tokens SEED FIRST DRAWS         (simulate::sprinter::token_process on rows p, q, eta_tp,
//                                                     eta_fp, stream: out_token (u64 [n][V]), out_kept,
//                                                     out_verifier_accepted, out_fallbacks)
//   theory K V                                        (closed forms over n parameter sets: reals
//                                                     alpha, c, eta_tp, eta_fp, tau, u; ints gamma, r,
//                                                     small_gamma; rows alphas [n][K], p, q [n][V];
//                                                     one output file per function, as named below)
// Inputs: num_drafts | num_nodes and parents, tokens, q (may be empty), p | logits, temperature,
// top_k, top_p, min_p; always seeds (u64), ids (u32), steps (u32). Outputs: out_tokens (i32),
// out_accepted (i32), out_status (u8), and out_path (i32) for trees.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <specdec/specdec.hpp>

namespace {

template <class T>
std::vector<T> load(const std::string& dir, const std::string& name) {
  std::ifstream in(dir + "/" + name + ".bin", std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + dir + "/" + name + ".bin");
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<T> out(bytes.size() / sizeof(T));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
  return out;
}

template <class T>
void save(const std::string& dir, const std::string& name, const std::vector<T>& v) {
  std::ofstream out(dir + "/" + name + ".bin", std::ios::binary);
  out.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(T)));
}

// A draft length read from the int32 arrays the Python side writes (its dtype for gamma): the library
// takes std::size_t, so a negative value is a broken case file, not a length.
std::size_t draft_length(std::int32_t g) {
  if (g < 0) throw std::runtime_error("a draft length (gamma) must be >= 0, got " + std::to_string(g));
  return static_cast<std::size_t>(g);
}

std::vector<specdec::random::request_stream> streams_of(const std::string& dir) {
  const auto seeds = load<std::uint64_t>(dir, "seeds");
  const auto ids = load<std::uint32_t>(dir, "ids");
  const auto steps = load<std::uint32_t>(dir, "steps");
  std::vector<specdec::random::request_stream> s;
  for (std::size_t b = 0; b < seeds.size(); ++b) s.push_back({.seed = seeds[b], .request = ids[b], .step = steps[b]});
  return s;
}

template <class T, class Rule>
void verify_case(const std::string& dir, const Rule& rule, bool packed, std::size_t V, std::size_t max_drafts) {
  const auto nd = load<std::int32_t>(dir, "num_drafts");
  const auto tokens = load<specdec::token_id>(dir, "tokens");
  const auto q = load<T>(dir, "q");
  const auto p = load<T>(dir, "p");
  const auto streams = streams_of(dir);
  const specdec::ragged_layout layout =
      packed ? specdec::ragged_layout::packed(nd) : specdec::ragged_layout::padded(nd, max_drafts);
  const specdec::chain_batch<T> batch{layout, V, tokens, q, p};
  const std::size_t B = nd.size(), W = layout.max_drafts() + 1;
  std::vector<specdec::token_id> out(B * W);
  std::vector<std::int32_t> accepted(B);
  std::vector<specdec::verify_status> status(B);
  specdec::verify(specdec::exec::seq, rule, batch, streams, specdec::chain_outputs{out, accepted, status});
  std::vector<std::uint8_t> flags;
  for (const auto s : status) flags.push_back(static_cast<std::uint8_t>(s));
  save(dir, "out_tokens", out);
  save(dir, "out_accepted", accepted);
  save(dir, "out_status", flags);
}

template <class T, class Rule>
void verify_tree_case(const std::string& dir, const Rule& rule, std::size_t V, bool from_logits) {
  const auto num_nodes = load<std::int32_t>(dir, "num_nodes");
  const auto parents = load<std::int32_t>(dir, "parents");
  const auto tokens = load<specdec::token_id>(dir, "tokens");
  const auto q = load<T>(dir, "q");
  const auto p = load<T>(dir, "p");
  const auto streams = streams_of(dir);
  const specdec::tree_batch<T> batch{specdec::tree_layout::from_parents(num_nodes, parents), V, tokens, q, p};
  const std::size_t B = num_nodes.size(), W = batch.layout.max_depth() + 1;
  std::vector<specdec::token_id> out(B * W);
  std::vector<std::int32_t> path(B * W), accepted(B);
  std::vector<specdec::verify_status> status(B);
  const specdec::tree_outputs outputs{out, path, accepted, status};
  if (from_logits) {
    const auto temperature = load<double>(dir, "temperature");
    const auto top_k = load<std::int32_t>(dir, "top_k");
    const auto top_p = load<double>(dir, "top_p");
    const auto min_p = load<double>(dir, "min_p");
    std::vector<specdec::warp_params> params;
    for (std::size_t b = 0; b < B; ++b)
      params.push_back({.temperature = temperature[b], .top_k = top_k[b], .top_p = top_p[b], .min_p = min_p[b]});
    specdec::verify_tree_from_logits(specdec::exec::seq, rule, batch, std::span<const specdec::warp_params>(params), streams,
                                     outputs);
  } else {
    specdec::verify_tree(specdec::exec::seq, rule, batch, streams, outputs);
  }
  std::vector<std::uint8_t> flags;
  for (const auto s : status) flags.push_back(static_cast<std::uint8_t>(s));
  save(dir, "out_tokens", out);
  save(dir, "out_path", path);
  save(dir, "out_accepted", accepted);
  save(dir, "out_status", flags);
}

specdec::typical_rule typical(double a, double b, double c, int d) {
  specdec::typical_rule t{.epsilon = a, .delta = b, .log_offset = c};
  if (d == 1) t.correction = specdec::typical_correction::typical_sample;
  return t;
}

template <class T>
void verify_typed(const std::string& dir, int kind, double a, double b, double c, int d, bool packed, std::size_t V,
                  std::size_t max_drafts) {
  switch (kind) {
    case 0: return verify_case<T>(dir, specdec::strict, packed, V, max_drafts);
    case 1: return verify_case<T>(dir, specdec::lenient_rule{a}, packed, V, max_drafts);
    case 2: return verify_case<T>(dir, specdec::greedy, packed, V, max_drafts);
    case 3: return verify_case<T>(dir, specdec::sample_and_match, packed, V, max_drafts);
    case 4: return verify_case<T>(dir, specdec::block, packed, V, max_drafts);
    case 5: return verify_case<T>(dir, typical(a, b, c, d), packed, V, max_drafts);
    default: throw std::runtime_error("unknown rule kind");
  }
}

template <class T>
void verify_tree_typed(const std::string& dir, int kind, double a, double b, double c, int d, std::size_t V, bool L) {
  switch (kind) {
    case 0: return verify_tree_case<T>(dir, specdec::strict, V, L);
    case 2: return verify_tree_case<T>(dir, specdec::greedy, V, L);
    case 3: return verify_tree_case<T>(dir, specdec::sample_and_match, V, L);
    case 5: return verify_tree_case<T>(dir, typical(a, b, c, d), V, L);
    case 6: return verify_tree_case<T>(dir, specdec::recursive_rejection, V, L);
    case 7: return verify_tree_case<T>(dir, specdec::k_seq, V, L);
    case 8: return verify_tree_case<T>(dir, specdec::target_only, V, L);
    default: throw std::runtime_error("unknown tree rule kind");
  }
}

template <class T>
void sample_logits_case(const std::string& dir, std::size_t V, std::uint32_t position, int purpose) {
  const auto logits = load<T>(dir, "logits");
  const auto temperature = load<double>(dir, "temperature");
  const auto top_k = load<std::int32_t>(dir, "top_k");
  const auto top_p = load<double>(dir, "top_p");
  const auto min_p = load<double>(dir, "min_p");
  const auto streams = streams_of(dir);
  std::vector<specdec::token_id> tokens;
  std::vector<std::uint8_t> status;
  for (std::size_t r = 0; r < streams.size(); ++r) {
    const specdec::warp_params w{.temperature = temperature[r], .top_k = top_k[r], .top_p = top_p[r], .min_p = min_p[r]};
    const double u = streams[r].open(position, static_cast<specdec::random::purpose>(purpose)).uniform();
    const auto s = specdec::sample_logits(specdec::exec::seq, std::span<const T>(logits).subspan(r * V, V), w, u);
    tokens.push_back(s.token);
    status.push_back(static_cast<std::uint8_t>(s.status));
  }
  save(dir, "out_tokens", tokens);
  save(dir, "out_status", status);
}

void simulate_case(const std::string& dir, const std::string& what, std::istream& meta) {
  namespace sim = specdec::simulate;
  if (what == "simulate_tokens") {
    double lenience = 1;
    std::size_t gamma = 0;
    std::uint32_t stream = 0;
    std::uint64_t seed = 0, first = 0, draws = 0;
    meta >> lenience >> gamma >> stream >> seed >> first >> draws;
    const auto p = load<double>(dir, "p"), q = load<double>(dir, "q");
    const sim::run_options o{.seed = seed, .stream = stream, .first = first, .draws = draws};
    const auto r = lenience == 1.0 ? sim::sd::token_process(specdec::strict, p, q, gamma, o)
                                   : sim::sd::token_process(specdec::lenient_rule{lenience}, p, q, gamma, o);
    std::vector<std::uint64_t> first_token, hist;
    for (std::size_t v = 0; v < p.size(); ++v) first_token.push_back(r.first_token.count_of(v));
    for (std::size_t a = 0; a <= gamma; ++a) hist.push_back(r.chain.accepted.count_of(a));
    save(dir, "out_first", first_token);
    save(dir, "out_hist", hist);
    save(dir, "out_first_accepted", std::vector<std::uint64_t>{r.first_accepted});
    return;
  }
  std::uint64_t seed = 0, first = 0, draws = 0;
  meta >> seed >> first >> draws;
  const auto stream = load<std::uint32_t>(dir, "stream");
  std::vector<double> mean;
  std::vector<std::uint64_t> drafts, hist;
  if (what == "simulate_chain") {
    const auto alpha = load<double>(dir, "alpha");
    std::vector<std::size_t> gamma;
    for (const auto g : load<std::int32_t>(dir, "gamma")) gamma.push_back(draft_length(g));
    std::size_t width = 0;
    for (const auto g : gamma) width = std::max(width, g + 1);
    for (std::size_t i = 0; i < alpha.size(); ++i) {
      const auto r = sim::sd::chain(alpha[i], gamma[i], {.seed = seed, .stream = stream[i], .first = first, .draws = draws});
      mean.push_back(r.tokens().mean);
      drafts.push_back(r.draft_tokens);
      for (std::size_t a = 0; a < width; ++a) hist.push_back(r.accepted.count_of(a));
    }
    save(dir, "out_hist", hist);
  } else {
    const auto eta_tp = load<double>(dir, "eta_tp"), eta_fp = load<double>(dir, "eta_fp");
    const auto r = load<std::int32_t>(dir, "r");
    for (std::size_t i = 0; i < eta_tp.size(); ++i) {
      const auto t = sim::sprinter::verifier_chain(eta_tp[i], eta_fp[i], r[i],
                                                   {.seed = seed, .stream = stream[i], .first = first, .draws = draws});
      mean.push_back(t.tokens().mean);
      drafts.push_back(t.draft_tokens);
    }
  }
  save(dir, "out_mean", mean);
  save(dir, "out_drafts", drafts);
}

// The simulators of simulate_methods.cpp (MTAD, trees, block verification, SPRINTER's token process)
// on the n configurations of a case; each row parameter is [n][K], K its length over n.
void simulate_method_case(const std::string& dir, const std::string& what, std::istream& meta) {
  namespace sim = specdec::simulate;
  int argmax = 0;
  if (what == "simulate_mtad") meta >> argmax;
  std::uint64_t seed = 0, first = 0, draws = 0;
  meta >> seed >> first >> draws;
  const auto stream = load<std::uint32_t>(dir, "stream");
  const std::size_t n = stream.size();
  const auto row = [n](const std::vector<double>& v, std::size_t i) {
    const std::size_t K = v.size() / n;
    return std::span<const double>(v).subspan(i * K, K);
  };
  const auto counts = [](std::vector<std::uint64_t>& out, const sim::count_tally& t, std::size_t width) {
    for (std::size_t v = 0; v < width; ++v) out.push_back(t.count_of(v));
  };
  const auto options = [&](std::size_t i) {
    return sim::run_options{.seed = seed, .stream = stream[i], .first = first, .draws = draws};
  };
  std::map<std::string, std::vector<std::uint64_t>> u;  // saved as out_<name>
  std::map<std::string, std::vector<double>> f;
  if (what == "simulate_tree") {
    const auto parents = load<std::int32_t>(dir, "parents");
    const auto alphas = load<double>(dir, "alphas");
    const auto N = static_cast<std::int32_t>(parents.size());
    const auto layout = specdec::tree_layout::from_parents(std::span<const std::int32_t>(&N, 1), parents);
    for (std::size_t i = 0; i < n; ++i) {
      const auto r = sim::tree::walk(layout, 0, row(alphas, i), options(i));
      counts(u["hist"], r.accepted, layout.max_depth() + 1);
      counts(u["last"], r.last_node, parents.size());
      u["coins"].push_back(r.coins);
      f["mean"].push_back(r.mean_accepted().mean);
    }
  } else if (what == "simulate_sprinter_tokens") {
    const auto p = load<double>(dir, "p"), q = load<double>(dir, "q");
    const auto eta_tp = load<double>(dir, "eta_tp"), eta_fp = load<double>(dir, "eta_fp");
    for (std::size_t i = 0; i < n; ++i) {
      const auto r = sim::sprinter::token_process(row(p, i), row(q, i), eta_tp[i], eta_fp[i], options(i));
      counts(u["token"], r.token, row(p, i).size());
      u["kept"].push_back(r.kept);
      u["verifier_accepted"].push_back(r.verifier_accepted);
      u["fallbacks"].push_back(r.fallbacks);
    }
  } else {
    const auto p = load<double>(dir, "p"), q = load<double>(dir, "q");
    const auto gamma = load<std::int32_t>(dir, "gamma");
    const std::size_t width = static_cast<std::size_t>(*std::max_element(gamma.begin(), gamma.end())) + 2;
    const auto tau = what == "simulate_mtad" ? load<double>(dir, "tau") : std::vector<double>{};
    const auto how = argmax ? sim::mtad::drafting::argmax : sim::mtad::drafting::sampled;
    for (std::size_t i = 0; i < n; ++i) {
      if (what == "simulate_block") {
        const auto r = sim::block::verification(row(p, i), row(q, i), draft_length(gamma[i]), options(i));
        counts(u["block"], r.block, width - 1);
        counts(u["token_wise"], r.token_wise, width - 1);
        f["gain"].push_back(r.block_gain().mean);
        continue;
      }
      const auto r = sim::mtad::run(row(p, i), row(q, i), tau[i], draft_length(gamma[i]), how, options(i));
      counts(u["hist"], r.tokens, width);
      u["emitted"].push_back(r.emitted_tokens);
      u["min"].push_back(r.min_tokens);
      f["mean"].push_back(r.gamma_bar().mean);
      f["sum_log_p"].push_back(r.sum_log_p);
      f["sum_log_q"].push_back(r.sum_log_q);
    }
  }
  for (const auto& [name, v] : u) save(dir, "out_" + name, v);
  for (const auto& [name, v] : f) save(dir, "out_" + name, v);
}

// Each closed form of the "theory" case on the n parameter sets (the names are specdec.theory's).
void theory_case(const std::string& dir, std::size_t K, std::size_t V) {
  namespace th = specdec::theory;
  const auto alpha = load<double>(dir, "alpha"), c = load<double>(dir, "c"), eta_tp = load<double>(dir, "eta_tp"),
             eta_fp = load<double>(dir, "eta_fp"), tau = load<double>(dir, "tau"), u = load<double>(dir, "u"),
             alphas = load<double>(dir, "alphas"), p = load<double>(dir, "p"), q = load<double>(dir, "q");
  const auto gamma = load<std::int32_t>(dir, "gamma"), r = load<std::int32_t>(dir, "r"),
             small_gamma = load<std::int32_t>(dir, "small_gamma");
  const std::size_t n = alpha.size();
  const auto row = [](const std::vector<double>& v, std::size_t i, std::size_t len) {
    return std::span<const double>(v).subspan(i * len, len);
  };
  const auto each = [&](const std::string& name, auto f) {
    std::vector<decltype(f(std::size_t{0}))> out;
    for (std::size_t i = 0; i < n; ++i) out.push_back(f(i));
    save(dir, name, out);
  };
  each("sd.expected_tokens", [&](std::size_t i) { return th::sd::expected_tokens(alpha[i], draft_length(gamma[i])); });
  each("sd.expected_tokens_rows", [&](std::size_t i) { return th::sd::expected_tokens(row(alphas, i, K)); });
  each("sd.tokens_variance", [&](std::size_t i) { return th::sd::tokens_variance(alpha[i], draft_length(gamma[i])); });
  each("sd.speedup", [&](std::size_t i) { return th::sd::speedup(alpha[i], draft_length(gamma[i]), c[i]); });
  each("sd.optimal_gamma", [&](std::size_t i) { return static_cast<std::int32_t>(th::sd::optimal_gamma(alpha[i], c[i], 64)); });
  each("sd.acceptance_rate", [&](std::size_t i) { return th::sd::acceptance_rate(row(p, i, V), row(q, i, V)); });
  each("sprinter.expected_tokens", [&](std::size_t i) { return th::sprinter::expected_tokens(eta_tp[i], eta_fp[i], r[i]); });
  each("sprinter.tokens_variance", [&](std::size_t i) { return th::sprinter::tokens_variance(eta_tp[i], eta_fp[i], r[i]); });
  each("sprinter.prob_tokens", [&](std::size_t i) { return th::sprinter::prob_tokens(gamma[i], eta_tp[i], eta_fp[i], r[i]); });
  each("sv.expected_accepted", [&](std::size_t i) { return th::sv::expected_accepted(row(alphas, i, K), K); });
  each("sv.variance_accepted", [&](std::size_t i) { return th::sv::variance_accepted(row(alphas, i, K), K); });
  each("mtad.lemma_a1_bound", [&](std::size_t i) { return th::mtad::lemma_a1_bound(tau[i], 1.0 + c[i]); });
  each("mtad.theorem_3_6_bound", [&](std::size_t i) { return th::mtad::theorem_3_6_bound(tau[i], u[i]); });
  each("tree.complete_tree_expected_accepted",
       [&](std::size_t i) { return th::tree::complete_tree_expected_accepted(alpha[i], 1 + r[i] % 4, draft_length(gamma[i])); });
  each("tree.mss_acceptance", [&](std::size_t i) {
    return th::tree::mss_acceptance(row(p, i, V), row(q, i, V), static_cast<std::size_t>(1 + r[i] % 4));
  });
  each("tree.kseq_acceptance", [&](std::size_t i) {
    return th::tree::kseq_acceptance(row(p, i, V), row(q, i, V), static_cast<std::size_t>(1 + r[i] % 4));
  });
  each("block.block_expected_accepted", [&](std::size_t i) {
    return th::block::block_expected_accepted(row(p, i, V), row(q, i, V), draft_length(small_gamma[i]));
  });
}

}  // namespace

int main(int argc, char** argv) {
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string dir = argv[i];
      std::ifstream meta(dir + "/meta.txt");
      std::string what;
      meta >> what;
      if (what == "verify") {
        int kind = 0, d = 0, packed = 0, dbl = 0;
        double a = 0, b = 0, c = 0;
        std::size_t V = 0, max_drafts = 0;
        meta >> kind >> a >> b >> c >> d >> packed >> V >> dbl >> max_drafts;
        if (dbl)
          verify_typed<double>(dir, kind, a, b, c, d, packed != 0, V, max_drafts);
        else
          verify_typed<float>(dir, kind, a, b, c, d, packed != 0, V, max_drafts);
      } else if (what == "verify_tree" || what == "verify_tree_logits") {
        int kind = 0, d = 0, dbl = 0;
        double a = 0, b = 0, c = 0;
        std::size_t V = 0;
        meta >> kind >> a >> b >> c >> d >> V >> dbl;
        const bool from_logits = what == "verify_tree_logits";
        if (dbl)
          verify_tree_typed<double>(dir, kind, a, b, c, d, V, from_logits);
        else
          verify_tree_typed<float>(dir, kind, a, b, c, d, V, from_logits);
      } else if (what == "simulate_chain" || what == "simulate_sprinter" || what == "simulate_tokens") {
        simulate_case(dir, what, meta);
      } else if (what == "simulate_mtad" || what == "simulate_tree" || what == "simulate_block" ||
                 what == "simulate_sprinter_tokens") {
        simulate_method_case(dir, what, meta);
      } else if (what == "theory") {
        std::size_t K = 0, V = 0;
        meta >> K >> V;
        theory_case(dir, K, V);
      } else if (what == "sample_logits") {
        std::size_t V = 0;
        int dbl = 0, purpose = 0;
        std::uint32_t position = 0;
        meta >> V >> dbl >> position >> purpose;
        if (dbl)
          sample_logits_case<double>(dir, V, position, purpose);
        else
          sample_logits_case<float>(dir, V, position, purpose);
      } else {
        throw std::runtime_error("unknown case in " + dir);
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cpp_reference: %s\n", e.what());
    return 1;
  }
  return 0;
}
