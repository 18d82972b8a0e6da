// index_put on x seen as [rows, inner] (rows: the indexed leading dims): accumulate is an
// index_add; a plain put is a gather from [x rows; value rows] that takes, for each row, the
// last value written to it. The backward is PyTorch's: x's gradient zeroed where written
// (unless accumulate), every value's gradient read at its index, duplicates included.
#include <string>
#include <vector>

#include "mixprec/amp/autocast.h"
#include "mixprec/autograd/function.h"
#include "mixprec/backend/backend.h"
#include "mixprec/ops/elementwise.h"
#include "mixprec/ops/indexing.h"

namespace mixprec {
namespace {

// Row selection as a gather index [count, inner]: row `rows[j]` in every column.
Tensor row_index(const std::vector<int64_t>& rows, int64_t inner) {
  std::vector<double> v;
  v.reserve(rows.size() * static_cast<size_t>(inner));
  for (int64_t r : rows) v.insert(v.end(), static_cast<size_t>(inner), static_cast<double>(r));
  return Tensor::from_doubles(v, {static_cast<int64_t>(rows.size()), inner}, DType::i64);
}

struct Target {
  std::vector<int64_t> rows;  // the row of x each value row lands on
  Shape indexed;              // the broadcast shape of the indices
  int64_t k = 0;              // leading dims indexed
};

Target resolve(const Tensor& x, const std::vector<Tensor>& indices) {
  const char* op = "index_put";
  MIXPREC_CHECK(!indices.empty(), op, "needs at least one index tensor");
  Target t;
  std::vector<std::vector<double>> idx;
  if (indices.size() == 1 && indices[0].dtype() == DType::boolean) {
    const Tensor& mask = indices[0];
    t.k = mask.ndim();
    MIXPREC_CHECK(t.k >= 1 && t.k <= x.ndim() &&
                      Shape(x.shape().begin(), x.shape().begin() + t.k) == mask.shape(),
                  op,
                  "a boolean mask must have x's leading shape, got " +
                      shape_to_string(mask.shape()) + " for x " + shape_to_string(x.shape()));
    const std::vector<double> m = mask.to_doubles();
    for (size_t i = 0; i < m.size(); ++i)
      if (m[i] != 0) t.rows.push_back(static_cast<int64_t>(i));
    t.indexed = {static_cast<int64_t>(t.rows.size())};
    return t;
  }
  t.k = static_cast<int64_t>(indices.size());
  MIXPREC_CHECK(t.k <= x.ndim(), op,
                std::to_string(t.k) + " index tensors for x of rank " + std::to_string(x.ndim()));
  for (const Tensor& i : indices) {
    MIXPREC_CHECK(i.defined() && (i.dtype() == DType::i64 || i.dtype() == DType::i32), op,
                  "indices must be i64 or i32 tensors (or one boolean mask)");
    t.indexed = idx.empty() ? i.shape() : broadcast_shapes(t.indexed, i.shape());
    idx.emplace_back();
  }
  for (size_t d = 0; d < indices.size(); ++d)
    idx[d] = broadcast_to(indices[d], t.indexed).to_doubles();
  t.rows.assign(static_cast<size_t>(shape_numel(t.indexed)), 0);
  for (size_t j = 0; j < t.rows.size(); ++j)
    for (size_t d = 0; d < indices.size(); ++d) {
      const int64_t size = x.size(static_cast<int64_t>(d));
      auto v = static_cast<int64_t>(idx[d][j]);
      MIXPREC_CHECK(v >= -size && v < size, op,
                    "index " + std::to_string(v) + " is out of bounds for dim " +
                        std::to_string(d) + " of size " + std::to_string(size));
      if (v < 0) v += size;
      t.rows[j] = t.rows[j] * size + v;
    }
  return t;
}

class IndexPutBackward final : public Node {
 public:
  IndexPutBackward(std::vector<int64_t> rows, std::vector<int64_t> kept, int64_t n_rows,
                   int64_t inner, bool accumulate, const Tensor& x, Shape value_shape,
                   const Tensor& values)
      : rows_(std::move(rows)),
        kept_(std::move(kept)),
        n_rows_(n_rows),
        inner_(inner),
        accumulate_(accumulate),
        x_shape_(x.shape()),
        x_dtype_(x.dtype()),
        value_shape_(std::move(value_shape)),
        values_shape_(values.shape()),
        values_dtype_(values.dtype()) {}
  const char* name() const override { return "IndexPutBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>& grads) override {
    if (!grads[0].defined()) return {Tensor(), Tensor()};
    const auto& edges = next_edges();
    const Tensor g = grads[0].contiguous().view({n_rows_, inner_});
    Tensor gx, gv;
    if (edges[0].node) {
      gx = accumulate_ ? g
                       : gather(concat({g, Tensor::zeros({1, inner_}, g.dtype())}, 0), 0,
                                row_index(kept_, inner_));
      gx = gx.view(x_shape_).to(x_dtype_);
    }
    if (edges[1].node) {
      gv = gather(g, 0, row_index(rows_, inner_)).view(value_shape_);
      gv = backend::current().reduce_to_shape(gv, values_shape_, values_dtype_);
    }
    return {gx, gv};
  }

