// topk, gather, scatter_add, index_add and concat with their backward rules.
#include "mixprec/ops/indexing.h"

#include "mixprec/amp/autocast.h"
#include "mixprec/autograd/function.h"
#include "mixprec/backend/backend.h"

namespace mixprec {
namespace {

void check_tensor(const Tensor& x, const char* op, const char* what) {
  MIXPREC_CHECK(x.defined(), op, std::string(what) + " is undefined");
  MIXPREC_CHECK(!x.is_meta(), op, std::string(what) + " is a meta tensor (no data)");
}

void check_float(const Tensor& x, const char* op, const char* what) {
  check_tensor(x, op, what);
  const DType d = x.dtype();
  MIXPREC_CHECK(is_computable(d), op,
                std::string(what) + " has unsupported dtype " + dtype_name(d) +
                    " (use f64, f32, bf16 or f16)");
}

void check_same_dtype(const Tensor& a, const Tensor& b, const char* op) {
  MIXPREC_CHECK(a.dtype() == b.dtype(), op,
                std::string("x and source must share a dtype, got ") + dtype_name(a.dtype()) +
                    " and " + dtype_name(b.dtype()) + " (cast one, or use autocast)");
}

void check_index(const Tensor& index, const char* op) {
  check_tensor(index, op, "index");
  MIXPREC_CHECK(index.dtype() == DType::i32 || index.dtype() == DType::i64, op,
                std::string("index must be i32 or i64, got ") + dtype_name(index.dtype()));
}

int checked_dim(const Tensor& x, int64_t dim, const char* op) {
  MIXPREC_CHECK(x.ndim() >= 1, op, "needs a tensor of at least 1 dim, got a 0-d tensor");
  return normalize_dim(dim, x.ndim(), op);
}

// gather / scatter_add: index has the rank of `other`; index.size(e) <= other.size(e) for
// every dim e (but `dim` itself when skip_dim).
void check_index_fits(const Tensor& index, const Tensor& other, int dim, bool skip_dim,
                      const char* op, const char* what) {
  bool ok = index.ndim() == other.ndim();
  for (int e = 0; ok && e < index.ndim(); ++e)
    ok = (skip_dim && e == dim) || index.size(e) <= other.size(e);
  MIXPREC_CHECK(ok, op,
                "index " + shape_to_string(index.shape()) + " does not fit " + what + " " +
                    shape_to_string(other.shape()) + " (same rank; no index dim larger" +
                    (skip_dim ? " except dim " + std::to_string(dim) : std::string()) + ")");
}

// Gradient rounded into `dtype`, contiguous.
Tensor grad_as(const Tensor& g, DType dtype) {
  return g.to(dtype).contiguous();
}

// ---------------------------------------------------------------------------------------------

class TopkBackward final : public Node {
 public:
  TopkBackward(Tensor indices, backend::ReduceGeometry g, int64_t k, Shape x_shape, DType dtype)
      : indices_(std::move(indices)), g_(g), k_(k), x_shape_(std::move(x_shape)), dtype_(dtype) {}
  const char* name() const override { return "TopkBackward"; }
  void release_saved() override { indices_ = Tensor(); }
  std::vector<Tensor> apply(std::vector<Tensor>& grads) override {
    if (!grads[0].defined()) return {Tensor()};
    return {backend::current().topk_backward(grads[0], indices_, g_, k_, dtype_).view(x_shape_)};
  }

 private:
  Tensor indices_;  // i64 [outer, k, inner]
  backend::ReduceGeometry g_;
  int64_t k_;
  Shape x_shape_;
  DType dtype_;
};

// gather's gradient: scatter_add of grad into zeros, accumulated in f32 (f64), rounded once.
class GatherBackward final : public Node {
 public:
  GatherBackward(Tensor index, int dim, Shape x_shape, DType dtype)
      : index_(std::move(index)), dim_(dim), x_shape_(std::move(x_shape)), dtype_(dtype) {}
  const char* name() const override { return "GatherBackward"; }
  void release_saved() override { index_ = Tensor(); }
  std::vector<Tensor> apply(std::vector<Tensor>& grads) override {
    if (!grads[0].defined()) return {Tensor(), Tensor()};
    // Zeros and the gradient in the gradient's dtype when it is x's, else in f32 (f64 if
    // either is): scatter_add sums in f32 (f64) and rounds once either way. The saved index
    // may share the caller's storage: the kernel checks it again before writing through it.
    const DType g = grads[0].dtype();
    const DType work = g == dtype_                               ? g
                       : g == DType::f64 || dtype_ == DType::f64 ? DType::f64
                                                                 : DType::f32;
    const Tensor gx =
        backend::current().scatter_add(Tensor::zeros(x_shape_, work), dim_, index_,
                                       grads[0].to(work).contiguous(), "gather backward");
    return {gx.to(dtype_), Tensor()};
  }

