#pragma once
// Limits on JSON read from outside (traces, gears, cost models, kernel descriptors, bundles,
// op-info records). nlohmann's parser is iterative, but building, copying, dumping and
// destroying a document recurses on its depth, so a 100,000-deep "[[[[..." can overflow the
// stack. Every JSON input is pre-scanned here first: a linear pass over the bytes that tracks
// string literals and bracket depth, and refuses a document nested deeper than kMaxJsonDepth
// with an Error naming where it came from and the byte offset.

#include <cstddef>
#include <string_view>

namespace gearbox {

// Far deeper than any document gearbox writes (a kernel bundle is 5 levels deep).
constexpr int kMaxJsonDepth = 64;

// Throws Error(kParse) "<where>: JSON nested deeper than 64 levels at byte N" when `text`
// nests objects/arrays deeper than `maxDepth`. Malformed JSON is left to the parser.
void checkJsonDepth(std::string_view text, std::string_view where, int maxDepth = kMaxJsonDepth);

// Whether `text` is well-formed UTF-8 (no overlong forms, no surrogates, nothing past
// U+10FFFF): what a JSON string must hold, so nlohmann's dump would otherwise throw.
bool isValidUtf8(std::string_view text);

// Throws Error(kConfig) "<where>: not valid UTF-8 text (byte 0xNN at offset K)" for a string
// from outside (an option value, a key) that is about to become a JSON string.
void checkUtf8(std::string_view text, std::string_view where);

}  // namespace gearbox
