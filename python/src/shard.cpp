// Tensor-parallel shards (mixq/shard.hpp, formats::load_shard): the canonical weight one rank
// holds, cut from the global weight or read from a checkpoint.
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <string>
#include <vector>

#include "bindings.hpp"
#include "mixq/error.hpp"
#include "mixq/formats/checkpoint.hpp"
#include "mixq/shard.hpp"

namespace mixq_py {

namespace {

mixq::ShardSpec shard_spec(int64_t rank, int64_t world, const std::string& axis,
                           int64_t granularity) {
  mixq::ShardSpec s;
  s.rank = rank;
  s.world = world;
  s.granularity = granularity;
  if (axis == "column") {
    s.axis = mixq::ShardAxis::Column;
  } else if (axis == "row") {
    s.axis = mixq::ShardAxis::Row;
  } else {
    MIXQ_CHECK_ARG(false, "axis: '", axis, "' is not 'column' (split N) or 'row' (split K)");
  }
  return s;
}

}  // namespace

void bind_shard(nb::module_& m) {
  m.def("shard_range", [](int64_t dim, int64_t rank, int64_t world, int64_t granularity) {
        return mixq::shard_range(dim, shard_spec(rank, world, "column", granularity));
      }, nb::arg("dim"), nb::arg("rank"), nb::arg("world"), nb::arg("granularity"));
  m.def("shard", [](const mixq::QuantizedWeight& w, int64_t rank, int64_t world,
                    const std::string& axis, int64_t granularity) {
        const mixq::ShardSpec s = shard_spec(rank, world, axis, granularity);
        nb::gil_scoped_release release;
        return mixq::shard(w, s);
      }, nb::arg("w"), nb::arg("rank"), nb::arg("world"), nb::arg("axis"),
      nb::arg("granularity"));
  m.def("load_shard", [](const std::string& path, const std::string& tensor, int64_t rank,
                         int64_t world, const std::string& axis, int64_t granularity) {
        const mixq::ShardSpec s = shard_spec(rank, world, axis, granularity);
        nb::gil_scoped_release release;
        return mixq::formats::load_shard(path, tensor, s);
      }, nb::arg("path"), nb::arg("tensor"), nb::arg("rank"), nb::arg("world"), nb::arg("axis"),
      nb::arg("granularity"));
  m.def("check_shard_set", [](const std::vector<const mixq::QuantizedWeight*>& shards,
                              const std::vector<int64_t>& ranks, int64_t world,
                              const std::string& axis, int64_t granularity) {
        MIXQ_CHECK_ARG(shards.size() == ranks.size(), "ranks: ", ranks.size(),
                       " ranks for ", shards.size(), " shards");
        std::vector<mixq::QuantizedWeight> ws;
        std::vector<mixq::ShardSpec> specs;
        for (size_t i = 0; i < shards.size(); ++i) {
          ws.push_back(*shards[i]);
          specs.push_back(shard_spec(ranks[i], world, axis, granularity));
        }
        mixq::check_shard_set(ws, specs);
      }, nb::arg("shards"), nb::arg("ranks"), nb::arg("world"), nb::arg("axis"),
      nb::arg("granularity"));
}

}  // namespace mixq_py
