// The one source of specverify_test_pch (cmake/SpecverifyHelpers.cmake): CMake
// builds a target's precompiled header only for a target with a source, and
// every test suite reuses this one's.
