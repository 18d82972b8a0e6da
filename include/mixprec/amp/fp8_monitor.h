// The FP8 side of the numerics monitor: while an Fp8Collection is alive, every FP8 operand a
// linear quantizes is measured (amp/fp8_stats.h) and filed under its name
//
//   "<module path> <product>.<operand>"
//      fwd.input    fwd.weight         output       Y  = X·Wᵀ
//      dgrad.grad_output  dgrad.weight  grad_input  dX = dY·W
//      wgrad.grad_output  wgrad.input   grad_weight dW = dYᵀ·X
//
// e.g. "blocks.0.attn.wq fwd.input" ("(top level)" outside every module; the module path is
// autocast's, captured when the linear runs forward: its backward runs outside the module's scope).
// A name cast more than once in a collection (gradient accumulation's micro-batches, activation
// checkpointing's recompute, the experts of one grouped GEMM sharing a scope) is merged: counts
// summed, the larger amax, the scale range widened (Fp8TensorStats::merge).
//
// Off (no collection alive) it costs the linear one relaxed atomic load per FP8 product.
// Products may run on many threads at once (grouped_linear); the result never depends on the
// thread count: names are listed in the order of the first cast of each, and "first" means
// first in execution order, the order taken from how many linears had been prepared when the
// cast ran (forward products then follow their linear's preparation, backward products run in
// reverse preparation order, as the autograd engine runs them), not from the racing threads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mixprec/amp/fp8_stats.h"

namespace mixprec::amp {

enum class Fp8Product : uint8_t { fwd, dgrad, wgrad };

// Where a linear's FP8 products come from: its module path and its place among the linears
// prepared during the collection (0: captured while none was alive; never recorded).
struct Fp8Site {
  std::string module;
  int64_t prepared = 0;
  uint64_t collection = 0;  // which collection captured it
};

// Captured when a linear with a recipe is prepared (its forward, in its module's scope);
// empty and free when no collection is alive.
Fp8Site fp8_site_here();

bool fp8_collecting();

// Measures one FP8 operand (`operand` 0 = A, 1 = B of the product's C = A·Bᵀ) and files it;
// nothing when no collection is alive or the site was captured outside one. Thread-safe.
void record_fp8_operand(const Fp8Site& site, Fp8Product product, int operand, const Tensor& source,
                        const backend::Quantized& q);

struct Fp8TensorRecord {
  std::string name;  // "<module path> <product>.<operand>"
  std::string spec;  // backend::describe of its cast, "e4m3fn 1x32 mx_floor"
  Fp8TensorStats stats;
};

struct Fp8StepStats {
  std::vector<Fp8TensorRecord> tensors;  // in the order of their first cast
  // Indices into `tensors` of the first (execution order) whose source held an inf or NaN,
  // and of the first cast that saturated; -1 when none.
  int64_t first_nonfinite = -1, first_saturated = -1;
  Fp8TensorStats total() const;  // every tensor's, merged
};

// One collection: the FP8 operands cast while it is alive (on any thread). At most one at a
// time in a process (Error otherwise): the trainer's step.
class Fp8Collection {
 public:
  Fp8Collection();
  ~Fp8Collection();
  Fp8Collection(const Fp8Collection&) = delete;
  Fp8Collection& operator=(const Fp8Collection&) = delete;

  // What has been recorded so far; the collection goes on.
  Fp8StepStats stats() const;
};

// "3 of 4096 elements inf or NaN, 0 saturated, 4093 flushed to zero (amax of the finite ones
// 1.5; scale 0; f8_e4m3fn allxall torchao)": one tensor's figures for messages.
std::string describe_fp8_tensor(const Fp8TensorRecord& r);

}  // namespace mixprec::amp
