// Validation loss and perplexity.
#include "mixprec/train/evaluate.h"

#include <algorithm>
#include <cmath>

#include "mixprec/autograd/grad_mode.h"
#include "mixprec/train/compute_scope.h"

namespace mixprec::train {

EvalMetrics evaluate(models::Transformer& model, const data::ValidationBatches& batches,
                     int64_t max_batches, const amp::MixedPrecisionPolicy& policy, int64_t step) {
  const int64_t n =
      max_batches > 0 ? std::min(max_batches, batches.num_batches()) : batches.num_batches();
  NoGradGuard no_grad;
  ComputeScope compute(policy);
  double total = 0;  // sum of per-token losses, f64
  int64_t tokens = 0;
  for (int64_t i = 0; i < n; ++i) {
    const data::Batch b = batches.batch(i);
    const int64_t count = b.inputs.numel();
    total += model.loss(b.inputs, b.targets).ce.item() * static_cast<double>(count);
    tokens += count;
  }
  EvalMetrics m;
  m.step = step;
  m.val_tokens = tokens;
  m.val_loss = tokens > 0 ? total / static_cast<double>(tokens) : 0.0;
  m.val_ppl = std::exp(m.val_loss);
  return m;
}

}  // namespace mixprec::train
