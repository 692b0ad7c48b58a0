//! \file conformance/file_bridge.hpp
//! \brief A verifier under test that lives in another process: the kit's calls and their answers are
//! exchanged as files (NumPy .npy arrays, conformance/npy.hpp), one directory per call. What the
//! `specdec-conformance` command (tools/specdec_conformance/) runs so that a Python sampler can be
//! checked without C++ bindings (docs/conformance.md, examples/conformance_numpy.py).
//!
//! Call k of a run lives in `<dir>/call_<k>` (k zero-padded to 6 digits):
//!
//!   inputs/meta.json        {"form": "chain" | "chain_logits" | "tree", "call": k, "vocab_size": V, "batch_size": B,
//!                            "max_drafts" | "max_nodes": ..., ["sampling": ...,] "digest": "..."}
//!   inputs/`<array>`.npy    chains: num_drafts int32 [B], offsets int64 [B+1], draft_tokens int32 [N],
//!                           draft_probs float32 [N, V], target_probs float32 [N + B, V], seeds,
//!                           request_ids, steps uint64 [B]  (N = sum num_drafts; the fields of chain_inputs)
//!                           trees: num_nodes int32 [B], offsets int64 [B+1], parents int32 [N],
//!                           tokens int32 [N], draft_probs, target_probs float32 [N, V], seeds,
//!                           request_ids, steps uint64 [B]  (N = sum num_nodes; the fields of tree_inputs)
//!                           chains from logits: the chain's arrays with logits in draft_probs and
//!                           target_probs, and for `<side>` in target, draft: `<side>_temperature`,
//!                           `<side>_top_p`, `<side>_min_p` float64 [B], `<side>_top_k` int32 [B]
//!   outputs/tokens.npy      written by the verifier: int32 or int64 [B, W], request b's emitted tokens
//!                           (accepted drafts, then the correction or bonus token) padded with -1 at the
//!                           end; its presence marks the call answered, so write it last
//!   outputs/reported.npy    optional, bool or uint8 [B]: the verifier flagged request b's input (absent:
//!                           nothing reported)
//!   outputs/error.txt       instead of tokens.npy: the verifier raised an error on this call, which the
//!                           kit takes as reporting every request (the text is the error message)
//!
//! The kit is deterministic for a given kit_options::seed, so a run can be replayed from the start:
//! a call whose answer is on disk returns it (after checking that the inputs the kit makes now are
//! the ones stored, by their digest); the first call without an answer writes its inputs (once) and
//! either waits for the answer (`set_waiter`) or ends the run by throwing `stop_run`. A replay reads
//! only inputs/meta.json and outputs/, so the input arrays of answered calls may be deleted
//! (`set_prune_inputs`).
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "specdec/conformance/interface.hpp"
#include "specdec/conformance/npy.hpp"
#include "specdec/conformance/stop_run.hpp"

namespace specdec::conformance {

namespace bridge_detail {

//! A 64-bit digest of a call's inputs (not cryptographic: it notices a changed option or kit).
class digest {
 public:
  //! Mixes one 64-bit word into the digest.
  void add(std::uint64_t word) noexcept {
    h_ = (h_ ^ word) * 0x9E3779B97F4A7C15ull;
    h_ ^= h_ >> 29;
  }
  //! Mixes in an array: its name, its length, then each value (floats and doubles by their bits).
  template <class T>
  void add_array(std::string_view name, std::span<const T> values) {
    add_text(name);
    add(values.size());
    for (const T v : values) {
      if constexpr (std::is_same_v<T, float>)
        add(std::bit_cast<std::uint32_t>(v));
      else if constexpr (std::is_same_v<T, double>)
        add(std::bit_cast<std::uint64_t>(v));
      else
        add(static_cast<std::uint64_t>(v));
    }
  }
  //! Mixes in a string: its length, then each byte.
  void add_text(std::string_view s) noexcept {
    add(s.size());
    for (const char c : s) add(static_cast<unsigned char>(c));
  }
  //! The digest as 16 lowercase hexadecimal digits.
  std::string hex() const {
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h_));
    return buf;
  }

 private:
  std::uint64_t h_ = 0xCBF29CE484222325ull;
};

