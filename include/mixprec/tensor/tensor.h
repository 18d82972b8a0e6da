// Tensor: a shared handle to (storage, shape, strides, offset, dtype, device).
// Views (reshape, transpose, slice, ...) share storage and copy nothing. A `meta` tensor has
// shape and dtype but no bytes, so whole models can be sized before anything is allocated.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "mixprec/core/error.h"
#include "mixprec/numerics/dtype.h"
#include "mixprec/numerics/rounding.h"
#include "mixprec/numerics/storage_types.h"
#include "mixprec/tensor/generator.h"
#include "mixprec/tensor/shape.h"

namespace mixprec {

enum class Device : uint8_t { cpu, meta };
struct AutogradMeta;  // mixprec/autograd/node.h
class Node;
const char* device_name(Device d);
Device parse_device(const std::string& name);

// A block of bytes from the Allocator (none on `meta`), freed when the last tensor using it goes.
class Storage {
 public:
  Storage(std::size_t nbytes, DType dtype, Device device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  std::size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }

  // Fully sharded training frees a gathered weight after its unit's forward while the autograd
  // graph still holds views of it, then gathers it again before that unit's backward:
  // release() returns the bytes to the allocator (data() becomes null), reacquire() takes a
  // block of the same size again (contents undefined until written). Both are no-ops when
  // already in that state, and on meta.
  void release();
  void reacquire();
  bool resident() const { return data_ != nullptr || nbytes_ == 0 || device_ == Device::meta; }

 private:
  void* data_ = nullptr;
  std::size_t nbytes_;
  DType dtype_;  // the allocator counts bytes per dtype
  Device device_;
};

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape shape;
  Shape strides;   // in elements
  int64_t offset;  // in elements, into storage
  DType dtype;
  Device device;
  std::shared_ptr<AutogradMeta> autograd = nullptr;  // null: no grad, no history
};

class Tensor {
 public:
  Tensor() = default;  // undefined: holds nothing
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // ---- factories ----
  static Tensor empty(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu);
  static Tensor zeros(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu);
  static Tensor ones(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu);
  // Every element = value rounded once (nearest even) into dtype.
  static Tensor full(const Shape& shape, double value, DType dtype = DType::f32,
                     Device device = Device::cpu);
  // Copies `values` (as T) into a new tensor of `shape` (default: 1-d).
  template <class T>
  static Tensor from_vector(const std::vector<T>& values, Shape shape = {});
  // Values given as doubles, each rounded once into `dtype` with `opts`.
  static Tensor from_doubles(const std::vector<double>& values, const Shape& shape, DType dtype,
                             const ConvertOptions& opts = {});
  // start, start+step, ... below end (above, for a negative step).
  static Tensor arange(double start, double end, double step = 1.0, DType dtype = DType::f32);
  // Uniform on [low, high) and normal(mean, std), computed in f64 and rounded once into dtype.
  static Tensor uniform(const Shape& shape, double low, double high, Generator& gen,
                        DType dtype = DType::f32);
  static Tensor normal(const Shape& shape, double mean, double std, Generator& gen,
                       DType dtype = DType::f32);

