//! \file conformance/harness.hpp
//! \brief How the kit calls a verifier under test and judges the shape of what comes back: the
//! checks every verdict of every check passes (tokens in [0, V), no more than a chain or path can
//! emit, accepted tokens that are drafts), and the JSON reproductions of failing requests.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "specdec/conformance/interface.hpp"
#include "specdec/conformance/report.hpp"
#include "specdec/conformance/stop_run.hpp"

namespace specdec::conformance::detail {

//! The verdicts of one call. A verifier that throws reports every request of the call, except by
//! throwing `stop_run` (conformance/stop_run.hpp), which ends the kit run.
struct call_outcome {
  std::vector<verdict> verdicts;
  bool threw = false;
  std::string error;  //!< what the exception said, or why the verdicts cannot be used
};

template <class Inputs, class Verifier>
call_outcome call(const Verifier& verify, const Inputs& in) {
  call_outcome out;
  try {
    out.verdicts = verify(in);
  } catch (const stop_run&) {
    throw;
  } catch (const std::exception& e) {
    out.threw = true;
    out.error = e.what();
  } catch (...) {
    out.threw = true;
    out.error = "a non-standard exception";
  }
  if (out.threw) {
    out.verdicts.assign(in.batch_size(), verdict{{}, true});
  } else if (out.verdicts.size() != in.batch_size()) {
    out.error = "the verifier returned " + std::to_string(out.verdicts.size()) + " verdicts for " +
                std::to_string(in.batch_size()) + " requests";
  }
  return out;
}

inline bool in_vocabulary(token_id t, std::size_t vocab) noexcept { return t >= 0 && static_cast<std::size_t>(t) < vocab; }

//! What is wrong with the shape of chain request b's verdict, or "" when nothing is.
inline std::string chain_shape_problem(const chain_inputs& in, std::size_t b, const verdict& v) {
  const std::size_t n = static_cast<std::size_t>(in.num_drafts[b]);
  for (const token_id t : v.tokens)
    if (!in_vocabulary(t, in.vocab_size)) return "emitted token " + std::to_string(t) + ", outside [0, V)";
  if (v.tokens.size() > n + 1)
    return "emitted " + std::to_string(v.tokens.size()) + " tokens from " + std::to_string(n) + " drafts (at most n + 1)";
  for (std::size_t i = 0; i + 1 < v.tokens.size(); ++i)
    if (v.tokens[i] != in.draft_tokens[in.draft_index(b, i)])
      return "emitted token " + std::to_string(i) + " is not draft " + std::to_string(i) + ", yet tokens follow it";
  if (!v.reported && v.tokens.empty()) return "emitted no token and reported nothing";
  return {};
}

//! Whether `tokens[0 .. count)` are the tokens of a path down from node `node` of tree b.
inline bool is_tree_path(const tree_inputs& in, std::size_t b, std::int32_t node, std::span<const token_id> tokens) {
  if (tokens.empty()) return true;
  const auto n = static_cast<std::size_t>(in.num_nodes[b]);
  for (std::size_t c = 1; c < n; ++c)
    if (in.parents[in.node_index(b, c)] == node && in.tokens[in.node_index(b, c)] == tokens.front() &&
        is_tree_path(in, b, static_cast<std::int32_t>(c), tokens.subspan(1)))
      return true;
  return false;
}

//! What is wrong with the shape of tree request b's verdict, or "".
inline std::string tree_shape_problem(const tree_inputs& in, std::size_t b, const verdict& v) {
  for (const token_id t : v.tokens)
    if (!in_vocabulary(t, in.vocab_size)) return "emitted token " + std::to_string(t) + ", outside [0, V)";
  if (!v.tokens.empty() && !is_tree_path(in, b, 0, std::span<const token_id>(v.tokens).first(v.tokens.size() - 1)))
    return "the emitted tokens before the last are not the tokens of a path from the root";
  if (!v.reported && v.tokens.empty()) return "emitted no token and reported nothing";
  return {};
}

// ---- JSON reproductions -----------------------------------------------------------------------

inline void append_json_float(std::string& out, double v) {
  if (std::isnan(v)) {
    out += "\"NaN\"";
  } else if (std::isinf(v)) {
    out += v > 0 ? "\"Infinity\"" : "\"-Infinity\"";
  } else {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.9g", v);
    out += buf;
  }
}

template <class Range>
void append_json_array(std::string& out, const Range& values) {
  out += '[';
  bool first = true;
  for (const auto v : values) {
    if (!first) out += ", ";
    first = false;
    if constexpr (std::is_floating_point_v<std::decay_t<decltype(v)>>)
      append_json_float(out, static_cast<double>(v));
    else
      out += std::to_string(v);
  }
  out += ']';
}

//! A row as JSON: every value when V <= 64, otherwise {"V", "sum", "entries": [[index, value], ...]}
//! with the non-finite, negative and 16 largest entries.
inline void append_json_row(std::string& out, std::span<const float> row) {
  if (row.size() <= 64) return append_json_array(out, row);
  std::vector<std::size_t> keep;
  for (std::size_t v = 0; v < row.size(); ++v)
    if (!std::isfinite(row[v]) || row[v] < 0.0f) keep.push_back(v);
  std::vector<std::size_t> order(row.size());
  for (std::size_t v = 0; v < row.size(); ++v) order[v] = v;
  const std::size_t top = std::min<std::size_t>(16, row.size());
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(top), order.end(),
                    [&](std::size_t a, std::size_t b) { return row[a] > row[b]; });
  keep.insert(keep.end(), order.begin(), order.begin() + static_cast<std::ptrdiff_t>(top));
  double sum = 0.0;
  for (const float x : row) sum += static_cast<double>(x);
  out += "{\"V\": " + std::to_string(row.size()) + ", \"sum\": ";
  append_json_float(out, sum);
  out += ", \"entries\": [";
  for (std::size_t i = 0; i < keep.size(); ++i) {
    out += (i > 0 ? ", [" : "[") + std::to_string(keep[i]) + ", ";
    append_json_float(out, static_cast<double>(row[keep[i]]));
    out += ']';
  }
  out += "]}";
}

