// Validation loss and perplexity.
#include "mixprec/train/evaluate.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "mixprec/amp/compute_scope.h"
#include "mixprec/autograd/grad_mode.h"
#include "mixprec/dist/agreement.h"

namespace mixprec::train {

EvalMetrics evaluate(models::Model& model, dist::Parallelism& parallelism,
                     const data::ValidationBatches& batches, int64_t max_batches,
                     const amp::MixedPrecisionPolicy& policy, int64_t step,
                     amp::DelayedScaling* delayed) {
  const int64_t n =
      max_batches > 0 ? std::min(max_batches, batches.num_batches()) : batches.num_batches();
  NoGradGuard no_grad;
  amp::ComputeScope compute(policy, delayed);  // a delayed recipe reads its scales, records none
  double total = 0;                            // sum of per-token losses, f64
  int64_t tokens = 0;
  for (int64_t i = 0; i < n; ++i) {
    data::Batch b = batches.batch(i);
    // Rank r's rows [r R/W, (r+1) R/W) (the last batch may hold fewer rows than ranks: a rank
    // without rows still takes part in the gathers, on row 0, counting nothing).
    const auto [lo, hi] = parallelism.local_rows(b.inputs.size(0));
    b = {b.inputs.slice(0, lo < hi ? lo : 0, lo < hi ? hi : 1).contiguous(),
         b.targets.slice(0, lo < hi ? lo : 0, lo < hi ? hi : 1).contiguous()};
    const int64_t count = lo < hi ? b.inputs.numel() : 0;
    parallelism.begin_step(false);
    const double ce = model.loss(b.inputs, b.targets).ce.item();
    parallelism.end_forward();
    total += ce * static_cast<double>(count);
    tokens += count;
  }
  std::vector<double> sums{total, static_cast<double>(tokens)};
  dist::sum_over_ranks(parallelism.comm(), sums);
  total = sums[0];
  tokens = static_cast<int64_t>(sums[1]);
  EvalMetrics m;
  m.step = step;
  m.val_tokens = tokens;
  m.val_loss = tokens > 0 ? total / static_cast<double>(tokens) : 0.0;
  m.val_ppl = std::exp(m.val_loss);
  return m;
}

int64_t evaluated_text_bytes(const data::ValidationBatches& batches, int64_t max_batches,
                             const data::Tokenizer& tokenizer) {
  const int64_t n =
      max_batches > 0 ? std::min(max_batches, batches.num_batches()) : batches.num_batches();
  // The windows are consecutive, so their targets in order are one run of the text: decoded
  // at once, a subword split at a window edge counts its bytes once.
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < n; ++i) {
    const Tensor t = batches.batch(i).targets.contiguous();
    ids.insert(ids.end(), t.data<int64_t>(), t.data<int64_t>() + t.numel());
  }
  return static_cast<int64_t>(tokenizer.decode(ids).size());
}

void set_loss_per_byte(EvalMetrics& m, int64_t text_bytes) {
  if (text_bytes > 0)
    m.val_loss_per_byte =
        m.val_loss * static_cast<double>(m.val_tokens) / static_cast<double>(text_bytes);
}

}  // namespace mixprec::train
