#include "event_encoding.h"

#include <bit>
#include <cstring>

namespace mixprec::train::tensorboard {
namespace {

// Wire types: 0 varint, 1 fixed 64 bits, 2 length-delimited, 5 fixed 32 bits.
void varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7F) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}

void key(std::string& out, int field, int wire_type) {
  varint(out, static_cast<uint64_t>(field) << 3 | static_cast<uint64_t>(wire_type));
}

void fixed(std::string& out, uint64_t bits, int bytes) {
  for (int i = 0; i < bytes; ++i) out += static_cast<char>((bits >> (8 * i)) & 0xFF);
}

void bytes_field(std::string& out, int field, const std::string& value) {
  key(out, field, 2);
  varint(out, value.size());
  out += value;
}

std::string event_head(double wall_time, int64_t step) {
  std::string e;
  key(e, 1, 1);
  fixed(e, std::bit_cast<uint64_t>(wall_time), 8);
  if (step != 0) {  // proto3 leaves a zero out
    key(e, 2, 0);
    varint(e, static_cast<uint64_t>(step));  // a negative int64 is its ten-byte varint
  }
  return e;
}

}  // namespace

std::string file_version_event(double wall_time, const std::string& version) {
  std::string e = event_head(wall_time, 0);
  bytes_field(e, 3, version);
  return e;
}

std::string scalars_event(double wall_time, int64_t step,
                          const std::vector<std::pair<std::string, double>>& scalars) {
  std::string summary;
  for (const auto& [tag, value] : scalars) {
    std::string v;
    bytes_field(v, 1, tag);
    key(v, 2, 5);
    fixed(v, std::bit_cast<uint32_t>(static_cast<float>(value)), 4);
    bytes_field(summary, 1, v);
  }
  std::string e = event_head(wall_time, step);
  bytes_field(e, 5, summary);
  return e;
}

}  // namespace mixprec::train::tensorboard
