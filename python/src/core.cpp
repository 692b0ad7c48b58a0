// specdec._core: the nanobind extension behind the `specdec` Python package.
//
// Thin on purpose: each function checks its arrays (CPU, C-contiguous, dtype; a TypeError names the
// argument, nothing is copied or converted), builds the C++ views (chain_batch, row_batch, streams),
// releases the GIL, calls the policy-first C++ API and returns new NumPy arrays. Shapes are checked
// by the Python layer (specdec/__init__.py) with the argument names, and again by the C++ library
// (specdec::error becomes specdec.Error, a ValueError).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "numpy_out.hpp"
#include "rules.hpp"
#include "specdec/acceptance/block.hpp"
#include "specdec/acceptance/concepts.hpp"
#include "specdec/acceptance/greedy.hpp"
#include "specdec/acceptance/lenient.hpp"
#include "specdec/acceptance/sample_and_match.hpp"
#include "specdec/acceptance/strict.hpp"
#include "specdec/acceptance/tree.hpp"
#include "specdec/acceptance/typical.hpp"
#include "specdec/acceptance/verify.hpp"
#include "specdec/distributions/with_policy.hpp"
#include "specdec/errors.hpp"
#include "specdec/random/stream.hpp"
#include "specdec/sampling/with_policy.hpp"
#include "specdec/version.hpp"

namespace nb = nanobind;
using namespace nb::literals;
using specdec_python::rule_spec;
using specdec_python::to_numpy;
using specdec_python::with_policy;
using specdec_python::with_rule;
using specdec_python::with_tree_rule;

