// Transformer Engine's DelayedScaling: an FP8 tensor of a recipe that asks for it is cast with
// a scale computed from the amaxes of earlier steps (its amax history), not from its own amax,
// so the cast needs no pass over the tensor first (the GPU's reason). TE's rules, from
// transformer_engine/common/recipe (delayed_scaling):
// - every tensor starts at scale 1 with a zero history of amax_history_len entries;
// - a cast records the tensor's amax into history[0] (here the max of every cast of that tensor
//   in the step: micro-batches, recomputes);
// - at the end of a step amax = max(history) ("max") or history[0] ("most_recent"); the scale
//   becomes (fp8_max / amax) / 2^margin in f32 when amax is finite and > 0 (else it stays), a
//   quotient that overflows becoming FLT_MAX; then the history rolls: history = roll(history,
//   -1) and history[0] = 0 (the window holds the last amax_history_len amaxes).
// Tensors are keyed by module path and role ("blocks.0.attn.wq.input", ".weight",
// ".grad_output"): the weight of the forward and of grad_input share one scale, as TE reuses
// its FP8 weight. Casts under no_grad (evaluation) read the scales and record nothing, so how
// often a run evaluates never changes its training bits.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "mixprec/backend/quantized.h"
#include "mixprec/tensor/tensor_map.h"

namespace mixprec::amp {

enum class AmaxAlgo : uint8_t { max, most_recent };
AmaxAlgo parse_amax_algo(std::string_view name);  // "max" | "most_recent"; throws naming it
const char* amax_algo_name(AmaxAlgo algo);

struct DelayedScalingOptions {
  int64_t amax_history_len = 1024;  // TE's defaults
  AmaxAlgo amax_compute_algo = AmaxAlgo::max;
  int64_t margin = 0;
  bool operator==(const DelayedScalingOptions&) const = default;
};

class DelayedScaling {
 public:
  explicit DelayedScaling(DelayedScalingOptions options = {});
  const DelayedScalingOptions& options() const { return options_; }

  // The scale to multiply `key`'s tensor by now (a tensor seen first starts at 1), its format's
  // largest finite value `fp8_max` noted for the update. Thread-safe.
  float scale(const std::string& key, float fp8_max);
  // Notes `amax` (NaN-keeping max) into key's current history slot. Thread-safe.
  void record(const std::string& key, float amax);
  // The end of a training step: each entry's new scale from its history, then the roll.
  // `reduce_max`, when given, replaces the current amaxes (in key order) by their maxima over
  // every rank first (TE's reduce_amax), so every rank casts with the same scales.
  void update(const std::function<void(std::vector<float>&)>& reduce_max = {});

  std::size_t size() const;
  std::vector<std::string> keys() const;
  // "<key>.amax_history" [len], "<key>.scale" [1], "<key>.fp8_max" [1], all f32.
  TensorMap checkpoint_dict() const;
  // Replaces the state by `state` after checking all of it (throws naming the entry; nothing
  // changes then): every key's three entries, the history of amax_history_len, a positive
  // finite scale, fp8_max of E4M3 (448) or E5M2 (57344), no negative amax.
  void load_checkpoint_dict(const TensorMap& state);

 private:
  struct Entry {
    float fp8_max = 0;
    float scale = 1;
    std::vector<float> history;
  };
  DelayedScalingOptions options_;
  mutable std::mutex mutex_;
  std::map<std::string, Entry> entries_;
};

// x [rows, cols] (f32/bf16/f16, any strides) cast as a delayed recipe casts it: one scale,
// state.scale(key), every element x·scale in f32 saturated to spec.element's largest value and
// rounded to nearest even; x's amax is recorded under `key` when `record` (a training step's
// cast: the linear's forward ran with grad mode on; backward runs with it off). The
// scale is stored as the te rule stores it (multiply form), so the scaled GEMM descales by
// 1/scale. spec must be tensorwise.
backend::Quantized delayed_quantize(const Tensor& x, const backend::QuantSpec& spec,
                                    DelayedScaling& state, const std::string& key, bool record);

}  // namespace mixprec::amp
