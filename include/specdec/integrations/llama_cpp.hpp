//! \file integrations/llama_cpp.hpp
//! \brief specdec on llama.cpp (target specdec::llama_cpp, docs/llama-cpp.md): owning handles of models
//! and contexts, a context as a `SequenceModel` for the step decoder, text <-> tokens, vocabularies
//! for drafting across tokenizers, and SPRINTER's and SV's set-up on llama.cpp models (hidden-state
//! features, SV's profiled acceptance estimator).
#pragma once

#include "specdec/integrations/llama_cpp/handles.hpp"
#include "specdec/integrations/llama_cpp/hidden_state_features.hpp"
#include "specdec/integrations/llama_cpp/sequence_model.hpp"
#include "specdec/integrations/llama_cpp/sv_profile.hpp"
#include "specdec/integrations/llama_cpp/tokenizer.hpp"
#include "specdec/integrations/llama_cpp/vocabulary.hpp"
