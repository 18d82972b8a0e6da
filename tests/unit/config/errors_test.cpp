// Every way a config file can be wrong gives a message naming the file, the key (with its
// line) and the bad value; unknown keys list the valid ones.
#include <gtest/gtest.h>

#include <string>

#include "config_testing.h"
#include "mixprec/config/train_config.h"
#include "mixprec/io/config_file.h"

namespace mixprec::config {
namespace {

using testing::load_error;

// The message names this test's file and contains every part of `expect`.
void expect_message(const std::string& msg, std::initializer_list<std::string> expect) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  EXPECT_NE(msg.find(std::string("[config ")), std::string::npos) << msg;
  EXPECT_NE(msg.find(std::string("mixprec_cfg_ConfigErrors_") + info->name() + ".toml"),
            std::string::npos)
      << msg;
  for (const std::string& part : expect) EXPECT_NE(msg.find(part), std::string::npos) << msg;
}

TEST(ConfigErrors, SyntaxErrorNamesLineAndColumn) {
  expect_message(load_error("[model]\nd_model = 64\nn_layers = = 2\n"),
                 {"syntax error at line 3, column 12"});
  expect_message(load_error("[model\n"), {"syntax error at line 1"});
}

TEST(ConfigErrors, MissingFile) {
  const std::string msg =
      mixprec::testing::error_of([] { load_config("/nonexistent/dir/x.toml"); });
  EXPECT_NE(msg.find("[config /nonexistent/dir/x.toml] cannot open the file"), std::string::npos)
      << msg;
}

TEST(ConfigErrors, UnknownKeySuggestsTheClosestValidOne) {
  expect_message(load_error("[model]\nd_modle = 64\n"),
                 {"line 2: unknown key 'model.d_modle' (did you mean 'model.d_model'?)"});
  expect_message(load_error("[training]\nlr = 0.1\n"),
                 {"unknown key 'training.lr' (did you mean 'optimizer.lr'?)"});
  expect_message(load_error("[model.moe]\ntopk = 2\n"),
                 {"unknown key 'model.moe.topk' (did you mean 'model.moe.top_k'?)"});
  // Nothing close: no guess.
  const std::string far = load_error("[model]\nwibble = 1\n");
  EXPECT_EQ(far.find("did you mean"), std::string::npos) << far;
}

TEST(ConfigErrors, UnknownKeyListsValidKeys) {
  expect_message(load_error("[training]\nsteps = 3\nlearning_rate = 0.1\n"),
                 {"line 3: unknown key 'training.learning_rate'",
                  "valid keys of [training]: steps, batch_size, seq_len, local_batch_size, seed, "
                  "data, val_fraction, eval_every, eval_batches, grad_clip, grad_clip_value, "
                  "threads, bf16_kernel, max_skipped_steps, min_loss_scale, max_nonfinite_steps, "
                  "precision, "
                  "mixed_precision_param, "
                  "mixed_precision_reduce, global_batch_size"});
  expect_message(load_error("[model.moe]\nexperts = 3\n"),
                 {"line 2: unknown key 'model.moe.experts'",
                  "valid keys of [model.moe]: n_experts, top_k, capacity_factor, "
                  "aux_loss_weight, z_loss_weight, score_func, route_norm, route_scale, "
                  "n_expert_groups, n_limited_groups, n_shared_experts, n_dense_layers, "
                  "dense_d_ff, load_balance_coeff, balance_scope"});
  expect_message(load_error("[model]\nd_model = 64\n[model.attn]\nx = 1\n"),
                 {"line 3: unknown key 'model.attn'",
                  "positions, rope_theta, tie_embeddings, bias, qk_norm, tokenizer, [model.moe], "
                  "[model.mla], [model.rope_scaling]"});
  expect_message(load_error("runs = \"x\"\n"), {"line 1: unknown key 'runs'",
                                                "valid keys at the top level: run_dir, "
                                                "dump_folder, [model], [training]"});
}

TEST(ConfigErrors, UnknownSectionListsValidSections) {
  expect_message(load_error("[model]\nd_model = 64\n\n[job]\ndump_folder = \"x\"\n"),
                 {"line 4: unknown section [job]",
                  "[lr_scheduler], [checkpoint], [metrics], "
                  "[parallelism]"});
  expect_message(load_error("model = 3\n"), {"line 1: 'model' must be a table ([model])"});
}

TEST(ConfigErrors, WrongTypesNameKeyAndValue) {
  expect_message(load_error("[training]\nsteps = \"600\"\n"),
                 {"line 2: training.steps = \"600\" must be an integer"});
  expect_message(load_error("[training]\nsteps = 1.5\n"),
                 {"line 2: training.steps = 1.5 must be an integer"});
  expect_message(load_error("[optimizer]\nlr = \"1e-3\"\n"),
                 {"line 2: optimizer.lr = \"1e-3\" must be a number"});
  expect_message(load_error("[model]\ntie_embeddings = 1\n"),
                 {"line 2: model.tie_embeddings = 1 must be a boolean"});
  expect_message(load_error("[model]\nkind = [\"moe\"]\n"),
                 {"line 2: model.kind = [", "must be a string"});
  expect_message(load_error("[optimizer]\nlr = nan\n"),
                 {"line 2: optimizer.lr = nan must be finite"});
  expect_message(load_error("[activation_checkpoint]\nselective_ac_option = 2\n"),
                 {"line 2: activation_checkpoint.selective_ac_option = 2 must be a string"});
}

TEST(ConfigErrors, OutOfRangeNameKeyAndValue) {
  struct Case {
    std::string toml;
    std::string expect;
  };
  for (const Case& k : {
           Case{"[model]\nd_model = 64\nn_heads = 3\n",
                "line 3: model.n_heads = 3 must divide model.d_model = 64"},
           Case{"[model]\nd_model = 72\nn_heads = 8\n",
                "line 3: model.n_heads = 8 gives an odd head size"},
           Case{"[model.moe]\nn_experts = 4\ntop_k = 5\n",
                "line 3: model.moe.top_k = 5 must be <= model.moe.n_experts = 4"},
           Case{"[optimizer]\nlr = 0\n", "line 2: optimizer.lr = 0.0 must be > 0"},
           Case{"[optimizer]\nlr = -1e-3\n", "line 2: optimizer.lr = -0.001 must be > 0"},
           Case{"[training]\nval_fraction = 1.0\n",
                "line 2: training.val_fraction = 1.0 must be in [0, 1)"},
           Case{"[training]\nval_fraction = -0.1\n",
                "line 2: training.val_fraction = -0.1 must be in [0, 1)"},
           Case{"[model]\nmax_seq_len = 64\n[training]\nseq_len = 128\n",
                "line 4: training.seq_len = 128 must be <= model.max_seq_len = 64"},
           Case{"[model]\nkind = \"mlp\"\n",
                "line 2: model.kind = \"mlp\" is not one of: moe, gpt"},
           Case{"[optimizer]\nname = \"adam\"\n",
                "line 2: optimizer.name = \"adam\" is not one of: adamw, sgd, adam-mini"},
           Case{"[lr_scheduler]\ndecay = \"linear\"\n",
                "lr_scheduler.decay = \"linear\" is not one of: cosine, constant"},
           Case{"[training]\nsteps = 0\n", "line 2: training.steps = 0 must be > 0"},
           Case{"[optimizer]\nbeta2 = 1.0\n", "line 2: optimizer.beta2 = 1.0 must be in [0, 1)"},
           Case{"[parallelism]\ndata_parallel_shard_degree = 0\n",
                "line 2: parallelism.data_parallel_shard_degree = 0 must be -1"},
           Case{"[model.moe]\ncapacity_factor = -1\n",
                "line 2: model.moe.capacity_factor = -1.0 must be >= 0"},
           // Keras: only one of clipnorm and clipvalue (grad_clip defaults to 1.0).
           Case{"[training]\ngrad_clip_value = 0.5\n",
                "line 2: training.grad_clip_value = 0.5 clips by value, and training.grad_clip "
                "by norm: set one of them to 0"},
           // DeepSeek-style MoE keys.
           Case{"[model.moe]\nscore_func = \"relu\"\n",
                "line 2: model.moe.score_func = \"relu\" is not one of: softmax, sigmoid"},
           Case{"[model.moe]\nn_experts = 8\nn_expert_groups = 3\nn_limited_groups = 1\n",
                "line 3: model.moe.n_expert_groups = 3 must divide model.moe.n_experts = 8"},
           Case{"[model.moe]\nn_limited_groups = 2\n",
                "line 2: model.moe.n_limited_groups = 2 needs model.moe.n_expert_groups > 0"},
           Case{
               "[model.moe]\nn_experts = 8\ntop_k = 3\nn_expert_groups = 4\nn_limited_groups = 1\n",
               "model.moe.top_k = 3 must be <= the experts of model.moe.n_limited_groups groups "
               "(2)"},
           Case{"[model.moe]\nn_dense_layers = 1\n",
                "model.moe.dense_d_ff = 0 must be > 0 when model.moe.n_dense_layers > 0"},
           Case{"[model]\nn_layers = 2\n[model.moe]\nn_dense_layers = 3\ndense_d_ff = 64\n",
                "line 4: model.moe.n_dense_layers = 3 must be in [0, model.n_layers = 2]"},
           Case{"[model.moe]\nroute_scale = 0\n",
                "line 2: model.moe.route_scale = 0.0 must be finite and > 0"},
           Case{"[model.moe]\nload_balance_coeff = -1e-3\n",
                "line 2: model.moe.load_balance_coeff = -0.001 must be finite and >= 0 (0 = off)"},
           Case{"[model.moe]\nbalance_scope = \"batch\"\n",
                "line 2: model.moe.balance_scope = \"batch\" is not one of: global, rank"},
           // Llama 3's keys.
           Case{"[model]\nn_heads = 4\nn_kv_heads = 3\n",
                "line 3: model.n_kv_heads = 3 must divide model.n_heads = 4"},
           Case{"[model]\nd_model = 256\nmultiple_of = 256\nd_ff = 500\n",
                "line 4: model.d_ff = 500 disagrees with the 768 that model.multiple_of = 256 and "
                "model.ffn_dim_multiplier = 0.0 give (set one or the other)"},
           Case{"[model]\nkind = \"llama3\"\nnorm = \"layernorm\"\n",
                "line 3: model.norm = \"layernorm\" must be \"rmsnorm\" for model.kind = "
                "\"llama3\""},
           Case{"[model]\nkind = \"llama3\"\nbias = true\n",
                "line 3: model.bias = true must be false for model.kind = \"llama3\""},
           Case{"[model]\nkind = \"llama3\"\nqk_norm = true\n",
                "line 3: model.qk_norm = true must be false for model.kind = \"llama3\" (Llama "
                "has no q/k norms; model.kind = \"qwen3\" has them)"},
           // DeepSeek-V3's latent attention.
           Case{"[model]\nkind = \"deepseek_v3\"\n[model.mla]\nkv_lora_rank = 0\n",
                "line 4: model.mla.kv_lora_rank = 0 must be > 0"},
           Case{"[model]\nrope_theta = 0\n",
                "line 2: model.rope_theta = 0.0 must be finite and > 0"},
           Case{"[model]\nnorm_eps = -1e-5\n", "line 2: model.norm_eps = -1e-05 must be finite"},
           Case{"[model]\nffn_dim_multiplier = 1e9\nmultiple_of = 8\n",
                "line 2: model.ffn_dim_multiplier = 1e+09 must be in [0, 1000]"},
           Case{"[training]\ngrad_clip = 0\ngrad_clip_value = -1\n",
                "line 3: training.grad_clip_value = -1.0 must be finite and >= 0 (0 = off)"},
           // torchtitan's [activation_checkpoint].
           Case{"[activation_checkpoint]\nmode = \"partial\"\n",
                "line 2: activation_checkpoint.mode = \"partial\" is not one of: none, "
                "selective, full"},
           Case{"[activation_checkpoint]\nmode = \"selective\"\nselective_ac_option = \"0\"\n",
                "line 3: activation_checkpoint.selective_ac_option = \"0\" must be \"op\" "
                "(per-op selective checkpointing) or a positive integer k as a string (every "
                "k-th block checkpointed)"},
           Case{"[activation_checkpoint]\nselective_ac_option = \"layer\"\n",
                "line 2: activation_checkpoint.selective_ac_option = \"layer\" must be \"op\""},
       }) {
    SCOPED_TRACE(k.toml);
    expect_message(load_error(k.toml), {k.expect});
  }
}

TEST(ConfigErrors, DefaultValueInARelationIsNamedAsDefault) {
  // seq_len keeps its default 128; only max_seq_len is in the file.
  expect_message(load_error("[model]\nmax_seq_len = 32\n"),
                 {"(default) training.seq_len = 128 must be <= model.max_seq_len = 32"});
}

TEST(ConfigErrors, PrecisionGivenTwoWays) {
  expect_message(load_error("[training]\nprecision = \"bf16-mixed\"\n"
                            "mixed_precision_param = \"bfloat16\"\n"),
                 {"line 2: training.precision = \"bf16-mixed\" and "
                  "training.mixed_precision_param = \"bfloat16\" are both given"});
  expect_message(
      load_error("[training]\nmixed_precision_reduce = \"float32\"\n", {"training.precision=fp32"}),
      {"training.precision = \"fp32\" and training.mixed_precision_reduce = "
       "\"float32\" are both given"});
}

TEST(ConfigErrors, BadPrecisionValues) {
  expect_message(load_error("[training]\nprecision = \"bf17-mixed\"\n"),
                 {"line 2: training.precision = \"bf17-mixed\" is not a precision policy",
                  "bf17-mixed", "bf16-mixed"});
  expect_message(load_error("[training]\nmixed_precision_param = \"bfloat15\"\n"),
                 {"line 2: training.mixed_precision_param = \"bfloat15\" is not a dtype"});
  expect_message(load_error("[training]\nmixed_precision_reduce = \"e4m3\"\n"),
                 {"line 2: training.mixed_precision_reduce = \"e4m3\" must be one of f64, f32, "
                  "bf16, f16"});
}

TEST(ConfigErrors, RunDirGivenTwoWays) {
  expect_message(load_error("run_dir = \"a\"\ndump_folder = \"b\"\n"),
                 {"run_dir (line 1) and dump_folder (line 2) are both given"});
  expect_message(load_error("dump_folder = \"b\"\nrun_dir = \"a\"\n"),
                 {"run_dir (line 2) and dump_folder (line 1) are both given"});
}

// torchtitan's global_batch_size is batch_size; local_batch_size must divide it.
TEST(ConfigErrors, BatchSizesAsTorchtitanSpellsThem) {
  expect_message(load_error("[training]\nbatch_size = 8\nglobal_batch_size = 16\n"),
                 {"batch_size (line 2) and global_batch_size (line 3) are both given"});
  expect_message(load_error("[training]\nglobal_batch_size = 12\nlocal_batch_size = 5\n"),
                 {"line 3: training.local_batch_size = 5 must divide training.batch_size = 12"});
  expect_message(load_error("[training]\nlocal_batch_size = -1\n"),
                 {"line 2: training.local_batch_size = -1 must be >= 0"});
  expect_message(load_error("[training]\nglobal_batch_sise = 8\n"),
                 {"did you mean 'training.global_batch_size'?"});
}

}  // namespace
}  // namespace mixprec::config
