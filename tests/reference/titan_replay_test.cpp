// mixprec's trainer against torchtitan's training step, replayed in PyTorch
// (tests/reference/titan_replay.py: torchtitan's models, RoPE, MoE and expert-bias update
// rebuilt from torchtitan's own code, nanoGPT's for GPT, in f64). Each family trains 7 fp32
// steps through train::Trainer (AdamW, LR schedule, clipping, the MoE bias update) from its
// initial weights on its batches; the replay starts from the same weights (mapped to
// torchtitan's names and layouts) on the same batches, and every tensor ends within 1e-5 of it
// (||ours - replay|| / ||replay||). Each deliberate mistake the replay can make (--mutate) must
// end outside that bound for the family it concerns: the test is sensitive to what it checks.
// Skipped when python3 cannot import torch (CI installs Debian's python3-torch).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "mixprec/data/batches.h"
#include "mixprec/io/config_file.h"
#include "mixprec/io/safetensors.h"
#include "mixprec/models/registry.h"
#include "mixprec/train/run_data.h"
#include "mixprec/train/trainer.h"
#include "support/temp_files.h"
#include "support/torch_script.h"

namespace mixprec::train {
namespace {

using namespace mixprec::testing;
namespace fs = std::filesystem;

constexpr int64_t kSteps = 7;
constexpr double kBound = 1e-5;

// What every family shares: 7 fp32 steps of AdamW with torchtitan's weight decay on every
// parameter, warm-up then cosine, the byte tokenizer's 256 ids. The gradient norms are mostly
// 1.3 to 4 here: clipping at 1.7 takes some steps and leaves others. The lr is larger than a
// real run's so that 7 steps move the weights far enough for every mutation to show.
const char* kTraining = R"(
[training]
steps = 7
batch_size = 2
seq_len = 16
seed = 5
eval_every = 0
threads = 1
precision = "fp32"
grad_clip = 1.7

[optimizer]
name = "adamw"
lr = 5e-3
weight_decay = 0.1
weight_decay_params = "all"

[lr_scheduler]
warmup_steps = 2
decay = "cosine"
min_lr_ratio = 0.1

[metrics]
jsonl = false
)";

// nanoGPT: LayerNorm, exact GELU, learned positions, biases, tied output, d_ff = 4 d; nanoGPT's
// weight decay (matrices and embeddings only).
const char* kGpt = R"(
[model]
kind = "gpt"
vocab_size = 256
d_model = 32
n_layers = 2
n_heads = 4
d_ff = 128
max_seq_len = 16
norm = "layernorm"
mlp = "gelu"
positions = "learned"
bias = true
tie_embeddings = true
)";

// Llama 3.1's RoPE scaling over an original context of 64 positions, so that all three bands
// turn within the 16 positions (head size 16, theta 500000: wavelengths 6.3 (kept, < 16),
// 32 (blended) and 167 and up (slowed 8x)); GQA, untied.
const char* kLlama3 = R"(
[model]
kind = "llama3"
vocab_size = 256
d_model = 64
n_layers = 2
n_heads = 4
n_kv_heads = 2
d_ff = 96
max_seq_len = 16
rope_theta = 500000.0
tie_embeddings = false

[model.rope_scaling]
type = "llama3"
factor = 8.0
low_freq_factor = 1.0
high_freq_factor = 4.0
original_max_position_embeddings = 64
)";

// Qwen 3: per-head q/k norms, heads of 24 beside d_model 64 (q is 96 wide), GQA, theta 1e6.
const char* kQwen3 = R"(
[model]
kind = "qwen3"
vocab_size = 256
d_model = 64
n_layers = 2
n_heads = 4
n_kv_heads = 2
head_dim = 24
d_ff = 96
max_seq_len = 16
norm_eps = 1e-6
rope_theta = 1e6
qk_norm = true
tie_embeddings = false
)";

// DeepSeek-V3's MoE (torchtitan's) on Llama attention: a dense first block, 16 stacked experts
// in 4 groups of which a token may use 2, top-2 by sigmoid score plus the expert bias, gates
// renormalised and scaled by 2.5, one shared expert, no auxiliary losses. 32 tokens a step
// leave experts idle; the bias coefficient is 10x torchtitan's so that the biases reorder the
// routing within 7 steps.
const std::string kMoeSection = R"(
[model.moe]
n_experts = 16
top_k = 2
aux_loss_weight = 0.0
z_loss_weight = 0.0
score_func = "sigmoid"
route_norm = true
route_scale = 2.5
n_expert_groups = 4
n_limited_groups = 2
n_shared_experts = 1
n_dense_layers = 1
dense_d_ff = 64
load_balance_coeff = 0.01
idle_experts = "step"
)";
const std::string kMoe = R"(
[model]
kind = "moe"
vocab_size = 256
d_model = 32
n_layers = 3
n_heads = 4
n_kv_heads = 2
d_ff = 32
max_seq_len = 16
rope_theta = 10000.0
tie_embeddings = false

)" + kMoeSection;

