#include "mixprec/numerics/dtype.h"

#include <algorithm>
#include <cctype>

#include "mixprec/core/error.h"
#include "mixprec/core/spelling.h"

namespace mixprec {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

int int_rank(DType t) {
  switch (t) {
    case DType::boolean:
      return 0;
    case DType::u8:
      return 1;
    case DType::i32:
      return 2;
    default:
      return 3;  // i64
  }
}

}  // namespace

DType parse_dtype(std::string_view name) {
  const std::string key = lower(name);
  for (const DTypeInfo& row : kDTypeTable)
    if (key == row.name || in_comma_list(row.aliases, key)) return row.dtype;
  throw Error("dtype", "unknown dtype '" + std::string(name) + "'; valid: " + dtype_names());
}

std::string dtype_names() {
  std::string out;
  for (const DTypeInfo& row : kDTypeTable) {
    if (!out.empty()) out += ", ";
    out += row.name;
  }
  return out;
}

bool represents_exactly(DType b, DType a) {
  if (a == b) return true;
  const FloatFormat* fa = info(a).format;
  const FloatFormat* fb = info(b).format;
  if (fa && fb) {
    return fb->mant_bits >= fa->mant_bits && max_finite(*fb) >= max_finite(*fa) &&
           min_subnormal(*fb) <= min_subnormal(*fa) && (fb->has_inf || !fa->has_inf);
  }
  if (!fa && !fb) {
    if (a == DType::boolean) return true;
    if (b == DType::boolean) return false;
    if (a == DType::u8) return b != DType::boolean;
    return int_rank(b) >= int_rank(a);
  }
  if (fb) {  // integer into float: exact when the integer range fits the significand
    const int bits = a == DType::boolean ? 1 : a == DType::u8 ? 8 : a == DType::i32 ? 31 : 63;
    return fb->mant_bits + 1 >= bits && max_finite(*fb) >= pow2(bits);
  }
  return false;
}

DType promote(DType a, DType b) {
  if (represents_exactly(b, a)) return b;
  if (represents_exactly(a, b)) return a;
  const bool fa = is_floating(a), fb = is_floating(b);
  if (fa != fb) return fa ? a : b;  // int + float -> the float (PyTorch's rule)
  if (!fa) return int_rank(a) > int_rank(b) ? a : b;
  // Two floats, neither holding the other: the smallest float that holds both.
  const DTypeInfo* best = nullptr;
  for (const DTypeInfo& row : kDTypeTable) {
    if (row.kind != DTypeKind::floating) continue;
    if (!represents_exactly(row.dtype, a) || !represents_exactly(row.dtype, b)) continue;
    if (!best || row.size < best->size ||
        (row.size == best->size && row.format->mant_bits > best->format->mant_bits))
      best = &row;
  }
  return best->dtype;  // f64 always qualifies
}

}  // namespace mixprec
