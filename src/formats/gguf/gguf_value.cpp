// GgufValue: construction helpers, array access and printable form.
#include <cstring>
#include <sstream>

#include "mixq/error.hpp"
#include "mixq/formats/gguf.hpp"

namespace mixq::formats {

const char* gguf_value_type_name(GgufValueType t) {
  switch (t) {
    case GgufValueType::U8: return "uint8";
    case GgufValueType::I8: return "int8";
    case GgufValueType::U16: return "uint16";
    case GgufValueType::I16: return "int16";
    case GgufValueType::U32: return "uint32";
    case GgufValueType::I32: return "int32";
    case GgufValueType::F32: return "float32";
    case GgufValueType::BOOL: return "bool";
    case GgufValueType::STRING: return "string";
    case GgufValueType::ARRAY: return "array";
    case GgufValueType::U64: return "uint64";
    case GgufValueType::I64: return "int64";
    case GgufValueType::F64: return "float64";
  }
  return "unknown";
}

GgufValue GgufValue::u32(uint32_t v) {
  GgufValue x;
  x.type = GgufValueType::U32;
  x.u = v;
  x.i = v;
  return x;
}
GgufValue GgufValue::i32(int32_t v) {
  GgufValue x;
  x.type = GgufValueType::I32;
  x.i = v;
  x.u = static_cast<uint64_t>(static_cast<int64_t>(v));
  return x;
}
GgufValue GgufValue::u64(uint64_t v) {
  GgufValue x;
  x.type = GgufValueType::U64;
  x.u = v;
  x.i = static_cast<int64_t>(v);
  return x;
}
GgufValue GgufValue::f32(float v) {
  GgufValue x;
  x.type = GgufValueType::F32;
  x.f = v;
  return x;
}
GgufValue GgufValue::boolean(bool v) {
  GgufValue x;
  x.type = GgufValueType::BOOL;
  x.u = v;
  x.i = v;
  return x;
}
GgufValue GgufValue::string(std::string v) {
  GgufValue x;
  x.type = GgufValueType::STRING;
  x.str = std::move(v);
  return x;
}

namespace {

int scalar_size(GgufValueType t) {
  switch (t) {
    case GgufValueType::U8: case GgufValueType::I8: case GgufValueType::BOOL: return 1;
    case GgufValueType::U16: case GgufValueType::I16: return 2;
    case GgufValueType::U32: case GgufValueType::I32: case GgufValueType::F32: return 4;
    case GgufValueType::U64: case GgufValueType::I64: case GgufValueType::F64: return 8;
    default: return 0;
  }
}

// Little-endian bytes of a scalar value.
void put_scalar(const GgufValue& v, std::vector<uint8_t>& out) {
  uint8_t b[8];
  const int n = scalar_size(v.type);
  if (v.type == GgufValueType::F32) {
    const float f = static_cast<float>(v.f);
    std::memcpy(b, &f, 4);
  } else if (v.type == GgufValueType::F64) {
    std::memcpy(b, &v.f, 8);
  } else {
    for (int k = 0; k < 8; ++k) b[k] = static_cast<uint8_t>(v.u >> (8 * k));
  }
  out.insert(out.end(), b, b + n);
}

GgufValue scalar_from(const uint8_t* p, GgufValueType t) {
  GgufValue v;
  v.type = t;
  switch (t) {
    case GgufValueType::F32: {
      float f;
      std::memcpy(&f, p, 4);
      v.f = f;
      return v;
    }
    case GgufValueType::F64: std::memcpy(&v.f, p, 8); return v;
    default: break;
  }
  const int n = scalar_size(t);
  uint64_t u = 0;
  for (int k = 0; k < n; ++k) u |= uint64_t(p[k]) << (8 * k);
  const bool is_signed = t == GgufValueType::I8 || t == GgufValueType::I16 ||
                         t == GgufValueType::I32 || t == GgufValueType::I64;
  if (is_signed && n < 8 && (u >> (8 * n - 1)) & 1) u |= ~uint64_t(0) << (8 * n);  // sign-extend
  v.u = u;
  v.i = static_cast<int64_t>(u);
  if (!is_signed) v.i = static_cast<int64_t>(u);
  return v;
}

}  // namespace

GgufValue GgufValue::array(GgufValueType elem, std::vector<GgufValue> values) {
  GgufValue x;
  x.type = GgufValueType::ARRAY;
  x.elem_type = elem;
  for (const auto& v : values)
    MIXQ_CHECK_ARG(v.type == elem, "GgufValue::array: element of type ",
                   gguf_value_type_name(v.type), " in an array of ", gguf_value_type_name(elem));
  if (scalar_size(elem) > 0) {
    for (const auto& v : values) put_scalar(v, x.raw);
  } else {
    x.items = std::move(values);
  }
  return x;
}

uint64_t GgufValue::array_size() const {
  if (type != GgufValueType::ARRAY) return 0;
  const int n = scalar_size(elem_type);
  return n > 0 ? raw.size() / static_cast<size_t>(n) : items.size();
}

GgufValue GgufValue::at(uint64_t index) const {
  MIXQ_CHECK_ARG(type == GgufValueType::ARRAY && index < array_size(), "GgufValue::at: index ",
                 index, " outside the array of ", array_size());
  const int n = scalar_size(elem_type);
  if (n > 0) return scalar_from(raw.data() + index * n, elem_type);
  return items[static_cast<size_t>(index)];
}

std::string GgufValue::to_string(size_t max_items) const {
  std::ostringstream os;
  switch (type) {
    case GgufValueType::F32: case GgufValueType::F64: os << f; break;
    case GgufValueType::BOOL: os << (u ? "true" : "false"); break;
    case GgufValueType::STRING: os << '"' << str << '"'; break;
    case GgufValueType::I8: case GgufValueType::I16: case GgufValueType::I32:
    case GgufValueType::I64: os << i; break;
    case GgufValueType::ARRAY: {
      const uint64_t n = array_size();
      os << "[" << n << " x " << gguf_value_type_name(elem_type) << ":";
      for (uint64_t k = 0; k < n && k < max_items; ++k) os << (k ? ", " : " ") << at(k).to_string(2);
      if (n > max_items) os << ", ...";
      os << "]";
      break;
    }
    default: os << u; break;
  }
  return os.str();
}

}  // namespace mixq::formats
