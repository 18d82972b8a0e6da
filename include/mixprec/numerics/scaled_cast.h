// The step every block-scaled FP8 cast shares (the backend's quantize, FSDP's FP8 all-gather,
// the delayed recipe's cast): a row's values, widened to f32, each scaled in f32 by its block's
// scale (multiplied or divided, as the rule's form says), then cast to the element format
// saturating, to nearest even or as `rounding` says, by the conversion kernels.
#pragma once

#include <cstdint>

#include "mixprec/numerics/dtype.h"
#include "mixprec/numerics/rounding.h"
#include "mixprec/numerics/scale_rules.h"

namespace mixprec {

// x holds columns [col0, col0 + n) of a row (scaled in place); v the row's scales, one per
// block of block_cols columns (column c takes v[c / block_cols]); dst receives n elements.
// `rounding`: stochastic rounding's key, its index_base that of the row's column col0 in the
// whole cast (rounding.h); the cast saturates whatever it says.
void scale_and_cast_row(float* x, int64_t col0, int64_t n, int64_t block_cols, const float* v,
                        ScaleForm form, DType element, void* dst, ConvertOptions rounding = {});

}  // namespace mixprec
