// specdec._core.theory_*: the closed forms of include/specdec/theory/ mapped over arrays of parameters.
//
// Each function takes one array per parameter, already broadcast to a common count n by the Python
// layer (specdec/theory/): a real or an integer parameter is a 1-D array of n entries, a row
// parameter (alphas, p, q, ...) a C-contiguous [n, K] array whose row i is the i-th row. Entry i of
// the result is the C++ function on the i-th entries; a failed precondition raises specdec.Error
// with the library's message.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>

#include "numpy_out.hpp"
#include "specdec/theory/theory.hpp"

namespace nb = nanobind;
using namespace nb::literals;
namespace th = specdec::theory;
using specdec_python::non_negative;
using specdec_python::to_numpy;

namespace {

using row = std::span<const double>;

// How one parameter of type T is read from its array.
template <class T>
struct param {
  using array = nb::ndarray<const T, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
  static std::size_t count(const array& a) { return a.shape(0); }
  static T at(const array& a, std::size_t i) { return a.data()[i]; }
};

template <>
struct param<row> {
  using array = nb::ndarray<const double, nb::ndim<2>, nb::c_contig, nb::device::cpu>;
  static std::size_t count(const array& a) { return a.shape(0); }
  static row at(const array& a, std::size_t i) { return {a.data() + i * a.shape(1), a.shape(1)}; }
};

template <>
struct param<std::size_t> : param<std::int32_t> {
  static std::size_t at(const array& a, std::size_t i) {
    if (a.data()[i] < 0) throw nb::value_error("a count must be >= 0");
    return static_cast<std::size_t>(a.data()[i]);
  }
};

// Binds theory_<name> as f mapped over arrays: out[i] = f(args[i]...), a new NumPy array of n results.
template <class R, class... A>
void def_map(nb::module_& m, const char* name, R (*f)(A...)) {
  m.def((std::string("theory_") + name).c_str(), [f](const typename param<A>::array&... args) {
    const std::size_t counts[] = {param<A>::count(args)...};
    const std::size_t n = counts[0];
    for (const std::size_t c : counts)
      if (c != n) throw nb::value_error("theory: the parameter arrays must have one entry (or row) each");
    std::unique_ptr<R[]> out(new R[n]);
    {
      nb::gil_scoped_release release;
      for (std::size_t i = 0; i < n; ++i) out[i] = f(param<A>::at(args, i)...);
    }
    return to_numpy(std::move(out), {n});
  });
}

}  // namespace

