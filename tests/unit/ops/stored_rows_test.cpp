// The row algorithms on bf16 / f16 rows (StoredRowOps<bf16/f16>: forward and backward)
// against the float ones run in place on a widened copy of the same rows, rounded once: bit
// for bit, for every ISA this CPU runs, every length around the vector widths, and rows
// holding values whose rounding is delicate (ties, overflow to inf, subnormals, NaN, inf).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "cpu/softmax_row_ops.h"
#include "mixprec/numerics/storage_types.h"
#include "support/op_testing.h"

namespace mixprec {
namespace {

using namespace testing;  // mixprec::testing, the op-test support

std::vector<cpu::RowIsa> isas() {
  std::vector<cpu::RowIsa> out;
  for (auto isa :
       {cpu::RowIsa::portable, cpu::RowIsa::avx2, cpu::RowIsa::avx512, cpu::RowIsa::avx512_bf16})
    if (cpu::row_isa_supported(isa)) out.push_back(isa);
  return out;
}

// n values of storage type T: normal draws scaled by `scale`, with special values mixed in
// when kind is kSpecial (a value with its low bit set, a huge value, a subnormal, -inf, a large
// negative value; NaN in the longer rows). kUnderflow: 0, -4.5, ..., -99, -87.5 (repeated),
// whose softmax and cross-entropy gradient hold subnormal floats (exp(-87.5) is one in every
// build), which the bf16 stores of the avx512_bf16 build round on their slow path.
enum RowKind { kPlain, kSpecial, kUnderflow };
template <class T>
std::vector<T> row_of(int64_t n, uint64_t seed, double scale, RowKind kind) {
  const std::vector<double> v = randn({n}, DType::f32, seed, scale).to_doubles();
  std::vector<T> out(v.begin(), v.end());
  if (kind == kSpecial && n >= 6) {
    out[0] = T::from_bits(0x3F81);  // (bf16) 1.0078125; (f16) a small normal
    out[1] = T(std::numeric_limits<float>::max() / 4);
    out[2] = T::from_bits(0x0003);  // subnormal in both formats
    out[3] = T(-INFINITY);
    out[5] = T(-1e30f);
  }
  if (kind == kSpecial && n >= 65) out[4] = T(std::numeric_limits<float>::quiet_NaN());
  if (kind == kUnderflow)
    for (int64_t i = 0; i < n; ++i)
      out[static_cast<size_t>(i)] = T(i % 24 == 23 ? -87.5f : -4.5f * static_cast<float>(i % 24));
  return out;
}

template <class T>
std::vector<float> widened(const std::vector<T>& x) {
  return std::vector<float>(x.begin(), x.end());
}

template <class T>
std::vector<T> rounded_row(const std::vector<float>& x) {
  return std::vector<T>(x.begin(), x.end());
}

// Same bits, or both NaN (see expect_same_bits).
bool same(float a, float b) {
  return std::memcmp(&a, &b, sizeof a) == 0 || (std::isnan(a) && std::isnan(b));
}

template <class T>
void expect_same_bits(const std::vector<T>& got, const std::vector<T>& want, const std::string& w) {
  ASSERT_EQ(got.size(), want.size()) << w;
  for (size_t i = 0; i < got.size(); ++i) {
    // A NaN's sign is not specified by IEEE arithmetic (SSE's default NaN is negative, an
    // input NaN passed through keeps its sign), so any NaN matches any NaN.
    if (std::isnan(static_cast<float>(want[i])) && std::isnan(static_cast<float>(got[i]))) continue;
    EXPECT_EQ(got[i].bits, want[i].bits) << w << " element " << i;
  }
}

// Elements of a bf16 / f16 row that are subnormal (not zero).
template <class T>
int subnormals(const std::vector<T>& y) {
  const float min_normal = std::is_same_v<T, bf16> ? 0x1p-126f : 0x1p-14f;
  int count = 0;
  for (T v : y)
    count += std::fabs(static_cast<float>(v)) < min_normal && static_cast<float>(v) != 0;
  return count;
}

template <class T>
void check_dtype(const char* name) {
  for (cpu::RowIsa isa : isas()) {
    const auto& f32 = cpu::stored_row_ops<float>(isa);  // on widened rows, in place
    const auto& ops = cpu::stored_row_ops<T>(isa);
    for (int64_t n : {1, 3, 4, 7, 8, 9, 15, 16, 17, 31, 33, 64, 65, 100, 1000}) {
      for (RowKind kind : {kPlain, kSpecial, kUnderflow}) {
        const std::string what = std::string(name) + " " + cpu::row_isa_name(isa) +
                                 " n=" + std::to_string(n) +
                                 (kind == kSpecial     ? " special"
                                  : kind == kUnderflow ? " underflow"
                                                       : "");
        const std::vector<T> x = row_of<T>(n, static_cast<uint64_t>(n), 3.0, kind);
        const std::vector<float> xf = widened(x);
        // softmax / log_softmax: the row, its max and log-sum-exp.
        for (bool log : {false, true}) {
          std::vector<T> y(x.size());
          std::vector<float> buf(x.size()), want = xf;
          float m = 0, ls = 0, wm = 0, wls = 0;
          if (log) {
            ops.log_softmax(x.data(), y.data(), buf.data(), 1, n, &m, &ls);
            f32.log_softmax(want.data(), want.data(), want.data(), 1, n, &wm, &wls);
          } else {
            ops.softmax(x.data(), y.data(), buf.data(), 1, n, &m, &ls);
            f32.softmax(want.data(), want.data(), want.data(), 1, n, &wm, &wls);
          }
          expect_same_bits(y, rounded_row<T>(want), what + (log ? " log_softmax" : " softmax"));
          if (kind == kUnderflow && !log && n >= 24) {
            EXPECT_GT(subnormals(y), 0) << what;  // the rows reach the subnormal stores
          }
          EXPECT_TRUE(same(m, wm)) << what;
          EXPECT_TRUE(same(ls, wls)) << what;
        }
        // Norms with and without weight and bias; in place (y == x) too.
        const std::vector<float> w = widened(row_of<T>(n, 7, 1.0, kPlain));
        const std::vector<float> b = widened(row_of<T>(n, 8, 1.0, kPlain));
        for (bool center : {false, true}) {
          std::vector<T> y = x;
          std::vector<float> want = xf;
          float mean = 0, rstd = 0, wmean = 0, wrstd = 0;
          ops.norm_forward(y.data(), y.data(), w.data(), b.data(), n, 1e-5f, center, &mean, &rstd);
          f32.norm_forward(want.data(), want.data(), w.data(), b.data(), n, 1e-5f, center, &wmean,
                           &wrstd);
          expect_same_bits(y, rounded_row<T>(want), what + " norm");
          EXPECT_TRUE(same(rstd, wrstd)) << what;
          if (center) {
            EXPECT_TRUE(same(mean, wmean)) << what;
          }
        }
        // Backward rows: softmax / log-softmax from their statistics, norms with dw / db sums.
        const std::vector<T> g = row_of<T>(n, 9, 1.0, kPlain);
        const std::vector<float> gf = widened(g);
        for (bool log : {false, true}) {
          std::vector<float> buf(x.size()), want = xf;
          float m = 0, ls = 0;
          f32.softmax(buf.data(), buf.data(), buf.data(), 1, n, &m, &ls);  // statistics only
          std::vector<T> dx(x.size());
          if (log) {
            ops.log_softmax_backward(x.data(), g.data(), dx.data(), n, m, ls);
            f32.log_softmax_backward(want.data(), gf.data(), want.data(), n, m, ls);
          } else {
            ops.softmax_backward(x.data(), g.data(), dx.data(), buf.data(), n, m, ls);
            f32.softmax_backward(want.data(), gf.data(), want.data(), want.data(), n, m, ls);
          }
          expect_same_bits(dx, rounded_row<T>(want),
                           what + (log ? " log_softmax dx" : " softmax dx"));
        }
        for (bool center : {false, true}) {
          std::vector<float> y = xf;
          float mean = 0, rstd = 0;
          f32.norm_forward(y.data(), y.data(), w.data(), b.data(), n, 1e-5f, center, &mean, &rstd);
          std::vector<T> dx(x.size());
          std::vector<float> dw(x.size(), 0.5f), db(x.size(), 0.25f), wdw = dw, wdb = db;
          std::vector<float> want = xf, gcopy = gf;
          ops.norm_backward(x.data(), g.data(), w.data(), mean, rstd, n, center, dw.data(),
                            db.data(), dx.data());
          f32.norm_backward(want.data(), gcopy.data(), w.data(), mean, rstd, n, center, wdw.data(),
                            wdb.data(), want.data());
          expect_same_bits(dx, rounded_row<T>(want), what + " norm dx");
          for (size_t i = 0; i < dw.size(); ++i) {
            EXPECT_TRUE(same(dw[i], wdw[i])) << what << " dw " << i;
            EXPECT_TRUE(same(db[i], wdb[i])) << what << " db " << i;
          }
        }
        // Cross-entropy forward and backward (gradient into a separate row).
        const int64_t target = n - 1;
        float m = 0, ls = 0, wm = 0, wls = 0;
        const float loss = ops.ce_forward(x.data(), n, target, &m, &ls);
        const float wloss = f32.ce_forward(xf.data(), n, target, &wm, &wls);
        EXPECT_TRUE(same(loss, wloss)) << what << " " << loss << " " << wloss;
        std::vector<T> dx(x.size());
        std::vector<float> want = xf;
        ops.ce_backward(x.data(), dx.data(), n, target, m, ls, 0.25f);
        f32.ce_backward(want.data(), want.data(), n, target, wm, wls, 0.25f);
        expect_same_bits(dx, rounded_row<T>(want), what + " ce backward");
      }
    }
  }
}

// softmax / log_softmax over several rows in one call (pipelined) against one call per row:
// the same bits, rows, maxima and log-sums, for every ISA and storage type; f32 in place too.
template <class T>
void check_many_rows(const char* name) {
  for (cpu::RowIsa isa : isas()) {
    const auto& ops = cpu::stored_row_ops<T>(isa);
    for (int64_t rows : {2, 3, 5}) {
      for (int64_t n : {1, 16, 33, 1000}) {
        for (RowKind kind : {kPlain, kSpecial, kUnderflow}) {
          std::vector<T> x;
          for (int64_t r = 0; r < rows; ++r) {
            const auto seed = static_cast<uint64_t>(7 * r + 1);
            std::vector<T> row;
            if constexpr (std::is_same_v<T, float>)
              row = widened(row_of<bf16>(n, seed, 3.0, kind));
            else
              row = row_of<T>(n, seed, 3.0, kind);
            x.insert(x.end(), row.begin(), row.end());
          }
          const std::string what = std::string(name) + " " + cpu::row_isa_name(isa) +
                                   " rows=" + std::to_string(rows) + " n=" + std::to_string(n) +
                                   " kind=" + std::to_string(kind);
          for (bool log : {false, true}) {
            const auto fn = log ? ops.log_softmax : ops.softmax;
            std::vector<float> buf(static_cast<size_t>(n));
            std::vector<T> y(x.size()), want(x.size());
            std::vector<float> m(static_cast<size_t>(rows)), ls = m, wm = m, wls = m;
            fn(x.data(), y.data(), buf.data(), rows, n, m.data(), ls.data());
            for (int64_t r = 0; r < rows; ++r)
              fn(x.data() + r * n, want.data() + r * n, buf.data(), 1, n, &wm[r], &wls[r]);
            if constexpr (std::is_same_v<T, float>) {
              for (size_t i = 0; i < y.size(); ++i)
                EXPECT_TRUE(same(y[i], want[i]))
                    << what << (log ? " log_softmax " : " softmax ") << i;
            } else {
              expect_same_bits(y, want, what + (log ? " log_softmax" : " softmax"));
            }
            for (size_t r = 0; r < m.size(); ++r) {
              EXPECT_TRUE(same(m[r], wm[r])) << what << " max " << r;
              EXPECT_TRUE(same(ls[r], wls[r])) << what << " log_sum " << r;
            }
            if constexpr (std::is_same_v<T, float>) {  // in place, each y row as the buffer
              std::vector<float> z = x;
              fn(z.data(), z.data(), nullptr, rows, n, nullptr, nullptr);
              for (size_t i = 0; i < z.size(); ++i)
                EXPECT_TRUE(same(z[i], want[i])) << what << " in place " << i;
            }
          }
        }
      }
    }
  }
}

TEST(StoredRowOps, ManyRowsInOneCallMatchOneRowPerCall) {
  check_many_rows<float>("f32");
  check_many_rows<bf16>("bf16");
  check_many_rows<f16>("f16");
}

TEST(StoredRowOps, Bf16RowsMatchF32KernelsOnWidenedRowsBitForBit) {
  check_dtype<bf16>("bf16");
}

TEST(StoredRowOps, F16RowsMatchF32KernelsOnWidenedRowsBitForBit) {
  check_dtype<f16>("f16");
}

}  // namespace
}  // namespace mixprec
