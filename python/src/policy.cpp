// Precision policies: parse_policy(text) -> Policy, with the fields of MixedPrecisionPolicy and
// str() = amp::to_string (parse_policy(str(p)) == p).
#include <pybind11/operators.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "bindings.h"
#include "mixprec/amp/autocast_table.h"
#include "mixprec/amp/linear_recipe.h"
#include "mixprec/amp/policy.h"

namespace mixprec::python {
namespace {

using amp::MixedPrecisionPolicy;

// to_string's key=value pairs, in its order: every field, named as parse_policy reads them.
py::dict fields(const MixedPrecisionPolicy& p) {
  py::dict out;
  const std::string text = amp::to_string(p);
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t comma = text.find(',', pos);
    if (comma == std::string::npos) comma = text.size();
    const std::string item = text.substr(pos, comma - pos);
    const std::size_t eq = item.find('=');
    out[py::str(item.substr(0, eq))] = eq == std::string::npos ? "" : item.substr(eq + 1);
    pos = comma + 1;
  }
  return out;
}

py::object field_or_none(const MixedPrecisionPolicy& p, const char* key) {
  py::dict f = fields(p);
  return f.contains(key) ? py::object(f[key]) : py::object(py::none());
}

}  // namespace

void bind_policy(py::module_& m) {
  py::class_<MixedPrecisionPolicy>(m, "Policy",
                                   "A precision policy: the dtype of each part of a training "
                                   "step (parse_policy builds one).")
      .def_property_readonly("name",
                             [](const MixedPrecisionPolicy& p) { return amp::display_name(p); })
      .def_property_readonly(
          "param_dtype", [](const MixedPrecisionPolicy& p) { return dtype_name(p.param_dtype); })
      .def_property_readonly(
          "compute_dtype",
          [](const MixedPrecisionPolicy& p) { return dtype_name(p.compute_dtype); })
      .def_property_readonly(
          "reduce_dtype", [](const MixedPrecisionPolicy& p) { return dtype_name(p.reduce_dtype); })
      .def_property_readonly(
          "output_dtype", [](const MixedPrecisionPolicy& p) { return dtype_name(p.output_dtype); })
      .def_property_readonly(
          "master_dtype",
          [](const MixedPrecisionPolicy& p) { return dtype_name(p.master_dtype()); })
      .def_readonly("f32_master", &MixedPrecisionPolicy::f32_master)
      .def_property_readonly(
          "master_update", [](const MixedPrecisionPolicy& p) { return field_or_none(p, "update"); })
      .def_property_readonly("matmul_precision",
                             [](const MixedPrecisionPolicy& p) {
                               return amp::matmul_precision_name(p.matmul_precision);
                             })
      .def_readonly("loss_scaling", &MixedPrecisionPolicy::loss_scaling)
      .def_property_readonly("linear_recipe",
                             [](const MixedPrecisionPolicy& p) -> py::object {
                               if (!p.linear_recipe) return py::none();
                               return py::str(p.linear_recipe->name);
                             })
      .def_readonly("linear_skip", &MixedPrecisionPolicy::linear_skip)
      .def_property_readonly("grouped_recipe",
                             [](const MixedPrecisionPolicy& p) -> py::object {
                               if (!p.grouped_recipe) return py::none();
                               return py::str(p.grouped_recipe->name);
                             })
      .def_readonly("grouped_fqns", &MixedPrecisionPolicy::grouped_fqns)
      .def_property_readonly(
          "accumulator",
          [](const MixedPrecisionPolicy& p) { return field_or_none(p, "accumulator"); })
      .def_readonly("save_fp8_activations", &MixedPrecisionPolicy::save_fp8_activations)
      .def_readonly("save_fp8_grouped_activations",
                    &MixedPrecisionPolicy::save_fp8_grouped_activations)
      .def_property_readonly(
          "autocast_ops",
          [](const MixedPrecisionPolicy& p) {
            return amp::kAutocastOpTableNames[static_cast<std::size_t>(p.autocast_ops)];
          })
      .def("as_dict", &fields, "Every field, keyed as parse_policy's key=value form reads them.")
      .def(py::self == py::self)
      .def("__str__", [](const MixedPrecisionPolicy& p) { return amp::to_string(p); })
      .def("__repr__", [](const MixedPrecisionPolicy& p) {
        return "mixprec.parse_policy('" + amp::display_name(p) + "')";
      });

  m.def("parse_policy", &amp::parse_policy, py::arg("text"),
        "A policy from a preset name (bf16-mixed, ...), Keras's mixed_bfloat16, jmp's "
        "params=...,compute=...,output=... form, a bare dtype or a linear recipe's name.");
  m.def("preset_names", [] {
    std::vector<std::string> names;
    const std::string all = amp::preset_names();
    std::size_t pos = 0;
    while (pos <= all.size()) {
      std::size_t comma = all.find(',', pos);
      if (comma == std::string::npos) comma = all.size();
      std::string n = all.substr(pos, comma - pos);
      while (!n.empty() && n.front() == ' ') n.erase(n.begin());
      if (!n.empty()) names.push_back(n);
      pos = comma + 1;
    }
    return names;
  });
}

}  // namespace mixprec::python
