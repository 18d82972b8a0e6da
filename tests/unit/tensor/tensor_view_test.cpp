// Views: shared storage, element order of every view op, contiguity, copies into and out of
// strided tensors, and meta tensors that never allocate.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <vector>

#include "mixprec/core/error.h"
#include "mixprec/core/parallel.h"
#include "mixprec/tensor/allocator.h"
#include "mixprec/tensor/tensor.h"

namespace mixprec {
namespace {

using Values = std::vector<double>;

// 0, 1, ..., n-1 as f32 in `shape` (values exact in f32), so an element's value is its
// row-major index in the base tensor.
Tensor iota(const Shape& shape, DType dtype = DType::f32) {
  const int64_t n = shape_numel(shape);
  Values v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<double>(i);
  return Tensor::from_doubles(v, shape, dtype);
}

const char* byte_ptr(const Tensor& t) {
  return static_cast<const char*>(t.raw_data());
}

// ---------------------------------------------------------------- sharing, no copies

TEST(TensorViews, EveryViewOpSharesStorageAndAllocatesNothing) {
  const Tensor base = iota({2, 3, 4});
  const MemoryStats before = Allocator::instance().stats();
  const std::vector<Tensor> views = {
      base.view({6, 4}),       base.view({-1}),
      base.reshape({4, 6}),    base.transpose(0, 2),
      base.permute({1, 2, 0}), base.slice(1, 1, 3),
      base.slice(2, 0, 4, 2),  base.select(0, 1),
      base.unsqueeze(1),       base.unsqueeze(0).squeeze(0),
      base.contiguous(),       base.to(DType::f32),
  };
  const MemoryStats after = Allocator::instance().stats();
  EXPECT_EQ(after.allocations, before.allocations);
  EXPECT_EQ(after.current_bytes, before.current_bytes);
  for (const Tensor& v : views) {
    EXPECT_TRUE(v.shares_storage_with(base));
    EXPECT_TRUE(base.shares_storage_with(v));
  }
}

TEST(TensorViews, SeparateTensorsAndCopiesDoNotShareStorage) {
  const Tensor a = iota({4});
  const Tensor b = iota({4});
  EXPECT_FALSE(a.shares_storage_with(b));
  EXPECT_FALSE(a.clone().shares_storage_with(a));
  EXPECT_FALSE(a.to(DType::f64).shares_storage_with(a));
  EXPECT_FALSE(a.shares_storage_with(Tensor()));  // undefined tensor shares nothing
  EXPECT_FALSE(Tensor().shares_storage_with(Tensor()));
}

TEST(TensorViews, RawDataOfAViewPointsAtItsFirstElementInTheBaseBuffer) {
  const Tensor base = iota({2, 3, 4});  // f32: 4 bytes per element
  const char* p = byte_ptr(base);
  EXPECT_EQ(byte_ptr(base.select(0, 1)), p + 12 * 4);
  EXPECT_EQ(byte_ptr(base.select(1, 2)), p + 8 * 4);
  EXPECT_EQ(byte_ptr(base.select(2, -1)), p + 3 * 4);
  EXPECT_EQ(byte_ptr(base.slice(2, 1, 4)), p + 1 * 4);
  EXPECT_EQ(byte_ptr(base.slice(0, 1, 2).slice(1, 2, 3)), p + (12 + 8) * 4);
  EXPECT_EQ(byte_ptr(base.transpose(0, 2)), p);
  // View of a view keeps the offset.
  EXPECT_EQ(byte_ptr(base.select(0, 1).view({-1})), p + 12 * 4);
  // Element size follows the dtype: bf16 is 2 bytes.
  const Tensor h = iota({10}, DType::bf16);
  EXPECT_EQ(byte_ptr(h.slice(0, 3, 10)), byte_ptr(h) + 3 * 2);
}

TEST(TensorViews, WritesThroughAViewAreSeenByTheBase) {
  Tensor base = iota({3, 4});
  // Column 2 is a strided view; poke its second element (row 1) = base element 6.
  Tensor col = base.select(1, 2);
  col.data<float>()[col.strides()[0]] = -1.0f;
  const Values v = base.to_doubles();
  EXPECT_EQ(v, (Values{0, 1, 2, 3, 4, 5, -1, 7, 8, 9, 10, 11}));
}

TEST(TensorViews, DataThrowsOnADtypeMismatch) {
  const Tensor t = iota({3});
  EXPECT_THROW(t.data<double>(), Error);
  EXPECT_THROW(t.data<bf16>(), Error);
  EXPECT_NO_THROW(t.data<float>());
}

// ---------------------------------------------------------------- element order

TEST(TensorViews, ViewAndReshapeKeepRowMajorOrder) {
  const Tensor base = iota({2, 3, 4});
  const Tensor v = base.view({4, -1});
  EXPECT_EQ(v.shape(), (Shape{4, 6}));
  EXPECT_EQ(v.strides(), (Shape{6, 1}));
  EXPECT_EQ(v.to_doubles(), base.to_doubles());
  EXPECT_EQ(base.reshape({24}).shape(), (Shape{24}));
  EXPECT_THROW(base.view({5, -1}), Error);
  EXPECT_THROW(base.view({25}), Error);
  EXPECT_THROW(base.reshape({-1, -1}), Error);
}

TEST(TensorViews, TransposeSwapsShapeAndStrides) {
  const Tensor t = iota({2, 3}).transpose(0, 1);
  EXPECT_EQ(t.shape(), (Shape{3, 2}));
  EXPECT_EQ(t.strides(), (Shape{1, 3}));
  // [[0,1,2],[3,4,5]]^T = [[0,3],[1,4],[2,5]]
  EXPECT_EQ(t.to_doubles(), (Values{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(iota({2, 3}).transpose(-1, -2).to_doubles(), (Values{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(iota({2, 3}).transpose(1, 1).to_doubles(), (Values{0, 1, 2, 3, 4, 5}));
  EXPECT_THROW(iota({2, 3}).transpose(0, 2), Error);
}

TEST(TensorViews, TransposeOfThreeDimsMovesTheRightAxes) {
  // out[k][j][i] = in[i][j][k] = 12i + 4j + k for in of shape [2, 3, 4].
  const Tensor t = iota({2, 3, 4}).transpose(0, 2);
  ASSERT_EQ(t.shape(), (Shape{4, 3, 2}));
  Values expected;
  for (int k = 0; k < 4; ++k)
    for (int j = 0; j < 3; ++j)
      for (int i = 0; i < 2; ++i) expected.push_back(12 * i + 4 * j + k);
  EXPECT_EQ(t.to_doubles(), expected);
  EXPECT_EQ(expected[0 + 1], 12);  // sanity of the formula: out[0][0][1] = in[1][0][0]
}

TEST(TensorViews, PermuteReordersDims) {
  // out[k][i][j] = in[i][j][k] for dims {2, 0, 1}.
  const Tensor t = iota({2, 3, 4}).permute({2, 0, 1});
  ASSERT_EQ(t.shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(t.strides(), (Shape{1, 12, 4}));
  EXPECT_EQ(t.to_doubles(), (Values{0, 4, 8,  12, 16, 20, 1, 5, 9,  13, 17, 21,  //
                                    2, 6, 10, 14, 18, 22, 3, 7, 11, 15, 19, 23}));
  EXPECT_EQ(iota({2, 3, 4}).permute({-3, -2, -1}).to_doubles(), iota({24}).to_doubles());
  EXPECT_THROW(iota({2, 3, 4}).permute({0, 1}), Error);      // too few dims
  EXPECT_THROW(iota({2, 3, 4}).permute({0, 1, 1}), Error);   // repeated
  EXPECT_THROW(iota({2, 3, 4}).permute({0, 1, 3}), Error);   // out of range
  EXPECT_THROW(iota({2, 3, 4}).permute({2, -1, 0}), Error);  // -1 is dim 2 again
}

TEST(TensorViews, SliceFollowsPythonRulesForBoundsAndStep) {
  const Tensor t = iota({10});
  auto s = [&](int64_t start, int64_t end, int64_t step = 1) {
    return t.slice(0, start, end, step).to_doubles();
  };
  EXPECT_EQ(s(2, 5), (Values{2, 3, 4}));
  EXPECT_EQ(s(2, 8, 3), (Values{2, 5}));  // 8 excluded
  EXPECT_EQ(s(0, 10, 4), (Values{0, 4, 8}));
  EXPECT_EQ(s(1, 10, 20), (Values{1}));      // step beyond the end
  EXPECT_EQ(s(-3, 10), (Values{7, 8, 9}));   // negative start counts from the end
  EXPECT_EQ(s(0, -7), (Values{0, 1, 2}));    // negative end too
  EXPECT_EQ(s(-3, 100), (Values{7, 8, 9}));  // end past the size is clamped
  EXPECT_EQ(s(-100, 2), (Values{0, 1}));     // start before 0 is clamped
  EXPECT_EQ(s(-100, 100, 3), (Values{0, 3, 6, 9}));
  EXPECT_EQ(s(5, 2), Values{});    // end before start: empty
  EXPECT_EQ(s(10, 20), Values{});  // entirely past the end: empty
  EXPECT_EQ(s(-2, -5), Values{});
  EXPECT_EQ(t.slice(0, 5, 2).shape(), (Shape{0}));
  EXPECT_EQ(t.slice(0, 0, 10, 4).strides(), (Shape{4}));
  EXPECT_THROW(t.slice(0, 0, 10, 0), Error);
  EXPECT_THROW(t.slice(0, 0, 10, -1), Error);
  EXPECT_THROW(t.slice(1, 0, 1), Error);
}

TEST(TensorViews, SliceWithAHugeStepTakesOnlyTheFirstElement) {
  // Python: list(range(10))[0:10:2**63-1] == [0]. (end - start + step - 1) must not overflow.
  // BUG (library): Tensor::slice in src/tensor/tensor.cpp computes the new size as
  // (end - start + step - 1) / step, a signed int64 overflow (UB) for step near INT64_MAX;
  // it returns 0 elements instead of 1.
  const Tensor t = iota({10});
  const int64_t big = std::numeric_limits<int64_t>::max();
  const Tensor s = t.slice(0, 0, 10, big);
  EXPECT_EQ(s.shape(), (Shape{1}));
  EXPECT_EQ(s.to_doubles(), (Values{0}));
  EXPECT_EQ(t.slice(0, 3, big, big).to_doubles(), (Values{3}));
}

TEST(TensorViews, SliceAlongInnerAndNegativeDims) {
  const Tensor m = iota({3, 4});  // [[0..3],[4..7],[8..11]]
  EXPECT_EQ(m.slice(1, 1, 3).to_doubles(), (Values{1, 2, 5, 6, 9, 10}));
  EXPECT_EQ(m.slice(-1, 0, 4, 3).to_doubles(), (Values{0, 3, 4, 7, 8, 11}));
  EXPECT_EQ(m.slice(0, -2, 3).to_doubles(), (Values{4, 5, 6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(m.slice(0, 0, 3, 2).slice(1, 1, 4, 2).to_doubles(), (Values{1, 3, 9, 11}));
}

TEST(TensorViews, SelectDropsTheDimAndPicksTheIndex) {
  const Tensor t = iota({2, 3, 4});
  const Tensor a = t.select(1, -1);  // in[i][2][k] = 12i + 8 + k
  EXPECT_EQ(a.shape(), (Shape{2, 4}));
  EXPECT_EQ(a.to_doubles(), (Values{8, 9, 10, 11, 20, 21, 22, 23}));
  EXPECT_EQ(t.select(2, 1).to_doubles(), (Values{1, 5, 9, 13, 17, 21}));
  EXPECT_EQ(t.select(0, 1).select(0, 2).to_doubles(), (Values{20, 21, 22, 23}));
  const Tensor scalar = iota({3}).select(0, 2);
  EXPECT_EQ(scalar.ndim(), 0);
  EXPECT_EQ(scalar.item(), 2.0);
  EXPECT_THROW(t.select(0, 2), Error);
  EXPECT_THROW(t.select(2, -5), Error);
  EXPECT_THROW(t.select(3, 0), Error);
  EXPECT_THROW(scalar.select(0, 0), Error);
}

TEST(TensorViews, UnsqueezeInsertsASizeOneDimAnywhere) {
  const Tensor t = iota({2, 3});
  EXPECT_EQ(t.unsqueeze(0).shape(), (Shape{1, 2, 3}));
  EXPECT_EQ(t.unsqueeze(1).shape(), (Shape{2, 1, 3}));
  EXPECT_EQ(t.unsqueeze(2).shape(), (Shape{2, 3, 1}));
  EXPECT_EQ(t.unsqueeze(-1).shape(), (Shape{2, 3, 1}));
  EXPECT_EQ(t.unsqueeze(-3).shape(), (Shape{1, 2, 3}));
  for (int64_t d : {0, 1, 2}) {
    EXPECT_TRUE(t.unsqueeze(d).is_contiguous());
    EXPECT_EQ(t.unsqueeze(d).to_doubles(), t.to_doubles());
    EXPECT_EQ(t.unsqueeze(d).view({6}).to_doubles(), t.to_doubles());
  }
  // Of a transposed tensor: order follows the transpose.
  EXPECT_EQ(t.transpose(0, 1).unsqueeze(1).to_doubles(), (Values{0, 3, 1, 4, 2, 5}));
  EXPECT_THROW(t.unsqueeze(3), Error);
  EXPECT_THROW(t.unsqueeze(-4), Error);
  const Tensor scalar = iota({1}).select(0, 0);
  EXPECT_EQ(scalar.unsqueeze(0).shape(), (Shape{1}));
}

TEST(TensorViews, SqueezeRemovesOnlyASizeOneDim) {
  const Tensor t = iota({1, 3, 1});
  EXPECT_EQ(t.squeeze(0).shape(), (Shape{3, 1}));
  EXPECT_EQ(t.squeeze(-1).shape(), (Shape{1, 3}));
  EXPECT_EQ(t.squeeze(0).squeeze(1).to_doubles(), (Values{0, 1, 2}));
  EXPECT_THROW(t.squeeze(1), Error);
  EXPECT_THROW(t.squeeze(3), Error);
}

// ---------------------------------------------------------------- contiguity

TEST(TensorContiguity, FreshAndRowSlicedTensorsAreContiguous) {
  const Tensor m = iota({3, 4});
  EXPECT_TRUE(m.is_contiguous());
  EXPECT_TRUE(m.slice(0, 1, 3).is_contiguous());  // whole rows, just an offset
  EXPECT_TRUE(m.select(0, 1).is_contiguous());
  EXPECT_TRUE(m.transpose(0, 1).transpose(0, 1).is_contiguous());
  EXPECT_TRUE(iota({}).is_contiguous());
}

TEST(TensorContiguity, TransposedColumnAndSteppedViewsAreNot) {
  const Tensor m = iota({3, 4});
  EXPECT_FALSE(m.transpose(0, 1).is_contiguous());
  EXPECT_FALSE(m.slice(1, 0, 2).is_contiguous());
  EXPECT_FALSE(m.select(1, 0).is_contiguous());
  EXPECT_FALSE(m.slice(0, 0, 3, 2).is_contiguous());
  EXPECT_FALSE(iota({2, 3, 4}).permute({0, 2, 1}).is_contiguous());
}

TEST(TensorContiguity, SizeOneDimsAndEmptyTensorsIgnoreStrides) {
  // [3,1] transposed is [1,3] with strides [1,1]: the size-1 dim's stride is irrelevant.
  EXPECT_TRUE(iota({3, 1}).transpose(0, 1).is_contiguous());
  EXPECT_TRUE(iota({3, 4}).slice(1, 2, 3).transpose(0, 1).slice(1, 0, 1).is_contiguous());
  EXPECT_TRUE(iota({0, 3}).transpose(0, 1).is_contiguous());  // no elements to misplace
}

TEST(TensorContiguity, ContiguousOfAContiguousTensorIsTheSameTensor) {
  const Tensor m = iota({3, 4}).slice(0, 1, 3);
  const Tensor c = m.contiguous();
  EXPECT_TRUE(c.shares_storage_with(m));
  EXPECT_EQ(byte_ptr(c), byte_ptr(m));
}

TEST(TensorContiguity, ContiguousOfATransposedTensorCopiesInItsOrder) {
  const Tensor t = iota({2, 3}).transpose(0, 1);
  const Tensor c = t.contiguous();
  EXPECT_FALSE(c.shares_storage_with(t));
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_EQ(c.shape(), (Shape{3, 2}));
  EXPECT_EQ(c.strides(), (Shape{2, 1}));
  EXPECT_EQ(c.offset(), 0);
  // Read the raw buffer, not to_doubles(), so the gather itself is what is checked.
  const float* p = c.data<float>();
  EXPECT_EQ((Values{p[0], p[1], p[2], p[3], p[4], p[5]}), (Values{0, 3, 1, 4, 2, 5}));
}

TEST(TensorContiguity, ContiguousOfAStridedSliceGathersTheSelectedElements) {
  const Tensor s = iota({4, 5}).slice(0, 1, 4, 2).slice(1, -4, 5, 2);  // rows 1,3; cols 1,3
  const Tensor c = s.contiguous();
  ASSERT_EQ(c.shape(), (Shape{2, 2}));
  const float* p = c.data<float>();
  EXPECT_EQ((Values{p[0], p[1], p[2], p[3]}), (Values{6, 8, 16, 18}));
}

TEST(TensorContiguity, ContiguousGathersLargeStridedTensorsCorrectly) {
  // Big enough that the row copy is split across threads.
  const int64_t rows = 512, cols = 384;
  const Tensor t = iota({rows, cols}).transpose(0, 1).contiguous();
  ASSERT_EQ(t.shape(), (Shape{cols, rows}));
  const float* p = t.data<float>();
  int64_t bad = 0;
  for (int64_t j = 0; j < cols; ++j)
    for (int64_t i = 0; i < rows; ++i) bad += p[j * rows + i] != static_cast<float>(i * cols + j);
  EXPECT_EQ(bad, 0);
}

TEST(TensorContiguity, TransposedCopiesOfEveryElementSizeTileWithoutLosingAnElement) {
  // The transposed path copies up to 16 rows in 64-column tiles: odd sizes leave partial
  // tiles, a batch dim makes tiles stop at each matrix's edge, and 1 and 2 threads split the
  // rows differently. The expected order is built by index arithmetic from the base's values.
  const int saved = num_threads();
  for (const DType d : {DType::u8, DType::bf16, DType::f32, DType::f64, DType::i64})
    for (const int threads : {1, 2}) {
      set_num_threads(threads);
      const Shape shape = dtype_size(d) == 1 ? Shape{3, 5, 17} : Shape{3, 37, 101};
      const Tensor base = iota(shape, DType::f64).to(d);
      const Tensor t = base.transpose(1, 2).contiguous();
      const Values v = base.to_doubles();
      Values want;
      for (int64_t b = 0; b < shape[0]; ++b)
        for (int64_t j = 0; j < shape[2]; ++j)
          for (int64_t i = 0; i < shape[1]; ++i)
            want.push_back(v[static_cast<std::size_t>((b * shape[1] + i) * shape[2] + j)]);
      ASSERT_EQ(t.shape(), (Shape{shape[0], shape[2], shape[1]}));
      EXPECT_EQ(t.to_doubles(), want) << dtype_name(d) << " at " << threads << " threads";
    }
  set_num_threads(saved);
}

TEST(TensorContiguity, ViewOfANonContiguousTensorThrowsButReshapeCopies) {
  const Tensor t = iota({2, 3}).transpose(0, 1);
  EXPECT_THROW(t.view({6}), Error);
  EXPECT_THROW(iota({3, 4}).slice(1, 0, 2).view({-1}), Error);
  const Tensor r = t.reshape({6});
  EXPECT_FALSE(r.shares_storage_with(t));
  EXPECT_EQ(r.to_doubles(), (Values{0, 3, 1, 4, 2, 5}));
}

TEST(TensorContiguity, CloneCopiesEvenWhenContiguous) {
  Tensor a = iota({4});
  const Tensor b = a.clone();
  EXPECT_FALSE(b.shares_storage_with(a));
  a.data<float>()[0] = 42.0f;
  EXPECT_EQ(b.to_doubles(), (Values{0, 1, 2, 3}));
}

// ---------------------------------------------------------------- copy_from

TEST(TensorCopyFrom, WritesIntoAStridedViewOfTheBase) {
  Tensor base = Tensor::zeros({3, 4});
  // w[k][r] = base[r][1 + k]: columns 1 and 2 of base, transposed.
  Tensor w = base.transpose(0, 1).slice(0, 1, 3);
  ASSERT_EQ(w.shape(), (Shape{2, 3}));
  w.copy_from(Tensor::from_doubles({1, 2, 3, 4, 5, 6}, {2, 3}, DType::f64));
  // base[r][1 + k] = 1 + 3k + r
  EXPECT_EQ(base.to_doubles(), (Values{0, 1, 4, 0, 0, 2, 5, 0, 0, 3, 6, 0}));
}

TEST(TensorCopyFrom, ConvertsTheSourceDtypeOnTheWay) {
  Tensor base = Tensor::zeros({4}, DType::bf16);
  // 0.1 rounds to bf16 0x3DCD = 0x1.9ap-4; 1000.5 to 1000 (bf16 has 8 significant bits).
  base.slice(0, 1, 4, 2).copy_from(Tensor::from_doubles({0.1, 1000.5}, {2}, DType::f64));
  EXPECT_EQ(base.to_doubles(), (Values{0, 0x1.9ap-4, 0, 1000}));
  Tensor ints = Tensor::zeros({3}, DType::i32);
  ints.copy_from(Tensor::from_doubles({2.9, -2.9, 1e10}, {3}, DType::f64));
  EXPECT_EQ(ints.to_doubles(), (Values{2, -2, 2147483647}));
}

TEST(TensorCopyFrom, ThrowsOnAShapeMismatch) {
  Tensor a = Tensor::zeros({2, 3});
  EXPECT_THROW(a.copy_from(Tensor::zeros({3, 2})), Error);
  EXPECT_THROW(a.copy_from(Tensor::zeros({6})), Error);
}

TEST(TensorCopyFrom, OverlappingShiftRightReadsTheSourceBeforeWriting) {
  Tensor a = iota({10});
  a.slice(0, 1, 10).copy_from(a.slice(0, 0, 9));
  EXPECT_EQ(a.to_doubles(), (Values{0, 0, 1, 2, 3, 4, 5, 6, 7, 8}));
}

TEST(TensorCopyFrom, OverlappingShiftLeftReadsTheSourceBeforeWriting) {
  Tensor a = iota({10});
  a.slice(0, 0, 9).copy_from(a.slice(0, 1, 10));
  EXPECT_EQ(a.to_doubles(), (Values{1, 2, 3, 4, 5, 6, 7, 8, 9, 9}));
}

TEST(TensorCopyFrom, OverlappingStridedDestinationReadsTheSourceBeforeWriting) {
  // dst = a[2], a[4], a[6], a[8]; src = a[1..4]. Copying element by element would read a[2]
  // after it was overwritten with a[1].
  Tensor a = iota({10});
  a.slice(0, 2, 10, 2).copy_from(a.slice(0, 1, 5));
  EXPECT_EQ(a.to_doubles(), (Values{0, 1, 1, 3, 2, 5, 3, 7, 4, 9}));
}

TEST(TensorCopyFrom, OverlappingRowsShiftedDownReadTheSourceBeforeWriting) {
  // Row by row, row 2 would receive the already-overwritten row 1.
  Tensor m = iota({4, 3});
  m.slice(0, 1, 4).copy_from(m.slice(0, 0, 3));
  EXPECT_EQ(m.to_doubles(), (Values{0, 1, 2, 0, 1, 2, 3, 4, 5, 6, 7, 8}));
}

TEST(TensorCopyFrom, InPlaceTransposeOfASquareMatrix) {
  // An element-by-element copy would read already-overwritten values.
  Tensor m = iota({3, 3});
  m.copy_from(m.transpose(0, 1));
  EXPECT_EQ(m.to_doubles(), (Values{0, 3, 6, 1, 4, 7, 2, 5, 8}));
}

TEST(TensorCopyFrom, OverlappingShiftByTwoOfEightByteElements) {
  Tensor b = iota({6}, DType::f64);
  b.slice(0, 2, 6).copy_from(b.slice(0, 0, 4));
  EXPECT_EQ(b.to_doubles(), (Values{0, 1, 0, 1, 2, 3}));
}

// ---------------------------------------------------------------- meta tensors

TEST(MetaTensor, KnowsItsSizeButHasNoData) {
  // 2^40 f32 elements (4 TiB): only sizing, never allocated.
  const Tensor t = Tensor::empty({int64_t{1} << 20, int64_t{1} << 20}, DType::f32, Device::meta);
  EXPECT_TRUE(t.is_meta());
  EXPECT_EQ(t.device(), Device::meta);
  EXPECT_EQ(t.numel(), int64_t{1} << 40);
  EXPECT_EQ(t.nbytes(), std::size_t{4} << 40);
  EXPECT_EQ(t.storage()->data(), nullptr);
  EXPECT_THROW(t.raw_data(), Error);
  EXPECT_THROW(t.data<float>(), Error);
  EXPECT_THROW(Tensor::empty({1}, DType::f32, Device::meta).item(), Error);
  EXPECT_THROW(Tensor::empty({3, 4}, DType::f32, Device::meta).to_doubles(), Error);
  EXPECT_EQ(Tensor::empty({3, 5}, DType::bf16, Device::meta).nbytes(), 30u);
  EXPECT_EQ(Tensor::empty({7}, DType::f8_e4m3fn, Device::meta).nbytes(), 7u);
}

TEST(MetaTensor, ToDoublesOfAHugeMetaTensorThrowsErrorWithoutAllocating) {
  // BUG (library): Tensor::to_doubles in src/tensor/copy.cpp builds the numel-sized
  // std::vector<double> before contiguous()/raw_data() notice the tensor is meta, so a model-
  // sized meta tensor throws std::bad_alloc (or first allocates gigabytes) instead of the
  // mixprec::Error "a meta tensor has no data".
  const Tensor t = Tensor::empty({int64_t{1} << 20, int64_t{1} << 20}, DType::f32, Device::meta);
  EXPECT_THROW(t.to_doubles(), Error);
}

TEST(MetaTensor, FactoriesViewsAndCopiesStayMetaAndAllocateNothing) {
  Allocator& alloc = Allocator::instance();
  const MemoryStats before = alloc.stats();
  {
    const Shape shape{1024, 4096};
    const Tensor t = Tensor::empty(shape, DType::bf16, Device::meta);
    const std::vector<Tensor> derived = {
        Tensor::zeros(shape, DType::f32, Device::meta),
        Tensor::ones(shape, DType::f16, Device::meta),
        Tensor::full(shape, 3.0, DType::f64, Device::meta),
        t.view({-1}),
        t.reshape({4096, 1024}),
        t.transpose(0, 1),
        t.permute({1, 0}),
        t.slice(1, 0, 4096, 2),
        t.select(0, 3),
        t.unsqueeze(0),
        t.unsqueeze(0).squeeze(0),
        t.transpose(0, 1).contiguous(),
        t.transpose(0, 1).reshape({-1}),
        t.clone(),
        t.to(DType::f32),
        t.transpose(0, 1).to(DType::f8_e5m2),
    };
    for (const Tensor& d : derived) {
      EXPECT_TRUE(d.is_meta());
      EXPECT_THROW(d.raw_data(), Error);
    }
    EXPECT_EQ(derived[14].dtype(), DType::f32);
    EXPECT_EQ(derived[14].nbytes(), std::size_t{1024} * 4096 * 4);
    EXPECT_EQ(derived[11].shape(), (Shape{4096, 1024}));
    EXPECT_TRUE(derived[11].is_contiguous());
    EXPECT_EQ(derived[7].nbytes(), std::size_t{1024} * 2048 * 2);
    // copy_from between meta tensors is a no-op; across devices it is an error.
    Tensor dst = Tensor::empty(shape, DType::f32, Device::meta);
    EXPECT_NO_THROW(dst.copy_from(t));
    EXPECT_THROW(dst.copy_from(Tensor::zeros(shape)), Error);
    const MemoryStats during = alloc.stats();
    // The zeros() cpu tensor above was created and freed: nothing from meta.
    EXPECT_EQ(during.current_bytes, before.current_bytes);
    EXPECT_EQ(during.allocations, before.allocations + 1);
  }
  const MemoryStats after = alloc.stats();
  EXPECT_EQ(after.current_bytes, before.current_bytes);
}

TEST(MetaTensor, DeviceNamesRoundTrip) {
  EXPECT_STREQ(device_name(Device::cpu), "cpu");
  EXPECT_STREQ(device_name(Device::meta), "meta");
  EXPECT_EQ(parse_device("meta"), Device::meta);
  EXPECT_EQ(parse_device("cpu"), Device::cpu);
  EXPECT_THROW(parse_device("cuda"), Error);
}

TEST(UndefinedTensor, ThrowsOnUse) {
  const Tensor t;
  EXPECT_FALSE(t.defined());
  EXPECT_THROW(t.shape(), Error);
  EXPECT_THROW(t.numel(), Error);
}

}  // namespace
}  // namespace mixprec
