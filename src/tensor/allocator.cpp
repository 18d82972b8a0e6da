#include "mixprec/tensor/allocator.h"

#include <malloc.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdlib>
#include <new>

namespace mixprec {

Allocator& Allocator::instance() {
  static Allocator* allocator = new Allocator();  // never destroyed: tensors may outlive main
  return *allocator;
}

Allocator::~Allocator() {
  empty_cache();
}

std::size_t Allocator::block_size(std::size_t nbytes) {
  if (nbytes <= 512) return 512;
  // Four classes per power of two: 1, 1.25, 1.5, 1.75 times 2^k.
  const std::size_t pow = std::bit_floor(nbytes);
  const std::size_t step = std::max<std::size_t>(pow / 4, kAlignment);
  if (nbytes > SIZE_MAX - step) throw std::bad_alloc();
  return (nbytes + step - 1) / step * step;
}

void* Allocator::take_cached(std::size_t size) {
  auto it = free_blocks_.lower_bound(size);
  const std::size_t limit = size >= kLargeBlock && size <= SIZE_MAX / 3 ? size + size / 2 : size;
  for (; it != free_blocks_.end() && it->first <= limit; ++it) {
    if (it->second.empty()) continue;
    void* ptr = it->second.back().ptr;
    it->second.pop_back();
    stats_.cached_bytes -= it->first;
    if (it->first != size) oversized_.emplace(ptr, it->first);
    return ptr;
  }
  return nullptr;
}

std::size_t Allocator::live_block_size(void* ptr, std::size_t nbytes) {
  const auto it = oversized_.find(ptr);
  if (it == oversized_.end()) return block_size(nbytes);
  const std::size_t size = it->second;
  oversized_.erase(it);
  return size;
}

void* Allocator::allocate(std::size_t nbytes, DType dtype) {
  const std::size_t size = block_size(nbytes);
  const auto d = static_cast<std::size_t>(dtype);
  std::lock_guard<std::mutex> lock(mutex_);
  void* ptr = take_cached(size);
  if (ptr) {
    ++stats_.reuses;
  } else {
    ptr = std::aligned_alloc(kAlignment, size);
    if (!ptr) {  // drop the cache and retry once before giving up
      for (auto& [s, blocks] : free_blocks_)
        for (const Cached& c : blocks) std::free(c.ptr);
      stats_.reserved_bytes -= stats_.cached_bytes;
      stats_.cached_bytes = 0;
      free_blocks_.clear();
      ptr = std::aligned_alloc(kAlignment, size);
      if (!ptr) throw std::bad_alloc();
    }
    stats_.reserved_bytes += size;
  }
  ++stats_.allocations;
  stats_.current_bytes += nbytes;
  stats_.current_by_dtype[d] += nbytes;
  stats_.peak_bytes = std::max(stats_.peak_bytes, stats_.current_bytes);
  stats_.peak_by_dtype[d] = std::max(stats_.peak_by_dtype[d], stats_.current_by_dtype[d]);
  return ptr;
}

void Allocator::deallocate(void* ptr, std::size_t nbytes, DType dtype) {
  if (!ptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  const std::size_t size = live_block_size(ptr, nbytes);
  stats_.current_bytes -= nbytes;
  stats_.current_by_dtype[static_cast<std::size_t>(dtype)] -= nbytes;
  if (stats_.cached_bytes + size <= cache_limit_) {
    free_blocks_[size].push_back({ptr, ++frees_});  // each class: oldest first
    stats_.cached_bytes += size;
  } else {
    std::free(ptr);
    stats_.reserved_bytes -= size;
  }
}

MemoryStats Allocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void Allocator::reset_peak() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.peak_bytes = stats_.current_bytes;
  stats_.peak_by_dtype = stats_.current_by_dtype;
}

std::size_t Allocator::trim_cache(std::size_t keep_bytes) {
  std::size_t freed = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stats_.cached_bytes <= keep_bytes) return 0;
    // Least recently freed first: the blocks no step has wanted for the longest.
    std::vector<std::pair<uint64_t, std::size_t>> order;  // (freed_at, class)
    for (const auto& [size, blocks] : free_blocks_)
      for (const Cached& c : blocks) order.emplace_back(c.freed_at, size);
    std::sort(order.begin(), order.end());
    uint64_t last = 0;  // blocks freed up to here go
    for (const auto& [freed_at, size] : order) {
      if (stats_.cached_bytes - freed <= keep_bytes) break;
      freed += size;
      last = freed_at;
    }
    for (auto& [size, blocks] : free_blocks_) {
      auto keep = std::partition(blocks.begin(), blocks.end(),
                                 [&](const Cached& c) { return c.freed_at <= last; });
      for (auto it = blocks.begin(); it != keep; ++it) std::free(it->ptr);
      blocks.erase(blocks.begin(), keep);
    }
    stats_.cached_bytes -= freed;
    stats_.reserved_bytes -= freed;
  }
  // glibc keeps freed heap memory mapped until it is trimmed.
  if (freed > 0) ::malloc_trim(0);
  return freed;
}

uint64_t Allocator::cache_mark() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return frees_;
}

std::size_t Allocator::trim_cached_since(uint64_t mark) {
  std::size_t freed = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [size, blocks] : free_blocks_)
      while (!blocks.empty() && blocks.back().freed_at > mark) {  // newest last
        std::free(blocks.back().ptr);
        blocks.pop_back();
        freed += size;
      }
    stats_.cached_bytes -= freed;
    stats_.reserved_bytes -= freed;
  }
  if (freed > 0) ::malloc_trim(0);
  return freed;
}

void Allocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [size, blocks] : free_blocks_)
    for (const Cached& c : blocks) std::free(c.ptr);
  free_blocks_.clear();
  stats_.reserved_bytes -= stats_.cached_bytes;
  stats_.cached_bytes = 0;
}

void Allocator::set_cache_limit(std::size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  cache_limit_ = bytes;
  for (auto& [size, blocks] : free_blocks_) {  // trim what is cached beyond the new limit
    while (stats_.cached_bytes > cache_limit_ && !blocks.empty()) {
      std::free(blocks.back().ptr);
      blocks.pop_back();
      stats_.cached_bytes -= size;
      stats_.reserved_bytes -= size;
    }
  }
}

}  // namespace mixprec
