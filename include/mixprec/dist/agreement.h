// Small values the ranks of a job must agree on. Each call is a collective: every rank calls
// it, in the same order; at world size 1 it returns its input without communicating.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "mixprec/dist/communicator.h"

namespace mixprec::dist {

// True on every rank when `flag` is true on any rank: how the ranks agree that a step must be
// skipped (GradScaler::set_found_inf_reduction).
bool any_rank(Communicator& comm, bool flag);
// Rank 0's `value`, on every rank.
int64_t from_rank0(Communicator& comm, int64_t value);
// Element-wise sum over ranks of `values` (f64), in place.
void sum_over_ranks(Communicator& comm, std::vector<double>& values);
// Whether every rank passed the same `value`.
bool same_on_every_rank(Communicator& comm, uint64_t value);
// The lowest rank whose `flag` is true, on every rank; -1 when no rank's is.
int first_rank_with(Communicator& comm, bool flag);
// `root`'s `text`, on every rank.
std::string text_from(Communicator& comm, const std::string& text, int root);
// Runs `step` on every rank. When it throws on any rank, every rank throws the error of the
// lowest such rank: a rank that failed alone (a check of its own machine or shard) would leave
// the others waiting in their next collective for ever. At world size 1, just `step()`.
void all_or_none(Communicator& comm, const std::function<void()>& step);

}  // namespace mixprec::dist