//! The value of "key" in a flat JSON object written by this bridge: a string's contents or a
//! number's digits. "" when absent.
inline std::string json_field(std::string_view json, std::string_view key) {
  const std::string needle = "\"" + std::string(key) + "\":";
  std::size_t pos = json.find(needle);
  if (pos == std::string_view::npos) return {};
  pos += needle.size();
  while (pos < json.size() && json[pos] == ' ') ++pos;
  if (pos < json.size() && json[pos] == '"') {
    const std::size_t end = json.find('"', pos + 1);
    return end == std::string_view::npos ? std::string{} : std::string(json.substr(pos + 1, end - pos - 1));
  }
  const std::size_t end = json.find_first_of(",}", pos);
  std::string value(json.substr(pos, end == std::string_view::npos ? std::string_view::npos : end - pos));
  while (!value.empty() && value.back() == ' ') value.pop_back();
  return value;
}

//! The name meta.json gives a sibling sampling: "independent" or "without_replacement".
inline const char* sampling_name(sibling_sampling s) {
  return s == sibling_sampling::independent ? "independent" : "without_replacement";
}

//! One array of a call's inputs, encoded.
struct named_file {
  std::string name;   //!< the file name, with its .npy extension
  std::string bytes;  //!< the encoded .npy file
};

//! Appends the array `values` of shape `shape`, encoded as `<name>.npy`.
template <class T>
void add_file(std::vector<named_file>& files, std::string name, const std::vector<T>& values, std::vector<std::size_t> shape) {
  files.push_back({std::move(name) + ".npy", npy::encode<T>(values, shape)});
}

//! The largest entry of v, as a size (0 when v is empty).
template <class T>
std::size_t max_of(const std::vector<T>& v) {
  std::size_t m = 0;
  for (const T x : v) m = std::max(m, static_cast<std::size_t>(x));
  return m;
}

//! Mixes the requests' seeds, request ids and steps into d.
inline void add_identity(digest& d, const request_identities& in) {
  d.add_array<std::uint64_t>("seeds", in.seeds);
  d.add_array<std::uint64_t>("request_ids", in.request_ids);
  d.add_array<std::uint64_t>("steps", in.steps);
}

//! The digest of a chain call's inputs (what meta.json stores and a replay compares).
inline std::string digest_of(const chain_inputs& in) {
  digest d;
  d.add_text("chain");
  d.add(in.vocab_size);
  d.add_array<std::int32_t>("num_drafts", in.num_drafts);
  d.add_array<std::int64_t>("offsets", in.offsets);
  d.add_array<token_id>("draft_tokens", in.draft_tokens);
  d.add_array<float>("draft_probs", in.draft_rows);
  d.add_array<float>("target_probs", in.target_rows);
  add_identity(d, in);
  return d.hex();
}

//! The digest of a tree call's inputs, its sibling sampling included.
inline std::string digest_of(const tree_inputs& in) {
  digest d;
  d.add_text("tree");
  d.add_text(sampling_name(in.sampling));
  d.add(in.vocab_size);
  d.add_array<std::int32_t>("num_nodes", in.num_nodes);
  d.add_array<std::int64_t>("offsets", in.offsets);
  d.add_array<std::int32_t>("parents", in.parents);
  d.add_array<token_id>("tokens", in.tokens);
  d.add_array<float>("draft_probs", in.draft_rows);
  d.add_array<float>("target_probs", in.target_rows);
  add_identity(d, in);
  return d.hex();
}

//! One side's warping parameters as columns: temperature, top_p, min_p float64 and top_k int32 [B].
struct warp_columns {
  std::vector<double> temperature, top_p, min_p;  //!< [B]
  //! \var temperature
  //! [B]
  //! \var top_p
  //! [B]
  std::vector<std::int32_t> top_k;  //!< [B]

  //! The columns of `w`, one entry per request.
  explicit warp_columns(const std::vector<warp_params>& w) {
    for (const auto& x : w) {
      temperature.push_back(x.temperature);
      top_k.push_back(x.top_k);
      top_p.push_back(x.top_p);
      min_p.push_back(x.min_p);
    }
  }
};

