//! \file learn/dataset.hpp
//! \brief Training data for SPRINTER's verifier (seed 000, section 3.2): one example per (prefix,
//! drafted token x), with the features s(x, prefix), the label 1[q(x) <= lambda p(x)] and what the
//! label was computed from (q(x), p(x)), so that the same examples can be relabelled for another
//! lambda (the paper's lambda in {1, 1.2, 1.5}, A.5 / A.10) without drafting again.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "specdec/contracts.hpp"
#include "specdec/draft/verifier.hpp"
#include "specdec/random/stream.hpp"

namespace specdec::learn {

//! The four kinds of prefix of section 3.2, in equal proportion in generated data.
enum class prefix_category : std::uint8_t {
  original = 0,          //!< (a) a prefix of the corpus
  draft_completed = 1,   //!< (b) a corpus prefix completed by the draft model
  target_completed = 2,  //!< (c) a corpus prefix completed by the target model
  mixed = 3,             //!< (d) completed token by token by either model (a fair coin each)
};

//! Verifier examples, row-major: example i has features [i * feature_size, (i + 1) * feature_size).
struct verifier_dataset {
  std::size_t feature_size = 0;           //!< D, the number of features of an example
  double lambda = 1.0;                    //!< labels are 1[q(x) <= lambda p(x)]
  std::vector<float> features;            //!< [n][feature_size]
  std::vector<std::uint8_t> labels;       //!< 1 = acceptable at lambda
  std::vector<double> q;                  //!< q(x) of the drafted token
  std::vector<double> p;                  //!< p(x) of the drafted token
  std::vector<double> tv;                 //!< d_TV(p, q) of the whole rows at the prefix
  std::vector<prefix_category> category;  //!< the prefix category of each example

  //! The number of examples.
  std::size_t size() const noexcept { return labels.size(); }
  //! The features of example i. \pre i < size().
  std::span<const float> row(std::size_t i) const {
    return std::span<const float>(features).subspan(i * feature_size, feature_size);
  }
  //! Appends one example. \pre s.size() == feature_size. \throws specdec::error otherwise.
  void add(std::span<const float> s, double q_x, double p_x, double tv_pq, prefix_category c) {
    SPECDEC_EXPECTS(s.size() == feature_size, "the example has the wrong number of features");
    features.insert(features.end(), s.begin(), s.end());
    q.push_back(q_x);
    p.push_back(p_x);
    tv.push_back(tv_pq);
    category.push_back(c);
    labels.push_back(is_acceptable(p_x, q_x, lambda) ? 1 : 0);
  }
  //! The labels 1[q(x) <= lam p(x)] recomputed for another lambda (section 3.2).
  //! \throws specdec::error unless lam is finite and >= 1.
  void relabel(double lam) {
    validate_lambda(lam);
    lambda = lam;
    for (std::size_t i = 0; i < size(); ++i) labels[i] = is_acceptable(p[i], q[i], lam) ? 1 : 0;
  }
  //! The fraction of examples labelled 1.
  double positive_fraction() const noexcept {
    std::size_t n = 0;
    for (const auto l : labels) n += l;
    return size() ? double(n) / double(size()) : 0.0;
  }
  //! The mean of d_TV(p, q) over the examples' prefixes.
  double mean_tv() const noexcept {
    double s = 0.0;
    for (const double t : tv) s += t;
    return size() ? s / double(size()) : 0.0;
  }
  //! The examples at `indices`, in that order. \throws specdec::error on an index out of range.
  verifier_dataset subset(std::span<const std::size_t> indices) const {
    verifier_dataset out;
    out.feature_size = feature_size;
    out.lambda = lambda;
    for (const std::size_t i : indices) {
      SPECDEC_EXPECTS(i < size(), "subset index out of range");
      const auto r = row(i);
      out.features.insert(out.features.end(), r.begin(), r.end());
      out.labels.push_back(labels[i]);
      out.q.push_back(q[i]);
      out.p.push_back(p[i]);
      out.tv.push_back(tv[i]);
      out.category.push_back(category[i]);
    }
    return out;
  }
};

//! A random permutation of 0..n-1 (Fisher-Yates with Philox stream (seed, purpose user + 1)).
inline std::vector<std::size_t> random_permutation(std::size_t n, std::uint64_t seed, std::uint32_t step = 0) {
  std::vector<std::size_t> order(n);
  for (std::size_t i = 0; i < n; ++i) order[i] = i;
  auto s =
      random::request_stream{seed, 0, step}.open(0, static_cast<random::purpose>(static_cast<int>(random::purpose::user) + 1));
  for (std::size_t i = n; i > 1; --i) {
    const auto j = static_cast<std::size_t>(s.uniform() * static_cast<double>(i));
    std::swap(order[i - 1], order[j < i ? j : i - 1]);
  }
  return order;
}

//! Splits `data` at random into (first, second) with about `fraction` of the examples in `second`
//! (the held-out part), using `random_permutation(size, seed)`.
//! \pre fraction in (0, 1); at least 2 examples. \throws specdec::error otherwise.
inline std::pair<verifier_dataset, verifier_dataset> split(const verifier_dataset& data, double fraction, std::uint64_t seed) {
  SPECDEC_EXPECTS(fraction > 0.0 && fraction < 1.0, "the held-out fraction must be in (0, 1)");
  SPECDEC_EXPECTS(data.size() >= 2, "splitting needs at least 2 examples");
  const auto order = random_permutation(data.size(), seed);
  auto held = static_cast<std::size_t>(std::llround(fraction * static_cast<double>(data.size())));
  held = held < 1 ? 1 : (held >= data.size() ? data.size() - 1 : held);
  const std::span<const std::size_t> all(order);
  return {data.subset(all.subspan(held)), data.subset(all.first(held))};
}

}  // namespace specdec::learn
