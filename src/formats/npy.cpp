// .npy reader and writer (NumPy format versions 1.0 / 2.0 / 3.0, C order, little-endian).
// The header is a Python dict literal; we parse it with a tiny strict parser rather than
// pattern matching so that reordered keys and spacing variants that numpy itself accepts load,
// while anything numpy would not write (unknown keys, missing keys, trailing junk) is rejected.
#include "mixq/formats/npy.hpp"

#include <cctype>
#include <cstring>
#include <cstdint>
#include <iterator>
#include <limits>

#include "mixq/error.hpp"
#include "mixq/formats/input_file.hpp"
#include "mixq/formats/output_file.hpp"

namespace mixq::formats {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;
// No array we handle has more dimensions than this; numpy's own limit is 64.
constexpr size_t kMaxRank = 32;
// A header larger than this is not something np.save writes; refuse before allocating.
constexpr uint32_t kMaxHeaderLen = 1u << 20;

int itemsize(DType t) { return dtype_bits(t) / 8; }

struct HeaderParser {
  const std::string& s;
  const std::string& name;
  size_t i = 0;

  [[noreturn]] void fail(const std::string& what) const {
    MIXQ_FAIL(ErrorCode::Format, name, ": malformed .npy header (", what, ") at offset ", i,
              " of '", s, "'");
  }
  void skip_ws() {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) ++i;
  }
  bool accept(char c) {
    skip_ws();
    if (i < s.size() && s[i] == c) {
      ++i;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!accept(c)) fail(std::string("expected '") + c + "'");
  }
  std::string string_literal() {
    skip_ws();
    if (i >= s.size() || (s[i] != '\'' && s[i] != '"')) fail("expected a string");
    const char q = s[i++];
    const size_t start = i;
    while (i < s.size() && s[i] != q) {
      if (s[i] == '\\') fail("escape sequences are not supported");
      ++i;
    }
    if (i >= s.size()) fail("unterminated string");
    return s.substr(start, i++ - start);
  }
  bool boolean() {
    skip_ws();
    if (s.compare(i, 4, "True") == 0) return i += 4, true;
    if (s.compare(i, 5, "False") == 0) return i += 5, false;
    fail("expected True or False");
  }
  int64_t integer() {
    skip_ws();
    if (i >= s.size() || !std::isdigit(static_cast<unsigned char>(s[i])))
      fail("expected a non-negative integer dimension");
    int64_t v = 0;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) {
      if (v > (std::numeric_limits<int64_t>::max() - 9) / 10) fail("dimension too large");
      v = v * 10 + (s[i++] - '0');
    }
    if (i < s.size() && s[i] == 'L') ++i;  // Python 2 long suffix, written by old numpy
    return v;
  }
  std::vector<int64_t> tuple() {
    expect('(');
    std::vector<int64_t> dims;
    if (accept(')')) return dims;
    for (;;) {
      dims.push_back(integer());
      if (dims.size() > kMaxRank) fail("more than 32 dimensions");
      if (accept(')')) {
        return dims;
      }
      expect(',');
      if (accept(')')) return dims;
    }
  }
};

DType dtype_from_descr(const std::string& d, const std::string& name) {
  if (d == "<f4") return DType::F32;
  if (d == "<f2") return DType::F16;
  if (d == "|i1" || d == "<i1" || d == "i1") return DType::I8;
  if (d == "<i4") return DType::I32;
  if (!d.empty() && d[0] == '>')
    MIXQ_FAIL(ErrorCode::Format, name, ": big-endian .npy data ('", d,
              "') is not supported; save it little-endian");
  MIXQ_FAIL(ErrorCode::Format, name, ": .npy dtype '", d,
            "' is not supported (float32 '<f4', float16 '<f2', int8 '|i1', int32 '<i4')");
}

uint32_t read_le(const uint8_t* p, int bytes) {
  uint32_t v = 0;
  for (int b = bytes - 1; b >= 0; --b) v = (v << 8) | p[b];
  return v;
}

}  // namespace

const char* npy_descr(DType dtype) {
  switch (dtype) {
    case DType::F32: return "<f4";
    case DType::F16: return "<f2";
    case DType::I8: return "|i1";
    case DType::I32: return "<i4";
    default:
      MIXQ_FAIL(ErrorCode::InvalidArgument, "npy: dtype ", dtype_name(dtype),
                " cannot be written (float32, float16, int8, int32)");
  }
}

int64_t NpyArray::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

TensorView NpyArray::view() const {
  TensorView v;
  MIXQ_CHECK_ARG(!shape.empty() && shape.size() <= size_t(TensorView::kMaxRank),
                 "NpyArray::view: rank ", shape.size(), " is not in [1, ", TensorView::kMaxRank,
                 "]");
  v.data = data.data();
  v.dtype = dtype;
  v.rank = static_cast<int>(shape.size());
  int64_t s = 1;
  for (int j = v.rank - 1; j >= 0; --j) {
    v.shape[j] = shape[j];
    v.stride[j] = s;
    s *= shape[j];
  }
  return v;
}

