#include "mixprec/cpu/accumulate.h"

#include <type_traits>
#include <vector>

#include "mixprec/core/parallel.h"
#include "mixprec/cpu/row_io.h"
#include "mixprec/tensor/dispatch.h"

namespace mixprec::cpu {
namespace {

constexpr int64_t kAddGrain = 1 << 14;

// dst[i] = dst[i] + src[i] over contiguous buffers (dst may alias a).
template <class T>
void add_buffers(const T* a, const Tensor& b_contig, T* dst, int64_t n) {
  const DType bt = b_contig.dtype();
  const void* b = b_contig.raw_data();
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    if (bt == dtype_of<T>()) {  // same dtype: add in place, no widening copies
      const T* bv = static_cast<const T*>(b);
      parallel_for(n, kAddGrain, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) dst[i] = a[i] + bv[i];
      });
      return;
    }
  }
  parallel_for(n, kAddGrain, [&](int64_t begin, int64_t end) {
    using A = acc_t<T>;
    const int64_t len = end - begin;
    std::vector<A> x(static_cast<size_t>(len)), y(static_cast<size_t>(len));
    load_row(a + begin, x.data(), len);
    const char* bp = static_cast<const char*>(b) + begin * static_cast<int64_t>(dtype_size(bt));
    if constexpr (std::is_same_v<A, double>) {
      widen_to_f64(bt, bp, y.data(), static_cast<size_t>(len));
    } else {
      MIXPREC_CHECK(bt != DType::f64, "accumulate", "f64 gradient into a non-f64 buffer");
      widen_row_f32(bt, bp, y.data(), static_cast<size_t>(len));
    }
    for (int64_t i = 0; i < len; ++i) x[static_cast<size_t>(i)] += y[static_cast<size_t>(i)];
    store_row(x.data(), dst + begin, len);
  });
}

}  // namespace

void accumulate_into(const Tensor& dst, const Tensor& src) {
  MIXPREC_CHECK(dst.shape() == src.shape(), "accumulate",
                "shape " + shape_to_string(src.shape()) + " into " + shape_to_string(dst.shape()));
  MIXPREC_CHECK(dst.is_contiguous(), "accumulate", "destination must be contiguous");
  const Tensor s = src.contiguous();
  dispatch_compute(dst.dtype(), "accumulate", [&]<class T>() {
    T* d = dst.data<T>();
    add_buffers<T>(d, s, d, dst.numel());
  });
}

Tensor add_same_shape(const Tensor& a, const Tensor& b) {
  MIXPREC_CHECK(a.shape() == b.shape(), "accumulate",
                "shape " + shape_to_string(a.shape()) + " vs " + shape_to_string(b.shape()));
  const Tensor ac = a.contiguous();
  Tensor out = Tensor::empty(a.shape(), a.dtype());
  const Tensor bc = b.contiguous();
  dispatch_compute(a.dtype(), "accumulate", [&]<class T>() {
    add_buffers<T>(ac.data<T>(), bc, out.data<T>(), out.numel());
  });
  return out;
}

}  // namespace mixprec::cpu
