// The machine's peaks, measured: independent FMA / dot-product chains on every thread, no
// memory.
#pragma once

namespace mixprec::bench {

// GFLOP/s (2 flops per FMA lane) of 256-bit AVX2 FMAs on `threads` threads.
double fma_peak_avx2(int threads);
// Same with 512-bit AVX-512 FMAs; 0 when the CPU has no AVX-512F.
double fma_peak_avx512(int threads);

// The bf16 dot-product peaks (f32 sums of bf16 products; a product and its sum count as 2
// flops): VDPBF16PS on zmm registers, 0 without AVX512-BF16; TDPBF16PS on register-resident
// AMX tiles, 0 without AMX.
double dot_peak_avx512_bf16(int threads);
double tile_peak_amx_bf16(int threads);

// Runs `chains(iters)` (12 independent chains of `lanes` multiply-adds) on every thread and
// returns the best GFLOP/s of 5 runs. Shared by the per-ISA probes.
double measure_fma_peak(int threads, int lanes, double (*chains)(long iters),
                        long iters = 20'000'000);

}  // namespace mixprec::bench