// DeepSeek-V3 (latent attention with q through wq_a / q_norm / wq_b, YaRN over all three bands
// of its 8 rope frequencies, mscale = mscale_all_dim as torchtitan's pure-rotation RoPE needs)
// with kMoe's MoE.
const std::string kDeepSeekV3 = R"(
[model]
kind = "deepseek_v3"
vocab_size = 256
d_model = 32
n_layers = 3
n_heads = 2
d_ff = 32
max_seq_len = 16
rope_theta = 10000.0
tie_embeddings = false

[model.mla]
q_lora_rank = 24
kv_lora_rank = 16
qk_nope_head_dim = 8
qk_rope_head_dim = 16
v_head_dim = 8

[model.rope_scaling]
type = "yarn"
factor = 4.0
original_max_position_embeddings = 64
beta_fast = 32.0
beta_slow = 1.0
mscale = 0.7
mscale_all_dim = 0.7

)" + kMoeSection;

// Pseudo-English from a fixed word list (an LCG picks the words): varied enough that the byte
// tokenizer's batches spread over a few dozen ids.
std::string corpus_text() {
  static const char* words[] = {"the",   "quick", "brown", "fox",  "jumps", "over", "lazy",
                                "dog",   "while", "seven", "wise", "owls",  "hum",  "zany",
                                "jazz",  "vexed", "king",  "Mike", "Quinn", "grew", "42",
                                "cedar", "paths", "yield", "to",   "a",     "new",  "bridge"};
  std::string text;
  uint32_t x = 7;
  while (text.size() < 20000) {
    x = x * 1664525u + 1013904223u;
    text += words[(x >> 16) % 28];
    text += (x >> 8) % 7 == 0 ? ".\n" : (x >> 8) % 5 == 0 ? ", " : " ";
  }
  return text;
}

// ||a - b|| / ||b|| (0 when both are 0).
double relative_error(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to_doubles(), y = b.to_doubles();
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    diff += (x[i] - y[i]) * (x[i] - y[i]);
    norm += y[i] * y[i];
  }
  return diff == 0 ? 0 : std::sqrt(diff) / std::sqrt(norm);
}

// GPT's key bias: adding c to every key of a head adds q·c to all of a query's scores, which
// the softmax removes, so its exact gradient is 0 and both runs move it by rounding noise alone
// (Adam scales ours, f32's, to ~1e-5; the replay's f64 noise to ~1e-14). It is checked to stay
// that small instead of against the replay's noise.
bool untrained(const std::string& name) {
  return name.ends_with("attn.wk_bias");
}

double norm_of(const Tensor& t) {
  double s = 0;
  for (const double v : t.to_doubles()) s += v * v;
  return std::sqrt(s);
}

struct Worst {
  double value = 0;
  std::string tensor;
  void add(double e, const std::string& name) {
    if (e >= value) *this = {e, name};
  }
};
std::ostream& operator<<(std::ostream& out, const Worst& w) {
  return out << w.value << " (" << w.tensor << ")";
}

struct Agreement {
  Worst weights;  // over the parameters
  Worst buffers;  // over the expert biases ("buffer.<name>"), when there are any
};

// The worst tensors of `ours` against the replay's file; a tensor the replay lacks, or of
// another shape, fails the test.
Agreement agreement(const io::TensorList& ours, const fs::path& replay) {
  const io::SafetensorsFile file = io::load_safetensors(replay.string());
  Agreement a;
  for (const auto& [name, tensor] : ours) {
    const auto it = file.tensors.find(name);
    if (it == file.tensors.end()) {
      ADD_FAILURE() << replay << " has no tensor " << name;
      continue;
    }
    if (it->second.shape() != tensor.shape()) {
      ADD_FAILURE() << name << ": ours " << shape_to_string(tensor.shape()) << ", the replay's "
                    << shape_to_string(it->second.shape());
      continue;
    }
    if (untrained(name)) {
      EXPECT_LT(norm_of(tensor), 1e-4) << name << " trained (ours)";
      EXPECT_LT(norm_of(it->second), 1e-4) << name << " trained (the replay)";
      continue;
    }
    (name.starts_with("buffer.") ? a.buffers : a.weights)
        .add(relative_error(tensor, it->second), name);
  }
  return a;
}

