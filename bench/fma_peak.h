// The machine's FP32 FMA peak, measured: independent FMA chains on every thread, no memory.
#pragma once

namespace mixprec::bench {

// GFLOP/s (2 flops per FMA lane) of 256-bit AVX2 FMAs on `threads` threads.
double fma_peak_avx2(int threads);
// Same with 512-bit AVX-512 FMAs; 0 when the CPU has no AVX-512F.
double fma_peak_avx512(int threads);

// Runs `chains(iters)` (12 independent FMA chains of `lanes` floats) on every thread and
// returns the best GFLOP/s of 5 runs. Shared by the per-ISA probes.
double measure_fma_peak(int threads, int lanes, double (*chains)(long iters));

}  // namespace mixprec::bench
