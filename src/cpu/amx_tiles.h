// The AMX tile configuration both users share (the GEMM, the bench's tile peak): palette 1,
// all 8 tiles 16 rows of 64 bytes (16 x 32 bf16, or 16 x 16 f32). Include only from code
// compiled for AMX-TILE.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace mixprec::cpu::amx {
// Internal linkage: each includer compiles its own copy under its own target options.
namespace {  // NOLINT(google-build-namespaces)

struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

inline void configure_full_tiles() {
  TileConfig c;
  for (int t = 0; t < 8; ++t) {
    c.rows[t] = 16;
    c.colsb[t] = 64;
  }
  _tile_loadconfig(&c);
}

}  // namespace
}  // namespace mixprec::cpu::amx
