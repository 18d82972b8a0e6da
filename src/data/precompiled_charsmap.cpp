// The blob: a little-endian u32 byte size of a darts-clone double-array trie, the trie's 4-byte
// units, then NUL-terminated replacement strings that the trie's values index into. The library
// (normalizer.cc, DecodePrecompiledCharsMap) checks only that the size fits in the blob, and not
// quite (it compares with the blob size including the 4-byte header); darts-clone's
// commonPrefixSearch then follows offsets read from the units, as below, without any bounds.
#include "precompiled_charsmap.h"

#include <cstdint>
#include <cstring>
#include <vector>

namespace mixprec::data {
namespace {

// darts-clone's DoubleArrayUnit.
bool has_leaf(uint32_t unit) {
  return ((unit >> 8) & 1) == 1;
}
uint32_t value(uint32_t unit) {
  return unit & 0x7fffffffu;
}
uint32_t label(uint32_t unit) {
  return unit & (0x80000000u | 0xffu);
}
uint32_t offset(uint32_t unit) {
  return (unit >> 10) << ((unit & (1u << 9)) >> 6);
}

}  // namespace

std::optional<std::string> precompiled_charsmap_fault(std::string_view blob) {
  if (blob.empty()) return std::nullopt;  // no rule: the library builds no trie
  if (blob.size() <= 4)
    return "is " + std::to_string(blob.size()) + " bytes, shorter than its header";
  uint32_t trie_bytes = 0;
  std::memcpy(&trie_bytes, blob.data(), 4);  // little-endian, as the x86 library reads it
  if (trie_bytes > blob.size() - 4)
    return "declares a " + std::to_string(trie_bytes) + "-byte trie in a " +
           std::to_string(blob.size()) + "-byte blob";
  const std::size_t units = trie_bytes / 4;  // set_array() drops a partial unit
  if (units == 0) return "holds an empty trie (the root unit is read anyway)";
  const std::string_view strings = blob.substr(4 + trie_bytes);
  const std::size_t last_nul = strings.rfind('\0');
  const auto unit_at = [&](std::size_t i) {
    uint32_t u = 0;
    std::memcpy(&u, blob.data() + 4 + 4 * i, 4);
    return u;
  };
  const auto unit_name = [&](uint64_t i) {
    return "unit " + std::to_string(i) + " of " + std::to_string(units);
  };
  // commonPrefixSearch: from the root, for each input byte b: pos ^= b; the unit there must
  // carry label b, else the search ends; pos ^= its offset; when it has a leaf, the unit at pos
  // holds a value, an index into the strings. Any byte can follow any prefix, so every node
  // reached is read for all 256 bytes. Each matched unit leads to one node: a walk over units.
  std::vector<bool> visited(units, false);
  std::vector<uint64_t> nodes{static_cast<uint64_t>(offset(unit_at(0)))};
  while (!nodes.empty()) {
    const uint64_t node = nodes.back();
    nodes.pop_back();
    for (uint32_t byte = 0; byte < 256; ++byte) {
      const uint64_t child = node ^ byte;
      if (child >= units) return "reaches " + unit_name(child) + " (outside the trie)";
      const uint32_t unit = unit_at(child);
      if (label(unit) != byte) continue;
      const uint64_t next = child ^ offset(unit);
      if (has_leaf(unit)) {
        if (next >= units) return "has a leaf at " + unit_name(next) + " (outside the trie)";
        const uint32_t v = value(unit_at(next));
        if (last_nul == std::string_view::npos || v > last_nul)
          return "maps to byte " + std::to_string(v) + " of its " + std::to_string(strings.size()) +
                 "-byte replacement strings, past their last NUL";
      }
      if (!visited[child]) {
        visited[child] = true;
        nodes.push_back(next);
      }
    }
  }
  return std::nullopt;
}

}  // namespace mixprec::data
