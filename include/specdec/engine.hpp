//! \file engine.hpp
//! \brief The engine include: what an inference engine needs to run speculative decoding on its own
//! KV cache, and nothing of the research side (theory, simulators, estimators, the single-request
//! `decode_*` functions: research.hpp).
//!
//! - the models an engine implements: `SequenceModel`, `TreeSequenceModel` (model/sequence.hpp) and
//!   their archetypes, to check an engine's adapter against (model/archetypes.hpp);
//! - the step decoder and its stages: `batch_decoder`, `request_options`, `step_event`
//!   (decode/batch_decoder.hpp), verification stages (decode/verification_stage.hpp), drafter stages
//!   (draft/stage.hpp; model-free: draft/prompt_lookup.hpp, draft/suffix_drafter.hpp), length rules
//!   and draft stop rules (length/), the simulated clock (decode/cost_model.hpp);
//! - the kernels for an engine's own loop: `verify`, `verify_from_logits`, `verify_tree` with the
//!   chain, block, typical and tree rules (acceptance/), sampling and warping (sampling/,
//!   distributions/), addressed random streams (random/stream.hpp), execution policies (exec/).
#pragma once

#include "specdec/config.hpp"
#include "specdec/contracts.hpp"
#include "specdec/errors.hpp"
#include "specdec/version.hpp"

#include "specdec/core/batch.hpp"
#include "specdec/core/decode_stats.hpp"
#include "specdec/core/row_batch.hpp"
#include "specdec/core/token.hpp"
#include "specdec/core/tree.hpp"
#include "specdec/exec/policy.hpp"
#include "specdec/random/philox.hpp"
#include "specdec/random/stream.hpp"

#include "specdec/distributions/softmax.hpp"
#include "specdec/distributions/warp.hpp"
#include "specdec/distributions/with_policy.hpp"
#include "specdec/sampling/categorical.hpp"
#include "specdec/sampling/residual.hpp"
#include "specdec/sampling/sample_logits.hpp"
#include "specdec/sampling/with_policy.hpp"

#include "specdec/acceptance/block.hpp"
#include "specdec/acceptance/greedy.hpp"
#include "specdec/acceptance/last_token.hpp"
#include "specdec/acceptance/lenient.hpp"
#include "specdec/acceptance/mtad.hpp"
#include "specdec/acceptance/multi_candidate.hpp"
#include "specdec/acceptance/sample_and_match.hpp"
#include "specdec/acceptance/strict.hpp"
#include "specdec/acceptance/tree.hpp"
#include "specdec/acceptance/typical.hpp"
#include "specdec/acceptance/verify.hpp"

#include "specdec/model/archetypes.hpp"
#include "specdec/model/sequence.hpp"

#include "specdec/draft/model_free.hpp"
#include "specdec/draft/prompt_lookup.hpp"
#include "specdec/draft/stage.hpp"
#include "specdec/draft/suffix_drafter.hpp"
#include "specdec/draft/tree.hpp"
#include "specdec/length/concepts.hpp"
#include "specdec/length/confidence.hpp"
#include "specdec/length/dynamic_goodput.hpp"
#include "specdec/length/fixed.hpp"
#include "specdec/length/heuristic.hpp"

#include "specdec/decode/batch_decoder.hpp"
#include "specdec/decode/cost_model.hpp"
#include "specdec/decode/verification_stage.hpp"
