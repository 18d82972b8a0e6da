// Batches for next-token prediction: inputs [B, T] and targets [B, T], both i64, where
// targets[r][t] = inputs[r][t + 1] of the same window of T + 1 tokens.
//
// Train batches are a pure function of (seed, step): row r of step s is the window starting at
//   start = (w * S) >> 64,  w = word0 | word1 << 32 of philox_block(seed, stream = s, block = r)
// with S = split size - T the number of possible starts (the multiply-shift bias is below
// S / 2^64). Resuming at step k therefore replays an uninterrupted run exactly, with no state
// beyond the step, and the bits never depend on threads.
//
// Data parallel: rank `rank` of `world` takes global rows [rank*B/W, (rank+1)*B/W), keyed by
// their global row index, so the ranks' rows concatenated are the W = 1 batch.
//
// Validation batches are fixed: window i starts at i*T (non-overlapping inputs; window i's
// last target is window i+1's first input), batch j holds windows [j*B, j*B + B), the last
// batch possibly fewer. The same split gives the same batches in every run.
#pragma once

#include <cstdint>

#include "mixprec/data/token_dataset.h"
#include "mixprec/tensor/tensor.h"

namespace mixprec::data {

struct Batch {
  Tensor inputs;   // [rows, T] i64
  Tensor targets;  // [rows, T] i64
};

struct RowRange {
  int64_t begin = 0;
  int64_t end = 0;
};

// Rows [rank*B/W, (rank+1)*B/W) of a global batch of B rows. Requires 0 <= rank < world and
// B divisible by world (equal shards keep gradient averaging simple).
RowRange rank_rows(int64_t batch_size, int64_t rank, int64_t world);

class TrainBatches {
 public:
  // Throws mixprec::Error naming the split when it holds fewer than seq_len + 1 tokens.
  // vocab_size > 0: a batch holding an id >= vocab_size throws an Error naming the file and
  // the id's byte offset.
  TrainBatches(TokenSplit split, int64_t batch_size, int64_t seq_len, uint64_t seed,
               int64_t vocab_size = 0);

  Batch batch(uint64_t step) const { return batch(step, 0, 1); }
  Batch batch(uint64_t step, int64_t rank, int64_t world) const;
  // First token of global row `row`'s window at `step`.
  int64_t window_start(uint64_t step, int64_t row) const;

  int64_t batch_size() const { return batch_size_; }
  int64_t seq_len() const { return seq_len_; }
  int64_t num_starts() const { return split_.size() - seq_len_; }

 private:
  TokenSplit split_;
  int64_t batch_size_;
  int64_t seq_len_;
  uint64_t seed_;
  int64_t vocab_size_;
};

class ValidationBatches {
 public:
  // Throws mixprec::Error naming the split when it holds fewer than seq_len + 1 tokens; ids
  // are checked as TrainBatches checks them.
  ValidationBatches(TokenSplit split, int64_t batch_size, int64_t seq_len, int64_t vocab_size = 0);

  int64_t num_windows() const { return (split_.size() - 1) / seq_len_; }
  int64_t num_batches() const { return (num_windows() + batch_size_ - 1) / batch_size_; }
  Batch batch(int64_t index) const;  // index in [0, num_batches())

 private:
  TokenSplit split_;
  int64_t batch_size_;
  int64_t seq_len_;
  int64_t vocab_size_;
};

}  // namespace mixprec::data