//! The digest of a chain call from logits: the chain's digest, then each side's warping columns.
inline std::string digest_of(const chain_logit_inputs& in) {
  digest d;
  d.add_text(digest_of(static_cast<const chain_inputs&>(in)));
  for (const auto& [side, w] : {std::pair{"target", &in.target_warp}, std::pair{"draft", &in.draft_warp}}) {
    const warp_columns c(*w);
    d.add_text(side);
    d.add_array<double>("temperature", c.temperature);
    d.add_array<std::int32_t>("top_k", c.top_k);
    d.add_array<double>("top_p", c.top_p);
    d.add_array<double>("min_p", c.min_p);
  }
  return d.hex();
}

//! Appends the seeds, request_ids and steps arrays, uint64 [B].
inline void add_identity_files(std::vector<named_file>& files, const request_identities& in) {
  add_file(files, "seeds", in.seeds, {in.seeds.size()});
  add_file(files, "request_ids", in.request_ids, {in.request_ids.size()});
  add_file(files, "steps", in.steps, {in.steps.size()});
}

//! One member of a flat JSON object: a number, or a string (`text`) without characters to escape.
struct json_member {
  std::string_view key;  //!< the member's name
  std::string value;     //!< the number's digits, or the string's contents
  bool text = false;     //!< true: `value` is written as a JSON string
};

//! A flat JSON object on one line.
inline std::string flat_json(std::initializer_list<json_member> members) {
  constexpr char quote = '"';
  std::string out = "{";
  for (const auto& m : members) {
    if (out.size() > 1) out += ", ";
    out += quote;
    out += m.key;
    out += quote;
    out += ": ";
    if (m.text) out += quote;
    out += m.value;
    if (m.text) out += quote;
  }
  return out + "}\n";
}

//! The rows of a [rows][V] table (0 when V is 0).
inline std::size_t rows_of(const std::vector<float>& table, std::size_t vocab) { return vocab == 0 ? 0 : table.size() / vocab; }

//! The files of a chain call: the arrays, then meta.json.
inline std::vector<named_file> input_files(const chain_inputs& in, std::size_t call, const std::string& digest_hex) {
  std::vector<named_file> files;
  const std::size_t B = in.batch_size(), V = in.vocab_size;
  add_file(files, "num_drafts", in.num_drafts, {B});
  add_file(files, "offsets", in.offsets, {in.offsets.size()});
  add_file(files, "draft_tokens", in.draft_tokens, {in.draft_tokens.size()});
  add_file(files, "draft_probs", in.draft_rows, {rows_of(in.draft_rows, V), V});
  add_file(files, "target_probs", in.target_rows, {rows_of(in.target_rows, V), V});
  add_identity_files(files, in);
  files.push_back({"meta.json", flat_json({{"form", "chain", true},
                                           {"call", std::to_string(call)},
                                           {"vocab_size", std::to_string(V)},
                                           {"batch_size", std::to_string(B)},
                                           {"max_drafts", std::to_string(max_of(in.num_drafts))},
                                           {"digest", digest_hex, true}})});
  return files;
}

//! The files of a chain call from logits: the chain's arrays (rows of logits), each side's warping
//! columns (`<side>_temperature`, `<side>_top_k`, `<side>_top_p`, `<side>_min_p`), and meta.json with form
//! "chain_logits".
inline std::vector<named_file> input_files(const chain_logit_inputs& in, std::size_t call, const std::string& digest_hex) {
  std::vector<named_file> files = input_files(static_cast<const chain_inputs&>(in), call, digest_hex);
  files.pop_back();  // the chain's meta.json
  for (const auto& [side, w] :
       {std::pair{std::string("target"), &in.target_warp}, std::pair{std::string("draft"), &in.draft_warp}}) {
    const warp_columns c(*w);
    add_file(files, side + "_temperature", c.temperature, {c.temperature.size()});
    add_file(files, side + "_top_k", c.top_k, {c.top_k.size()});
    add_file(files, side + "_top_p", c.top_p, {c.top_p.size()});
    add_file(files, side + "_min_p", c.min_p, {c.min_p.size()});
  }
  files.push_back({"meta.json", flat_json({{"form", "chain_logits", true},
                                           {"call", std::to_string(call)},
                                           {"vocab_size", std::to_string(in.vocab_size)},
                                           {"batch_size", std::to_string(in.batch_size())},
                                           {"max_drafts", std::to_string(max_of(in.num_drafts))},
                                           {"digest", digest_hex, true}})});
  return files;
}

