//! \file research.hpp
//! \brief The research include: the engine include (engine.hpp) plus what a researcher simulates and
//! compares methods with: closed forms (theory/), Monte-Carlo simulators (simulate/), SV's estimators
//! (estimate/), the optimisers of lengths and thresholds (optimize/), the reference models (model/
//! adapters over `Model`s, models/kv_cache.hpp), the model-based drafters (draft/: chain, beams,
//! trees, verifier-gated) and the single-request entry points `decode`, `decode_target_only`,
//! `decode_tree`, `decode_mtad`, `decode_sprinter`, `decode_sv`, `decode_sv_batch` (decode/), each
//! running its request on the engine's `batch_decoder`, with `decode_options` (a subset of
//! `request_options`) and a simulated clock (decode/cost_model.hpp) observing the steps. Each takes its
//! arguments in one order: (policy, target, drafting, method options, prompt, options[, cost]);
//! `decode_target_only` and `decode_sprinter` also have overloads without the policy (exec::seq).
#pragma once

#include "specdec/engine.hpp"

#include "specdec/acceptance/distribution.hpp"
#include "specdec/acceptance/position_test.hpp"
#include "specdec/distributions/divergence.hpp"
#include "specdec/model/adapters.hpp"
#include "specdec/model/concepts.hpp"
#include "specdec/model/score.hpp"
#include "specdec/models/kv_cache.hpp"

#include "specdec/draft/beam.hpp"
#include "specdec/draft/chain.hpp"
#include "specdec/draft/tree_shape.hpp"
#include "specdec/draft/verifier.hpp"
#include "specdec/draft/verifier_gated.hpp"

#include "specdec/decode/decode.hpp"
#include "specdec/decode/likelihood.hpp"
#include "specdec/decode/mtad.hpp"
#include "specdec/decode/sprinter.hpp"
#include "specdec/decode/sv.hpp"
#include "specdec/decode/tree.hpp"

#include "specdec/estimate/acceptance_estimator.hpp"
#include "specdec/estimate/indicators.hpp"
#include "specdec/estimate/information_gain.hpp"
#include "specdec/estimate/similarity.hpp"
#include "specdec/optimize/optimize.hpp"
#include "specdec/simulate/simulate.hpp"
#include "specdec/theory/theory.hpp"
