// The kernels' knobs in the GPU tests. A Tuning (mixq/tuning.hpp) is fixed when a weight is
// prepared, so a test that compares two settings of a knob prepares the same QuantizedWeight once
// per setting and compares the two prepared weights' outputs. No process state is touched.
#pragma once

#include <string>

#include "mixq/ops.hpp"
#include "mixq/tuning.hpp"

namespace mixq::test {

// `o` with the knobs named in `keys` ("key=value,...": Tuning::parse's keys, toggles take
// on / off / auto) set over o.tuning. The other knobs stay as they were (MIXQ_TUNE for a
// default-constructed PrepareOptions), so a rerun of the tests under MIXQ_TUNE still reaches the
// comparisons; the knobs a comparison is about are always the ones it names.
inline PrepareOptions with_tuning(PrepareOptions o, const std::string& keys) {
  o.tuning = Tuning::parse(keys, o.tuning);
  return o;
}

}  // namespace mixq::test
