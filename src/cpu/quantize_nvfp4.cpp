// Transformer Engine's NVFP4 cast (nvfp4.h, te_nvfp4_*) for the cpu backend: every row's
// block amaxes and the tensor's amax first (its f32 scale sets every block's), then the rows
// cast, each pass parallel over rows.
#include <cmath>
#include <string>
#include <vector>

#include "mixprec/core/error.h"
#include "mixprec/core/parallel.h"
#include "mixprec/cpu/quantize.h"
#include "mixprec/numerics/convert.h"
#include "mixprec/numerics/hadamard.h"
#include "mixprec/numerics/nvfp4.h"
#include "mixprec/numerics/scaled_cast.h"

namespace mixprec::cpu {

using backend::BlockShape;
using backend::Quantized;
using backend::QuantSpec;

Quantized quantize_te_nvfp4(const Tensor& x_in, const QuantSpec& spec) {
  const Tensor x = x_in.contiguous();
  const DType in_dtype = x.dtype();
  const int64_t rows = x.size(0), cols = x.size(1);
  MIXPREC_CHECK(cols % kRhtSize == 0, "quantize",
                "te_nvfp4 casts rows of a multiple of 16 values, got [" + std::to_string(rows) +
                    ", " + std::to_string(cols) + "]");
  const BlockShape blk = backend::resolved_block(spec, rows, cols);
  const Shape ss = backend::scale_shape(spec, rows, cols);
  const int64_t col_blocks = ss[1];
  const auto* src = static_cast<const char*>(x.raw_data());
  const std::size_t row_bytes = static_cast<std::size_t>(cols) * dtype_size(in_dtype);
  // A row in f32; with the RHT transformed and rounded back to the input's dtype, as TE
  // transforms in it.
  auto read_row = [&](int64_t r, std::vector<float>& buf, std::vector<char>& narrow) {
    widen_row_f32(in_dtype, src + static_cast<std::size_t>(r) * row_bytes, buf.data(), buf.size());
    if (!spec.rht) return;
    rht16(buf.data(), cols);
    if (in_dtype == DType::f32) return;
    narrow_row_f32(buf.data(), in_dtype, narrow.data(), buf.size());
    widen_row_f32(in_dtype, narrow.data(), buf.data(), buf.size());
  };
  auto with_row = [&](auto&& fn) {
    parallel_for(rows, 16, [&](int64_t r0, int64_t r1) {
      std::vector<float> buf(static_cast<std::size_t>(cols));
      std::vector<char> narrow(row_bytes);
      for (int64_t r = r0; r < r1; ++r) {
        read_row(r, buf, narrow);
        fn(r, buf);
      }
    });
  };

  std::vector<float> row_amax(static_cast<std::size_t>(rows * col_blocks));
  with_row([&](int64_t r, const std::vector<float>& buf) {
    for (int64_t b = 0; b < col_blocks; ++b)
      row_amax[static_cast<std::size_t>(r * col_blocks + b)] =
          block_amax(buf.data() + b * blk.cols, blk.cols);
  });
  float tensor_amax = 0;  // a max: the same whatever the thread count
  for (const float a : row_amax) tensor_amax = max_amax(tensor_amax, a);
  const TeNvfp4TensorScale ts = te_nvfp4_tensor_scale(tensor_amax);

  Tensor scales = Tensor::empty(ss, DType::f32);
  float* decode = scales.data<float>();
  std::vector<float> encode(static_cast<std::size_t>(ss[0] * col_blocks));
  for (int64_t br = 0; br < ss[0]; ++br)
    for (int64_t b = 0; b < col_blocks; ++b) {
      float amax = 0;
      for (int64_t r = br * blk.rows; r < std::min(rows, (br + 1) * blk.rows); ++r)
        amax = max_amax(amax, row_amax[static_cast<std::size_t>(r * col_blocks + b)]);
      const TeNvfp4BlockScale s = te_nvfp4_block_scale(amax, ts);
      decode[br * col_blocks + b] = s.decode;
      encode[static_cast<std::size_t>(br * col_blocks + b)] = s.encode;
    }

  Tensor data = Tensor::empty({rows, cols}, spec.element);
  auto* q = static_cast<uint8_t*>(data.raw_data());
  with_row([&](int64_t r, std::vector<float>& buf) {
    scale_and_cast_row(buf.data(), 0, cols, blk.cols,
                       &encode[static_cast<std::size_t>((r / blk.rows) * col_blocks)],
                       ScaleForm::multiply, spec.element, q + r * cols);
  });
  return {data, scales, spec, tensor_amax};
}

}  // namespace mixprec::cpu
