//! \file integrations/llama_cpp/handles.hpp
//! \brief Owning handles of llama.cpp's model and context (`llama_cpp::model`, `llama_cpp::context`),
//! with the checks a caller needs before decoding: the file loads, the vocabularies of a target and a
//! draft agree. Part of the optional target `specdec::llama_cpp` (docs/llama-cpp.md).
#pragma once

#include <llama.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "specdec/errors.hpp"

namespace specdec::llama_cpp {

namespace detail {
inline void init_backend() {
  static std::once_flag once;
  std::call_once(once, [] { llama_backend_init(); });
}
inline void quiet_log(ggml_log_level level, const char* text, void*) {
  if (level == GGML_LOG_LEVEL_ERROR) std::fputs(text, stderr);
}
}  // namespace detail

//! Makes llama.cpp print only its errors (it logs every load and context creation to stderr).
inline void quiet_logs() { llama_log_set(detail::quiet_log, nullptr); }

//! A loaded GGUF model (weights on the CPU).
class model {
 public:
  //! \throws specdec::engine_error when the file does not exist or llama.cpp cannot load it.
  explicit model(const std::filesystem::path& path) : path_(path.string()) {
    detail::init_backend();
    if (!std::ifstream(path).good()) throw engine_error("specdec::llama_cpp::model: cannot open '" + path_ + "'");
    llama_model_params params = llama_model_default_params();
    params.n_gpu_layers = 0;
    handle_.reset(llama_model_load_from_file(path_.c_str(), params));
    if (!handle_) throw engine_error("specdec::llama_cpp::model: '" + path_ + "' is not a GGUF model llama.cpp can load");
  }

  //! The llama.cpp model handle.
  llama_model* get() const noexcept { return handle_.get(); }
  //! The model's vocabulary.
  const llama_vocab* vocab() const noexcept { return llama_model_get_vocab(handle_.get()); }
  //! V, the number of tokens of the vocabulary.
  std::size_t vocab_size() const noexcept { return static_cast<std::size_t>(llama_vocab_n_tokens(vocab())); }
  //! The file the model was loaded from.
  const std::string& path() const noexcept { return path_; }

