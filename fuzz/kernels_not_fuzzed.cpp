// The kernels clang cannot build as written for gcc (AVX vector arguments, gcc builtins; see
// CMakeLists.txt), defined for the fuzz build only: the kernel table refers to them, so the
// linker needs them, but the fuzz targets read files and configs and never run a kernel.
// Reaching one is a bug in the harness, so it aborts.
#include <cstdio>
#include <cstdlib>

#include "../src/cpu/softmax_row_ops.h"
#include "mixprec/cpu/activation.h"

namespace mixprec::cpu {
namespace {

[[noreturn]] void not_fuzzed(const char* kernel) {
  std::fprintf(stderr, "fuzz build: kernel %s is not built with clang and must not run\n", kernel);
  std::abort();
}

}  // namespace

Tensor activation_forward(Activation, const Tensor&, Isa) {
  not_fuzzed("activation_forward");
}
Tensor activation_backward(Activation, const Tensor&, const Tensor&, Isa) {
  not_fuzzed("activation_backward");
}
Tensor swiglu_forward(const Tensor&, const Tensor&, Isa) {
  not_fuzzed("swiglu_forward");
}
std::array<Tensor, 2> swiglu_backward(const Tensor&, const Tensor&, const Tensor&, bool, bool,
                                      Isa) {
  not_fuzzed("swiglu_backward");
}
Tensor dropout_forward(const Tensor&, double, uint64_t, uint64_t, Isa) {
  not_fuzzed("dropout_forward");
}
Tensor dropout_backward(const Tensor&, double, uint64_t, uint64_t, DType, Isa) {
  not_fuzzed("dropout_backward");
}
const RowKernels& avx2_row_kernels() {
  not_fuzzed("avx2_row_kernels");
}
const RowKernels& avx512_row_kernels() {
  not_fuzzed("avx512_row_kernels");
}
const StoredRowOps<bf16>& avx512_bf16_stored_rows() {
  not_fuzzed("avx512_bf16_stored_rows");
}

}  // namespace mixprec::cpu