//! The files of a tree call.
inline std::vector<named_file> input_files(const tree_inputs& in, std::size_t call, const std::string& digest_hex) {
  std::vector<named_file> files;
  const std::size_t B = in.batch_size(), V = in.vocab_size;
  add_file(files, "num_nodes", in.num_nodes, {B});
  add_file(files, "offsets", in.offsets, {in.offsets.size()});
  add_file(files, "parents", in.parents, {in.parents.size()});
  add_file(files, "tokens", in.tokens, {in.tokens.size()});
  add_file(files, "draft_probs", in.draft_rows, {rows_of(in.draft_rows, V), V});
  add_file(files, "target_probs", in.target_rows, {rows_of(in.target_rows, V), V});
  add_identity_files(files, in);
  files.push_back({"meta.json", flat_json({{"form", "tree", true},
                                           {"call", std::to_string(call)},
                                           {"vocab_size", std::to_string(V)},
                                           {"batch_size", std::to_string(B)},
                                           {"max_nodes", std::to_string(max_of(in.num_nodes))},
                                           {"sampling", sampling_name(in.sampling), true},
                                           {"digest", digest_hex, true}})});
  return files;
}

//! The values of `<name>.npy` in `dir`, converted to T. \throws npy::format_error when the file is missing or malformed, its
//! dtype is not T's, or it does not have `dims` dimensions.
template <class T>
std::vector<T> load_values(const std::filesystem::path& dir, const std::string& name, std::size_t dims) {
  const auto path = dir / (name + ".npy");
  const npy::array a = npy::load(path);
  if (a.shape.size() != dims)
    throw npy::format_error(path.string() + ": " + std::to_string(a.shape.size()) + " dimensions where " + std::to_string(dims) +
                            " are expected");
  return npy::values<T>(a, path.string());
}

//! Reads the seeds, request_ids and steps arrays of `dir` into `in`. \throws npy::format_error as `load_values`.
inline void read_identity(request_identities& in, const std::filesystem::path& dir) {
  in.seeds = load_values<std::uint64_t>(dir, "seeds", 1);
  in.request_ids = load_values<std::uint64_t>(dir, "request_ids", 1);
  in.steps = load_values<std::uint64_t>(dir, "steps", 1);
}

//! The value of `key` in the meta.json text `meta`, a non-negative integer. \throws npy::format_error naming `where`/meta.json
//! when it is absent or not a number.
inline std::size_t meta_size(const std::string& meta, const char* key, const std::filesystem::path& where) {
  const std::string v = json_field(meta, key);
  if (v.empty() || v.find_first_not_of("0123456789") != std::string::npos)
    throw npy::format_error((where / "meta.json").string() + ": no \"" + key + "\"");
  return static_cast<std::size_t>(std::stoull(v));
}

}  // namespace bridge_detail

//! Reads the inputs of a chain call back from its inputs/ directory (what a C++ answerer or a test
//! does). \throws npy::format_error on a missing or malformed file.
inline chain_inputs read_chain_inputs(const std::filesystem::path& inputs_dir) {
  using namespace bridge_detail;
  const std::string meta = npy::read_file(inputs_dir / "meta.json");
  const std::string form = json_field(meta, "form");
  if (form != "chain" && form != "chain_logits")
    throw npy::format_error((inputs_dir / "meta.json").string() + ": not a chain call");
  chain_inputs in;
  in.vocab_size = meta_size(meta, "vocab_size", inputs_dir);
  in.num_drafts = load_values<std::int32_t>(inputs_dir, "num_drafts", 1);
  in.offsets = load_values<std::int64_t>(inputs_dir, "offsets", 1);
  in.draft_tokens = load_values<token_id>(inputs_dir, "draft_tokens", 1);
  in.draft_rows = load_values<float>(inputs_dir, "draft_probs", 2);
  in.target_rows = load_values<float>(inputs_dir, "target_probs", 2);
  read_identity(in, inputs_dir);
  return in;
}

