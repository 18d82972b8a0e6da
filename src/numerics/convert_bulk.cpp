// Bulk conversion entry points: validate, split into fixed chunks over threads, and run the
// AVX2 kernel on each chunk with the scalar kernel finishing what it leaves.
#include <cstring>
#include <string>

#include "convert_kernels.h"
#include "mixprec/core/error.h"
#include "mixprec/core/parallel.h"
#include "mixprec/numerics/convert.h"
#include "mixprec/numerics/encode.h"

namespace mixprec {
namespace {

// Elements per parallel chunk: a multiple of every vector width and of the Philox block.
constexpr int64_t kGrain = 1 << 16;

const FloatFormat& narrow_format(DType t, const char* where) {
  MIXPREC_CHECK(is_floating(t), where,
                std::string("target dtype must be floating, got ") + dtype_name(t));
  return *info(t).format;
}

bool use_avx2(Isa isa) {
  if (isa == Isa::scalar) return false;
  if (isa == Isa::avx2)
    MIXPREC_CHECK(cpu_has_avx2_f16c(), "convert", "AVX2 kernels requested on a CPU without them");
  return cpu_has_avx2_f16c();
}

// Converts one chunk of `len` elements whose first has global index index0: the AVX2 kernel
// takes what it can (after a scalar head that aligns stochastic rounding's index to a whole
// Philox block) and the scalar kernel finishes. Kernels are called as
// kernel(offset, count, index_of_first) and the AVX2 one returns how many it did.
template <class Avx2Kernel, class ScalarKernel>
void run_chunk(bool avx2, std::size_t len, uint64_t index0, const ConvertOptions& opts,
               Avx2Kernel&& vector_kernel, ScalarKernel&& scalar_kernel) {
  std::size_t done = 0;
  if (avx2) {
    std::size_t head = opts.rounding == Rounding::stochastic ? (4 - index0 % 4) % 4 : 0;
    if (head > len) head = len;
    scalar_kernel(std::size_t{0}, head, index0);
    done = head + vector_kernel(head, len - head, index0 + head);
  }
  scalar_kernel(done, len - done, index0 + done);
}

}  // namespace

void convert_from_f32(const float* src, DType dst_dtype, void* dst, std::size_t n,
                      const ConvertOptions& opts, Isa isa) {
  if (dst_dtype == DType::f32) {
    if (static_cast<const void*>(src) != dst) std::memcpy(dst, src, n * sizeof(float));
    return;
  }
  MIXPREC_CHECK(dst_dtype != DType::f64, "convert_from_f32", "use widen_to_f64 to widen to f64");
  const FloatFormat& f = narrow_format(dst_dtype, "convert_from_f32");
  const bool avx2 = use_avx2(isa);
  const std::size_t out_size = dtype_size(dst_dtype);
  parallel_for(static_cast<int64_t>(n), kGrain, [&](int64_t begin, int64_t end) {
    const float* s = src + begin;
    char* d = static_cast<char*>(dst) + begin * static_cast<int64_t>(out_size);
    run_chunk(
        avx2, static_cast<std::size_t>(end - begin), opts.index_base + static_cast<uint64_t>(begin),
        opts,
        [&](std::size_t off, std::size_t count, uint64_t index) {
          return kernels::avx2_narrow_f32(f, s + off, d + off * out_size, count, opts, index);
        },
        [&](std::size_t off, std::size_t count, uint64_t index) {
          kernels::scalar_narrow_f32(f, s + off, d + off * out_size, count, opts, index);
        });
  });
}

void convert_from_f64(const double* src, DType dst_dtype, void* dst, std::size_t n,
                      const ConvertOptions& opts) {
  if (dst_dtype == DType::f64) {
    if (static_cast<const void*>(src) != dst) std::memcpy(dst, src, n * sizeof(double));
    return;
  }
  const FloatFormat& f = narrow_format(dst_dtype, "convert_from_f64");
  const std::size_t out_size = dtype_size(dst_dtype);
  parallel_for(static_cast<int64_t>(n), kGrain, [&](int64_t begin, int64_t end) {
    kernels::scalar_narrow_f64(f, src + begin, static_cast<char*>(dst) + begin * out_size,
                               static_cast<std::size_t>(end - begin), opts,
                               opts.index_base + static_cast<uint64_t>(begin));
  });
}

void widen_to_f32(DType src_dtype, const void* src, float* dst, std::size_t n, Isa isa) {
  if (src_dtype == DType::f32) {
    if (src != static_cast<const void*>(dst)) std::memcpy(dst, src, n * sizeof(float));
    return;
  }
  MIXPREC_CHECK(src_dtype != DType::f64, "widen_to_f32", "f64 does not widen to f32");
  const FloatFormat& f = narrow_format(src_dtype, "widen_to_f32");
  const bool avx2 = use_avx2(isa);
  const std::size_t in_size = dtype_size(src_dtype);
  parallel_for(static_cast<int64_t>(n), kGrain, [&](int64_t begin, int64_t end) {
    const void* s = static_cast<const char*>(src) + begin * in_size;
    const std::size_t len = static_cast<std::size_t>(end - begin);
    const std::size_t done = avx2 ? kernels::avx2_widen_f32(f, s, dst + begin, len) : 0;
    kernels::scalar_widen_f32(f, static_cast<const char*>(s) + done * in_size, dst + begin + done,
                              len - done);
  });
}

void widen_to_f64(DType src_dtype, const void* src, double* dst, std::size_t n) {
  if (src_dtype == DType::f64) {
    if (src != static_cast<const void*>(dst)) std::memcpy(dst, src, n * sizeof(double));
    return;
  }
  const FloatFormat& f = narrow_format(src_dtype, "widen_to_f64");
  const std::size_t in_size = dtype_size(src_dtype);
  parallel_for(static_cast<int64_t>(n), kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      uint32_t bits = 0;
      std::memcpy(&bits, static_cast<const char*>(src) + i * in_size, in_size);
      dst[i] = decode_f64(f, bits);
    }
  });
}

