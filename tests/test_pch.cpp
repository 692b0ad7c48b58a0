// The translation unit that builds the tests' shared precompiled header (tests/CMakeLists.txt,
// SPECDEC_TEST_PCH); it has no code of its own.
