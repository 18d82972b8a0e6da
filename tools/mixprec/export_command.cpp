// `mixprec export`: a checkpoint's masters as a Hugging Face folder (the family's layout:
// Llama, Qwen 3, DeepSeek-V3 or GPT-2).
#include "export_command.h"

#include <fmt/core.h>

#include <memory>
#include <string>

#include "mixprec/io/hf_weights.h"
#include "mixprec/train/run_checkpoint.h"
#include "usage_error.h"

namespace mixprec::cli {
namespace {

struct ExportArgs {
  std::string checkpoint;
  std::string hf_dir;
  std::string dtype = "f32";
  uint64_t max_shard_bytes = io::HfExportOptions{}.max_shard_bytes;
};

void run_export(const ExportArgs& a) {
  if (a.hf_dir.empty()) throw UsageError("export needs --hf DIR (the folder to write)");
  io::HfExportOptions options;
  options.dtype = a.dtype == "bf16" ? DType::bf16 : DType::f32;
  options.max_shard_bytes = a.max_shard_bytes;
  train::LoadedModel loaded = train::load_model(a.checkpoint);
  const config::ModelConfig& m = loaded.config.model;
  const models::HfLayout layout = io::hf_layout_of(m);  // before any file is written
  io::export_hf(a.hf_dir, m, loaded.parallelism->full_parameters(), options,
                loaded.model->buffers());
  fmt::print("exported step {} of {} as Hugging Face {} ({}) to {}\n", loaded.step, loaded.path,
             layout.model_type, a.dtype, a.hf_dir);
}

}  // namespace

void add_export_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<ExportArgs>();
  CLI::App* cmd = app.add_subcommand("export",
                                     "Write a checkpoint's weights as a Hugging Face folder "
                                     "(Llama, Qwen 3, DeepSeek-V3 or GPT-2 layout)");
  cmd->add_option("checkpoint", args->checkpoint,
                  "a step-<N>.safetensors file, or a run directory (its newest checkpoint)")
      ->required();
  cmd->add_option("--hf", args->hf_dir,
                  "the folder to write (new or empty): config.json and model.safetensors, or "
                  "shards and model.safetensors.index.json")
      ->required();
  cmd->add_option("--dtype", args->dtype, "f32, or bf16 (masters rounded to nearest even)")
      ->capture_default_str()
      ->check(CLI::IsMember({"f32", "bf16"}));
  cmd->add_option("--max-shard-size", args->max_shard_bytes,
                  "bytes per file before the weights are sharded (transformers' 5GB)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->footer(
      "\nExamples:\n"
      "  mixprec export outputs/llama3_debug --hf exports/llama3_debug\n"
      "  mixprec export outputs/gpt_small --hf exports/gpt_small --dtype bf16\n"
      "Then, in Python: transformers' AutoModelForCausalLM.from_pretrained(\"exports/...\").\n"
      "mixprec train CONFIG --init-from DIR starts training from such a folder.");
  cmd->callback([args, &exit_code] {
    run_export(*args);
    exit_code = 0;
  });
}

}  // namespace mixprec::cli
