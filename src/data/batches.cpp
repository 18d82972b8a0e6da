#include "mixprec/data/batches.h"

#include <algorithm>
#include <vector>

#include "mixprec/core/error.h"
#include "mixprec/numerics/philox.h"

namespace mixprec::data {
namespace {

void check_fits(const TokenSplit& split, int64_t batch_size, int64_t seq_len, const char* who) {
  MIXPREC_CHECK(batch_size >= 1, who, "batch size " + std::to_string(batch_size) + " < 1");
  MIXPREC_CHECK(seq_len >= 1, who, "sequence length " + std::to_string(seq_len) + " < 1");
  MIXPREC_CHECK(split.size() >= seq_len + 1, "data " + split.name,
                "sequence length " + std::to_string(seq_len) + " needs " +
                    std::to_string(seq_len + 1) + " tokens per window, the split holds " +
                    std::to_string(split.size()));
}

// Row r of the result is the window of seq_len + 1 tokens starting at starts[r]. Every id is
// checked against the vocabulary (vocab_size > 0) as it is read: a token file is read a window
// at a time, never whole, so this is where a bad id is met.
Batch gather_windows(const TokenSplit& split, const std::vector<int64_t>& starts, int64_t seq_len,
                     int64_t vocab_size) {
  const auto rows = static_cast<int64_t>(starts.size());
  Batch b{Tensor::empty({rows, seq_len}, DType::i64), Tensor::empty({rows, seq_len}, DType::i64)};
  int64_t* in = b.inputs.data<int64_t>();    // [rows, seq_len]
  int64_t* out = b.targets.data<int64_t>();  // [rows, seq_len]
  std::vector<int64_t> w(static_cast<std::size_t>(seq_len + 1));
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t start = starts[static_cast<std::size_t>(r)];
    split.tokens.read(start, seq_len + 1, w.data());  // errors name a file cut short
    for (int64_t t = 0; t <= seq_len; ++t) {
      const int64_t id = w[static_cast<std::size_t>(t)];
      if (vocab_size > 0 && id >= vocab_size)
        throw Error(
            "data " + split.file,
            "token id " + std::to_string(id) + " at " + split.where(start + t) +
                " is outside the vocabulary: model.vocab_size = " + std::to_string(vocab_size));
    }
    std::copy(w.begin(), w.end() - 1, in + r * seq_len);
    std::copy(w.begin() + 1, w.end(), out + r * seq_len);
  }
  return b;
}

}  // namespace

RowRange rank_rows(int64_t batch_size, int64_t rank, int64_t world) {
  MIXPREC_CHECK(world >= 1, "data rank_rows", "world size " + std::to_string(world) + " < 1");
  MIXPREC_CHECK(rank >= 0 && rank < world, "data rank_rows",
                "rank " + std::to_string(rank) + " is outside [0, " + std::to_string(world) + ")");
  MIXPREC_CHECK(batch_size % world == 0, "data rank_rows",
                "batch size " + std::to_string(batch_size) + " is not divisible by world size " +
                    std::to_string(world));
  return {rank * batch_size / world, (rank + 1) * batch_size / world};
}

TrainBatches::TrainBatches(TokenSplit split, int64_t batch_size, int64_t seq_len, uint64_t seed,
                           int64_t vocab_size)
    : split_(std::move(split)),
      batch_size_(batch_size),
      seq_len_(seq_len),
      seed_(seed),
      vocab_size_(vocab_size) {
  check_fits(split_, batch_size_, seq_len_, "data TrainBatches");
}

int64_t TrainBatches::window_start(uint64_t step, int64_t row) const {
  const PhiloxBlock r = philox_block(seed_, step, static_cast<uint64_t>(row));
  const uint64_t word = uint64_t{r[0]} | uint64_t{r[1]} << 32;
  const auto starts = static_cast<unsigned __int128>(num_starts());
  return static_cast<int64_t>((word * starts) >> 64);  // uniform on [0, starts), no division
}

Batch TrainBatches::batch(uint64_t step, int64_t rank, int64_t world) const {
  const RowRange rows = rank_rows(batch_size_, rank, world);
  std::vector<int64_t> starts;
  for (int64_t r = rows.begin; r < rows.end; ++r) starts.push_back(window_start(step, r));
  return gather_windows(split_, starts, seq_len_, vocab_size_);
}

ValidationBatches::ValidationBatches(TokenSplit split, int64_t batch_size, int64_t seq_len,
                                     int64_t vocab_size)
    : split_(std::move(split)),
      batch_size_(batch_size),
      seq_len_(seq_len),
      vocab_size_(vocab_size) {
  check_fits(split_, batch_size_, seq_len_, "data ValidationBatches");
}

Batch ValidationBatches::batch(int64_t index) const {
  MIXPREC_CHECK(index >= 0 && index < num_batches(), "data " + split_.name,
                "validation batch " + std::to_string(index) + " is outside [0, " +
                    std::to_string(num_batches()) + ")");
  const int64_t first = index * batch_size_;
  const int64_t last = std::min(first + batch_size_, num_windows());
  std::vector<int64_t> starts;
  for (int64_t w = first; w < last; ++w) starts.push_back(w * seq_len_);
  return gather_windows(split_, starts, seq_len_, vocab_size_);
}

}  // namespace mixprec::data
