// Fuzz harness: the reference language model's text pipeline on arbitrary bytes — the tokenizer and
// paragraph splitter, the vocabulary (models/tokenizer.hpp), the n-gram model trained on the text or
// on arbitrary token documents (models/ngram.hpp), and the file loader (models/corpus.hpp).
//
// The first byte holds the options (order, vocabulary cap, what else to run); the rest is split at
// zero bytes into up to four texts. Invariants: no crash or sanitizer report; bad orders, ids outside
// the vocabulary and malformed word lists throw specdec::error and nothing else throws; tokens
// follow the documented rule; a vocabulary built from texts encodes them without <unk> and decoding
// then re-tokenizing gives the same tokens; every n-gram distribution sums to 1 with every entry > 0
// and agrees with `probability`; a loaded file is the bytes written.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <unistd.h>

#include "specdec/errors.hpp"
#include "specdec/models/corpus.hpp"
#include "specdec/models/ngram.hpp"
#include "specdec/models/tokenizer.hpp"

#include "fuzz_input.hpp"

namespace {

using namespace specdec_fuzz;
using specdec::token_id;
using specdec::vocabulary;

bool word_byte(unsigned char c) { return specdec::detail::is_word_byte(c); }

// A token is one punctuation byte, or a word: word bytes (ASCII letters lower-cased), with single
// ' or - between word bytes and . or , between digits.
void check_token(const std::string& t) {
  FUZZ_CHECK(!t.empty());
  const auto at = [&](std::size_t i) { return static_cast<unsigned char>(t[i]); };
  if (!word_byte(at(0))) {
    FUZZ_CHECK(t.size() == 1 && !specdec::detail::is_space_byte(at(0)) && at(0) >= 0x20 && at(0) != 0x7f);
    return;
  }
  FUZZ_CHECK(word_byte(at(t.size() - 1)));
  for (std::size_t i = 0; i < t.size(); ++i) {
    const unsigned char c = at(i);
    FUZZ_CHECK(!(c >= 'A' && c <= 'Z'));
    if (word_byte(c)) continue;
    FUZZ_CHECK(i > 0 && i + 1 < t.size() && word_byte(at(i + 1)) && word_byte(at(i - 1)));
    if (c == '.' || c == ',')
      FUZZ_CHECK(specdec::detail::is_digit_byte(at(i - 1)) && specdec::detail::is_digit_byte(at(i + 1)));
    else
      FUZZ_CHECK(c == '\'' || c == '-');
  }
}

void check_text(std::string_view text) {
  for (const auto& t : specdec::tokenize(text)) check_token(t);
  // Paragraphs are ordered, disjoint views into the text, each with a non-space byte.
  const char* last_end = text.data();
  for (const std::string_view p : specdec::split_paragraphs(text)) {
    FUZZ_CHECK(p.data() >= last_end && p.data() + p.size() <= text.data() + text.size());
    FUZZ_CHECK(
        std::any_of(p.begin(), p.end(), [](char c) { return !specdec::detail::is_space_byte(static_cast<unsigned char>(c)); }));
    last_end = p.data() + p.size();
  }
}

void check_vocabulary(const vocabulary& vocab, std::span<const std::string> texts, std::size_t max_words) {
  FUZZ_CHECK(vocab.size() >= vocabulary::special_count);
  if (max_words > 0) FUZZ_CHECK(vocab.size() <= vocabulary::special_count + max_words);
  for (std::size_t id = vocabulary::special_count; id < vocab.size(); ++id) {
    const std::string& w = vocab.word(static_cast<token_id>(id));
    FUZZ_CHECK(vocab.contains(w) && vocab.id(w) == static_cast<token_id>(id));
  }
  bool threw = false;
  try {
    (void)vocab.word(static_cast<token_id>(vocab.size()));
  } catch (const specdec::error&) {
    threw = true;
  }
  FUZZ_CHECK(threw);
  for (const std::string& text : texts) {
    const std::vector<token_id> ids = vocab.encode(text);
    for (const token_id t : ids)
      FUZZ_CHECK(specdec::in_vocabulary(t, vocab.size()) && t != vocabulary::bos && t != vocabulary::eos);
    const std::string decoded = vocab.decode(ids);
    if (max_words == 0) {  // every word is known: decoding and tokenizing again gives the same tokens
      FUZZ_CHECK(std::find(ids.begin(), ids.end(), vocabulary::unk) == ids.end());
      FUZZ_CHECK(specdec::tokenize(decoded) == specdec::tokenize(text));
    }
  }
}

// Every distribution of the model sums to 1, is > 0 everywhere and agrees with `probability`.
void check_model(const specdec::ngram_model& model, std::span<const token_id> context) {
  const std::size_t V = model.vocab_size();
  std::vector<double> p(V);
  model.next_probs(context, p);
  double sum = 0.0;
  for (const double x : p) {
    FUZZ_CHECK(x > 0.0 && std::isfinite(x));
    sum += x;
  }
  FUZZ_CHECK(std::abs(sum - 1.0) <= 1e-9);
  for (std::size_t w = 0; w < V; w += 1 + V / 8) {
    const double single = model.probability(context, static_cast<token_id>(w));
    FUZZ_CHECK(std::abs(single - p[w]) <= 1e-12 + 1e-9 * p[w]);
  }
  std::vector<float> logits(V);
  model.next_logits(context, logits);
  for (std::size_t w = 0; w < V; ++w) FUZZ_CHECK(std::isfinite(logits[w]) && logits[w] <= 1e-6f);
}

void fuzz_ngram(std::size_t order, std::span<const std::string> texts, std::size_t max_words, byte_reader& extra) {
  const bool order_ok = order >= 1 && order <= specdec::ngram_model::max_order;
  try {
    const specdec::ngram_model model = specdec::train_ngram_model(order, texts, max_words);
    FUZZ_CHECK(order_ok && model.order() == order);
    for (std::size_t m = 1; m <= order; ++m) {
      const specdec::kn_discounts d = model.discounts(m);
      FUZZ_CHECK(d.d1 > 0.0 && d.d1 <= 1.0 && d.d2 > 0.0 && d.d2 <= 2.0 && d.d3 > 0.0 && d.d3 <= 3.0);
    }
    std::vector<std::vector<token_id>> paragraphs;
    for (const std::string& text : texts)
      for (const std::string_view para : specdec::split_paragraphs(text)) paragraphs.push_back(model.vocab().encode(para));
    check_model(model, {});
    for (const auto& doc : paragraphs) {
      for (std::size_t cut = 0; cut <= doc.size(); cut += 1 + doc.size() / 3) check_model(model, std::span(doc).first(cut));
      std::vector<token_id> ended(doc);
      ended.push_back(vocabulary::eos);  // after </s>: the start of a paragraph
      check_model(model, ended);
    }
    const bool any_token = std::any_of(paragraphs.begin(), paragraphs.end(), [](const auto& d) { return !d.empty(); });
    try {
      const double ppl = model.perplexity(paragraphs);
      FUZZ_CHECK(any_token && std::isfinite(ppl) && ppl >= 1.0 - 1e-9);
    } catch (const specdec::error&) {
      FUZZ_CHECK(!any_token);
    }
    // A context of arbitrary ids: refused when an id the model reads is outside the vocabulary.
    std::vector<token_id> context;
    for (int k = extra.byte() % 6; k > 0; --k) context.push_back(token(extra, model.vocab_size()));
    try {
      check_model(model, context);
    } catch (const specdec::error&) {
      FUZZ_CHECK(std::any_of(context.begin(), context.end(),
                             [&](token_id t) { return !specdec::in_vocabulary(t, model.vocab_size()); }));
    }
  } catch (const specdec::error&) {
    FUZZ_CHECK(!order_ok);
  }
}

// A model trained on token documents of arbitrary ids: refused when an id is outside the vocabulary.
void fuzz_documents(std::size_t order, std::span<const std::string> texts, byte_reader& extra) {
  vocabulary vocab = vocabulary::build(texts, 0);
  const std::size_t V = vocab.size();
  std::vector<std::vector<token_id>> docs(1 + extra.byte() % 3);
  bool ids_ok = true;
  for (auto& d : docs)
    for (int k = extra.byte() % 12; k > 0; --k) {
      d.push_back(token(extra, V));
      ids_ok = ids_ok && specdec::in_vocabulary(d.back(), V);
    }
  const bool order_ok = order >= 1 && order <= specdec::ngram_model::max_order;
  try {
    const specdec::ngram_model model(order, std::move(vocab), std::span<const std::vector<token_id>>(docs));
    FUZZ_CHECK(ids_ok && order_ok);
    check_model(model, {});
    for (const auto& d : docs) check_model(model, d);
  } catch (const specdec::error&) {
    FUZZ_CHECK(!ids_ok || !order_ok);
  }
}

// A vocabulary from a word list (the lines of the first text): refused exactly for an empty or a
// repeated word.
void fuzz_word_list(std::string_view text) {
  std::vector<std::string> words;
  for (std::size_t start = 0; start <= text.size();) {
    const std::size_t end = std::min(text.find('\n', start), text.size());
    words.emplace_back(text.substr(start, end - start));
    start = end + 1;
  }
  std::vector<std::string> sorted = words;
  std::sort(sorted.begin(), sorted.end());
  const bool ok = std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end() &&
                  std::none_of(words.begin(), words.end(), [](const std::string& w) { return w.empty(); });
  try {
    const vocabulary vocab(words);
    FUZZ_CHECK(ok && vocab.size() == vocabulary::special_count + words.size());
    for (std::size_t i = 0; i < words.size(); ++i) FUZZ_CHECK(vocab.word(static_cast<token_id>(i + 3)) == words[i]);
  } catch (const specdec::error&) {
    FUZZ_CHECK(!ok);
  }
}

// load_text_file gives back the bytes written; a directory or a missing path is refused.
void fuzz_load(std::string_view text) {
  namespace fs = std::filesystem;
  static const fs::path dir = [] {
    const fs::path d = fs::temp_directory_path() / ("specdec-fuzz-corpus-" + std::to_string(::getpid()));
    fs::create_directories(d);
    return d;
  }();
  const fs::path file = dir / "text";
  {
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
  }
  FUZZ_CHECK(specdec::load_text_file(file) == text);
  const std::vector<fs::path> paths{file, file};
  FUZZ_CHECK(specdec::load_text_files(paths).size() == 2);
  for (const fs::path& bad : {dir, dir / "missing"}) {
    bool threw = false;
    try {
      (void)specdec::load_text_file(bad);
    } catch (const specdec::error&) {
      threw = true;
    }
    FUZZ_CHECK(threw);
  }
  const auto found = specdec::default_corpus_paths(dir);
  FUZZ_CHECK(found.size() == 1 && found[0] == file);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  byte_reader in(data, size);
  const std::uint8_t options = in.byte();
  // bits 0-1: order 1..4 (bit 7 set: 0 or 17, invalid); bits 2-3: vocabulary cap 0 (none), 1, 5, 50;
  // bit 4: a word-list vocabulary; bit 5: token documents; bit 6: the file loader.
  static constexpr std::array<std::size_t, 4> caps{0, 1, 5, 50};
  const std::size_t order = (options & 0x80u) ? ((options & 1u) ? 17u : 0u) : 1u + (options & 3u);
  const std::size_t max_words = caps[(options >> 2) & 3u];
  const std::string_view rest = in.rest();
  std::vector<std::string> texts;
  for (std::size_t start = 0; start <= rest.size() && texts.size() < 4;) {
    const std::size_t end = std::min(rest.find('\0', start), rest.size());
    texts.emplace_back(rest.substr(start, end - start));
    start = end + 1;
  }
  for (const std::string& t : texts) check_text(t);
  check_vocabulary(vocabulary::build(texts, max_words), texts, max_words);
  // The bytes after the first text drive the extra choices (contexts, documents).
  const std::string_view tail = texts.size() > 1 ? std::string_view(texts.back()) : std::string_view();
  byte_reader extra(reinterpret_cast<const std::uint8_t*>(tail.data()), tail.size());
  fuzz_ngram(order, texts, max_words, extra);
  if (options & 0x10u) fuzz_word_list(texts.front());
  if (options & 0x20u) fuzz_documents(order, texts, extra);
  if (options & 0x40u) fuzz_load(texts.front());
  return 0;
}
