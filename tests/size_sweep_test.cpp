// compare --sweep-dim (driver/size_sweep.h, issue 24): the spec and --sweep-base checked as
// untrusted input (errors name the option, exit 2), the calls it makes, the exact counters per
// size in every mode, the table against a golden (model only, so deterministic;
// GEARBOX_UPDATE_GOLDEN=1 rewrites it), the JSON report against the schema and the HTML plots.
#include "driver/size_sweep.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_util.h"
#include "driver/compare.h"
#include "executor/modes/mode_table.h"
#include "expect_error.h"
#include "graph/file_io.h"
#include "graph/text.h"
#include "json_schema.h"
#include "temp_dir.h"

namespace gearbox {
namespace {

using testing_util::example;
using testing_util::shellQuote;

#define EXPECT_ERROR(fn, kind, part)                             \
  do {                                                           \
    const std::string message = testing_util::errorOf(fn, kind); \
    EXPECT_NE(message.find(part), std::string::npos) << message; \
  } while (0)

// An encoder's inputs: batch and sequence both dynamic, a mask sharing them, a sequence + 1
// input (a decode step's cache out) and a static weight.
const char* const kEncoder = R"(graph enc(%ids: f32[B, S], %mask: f32[B, S], %w: f32[4, 4]) {
  %y = add(%ids, %mask)
  return %y
}
)";

std::vector<int64_t> sizesOf(const cli::SizeSweep& s) {
  return s.sizes;
}

TEST(SizeSweep, SizesFromStartStepEndAndTheSymbolsFollowers) {
  const Graph g = loadGraph(example("four_ops.gbx"));  // x [B, 4], y [B, 4]
  const cli::SizeSweep s = cli::parseSizeSweep(g, "x:1:2:128", "");
  ASSERT_EQ(s.sizes.size(), 64u);
  EXPECT_EQ(s.sizes.front(), 1);
  EXPECT_EQ(s.sizes.back(), 127);
  EXPECT_EQ(s.dim, 0);
  EXPECT_EQ(s.symbol, "B");
  EXPECT_EQ(s.label(), "x dim 0 (B)");
  // y shares B: every call binds both.
  EXPECT_EQ(s.trace[3], (InputSignature{Shape{7, 4}, Shape{7, 4}}));
  EXPECT_EQ(sizesOf(cli::parseSizeSweep(g, "x:1:2:127", "")), s.sizes);  // END on the grid
  EXPECT_EQ(sizesOf(cli::parseSizeSweep(g, "x:0:3:5:3", "")), (std::vector<int64_t>{3}));
  EXPECT_EQ(sizesOf(cli::parseSizeSweep(g, "y:0:1:1:4", "")), (std::vector<int64_t>{1, 2, 3, 4}));
  // The largest count allowed, and its last size.
  EXPECT_EQ(cli::parseSizeSweep(g, "x:1:1:10000", "").sizes.size(), 10000u);
  // Near int64's end the grid stops without overflowing.
  EXPECT_ERROR([&] { cli::parseSizeSweep(g, "x:9223372036854775806:1:9223372036854775807", ""); },
               ErrorKind::kConfig, "at size 9223372036854775806");
}

