// Fused cross-entropy: loss_n = (m_n - x_n[t_n]) + log(sum(exp(x_n - m_n))) per kept row, then
// the mean over kept rows in a fixed order. Backward: (exp((x - m) - log_sum) - onehot) times
// grad_out / n_valid, straight from the logits: no softmax tensor is ever materialised.
#include "mixprec/cpu/cross_entropy.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "mixprec/core/parallel.h"
#include "mixprec/cpu/row_io.h"
#include "mixprec/tensor/dispatch.h"
#include "softmax_row_ops.h"

namespace mixprec::cpu {
namespace {

// targets [N] of i32/i64 as i64 (small: one value per row).
std::vector<int64_t> targets_i64(const Tensor& targets) {
  std::vector<int64_t> t(static_cast<size_t>(targets.numel()));
  if (targets.dtype() == DType::i64) {
    const int64_t* p = targets.data<int64_t>();
    t.assign(p, p + t.size());
  } else {
    const int32_t* p = targets.data<int32_t>();
    for (size_t i = 0; i < t.size(); ++i) t[i] = p[i];
  }
  return t;
}

// Counts kept rows; throws on the first out-of-range target.
int64_t check_targets(const std::vector<int64_t>& t, int64_t V, int64_t ignore_index) {
  int64_t n_valid = 0;
  for (size_t r = 0; r < t.size(); ++r) {
    if (t[r] == ignore_index) continue;
    MIXPREC_CHECK(t[r] >= 0 && t[r] < V, "cross_entropy",
                  "target " + std::to_string(t[r]) + " at row " + std::to_string(r) +
                      " is outside [0, " + std::to_string(V) + ") and is not ignore_index " +
                      std::to_string(ignore_index));
    ++n_valid;
  }
  return n_valid;
}

// x [N, V]; t [N]; loss, m, ls [N] (ignored rows get 0).
template <class T>
void forward_rows(const T* x, const int64_t* t, int64_t N, int64_t V, int64_t ignore_index,
                  acc_t<T>* loss, acc_t<T>* m, acc_t<T>* ls) {
  const StoredRowOps<T>& ops = stored_row_ops<T>();
  parallel_for(N, rows_per_chunk(V), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      loss[r] = m[r] = ls[r] = 0;
      if (t[r] == ignore_index) continue;
      loss[r] = ops.ce_forward(x + r * V, V, t[r], m + r, ls + r);
    }
  });
}

// x, dx [N, V]; t, m, ls [N].
template <class T>
void backward_rows(const T* x, const int64_t* t, const acc_t<T>* m, const acc_t<T>* ls, T* dx,
                   int64_t N, int64_t V, int64_t ignore_index, acc_t<T> scale) {
  const StoredRowOps<T>& ops = stored_row_ops<T>();
  parallel_for(N, rows_per_chunk(V), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      if (t[r] == ignore_index)
        std::fill(dx + r * V, dx + (r + 1) * V, T(acc_t<T>(0)));
      else
        ops.ce_backward(x + r * V, dx + r * V, V, t[r], m[r], ls[r], scale);
    }
  });
}

}  // namespace

CrossEntropyForward cross_entropy_forward(const Tensor& logits, const Tensor& targets,
                                          int64_t ignore_index) {
  const int64_t N = logits.size(0), V = logits.size(1);
  const std::vector<int64_t> t = targets_i64(targets);
  CrossEntropyForward out;
  out.n_valid = check_targets(t, V, ignore_index);
  const DType acc = accumulate_dtype(logits.dtype());
  out.row_max = Tensor::empty({N}, acc);
  out.log_sum = Tensor::empty({N}, acc);
  out.loss = Tensor::empty({}, acc);
  dispatch_compute(logits.dtype(), "cross_entropy", [&]<class T>() {
    using A = acc_t<T>;
    std::vector<A> loss(static_cast<size_t>(N));  // [N] per-row losses
    forward_rows<T>(logits.data<T>(), t.data(), N, V, ignore_index, loss.data(),
                    out.row_max.data<A>(), out.log_sum.data<A>());
    // Sequential f64 sum of the per-row losses: fixed order, and exact enough for any N.
    double total = 0;
    for (int64_t r = 0; r < N; ++r) total += loss[static_cast<size_t>(r)];
    out.loss.data<A>()[0] = out.n_valid == 0 ? std::numeric_limits<A>::quiet_NaN()
                                             : static_cast<A>(total / out.n_valid);
  });
  return out;
}

Tensor cross_entropy_backward(const Tensor& logits, const Tensor& targets,
                              const CrossEntropyForward& saved, int64_t ignore_index,
                              double scale) {
  const int64_t N = logits.size(0), V = logits.size(1);
  const std::vector<int64_t> t = targets_i64(targets);
  Tensor dx = Tensor::empty(logits.shape(), logits.dtype());
  dispatch_compute(logits.dtype(), "cross_entropy backward", [&]<class T>() {
    using A = acc_t<T>;
    backward_rows<T>(logits.data<T>(), t.data(), saved.row_max.data<A>(), saved.log_sum.data<A>(),
                     dx.data<T>(), N, V, ignore_index, static_cast<A>(scale));
  });
  return dx;
}

}  // namespace mixprec::cpu