// The functions are top-level (theory_*), not a submodule: stubgen writes one _core.pyi.
void bind_theory(nb::module_& m) {
  // sd: Leviathan et al. and its generalisations
  def_map(
      m, "sd_prob_tokens", +[](int k, double alpha, int gamma) {
        return th::sd::prob_tokens(non_negative(k, "k"), alpha, non_negative(gamma, "gamma"));
      });
  def_map(
      m, "sd_expected_tokens",
      +[](double alpha, int gamma) { return th::sd::expected_tokens(alpha, non_negative(gamma, "gamma")); });
  def_map(
      m, "sd_expected_tokens_rows", +[](row alphas) { return th::sd::expected_tokens(alphas); });
  def_map(
      m, "sd_tokens_variance",
      +[](double alpha, int gamma) { return th::sd::tokens_variance(alpha, non_negative(gamma, "gamma")); });
  def_map(
      m, "sd_tokens_variance_rows", +[](row alphas) { return th::sd::tokens_variance(alphas); });
  def_map(
      m, "sd_speedup",
      +[](double alpha, int gamma, double c) { return th::sd::speedup(alpha, non_negative(gamma, "gamma"), c); });
  def_map(
      m, "sd_speedup_rows", +[](row alphas, double c) { return th::sd::speedup(alphas, c); });
  def_map(
      m, "sd_operations_factor", +[](double alpha, int gamma, double c_hat) {
        return th::sd::operations_factor(alpha, non_negative(gamma, "gamma"), c_hat);
      });
  def_map(
      m, "sd_operations_factor_rows", +[](row alphas, double c_hat) { return th::sd::operations_factor(alphas, c_hat); });
  def_map(
      m, "sd_optimal_gamma", +[](double alpha, double c, int max_gamma) {
        return static_cast<int>(th::sd::optimal_gamma(alpha, c, non_negative(max_gamma, "max_gamma")));
      });
  def_map(
      m, "sd_acceptance_rate", +[](row p, row q) { return th::sd::acceptance_rate(p, q); });
  // sprinter
  def_map(
      m, "sprinter_total_variation", +[](double eta_fp, double tv) { return th::sprinter::total_variation(eta_fp, tv); });
  def_map(
      m, "sprinter_acceptance_rate", +[](double eta_fp, double tv) { return th::sprinter::acceptance_rate(eta_fp, tv); });
  def_map(
      m, "sprinter_prob_tokens",
      +[](int i, double eta_tp, double eta_fp, int r) { return th::sprinter::prob_tokens(i, eta_tp, eta_fp, r); });
  def_map(
      m, "sprinter_expected_tokens",
      +[](double eta_tp, double eta_fp, int r) { return th::sprinter::expected_tokens(eta_tp, eta_fp, r); });
  def_map(
      m, "sprinter_tokens_variance",
      +[](double eta_tp, double eta_fp, int r) { return th::sprinter::tokens_variance(eta_tp, eta_fp, r); });
  def_map(
      m, "sprinter_expected_stopping_time", +[](double eta_tp, double eta_fp, int r, double t_d) {
        return th::sprinter::expected_stopping_time(eta_tp, eta_fp, r, t_d);
      });
  def_map(
      m, "sprinter_flops_sd",
      +[](int gamma, double f_d, double f_t) { return th::sprinter::flops_sd(non_negative(gamma, "gamma"), f_d, f_t); });
  def_map(
      m, "sprinter_flops_sprinter", +[](int gamma, double f_d, double f_v, double f_t) {
        return th::sprinter::flops_sprinter(non_negative(gamma, "gamma"), f_d, f_v, f_t);
      });
  def_map(
      m, "sprinter_flops_sprinter_catch_up", +[](int gamma, double f_d, double f_v, double f_t) {
        return th::sprinter::flops_sprinter_catch_up(non_negative(gamma, "gamma"), f_d, f_v, f_t);
      });
  // sv: speculative verification
  def_map(
      m, "sv_prob_accepted",
      +[](int n, row a, int gamma) { return th::sv::prob_accepted(non_negative(n, "n"), a, non_negative(gamma, "gamma")); });
  def_map(
      m, "sv_expected_accepted", +[](row a, int gamma) { return th::sv::expected_accepted(a, non_negative(gamma, "gamma")); });
  def_map(
      m, "sv_variance_accepted", +[](row a, int gamma) { return th::sv::variance_accepted(a, non_negative(gamma, "gamma")); });
  def_map(
      m, "sv_goodput", +[](double tokens, double latency) { return th::sv::goodput(tokens, latency); });
  // mtad
  def_map(
      m, "mtad_perplexity", +[](row probs) { return th::mtad::perplexity(probs); });
  def_map(
      m, "mtad_perplexity_from_log_probs", +[](row log_probs) { return th::mtad::perplexity_from_log_probs(log_probs); });
  def_map(
      m, "mtad_theorem_3_2_perplexity", +[](double expected_log_likelihood, double gamma_bar) {
        return th::mtad::theorem_3_2_perplexity(expected_log_likelihood, gamma_bar);
      });
  def_map(
      m, "mtad_lemma_a1_bound", +[](double tau, double gamma_bar) { return th::mtad::lemma_a1_bound(tau, gamma_bar); });
  def_map(
      m, "mtad_lemma_3_4_bound", +[](double gamma_bar, double epsilon, double expected_max_log_q, double cross_entropy) {
        return th::mtad::lemma_3_4_bound(gamma_bar, epsilon, expected_max_log_q, cross_entropy);
      });
  def_map(
      m, "mtad_theorem_3_5_bound", +[](double tau, double gamma_bar, double epsilon, double entropy_p, double u) {
        return th::mtad::theorem_3_5_bound(tau, gamma_bar, epsilon, entropy_p, u);
      });
  def_map(
      m, "mtad_theorem_3_6_bound", +[](double tau, double u) { return th::mtad::theorem_3_6_bound(tau, u); });
  def_map(
      m, "mtad_guaranteed_tokens_per_iteration", +[](double tau, double u, int gamma) {
        return static_cast<int>(th::mtad::guaranteed_tokens_per_iteration(tau, u, non_negative(gamma, "gamma")));
      });
  def_map(
      m, "mtad_energy", +[](double pw_flop, double t_flop, double pw_mem, double t_mem) {
        return th::mtad::energy(pw_flop, t_flop, pw_mem, t_mem);
      });
  // tree
  def_map(
      m, "tree_chain_expected_accepted", +[](row alphas) { return th::tree::chain_expected_accepted(alphas); });
  def_map(
      m, "tree_any_accepted", +[](row slot_alphas) { return th::tree::any_accepted(slot_alphas); });
  def_map(
      m, "tree_complete_tree_expected_accepted", +[](double alpha, int arity, int depth) {
        return th::tree::complete_tree_expected_accepted(alpha, arity, non_negative(depth, "depth"));
      });
  def_map(
      m, "tree_complete_tree_expected_accepted_slots", +[](row slot_alphas, int depth) {
        return th::tree::complete_tree_expected_accepted(slot_alphas, non_negative(depth, "depth"));
      });
  def_map(
      m, "tree_mss_acceptance", +[](row p, row q, std::size_t k) { return th::tree::mss_acceptance(p, q, k); });
  def_map(
      m, "tree_rrs_acceptance", +[](row p, row q, std::size_t k) { return th::tree::rrs_acceptance(p, q, k); });
  def_map(
      m, "tree_kseq_acceptance", +[](row p, row q, std::size_t k) { return th::tree::kseq_acceptance(p, q, k); });
  // E[A] of one tree (given by its parents) for each row of node acceptances alphas [n, nodes]
  m.def(
      "theory_tree_expected_accepted",
      [](const param<std::int32_t>::array& parents, const param<row>::array& alphas) {
        const auto n = static_cast<std::int32_t>(parents.shape(0));
        const auto layout = specdec::tree_layout::from_parents(std::span<const std::int32_t>(&n, 1),
                                                               std::span<const std::int32_t>(parents.data(), parents.shape(0)));
        const std::size_t rows = alphas.shape(0);
        std::unique_ptr<double[]> out(new double[rows]);
        for (std::size_t i = 0; i < rows; ++i) out[i] = th::tree::expected_accepted(layout, 0, param<row>::at(alphas, i));
        return to_numpy(std::move(out), {rows});
      },
      "parents"_a, "alphas"_a);
  // block
  def_map(
      m, "block_block_expected_accepted",
      +[](row p, row q, int gamma) { return th::block::block_expected_accepted(p, q, non_negative(gamma, "gamma")); });
  def_map(
      m, "block_token_wise_expected_accepted",
      +[](row p, row q, int gamma) { return th::block::token_wise_expected_accepted(p, q, non_negative(gamma, "gamma")); });
}