TEST(SizeSweep, OtherDynamicDimsComeFromTheBase) {
  const Graph g = parseGraph(kEncoder, "enc.gbx");
  // ids has two dynamic dims: the dim must be named; B must come from --sweep-base.
  EXPECT_ERROR([&] { cli::parseSizeSweep(g, "ids:1:1:4", ""); }, ErrorKind::kConfig,
               "input 'ids' has 2 dynamic dims: 0 (B), 1 (S); say which");
  EXPECT_ERROR([&] { cli::parseSizeSweep(g, "ids:1:1:1:4", ""); }, ErrorKind::kConfig,
               "input 'ids' dim 0 (B) is dynamic too: give its size with --sweep-base");
  // B given for ids binds it for mask too; S follows the sweep in both.
  const cli::SizeSweep s = cli::parseSizeSweep(g, "ids:1:1:1:3", R"({"ids": [2, 0]})");
  EXPECT_EQ(s.label(), "ids dim 1 (S)");
  ASSERT_EQ(s.trace.size(), 3u);
  EXPECT_EQ(s.trace[2], (InputSignature{Shape{2, 3}, Shape{2, 3}, Shape{4, 4}}));
  // Sweeping B with S fixed by the base.
  const cli::SizeSweep b = cli::parseSizeSweep(g, "mask:0:5:5:10", R"({"mask": [1, 9]})");
  EXPECT_EQ(b.trace[1], (InputSignature{Shape{10, 9}, Shape{10, 9}, Shape{4, 4}}));
  // A base that binds B twice, differently.
  EXPECT_ERROR([&] { cli::parseSizeSweep(g, "ids:1:1:1:3", R"({"ids": [2, 0], "mask": [3, 0]})"); },
               ErrorKind::kConfig, "--sweep-dim 'ids:1:1:1:3' at size 1 (with --sweep-base)");
  EXPECT_ERROR([&] { cli::parseSizeSweep(g, "ids:1:1:1:3", R"({"ids": [2, 0)"); },
               ErrorKind::kParse, "--sweep-base: invalid JSON");
  EXPECT_ERROR([&] { cli::parseSizeSweep(g, "ids:1:1:1:3", R"({"idz": [2, 0]})"); },
               ErrorKind::kParse, "--sweep-base: graph enc has no input 'idz'");
  EXPECT_ERROR([&] { cli::parseSizeSweep(g, "ids:1:1:1:3", R"({"ids": [2, -1]})"); },
               ErrorKind::kParse, "--sweep-base: input 'ids' dim 1: expected a size >= 0");
  // Dims are read by position: a base of another rank is refused before any is read.
  EXPECT_ERROR([&] { cli::parseSizeSweep(g, "ids:1:1:1:3", R"({"ids": [2]})"); },
               ErrorKind::kConfig,
               "--sweep-base: input 'ids': expected rank 2 ([B, S]), got rank 1");
  EXPECT_ERROR([&] { cli::parseSizeSweep(g, "ids:1:1:1:3", R"({"ids": [2, 1], "w": [4, 4, 1]})"); },
               ErrorKind::kConfig, "input 'w': expected rank 2");
}

// Every way to get the spec wrong is an Error(kConfig) naming --sweep-dim and what is wrong.
TEST(SizeSweep, BadSpecsNameTheOptionAndTheProblem) {
  const Graph mlp = loadGraph(example("mlp.gbx"));  // x [B, 1024], weights static
  const std::pair<const char*, const char*> cases[] = {
      {"x:1:2", "expected INPUT[:DIM]:START:STEP:END"},
      {"x:0:1:2:3:4", "expected INPUT[:DIM]:START:STEP:END"},
      {"", "expected INPUT[:DIM]:START:STEP:END"},
      {"z:1:1:4", "graph mlp has no input 'z' (its inputs: x, w1, b1, w2, b2)"},
      {"x:1:1:1:4", "input 'x' dim 1 is static (1024); only a dynamic dim can be swept"},
      {"w1:0:1:1:4", "input 'w1' dim 0 is static (1024)"},
      {"w1:1:1:4", "input 'w1' has 0 dynamic dims; say which"},
      {"x:2:1:1:4", "input 'x' has rank 2, no dim 2"},
      {"x:0:1:4", "START must be >= 1"},
      {"x:1:0:4", "STEP must be >= 1"},
      {"x:5:1:4", "END (4) is below START (5)"},
      {"x:1:1:10001", "10001 sizes, above the limit of 10000"},
      {"x:-1:1:4", "START '-1' is not a whole number"},
      {"x:+1:1:4", "START '+1' is not a whole number"},
      {"x:1:1:4e3", "END '4e3' is not a whole number"},
      {"x:1: 1:4", "STEP ' 1' is not a whole number"},
      {"x:1::4", "STEP '' is not a whole number"},
      {"x:1:1:99999999999999999999", "END '99999999999999999999' is not a whole number"},
      {"x:x:1:1:4", "DIM 'x' is not a whole number"},
      // Sizes are checked like trace lines: past the tensor size limit is an error, not a run.
      {"x:1073741824:1:1073741824", "at size 1073741824"},
  };
  for (const auto& c : cases) {
    const std::string spec = c.first;
    EXPECT_ERROR([&] { cli::parseSizeSweep(mlp, spec, ""); }, ErrorKind::kConfig,
                 "--sweep-dim '" + spec + "'");
    EXPECT_ERROR([&] { cli::parseSizeSweep(mlp, spec, ""); }, ErrorKind::kConfig, c.second);
  }
}

