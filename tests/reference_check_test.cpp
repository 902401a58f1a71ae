// --check-reference: the agreement rule (driver/reference_check.h) and the CLI over every
// bundled model.
#include "driver/reference_check.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "graph/file_io.h"
#include "graph/npy.h"
#include "graph/text.h"
#include "json_schema.h"
#include "temp_dir.h"

namespace gearbox {
namespace {

using testing_util::example;
using testing_util::runGearbox;
using testing_util::shellQuote;
using testing_util::TempDir;

Graph addGraph(DType dtype) {
  GraphBuilder b("add");
  auto x = b.input("x", dtype, {kAnyDim});
  b.output(b.add(x, x, "y"));
  return b.build();
}

Tensor floats(std::vector<float> v) {
  Tensor t(DType::kF32, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.as<float>()[i] = v[i];
  return t;
}

TEST(ReferenceCheck, AllcloseRuleAtTheBoundary) {
  cli::ReferenceCheck check(addGraph(DType::kF32), {/*rtol=*/0.1, /*atol=*/0.5});
  const Tensor ref = floats({10, -10, 0, 4});
  // |out - ref| <= 0.5 + 0.1 * |ref|: 1.5 allowed at 10, 0.5 at 0.
  const Tensor ok = floats({11.5f, -8.5f, 0.5f, 4});
  check.compare(std::vector<Tensor>{ref}, std::vector<Tensor>{ok});
  EXPECT_TRUE(check.ok());
  EXPECT_DOUBLE_EQ(check.outputs()[0].maxAbsError, 1.5);
  EXPECT_DOUBLE_EQ(check.outputs()[0].maxRelError, 0.15);
  const Tensor bad = floats({10, -10, 0.75f, 4});
  check.compare(std::vector<Tensor>{ref}, std::vector<Tensor>{bad});
  EXPECT_FALSE(check.ok());
  EXPECT_EQ(check.outputs()[0].mismatches, 1);
  EXPECT_EQ(check.calls(), 2);
  ASSERT_EQ(check.failures().size(), 1u);
  EXPECT_NE(check.failures()[0].find("output 'y' disagrees with the reference executor: 1 "
                                     "elements outside |out - ref| <= 0.5 + 0.1 * |ref|"),
            std::string::npos)
      << check.failures()[0];
  EXPECT_FALSE(check.json()["ok"].get<bool>());
}

TEST(ReferenceCheck, NanAgreesOnlyWithNanAndShapesMustMatch) {
  cli::ReferenceCheck nan(addGraph(DType::kF32), {});
  nan.compare(std::vector<Tensor>{floats({NAN, 1})}, std::vector<Tensor>{floats({NAN, 1})});
  EXPECT_TRUE(nan.ok());
  nan.compare(std::vector<Tensor>{floats({1, 1})}, std::vector<Tensor>{floats({NAN, 1})});
  EXPECT_FALSE(nan.ok());
  EXPECT_TRUE(nan.json()["outputs"][0]["max_abs_error"].is_null());

  cli::ReferenceCheck shape(addGraph(DType::kF32), {});
  shape.compare(std::vector<Tensor>{floats({1, 2})}, std::vector<Tensor>{floats({1, 2, 3})});
  EXPECT_FALSE(shape.ok());
  EXPECT_NE(shape.outputs()[0].shapeError.find("the reference executor f32 [2]"), std::string::npos)
      << shape.outputs()[0].shapeError;
}

TEST(ReferenceCheck, IntegersMustBeEqual) {
  const Graph g = addGraph(DType::kI64);
  // Even a tolerance that would forgive 1 at this size does not apply to integers.
  cli::ReferenceCheck check(g, {/*rtol=*/0.01, /*atol=*/1});
  Tensor in(DType::kI64, {3});
  for (int64_t i = 0; i < 3; ++i) in.as<int64_t>()[i] = 1000000 + i;
  const std::vector<Tensor> inputs{in};
  std::vector<Tensor> out = referenceRun(g, inputs);
  check.check(inputs, out);
  EXPECT_TRUE(check.ok());
  out[0].as<int64_t>()[2] += 1;
  check.check(inputs, out);
  EXPECT_FALSE(check.ok());
}

// Acceptance: every bundled model with its trace, every mode, agrees with the oracle.
TEST(ReferenceCheckCli, CompareOnEveryBundledModelAgrees) {
  TempDir dir;
  int models = 0;
  for (const auto& e : std::filesystem::directory_iterator(example(""))) {
    if (e.path().extension() != ".gbx") continue;
    std::filesystem::path trace = e.path();
    trace.replace_extension(".trace.jsonl");
    if (!std::filesystem::exists(trace)) continue;
    SCOPED_TRACE(e.path().filename().string());
    ++models;
    const std::string json = dir.file(e.path().stem().string() + ".json");
    auto r =
        runGearbox("compare " + shellQuote(e.path().string()) + " --trace " +
                   shellQuote(trace.string()) + " --check-reference -q --json " + shellQuote(json));
    ASSERT_EQ(r.exitCode, 0) << r.output;
    EXPECT_NE(r.output.find("outputs agree with the reference executor (|out - ref| <= 1e-05 + "
                            "1.3e-06 * |ref|): yes, every mode"),
              std::string::npos)
        << r.output;
    const auto j = nlohmann::json::parse(readFile(json));
    EXPECT_TRUE(testing_util::conformsToReportSchema(j));
    EXPECT_TRUE(testing_util::conformsToReportSchema(j));
    for (const std::string& m : modeNames(ModeSet::kWithoutGears)) {
      ASSERT_TRUE(j["modes"].contains(m)) << m;
      const auto& rc = j["modes"][m]["reference_check"];
      EXPECT_TRUE(rc["ok"].get<bool>()) << m;
      EXPECT_EQ(rc["calls"], j["modes"][m]["iterations"]) << m;
    }
  }
  EXPECT_GE(models, 5);

  // With gears (seed 001's), geared joins and agrees too, padded calls included.
  auto r = runGearbox("compare " + shellQuote(example("seed001_add.gbx")) + " --trace " +
                      shellQuote(example("seed001_gears.trace.jsonl")) + " --gears @" +
                      shellQuote(example("seed001_gears.json")) +
                      " --gear-fallback pad --check-reference -q");
  ASSERT_EQ(r.exitCode, 0) << r.output;
  EXPECT_NE(r.output.find("yes, every mode"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("  geared:\n    output 'y': max abs error 0, max rel error 0: ok"),
            std::string::npos)
      << r.output;
}

TEST(ReferenceCheckCli, RunReportsPerOutputAndFailsOutsideTheTolerance) {
  TempDir dir;
  const std::string model = example("shufflenet_body.gbx");
  const std::string trace = example("shufflenet_body.trace.jsonl");
  const std::string json = dir.file("r.json");
  auto r = runGearbox("run " + shellQuote(model) + " --trace " + shellQuote(trace) +
                      " --mode static -q --check-reference --json " + shellQuote(json));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  EXPECT_NE(r.output.find("): agrees\n  output 'u16_out': max abs error "), std::string::npos)
      << r.output;
  const auto j = nlohmann::json::parse(readFile(json));
  EXPECT_TRUE(testing_util::conformsToReportSchema(j));
  EXPECT_TRUE(j["reference_check"]["ok"].get<bool>());
  EXPECT_EQ(j["reference_check"]["outputs"][0]["name"], "u16_out");
  // The body's MatMuls sum in another order than the reference loops: not bit-exact, so a
  // zero tolerance fails, with exit 1 and the numbers.
  const double err = j["reference_check"]["outputs"][0]["max_abs_error"].get<double>();
  ASSERT_GT(err, 0);
  r = runGearbox("run " + shellQuote(model) + " --trace " + shellQuote(trace) +
                 " --mode eager -q --check-reference --rtol 0 --atol 0");
  EXPECT_EQ(r.exitCode, 1) << r.output;
  EXPECT_NE(r.output.find("DISAGREES"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("gearbox: output 'u16_out' disagrees with the reference executor: "),
            std::string::npos)
      << r.output;
  // A tolerance must be a number >= 0: bad input, exit 2.
  r = runGearbox("run " + shellQuote(model) + " --trace " + shellQuote(trace) +
                 " -q --check-reference --rtol -1");
  EXPECT_EQ(r.exitCode, 2) << r.output;
}

TEST(ReferenceCheckCli, EvalChecksAndStillWritesTheOutputs) {
  TempDir dir;
  const Graph g = loadGraph(example("four_ops.gbx"));
  auto inputs = makeInputs(g, {Shape{3, 4}, Shape{3, 4}}, 5);
  saveNpy(dir.file("x.npy"), inputs[0]);
  saveNpy(dir.file("y.npy"), inputs[1]);
  for (const std::string& m : modeNames(ModeSet::kWithoutGears)) {
    SCOPED_TRACE(m);
    const std::string out = dir.file("out_" + m);
    auto r = runGearbox("eval " + shellQuote(example("four_ops.gbx")) + " --mode " + m +
                        " --input x=" + shellQuote(dir.file("x.npy")) +
                        " --input y=" + shellQuote(dir.file("y.npy")) + " --out " +
                        shellQuote(out) + " --check-reference");
    ASSERT_EQ(r.exitCode, 0) << r.output;
    EXPECT_NE(r.output.find("reference check (|out - ref| <= 1e-05 + 1.3e-06 * |ref|): agrees\n"
                            "  output 'o': max abs error 0, max rel error 0: ok\n"),
              std::string::npos)
        << r.output;
    EXPECT_TRUE(std::filesystem::exists(out + "/o.npy"));
  }
}

}  // namespace
}  // namespace gearbox
