// mixq::Error -> the Python exception classes of mixq/errors.py (one per ErrorCode, all derived
// from mixq.MixqError), carrying the C++ message and the code's name in `.code`.
#pragma once

#include <nanobind/nanobind.h>

namespace mixq_py {

void register_error_translator(nanobind::module_& m);

}  // namespace mixq_py
