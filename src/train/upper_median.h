// The upper median of a list (the middle element, the higher of the two for an even count; 0
// for none): the run summary's tokens/s and the expert-load band's medians.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace mixprec::train {

inline double upper_median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

}  // namespace mixprec::train
