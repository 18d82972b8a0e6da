// Anomaly mode: finds the first op whose output holds an inf or NaN. While an
// AnomalyModeGuard is alive, every op output that records autograd history (forward) and
// every gradient a backward node returns is checked; the first non-finite one is recorded
// (op name, forward or backward, shape), and optionally thrown as mixprec::Error (fp8 outputs
// are not checked). Costs one
// read of each checked tensor, so it is for debugging runs, as torch.autograd's anomaly mode.
#pragma once

#include <string>
#include <string_view>

#include "mixprec/tensor/tensor.h"

namespace mixprec {

struct AnomalyRecord {
  bool found = false;
  std::string op;         // the op (forward) or backward node that produced it
  bool backward = false;  // produced during backward()
  std::string module;     // where the op ran ("blocks.1.moe.experts"; "" outside every module)
  std::string detail;     // "output 0 [8, 256] bf16: 3 non-finite values"
};

// The module path of the code running now, as the layer that names modules (amp's
// ModuleScope) reports it: autograd sits below it and asks through this.
using ModulePathSource = std::string_view (*)();

class AnomalyModeGuard {
 public:
  // The record starts empty when the outermost guard is created. With `module_path`, each
  // forward op's node remembers the module it ran in, so a record names its module in
  // backward too.
  explicit AnomalyModeGuard(bool throw_on_first = false, ModulePathSource module_path = nullptr);
  ~AnomalyModeGuard();
  AnomalyModeGuard(const AnomalyModeGuard&) = delete;
  AnomalyModeGuard& operator=(const AnomalyModeGuard&) = delete;

 private:
  bool saved_enabled_, saved_throw_;
  ModulePathSource saved_source_;
};

bool anomaly_mode_enabled();
// The first non-finite output seen on this thread since the outermost guard started.
const AnomalyRecord& first_anomaly();

// The module path now ("" without a source): what set_history stores in a node in anomaly mode.
std::string anomaly_module_path();

// Called by set_history (forward) and the engine (backward): records t when anomaly mode is on,
// nothing is recorded yet and t (floating) holds inf or NaN. `op` names the producer, `module`
// the module it ran in.
void note_if_nonfinite(const Tensor& t, const char* op, bool backward, int index,
                       const std::string& module);

}  // namespace mixprec
