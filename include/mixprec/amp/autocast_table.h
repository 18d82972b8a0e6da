// The autocast op table: one line per op, read by the op hooks, the overrides and the tests.
// It lives in a header so hook names are checked at compile time (AutocastOpId).
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace mixprec::amp {

// What autocast does to an op's floating inputs (f64 is left alone except by promote, as in
// PyTorch; fp8 and integer inputs are never touched):
//   lower_precision: f32/bf16/f16 inputs cast to the autocast dtype (bf16 or f16);
//   fp32:            bf16/f16 inputs cast to f32;
//   promote:         floating inputs cast to the widest of them (mixprec::promote);
//   as_given:        no cast (unless an fp32 module or op override applies).
enum class CastCategory : uint8_t { lower_precision, fp32, promote, as_given };

struct AutocastRule {
  std::string_view op;
  CastCategory category;
};

namespace table_rows {  // the enumerators spelled bare in the rows, without leaking out
using enum CastCategory;
// clang-format off
inline constexpr std::array kAutocastTable{
    // Matmul-like: low-precision operands, f32 accumulation inside the kernels.
    AutocastRule{"matmul",                       lower_precision},
    AutocastRule{"bmm",                          lower_precision},
    AutocastRule{"linear",                       lower_precision},
    AutocastRule{"mm",                           lower_precision},
    AutocastRule{"mv",                           lower_precision},
    AutocastRule{"dot",                          lower_precision},
    AutocastRule{"addmm",                        lower_precision},
    AutocastRule{"baddbmm",                      lower_precision},
    AutocastRule{"einsum",                       lower_precision},
    AutocastRule{"scaled_dot_product_attention", lower_precision},
    // Numerically sensitive: exponentials, statistics, losses, long sums.
    AutocastRule{"softmax",                      fp32},
    AutocastRule{"log_softmax",                  fp32},
    AutocastRule{"rmsnorm",                      fp32},
    AutocastRule{"layernorm",                    fp32},
    AutocastRule{"cross_entropy",                fp32},
    AutocastRule{"nll_loss",                     fp32},
    AutocastRule{"mse_loss",                     fp32},
    AutocastRule{"l1_loss",                      fp32},
    AutocastRule{"smooth_l1_loss",               fp32},
    AutocastRule{"kl_div",                       fp32},
    AutocastRule{"binary_cross_entropy_with_logits", fp32},
    AutocastRule{"cosine_similarity",            fp32},
    AutocastRule{"sum",                          fp32},
    AutocastRule{"mean",                         fp32},
    AutocastRule{"norm",                         fp32},
    AutocastRule{"prod",                         fp32},
    AutocastRule{"cumsum",                       fp32},
    AutocastRule{"logsumexp",                    fp32},
    AutocastRule{"moe_router",                   fp32},  // a hook for MoE router logits
    AutocastRule{"exp",                          fp32},
    AutocastRule{"log",                          fp32},
    AutocastRule{"log1p",                        fp32},
    AutocastRule{"expm1",                        fp32},
    AutocastRule{"sqrt",                         fp32},
    AutocastRule{"rsqrt",                        fp32},
    AutocastRule{"reciprocal",                   fp32},
    AutocastRule{"tanh",                         fp32},
    AutocastRule{"softplus",                     fp32},
    AutocastRule{"pow",                          fp32},
    // Several floating inputs that must share a dtype: widest wins.
    AutocastRule{"add",                          promote},
    AutocastRule{"sub",                          promote},
    AutocastRule{"mul",                          promote},
    AutocastRule{"div",                          promote},
    AutocastRule{"swiglu",                       promote},
    AutocastRule{"concat",                       promote},
    AutocastRule{"scatter_add",                  promote},
    AutocastRule{"index_add",                    promote},
    AutocastRule{"stack",                        promote},
    AutocastRule{"addcmul",                      promote},
    AutocastRule{"addcdiv",                      promote},
    AutocastRule{"where",                        promote},
    AutocastRule{"index_put",                    promote},
    // Run on their inputs' dtype (elementwise or exact selection); listed so that fp32
    // module and op overrides reach them too.
    AutocastRule{"gelu",                         as_given},
    AutocastRule{"gelu_tanh",                    as_given},
    AutocastRule{"silu",                         as_given},
    AutocastRule{"dropout",                      as_given},
    AutocastRule{"scale",                        as_given},
    AutocastRule{"rope",                         as_given},
    AutocastRule{"embedding",                    as_given},
    AutocastRule{"gather",                       as_given},
    AutocastRule{"topk",                         as_given},
    AutocastRule{"max",                          as_given},
};
// clang-format on
}  // namespace table_rows
using table_rows::kAutocastTable;

inline constexpr int kNumAutocastOps = static_cast<int>(kAutocastTable.size());

constexpr int find_autocast_op(std::string_view op) {
  for (int i = 0; i < kNumAutocastOps; ++i)
    if (kAutocastTable[static_cast<std::size_t>(i)].op == op) return i;
  return -1;
}

constexpr bool autocast_names_unique() {
  for (int i = 0; i < kNumAutocastOps; ++i)
    if (find_autocast_op(kAutocastTable[static_cast<std::size_t>(i)].op) != i) return false;
  return true;
}
static_assert(autocast_names_unique(), "kAutocastTable lists an op twice");

// An op's row in the table, resolved at compile time: a hook naming an op the table lacks
// does not compile ("call to consteval function is not a constant expression").
class AutocastOpId {
 public:
  consteval AutocastOpId(const char* op) : index_(find_autocast_op(op)) {  // NOLINT: implicit
    if (index_ < 0) throw "autocast hook names an op missing from kAutocastTable";
  }
  constexpr int index() const { return index_; }
  constexpr std::string_view name() const {
    return kAutocastTable[static_cast<std::size_t>(index_)].op;
  }
  constexpr CastCategory category() const {
    return kAutocastTable[static_cast<std::size_t>(index_)].category;
  }

 private:
  int index_;
};

}  // namespace mixprec::amp
