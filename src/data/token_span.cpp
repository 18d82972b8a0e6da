#include "mixprec/data/token_span.h"

#include <algorithm>
#include <cstring>

#include "mixprec/core/error.h"

namespace mixprec::data {
namespace {

// n ids of `width` little-endian bytes each (x86 and every supported target are little-endian).
void decode(const uint8_t* p, int64_t n, int width, int64_t* ids) {
  for (int64_t i = 0; i < n; ++i, p += width) {
    if (width == 1) {
      ids[i] = p[0];
    } else if (width == 2) {
      ids[i] = int64_t{p[0]} | int64_t{p[1]} << 8;
    } else {
      uint32_t v;
      std::memcpy(&v, p, 4);
      ids[i] = v;
    }
  }
}

}  // namespace

void TokenSpan::read(int64_t begin, int64_t n, int64_t* ids) const {
  MIXPREC_CHECK(begin >= 0 && n >= 0 && begin + n <= count_,
                file_ ? file_->where() : std::string("data tokens"),
                "tokens [" + std::to_string(begin) + ", " + std::to_string(begin + n) +
                    ") are outside the " + std::to_string(count_) + " there are");
  const auto w = static_cast<uint64_t>(width_);
  const uint64_t at = offset_ + static_cast<uint64_t>(begin) * w;
  if (!file_) return decode(memory_ + at, n, width_, ids);
  // A bounded buffer however many ids are asked for (a batch's window, or millions).
  constexpr int64_t kChunkBytes = 1 << 16;
  uint8_t bytes[kChunkBytes];
  const int64_t per_chunk = kChunkBytes / width_;
  for (int64_t done = 0; done < n;) {
    const int64_t m = std::min(per_chunk, n - done);
    file_->read_at(at + static_cast<uint64_t>(done) * w, bytes, static_cast<std::size_t>(m) * w);
    decode(bytes, m, width_, ids + done);
    done += m;
  }
}

}  // namespace mixprec::data
