//! \file integrations/llama_cpp.hpp
//! \brief specdec on llama.cpp (target specdec::llama_cpp, docs/llama-cpp.md): owning handles of models
//! and contexts, a context as a `SequenceModel` for the step decoder, text <-> tokens, and vocabularies
//! for drafting across tokenizers.
#pragma once

#include "specdec/integrations/llama_cpp/handles.hpp"
#include "specdec/integrations/llama_cpp/hidden_state_features.hpp"
#include "specdec/integrations/llama_cpp/sequence_model.hpp"
#include "specdec/integrations/llama_cpp/tokenizer.hpp"
#include "specdec/integrations/llama_cpp/vocabulary.hpp"