// What one compare --sweep-dim makes: the report of every mode, model only.
nlohmann::ordered_json sweepReport(const std::string& spec, const std::string& modes,
                                   std::string* printed = nullptr, const std::string& gears = "") {
  cli::RunOptions o;
  o.model = example("mlp.gbx");
  o.sweepDim = spec;
  if (!modes.empty()) o.modes = modes;  // else compare's default
  o.modelOnly = true;
  o.repeat = 1;
  o.quiet = true;
  if (!gears.empty()) {
    o.gears = gears;
    o.gearFallback = "pad";
  }
  std::ostringstream out, err;
  const cli::CommandResult r = cli::compareCommand(o, out, err);
  EXPECT_EQ(r.exitStatus, 0) << out.str() << err.str();
  if (printed) *printed = out.str();
  return r.report;
}

std::vector<bool> flagsOf(const nlohmann::ordered_json& m, const char* key) {
  return m.at(key).get<std::vector<bool>>();
}

// The counters of every size follow from the modes' rules: static compiles each new size until
// the recompile limit (8), then runs the dynamic path; dynamic compiles on its first call and
// once more when the size leaves 1 (size 1 is specialised, as torch's 0/1 specialisation);
// auto compiles statically, then dynamically at the second size; eager compiles kernels at
// every new size; geared compiles its gears up front and pads every size between them.
TEST(SizeSweep, ExactCountersPerSizeInEveryMode) {
  // Every mode: compare's default set, and geared since gears are given.
  const auto j = sweepReport("x:1:1:12", "", nullptr, R"({"x": {"0": [4, 8, 12]}})");
  EXPECT_EQ(j.at("sweep").at("modes").size(), modeTable().size());
  const auto& sw = j.at("sweep");
  EXPECT_EQ(sw.at("sizes"), nlohmann::ordered_json::parse("[1,2,3,4,5,6,7,8,9,10,11,12]"));
  EXPECT_EQ(j.at("trace"), "--sweep-dim x:1:1:12");
  const auto& modes = sw.at("modes");
  const std::vector<bool> first8 = {true, true, true,  true,  true,  true,
                                    true, true, false, false, false, false};
  const std::vector<bool> last4 = {false, false, false, false, false, false,
                                   false, false, true,  true,  true,  true};
  EXPECT_EQ(flagsOf(modes.at("static"), "graph_compiled"), first8);
  EXPECT_EQ(flagsOf(modes.at("static"), "fallback"), last4);
  EXPECT_EQ(j["modes"]["static"]["graph_compiles"], 8);
  EXPECT_EQ(j["modes"]["static"]["fallback_runs"], 4);
  std::vector<bool> dyn(12, false);
  dyn[0] = dyn[1] = true;
  EXPECT_EQ(flagsOf(modes.at("dynamic"), "graph_compiled"), dyn);
  EXPECT_EQ(flagsOf(modes.at("auto"), "graph_compiled"), dyn);
  EXPECT_EQ(flagsOf(modes.at("dynamic"), "fallback"), std::vector<bool>(12, false));
  // Eager: kernels at every new size (two matmuls and two adds per size), never a graph.
  EXPECT_EQ(flagsOf(modes.at("eager"), "graph_compiled"), std::vector<bool>(12, false));
  for (const auto& k : modes.at("eager").at("kernels_compiled")) EXPECT_GT(k.get<int64_t>(), 0);
  // Geared: no compile in any call (the 3 gears compiled up front), padded off the gears.
  const auto& geared = modes.at("geared");
  EXPECT_EQ(flagsOf(geared, "graph_compiled"), std::vector<bool>(12, false));
  std::vector<bool> padded(12, true);
  padded[3] = padded[7] = padded[11] = false;  // sizes 4, 8, 12
  EXPECT_EQ(flagsOf(geared, "padded"), padded);
  EXPECT_EQ(j["modes"]["geared"]["graph_compiles"], 3);
  // The sawtooth: every size of one gear costs the gear's compute, and only the padded part is
  // charged as waste; the waste falls to 0 at each gear and jumps after it.
  const auto us = geared.at("modeled_device_us").get<std::vector<double>>();
  const auto waste = geared.at("modeled_padding_waste_us").get<std::vector<double>>();
  for (int gear : {0, 1, 2}) {
    const int top = 4 * gear + 3;  // the size on the gear
    EXPECT_EQ(waste[top], 0.0);
    for (int k = 4 * gear; k < top; ++k) {
      EXPECT_GT(waste[k], waste[k + 1]) << "size " << k + 1;
      EXPECT_GE(us[k], us[top]) << "size " << k + 1;
    }
  }
  EXPECT_LT(us[3], us[4]);  // past a gear, the next gear's cost
  // Reduce-overhead captures each new size (a graph compile) until its capture limit.
  EXPECT_TRUE(flagsOf(modes.at("reduce-overhead"), "graph_compiled")[0]);
  EXPECT_TRUE(testing_util::conformsToReportSchema(nlohmann::json::parse(j.dump())));
}

