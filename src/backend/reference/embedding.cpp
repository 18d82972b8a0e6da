// Reference embedding: a row lookup, and per-id f64 sums of the gradient rows.
#include <string>

#include "reference_kernels.h"

namespace mixprec::backend::reference {
namespace {

// ids as i64, each checked against [0, V) (the cpu kernel's message).
std::vector<int64_t> checked_ids(const Tensor& ids, int64_t V, const char* where) {
  const std::vector<int64_t> id = indices(ids);
  for (size_t i = 0; i < id.size(); ++i)
    MIXPREC_CHECK(id[i] >= 0 && id[i] < V, where,
                  "id " + std::to_string(id[i]) + " at flat position " + std::to_string(i) +
                      " of ids " + shape_to_string(ids.shape()) + " is outside [0, " +
                      std::to_string(V) + ")");
  return id;
}

}  // namespace

Tensor embedding_forward(const Tensor& ids, const Tensor& weight) {
  const int64_t V = weight.size(0), D = weight.size(1);
  const std::vector<int64_t> id = checked_ids(ids, V, "embedding");
  const std::vector<double> w = values(weight);
  std::vector<double> out;
  for (const int64_t v : id) out.insert(out.end(), w.begin() + v * D, w.begin() + (v + 1) * D);
  Shape shape = ids.shape();
  shape.push_back(D);
  return make(out, shape, weight.dtype());
}

Tensor embedding_backward(const Tensor& ids, const Tensor& dy, int64_t V, DType acc) {
  const char* where = "embedding backward";
  const int64_t D = dy.ndim() > 0 ? dy.size(-1) : 0;
  Shape expect = ids.shape();
  expect.push_back(D);
  MIXPREC_CHECK(dy.shape() == expect, where,
                "gradient shape " + shape_to_string(dy.shape()) + " does not match ids " +
                    shape_to_string(ids.shape()) + " plus the embedding dim");
  const std::vector<int64_t> id = checked_ids(ids, V, where);
  const std::vector<double> g = values(dy);
  std::vector<double> dw(static_cast<size_t>(V * D), 0.0);
  for (size_t i = 0; i < id.size(); ++i)  // position order
    for (int64_t c = 0; c < D; ++c)
      dw[static_cast<size_t>(id[i] * D + c)] +=
          g[i * static_cast<size_t>(D) + static_cast<size_t>(c)];
  return make(dw, {V, D}, acc);
}

}  // namespace mixprec::backend::reference
