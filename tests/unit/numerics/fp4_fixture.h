// The ml_dtypes / torchao fixtures of the FP4 and E8M0 tests (tests/reference/fixtures/fp4,
// written by tests/reference/make_fp4_fixtures.py; no Python needed to read them).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "mixprec/io/safetensors.h"

namespace mixprec::testing {

inline const io::SafetensorsFile& fp4_fixture(const std::string& name) {
  static const io::SafetensorsFile ml = io::load_safetensors(
      std::string(MIXPREC_SOURCE_DIR) + "/tests/reference/fixtures/fp4/ml_dtypes.safetensors");
  static const io::SafetensorsFile ao = io::load_safetensors(
      std::string(MIXPREC_SOURCE_DIR) + "/tests/reference/fixtures/fp4/torchao.safetensors");
  return name == "torchao" ? ao : ml;
}

template <class T>
std::vector<T> fixture_values(const std::string& file, const std::string& tensor) {
  const Tensor& t = fp4_fixture(file).at(tensor);
  std::vector<T> out(static_cast<std::size_t>(t.numel()));
  std::memcpy(out.data(), t.raw_data(), t.nbytes());
  return out;
}

// A run-length coded table of a cast over all 2^32 f32 bit patterns (see the script): the
// value for input bits x is that of the last run starting at or before x.
class F32RunTable {
 public:
  explicit F32RunTable(const std::string& prefix)
      : starts_(fixture_values<int64_t>("ml_dtypes", prefix + ".run_start")),
        values_(fixture_values<uint8_t>("ml_dtypes", prefix + ".run_value")) {}
  uint8_t operator()(uint32_t bits) const {
    const auto it = std::upper_bound(starts_.begin(), starts_.end(), int64_t{bits});
    return values_[static_cast<std::size_t>(it - starts_.begin()) - 1];
  }
  const std::vector<int64_t>& starts() const { return starts_; }
  const std::vector<uint8_t>& values() const { return values_; }

 private:
  std::vector<int64_t> starts_;
  std::vector<uint8_t> values_;
};

}  // namespace mixprec::testing
