// Hidden states on llama.cpp: a context made with `context_options::hidden_states` keeps, for every
// sequence, the draft model's last-layer hidden state at its last position (what SPRINTER's verifier
// reads, integrations/llama_cpp/hidden_state_features.hpp).
// - The state after a prompt and after each appended token equals llama.cpp's own embedding of the
//   same tokens decoded at once in a fresh embeddings context (no specdec code; within 1e-3 of the
//   largest entry), for several sequences decoded in one forward; the logits rows equal a context
//   without hidden states'. Negative control: the state of a sequence one token shorter differs.
// - A forward split into several llama_decode calls (a batch of 8 tokens) keeps each sequence's state
//   at its last token, also one whose last token was in an earlier call than the forward's last, and
//   a sequence's state stays valid across a later forward of another sequence (llama.cpp's buffer
//   holds only the last call's states: the sequence model copies them).
// - No state after a rollback (until the next append), on a tree append's sequence, or on a context
//   without hidden states: a clear error.
// - The feature extractor reads the state of the lane that holds the prefix: after the draft's row, the
//   first features are that state; a prefix no lane holds is refused. Under greedy drafting the row
//   features are the same for every prefix while the hidden part is not.
// SPECDEC_TEST_LABELS: llama_cpp
#include "integrations/llama_cpp/models.hpp"
#include "specdec/integrations/llama_cpp/hidden_state_features.hpp"

namespace t = specdec_test::llama;
using Catch::Matchers::Contains;
using specdec::token_id;

namespace {

// llama.cpp's embedding at the last of `tokens`, decoded at once in a fresh embeddings context.
std::vector<float> llama_hidden_state(const t::lc::model& m, const std::vector<token_id>& tokens) {
  llama_context_params params = llama_context_default_params();
  params.n_ctx = 512;
  params.n_batch = params.n_ubatch = 512;
  params.n_threads = params.n_threads_batch = 1;
  params.embeddings = true;
  params.pooling_type = LLAMA_POOLING_TYPE_NONE;
  llama_context* ctx = llama_init_from_model(m.get(), params);
  REQUIRE(ctx != nullptr);
  std::vector<token_id> copy = tokens;
  REQUIRE(llama_decode(ctx, llama_batch_get_one(copy.data(), static_cast<std::int32_t>(copy.size()))) == 0);
  const float* h = llama_get_embeddings_ith(ctx, -1);
  REQUIRE(h != nullptr);
  std::vector<float> out(h, h + llama_model_n_embd(m.get()));
  llama_free(ctx);
  return out;
}

std::vector<float> copy_of(std::span<const float> s) { return {s.begin(), s.end()}; }

}  // namespace

TEST_CASE("a hidden-states context keeps llama.cpp's hidden state at each sequence's last position", "[llama_cpp]") {
  const auto& m = t::model("draft-layers2");
  t::lc::context ctx(m, {.context_per_sequence = 256, .sequences = 3, .threads = 1, .hidden_states = true});
  t::lc::sequence_model seq(ctx);
  REQUIRE(seq.hidden_size() == static_cast<std::size_t>(llama_model_n_embd(m.get())));
  std::vector<std::vector<token_id>> held;
  for (std::size_t i = 0; i < 3; ++i) held.push_back(t::lc::tokenize(m, t::prompts()[i]));
  const std::size_t V = seq.vocab_size();
  std::vector<float> rows(3 * V);
  std::vector<specdec::sequence_append> appends;
  for (std::size_t i = 0; i < 3; ++i) appends.push_back({.sequence = i, .tokens = held[i], .rows = 1});
  seq.forward(appends, rows);
  for (int step = 0; step < 4; ++step) {
    for (std::size_t i = 0; i < 3; ++i) {
      INFO("sequence " << i << ", step " << step);
      const auto reference = llama_hidden_state(m, held[i]);
      CHECK(t::relative_difference(seq.hidden_state(i), reference) < 1e-3);
      CHECK(t::relative_difference(std::span<const float>(rows).subspan(i * V, V), t::fresh_logits(m, held[i])) < 1e-3);
      const std::vector<token_id> shorter(held[i].begin(), held[i].end() - 1);  // negative control
      CHECK(t::relative_difference(seq.hidden_state(i), llama_hidden_state(m, shorter)) > 1e-2);
    }
    // Each sequence appends the argmax of its row, all in one forward.
    appends.clear();
    for (std::size_t i = 0; i < 3; ++i) {
      const auto row = std::span<const float>(rows).subspan(i * V, V);
      held[i].push_back(static_cast<token_id>(std::max_element(row.begin(), row.end()) - row.begin()));
      appends.push_back({.sequence = i, .tokens = std::span<const token_id>(held[i]).last(1), .rows = 1});
    }
    seq.forward(appends, rows);
  }
}

