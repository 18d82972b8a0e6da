// The protobuf wire format, read just far enough to find fields by number: what mixprec must
// check in a sentencepiece model before libsentencepiece parses it. Private to src/data.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace mixprec::data {

struct WireField {
  uint32_t number = 0;
  int type = 0;              // 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32
  uint64_t varint = 0;       // type 0
  std::string_view payload;  // type 2: the bytes (a nested message, a string, bytes)
};

// Calls `visit` with each field of `message`, in order. Throws mixprec::Error(where, "is not a
// sentencepiece model: ...") with the byte offset when the bytes are not wire format protobuf
// would parse: a truncated tag, varint or length, field number 0, or a group (which no
// sentencepiece model holds).
void for_each_wire_field(std::string_view message, const std::string& where,
                         const std::function<void(const WireField&)>& visit);

}  // namespace mixprec::data
