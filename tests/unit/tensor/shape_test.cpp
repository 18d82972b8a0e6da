// Shape arithmetic: element counts, row-major strides, dim normalization and -1 inference.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

#include "mixprec/core/error.h"
#include "mixprec/tensor/shape.h"

namespace mixprec {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

TEST(ShapeNumel, EmptyShapeIsAScalarWithOneElement) {
  EXPECT_EQ(shape_numel({}), 1);
}

TEST(ShapeNumel, MultipliesTheDims) {
  EXPECT_EQ(shape_numel({7}), 7);
  EXPECT_EQ(shape_numel({2, 3, 4}), 24);
  EXPECT_EQ(shape_numel({1, 1, 5, 1}), 5);
}

TEST(ShapeNumel, AnyZeroDimGivesZeroElements) {
  EXPECT_EQ(shape_numel({0}), 0);
  EXPECT_EQ(shape_numel({3, 0, 4}), 0);
  // A zero after a huge dim must not be mistaken for overflow...
  EXPECT_EQ(shape_numel({kMax, 0}), 0);
  EXPECT_EQ(shape_numel({0, kMax, 1}), 0);
  // ...but the other dims' product must fit: strides are built from it (the fuzzer's find).
  EXPECT_THROW(shape_numel({0, kMax, kMax}), Error);
  EXPECT_THROW(shape_numel({0, int64_t{1} << 32, int64_t{1} << 32}), Error);
}

TEST(ShapeNumel, LargestProductsThatFitInInt64AreAccepted) {
  EXPECT_EQ(shape_numel({kMax}), kMax);
  EXPECT_EQ(shape_numel({int64_t{1} << 31, int64_t{1} << 31}), int64_t{1} << 62);
  // kMax = 3 * 3074457345618258602 + 1, so this product is kMax - 1.
  EXPECT_EQ(shape_numel({3, 3074457345618258602}), kMax - 1);
}

TEST(ShapeNumel, ThrowsWhenTheProductOverflowsInt64) {
  EXPECT_THROW(shape_numel({int64_t{1} << 32, int64_t{1} << 32}), Error);
  EXPECT_THROW(shape_numel({int64_t{1} << 31, int64_t{1} << 32}), Error);  // exactly 2^63
  EXPECT_THROW(shape_numel({3, 3074457345618258603}), Error);              // kMax + 2
  EXPECT_THROW(shape_numel({2, 2, kMax / 2}), Error);
}

TEST(ShapeNumel, ThrowsOnANegativeDim) {
  EXPECT_THROW(shape_numel({-1}), Error);
  EXPECT_THROW(shape_numel({2, -3}), Error);
  // Negative even when another dim is zero: the shape itself is invalid.
  EXPECT_THROW(shape_numel({0, -1}), Error);
}

TEST(ContiguousStrides, AreRowMajorInElements) {
  EXPECT_EQ(contiguous_strides({}), Shape{});
  EXPECT_EQ(contiguous_strides({5}), (Shape{1}));
  EXPECT_EQ(contiguous_strides({2, 3, 4}), (Shape{12, 4, 1}));
  EXPECT_EQ(contiguous_strides({4, 1, 3}), (Shape{3, 3, 1}));
  EXPECT_EQ(contiguous_strides({2, 3, 4, 5}), (Shape{60, 20, 5, 1}));
}

TEST(ContiguousStrides, ZeroSizedDimsCountAsOneSoOtherStridesStayDistinct) {
  // Same convention as PyTorch: torch.empty(2, 0, 3).stride() == (3, 3, 1).
  EXPECT_EQ(contiguous_strides({2, 0, 3}), (Shape{3, 3, 1}));
  EXPECT_EQ(contiguous_strides({0, 4}), (Shape{4, 1}));
}

TEST(ShapeToString, PrintsBracketedCommaSeparatedDims) {
  EXPECT_EQ(shape_to_string({}), "[]");
  EXPECT_EQ(shape_to_string({2, 3, 4}), "[2, 3, 4]");
}

TEST(NormalizeDim, MapsNonNegativeDimsToThemselves) {
  EXPECT_EQ(normalize_dim(0, 3, "t"), 0);
  EXPECT_EQ(normalize_dim(2, 3, "t"), 2);
}

TEST(NormalizeDim, CountsNegativeDimsFromTheEnd) {
  EXPECT_EQ(normalize_dim(-1, 3, "t"), 2);
  EXPECT_EQ(normalize_dim(-3, 3, "t"), 0);
  EXPECT_EQ(normalize_dim(-1, 1, "t"), 0);
}

TEST(NormalizeDim, ThrowsOutOfRangeNamingTheCaller) {
  EXPECT_THROW(normalize_dim(3, 3, "t"), Error);
  EXPECT_THROW(normalize_dim(-4, 3, "t"), Error);
  EXPECT_THROW(normalize_dim(0, 0, "t"), Error);  // a 0-d tensor has no dims at all
  EXPECT_THROW(normalize_dim(-1, 0, "t"), Error);
  // Huge values must not wrap into range when narrowed to int.
  EXPECT_THROW(normalize_dim(int64_t{1} << 32, 3, "t"), Error);
  EXPECT_THROW(normalize_dim(-(int64_t{1} << 32), 3, "t"), Error);
  try {
    normalize_dim(5, 2, "Tensor::frobnicate");
    FAIL() << "expected a throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.where(), "Tensor::frobnicate");
    EXPECT_NE(std::string(e.what()).find("Tensor::frobnicate"), std::string::npos);
  }
}

TEST(InferShape, LeavesAShapeWithoutMinusOneAsIs) {
  EXPECT_EQ(infer_shape({2, 3}, 6, "t"), (Shape{2, 3}));
  EXPECT_EQ(infer_shape({}, 1, "t"), Shape{});
  EXPECT_EQ(infer_shape({0, 5}, 0, "t"), (Shape{0, 5}));
}

TEST(InferShape, ResolvesOneMinusOneFromTheElementCount) {
  EXPECT_EQ(infer_shape({-1}, 24, "t"), (Shape{24}));
  EXPECT_EQ(infer_shape({2, -1}, 6, "t"), (Shape{2, 3}));
  EXPECT_EQ(infer_shape({-1, 4}, 24, "t"), (Shape{6, 4}));
  EXPECT_EQ(infer_shape({2, -1, 4}, 24, "t"), (Shape{2, 3, 4}));
  EXPECT_EQ(infer_shape({1, -1, 1}, 7, "t"), (Shape{1, 7, 1}));
  EXPECT_EQ(infer_shape({-1}, 0, "t"), (Shape{0}));
  EXPECT_EQ(infer_shape({3, -1}, 0, "t"), (Shape{3, 0}));
}

TEST(InferShape, ThrowsWhenTheKnownDimsDoNotDivideTheCount) {
  EXPECT_THROW(infer_shape({4, -1}, 6, "t"), Error);
  EXPECT_THROW(infer_shape({5, -1}, 24, "t"), Error);
}

TEST(InferShape, ThrowsWhenMinusOneIsAmbiguousBecauseAKnownDimIsZero) {
  // [0, -1] could hold 0 elements with any value at -1.
  EXPECT_THROW(infer_shape({0, -1}, 0, "t"), Error);
}

TEST(InferShape, ThrowsOnMoreThanOneMinusOne) {
  EXPECT_THROW(infer_shape({-1, -1}, 4, "t"), Error);
  EXPECT_THROW(infer_shape({2, -1, -1}, 8, "t"), Error);
}

TEST(InferShape, ThrowsOnOtherNegativeDims) {
  EXPECT_THROW(infer_shape({-2, 3}, 6, "t"), Error);
  EXPECT_THROW(infer_shape({-2, -3}, 6, "t"), Error);  // product 6, but not a valid shape
}

TEST(InferShape, ThrowsWhenAFullShapeHoldsTheWrongCount) {
  EXPECT_THROW(infer_shape({2, 3}, 7, "t"), Error);
  EXPECT_THROW(infer_shape({}, 0, "t"), Error);
  try {
    infer_shape({2, 3}, 5, "Tensor::view");
    FAIL() << "expected a throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.where(), "Tensor::view");
  }
}

}  // namespace
}  // namespace mixprec

#include "mixprec/core/parallel.h"
#include "mixprec/tensor/tensor.h"

namespace mixprec {
namespace {

// Regressions from review: byte counts that overflow size_t, and exceptions inside
// parallel_for, are errors instead of heap overflows or std::terminate.
TEST(SizeLimits, HugeTensorIsAnErrorAndParallelForRethrows) {
  EXPECT_THROW(Tensor::empty({int64_t{1} << 62}, DType::f32), Error);
  EXPECT_THROW(Tensor::arange(0, 1e19), Error);
  EXPECT_THROW(parallel_for(1 << 20, 1024,
                            [](int64_t b, int64_t) { MIXPREC_CHECK(b < 4096, "fn", "boom"); }),
               Error);
  EXPECT_EQ(Tensor::zeros({10, 10}).slice(0, 0, 10, INT64_MAX).shape(), (Shape{1, 10}));
}

}  // namespace
}  // namespace mixprec
