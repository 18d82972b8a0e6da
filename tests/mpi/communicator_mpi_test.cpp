// The MPI backend on a real job (CTest runs this under `mpiexec -np 2`). Every rank can make
// every rank's input (seeded by rank), so references are computed locally, in f64, and never
// by the code under test. At world size 2 a sum is one rounding of the exact pair sum, so the
// checks there are bit for bit; at other sizes they fall back to tolerances.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <vector>

#include "mixprec/dist/communicator.h"
#include "mpi_test_env.h"
#include "support/op_testing.h"

namespace mixprec::dist {
namespace {

using mixprec::testing::error_of;
using mixprec::testing::same_bits;
using mixprec::testing::with_threads;
using mixprec::testing::world;

constexpr DType kFloatTypes[] = {DType::f32, DType::bf16, DType::f16};

// Rank r's input for test `salt`: normal values rounded once into dtype.
Tensor input_of(int r, int64_t n, DType dtype, uint64_t salt) {
  return mixprec::testing::randn({n}, dtype, salt * 1000 + static_cast<uint64_t>(r));
}

// sum over ranks of input_of(r, ...)[offset : offset + n]: at W = 2 the f64 sum of two
// f32-representable values rounded to f32 (the correctly rounded f32 sum), then once to dtype.
Tensor expected_sum(int64_t n_total, int64_t offset, int64_t n, DType dtype, uint64_t salt) {
  std::vector<double> sum(static_cast<std::size_t>(n), 0.0);
  for (int r = 0; r < world().size(); ++r) {
    const std::vector<double> x = input_of(r, n_total, dtype, salt).to_doubles();
    for (int64_t i = 0; i < n; ++i) {
      const double s = sum[static_cast<std::size_t>(i)] + x[static_cast<std::size_t>(offset + i)];
      sum[static_cast<std::size_t>(i)] = static_cast<double>(static_cast<float>(s));
    }
  }
  return Tensor::from_doubles(sum, {n}, dtype);
}

// Bit equality at world size 2; elsewhere the summation order is MPI's, so a tolerance.
void expect_sum_matches(const Tensor& got, const Tensor& want, const std::string& what) {
  if (world().size() <= 2) {
    EXPECT_TRUE(same_bits(got, want))
        << what << ": max |diff| " << mixprec::testing::max_abs_diff(got, want);
  } else {
    const double eps = got.dtype() == DType::bf16  ? 0x1p-7
                       : got.dtype() == DType::f16 ? 0x1p-10
                                                   : 0x1p-20;
    mixprec::testing::expect_close(got, want, eps * world().size(), eps * world().size(), what);
  }
}

TEST(MpiCommunicator, WorldHasEveryRankOnce) {
  Communicator& comm = world();
  EXPECT_EQ(comm.backend(), "mpi");
  if (const char* launched = std::getenv("OMPI_COMM_WORLD_SIZE")) {
    EXPECT_EQ(comm.size(), std::atoi(launched));
  }
  EXPECT_GE(comm.size(), 2) << "run under mpiexec -np 2 (or more)";
  const Tensor mine = Tensor::from_vector<int64_t>({comm.rank()});
  Tensor all = Tensor::zeros({comm.size()}, DType::i64);
  comm.all_gather(mine, all);
  for (int r = 0; r < comm.size(); ++r) EXPECT_EQ(all.to_doubles()[r], r);
}

TEST(MpiCommunicator, AllGatherPlacesEachRanksBlock) {
  Communicator& comm = world();
  const int64_t n = 129;
  for (DType dtype : {DType::f32, DType::bf16, DType::f16, DType::f64}) {
    const Tensor send = input_of(comm.rank(), n, dtype, 1);
    Tensor recv = Tensor::zeros({n * comm.size()}, dtype);
    comm.all_gather(send, recv);
    for (int r = 0; r < comm.size(); ++r)
      EXPECT_TRUE(same_bits(recv.slice(0, r * n, (r + 1) * n), input_of(r, n, dtype, 1)))
          << dtype_name(dtype) << " block of rank " << r;
  }
  // Data moves take any dtype: bytes.
  const Tensor bytes = Tensor::full({3}, 10 + comm.rank(), DType::u8);
  Tensor all_bytes = Tensor::zeros({3 * comm.size()}, DType::u8);
  comm.all_gather(bytes, all_bytes);
  for (int r = 0; r < comm.size(); ++r) EXPECT_EQ(all_bytes.to_doubles()[3 * r + 2], 10 + r);
}

TEST(MpiCommunicator, AllGatherVPlacesEachRanksCountEndToEnd) {
  Communicator& comm = world();
  std::vector<int64_t> counts;  // rank r sends 3r + 1 elements; one rank may send none
  for (int r = 0; r < comm.size(); ++r) counts.push_back(r == 1 ? 0 : 3 * r + 1);
  int64_t total = 0;
  for (const int64_t c : counts) total += c;
  const int64_t n = counts[static_cast<std::size_t>(comm.rank())];
  const Tensor send = input_of(comm.rank(), n, DType::bf16, 3);
  Tensor recv = Tensor::zeros({total}, DType::bf16);
  comm.reset_stats();
  comm.start_all_gather_v(send, recv, counts)->wait();
  int64_t at = 0;
  for (int r = 0; r < comm.size(); ++r) {
    const int64_t c = counts[static_cast<std::size_t>(r)];
    EXPECT_TRUE(same_bits(recv.slice(0, at, at + c), input_of(r, c, DType::bf16, 3)))
        << "part of rank " << r;
    at += c;
  }
  // As an all-gather of the whole: (W-1)/W of its bytes.
  EXPECT_EQ(comm.stats().all_gather_bytes,
            static_cast<uint64_t>(2 * total * (comm.size() - 1) / comm.size()));
  // A count that does not match the send, or counts for another world size: local Errors.
  Tensor wrong = Tensor::zeros({n + 1}, DType::bf16);
  EXPECT_NE(
      error_of([&] { comm.start_all_gather_v(wrong, recv, counts); }).find("this rank's count"),
      std::string::npos);
  EXPECT_NE(error_of([&] { comm.start_all_gather_v(send, recv, {1}); }).find("counts for"),
            std::string::npos);
}

TEST(MpiCommunicator, AllGatherInPlaceFromOwnBlock) {
  Communicator& comm = world();
  const int64_t n = 17;
  Tensor flat = Tensor::zeros({n * comm.size()}, DType::bf16);
  Tensor own = flat.slice(0, comm.rank() * n, (comm.rank() + 1) * n);
  own.copy_from(input_of(comm.rank(), n, DType::bf16, 2));
  comm.all_gather(own, flat);
  for (int r = 0; r < comm.size(); ++r)
    EXPECT_TRUE(same_bits(flat.slice(0, r * n, (r + 1) * n), input_of(r, n, DType::bf16, 2)))
        << "block of rank " << r;
}

TEST(MpiCommunicator, ReduceScatterSumsThisRanksBlockRoundedOnce) {
  Communicator& comm = world();
  const int64_t n = 1000, total = n * comm.size();
  for (DType dtype : kFloatTypes) {
    const Tensor send = input_of(comm.rank(), total, dtype, 3);
    Tensor recv = Tensor::zeros({n}, dtype);
    comm.reduce_scatter(send, recv);
    expect_sum_matches(recv, expected_sum(total, comm.rank() * n, n, dtype, 3),
                       std::string("reduce_scatter ") + dtype_name(dtype));
  }
}

TEST(MpiCommunicator, AllReduceSumRoundsOnce) {
  Communicator& comm = world();
  const int64_t n = 777;
  for (DType dtype : kFloatTypes) {
    Tensor buffer = input_of(comm.rank(), n, dtype, 4);
    comm.all_reduce(buffer, ReduceOp::sum);
    expect_sum_matches(buffer, expected_sum(n, 0, n, dtype, 4),
                       std::string("all_reduce ") + dtype_name(dtype));
  }
}

TEST(MpiCommunicator, AllReduceSumsF64AndI64Exactly) {
  Communicator& comm = world();
  Tensor doubles = Tensor::from_vector<double>({0.1 * (comm.rank() + 1), 1e300, -2.5});
  Tensor ints = Tensor::from_vector<int64_t>({int64_t{1} << 40 | comm.rank(), -comm.rank()});
  comm.all_reduce(doubles);
  comm.all_reduce(ints);
  double tenths = 0, ranks = 0;
  for (int r = 0; r < comm.size(); ++r) tenths += 0.1 * (r + 1), ranks += r;
  const int w = comm.size();
  EXPECT_DOUBLE_EQ(doubles.to_doubles()[0], tenths);
  EXPECT_EQ(doubles.to_doubles()[1], w == 1 ? 1e300 : 1e300 * w);
  EXPECT_EQ(doubles.to_doubles()[2], -2.5 * w);
  const int64_t* got = ints.data<int64_t>();
  int64_t high = 0;
  for (int r = 0; r < w; ++r) high += int64_t{1} << 40 | r;
  EXPECT_EQ(got[0], high);
  EXPECT_EQ(got[1], -static_cast<int64_t>(ranks));
}

TEST(MpiCommunicator, AllReduceMaxAndMinPickExactValues) {
  Communicator& comm = world();
  const int64_t n = 300;
  for (DType dtype : {DType::f32, DType::bf16, DType::f16, DType::f64}) {
    for (ReduceOp op : {ReduceOp::max, ReduceOp::min}) {
      Tensor buffer = input_of(comm.rank(), n, dtype, 5);
      comm.all_reduce(buffer, op);
      std::vector<double> want = input_of(0, n, dtype, 5).to_doubles();
      for (int r = 1; r < comm.size(); ++r) {
        const std::vector<double> x = input_of(r, n, dtype, 5).to_doubles();
        for (std::size_t i = 0; i < want.size(); ++i)
          want[i] = op == ReduceOp::max ? std::max(want[i], x[i]) : std::min(want[i], x[i]);
      }
      EXPECT_EQ(buffer.to_doubles(), want)
          << dtype_name(dtype) << (op == ReduceOp::max ? " max" : " min");
    }
  }
  Tensor ints = Tensor::from_vector<int64_t>({comm.rank(), -comm.rank()});
  comm.all_reduce(ints, ReduceOp::max);
  EXPECT_EQ(ints.to_doubles(), (std::vector<double>{comm.size() - 1.0, 0.0}));
}

TEST(MpiCommunicator, NarrowMaxAndMinKeepNaNAndInf) {
  Communicator& comm = world();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  for (DType dtype : {DType::bf16, DType::f16}) {
    for (ReduceOp op : {ReduceOp::max, ReduceOp::min}) {
      // Last rank holds NaN in slot 0 and -inf/+inf in slot 1; the others hold 1.
      const bool last = comm.rank() == comm.size() - 1;
      Tensor buffer = Tensor::from_doubles(
          {last ? nan : 1.0, last ? (op == ReduceOp::max ? inf : -inf) : 1.0}, {2}, dtype);
      comm.all_reduce(buffer, op);
      const std::vector<double> got = buffer.to_doubles();
      EXPECT_TRUE(std::isnan(got[0])) << dtype_name(dtype);
      EXPECT_EQ(got[1], op == ReduceOp::max ? inf : -inf) << dtype_name(dtype);
    }
  }
}

TEST(MpiCommunicator, BroadcastCopiesTheRootsBuffer) {
  Communicator& comm = world();
  for (int root = 0; root < comm.size(); ++root) {
    Tensor buffer = input_of(comm.rank(), 50, DType::bf16, 6);
    comm.broadcast(buffer, root);
    EXPECT_TRUE(same_bits(buffer, input_of(root, 50, DType::bf16, 6))) << "root " << root;
    Tensor bytes = Tensor::full({5}, 100 + comm.rank(), DType::u8);
    comm.broadcast(bytes, root);
    EXPECT_EQ(bytes.to_doubles(), std::vector<double>(5, 100 + root)) << "root " << root;
  }
}

TEST(MpiCommunicator, GatherOfScatteredSumsEqualsAllReduce) {
  Communicator& comm = world();
  if (comm.size() > 2) GTEST_SKIP() << "summation orders of the two algorithms may differ";
  const int64_t n = 250, total = n * comm.size();
  for (DType dtype : kFloatTypes) {
    const Tensor x = input_of(comm.rank(), total, dtype, 7);
    Tensor shard = Tensor::zeros({n}, dtype), gathered = Tensor::zeros({total}, dtype);
    comm.reduce_scatter(x, shard);
    comm.all_gather(shard, gathered);
    Tensor reduced = x.clone();
    comm.all_reduce(reduced);
    EXPECT_TRUE(same_bits(gathered, reduced)) << dtype_name(dtype);
  }
}

TEST(MpiCommunicator, NonBlockingEqualsBlocking) {
  Communicator& comm = world();
  const int64_t n = 4099, total = n * comm.size();
  for (DType dtype : kFloatTypes) {
    const Tensor x = input_of(comm.rank(), total, dtype, 8);
    const Tensor piece = input_of(comm.rank(), n, dtype, 9);
    Tensor shard = Tensor::zeros({n}, dtype), shard_async = Tensor::zeros({n}, dtype);
    Tensor gathered = Tensor::zeros({total}, dtype), gathered_async = Tensor::zeros({total}, dtype);
    comm.reduce_scatter(x, shard);
    comm.all_gather(piece, gathered);
    // Both in flight at once, as FSDP overlaps them.
    auto scatter = comm.start_reduce_scatter(x, shard_async);
    auto gather = comm.start_all_gather(piece, gathered_async);
    gather->wait();
    scatter->wait();
    EXPECT_TRUE(scatter->done() && gather->done());
    gather->wait();  // a second wait is a no-op
    EXPECT_TRUE(same_bits(shard_async, shard)) << dtype_name(dtype);
    EXPECT_TRUE(same_bits(gathered_async, gathered)) << dtype_name(dtype);
  }
}

TEST(MpiCommunicator, DroppedRequestWaitsInItsDestructor) {
  Communicator& comm = world();
  const int64_t n = 64;
  Tensor recv = Tensor::zeros({n * comm.size()}, DType::f32);
  { auto request = comm.start_all_gather(input_of(comm.rank(), n, DType::f32, 10), recv); }
  for (int r = 0; r < comm.size(); ++r)
    EXPECT_TRUE(same_bits(recv.slice(0, r * n, (r + 1) * n), input_of(r, n, DType::f32, 10)));
}

TEST(MpiCommunicator, LocalMismatchIsAnErrorAndTheJobGoesOn) {
  Communicator& comm = world();
  const Tensor send = Tensor::zeros({4}, DType::bf16);
  Tensor recv = Tensor::zeros({4 * comm.size() + 1}, DType::bf16);
  const std::string gather = error_of([&] { comm.all_gather(send, recv); });
  const std::string where =
      "on rank " + std::to_string(comm.rank()) + " of " + std::to_string(comm.size());
  EXPECT_NE(gather.find("[dist] all_gather (MPI_Iallgather) " + where), std::string::npos)
      << gather;
  EXPECT_NE(gather.find("send [4] bf16, recv [" + std::to_string(4 * comm.size() + 1) + "] bf16"),
            std::string::npos)
      << gather;
  Tensor small = Tensor::zeros({3}, DType::bf16);
  const std::string scatter = error_of([&] { comm.start_reduce_scatter(send, small); });
  EXPECT_NE(scatter.find("start_reduce_scatter (MPI_Ialltoall + local sum) " + where),
            std::string::npos)
      << scatter;
  Tensor f32 = Tensor::zeros({4});
  EXPECT_NE(error_of([&] { comm.broadcast(f32, comm.size()); }).find("root"), std::string::npos);
  // Nothing reached MPI: the ranks are still in step.
  Tensor one = Tensor::ones({1});
  comm.all_reduce(one);
  EXPECT_EQ(one.item(), comm.size());
}

TEST(MpiCommunicator, StatsCountBytesAsTheRingMovesThem) {
  Communicator& comm = world();
  const uint64_t w = static_cast<uint64_t>(comm.size());
  comm.reset_stats();
  Tensor piece = Tensor::zeros({10}, DType::f32), flat = Tensor::zeros({10 * comm.size()});
  comm.all_gather(piece, flat);  // (W-1) * 40
  Tensor grads = Tensor::zeros({12 * comm.size()}, DType::bf16),
         shard = Tensor::zeros({12}, DType::bf16);
  comm.reduce_scatter(grads, shard);  // (W-1) * 24
  Tensor flag = Tensor::zeros({6});
  comm.all_reduce(flag);  // 2 (W-1) / W * 24
  Tensor state = Tensor::zeros({2}, DType::i64);
  comm.broadcast(state, 0);  // 16 on the root only
  comm.barrier();
  comm.start_all_gather(piece, flat)->wait();  // (W-1) * 40 again
  const CommStats& s = comm.stats();
  EXPECT_EQ(s.all_gather_bytes, 2 * (w - 1) * 40);
  EXPECT_EQ(s.reduce_scatter_bytes, (w - 1) * 24);
  EXPECT_EQ(s.all_reduce_bytes, 2 * (w - 1) * 24 / w);
  EXPECT_EQ(s.broadcast_bytes, comm.rank() == 0 ? 16u : 0u);
  EXPECT_EQ(s.calls, 6u);
  EXPECT_EQ(s.total(),
            s.all_gather_bytes + s.reduce_scatter_bytes + s.all_reduce_bytes + s.broadcast_bytes);
  comm.reset_stats();
  EXPECT_EQ(comm.stats().total(), 0u);
}

TEST(MpiCommunicator, LargeNarrowSumsRepeatBitForBitAtAnyThreadCount) {
  Communicator& comm = world();
  // Larger than the reduction's chunk and MPI's pipeline segments; odd, to leave tails.
  const int64_t n = (int64_t{1} << 18) + 3, total = n * comm.size();
  for (DType dtype : {DType::bf16, DType::f16}) {
    const Tensor x = input_of(comm.rank(), total, dtype, 11);
    Tensor first = Tensor::zeros({n}, dtype), second = Tensor::zeros({n}, dtype);
    with_threads(1, [&] { comm.reduce_scatter(x, first); });
    with_threads(2, [&] { comm.reduce_scatter(x, second); });
    EXPECT_TRUE(same_bits(first, second)) << dtype_name(dtype);
    expect_sum_matches(first, expected_sum(total, comm.rank() * n, n, dtype, 11),
                       std::string("large reduce_scatter ") + dtype_name(dtype));
    Tensor a = x.clone(), b = x.clone();
    comm.all_reduce(a);
    comm.all_reduce(b);
    EXPECT_TRUE(same_bits(a, b)) << dtype_name(dtype);
  }
}

}  // namespace
}  // namespace mixprec::dist
