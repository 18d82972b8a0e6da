// Anomaly mode state (thread-local, like grad mode) and the check itself.
#include "mixprec/autograd/anomaly.h"

#include <cmath>
#include <string>

#include "mixprec/autograd/grad_mode.h"
#include "mixprec/backend/backend.h"
#include "mixprec/core/error.h"

namespace mixprec {
namespace {

thread_local bool g_enabled = false;
thread_local bool g_throw = false;
thread_local AnomalyRecord g_record;
thread_local ModulePathSource g_source = nullptr;

}  // namespace

AnomalyModeGuard::AnomalyModeGuard(bool throw_on_first, ModulePathSource module_path)
    : saved_enabled_(g_enabled), saved_throw_(g_throw), saved_source_(g_source) {
  if (!g_enabled) g_record = AnomalyRecord{};
  g_enabled = true;
  g_throw = throw_on_first;
  if (module_path) g_source = module_path;
}

AnomalyModeGuard::~AnomalyModeGuard() {
  g_enabled = saved_enabled_;
  g_throw = saved_throw_;
  g_source = saved_source_;
}

std::string anomaly_module_path() {
  return g_source ? std::string(g_source()) : std::string();
}

bool anomaly_mode_enabled() {
  return g_enabled;
}

const AnomalyRecord& first_anomaly() {
  return g_record;
}

void note_if_nonfinite(const Tensor& t, const char* op, bool backward, int index,
                       const std::string& module) {
  const DType d = t.defined() ? t.dtype() : DType::f32;
  const bool scannable = is_computable(d);
  if (!g_enabled || g_record.found || !t.defined() || t.is_meta() || !scannable) return;
  NoGradGuard no_grad;  // the contiguous copy of a view must not record history itself
  const Tensor scanned[] = {t.detach().contiguous()};
  const backend::GradNumerics n =
      backend::current()
          .grad_numerics(std::span<const Tensor>(scanned), 1.0, 0.0, INFINITY)
          .per_tensor[0];
  if (n.nonfinite == 0) return;
  g_record.found = true;
  g_record.op = op;
  // Forward outputs are named by their backward node ("MulBackward"): report the op ("Mul").
  const std::string suffix = "Backward";
  if (!backward && g_record.op.size() > suffix.size() &&
      g_record.op.compare(g_record.op.size() - suffix.size(), suffix.size(), suffix) == 0)
    g_record.op.resize(g_record.op.size() - suffix.size());
  g_record.backward = backward;
  g_record.module = module;
  g_record.detail = std::string(backward ? "gradient " : "output ") + std::to_string(index) + " " +
                    shape_to_string(t.shape()) + " " + dtype_name(t.dtype()) + ": " +
                    std::to_string(n.nonfinite) + " non-finite value" +
                    (n.nonfinite == 1 ? "" : "s");
  if (g_throw)
    throw Error("anomaly mode",
                std::string("first non-finite value ") + (backward ? "in backward of " : "from ") +
                    op + (module.empty() ? "" : " in " + module) + ", " + g_record.detail);
}

}  // namespace mixprec