//! Reads the inputs of a chain call from logits back from its inputs/ directory.
inline chain_logit_inputs read_chain_logit_inputs(const std::filesystem::path& inputs_dir) {
  using namespace bridge_detail;
  if (json_field(npy::read_file(inputs_dir / "meta.json"), "form") != "chain_logits")
    throw npy::format_error((inputs_dir / "meta.json").string() + ": not a chain_logits call");
  chain_logit_inputs in;
  static_cast<chain_inputs&>(in) = read_chain_inputs(inputs_dir);
  for (const auto& [side, w] :
       {std::pair{std::string("target"), &in.target_warp}, std::pair{std::string("draft"), &in.draft_warp}}) {
    const auto temperature = load_values<double>(inputs_dir, side + "_temperature", 1);
    const auto top_k = load_values<std::int32_t>(inputs_dir, side + "_top_k", 1);
    const auto top_p = load_values<double>(inputs_dir, side + "_top_p", 1);
    const auto min_p = load_values<double>(inputs_dir, side + "_min_p", 1);
    if (temperature.size() != in.batch_size() || top_k.size() != in.batch_size() || top_p.size() != in.batch_size() ||
        min_p.size() != in.batch_size())
      throw npy::format_error(inputs_dir.string() + ": the " + side + " warping columns do not have one entry per request");
    for (std::size_t b = 0; b < in.batch_size(); ++b) w->push_back(warp_params{temperature[b], top_k[b], top_p[b], min_p[b]});
  }
  return in;
}

//! Reads the inputs of a tree call back from its inputs/ directory.
inline tree_inputs read_tree_inputs(const std::filesystem::path& inputs_dir) {
  using namespace bridge_detail;
  const std::string meta = npy::read_file(inputs_dir / "meta.json");
  if (json_field(meta, "form") != "tree") throw npy::format_error((inputs_dir / "meta.json").string() + ": not a tree call");
  tree_inputs in;
  in.vocab_size = meta_size(meta, "vocab_size", inputs_dir);
  in.sampling = json_field(meta, "sampling") == "without_replacement" ? sibling_sampling::without_replacement
                                                                      : sibling_sampling::independent;
  in.num_nodes = load_values<std::int32_t>(inputs_dir, "num_nodes", 1);
  in.offsets = load_values<std::int64_t>(inputs_dir, "offsets", 1);
  in.parents = load_values<std::int32_t>(inputs_dir, "parents", 1);
  in.tokens = load_values<token_id>(inputs_dir, "tokens", 1);
  in.draft_rows = load_values<float>(inputs_dir, "draft_probs", 2);
  in.target_rows = load_values<float>(inputs_dir, "target_probs", 2);
  read_identity(in, inputs_dir);
  return in;
}

//! Writes verdicts as a call's answer: outputs/reported.npy, then outputs/tokens.npy (int32 [B, W],
//! W the longest verdict, at least 1, padded with -1), each through a temporary file and a rename.
inline void write_verdicts(const std::filesystem::path& outputs_dir, std::span<const verdict> verdicts) {
  std::size_t width = 1;
  for (const auto& v : verdicts) width = std::max(width, v.tokens.size());
  std::vector<token_id> tokens(verdicts.size() * width, no_token);
  std::vector<std::uint8_t> reported(verdicts.size());
  for (std::size_t b = 0; b < verdicts.size(); ++b) {
    std::copy(verdicts[b].tokens.begin(), verdicts[b].tokens.end(), tokens.begin() + static_cast<std::ptrdiff_t>(b * width));
    reported[b] = verdicts[b].reported ? 1 : 0;
  }
  std::filesystem::create_directories(outputs_dir);
  const auto put = [&](const std::string& name, const std::string& bytes) {
    npy::write_file(outputs_dir / (name + ".partial"), bytes);
    std::filesystem::rename(outputs_dir / (name + ".partial"), outputs_dir / name);
  };
  put("reported.npy", npy::encode<std::uint8_t>(reported, {verdicts.size()}));
  put("tokens.npy", npy::encode<token_id>(tokens, {verdicts.size(), width}));
}

