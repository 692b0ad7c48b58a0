//! \file learn/linear_verifier.hpp
//! \brief SPRINTER's learned verifier (seed 000, section 3.2 "Verifier architecture"): one fully
//! connected linear layer followed by a sigmoid,
//!   V(s) = sigmoid(w . z + b),   z_k = (s_k - mean_k) / scale_k,
//! where (mean, scale) standardise the features with the training set's statistics (part of the
//! model, so a saved verifier scores raw features). A `Verifier` (draft/verifier.hpp); trained by
//! learn/train.hpp.
//!
//! **File format** (`save` / `load`), plain text, whitespace-separated, numbers in C locale with
//! 17 significant digits (round-trips doubles exactly):
//! ```
//! specdec-linear-verifier 1
//! features D
//! mean m_1 ... m_D
//! scale s_1 ... s_D
//! weights w_1 ... w_D
//! bias b
//! ```
//! `load` checks the magic line, the version, every keyword, D >= 1, the counts, that every number is
//! finite and every scale > 0, and that nothing but whitespace follows.
#pragma once

#include <Eigen/Dense>

#include <cmath>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <ios>
#include <iterator>
#include <istream>
#include <locale>
#include <ostream>
#include <span>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "specdec/contracts.hpp"
#include "specdec/errors.hpp"

namespace specdec::learn {

//! One linear layer + sigmoid over standardised features (file comment).
class linear_verifier {
 public:
  //! A verifier of `feature_size` features with zero weights (score 0.5), mean 0 and scale 1.
  //! \pre feature_size >= 1. \throws specdec::error otherwise.
  explicit linear_verifier(std::size_t feature_size = 1)
      : weights_(Eigen::VectorXd::Zero(checked_size(feature_size))),
        mean_(Eigen::VectorXd::Zero(static_cast<Eigen::Index>(feature_size))),
        scale_(Eigen::VectorXd::Ones(static_cast<Eigen::Index>(feature_size))) {}

  //! A verifier with the given parameters.
  //! \pre weights, mean and scale have one size >= 1; every value finite; every scale > 0.
  //! \throws specdec::error otherwise.
  linear_verifier(Eigen::VectorXd weights, double bias, Eigen::VectorXd mean, Eigen::VectorXd scale)
      : weights_(std::move(weights)), mean_(std::move(mean)), scale_(std::move(scale)), bias_(bias) {
    check();
  }

  //! The number of features D.
  std::size_t feature_size() const noexcept { return static_cast<std::size_t>(weights_.size()); }
  //! The weights w, D entries.
  const Eigen::VectorXd& weights() const noexcept { return weights_; }
  //! The bias b.
  double bias() const noexcept { return bias_; }
  //! The features' means used to standardise them, D entries.
  const Eigen::VectorXd& mean() const noexcept { return mean_; }
  //! The features' scales used to standardise them, D entries (all > 0).
  const Eigen::VectorXd& scale() const noexcept { return scale_; }

  //! The logit w . z + b of raw features s. \pre s.size() == feature_size(). \throws specdec::error otherwise.
  double logit(std::span<const float> s) const {
    SPECDEC_EXPECTS(s.size() == feature_size(), "the feature vector does not have feature_size() values");
    double z = bias_;
    for (std::size_t k = 0; k < s.size(); ++k) {
      const auto i = static_cast<Eigen::Index>(k);
      z += weights_[i] * (static_cast<double>(s[k]) - mean_[i]) / scale_[i];
    }
    return z;
  }
  //! V(s) = sigmoid(logit(s)) in [0, 1]; NaN features give NaN (rejected by `checked_score`).
  //! \pre s.size() == feature_size(). \throws specdec::error otherwise.
  double score(std::span<const float> s) const { return sigmoid(logit(s)); }

  //! The numerically stable logistic function.
  static double sigmoid(double z) noexcept {
    if (z >= 0.0) return 1.0 / (1.0 + std::exp(-z));
    const double e = std::exp(z);
    return e / (1.0 + e);
  }

