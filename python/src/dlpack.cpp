// DLPack exchange: Tensor.__dlpack__ hands its memory out without a copy (the capsule keeps the
// storage alive); from_dlpack copies another library's CPU tensor (any strides) into a new
// mixprec tensor. So torch.from_dlpack(t) and mixprec.from_dlpack(torch_tensor) both work.
#include <pybind11/pybind11.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "bindings.h"
#include "dlpack_abi.h"
#include "mixprec/core/error.h"
#include "mixprec/tensor/tensor.h"

namespace mixprec::python {
namespace {

constexpr const char* kCapsule = "dltensor";
constexpr const char* kUsedCapsule = "used_dltensor";

dl::DataType dl_type(DType d) {
  switch (d) {
    case DType::f64:
      return {dl::kDLFloat, 64, 1};
    case DType::f32:
      return {dl::kDLFloat, 32, 1};
    case DType::f16:
      return {dl::kDLFloat, 16, 1};
    case DType::bf16:
      return {dl::kDLBfloat, 16, 1};
    case DType::i64:
      return {dl::kDLInt, 64, 1};
    case DType::i32:
      return {dl::kDLInt, 32, 1};
    case DType::u8:
      return {dl::kDLUInt, 8, 1};
    case DType::boolean:
      return {dl::kDLBool, 8, 1};
    case DType::f8_e4m3fn:
      return {dl::kDLFloat8_e4m3fn, 8, 1};
    case DType::f8_e5m2:
      return {dl::kDLFloat8_e5m2, 8, 1};
    case DType::f4_e2m1fn:
      return {dl::kDLFloat4_e2m1fn, 8, 1};  // one value a byte, as mixprec stores it
  }
  return {dl::kDLUInt, 8, 1};
}

DType from_dl_type(const dl::DataType& t) {
  MIXPREC_CHECK(t.lanes == 1, "from_dlpack", "vector types (lanes > 1) are not supported");
  const auto is = [&](uint8_t code, uint8_t bits) { return t.code == code && t.bits == bits; };
  if (is(dl::kDLFloat, 64)) return DType::f64;
  if (is(dl::kDLFloat, 32)) return DType::f32;
  if (is(dl::kDLFloat, 16)) return DType::f16;
  if (is(dl::kDLBfloat, 16)) return DType::bf16;
  if (is(dl::kDLInt, 64)) return DType::i64;
  if (is(dl::kDLInt, 32)) return DType::i32;
  if (is(dl::kDLUInt, 8)) return DType::u8;
  if (is(dl::kDLBool, 8)) return DType::boolean;
  if (is(dl::kDLFloat8_e4m3fn, 8)) return DType::f8_e4m3fn;
  if (is(dl::kDLFloat8_e5m2, 8)) return DType::f8_e5m2;
  if (is(dl::kDLFloat4_e2m1fn, 8)) return DType::f4_e2m1fn;
  throw Error("from_dlpack", "DLPack type code " + std::to_string(t.code) + " with " +
                                 std::to_string(t.bits) +
                                 " bits has no mixprec dtype (f64, f32, f16, bf16, i64, i32, u8, "
                                 "bool, fp8 and fp4 have)");
}

// What a handed-out tensor's capsule owns: the tensor (its storage) and the arrays DLPack
// points at.
struct Export {
  Tensor tensor;
  std::vector<int64_t> shape, strides;
  dl::ManagedTensor managed{};
};

void delete_export(dl::ManagedTensor* self) {
  delete static_cast<Export*>(self->manager_ctx);
}

py::capsule to_dlpack(const Tensor& t, const py::object& stream) {
  MIXPREC_CHECK(stream.is_none() || py::int_(stream).cast<int64_t>() == -1 ||
                    py::int_(stream).cast<int64_t>() == 0,
                "__dlpack__", "a CPU tensor has no stream to synchronise with");
  MIXPREC_CHECK(!t.is_meta(), "__dlpack__", "a meta tensor has no memory to share");
  auto* e = new Export{t, t.shape(), t.strides(), {}};
  dl::Tensor& d = e->managed.dl_tensor;
  d.data = t.numel() ? t.raw_data() : nullptr;
  d.device = {dl::kDLCPU, 0};
  d.ndim = t.ndim();
  d.dtype = dl_type(t.dtype());
  d.shape = e->shape.data();
  d.strides = e->strides.data();
  d.byte_offset = 0;
  e->managed.manager_ctx = e;
  e->managed.deleter = &delete_export;
  // A capsule never consumed (still named "dltensor") frees its tensor when it goes.
  return py::capsule(&e->managed, kCapsule, [](PyObject* cap) {
    if (!PyCapsule_IsValid(cap, kCapsule)) return;
    auto* m = static_cast<dl::ManagedTensor*>(PyCapsule_GetPointer(cap, kCapsule));
    if (m && m->deleter) m->deleter(m);
  });
}

// Copies n-d strided elements of `size` bytes from src into the contiguous dst.
void copy_strided(const uint8_t* src, uint8_t* dst, const std::vector<int64_t>& shape,
                  const std::vector<int64_t>& strides, std::size_t size) {
  const std::size_t nd = shape.size();
  int64_t total = 1;
  for (int64_t s : shape) total *= s;
  if (total == 0) return;
  std::vector<int64_t> index(nd, 0);
  for (int64_t k = 0; k < total; ++k) {
    int64_t off = 0;
    for (std::size_t i = 0; i < nd; ++i) off += index[i] * strides[i];
    std::memcpy(dst + static_cast<std::size_t>(k) * size, src + off * static_cast<int64_t>(size),
                size);
    for (std::size_t i = nd; i-- > 0;) {
      if (++index[i] < shape[i]) break;
      index[i] = 0;
    }
  }
}

Tensor from_dlpack(const py::object& obj) {
  py::object cap_obj = obj;
  if (!PyCapsule_CheckExact(obj.ptr())) {
    MIXPREC_CHECK(py::hasattr(obj, "__dlpack__"), "from_dlpack",
                  std::string("a ") + Py_TYPE(obj.ptr())->tp_name + " has no __dlpack__ method");
    cap_obj = obj.attr("__dlpack__")();
  }
  MIXPREC_CHECK(PyCapsule_IsValid(cap_obj.ptr(), kCapsule), "from_dlpack",
                "not an unconsumed DLPack capsule (named \"dltensor\")");
  auto* m = static_cast<dl::ManagedTensor*>(PyCapsule_GetPointer(cap_obj.ptr(), kCapsule));
  const dl::Tensor& d = m->dl_tensor;
  // The producer's tensor is released on every path once it is copied (or refused).
  struct Consume {
    PyObject* cap;
    dl::ManagedTensor* m;
    ~Consume() {
      PyCapsule_SetName(cap, kUsedCapsule);
      if (m->deleter) m->deleter(m);
    }
  } consume{cap_obj.ptr(), m};
  MIXPREC_CHECK(d.device.device_type == dl::kDLCPU || d.device.device_type == dl::kDLCUDAHost,
                "from_dlpack",
                "the tensor is on DLPack device type " + std::to_string(d.device.device_type) +
                    "; mixprec reads CPU memory only (move it with .cpu() first)");
  const DType dtype = from_dl_type(d.dtype);
  const std::vector<int64_t> shape(d.shape, d.shape + d.ndim);
  Tensor t = Tensor::empty(shape, dtype);
  if (t.numel() == 0) return t;
  std::vector<int64_t> strides(d.ndim);
  if (d.strides) {
    strides.assign(d.strides, d.strides + d.ndim);
  } else {
    int64_t s = 1;
    for (int i = d.ndim; i-- > 0;) {
      strides[i] = s;
      s *= shape[i];
    }
  }
  const auto* src = static_cast<const uint8_t*>(d.data) + d.byte_offset;
  copy_strided(src, static_cast<uint8_t*>(t.raw_data()), shape, strides, t.element_size());
  return t;
}

}  // namespace

void bind_dlpack(py::module_& m) {
  py::class_<Tensor> cls = py::reinterpret_borrow<py::class_<Tensor>>(m.attr("Tensor"));
  cls.def("__dlpack__", &to_dlpack, py::kw_only(), py::arg("stream") = py::none(),
          "A DLPack capsule sharing this tensor's memory (torch.from_dlpack reads it).");
  cls.def("__dlpack_device__", [](const Tensor&) { return py::make_tuple(int(dl::kDLCPU), 0); });
  m.def("from_dlpack", &from_dlpack, py::arg("x"),
        "A mixprec tensor copied from any object with __dlpack__ (a CPU torch.Tensor, a NumPy "
        "array) or from a DLPack capsule.");
}

}  // namespace mixprec::python
