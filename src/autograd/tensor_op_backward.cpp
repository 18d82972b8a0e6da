// Backward rules for Tensor's own view, copy and cast members, and for x times a constant.
#include <algorithm>
#include <utility>
#include <vector>

#include "install_history_hooks.h"
#include "mixprec/autograd/function.h"
#include "mixprec/autograd/grad_mode.h"
#include "mixprec/autograd/record_tensor_ops.h"
#include "mixprec/backend/backend.h"
#include "mixprec/tensor/history_hooks.h"

namespace mixprec {
namespace {

struct Geometry {
  Shape shape, strides;
  int64_t offset;
};

// Elements of storage a view can reach, counted from its own offset.
int64_t extent(const Geometry& g) {
  int64_t e = 1;
  for (size_t i = 0; i < g.shape.size(); ++i) {
    if (g.shape[i] == 0) return 0;
    e += (g.shape[i] - 1) * g.strides[i];
  }
  return e;
}

// Every element of a dense block exactly once, in some dimension order (a transpose or
// permute of a row-major layout; size-1 dimensions ignored).
bool dense_permutation(const Geometry& g) {
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size)
  for (size_t i = 0; i < g.shape.size(); ++i)
    if (g.shape[i] != 1) dims.emplace_back(g.strides[i], g.shape[i]);
  std::sort(dims.begin(), dims.end());
  int64_t expected = 1;
  for (const auto& [stride, size] : dims) {
    if (stride != expected) return false;
    expected *= size;
  }
  return true;
}

// Equal strides on every dimension longer than 1 (a size-1 dim's stride is never stepped).
bool same_steps(const Shape& shape, const Shape& a, const Shape& b) {
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] > 1 && a[i] != b[i]) return false;
  return true;
}

// One rule for every strided view: scatter the view's gradient into a zero buffer laid out
// like the source's storage, then read the source's elements back from it. A view that
// covers a dense source exactly once (a reshape, transpose or permute) needs no zero fill;
// met by a gradient laid out as the view itself (attention's, or any contiguous gradient of
// a reshape), it is the source's gradient read through the source's strides, no copy at all.
class ViewBackward final : public Node {
 public:
  ViewBackward(Geometry src, Geometry view) : src_(std::move(src)), view_(std::move(view)) {}
  const char* name() const override { return "ViewBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>& grads) override {
    const Tensor& g = grads[0];
    const int64_t n = extent(src_);
    const bool whole = n > 0 && view_.offset == src_.offset && shape_numel(view_.shape) == n &&
                       dense_permutation(src_) && dense_permutation(view_);
    if (whole && same_steps(view_.shape, g.strides(), view_.strides))
      return {g.as_strided(src_.shape, src_.strides, 0)};
    if (whole && is_row_major(src_.shape, src_.strides) && is_row_major(view_.shape, view_.strides))
      return {g.contiguous().view(src_.shape)};
    Tensor buffer =
        whole ? Tensor::empty({n}, g.dtype()) : Tensor::zeros({std::max<int64_t>(n, 1)}, g.dtype());
    if (n > 0 && g.numel() > 0)
      buffer.as_strided(view_.shape, view_.strides, view_.offset - src_.offset).copy_from(g);
    return {buffer.as_strided(src_.shape, src_.strides, 0).contiguous()};
  }

 private:
  Geometry src_, view_;
};

class CopyBackward final : public Node {
 public:
  const char* name() const override { return "CopyBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>& grads) override { return {grads[0]}; }
};

class CastBackward final : public Node {
 public:
  explicit CastBackward(DType src_dtype) : src_dtype_(src_dtype) {}
  const char* name() const override { return "CastBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>& grads) override {
    return {grads[0].to(src_dtype_)};
  }

 private:
  DType src_dtype_;
};

class ScaleBackward final : public Node {
 public:
  ScaleBackward(double s, DType x_dtype) : s_(s), x_dtype_(x_dtype) {}
  const char* name() const override { return "ScaleBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>& grads) override {
    if (!grads[0].defined()) return {Tensor()};
    // The same f32-rounded factor as the forward (f64 when x or the gradient is f64).
    return {backend::current().scale(grads[0], s_, x_dtype_)};
  }

 private:
  double s_;
  DType x_dtype_;
};

void record(const Tensor& src, Tensor& out, std::shared_ptr<Node> node) {
  connect(*node, {src});
  set_history(out, node);
}

}  // namespace

void record_view(const Tensor& src, Tensor& view) {
  if (!any_requires_grad({&src})) return;
  record(src, view,
         std::make_shared<ViewBackward>(Geometry{src.shape(), src.strides(), src.offset()},
                                        Geometry{view.shape(), view.strides(), view.offset()}));
}

void record_copy(const Tensor& src, Tensor& copy) {
  if (!any_requires_grad({&src})) return;
  record(src, copy, std::make_shared<CopyBackward>());
}

void record_cast(const Tensor& src, Tensor& cast) {
  if (!any_requires_grad({&src})) return;
  record(src, cast, std::make_shared<CastBackward>(src.dtype()));
}

namespace detail {

void ensure_history_hooks() {
  static const bool installed = [] {
    install_history_hooks({.record_view = record_view,
                           .record_copy = record_copy,
                           .record_cast = record_cast,
                           .grad_enabled = [] { return GradMode::is_enabled(); }});
    return true;
  }();
  (void)installed;
}

}  // namespace detail

Tensor scaled(const Tensor& x, double s) {
  Tensor out = backend::current().scale(x, s, x.dtype());
  if (any_requires_grad({&x})) record(x, out, std::make_shared<ScaleBackward>(s, x.dtype()));
  return out;
}

}  // namespace mixprec
