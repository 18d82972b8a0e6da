// safetensors files: load_safetensors(path) -> {name: Tensor}, save_safetensors(path, tensors).
// python/mixprec/__init__.py turns NumPy arrays (and DLPack producers) into tensors first.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <map>
#include <string>
#include <utility>

#include "bindings.h"
#include "mixprec/io/safetensors.h"

namespace mixprec::python {
namespace {

py::object load(const std::string& path, bool with_metadata) {
  io::SafetensorsFile file;
  {
    py::gil_scoped_release unlocked;
    file = io::load_safetensors(path);
  }
  py::dict tensors;
  for (auto& [name, t] : file.tensors) tensors[py::str(name)] = py::cast(t);
  if (!with_metadata) return tensors;
  return py::make_tuple(tensors, file.metadata);
}

void save(const std::string& path, const py::dict& tensors, const io::Metadata& metadata) {
  io::TensorList list;
  for (const auto& [key, value] : tensors)
    list.emplace_back(py::cast<std::string>(key), py::cast<Tensor>(value));
  py::gil_scoped_release unlocked;
  io::save_safetensors(path, list, metadata);
}

}  // namespace

void bind_io(py::module_& m) {
  m.def("_load_safetensors", &load, py::arg("path"), py::arg("metadata") = false);
  m.def("_save_safetensors", &save, py::arg("path"), py::arg("tensors"),
        py::arg("metadata") = io::Metadata{});
}

}  // namespace mixprec::python
