#include "mixprec/numerics/scaled_cast.h"

#include <algorithm>

#include "mixprec/numerics/convert.h"

namespace mixprec {

void scale_and_cast_row(float* x, int64_t col0, int64_t n, int64_t block_cols, const float* v,
                        ScaleForm form, DType element, void* dst, ConvertOptions rounding) {
  for (int64_t c = col0; c < col0 + n;) {  // block by block: the vectorizer's loops
    const int64_t b = c / block_cols, end = std::min(col0 + n, (b + 1) * block_cols);
    const float sv = v[b];
    float* xb = x + (c - col0);
    if (form == ScaleForm::divide)
      for (int64_t i = 0; i < end - c; ++i) xb[i] /= sv;
    else
      for (int64_t i = 0; i < end - c; ++i) xb[i] *= sv;
    c = end;
  }
  rounding.saturate = true;
  convert_from_f32(x, element, dst, static_cast<std::size_t>(n), rounding);
}

}  // namespace mixprec
