// Checkpoint readers (every format of mixq/formats/checkpoint.hpp) and mixq's own writer.
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.hpp"
#include "mixq/formats/checkpoint.hpp"

namespace mixq_py {

void bind_formats(nb::module_& m) {
  m.def("inspect", [](const std::string& path) {
        mixq::formats::CheckpointInfo info;
        {
          nb::gil_scoped_release release;
          info = mixq::formats::inspect_checkpoint(path);
        }
        nb::list tensors;
        for (const auto& t : info.tensors) {
          nb::dict d;
          d["name"] = t.name;
          d["type"] = t.type;
          d["shape"] = nb::tuple(nb::cast(t.shape));
          d["bytes"] = t.bytes;
          d["bits_per_weight"] = t.bits_per_weight;
          d["is_weight"] = t.is_weight;
          tensors.append(d);
        }
        nb::dict metadata;
        for (const auto& [k, v] : info.metadata) metadata[nb::cast(k)] = v;
        nb::dict out;
        out["path"] = info.path;
        out["format"] = info.format;
        out["metadata"] = metadata;
        out["tensors"] = tensors;
        return out;
      }, nb::arg("path"));

  m.def("load", [](const std::string& path, const std::string& tensor) {
        nb::gil_scoped_release release;
        return mixq::formats::load_weight(path, tensor);
      }, nb::arg("path"), nb::arg("tensor"));

  m.def("save", [](const std::string& path,
                   const std::vector<std::pair<std::string, mixq::QuantizedWeight>>& weights,
                   const std::vector<std::pair<std::string, std::string>>& metadata) {
        nb::gil_scoped_release release;
        mixq::formats::save_mixq_safetensors(path, weights, metadata);
      }, nb::arg("path"), nb::arg("weights"), nb::arg("metadata"));
}

}  // namespace mixq_py
