// `mixprec dtype info` and `mixprec dtype cast`: the formats table and single-value casts.
#include "dtype_command.h"

#include <fmt/core.h>

#include <bit>
#include <cmath>
#include <string>
#include <vector>

#include "mixprec/core/error.h"
#include "mixprec/numerics/dtype.h"
#include "mixprec/numerics/encode.h"
#include "mixprec/numerics/format_names.h"
#include "mixprec/numerics/philox.h"
#include "usage_error.h"
#include "value_parse.h"

namespace mixprec::cli {
namespace {

// A row of the formats table: a dtype, or a format that is not one (numerics/format_names.h).
using FormatRow = NamedFormat;

FormatRow find_format(const std::string& name) {
  if (auto row = find_named_format(name)) return *row;
  throw UsageError(unknown_format_message(name));
}

std::string power_of_two(double v) {
  return fmt::format("2^{}", std::lround(std::log2(v)));
}

void print_float_rows(const std::vector<FormatRow>& rows) {
  fmt::print("{:<12} {:>4} {:>8} {:>5} {:>14} {:>19} {:>21} {:>17} {:>7} {:>4}  {}\n", "format",
             "bits", "s/e/m", "bias", "max finite", "min normal", "min subnormal", "epsilon",
             "digits", "inf", "NaN encodings");
  for (const FormatRow& r : rows) {
    const FloatFormat& f = *r.format;
    // tf32 lives in an f32 word, so its NaN is shown as that word.
    const bool tf32 = &f == &kFormatTF32;
    const uint64_t emitted = tf32 ? f.nan_bits() << 13 : f.nan_bits();
    std::string nan;
    if (!f.has_nan)
      nan = "none";
    else if (!f.has_sign)
      nan = fmt::format("0x{:X} only", f.abs_mask());
    else if (!f.has_inf)
      nan = fmt::format("0x{:X} and 0x{:X} only", f.abs_mask(), f.abs_mask() | f.sign_bit());
    else if (f.nan_keeps_payload)
      nan = fmt::format("exp all ones, mantissa != 0 (emit: 0x{:X} + payload)", emitted);
    else
      nan = fmt::format("exp all ones, mantissa != 0 (emit: 0x{:X})", emitted);
    const std::string name = r.dtype ? r.name : r.name + "*";
    const int bits = f.total_bits();  // f4_e2m1fn: 4, though its tensors keep one a byte
    fmt::print(
        "{:<12} {:>4} {:>8} {:>5} {:>14.8g} {:>8} {:>10.4g} {:>9} {:>11.4g} {:>7} {:>9.3g} "
        "{:>7.2f} {:>4}  {}\n",
        name, bits, fmt::format("{}/{}/{}", f.has_sign ? 1 : 0, f.exp_bits, f.mant_bits), f.bias,
        max_finite(f), power_of_two(min_normal(f)), min_normal(f), power_of_two(min_subnormal(f)),
        min_subnormal(f), power_of_two(epsilon(f)), epsilon(f), (f.mant_bits + 1) * std::log10(2.0),
        f.has_inf ? "yes" : "no", nan);
  }
  if (!rows.empty())
    fmt::print(
        "digits = decimal digits of precision, (mantissa bits + 1) * log10(2). "
        "epsilon = 2^-mantissa bits.\n");
  bool tf32_note = false, mx_note = false;
  for (const FormatRow& r : rows) {
    if (r.dtype) continue;
    if (r.format == &kFormatTF32 && !tf32_note)
      fmt::print(
          "* tf32 is a compute mode, not a storage type: an f32 whose mantissa is rounded "
          "to 10 bits (19 significant bits of an f32 word).\n");
    else if (r.format != &kFormatTF32 && !mx_note)
      fmt::print(
          "* f8_e8m0fnu (the MX block scale, 2^(e-127), no sign, zero or inf) is a numerics "
          "format, not a tensor dtype: numerics/e8m0.h.\n");
    (r.format == &kFormatTF32 ? tf32_note : mx_note) = true;
  }
}

void print_int_rows(const std::vector<FormatRow>& rows) {
  if (rows.empty()) return;
  fmt::print("{:<10} {:>5} {:>22} {:>22}\n", "integer", "bytes", "min", "max");
  for (const FormatRow& r : rows) {
    const DTypeInfo& d = *r.dtype;
    std::string lo = "0", hi = "1";
    if (d.dtype == DType::i32) lo = "-2147483648", hi = "2147483647";
    if (d.dtype == DType::i64) lo = "-9223372036854775808", hi = "9223372036854775807";
    if (d.dtype == DType::u8) hi = "255";
    fmt::print("{:<10} {:>5} {:>22} {:>22}\n", d.name, d.size, lo, hi);
  }
}

int run_info(const std::vector<std::string>& names) {
  std::vector<FormatRow> floats, ints;
  if (names.empty()) {
    for (const DTypeInfo& d : kDTypeTable) {
      if (d.format) floats.push_back({d.name, d.format, &d});
      if (d.dtype == DType::f32) floats.push_back(find_format("tf32"));
    }
    floats.push_back(find_format("e8m0"));
  } else {
    for (const std::string& n : names) {
      const FormatRow r = find_format(n);
      (r.format ? floats : ints).push_back(r);
    }
  }
  print_float_rows(floats);
  if (!floats.empty() && !ints.empty()) fmt::print("\n");
  print_int_rows(ints);
  return 0;
}

struct CastTarget {
  std::string label;
  const FloatFormat* format;
};

std::vector<CastTarget> parse_targets(const std::string& list) {
  std::vector<CastTarget> out;
  std::size_t pos = 0;
  while (pos <= list.size()) {
    const std::size_t comma = std::min(list.find(',', pos), list.size());
    const std::string name = list.substr(pos, comma - pos);
    const FormatRow r = find_format(name);
    // E8M0 holds powers of two only; its roundings (MX floor / ceil) are not these modes.
    if (!r.format || r.format == &kFormatF64 || r.format == &kFormatE8M0FNU)
      throw UsageError("--to: '" + name +
                       "' is not a narrowing target; use f32, bf16, f16, "
                       "e4m3, e5m2, e2m1 or tf32");
    out.push_back({r.name, r.format});
    pos = comma + 1;
  }
  return out;
}

std::string format_value(double v) {
  if (std::isnan(v)) return std::signbit(v) ? "-nan" : "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return fmt::format("{:.9g}", v);
}

int run_cast(const CastOptions& o) {
  std::vector<ParsedValue> values;
  for (const std::string& token : o.values) {
    const auto v = parse_value(token);
    if (!v)
      throw UsageError("bad value '" + token +
                       "': expected a decimal within f64's range, a hex float (0x1.8p-3), inf, "
                       "nan, or bits:0xXXXXXXXX (raw f32 bits)");
    values.push_back(*v);
  }
  const std::vector<CastTarget> targets = parse_targets(o.to);
  Rounding mode;
  try {
    mode = parse_rounding(o.rounding);
  } catch (const Error&) {
    throw UsageError("--rounding: unknown mode '" + o.rounding + "'; valid: rne, rtz, stochastic");
  }
  OverflowConvention convention;
  try {
    convention = parse_overflow_convention(o.overflow);
  } catch (const Error&) {
    throw UsageError("--overflow: unknown convention '" + o.overflow +
                     "'; valid: satfinite, ml_dtypes");
  }

  fmt::print("rounding {}{}{}{}\n", rounding_name(mode), o.saturate ? ", saturating" : "",
             mode == Rounding::stochastic ? fmt::format(", seed {}", o.seed) : "",
             convention == OverflowConvention::satfinite ? "" : ", ml_dtypes overflow");
  for (std::size_t i = 0; i < values.size(); ++i) {
    const ParsedValue& v = values[i];
    const std::string& shown = o.values[i][0] == ' ' ? o.values[i].substr(1) : o.values[i];
    fmt::print("\n{}  = {} (f64 0x{:016X})\n", shown, format_value(v.value),
               std::bit_cast<uint64_t>(v.value));
    fmt::print("  {:<10} {:>10}  {:>16}  {:>10}\n", "target", "bits", "value", "rel.error");
    // Input i draws Philox word i of stream 0 under the seed (as a bulk conversion would).
    const uint32_t random = philox_u32(o.seed, 0, i);
    for (const CastTarget& t : targets) {
      uint32_t bits =
          v.from_f32_bits
              ? encode_bits<uint32_t>(*t.format, v.f32_bits, mode, o.saturate, random, convention)
              : encode_f64(*t.format, v.value, mode, o.saturate, random, convention);
      const double decoded = decode_f64(*t.format, bits);
      const int hex_digits = t.format->total_bits() <= 8 ? 2 : t.format->total_bits() <= 16 ? 4 : 8;
      if (t.format == &kFormatTF32) bits <<= 13;  // shown as the f32 word it is stored in
      std::string err = "-";
      if (decoded == v.value)
        err = "exact";
      else if (std::isfinite(v.value) && v.value != 0 && std::isfinite(decoded))
        err = fmt::format("{:+.3e}", (decoded - v.value) / v.value);
      else if (std::isfinite(v.value) && v.value != 0)
        err = std::isnan(decoded) ? "nan" : "overflow";
      fmt::print("  {:<10} {:>10}  {:>16}  {:>10}\n", t.label,
                 fmt::format("0x{:0{}X}", bits, hex_digits), format_value(decoded), err);
    }
  }
  return 0;
}

}  // namespace

void add_dtype_command(CLI::App& app, int& exit_code) {
  CLI::App* dtype = app.add_subcommand("dtype", "Number formats: the formats table and casts");
  // Not require_subcommand(): then an unknown word is reported by name ("frob" not expected).
  dtype->require_subcommand(0, 1);
  dtype->callback([dtype] {
    if (dtype->get_subcommands().empty())
      throw UsageError("dtype: a subcommand is required: info or cast (see mixprec dtype --help)");
  });

  auto names = std::make_shared<std::vector<std::string>>();
  CLI::App* info_cmd = dtype->add_subcommand(
      "info", "Print the formats table (bits, bias, range, precision, inf/NaN)");
  info_cmd->add_option("names", *names,
                       "Formats to show (default: every floating format and "
                       "tf32); e.g. bf16 f16 e4m3 i64");
  info_cmd->callback([names, &exit_code] { exit_code = run_info(*names); });

  auto cast = std::make_shared<CastOptions>();
  CLI::App* cast_cmd = dtype->add_subcommand(
      "cast", "Round values into narrow formats and show bits, decoded value and relative error");
  cast_cmd
      ->add_option("values", cast->values,
                   "Values: decimal, hex float (0x1.8p-3), inf, nan, or bits:0x3F848000")
      ->required();
  cast_cmd->add_option("--to", cast->to, "Comma-separated targets")
      ->default_str("bf16,f16,e4m3,e5m2,tf32");
  cast_cmd->add_option("--rounding", cast->rounding, "rne | rtz | stochastic")->default_str("rne");
  cast_cmd->add_option("--seed", cast->seed, "Seed for stochastic rounding")->default_str("0");
  cast_cmd->add_flag("--saturate", cast->saturate,
                     "Overflow (and, under satfinite, inf) to +-max finite instead of inf/NaN");
  cast_cmd
      ->add_option("--overflow", cast->overflow,
                   "satfinite: --saturate and rtz give +-max finite, inf included (CUDA "
                   "satfinite, torchao, IEEE); ml_dtypes: --saturate keeps +-inf, rtz overflows "
                   "to inf/NaN")
      ->default_str("satfinite");
  cast_cmd->callback([cast, &exit_code] { exit_code = run_cast(*cast); });
}

}  // namespace mixprec::cli
