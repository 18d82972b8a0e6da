// RunMetrics -> RunSummary: the few numbers that compare runs.
#include <algorithm>
#include <cmath>
#include <vector>

#include "mixprec/report/run_summary.h"

namespace mixprec::report {
namespace {

double mean_of_finite(const std::vector<double>& values) {
  double sum = 0;
  int64_t n = 0;
  for (double v : values)
    if (std::isfinite(v)) sum += v, ++n;
  return n == 0 ? NAN : sum / static_cast<double>(n);
}

double median_of_finite(std::vector<double> values) {
  std::erase_if(values, [](double v) { return !std::isfinite(v); });
  if (values.empty()) return NAN;
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

}  // namespace

RunSummary summarize(const RunMetrics& m) {
  RunSummary s;
  s.name = !m.run.name.empty() ? m.run.name : m.source.parent_path().filename().string();
  s.precision = m.run.precision;
  s.params = m.run.params;
  s.resumes = std::max<int64_t>(0, m.starts - 1);

  if (!m.train.empty()) {
    const TrainRecord& last = m.train.back();
    s.steps = last.step;
    s.final_loss_scale = last.loss_scale;

    std::vector<double> tail;  // the last 10 logged losses
    for (std::size_t i = m.train.size() - std::min<std::size_t>(10, m.train.size());
         i < m.train.size(); ++i)
      tail.push_back(m.train[i].loss);
    s.final_train_loss = mean_of_finite(tail);

    // Steps 1-3 pay for warm-up (allocator caches, thread pool): left out when possible.
    std::vector<double> speed, speed_after_warmup, underflow;
    for (const TrainRecord& r : m.train) {
      speed.push_back(r.tokens_per_s);
      if (r.step > 3) speed_after_warmup.push_back(r.tokens_per_s);
      underflow.push_back(r.underflow_fraction);
      s.peak_bytes = std::max(s.peak_bytes, r.peak_bytes);
    }
    s.median_tokens_per_s = median_of_finite(speed_after_warmup);
    if (std::isnan(s.median_tokens_per_s)) s.median_tokens_per_s = median_of_finite(speed);
    s.mean_underflow_fraction = mean_of_finite(underflow);

    // skipped_total counts steps between log lines too; the flags are the fallback.
    int64_t flagged = 0;
    for (const TrainRecord& r : m.train) flagged += r.skipped ? 1 : 0;
    s.skipped_steps = std::max(last.skipped_total, flagged);
  }

  for (const EvalRecord& e : m.eval) {
    if (!std::isfinite(e.val_loss)) continue;
    s.final_val_loss = e.val_loss;
    if (std::isnan(s.best_val_loss) || e.val_loss < s.best_val_loss) {
      s.best_val_loss = e.val_loss;
      s.best_val_step = e.step;
    }
  }
  return s;
}

}  // namespace mixprec::report
