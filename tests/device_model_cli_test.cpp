// CLI tests of the device model: --device-profile, old cost-model keys, `compare`'s modeled
// breakdown, --repeat and a failing mode, and `gearbox calibrate` (its structure only: the
// values are timings and are never asserted).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "executor/cost_model.h"
#include "graph/file_io.h"
#include "json_schema.h"
#include "temp_dir.h"

namespace gearbox {
namespace {

using testing_util::example;
using testing_util::runGearbox;
using testing_util::shellQuote;
using testing_util::TempDir;

const std::string kFourOps =
    shellQuote(example("four_ops.gbx")) + " --trace " + shellQuote(example("four_ops.trace.jsonl"));

TEST(DeviceModelCli, UnknownProfileExitsTwoListingTheBundledOnes) {
  auto r = runGearbox("run " + kFourOps + " -q --device-profile tpu");
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.output.find("unknown device profile 'tpu' (bundled: a100-class, cpu-host; or a "
                          "path to a .json file)"),
            std::string::npos)
      << r.output;
}

TEST(DeviceModelCli, AnOldCostModelFileIsRejectedNamingTheNewKeys) {
  TempDir dir;
  {
    std::ofstream f(dir.file("old.json"));
    f << R"({"kernel_compile_us": {"Add": 40}, "graph_compile_us": 2000, "launch_us": 5})";
  }
  auto r = runGearbox("run " + kFourOps + " -q --cost-model " + shellQuote(dir.file("old.json")));
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.output.find("cost model key 'graph_compile_us' was replaced by "
                          "graph_compile_base_us and graph_compile_per_node_us"),
            std::string::npos)
      << r.output;
}

TEST(DeviceModelCli, RunReportsTheProfileAndTheModeledBreakdown) {
  TempDir dir;
  auto r = runGearbox("run " + kFourOps +
                      " -q --mode geared --gear-fallback pad --gears "
                      "'{\"x\": {\"0\": [1, 2, 4, 8]}, \"y\": {\"0\": [1, 2, 4, 8]}}' --json " +
                      shellQuote(dir.file("r.json")));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  EXPECT_NE(r.output.find("modeled device time (a100-class, not measured):"), std::string::npos)
      << r.output;
  const auto j = nlohmann::json::parse(readFile(dir.file("r.json")));
  EXPECT_TRUE(testing_util::conformsToReportSchema(j));
  EXPECT_EQ(j["device_profile"], "a100-class");
  // One call (B = 3) pads up to the gear of 4: its waste is modeled, and only that call's.
  EXPECT_EQ(j["padded_calls"], 1);
  EXPECT_GT(j["modeled"]["padding_waste_us"].get<double>(), 0);
  EXPECT_DOUBLE_EQ(j["modeled"]["host_dynamic_us"].get<double>(), 0);
  EXPECT_DOUBLE_EQ(j["per_iteration"][4]["modeled_padding_waste_us"].get<double>(),
                   j["modeled"]["padding_waste_us"].get<double>());
}

TEST(DeviceModelCli, CompareShowsTheBreakdownAndKeepsGoingWhenAModeFails) {
  TempDir dir;
  // Gears without the pad fallback: B = 3 (iteration 4) is outside them, so geared fails there.
  auto r = runGearbox("compare " + kFourOps +
                      " --repeat 2 --modes static,dynamic --gears "
                      "'{\"x\": {\"0\": [1, 2, 4, 8]}, \"y\": {\"0\": [1, 2, 4, 8]}}' --json " +
                      shellQuote(dir.file("c.json")));
  EXPECT_EQ(r.exitCode, 2) << r.output;
  for (const char* row :
       {"oneTBB arena start-up", "measured total (median, n=2)", "MODELED compile",
        "MODELED launch+sync+alloc", "MODELED compute", "MODELED padding waste (of compute)",
        "MODELED host dynamic-shape work", "MODELED device time", "geared: failed at iteration 4 (",
        "fastest by MODELED device time:"})
    EXPECT_NE(r.output.find(row), std::string::npos) << row << "\n" << r.output;
  const auto j = nlohmann::json::parse(readFile(dir.file("c.json")));
  EXPECT_TRUE(testing_util::conformsToReportSchema(j));
  EXPECT_EQ(j["repeat"], 2);
  EXPECT_NE(j["modes"]["geared"]["failure"].get<std::string>().find("failed at iteration 4"),
            std::string::npos);
  EXPECT_EQ(j["modes"]["static"]["graph_compiles"], 5);
  EXPECT_TRUE(j["modes"]["dynamic"]["measured_repeat"]["total"].contains("median_seconds"));
  // Dynamic pays host work per op per call; static pays none.
  EXPECT_GT(j["modes"]["dynamic"]["modeled"]["host_dynamic_us"].get<double>(), 0);
  EXPECT_DOUBLE_EQ(j["modes"]["static"]["modeled"]["host_dynamic_us"].get<double>(), 0);
}

TEST(DeviceModelCli, CalibrateWritesALoadableProfileWithASourcePerValue) {
  TempDir dir;
  auto r = runGearbox("calibrate -o " + shellQuote(dir.file("p.json")));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  const CostModel m = loadDeviceProfile(dir.file("p.json"));
  EXPECT_EQ(m.name, "cpu-host");
  for (const char* key :
       {"peak_gflops.float", "memory_gbps", "min_kernel_us", "launch_us", "graph_launch_base_us",
        "graph_launch_per_node_us", "sync_us", "alloc_us", "graph_compile_base_us",
        "graph_compile_per_node_us", "host_shape_inference_us", "host_tiling_us",
        "generic_kernel_efficiency", "kernel_compile_us.MatMul"})
    EXPECT_NE(m.sources.count(key), 0u) << key;
  EXPECT_NE(m.sources.at("memory_gbps").find("measured here by `gearbox calibrate`"),
            std::string::npos);
}

}  // namespace
}  // namespace gearbox
