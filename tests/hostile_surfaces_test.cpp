// Hostile inputs on the surfaces issue 22 found soft: gears text in the report, bytes that are
// not UTF-8, numbers without a physical range, outputs that are inputs, FIFOs, control
// characters in XML/HTML. Each test is named for the finding; commands run under timeout(1)
// so a regression to a hang fails instead of blocking.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "expect_error.h"
#include "graph/json_limits.h"
#include "graph/npy.h"
#include "graph/text.h"
#include "temp_dir.h"
#include "tools/html_report.h"
#include "tools/run_options.h"

namespace gearbox {
namespace {

namespace fs = std::filesystem;
using testing_util::errorOf;
using testing_util::example;
using testing_util::RunResult;
using testing_util::shellQuote;
using testing_util::TempDir;

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

void write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// A shell command under timeout(1): exit 124 means it hung, -1 that it died of a signal.
RunResult runShell(const std::string& shellCmd, int seconds = 60) {
  const std::string cmd =
      "timeout " + std::to_string(seconds) + " /bin/sh -c " + shellQuote(shellCmd) + " 2>&1";
  RunResult r;
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (!pipe) return r;
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) r.output.append(buf, n);
  const int status = ::pclose(pipe);
  r.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

const std::string kBinary = shellQuote(GEARBOX_BINARY);

RunResult runBounded(const std::string& args, int seconds = 60) {
  return runShell("exec " + kBinary + " " + args, seconds);
}

const std::string kSeed = shellQuote(example("seed001_add.gbx")) + " --trace " +
                          shellQuote(example("seed001_add.trace.jsonl"));

std::string deepGears(int depth) {
  return "{\"x1\": " + std::string(depth, '[') + std::string(depth, ']') + "}";
}

// ---- 1. deep --gears -------------------------------------------------------------------------

TEST(HostileSurfaces, DeepGearsFileIsAnExit2NotACrashInRunAndCompare) {
  TempDir dir;
  const std::string deep = dir.file("deep.json");
  write(deep, deepGears(200000));
  const std::string json = shellQuote(dir.file("r.json"));
  for (const std::string& cmd :
       {"run " + kSeed + " -q --mode geared --json " + json,
        "compare " + kSeed + " -q --repeat 1 --modes static --json " + json}) {
    const RunResult r = runBounded(cmd + " --gears @" + shellQuote(deep));
    EXPECT_EQ(r.exitCode, 2) << cmd << "\n" << r.output;
    EXPECT_TRUE(contains(r.output, "nested deeper than 64 levels")) << cmd << "\n" << r.output;
  }
}

TEST(HostileSurfaces, DeepGearsTextInTheReportConfigIsKeptAsAString) {
  // The report of a failed run still has a config block: the refused text goes in as given,
  // never re-parsed without the depth check.
  SessionOptions s;
  s.mode = Mode::kGeared;
  s.gears.json = deepGears(100000);
  const nlohmann::ordered_json c = cli::configJson(s, nullptr);
  ASSERT_TRUE(c["gears"]["spec"].is_string());
  EXPECT_EQ(c["gears"]["spec"].get<std::string>().size(), s.gears.json.size());
  // A valid spec is still an object.
  s.gears.json = R"({"x1": {"0": [2, 4]}})";
  EXPECT_TRUE(cli::configJson(s, nullptr)["gears"]["spec"].is_object());
}

TEST(HostileSurfaces, SessionRefusesBadGearsTextWhenBuiltNotAtItsFirstCall) {
  const Graph g = loadGraph(example("seed001_add.gbx"));
  for (const std::string& text :
       {std::string("{"), deepGears(1000), std::string("{\"nope\": 1}")}) {
    SessionOptions s;
    s.mode = Mode::kGeared;
    s.gears.json = text;
    errorOf([&] { Session session(g, s); }, ErrorKind::kGear);
  }
}

}  // namespace
}  // namespace gearbox