void round_to_tf32(const float* src, float* dst, std::size_t n, const ConvertOptions& opts,
                   Isa isa) {
  const bool avx2 = use_avx2(isa);
  parallel_for(static_cast<int64_t>(n), kGrain, [&](int64_t begin, int64_t end) {
    const float* s = src + begin;
    float* d = dst + begin;
    run_chunk(
        avx2, static_cast<std::size_t>(end - begin), opts.index_base + static_cast<uint64_t>(begin),
        opts,
        [&](std::size_t off, std::size_t count, uint64_t index) {
          return kernels::avx2_tf32(s + off, d + off, count, opts, index);
        },
        [&](std::size_t off, std::size_t count, uint64_t index) {
          kernels::scalar_tf32(s + off, d + off, count, opts, index);
        });
  });
}

void widen_row_f32(DType src_dtype, const void* src, float* dst, std::size_t n) {
  if (src_dtype == DType::f32) {
    if (src != static_cast<const void*>(dst)) std::memcpy(dst, src, n * sizeof(float));
    return;
  }
  const FloatFormat& f = narrow_format(src_dtype, "widen_row_f32");
  const std::size_t done = cpu_has_avx512f()     ? kernels::avx512_widen_f32(f, src, dst, n)
                           : cpu_has_avx2_f16c() ? kernels::avx2_widen_f32(f, src, dst, n)
                                                 : 0;
  kernels::scalar_widen_f32(f, static_cast<const char*>(src) + done * dtype_size(src_dtype),
                            dst + done, n - done);
}

void narrow_row_f32(const float* src, DType dst_dtype, void* dst, std::size_t n) {
  if (dst_dtype == DType::f32) {
    if (static_cast<const void*>(src) != dst) std::memcpy(dst, src, n * sizeof(float));
    return;
  }
  const FloatFormat& f = narrow_format(dst_dtype, "narrow_row_f32");
  const ConvertOptions opts{};
  const std::size_t out_size = dtype_size(dst_dtype);
  const std::size_t done = cpu_has_avx512f() ? kernels::avx512_narrow_f32_nearest(f, src, dst, n)
                           : cpu_has_avx2_f16c() ? kernels::avx2_narrow_f32(f, src, dst, n, opts, 0)
                                                 : 0;
  kernels::scalar_narrow_f32(f, src + done, static_cast<char*>(dst) + done * out_size, n - done,
                             opts, done);
}

}  // namespace mixprec
