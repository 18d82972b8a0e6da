// The pieces of the Python module mixprec._mixprec, one file each (module.cpp calls them).
#pragma once

#include <pybind11/pybind11.h>

#include <string>

#include "mixprec/numerics/dtype.h"

namespace mixprec::python {

namespace py = pybind11;

void bind_numerics(py::module_& m);  // numerics.cpp: dtypes(), cast(), decode()
void bind_tensor(py::module_& m);    // tensor.cpp: Tensor, NumPy bytes in and out
void bind_dlpack(py::module_& m);    // dlpack.cpp: __dlpack__, __dlpack_device__, from_dlpack
void bind_io(py::module_& m);        // io.cpp: load_safetensors, save_safetensors
void bind_policy(py::module_& m);    // policy.cpp: Policy, parse_policy
void bind_train(py::module_& m);     // train.cpp: train()

// The NumPy dtype name a dtype's elements are handed over in: the native type where NumPy has
// one, else the unsigned integer of its width (bf16 -> "uint16", fp8 and fp4 -> "uint8").
const char* numpy_bits_name(DType dtype);

}  // namespace mixprec::python
