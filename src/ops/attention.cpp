// scaled_dot_product_attention and rope: input checks and autograd wiring around the fused
// kernels of the backend table.
#include "mixprec/ops/attention.h"

#include <cmath>
#include <string>
#include "mixprec/amp/autocast.h"

#include "mixprec/autograd/function.h"
#include "mixprec/autograd/saved_ops.h"
#include "mixprec/backend/backend.h"

namespace mixprec {
namespace {

constexpr const char* kSdpa = "scaled_dot_product_attention";

// t as the attention kernels read it: in place when its rows are dense (a contiguous tensor,
// or a [B, T, H, Dh] projection seen as [B, H, T, Dh]), else a contiguous copy.
Tensor with_dense_rows(const Tensor& t) {
  return backend::rows_are_dense(t) ? t : t.contiguous();
}

// A gradient in the kernel's dtype: the input's, or f32 beside f32/bf16/f16 inputs.
Tensor in_kernel_dtype(const Tensor& g, DType input_dtype) {
  if (g.dtype() == input_dtype) return g;
  return g.to(accumulate_dtype(input_dtype));
}

class AttentionBackward final : public Node {
 public:
  AttentionBackward(Tensor q, Tensor k, Tensor v, Tensor out, Tensor lse, bool causal, double scale)
      : q_(std::move(q)),
        k_(std::move(k)),
        v_(std::move(v)),
        out_(std::move(out)),
        lse_(std::move(lse)),
        causal_(causal),
        scale_(scale) {}
  const char* name() const override { return "AttentionBackward"; }
  void release_saved() override { q_ = k_ = v_ = out_ = lse_ = Tensor(); }
  std::vector<Tensor> apply(std::vector<Tensor>& grads) override {
    if (!grads[0].defined()) return {Tensor(), Tensor(), Tensor()};
    const Tensor g = with_dense_rows(in_kernel_dtype(grads[0], q_.dtype()));
    backend::AttentionGrads r =
        backend::current().attention_backward(q_, k_, v_, out_, lse_, g, causal_, scale_);
    return {r.dq, r.dk, r.dv};
  }

 private:
  Tensor q_, k_, v_, out_, lse_;
  bool causal_;
  double scale_;
};

class RopeBackward final : public Node {
 public:
  RopeBackward(DType dtype, std::vector<double> inv_freq, double factor, int64_t offset)
      : dtype_(dtype), inv_freq_(std::move(inv_freq)), factor_(factor), offset_(offset) {}
  const char* name() const override { return "RopeBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>& grads) override {
    if (!grads[0].defined()) return {Tensor()};
    // The transpose of factor·rotation is factor·(the rotation by minus the angle).
    return {backend::current().rope_rotate(in_kernel_dtype(grads[0], dtype_).contiguous(),
                                           inv_freq_, factor_, offset_, true, dtype_)};
  }

