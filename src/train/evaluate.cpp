// Validation loss and perplexity.
#include "mixprec/train/evaluate.h"

#include <algorithm>
#include <cmath>

#include "mixprec/autograd/grad_mode.h"
#include "mixprec/dist/agreement.h"
#include "mixprec/train/compute_scope.h"

namespace mixprec::train {

EvalMetrics evaluate(models::Transformer& model, const data::ValidationBatches& batches,
                     int64_t max_batches, const amp::MixedPrecisionPolicy& policy, int64_t step,
                     dist::ShardedModel* sharded) {
  const int64_t n =
      max_batches > 0 ? std::min(max_batches, batches.num_batches()) : batches.num_batches();
  NoGradGuard no_grad;
  ComputeScope compute(policy);
  double total = 0;  // sum of per-token losses, f64
  int64_t tokens = 0;
  const int rank = sharded ? sharded->comm().rank() : 0;
  const int world = sharded ? sharded->comm().size() : 1;
  for (int64_t i = 0; i < n; ++i) {
    data::Batch b = batches.batch(i);
    // Rank r's rows [r R/W, (r+1) R/W) (the last batch may hold fewer rows than ranks: a rank
    // without rows still takes part in the gathers, on row 0, counting nothing).
    const int64_t rows = b.inputs.size(0);
    const int64_t lo = rows * rank / world, hi = rows * (rank + 1) / world;
    b = {b.inputs.slice(0, lo < hi ? lo : 0, lo < hi ? hi : 1).contiguous(),
         b.targets.slice(0, lo < hi ? lo : 0, lo < hi ? hi : 1).contiguous()};
    const int64_t count = lo < hi ? b.inputs.numel() : 0;
    if (sharded) sharded->begin_step(false);
    const double ce = model.loss(b.inputs, b.targets).ce.item();
    if (sharded) sharded->end_forward();
    total += ce * static_cast<double>(count);
    tokens += count;
  }
  if (sharded) {
    std::vector<double> sums{total, static_cast<double>(tokens)};
    dist::sum_over_ranks(sharded->comm(), sums);
    total = sums[0];
    tokens = static_cast<int64_t>(sums[1]);
  }
  EvalMetrics m;
  m.step = step;
  m.val_tokens = tokens;
  m.val_loss = tokens > 0 ? total / static_cast<double>(tokens) : 0.0;
  m.val_ppl = std::exp(m.val_loss);
  return m;
}

}  // namespace mixprec::train
