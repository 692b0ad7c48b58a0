// The C++ side of bench/python_overhead.py: times specdec::verify (strict rule, padded float32
// batch, one stream per request) on the shapes the script gives, with the same per-call clock
// (steady_clock around each call, the median of `calls`). Built by the script itself (in a
// subfolder because bench/CMakeLists.txt builds every bench/*.cpp as a Google Benchmark program):
//
//   c++ -std=c++20 -O3 -march=native -DSPECDEC_ENABLE_SIMD=1 -Iinclude bench/python/verify_call.cpp
//
//   verify_call BACKEND B N V CALLS [DIR]   prints the median nanoseconds per call
//
// With SPECDEC_FROM_LOGITS=T in the environment it times specdec::verify_from_logits instead, the q
// rows as the draft's logits and the p rows as the target's, every request at temperature T (what
// bench/python_overhead.py's verify_from_logits case passes).
//
// Without DIR the rows are uniform (every draft accepted); with DIR they are read from DIR/q.bin
// (float32 [B][N][V]), DIR/p.bin (float32 [B][N + 1][V]) and DIR/drafts.bin (int32 [B][N]), written by
// bench/python_throughput.py, so that C++, Python and NumPy verify the same batch.
#include <algorithm>
#include <chrono>
#include <fstream>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

#include <specdec/specdec.hpp>

namespace {

// Fills v from DIR/name (exactly v.size() entries), or exits with a message.
template <class T>
void read_into(const std::string& dir, const char* name, std::vector<T>& v) {
  std::ifstream in(dir + "/" + name, std::ios::binary);
  in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(T)));
  if (!in || in.gcount() != static_cast<std::streamsize>(v.size() * sizeof(T))) {
    std::fprintf(stderr, "cannot read %zu entries from %s/%s\n", v.size(), dir.c_str(), name);
    std::exit(2);
  }
}

template <class Policy>
double median_ns(const Policy& policy, std::size_t B, std::size_t n, std::size_t V, std::size_t calls, const std::string& dir) {
  std::vector<float> q(B * n * V, 1.0f / static_cast<float>(V)), p(B * (n + 1) * V, 1.0f / static_cast<float>(V));
  std::vector<specdec::token_id> drafts(B * n, 3 % static_cast<specdec::token_id>(V));
  if (!dir.empty()) {
    read_into(dir, "q.bin", q);
    read_into(dir, "p.bin", p);
    read_into(dir, "drafts.bin", drafts);
  }
  std::vector<std::int32_t> num_drafts(B, static_cast<std::int32_t>(n));
  std::vector<specdec::random::request_stream> streams(B);
  for (std::size_t b = 0; b < B; ++b) streams[b] = {.seed = 1, .request = static_cast<std::uint32_t>(b + 7), .step = 0};
  const specdec::chain_batch<float> batch{specdec::ragged_layout::padded(num_drafts, n), V, drafts, q, p};
  std::vector<specdec::token_id> tokens(B * (n + 1));
  std::vector<std::int32_t> accepted(B);
  std::vector<specdec::verify_status> status(B);
  const char* from_logits = std::getenv("SPECDEC_FROM_LOGITS");
  const std::vector<specdec::warp_params> params(B, {.temperature = from_logits ? std::atof(from_logits) : 1.0});
  std::vector<double> ns(calls);
  for (std::size_t i = 0; i < calls; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    const specdec::chain_outputs out{tokens, accepted, status};
    if (from_logits != nullptr)
      specdec::verify_from_logits(policy, specdec::strict, batch, std::span<const specdec::warp_params>(params),
                                  specdec::draft_side<float>{}, streams, out);
    else
      specdec::verify(policy, specdec::strict, batch, streams, out);
    ns[i] = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
  }
  std::nth_element(ns.begin(), ns.begin() + static_cast<std::ptrdiff_t>(calls / 2), ns.end());
  return ns[calls / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6 && argc != 7) {
    std::fprintf(stderr, "usage: %s seq|simd B N V CALLS [DIR]\n", argv[0]);
    return 2;
  }
  const std::string backend = argv[1];
  const auto arg = [&](int i) { return static_cast<std::size_t>(std::strtoull(argv[i], nullptr, 10)); };
  const std::size_t B = arg(2), n = arg(3), V = arg(4), calls = std::max<std::size_t>(arg(5), 1);
  const std::string dir = argc == 7 ? argv[6] : "";
  double ns = 0;
  if (backend == "seq") ns = median_ns(specdec::exec::seq, B, n, V, calls, dir);
#if SPECDEC_ENABLE_SIMD
  else if (backend == "simd")
    ns = median_ns(specdec::exec::simd, B, n, V, calls, dir);
#endif
  else {
    std::fprintf(stderr, "backend %s is not built\n", backend.c_str());
    return 2;
  }
  std::printf("%.1f\n", ns);
  return 0;
}
