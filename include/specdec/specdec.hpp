//! \file specdec.hpp
//! \brief The umbrella header of the core: everything that needs only a C++20 compiler (not learn/,
//! stats/ or the backends, which need their own dependencies): the engine include (engine.hpp) and
//! the research include (research.hpp).
#pragma once

#include "specdec/engine.hpp"
#include "specdec/research.hpp"
