// The kernels bf16 x bf16 products can run on, one table (src/cpu/bf16_kernel.cpp): AMX
// tiles, AVX512-BF16 dot products (VDPBF16PS), or both operands widened to f32 for the FMA
// kernel. Which one is fastest depends on the host, not on the ISA alone: on an Intel Xeon
// without AMX exposed VDPBF16PS peaked at 173 GFLOP/s against 354 for the f32 FMA, while on
// AMD EPYC (Zen 4) it is the other way round. train/bf16_kernel_choice.h times them and chooses.
// Each kernel's bits are fixed by the shape (gemm.h); they differ between kernels (the native
// ones treat bf16 subnormal inputs as zero and sum K-pairs their own way).
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "mixprec/backend/kernel_types.h"

namespace mixprec::cpu {

struct Bf16Kernel {
  const char* name;         // "amx", "avx512-bf16", "widened": the setting's spelling
  const char* instruction;  // what multiplies: "TDPBF16PS tiles", ...
  const char* env_switch;   // the variable whose "0" rules it out (nullptr: none)
  bool (*hardware)();       // the CPU (and the OS) can run it
};

// The table, fastest-in-principle first (the order used when nothing was measured).
std::span<const Bf16Kernel> bf16_kernels();

// The kernels this host can run and the environment allows (MIXPREC_AMX=0 and
// MIXPREC_AVX512_BF16=0 rule a path out); "widened" always.
std::vector<std::string> available_bf16_kernels();

// The kernel bf16 products run on now: the first available one until use_bf16_kernel.
std::string current_bf16_kernel();

// Runs bf16 products on `name` from now on (not while a GEMM runs). Throws Error(where, ...)
// naming the kernels this host has when `name` is unknown or not available here.
void use_bf16_kernel(std::string_view name, const std::string& where);

using backend::Bf16KernelTiming;

// Times each available kernel on one transformer linear's three products (forward x·Wᵀ, the
// input gradient dy·W and the weight gradient dyᵀ·x; 2048 tokens, 768 -> 3072, bf16 operands,
// as autocast runs them) at the current thread count, interleaved over `rounds` rounds after
// a warm-up; medians and ranges. Leaves the current kernel as it was.
std::vector<Bf16KernelTiming> time_bf16_kernels(int rounds = 3);

}  // namespace mixprec::cpu
