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

void NumericsMonitor::add_fp8(StepNumerics& numerics, const Fp8StepStats& fp8) const {
  numerics.fp8_tensors = static_cast<int64_t>(fp8.tensors.size());
  numerics.fp8_total = fp8.total();
  if (options_.per_param) numerics.fp8 = fp8.tensors;
  auto at = [&](int64_t i) {
    return i < 0 ? std::nullopt
                 : std::optional<Fp8TensorRecord>(fp8.tensors[static_cast<std::size_t>(i)]);
  };
  numerics.fp8_first_nonfinite = at(fp8.first_nonfinite);
  numerics.fp8_first_saturated = at(fp8.first_saturated);
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
  if (fp8_tensors > 0) {
    j["fp8_tensors"] = fp8_tensors;
    j["fp8_numel"] = fp8_total.numel;
    j["fp8_amax"] = fp8_total.amax;
    j["fp8_saturated_fraction"] = fp8_total.saturated_fraction();
    j["fp8_flushed_fraction"] = fp8_total.flushed_fraction();
    j["fp8_nonfinite"] = fp8_total.nonfinite;
    if (fp8_first_nonfinite) j["fp8_first_nonfinite"] = fp8_first_nonfinite->name;
    if (fp8_first_saturated) j["fp8_first_saturated"] = fp8_first_saturated->name;
  }
  if (!fp8.empty()) {
    nlohmann::json ts = nlohmann::json::array();
    for (const Fp8TensorRecord& t : fp8) {
      const Fp8TensorStats& s = t.stats;
      nlohmann::json o = {{"name", t.name},
                          {"cast", t.spec},
                          {"numel", s.numel},
                          {"amax", s.amax},
                          {"saturated_fraction", s.saturated_fraction()},
                          {"flushed_fraction", s.flushed_fraction()},
                          {"nonfinite", s.nonfinite}};
      if (s.scales > 0) {  // JSON has no inf: a non-finite scale is written as null
        o["scale_min"] = std::isfinite(s.scale_min) ? nlohmann::json(s.scale_min) : nullptr;
        o["scale_max"] = std::isfinite(s.scale_max) ? nlohmann::json(s.scale_max) : nullptr;
      }
      ts.push_back(std::move(o));
    }
    j["fp8"] = std::move(ts);
  }
  return j.dump();
}

}  // namespace mixprec::amp
