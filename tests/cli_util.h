#pragma once
// Runs the real gearbox binary for CLI golden tests and captures what it printed.

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace gearbox::testing_util {

struct RunResult {
  std::string output;  // stdout and stderr, interleaved as the process wrote them
  int exitCode = -1;
};

// Quotes one argument for /bin/sh.
inline std::string shellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Runs GEARBOX_BINARY with `args` (already shell-quoted) through /bin/sh.
inline RunResult runGearbox(const std::string& args) {
  const std::string cmd = shellQuote(GEARBOX_BINARY) + " " + args + " 2>&1";
  RunResult r;
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (!pipe) {
    ADD_FAILURE() << "popen failed for " << cmd;
    return r;
  }
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) r.output.append(buf.data(), n);
  const int status = ::pclose(pipe);
  r.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// The repository's bundled examples.
inline std::string example(const std::string& name) {
  return std::string(GEARBOX_SOURCE_DIR) + "/examples/" + name;
}

}  // namespace gearbox::testing_util