namespace {

// Any array at all: no constraint, so nanobind never converts (copies) one; the checks below refuse.
using array = nb::ndarray<nb::ro>;

std::string dtype_name(const nb::dlpack::dtype& d) {
  const char* kind = "unknown";
  switch (static_cast<nb::dlpack::dtype_code>(d.code)) {
    case nb::dlpack::dtype_code::Int: kind = "int"; break;
    case nb::dlpack::dtype_code::UInt: kind = "uint"; break;
    case nb::dlpack::dtype_code::Float: kind = "float"; break;
    case nb::dlpack::dtype_code::Bfloat: kind = "bfloat"; break;
    case nb::dlpack::dtype_code::Complex: kind = "complex"; break;
    case nb::dlpack::dtype_code::Bool: kind = "bool"; break;
    default: break;
  }
  return std::string(kind) + std::to_string(d.bits);
}

[[noreturn]] void refuse(const char* name, const std::string& what) {
  throw nb::type_error((std::string(name) + ": " + what).c_str());
}

// Whether an array's entries lie in C order (extents of 1 may have any stride; an empty array has no
// memory to lay out).
template <class Array>
bool c_contiguous(const Array& a) {
  if (a.size() == 0) return true;
  std::int64_t expected = 1;
  for (std::size_t i = a.ndim(); i-- > 0;) {
    if (a.shape(i) != 1 && a.stride(i) != expected) return false;
    expected *= static_cast<std::int64_t>(a.shape(i));
  }
  return true;
}

// CPU memory, C order.
template <class Array>
void check_memory(const Array& a, const char* name) {
  if (a.device_type() != nb::device::cpu::value) refuse(name, "must be in CPU memory (this build has no CUDA backend)");
  if (!c_contiguous(a))
    refuse(name, "must be C-contiguous (specdec does not copy its inputs; pass numpy.ascontiguousarray(...))");
}

// Whether a row array holds float64 (true) or float32 (false); any other dtype is refused.
bool is_double(const array& a, const char* name) {
  check_memory(a, name);
  if (a.dtype() == nb::dtype<float>()) return false;
  if (a.dtype() == nb::dtype<double>()) return true;
  refuse(name, "dtype must be float32 or float64, got " + dtype_name(a.dtype()) + " (specdec does not convert its inputs)");
}

// A contiguous view of an array of T (dtype checked).
template <class T>
std::span<const T> view(const array& a, const char* name) {
  check_memory(a, name);
  if (a.dtype() != nb::dtype<T>())
    refuse(name, "has dtype " + dtype_name(a.dtype()) + ", expected " + dtype_name(nb::dtype<T>()));
  return {static_cast<const T*>(a.data()), a.size()};
}

// Status enums as a new uint8 NumPy array.
template <class Status>
nb::ndarray<nb::numpy, std::uint8_t> flags_of(const std::vector<Status>& status) {
  std::unique_ptr<std::uint8_t[]> flags(new std::uint8_t[status.size()]);
  for (std::size_t i = 0; i < status.size(); ++i) flags[i] = static_cast<std::uint8_t>(status[i]);
  return to_numpy(std::move(flags), {status.size()});
}

// One value per request: an array's entries, or `fill` for every request when there is no array.
template <class T>
struct column {
  std::span<const T> values;
  T fill{};
  T operator[](std::size_t b) const { return values.data() != nullptr ? values[b] : fill; }
};

// The B requests' streams; `output_positions` keys the target's own samples by output position
// (random/stream.hpp; `keyed_by_round` where it holds that value).
std::vector<specdec::random::request_stream> streams_of(std::size_t B, column<std::uint64_t> seeds,
                                                        column<std::uint32_t> request_ids, column<std::uint32_t> steps,
                                                        column<std::uint32_t> output_positions) {
  std::vector<specdec::random::request_stream> out(B);
  for (std::size_t b = 0; b < B; ++b)
    out[b] = {.seed = seeds[b], .request = request_ids[b], .step = steps[b], .output_position = output_positions[b]};
  return out;
}

// One request_stream per row from the seeds, ids and steps arrays; with `output_positions` (one
// uint32 per row) the target's own samples are keyed by output position.
std::vector<specdec::random::request_stream> make_streams(const array& seeds, const array& request_ids, const array& steps,
                                                          const std::optional<array>& output_positions = std::nullopt) {
  const auto s = view<std::uint64_t>(seeds, "seeds");
  const auto r = view<std::uint32_t>(request_ids, "request_ids");
  const auto t = view<std::uint32_t>(steps, "steps");
  if (r.size() != s.size() || t.size() != s.size())
    throw nb::value_error("seeds, request_ids and steps must have one entry per request");
  const auto o = output_positions ? view<std::uint32_t>(*output_positions, "output_positions") : std::span<const std::uint32_t>{};
  if (output_positions && o.size() != s.size()) throw nb::value_error("output_positions must have one entry per request");
  return streams_of(s.size(), {s}, {r}, {t}, {o, specdec::random::keyed_by_round});
}

// Per-row warp parameters from four arrays of one entry per row.
std::vector<specdec::warp_params> make_warp(const array& temperature, const array& top_k, const array& top_p, const array& min_p,
                                            const char* prefix) {
  const std::string p(prefix);
  const auto t = view<double>(temperature, (p + "temperature").c_str());
  const auto k = view<std::int32_t>(top_k, (p + "top_k").c_str());
  const auto tp = view<double>(top_p, (p + "top_p").c_str());
  const auto mp = view<double>(min_p, (p + "min_p").c_str());
  if (k.size() != t.size() || tp.size() != t.size() || mp.size() != t.size())
    throw nb::value_error((p + "temperature, top_k, top_p and min_p must have one entry per request").c_str());
  std::vector<specdec::warp_params> out(t.size());
  for (std::size_t b = 0; b < t.size(); ++b) {
    out[b] = {.temperature = t[b], .top_k = k[b], .top_p = tp[b], .min_p = mp[b]};
    specdec::validate(out[b]);
  }
  return out;
}

// (tokens int32 [B, W], num_accepted int32 [B], status uint8 [B]), or None when written to `out`
using verify_result = nb::object;

struct chain_inputs {
  specdec::ragged_layout layout;
  std::size_t vocab;
  std::span<const specdec::token_id> tokens;
  std::vector<specdec::random::request_stream> streams;
};

chain_inputs make_chain(bool packed, const array& num_drafts, std::size_t max_drafts, std::size_t vocab,
                        const array& draft_tokens, const array& seeds, const array& request_ids, const array& steps,
                        const std::optional<array>& output_positions) {
  const auto n = view<std::int32_t>(num_drafts, "num_drafts");
  chain_inputs in{packed ? specdec::ragged_layout::packed(n) : specdec::ragged_layout::padded(n, max_drafts), vocab,
                  view<specdec::token_id>(draft_tokens, "draft_tokens"),
                  make_streams(seeds, request_ids, steps, output_positions)};
  if (in.streams.size() != n.size()) throw nb::value_error("seeds, request_ids and steps must have one entry per request");
  return in;
}

// A caller's output array: CPU, C-contiguous, writable, dtype T, `size` entries.
template <class T>
std::span<T> writable(nb::ndarray<>& a, const char* name, std::size_t size) {
  check_memory(a, name);
  if (a.dtype() != nb::dtype<T>())
    refuse(name, "has dtype " + dtype_name(a.dtype()) + ", expected " + dtype_name(nb::dtype<T>()));
  if (a.size() != size) throw nb::value_error((std::string(name) + ": expected " + std::to_string(size) + " entries").c_str());
  return {static_cast<T*>(a.data()), size};
}

// Where a chain verification writes: the caller's arrays (all three or none), or new ones.
struct out_arrays {
  std::optional<nb::ndarray<>> tokens, num_accepted, status;
};

// Runs `call(outputs)` with the GIL released. Returns the outputs as new NumPy arrays, or None
// when they were written into the caller's arrays (`dest`, null or empty: none given).
template <class Call>
nb::object run_chain(const specdec::ragged_layout& layout, out_arrays* dest, Call&& call) {
  const std::size_t B = layout.batch_size(), W = layout.max_drafts() + 1;
  out_arrays none;
  out_arrays& o = dest ? *dest : none;
  const bool given = o.tokens.has_value();
  if (given != o.num_accepted.has_value() || given != o.status.has_value())
    throw nb::value_error("out: give tokens, num_accepted and status together");
  std::unique_ptr<std::int32_t[]> own_tokens, own_accepted;
  std::span<std::int32_t> tokens, accepted;
  std::span<std::uint8_t> flags;
  if (given) {
    tokens = writable<std::int32_t>(*o.tokens, "out.tokens", B * W);
    accepted = writable<std::int32_t>(*o.num_accepted, "out.num_accepted", B);
    flags = writable<std::uint8_t>(*o.status, "out.status", B);
  } else {
    own_tokens.reset(new std::int32_t[B * W]);
    own_accepted.reset(new std::int32_t[B]);
    tokens = {own_tokens.get(), B * W};
    accepted = {own_accepted.get(), B};
  }
  std::vector<specdec::verify_status> status(B);
  {
    nb::gil_scoped_release release;
    call(specdec::chain_outputs{tokens, accepted, std::span<specdec::verify_status>(status)});
  }
  if (given) {
    for (std::size_t b = 0; b < B; ++b) flags[b] = static_cast<std::uint8_t>(status[b]);
    return nb::none();
  }
  return nb::make_tuple(to_numpy(std::move(own_tokens), {B, W}), to_numpy(std::move(own_accepted), {B}), flags_of(status));
}

// Verifies a checked chain batch (`in`) against target rows (the dtype of both row arrays checked).
verify_result verify_chain(const rule_spec& rule, const std::string& backend, const chain_inputs& in,
                           const std::optional<array>& draft_probs, const array& target_probs,
                           const specdec::verify_options& options, out_arrays* dest) {
  const bool dbl = is_double(target_probs, "target_probs");
  if (draft_probs && is_double(*draft_probs, "draft_probs") != dbl)
    refuse("draft_probs", "must have target_probs' dtype (" + dtype_name(target_probs.dtype()) + ")");
  auto typed = [&]<class T>(T*) {
    const specdec::chain_batch<T> batch{in.layout, in.vocab, in.tokens,
                                        draft_probs ? view<T>(*draft_probs, "draft_probs") : std::span<const T>{},
                                        view<T>(target_probs, "target_probs")};
    return run_chain(in.layout, dest, [&](const specdec::chain_outputs& out) {
      with_policy(backend, [&](const auto& policy) {
        with_rule(rule, [&](const auto& r) { specdec::verify(policy, r, batch, in.streams, out, options); });
      });
    });
  };
  return dbl ? typed(static_cast<double*>(nullptr)) : typed(static_cast<float*>(nullptr));
}

verify_result verify(const rule_spec& rule, const std::string& backend, bool packed, const array& num_drafts,
                     std::size_t max_drafts, std::size_t vocab, const array& draft_tokens,
                     const std::optional<array>& draft_probs, const array& target_probs, const array& seeds,
                     const array& request_ids, const array& steps, const std::optional<array>& output_positions,
                     bool check_normalisation, double normalisation_tolerance, out_arrays* dest) {
  const chain_inputs in =
      make_chain(packed, num_drafts, max_drafts, vocab, draft_tokens, seeds, request_ids, steps, output_positions);
  return verify_chain(rule, backend, in, draft_probs, target_probs,
                      {.check_normalisation = check_normalisation, .normalisation_tolerance = normalisation_tolerance}, dest);
}

// ---- specdec.verify's direct call ------------------------------------------------------------------
// The per-call overhead goal (docs/python.md, "Call overhead"): `specdec.verify` first hands the
// user's arguments, as given, to `verify_direct`, which accepts them only when each already is what
// the checked path (specdec/__init__.py) would pass on unchanged: a C-contiguous CPU array of the
// exact dtype and shape, a Python int where one number may stand for every request, None where the
// argument is optional, numpy arrays for `out`. Anything else (another dtype, a list, a value out
// of range, a wrong shape) is declined with None, and the checked path converts it or raises its
// error naming the argument. An accepted call runs `verify_chain` as the checked path does.

// `h` as a C-contiguous CPU array of dtype T (one of Ts), or nothing.
template <class... Ts>
std::optional<array> exact_array(nb::handle h) {
  array a;
  if (h.is_none() || !nb::try_cast(h, a, false) || a.device_type() != nb::device::cpu::value ||
      !((a.dtype() == nb::dtype<Ts>()) || ...) || !c_contiguous(a))
    return std::nullopt;
  return a;
}

// `h` as one value per request, each at most `max`: a [B] array of T, or a Python int standing for
// every request when `scalar_ok`; or nothing.
template <class T>
std::optional<column<T>> exact_column(nb::handle h, std::size_t B, bool scalar_ok, T max = std::numeric_limits<T>::max()) {
  if (PyLong_CheckExact(h.ptr())) {
    T v{};
    if (!scalar_ok || !nb::try_cast(h, v, false) || v > max) return std::nullopt;
    return column<T>{{}, v};
  }
  const auto a = exact_array<T>(h);
  if (!a || a->ndim() != 1 || a->shape(0) != B) return std::nullopt;
  const std::span<const T> values(static_cast<const T*>(a->data()), B);
  if (max < std::numeric_limits<T>::max() && std::any_of(values.begin(), values.end(), [max](T v) { return v > max; }))
    return std::nullopt;  // scanned only when a bound is below the type's own
  return column<T>{values};
}

// The requests' draft counts: `num_drafts` as given (None: n each, padded), each in [0, n] padded,
// summing to N packed; or nothing.
std::optional<specdec::ragged_layout> exact_layout(const array& tokens, nb::handle num_drafts) {
  if (tokens.ndim() == 2) {  // padded [B, n]
    const std::size_t B = tokens.shape(0), n = tokens.shape(1);
    if (n > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max())) return std::nullopt;
    const auto c = num_drafts.is_none() ? std::optional(column<std::int32_t>{{}, static_cast<std::int32_t>(n)})
                                        : exact_column<std::int32_t>(num_drafts, B, true, static_cast<std::int32_t>(n));
    if (!c) return std::nullopt;
    std::vector<std::int32_t> counts(B);
    for (std::size_t b = 0; b < B; ++b)
      if ((counts[b] = (*c)[b]) < 0) return std::nullopt;
    return specdec::ragged_layout::padded(counts, n);
  }
  const auto c = exact_array<std::int32_t>(num_drafts);  // packed [N]: num_drafts [B] required
  if (!c || c->ndim() != 1) return std::nullopt;
  const std::span<const std::int32_t> counts(static_cast<const std::int32_t*>(c->data()), c->shape(0));
  std::int64_t total = 0;
  for (const std::int32_t n : counts) {
    if (n < 0) return std::nullopt;
    total += n;
  }
  if (total != static_cast<std::int64_t>(tokens.shape(0))) return std::nullopt;
  return specdec::ragged_layout::packed(counts);
}

