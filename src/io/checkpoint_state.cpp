#include "mixprec/io/checkpoint_state.h"

#include "mixprec/backend/backend.h"

#include <set>
#include <vector>

#include "mixprec/autograd/grad_mode.h"
#include "mixprec/core/error.h"

namespace mixprec::io {
namespace {

constexpr const char* kRestore = "restore_training_state";

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

// The entries under `prefix`, with the prefix removed.
optim::StateDict section(const TensorMap& tensors, const std::string& prefix) {
  optim::StateDict out;
  for (auto it = tensors.lower_bound(prefix); it != tensors.end() && starts_with(it->first, prefix);
       ++it)
    out.emplace(it->first.substr(prefix.size()), it->second);
  return out;
}

std::string describe(const Tensor& t) {
  return t.defined() ? std::string(dtype_name(t.dtype())) + " " + shape_to_string(t.shape())
                     : "an undefined tensor";
}

// Re-throws an Error from a component's loader with the section it read.
[[noreturn]] void rethrow_in(const Error& e, const char* prefix) {
  throw Error(kRestore, std::string("in the '") + prefix + "' entries: " + e.what());
}

}  // namespace

TensorMap flatten_training_state(const TrainingState& state) {
  TensorMap out;
  for (const auto& p : state.params) {
    MIXPREC_CHECK(p != nullptr, "flatten_training_state", "a parameter is null");
    const bool fresh = out.emplace(kModelPrefix + p->name(), p->master().clone()).second;
    MIXPREC_CHECK(fresh, "flatten_training_state",
                  "parameter name '" + p->name() + "' appears twice");
  }
  if (state.optimizer)
    for (const auto& [key, t] : state.optimizer->state_dict())
      out.emplace(kOptimPrefix + key, t.clone());
  if (state.scaler)
    for (const auto& [key, t] : state.scaler->checkpoint_dict())
      out.emplace(kScalerPrefix + key, t);
  for (const auto& [name, t] : state.buffers) out.emplace(kBufferPrefix + name, t.clone());
  if (state.delayed_scaling)
    for (const auto& [key, t] : state.delayed_scaling->checkpoint_dict())
      out.emplace(kFp8ScalingPrefix + key, t);
  return out;
}

void restore_training_state(const TensorMap& tensors, const TrainingState& state) {
  // 1. Masters: each parameter's entry, checked against its master.
  std::vector<const Tensor*> masters;
  std::set<std::string> names;
  for (const auto& p : state.params) {
    MIXPREC_CHECK(p != nullptr, kRestore, "a parameter is null");
    MIXPREC_CHECK(names.insert(p->name()).second, kRestore,
                  "parameter name '" + p->name() + "' appears twice");
    const std::string key = kModelPrefix + p->name();
    const auto it = tensors.find(key);
    MIXPREC_CHECK(it != tensors.end(), kRestore,
                  "no entry '" + key + "' for parameter '" + p->name() + "'");
    const Tensor& t = it->second;
    MIXPREC_CHECK(t.defined() && t.dtype() == p->master().dtype() &&
                      t.shape() == p->master().shape() && !t.is_meta(),
                  kRestore,
                  "entry '" + key + "' is " + describe(t) + ", the parameter's master is " +
                      describe(p->master()));
    masters.push_back(&t);
  }
  for (const auto& [key, t] : section(tensors, kModelPrefix))
    MIXPREC_CHECK(names.count(key), kRestore,
                  "entry '" + std::string(kModelPrefix) + key + "' matches no parameter");
  // A diverged run's NaN (or a damaged file's inf) must not come back as weights.
  std::vector<Tensor> scanned;
  for (const Tensor* t : masters) scanned.push_back(t->contiguous());
  if (const int64_t bad = backend::current().first_nonfinite(scanned, 1.0f); bad >= 0)
    throw Error(kRestore, "entry '" + std::string(kModelPrefix) + state.params[bad]->name() +
                              "' holds inf or NaN: the weights are damaged or come from a run that "
                              "had diverged");

  // 2. Buffers: each one's entry, of its shape, f32 and finite.
  std::vector<const Tensor*> buffer_values;
  if (!state.buffers.empty()) {
    std::set<std::string> buffer_names;
    for (const auto& [name, b] : state.buffers) {
      buffer_names.insert(name);
      const std::string key = kBufferPrefix + name;
      const auto it = tensors.find(key);
      MIXPREC_CHECK(it != tensors.end(), kRestore,
                    "no entry '" + key + "' for buffer '" + name + "'");
      const Tensor& t = it->second;
      MIXPREC_CHECK(t.defined() && t.dtype() == b.dtype() && t.shape() == b.shape() && !t.is_meta(),
                    kRestore,
                    "entry '" + key + "' is " + describe(t) + ", the buffer is " + describe(b));
      const std::vector<Tensor> scan{t.contiguous()};
      MIXPREC_CHECK(backend::current().first_nonfinite(scan, 1.0f) < 0, kRestore,
                    "entry '" + key + "' holds inf or NaN");
      buffer_values.push_back(&t);
    }
    for (const auto& [key, t] : section(tensors, kBufferPrefix))
      MIXPREC_CHECK(buffer_names.count(key), kRestore,
                    "entry '" + std::string(kBufferPrefix) + key + "' matches no buffer");
  }

  // 3. The scaler's state, tried on a copy.
  const optim::StateDict scaler_state = section(tensors, kScalerPrefix);
  if (state.scaler) {
    amp::GradScaler trial = *state.scaler;
    try {
      trial.load_checkpoint_dict(scaler_state);
    } catch (const Error& e) {
      rethrow_in(e, kScalerPrefix);
    }
  }

  // 3b. A delayed recipe's histories, tried on a fresh state of the same options.
  const optim::StateDict fp8_scaling = section(tensors, kFp8ScalingPrefix);
  if (state.delayed_scaling) {
    amp::DelayedScaling trial(state.delayed_scaling->options());
    try {
      trial.load_checkpoint_dict(fp8_scaling);
    } catch (const Error& e) {
      rethrow_in(e, kFp8ScalingPrefix);
    }
  }

  // 4. The optimizer checks everything before it changes anything; it is the first change.
  if (state.optimizer) {
    try {
      state.optimizer->load_state_dict(section(tensors, kOptimPrefix));
    } catch (const Error& e) {
      rethrow_in(e, kOptimPrefix);
    }
  }
  // 5. What remains cannot fail: it was all checked above.
  if (state.scaler) state.scaler->load_checkpoint_dict(scaler_state);
  if (state.delayed_scaling) state.delayed_scaling->load_checkpoint_dict(fp8_scaling);
  NoGradGuard no_grad;
  for (std::size_t i = 0; i < buffer_values.size(); ++i) {
    Tensor buffer = state.buffers[i].second;  // a handle: writes the model's storage
    buffer.copy_from(*buffer_values[i]);
  }
  for (std::size_t i = 0; i < state.params.size(); ++i) {
    state.params[i]->master().copy_from(*masters[i]);
    state.params[i]->refresh();
  }
}

}  // namespace mixprec::io
