//! \file learn/train.hpp
//! \brief Training SPRINTER's linear verifier (seed 000, section 3.2 and A.5): Adam on the binary
//! cross-entropy, mini-batches, early stopping on a held-out validation split.
//!
//! Loss of one example with logit z and label y: softplus(z) - y z (the cross-entropy of
//! sigmoid(z), computed stably), plus (l2 / 2) |w|^2. The features are standardised with the
//! training part's mean and standard deviation (a constant feature gets scale 1), which the verifier
//! keeps. After every epoch the validation loss is measured; training stops when it has not improved
//! by more than `min_delta` for `patience` epochs, and the best epoch's parameters are returned.
//! Shuffling uses Philox streams (seed, epoch), so training is reproducible.
#pragma once

#include <Eigen/Dense>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "specdec/contracts.hpp"
#include "specdec/learn/dataset.hpp"
#include "specdec/learn/linear_verifier.hpp"

namespace specdec::learn {

//! Options of `train_linear_verifier`.
struct train_options {
  double learning_rate = 0.01;       //!< Adam's step size
  double beta1 = 0.9;                //!< Adam's first-moment decay
  double beta2 = 0.999;              //!< Adam's second-moment decay
  double epsilon = 1e-8;             //!< Adam's denominator guard
  double l2 = 0.0;                   //!< weight decay on w (not on b)
  std::size_t batch_size = 256;      //!< examples per Adam step
  std::size_t max_epochs = 200;      //!< the most epochs run
  std::size_t patience = 10;         //!< epochs without validation improvement before stopping
  double min_delta = 1e-5;           //!< an improvement smaller than this does not count
  double validation_fraction = 0.2;  //!< part of the data held out for early stopping
  std::uint64_t seed = 0;            //!< seeds the train/validation split and the order of every epoch
};

//! What happened during training.
struct training_report {
  std::size_t epochs = 0;             //!< epochs run
  std::size_t best_epoch = 0;         //!< 1-based epoch whose parameters were kept
  double best_validation_loss = 0.0;  //!< mean cross-entropy on the validation part
  double train_loss = 0.0;            //!< mean cross-entropy on the training part, best parameters
  bool stopped_early = false;         //!< patience ran out before max_epochs
  std::size_t train_size = 0;         //!< examples trained on
  std::size_t validation_size = 0;    //!< examples held out for validation
};

//! A trained verifier and its report.
struct trained_verifier {
  linear_verifier verifier;  //!< the verifier with the best validation loss's parameters
  training_report report;    //!< how the training went
};

namespace detail {
//! Mean cross-entropy softplus(z) - y z of the rows of standardised X with parameters (w, b).
inline double mean_bce(const Eigen::MatrixXd& x, const Eigen::VectorXd& y, const Eigen::VectorXd& w, double b) {
  const Eigen::VectorXd z = (x * w).array() + b;
  double s = 0.0;
  for (Eigen::Index i = 0; i < z.size(); ++i) {
    const double zi = z[i];
    const double softplus = zi > 0.0 ? zi + std::log1p(std::exp(-zi)) : std::log1p(std::exp(zi));
    s += softplus - y[i] * zi;
  }
  return z.size() ? s / static_cast<double>(z.size()) : 0.0;
}

//! The examples `rows` of `data` as a matrix (double) and a label vector.
inline void gather(const verifier_dataset& data, std::span<const std::size_t> rows, Eigen::MatrixXd& x, Eigen::VectorXd& y) {
  const auto d = static_cast<Eigen::Index>(data.feature_size);
  x.resize(static_cast<Eigen::Index>(rows.size()), d);
  y.resize(static_cast<Eigen::Index>(rows.size()));
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const auto s = data.row(rows[r]);
    for (Eigen::Index k = 0; k < d; ++k) x(static_cast<Eigen::Index>(r), k) = static_cast<double>(s[static_cast<std::size_t>(k)]);
    y[static_cast<Eigen::Index>(r)] = data.labels[rows[r]];
  }
}
}  // namespace detail