 private:
  Tensor index_;
  int dim_;
  Shape x_shape_;
  DType dtype_;
};

// grad_x = grad; grad_src = grad gathered at the index (zeros where src lies beyond index).
class ScatterAddBackward final : public Node {
 public:
  ScatterAddBackward(Tensor index, int dim, Shape x_shape, Shape src_shape, DType dtype)
      : index_(std::move(index)),
        dim_(dim),
        x_shape_(std::move(x_shape)),
        src_shape_(std::move(src_shape)),
        dtype_(dtype) {}
  const char* name() const override { return "ScatterAddBackward"; }
  void release_saved() override { index_ = Tensor(); }
  std::vector<Tensor> apply(std::vector<Tensor>& grads) override {
    if (!grads[0].defined()) return {Tensor(), Tensor(), Tensor()};
    const Tensor g = grad_as(grads[0], dtype_);
    Tensor gsrc;
    if (next_edges()[2].node)
      gsrc = backend::current().gather(g, dim_, index_, src_shape_, "scatter_add backward");
    return {g, Tensor(), gsrc};
  }

 private:
  Tensor index_;
  int dim_;
  Shape x_shape_, src_shape_;
  DType dtype_;
};

// grad_x = grad; grad_source = alpha * index_select(grad, dim, index).
class IndexAddBackward final : public Node {
 public:
  IndexAddBackward(Tensor index, backend::ReduceGeometry g, double alpha, Shape source_shape,
                   DType dtype)
      : index_(std::move(index)),
        g_(g),
        alpha_(alpha),
        source_shape_(std::move(source_shape)),
        dtype_(dtype) {}
  const char* name() const override { return "IndexAddBackward"; }
  void release_saved() override { index_ = Tensor(); }
  std::vector<Tensor> apply(std::vector<Tensor>& grads) override {
    if (!grads[0].defined()) return {Tensor(), Tensor(), Tensor()};
    Tensor gx, gsrc;
    if (next_edges()[0].node) gx = grad_as(grads[0], dtype_);
    if (next_edges()[2].node) {
      gsrc = backend::current()
                 .index_select_scaled(grads[0], g_, index_, alpha_, dtype_, "index_add backward")
                 .view(source_shape_);
    }
    return {gx, Tensor(), gsrc};
  }

 private:
  Tensor index_;  // contiguous 1-d
  backend::ReduceGeometry g_;
  double alpha_;
  Shape source_shape_;
  DType dtype_;
};

// Each input's gradient is its slice of the output gradient.
class ConcatBackward final : public Node {
 public:
  ConcatBackward(int dim, std::vector<int64_t> sizes, DType dtype)
      : dim_(dim), sizes_(std::move(sizes)), dtype_(dtype) {}
  const char* name() const override { return "ConcatBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>& grads) override {
    std::vector<Tensor> out(sizes_.size());
    if (!grads[0].defined()) return out;
    int64_t at = 0;
    for (size_t t = 0; t < sizes_.size(); ++t) {
      if (next_edges()[t].node) out[t] = grad_as(grads[0].slice(dim_, at, at + sizes_[t]), dtype_);
      at += sizes_[t];
    }
    return out;
  }

