// Zero-copy conversion of Python array objects into mixq::TensorView.
//
// Accepted: anything nanobind imports without copying (DLPack producers such as torch tensors,
// CuPy arrays and JAX arrays; buffer-protocol objects such as numpy arrays), and, for objects
// that offer neither, the __cuda_array_interface__ / __array_interface__ dictionaries (Numba
// device arrays, older CuPy). The view points at the object's memory; nothing is copied, and
// every mismatch (dtype, device, rank, negative strides, read-only output) throws
// mixq::Error(InvalidArgument) whose message starts with the argument's name.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>

#include <optional>

#include "mixq/tensor.hpp"

namespace mixq_py {

namespace nb = nanobind;

enum class Access { Read, Write };

// A view plus whatever keeps the exporter's memory alive until the call returns (the imported
// DLPack capsule or buffer, or the object itself for the interface dictionaries).
struct Borrowed {
  mixq::TensorView view;
  std::optional<nb::ndarray<nb::ro>> read;
  std::optional<nb::ndarray<>> write;
  nb::object owner;
};

// Throws mixq::Error(InvalidArgument) naming `arg` when obj cannot be viewed without a copy.
Borrowed borrow(nb::handle obj, const char* arg, Access access);

// None gives an empty view (optional arguments such as bias).
Borrowed borrow_optional(nb::handle obj, const char* arg, Access access);

}  // namespace mixq_py
