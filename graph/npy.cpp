#include "graph/npy.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>
#include <string_view>
#include <vector>

#include "graph/checked.h"
#include "graph/error.h"
#include "graph/file_io.h"

namespace gearbox {

// The data section is copied byte for byte, so the host must share the file's byte order. Every
// platform gearbox targets (x86-64, AArch64) is little-endian; a big-endian port would need a
// byte swap here rather than a silent misread.
static_assert(std::endian::native == std::endian::little, "npy I/O assumes a little-endian host");

namespace {

constexpr std::string_view kMagic = "\x93NUMPY";
constexpr size_t kAlign = 64;

// The three descrs gearbox supports, as NumPy writes them.
std::string_view npyDescr(DType t) {
  switch (t) {
    case DType::kF32: return "<f4";
    case DType::kI32: return "<i4";
    case DType::kI64: return "<i8";
  }
  return "?";
}

constexpr std::string_view kSupportedDescrs = "'<f4' (f32), '<i4' (i32), '<i8' (i64)";

// Maps a descr to a dtype. '=' (native order) is accepted because the host is little-endian;
// '|' (byte order not applicable) is rejected because for multi-byte types it does not say
// which order the bytes are in.
std::optional<DType> dtypeFromDescr(std::string_view d) {
  if (d.size() != 3 || (d[0] != '<' && d[0] != '=')) return std::nullopt;
  const std::string_view kind = d.substr(1);
  if (kind == "f4") return DType::kF32;
  if (kind == "i4") return DType::kI32;
  if (kind == "i8") return DType::kI64;
  return std::nullopt;
}

// Printable rendering of a few raw bytes for the bad-magic message.
std::string escapeBytes(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  return out;
}

// The header is a Python dict literal such as
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// This reader accepts exactly the literal forms NumPy writes (strings in either quote style,
// True/False, tuples of non-negative integers with an optional trailing comma) and nothing
// else, so an odd header is reported instead of being half-understood.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& name) : s_(text), name_(name) {}

  struct Header {
    std::string descr;
    bool fortran = false;
    std::vector<int64_t> shape;
  };

  Header parse() {
    Header h;
    bool haveDescr = false, haveFortran = false, haveShape = false;
    skipSpace();
    expect('{');
    for (;;) {
      skipSpace();
      if (peek() == '}') break;
      const std::string key = readString("a key");
      skipSpace();
      expect(':');
      skipSpace();
      if (key == "descr") {
        if (peek() != '\'' && peek() != '"')
          bad("'descr' must be a string; structured dtypes are not supported (supported: {})",
              kSupportedDescrs);
        h.descr = readString("the descr string");
        haveDescr = true;
      } else if (key == "fortran_order") {
        h.fortran = readBool();
        haveFortran = true;
      } else if (key == "shape") {
        h.shape = readShape();
        haveShape = true;
      } else {
        bad("unexpected key '{}' (expected 'descr', 'fortran_order' and 'shape')", key);
      }
      skipSpace();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() != '}') bad("expected ',' or '}}' at offset {}", pos_);
    }
    ++pos_;
    // NumPy pads the dict with spaces and ends it with '\n'; nothing else may follow.
    skipSpace();
    if (pos_ != s_.size()) bad("unexpected text after the dict at offset {}", pos_);
    if (!haveDescr) bad("missing key 'descr'");
    if (!haveFortran) bad("missing key 'fortran_order'");
    if (!haveShape) bad("missing key 'shape'");
    return h;
  }

 private:
  template <typename... Args>
  [[noreturn]] void bad(fmt::format_string<Args...> f, Args&&... args) {
    fail(ErrorKind::kIo, "{}: malformed .npy header: {}", name_,
         fmt::format(f, std::forward<Args>(args)...));
  }

  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  void skipSpace() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\t' || s_[pos_] == '\r'))
      ++pos_;
  }
  void expect(char c) {
    if (peek() != c) bad("expected '{}' at offset {}", c, pos_);
    ++pos_;
  }
  std::string readString(std::string_view what) {
    const char q = peek();
    if (q != '\'' && q != '"') bad("expected {} at offset {}", what, pos_);
    const size_t end = s_.find(q, pos_ + 1);
    if (end == std::string_view::npos) bad("unterminated string at offset {}", pos_);
    std::string out(s_.substr(pos_ + 1, end - pos_ - 1));
    pos_ = end + 1;
    return out;
  }
  bool readBool() {
    if (s_.substr(pos_, 4) == "True") {
      pos_ += 4;
      return true;
    }
    if (s_.substr(pos_, 5) == "False") {
      pos_ += 5;
      return false;
    }
    bad("'fortran_order' must be True or False (offset {})", pos_);
  }
  std::vector<int64_t> readShape() {
    std::vector<int64_t> dims;
    expect('(');
    for (;;) {
      skipSpace();
      if (peek() == ')') break;
      if (peek() < '0' || peek() > '9') bad("expected a dim in 'shape' at offset {}", pos_);
      int64_t v = 0;
      while (peek() >= '0' && peek() <= '9') {
        if (v > (INT64_MAX - 9) / 10) bad("dim in 'shape' is too large (offset {})", pos_);
        v = v * 10 + (peek() - '0');
        ++pos_;
      }
      // Python 2 wrote longs with an 'L' suffix; old files still carry it.
      if (peek() == 'L') ++pos_;
      dims.push_back(v);
      skipSpace();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() != ')') bad("expected ',' or ')' in 'shape' at offset {}", pos_);
    }
    ++pos_;
    return dims;
  }

  std::string_view s_;
  const std::string& name_;
  size_t pos_ = 0;
};