  //! Writes the model in the text format of the file comment.
  void save(std::ostream& os) const {
    std::ostringstream out;
    out.imbue(std::locale::classic());
    out.precision(17);
    out << "specdec-linear-verifier 1\nfeatures " << feature_size() << "\n";
    const auto line = [&](const char* key, const Eigen::VectorXd& v) {
      out << key;
      for (Eigen::Index i = 0; i < v.size(); ++i) out << ' ' << v[i];
      out << '\n';
    };
    line("mean", mean_);
    line("scale", scale_);
    line("weights", weights_);
    out << "bias " << bias_ << '\n';
    os << out.str();
  }
  //! Writes the model to `path`. \throws specdec::error when the file cannot be written.
  void save(const std::filesystem::path& path) const {
    std::ofstream f(path);
    if (!f) throw error("specdec::learn::linear_verifier::save: cannot open " + path.string());
    save(f);
    if (!f) throw error("specdec::learn::linear_verifier::save: cannot write " + path.string());
  }

  //! Reads a model written by `save`. \throws specdec::error on any deviation from the format.
  static linear_verifier load(std::istream& is) {
    std::istringstream in{std::string(std::istreambuf_iterator<char>(is), std::istreambuf_iterator<char>())};
    in.imbue(std::locale::classic());
    const auto fail = [](const std::string& what) -> void { throw error("specdec::learn::linear_verifier::load: " + what); };
    const auto keyword = [&](const char* expected) {
      std::string word;
      if (!(in >> word) || word != expected) fail(std::string("expected '") + expected + "'");
    };
    const auto number = [&](const char* what) {
      std::string token;
      if (!(in >> token)) fail(std::string("missing ") + what);
      std::istringstream t(token);
      t.imbue(std::locale::classic());
      double v = 0.0;
      if (!(t >> v) || !t.eof() || !std::isfinite(v)) fail(std::string("bad number '") + token + "' in " + what);
      return v;
    };
    keyword("specdec-linear-verifier");
    if (number("version") != 1.0) fail("unsupported version");
    keyword("features");
    const double d = number("features");
    if (!(d >= 1.0 && d <= 1e8 && d == std::floor(d))) fail("the feature count must be a positive integer");
    const auto n = static_cast<Eigen::Index>(d);
    const auto vector = [&](const char* key) {
      keyword(key);
      // Grown with the numbers actually read: memory follows the file's size, not the count it
      // declares (a 40-byte file declaring 10^8 features allocated 800 MB; found by
      // tests/fuzz/linear_verifier_load.cpp).
      std::vector<double> values;
      for (Eigen::Index i = 0; i < n; ++i) values.push_back(number(key));
      return Eigen::VectorXd(Eigen::Map<const Eigen::VectorXd>(values.data(), n));
    };
    Eigen::VectorXd mean = vector("mean");
    Eigen::VectorXd scale = vector("scale");
    Eigen::VectorXd weights = vector("weights");
    keyword("bias");
    const double bias = number("bias");
    std::string rest;
    if (in >> rest) fail("unexpected text after the bias: '" + rest + "'");
    return linear_verifier(std::move(weights), bias, std::move(mean), std::move(scale));
  }
  //! Reads a model from `path`. \throws specdec::error when it cannot be read or is malformed.
  static linear_verifier load(const std::filesystem::path& path) {
    std::ifstream f(path);
    if (!f) throw error("specdec::learn::linear_verifier::load: cannot open " + path.string());
    return load(f);
  }

 private:
  static Eigen::Index checked_size(std::size_t n) {
    SPECDEC_EXPECTS(n >= 1, "a verifier needs at least one feature");
    return static_cast<Eigen::Index>(n);
  }
  void check() const {
    SPECDEC_EXPECTS(weights_.size() >= 1, "a verifier needs at least one feature");
    SPECDEC_EXPECTS(mean_.size() == weights_.size() && scale_.size() == weights_.size(),
                    "weights, mean and scale must have one size");
    SPECDEC_EXPECTS(weights_.allFinite() && mean_.allFinite() && scale_.allFinite() && std::isfinite(bias_),
                    "every parameter must be finite");
    SPECDEC_EXPECTS((scale_.array() > 0.0).all(), "every scale must be > 0");
  }

  Eigen::VectorXd weights_, mean_, scale_;
  double bias_ = 0.0;
};

}  // namespace specdec::learn
