// The GEMM block products' per-thread panel buffers (gemm_panels.h).
#include <new>

#include "gemm_panels.h"

namespace mixprec::cpu::gemm_panels {

void* thread_buffer(int slot, size_t bytes) {
  struct Buffer {
    void* p = nullptr;
    size_t bytes = 0;
    ~Buffer() { ::operator delete[](p, std::align_val_t(64)); }
  };
  thread_local Buffer buffers[2];
  Buffer& b = buffers[slot];
  if (b.bytes < bytes) {
    ::operator delete[](b.p, std::align_val_t(64));
    b.p = nullptr;  // a failing new below leaves no dangling block
    b.bytes = 0;
    b.p = ::operator new[](bytes, std::align_val_t(64));
    b.bytes = bytes;
  }
  return b.p;
}

}  // namespace mixprec::cpu::gemm_panels
