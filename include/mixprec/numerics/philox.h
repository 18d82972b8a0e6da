// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11):
// a counter-based generator. Output depends only on (key, counter), so any element of any
// stream can be drawn independently: results do not depend on thread count or call order.
#pragma once

#include <array>
#include <cstdint>

namespace mixprec {

using PhiloxBlock = std::array<uint32_t, 4>;

constexpr PhiloxBlock philox4x32_10(PhiloxBlock ctr, std::array<uint32_t, 2> key) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = uint64_t{kMul0} * ctr[0];
    const uint64_t p1 = uint64_t{kMul1} * ctr[2];
    ctr = {static_cast<uint32_t>(p1 >> 32) ^ ctr[1] ^ key[0], static_cast<uint32_t>(p1),
           static_cast<uint32_t>(p0 >> 32) ^ ctr[3] ^ key[1], static_cast<uint32_t>(p0)};
    key[0] += kWeyl0;
    key[1] += kWeyl1;
  }
  return ctr;
}

// The 4 random words of block `block` of stream `stream` under `seed`. Element i of a
// stream uses word i % 4 of block i / 4.
constexpr PhiloxBlock philox_block(uint64_t seed, uint64_t stream, uint64_t block) {
  return philox4x32_10({static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
                        static_cast<uint32_t>(stream), static_cast<uint32_t>(stream >> 32)},
                       {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
}

constexpr uint32_t philox_u32(uint64_t seed, uint64_t stream, uint64_t index) {
  return philox_block(seed, stream, index / 4)[index % 4];
}

}  // namespace mixprec
