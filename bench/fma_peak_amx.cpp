// Compiled with -mamx-tile -mamx-bf16 (this file only); called only after amx::available(),
// which also asked Linux for the tile state.
#include <immintrin.h>

#include <cstdint>

#include "cpu/amx_tiles.h"
#include "cpu/gemm_amx.h"
#include "fma_peak.h"

namespace mixprec::bench {
namespace {

// Per iteration, 6 independent TDPBF16PS into accumulator tiles 0-5 from tiles 6 (A) and 7
// (B), all register-resident: 6 x 16 x 16 x 32 products = 12 chains x 4096 "lanes" x 2.
double chains_tiles(long iters) {
  cpu::amx::configure_full_tiles();
  alignas(64) static thread_local uint16_t ones[16 * 32];
  for (uint16_t& x : ones) x = 0x3f80;  // bf16 1.0
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_zero(4);
  _tile_zero(5);
  _tile_loadd(6, ones, 64);
  _tile_loadd(7, ones, 64);
  for (long it = 0; it < iters; ++it) {
    _tile_dpbf16ps(0, 6, 7);
    _tile_dpbf16ps(1, 6, 7);
    _tile_dpbf16ps(2, 6, 7);
    _tile_dpbf16ps(3, 6, 7);
    _tile_dpbf16ps(4, 6, 7);
    _tile_dpbf16ps(5, 6, 7);
  }
  alignas(64) float out[16 * 16];
  _tile_stored(0, out, 64);
  _tile_release();
  return out[0];
}

}  // namespace

double tile_peak_amx_bf16(int threads) {
  if (!cpu::amx::available()) return 0;
  // 12 x 4096 x 2 flops per iteration, ~96 cycles each (6 TDPBF16PS at ~16): 1.25M
  // iterations are ~40 ms per run, long against the start-up of the threads and tile state.
  return measure_fma_peak(threads, 4096, chains_tiles, 20'000'000 / 16);
}

}  // namespace mixprec::bench
