#include "mixprec/data/byte_tokenizer.h"

#include <gtest/gtest.h>

#include "mixprec/numerics/philox.h"
#include "support/op_testing.h"

namespace mixprec::data {
namespace {

using mixprec::testing::error_of;

TEST(ByteTokenizer, EncodesBytesAsTheirValues) {
  const ByteTokenizer tok;
  // "Aé\n" in UTF-8: 0x41, 0xC3 0xA9, 0x0A.
  EXPECT_EQ(tok.encode("A\xC3\xA9\n"), (std::vector<int64_t>{65, 0xC3, 0xA9, 10}));
  EXPECT_TRUE(tok.encode("").empty());
  EXPECT_EQ(tok.decode(std::vector<int64_t>{104, 105}), "hi");
}

TEST(ByteTokenizer, RoundTripsArbitraryBytes) {
  const ByteTokenizer tok;
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));  // NUL, invalid UTF-8...
  EXPECT_EQ(tok.decode(tok.encode(all)), all);
  for (uint64_t trial = 0; trial < 20; ++trial) {
    std::string bytes(1 + trial * 37, '\0');
    for (std::size_t i = 0; i < bytes.size(); ++i) {
      bytes[i] = static_cast<char>(philox_u32(7, trial, i) & 0xFF);
    }
    const std::vector<int64_t> ids = tok.encode(bytes);
    ASSERT_EQ(ids.size(), bytes.size());
    for (std::size_t i = 0; i < ids.size(); ++i) {
      ASSERT_EQ(ids[i], static_cast<unsigned char>(bytes[i]));
      ASSERT_GE(ids[i], 0);
      ASSERT_LT(ids[i], ByteTokenizer::kVocabSize);
    }
    EXPECT_EQ(tok.decode(ids), bytes);
  }
}

TEST(ByteTokenizer, DecodesIntegerTensors) {
  const ByteTokenizer tok;
  const Tensor t = Tensor::from_vector<int64_t>({72, 101, 108, 108, 111, 33}, {2, 3});
  EXPECT_EQ(tok.decode(t), "Hello!");
  EXPECT_NE(error_of([&] { tok.decode(Tensor::zeros({2}, DType::f32)); }).find("f32"),
            std::string::npos);
}

TEST(ByteTokenizer, RejectsTokensOutsideTheVocabularyNamingThem) {
  const ByteTokenizer tok;
  const std::string e = error_of([&] { tok.decode(std::vector<int64_t>{1, 2, 256}); });
  EXPECT_NE(e.find("token 256 at position 2"), std::string::npos) << e;
  EXPECT_NE(error_of([&] { tok.decode(std::vector<int64_t>{-1}); }).find("token -1"),
            std::string::npos);
}

}  // namespace
}  // namespace mixprec::data
