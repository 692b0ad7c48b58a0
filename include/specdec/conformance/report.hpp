//! \file conformance/report.hpp
//! \brief The conformance kit's report: one entry per check (pass / fail, its figures, and a minimal
//! reproduction of each failure), printable as text for people and as JSON for CI systems.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdio>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace specdec::conformance {

//! The result of one check.
struct check_result {
  std::string name;                                     //!< e.g. "exact_law/v4_mixed_gamma"
  bool passed = true;                                   //!< false once one failure was found
  std::string summary;                                  //!< one line: what was checked and what was found
  std::vector<std::pair<std::string, double>> figures;  //!< statistic, p-value, samples, seeds, ...
  //! A minimal reproduction of each failure, as JSON objects: the inputs of one failing request and
  //! what came back, or, for a statistical check, its configuration and the most deviant cell.
  std::vector<std::string> reproductions;

  //! Marks the check failed; the first failure's reason becomes the summary.
  void fail(std::string why) {
    if (passed) summary = std::move(why);
    passed = false;
  }
  //! The figure named `key`, or NaN when there is none.
  double figure(std::string_view key) const {
    for (const auto& [k, v] : figures)
      if (k == key) return v;
    return std::nan("");
  }
};

//! Everything one kit run found.
struct report {
  std::string verifier;              //!< the name the caller gave
  std::string guarantee;             //!< the claim checked
  std::vector<check_result> checks;  //!< every check run, in order

  //! True iff some check ran and every check passed.
  bool passed() const {
    for (const auto& c : checks)
      if (!c.passed) return false;
    return !checks.empty();
  }
  //! The number of failed checks.
  std::size_t failures() const {
    std::size_t n = 0;
    for (const auto& c : checks) n += c.passed ? 0 : 1;
    return n;
  }
  //! The check named `name`, or null.
  const check_result* find(std::string_view name) const {
    for (const auto& c : checks)
      if (c.name == name) return &c;
    return nullptr;
  }
};

namespace detail {
inline void append_json_string(std::string& out, std::string_view s) {
  out += '"';
  for (const char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  out += '"';
}
//! A number as JSON: shortest round-trip form; NaN and infinities (not JSON) as null.
inline void append_json_number(std::string& out, double v) {
  if (!std::isfinite(v)) {
    out += "null";
    return;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  out += buf;
}
}  // namespace detail

//! The report as text: per check a line with its verdict and summary, a line of its figures, and the
//! reproductions of its failures.
inline std::string to_text(const report& r) {
  std::string out = "specdec conformance: " + r.verifier + " (claim: " + r.guarantee + ")\n";
  for (const auto& c : r.checks) {
    out += c.passed ? "  PASS  " : "  FAIL  ";
    out += c.name + "  " + c.summary + "\n";
    if (!c.figures.empty()) {  // one line of figures: statistic, p-value, samples, seeds
      out += "          ";
      for (std::size_t k = 0; k < c.figures.size(); ++k) {
        char buf[64];
        const double v = c.figures[k].second;
        std::snprintf(buf, sizeof buf, std::floor(v) == v && std::abs(v) < 9e15 ? "%.0f" : "%.6g", v);  // counts and seeds whole
        out += (k > 0 ? ", " : "") + c.figures[k].first + " = " + buf;
      }
      out += "\n";
    }
    for (const auto& repro : c.reproductions) out += "          reproduction: " + repro + "\n";
  }
  out += r.passed() ? "PASSED: all " + std::to_string(r.checks.size()) + " checks\n"
                    : "FAILED: " + std::to_string(r.failures()) + " of " + std::to_string(r.checks.size()) + " checks\n";
  return out;
}

//! The report as one JSON object: {"verifier", "guarantee", "passed", "checks": [{"name", "passed",
//! "summary", "figures": {...}, "reproductions": [...]}]}.
inline std::string to_json(const report& r) {
  std::string out = "{\"verifier\": ";
  detail::append_json_string(out, r.verifier);
  out += ", \"guarantee\": ";
  detail::append_json_string(out, r.guarantee);
  out += r.passed() ? ", \"passed\": true" : ", \"passed\": false";
  out += ", \"checks\": [";
  for (std::size_t i = 0; i < r.checks.size(); ++i) {
    const auto& c = r.checks[i];
    out += i == 0 ? "\n  {\"name\": " : ",\n  {\"name\": ";
    detail::append_json_string(out, c.name);
    out += c.passed ? ", \"passed\": true, \"summary\": " : ", \"passed\": false, \"summary\": ";
    detail::append_json_string(out, c.summary);
    out += ", \"figures\": {";
    for (std::size_t k = 0; k < c.figures.size(); ++k) {
      if (k > 0) out += ", ";
      detail::append_json_string(out, c.figures[k].first);
      out += ": ";
      detail::append_json_number(out, c.figures[k].second);
    }
    out += "}, \"reproductions\": [";
    for (std::size_t k = 0; k < c.reproductions.size(); ++k) out += (k > 0 ? ", " : "") + c.reproductions[k];
    out += "]}";
  }
  out += "\n]}\n";
  return out;
}

}  // namespace specdec::conformance