 private:
  DType dtype_;
  std::vector<double> inv_freq_;
  double factor_;
  int64_t offset_;
};

// x after autocast: the checks both rope overloads share.
void check_rope_input(const Tensor& x, int64_t position_offset) {
  MIXPREC_CHECK(x.defined(), "rope", "undefined input");
  MIXPREC_CHECK(x.ndim() == 4 && x.size(3) % 2 == 0, "rope",
                "expects x [B, H, T, Dh] with Dh even, got " + shape_to_string(x.shape()));
  MIXPREC_CHECK(
      is_computable(x.dtype()), "rope",
      std::string("unsupported dtype ") + dtype_name(x.dtype()) + "; use f64, f32, bf16 or f16");
  MIXPREC_CHECK(!x.is_meta(), "rope", "meta tensors have no data");
  MIXPREC_CHECK(position_offset >= 0, "rope",
                "position_offset must be >= 0, got " + std::to_string(position_offset));
}

Tensor rope_checked(const Tensor& x, const RopeFrequencies& freqs, int64_t position_offset) {
  Tensor out =
      backend::current().rope_rotate(x.detach().contiguous(), freqs.inv_freq,
                                     freqs.attention_factor, position_offset, false, x.dtype());
  if (any_requires_grad({&x})) {
    auto node = std::make_shared<RopeBackward>(x.dtype(), freqs.inv_freq, freqs.attention_factor,
                                               position_offset);
    connect(*node, {x});
    set_history(out, node);
  }
  return out;
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in,
                                    bool causal, double scale) {
  const auto [q, k, v] = amp::autocast_args("scaled_dot_product_attention", q_in, k_in, v_in);
  MIXPREC_CHECK(q.defined() && k.defined() && v.defined(), kSdpa, "undefined input");
  MIXPREC_CHECK(q.ndim() == 4, kSdpa,
                "expects q, k, v [B, H, T, Dh], got q " + shape_to_string(q.shape()));
  // k and v may have fewer heads than q (grouped-query attention): Hkv dividing H.
  // Without a causal mask, more keys than queries (a decoding step against cached keys).
  const bool kv_fits = k.ndim() == 4 && v.shape() == k.shape() && k.size(0) == q.size(0) &&
                       (k.size(2) == q.size(2) || (!causal && k.size(2) > q.size(2))) &&
                       k.size(3) == q.size(3) &&
                       (k.size(1) == q.size(1) || (k.size(1) > 0 && q.size(1) % k.size(1) == 0));
  MIXPREC_CHECK(kv_fits, kSdpa,
                "expects q [B, H, T, Dh] and k, v [B, Hkv, T, Dh] with Hkv dividing H (Tk > T "
                "without a causal mask), got q " +
                    shape_to_string(q.shape()) + ", k " + shape_to_string(k.shape()) + ", v " +
                    shape_to_string(v.shape()));
  MIXPREC_CHECK(k.dtype() == q.dtype() && v.dtype() == q.dtype(), kSdpa,
                std::string("q, k, v must share a dtype, got ") + dtype_name(q.dtype()) + ", " +
                    dtype_name(k.dtype()) + ", " + dtype_name(v.dtype()) +
                    " (cast, or use autocast)");
  MIXPREC_CHECK(
      is_computable(q.dtype()), kSdpa,
      std::string("unsupported dtype ") + dtype_name(q.dtype()) + "; use f64, f32, bf16 or f16");
  MIXPREC_CHECK(!q.is_meta() && !k.is_meta() && !v.is_meta(), kSdpa, "meta tensors have no data");
  MIXPREC_CHECK(std::isfinite(scale), kSdpa, "scale must be finite, got " + std::to_string(scale));
  const int64_t dh = q.size(3);
  if (scale <= 0.0) scale = dh > 0 ? 1.0 / std::sqrt(static_cast<double>(dh)) : 1.0;
  const Tensor qc = with_dense_rows(q.detach()), kc = with_dense_rows(k.detach()),
               vc = with_dense_rows(v.detach());
  const bool needs_grad = any_requires_grad({&q, &k, &v});
  MIXPREC_CHECK(!needs_grad || k.size(2) == q.size(2), kSdpa,
                "more keys than queries is for decoding: no gradients (run under NoGradGuard)");
  // A selective checkpoint keeps the output and what backward reads beside it (the
  // log-sum-exp, the unrounded output), and its recompute hands them back.
  const SavedOp saved(kSdpa);
  backend::AttentionForward f;
  if (saved.recalled()) {
    f.out = saved.output(0);
    f.out_acc = saved.output(1);
    f.lse = saved.output(2);
  } else {
    f = backend::current().attention_forward(qc, kc, vc, causal, scale,
                                             needs_grad || saved.picked());
    saved.keep({f.out, f.out_acc, f.lse});
  }
  Tensor out = f.out;
  if (needs_grad) {
    const Tensor saved_out = f.out_acc.defined() ? f.out_acc : out.detach();
    auto node = std::make_shared<AttentionBackward>(qc, kc, vc, saved_out, f.lse, causal, scale);
    connect(*node, {q, k, v});
    set_history(out, node);
  }
  return out;
}

Tensor rope(const Tensor& x_in, const RopeFrequencies& freqs, int64_t position_offset) {
  const auto [x] = amp::autocast_args("rope", x_in);
  check_rope_input(x, position_offset);
  MIXPREC_CHECK(static_cast<int64_t>(freqs.inv_freq.size()) == x.size(3) / 2, "rope",
                "expects Dh/2 = " + std::to_string(x.size(3) / 2) + " inverse frequencies, got " +
                    std::to_string(freqs.inv_freq.size()));
  for (double f : freqs.inv_freq)
    MIXPREC_CHECK(std::isfinite(f), "rope", "inverse frequencies must be finite");
  MIXPREC_CHECK(std::isfinite(freqs.attention_factor) && freqs.attention_factor > 0.0, "rope",
                "attention_factor must be positive and finite, got " +
                    std::to_string(freqs.attention_factor));
  return rope_checked(x, freqs, position_offset);
}

Tensor rope(const Tensor& x_in, double theta, int64_t position_offset) {
  const auto [x] = amp::autocast_args("rope", x_in);
  check_rope_input(x, position_offset);
  MIXPREC_CHECK(std::isfinite(theta) && theta > 0.0, "rope",
                "theta must be positive and finite, got " + std::to_string(theta));
  // Dh = 0 (an empty head) has no frequencies; rope_frequencies wants Dh > 0.
  RopeFrequencies freqs;
  if (x.size(3) > 0) freqs = rope_frequencies(x.size(3), theta);
  return rope_checked(x, freqs, position_offset);
}

}  // namespace mixprec
