// Tensor handles, storage and the views that share it.
#include "mixprec/tensor/tensor.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>

#include "mixprec/tensor/allocator.h"
#include "mixprec/tensor/history_hooks.h"

namespace mixprec {

const char* device_name(Device d) {
  return d == Device::cpu ? "cpu" : "meta";
}

Device parse_device(const std::string& name) {
  if (name == "cpu") return Device::cpu;
  if (name == "meta") return Device::meta;
  throw Error("device", "unknown device '" + name + "'; valid: cpu, meta");
}

Storage::Storage(std::size_t nbytes, DType dtype, Device device)
    : nbytes_(nbytes), dtype_(dtype), device_(device) {
  if (device == Device::cpu) data_ = Allocator::instance().allocate(nbytes, dtype);
}

Storage::~Storage() {
  if (data_) Allocator::instance().deallocate(data_, nbytes_, dtype_);
}

void Storage::release() {
  if (!data_) return;
  Allocator::instance().deallocate(data_, nbytes_, dtype_);
  data_ = nullptr;
}

void Storage::reacquire() {
  if (data_ || device_ != Device::cpu) return;
  data_ = Allocator::instance().allocate(nbytes_, dtype_);
}

TensorImpl& Tensor::impl() {
  MIXPREC_CHECK(impl_ != nullptr, "Tensor", "use of an undefined tensor");
  return *impl_;
}

const TensorImpl& Tensor::impl() const {
  MIXPREC_CHECK(impl_ != nullptr, "Tensor", "use of an undefined tensor");
  return *impl_;
}

// A new leaf on the same storage, with no history (autograd fields left empty).
Tensor Tensor::detach() const {
  const TensorImpl& i = impl();
  return Tensor(std::make_shared<TensorImpl>(
      TensorImpl{i.storage, i.shape, i.strides, i.offset, i.dtype, i.device, nullptr}));
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  const int64_t n = shape_numel(shape);
  MIXPREC_CHECK(static_cast<uint64_t>(n) <= SIZE_MAX / dtype_size(dtype), "Tensor::empty",
                "shape " + shape_to_string(shape) + " of " + dtype_name(dtype) +
                    " needs more bytes than size_t holds");
  auto storage =
      std::make_shared<Storage>(static_cast<std::size_t>(n) * dtype_size(dtype), dtype, device);
  return Tensor(std::make_shared<TensorImpl>(
      TensorImpl{std::move(storage), shape, contiguous_strides(shape), 0, dtype, device}));
}

int64_t Tensor::size(int64_t dim) const {
  return shape()[static_cast<size_t>(normalize_dim(dim, ndim(), "Tensor::size"))];
}

bool Tensor::is_contiguous() const {
  return numel() == 0 || is_row_major(shape(), strides());
}

bool Tensor::shares_storage_with(const Tensor& other) const {
  return defined() && other.defined() && storage() == other.storage();
}

bool Tensor::is_sole_owner() const {
  return impl_ && impl_.use_count() == 1 && storage().use_count() == 1;
}

void* Tensor::raw_data() const {
  MIXPREC_CHECK(!is_meta(), "Tensor::data", "a meta tensor has no data");
  MIXPREC_CHECK(storage()->resident(), "Tensor::data",
                "the storage was released (a sharded unit's gathered weight used outside its "
                "forward or backward)");
  return static_cast<char*>(storage()->data()) + offset() * static_cast<int64_t>(element_size());
}

namespace {

Tensor make_view(const Tensor& base, Shape shape, Shape strides, int64_t offset) {
  Tensor view(std::make_shared<TensorImpl>(TensorImpl{
      base.storage(), std::move(shape), std::move(strides), offset, base.dtype(), base.device()}));
  if (const auto record = detail::history_hooks().record_view) record(base, view);
  return view;
}

}  // namespace

Tensor Tensor::view(Shape shape) const {
  MIXPREC_CHECK(is_contiguous(), "Tensor::view",
                "view of a non-contiguous tensor " + shape_to_string(this->shape()) +
                    "; use reshape() or contiguous()");
  shape = infer_shape(std::move(shape), numel(), "Tensor::view");
  Shape strides = contiguous_strides(shape);
  return make_view(*this, std::move(shape), std::move(strides), offset());
}

Tensor Tensor::reshape(Shape shape) const {
  return is_contiguous() ? view(std::move(shape)) : contiguous().view(std::move(shape));
}

Tensor Tensor::transpose(int64_t dim0, int64_t dim1) const {
  const int a = normalize_dim(dim0, ndim(), "Tensor::transpose");
  const int b = normalize_dim(dim1, ndim(), "Tensor::transpose");
  Shape sh = shape(), st = strides();
  std::swap(sh[static_cast<size_t>(a)], sh[static_cast<size_t>(b)]);
  std::swap(st[static_cast<size_t>(a)], st[static_cast<size_t>(b)]);
  return make_view(*this, std::move(sh), std::move(st), offset());
}

Tensor Tensor::permute(const std::vector<int64_t>& dims) const {
  MIXPREC_CHECK(static_cast<int>(dims.size()) == ndim(), "Tensor::permute",
                "expected " + std::to_string(ndim()) + " dims, got " + std::to_string(dims.size()));
  Shape sh(dims.size()), st(dims.size());
  std::vector<bool> seen(dims.size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    const auto d = static_cast<size_t>(normalize_dim(dims[i], ndim(), "Tensor::permute"));
    MIXPREC_CHECK(!seen[d], "Tensor::permute", "dim " + std::to_string(dims[i]) + " repeated");
    seen[d] = true;
    sh[i] = shape()[d];
    st[i] = strides()[d];
  }
  return make_view(*this, std::move(sh), std::move(st), offset());
}

Tensor Tensor::slice(int64_t dim, int64_t start, int64_t end, int64_t step) const {
  const auto d = static_cast<size_t>(normalize_dim(dim, ndim(), "Tensor::slice"));
  MIXPREC_CHECK(step >= 1, "Tensor::slice", "step must be >= 1, got " + std::to_string(step));
  const int64_t n = shape()[d];
  auto clamp = [n](int64_t i) { return std::clamp<int64_t>(i < 0 ? i + n : i, 0, n); };
  start = clamp(start);
  end = std::max(clamp(end), start);
  Shape sh = shape(), st = strides();
  sh[d] = end > start ? 1 + (end - start - 1) / step : 0;  // no overflow for a huge step
  if (sh[d] > 1) st[d] = strides()[d] * step;  // bounded by the storage when > 1 element
  return make_view(*this, std::move(sh), std::move(st), offset() + start * strides()[d]);
}

Tensor Tensor::select(int64_t dim, int64_t index) const {
  const auto d = static_cast<size_t>(normalize_dim(dim, ndim(), "Tensor::select"));
  const int64_t n = shape()[d];
  const int64_t i = index < 0 ? index + n : index;
  MIXPREC_CHECK(i >= 0 && i < n, "Tensor::select",
                "index " + std::to_string(index) + " out of range for size " + std::to_string(n));
  Shape sh = shape(), st = strides();
  sh.erase(sh.begin() + static_cast<int64_t>(d));
  st.erase(st.begin() + static_cast<int64_t>(d));
  return make_view(*this, std::move(sh), std::move(st), offset() + i * strides()[d]);
}

Tensor Tensor::unsqueeze(int64_t dim) const {
  const auto d = static_cast<size_t>(normalize_dim(dim, ndim() + 1, "Tensor::unsqueeze"));
  Shape sh = shape(), st = strides();
  const int64_t stride = d < st.size() ? st[d] * sh[d] : 1;
  sh.insert(sh.begin() + static_cast<int64_t>(d), 1);
  st.insert(st.begin() + static_cast<int64_t>(d), stride);
  return make_view(*this, std::move(sh), std::move(st), offset());
}

Tensor Tensor::squeeze(int64_t dim) const {
  const auto d = static_cast<size_t>(normalize_dim(dim, ndim(), "Tensor::squeeze"));
  MIXPREC_CHECK(shape()[d] == 1, "Tensor::squeeze",
                "dim " + std::to_string(dim) + " has size " + std::to_string(shape()[d]));
  Shape sh = shape(), st = strides();
  sh.erase(sh.begin() + static_cast<int64_t>(d));
  st.erase(st.begin() + static_cast<int64_t>(d));
  return make_view(*this, std::move(sh), std::move(st), offset());
}

Tensor Tensor::as_strided(Shape shape, Shape strides, int64_t offset) const {
  MIXPREC_CHECK(shape.size() == strides.size(), "Tensor::as_strided",
                "shape " + shape_to_string(shape) + " and strides " + shape_to_string(strides) +
                    " differ in rank");
  const int64_t start = this->offset() + offset;
  int64_t last = start;
  bool empty = false;
  for (size_t i = 0; i < shape.size(); ++i) {
    MIXPREC_CHECK(
        shape[i] >= 0 && strides[i] >= 0, "Tensor::as_strided",
        "negative size or stride in " + shape_to_string(shape) + " / " + shape_to_string(strides));
    if (shape[i] == 0)
      empty = true;
    else
      last += (shape[i] - 1) * strides[i];
  }
  const int64_t capacity = static_cast<int64_t>(storage()->nbytes() / element_size());
  MIXPREC_CHECK(empty || (start >= 0 && (is_meta() || last < capacity)), "Tensor::as_strided",
                "geometry " + shape_to_string(shape) + " / " + shape_to_string(strides) +
                    " at offset " + std::to_string(start) + " leaves the storage of " +
                    std::to_string(capacity) + " elements");
  return make_view(*this, std::move(shape), std::move(strides), start);
}

double Tensor::item() const {
  MIXPREC_CHECK(numel() == 1, "Tensor::item",
                "item() needs one element, tensor has shape " + shape_to_string(shape()));
  return to_doubles()[0];
}

std::string Tensor::to_string(int max_elements) const {
  std::string out = std::string("Tensor(") + dtype_name(dtype()) + ", " + shape_to_string(shape());
  if (is_meta()) return out + ", meta)";
  out += ", [";
  const std::vector<double> v = to_doubles();
  for (size_t i = 0; i < v.size() && i < static_cast<size_t>(max_elements); ++i) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%s%.6g", i ? ", " : "", v[i]);
    out += buf;
  }
  if (v.size() > static_cast<size_t>(max_elements)) out += ", ...";
  return out + "])";
}

}  // namespace mixprec
