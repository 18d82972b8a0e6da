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

// Which column of the table autocast reads: mixprec's own, or PyTorch's CUDA or CPU op lists
// (torch.autocast(device_type="cuda") / "cpu": aten/src/ATen/autocast_mode.{h,cpp}).
enum class AutocastOpTable : uint8_t { mixprec, torch_cuda, torch_cpu };

struct AutocastRule {
  std::string_view op;
  CastCategory category;    // mixprec's
  CastCategory torch_cuda;  // PyTorch's CUDA lists
  CastCategory torch_cpu;   // PyTorch's CPU lists
  constexpr CastCategory in(AutocastOpTable table) const {
    return table == AutocastOpTable::torch_cuda  ? torch_cuda
           : table == AutocastOpTable::torch_cpu ? torch_cpu
                                                 : category;
  }
};

namespace table_rows {  // the enumerators spelled bare in the rows, without leaking out
using enum CastCategory;
// PyTorch's columns follow its op lists; ops PyTorch builds from others (cross_entropy from
// log_softmax and nll_loss, rms_norm from pow, mean and rsqrt, einsum from bmm) take the
// category their result ends up with there, and ops outside autocast that promote by type
// (add, cat, where, ...) are promote. mixprec's column differs from PyTorch's CUDA one where
// mixprec runs more in f32: rmsnorm, mean, sqrt, tanh and the MoE router (PyTorch: as given,
// or a plain linear for the router). PyTorch's CPU lists leave softmax, norms, sums and
// exp/log in the input's dtype.
//                          op                              mixprec          torch_cuda torch_cpu
inline constexpr std::array kAutocastTable{
    // Matmul-like: low-precision operands, f32 accumulation inside the kernels.
    AutocastRule{"matmul", lower_precision, lower_precision, lower_precision},
    AutocastRule{"bmm", lower_precision, lower_precision, lower_precision},
    AutocastRule{"linear", lower_precision, lower_precision, lower_precision},
    AutocastRule{"mm", lower_precision, lower_precision, lower_precision},
    AutocastRule{"mv", lower_precision, lower_precision, as_given},
    AutocastRule{"addmm", lower_precision, lower_precision, lower_precision},
    AutocastRule{"baddbmm", lower_precision, lower_precision, lower_precision},
    AutocastRule{"einsum", lower_precision, lower_precision, lower_precision},
    AutocastRule{"scaled_dot_product_attention", lower_precision, lower_precision, lower_precision},
    // Numerically sensitive: exponentials, statistics, losses, long sums.
    AutocastRule{"softmax", fp32, fp32, as_given},
    AutocastRule{"log_softmax", fp32, fp32, as_given},
    AutocastRule{"rmsnorm", fp32, fp32, as_given},
    AutocastRule{"layernorm", fp32, fp32, as_given},
    AutocastRule{"cross_entropy", fp32, fp32, fp32},
    AutocastRule{"nll_loss", fp32, fp32, fp32},
    AutocastRule{"mse_loss", fp32, fp32, fp32},
    AutocastRule{"l1_loss", fp32, fp32, fp32},
    AutocastRule{"smooth_l1_loss", fp32, fp32, fp32},
    AutocastRule{"kl_div", fp32, fp32, fp32},
    AutocastRule{"binary_cross_entropy_with_logits", fp32, fp32, fp32},
    AutocastRule{"cosine_similarity", fp32, fp32, as_given},
    AutocastRule{"sum", fp32, fp32, as_given},
    AutocastRule{"mean", fp32, as_given, as_given},
    AutocastRule{"norm", fp32, fp32, as_given},
    AutocastRule{"prod", fp32, fp32, fp32},
    AutocastRule{"cumsum", fp32, fp32, as_given},
    AutocastRule{"logsumexp", fp32, fp32, as_given},
    AutocastRule{"moe_router", fp32, lower_precision,
                 lower_precision},  // a hook for MoE router logits
    AutocastRule{"exp", fp32, fp32, as_given},
    AutocastRule{"log", fp32, fp32, as_given},
    AutocastRule{"log1p", fp32, fp32, as_given},
    AutocastRule{"expm1", fp32, fp32, as_given},
    AutocastRule{"sqrt", fp32, as_given, as_given},
    AutocastRule{"rsqrt", fp32, fp32, as_given},
    AutocastRule{"reciprocal", fp32, fp32, as_given},
    AutocastRule{"tanh", fp32, as_given, as_given},
    AutocastRule{"softplus", fp32, fp32, as_given},
    AutocastRule{"pow", fp32, fp32, as_given},
    // Several floating inputs that must share a dtype: widest wins (PyTorch's promote list:
    // dot, addcmul, addcdiv, index_put, scatter_add; cat, stack on CPU; the rest by type
    // promotion). Under every column these inputs meet at one dtype.
    AutocastRule{"dot", promote, promote, promote},
    AutocastRule{"add", promote, promote, promote},
    AutocastRule{"sub", promote, promote, promote},
    AutocastRule{"mul", promote, promote, promote},
    AutocastRule{"div", promote, promote, promote},
    AutocastRule{"swiglu", promote, promote, promote},
    AutocastRule{"concat", promote, promote, promote},
    AutocastRule{"scatter_add", promote, promote, promote},
    AutocastRule{"index_add", promote, promote, promote},
    AutocastRule{"stack", promote, promote, promote},
    AutocastRule{"addcmul", promote, promote, promote},
    AutocastRule{"addcdiv", promote, promote, promote},
    AutocastRule{"where", promote, promote, promote},
    AutocastRule{"index_put", promote, promote, promote},
    // Run on their inputs' dtype (elementwise or exact selection); listed so that fp32
    // module and op overrides reach them too.
    AutocastRule{"gelu", as_given, as_given, as_given},
    AutocastRule{"gelu_tanh", as_given, as_given, as_given},
    AutocastRule{"silu", as_given, as_given, as_given},
    AutocastRule{"dropout", as_given, as_given, as_given},
    AutocastRule{"scale", as_given, as_given, as_given},
    AutocastRule{"rope", as_given, as_given, as_given},
    AutocastRule{"embedding", as_given, as_given, as_given},
    AutocastRule{"gather", as_given, as_given, as_given},
    AutocastRule{"topk", as_given, as_given, as_given},
    AutocastRule{"max", as_given, as_given, as_given},
};
// clang-format on
}  // namespace table_rows
using table_rows::kAutocastTable;

// "mixprec", "torch_cuda", "torch_cpu" (what [training] precision's autocast_ops= takes).
inline constexpr std::array<const char*, 3> kAutocastOpTableNames{"mixprec", "torch_cuda",
                                                                  "torch_cpu"};

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
  // mixprec's column (also what decides whether the op's inputs must share a dtype).
  constexpr CastCategory category() const {
    return kAutocastTable[static_cast<std::size_t>(index_)].category;
  }
  constexpr CastCategory category(AutocastOpTable table) const {
    return kAutocastTable[static_cast<std::size_t>(index_)].in(table);
  }

 private:
  int index_;
};

}  // namespace mixprec::amp
