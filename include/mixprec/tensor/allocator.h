// The caching host allocator: every tensor's bytes come from here. Freed blocks are kept in
// size classes and handed out again, and live bytes are counted per dtype, so later layers
// (optimizers, the memory planner) can measure what a policy really costs.
//
// A large request whose own class has no cached block takes the smallest cached block of at
// most 1.5 times its class: the buffers of a mixture-of-experts layer change size
// with the routing every step, and a fresh block for each new size would be page-faulted in
// anew (thousands of faults a step) while the cache grows.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "mixprec/numerics/dtype.h"

namespace mixprec {

struct MemoryStats {
  std::size_t current_bytes = 0;  // bytes requested by live tensors
  std::size_t peak_bytes = 0;     // high-water mark of current_bytes since the last reset
  std::array<std::size_t, kNumDTypes> current_by_dtype{};
  std::array<std::size_t, kNumDTypes> peak_by_dtype{};
  std::size_t cached_bytes = 0;    // freed blocks held for reuse
  std::size_t reserved_bytes = 0;  // live blocks + cache, as obtained from the system
  uint64_t allocations = 0;        // allocate() calls
  uint64_t reuses = 0;             // of which served from the cache
};

class Allocator {
 public:
  static constexpr std::size_t kAlignment = 64;
  // From this class size on, a request may take a cached block of a larger class (up to 1.5x).
  static constexpr std::size_t kLargeBlock = std::size_t{64} << 10;

  // The process-wide allocator used by tensors.
  static Allocator& instance();

  Allocator() = default;
  ~Allocator();
  Allocator(const Allocator&) = delete;
  Allocator& operator=(const Allocator&) = delete;

  // 64-byte aligned block of at least nbytes (nbytes may be 0).
  void* allocate(std::size_t nbytes, DType dtype);
  void deallocate(void* ptr, std::size_t nbytes, DType dtype);

  MemoryStats stats() const;
  void reset_peak();   // peaks := current
  void empty_cache();  // give cached blocks back to the system
  // Gives cached blocks back, least recently freed first, until at most keep_bytes stay cached
  // (then glibc's malloc_trim, so the process's RSS falls too). Returns the bytes given back.
  // Without it the cache only grows: MoE buffers change size with the routing every step.
  std::size_t trim_cache(std::size_t keep_bytes);
  // A point in the cache's history, and giving back every block cached after it (reused ones
  // included): for one-off work, such as a checkpoint's copies of the state.
  uint64_t cache_mark() const;
  std::size_t trim_cached_since(uint64_t mark);
  // Upper bound on cached bytes; a block freed beyond it goes straight back to the system.
  void set_cache_limit(std::size_t bytes);

  // The size class a request is served from: >= nbytes, at most 25% larger above 512 bytes
  // (smaller requests share the 512-byte class). Throws std::bad_alloc for impossible sizes.
  static std::size_t block_size(std::size_t nbytes);

 private:
  mutable std::mutex mutex_;
  MemoryStats stats_;
  std::size_t cache_limit_ = std::size_t{4} << 30;
  void* take_cached(std::size_t size);  // a cached block for class `size`, or nullptr
  std::size_t live_block_size(void* ptr, std::size_t nbytes);  // and forgets an oversize entry

  struct Cached {
    void* ptr;
    uint64_t freed_at;  // frees_ when it was cached
  };
  uint64_t frees_ = 0;                                      // blocks cached so far
  std::map<std::size_t, std::vector<Cached>> free_blocks_;  // by class size; oldest first
  std::unordered_map<void*, std::size_t> oversized_;        // live blocks from a larger class
};

}  // namespace mixprec
