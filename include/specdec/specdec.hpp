//! \file specdec.hpp
//! \brief The umbrella header of the core: everything that needs only a C++20 compiler.
#pragma once

#include "specdec/version.hpp"
#include "specdec/config.hpp"
#include "specdec/errors.hpp"
#include "specdec/contracts.hpp"
#include "specdec/core/token.hpp"
#include "specdec/core/batch.hpp"
#include "specdec/exec/policy.hpp"
#include "specdec/random/philox.hpp"
#include "specdec/random/stream.hpp"
#include "specdec/distributions/softmax.hpp"
#include "specdec/distributions/warp.hpp"
#include "specdec/distributions/divergence.hpp"
#include "specdec/sampling/categorical.hpp"
#include "specdec/sampling/residual.hpp"
#include "specdec/acceptance/strict.hpp"
#include "specdec/acceptance/lenient.hpp"
#include "specdec/acceptance/greedy.hpp"
#include "specdec/acceptance/sample_and_match.hpp"
#include "specdec/acceptance/distribution.hpp"
#include "specdec/acceptance/verify.hpp"