// `out` as the caller's (tokens [B, W] int32, num_accepted [B] int32, status [B] uint8) numpy
// arrays, C-contiguous and writable; or nothing.
std::optional<out_arrays> exact_out(nb::handle out, std::size_t B, std::size_t W) {
  static const nb::handle numpy_array = nb::object(nb::module_::import_("numpy").attr("ndarray")).release();  // kept
  if (!PyTuple_Check(out.ptr()) || PyTuple_GET_SIZE(out.ptr()) != 3) return std::nullopt;
  out_arrays o;
  const auto take = [&]<class T>(std::optional<nb::ndarray<>>& to, std::size_t i, T*, std::size_t size, std::size_t ndim) {
    nb::ndarray<> a;  // not `nb::ro`: a read-only array is not taken
    const nb::handle h = PyTuple_GET_ITEM(out.ptr(), static_cast<Py_ssize_t>(i));
    if (!nb::isinstance(h, numpy_array) || !nb::try_cast(h, a, false) || a.dtype() != nb::dtype<T>() || a.ndim() != ndim ||
        a.size() != size || a.shape(0) != B || !c_contiguous(a))
      return false;
    to = a;
    return true;
  };
  if (!take(o.tokens, 0, static_cast<std::int32_t*>(nullptr), B * W, 2) || o.tokens->shape(1) != W ||
      !take(o.num_accepted, 1, static_cast<std::int32_t*>(nullptr), B, 1) ||
      !take(o.status, 2, static_cast<std::uint8_t*>(nullptr), B, 1))
    return std::nullopt;
  return o;
}

// The rule a rule object's `_direct_spec` names: the tuple (kind, a, b, c, d) of `rule_spec`; or nothing.
std::optional<rule_spec> exact_rule(nb::handle spec) {
  if (!PyTuple_CheckExact(spec.ptr()) || PyTuple_GET_SIZE(spec.ptr()) != 5) return std::nullopt;
  const auto item = [&](Py_ssize_t i) { return nb::handle(PyTuple_GET_ITEM(spec.ptr(), i)); };
  rule_spec r{};
  if (!nb::try_cast(item(0), r.kind, false) || !nb::try_cast(item(1), r.a, false) || !nb::try_cast(item(2), r.b, false) ||
      !nb::try_cast(item(3), r.c, false) || !nb::try_cast(item(4), r.d, false))
    return std::nullopt;
  return r;
}

// What both direct calls share, accepted: the rule, the policy, the chain's layout and streams, the
// target rows, the draft rows (when given) and the caller's `out`.
struct exact_chain_call {
  rule_spec rule;
  std::string policy;
  chain_inputs in;
  array tokens;
  array target;
  std::optional<array> draft;
  std::optional<out_arrays> dest;
};