//! `count` rows, `row_of(i)` each, as a JSON array.
template <class RowOf>
void append_json_rows(std::string& out, std::size_t count, RowOf row_of) {
  out += '[';
  for (std::size_t i = 0; i < count; ++i) {
    if (i > 0) out += ", ";
    append_json_row(out, row_of(i));
  }
  out += ']';
}

inline void append_json_identity(std::string& out, const request_identities& ids, std::size_t b) {
  out += "\"seed\": " + std::to_string(ids.seeds[b]) + ", \"request_id\": " + std::to_string(ids.request_ids[b]) +
         ", \"step\": " + std::to_string(ids.steps[b]);
}

inline void append_verdict(std::string& out, const verdict* v, std::string_view problem) {
  if (v != nullptr) {
    out += ", \"returned\": {\"tokens\": ";
    append_json_array(out, v->tokens);
    out += v->reported ? ", \"reported\": true}" : ", \"reported\": false}";
  }
  out += ", \"problem\": ";
  append_json_string(out, problem);
  out += '}';
}

//! Request b of a chain batch, what came back and what is wrong, as one JSON object: enough to call
//! the verifier again on exactly that request.
inline std::string chain_reproduction(const chain_inputs& in, std::size_t b, const verdict* v, std::string_view problem) {
  const std::size_t n = static_cast<std::size_t>(in.num_drafts[b]);
  std::string out = "{\"form\": \"chain\", \"vocab_size\": " + std::to_string(in.vocab_size) + ", ";
  append_json_identity(out, in, b);
  out += ", \"draft_tokens\": ";
  append_json_array(out, std::span<const token_id>(in.draft_tokens).subspan(in.draft_index(b, 0), n));
  out += ", \"draft_probs\": ";
  append_json_rows(out, n, [&](std::size_t i) { return in.draft_row(b, i); });
  out += ", \"target_probs\": ";
  append_json_rows(out, n + 1, [&](std::size_t i) { return in.target_row(b, i); });
  append_verdict(out, v, problem);
  return out;
}

//! Request b of a tree batch, as `chain_reproduction`.
inline std::string tree_reproduction(const tree_inputs& in, std::size_t b, const verdict* v, std::string_view problem) {
  const std::size_t n = static_cast<std::size_t>(in.num_nodes[b]);
  std::string out = "{\"form\": \"tree\", \"vocab_size\": " + std::to_string(in.vocab_size) + ", \"sampling\": \"" +
                    (in.sampling == sibling_sampling::independent ? "independent" : "without_replacement") + "\", ";
  append_json_identity(out, in, b);
  out += ", \"parents\": ";
  append_json_array(out, std::span<const std::int32_t>(in.parents).subspan(in.node_index(b, 0), n));
  out += ", \"tokens\": ";
  append_json_array(out, std::span<const token_id>(in.tokens).subspan(in.node_index(b, 0), n));
  out += ", \"draft_probs\": ";
  append_json_rows(out, n, [&](std::size_t i) { return in.draft_row(b, i); });
  out += ", \"target_probs\": ";
  append_json_rows(out, n, [&](std::size_t i) { return in.target_row(b, i); });
  append_verdict(out, v, problem);
  return out;
}

inline std::string reproduction(const chain_inputs& in, std::size_t b, const verdict* v, std::string_view problem) {
  return chain_reproduction(in, b, v, problem);
}
//! Logits form: the chain's reproduction with both sides' warping parameters.
inline std::string reproduction(const chain_logit_inputs& in, std::size_t b, const verdict* v, std::string_view problem) {
  std::string out = chain_reproduction(in, b, v, problem);
  out.pop_back();  // the closing brace
  for (const auto& [key, w] : {std::pair{"target_warp", in.target_warp[b]}, std::pair{"draft_warp", in.draft_warp[b]}}) {
    out += std::string(", \"") + key + "\": {\"temperature\": ";
    append_json_float(out, w.temperature);
    out += ", \"top_k\": " + std::to_string(w.top_k) + ", \"top_p\": ";
    append_json_float(out, w.top_p);
    out += ", \"min_p\": ";
    append_json_float(out, w.min_p);
    out += '}';
  }
  return out + ", \"rows\": \"logits\"}";
}
inline std::string reproduction(const tree_inputs& in, std::size_t b, const verdict* v, std::string_view problem) {
  return tree_reproduction(in, b, v, problem);
}
inline std::string shape_problem(const chain_inputs& in, std::size_t b, const verdict& v) {
  return chain_shape_problem(in, b, v);
}
inline std::string shape_problem(const tree_inputs& in, std::size_t b, const verdict& v) { return tree_shape_problem(in, b, v); }

//! Records a failing request in `check`, keeping at most `max_reproductions` reproductions.
template <class Inputs>
void record_failure(check_result& check, const Inputs& in, std::size_t b, const verdict* v, const std::string& problem,
                    std::size_t max_reproductions = 3) {
  check.fail(problem);
  if (check.reproductions.size() < max_reproductions) check.reproductions.push_back(reproduction(in, b, v, problem));
}

}  // namespace specdec::conformance::detail
