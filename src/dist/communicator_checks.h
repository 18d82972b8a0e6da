// Argument checks and byte accounting shared by every Communicator backend, so a call that is
// wrong on one backend is wrong, with the same message, on all of them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mixprec/dist/communicator.h"

namespace mixprec::dist::detail {

// One collective call on one rank: names it in every message ("all_gather on rank 1 of 2").
struct CallSite {
  const char* call;
  int rank;
  int size;
  std::string describe() const;
  // Throws mixprec::Error("[dist] <call> on rank R of W: <what>").
  [[noreturn]] void fail(const std::string& what) const;
};

// Reductions (sum/max/min) take f32, bf16, f16, f64 and i64; data moves take any dtype.

// A defined, contiguous CPU tensor (of a reducible dtype when `reduces`).
void check_buffer(const CallSite& site, const Tensor& t, const char* role, bool reduces);
// The per-rank element count MPI is handed fits its int counts.
void check_count(const CallSite& site, const Tensor& t, const char* role);
// all_reduce / broadcast: check_buffer + check_count of the one in-place buffer.
void check_in_place(const CallSite& site, const Tensor& buffer, bool reduces);

// all_gather: recv.numel() == send.numel() * size, same dtype. send may be recv's own block
// for this rank (in place); any other overlap is an Error. Returns true when in place.
bool check_all_gather(const CallSite& site, const Tensor& send, const Tensor& recv);
// all_gather_v: counts.size() == size, counts >= 0, send [counts[rank]], recv [sum], same
// dtype, no overlap.
void check_all_gather_v(const CallSite& site, const Tensor& send, const Tensor& recv,
                        const std::vector<int64_t>& counts);
// reduce_scatter: send.numel() == recv.numel() * size, same dtype, no overlap.
void check_reduce_scatter(const CallSite& site, const Tensor& send, const Tensor& recv);
// broadcast: root in [0, size).
void check_root(const CallSite& site, int root);

// The bytes the header's ring formulas charge this rank for one call (0 at world size 1).
uint64_t all_gather_bytes(uint64_t send_bytes, int size);
uint64_t reduce_scatter_bytes(uint64_t recv_bytes, int size);
uint64_t all_reduce_bytes(uint64_t buffer_bytes, int size);
uint64_t broadcast_bytes(uint64_t buffer_bytes, int rank, int root, int size);

}  // namespace mixprec::dist::detail
