// Links against the installed library and checks one conversion end to end.
#include <mixprec/numerics/encode.h>
#include <mixprec/tensor/tensor.h>
#include <cstdio>

int main() {
  const mixprec::Tensor t = mixprec::Tensor::full({4}, 0.1, mixprec::DType::bf16);
  const uint32_t bits = mixprec::encode_f32(mixprec::kFormatBF16, 0.1f);
  const bool ok = bits == 0x3DCD && t.to_doubles()[3] == 0.10009765625;
  std::printf("consumer: bf16(0.1) = 0x%04X, tensor %s\n", bits, ok ? "ok" : "WRONG");
  return ok ? 0 : 1;
}