 private:
  struct free_model {
    void operator()(llama_model* m) const noexcept { llama_model_free(m); }
  };
  std::string path_;
  std::unique_ptr<llama_model, free_model> handle_;
};

//! Checks that a draft can propose tokens to a target: the same number of tokens, the same text for
//! every token, the same BOS and EOS. \throws specdec::error naming the first difference.
inline void check_same_vocabulary(const model& target, const model& draft) {
  const std::string pair = " ('" + target.path() + "' and '" + draft.path() + "')";
  if (target.vocab_size() != draft.vocab_size())
    throw error("specdec::llama_cpp: the target has " + std::to_string(target.vocab_size()) + " tokens and the draft " +
                std::to_string(draft.vocab_size()) + pair);
  const llama_vocab* a = target.vocab();
  const llama_vocab* b = draft.vocab();
  if (llama_vocab_bos(a) != llama_vocab_bos(b) || llama_vocab_eos(a) != llama_vocab_eos(b))
    throw error("specdec::llama_cpp: the target and the draft have different BOS or EOS tokens" + pair);
  for (llama_token t = 0; t < static_cast<llama_token>(target.vocab_size()); ++t)
    if (std::string(llama_vocab_get_text(a, t)) != llama_vocab_get_text(b, t))
      throw error("specdec::llama_cpp: token " + std::to_string(t) + " differs between the target and the draft" + pair);
}

//! How a context is made. `sequences` is the most sequences alive at once; each gets
//! `context_per_sequence` positions of KV cache of its own. `tree_paths` > 0 makes the context take
//! tree-shaped appends (`llama_cpp::sequence_model` as a `TreeSequenceModel`): that many more llama.cpp
//! sequence ids are kept for the root-to-leaf paths of the trees of one forward, and the KV cache is
//! unified (one pool of `context_per_sequence * sequences` cells that every sequence id shares, so a
//! path shares its state's cells instead of copying them). `sequences + tree_paths` is at most 256
//! (llama.cpp's limit on sequence ids).
struct context_options {
  std::uint32_t context_per_sequence = 2048;  //!< positions of KV cache per sequence
  std::uint32_t sequences = 1;                //!< the most sequences alive at once
  std::uint32_t batch = 512;                  //!< tokens per llama_decode call (longer forwards are split)
  int threads = 0;                            //!< 0: the hardware's threads
  std::uint32_t tree_paths = 0;               //!< sequence ids for tree paths (0: no tree-shaped appends)
  //! Also output every appended token's last-layer hidden state (llama.cpp's embeddings, no pooling),
  //! read by `sequence_model::hidden_state`. llama.cpp then computes the output layer for every
  //! appended token, not only the rows asked for.
  bool hidden_states = false;
};

//! A llama.cpp context (KV cache and compute buffers) over a model that outlives it.
class context {
 public:
  //! \throws specdec::error on zero sizes or more than llama.cpp's 256 sequence ids;
  //!         specdec::engine_error when llama.cpp cannot create the context.
  context(const model& m, const context_options& options) : model_(&m), options_(options) {
    if (options.context_per_sequence == 0 || options.sequences == 0 || options.batch == 0)
      throw error("specdec::llama_cpp::context: the context, sequence count and batch must be positive");
    if (std::size_t{options.sequences} + options.tree_paths > llama_max_parallel_sequences())
      throw error("specdec::llama_cpp::context: llama.cpp holds at most " + std::to_string(llama_max_parallel_sequences()) +
                  " sequence ids per context (sequences + tree_paths)");
    llama_context_params params = llama_context_default_params();
    params.n_ctx = options.context_per_sequence * options.sequences;
    params.n_seq_max = options.sequences + options.tree_paths;
    params.n_batch = options.batch;
    params.n_ubatch = options.batch;
    // Chains only: each sequence has context_per_sequence cells of its own. Trees: one shared pool, so
    // that a path's sequence id can share its state's cells (llama_memory_seq_cp within one stream).
    params.kv_unified = options.tree_paths > 0;
    const int threads = options.threads > 0 ? options.threads : static_cast<int>(std::thread::hardware_concurrency());
    params.n_threads = params.n_threads_batch = threads > 0 ? threads : 1;
    params.no_perf = true;
    params.embeddings = options.hidden_states;
    if (options.hidden_states) params.pooling_type = LLAMA_POOLING_TYPE_NONE;
    handle_.reset(llama_init_from_model(m.get(), params));
    if (!handle_) throw engine_error("specdec::llama_cpp::context: llama.cpp could not create a context for '" + m.path() + "'");
  }

  //! The llama.cpp context handle.
  llama_context* get() const noexcept { return handle_.get(); }
  //! The model the context runs.
  const model& owner() const noexcept { return *model_; }
  //! The context's memory (its KV cache).
  llama_memory_t memory() const noexcept { return llama_get_memory(handle_.get()); }
  //! Positions each sequence may hold: the size asked for (llama.cpp may round its cache up).
  std::size_t context_per_sequence() const noexcept {
    return std::min<std::size_t>(options_.context_per_sequence, llama_n_ctx_seq(handle_.get()));
  }
  //! The most sequences alive at once (`context_options::sequences`).
  std::size_t max_sequences() const noexcept { return options_.sequences; }
  //! The sequence ids kept for tree paths (`context_options::tree_paths`; 0: no tree-shaped appends).
  std::size_t tree_paths() const noexcept { return options_.tree_paths; }
  //! Whether every appended token's hidden state is output (`context_options::hidden_states`).
  bool hidden_states() const noexcept { return options_.hidden_states; }
  //! The width of a hidden state (the model's embedding size).
  std::size_t hidden_size() const noexcept { return static_cast<std::size_t>(llama_model_n_embd(model_->get())); }
  //! Tokens per llama_decode call (llama.cpp's n_batch).
  std::size_t batch() const noexcept { return llama_n_batch(handle_.get()); }

 private:
  struct free_context {
    void operator()(llama_context* c) const noexcept { llama_free(c); }
  };
  const model* model_;
  context_options options_;
  std::unique_ptr<llama_context, free_context> handle_;
};

}  // namespace specdec::llama_cpp
