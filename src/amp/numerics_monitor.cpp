// The numerics monitor: one parallel read of every gradient (the backend's grad_numerics), summed
// per step.
#include "mixprec/amp/numerics_monitor.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "mixprec/backend/backend.h"

namespace mixprec::amp {

NumericsMonitor::NumericsMonitor(MonitorOptions options) : options_(options) {}

StepNumerics NumericsMonitor::observe(int64_t step, const GradientStep& opt, float loss_scale,
                                      bool unscaled) const {
  StepNumerics out;
  out.step = step;
  out.loss_scale = loss_scale;
  // Stored g times `to_scaled` is the scaled gradient; divided by `to_true`, the true one.
  const double to_scaled = unscaled ? loss_scale : 1.0;
  const double to_true = unscaled ? 1.0 : loss_scale;
  const std::vector<NamedGradient> named = opt.gradients();
  std::vector<Tensor> grads;
  grads.reserve(named.size());
  for (const NamedGradient& g : named) grads.push_back(g.grad.contiguous());
  const backend::GradNumericsPass pass = backend::current().grad_numerics(
      grads, to_scaled, options_.underflow_below, options_.overflow_above);
  for (std::size_t i = 0; i < grads.size(); ++i) {
    const backend::GradNumerics& n = pass.per_tensor[i];
    out.numel += n.numel;
    out.underflow += n.underflow;
    out.overflow += n.overflow;
    out.nonfinite += n.nonfinite;
    if (options_.per_param)
      out.params.push_back({std::string(named[i].name), n.numel,
                            static_cast<float>(n.amax / to_true), n.underflow, n.overflow,
                            n.nonfinite});
  }
  // An inf or NaN anywhere makes the norm inf, as clipping would see it.
  out.grad_norm = out.nonfinite ? INFINITY : std::sqrt(pass.sum_squares) / to_true;
  return out;
}

void NumericsMonitor::add_step_report(StepNumerics& numerics, const StepReport& report) {
  numerics.skipped = !report.stepped;
  numerics.skip_reason = report.reason;
  numerics.first_nonfinite = report.first_nonfinite;
  numerics.loss_scale = report.scale;
}

std::string StepNumerics::to_json() const {
  nlohmann::json j = {{"step", step},
                      {"loss_scale", loss_scale},
                      {"skipped", skipped},
                      {"grad_norm", grad_norm},
                      {"grad_numel", numel},
                      {"underflow_fraction", underflow_fraction()},
                      {"overflow_fraction", overflow_fraction()},
                      {"nonfinite", nonfinite}};
  if (skipped) {
    j["skip_reason"] = skip_reason;
    j["first_nonfinite"] = first_nonfinite;
  }
  if (!params.empty()) {
    nlohmann::json ps = nlohmann::json::array();
    for (const ParamNumerics& p : params)
      ps.push_back({{"name", p.name},
                    {"amax", p.amax},
                    {"underflow_fraction", p.underflow_fraction()},
                    {"overflow_fraction", p.overflow_fraction()},
                    {"nonfinite", p.nonfinite}});
    j["params"] = std::move(ps);
  }
  return j.dump();
}

}  // namespace mixprec::amp