 private:
  std::vector<int64_t> rows_;  // value row j lands on x row rows_[j]
  std::vector<int64_t> kept_;  // x row r's gradient source: r, or n_rows_ (zero) if written
  int64_t n_rows_, inner_;
  bool accumulate_;
  Shape x_shape_;
  DType x_dtype_;
  Shape value_shape_, values_shape_;
  DType values_dtype_;
};

}  // namespace

Tensor index_put(const Tensor& x_in, const std::vector<Tensor>& indices, const Tensor& values_in,
                 bool accumulate) {
  const char* op = "index_put";
  const auto [x, values] = amp::autocast_args("index_put", x_in, values_in);
  MIXPREC_CHECK(x.defined() && values.defined(), op, "undefined input");
  MIXPREC_CHECK(x.dtype() == values.dtype(), op,
                std::string("values (") + dtype_name(values.dtype()) + ") must have x's dtype (" +
                    dtype_name(x.dtype()) + ")");
  const Target t = resolve(x, indices);
  const int64_t n_rows = shape_numel(Shape(x.shape().begin(), x.shape().begin() + t.k));
  const Shape rest(x.shape().begin() + t.k, x.shape().end());
  const int64_t inner = shape_numel(rest), m = static_cast<int64_t>(t.rows.size());
  Shape value_shape = t.indexed;
  value_shape.insert(value_shape.end(), rest.begin(), rest.end());
  MIXPREC_CHECK(value_shape.size() >= values.shape().size() &&
                    broadcast_shapes(values.shape(), value_shape) == value_shape,
                op,
                "values of shape " + shape_to_string(values.shape()) +
                    " do not broadcast to the indexed shape " + shape_to_string(value_shape));
  const amp::AutocastGuard inner_ops(DType::bf16, /*enabled=*/false);  // one dtype already
  const Tensor x2 = x.detach().contiguous().view({n_rows, inner});
  const Tensor v2 = broadcast_to(values.detach(), value_shape).contiguous().view({m, inner});
  std::vector<int64_t> source(static_cast<size_t>(n_rows));  // forward: x row or value row
  std::vector<int64_t> kept(static_cast<size_t>(n_rows));    // backward: x row or the zero row
  for (int64_t r = 0; r < n_rows; ++r)
    source[static_cast<size_t>(r)] = kept[static_cast<size_t>(r)] = r;
  for (int64_t j = 0; j < m; ++j) {
    const int64_t r = t.rows[static_cast<size_t>(j)];
    source[static_cast<size_t>(r)] = n_rows + j;  // the last write wins
    kept[static_cast<size_t>(r)] = n_rows;
  }
  Tensor out;
  if (accumulate) {
    std::vector<double> rows(t.rows.begin(), t.rows.end());
    out = index_add(x2, 0, Tensor::from_doubles(rows, {m}, DType::i64), v2);
  } else {
    out = gather(concat({x2, v2}, 0), 0, row_index(source, inner));
  }
  out = out.view(x.shape());
  if (any_requires_grad({&x, &values})) {
    auto node = std::make_shared<IndexPutBackward>(t.rows, std::move(kept), n_rows, inner,
                                                   accumulate, x, value_shape, values);
    connect(*node, {x, values});
    set_history(out, node);
  }
  return out;
}

}  // namespace mixprec
