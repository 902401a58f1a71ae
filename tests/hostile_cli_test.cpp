// Hostile inputs through the real binary (issue 15): every case exits 2 with one clear message
// (or, for writers, keeps what the path is), never hangs and never allocates what a tiny input
// asks for. Commands run under `timeout` so a regression to a hang fails instead of blocking.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "graph/file_io.h"
#include "graph/npy.h"
#include "json_schema.h"
#include "temp_dir.h"

namespace gearbox {
namespace {

namespace fs = std::filesystem;
using testing_util::example;
using testing_util::runBounded;
using testing_util::runGearbox;
using testing_util::RunResult;
using testing_util::runShell;
using testing_util::shellQuote;
using testing_util::TempDir;

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

void write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

const std::string kBinary = shellQuote(GEARBOX_BINARY);

const std::string kSeedModel = example("seed001_add.gbx");

TEST(HostileCli, TraceDimOfTwoToThe61IsAnExit2NamingInputDimAndValue) {
  TempDir dir;
  write(dir.file("t.jsonl"), "{\"x1\": [2305843009213693952, 2], \"x2\": [2, 2]}\n");
  RunResult r = runBounded("run " + shellQuote(kSeedModel) + " --trace " +
                           shellQuote(dir.file("t.jsonl")) + " --mode static");
  EXPECT_EQ(r.exitCode, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "t.jsonl:1: input 'x1' dim 0 = 2305843009213693952")) << r.output;
  // numel near 2^62: each dim fits, the product does not fit the limit.
  write(dir.file("n.jsonl"), "{\"x1\": [2147483648, 2147483648], \"x2\": [2, 2]}\n");
  r = runBounded("run " + shellQuote(kSeedModel) + " --trace " + shellQuote(dir.file("n.jsonl")));
  EXPECT_EQ(r.exitCode, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "input 'x1' dim 1 = 2147483648")) << r.output;
}

TEST(HostileCli, NegativeOrAbsurdCacheCapacitiesAreRefused) {
  const std::string run = "run " + shellQuote(kSeedModel) + " --trace " +
                          shellQuote(example("seed001_add.trace.jsonl"));
  for (const char* bad : {"-1", "0", "18446744073709551615", "99999999999"}) {
    RunResult r = runBounded(run + " --kernel-cache-capacity " + bad);
    EXPECT_EQ(r.exitCode, 2) << bad << ": " << r.output;
    EXPECT_TRUE(contains(r.output, "--kernel-cache-capacity")) << r.output;
  }
  EXPECT_EQ(runBounded(run + " --plan-cache-capacity -1").exitCode, 2);
  EXPECT_EQ(runBounded(run + " -q --kernel-cache-capacity 1").exitCode, 0);
}

TEST(HostileCli, OutputPoolSizesAreCheckedAndZeroTurnsThePoolOff) {
  const std::string run = "run " + shellQuote(kSeedModel) + " --trace " +
                          shellQuote(example("seed001_add.trace.jsonl"));
  for (const char* bad : {"-1", "1.5GiB", "12XB", "99999999999999999999", "2PiB", "''"}) {
    RunResult r = runBounded(run + " --output-pool " + bad);
    EXPECT_EQ(r.exitCode, 2) << bad << ": " << r.output;
    EXPECT_TRUE(contains(r.output, "--output-pool")) << r.output;
  }
  TempDir dir;
  for (const char* good : {"0", "1", "64MiB"}) {
    RunResult r =
        runBounded(run + " -q --output-pool " + good + " --json " + shellQuote(dir.file("r.json")));
    EXPECT_EQ(r.exitCode, 0) << good << ": " << r.output;
    const auto pool = nlohmann::json::parse(readFile(dir.file("r.json")))["host_output_pool"];
    EXPECT_EQ(pool["requests"], 7) << good;  // seed 001: seven static calls
    EXPECT_EQ(pool["capacity_bytes"], good[0] == '0' ? 0 : good[0] == '1' ? 1 : 64 << 20);
    // The 16-48 byte outputs are one 64-byte rounded size: with the pool on, one allocation.
    EXPECT_EQ(pool["misses"], good[0] == '6' ? 1 : 7) << good;
  }
}

