// The caching allocator: size classes, alignment, reuse, per-dtype accounting, the cache
// limit. A local Allocator is used wherever possible so counts are exact; tests on the
// process-wide instance (which tensors use) only look at deltas.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <set>
#include <vector>

#include "mixprec/tensor/allocator.h"
#include "mixprec/tensor/tensor.h"

namespace mixprec {
namespace {

std::size_t idx(DType d) {
  return static_cast<std::size_t>(d);
}

// ---------------------------------------------------------------- size classes

TEST(AllocatorBlockSize, SmallRequestsShareThe512ByteClass) {
  for (std::size_t n : {0, 1, 63, 64, 100, 511, 512}) EXPECT_EQ(Allocator::block_size(n), 512u);
}

TEST(AllocatorBlockSize, HandComputedClasses) {
  // Above 512: four classes per power of two, 2^k * {1, 1.25, 1.5, 1.75}.
  EXPECT_EQ(Allocator::block_size(513), 640u);
  EXPECT_EQ(Allocator::block_size(640), 640u);
  EXPECT_EQ(Allocator::block_size(641), 768u);
  EXPECT_EQ(Allocator::block_size(700), 768u);
  EXPECT_EQ(Allocator::block_size(1000), 1024u);
  EXPECT_EQ(Allocator::block_size(1024), 1024u);
  EXPECT_EQ(Allocator::block_size(1025), 1280u);
  EXPECT_EQ(Allocator::block_size(1537), 1792u);
  EXPECT_EQ(Allocator::block_size(1793), 2048u);
  EXPECT_EQ(Allocator::block_size(std::size_t{1} << 20), std::size_t{1} << 20);
  EXPECT_EQ(Allocator::block_size((std::size_t{1} << 20) + 1), std::size_t{5} << 18);
  EXPECT_EQ(Allocator::block_size(std::size_t{3} << 30), std::size_t{3} << 30);
}

TEST(AllocatorBlockSize, ClassesCoverTheRequestWithAtMost25PercentWaste) {
  // Every size up to 64 KiB, then a sweep of odd sizes up to 1 GiB.
  std::vector<std::size_t> sizes;
  for (std::size_t n = 0; n <= (std::size_t{1} << 16); ++n) sizes.push_back(n);
  for (std::size_t n = (std::size_t{1} << 16) + 1; n <= (std::size_t{1} << 30); n = n * 9 / 8 + 7)
    sizes.push_back(n);
  int64_t bad = 0;
  for (std::size_t n : sizes) {
    const std::size_t b = Allocator::block_size(n);
    const bool ok = b >= n && b % Allocator::kAlignment == 0 && (n <= 512 || 4 * b <= 5 * n) &&
                    Allocator::block_size(b) == b;  // a class maps to itself
    if (!ok && ++bad <= 5) ADD_FAILURE() << "block_size(" << n << ") = " << b;
  }
  EXPECT_EQ(bad, 0);
}

TEST(AllocatorBlockSize, IsMonotoneWithFourClassesPerOctaveAbove512) {
  std::set<std::size_t> classes;
  std::size_t prev = 0;
  for (std::size_t n = 513; n <= 4096; ++n) {
    const std::size_t b = Allocator::block_size(n);
    EXPECT_GE(b, prev);
    prev = b;
    classes.insert(b);
  }
  // (512, 4096] spans three octaves: 4 classes each.
  EXPECT_EQ(classes, (std::set<std::size_t>{640, 768, 896, 1024, 1280, 1536, 1792, 2048, 2560, 3072,
                                            3584, 4096}));
}

// ---------------------------------------------------------------- allocate / reuse

TEST(AllocatorAllocate, ReturnsUsable64ByteAlignedBlocks) {
  Allocator a;
  std::vector<std::pair<void*, std::size_t>> blocks;
  for (std::size_t n : {0, 1, 63, 64, 65, 511, 512, 513, 1000, 4096, 100000, 1 << 20}) {
    void* p = a.allocate(n, DType::u8);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 64, 0u) << n;
    std::memset(p, 0xAB, n);  // the whole request is writable (ASan would object otherwise)
    blocks.emplace_back(p, n);
  }
  // Live blocks are distinct.
  std::set<void*> distinct;
  for (auto& [p, n] : blocks) distinct.insert(p);
  EXPECT_EQ(distinct.size(), blocks.size());
  for (auto& [p, n] : blocks) a.deallocate(p, n, DType::u8);
  EXPECT_EQ(a.stats().current_bytes, 0u);
}

TEST(AllocatorAllocate, FreedBlockIsReusedForTheSameSizeClass) {
  Allocator a;
  void* p = a.allocate(1000, DType::f32);
  a.deallocate(p, 1000, DType::f32);
  EXPECT_EQ(a.stats().reuses, 0u);
  EXPECT_EQ(a.stats().cached_bytes, 1024u);

  void* q = a.allocate(1000, DType::f32);
  EXPECT_EQ(q, p);
  EXPECT_EQ(a.stats().reuses, 1u);
  EXPECT_EQ(a.stats().cached_bytes, 0u);
  a.deallocate(q, 1000, DType::f32);

  // 1010 bytes, another dtype, same 1024-byte class: same block.
  void* r = a.allocate(1010, DType::bf16);
  EXPECT_EQ(r, p);
  EXPECT_EQ(a.stats().reuses, 2u);
  a.deallocate(r, 1010, DType::bf16);

  // A different class cannot take it.
  void* s = a.allocate(2000, DType::f32);
  EXPECT_NE(s, p);
  EXPECT_EQ(a.stats().reuses, 2u);
  EXPECT_EQ(a.stats().allocations, 4u);
  a.deallocate(s, 2000, DType::f32);
}

TEST(AllocatorAllocate, LargeRequestTakesACachedBlockOfAtMostOneAndAHalfTimesItsClass) {
  Allocator a;
  const std::size_t big = std::size_t{1} << 20;  // the 1 MiB class
  void* p = a.allocate(big, DType::f32);
  a.deallocate(p, big, DType::f32);
  // 768 KiB (its own class, nothing cached there) takes the 1 MiB block: 1.33x.
  const std::size_t smaller = big / 4 * 3;
  void* q = a.allocate(smaller, DType::f32);
  EXPECT_EQ(q, p);
  EXPECT_EQ(a.stats().reuses, 1u);
  EXPECT_EQ(a.stats().cached_bytes, 0u);
  EXPECT_EQ(a.stats().current_bytes, smaller);
  // Freed, it goes back to the 1 MiB class it came from, whatever size it served.
  a.deallocate(q, smaller, DType::f32);
  EXPECT_EQ(a.stats().cached_bytes, big);
  EXPECT_EQ(a.stats().reserved_bytes, big);
  EXPECT_EQ(a.allocate(big, DType::f32), p);
  a.deallocate(p, big, DType::f32);
  // 640 KiB would waste 1.6x: a fresh block, the 1 MiB one stays cached.
  void* r = a.allocate(big / 8 * 5, DType::f32);
  EXPECT_NE(r, p);
  EXPECT_EQ(a.stats().cached_bytes, big);
  a.deallocate(r, big / 8 * 5, DType::f32);
  // Small requests keep to their own class.
  void* s = a.allocate(4096, DType::f32);
  a.deallocate(s, 4096, DType::f32);
  void* t = a.allocate(4000, DType::f32);  // the 4096 class too: exact reuse
  EXPECT_EQ(t, s);
  a.deallocate(t, 4000, DType::f32);
  void* u = a.allocate(3500, DType::f32);  // the 3584 class: no larger-class reuse below 64 KiB
  EXPECT_NE(u, s);
  a.deallocate(u, 3500, DType::f32);
  EXPECT_EQ(a.stats().current_bytes, 0u);
}

TEST(AllocatorAllocate, LiveBlocksAreNeverHandedOutTwice) {
  Allocator a;
  void* p = a.allocate(100, DType::f32);
  void* q = a.allocate(100, DType::f32);  // p is live: a new block
  EXPECT_NE(p, q);
  EXPECT_EQ(a.stats().reuses, 0u);
  a.deallocate(p, 100, DType::f32);
  a.deallocate(q, 100, DType::f32);
  // Both cached now: two more requests reuse both and then need a fresh one.
  void* x = a.allocate(10, DType::u8);
  void* y = a.allocate(20, DType::u8);
  EXPECT_EQ((std::set<void*>{x, y}), (std::set<void*>{p, q}));
  EXPECT_EQ(a.stats().reuses, 2u);
  void* z = a.allocate(30, DType::u8);
  EXPECT_TRUE(z != p && z != q);
  EXPECT_EQ(a.stats().reuses, 2u);
  a.deallocate(x, 10, DType::u8);
  a.deallocate(y, 20, DType::u8);
  a.deallocate(z, 30, DType::u8);
}

TEST(AllocatorAllocate, DeallocateOfNullIsANoOp) {
  Allocator a;
  a.deallocate(nullptr, 100, DType::f32);
  EXPECT_EQ(a.stats().cached_bytes, 0u);
  EXPECT_EQ(a.stats().current_bytes, 0u);
}

// ---------------------------------------------------------------- accounting

TEST(AllocatorStats, CurrentAndPeakBytesPerDtype) {
  Allocator a;
  void* f = a.allocate(400, DType::f32);
  void* h = a.allocate(100, DType::bf16);
  MemoryStats s = a.stats();
  EXPECT_EQ(s.current_bytes, 500u);  // requested bytes, not block bytes
  EXPECT_EQ(s.current_by_dtype[idx(DType::f32)], 400u);
  EXPECT_EQ(s.current_by_dtype[idx(DType::bf16)], 100u);
  EXPECT_EQ(s.current_by_dtype[idx(DType::f64)], 0u);
  EXPECT_EQ(s.peak_bytes, 500u);
  EXPECT_EQ(s.reserved_bytes, 1024u);  // two 512-byte blocks
  EXPECT_EQ(s.allocations, 2u);

  a.deallocate(f, 400, DType::f32);
  s = a.stats();
  EXPECT_EQ(s.current_bytes, 100u);
  EXPECT_EQ(s.current_by_dtype[idx(DType::f32)], 0u);
  EXPECT_EQ(s.peak_bytes, 500u);  // the high-water mark stays
  EXPECT_EQ(s.peak_by_dtype[idx(DType::f32)], 400u);
  EXPECT_EQ(s.peak_by_dtype[idx(DType::bf16)], 100u);
  EXPECT_EQ(s.cached_bytes, 512u);
  EXPECT_EQ(s.reserved_bytes, 1024u);  // cached blocks stay reserved

  // Per-dtype peaks are tracked separately from the total peak.
  void* g = a.allocate(300, DType::bf16);
  s = a.stats();
  EXPECT_EQ(s.current_by_dtype[idx(DType::bf16)], 400u);
  EXPECT_EQ(s.peak_by_dtype[idx(DType::bf16)], 400u);
  EXPECT_EQ(s.peak_bytes, 500u);  // 400 < 500
  a.deallocate(g, 300, DType::bf16);
  a.deallocate(h, 100, DType::bf16);
  s = a.stats();
  EXPECT_EQ(s.current_bytes, 0u);
  for (std::size_t d = 0; d < kNumDTypes; ++d) EXPECT_EQ(s.current_by_dtype[d], 0u);
}

TEST(AllocatorStats, ResetPeakSetsPeaksToCurrent) {
  Allocator a;
  void* big = a.allocate(5000, DType::f64);
  void* small = a.allocate(700, DType::i32);
  a.deallocate(big, 5000, DType::f64);
  MemoryStats s = a.stats();
  EXPECT_EQ(s.peak_bytes, 5700u);
  a.reset_peak();
  s = a.stats();
  EXPECT_EQ(s.peak_bytes, 700u);
  EXPECT_EQ(s.peak_by_dtype[idx(DType::f64)], 0u);
  EXPECT_EQ(s.peak_by_dtype[idx(DType::i32)], 700u);
  void* more = a.allocate(100, DType::f64);
  EXPECT_EQ(a.stats().peak_bytes, 800u);
  EXPECT_EQ(a.stats().peak_by_dtype[idx(DType::f64)], 100u);
  a.deallocate(more, 100, DType::f64);
  a.deallocate(small, 700, DType::i32);
}

TEST(AllocatorStats, TensorsMoveTheInstanceCountersByTheirBytes) {
  Allocator& a = Allocator::instance();
  const MemoryStats before = a.stats();
  {
    const Tensor h = Tensor::zeros({10, 10}, DType::bf16);  // 200 bytes
    MemoryStats s = a.stats();
    EXPECT_EQ(s.current_bytes - before.current_bytes, 200u);
    EXPECT_EQ(s.current_by_dtype[idx(DType::bf16)] - before.current_by_dtype[idx(DType::bf16)],
              200u);
    {
      const Tensor f = h.to(DType::f32);                // 400 more bytes, counted as f32
      const Tensor v = f.transpose(0, 1).select(0, 3);  // a view: nothing
      s = a.stats();
      EXPECT_EQ(s.current_bytes - before.current_bytes, 600u);
      EXPECT_EQ(s.current_by_dtype[idx(DType::f32)] - before.current_by_dtype[idx(DType::f32)],
                400u);
      EXPECT_GE(s.peak_bytes, s.current_bytes);
    }
    s = a.stats();
    EXPECT_EQ(s.current_bytes - before.current_bytes, 200u);
    EXPECT_EQ(s.current_by_dtype[idx(DType::f32)], before.current_by_dtype[idx(DType::f32)]);
  }
  const MemoryStats after = a.stats();
  EXPECT_EQ(after.current_bytes, before.current_bytes);
  EXPECT_EQ(after.current_by_dtype, before.current_by_dtype);
}

TEST(AllocatorStats, InstancePeakSeesATemporaryAndResetPeakForgetsIt) {
  Allocator& a = Allocator::instance();
  a.reset_peak();
  const MemoryStats base = a.stats();
  EXPECT_EQ(base.peak_bytes, base.current_bytes);
  { const Tensor t = Tensor::empty({1 << 16}, DType::f64); }  // 512 KiB, then freed
  MemoryStats s = a.stats();
  EXPECT_EQ(s.current_bytes, base.current_bytes);
  EXPECT_GE(s.peak_bytes, base.current_bytes + (std::size_t{1} << 19));
  EXPECT_GE(s.peak_by_dtype[idx(DType::f64)],
            base.current_by_dtype[idx(DType::f64)] + (std::size_t{1} << 19));
  a.reset_peak();
  s = a.stats();
  EXPECT_EQ(s.peak_bytes, s.current_bytes);
  EXPECT_EQ(s.peak_by_dtype, s.current_by_dtype);
}

TEST(AllocatorStats, SameTensorSizeIsServedFromTheInstanceCache) {
  Allocator& a = Allocator::instance();
  const void* first = nullptr;
  {
    const Tensor t = Tensor::empty({12345}, DType::f32);
    first = t.raw_data();
  }
  const MemoryStats before = a.stats();
  const Tensor t = Tensor::empty({12345}, DType::f32);
  const MemoryStats after = a.stats();
  EXPECT_EQ(after.reuses - before.reuses, 1u);
  EXPECT_EQ(t.raw_data(), first);
}

// ---------------------------------------------------------------- cache control

// trim_cache gives back the least recently freed blocks first until at most `keep` bytes stay
// cached; trim_cached_since gives back what was cached after a mark.
TEST(AllocatorCache, TrimGivesBackTheOldestBlocksUpToTheBound) {
  Allocator a;
  const std::size_t sizes[] = {100, 1000, 5000, 5000};  // classes 512, 1024, 5120, 5120
  std::vector<void*> ps;
  for (std::size_t n : sizes) ps.push_back(a.allocate(n, DType::f32));
  void* live = a.allocate(3000, DType::f32);
  for (int i = 0; i < 4; ++i) a.deallocate(ps[static_cast<size_t>(i)], sizes[i], DType::f32);
  EXPECT_EQ(a.trim_cache(1u << 20), 0u);  // under the bound: nothing to give back
  // 11776 cached; keep 7000: the 512, the 1024 and the first 5120 go (oldest first).
  EXPECT_EQ(a.trim_cache(7000), 512u + 1024u + 5120u);
  EXPECT_EQ(a.stats().cached_bytes, 5120u);
  EXPECT_EQ(a.stats().reserved_bytes, 5120u + 3072u);
  EXPECT_EQ(a.stats().current_bytes, 3000u);  // live blocks untouched

  // A mark, then two blocks cached after it: those two go, the older one stays.
  const uint64_t mark = a.cache_mark();
  void* p1 = a.allocate(20000, DType::f32);
  void* p2 = a.allocate(700, DType::f32);
  a.deallocate(p1, 20000, DType::f32);
  a.deallocate(p2, 700, DType::f32);
  EXPECT_EQ(a.trim_cached_since(mark), Allocator::block_size(20000) + Allocator::block_size(700));
  EXPECT_EQ(a.stats().cached_bytes, 5120u);
  EXPECT_EQ(a.trim_cache(0), 5120u);
  a.deallocate(live, 3000, DType::f32);
}

TEST(AllocatorCache, EmptyCacheReleasesEveryCachedBlock) {
  Allocator a;
  std::vector<void*> ps;
  for (std::size_t n : {100, 1000, 5000, 5000}) ps.push_back(a.allocate(n, DType::f32));
  void* keep = a.allocate(3000, DType::f32);
  const std::size_t sizes[] = {100, 1000, 5000, 5000};
  for (int i = 0; i < 4; ++i) a.deallocate(ps[static_cast<size_t>(i)], sizes[i], DType::f32);
  MemoryStats s = a.stats();
  // Classes: 512 + 1024 + 5120 + 5120 cached; 3072 live.
  EXPECT_EQ(s.cached_bytes, 512u + 1024u + 5120u + 5120u);
  EXPECT_EQ(s.reserved_bytes, s.cached_bytes + 3072u);
  a.empty_cache();
  s = a.stats();
  EXPECT_EQ(s.cached_bytes, 0u);
  EXPECT_EQ(s.reserved_bytes, 3072u);  // only the live block
  EXPECT_EQ(s.current_bytes, 3000u);   // live accounting untouched
  const uint64_t reuses = s.reuses;
  void* again = a.allocate(5000, DType::f32);  // nothing cached: fresh block
  EXPECT_EQ(a.stats().reuses, reuses);
  a.deallocate(again, 5000, DType::f32);
  a.deallocate(keep, 3000, DType::f32);
}

TEST(AllocatorCache, CacheLimitZeroDisablesCaching) {
  Allocator a;
  a.set_cache_limit(0);
  void* p = a.allocate(1000, DType::f32);
  a.deallocate(p, 1000, DType::f32);
  MemoryStats s = a.stats();
  EXPECT_EQ(s.cached_bytes, 0u);
  EXPECT_EQ(s.reserved_bytes, 0u);
  void* q = a.allocate(1000, DType::f32);
  EXPECT_EQ(a.stats().reuses, 0u);
  a.deallocate(q, 1000, DType::f32);
  EXPECT_EQ(a.stats().cached_bytes, 0u);
}

TEST(AllocatorCache, CacheLimitCapsCachedBytes) {
  Allocator a;
  a.set_cache_limit(1024);
  void* p = a.allocate(600, DType::f32);  // 640-byte class
  void* q = a.allocate(600, DType::f32);
  a.deallocate(p, 600, DType::f32);  // 640 <= 1024: cached
  a.deallocate(q, 600, DType::f32);  // 1280 > 1024: back to the system
  MemoryStats s = a.stats();
  EXPECT_EQ(s.cached_bytes, 640u);
  EXPECT_EQ(s.reserved_bytes, 640u);
  EXPECT_EQ(a.allocate(600, DType::f32), p);  // the cached one comes back
  a.deallocate(p, 600, DType::f32);
}

}  // namespace
}  // namespace mixprec
