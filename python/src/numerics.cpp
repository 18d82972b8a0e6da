// Number formats over NumPy arrays, as ml_dtypes offers them: the formats table, casts from
// f32/f64 to encodings (every rounding mode and overflow convention of ConvertOptions) and
// exact decoding back to f32.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "bindings.h"
#include "formats.h"
#include "mixprec/core/error.h"
#include "mixprec/numerics/convert.h"
#include "mixprec/numerics/e8m0.h"
#include "mixprec/numerics/encode.h"
#include "mixprec/numerics/fp4.h"
#include "mixprec/numerics/philox.h"
#include "mixprec/numerics/rounding.h"

namespace mixprec::python {
namespace {

// Bits of one encoding as cast() returns it and decode() reads it: f32 and tf32 in their
// 32-bit word, the 16-bit formats in 16, fp8, fp4 (one a byte) and e8m0 in 8.
int storage_bits(const FloatFormat& f) {
  if (&f == &kFormatTF32 || f.total_bits() > 16) return f.total_bits() > 32 ? 64 : 32;
  return f.total_bits() <= 8 ? 8 : 16;
}

py::dtype unsigned_dtype(int bits) {
  switch (bits) {
    case 8:
      return py::dtype::of<uint8_t>();
    case 16:
      return py::dtype::of<uint16_t>();
    case 32:
      return py::dtype::of<uint32_t>();
    default:
      return py::dtype::of<uint64_t>();
  }
}

const char* kind_name(DTypeKind k) {
  switch (k) {
    case DTypeKind::floating:
      return "float";
    case DTypeKind::signed_int:
      return "int";
    case DTypeKind::unsigned_int:
      return "uint";
    case DTypeKind::boolean:
      return "bool";
  }
  return "?";
}

std::vector<std::string> split_commas(const char* list) {
  std::vector<std::string> out;
  std::string cur;
  for (const char* p = list; *p; ++p) {
    if (*p == ',') {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += *p;
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

// Every float format but f64 (E8M0 by its own roundings: cast_e8m0).
bool is_cast_target(const FloatFormat* f) {
  return f && f != &kFormatF64;
}

py::dict format_row(const FormatRef& r, const std::vector<std::string>& aliases) {
  py::dict d;
  d["name"] = r.name;
  d["aliases"] = aliases;
  d["tensor_dtype"] = r.dtype != nullptr;
  d["kind"] = r.dtype ? kind_name(r.dtype->kind) : "float";
  d["itemsize"] = r.dtype ? r.dtype->size : storage_bits(*r.format) / 8;
  d["cast_target"] = is_cast_target(r.format);
  if (r.dtype) {
    d["computable"] = r.dtype->computable;
    d["accumulate"] = dtype_name(r.dtype->accumulate);
  }
  if (!r.format) {
    d["bits"] = r.dtype->size * 8;
    d["numpy"] = numpy_bits_name(r.dtype->dtype);
    return d;
  }
  const FloatFormat& f = *r.format;
  d["bits"] = f.total_bits();
  const py::str encoding = unsigned_dtype(storage_bits(f)).attr("name");
  d["numpy"] = r.dtype ? py::str(numpy_bits_name(r.dtype->dtype)) : encoding;
  d["encoding_dtype"] = encoding;
  d["exp_bits"] = f.exp_bits;
  d["mant_bits"] = f.mant_bits;
  d["bias"] = f.bias;
  d["has_sign"] = f.has_sign;
  d["has_inf"] = f.has_inf;
  d["has_nan"] = f.has_nan;
  d["has_subnormals"] = f.has_subnormals;
  d["max"] = max_finite(f);
  d["min_normal"] = min_normal(f);
  d["min_subnormal"] = min_subnormal(f);
  d["eps"] = epsilon(f);
  d["max_bits"] = f.max_finite_bits();
  if (f.has_nan) d["nan_bits"] = f.nan_bits();
  return d;
}

py::list dtypes() {
  py::list rows;
  for (const DTypeInfo& d : kDTypeTable) {
    rows.append(format_row({d.name, d.format, &d}, split_commas(d.aliases)));
    if (d.dtype == DType::f32) {
      rows.append(format_row({"tf32", &kFormatTF32, nullptr}, {}));
    }
  }
  std::vector<std::string> e8m0 = split_commas(kNonDTypeFormats[1].spellings);
  e8m0.erase(e8m0.begin());
  rows.append(format_row({kFormatE8M0FNU.name, &kFormatE8M0FNU, nullptr}, e8m0));
  return rows;
}

std::vector<py::ssize_t> shape_of(const py::array& a) {
  return std::vector<py::ssize_t>(a.shape(), a.shape() + a.ndim());
}

// Elementwise scalar encoding from f64 (tf32 and e2m1, which convert_from_f64 leaves out),
// with stochastic rounding's word i drawn as the bulk conversions draw it.
template <class Out, class Encode>
void encode_each(const double* src, Out* dst, std::size_t n, const ConvertOptions& o,
                 Encode encode) {
  const bool sr = o.rounding == Rounding::stochastic;
  for (std::size_t i = 0; i < n; ++i) {
    const uint32_t random = sr ? philox_u32(o.seed, o.stream, o.index_base + i) : 0;
    dst[i] = static_cast<Out>(encode(src[i], random));
  }
}

// Lists, scalars and other array-likes as NumPy reads them.
py::array as_array(const py::object& x) {
  if (py::isinstance<py::array>(x)) return py::reinterpret_borrow<py::array>(x);
  return py::module_::import("numpy").attr("asarray")(x);
}

// E8M0 (the MX block scale) rounds by its own rules (e8m0.h), named by `rounding`: floor (OCP
// MX), ceil (NVIDIA's RCEIL) or ml_dtypes (ml_dtypes' cast). f64 input is rounded to f32 first.
py::array cast_e8m0(const py::array& x, const std::string& rounding) {
  uint8_t (*rule)(float) = rounding == "floor"       ? &e8m0_floor
                           : rounding == "ceil"      ? &e8m0_ceil
                           : rounding == "ml_dtypes" ? &e8m0_from_f32_ml_dtypes
                                                     : nullptr;
  if (!rule)
    throw UsageError("e8m0 rounds by floor (OCP MX), ceil (RCEIL) or ml_dtypes, not '" + rounding +
                     "': pass rounding=\"floor\", \"ceil\" or \"ml_dtypes\"");
  auto src = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(x);
  if (!src) throw Error("cast", "the input is not an array of numbers");
  py::array_t<uint8_t> out(shape_of(src));
  const float* s = src.data();
  uint8_t* d = out.mutable_data();
  const auto n = static_cast<std::size_t>(src.size());
  py::gil_scoped_release unlocked;
  for (std::size_t i = 0; i < n; ++i) d[i] = rule(s[i]);
  return out;
}

py::array cast(const py::object& values, const std::string& name, const std::string& rounding,
               bool saturate, const std::string& overflow, uint64_t seed, uint64_t stream,
               uint64_t index_base) {
  const FormatRef r = find_format(name);
  if (r.format == &kFormatE8M0FNU) return cast_e8m0(as_array(values), rounding);
  if (!is_cast_target(r.format))
    throw UsageError(
        "'" + name +
        "' is not a narrowing target; use f32, bf16, f16, e4m3, e5m2, e2m1, tf32 or e8m0");
  const ConvertOptions opts =
      convert_options(rounding, saturate, overflow, seed, stream, index_base);
  const FloatFormat& f = *r.format;
  const py::array x = as_array(values);
  // f32 (and f16, widened exactly) cast from f32; everything else (f64, integers, bool) from
  // f64, so each value is rounded once.
  const py::dtype in = x.dtype();
  const bool from_f32 = in.kind() == 'f' && in.itemsize() <= 4;
  py::array src;
  if (from_f32)
    src = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(x);
  else
    src = py::array_t<double, py::array::c_style | py::array::forcecast>::ensure(x);
  if (!src) throw Error("cast", "the input is not an array of numbers");
  py::array out(unsigned_dtype(storage_bits(f)), shape_of(src));
  const auto n = static_cast<std::size_t>(src.size());
  const void* in_ptr = src.data();
  void* out_ptr = out.mutable_data();
  {
    py::gil_scoped_release unlocked;
    if (from_f32) {
      const auto* s = static_cast<const float*>(in_ptr);
      if (&f == &kFormatTF32) {
        round_to_tf32(s, static_cast<float*>(out_ptr), n, opts);
      } else if (&f == &kFormatE2M1FN) {
        e2m1_from_f32(std::span(s, n), std::span(static_cast<uint8_t*>(out_ptr), n), opts);
      } else {
        convert_from_f32(s, r.dtype->dtype, out_ptr, n, opts);
      }
    } else {
      const auto* s = static_cast<const double*>(in_ptr);
      if (&f == &kFormatTF32) {
        encode_each(s, static_cast<uint32_t*>(out_ptr), n, opts, [&](double v, uint32_t rnd) {
          return encode_f64(f, v, opts.rounding, opts.saturate, rnd, opts.overflow) << 13;
        });
      } else if (&f == &kFormatE2M1FN) {
        encode_each(s, static_cast<uint8_t*>(out_ptr), n, opts, [&](double v, uint32_t rnd) {
          return e2m1_from_f64(v, opts.rounding, rnd, opts.overflow);
        });
      } else {
        convert_from_f64(s, r.dtype->dtype, out_ptr, n, opts);
      }
    }
  }
  return out;
}

// The encodings as the unsigned type of the format's width: an unsigned or signed integer
// array of that width is read as it is (int8 views of fp8 included); any other integer array
// must hold values in [0, 2^bits).
py::array encodings(const py::array& bits, int width, const std::string& name) {
  const py::dtype in = bits.dtype();
  const char k = in.kind();
  if (k != 'u' && k != 'i' && k != 'b')
    throw Error("decode", "the encodings of " + name + " must be an integer array, not " +
                              in.attr("name").cast<std::string>());
  if ((k == 'u' || k == 'i') && in.itemsize() * 8 == width) {
    py::array same = py::array::ensure(bits, py::array::c_style);
    return same.attr("view")(unsigned_dtype(width));
  }
  auto wide = py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(bits);
  const int64_t* v = wide.data();
  const int64_t limit = width >= 63 ? INT64_MAX : (int64_t{1} << width);
  for (py::ssize_t i = 0; i < wide.size(); ++i)
    if (v[i] < 0 || v[i] >= limit)
      throw Error("decode", "encoding " + std::to_string(v[i]) + " at index " + std::to_string(i) +
                                " is not a " + std::to_string(width) + "-bit " + name + " pattern");
  return wide.attr("astype")(unsigned_dtype(width));
}

py::array decode(const py::object& values, const std::string& name) {
  const FormatRef r = find_format(name);
  if (!r.format || r.format == &kFormatF64)
    throw Error("decode", "'" + name +
                              "' has no encodings to decode to f32; use bf16, f16, e4m3, e5m2, "
                              "e2m1, e8m0, tf32 or f32");
  const FloatFormat& f = *r.format;
  const int width = storage_bits(f);
  py::array enc = encodings(as_array(values), width, r.name);
  const auto n = static_cast<std::size_t>(enc.size());
  if (&f == &kFormatE2M1FN) {
    const auto* b = static_cast<const uint8_t*>(enc.data());
    for (std::size_t i = 0; i < n; ++i)
      if (b[i] > 0xF)
        throw Error("decode", "encoding " + std::to_string(b[i]) + " at index " +
                                  std::to_string(i) + " is not a 4-bit f4_e2m1fn pattern");
  }
  py::array_t<float> out(shape_of(enc));
  const void* src = enc.data();
  float* dst = out.mutable_data();
  {
    py::gil_scoped_release unlocked;
    if (&f == &kFormatTF32 || &f == &kFormatF32) {
      std::memcpy(dst, src, n * sizeof(float));
    } else if (&f == &kFormatE8M0FNU) {
      const auto* b = static_cast<const uint8_t*>(src);
      for (std::size_t i = 0; i < n; ++i) dst[i] = e8m0_to_f32(b[i]);
    } else {
      widen_to_f32(r.dtype->dtype, src, dst, n);
    }
  }
  return out;
}

}  // namespace

const char* numpy_bits_name(DType dtype) {
  switch (dtype) {
    case DType::f64:
      return "float64";
    case DType::f32:
      return "float32";
    case DType::bf16:
    case DType::f16:
      return "uint16";
    case DType::i32:
      return "int32";
    case DType::i64:
      return "int64";
    case DType::boolean:
      return "bool";
    case DType::f8_e4m3fn:
    case DType::f8_e5m2:
    case DType::f4_e2m1fn:
    case DType::u8:
      return "uint8";
  }
  return "uint8";
}

void bind_numerics(py::module_& m) {
  m.def("dtypes", &dtypes,
        "Every format: the tensor dtypes, tf32 and the E8M0 block scale, with their "
        "properties (bits, exponent and mantissa widths, bias, range, inf/NaN rules).");
  m.def("cast", &cast, py::arg("x"), py::arg("format"), py::kw_only(), py::arg("rounding") = "rne",
        py::arg("saturate") = false, py::arg("overflow") = "satfinite", py::arg("seed") = 0,
        py::arg("stream") = 0, py::arg("index_base") = 0,
        "Rounds the values of x (f32, or f64 with one rounding) into `format` and returns the "
        "encodings: uint16 for bf16/f16, uint8 for fp8 and e2m1, uint32 (the f32 word) for f32 "
        "and tf32. e8m0 takes rounding=\"floor\", \"ceil\" or \"ml_dtypes\".");
  m.def("decode", &decode, py::arg("bits"), py::arg("format"),
        "The exact f32 values of encodings of `format` (every format but f64 fits in f32).");
  m.def(
      "isa", [] { return isa_name(Isa::best); },
      "The conversion kernels this CPU runs: avx2 or scalar.");
}

}  // namespace mixprec::python