TEST(HostileCli, TinyNpyOfZeroRowsAndABillionColumnsFailsBeforeAllocating) {
  TempDir dir;
  write(dir.file("m.gbx"),
        "graph g(%x: f32[-1, -1], %i: i64[-1]) {\n  %o = index_select(%x, %i, dim=0)\n  return "
        "%o\n}\n");
  saveNpy(dir.file("x.npy"), Tensor(DType::kF32, Shape{0, 1000000000}));
  Tensor idx(DType::kI64, Shape{3});
  saveNpy(dir.file("i.npy"), idx);
  ASSERT_LE(fs::file_size(dir.file("x.npy")), 128u);
  // 12 GB if the output were allocated before the index check; ulimit makes that fail loudly
  // (skipped under ASan, whose shadow memory needs a large address space).
#if defined(GEARBOX_ASAN_BUILD)
  const std::string limit;
#else
  const std::string limit = "ulimit -v 4000000; ";
#endif
  RunResult r = runShell(limit + "exec " + kBinary + " eval " + shellQuote(dir.file("m.gbx")) +
                         " --input x=" + shellQuote(dir.file("x.npy")) + " --input i=" +
                         shellQuote(dir.file("i.npy")) + " --out " + shellQuote(dir.file("out")));
  EXPECT_EQ(r.exitCode, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "every index is out of range")) << r.output;
  EXPECT_FALSE(fs::exists(dir.file("out")));
}

TEST(HostileCli, HugePadIsRefusedAndPaddedBytesCountInPeakBytes) {
  TempDir dir;
  write(dir.file("t.jsonl"), "{\"x1\": [3, 2], \"x2\": [3, 2]}\n");
  const std::string base =
      "run " + shellQuote(kSeedModel) + " --trace " + shellQuote(dir.file("t.jsonl")) +
      " --mode geared --gear-fallback pad --json " + shellQuote(dir.file("r.json")) + " --gears ";
  // 1e7 rows: 3 x 80 MB of padded inputs and output, below the default 1 GiB limit, so it
  // runs, and peak_bytes must show those bytes (it said 0 before).
  RunResult r =
      runBounded(base + shellQuote(R"({"x1": {"0": [2, 10000000]}, "x2": {"0": [2, 10000000]}})"));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  const auto j = nlohmann::json::parse(readFile(dir.file("r.json")));
  EXPECT_TRUE(testing_util::conformsToReportSchema(j));
  EXPECT_EQ(j["peak_bytes"].get<int64_t>(), int64_t{3} * 10000000 * 2 * 4) << j.dump();
  // 1e9 rows: 24 GB of padding is refused at once instead of hanging.
  r = runBounded(
      base + shellQuote(R"({"x1": {"0": [2, 1000000000]}, "x2": {"0": [2, 1000000000]}})"), 30);
  EXPECT_EQ(r.exitCode, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "above the pad limit of 1073741824 bytes")) << r.output;
}

TEST(HostileCli, FifosAsModelTraceCostModelNpyAndGearsAreRefusedWithoutBlocking) {
  TempDir dir;
  const std::string fifo = dir.file("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string trace = shellQuote(example("seed001_add.trace.jsonl"));
  const std::vector<std::string> cases{
      "run " + shellQuote(fifo) + " --trace " + trace,
      "run " + shellQuote(kSeedModel) + " --trace " + shellQuote(fifo),
      "run " + shellQuote(kSeedModel) + " --trace " + trace + " --cost-model " + shellQuote(fifo),
      "run " + shellQuote(kSeedModel) + " --trace " + trace + " --mode geared --gears @" +
          shellQuote(fifo),
      "eval " + shellQuote(kSeedModel) + " --input x1=" + shellQuote(fifo) +
          " --input x2=" + shellQuote(fifo) + " --out " + shellQuote(dir.file("o")),
      "run " + shellQuote(dir.path().string()) + " --trace " + trace,
  };
  for (const std::string& c : cases) {
    RunResult r = runBounded(c, 20);
    EXPECT_EQ(r.exitCode, 2) << c << "\n" << r.output;
    EXPECT_TRUE(contains(r.output, "not a regular file")) << c << "\n" << r.output;
  }
}

TEST(HostileCli, DeepJsonInATraceLineIsAClearError) {
  TempDir dir;
  write(dir.file("t.jsonl"), std::string(100000, '[') + std::string(100000, ']') + "\n");
  RunResult r =
      runBounded("run " + shellQuote(kSeedModel) + " --trace " + shellQuote(dir.file("t.jsonl")));
  EXPECT_EQ(r.exitCode, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "t.jsonl:1: JSON nested deeper than 64 levels")) << r.output;
}

