#include "protobuf_wire.h"

#include "mixprec/core/error.h"

namespace mixprec::data {
namespace {

// A base-128 varint of at most 10 bytes at `at`, which moves past it; false when truncated.
bool read_varint(std::string_view bytes, std::size_t& at, uint64_t& value) {
  value = 0;
  for (int shift = 0; shift < 70 && at < bytes.size(); shift += 7) {
    const auto byte = static_cast<uint8_t>(bytes[at++]);
    value |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) return true;
  }
  return false;
}

}  // namespace

void for_each_wire_field(std::string_view message, const std::string& where,
                         const std::function<void(const WireField&)>& visit) {
  std::size_t at = 0;
  while (at < message.size()) {
    const std::size_t start = at;
    const auto broken = [&](const std::string& what) {
      return Error(where, "is not a sentencepiece model: " + what + " at byte " +
                              std::to_string(start) + " of a " + std::to_string(message.size()) +
                              "-byte message");
    };
    uint64_t tag = 0;
    if (!read_varint(message, at, tag) || tag > UINT32_MAX) throw broken("a broken field tag");
    WireField field;
    field.number = static_cast<uint32_t>(tag >> 3);
    field.type = static_cast<int>(tag & 7);
    if (field.number == 0) throw broken("field number 0");
    switch (field.type) {
      case 0:
        if (!read_varint(message, at, field.varint)) throw broken("a truncated varint");
        break;
      case 1:
      case 5: {
        const std::size_t width = field.type == 1 ? 8 : 4;
        if (message.size() - at < width) throw broken("a truncated fixed-width field");
        at += width;
        break;
      }
      case 2: {
        uint64_t length = 0;
        if (!read_varint(message, at, length) || length > message.size() - at)
          throw broken("a length past the end");
        field.payload = message.substr(at, static_cast<std::size_t>(length));
        at += static_cast<std::size_t>(length);
        break;
      }
      default:
        throw broken("wire type " + std::to_string(field.type) + " (groups or invalid)");
    }
    visit(field);
  }
}

}  // namespace mixprec::data
