// End-to-end tests of --kernel-meta, --record-op-info, --kernel-bundle, `gearbox kernels` and
// `gearbox precompile`, each run as a separate gearbox process (GEARBOX_BINARY), so
// persistence is tested across real process boundaries.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "cli_util.h"
#include "graph/file_io.h"
#include "json_schema.h"
#include "temp_dir.h"

namespace gearbox {
namespace {

namespace fs = std::filesystem;
using testing_util::TempDir;

const std::string kModel = std::string(GEARBOX_SOURCE_DIR) + "/examples/four_ops.gbx";
const std::string kTrace = std::string(GEARBOX_SOURCE_DIR) + "/examples/four_ops.trace.jsonl";
// four_ops.trace.jsonl holds batches 1, 2, 4, 3 and 8: five shapes x four ops.
constexpr int kTraceKernels = 20;

using testing_util::shellQuote;

// Runs `gearbox ARGS` and captures its output. Arguments are shell-quoted by the caller.
struct Result {
  int code = -1;
  std::string out;  // stdout and stderr together
};
Result gearbox(const std::string& args) {
  const testing_util::RunResult r = testing_util::runGearbox(args);
  return Result{r.exitCode, r.output};
}

std::string runArgs(const std::string& extra) {
  // --no-passes: these tests count the four ops as written (Cat and IndexSelect unfused);
  // persistence of fused CatGather kernels is covered by the descriptor round trips.
  return "run " + shellQuote(kModel) + " --trace " + shellQuote(kTrace) + " -q --no-passes " +
         extra;
}

nlohmann::json readJson(const std::string& path) {
  auto j = nlohmann::json::parse(readFile(path));
  EXPECT_TRUE(testing_util::conformsToReportSchema(j)) << path;
  return j;
}

size_t countEntries(const fs::path& dir) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}

TEST(KernelMetaCli, SecondProcessCompilesNothing) {
  TempDir dir;
  const std::string meta = dir.file("kernel_meta");
  const Result first = gearbox(
      runArgs("--kernel-meta " + shellQuote(meta) + " --json " + shellQuote(dir.file("a.json"))));
  ASSERT_EQ(first.code, 0) << first.out;
  const auto a = readJson(dir.file("a.json"));
  EXPECT_EQ(a["kernel_compiles"], kTraceKernels);
  EXPECT_EQ(a["kernel_store_hits"], 0);
  EXPECT_EQ(countEntries(meta), static_cast<size_t>(kTraceKernels));  // ls kernel_meta | wc -l

  const Result second = gearbox(
      runArgs("--kernel-meta " + shellQuote(meta) + " --json " + shellQuote(dir.file("b.json"))));
  ASSERT_EQ(second.code, 0) << second.out;
  const auto b = readJson(dir.file("b.json"));
  EXPECT_EQ(b["kernel_compiles"], 0);
  EXPECT_EQ(b["kernel_store_hits"], kTraceKernels);
  EXPECT_NE(second.out.find("kernel compiles 0 (+20 loaded from a kernel store)"),
            std::string::npos)
      << second.out;
  EXPECT_EQ(countEntries(meta), static_cast<size_t>(kTraceKernels));
}

TEST(KernelMetaCli, KernelsListsAndFlagsDamage) {
  TempDir dir;
  const std::string meta = dir.file("km");
  ASSERT_EQ(gearbox(runArgs("--kernel-meta " + shellQuote(meta))).code, 0);
  Result r = gearbox("kernels " + shellQuote(meta));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("OP"), std::string::npos);
  EXPECT_NE(r.out.find("CREATED"), std::string::npos);
  EXPECT_TRUE(std::regex_search(
      r.out, std::regex(R"(MatMul +float +\[2,4\] \[4,3\] +- +\d+ +\d{4}-\d\d-\d\dT[\d:.]+Z +)"
                        R"(MatMul_float_ND_2_4__4_3\.json)")))
      << r.out;
  EXPECT_TRUE(
      std::regex_search(r.out, std::regex(R"(IndexSelect +float +\[8,7\] \[7\]:int64 +dim=1 )")))
      << r.out;
  EXPECT_NE(r.out.find("20 kernels, 0 damaged files"), std::string::npos) << r.out;

  const fs::path victim = fs::path(meta) / "Add_float_ND_4_4__4_4.json";
  fs::resize_file(victim, 10);
  r = gearbox("kernels " + shellQuote(meta));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("DAMAGED  Add_float_ND_4_4__4_4.json (10 bytes): not valid JSON"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("19 kernels, 1 damaged files"), std::string::npos) << r.out;

  // The next run warns once, recompiles that kernel and repairs the file.
  r = gearbox(
      runArgs("--kernel-meta " + shellQuote(meta) + " --json " + shellQuote(dir.file("r.json"))));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(readJson(dir.file("r.json"))["kernel_compiles"], 1);
  // Printed once: with -q in the summary, with its count.
  EXPECT_NE(
      r.out.find("warning (1 time): kernel_meta: damaged kernel file '" + victim.string() + "'"),
      std::string::npos)
      << r.out;
  EXPECT_NE(gearbox("kernels " + shellQuote(meta)).out.find("20 kernels, 0 damaged files"),
            std::string::npos);

  r = gearbox("kernels " + shellQuote(dir.file("missing")));
  EXPECT_EQ(r.code, 2) << r.out;
}

TEST(KernelMetaCli, UnwritableDirectoryWarnsAndRuns) {
  TempDir dir;
  { std::ofstream(dir.file("file")) << "x"; }
  const Result r = gearbox(runArgs("--kernel-meta " + shellQuote(dir.file("file") + "/km") +
                                   " --json " + shellQuote(dir.file("r.json"))));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("continuing without kernel persistence"), std::string::npos) << r.out;
  EXPECT_EQ(readJson(dir.file("r.json"))["kernel_compiles"], kTraceKernels);
}