TEST(HostileCli, JsonReportThroughASymlinkAndIntoACharDevice) {
  TempDir dir;
  const std::string run = "run " + shellQuote(kSeedModel) + " --trace " +
                          shellQuote(example("seed001_add.trace.jsonl")) + " -q --json ";
  write(dir.file("target.json"), "old");
  fs::create_symlink("target.json", dir.file("link.json"));
  ASSERT_EQ(runBounded(run + shellQuote(dir.file("link.json"))).exitCode, 0);
  EXPECT_TRUE(fs::is_symlink(dir.file("link.json")));
  EXPECT_NO_THROW((void)nlohmann::json::parse(readFile(dir.file("target.json"))));
  const std::string dev = dir.file("null");
  if (::mknod(dev.c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0) GTEST_SKIP() << "needs root";
  ASSERT_EQ(runBounded(run + shellQuote(dev)).exitCode, 0);
  struct stat st {};
  ASSERT_EQ(::stat(dev.c_str(), &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
}

TEST(HostileCli, InjectedWriteFailureLosesNothing) {
  TempDir dir;
  const std::string json = dir.file("r.json");
  write(json, "{\"previous\": true}");
  const std::string run = "run " + shellQuote(kSeedModel) + " --trace " +
                          shellQuote(example("seed001_add.trace.jsonl")) + " -q";
  // The report write fails half-way: exit 2 and the previous report is still whole.
  RunResult r = runBounded(run + " --json " + shellQuote(json), 60);
  ASSERT_EQ(r.exitCode, 0);
  write(json, "{\"previous\": true}");
  r = runShell("GEARBOX_FAIL_WRITE_AFTER=10 exec " + kBinary + " " + run + " --json " +
               shellQuote(json));
  EXPECT_EQ(r.exitCode, 2) << r.output;
  EXPECT_TRUE(contains(r.output, "No space left on device")) << r.output;
  EXPECT_EQ(readFile(json), "{\"previous\": true}");
  // The kernel store: every save fails, the run still succeeds with one warning, and no file
  // (partial or temp) is left in the directory.
  const std::string meta = dir.file("km");
  r = runShell("GEARBOX_FAIL_WRITE_AFTER=10 exec " + kBinary + " " + run + " --kernel-meta " +
               shellQuote(meta));
  EXPECT_EQ(r.exitCode, 0) << r.output;
  size_t warnings = 0;
  for (size_t p = r.output.find("skipping this kernel file"); p != std::string::npos;
       p = r.output.find("skipping this kernel file", p + 1))
    ++warnings;
  EXPECT_EQ(warnings, 1u) << r.output;
  size_t files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(meta)) ++files;
  EXPECT_EQ(files, 0u);
}

}  // namespace
}  // namespace gearbox

namespace gearbox {
namespace {

TEST(HostileCli, HistoryLimitBoundsThePerIterationRecords) {
  TempDir dir;
  const std::string json = dir.file("r.json");
  RunResult r = runBounded("run " + shellQuote(example("four_ops.gbx")) + " --trace " +
                           shellQuote(example("four_ops.trace.jsonl")) +
                           " -q --history-limit 3 --json " + shellQuote(json));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  const auto j = nlohmann::json::parse(readFile(json));
  EXPECT_TRUE(testing_util::conformsToReportSchema(j));
  // 8 iterations, trimmed to 3 after the 6th: 5 kept, 3 dropped, the last one last.
  EXPECT_EQ(j["iterations"].get<int>(), 8);
  EXPECT_EQ(j["per_iteration_dropped"].get<int>(), 3);
  ASSERT_EQ(j["per_iteration"].size(), 5u);
  EXPECT_EQ(j["per_iteration"].back()["iteration"].get<int>(), 7);
  EXPECT_EQ(runBounded("run " + shellQuote(kSeedModel) + " --trace " +
                       shellQuote(example("seed001_add.trace.jsonl")) + " --history-limit -1")
                .exitCode,
            2);
}

}  // namespace
}  // namespace gearbox
