#include "mixq/dtype.hpp"

#include "mixq/error.hpp"

namespace mixq {

namespace {
struct DTypeInfo {
  DType type;
  const char* name;
  int bits;
};
constexpr DTypeInfo kInfo[] = {
    {DType::F32, "f32", 32}, {DType::F16, "f16", 16},     {DType::BF16, "bf16", 16},
    {DType::F8E4M3, "f8e4m3", 8}, {DType::I8, "i8", 8},   {DType::U8, "u8", 8},
    {DType::I4, "i4", 4},    {DType::U4, "u4", 4},        {DType::I32, "i32", 32},
    {DType::F64, "f64", 64},
};
const DTypeInfo& info(DType t) {
  for (const auto& i : kInfo)
    if (i.type == t) return i;
  MIXQ_FAIL(ErrorCode::Internal, "unknown dtype value ", static_cast<int>(t));
}
}  // namespace

int dtype_bits(DType t) { return info(t).bits; }
const char* dtype_name(DType t) { return info(t).name; }

std::optional<DType> parse_dtype(const std::string& name) {
  for (const auto& i : kInfo)
    if (name == i.name) return i.type;
  if (name == "fp32" || name == "float32") return DType::F32;
  if (name == "fp16" || name == "float16" || name == "half") return DType::F16;
  if (name == "bfloat16") return DType::BF16;
  if (name == "fp8" || name == "e4m3") return DType::F8E4M3;
  return std::nullopt;
}

int32_t code_min(DType t) {
  switch (t) {
    case DType::I4: return -8;
    case DType::I8: return -128;
    case DType::U4:
    case DType::U8: return 0;
    default: MIXQ_FAIL(ErrorCode::InvalidArgument, "code_min: ", dtype_name(t), " is not an integer code type");
  }
}
int32_t code_max(DType t) {
  switch (t) {
    case DType::I4: return 7;
    case DType::I8: return 127;
    case DType::U4: return 15;
    case DType::U8: return 255;
    default: MIXQ_FAIL(ErrorCode::InvalidArgument, "code_max: ", dtype_name(t), " is not an integer code type");
  }
}

}  // namespace mixq
