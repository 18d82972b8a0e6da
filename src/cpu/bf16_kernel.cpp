// The bf16 product kernels' table (cpu/bf16_kernel.h), their switches and their timing.
#include "mixprec/cpu/bf16_kernel.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "gemm_amx.h"
#include "gemm_avx512_bf16.h"
#include "mixprec/core/error.h"
#include "mixprec/cpu/gemm.h"

namespace mixprec::cpu {
namespace {

bool always() {
  return true;
}

constexpr std::array<Bf16Kernel, 3> kKernels{{
    {"amx", "AMX TDPBF16PS tiles", "MIXPREC_AMX", amx::available},
    {"avx512-bf16", "AVX512-BF16 VDPBF16PS", "MIXPREC_AVX512_BF16", avx512_bf16_gemm::available},
    {"widened", "f32 FMA on operands widened while packing", nullptr, always},
}};

bool allowed(const Bf16Kernel& k) {
  if (!k.hardware()) return false;
  const char* v = k.env_switch ? std::getenv(k.env_switch) : nullptr;
  return v == nullptr || std::string_view(v) != "0";
}

// A transformer linear's three products (bf16-mixed autocast): 2048 tokens, 768 -> 3072.
// Under AddressSanitizer the speeds say nothing about the kernels: a quarter of the tokens
// keeps the choice's code covered at a quarter of the (25 s) cost.
#if defined(__SANITIZE_ADDRESS__)
constexpr int64_t kTokens = 512;
#else
constexpr int64_t kTokens = 2048;
#endif
constexpr int64_t kIn = 768, kOut = 3072;

double seconds_of_products(const std::vector<uint16_t>& x, const std::vector<uint16_t>& w,
                           const std::vector<uint16_t>& dy, std::vector<uint16_t>& y,
                           std::vector<uint16_t>& dx, std::vector<float>& dw) {
  const auto t0 = std::chrono::steady_clock::now();
  // y = x · Wᵀ (W stored [out, in])
  gemm(kTokens, kOut, kIn, 1.0f, {DType::bf16, x.data(), kIn}, {DType::bf16, w.data(), kIn, true},
       0.0f, {DType::bf16, y.data(), kOut});
  // dx = dy · W
  gemm(kTokens, kIn, kOut, 1.0f, {DType::bf16, dy.data(), kOut}, {DType::bf16, w.data(), kIn}, 0.0f,
       {DType::bf16, dx.data(), kIn});
  // dW = dyᵀ · x, into the f32 gradient
  gemm(kOut, kIn, kTokens, 1.0f, {DType::bf16, dy.data(), kOut, true}, {DType::bf16, x.data(), kIn},
       0.0f, {DType::f32, dw.data(), kIn});
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::vector<uint16_t> bf16_values(int64_t n, uint32_t seed) {
  std::vector<uint16_t> v(static_cast<size_t>(n));
  uint32_t s = seed;
  for (uint16_t& e : v) {  // small normal values, exponents near 1 (no subnormals)
    s = s * 1664525u + 1013904223u;
    e = static_cast<uint16_t>(0x3c00u + ((s >> 16) & 0x3ffu) + ((s >> 31) << 15));
  }
  return v;
}

}  // namespace

std::span<const Bf16Kernel> bf16_kernels() {
  return kKernels;
}

std::vector<std::string> available_bf16_kernels() {
  std::vector<std::string> names;
  for (const Bf16Kernel& k : kKernels)
    if (allowed(k)) names.emplace_back(k.name);
  return names;
}

std::string current_bf16_kernel() {
  if (amx::enabled()) return "amx";
  if (avx512_bf16_gemm::enabled()) return "avx512-bf16";
  return "widened";
}

void use_bf16_kernel(std::string_view name, const std::string& where) {
  const auto it = std::find_if(kKernels.begin(), kKernels.end(),
                               [&](const Bf16Kernel& k) { return k.name == name; });
  std::string here;
  for (const std::string& n : available_bf16_kernels()) here += (here.empty() ? "" : ", ") + n;
  MIXPREC_CHECK(it != kKernels.end(), where,
                "unknown bf16 kernel '" + std::string(name) +
                    "' (one of: auto, amx, avx512-bf16, "
                    "widened; this host has " +
                    here + ")");
  MIXPREC_CHECK(allowed(*it), where,
                "the bf16 kernel '" + std::string(name) + "' (" + it->instruction +
                    ") is not available on this host" +
                    (it->hardware() ? std::string(" (") + it->env_switch + "=0)" : "") +
                    "; it has " + here);
  amx::set_enabled(name == "amx");
  avx512_bf16_gemm::set_enabled(name == "avx512-bf16");
}

std::vector<Bf16KernelTiming> time_bf16_kernels(int rounds) {
  const std::string before = current_bf16_kernel();
  const std::vector<std::string> names = available_bf16_kernels();
  const std::vector<uint16_t> x = bf16_values(kTokens * kIn, 1), w = bf16_values(kOut * kIn, 2),
                              dy = bf16_values(kTokens * kOut, 3);
  std::vector<uint16_t> y(static_cast<size_t>(kTokens * kOut)),
      dx(static_cast<size_t>(kTokens * kIn));
  std::vector<float> dw(static_cast<size_t>(kOut * kIn));
  std::vector<std::vector<double>> seconds(names.size());
  for (int r = -1; r < std::max(rounds, 1); ++r)  // round -1 warms each kernel up (packing buffers)
    for (size_t i = 0; i < names.size(); ++i) {
      use_bf16_kernel(names[i], "bf16 kernel timing");
      const double s = seconds_of_products(x, w, dy, y, dx, dw);
      if (r >= 0) seconds[i].push_back(s);
    }
  use_bf16_kernel(before, "bf16 kernel timing");
  const double flops = 3.0 * 2.0 * double(kTokens) * double(kIn) * double(kOut);
  std::vector<Bf16KernelTiming> out;
  for (size_t i = 0; i < names.size(); ++i) {
    std::vector<double>& s = seconds[i];
    std::sort(s.begin(), s.end());
    out.push_back({names[i], flops / s[s.size() / 2] * 1e-9, flops / s.back() * 1e-9,
                   flops / s.front() * 1e-9});
  }
  return out;
}

}  // namespace mixprec::cpu