  // ---- properties ----
  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl().shape; }
  const Shape& strides() const { return impl().strides; }
  int64_t offset() const { return impl().offset; }
  int ndim() const { return static_cast<int>(impl().shape.size()); }
  int64_t size(int64_t dim) const;
  int64_t numel() const { return shape_numel(impl().shape); }
  DType dtype() const { return impl().dtype; }
  Device device() const { return impl().device; }
  bool is_meta() const { return device() == Device::meta; }
  std::size_t element_size() const { return dtype_size(dtype()); }
  std::size_t nbytes() const { return static_cast<std::size_t>(numel()) * element_size(); }
  bool is_contiguous() const;
  bool shares_storage_with(const Tensor& other) const;
  // No other handle, view or tensor uses this tensor's storage.
  bool is_sole_owner() const;
  const std::shared_ptr<Storage>& storage() const { return impl().storage; }

  // Pointer to element 0 (after offset); throws on meta tensors or a dtype mismatch.
  void* raw_data() const;
  template <class T>
  T* data() const;

  // ---- views (no copy) ----
  Tensor view(Shape shape) const;  // requires a contiguous tensor; one dim may be -1
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor permute(const std::vector<int64_t>& dims) const;
  // Elements start, start+step, ... < end along dim (Python slice rules for negative and
  // out-of-range bounds; step >= 1).
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor select(int64_t dim, int64_t index) const;  // drops dim
  Tensor unsqueeze(int64_t dim) const;
  Tensor squeeze(int64_t dim) const;
  // Any geometry inside this tensor's storage (offset relative to this tensor's offset);
  // throws when an element would fall outside the storage. Views must not overlap for
  // their gradients to be right.
  Tensor as_strided(Shape shape, Shape strides, int64_t offset) const;

  // ---- copies ----
  Tensor reshape(Shape shape) const;  // a view when contiguous, else a copy
  Tensor contiguous() const;          // this tensor when already contiguous
  Tensor clone() const;
  // Converted copy (this tensor when dtype already matches). Narrowing rounds once with
  // `opts`; widening is exact.
  Tensor to(DType dtype, const ConvertOptions& opts = {}) const;
  // Writes src (same shape, any dtype) into this tensor's elements, converting with `opts`.
  void copy_from(const Tensor& src, const ConvertOptions& opts = {});

  // ---- autograd ----
  // Views, reshape, contiguous, clone and to() record history like any op; copy_from does not.
  bool requires_grad() const;
  // Leaves only: gradients reaching this tensor accumulate in `grad_dtype` (f32 by default,
  // so bf16/f16 activations still give f32 weight gradients).
  Tensor& set_requires_grad(bool enabled = true, DType grad_dtype = DType::f32);
  bool is_leaf() const;               // no grad_fn: made by the user, not by an op
  Tensor grad() const;                // undefined until a backward reached this leaf
  void set_grad(const Tensor& grad);  // replaces .grad (undefined clears it)
  std::shared_ptr<Node> grad_fn() const;
  Tensor detach() const;  // same storage and geometry, no history
  // Reverse pass from this tensor; `grad` defaults to 1 for a one-element tensor.
  void backward(const Tensor& grad = {}, bool retain_graph = false) const;
  // Internal: the autograd state (null when none), created on demand by the mutable form.
  AutogradMeta* autograd_meta() const { return impl().autograd.get(); }
  std::shared_ptr<AutogradMeta>& mutable_autograd_meta();

  // ---- op spellings as methods, as PyTorch code writes them (x.exp(), a.matmul(b)): each
  // is the function of the same name in mixprec/ops.h, defined in src/ops/tensor_methods.cpp.
  // (No norm(p): mixprec::norm(x, 1) reduces dim 1, so the p-norm is vector_norm only.)
  Tensor exp() const;
  Tensor log() const;
  Tensor log1p() const;
  Tensor expm1() const;
  Tensor sqrt() const;
  Tensor rsqrt() const;
  Tensor reciprocal() const;
  Tensor tanh() const;
  Tensor pow(double exponent) const;
  Tensor pow(const Tensor& exponent) const;
  Tensor sum() const;
  Tensor sum(int64_t dim, bool keepdim = false) const;
  Tensor mean() const;
  Tensor mean(int64_t dim, bool keepdim = false) const;
  Tensor prod() const;
  Tensor prod(int64_t dim, bool keepdim = false) const;
  Tensor cumsum(int64_t dim) const;
  Tensor logsumexp(int64_t dim, bool keepdim = false) const;
  Tensor norm() const;  // L2 over all elements
  Tensor matmul(const Tensor& other) const;
  Tensor mm(const Tensor& other) const;
  Tensor bmm(const Tensor& other) const;
  Tensor mv(const Tensor& vec) const;
  Tensor dot(const Tensor& other) const;
  Tensor addmm(const Tensor& m1, const Tensor& m2, double beta = 1.0, double alpha = 1.0) const;
  Tensor baddbmm(const Tensor& b1, const Tensor& b2, double beta = 1.0, double alpha = 1.0) const;
  Tensor addcmul(const Tensor& t1, const Tensor& t2, double value = 1.0) const;
  Tensor addcdiv(const Tensor& t1, const Tensor& t2, double value = 1.0) const;
  Tensor where(const Tensor& cond, const Tensor& other) const;  // where(cond, *this, other)
  Tensor index_put(const std::vector<Tensor>& indices, const Tensor& values,
                   bool accumulate = false) const;
  Tensor eq(const Tensor& other) const;
  Tensor ne(const Tensor& other) const;
  Tensor lt(const Tensor& other) const;
  Tensor le(const Tensor& other) const;
  Tensor gt(const Tensor& other) const;
  Tensor ge(const Tensor& other) const;
  Tensor eq(double other) const;
  Tensor ne(double other) const;
  Tensor lt(double other) const;
  Tensor le(double other) const;
  Tensor gt(double other) const;
  Tensor ge(double other) const;

  // ---- element access (tests, printing, small tensors) ----
  std::vector<double> to_doubles() const;
  double item() const;  // the single element of a one-element tensor
  std::string to_string(int max_elements = 16) const;

 private:
  const TensorImpl& impl() const;
  TensorImpl& impl();
  std::shared_ptr<TensorImpl> impl_;
};

template <class T>
T* Tensor::data() const {
  MIXPREC_CHECK(dtype_of<T>() == dtype(), "Tensor::data",
                std::string("tensor holds ") + dtype_name(dtype()) + ", asked for " +
                    dtype_name(dtype_of<T>()));
  return static_cast<T*>(raw_data());
}

template <class T>
Tensor Tensor::from_vector(const std::vector<T>& values, Shape shape) {
  if (shape.empty()) shape = {static_cast<int64_t>(values.size())};
  MIXPREC_CHECK(
      shape_numel(shape) == static_cast<int64_t>(values.size()), "Tensor::from_vector",
      std::to_string(values.size()) + " values do not fill shape " + shape_to_string(shape));
  Tensor t = empty(shape, dtype_of<T>());
  T* out = t.data<T>();
  for (std::size_t i = 0; i < values.size(); ++i) out[i] = values[i];
  return t;
}

// Copies the bytes of src (any strides) into the contiguous buffer dst, in row-major order.
void gather_contiguous(const Tensor& src, void* dst);
// Converts n contiguous elements between any two dtypes (one rounding when narrowing).
void convert_buffer(DType src_dtype, const void* src, DType dst_dtype, void* dst, std::size_t n,
                    const ConvertOptions& opts = {});

}  // namespace mixprec
