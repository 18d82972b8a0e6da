// Thread-count control shared by every parallel kernel. Results never depend on it:
// work is split into fixed-size chunks whose boundaries do not move with the thread count.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <type_traits>
#include <vector>

namespace mixprec {

// Number of threads parallel kernels may use (defaults to the OpenMP default).
int num_threads();
void set_num_threads(int n);

// Runs fn(begin, end) over [0, n) in chunks of `grain` elements, in parallel when n is
// large enough to pay for it. Chunk boundaries are multiples of `grain` whatever the
// thread count, so a deterministic fn gives deterministic results. If fn throws, the first
// exception is rethrown once every chunk has run or thrown.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

// fn(part, begin, end) over the grain-sized pieces of many parts (part p has sizes[p]
// elements: a model's gradients), all in one parallel pass, so small parts do not each cost
// a parallel region run by one thread. Returns fn's results in (part, piece) order; the
// pieces are fixed by the sizes alone.
template <class R, class F>
std::vector<R> map_pieces(const std::vector<int64_t>& sizes, int64_t grain, F&& fn) {
  static_assert(!std::is_same_v<R, bool>, "std::vector<bool> cannot be written in parallel");
  struct Piece {
    std::size_t part;
    int64_t begin, end;
  };
  std::vector<Piece> pieces;
  for (std::size_t p = 0; p < sizes.size(); ++p)
    for (int64_t b = 0; b < sizes[p]; b += grain)
      pieces.push_back({p, b, b + grain < sizes[p] ? b + grain : sizes[p]});
  std::vector<R> out(pieces.size());
  parallel_for(static_cast<int64_t>(pieces.size()), 1, [&](int64_t first, int64_t last) {
    for (int64_t i = first; i < last; ++i) {
      const Piece& piece = pieces[static_cast<std::size_t>(i)];
      out[static_cast<std::size_t>(i)] = fn(piece.part, piece.begin, piece.end);
    }
  });
  return out;
}

}  // namespace mixprec
