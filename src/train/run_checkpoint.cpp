// Trainer checkpoints: save, check, restore, and load a model for eval/sample.
#include "mixprec/train/run_checkpoint.h"
#include "mixprec/io/config_file.h"

#include <fmt/core.h>

#include <filesystem>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "mixprec/core/error.h"
#include "mixprec/dist/machine_fit.h"
#include "mixprec/train/checkpoint_layout_hint.h"
#include "mixprec/train/checkpoint_plausibility.h"
#include "mixprec/train/run_data.h"

namespace mixprec::train {
namespace {

constexpr const char* kStepKey = "train.step";
constexpr const char* kSeedKey = "train.seed";
constexpr const char* kBf16KernelKey = "bf16_kernel";

// The first model.* key whose value differs, as "model.d_model = 128 in the checkpoint, 64 in
// the config"; empty when the models match.
std::string first_model_difference(const config::TrainConfig& saved,
                                   const config::TrainConfig& current) {
  if (saved.model == current.model) return "";
  const auto d = config::first_difference(saved, current, "model");
  return d ? d->key + " = " + d->a + " in the checkpoint, " + d->b + " in the config"
           : "the model sections differ";
}

int64_t scalar_i64(const io::Checkpoint& c, const char* key) {
  const auto it = c.tensors.find(key);
  MIXPREC_CHECK(
      it != c.tensors.end() && it->second.numel() == 1 && it->second.dtype() == DType::i64,
      "checkpoint", c.path + " has no i64 " + key + " entry: not a mixprec training checkpoint");
  return it->second.contiguous().data<int64_t>()[0];  // exact: item() would go through double
}

// The first parameter whose checkpoint entry is missing or has another shape or dtype, as
// "model.blocks.0.attn.wq [64, 64] f32 (checkpoint: [128, 128] f32)"; empty when all fit.
std::string first_tensor_mismatch(const io::TensorMap& tensors, const optim::ParamList& params) {
  for (const auto& p : params) {
    const std::string key = std::string(io::kModelPrefix) + p->name();
    const Tensor& m = p->master();
    const std::string want = shape_to_string(m.shape()) + " " + dtype_name(m.dtype());
    const auto it = tensors.find(key);
    if (it == tensors.end()) return key + " " + want + " (not in the checkpoint)";
    if (it->second.shape() != m.shape() || it->second.dtype() != m.dtype())
      return key + " " + want + " (checkpoint: " + shape_to_string(it->second.shape()) + " " +
             dtype_name(it->second.dtype()) + ")";
  }
  std::set<std::string> names;
  for (const auto& p : params) names.insert(std::string(io::kModelPrefix) + p->name());
  for (const auto& [key, t] : tensors)
    if (key.starts_with(io::kModelPrefix) && !names.contains(key))
      return key + " (in the checkpoint, not in the model)";
  return "";
}

}  // namespace

std::string save_run_checkpoint(io::CheckpointStore& store, int64_t step, io::TensorMap tensors,
                                const config::TrainConfig& config, const std::string& tokenizer_id,
                                const std::string& bf16_kernel) {
  tensors[kStepKey] = Tensor::from_vector(std::vector<int64_t>{step}, {});
  tensors[kSeedKey] = Tensor::from_vector(std::vector<int64_t>{config.training.seed}, {});
  io::Metadata metadata{{"format", kCheckpointFormat},
                        {"step", std::to_string(step)},
                        {"config", config::to_toml(config)}};
  if (!tokenizer_id.empty()) metadata[kTokenizerKey] = tokenizer_id;
  if (!bf16_kernel.empty()) metadata[kBf16KernelKey] = bf16_kernel;
  return store.save(step, tensors, metadata);
}

std::string checkpoint_bf16_kernel(const io::Checkpoint& c) {
  const auto it = c.metadata.find(kBf16KernelKey);
  return it == c.metadata.end() ? "" : it->second;
}

config::TrainConfig checkpoint_config(const io::Checkpoint& c) {
  const auto format = c.metadata.find("format");
  const auto text = c.metadata.find("config");
  MIXPREC_CHECK(
      format != c.metadata.end() && format->second == kCheckpointFormat && text != c.metadata.end(),
      "checkpoint",
      c.path + " is not a mixprec training checkpoint (metadata 'format' is not " +
          kCheckpointFormat + ")");
  return config::load_config_text(text->second, c.path + " (its stored config)");
}

int64_t checkpoint_step(const io::Checkpoint& c) {
  const int64_t step = scalar_i64(c, kStepKey);
  // rotation and resume go by the name: a file named for another step would retrain steps
  // and then rotate out the good checkpoints named after them.
  MIXPREC_CHECK(c.step < 0 || c.step == step, "checkpoint",
                c.path + " is named for step " + std::to_string(c.step) +
                    " but holds train.step = " + std::to_string(step) +
                    ": the file was renamed or altered (move it aside to resume from the one "
                    "before it)");
  return step;
}

void restore_run_checkpoint(const io::Checkpoint& c, const io::TrainingState& state,
                            const config::TrainConfig& config) {
  config::TrainConfig saved = checkpoint_config(c);
  // A checkpoint written before a layout key existed (model.moe.idle_experts) stores a config
  // that reads as the key's default: the names of its tensors say which layout it holds.
  // Only layouts of this run's model are described (the stored config may be hostile).
  if (const models::ModelSpec& spec = models::model_spec(config.model.kind); spec.other_layouts)
    for (const models::ParamLayout& layout : spec.other_layouts(config.model))
      if (saved.model == layout.config && named_as(c.tensors, layout.config, config.model))
        saved.model = config.model;
  const std::string difference = first_model_difference(saved, config);
  if (!difference.empty()) {
    const std::string tensor = first_tensor_mismatch(c.tensors, state.params);
    throw Error("checkpoint", c.path + " was written for another model: " + difference +
                                  (tensor.empty() ? "" : "; first mismatching tensor: " + tensor) +
                                  checkpoint_layout_hint(c.tensors, config.model));
  }
  check_known_entries(c);
  check_step_counters(c, checkpoint_step(c), config);
  check_masters_fit(c, config.training.policy);
  const int64_t seed = scalar_i64(c, kSeedKey);
  MIXPREC_CHECK(seed == config.training.seed, "checkpoint",
                c.path + ": training.seed = " + std::to_string(seed) + " in the checkpoint, " +
                    std::to_string(config.training.seed) +
                    " in the config: a resumed run keeps its seed");
  try {
    io::restore_training_state(c.tensors, state);  // validates everything before changing
  } catch (const Error& e) {
    throw Error("checkpoint", c.path + " does not fit this run: " + e.what_only() +
                                  checkpoint_layout_hint(c.tensors, config.model));
  }
}

LoadedModel load_model(const std::string& checkpoint_or_run_dir,
                       const std::optional<amp::MixedPrecisionPolicy>& policy) {
  namespace fs = std::filesystem;
  // With an error code: a symbolic link loop is an error naming the path, not a raw
  // std::filesystem exception.
  std::error_code ec;
  const fs::file_status status = fs::status(checkpoint_or_run_dir, ec);
  MIXPREC_CHECK(
      !ec || status.type() == fs::file_type::not_found, "checkpoint",
      "cannot examine " + checkpoint_or_run_dir + ": " + ec.message() +
          (ec == std::errc::too_many_symbolic_link_levels ? " (a symbolic link loop?)" : ""));
  MIXPREC_CHECK(fs::exists(status), "checkpoint", checkpoint_or_run_dir + " does not exist");
  io::Checkpoint c;
  if (fs::is_directory(status)) {
    // A run directory: its checkpoint folder comes from the config it holds... which is in
    // the checkpoints; try the usual folder name first, then the directory itself.
    std::optional<io::Checkpoint> latest;
    for (const fs::path& dir :
         {fs::path(checkpoint_or_run_dir) / "checkpoint", fs::path(checkpoint_or_run_dir)}) {
      if (!fs::is_directory(dir, ec)) continue;
      latest = io::CheckpointStore(dir.string(), 0).load_latest();
      if (latest) break;
    }
    MIXPREC_CHECK(latest.has_value(), "checkpoint",
                  "no valid checkpoint in " + checkpoint_or_run_dir + " (nor in its checkpoint/)");
    c = std::move(*latest);
  } else {
    c = io::load_checkpoint(checkpoint_or_run_dir);
  }
  LoadedModel out;
  out.config = checkpoint_config(c);
  if (policy) out.config.training.policy = *policy;
  out.step = checkpoint_step(c);
  out.path = c.path;
  check_known_entries(c);
  check_masters_fit(c, out.config.training.policy);
  if (const auto it = c.metadata.find(kTokenizerKey); it != c.metadata.end())
    out.tokenizer_id = it->second;
  // The stored config is as hostile as the file: its model must fit this machine, checked in
  // milliseconds before any of it is described (restore_training_state then checks every
  // tensor against it before changing anything).
  const double parameters = dist::estimate_step(out.config, 1).parameters;
  const double weight_bytes = parameters * 2 * sizeof(float);  // f32 masters and their casts
  MIXPREC_CHECK(
      weight_bytes <= static_cast<double>(dist::machine_memory_bytes()), "checkpoint",
      fmt::format("{}: its stored config describes a model of {:.3g} parameters "
                  "(model.n_layers = {}, model.d_model = {}, model.d_ff = {}, "
                  "model.vocab_size = {}, model.moe.n_experts = {}), more than this machine's "
                  "memory holds",
                  c.path, parameters, out.config.model.n_layers, out.config.model.d_model,
                  out.config.model.d_ff, out.config.model.vocab_size,
                  out.config.model.moe.n_experts));
  // A checkpoint written before a layout key existed (model.moe.idle_experts) stores a config
  // that reads as the key's default: the names of its tensors say which layout it holds.
  if (const auto layout = checkpoint_layout(c.tensors, out.config.model))
    out.config.model = layout->config;
  out.model = models::make_model(out.config.model);
  out.comm = dist::make_single_process_communicator();
  out.parallelism = dist::make_parallelism(*out.model, *out.comm, out.config.training.policy);
  out.parallelism->materialize(static_cast<uint64_t>(out.config.training.seed));
  try {
    io::restore_training_state(
        out.parallelism->local_training_state(c.tensors),
        {out.parallelism->parameters(), nullptr, nullptr, out.model->buffers()});
  } catch (const Error& e) {
    throw Error("checkpoint", c.path + ": " + e.what_only());
  }
  return out;
}

std::unique_ptr<data::Tokenizer> open_checkpoint_tokenizer(const LoadedModel& loaded) {
  std::unique_ptr<data::Tokenizer> tokenizer = open_run_tokenizer(loaded.config);
  check_tokenizer(loaded.tokenizer_id, loaded.path, *tokenizer, loaded.config.model.tokenizer);
  return tokenizer;
}

}  // namespace mixprec::train
