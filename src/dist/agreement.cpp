#include "mixprec/dist/agreement.h"

#include <cstring>
#include <exception>

#include "mixprec/core/error.h"

namespace mixprec::dist {
namespace {

Tensor reduced(Communicator& comm, std::vector<int64_t> values, ReduceOp op) {
  Tensor t = Tensor::from_vector(values);
  comm.all_reduce(t, op);
  return t;
}

}  // namespace

bool any_rank(Communicator& comm, bool flag) {
  if (comm.size() == 1) return flag;
  return reduced(comm, {flag ? 1 : 0}, ReduceOp::max).data<int64_t>()[0] > 0;
}

int64_t from_rank0(Communicator& comm, int64_t value) {
  if (comm.size() == 1) return value;
  Tensor t = Tensor::from_vector(std::vector<int64_t>{value});
  comm.broadcast(t, 0);
  return t.data<int64_t>()[0];
}

void sum_over_ranks(Communicator& comm, std::vector<double>& values) {
  if (comm.size() == 1 || values.empty()) return;
  Tensor t = Tensor::from_vector(values);
  comm.all_reduce(t, ReduceOp::sum);
  values = t.to_doubles();
}

bool same_on_every_rank(Communicator& comm, uint64_t value) {
  if (comm.size() == 1) return true;
  // max(v) == min(v) <=> max(v) == -max(-v); 63 bits keep the negation in range.
  const auto v = static_cast<int64_t>(value >> 1);
  const Tensor both = reduced(comm, {v, -v}, ReduceOp::max);
  return both.data<int64_t>()[0] == -both.data<int64_t>()[1];
}

int first_rank_with(Communicator& comm, bool flag) {
  if (comm.size() == 1) return flag ? 0 : -1;
  const int64_t first =
      reduced(comm, {flag ? comm.rank() : comm.size()}, ReduceOp::min).data<int64_t>()[0];
  return first < comm.size() ? static_cast<int>(first) : -1;
}

std::string text_from(Communicator& comm, const std::string& text, int root) {
  if (comm.size() == 1) return text;
  Tensor size = Tensor::from_vector(std::vector<int64_t>{static_cast<int64_t>(text.size())});
  comm.broadcast(size, root);
  Tensor bytes = Tensor::empty({size.data<int64_t>()[0]}, DType::u8);
  if (comm.rank() == root && !text.empty()) std::memcpy(bytes.raw_data(), text.data(), text.size());
  comm.broadcast(bytes, root);
  return std::string(static_cast<const char*>(bytes.raw_data()),
                     static_cast<std::size_t>(bytes.numel()));
}

void all_or_none(Communicator& comm, const std::function<void()>& step) {
  if (comm.size() == 1) return step();
  std::string where, what;
  bool failed = false;
  try {
    step();
  } catch (const Error& e) {
    failed = true;
    where = e.where();
    what = e.what_only();
  } catch (const std::exception& e) {  // a library's (file system, allocation)
    failed = true;
    where = "rank " + std::to_string(comm.rank());
    what = e.what();
  }
  const int first = first_rank_with(comm, failed);
  if (first < 0) return;
  where = text_from(comm, where, first);
  what = text_from(comm, what, first);
  throw Error(where, what);
}

}  // namespace mixprec::dist
