// The JSON report v1 against docs/report-schema.json: every report these tests make (run in
// every mode, compare, geared with padding, --iterations levels, a run that fails half-way)
// validates, and a report that breaks the schema is caught.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "executor/modes/mode_table.h"
#include "graph/file_io.h"
#include "json_schema.h"
#include "temp_dir.h"

namespace gearbox {
namespace {

using testing_util::example;
using testing_util::runGearbox;
using testing_util::shellQuote;
using testing_util::TempDir;

::testing::AssertionResult conforms(const nlohmann::json& report) {
  return testing_util::conformsToReportSchema(report);
}

const std::string kSeed = shellQuote(example("seed001_add.gbx")) + " --trace " +
                          shellQuote(example("seed001_add.trace.jsonl"));

// Runs one command with --json and validates what it wrote; returns the report.
nlohmann::json reportOf(const std::string& args, int expectedExit = 0) {
  TempDir dir;
  const std::string json = dir.file("r.json");
  auto r = runGearbox(args + " --json " + shellQuote(json));
  EXPECT_EQ(r.exitCode, expectedExit) << args << "\n" << r.output;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(readFile(json));
  } catch (const std::exception& e) {
    ADD_FAILURE() << args << ": no report: " << e.what() << "\n" << r.output;
    return j;
  }
  EXPECT_TRUE(conforms(j)) << args;
  return j;
}

TEST(ReportSchema, EveryModeOfRunConforms) {
  for (const ModeInfo& m : modeTable()) {
    if (m.needsGears) continue;  // below, with gears
    const std::string mode(m.name);
    const auto j = reportOf("run " + kSeed + " -q --mode " + mode);
    EXPECT_EQ(j["schema_version"], 1) << mode;
    EXPECT_EQ(j["complete"], true) << mode;
    EXPECT_EQ(j["config"]["mode"], mode);
  }
  const auto g =
      reportOf("run " + shellQuote(example("seed001_add.gbx")) + " --trace " +
               shellQuote(example("seed001_gears.trace.jsonl")) + " -q --mode geared --gears @" +
               shellQuote(example("seed001_gears.json")) + " --gear-fallback pad");
  EXPECT_EQ(g["config"]["gears"]["fallback"], "pad");
}

TEST(ReportSchema, CompareWithAFailedModeReferenceCheckAndHistoryLimitConform) {
  const std::string fourOps = shellQuote(example("four_ops.gbx")) + " --trace " +
                              shellQuote(example("four_ops.trace.jsonl"));
  // Geared without padding fails at B = 3: its entry is an incomplete report.
  const auto c = reportOf("compare " + fourOps +
                              " -q --repeat 1 --modes static --gears "
                              "'{\"x\": {\"0\": [1, 2, 4, 8]}, \"y\": {\"0\": [1, 2, 4, 8]}}'",
                          2);
  EXPECT_EQ(c["complete"], false);
  EXPECT_EQ(c["modes"]["geared"]["complete"], false);
  const auto r = reportOf("run " + fourOps + " -q --check-reference --history-limit 2");
  EXPECT_TRUE(r.contains("reference_check"));
  EXPECT_TRUE(r.contains("per_iteration_dropped"));
}

TEST(ReportSchema, StructuredShapesGuardsAndPerModePlanNumbers) {
  const auto j = reportOf("run " + kSeed + " -q --mode static");
  const auto& it1 = j["per_iteration"][1];
  EXPECT_EQ(it1["shapes"], nlohmann::json::parse(R"({"x1": [3, 2], "x2": [3, 2]})"));
  ASSERT_FALSE(it1["guards"].empty());
  EXPECT_EQ(it1["guards"][0], nlohmann::json::parse(
                                  R"({"plan": 1, "input": "x1", "dim": 0, "expected": 2,
                                      "actual": 3})"));
  // compare numbers each mode's plans from 1.
  const auto c = reportOf("compare " + kSeed + " -q --repeat 1 --modes static,auto");
  EXPECT_EQ(c["modes"]["static"]["per_iteration"][0]["plan"], 1);
  EXPECT_EQ(c["modes"]["auto"]["per_iteration"][0]["plan"], 1);
  EXPECT_EQ(c["command"], "compare");
}

TEST(ReportSchema, IterationLevels) {
  EXPECT_EQ(reportOf("run " + kSeed + " -q --iterations none")["per_iteration"].size(), 0u);
  // seed001 static: 5 of the 7 calls compile.
  EXPECT_EQ(reportOf("run " + kSeed + " -q --iterations compiles")["per_iteration"].size(), 5u);
  EXPECT_EQ(reportOf("run " + kSeed + " -q --iterations all")["per_iteration"].size(), 7u);
}

TEST(ReportSchema, AnErrorMidRunWritesAnIncompleteReport) {
  // Geared without padding: the third call's shape is outside the gears.
  const auto j = reportOf(
      "run " + kSeed + " -q --mode geared --gears @" + shellQuote(example("seed001_gears.json")),
      2);
  EXPECT_EQ(j["complete"], false);
  EXPECT_NE(j["error"]["message"].get<std::string>().find("geared mode, iteration"),
            std::string::npos)
      << j["error"];
  EXPECT_LT(j["iterations"].get<int>(), 7);
}

TEST(ReportSchema, ANonConformingReportIsCaught) {
  auto j = reportOf("run " + kSeed + " -q");
  ASSERT_TRUE(conforms(j));
  auto missing = j;
  missing.erase("graph_compiles");
  EXPECT_FALSE(conforms(missing));
  auto wrongType = j;
  wrongType["per_iteration"][0]["shapes"] = "x1=[2, 2]";
  EXPECT_FALSE(conforms(wrongType));
  auto negative = j;
  negative["launches"] = -1;
  EXPECT_FALSE(conforms(negative));
  auto extra = j;
  extra["undocumented"] = 1;
  EXPECT_FALSE(conforms(extra));
  auto badEnum = j;
  badEnum["config"]["on_recompile_limit"] = "sometimes";
  EXPECT_FALSE(conforms(badEnum));
}

}  // namespace
}  // namespace gearbox