// The arguments both direct calls share, as given (`draft_rows` None: no q rows, which a rule that
// reads q declines); or nothing.
std::optional<exact_chain_call> exact_chain(nb::handle rule_tuple, nb::handle backend, nb::handle draft_tokens,
                                            nb::handle draft_rows, nb::handle target_rows, nb::handle seeds,
                                            nb::handle request_ids, nb::handle steps, nb::handle num_drafts,
                                            nb::handle output_positions, nb::handle out) {
  const auto spec = exact_rule(rule_tuple);
  if (!spec || spec->kind < 0 || spec->kind > 5 || !nb::isinstance<nb::str>(backend)) return std::nullopt;
  std::string policy = nb::cast<std::string>(backend);
  if (policy != "seq" && (policy != "simd" || !SPECDEC_ENABLE_SIMD)) return std::nullopt;
  const auto tokens = exact_array<std::int32_t>(draft_tokens);
  if (!tokens || (tokens->ndim() != 1 && tokens->ndim() != 2)) return std::nullopt;
  const std::size_t rows_ndim = tokens->ndim() + 1;
  const auto target = exact_array<float, double>(target_rows);
  if (!target || target->ndim() != rows_ndim || target->shape(rows_ndim - 1) < 1) return std::nullopt;
  const std::size_t V = target->shape(rows_ndim - 1);
  bool reads_q = true;
  with_rule(*spec, [&](const auto& r) { reads_q = specdec::reads_draft_distribution<std::decay_t<decltype(r)>>; });
  std::optional<array> draft;
  if (draft_rows.is_none()) {
    if (reads_q) return std::nullopt;
  } else {
    draft = exact_array<float, double>(draft_rows);
    if (!draft || draft->dtype() != target->dtype() || draft->ndim() != rows_ndim || draft->shape(rows_ndim - 1) != V)
      return std::nullopt;
    for (std::size_t i = 0; i + 1 < rows_ndim; ++i)
      if (draft->shape(i) != tokens->shape(i)) return std::nullopt;
  }
  const auto layout = exact_layout(*tokens, num_drafts);
  if (!layout) return std::nullopt;
  const std::size_t B = layout->batch_size();
  const bool target_shape_ok = tokens->ndim() == 2 ? target->shape(0) == B && target->shape(1) == tokens->shape(1) + 1
                                                   : target->shape(0) == tokens->shape(0) + B;
  if (!target_shape_ok) return std::nullopt;
  const auto s = exact_column<std::uint64_t>(seeds, B, true);
  const auto r = exact_column<std::uint32_t>(request_ids, B, B == 1);
  const auto t = exact_column<std::uint32_t>(steps, B, true);
  const auto o = output_positions.is_none()
                     ? std::optional(column<std::uint32_t>{{}, specdec::random::keyed_by_round})
                     : exact_column<std::uint32_t>(output_positions, B, true, specdec::random::keyed_by_round - 1);
  if (!s || !r || !t || !o) return std::nullopt;
  std::optional<out_arrays> dest;
  if (!out.is_none() && !(dest = exact_out(out, B, layout->max_drafts() + 1))) return std::nullopt;
  return exact_chain_call{
      *spec,
      std::move(policy),
      {*layout, V, {static_cast<const specdec::token_id*>(tokens->data()), tokens->size()}, streams_of(B, *s, *r, *t, *o)},
      *tokens,
      *target,
      std::move(draft),
      std::move(dest)};
}

// specdec.verify's arguments as the user gave them: the results (or `out`), or None when declined.
nb::object verify_direct(nb::handle rule_tuple, nb::handle backend, nb::handle draft_tokens, nb::handle draft_probs,
                         nb::handle target_probs, nb::handle seeds, nb::handle request_ids, nb::handle steps,
                         nb::handle num_drafts, nb::handle output_positions, nb::handle check_normalisation,
                         nb::handle normalisation_tolerance, nb::handle out) {
  if (!PyBool_Check(check_normalisation.ptr()) || !PyFloat_CheckExact(normalisation_tolerance.ptr())) return nb::none();
  auto c = exact_chain(rule_tuple, backend, draft_tokens, draft_probs, target_probs, seeds, request_ids, steps, num_drafts,
                       output_positions, out);
  if (!c) return nb::none();
  nb::object ret = verify_chain(c->rule, c->policy, c->in, c->draft, c->target,
                                {.check_normalisation = check_normalisation.ptr() == Py_True,
                                 .normalisation_tolerance = PyFloat_AS_DOUBLE(normalisation_tolerance.ptr())},
                                c->dest ? &*c->dest : nullptr);
  return c->dest ? nb::borrow(out) : ret;
}

// Verifies a checked chain batch (`in`) from target logits warped with `target_params` (the dtypes of
// the row arrays checked); the draft side as specdec::draft_side.
verify_result from_logits_chain(const rule_spec& rule, const std::string& backend, const chain_inputs& in,
                                const std::optional<array>& draft_rows, bool draft_rows_are_probs,
                                const std::optional<array>& q_at_drafts, const array& target_logits,
                                std::span<const specdec::warp_params> target_params,
                                std::span<const specdec::warp_params> draft_params, out_arrays* dest) {
  const bool dbl = is_double(target_logits, "target_logits");
  const char* draft_name = draft_rows_are_probs ? "draft_probs" : "draft_logits";
  if (draft_rows && is_double(*draft_rows, draft_name) != dbl)
    refuse(draft_name, "must have target_logits' dtype (" + dtype_name(target_logits.dtype()) + ")");
  if (q_at_drafts && is_double(*q_at_drafts, "q_at_drafts") != dbl)
    refuse("q_at_drafts", "must have target_logits' dtype (" + dtype_name(target_logits.dtype()) + ")");
  auto typed = [&]<class T>(T*) {
    const specdec::chain_batch<T> batch{in.layout, in.vocab, in.tokens,
                                        draft_rows ? view<T>(*draft_rows, draft_name) : std::span<const T>{},
                                        view<T>(target_logits, "target_logits")};
    const specdec::draft_side<T> draft{
        .rows = draft_rows_are_probs ? specdec::draft_rows_kind::probabilities : specdec::draft_rows_kind::logits,
        .params = draft_params,
        .q_at_drafts = q_at_drafts ? view<T>(*q_at_drafts, "q_at_drafts") : std::span<const T>{}};
    return run_chain(in.layout, dest, [&](const specdec::chain_outputs& out) {
      with_policy(backend, [&](const auto& policy) {
        with_rule(rule,
                  [&](const auto& r) { specdec::verify_from_logits(policy, r, batch, target_params, draft, in.streams, out); });
      });
    });
  };
  return dbl ? typed(static_cast<double*>(nullptr)) : typed(static_cast<float*>(nullptr));
}