TEST_CASE("hidden states of a forward split into several llama_decode calls, kept across other sequences' forwards",
          "[llama_cpp]") {
  const auto& m = t::model("draft-layers2");
  t::lc::context ctx(m, {.context_per_sequence = 64, .sequences = 2, .batch = 8, .threads = 1, .hidden_states = true});
  t::lc::sequence_model seq(ctx);
  auto first = t::lc::tokenize(m, t::prompts()[0] + ", " + t::prompts()[2]), second = t::lc::tokenize(m, t::prompts()[1]);
  REQUIRE(first.size() >= 12);
  REQUIRE(second.size() >= 6);
  first.resize(12);  // calls [0, 8): first; [8, 16): first's last 4, second's first 4; [16, 18): second's last 2
  second.resize(6);
  const std::size_t V = seq.vocab_size();
  std::vector<float> rows(2 * V);
  const std::vector<specdec::sequence_append> both{{.sequence = 0, .tokens = first, .rows = 1},
                                                   {.sequence = 1, .tokens = second, .rows = 1}};
  seq.forward(both, rows);
  CHECK(seq.engine_stats().decode_calls == 3);
  CHECK(t::relative_difference(seq.hidden_state(0), llama_hidden_state(m, first)) < 1e-3);
  CHECK(t::relative_difference(seq.hidden_state(1), llama_hidden_state(m, second)) < 1e-3);
  second.push_back(first.front());  // another forward of sequence 1 only
  const specdec::sequence_append one{.sequence = 1, .tokens = std::span<const token_id>(second).last(1), .rows = 1};
  seq.forward(std::span(&one, 1), std::span<float>(rows).first(V));
  CHECK(t::relative_difference(seq.hidden_state(1), llama_hidden_state(m, second)) < 1e-3);
  CHECK(t::relative_difference(seq.hidden_state(0), llama_hidden_state(m, first)) < 1e-3);
  CHECK(t::relative_difference(seq.hidden_state(0), llama_hidden_state(m, second)) > 1e-2);  // negative control
}

TEST_CASE("no hidden state where none was computed: a clear error", "[llama_cpp]") {
  const auto& m = t::model("draft-layers2");
  const auto prompt = t::lc::tokenize(m, t::prompts()[0]);
  std::vector<float> row(m.vocab_size());
  const specdec::sequence_append a{.sequence = 0, .tokens = prompt, .rows = 1};
  {
    t::lc::context plain(m, {.context_per_sequence = 256, .sequences = 1, .threads = 1});
    t::lc::sequence_model seq(plain);
    seq.forward(std::span(&a, 1), row);
    CHECK_THROWS_WITH(seq.hidden_state(0), Contains("without hidden_states"));
  }
  t::lc::context ctx(m, {.context_per_sequence = 256, .sequences = 1, .threads = 1, .hidden_states = true});
  t::lc::sequence_model seq(ctx);
  CHECK_THROWS_WITH(seq.hidden_state(0), Contains("no hidden state"));  // nothing appended yet
  seq.forward(std::span(&a, 1), row);
  const auto before = copy_of(seq.hidden_state(0));
  seq.rollback(0, 1);
  CHECK_THROWS_WITH(seq.hidden_state(0), Contains("no hidden state"));
  const specdec::sequence_append again{.sequence = 0, .tokens = std::span<const token_id>(prompt).last(1), .rows = 1};
  seq.forward(std::span(&again, 1), row);
  CHECK(t::relative_difference(seq.hidden_state(0), before) < 1e-3);
}

