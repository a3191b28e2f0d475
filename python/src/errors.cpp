#include "errors.hpp"

#include "mixq/error.hpp"

namespace mixq_py {

namespace nb = nanobind;

namespace {

// Indexed by ErrorCode. The classes are defined in Python (mixq/errors.py) so that they can
// derive from both MixqError and the matching builtin (ValueError, OSError, ...); the module
// object keeps them alive for the interpreter's lifetime.
nb::object& error_classes() {
  static nb::object* classes = new nb::object();  // leaked: must outlive module teardown
  return *classes;
}

}  // namespace

void register_error_translator(nb::module_& m) {
  m.def("_set_error_classes", [](nb::tuple classes) { error_classes() = classes; },
        "Internal: the exception classes, indexed by mixq::ErrorCode.");
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const mixq::Error& e) {
      const int code = static_cast<int>(e.code());
      nb::object& classes = error_classes();
      if (!classes.is_valid() || code >= static_cast<int>(nb::len(classes))) {
        PyErr_SetString(PyExc_RuntimeError, e.what());
        return;
      }
      nb::object exc = classes[code](e.what(), mixq::error_code_name(e.code()));
      PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
    }
  });
}

}  // namespace mixq_py