verify_result verify_from_logits(const rule_spec& rule, const std::string& backend, bool packed, const array& num_drafts,
                                 std::size_t max_drafts, std::size_t vocab, const array& draft_tokens,
                                 const std::optional<array>& draft_rows, bool draft_rows_are_probs,
                                 const std::optional<array>& q_at_drafts, const array& target_logits, const array& seeds,
                                 const array& request_ids, const array& steps, const std::optional<array>& output_positions,
                                 const array& temperature, const array& top_k, const array& top_p, const array& min_p,
                                 const std::optional<array>& draft_temperature, const std::optional<array>& draft_top_k,
                                 const std::optional<array>& draft_top_p, const std::optional<array>& draft_min_p,
                                 out_arrays* dest) {
  const chain_inputs in =
      make_chain(packed, num_drafts, max_drafts, vocab, draft_tokens, seeds, request_ids, steps, output_positions);
  const auto target_params = make_warp(temperature, top_k, top_p, min_p, "");
  std::vector<specdec::warp_params> draft_params;
  if (draft_temperature) draft_params = make_warp(*draft_temperature, *draft_top_k, *draft_top_p, *draft_min_p, "draft_");
  return from_logits_chain(rule, backend, in, draft_rows, draft_rows_are_probs, q_at_drafts, target_logits, target_params,
                           draft_params, dest);
}

// One real number per request as given: a [B] float64 array, or a Python float or int standing for
// every request (`fill` where the argument is None and `none_is` holds it); or nothing.
std::optional<column<double>> exact_reals(nb::handle h, std::size_t B, std::optional<double> none_is = std::nullopt) {
  if (h.is_none()) return none_is ? std::optional(column<double>{{}, *none_is}) : std::nullopt;
  if (PyFloat_CheckExact(h.ptr())) return column<double>{{}, PyFloat_AS_DOUBLE(h.ptr())};
  if (PyLong_CheckExact(h.ptr())) {
    const double v = PyLong_AsDouble(h.ptr());
    if (v == -1.0 && PyErr_Occurred()) {  // too large for a double: the checked path says so
      PyErr_Clear();
      return std::nullopt;
    }
    return column<double>{{}, v};
  }
  const auto a = exact_array<double>(h);
  if (!a || a->ndim() != 1 || a->shape(0) != B) return std::nullopt;
  return column<double>{{static_cast<const double*>(a->data()), B}};
}

// The requests' warp parameters as given (each one valid), None standing for the unwarped value when
// `none_is_unwarped`; or nothing.
std::optional<std::vector<specdec::warp_params>> exact_warp(std::size_t B, nb::handle temperature, nb::handle top_k,
                                                            nb::handle top_p, nb::handle min_p, bool none_is_unwarped) {
  const auto unwarped = [&](double v) { return none_is_unwarped ? std::optional(v) : std::nullopt; };
  const auto t = exact_reals(temperature, B, unwarped(1.0));
  const auto k = top_k.is_none() && none_is_unwarped ? std::optional(column<std::int32_t>{{}, 0})
                                                     : exact_column<std::int32_t>(top_k, B, true);
  const auto tp = exact_reals(top_p, B, unwarped(1.0));
  const auto mp = exact_reals(min_p, B, unwarped(0.0));
  if (!t || !k || !tp || !mp) return std::nullopt;
  std::vector<specdec::warp_params> params(B);
  for (std::size_t b = 0; b < B; ++b) {
    params[b] = {.temperature = (*t)[b], .top_k = (*k)[b], .top_p = (*tp)[b], .min_p = (*mp)[b]};
    try {
      specdec::validate(params[b]);
    } catch (const specdec::error&) {  // the checked path raises it, naming the argument
      return std::nullopt;
    }
  }
  return params;
}

// specdec.verify_from_logits's arguments as the user gave them: the results (or `out`), or None when declined.
nb::object verify_from_logits_direct(nb::handle rule_tuple, nb::handle backend, nb::handle draft_tokens, nb::handle target_logits,
                                     nb::handle seeds, nb::handle request_ids, nb::handle steps, nb::handle draft_logits,
                                     nb::handle draft_probs, nb::handle q_at_drafts, nb::handle num_drafts,
                                     nb::handle output_positions, nb::handle temperature, nb::handle top_k, nb::handle top_p,
                                     nb::handle min_p, nb::handle draft_temperature, nb::handle draft_top_k,
                                     nb::handle draft_top_p, nb::handle draft_min_p, nb::handle out) {
  if (!draft_logits.is_none() && !draft_probs.is_none()) return nb::none();
  const bool are_probs = !draft_probs.is_none();
  auto c = exact_chain(rule_tuple, backend, draft_tokens, are_probs ? draft_probs : draft_logits, target_logits, seeds,
                       request_ids, steps, num_drafts, output_positions, out);
  if (!c) return nb::none();
  std::optional<array> q_at;
  if (!q_at_drafts.is_none()) {
    q_at = exact_array<float, double>(q_at_drafts);
    if (!q_at || q_at->dtype() != c->target.dtype() || q_at->ndim() != c->tokens.ndim()) return nb::none();
    for (std::size_t i = 0; i < q_at->ndim(); ++i)
      if (q_at->shape(i) != c->tokens.shape(i)) return nb::none();
  }
  const std::size_t B = c->in.layout.batch_size();
  const auto target_params = exact_warp(B, temperature, top_k, top_p, min_p, false);
  const bool draft_warped =
      !draft_temperature.is_none() || !draft_top_k.is_none() || !draft_top_p.is_none() || !draft_min_p.is_none();
  if (!target_params || (draft_warped && draft_logits.is_none())) return nb::none();
  std::vector<specdec::warp_params> draft_params;
  if (draft_warped) {
    auto p = exact_warp(B, draft_temperature, draft_top_k, draft_top_p, draft_min_p, true);
    if (!p) return nb::none();
    draft_params = std::move(*p);
  }
  nb::object ret = from_logits_chain(c->rule, c->policy, c->in, c->draft, are_probs, q_at, c->target, *target_params,
                                     draft_params, c->dest ? &*c->dest : nullptr);
  return c->dest ? nb::borrow(out) : ret;
}

