// The DLPack C ABI (dlpack.h, unversioned "dltensor" capsules as PyTorch, NumPy and JAX
// exchange them): spelled out here because Debian packages no dlpack header.
#pragma once

#include <cstdint>

namespace mixprec::python::dl {

enum DeviceType : int32_t { kDLCPU = 1, kDLCUDAHost = 3 };

enum TypeCode : uint8_t {
  kDLInt = 0,
  kDLUInt = 1,
  kDLFloat = 2,
  kDLBfloat = 4,
  kDLBool = 6,
  // DLPack 1.1's low-precision float codes.
  kDLFloat8_e4m3fn = 10,
  kDLFloat8_e5m2 = 12,
  kDLFloat4_e2m1fn = 17,
};

struct Device {
  int32_t device_type;
  int32_t device_id;
};

struct DataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};

struct Tensor {
  void* data;
  Device device;
  int32_t ndim;
  DataType dtype;
  int64_t* shape;
  int64_t* strides;  // in elements; null: C-contiguous
  uint64_t byte_offset;
};

struct ManagedTensor {
  Tensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(ManagedTensor* self);
};

}  // namespace mixprec::python::dl
