// An explicit random-number state: a seed and a stream counter. Each random factory call
// takes a fresh stream, and element i of that call is drawn from Philox at counter i, so
// values depend only on (seed, call number, index): never on thread count.
#pragma once

#include <cstdint>

namespace mixprec {

class Generator {
 public:
  explicit Generator(uint64_t seed = 0, uint64_t stream = 0) : seed_(seed), stream_(stream) {}

  uint64_t seed() const { return seed_; }
  uint64_t stream() const { return stream_; }  // the stream the next call will use
  void set_state(uint64_t seed, uint64_t stream) {
    seed_ = seed;
    stream_ = stream;
  }
  // Hands out the current stream and advances to the next one.
  uint64_t next_stream() { return stream_++; }

  // Uniform double in [0, 1) from element `index` of `stream`: 53 random bits.
  static double uniform01(uint64_t seed, uint64_t stream, uint64_t index);
  // Standard normal from element `index` of `stream` (Box-Muller on two 32-bit words).
  static double standard_normal(uint64_t seed, uint64_t stream, uint64_t index);

 private:
  uint64_t seed_;
  uint64_t stream_;
};

}  // namespace mixprec
