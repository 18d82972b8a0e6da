// A model of a limited-precision GEMM accumulator, such as the one in Hopper's FP8 tensor
// cores, so an FP8 recipe can be run on the CPU the way a GPU sums it (issue 33, item 5).
//
// THIS IS A MODEL, NOT AN EMULATION OF ANY GPU. NVIDIA documents none of it; the parameters
// below come from published measurements, and the model reproduces their reported error
// magnitudes, not the bits of any kernel. mixprec's default is no model at all: products are
// summed in f32 (or better) as everywhere else; nothing here runs unless a caller asks for it.
//
// What is published (paraphrased; README "The GPU accumulator model" has the table):
//  - DeepSeek-V3 (arXiv 2412.19437) §3.3: FP8 GEMMs on H800 keep only about 14 bits of
//    accumulation precision; in their test (K = 4096, two random matrices) the maximum relative
//    error was near 2%. Their fix: every N_C = 128 products (4 WGMMAs of K = 32) the partial
//    sum is moved to an f32 register on the CUDA cores and added there (DeepGEMM does this).
//  - DeepSeek-V3 §3.5.2 (as quoted in DeepSeek-V3 issues #197 and #847 and DeepGEMM #37/#50):
//    the tensor core aligns the products of one MMA (32 of them, by the wording in #847) by
//    right-shifting each to the largest exponent, keeps the top 14 bits of each ("sign-fill"
//    right shift, so the low bits are truncated), and the sum written back to the accumulator
//    register is kept to 14 bits as well.
//  - SageAttention2 (arXiv 2411.10958, quoted in thu-ml/SageAttention#287 and DeepGEMM#37):
//    on Ada and Hopper the f32 accumulator of an FP8 mma behaves as 1+8+13 bits ("FP22"): with
//    A = B = 0, an accumulator C with more than 13 stored mantissa bits comes back with the low
//    10 bits cleared, i.e. truncated to 14 significant bits.
//  - huweim/emulation_sys (probe of H100 wgmma, FP8 in, f32 accumulator): 13 mantissa bits,
//    round toward zero. DeepGEMM#176: B200 keeps 25 bits, H100 13 (stored).
//  - cuBLASLt CUBLASLT_MATMUL_DESC_FAST_ACCUM (quoted in NVIDIA/cutlass#1329): with fast
//    accumulation on, partial results are not periodically promoted to higher precision; off,
//    they are (a "split accumulator", what CUTLASS's OpMultiplyAdd tag does every few MMAs).
//    torchao turns it on for the forward GEMM only; TE for fprop.
//
// What is assumed (not published): the exact alignment set (products only, or products and
// the running sum together), the order of truncations, how ties and negative values are
// discarded (two's complement "sign-fill" shifting is floor, sign-magnitude dropping is
// toward zero), and that the promotion is one correctly rounded f32 addition.
//
// The model, one MMA step at a time (group_size products, in order, then the next group):
//   aligned_sum(terms): E = largest exponent among the nonzero terms; each term is cut to a
//     multiple of 2^(E - kept_bits + 1) (kept_bits bits below and including E's leading bit),
//     the cut terms are added exactly, and the sum is cut again to kept_bits significant bits.
//   align_with_accumulator = true:  partial = aligned_sum({partial, p_1, ..., p_g})
//   align_with_accumulator = false: partial = aligned_sum({partial, aligned_sum({p_1..p_g})})
//   promote_every = N_C > 0: after every N_C products, total_f32 += f32(partial); partial = 0.
// The result is total_f32 + f32(partial) (RNE f32 additions), or f32(partial) with no
// promotion. Per-block scales (DeepSeek multiplies the partial sum by them at promotion) are
// not part of the model: it takes the products unscaled.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace mixprec {

// What happens to the bits shifted out below the kept ones.
enum class AccumulatorDiscard : uint8_t {
  toward_zero,      // dropped from the magnitude (what the H100 probes report)
  toward_negative,  // floor: an arithmetic ("sign-fill") shift of a two's-complement value
  nearest_even,     // round to nearest, ties to even
};

struct AccumulatorModel {
  int kept_bits = 14;  // significant bits kept after alignment, leading bit included (2..48)
  AccumulatorDiscard discard = AccumulatorDiscard::toward_zero;
  int group_size = 32;                 // products aligned together per MMA step (Hopper: 32)
  bool align_with_accumulator = true;  // the running partial sum joins the products' alignment
  int promote_every = 0;  // N_C: products per promotion to f32 (a multiple of group_size); 0 never
};

// The setting this file documents as Hopper FP8 "fast accumulation" (no promotion): the
// published mechanism read literally (14 bits, 32 products per step aligned with the running
// sum, truncation). What it gives at K = 4096 (accumulator_model_test prints the table): on
// U(0,1) operands cast to E4M3 a max relative error of ~8%, 4x DeepSeek's "near 2%"; the same
// mechanism lands on 2% at 16 kept bits. Reading the alignment the other way (the products of
// a step aligned among themselves, then added to the 14-bit running sum) gives ~0.3%. Neither
// reading reproduces 2% at exactly 14 bits; the published "about 14 bits" and "near 2%" bracket
// the model within a factor of 4. With promotion every 128 the error falls ~100x, to within a
// small factor of the f32 summation bound K·2^-24, still ~1000x plain f32's observed error.
AccumulatorModel hopper_fp8_fast_accum_model();
// The same with DeepSeek-V3 / DeepGEMM's promotion to f32 every 128 products.
AccumulatorModel deepseek_promoted_model();

// Throws mixprec::Error naming the field (prefixed by `where`) when a parameter is out of range.
void check_accumulator_model(const AccumulatorModel& model, std::string_view where);

// The multi-term adder above: `terms` exact doubles; NaN or inf among them gives their
// ordinary sum. Exact integer arithmetic inside; kept_bits + bit_width(terms.size()) <= 62.
double aligned_sum(std::span<const double> terms, int kept_bits, AccumulatorDiscard discard);

// One dot product under the model: `products` are the exact products a_k·b_k, in K order.
float model_dot(std::span<const double> products, const AccumulatorModel& model);

// C = A·Bᵀ under the model, for small matrices: A is m×k, B is n×k, both row-major; C is m×n.
// Each product is formed exactly in f64 (an f32 times an f32 always is).
std::vector<float> model_matmul_abt(std::span<const float> a, std::span<const float> b, int64_t m,
                                    int64_t n, int64_t k, const AccumulatorModel& model);

}  // namespace mixprec
