//! \file optimize/optimize.hpp
//! \brief Umbrella header of the optimisers: golden-section / bisection / integer-argmax kernels
//! (optimize/unimodal.hpp), the draft length that maximises SD's speedup or SV's goodput
//! (optimize/gamma.hpp), and SPRINTER's threshold choice on an ROC curve under a total-variation
//! bound (optimize/threshold.hpp). Core target: only the C++20 standard library.
#pragma once

#include "specdec/optimize/gamma.hpp"
#include "specdec/optimize/threshold.hpp"
#include "specdec/optimize/unimodal.hpp"
#include "specdec/optimize/latency_table.hpp"
#include "specdec/optimize/sv_length.hpp"
#include "specdec/optimize/batch_scheduler.hpp"
