// model.moe.idle_experts = "skip" (one parameter per expert, Hugging Face's layout) keeps the
// bits mixprec had before stacked experts existed: a few AdamW steps of tiny MoEs, in which
// some experts get no tokens, give the losses and final weights recorded from the code before
// the change (main at 1e8f929). On the reference backend (scalar kernels: the same bits on
// every CPU) and, where this machine's GEMM path was recorded, on the CPU backend.
#include <gtest/gtest.h>

#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "cpu/gemm_own.h"
#include "mixprec/amp/compute_scope.h"
#include "mixprec/backend/backend.h"
#include "mixprec/core/checksum.h"
#include "mixprec/models/transformer/transformer.h"
#include "mixprec/optim/adamw.h"
#include "support/own_gemm_path.h"
#include "unit/models/models_testing.h"

namespace mixprec::models {
namespace {

config::ModelConfig skip_case(int which) {
  config::ModelConfig c = testing::tiny_config("moe");
  c.moe.idle_experts = "skip";
  c.moe.n_experts = 6;
  c.moe.top_k = 1;
  if (which == 0) {
    c.moe.n_shared_experts = 1;  // swiglu, rmsnorm, rope, no biases
  } else {
    c.mlp = "gelu";
    c.norm = "layernorm";
    c.positions = "learned";
    c.bias = true;
    c.moe.capacity_factor = 1.0;
  }
  return c;
}

std::string hex(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", v);
  return buf;
}

// Per-step losses as hex floats, the idle (block, expert) pairs over the steps, then "masters
// <checksum of every f32 master>".
std::vector<std::string> run(int which, const char* precision) {
  Transformer model = testing::transformer(skip_case(which));
  const amp::MixedPrecisionPolicy policy = amp::preset(precision);
  model.materialize(7, policy);
  optim::AdamW opt(model.parameters().parameters(), 1e-2, 0.1);
  std::vector<std::string> out;
  int idle = 0;  // (block, expert) pairs without tokens, summed over the steps
  for (int64_t step = 0; step < 4; ++step) {
    // 2 x 5 = 10 tokens, top-1 of 6 experts: some experts idle in most steps.
    const Tensor x = testing::token_grid(2, 5, 16, step),
                 y = testing::token_grid(2, 5, 16, step + 1);
    const amp::ComputeScope scope(policy);
    const LossParts loss = model.loss(x, y);
    loss.total.backward();
    opt.step();
    opt.zero_grad();
    out.push_back(hex(loss.total.item()));
    for (const int64_t n : model.step_counts()) idle += n == 0 ? 1 : 0;
  }
  out.push_back("idle " + std::to_string(idle));
  uint64_t sum = 0;
  for (const auto& [name, p] : model.parameters().entries()) {
    const Tensor& m = p->master();
    sum = sum * 31 + byte_checksum({static_cast<const uint8_t*>(m.raw_data()), m.nbytes()});
  }
  out.push_back("masters " + std::to_string(sum));
  return out;
}

void expect_recorded(const std::vector<std::string>& got, const std::vector<std::string>& want,
                     const std::string& what) {
  std::string printed;
  for (const std::string& s : got) printed += "\"" + s + "\", ";
  EXPECT_EQ(got, want) << what << ": got {" << printed << "}";
}

struct Recorded {
  int which;
  const char* precision;
  std::vector<std::string> values;
};

TEST(MoeSkipLayoutBits, ReferenceBackendMatchesTheValuesBeforeStackedExperts) {
  const backend::BackendScope reference(backend::reference_backend());
  const std::vector<Recorded> recorded = {
      {0,
       "fp32",
       {"0x1.661064p+1", "0x1.62daa4p+1", "0x1.56a8c6p+1", "0x1.459654p+1", "idle 13",
        "masters 11470282643522087202"}},
      {0,
       "bf16-mixed",
       {"0x1.660fa6p+1", "0x1.62ea68p+1", "0x1.56aeaap+1", "0x1.45a154p+1", "idle 13",
        "masters 17900529197588448857"}},
      {1,
       "fp32",
       {"0x1.6601a6p+1", "0x1.65d1f8p+1", "0x1.6372b2p+1", "0x1.615b82p+1", "idle 14",
        "masters 15650601096129026901"}},
      {1,
       "bf16-mixed",
       {"0x1.65ff84p+1", "0x1.65c774p+1", "0x1.638b4cp+1", "0x1.6239eap+1", "idle 13",
        "masters 14253832811611420773"}},
  };
  for (const Recorded& r : recorded)
    expect_recorded(run(r.which, r.precision), r.values,
                    "reference, case " + std::to_string(r.which) + ", " + r.precision);
}

// Recorded on an AMD EPYC (Zen 3, AVX2) on the OpenBLAS path, which sums in the order of
// OpenBLAS's AVX2 kernels: run on that path (mixprec's own GEMM off) on CPUs whose widest
// vectors are AVX2; others have other bits (and are skipped).
TEST(MoeSkipLayoutBits, CpuBackendMatchesTheValuesBeforeStackedExperts) {
  if (cpu::own_gemm::best_build() != cpu::own_gemm::Build::avx2)
    GTEST_SKIP() << "values recorded with OpenBLAS's AVX2 kernels; this CPU's widest build is "
                 << cpu::own_gemm::build_name(cpu::own_gemm::best_build());
  const mixprec::testing::OwnGemmPath openblas(false);
#ifdef MIXPREC_SANITIZED
  // The sanitizer build compiles the library without -O3's vectorisation, which rounds the
  // optimiser's and the norms' loops differently from the -O3 build the values come from.
  GTEST_SKIP() << "values recorded from the optimised build; this is the sanitizer build";
#endif
  const std::vector<Recorded> recorded = {
      {0,
       "fp32",
       {"0x1.661064p+1", "0x1.62daa4p+1", "0x1.56a8c6p+1", "0x1.459654p+1", "idle 13",
        "masters 11986560553965383368"}},
      {0,
       "bf16-mixed",
       {"0x1.660fa6p+1", "0x1.62ea68p+1", "0x1.56aeaap+1", "0x1.45a154p+1", "idle 13",
        "masters 11065302238638167784"}},
      {1,
       "fp32",
       {"0x1.6601a6p+1", "0x1.65d1f8p+1", "0x1.6372b2p+1", "0x1.615b82p+1", "idle 14",
        "masters 7819418988912178803"}},
      {1,
       "bf16-mixed",
       {"0x1.65ff84p+1", "0x1.65c774p+1", "0x1.638b4cp+1", "0x1.6239eap+1", "idle 13",
        "masters 11200934071306941818"}},
  };
  for (const Recorded& r : recorded)
    expect_recorded(run(r.which, r.precision), r.values,
                    "cpu, case " + std::to_string(r.which) + ", " + r.precision);
}

}  // namespace
}  // namespace mixprec::models
