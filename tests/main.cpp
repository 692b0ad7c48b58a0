// The Catch2 main shared by every specdec test executable (compiled once, see tests/CMakeLists.txt).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
