// Faults (issue 15): a process killed in the middle of writing --kernel-meta, --json, eval --out
// and precompile -o leaves no partial file under the real name, and the next run works; four
// processes sharing one kernel_meta directory all succeed and leave it consistent.
// GEARBOX_KILL_WRITE_AFTER=N (graph/npy.cpp) SIGKILLs the process after N bytes of a file.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "compiler/kernel_store.h"
#include "executor/session.h"
#include "graph/file_io.h"
#include "graph/npy.h"
#include "graph/text.h"
#include "json_schema.h"
#include "temp_dir.h"

namespace gearbox {
namespace {

namespace fs = std::filesystem;
using testing_util::example;
using testing_util::RunResult;
using testing_util::shellQuote;
using testing_util::TempDir;

// A shell command under a 120 s timeout; exitCode is 128 + signal when the shell's child was
// killed.
RunResult sh(const std::string& cmd) {
  return testing_util::runShell(cmd, 120);
}

const std::string kBin = shellQuote(GEARBOX_BINARY);
const std::string kFourOps = "run " + shellQuote(example("four_ops.gbx")) + " --trace " +
                             shellQuote(example("four_ops.trace.jsonl")) + " -q";

std::string killedAfter(int bytes) {
  return "GEARBOX_KILL_WRITE_AFTER=" + std::to_string(bytes) + " exec " + kBin + " ";
}

// Files under `dir` whose name is not a temp name.
std::vector<fs::path> finished(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file() && e.path().string().find(".tmp.") == std::string::npos)
      out.push_back(e.path());
  return out;
}

// Temp files (NAME.tmp.PID.N) under `dir`.
std::vector<fs::path> temps(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file() && e.path().string().find(".tmp.") != std::string::npos)
      out.push_back(e.path());
  return out;
}

// Ages every temp file under `dir` by `seconds`, as if the crash happened that long ago.
void ageTemps(const fs::path& dir, int seconds) {
  for (const fs::path& f : temps(dir))
    fs::last_write_time(f, fs::last_write_time(f) - std::chrono::seconds(seconds));
}

// The pid of a process that has exited and been reaped.
pid_t deadPid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return pid;
}

TEST(Faults, StaleTempFilesOfDeadWritersAreRemovedOnlyWhenOldAndDead) {
  TempDir dir;
  const pid_t dead = deadPid();
  auto touch = [&](const std::string& name) {
    std::ofstream(dir.file(name)) << "partial";
    return dir.file(name);
  };
  const std::string oldDead = touch(fmt::format("r.json.tmp.{}.0", dead));
  const std::string youngDead = touch(fmt::format("q.json.tmp.{}.1", dead));
  const std::string alive = touch(fmt::format("r.json.tmp.{}.2", ::getppid()));
  const std::string notATemp = touch(fmt::format("r.json.tmp.{}.x", dead));
  const std::string plain = touch("r.json");
  for (const std::string& f : {oldDead, alive, notATemp, plain})
    fs::last_write_time(f, fs::last_write_time(f) - std::chrono::seconds(600));
  // Only names with the prefix are considered.
  EXPECT_EQ(removeStaleTempFiles(dir.path(), "zzz"), 0u);
  EXPECT_EQ(removeStaleTempFiles(dir.path(), "r.json.tmp."), 1u);
  EXPECT_FALSE(fs::exists(oldDead));
  EXPECT_TRUE(fs::exists(youngDead));  // younger than the age guard
  EXPECT_TRUE(fs::exists(alive));      // its writer may still be writing
  EXPECT_TRUE(fs::exists(notATemp));
  EXPECT_TRUE(fs::exists(plain));
  EXPECT_EQ(removeStaleTempFiles(dir.path(), "", 0), 1u);  // the young one, with no age guard
  EXPECT_FALSE(fs::exists(youngDead));
}

TEST(Faults, TheNextWriteOfANameRemovesTheTempFileAKilledWriterLeft) {
  TempDir dir;
  const std::string json = dir.file("r.json");
  RunResult r = sh(killedAfter(20) + kFourOps + " --json " + shellQuote(json));
  EXPECT_EQ(r.exitCode, 128 + SIGKILL) << r.output;
  ASSERT_EQ(temps(dir.path()).size(), 1u);
  ageTemps(dir.path(), 120);
  r = sh("exec " + kBin + " " + kFourOps + " --json " + shellQuote(json));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  EXPECT_TRUE(temps(dir.path()).empty());
  EXPECT_TRUE(fs::exists(json));
}

TEST(Faults, AKernelMetaStoreSweepsTempFilesOfKilledWritersWhenItOpens) {
  TempDir dir;
  const std::string meta = dir.file("km");
  RunResult r = sh(killedAfter(30) + kFourOps + " --kernel-meta " + shellQuote(meta));
  EXPECT_EQ(r.exitCode, 128 + SIGKILL) << r.output;
  ASSERT_EQ(temps(meta).size(), 1u);
  ageTemps(meta, 120);
  r = sh("exec " + kBin + " " + kFourOps + " --kernel-meta " + shellQuote(meta));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  EXPECT_TRUE(temps(meta).empty());
  EXPECT_FALSE(finished(meta).empty());
}

