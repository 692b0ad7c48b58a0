// Compile-time checks of version.hpp (built as part of `all`; see tests/CMakeLists.txt).
#include <specdec/version.hpp>

static_assert(specdec::version.major == SPECDEC_VERSION_MAJOR);
static_assert(specdec::version.minor == SPECDEC_VERSION_MINOR);
static_assert(specdec::version.patch == SPECDEC_VERSION_PATCH);
static_assert(SPECDEC_VERSION == SPECDEC_VERSION_MAJOR * 10000 + SPECDEC_VERSION_MINOR * 100 + SPECDEC_VERSION_PATCH);
static_assert(SPECDEC_VERSION_MINOR < 100 && SPECDEC_VERSION_PATCH < 100, "SPECDEC_VERSION packs two digits each");