// (tokens int32 [B, D + 1], path int32 [B, D + 1], num_accepted int32 [B], status uint8 [B]),
// D the deepest node of the batch.
// From logits when `temperature` is given (with top_k, top_p, min_p): the target rows are logits,
// warped per request (C++ verify_tree_from_logits); the draft rows are probabilities either way.
nb::tuple verify_tree(const rule_spec& rule, const std::string& backend, const array& num_nodes, const array& parents,
                      std::size_t vocab, const array& tokens, const std::optional<array>& draft_probs, const array& target_probs,
                      const array& seeds, const array& request_ids, const array& steps, bool check_normalisation,
                      double normalisation_tolerance, const std::optional<array>& temperature, const std::optional<array>& top_k,
                      const std::optional<array>& top_p, const std::optional<array>& min_p) {
  const char* target_name = temperature ? "target_logits" : "target_probs";
  const auto layout =
      specdec::tree_layout::from_parents(view<std::int32_t>(num_nodes, "num_nodes"), view<std::int32_t>(parents, "parents"));
  const auto streams = make_streams(seeds, request_ids, steps);
  const std::size_t B = layout.batch_size(), W = layout.max_depth() + 1;
  if (streams.size() != B) throw nb::value_error("seeds, request_ids and steps must have one entry per request");
  const bool dbl = is_double(target_probs, target_name);
  if (draft_probs && is_double(*draft_probs, "draft_probs") != dbl)
    refuse("draft_probs", std::string("must have ") + target_name + "' dtype (" + dtype_name(target_probs.dtype()) + ")");
  const specdec::verify_options options{.check_normalisation = check_normalisation,
                                        .normalisation_tolerance = normalisation_tolerance};
  std::vector<specdec::warp_params> params;
  if (temperature) {
    if (!top_k || !top_p || !min_p) throw nb::value_error("temperature, top_k, top_p and min_p: give all four or none");
    params = make_warp(*temperature, *top_k, *top_p, *min_p, "");
    if (params.size() != B) throw nb::value_error("temperature, top_k, top_p and min_p must have one entry per request");
  }
  std::unique_ptr<std::int32_t[]> out_tokens(new std::int32_t[B * W]), out_path(new std::int32_t[B * W]),
      accepted(new std::int32_t[B]);
  std::vector<specdec::verify_status> status(B);
  const specdec::tree_outputs out{std::span<specdec::token_id>(out_tokens.get(), B * W),
                                  std::span<std::int32_t>(out_path.get(), B * W), std::span<std::int32_t>(accepted.get(), B),
                                  std::span<specdec::verify_status>(status)};
  auto typed = [&]<class T>(T*) {
    const specdec::tree_batch<T> batch{layout, vocab, view<specdec::token_id>(tokens, "tokens"),
                                       draft_probs ? view<T>(*draft_probs, "draft_probs") : std::span<const T>{},
                                       view<T>(target_probs, target_name)};
    nb::gil_scoped_release release;
    with_policy(backend, [&](const auto& policy) {
      with_tree_rule(rule, [&](const auto& r) {
        if (temperature)
          specdec::verify_tree_from_logits(policy, r, batch, std::span<const specdec::warp_params>(params), streams, out,
                                           options);
        else
          specdec::verify_tree(policy, r, batch, streams, out, options);
      });
    });
  };
  dbl ? typed(static_cast<double*>(nullptr)) : typed(static_cast<float*>(nullptr));
  return nb::make_tuple(to_numpy(std::move(out_tokens), {B, W}), to_numpy(std::move(out_path), {B, W}),
                        to_numpy(std::move(accepted), {B}), flags_of(status));
}

using sample_output = nb::tuple;  // (tokens int32 [R], row status uint8 [R])

sample_output pack_samples(std::unique_ptr<std::int32_t[]> tokens, const std::vector<specdec::row_status>& status) {
  return nb::make_tuple(to_numpy(std::move(tokens), {status.size()}), flags_of(status));
}

// Row r: a categorical sample of probs[r] with streams[r].open(position, purpose).uniform().
sample_output sample_rows(const std::string& backend, const array& probs, std::size_t vocab,
                          std::span<const specdec::random::request_stream> streams, std::uint32_t position,
                          std::uint8_t purpose) {
  const bool dbl = is_double(probs, "probs");
  const std::size_t R = streams.size();
  std::unique_ptr<std::int32_t[]> tokens(new std::int32_t[R]);
  std::vector<specdec::row_status> status(R);
  const specdec::row_sampling at{.position = position, .what = static_cast<specdec::random::purpose>(purpose)};
  auto typed = [&]<class T>(T*) {
    const specdec::row_batch<const T> rows(view<T>(probs, "probs"), vocab);
    nb::gil_scoped_release release;
    with_policy(backend, [&](const auto& policy) {
      specdec::sample_categorical(policy, rows, streams, std::span<specdec::token_id>(tokens.get(), R),
                                  std::span<specdec::row_status>(status), at);
    });
  };
  dbl ? typed(static_cast<double*>(nullptr)) : typed(static_cast<float*>(nullptr));
  return pack_samples(std::move(tokens), status);
}

sample_output sample(const std::string& backend, const array& probs, std::size_t vocab, const array& seeds,
                     const array& request_ids, const array& steps, std::uint32_t position, std::uint8_t purpose) {
  return sample_rows(backend, probs, vocab, make_streams(seeds, request_ids, steps), position, purpose);
}

// Row r: a sample of warp(softmax(logits[r] / T_r)) with streams[r].open(position, purpose).uniform().
sample_output sample_logit_rows(const std::string& backend, const array& logits, std::size_t vocab,
                                std::span<const specdec::random::request_stream> streams,
                                std::span<const specdec::warp_params> params, std::uint32_t position, std::uint8_t purpose) {
  const bool dbl = is_double(logits, "logits");
  const std::size_t R = streams.size();
  if (params.size() != R) throw nb::value_error("one set of warp parameters per row");
  std::unique_ptr<std::int32_t[]> tokens(new std::int32_t[R]);
  std::vector<specdec::row_status> status(R);
  const auto what = static_cast<specdec::random::purpose>(purpose);
  auto typed = [&]<class T>(T*) {
    const specdec::row_batch<const T> rows(view<T>(logits, "logits"), vocab);
    if (rows.rows() != R) throw nb::value_error("logits: one row per request");
    nb::gil_scoped_release release;
    with_policy(backend, [&](const auto& policy) {
      for (std::size_t r = 0; r < R; ++r) {
        const auto s = specdec::sample_logits(policy, rows.row(r), params[r], streams[r].open(position, what).uniform());
        tokens[r] = s.token;
        status[r] = s.status;
      }
    });
  };
  dbl ? typed(static_cast<double*>(nullptr)) : typed(static_cast<float*>(nullptr));
  return pack_samples(std::move(tokens), status);
}

sample_output sample_logits(const std::string& backend, const array& logits, std::size_t vocab, const array& seeds,
                            const array& request_ids, const array& steps, std::uint32_t position, std::uint8_t purpose,
                            const array& temperature, const array& top_k, const array& top_p, const array& min_p) {
  return sample_logit_rows(backend, logits, vocab, make_streams(seeds, request_ids, steps),
                           make_warp(temperature, top_k, top_p, min_p, ""), position, purpose);
}

