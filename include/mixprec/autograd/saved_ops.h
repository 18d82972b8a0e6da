// Selective activation checkpointing's hook in ops (torchtitan's op-level SAC). Inside a
// checkpoint given a save policy (autograd/checkpoint.h), an op whose outputs are worth keeping
// asks here first. The policy picks calls; the checkpoint's forward keeps the outputs of the
// picked ones, and its recompute in backward hands those back, so the op records its backward
// around them without computing them again. Everything else in the region is recomputed.
//
//   SavedOp saved("linear");
//   Tensor y;
//   if (saved.recalled()) {
//     y = saved.output(0);
//   } else {
//     y = compute(...);
//     saved.keep({y});  // stores only a picked call of a forward
//   }
//
// Outside such a checkpoint (the common case) it costs one thread-local read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "mixprec/tensor/tensor.h"

namespace mixprec {

// Whether a selective checkpoint keeps the outputs of a call: `op` the op's name, `nth` the
// call's 1-based count among the checkpoint's calls of that op.
using SavePolicy = bool (*)(std::string_view op, int64_t nth);

// torchtitan's op policy: every scaled_dot_product_attention call, and every other matmul
// (linear: the 1st, 3rd, 5th... call of a block; the ones between are recomputed).
bool save_attention_and_every_other_matmul(std::string_view op, int64_t nth);

class SavedOp {
 public:
  explicit SavedOp(const char* op);
  SavedOp(const SavedOp&) = delete;
  SavedOp& operator=(const SavedOp&) = delete;

  // A recompute: the outputs the forward kept for this call, as fresh tensors on the same
  // bytes without history (the op records its own).
  bool recalled() const { return recalled_ != nullptr; }
  Tensor output(std::size_t i) const;
  // A forward that keeps this call: the op must compute whatever its backward would read
  // (even under no-grad, as a checkpoint's forward runs) and keep() it.
  bool picked() const { return picked_; }
  // Stores `outputs` when picked(); nothing otherwise.
  void keep(std::vector<Tensor> outputs) const;

 private:
  const char* op_;
  bool picked_ = false;
  const std::vector<Tensor>* recalled_ = nullptr;
};

}  // namespace mixprec
