// The README's usage example: verify one request's two drafted tokens with the lossless rule.
#include <cstdio>
#include <vector>

#include <specdec/specdec.hpp>

int main() {
  const std::size_t V = 4;
  const std::vector<specdec::token_id> drafts{2, 0};       // sampled by the draft from the rows q
  const std::vector<float> q{0.1f, 0.2f, 0.6f, 0.1f,       // q for position 0
                             0.7f, 0.1f, 0.1f, 0.1f};      // q for position 1
  const std::vector<float> p{0.2f,  0.2f,  0.5f,  0.1f,    // target p for position 0
                             0.4f,  0.3f,  0.2f,  0.1f,    // position 1
                             0.25f, 0.25f, 0.25f, 0.25f};  // the bonus row
  const specdec::random::request_stream stream{.seed = 42, .request = 7, .step = 0};

  const auto r = specdec::verify_chain(specdec::exec::seq, specdec::strict, drafts, q, p, V, stream);

  std::printf("accepted %d of %zu drafts; emitted:", r.num_accepted, drafts.size());
  for (const specdec::token_id t : r.tokens) std::printf(" %d", t);
  std::printf("  (valid: %s)\n", specdec::is_valid(r.status) ? "yes" : "no");
  return specdec::is_valid(r.status) ? 0 : 1;
}