NpyArray parse_npy(const uint8_t* bytes, size_t size, const std::string& name) {
  MIXQ_CHECK(size >= kMagicLen + 2 && std::memcmp(bytes, kMagic, kMagicLen) == 0, ErrorCode::Format,
             name, ": not a .npy file (missing the \\x93NUMPY magic)");
  const int major = bytes[6], minor = bytes[7];
  MIXQ_CHECK((major == 1 || major == 2 || major == 3) && minor == 0, ErrorCode::Format, name,
             ": unsupported .npy version ", major, ".", minor, " (1.0, 2.0 and 3.0 are read)");
  const int len_bytes = major == 1 ? 2 : 4;
  const size_t prefix = kMagicLen + 2 + len_bytes;
  MIXQ_CHECK(size >= prefix, ErrorCode::Format, name, ": truncated .npy header (", size,
             " bytes)");
  const uint32_t header_len = read_le(bytes + kMagicLen + 2, len_bytes);
  MIXQ_CHECK(header_len <= kMaxHeaderLen && header_len <= size - prefix, ErrorCode::Format, name,
             ": .npy header length ", header_len, " exceeds the file (", size, " bytes)");
  const std::string header(reinterpret_cast<const char*>(bytes + prefix), header_len);

  HeaderParser p{header, name};
  p.expect('{');
  bool have_descr = false, have_order = false, have_shape = false, fortran = false;
  std::string descr;
  std::vector<int64_t> shape;
  while (!p.accept('}')) {
    const std::string key = p.string_literal();
    p.expect(':');
    if (key == "descr" && !have_descr) {
      descr = p.string_literal();
      have_descr = true;
    } else if (key == "fortran_order" && !have_order) {
      fortran = p.boolean();
      have_order = true;
    } else if (key == "shape" && !have_shape) {
      shape = p.tuple();
      have_shape = true;
    } else {
      p.fail("unexpected or repeated key '" + key + "'");
    }
    if (!p.accept(',')) {
      p.expect('}');
      break;
    }
  }
  p.skip_ws();
  if (p.i != header.size()) p.fail("trailing characters after the dict");
  if (!(have_descr && have_order && have_shape))
    p.fail("the dict must hold 'descr', 'fortran_order' and 'shape'");
  MIXQ_CHECK(!fortran, ErrorCode::Format, name,
             ": Fortran-order .npy arrays are not supported; save with np.ascontiguousarray");

  NpyArray a;
  a.dtype = dtype_from_descr(descr, name);
  a.shape = shape;
  uint64_t count = 1;
  for (int64_t d : shape) {
    MIXQ_CHECK(!__builtin_mul_overflow(count, static_cast<uint64_t>(d), &count), ErrorCode::Format,
               name, ": .npy shape overflows");
  }
  uint64_t nbytes = 0;
  MIXQ_CHECK(!__builtin_mul_overflow(count, static_cast<uint64_t>(itemsize(a.dtype)), &nbytes),
             ErrorCode::Format, name, ": .npy shape overflows");
  const uint64_t available = size - prefix - header_len;
  MIXQ_CHECK(nbytes <= available, ErrorCode::Format, name, ": truncated .npy data: shape needs ",
             nbytes, " bytes, the file holds ", available);
  MIXQ_CHECK(nbytes == available, ErrorCode::Format, name, ": .npy file has ",
             available - nbytes, " bytes after the array data");
  a.data = HostBuffer(nbytes ? nbytes : 1);
  if (nbytes) std::memcpy(a.data.data(), bytes + prefix + header_len, nbytes);
  return a;
}

NpyArray read_npy(const std::string& path) {
  // A limit of its own would only get in the way: the file is checked to be regular (not a FIFO,
  // device or directory) and is read whole; parse_npy validates the size against the header.
  const InputFile f(path, "input");
  const std::vector<uint8_t> bytes = f.read_all(UINT64_MAX);
  return parse_npy(bytes.data(), bytes.size(), path);
}

std::string npy_header(DType dtype, const std::vector<int64_t>& shape) {
  std::string dict = std::string("{'descr': '") + npy_descr(dtype) +
                     "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < shape.size(); ++i) {
    MIXQ_CHECK_ARG(shape[i] >= 0, "write_npy: dimension ", i, " is negative (", shape[i], ")");
    dict += std::to_string(shape[i]) + (shape.size() == 1 || i + 1 < shape.size() ? ", " : "");
  }
  if (shape.size() == 1) dict.pop_back();  // "(5,)" like numpy
  dict += "), }";
  // Pad with spaces so that the data starts on a 64-byte boundary, then a newline.
  const bool v2 = dict.size() + 1 + 10 > 65535;
  const size_t prefix = v2 ? 12 : 10;
  const size_t total = (prefix + dict.size() + 1 + 63) / 64 * 64;
  dict.append(total - prefix - dict.size() - 1, ' ');
  dict += '\n';
  std::string out(kMagic, kMagicLen);
  out += static_cast<char>(v2 ? 2 : 1);
  out += '\0';
  const uint32_t len = static_cast<uint32_t>(dict.size());
  for (size_t b = 0; b < (v2 ? 4u : 2u); ++b) out += static_cast<char>((len >> (8 * b)) & 0xFF);
  return out + dict;
}

void write_npy(const std::string& path, DType dtype, const std::vector<int64_t>& shape,
               const void* data) {
  const std::string header = npy_header(dtype, shape);
  int64_t count = 1;
  for (int64_t d : shape) count *= d;
  OutputFile f(path);
  f.write(header.data(), header.size());
  f.write(data, static_cast<size_t>(count * itemsize(dtype)));
  f.commit();
}

}  // namespace mixq::formats
