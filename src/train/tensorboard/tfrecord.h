// TFRecord framing, the container of TensorBoard event files: each record is its length
// (u64 little-endian), a masked CRC-32C of those 8 bytes, the bytes, and a masked CRC-32C of
// them. CRC-32C is written here: Debian has no library for it (zlib's crc32 is another
// polynomial), and it is a 256-entry table.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace mixprec::train::tensorboard {

// CRC-32C (Castagnoli), as RFC 3720 defines it: crc32c("123456789") = 0xE3069283.
uint32_t crc32c(std::string_view bytes);
// TensorFlow's masking: the CRC rotated right by 15 bits, plus 0xa282ead8.
uint32_t masked_crc32c(std::string_view bytes);
// One record around `data`.
std::string tfrecord(std::string_view data);

}  // namespace mixprec::train::tensorboard
