// The table of weights filed in FP8 (amp/fp8_weights.h). A mutex: it is one table for every
// thread (a gather files on the main thread, linears may look up from others).
#include "mixprec/amp/fp8_weights.h"

#include <map>
#include <mutex>
#include <utility>

namespace mixprec::amp {
namespace {

struct Filed {
  std::mutex mutex;
  std::map<std::pair<const Storage*, WeightCast>, backend::Quantized> weights;
};

Filed& filed() {
  static Filed f;
  return f;
}

}  // namespace

Tensor fp8_weight_placeholder(const Shape& shape, DType dtype) {
  Tensor one = Tensor::empty({1}, dtype);
  one.storage()->release();
  return one.as_strided(shape, Shape(shape.size(), 0), 0);
}

void file_fp8_weight(const Tensor& weight, backend::Quantized q, WeightCast cast) {
  Filed& f = filed();
  const std::lock_guard lock(f.mutex);
  f.weights.insert_or_assign({weight.storage().get(), cast}, std::move(q));
}

void forget_fp8_weight(const Tensor& weight) {
  if (!weight.defined()) return;
  Filed& f = filed();
  const std::lock_guard lock(f.mutex);
  for (const WeightCast cast : {WeightCast::output, WeightCast::grad_input})
    f.weights.erase({weight.storage().get(), cast});
}

std::optional<backend::Quantized> filed_fp8_weight(const Tensor& weight, WeightCast cast) {
  if (!weight.defined()) return std::nullopt;
  Filed& f = filed();
  const std::lock_guard lock(f.mutex);
  const auto it = f.weights.find({weight.storage().get(), cast});
  if (it == f.weights.end()) return std::nullopt;
  return it->second;
}

}  // namespace mixprec::amp