TEST(PrecompileCli, RecordPrecompileAndRunWithTheBundle) {
  TempDir dir;
  const std::string build = dir.file("build");
  Result r = gearbox(runArgs("--record-op-info " + shellQuote(build)));
  ASSERT_EQ(r.code, 0) << r.out;

  const std::string bundle = dir.file("static_kernel.run");
  r = gearbox("precompile " + shellQuote(build) + " -o " + shellQuote(bundle));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("read 20 op-info records"), std::string::npos) << r.out;
  EXPECT_TRUE(std::regex_search(
      r.out,
      std::regex(R"(compiled 20 kernels in [\d.]+ (ns|us|ms|s) \(measured\) on \d+ threads?)")))
      << r.out;
  EXPECT_NE(r.out.find("bundle written to " + bundle), std::string::npos) << r.out;

  r = gearbox(runArgs("--kernel-bundle " + shellQuote(bundle) + " --json " +
                      shellQuote(dir.file("r.json"))));
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = readJson(dir.file("r.json"));
  EXPECT_EQ(j["kernel_compiles"], 0);
  EXPECT_EQ(j["kernel_store_hits"], kTraceKernels);

  // Without -o the bundle lands in the ts folder, named as seed 003 names it.
  r = gearbox("precompile " + shellQuote(build));
  ASSERT_EQ(r.code, 0) << r.out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex(R"(bundle written to (\S+))"))) << r.out;
  EXPECT_TRUE(std::regex_search(
      m[1].str(), std::regex(R"(aclnn_static_shape_kernel_outputs/ts\d{20}_pid\d+_outputs/)"
                             R"(static_kernel_\d{14}\.run$)")))
      << m[1];
  EXPECT_TRUE(fs::exists(m[1].str()));
}

TEST(PrecompileCli, BadBundleAndRefusedPathsExitTwo) {
  TempDir dir;
  { std::ofstream(dir.file("bad.run")) << "{\"format\": \"gearbox-kernel-bundle\", \"vers"; }
  Result r = gearbox(runArgs("--kernel-bundle " + shellQuote(dir.file("bad.run"))));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("kernel bundle '" + dir.file("bad.run") + "'"), std::string::npos) << r.out;

  r = gearbox(runArgs("--kernel-bundle " + shellQuote(dir.file("missing.run"))));
  EXPECT_EQ(r.code, 2) << r.out;

  r = gearbox(runArgs("--record-op-info " + shellQuote(dir.file("a/../b"))));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("'..'"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(dir.file("b")));

  fs::create_directory_symlink(dir.path(), dir.path() / "link");
  r = gearbox(runArgs("--record-op-info " + shellQuote(dir.file("link/rec"))));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("symlink"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(dir.file("rec")));

  r = gearbox("precompile " + shellQuote(dir.file("nothing_here")));
  EXPECT_EQ(r.code, 2) << r.out;
}

}  // namespace
}  // namespace gearbox

namespace gearbox {
namespace {

// The new ops (mul, relu, reshape, transpose, 1-D matmul) through the whole static-kernel
// workflow of seeds 000 and 003, on the two models that use them: a second run from kernel_meta
// compiles nothing, op-info records precompile into a bundle that serves every kernel, and
// `gearbox kernels` lists their attributes.
class NewOpsStoreCli : public ::testing::TestWithParam<std::string> {};

TEST_P(NewOpsStoreCli, KernelMetaAndPrecompiledBundleServeEveryKernel) {
  TempDir dir;
  const std::string model = testing_util::example(GetParam() + ".gbx");
  const std::string trace = testing_util::example(GetParam() + ".trace.jsonl");
  auto run = [&](const std::string& extra, const std::string& json) {
    // --no-passes: the shuffle pass would rewrite the reshapes and transposes this test is for.
    return gearbox("run " + shellQuote(model) + " --trace " + shellQuote(trace) +
                   " -q --no-passes " + extra + " --json " + shellQuote(dir.file(json)));
  };
  const std::string meta = dir.file("kernel_meta");
  Result r = run("--kernel-meta " + shellQuote(meta), "a.json");
  ASSERT_EQ(r.code, 0) << r.out;
  const int64_t compiles = readJson(dir.file("a.json"))["kernel_compiles"];
  EXPECT_GT(compiles, 0);
  EXPECT_EQ(countEntries(meta), static_cast<size_t>(compiles));
  r = run("--kernel-meta " + shellQuote(meta), "b.json");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(readJson(dir.file("b.json"))["kernel_compiles"], 0);
  EXPECT_EQ(readJson(dir.file("b.json"))["kernel_store_hits"], compiles);

  r = gearbox("kernels " + shellQuote(meta));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("shape=["), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(fmt::format("{} kernels, 0 damaged files", compiles)), std::string::npos)
      << r.out;

  const std::string build = dir.file("build");
  ASSERT_EQ(run("--record-op-info " + shellQuote(build), "c.json").code, 0);
  const std::string bundle = dir.file("static_kernel.run");
  r = gearbox("precompile " + shellQuote(build) + " -o " + shellQuote(bundle));
  ASSERT_EQ(r.code, 0) << r.out;
  r = run("--kernel-bundle " + shellQuote(bundle), "d.json");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(readJson(dir.file("d.json"))["kernel_compiles"], 0);
  EXPECT_EQ(readJson(dir.file("d.json"))["kernel_store_hits"], compiles);
}

INSTANTIATE_TEST_SUITE_P(Bundled, NewOpsStoreCli,
                         ::testing::Values("shufflenet_view", "seed002_masked_loss"));

}  // namespace
}  // namespace gearbox
