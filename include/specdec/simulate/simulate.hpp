//! \file simulate/simulate.hpp
//! \brief Umbrella header of the Monte-Carlo simulators that validate the closed forms of
//! specdec/theory/: standard SD (simulate/sd.hpp), SPRINTER (simulate/sprinter.hpp), SV
//! (simulate/sv.hpp), MTAD (simulate/mtad.hpp), trees (simulate/tree.hpp) and block verification
//! (simulate/block.hpp), with their result types (simulate/tally.hpp) and
//! stream addressing (simulate/options.hpp). Core target: only the C++20 standard library. The GPU
//! versions (overloads taking exec::cuda) are in backend/cuda/simulate.cuh (CUDA translation units).
//! Formula-by-formula table: docs/theory.md.
#pragma once

#include "specdec/simulate/block.hpp"
#include "specdec/simulate/mtad.hpp"
#include "specdec/simulate/options.hpp"
#include "specdec/simulate/sd.hpp"
#include "specdec/simulate/sprinter.hpp"
#include "specdec/simulate/sv.hpp"
#include "specdec/simulate/tally.hpp"
#include "specdec/simulate/tree.hpp"
#include "specdec/simulate/with_policy.hpp"
