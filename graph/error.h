#pragma once
// One error model for every user-caused failure (bad IR text, bad shapes, bad gears, an
// out-of-range index, unreadable files): a single exception type whose message names the
// file:line, op, input and dim where they are known. Internal invariants use assert().
// The CLI catches Error and exits with code 2; nothing else should reach the user.

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace gearbox {

enum class ErrorKind {
  kParse,   // IR text or trace syntax
  kShape,   // shape inference / verification / guard failures
  kIndex,   // out-of-range gather indices
  kIo,      // files: .npy, model, trace, kernel_meta
  kGear,    // gear specs and gear matching
  kConfig,  // bad options and CLI arguments
  kLimit,   // recompile limit reached with --on-recompile-limit error
  kMemory,  // MODELED device memory: a compiled shape does not fit the capacity (--on-oom error)
};

const char* errorKindName(ErrorKind kind);

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, std::string message)
      : std::runtime_error(std::move(message)), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

// Throws an Error built with fmt; keeps call sites to one line.
template <typename... Args>
[[noreturn]] void fail(ErrorKind kind, fmt::format_string<Args...> format, Args&&... args) {
  throw Error(kind, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace gearbox