struct Case {
  const char* family;  // model.kind and titan_replay.py's --family
  std::string model;   // its [model] sections
  std::vector<const char*> mutations;
  const char* extra = nullptr;  // one more config override
};

// What mixprec's run leaves for the comparison.
struct OurRun {
  io::TensorList final_state;  // parameters (f32 masters) and "buffer.<name>"
  std::vector<double> losses, grad_norms;
  std::vector<int64_t> counts;  // step after step, Model::step_counts()
  int64_t idle = 0;             // (step, MoE block, expert) triples with no token
};

// The batches of steps 0 .. kSteps-1 as the trainer draws them (the run's data and seed),
// stacked [steps, B, T].
io::TensorList run_batches(const config::TrainConfig& c) {
  const auto tokenizer = open_run_tokenizer(c);
  const data::TokenDataset dataset = open_run_data(c, c.run_dir, *tokenizer);
  const data::TrainBatches batches(dataset.train(), c.training.batch_size, c.training.seq_len,
                                   static_cast<uint64_t>(c.training.seed), c.model.vocab_size);
  std::vector<int64_t> inputs, targets;
  auto append = [](std::vector<int64_t>& to, const Tensor& from) {
    const Tensor t = from.contiguous();
    to.insert(to.end(), t.data<int64_t>(), t.data<int64_t>() + t.numel());
  };
  for (int64_t s = 0; s < kSteps; ++s) {
    const data::Batch b = batches.batch(static_cast<uint64_t>(s));
    append(inputs, b.inputs);
    append(targets, b.targets);
  }
  const Shape shape{kSteps, c.training.batch_size, c.training.seq_len};
  return {{"inputs", Tensor::from_vector(inputs, shape)},
          {"targets", Tensor::from_vector(targets, shape)}};
}

// Trains `c` for kSteps through the trainer, writing config.toml, init.safetensors and
// batches.safetensors into `dir` for the replay.
OurRun train_ours(const config::TrainConfig& c, const fs::path& dir) {
  TrainerOptions quiet;
  quiet.progress = ProgressStyle::quiet;
  Trainer trainer(c, quiet);
  models::Model& model = trainer.model();
  io::TensorList init;
  for (const auto& [name, p] : model.parameters().entries()) init.emplace_back(name, p->master());
  io::save_safetensors((dir / "init.safetensors").string(), init);
  io::save_safetensors((dir / "batches.safetensors").string(), run_batches(c));
  write_file(dir / "config.toml", config::to_toml(trainer.config()));

  OurRun run;
  for (int64_t s = 0; s < kSteps; ++s) {
    const StepMetrics m = trainer.step();
    EXPECT_FALSE(m.skipped) << "step " << m.step;
    run.losses.push_back(m.loss);
    run.grad_norms.push_back(m.grad_norm);
    for (const int64_t n : model.step_counts()) {
      run.counts.push_back(n);
      run.idle += n == 0;
    }
  }
  for (const auto& [name, p] : model.parameters().entries())
    run.final_state.emplace_back(name, p->master().clone());
  for (const auto& [name, b] : model.buffers())
    run.final_state.emplace_back("buffer." + name, b.clone());
  return run;
}

// The replay's losses, gradient norms and routing agree with ours step by step (they would
// not on batches or initial weights other than ours).
void expect_same_steps(const OurRun& ours, const fs::path& replay) {
  const io::SafetensorsFile file = io::load_safetensors(replay.string());
  const std::vector<double> loss = file.at("loss").to_doubles();
  const std::vector<double> norm = file.at("grad_norm").to_doubles();
  ASSERT_EQ(loss.size(), ours.losses.size());
  for (std::size_t s = 0; s < loss.size(); ++s) {
    EXPECT_NEAR(ours.losses[s], loss[s], kBound * loss[s]) << "loss of step " << s + 1;
    EXPECT_NEAR(ours.grad_norms[s], norm[s], kBound * norm[s]) << "gradient norm, step " << s + 1;
  }
  if (ours.counts.empty()) return;
  const std::vector<double> counts = file.at("counts").to_doubles();
  ASSERT_EQ(counts.size(), ours.counts.size());
  for (std::size_t i = 0; i < counts.size(); ++i)
    ASSERT_EQ(static_cast<double>(ours.counts[i]), counts[i])
        << "tokens routed, entry " << i << " (step-major, then block, then expert)";
}

