#include "mixprec/numerics/accumulator_model.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <string>

#include "mixprec/core/error.h"

namespace mixprec {
namespace {

// x (exact, finite) as an integer count of 2^lsb, its low bits discarded per `discard`.
// |x| < 2^(lsb + 62) is the caller's promise, so the count fits an int64.
int64_t cut_to_multiple(double x, int lsb, AccumulatorDiscard discard) {
  if (x == 0) return 0;
  if (std::ilogb(x) < lsb - 2) {  // |x| < 2^lsb / 4: decided by sign alone (and no underflow)
    return (discard == AccumulatorDiscard::toward_negative && x < 0) ? -1 : 0;
  }
  const double y = std::ldexp(x, -lsb);  // exact: a power-of-two scaling, |y| >= 1/4
  double q = 0;
  switch (discard) {
    case AccumulatorDiscard::toward_zero:
      q = std::trunc(y);
      break;
    case AccumulatorDiscard::toward_negative:
      q = std::floor(y);
      break;
    case AccumulatorDiscard::nearest_even: {
      q = std::floor(y);
      const double frac = y - q;  // exact
      if (frac > 0.5 || (frac == 0.5 && std::fmod(q, 2.0) != 0)) q += 1;
      break;
    }
  }
  return static_cast<int64_t>(q);
}

// n / 2^shift as an integer, the discarded bits going per `discard` (shift in 1..62).
int64_t shift_out(int64_t n, int shift, AccumulatorDiscard discard) {
  const int64_t floor_q = n >> shift;  // arithmetic shift: floor (C++20)
  switch (discard) {
    case AccumulatorDiscard::toward_negative:
      return floor_q;
    case AccumulatorDiscard::toward_zero:
      return n < 0 ? -((-n) >> shift) : floor_q;
    case AccumulatorDiscard::nearest_even: {
      const int64_t rem = n - floor_q * (int64_t{1} << shift);  // in [0, 2^shift)
      const int64_t half = int64_t{1} << (shift - 1);
      return (rem > half || (rem == half && (floor_q & 1) != 0)) ? floor_q + 1 : floor_q;
    }
  }
  return floor_q;
}

int bit_width_of(int64_t n) {
  return static_cast<int>(std::bit_width(static_cast<uint64_t>(n < 0 ? -n : n)));
}

}  // namespace

AccumulatorModel hopper_fp8_fast_accum_model() {
  return AccumulatorModel{};
}

AccumulatorModel deepseek_promoted_model() {
  AccumulatorModel m = hopper_fp8_fast_accum_model();
  m.promote_every = 128;
  return m;
}

namespace {

constexpr AccumulatorModel kHopper{};  // hopper_fp8_fast_accum_model(): the defaults

// clang-format off
constexpr NamedAccumulator kAccumulators[] = {
  {"f32",  nullptr,  "exact products summed in f32 (mixprec's default; the GPU's split accumulator promotes near this)"},
  {"h100", &kHopper, "H100 FP8 wgmma as measured bit for bit (arXiv 2512.07004, 2511.10909): 32 products and the accumulator aligned to the largest operand exponent sum, 13 fractional bits toward zero, the sum cut to 14 bits"},
};
// clang-format on

}  // namespace

std::span<const NamedAccumulator> named_accumulators() {
  return kAccumulators;
}

const NamedAccumulator* named_accumulator(std::string_view name) {
  for (const NamedAccumulator& a : kAccumulators)
    if (name == a.name) return &a;
  return nullptr;
}

std::string accumulator_names() {
  std::string names;
  for (const NamedAccumulator& a : kAccumulators)
    names += (names.empty() ? "" : ", ") + std::string(a.name);
  return names;
}

const AccumulatorModel* find_accumulator(std::string_view name, std::string_view where) {
  if (const NamedAccumulator* a = named_accumulator(name)) return a->model;
  throw Error(std::string(where),
              "unknown accumulator '" + std::string(name) + "'; valid: " + accumulator_names());
}

const NamedAccumulator& named_accumulator_of(const AccumulatorModel* model) {
  for (const NamedAccumulator& a : kAccumulators)
    if (a.model == model) return a;
  throw Error("accumulator", "a model that is not a line of the table (named_accumulators)");
}

void check_accumulator_model(const AccumulatorModel& model, std::string_view where) {
  const std::string w(where);
  MIXPREC_CHECK(model.kept_bits >= 2 && model.kept_bits <= 48, w,
                "kept_bits = " + std::to_string(model.kept_bits) + " is outside 2..48");
  MIXPREC_CHECK(model.group_size >= 1 && model.group_size <= 4096, w,
                "group_size = " + std::to_string(model.group_size) + " is outside 1..4096");
  MIXPREC_CHECK(
      model.promote_every >= 0, w,
      "promote_every = " + std::to_string(model.promote_every) + " is negative (0 means never)");
  MIXPREC_CHECK(model.promote_every % model.group_size == 0, w,
                "promote_every = " + std::to_string(model.promote_every) +
                    " is not a multiple of group_size = " + std::to_string(model.group_size) +
                    " (a promotion happens between MMA steps)");
}

int product_exponent(float x, int x_emin, float y, int y_emin) {
  return std::max(std::ilogb(x), x_emin) + std::max(std::ilogb(y), y_emin);
}

double aligned_sum(std::span<const double> terms, int kept_bits, AccumulatorDiscard discard,
                   std::span<const int> exponents) {
  MIXPREC_CHECK(kept_bits >= 2 && kept_bits <= 48, "aligned_sum",
                "kept_bits = " + std::to_string(kept_bits) + " is outside 2..48");
  MIXPREC_CHECK(kept_bits + 2 + std::bit_width(terms.size()) <= 62, "aligned_sum",
                std::to_string(terms.size()) + " terms of " + std::to_string(kept_bits) +
                    " bits could overflow the 62-bit fixed-point sum");
  MIXPREC_CHECK(exponents.empty() || exponents.size() == terms.size(), "aligned_sum",
                std::to_string(exponents.size()) + " exponents for " +
                    std::to_string(terms.size()) + " terms");
  int max_exp = INT32_MIN;
  bool finite = true;
  for (std::size_t i = 0; i < terms.size(); ++i) {
    const double t = terms[i];
    finite = finite && std::isfinite(t);
    if (t == 0 || !std::isfinite(t)) continue;
    const int own = std::ilogb(t);
    const int e = exponents.empty() ? own : exponents[i];
    MIXPREC_CHECK(e >= own - 2, "aligned_sum",
                  "reference exponent " + std::to_string(e) + " of a term with exponent " +
                      std::to_string(own) + " (a product's significand is below 4)");
    max_exp = std::max(max_exp, e);
  }
  if (!finite) {  // NaN / inf: nothing to align; propagate them as IEEE addition does
    double plain = 0;
    for (double t : terms) plain += t;
    return plain;
  }
  if (max_exp == INT32_MIN) return 0.0;  // all zero

  // Every term as a count of the aligned unit 2^lsb, kept_bits of the largest term kept.
  int lsb = max_exp - kept_bits + 1;
  int64_t sum = 0;
  for (double t : terms) sum += cut_to_multiple(t, lsb, discard);

  // The sum back to kept_bits significant bits (a carry may have widened it).
  const int width = bit_width_of(sum);
  if (width > kept_bits) {
    const int shift = width - kept_bits;
    sum = shift_out(sum, shift, discard);
    lsb += shift;
  }
  return std::ldexp(static_cast<double>(sum), lsb);  // at most kept_bits + 1 bits: exact
}

float model_dot(std::span<const double> products, const AccumulatorModel& model,
                std::span<const int> exponents) {
  check_accumulator_model(model, "model_dot");
  MIXPREC_CHECK(exponents.empty() || exponents.size() == products.size(), "model_dot",
                std::to_string(exponents.size()) + " exponents for " +
                    std::to_string(products.size()) + " products");
  const std::size_t group = static_cast<std::size_t>(model.group_size);
  const std::size_t promote = static_cast<std::size_t>(model.promote_every);
  const bool given = !exponents.empty();
  std::vector<double> terms;
  std::vector<int> exps;  // the terms' reference exponents, when given
  terms.reserve(group + 1);
  exps.reserve(group + 1);
  double partial = 0;  // the tensor core's limited-precision accumulator
  float total = 0;     // the f32 accumulator partial sums are promoted into
  const auto own = [](double x) { return x == 0 ? 0 : std::ilogb(x); };
  for (std::size_t k0 = 0; k0 < products.size(); k0 += group) {
    const std::size_t k1 = std::min(products.size(), k0 + group);
    const std::span<const double> step = products.subspan(k0, k1 - k0);
    const std::span<const int> step_exps =
        given ? exponents.subspan(k0, k1 - k0) : std::span<const int>();
    terms.clear();
    exps.clear();
    if (model.align_with_accumulator) {
      terms.push_back(partial);
      terms.insert(terms.end(), step.begin(), step.end());
      if (given) {
        exps.push_back(own(partial));
        exps.insert(exps.end(), step_exps.begin(), step_exps.end());
      }
      partial = aligned_sum(terms, model.kept_bits, model.discard, exps);
    } else {
      const double step_sum = aligned_sum(step, model.kept_bits, model.discard, step_exps);
      terms = {partial, step_sum};
      partial = aligned_sum(terms, model.kept_bits, model.discard);
    }
    if (promote > 0 && k1 % promote == 0) {
      total += static_cast<float>(partial);
      partial = 0;
    }
  }
  if (promote == 0) return static_cast<float>(partial);
  return total + static_cast<float>(partial);
}

std::vector<float> model_matmul_abt(std::span<const float> a, std::span<const float> b, int64_t m,
                                    int64_t n, int64_t k, const AccumulatorModel& model) {
  check_accumulator_model(model, "model_matmul_abt");
  MIXPREC_CHECK(m >= 0 && n >= 0 && k >= 0, "model_matmul_abt",
                "negative shape m=" + std::to_string(m) + " n=" + std::to_string(n) +
                    " k=" + std::to_string(k));
  MIXPREC_CHECK(a.size() == static_cast<std::size_t>(m * k), "model_matmul_abt",
                "A has " + std::to_string(a.size()) + " values, m·k = " + std::to_string(m * k));
  MIXPREC_CHECK(b.size() == static_cast<std::size_t>(n * k), "model_matmul_abt",
                "B has " + std::to_string(b.size()) + " values, n·k = " + std::to_string(n * k));
  std::vector<float> c(static_cast<std::size_t>(m * n));
  std::vector<double> products(static_cast<std::size_t>(k));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t p = 0; p < k; ++p)
        products[p] = static_cast<double>(a[i * k + p]) * static_cast<double>(b[j * k + p]);
      c[i * n + j] = model_dot(products, model);
    }
  return c;
}

}  // namespace mixprec
