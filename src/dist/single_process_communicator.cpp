// World size 1: every collective is a copy or nothing, with the MPI backend's argument checks.
#include <cstring>

#include "communicator_checks.h"
#include "mixprec/dist/communicator.h"

namespace mixprec::dist {
namespace {

class DoneRequest final : public Request {
 public:
  void wait() override {}
  bool done() const override { return true; }
};

class SingleProcessCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string backend() const override { return "single"; }

  void all_gather(const Tensor& send, Tensor& recv) override {
    if (!detail::check_all_gather(site("all_gather"), send, recv))
      std::memcpy(recv.raw_data(), send.raw_data(), send.nbytes());
  }
  void reduce_scatter(const Tensor& send, Tensor& recv) override {
    detail::check_reduce_scatter(site("reduce_scatter"), send, recv);
    std::memcpy(recv.raw_data(), send.raw_data(), send.nbytes());
  }
  void all_reduce(Tensor& buffer, ReduceOp) override {
    detail::check_in_place(site("all_reduce"), buffer, true);
  }
  void broadcast(Tensor& buffer, int root) override {
    const detail::CallSite at = site("broadcast");
    detail::check_in_place(at, buffer, false);
    detail::check_root(at, root);
  }
  void barrier() override {}

  std::unique_ptr<Request> start_all_gather(const Tensor& send, Tensor& recv) override {
    all_gather(send, recv);
    return std::make_unique<DoneRequest>();
  }
  std::unique_ptr<Request> start_all_gather_v(const Tensor& send, Tensor& recv,
                                              const std::vector<int64_t>& counts) override {
    detail::check_all_gather_v(site("all_gather_v"), send, recv, counts);
    if (send.nbytes() > 0) std::memcpy(recv.raw_data(), send.raw_data(), send.nbytes());
    return std::make_unique<DoneRequest>();
  }
  std::unique_ptr<Request> start_reduce_scatter(const Tensor& send, Tensor& recv) override {
    reduce_scatter(send, recv);
    return std::make_unique<DoneRequest>();
  }

  void abort_job(const std::string&, int) override {}

 private:
  detail::CallSite site(const char* call) const { return {call, 0, 1}; }
};

}  // namespace

std::unique_ptr<Communicator> make_single_process_communicator() {
  return std::make_unique<SingleProcessCommunicator>();
}

}  // namespace mixprec::dist
