// The single-process backend: copies and no-ops, with the same argument checks (and the same
// messages) as the MPI backend, since both use src/dist/communicator_checks.
#include <gtest/gtest.h>

#include <vector>

#include "mixprec/dist/communicator.h"
#include "support/op_testing.h"

namespace mixprec::dist {
namespace {

using mixprec::testing::error_of;
using mixprec::testing::randn;
using mixprec::testing::same_bits;

TEST(SingleProcessCommunicator, IsRankZeroOfOne) {
  auto comm = make_single_process_communicator();
  EXPECT_EQ(comm->rank(), 0);
  EXPECT_EQ(comm->size(), 1);
  EXPECT_EQ(comm->backend(), "single");
}

TEST(SingleProcessCommunicator, AllGatherAndReduceScatterCopyEveryDtype) {
  auto comm = make_single_process_communicator();
  for (DType dtype : {DType::f32, DType::bf16, DType::f16, DType::f64}) {
    const Tensor send = randn({37}, dtype, 11);
    Tensor gathered = Tensor::zeros({37}, dtype), scattered = Tensor::zeros({37}, dtype);
    comm->all_gather(send, gathered);
    comm->reduce_scatter(send, scattered);
    EXPECT_TRUE(same_bits(gathered, send)) << dtype_name(dtype);
    EXPECT_TRUE(same_bits(scattered, send)) << dtype_name(dtype);
  }
}

TEST(SingleProcessCommunicator, AllGatherTakesAnyDtypeAndWorksInPlace) {
  auto comm = make_single_process_communicator();
  const Tensor bytes = Tensor::from_vector<uint8_t>({1, 2, 250});
  Tensor out = Tensor::zeros({3}, DType::u8);
  comm->all_gather(bytes, out);
  EXPECT_EQ(out.to_doubles(), (std::vector<double>{1, 2, 250}));

  // send is this rank's own block of recv: FSDP gathers into the flat buffer it shards.
  Tensor flat = Tensor::from_vector<float>({4, 5, 6});
  const Tensor own = flat.slice(0, 0, 3);
  comm->all_gather(own, flat);
  EXPECT_EQ(flat.to_doubles(), (std::vector<double>{4, 5, 6}));
}

TEST(SingleProcessCommunicator, AllReduceAndBroadcastLeaveTheBufferAlone) {
  auto comm = make_single_process_communicator();
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::min}) {
    Tensor buffer = randn({9}, DType::bf16, 3);
    const Tensor before = buffer.clone();
    comm->all_reduce(buffer, op);
    EXPECT_TRUE(same_bits(buffer, before));
  }
  Tensor ints = Tensor::from_vector<int64_t>({7, -8});
  comm->all_reduce(ints);
  comm->broadcast(ints, 0);
  EXPECT_EQ(ints.to_doubles(), (std::vector<double>{7, -8}));
  comm->barrier();
}

TEST(SingleProcessCommunicator, RequestsAreDoneAtOnce) {
  auto comm = make_single_process_communicator();
  const Tensor send = randn({8}, DType::f16, 5);
  Tensor gathered = Tensor::zeros({8}, DType::f16), scattered = Tensor::zeros({8}, DType::f16);
  auto gather = comm->start_all_gather(send, gathered);
  auto scatter = comm->start_reduce_scatter(send, scattered);
  EXPECT_TRUE(gather->done());
  EXPECT_TRUE(scatter->done());
  gather->wait();
  scatter->wait();
  EXPECT_TRUE(same_bits(gathered, send));
  EXPECT_TRUE(same_bits(scattered, send));
}

TEST(SingleProcessCommunicator, StatsStayZero) {
  auto comm = make_single_process_communicator();
  const Tensor send = randn({16}, DType::f32, 1);
  Tensor recv = Tensor::zeros({16});
  comm->all_gather(send, recv);
  comm->reduce_scatter(send, recv);
  comm->all_reduce(recv);
  comm->broadcast(recv, 0);
  comm->barrier();
  comm->start_all_gather(send, recv)->wait();
  EXPECT_EQ(comm->stats().total(), 0u);
  EXPECT_EQ(comm->stats().calls, 0u);
}

TEST(SingleProcessCommunicator, SizeMismatchNamesTheCallAndBothShapes) {
  auto comm = make_single_process_communicator();
  const Tensor send = Tensor::zeros({4});
  Tensor recv = Tensor::zeros({6});
  const std::string gather = error_of([&] { comm->all_gather(send, recv); });
  EXPECT_NE(gather.find("[dist] all_gather on rank 0 of 1"), std::string::npos) << gather;
  EXPECT_NE(gather.find("send [4] f32, recv [6] f32"), std::string::npos) << gather;
  const std::string scatter = error_of([&] { comm->reduce_scatter(send, recv); });
  EXPECT_NE(scatter.find("reduce_scatter on rank 0 of 1"), std::string::npos) << scatter;
  EXPECT_NE(scatter.find("send [4] f32, recv [6] f32"), std::string::npos) << scatter;
  const std::string async = error_of([&] { comm->start_all_gather(send, recv); });
  EXPECT_NE(async.find("send [4] f32, recv [6] f32"), std::string::npos) << async;
}

TEST(SingleProcessCommunicator, RejectsBadBuffers) {
  auto comm = make_single_process_communicator();
  const Tensor f32 = Tensor::zeros({4});
  Tensor bf16 = Tensor::zeros({4}, DType::bf16);
  EXPECT_NE(error_of([&] { comm->all_gather(f32, bf16); }).find("dtypes differ"),
            std::string::npos);

  Tensor matrix = Tensor::zeros({2, 3});
  Tensor transposed = matrix.transpose(0, 1);
  EXPECT_NE(error_of([&] { comm->all_reduce(transposed); }).find("not contiguous"),
            std::string::npos);

  Tensor meta = Tensor::empty({4}, DType::f32, Device::meta);
  EXPECT_NE(error_of([&] { comm->broadcast(meta, 0); }).find("is on meta"), std::string::npos);

  Tensor undefined;
  EXPECT_NE(error_of([&] { comm->all_reduce(undefined); }).find("undefined"), std::string::npos);

  Tensor bytes = Tensor::zeros({4}, DType::u8);
  EXPECT_NE(error_of([&] { comm->all_reduce(bytes); }).find("reductions take"), std::string::npos);
  EXPECT_EQ(error_of([&] { comm->broadcast(bytes, 0); }), "");  // moves take any dtype

  Tensor f = Tensor::zeros({4});
  EXPECT_NE(error_of([&] { comm->broadcast(f, 1); }).find("root 1 is not a rank"),
            std::string::npos);
}

TEST(SingleProcessCommunicator, RejectsOverlappingBuffers) {
  auto comm = make_single_process_communicator();
  Tensor flat = Tensor::zeros({8});
  const Tensor head = flat.slice(0, 0, 8);
  Tensor same = flat.slice(0, 0, 8);
  EXPECT_NE(error_of([&] { comm->reduce_scatter(head, same); }).find("overlap"), std::string::npos);
  // A send block that is not this rank's block of recv (shifted by one element).
  Tensor wide = Tensor::zeros({9});
  const Tensor shifted = wide.slice(0, 1, 9);
  Tensor recv = wide.slice(0, 0, 8);
  EXPECT_NE(error_of([&] { comm->all_gather(shifted, recv); }).find("overlaps recv"),
            std::string::npos);
}

TEST(SingleProcessCommunicator, AbortJobReturns) {
  auto comm = make_single_process_communicator();
  comm->abort_job("nothing to stop", 2);
  SUCCEED();
}

}  // namespace
}  // namespace mixprec::dist
