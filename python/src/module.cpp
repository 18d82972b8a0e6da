// mixprec._mixprec: the compiled half of the Python package (python/mixprec/__init__.py is
// the other). mixprec::Error surfaces as mixprec.Error, a ValueError, with the same what()
// the command line prints.
#include <pybind11/pybind11.h>

#include "bindings.h"
#include "formats.h"
#include "mixprec/core/error.h"

namespace py = pybind11;

PYBIND11_MODULE(_mixprec, m) {
  m.doc() = "mixprec: number formats, tensors, safetensors, policies and training";
  static py::exception<mixprec::Error>& error =
      py::register_exception<mixprec::Error>(m, "Error", PyExc_ValueError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const mixprec::python::UsageError& e) {
      PyErr_SetString(error.ptr(), e.what());
    }
  });
  // pybind11 before 2.12 reads NumPy 1's array structs: __init__.py refuses NumPy 2 then.
  m.attr("_pybind11_version") = py::make_tuple(PYBIND11_VERSION_MAJOR, PYBIND11_VERSION_MINOR);
  mixprec::python::bind_numerics(m);
  mixprec::python::bind_tensor(m);
  mixprec::python::bind_dlpack(m);
  mixprec::python::bind_io(m);
  mixprec::python::bind_policy(m);
  mixprec::python::bind_train(m);
}
