// Activation checkpointing (torch.utils.checkpoint, reentrant form): trade compute for memory.
//
//   std::vector<Tensor> y = checkpoint(fn, {x});
//
// runs fn(x) without recording history, so the graph keeps only x (and fn), not fn's
// intermediate activations; y are outputs of one node whose backward runs fn again on x with
// grad enabled and backpropagates through that recomputed graph. Weights fn reads get their
// gradients from that inner backward (into .grad, as always); x gets its gradient through the
// node. With a SavePolicy (selective checkpointing, saved_ops.h) the forward also keeps the
// outputs of the op calls the policy picks, and the recompute reuses them.
//
// The recompute repeats the forward exactly, so gradients are bit for bit those without
// checkpointing: it runs under the thread state captured at the forward (grad mode here; the
// layers above add autocast, the matmul precision and the module path through
// checkpoint_state.h) although backward runs outside the caller's scopes. The library's random
// ops take explicit seeds (dropout), so they repeat too. fn must be a function of its inputs and
// of state that does not change before backward (weights are not updated in between), and must
// not modify its inputs in place. The node keeps fn until its backward has run: what fn
// captures by reference must outlive that.
//
// The backward is re-entrant: the engine (engine.cpp) keeps all of its state on the stack, so
// the node runs a whole backward of its own.
//
// Without grad mode (evaluation), or inside another checkpoint's function, checkpoint(fn, x) is
// fn(x). Inputs need not require grad: the outputs then still carry the node, so the weights fn
// reads get gradients.
#pragma once

#include <functional>
#include <vector>

#include "mixprec/autograd/saved_ops.h"
#include "mixprec/tensor/tensor.h"

namespace mixprec {

using CheckpointFn = std::function<std::vector<Tensor>(const std::vector<Tensor>& inputs)>;

struct CheckpointOptions {
  // Null: a full checkpoint (only the inputs are kept). Else the op calls whose outputs the
  // forward keeps for the recompute (save_attention_and_every_other_matmul: torchtitan's).
  SavePolicy save = nullptr;
};

// Floating outputs carry the checkpoint's node; others are returned as fn made them.
std::vector<Tensor> checkpoint(const CheckpointFn& fn, const std::vector<Tensor>& inputs,
                               const CheckpointOptions& options = {});

// True while a checkpoint's function runs again in backward: code with side effects beyond
// its outputs (statistics a model records per forward) can tell the recompute from the forward.
bool checkpoint_recomputing();

}  // namespace mixprec
