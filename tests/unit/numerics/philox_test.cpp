// Philox4x32-10 against the known-answer vectors published with Random123 (kat_vectors).
#include <gtest/gtest.h>

#include "mixprec/numerics/philox.h"

namespace mixprec {
namespace {

TEST(Philox, MatchesRandom123KnownAnswers) {
  EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, {0, 0}),
            (PhiloxBlock{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(
      philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}),
      (PhiloxBlock{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(
      philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
      (PhiloxBlock{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(Philox, IsUsableAtCompileTime) {
  static_assert(philox4x32_10({0, 0, 0, 0}, {0, 0})[0] == 0x6627e8d5u);
}

TEST(Philox, ElementIndexMapsToBlockAndWord) {
  const PhiloxBlock b = philox_block(42, 7, 5);
  for (uint64_t w = 0; w < 4; ++w) EXPECT_EQ(philox_u32(42, 7, 20 + w), b[w]);
  EXPECT_NE(philox_u32(42, 7, 0), philox_u32(42, 8, 0));  // streams differ
  EXPECT_NE(philox_u32(42, 7, 0), philox_u32(43, 7, 0));  // seeds differ
  // The high 32 bits of seed, stream and block all reach the counter/key.
  EXPECT_NE(philox_u32(uint64_t{1} << 40, 0, 0), philox_u32(0, 0, 0));
  EXPECT_NE(philox_u32(0, uint64_t{1} << 40, 0), philox_u32(0, 0, 0));
  EXPECT_NE(philox_u32(0, 0, uint64_t{4} << 40), philox_u32(0, 0, 0));
}

}  // namespace
}  // namespace mixprec
