// mixprec.Tensor: a handle on a mixprec::Tensor, filled from and read into NumPy arrays. The
// element bytes cross as NumPy's type of the dtype, or the unsigned integer of its width where
// NumPy has none (bf16, f16, fp8, fp4); python/mixprec/__init__.py views them as ml_dtypes'
// types when that package is importable.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "bindings.h"
#include "formats.h"
#include "mixprec/core/error.h"
#include "mixprec/tensor/tensor.h"

namespace mixprec::python {
namespace {

py::tuple to_tuple(const Shape& s) {
  py::tuple t(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) t[i] = s[i];
  return t;
}

DType tensor_dtype(const std::string& name) {
  const FormatRef r = find_format(name);
  MIXPREC_CHECK(r.dtype, "Tensor", "'" + name + "' is a numerics format, not a tensor dtype");
  return r.dtype->dtype;
}

// A new tensor holding the bytes of a C-contiguous array (any NumPy dtype of the right width).
Tensor from_bytes(const py::array& bytes, const Shape& shape, const std::string& dtype_name) {
  const DType dtype = tensor_dtype(dtype_name);
  Tensor t = Tensor::empty(shape, dtype);
  MIXPREC_CHECK(bytes.flags() & py::array::c_style, "Tensor.from_numpy",
                "internal: the array must be C-contiguous");
  MIXPREC_CHECK(static_cast<std::size_t>(bytes.nbytes()) == t.nbytes(), "Tensor.from_numpy",
                std::to_string(bytes.nbytes()) + " bytes do not fill a " + dtype_name +
                    " tensor of shape " + shape_to_string(shape));
  if (dtype == DType::boolean) {
    const auto* b = static_cast<const uint8_t*>(bytes.data());
    for (py::ssize_t i = 0; i < bytes.nbytes(); ++i)
      MIXPREC_CHECK(b[i] <= 1, "Tensor.from_numpy",
                    "bool element " + std::to_string(i) + " is " + std::to_string(b[i]));
  }
  if (t.nbytes()) std::memcpy(t.raw_data(), bytes.data(), t.nbytes());
  return t;
}

// The tensor's elements as a NumPy array sharing its memory (a contiguous copy first when the
// tensor is a strided view); the array keeps the storage alive.
py::array bits(const Tensor& t) {
  MIXPREC_CHECK(!t.is_meta(), "Tensor.numpy", "a meta tensor has no elements");
  Tensor c = t.contiguous();
  std::vector<py::ssize_t> shape(c.shape().begin(), c.shape().end());
  auto* owner = new Tensor(c);
  py::capsule base(owner, [](void* p) { delete static_cast<Tensor*>(p); });
  const py::dtype dt(numpy_bits_name(c.dtype()));
  return py::array(dt, shape, c.nbytes() ? c.raw_data() : nullptr, base);
}

Tensor to(const Tensor& t, const std::string& dtype, const std::string& rounding, bool saturate,
          const std::string& overflow, uint64_t seed, uint64_t stream, uint64_t index_base) {
  const ConvertOptions opts =
      convert_options(rounding, saturate, overflow, seed, stream, index_base);
  const DType d = tensor_dtype(dtype);
  py::gil_scoped_release unlocked;
  return t.to(d, opts);
}

}  // namespace

void bind_tensor(py::module_& m) {
  py::class_<Tensor>(m, "Tensor",
                     "A mixprec tensor (CPU or meta). Build one with Tensor.from_numpy, "
                     "from_dlpack, zeros/ones/full or load_safetensors.")
      .def_static("_from_bytes", &from_bytes, py::arg("bytes"), py::arg("shape"), py::arg("dtype"))
      .def("_bits", &bits)
      .def_property_readonly("shape", [](const Tensor& t) { return to_tuple(t.shape()); })
      .def_property_readonly("strides", [](const Tensor& t) { return to_tuple(t.strides()); })
      .def_property_readonly("dtype", [](const Tensor& t) { return dtype_name(t.dtype()); })
      .def_property_readonly("device", [](const Tensor& t) { return device_name(t.device()); })
      .def_property_readonly("ndim", &Tensor::ndim)
      .def_property_readonly("numel", &Tensor::numel)
      .def_property_readonly("nbytes", &Tensor::nbytes)
      .def_property_readonly("itemsize", &Tensor::element_size)
      .def("is_contiguous", &Tensor::is_contiguous)
      .def("contiguous", &Tensor::contiguous)
      .def("clone", &Tensor::clone)
      .def(
          "reshape", [](const Tensor& t, const Shape& s) { return t.reshape(s); }, py::arg("shape"))
      .def("transpose", &Tensor::transpose, py::arg("dim0"), py::arg("dim1"))
      .def("to", &to, py::arg("dtype"), py::kw_only(), py::arg("rounding") = "rne",
           py::arg("saturate") = false, py::arg("overflow") = "satfinite", py::arg("seed") = 0,
           py::arg("stream") = 0, py::arg("index_base") = 0,
           "A converted copy: narrowing rounds once with these options, widening is exact.")
      .def("item", &Tensor::item)
      .def("tolist_flat", &Tensor::to_doubles, "Every element as a Python float, row-major.")
      .def("__len__",
           [](const Tensor& t) {
             MIXPREC_CHECK(t.ndim() > 0, "Tensor", "len() of a 0-d tensor");
             return t.size(0);
           })
      .def("__repr__", [](const Tensor& t) { return t.to_string(); });

  m.def(
      "zeros",
      [](const Shape& s, const std::string& d) { return Tensor::zeros(s, tensor_dtype(d)); },
      py::arg("shape"), py::arg("dtype") = "f32");
  m.def(
      "ones", [](const Shape& s, const std::string& d) { return Tensor::ones(s, tensor_dtype(d)); },
      py::arg("shape"), py::arg("dtype") = "f32");
  m.def(
      "full",
      [](const Shape& s, double v, const std::string& d) {
        return Tensor::full(s, v, tensor_dtype(d));
      },
      py::arg("shape"), py::arg("value"), py::arg("dtype") = "f32");
  m.def(
      "empty_meta",
      [](const Shape& s, const std::string& d) {
        return Tensor::empty(s, tensor_dtype(d), Device::meta);
      },
      py::arg("shape"), py::arg("dtype") = "f32",
      "A tensor with shape and dtype but no bytes: sizes models before allocating them.");
}

}  // namespace mixprec::python
