#include "mixprec/numerics/hadamard.h"

namespace mixprec {

void rht16(float* x, int64_t n) {
  for (int64_t b = 0; b < n; b += kRhtSize) {
    float* v = x + b;
    for (int i = 0; i < kRhtSize; ++i)
      if (kTeRhtSigns[static_cast<std::size_t>(i)] < 0) v[i] = -v[i];
    for (int h = 1; h < kRhtSize; h *= 2)  // y[j] = sum_i (-1)^popcount(i&j) v[i]
      for (int i = 0; i < kRhtSize; i += 2 * h)
        for (int j = i; j < i + h; ++j) {
          const float a = v[j], c = v[j + h];
          v[j] = a + c;
          v[j + h] = a - c;
        }
    for (int i = 0; i < kRhtSize; ++i) v[i] *= 0.25f;
  }
}

}  // namespace mixprec