// What both sampling direct calls share, accepted: the policy, the [R, V] rows, their streams, the
// position and the purpose.
struct exact_rows_call {
  std::string policy;
  array rows;
  std::vector<specdec::random::request_stream> streams;
  std::uint32_t position;
  std::uint8_t purpose;
};

// The sampling calls' arguments as given (rows [R, V], V >= 1); or nothing.
std::optional<exact_rows_call> exact_rows(nb::handle backend, nb::handle rows, nb::handle seeds, nb::handle request_ids,
                                          nb::handle steps, nb::handle position, nb::handle purpose) {
  if (!nb::isinstance<nb::str>(backend)) return std::nullopt;
  std::string policy = nb::cast<std::string>(backend);
  if (policy != "seq" && (policy != "simd" || !SPECDEC_ENABLE_SIMD)) return std::nullopt;
  const auto a = exact_array<float, double>(rows);
  if (!a || a->ndim() != 2 || a->shape(1) < 1) return std::nullopt;
  const std::size_t R = a->shape(0);
  std::uint32_t at = 0;
  if (!PyLong_CheckExact(position.ptr()) || !nb::try_cast(position, at, false) || !PyLong_Check(purpose.ptr()) ||
      PyBool_Check(purpose.ptr()))
    return std::nullopt;
  const long what = PyLong_AsLong(purpose.ptr());  // an int or a specdec.Purpose (an IntEnum)
  if (what < 0 || what > 255) {                    // -1 also when too large for a long
    PyErr_Clear();
    return std::nullopt;
  }
  const auto s = exact_column<std::uint64_t>(seeds, R, true);
  const auto r = exact_column<std::uint32_t>(request_ids, R, R == 1);
  const auto t = exact_column<std::uint32_t>(steps, R, true);
  if (!s || !r || !t) return std::nullopt;
  return exact_rows_call{std::move(policy), *a,
                         streams_of(R, *s, *r, *t, column<std::uint32_t>{{}, specdec::random::keyed_by_round}), at,
                         static_cast<std::uint8_t>(what)};
}

// specdec.sample's arguments as the user gave them: the results, or None when declined.
nb::object sample_direct(nb::handle backend, nb::handle probs, nb::handle seeds, nb::handle request_ids, nb::handle steps,
                         nb::handle position, nb::handle purpose) {
  const auto c = exact_rows(backend, probs, seeds, request_ids, steps, position, purpose);
  if (!c) return nb::none();
  return sample_rows(c->policy, c->rows, c->rows.shape(1), c->streams, c->position, c->purpose);
}

// specdec.sample_logits's arguments as the user gave them: the results, or None when declined.
nb::object sample_logits_direct(nb::handle backend, nb::handle logits, nb::handle seeds, nb::handle request_ids, nb::handle steps,
                                nb::handle temperature, nb::handle top_k, nb::handle top_p, nb::handle min_p, nb::handle position,
                                nb::handle purpose) {
  const auto c = exact_rows(backend, logits, seeds, request_ids, steps, position, purpose);
  if (!c) return nb::none();
  const auto params = exact_warp(c->streams.size(), temperature, top_k, top_p, min_p, false);
  if (!params) return nb::none();
  return sample_logit_rows(c->policy, c->rows, c->rows.shape(1), c->streams, *params, c->position, c->purpose);
}

// Row-wise softmax (temperatures empty: all 1) or warp (temperature, top-k, top-p, min-p); output
// rows have the input's dtype.
template <bool Warp>
nb::tuple row_transform(const std::string& backend, const array& logits, std::size_t vocab, const array& temperature,
                        const std::optional<array>& top_k, const std::optional<array>& top_p, const std::optional<array>& min_p) {
  const bool dbl = is_double(logits, "logits");
  auto typed = [&]<class T>(T*) -> nb::tuple {
    const specdec::row_batch<const T> in(view<T>(logits, "logits"), vocab);
    const std::size_t R = in.rows();
    std::unique_ptr<T[]> probs(new T[R * vocab]);
    const specdec::row_batch<T> out(std::span<T>(probs.get(), R * vocab), vocab);
    std::vector<specdec::row_status> status(R);
    std::vector<specdec::warp_params> params;
    const auto temps = view<double>(temperature, "temperature");
    if constexpr (Warp) params = make_warp(temperature, *top_k, *top_p, *min_p, "");
    {
      nb::gil_scoped_release release;
      with_policy(backend, [&](const auto& policy) {
        if constexpr (Warp)
          specdec::warp_logits(policy, in, out, std::span<const specdec::warp_params>(params),
                               std::span<specdec::row_status>(status));
        else
          specdec::softmax(policy, in, out, std::span<specdec::row_status>(status), temps);
      });
    }
    return nb::make_tuple(to_numpy(std::move(probs), {R, vocab}), flags_of(status));
  };
  return dbl ? typed(static_cast<double*>(nullptr)) : typed(static_cast<float*>(nullptr));
}

}  // namespace

#if SPECDEC_PY_CONFORMANCE
void bind_conformance(nb::module_& m);  // conformance.cpp
#endif
void bind_theory(nb::module_& m);            // theory.cpp
void bind_simulate(nb::module_& m);          // simulate.cpp
void bind_simulate_methods(nb::module_& m);  // simulate_methods.cpp
void bind_decoder(nb::module_& m);           // decoder.cpp

