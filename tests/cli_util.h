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

// Runs `cmd` through popen and collects what it printed; exitCode -1 when it died of a signal.
inline RunResult runPipe(const std::string& cmd) {
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

// Runs GEARBOX_BINARY with `args` (already shell-quoted) through /bin/sh.
inline RunResult runGearbox(const std::string& args) {
  return runPipe(shellQuote(GEARBOX_BINARY) + " " + args + " 2>&1");
}

// A shell command under timeout(1): exit 124 means it hung, -1 that it died of a signal.
inline RunResult runShell(const std::string& shellCmd, int seconds = 60) {
  return runPipe("timeout " + std::to_string(seconds) + " /bin/sh -c " + shellQuote(shellCmd) +
                 " 2>&1");
}

// GEARBOX_BINARY with `args` (already shell-quoted) under timeout(1).
inline RunResult runBounded(const std::string& args, int seconds = 60) {
  return runShell("exec " + shellQuote(GEARBOX_BINARY) + " " + args, seconds);
}

// The repository's bundled examples.
inline std::string example(const std::string& name) {
  return std::string(GEARBOX_SOURCE_DIR) + "/examples/" + name;
}

}  // namespace gearbox::testing_util
