// The source of sp_catch_pch, the target that precompiles catch.hpp for every test executable
// (tests/CMakeLists.txt); it has no code of its own.