//! A verifier whose answers are files (see the file comment). Use it through `chain()` or `tree()`;
//! it counts its calls, so one bridge serves one kit run.
class file_bridge {
 public:
  //! Blocks until call_dir/outputs holds an answer; returns false to end the run instead.
  using waiter = std::function<bool(const std::filesystem::path& call_dir)>;

  //! A bridge whose call directories are `dir`/call_000000, `dir`/call_000001, ...
  explicit file_bridge(std::filesystem::path dir) : dir_(std::move(dir)) {}

  //! Without a waiter (the default), a call without an answer ends the run (`stop_run`, with
  //! `pending()` set); with one, the bridge waits for the answer.
  void set_waiter(waiter w) { wait_ = std::move(w); }
  //! Removes a call's input arrays once its answer has been read, keeping inputs/meta.json (whose
  //! digest is all a replay checks): the run's directory then holds little more than the answers.
  void set_prune_inputs(bool prune) noexcept { prune_ = prune; }

  //! The bridge as a chain verifier for the kit: each call goes through the files.
  chain_verifier chain() {
    return [this](const chain_inputs& in) { return call(in); };
  }
  //! The bridge as a tree verifier for the kit: each call goes through the files.
  tree_verifier tree() {
    return [this](const tree_inputs& in) { return call(in); };
  }
  //! The bridge as a chain-from-logits verifier for the kit: each call goes through the files.
  chain_logits_verifier chain_logits() {
    return [this](const chain_logit_inputs& in) { return call(in); };
  }

  //! The verifier calls made so far.
  std::size_t calls() const noexcept { return next_; }
  //! The call directory that awaits an answer, after the run stopped for one.
  const std::filesystem::path& pending() const noexcept { return pending_; }
  //! Why the bridge stopped the run, when it stopped for an error rather than for an answer.
  const std::string& error() const noexcept { return error_; }

  //! `<dir>/call_<k>`, k zero-padded to 6 digits.
  std::filesystem::path call_dir(std::size_t k) const {
    char name[32];
    std::snprintf(name, sizeof name, "call_%06zu", k);
    return dir_ / name;
  }

 private:
  template <class Inputs>
  std::vector<verdict> call(const Inputs& in) {
    const std::size_t k = next_++;
    const std::filesystem::path cd = call_dir(k);
    std::string raised;
    std::vector<verdict> out;
    try {
      const std::string digest_hex = bridge_detail::digest_of(in);
      prepare(cd, k, in, digest_hex);
      if (!answered(cd)) {
        if (!wait_) {
          pending_ = cd;
          throw stop_run{"call " + std::to_string(k) + " awaits an answer in " + cd.string()};
        }
        if (!wait_(cd)) {
          pending_ = cd;
          throw stop_run{"no answer to call " + std::to_string(k)};
        }
        if (!answered(cd)) fail(cd / "outputs", "neither tokens.npy nor error.txt was written");
      }
      if (std::filesystem::exists(cd / "outputs" / "error.txt")) {
        raised = npy::read_file(cd / "outputs" / "error.txt");
        while (!raised.empty() && (raised.back() == '\n' || raised.back() == '\r')) raised.pop_back();
        if (raised.empty()) raised = "the verifier raised an error (empty error.txt)";
      } else {
        out = read_answer(cd / "outputs", in.batch_size());
      }
      if (prune_)
        for (const auto& entry : std::filesystem::directory_iterator(cd / "inputs"))
          if (entry.path().extension() == ".npy") std::filesystem::remove(entry.path());
    } catch (const std::exception& e) {
      error_ = e.what();
      throw stop_run{error_};
    }
    if (!raised.empty()) throw std::runtime_error(raised);  // the verifier under test raised: the kit judges it
    return out;
  }

  [[noreturn]] static void fail(const std::filesystem::path& where, const std::string& why) {
    throw std::runtime_error(where.string() + ": " + why);
  }

  static bool answered(const std::filesystem::path& cd) {
    return std::filesystem::exists(cd / "outputs" / "tokens.npy") || std::filesystem::exists(cd / "outputs" / "error.txt");
  }