// --on-recompile-limit error: static stops at the 9th size; the curve keeps its 8 calls and
// the failure names the size.
TEST(SizeSweep, AFailedModeKeepsItsCallsAndNamesTheSize) {
  cli::RunOptions o;
  o.model = example("mlp.gbx");
  o.sweepDim = "x:1:1:12";
  o.modes = "static,dynamic";
  o.modelOnly = true;
  o.repeat = 1;
  o.quiet = true;
  o.onRecompileLimit = "error";
  std::ostringstream out, err;
  const cli::CommandResult r = cli::compareCommand(o, out, err);
  EXPECT_EQ(r.exitStatus, 1);
  const auto& m = r.report.at("sweep").at("modes").at("static");
  EXPECT_EQ(m.at("calls"), 8);
  EXPECT_NE(m.at("failure").get<std::string>().find("(at x dim 0 (B) = 9)"), std::string::npos)
      << m.at("failure");
  EXPECT_NE(out.str().find("       9  failed"), std::string::npos) << out.str();
  EXPECT_EQ(r.report.at("sweep").at("modes").at("dynamic").at("calls"), 12);
}

std::string golden(const std::string& name) {
  return std::string(GEARBOX_SOURCE_DIR) + "/tests/golden/size_sweep/" + name;
}

void checkGolden(const std::string& name, const std::string& got) {
  if (std::getenv("GEARBOX_UPDATE_GOLDEN")) {
    writeFileAtomic(golden(name), got);
    return;
  }
  EXPECT_EQ(got, readFile(golden(name))) << "GEARBOX_UPDATE_GOLDEN=1 rewrites " << name;
}

