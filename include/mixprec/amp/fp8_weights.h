// Weights that arrive already cast to FP8: FSDP's FP8 all-gather (torchao's
// enable_fsdp_float8_all_gather) casts each rank's master shard and gathers the FP8 bytes, so
// the full weight never exists in bf16. The gather files each such weight's quantized form
// under the tensor the model reads as that weight (a placeholder whose bytes do not exist: a
// read is an Error); a linear running its recipe then takes the filed form for the weight
// operand of output (W) and of grad_input (Wᵀ: the same bytes and scales transposed) instead
// of casting. Keyed by the weight's storage, so detached tensors find it (a linear checks it
// reads the whole weight).
#pragma once

#include <cstdint>
#include <optional>

#include "mixprec/backend/quantized.h"
#include "mixprec/tensor/tensor.h"

namespace mixprec::amp {

// The product a weight's filed form is for: output reads W [out, in] as filed, grad_input Wᵀ
// [in, out]. A recipe whose one cast serves both files only output's: grad_input transposes it.
enum class WeightCast : uint8_t { output, grad_input };

// The tensor the model reads as such a weight: its shape and dtype over one released element
// (strides 0), so any read of its values is an Error, while autograd accumulates its gradient
// as any leaf's. Each has its own storage: the filed form is keyed by it.
Tensor fp8_weight_placeholder(const Shape& shape, DType dtype);

// Files q for `weight` and product `cast` until forget_fp8_weight: for output data [out, in],
// for grad_input [in, out] (a view: it may be strided), scales by its spec.
void file_fp8_weight(const Tensor& weight, backend::Quantized q,
                     WeightCast cast = WeightCast::output);
void forget_fp8_weight(const Tensor& weight);  // both products' forms
// The filed form of `weight` for `cast`, if any.
std::optional<backend::Quantized> filed_fp8_weight(const Tensor& weight,
                                                   WeightCast cast = WeightCast::output);

}  // namespace mixprec::amp
