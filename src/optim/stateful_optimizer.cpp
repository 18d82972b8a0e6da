#include "mixprec/optim/stateful_optimizer.h"

#include <cmath>
#include <set>

#include "fused_update.h"
#include "mixprec/backend/backend.h"

namespace mixprec::optim {
namespace {

Tensor scalar(double v) {
  return Tensor::full({}, v, DType::f64);
}

// A step count from a 0-d f64 entry: a whole number >= 0.
int64_t read_step(const StateDict& state, const std::string& key, const char* where) {
  const auto it = state.find(key);
  MIXPREC_CHECK(it != state.end(), where, "state dict has no '" + key + "'");
  const Tensor& t = it->second;
  MIXPREC_CHECK(t.defined() && t.ndim() == 0 && t.dtype() == DType::f64, where,
                "'" + key + "' must be a 0-d f64 tensor");
  const double v = t.item();
  MIXPREC_CHECK(v >= 0 && v == std::floor(v) && v < 0x1p53, where,
                "'" + key + "' = " + std::to_string(v) + " is not a step count");
  return static_cast<int64_t>(v);
}

// True when a value is below zero (-0 is not): the sign bit of a non-zero pattern.
template <class Bits>
bool any_negative(const Tensor& t) {
  constexpr Bits sign = Bits{1} << (sizeof(Bits) * 8 - 1);
  const Bits* v = static_cast<const Bits*>(t.raw_data());
  for (int64_t i = 0; i < t.numel(); ++i)
    if ((v[i] & sign) && (v[i] & ~sign)) return true;
  return false;
}

bool has_negative(const Tensor& t) {
  switch (dtype_size(t.dtype())) {
    case 2:
      return any_negative<uint16_t>(t);
    case 4:
      return any_negative<uint32_t>(t);
    default:
      return any_negative<uint64_t>(t);
  }
}

// A private copy of entry `key`, which must have the given shape and dtype and hold finite
// values (>= 0 for a second moment: its square root divides the update).
Tensor read_buffer(const StateDict& state, const std::string& key, const Shape& shape, DType dtype,
                   const char* where, bool nonnegative = false) {
  const auto it = state.find(key);
  MIXPREC_CHECK(it != state.end(), where, "state dict has no '" + key + "'");
  const Tensor& t = it->second;
  MIXPREC_CHECK(t.defined() && t.shape() == shape && t.dtype() == dtype, where,
                "'" + key + "' must be " + dtype_name(dtype) + " " + shape_to_string(shape) +
                    (t.defined() ? std::string(", got ") + dtype_name(t.dtype()) + " " +
                                       shape_to_string(t.shape())
                                 : std::string(", got an undefined tensor")));
  Tensor copy = t.contiguous().clone();
  MIXPREC_CHECK(backend::current().first_nonfinite({&copy, 1}, 1.0f) < 0, where,
                "'" + key +
                    "' holds inf or NaN: the optimizer state is damaged or comes from a "
                    "run that had diverged");
  MIXPREC_CHECK(!nonnegative || !has_negative(copy), where,
                "'" + key + "' holds negative values, which a second moment cannot");
  return copy;
}

bool uses_kahan(const Parameter& p) {
  return p.master().dtype() != DType::f32 && p.policy().master_update == amp::MasterUpdate::kahan;
}

}  // namespace

StatefulOptimizer::StatefulOptimizer(std::vector<ParamGroup> groups, uint64_t seed,
                                     const char* where)
    : Optimizer(std::move(groups)), seed_(seed), where_(where) {
  std::set<std::string> names;
  for (const ParamGroup& g : groups_) {
    MIXPREC_CHECK(g.lr >= 0 && g.weight_decay >= 0, where_,
                  "lr and weight_decay must be >= 0, got " + std::to_string(g.lr) + " and " +
                      std::to_string(g.weight_decay));
    for (const auto& p : g.params) {
      MIXPREC_CHECK(p != nullptr, where_, "a parameter group holds a null parameter");
      MIXPREC_CHECK(names.insert(p->name()).second, where_,
                    "parameter name '" + p->name() + "' appears twice");
    }
  }
}

StatefulOptimizer::ParamState StatefulOptimizer::make_state(const Parameter& param) const {
  ParamState s;
  const DType dt = param.master().dtype();
  for (const BufferSpec& spec : buffer_specs(param))
    s.buffers.push_back(Tensor::zeros(spec.shape, dt));
  if (uses_kahan(param)) s.kahan = Tensor::zeros(param.master().shape(), dt);
  return s;
}

StatefulOptimizer::ParamState& StatefulOptimizer::state_for(Parameter& param) {
  auto it = state_.find(&param);
  if (it == state_.end()) it = state_.emplace(&param, make_state(param)).first;
  return it->second;
}

void StatefulOptimizer::step(float inv_scale) {
  MIXPREC_CHECK(std::isfinite(inv_scale), where_,
                "inv_scale must be finite, got " + std::to_string(inv_scale));
  // Every gradient is checked before any parameter changes: a bad one leaves the step unmade.
  std::vector<Tensor> grads;  // [parameters with a gradient], in group order
  ParamList with_grad;
  for (const ParamGroup& group : groups_)
    for (const auto& p : group.params)
      if (const Tensor raw = p->grad(); raw.defined()) {  // as PyTorch: no gradient, no update
        grads.push_back(detail::checked_grad(*p, raw, where_));
        with_grad.push_back(p);
      }
  before_updates(with_grad, grads, inv_scale);
  std::size_t next = 0;
  for (const ParamGroup& group : groups_) {
    for (const auto& p : group.params) {
      if (!p->grad().defined()) continue;
      ParamState& st = state_for(*p);
      ++st.step;
      update(*p, group, st, grads[next++], inv_scale);
    }
  }
  ++steps_;
}

std::size_t StatefulOptimizer::state_bytes() const {
  std::size_t bytes = 0;
  for (const auto& [param, s] : state_) {
    for (const Tensor& b : s.buffers) bytes += b.nbytes();
    if (s.kahan.defined()) bytes += s.kahan.nbytes();
  }
  return bytes;
}

StateDict StatefulOptimizer::state_dict() const {
  StateDict out{{"step", scalar(static_cast<double>(steps_))}};
  for (const auto& p : parameters()) {
    const auto it = state_.find(p.get());
    if (it == state_.end()) continue;
    const ParamState& s = it->second;
    const std::vector<BufferSpec> specs = buffer_specs(*p);
    out[p->name() + ".step"] = scalar(static_cast<double>(s.step));
    for (std::size_t k = 0; k < specs.size(); ++k)
      out[p->name() + "." + specs[k].name] = s.buffers[k].clone();
    if (s.kahan.defined()) out[p->name() + ".kahan_comp"] = s.kahan.clone();
  }
  return out;
}

void StatefulOptimizer::load_state_dict(const StateDict& state) {
  // Everything is read and checked into `loaded` first: on any error nothing changes.
  const int64_t steps = read_step(state, "step", where_);
  std::set<std::string> used{"step"};
  std::unordered_map<const Parameter*, ParamState> loaded;
  for (const auto& p : parameters()) {
    const std::string step_key = p->name() + ".step";
    if (!state.count(step_key)) continue;  // no state yet for this parameter
    ParamState s;
    s.step = read_step(state, step_key, where_);
    used.insert(step_key);
    const DType dt = p->master().dtype();
    for (const BufferSpec& spec : buffer_specs(*p)) {
      const std::string key = p->name() + "." + spec.name;
      s.buffers.push_back(read_buffer(state, key, spec.shape, dt, where_, spec.nonnegative));
      used.insert(key);
    }
    if (uses_kahan(*p)) {
      const std::string key = p->name() + ".kahan_comp";
      s.kahan = read_buffer(state, key, p->master().shape(), dt, where_);
      used.insert(key);
    }
    loaded.emplace(p.get(), std::move(s));
  }
  for (const auto& [key, t] : state)
    MIXPREC_CHECK(
        used.count(key), where_,
        "state dict entry '" + key + "' matches no parameter or buffer of this optimizer");
  state_ = std::move(loaded);
  steps_ = steps;
}

}  // namespace mixprec::optim
