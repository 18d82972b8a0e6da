// The TFRecord framing of TensorBoard event files: CRC-32C against RFC 3720's test vectors,
// TensorFlow's masking, and a record's layout (the event bytes are read back by Google's
// protobuf and TensorBoard in tests/reference/tensorboard_test.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "mixprec/core/error.h"
#include "mixprec/train/tensorboard_log.h"
#include "support/temp_files.h"
#include "train/tensorboard/tfrecord.h"

namespace mixprec::train::tensorboard {
namespace {

TEST(TensorboardRecords, Crc32cMatchesRfc3720) {
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(crc32c(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(crc32c(std::string(32, '\xff')), 0x62A8AB43u);
  std::string ascending;
  for (int i = 0; i < 32; ++i) ascending += static_cast<char>(i);
  EXPECT_EQ(crc32c(ascending), 0x46DD794Eu);
}

TEST(TensorboardRecords, ARecordIsLengthCrcDataCrc) {
  const std::string data = "an event";
  const std::string r = tfrecord(data);
  ASSERT_EQ(r.size(), 8 + 4 + data.size() + 4);
  uint64_t length = 0;
  std::memcpy(&length, r.data(), 8);
  EXPECT_EQ(length, data.size());
  uint32_t length_crc = 0, data_crc = 0;
  std::memcpy(&length_crc, r.data() + 8, 4);
  std::memcpy(&data_crc, r.data() + 12 + data.size(), 4);
  EXPECT_EQ(length_crc, masked_crc32c(r.substr(0, 8)));
  EXPECT_EQ(data_crc, masked_crc32c(data));
  EXPECT_EQ(r.substr(12, data.size()), data);
  const uint32_t c = crc32c(data);
  EXPECT_EQ(masked_crc32c(data), ((c >> 15) | (c << 17)) + 0xa282ead8u);
}

// The scalars come from the metrics.jsonl line itself: its keys under its type, a boolean as
// 0/1, a null (a non-finite number) as NaN, expert loads per block and expert; the step, the
// type and the numerics record are not scalars.
TEST(TensorboardRecords, ScalarsAreTheJsonlLinesNumbers) {
  const auto s =
      tensorboard_scalars(R"({"type":"train","step":3,"loss":2.5,"grad_norm":null,"skipped":true,)"
                          R"("expert_load":[[1.5,0.5]],"numerics":{"scale":1}})");
  ASSERT_EQ(s.size(), 5u);
  EXPECT_EQ(s[0], (std::pair<std::string, double>{"train/loss", 2.5}));
  EXPECT_EQ(s[1].first, "train/grad_norm");
  EXPECT_TRUE(std::isnan(s[1].second));
  EXPECT_EQ(s[2], (std::pair<std::string, double>{"train/skipped", 1.0}));
  EXPECT_EQ(s[3], (std::pair<std::string, double>{"train/expert_load/0/0", 1.5}));
  EXPECT_EQ(s[4], (std::pair<std::string, double>{"train/expert_load/0/1", 0.5}));
  EXPECT_EQ(tensorboard_scalars(R"({"type":"eval","step":1,"val_loss":3})")[0].first,
            "eval/val_loss");
}

TEST(TensorboardRecords, AFolderThatIsAFileIsRefusedNamingIt) {
  testing::TempDir dir;
  testing::write_file(dir / "tb", "a file");
  try {
    TensorboardLog log(dir / "tb");
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find((dir / "tb").string()), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mixprec::train::tensorboard
