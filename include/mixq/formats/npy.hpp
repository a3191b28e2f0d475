// NumPy .npy files: read and write C-order, little-endian arrays of float32, float16, int8 and
// int32 (format versions 1.0, 2.0 and 3.0). The reader validates the header strictly: the dict
// must hold exactly 'descr', 'fortran_order' and 'shape'; Fortran order, big-endian or other
// dtypes, negative or overflowing shapes, and a data section whose size is not exactly
// prod(shape) * itemsize all throw mixq::Error(Format) naming the file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mixq/dtype.hpp"
#include "mixq/tensor.hpp"

namespace mixq::formats {

struct NpyArray {
  DType dtype = DType::F32;        // F32, F16, I8 or I32
  std::vector<int64_t> shape;      // empty for a 0-d array
  HostBuffer data;                 // numel() elements, 64-byte aligned

  int64_t numel() const;
  // Contiguous view (rank 1..4; throws for other ranks).
  TensorView view() const;
};

// Parses an in-memory .npy image; `name` is used in error messages.
NpyArray parse_npy(const uint8_t* bytes, size_t size, const std::string& name);
NpyArray read_npy(const std::string& path);

// The header alone, serialized (magic, version, padded dict); exposed for tests.
std::string npy_header(DType dtype, const std::vector<int64_t>& shape);
// Writes a version 1.0 file (2.0 when the header does not fit in 65535 bytes).
void write_npy(const std::string& path, DType dtype, const std::vector<int64_t>& shape,
               const void* data);

// numpy's dtype descriptor for a supported dtype ("<f4", "<f2", "|i1", "<i4").
const char* npy_descr(DType dtype);

}  // namespace mixq::formats
