#pragma once
// Shared by the libFuzzer harnesses (variadic so a body may hold commas): every harness feeds bytes
// to one parser, accepts a gearbox::Error (the clean exit-2 path) and lets anything else -- a
// sanitizer report, another exception type, an abort -- end the run as a finding.
#include <cstddef>
#include <cstdint>
#include <string>

#include "graph/error.h"

#define GEARBOX_FUZZ_TARGET(...)                                            \
  extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) { \
    const std::string input(reinterpret_cast<const char*>(data), size);     \
    try {                                                                   \
      __VA_ARGS__;                                                          \
    } catch (const gearbox::Error&) {                                       \
    }                                                                       \
    return 0;                                                               \
  }