TEST(Faults, KilledMidJsonKeepsThePreviousReportAndTheNextRunWorks) {
  TempDir dir;
  const std::string json = dir.file("r.json");
  { std::ofstream(json) << "{\"previous\": true}"; }
  RunResult r = sh(killedAfter(20) + kFourOps + " --json " + shellQuote(json));
  EXPECT_EQ(r.exitCode, 128 + SIGKILL) << r.output;
  EXPECT_EQ(readFile(json), "{\"previous\": true}");
  r = sh("exec " + kBin + " " + kFourOps + " --json " + shellQuote(json));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  EXPECT_NO_THROW((void)nlohmann::json::parse(readFile(json)));
}

TEST(Faults, KilledMidKernelMetaLeavesNoPartialKernelFile) {
  TempDir dir;
  const std::string meta = dir.file("km");
  RunResult r = sh(killedAfter(30) + kFourOps + " --kernel-meta " + shellQuote(meta));
  EXPECT_EQ(r.exitCode, 128 + SIGKILL) << r.output;
  // Nothing under a kernel's name: the first write died before its rename.
  EXPECT_TRUE(finished(meta).empty());
  // The next run compiles and saves everything, warns about nothing, and a third loads all.
  r = sh("exec " + kBin + " " + kFourOps + " --kernel-meta " + shellQuote(meta));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  EXPECT_EQ(r.output.find("damaged"), std::string::npos) << r.output;
  const std::string json = dir.file("r.json");
  r = sh("exec " + kBin + " " + kFourOps + " --kernel-meta " + shellQuote(meta) + " --json " +
         shellQuote(json));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  const auto j = nlohmann::json::parse(readFile(json));
  EXPECT_TRUE(testing_util::conformsToReportSchema(j));
  EXPECT_EQ(j["kernel_compiles"].get<int>(), 0) << j.dump();
  for (const fs::path& f : finished(meta))
    EXPECT_NO_THROW((void)parseKernelDescriptor(readFile(f.string()))) << f;
}

TEST(Faults, KilledMidEvalOutAndPrecompileOutput) {
  TempDir dir;
  const Graph g = loadGraph(example("four_ops.gbx"));
  auto inputs = makeInputs(g, {Shape{3, 4}, Shape{3, 4}}, 5);
  saveNpy(dir.file("x.npy"), inputs[0]);
  saveNpy(dir.file("y.npy"), inputs[1]);
  const std::string eval = "eval " + shellQuote(example("four_ops.gbx")) +
                           " --input x=" + shellQuote(dir.file("x.npy")) +
                           " --input y=" + shellQuote(dir.file("y.npy")) + " --out " +
                           shellQuote(dir.file("out"));
  RunResult r = sh(killedAfter(40) + eval);
  EXPECT_EQ(r.exitCode, 128 + SIGKILL) << r.output;
  EXPECT_FALSE(fs::exists(dir.file("out/o.npy")));
  r = sh("exec " + kBin + " " + eval);
  ASSERT_EQ(r.exitCode, 0) << r.output;
  EXPECT_TRUE(loadNpy(dir.file("out/o.npy")).equals(referenceRun(g, inputs)[0]));

  const std::string rec = dir.file("rec");
  ASSERT_EQ(sh("exec " + kBin + " " + kFourOps + " --record-op-info " + shellQuote(rec)).exitCode,
            0);
  const std::string bundle = dir.file("k.run");
  r = sh(killedAfter(100) + "precompile " + shellQuote(rec) + " -o " + shellQuote(bundle));
  EXPECT_EQ(r.exitCode, 128 + SIGKILL) << r.output;
  EXPECT_FALSE(fs::exists(bundle));
  r = sh("exec " + kBin + " precompile " + shellQuote(rec) + " -o " + shellQuote(bundle));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  EXPECT_FALSE(loadKernelBundle(bundle).empty());
}

TEST(Faults, FourProcessesShareOneKernelMetaDirectory) {
  TempDir dir;
  const std::string meta = shellQuote(dir.file("km"));
  std::string cmd;
  for (int i = 0; i < 4; ++i)
    cmd += kBin + " " + kFourOps + " --kernel-meta " + meta + " > " +
           shellQuote(dir.file("p" + std::to_string(i) + ".log")) + " 2>&1 & pids=\"$pids $!\"; ";
  cmd += "fail=0; for p in $pids; do wait $p || fail=1; done; exit $fail";
  RunResult r = sh(cmd);
  EXPECT_EQ(r.exitCode, 0) << r.output;
  for (int i = 0; i < 4; ++i) {
    const std::string log = readFile(dir.file("p" + std::to_string(i) + ".log"));
    EXPECT_EQ(log.find("damaged"), std::string::npos) << log;
    EXPECT_EQ(log.find("skipping"), std::string::npos) << log;
  }
  // Consistent: every file parses, no temp file is left, and a fifth run compiles nothing.
  for (const auto& e : fs::directory_iterator(dir.file("km"))) {
    EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos) << e.path();
    EXPECT_NO_THROW((void)parseKernelDescriptor(readFile(e.path().string()))) << e.path();
  }
  const std::string json = dir.file("r.json");
  ASSERT_EQ(
      sh("exec " + kBin + " " + kFourOps + " --kernel-meta " + meta + " --json " + shellQuote(json))
          .exitCode,
      0);
  EXPECT_EQ(nlohmann::json::parse(readFile(json))["kernel_compiles"].get<int>(), 0);
}

}  // namespace
}  // namespace gearbox