// The CLI: the table (model only: every figure exact) against a golden, the JSON and the HTML.
TEST(SizeSweepCli, TableGoldenJsonAndHtml) {
  testing_util::TempDir dir;
  const std::string args =
      "compare examples/mlp.gbx --sweep-dim x:32:32:512 --model-only --repeat 1 "
      "--gears '{\"x\": {\"0\": [128, 256, 384, 512]}}' --gear-fallback pad --json " +
      shellQuote(dir.file("s.json")) + " --html " + shellQuote(dir.file("s.html"));
  const auto r = testing_util::runShell("cd " + shellQuote(GEARBOX_SOURCE_DIR) + " && exec " +
                                        shellQuote(GEARBOX_BINARY) + " " + args);
  ASSERT_EQ(r.exitCode, 0) << r.output;
  // The curve's table, from its title to its legend's failures (none): measured rows elsewhere
  // in the output are not deterministic.
  const size_t from = r.output.find("per-call time against");
  const size_t to = r.output.find("\nrecompiles by mode");
  ASSERT_NE(from, std::string::npos) << r.output;
  ASSERT_NE(to, std::string::npos) << r.output;
  checkGolden("mlp_gears.txt", r.output.substr(from, to - from + 1));
  EXPECT_NE(r.output.find("examples/mlp.gbx over --sweep-dim x:32:32:512 (16 iterations)"),
            std::string::npos)
      << r.output;
  const auto j = nlohmann::json::parse(readFile(dir.file("s.json")));
  EXPECT_TRUE(testing_util::conformsToReportSchema(j));
  EXPECT_FALSE(j["sweep"]["modes"]["static"].contains("measured_median_seconds"));  // model only
  const std::string html = readFile(dir.file("s.html"));
  for (const char* plot : {"sweep-measured", "sweep-modeled"})
    EXPECT_NE(html.find(std::string("data-plot=\"") + plot + "\" data-expected-series=\"" +
                        std::to_string(j["modes"].size()) + "\""),
              std::string::npos)
        << plot;
  EXPECT_NE(html.find("Per-call time against x dim 0 (B)"), std::string::npos);
  EXPECT_NE(html.find("<circle class=\"mark\""), std::string::npos);  // the compiles
}

TEST(SizeSweepCli, BadInputExits2NamingTheOption) {
  const std::string mlp = shellQuote(example("mlp.gbx"));
  const std::string trace = shellQuote(example("mlp_serving.trace.jsonl"));
  const std::pair<std::string, std::string> cases[] = {
      {"compare " + mlp + " --sweep-dim x:0:1:4", "--sweep-dim 'x:0:1:4': START must be >= 1"},
      {"compare " + mlp + " --sweep-dim q:1:1:4", "graph mlp has no input 'q'"},
      {"compare " + mlp + " --sweep-dim x:1:1:4 --trace " + trace,
       "give --trace or --sweep-dim, not both"},
      {"compare " + mlp, "compare needs --trace, or --sweep-dim"},
      {"compare " + mlp + " --trace " + trace + " --sweep-base '{}'",
       "--sweep-base is the base call of --sweep-dim"},
      {"compare " + mlp + " --sweep-dim x:1:1:4 --sweep-base '{\"x\": [1'",
       "--sweep-base: invalid JSON"},
      {"compare " + mlp + " --sweep-dim x:1:1:40 --history-limit 5",
       "--history-limit 5 keeps fewer records than the 40 sizes"},
      // run keeps --trace required, as before.
      {"run " + mlp, "--trace is required"},
  };
  for (const auto& [args, part] : cases) {
    testing_util::TempDir dir;
    const auto r = testing_util::runGearbox(args + " --json " + shellQuote(dir.file("r.json")));
    EXPECT_EQ(r.exitCode, 2) << args << "\n" << r.output;
    EXPECT_NE(r.output.find(part), std::string::npos) << args << "\n" << r.output;
    EXPECT_FALSE(std::ifstream(dir.file("r.json")).good()) << args;  // nothing written
  }
}

}  // namespace
}  // namespace gearbox
