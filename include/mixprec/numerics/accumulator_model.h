// A model of a limited-precision GEMM accumulator, such as the one in Hopper's FP8 tensor
// cores, so an FP8 recipe can be run on the CPU the way a GPU sums it (issue 33, item 5).
//
// NVIDIA documents none of it: the parameters come from published measurements, and the step
// matches two simulators that reproduce an H100 bit for bit (below); the placement of promotions
// and the split accumulator of non-fast products are assumptions. mixprec's default is no model
// at all: products are summed in f32 (or better) as everywhere else.
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
// Since measured bit for bit on an H100 by two independent simulators (Khattak & Mikaitis,
// "Accurate Models of NVIDIA Tensor Cores", arXiv 2512.07004, and MMA-Sim, arXiv 2511.10909):
// an FP8 wgmma adds 32 products and the accumulator in one fused step; the reference exponent
// is the largest of the accumulator's and the products' operand exponent sums e_a + e_b (the
// product's significand left unnormalized in [1, 4)); every term keeps 13 fractional bits
// below it, truncated toward zero; the exact sum is cut toward zero to 14 significant bits
// (f32 with 13 stored mantissa bits). That is this model with kept_bits 14, group 32, the
// accumulator aligned, toward zero, and the products' exponents given (model_dot's
// `exponents`; from the products themselves the reference is one bit coarser when a product's
// significand is >= 2).
//
// The model, one MMA step at a time (group_size products, in order, then the next group):
//   aligned_sum(terms): E = largest reference exponent among the nonzero terms (a term's own,
//     floor(log2 |t|), unless given); each term is cut to a multiple of 2^(E - kept_bits + 1)
//     (kept_bits - 1 fractional bits below E), the cut terms are added exactly, and the sum is
//     cut again to kept_bits significant bits.
//   align_with_accumulator = true:  partial = aligned_sum({partial, p_1, ..., p_g})
//   align_with_accumulator = false: partial = aligned_sum({partial, aligned_sum({p_1..p_g})})
//   promote_every = N_C > 0: after every N_C products, total_f32 += f32(partial); partial = 0.
// The result is total_f32 + f32(partial) (RNE f32 additions), or f32(partial) with no
// promotion. Per-block scales (DeepSeek multiplies the partial sum by them at promotion) are
// not part of the model: it takes the products unscaled.
#pragma once

#include <cstdint>
#include <span>
#include <string>
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

// Hopper FP8 "fast accumulation" (no promotion): the measured wgmma step above (14 bits, 32
// products per step aligned with the running sum, toward zero; give model_dot the operands'
// exponent sums). At K = 4096 on E4M3 operands (accumulator_model_test prints the table) its
// max relative error is 1.3% of the result on N(0,1) operands, DeepSeek-V3's "near 2%", and
// 7.8% on U(0,1), whose running sum dwarfs each product; promotion every 128 cuts both ~10x
// or more, to within the f32 summation bound K·2^-24 of Σ|a·b|.
AccumulatorModel hopper_fp8_fast_accum_model();
// The same with DeepSeek-V3 / DeepGEMM's promotion to f32 every 128 products.
AccumulatorModel deepseek_promoted_model();

// The accumulators an FP8 recipe can be run with, by name (config `accumulator`, policy key
// `accumulator=`): "f32" (none: the exact products summed in f32, the default) and "h100"
// (hopper_fp8_fast_accum_model with the products' operand exponents: the measured H100 wgmma,
// applied to the products whose GPU kernel sums them that way, linear_recipe.h's fast_accum).
struct NamedAccumulator {
  const char* name;
  const AccumulatorModel* model;  // null: f32
  const char* source;
};
std::span<const NamedAccumulator> named_accumulators();
// The line called `name` (null when there is none), and the names for messages: "f32, h100".
const NamedAccumulator* named_accumulator(std::string_view name);
std::string accumulator_names();
// The model called `name` (null for "f32"); throws mixprec::Error naming `where` and listing
// the names when there is none.
const AccumulatorModel* find_accumulator(std::string_view name, std::string_view where);
// The line of a model of the table (null: the "f32" line); Error for any other model.
const NamedAccumulator& named_accumulator_of(const AccumulatorModel* model);

// Throws mixprec::Error naming the field (prefixed by `where`) when a parameter is out of range.
void check_accumulator_model(const AccumulatorModel& model, std::string_view where);

// The multi-term adder above: `terms` exact doubles; NaN or inf among them gives their
// ordinary sum. `exponents` (empty: each term's own) gives each term's reference exponent, at
// least its own - 2 (above its own for subnormal operands). Exact integer arithmetic inside;
// kept_bits + 2 + bit_width(terms.size()) <= 62.
double aligned_sum(std::span<const double> terms, int kept_bits, AccumulatorDiscard discard,
                   std::span<const int> exponents = {});

// One dot product under the model: `products` are the exact products a_k·b_k, in K order;
// `exponents` (empty: the products' own) their operands' exponent sums (product_exponent).
float model_dot(std::span<const double> products, const AccumulatorModel& model,
                std::span<const int> exponents = {});

// The exponent a tensor core aligns a product by: e_a + e_b, each operand's exponent being
// floor(log2 |x|) clamped below at its format's smallest normal exponent (subnormals have
// that exponent and a significand below 1). x and y nonzero and finite.
int product_exponent(float x, int x_emin, float y, int y_emin);

// C = A·Bᵀ under the model, for small matrices: A is m×k, B is n×k, both row-major; C is m×n.
// Each product is formed exactly in f64 (an f32 times an f32 always is).
std::vector<float> model_matmul_abt(std::span<const float> a, std::span<const float> b, int64_t m,
                                    int64_t n, int64_t k, const AccumulatorModel& model);

}  // namespace mixprec