  //! Writes the call's inputs unless they are there; checks them when they are.
  template <class Inputs>
  void prepare(const std::filesystem::path& cd, std::size_t k, const Inputs& in, const std::string& digest_hex) {
    namespace fs = std::filesystem;
    if (fs::exists(cd / "inputs")) {
      const std::string meta = npy::read_file(cd / "inputs" / "meta.json");
      const std::string stored = bridge_detail::json_field(meta, "digest");
      if (stored != digest_hex)
        fail(cd / "inputs", "the kit's inputs for this call (digest " + digest_hex + ") are not the ones stored (digest " +
                                stored + "): the options, the form or the kit changed since this directory was started; " +
                                "use the same options or a new --dir");
      return;
    }
    if (fs::exists(cd / "outputs")) fail(cd, "outputs/ without inputs/");
    const fs::path partial = cd / "inputs.partial";
    fs::remove_all(partial);
    fs::create_directories(partial);
    for (const auto& f : bridge_detail::input_files(in, k, digest_hex)) npy::write_file(partial / f.name, f.bytes);
    fs::rename(partial, cd / "inputs");
    fs::create_directories(cd / "outputs");
  }

  //! The verdicts in outputs/tokens.npy and outputs/reported.npy.
  static std::vector<verdict> read_answer(const std::filesystem::path& outputs, std::size_t B) {
    namespace fs = std::filesystem;
    const std::string tokens_name = (outputs / "tokens.npy").string();
    const npy::array tokens = npy::load(outputs / "tokens.npy");
    if (tokens.type != npy::dtype::i4 && tokens.type != npy::dtype::i8)
      throw npy::format_error(tokens_name + ": dtype '" + std::string(npy::descr(tokens.type)) +
                              "' where int32 or int64 is expected");
    if (tokens.shape.size() != 2 || tokens.shape[0] != B)
      throw npy::format_error(tokens_name + ": shape " + shape_text(tokens.shape) + " where [" + std::to_string(B) +
                              ", W] is expected (one row per request, padded with -1)");
    const std::size_t W = tokens.shape[1];
    const std::vector<std::int64_t> values = npy::integers(tokens, tokens_name);
    std::vector<verdict> out(B);
    for (std::size_t b = 0; b < B; ++b) {
      std::size_t end = W;  // trailing -1 are padding; a -1 before another value is kept (the kit rejects it)
      while (end > 0 && values[b * W + end - 1] == no_token) --end;
      for (std::size_t i = 0; i < end; ++i) {
        const std::int64_t t = values[b * W + i];
        if (t < std::numeric_limits<token_id>::min() || t > std::numeric_limits<token_id>::max())
          throw npy::format_error(tokens_name + ": row " + std::to_string(b) + " holds " + std::to_string(t) +
                                  ", which is not a token id (int32)");
        out[b].tokens.push_back(static_cast<token_id>(t));
      }
    }
    if (fs::exists(outputs / "reported.npy")) {
      const std::string name = (outputs / "reported.npy").string();
      const npy::array reported = npy::load(outputs / "reported.npy");
      if (reported.type != npy::dtype::b1 && reported.type != npy::dtype::u1)
        throw npy::format_error(name + ": dtype '" + std::string(npy::descr(reported.type)) +
                                "' where bool or uint8 is expected");
      if (reported.shape.size() != 1 || reported.shape[0] != B)
        throw npy::format_error(name + ": shape " + shape_text(reported.shape) + " where [" + std::to_string(B) +
                                "] is expected");
      const std::vector<std::int64_t> flags = npy::integers(reported, name);
      for (std::size_t b = 0; b < B; ++b) out[b].reported = flags[b] != 0;
    }
    return out;
  }

  static std::string shape_text(const std::vector<std::size_t>& shape) {
    std::string s = "[";
    for (std::size_t i = 0; i < shape.size(); ++i) s += (i > 0 ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
  }

  std::filesystem::path dir_;
  waiter wait_;
  bool prune_ = false;
  std::size_t next_ = 0;
  std::filesystem::path pending_;
  std::string error_;
};

}  // namespace specdec::conformance