uint32_t readLe(std::string_view b, size_t at, size_t n) {
  uint32_t v = 0;
  for (size_t i = 0; i < n; ++i)
    v |= static_cast<uint32_t>(static_cast<unsigned char>(b[at + i])) << (8 * i);
  return v;
}

}  // namespace

Tensor parseNpy(const std::string& bytes, const std::string& name) {
  const std::string_view b(bytes);
  if (b.size() < kMagic.size() || b.substr(0, kMagic.size()) != kMagic)
    fail(ErrorKind::kIo, "{}: not a .npy file: bad magic (expected \\x93NUMPY, got '{}')", name,
         escapeBytes(b.substr(0, kMagic.size())));
  if (b.size() < 8) fail(ErrorKind::kIo, "{}: truncated .npy file: no version bytes", name);
  const int major = static_cast<unsigned char>(b[6]);
  const int minor = static_cast<unsigned char>(b[7]);
  if ((major != 1 && major != 2 && major != 3) || minor != 0)
    fail(ErrorKind::kIo, "{}: unsupported .npy version {}.{} (supported: 1.0, 2.0, 3.0)", name,
         major, minor);
  // v1 stores the header length as u16; v2 (large headers) and v3 (UTF-8 headers) use u32.
  const size_t lenBytes = major == 1 ? 2 : 4;
  const size_t headerStart = 8 + lenBytes;
  if (b.size() < headerStart)
    fail(ErrorKind::kIo, "{}: truncated .npy file: no header length", name);
  const size_t headerLen = readLe(b, 8, lenBytes);
  if (b.size() - headerStart < headerLen)
    fail(ErrorKind::kIo, "{}: truncated .npy header: expected {} bytes, got {}", name, headerLen,
         b.size() - headerStart);
  const auto h = HeaderParser(b.substr(headerStart, headerLen), name).parse();

  const auto dtype = dtypeFromDescr(h.descr);
  if (!dtype)
    fail(ErrorKind::kIo, "{}: unsupported dtype '{}' (supported: {})", name, h.descr,
         kSupportedDescrs);
  if (h.fortran)
    fail(ErrorKind::kIo,
         "{}: Fortran-order arrays are not supported; save a C-order array "
         "(numpy.ascontiguousarray)",
         name);
  if (h.shape.size() > static_cast<size_t>(kMaxRank))
    fail(ErrorKind::kIo, "{}: rank {} exceeds the maximum of {}", name, h.shape.size(), kMaxRank);

  // Size the data from the header with overflow checks before allocating anything, so a
  // corrupt shape cannot trigger a huge allocation.
  uint64_t expected = dtypeSize(*dtype);
  bool overflow = false;
  for (int64_t d : h.shape)
    overflow |= __builtin_mul_overflow(expected, static_cast<uint64_t>(d), &expected);
  const size_t dataStart = headerStart + headerLen;
  const uint64_t actual = b.size() - dataStart;
  Shape shape(h.shape.begin(), h.shape.end());
  if (overflow)
    fail(ErrorKind::kIo, "{}: shape {} is too large (more than 2^64 bytes of data)", name,
         shape.toString());
  // The one tensor size limit (zero dims count as 1 there, so [0, 2^61] is refused too: its
  // strides would still wrap). Reported as a file error, like the checks around it.
  try {
    checkTensorSize(shape, *dtype, name, "array");
  } catch (const Error& e) {
    fail(ErrorKind::kIo, "{}", e.what());
  }
  if (actual < expected)
    fail(ErrorKind::kIo, "{}: truncated data: shape {} {} needs {} bytes, got {}", name,
         shape.toString(), h.descr, expected, actual);
  // Extra bytes mean the file is not what its header says (e.g. two arrays concatenated by
  // np.save to an open file, or a corrupted header); reading on would hide that, so reject.
  if (actual > expected)
    fail(ErrorKind::kIo, "{}: {} unexpected trailing bytes after the {} bytes of data", name,
         actual - expected, expected);

  Tensor t(*dtype, shape);
  if (expected) std::memcpy(t.data(), b.data() + dataStart, expected);
  return t;
}

Tensor loadNpy(const std::string& path) {
  return parseNpy(readFile(path), path);
}

std::string serializeNpy(const Tensor& t) {
  std::string dims;
  for (int i = 0; i < t.shape().rank(); ++i) dims += fmt::format("{}, ", t.shape()[i]);
  // Python spells a 1-tuple "(3,)" and the others "(2, 3)" / "()".
  if (t.shape().rank() > 1) dims.resize(dims.size() - 2);
  if (t.shape().rank() == 1) dims.pop_back();
  std::string header = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}",
                                   npyDescr(t.dtype()), dims);
  // Pad with spaces so the data starts on a 64-byte boundary (as NumPy does, for mmap), and end
  // the header with '\n'.
  const size_t prefix = kMagic.size() + 2 + 2;
  const size_t total = ((prefix + header.size() + 1 + kAlign - 1) / kAlign) * kAlign;
  header.append(total - prefix - header.size() - 1, ' ');
  header += '\n';
  std::string out;
  out.reserve(total + t.bytes());
  out += kMagic;
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>((header.size() >> 8) & 0xff);
  out += header;
  if (t.bytes()) out.append(static_cast<const char*>(t.data()), t.bytes());
  return out;
}

void saveNpy(const std::string& path, const Tensor& t) {
  writeFileAtomic(path, serializeNpy(t));
}

}  // namespace gearbox