NB_MODULE(_core, m) {
  m.doc() = "specdec's C++ kernels (use the `specdec` package, not this module)";
  nb::exception<specdec::error>(m, "Error", PyExc_ValueError);

  m.attr("__version__") = std::to_string(SPECDEC_VERSION_MAJOR) + "." + std::to_string(SPECDEC_VERSION_MINOR) + "." +
                          std::to_string(SPECDEC_VERSION_PATCH);
  m.attr("HAS_SIMD") = static_cast<bool>(SPECDEC_ENABLE_SIMD);
  bind_theory(m);
  bind_simulate(m);
  bind_simulate_methods(m);
  bind_decoder(m);
#if SPECDEC_PY_CONFORMANCE
  bind_conformance(m);
  m.attr("HAS_CONFORMANCE") = true;
#else
  m.attr("HAS_CONFORMANCE") = false;
#endif

  nb::class_<out_arrays>(m, "OutArrays")
      .def(nb::init<>())
      .def(
          "__init__",
          [](out_arrays* self, nb::ndarray<> tokens, nb::ndarray<> num_accepted, nb::ndarray<> status) {
            new (self) out_arrays{tokens, num_accepted, status};
          },
          "tokens"_a, "num_accepted"_a, "status"_a);

  nb::class_<rule_spec>(m, "RuleSpec")
      .def(nb::init<int, double, double, double, int>(), "kind"_a, "a"_a = 0.0, "b"_a = 0.0, "c"_a = 0.0, "d"_a = 0)
      .def_ro("kind", &rule_spec::kind);

  m.def("verify", &verify, "rule"_a, "backend"_a, "packed"_a, "num_drafts"_a, "max_drafts"_a, "vocab"_a, "draft_tokens"_a,
        "draft_probs"_a.none(), "target_probs"_a, "seeds"_a, "request_ids"_a, "steps"_a, "output_positions"_a.none(),
        "check_normalisation"_a, "normalisation_tolerance"_a, "out"_a.none());
  m.def("verify_direct", &verify_direct, "rule"_a.none(), "backend"_a.none(), "draft_tokens"_a.none(), "draft_probs"_a.none(),
        "target_probs"_a.none(), "seeds"_a.none(), "request_ids"_a.none(), "steps"_a.none(), "num_drafts"_a.none(),
        "output_positions"_a.none(), "check_normalisation"_a.none(), "normalisation_tolerance"_a.none(), "out"_a.none(),
        "specdec.verify's arguments as given: the results, or None when any is not already in the form the checked "
        "path passes on (that path then converts it or names the error).");
  m.def("verify_from_logits", &verify_from_logits, "rule"_a, "backend"_a, "packed"_a, "num_drafts"_a, "max_drafts"_a, "vocab"_a,
        "draft_tokens"_a, "draft_rows"_a.none(), "draft_rows_are_probs"_a, "q_at_drafts"_a.none(), "target_logits"_a, "seeds"_a,
        "request_ids"_a, "steps"_a, "output_positions"_a.none(), "temperature"_a, "top_k"_a, "top_p"_a, "min_p"_a,
        "draft_temperature"_a.none(), "draft_top_k"_a.none(), "draft_top_p"_a.none(), "draft_min_p"_a.none(), "out"_a.none());
  m.def("verify_from_logits_direct", &verify_from_logits_direct, "rule"_a.none(), "backend"_a.none(), "draft_tokens"_a.none(),
        "target_logits"_a.none(), "seeds"_a.none(), "request_ids"_a.none(), "steps"_a.none(), "draft_logits"_a.none(),
        "draft_probs"_a.none(), "q_at_drafts"_a.none(), "num_drafts"_a.none(), "output_positions"_a.none(),
        "temperature"_a.none(), "top_k"_a.none(), "top_p"_a.none(), "min_p"_a.none(), "draft_temperature"_a.none(),
        "draft_top_k"_a.none(), "draft_top_p"_a.none(), "draft_min_p"_a.none(), "out"_a.none(),
        "specdec.verify_from_logits's arguments as given: the results, or None when any is not already in the form the "
        "checked path passes on (that path then converts it or names the error).");
  m.def("verify_tree", &verify_tree, "rule"_a, "backend"_a, "num_nodes"_a, "parents"_a, "vocab"_a, "tokens"_a,
        "draft_probs"_a.none(), "target_probs"_a, "seeds"_a, "request_ids"_a, "steps"_a, "check_normalisation"_a,
        "normalisation_tolerance"_a, "temperature"_a.none() = nb::none(), "top_k"_a.none() = nb::none(),
        "top_p"_a.none() = nb::none(), "min_p"_a.none() = nb::none());
  m.def("sample", &sample, "backend"_a, "probs"_a, "vocab"_a, "seeds"_a, "request_ids"_a, "steps"_a, "position"_a, "purpose"_a);
  m.def("sample_direct", &sample_direct, "backend"_a.none(), "probs"_a.none(), "seeds"_a.none(), "request_ids"_a.none(),
        "steps"_a.none(), "position"_a.none(), "purpose"_a.none(),
        "specdec.sample's arguments as given: the results, or None when any is not already in final form.");
  m.def("sample_logits_direct", &sample_logits_direct, "backend"_a.none(), "logits"_a.none(), "seeds"_a.none(),
        "request_ids"_a.none(), "steps"_a.none(), "temperature"_a.none(), "top_k"_a.none(), "top_p"_a.none(), "min_p"_a.none(),
        "position"_a.none(), "purpose"_a.none(),
        "specdec.sample_logits's arguments as given: the results, or None when any is not already in final form.");
  m.def("sample_logits", &sample_logits, "backend"_a, "logits"_a, "vocab"_a, "seeds"_a, "request_ids"_a, "steps"_a, "position"_a,
        "purpose"_a, "temperature"_a, "top_k"_a, "top_p"_a, "min_p"_a);
  m.def("softmax", &row_transform<false>, "backend"_a, "logits"_a, "vocab"_a, "temperature"_a, "top_k"_a.none() = nb::none(),
        "top_p"_a.none() = nb::none(), "min_p"_a.none() = nb::none());
  m.def("warp_logits", &row_transform<true>, "backend"_a, "logits"_a, "vocab"_a, "temperature"_a, "top_k"_a.none(),
        "top_p"_a.none(), "min_p"_a.none());
  m.def(
      "_data_address", [](const array& a) { return reinterpret_cast<std::uintptr_t>(a.data()); }, "a"_a,
      "The address the kernels read an array at, as this module's array arguments import it (the tests check that it "
      "is the array's own memory: nothing is copied).");
  m.def(
      "uniform",
      [](std::uint64_t seed, std::uint32_t request, std::uint32_t step, std::uint32_t position, std::uint8_t purpose,
         std::uint32_t index) {
        specdec::random::philox_stream s(specdec::random::stream_address{.seed = seed,
                                                                         .request = request,
                                                                         .step = step,
                                                                         .position = position,
                                                                         .what = static_cast<specdec::random::purpose>(purpose)});
        double u = 0.0;
        for (std::uint32_t i = 0; i <= index; ++i) u = s.uniform();
        return u;
      },
      "seed"_a, "request"_a, "step"_a, "position"_a, "purpose"_a, "index"_a = 0,
      "The index-th uniform double of the stream at (seed, request, step, position, purpose).");
  m.def(
      "philox4x32_10",
      [](std::uint32_t c0, std::uint32_t c1, std::uint32_t c2, std::uint32_t c3, std::uint32_t k0, std::uint32_t k1) {
        const auto w = specdec::random::philox4x32_10({c0, c1, c2, c3}, {k0, k1});
        return nb::make_tuple(w[0], w[1], w[2], w[3]);
      },
      "c0"_a, "c1"_a, "c2"_a, "c3"_a, "k0"_a, "k1"_a, "Philox4x32-10 of a counter and a key: four 32-bit words.");
}
