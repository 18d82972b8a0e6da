#include "mixprec/amp/delayed_scaling.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <set>

#include "mixprec/core/error.h"

namespace mixprec::amp {

namespace {

constexpr const char* kDelayedScaling = "delayed scaling";
constexpr const char* kHistory = ".amax_history";
constexpr const char* kScale = ".scale";
constexpr const char* kMax = ".fp8_max";

float nan_keeping_max(float a, float b) {
  return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b);
}

bool ends_with(const std::string& s, std::string_view tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// One f32 entry of the dict as values, checked for its shape.
std::vector<float> read(const TensorMap& state, const std::string& name, int64_t numel) {
  const auto it = state.find(name);
  MIXPREC_CHECK(it != state.end(), kDelayedScaling, "no entry '" + name + "'");
  const Tensor& t = it->second;
  MIXPREC_CHECK(
      t.defined() && t.dtype() == DType::f32 && t.ndim() == 1 && t.size(0) == numel,
      kDelayedScaling,
      "entry '" + name + "' must be f32 [" + std::to_string(numel) + "], got " +
          (t.defined() ? std::string(dtype_name(t.dtype())) + " " + shape_to_string(t.shape())
                       : std::string("nothing")));
  const Tensor c = t.contiguous();
  return {c.data<float>(), c.data<float>() + numel};
}

}  // namespace

AmaxAlgo parse_amax_algo(std::string_view name) {
  if (name == "max") return AmaxAlgo::max;
  MIXPREC_CHECK(name == "most_recent", kDelayedScaling,
                "amax_compute_algo '" + std::string(name) + "' is not one of max, most_recent");
  return AmaxAlgo::most_recent;
}

const char* amax_algo_name(AmaxAlgo algo) {
  return algo == AmaxAlgo::max ? "max" : "most_recent";
}

DelayedScaling::DelayedScaling(DelayedScalingOptions options) : options_(options) {
  MIXPREC_CHECK(
      options_.amax_history_len >= 1, kDelayedScaling,
      "amax_history_len must be at least 1, got " + std::to_string(options_.amax_history_len));
  MIXPREC_CHECK(options_.margin >= 0 && options_.margin <= 127, kDelayedScaling,
                "margin must be in [0, 127], got " + std::to_string(options_.margin));
}

float DelayedScaling::scale(const std::string& key, float fp8_max) {
  const std::lock_guard lock(mutex_);
  Entry& e = entries_[key];
  if (e.history.empty()) e.history.assign(static_cast<std::size_t>(options_.amax_history_len), 0);
  e.fp8_max = fp8_max;
  return e.scale;
}

void DelayedScaling::record(const std::string& key, float amax) {
  const std::lock_guard lock(mutex_);
  const auto it = entries_.find(key);
  MIXPREC_CHECK(it != entries_.end(), kDelayedScaling,
                "'" + key + "' recorded before its scale was read");
  it->second.history[0] = nan_keeping_max(it->second.history[0], amax);
}

void DelayedScaling::update(const std::function<void(std::vector<float>&)>& reduce_max) {
  const std::lock_guard lock(mutex_);
  if (reduce_max) {
    std::vector<float> current;
    for (const auto& [key, e] : entries_) current.push_back(e.history[0]);
    reduce_max(current);
    std::size_t i = 0;
    for (auto& [key, e] : entries_) e.history[0] = current[i++];
  }
  const float two_to_margin = std::ldexp(1.0f, static_cast<int>(options_.margin));
  for (auto& [key, e] : entries_) {
    std::vector<float>& h = e.history;
    float amax = h[0];
    if (options_.amax_compute_algo == AmaxAlgo::max)
      for (float a : h) amax = nan_keeping_max(amax, a);
    if (std::isfinite(amax) && amax > 0) {
      const float s = e.fp8_max / amax / two_to_margin;  // f32, as TE's kernel
      e.scale = std::isinf(s) ? FLT_MAX : s;
    }
    std::rotate(h.begin(), h.begin() + 1, h.end());  // torch.roll(h, -1)
    h[0] = 0;
  }
}

std::size_t DelayedScaling::size() const {
  const std::lock_guard lock(mutex_);
  return entries_.size();
}

std::vector<std::string> DelayedScaling::keys() const {
  const std::lock_guard lock(mutex_);
  std::vector<std::string> out;
  for (const auto& [key, e] : entries_) out.push_back(key);
  return out;
}

TensorMap DelayedScaling::checkpoint_dict() const {
  const std::lock_guard lock(mutex_);
  TensorMap out;
  const auto vector_of = [](const std::vector<float>& v) {
    Tensor t = Tensor::empty({static_cast<int64_t>(v.size())}, DType::f32);
    std::copy(v.begin(), v.end(), t.data<float>());
    return t;
  };
  for (const auto& [key, e] : entries_) {
    out.emplace(key + kHistory, vector_of(e.history));
    out.emplace(key + kScale, vector_of({e.scale}));
    out.emplace(key + kMax, vector_of({e.fp8_max}));
  }
  return out;
}

void DelayedScaling::load_checkpoint_dict(const TensorMap& state) {
  std::set<std::string> keys;
  for (const auto& [name, t] : state) {
    const std::string_view tail = ends_with(name, kHistory) ? kHistory
                                  : ends_with(name, kScale) ? kScale
                                  : ends_with(name, kMax)   ? kMax
                                                            : "";
    MIXPREC_CHECK(!tail.empty(), kDelayedScaling,
                  "entry '" + name + "' is none of <tensor>.amax_history, .scale, .fp8_max");
    keys.insert(name.substr(0, name.size() - tail.size()));
  }
  std::map<std::string, Entry> loaded;
  for (const std::string& key : keys) {
    Entry e;
    const auto h = state.find(key + kHistory);
    MIXPREC_CHECK(h == state.end() || !h->second.defined() || h->second.ndim() != 1 ||
                      h->second.size(0) == options_.amax_history_len,
                  kDelayedScaling,
                  "entry '" + key + kHistory + "' holds " +
                      std::to_string(h == state.end() ? 0 : h->second.size(0)) +
                      " amaxes, this run's amax_history_len is " +
                      std::to_string(options_.amax_history_len) +
                      " ([quantize.linear.float8] amax_history_len: set it to the "
                      "checkpoint's to resume)");
    e.history = read(state, key + kHistory, options_.amax_history_len);
    for (float a : e.history)
      MIXPREC_CHECK(!(a < 0), kDelayedScaling,
                    "entry '" + key + kHistory + "' holds a negative amax " + std::to_string(a));
    e.scale = read(state, key + kScale, 1)[0];
    MIXPREC_CHECK(std::isfinite(e.scale) && e.scale > 0, kDelayedScaling,
                  "entry '" + key + kScale + "' = " + std::to_string(e.scale) +
                      " is not a positive finite scale");
    e.fp8_max = read(state, key + kMax, 1)[0];
    MIXPREC_CHECK(e.fp8_max == 448.0f || e.fp8_max == 57344.0f, kDelayedScaling,
                  "entry '" + key + kMax + "' = " + std::to_string(e.fp8_max) +
                      " is neither E4M3's 448 nor E5M2's 57344");
    loaded.emplace(key, std::move(e));
  }
  const std::lock_guard lock(mutex_);
  entries_ = std::move(loaded);
}

}  // namespace mixprec::amp