TEST_CASE("a rollback forgets the hidden state, even when a committed tree brings the length back", "[llama_cpp]") {
  const auto& m = t::model("draft-layers2");
  const auto prompt = t::lc::tokenize(m, t::prompts()[0]);
  REQUIRE(prompt.size() >= 3);
  t::lc::context ctx(m, {.context_per_sequence = 256, .sequences = 1, .threads = 1, .tree_paths = 2, .hidden_states = true});
  t::lc::sequence_model seq(ctx);
  std::vector<float> rows(2 * m.vocab_size());
  const specdec::sequence_append chain{.sequence = 0, .tokens = prompt, .rows = 1};
  seq.forward(std::span(&chain, 1), std::span<float>(rows).first(m.vocab_size()));
  REQUIRE(seq.hidden_state(0).size() == seq.hidden_size());
  seq.rollback(0, 2);
  // The last two tokens again, as a tree of one path, committed whole: the length is back, but no chain
  // append computed a hidden state there.
  const std::vector<std::int32_t> parents{-1, 0};
  const specdec::sequence_append tree{
      .sequence = 0, .tokens = std::span<const token_id>(prompt).last(2), .rows = 2, .parents = parents};
  seq.forward(std::span(&tree, 1), rows);
  const std::vector<std::int32_t> keep{0, 1};
  seq.commit_tree(0, 2, keep);
  REQUIRE(seq.length(0) == prompt.size());
  CHECK_THROWS_WITH(seq.hidden_state(0), Contains("no hidden state"));
}

TEST_CASE("hidden_state_features read the state of the lane that holds the prefix", "[llama_cpp][sprinter]") {
  const auto& m = t::model("draft-layers2");
  t::lc::context ctx(m, {.context_per_sequence = 256, .sequences = 2, .threads = 1, .hidden_states = true});
  t::lc::sequence_model seq(ctx);
  const specdec::prefix_cached_model<t::lc::sequence_model> draft(seq, 2);
  specdec::llama_cpp::hidden_state_features features(draft, seq);
  const std::size_t H = seq.hidden_size();
  REQUIRE(features.feature_size() == H + specdec::draft_row_features::size);

  std::vector<float> logits(m.vocab_size()), q(m.vocab_size()), s(features.feature_size());
  std::vector<std::vector<float>> row_parts, hidden_parts;
  for (std::size_t i = 0; i < 3; ++i) {
    const auto prefix = t::lc::tokenize(m, t::prompts()[i]);
    draft.next_logits(prefix, logits);
    specdec::warp_logits(std::span<const float>(logits), std::span<float>(q), specdec::warp_params{.temperature = 0.0});
    const auto x = static_cast<token_id>(std::max_element(q.begin(), q.end()) - q.begin());
    features.extract({.prefix = prefix, .token = x, .q_row = q}, s);
    INFO("prompt " << i);
    CHECK(t::relative_difference(std::span<const float>(s).first(H), llama_hidden_state(m, prefix)) < 1e-3);
    hidden_parts.emplace_back(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(H));
    row_parts.emplace_back(s.begin() + static_cast<std::ptrdiff_t>(H), s.end());
  }
  // Greedy: q is one-hot, so the row features are constant; the hidden states tell the prefixes apart.
  CHECK(row_parts[0] == row_parts[1]);
  CHECK(row_parts[1] == row_parts[2]);
  CHECK(hidden_parts[0] != hidden_parts[1]);
  CHECK(hidden_parts[1] != hidden_parts[2]);
  // A prefix whose row was never asked for (the last prompt and one more token) is refused.
  auto unseen = t::lc::tokenize(m, t::prompts()[2]);
  unseen.push_back(0);
  CHECK_THROWS_WITH(features.extract({.prefix = unseen, .token = 0, .q_row = q}, s), Contains("no draft lane holds the prefix"));
}