void check_family(const Case& k) {
  const auto start = std::chrono::steady_clock::now();
  TempDir tmp;
  write_file(tmp / "corpus.txt", corpus_text());
  std::vector<std::string> overrides{"run_dir=" + (tmp / "run").string(),
                                     "training.data=" + (tmp / "corpus.txt").string()};
  if (k.extra) overrides.emplace_back(k.extra);
  const config::TrainConfig c = config::load_config_text(
      std::string(k.model) + kTraining, std::string("titan_replay_test ") + k.family, overrides);
  const OurRun ours = train_ours(c, tmp.path());

  std::string args = "run " + shell_quoted(tmp.path().string()) + " --family " + k.family;
  for (const char* m : k.mutations) args += std::string(" --mutate ") + m;
  ASSERT_TRUE(run_python(reference_script("titan_replay.py"), args, tmp / "replay.log"));

  expect_same_steps(ours, tmp / "replay.safetensors");
  const Agreement a = agreement(ours.final_state, tmp / "replay.safetensors");
  EXPECT_LE(a.weights.value, kBound) << k.family << ": worst tensor " << a.weights.tensor;
  EXPECT_LE(a.buffers.value, kBound) << k.family << ": worst buffer " << a.buffers.tensor;
  int64_t clipped = 0;
  for (const double n : ours.grad_norms) clipped += n > c.training.grad_clip;
  std::cout << k.family << ": after " << kSteps << " steps (" << clipped
            << " clipped), worst weight " << a.weights;
  if (!ours.counts.empty()) {
    std::cout << ", worst expert bias " << a.buffers << "; " << ours.idle
              << " idle (step, block, expert)";
    // An MoE run must leave experts idle: what idle_expert_skip changes.
    EXPECT_GT(ours.idle, 0) << "no expert was idle in any step";
  }
  std::cout << "\n";
  for (const char* m : k.mutations) {
    const Agreement b =
        agreement(ours.final_state, tmp / (std::string("replay-") + m + ".safetensors"));
    EXPECT_GT(b.weights.value, kBound)
        << k.family << ": the replay with mutation " << m << " still agrees with mixprec";
    std::cout << "  mutation " << m << ": worst weight " << b.weights << "\n";
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "  (" << seconds << " s)\n";
}

std::string no_torch() {
  return python() + " cannot import torch (python3-torch)";
}

TEST(TitanReplay, Gpt) {
  if (!torch_available()) GTEST_SKIP() << no_torch();
  check_family({"gpt", kGpt, {}, "optimizer.weight_decay_params=matrices"});
}

TEST(TitanReplay, Llama3WithRopeScaling) {
  if (!torch_available()) GTEST_SKIP() << no_torch();
  check_family({"llama3", kLlama3, {"head_mapping", "rope_layout", "rope_scaling"}});
}

TEST(TitanReplay, Qwen3) {
  if (!torch_available()) GTEST_SKIP() << no_torch();
  check_family({"qwen3", kQwen3, {"rope_layout", "qk_norm_off"}});
}

TEST(TitanReplay, DeepSeekMoe) {
  if (!torch_available()) GTEST_SKIP() << no_torch();
  check_family({"moe", kMoe, {"head_mapping", "rope_layout", "idle_expert_skip", "bias_sign"}});
}

TEST(TitanReplay, DeepSeekV3) {
  if (!torch_available()) GTEST_SKIP() << no_torch();
  // At lr 5e-3 this model's 7 steps amplify f32 rounding past the bound: PyTorch's own f32
  // replay is 4.4e-5 from its f64 one (blocks.2.moe.experts.w_down), as mixprec's is; at 1e-3,
  // 4.3e-6.
  check_family({"deepseek_v3",
                kDeepSeekV3,
                {"head_mapping", "rope_layout", "rope_scaling", "idle_expert_skip", "bias_sign"},
                "optimizer.lr=1e-3"});
}

// The replay's own checks: ComplexRoPE on the permuted rows is rotate-half on mixprec's, the
// scaled frequencies fall in their bands, and a DeepSeek-V3 replay (latent attention, YaRN,
// the MoE) round-trips mixprec's names and moves under each of its mutations.
TEST(TitanReplay, ReplaySelftest) {
  if (!torch_available()) GTEST_SKIP() << no_torch();
  TempDir tmp;
  EXPECT_TRUE(run_python(reference_script("titan_replay.py"), "selftest", tmp / "selftest.log"));
}

}  // namespace
}  // namespace mixprec::train