//! Trains a `linear_verifier` on `data` (file comment).
//! \pre data.feature_size >= 1; at least 2 examples; every feature finite; learning_rate > 0;
//!      beta1, beta2 in [0, 1); epsilon > 0; l2 >= 0; batch_size >= 1; max_epochs >= 1;
//!      validation_fraction in (0, 1).
//! \throws specdec::error otherwise.
inline trained_verifier train_linear_verifier(const verifier_dataset& data, const train_options& o = {}) {
  SPECDEC_EXPECTS(data.feature_size >= 1, "the data have no features");
  SPECDEC_EXPECTS(data.size() >= 2, "training needs at least 2 examples");
  SPECDEC_EXPECTS(data.features.size() == data.size() * data.feature_size, "the feature matrix does not match the labels");
  for (const float f : data.features) SPECDEC_EXPECTS(std::isfinite(f), "a feature is NaN or infinite");
  SPECDEC_EXPECTS(o.learning_rate > 0.0 && std::isfinite(o.learning_rate), "learning_rate must be > 0");
  SPECDEC_EXPECTS(o.beta1 >= 0.0 && o.beta1 < 1.0 && o.beta2 >= 0.0 && o.beta2 < 1.0, "beta1 and beta2 must be in [0, 1)");
  SPECDEC_EXPECTS(o.epsilon > 0.0, "epsilon must be > 0");
  SPECDEC_EXPECTS(o.l2 >= 0.0 && std::isfinite(o.l2), "l2 must be >= 0");
  SPECDEC_EXPECTS(o.batch_size >= 1 && o.max_epochs >= 1, "batch_size and max_epochs must be >= 1");
  SPECDEC_EXPECTS(o.validation_fraction > 0.0 && o.validation_fraction < 1.0, "validation_fraction must be in (0, 1)");

  // Split: the last part of a random permutation is the validation set.
  const auto order = random_permutation(data.size(), o.seed, 0);
  auto n_val = static_cast<std::size_t>(std::llround(o.validation_fraction * static_cast<double>(data.size())));
  n_val = std::clamp<std::size_t>(n_val, 1, data.size() - 1);
  const std::span<const std::size_t> all(order);
  Eigen::MatrixXd x, xv;
  Eigen::VectorXd y, yv;
  detail::gather(data, all.subspan(n_val), x, y);
  detail::gather(data, all.first(n_val), xv, yv);

  // Standardise with the training part's statistics.
  const Eigen::VectorXd mean = x.colwise().mean().transpose();
  Eigen::VectorXd scale = ((x.rowwise() - mean.transpose()).array().square().colwise().mean()).sqrt().transpose();
  for (Eigen::Index k = 0; k < scale.size(); ++k)
    if (!(scale[k] > 1e-12)) scale[k] = 1.0;
  x = (x.rowwise() - mean.transpose()).array().rowwise() / scale.transpose().array();
  xv = (xv.rowwise() - mean.transpose()).array().rowwise() / scale.transpose().array();

  const Eigen::Index d = x.cols(), n = x.rows();
  Eigen::VectorXd w = Eigen::VectorXd::Zero(d), m_w = w, v_w = w, best_w = w;
  double b = 0.0, m_b = 0.0, v_b = 0.0, best_b = 0.0;
  double best = std::numeric_limits<double>::infinity();
  training_report rep;
  rep.train_size = static_cast<std::size_t>(n);
  rep.validation_size = static_cast<std::size_t>(xv.rows());
  std::size_t since_best = 0, t = 0;
  Eigen::MatrixXd xb;
  Eigen::VectorXd yb;
  for (std::size_t epoch = 1; epoch <= o.max_epochs; ++epoch) {
    const auto perm = random_permutation(static_cast<std::size_t>(n), o.seed, static_cast<std::uint32_t>(epoch));
    for (std::size_t start = 0; start < perm.size(); start += o.batch_size) {
      const std::size_t m = std::min(o.batch_size, perm.size() - start);
      xb.resize(static_cast<Eigen::Index>(m), d);
      yb.resize(static_cast<Eigen::Index>(m));
      for (std::size_t r = 0; r < m; ++r) {
        xb.row(static_cast<Eigen::Index>(r)) = x.row(static_cast<Eigen::Index>(perm[start + r]));
        yb[static_cast<Eigen::Index>(r)] = y[static_cast<Eigen::Index>(perm[start + r])];
      }
      // d/dz [softplus(z) - y z] = sigmoid(z) - y.
      Eigen::VectorXd g = (xb * w).array() + b;
      for (Eigen::Index i = 0; i < g.size(); ++i) g[i] = linear_verifier::sigmoid(g[i]) - yb[i];
      const Eigen::VectorXd grad_w = xb.transpose() * g / static_cast<double>(m) + o.l2 * w;
      const double grad_b = g.mean();
      ++t;
      const double c1 = 1.0 - std::pow(o.beta1, static_cast<double>(t));
      const double c2 = 1.0 - std::pow(o.beta2, static_cast<double>(t));
      m_w = o.beta1 * m_w + (1.0 - o.beta1) * grad_w;
      v_w = o.beta2 * v_w + (1.0 - o.beta2) * grad_w.cwiseProduct(grad_w);
      m_b = o.beta1 * m_b + (1.0 - o.beta1) * grad_b;
      v_b = o.beta2 * v_b + (1.0 - o.beta2) * grad_b * grad_b;
      w.array() -= o.learning_rate * (m_w.array() / c1) / ((v_w.array() / c2).sqrt() + o.epsilon);
      b -= o.learning_rate * (m_b / c1) / (std::sqrt(v_b / c2) + o.epsilon);
    }
    rep.epochs = epoch;
    const double val = detail::mean_bce(xv, yv, w, b);
    if (val < best - o.min_delta) {
      best = val;
      best_w = w;
      best_b = b;
      rep.best_epoch = epoch;
      since_best = 0;
    } else if (++since_best >= o.patience) {
      rep.stopped_early = epoch < o.max_epochs;
      break;
    }
  }
  if (rep.best_epoch == 0) {  // the validation loss never improved on +inf (it is NaN): keep the last
    best_w = w;
    best_b = b;
  }
  rep.best_validation_loss = detail::mean_bce(xv, yv, best_w, best_b);
  rep.train_loss = detail::mean_bce(x, y, best_w, best_b);
  return {linear_verifier(best_w, best_b, mean, scale), rep};
}

}  // namespace specdec::learn
