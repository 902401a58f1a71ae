#include "graph/json_limits.h"

#include "graph/error.h"

namespace gearbox {

void checkJsonDepth(std::string_view text, std::string_view where, int maxDepth) {
  int depth = 0;
  bool inString = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (inString) {
      if (c == '\\') {
        ++i;  // the escaped character cannot end the string
      } else if (c == '"') {
        inString = false;
      }
      continue;
    }
    if (c == '"') {
      inString = true;
    } else if (c == '[' || c == '{') {
      if (++depth > maxDepth)
        fail(ErrorKind::kParse, "{}: JSON nested deeper than {} levels at byte {}", where, maxDepth,
             i);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
}

namespace {

// Offset of the first byte that does not start a well-formed UTF-8 sequence, or npos.
size_t firstInvalidUtf8(std::string_view text) {
  const auto* b = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = b[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    // The lead byte gives the length and the range of the second byte (RFC 3629, table 3-7 of
    // the Unicode standard): that range is what rules out overlong forms and surrogates.
    size_t len = 0;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else {
      return i;
    }
    if (i + len > n || b[i + 1] < lo || b[i + 1] > hi) return i;
    for (size_t k = 2; k < len; ++k)
      if (b[i + k] < 0x80 || b[i + k] > 0xBF) return i;
    i += len;
  }
  return std::string_view::npos;
}

}  // namespace

bool isValidUtf8(std::string_view text) {
  return firstInvalidUtf8(text) == std::string_view::npos;
}

void checkUtf8(std::string_view text, std::string_view where) {
  const size_t at = firstInvalidUtf8(text);
  if (at == std::string_view::npos) return;
  fail(ErrorKind::kConfig, "{}: not valid UTF-8 text (byte 0x{:02x} at offset {})", where,
       static_cast<unsigned char>(text[at]), at);
}

}  // namespace gearbox
