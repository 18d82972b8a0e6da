// GTest, JSON and the standard library headers test files include, parsed once per build into
// a precompiled header (tests/CMakeLists.txt) instead of once per test file: they were a third
// of a test file's compile time. Only outside headers: mixprec's own would change which names
// a test file sees (a test's own helper beside an op of the same name).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>
