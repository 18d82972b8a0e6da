#include "communicator_checks.h"

#include <climits>

#include "mixprec/core/error.h"

namespace mixprec::dist::detail {
namespace {

std::string describe_tensor(const Tensor& t) {
  return shape_to_string(t.shape()) + " " + dtype_name(t.dtype());
}

// Byte ranges [begin, end) of two contiguous buffers intersect.
bool overlaps(const Tensor& a, const Tensor& b) {
  if (a.nbytes() == 0 || b.nbytes() == 0) return false;
  const auto* pa = static_cast<const char*>(a.raw_data());
  const auto* pb = static_cast<const char*>(b.raw_data());
  return pa < pb + b.nbytes() && pb < pa + a.nbytes();
}

}  // namespace

std::string CallSite::describe() const {
  return std::string(call) + " on rank " + std::to_string(rank) + " of " + std::to_string(size);
}

void CallSite::fail(const std::string& what) const {
  throw Error("dist", describe() + ": " + what);
}

void check_buffer(const CallSite& site, const Tensor& t, const char* role, bool reduces) {
  if (!t.defined()) site.fail(std::string(role) + " is an undefined tensor");
  if (t.device() != Device::cpu)
    site.fail(std::string(role) + " " + describe_tensor(t) + " is on " + device_name(t.device()) +
              ", not cpu");
  if (!t.is_contiguous())
    site.fail(std::string(role) + " " + describe_tensor(t) + " is not contiguous");
  if (reduces && !info(t.dtype()).reducible)
    site.fail(std::string(role) + " " + describe_tensor(t) +
              ": reductions take f32, bf16, f16, f64 or i64");
}

void check_count(const CallSite& site, const Tensor& t, const char* role) {
  if (t.numel() > INT_MAX)
    site.fail(std::string(role) + " " + describe_tensor(t) +
              " has more than INT_MAX elements (MPI counts are int)");
}

void check_in_place(const CallSite& site, const Tensor& buffer, bool reduces) {
  check_buffer(site, buffer, "buffer", reduces);
  check_count(site, buffer, "buffer");
}

namespace {

// `block` is one rank's share of `full` (full = W blocks): roles name them in messages.
// Returns the "send ..., recv ..." description for further messages.
std::string check_block_of(const CallSite& site, const Tensor& send, const Tensor& recv,
                           bool send_is_block, bool reduces) {
  check_buffer(site, send, "send", reduces);
  check_buffer(site, recv, "recv", reduces);
  const std::string both = "send " + describe_tensor(send) + ", recv " + describe_tensor(recv);
  if (send.dtype() != recv.dtype()) site.fail(both + ": dtypes differ");
  const Tensor& block = send_is_block ? send : recv;
  const Tensor& full = send_is_block ? recv : send;
  const char* block_role = send_is_block ? "send" : "recv";
  if (full.numel() != block.numel() * site.size)
    site.fail(both + ": " + (send_is_block ? "recv" : "send") + " needs " + block_role + "'s " +
              std::to_string(block.numel()) + " elements x " + std::to_string(site.size) +
              " ranks = " + std::to_string(block.numel() * site.size));
  check_count(site, block, block_role);
  return both;
}

}  // namespace

bool check_all_gather(const CallSite& site, const Tensor& send, const Tensor& recv) {
  const std::string both = check_block_of(site, send, recv, true, false);
  if (!overlaps(send, recv)) return false;
  const auto* own_block = static_cast<const char*>(recv.raw_data()) + site.rank * send.nbytes();
  if (send.raw_data() != own_block)
    site.fail(both + ": send overlaps recv other than as this rank's block (in place)");
  return true;
}

void check_all_gather_v(const CallSite& site, const Tensor& send, const Tensor& recv,
                        const std::vector<int64_t>& counts) {
  check_buffer(site, send, "send", false);
  check_buffer(site, recv, "recv", false);
  if (static_cast<int>(counts.size()) != site.size)
    site.fail(std::to_string(counts.size()) + " counts for " + std::to_string(site.size) +
              " ranks");
  int64_t total = 0;
  for (const int64_t c : counts) {
    if (c < 0) site.fail("negative count " + std::to_string(c));
    total += c;
  }
  if (send.dtype() != recv.dtype())
    site.fail(std::string("send is ") + dtype_name(send.dtype()) + ", recv " +
              dtype_name(recv.dtype()));
  if (send.numel() != counts[static_cast<std::size_t>(site.rank)] || recv.numel() != total)
    site.fail("send [" + std::to_string(send.numel()) + "] and recv [" +
              std::to_string(recv.numel()) + "] do not match this rank's count " +
              std::to_string(counts[static_cast<std::size_t>(site.rank)]) + " and the total " +
              std::to_string(total));
  check_count(site, recv, "recv");
  if (overlaps(send, recv)) site.fail("send and recv overlap");
}

void check_reduce_scatter(const CallSite& site, const Tensor& send, const Tensor& recv) {
  const std::string both = check_block_of(site, send, recv, false, true);
  if (overlaps(send, recv)) site.fail(both + ": send and recv overlap");
}

void check_root(const CallSite& site, int root) {
  if (root < 0 || root >= site.size)
    site.fail("root " + std::to_string(root) + " is not a rank in [0, " +
              std::to_string(site.size) + ")");
}

uint64_t all_gather_bytes(uint64_t send_bytes, int size) {
  return static_cast<uint64_t>(size - 1) * send_bytes;
}

uint64_t reduce_scatter_bytes(uint64_t recv_bytes, int size) {
  return static_cast<uint64_t>(size - 1) * recv_bytes;
}

uint64_t all_reduce_bytes(uint64_t buffer_bytes, int size) {
  return 2 * static_cast<uint64_t>(size - 1) * buffer_bytes / static_cast<uint64_t>(size);
}

uint64_t broadcast_bytes(uint64_t buffer_bytes, int rank, int root, int size) {
  return size > 1 && rank == root ? buffer_bytes : 0;
}

}  // namespace mixprec::dist::detail
