//! \file theory/theory.hpp
//! \brief Umbrella header of the theory module: the closed forms of standard speculative decoding
//! (Leviathan et al. 2023; theory/sd.hpp), SPRINTER (theory/sprinter.hpp), Speculative Verification
//! (theory/sv.hpp), MTAD (theory/mtad.hpp), token trees (theory/tree.hpp), the optimal multi-draft
//! acceptance (theory/multi_draft_bound.hpp) and block verification (theory/block.hpp), with latency
//! profiles (theory/latency_profile.hpp).
//! Core target: only the C++20 standard library. Formula-by-formula table: docs/theory.md.
#pragma once

#include "specdec/theory/block.hpp"
#include "specdec/theory/latency_profile.hpp"
#include "specdec/theory/mtad.hpp"
#include "specdec/theory/multi_draft_bound.hpp"
#include "specdec/theory/sd.hpp"
#include "specdec/theory/sprinter.hpp"
#include "specdec/theory/sv.hpp"
#include "specdec/theory/tree.hpp"