 private:
  int dim_;
  std::vector<int64_t> sizes_;
  DType dtype_;
};

}  // namespace

std::pair<Tensor, Tensor> topk(const Tensor& x_in, int64_t k, int64_t dim, bool largest) {
  const auto [x] = amp::autocast_args("topk", x_in);
  check_float(x, "topk", "x");
  const int d = checked_dim(x, dim, "topk");
  const int64_t n = x.size(d);
  MIXPREC_CHECK(k >= 0 && k <= n, "topk",
                "k = " + std::to_string(k) + " is out of range [0, " + std::to_string(n) +
                    "] for dim " + std::to_string(d) + " of " + shape_to_string(x.shape()));
  const backend::ReduceGeometry g = backend::reduce_geometry(x.shape(), d);
  auto [values, indices] = backend::current().topk(x.detach().contiguous(), g, k, largest);
  Shape shape = x.shape();
  shape[static_cast<size_t>(d)] = k;
  values = values.view(shape);
  indices = indices.view(shape);
  if (any_requires_grad({&x})) {
    // A private copy: the caller may overwrite the returned indices before backward.
    auto node = std::make_shared<TopkBackward>(indices.clone(), g, k, x.shape(), x.dtype());
    connect(*node, {x});
    set_history(values, node);
  }
  return {values, indices};
}

Tensor gather(const Tensor& x_in, int64_t dim, const Tensor& index) {
  const auto [x] = amp::autocast_args("gather", x_in);
  check_tensor(x, "gather", "x");
  check_index(index, "gather");
  const int d = checked_dim(x, dim, "gather");
  check_index_fits(index, x, d, true, "gather", "x");
  Tensor out = backend::current().gather(x, d, index, index.shape(), "gather");
  if (any_requires_grad({&x, &index})) {
    check_float(x, "gather", "x");
    auto node = std::make_shared<GatherBackward>(index.detach(), d, x.shape(), x.dtype());
    connect(*node, {x, index});
    set_history(out, node);
  }
  return out;
}

Tensor scatter_add(const Tensor& x_in, int64_t dim, const Tensor& index, const Tensor& src_in) {
  const auto [x, src] = amp::autocast_args("scatter_add", x_in, src_in);
  check_float(x, "scatter_add", "x");
  check_float(src, "scatter_add", "src");
  check_same_dtype(x, src, "scatter_add");
  check_index(index, "scatter_add");
  const int d = checked_dim(x, dim, "scatter_add");
  check_index_fits(index, x, d, true, "scatter_add", "x");
  check_index_fits(index, src, d, false, "scatter_add", "src");
  Tensor out = backend::current().scatter_add(x, d, index, src, "scatter_add");
  if (any_requires_grad({&x, &index, &src})) {
    auto node =
        std::make_shared<ScatterAddBackward>(index.detach(), d, x.shape(), src.shape(), x.dtype());
    connect(*node, {x, index, src});
    set_history(out, node);
  }
  return out;
}

Tensor index_add(const Tensor& x_in, int64_t dim, const Tensor& index, const Tensor& source_in,
                 double alpha) {
  const auto [x, source] = amp::autocast_args("index_add", x_in, source_in);
  check_float(x, "index_add", "x");
  check_float(source, "index_add", "source");
  check_same_dtype(x, source, "index_add");
  check_index(index, "index_add");
  const int d = checked_dim(x, dim, "index_add");
  MIXPREC_CHECK(index.ndim() == 1, "index_add",
                "index must be 1-d, got " + shape_to_string(index.shape()));
  Shape expected = x.shape();
  expected[static_cast<size_t>(d)] = index.numel();
  MIXPREC_CHECK(source.shape() == expected, "index_add",
                "source must be " + shape_to_string(expected) + " for x " +
                    shape_to_string(x.shape()) + ", dim " + std::to_string(d) + " and " +
                    std::to_string(index.numel()) + " indices; got " +
                    shape_to_string(source.shape()));
  const Tensor ic = index.detach().contiguous();
  const backend::ReduceGeometry g = backend::reduce_geometry(x.shape(), d);
  Tensor out = backend::current().index_add(x.detach().contiguous(), g, ic,
                                            source.detach().contiguous(), alpha, "index_add");
  if (any_requires_grad({&x, &index, &source})) {
    auto node = std::make_shared<IndexAddBackward>(ic, g, alpha, source.shape(), x.dtype());
    connect(*node, {x, index, source});
    set_history(out, node);
  }
  return out;
}

Tensor concat(const std::vector<Tensor>& tensors_in, int64_t dim) {
  const amp::AutocastList cast("concat", tensors_in);
  MIXPREC_CHECK(!cast.get().empty(), "concat", "needs at least one tensor");
  // torch.cat's type promotion: mixed dtypes meet at the widest (autograd-aware casts).
  DType widest = cast.get()[0].defined() ? cast.get()[0].dtype() : DType::f32;
  for (const Tensor& t : cast.get())
    if (t.defined()) widest = promote(widest, t.dtype());
  std::vector<Tensor> promoted;
  for (const Tensor& t : cast.get())
    if (t.defined() && t.dtype() != widest)
      promoted.push_back(t.to(widest));
    else
      promoted.push_back(t);
  const std::vector<Tensor>& tensors = promoted;
  const Tensor& first = tensors[0];
  check_tensor(first, "concat", "tensor 0");
  const int d = checked_dim(first, dim, "concat");
  Shape out_shape = first.shape();
  out_shape[static_cast<size_t>(d)] = 0;
  std::vector<int64_t> sizes;
  std::vector<Tensor> parts;
  for (size_t t = 0; t < tensors.size(); ++t) {
    const Tensor& x = tensors[t];
    const std::string what = "tensor " + std::to_string(t);
    check_tensor(x, "concat", what.c_str());
    bool ok = x.ndim() == first.ndim();
    for (int e = 0; ok && e < x.ndim(); ++e) ok = e == d || x.size(e) == first.size(e);
    MIXPREC_CHECK(ok, "concat",
                  what + " " + shape_to_string(x.shape()) + " does not match tensor 0 " +
                      shape_to_string(first.shape()) + " outside dim " + std::to_string(d));
    sizes.push_back(x.size(d));
    out_shape[static_cast<size_t>(d)] += x.size(d);
    parts.push_back(x.detach().contiguous());
  }
  Tensor out = backend::current().concat(parts, d, out_shape);
  if (any_requires_grad(tensors)) {
    auto node = std::make_shared<ConcatBackward>(d, std::move(sizes), first.dtype());
    connect(*node, tensors);
    set_history(out, node);
  }
  return out;
}

}  // namespace mixprec
