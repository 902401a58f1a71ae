// The timeline (executor/timeline.h, --timeline): Chrome trace event JSON that Perfetto and
// chrome://tracing open. Checked against the trace-event format's rules (ph, ts, dur, pid,
// tid; balanced B/E per thread) and against the session's exact counters: one graph-compile
// event per counted graph compile, one kernel-compile event per counted kernel compile, one
// call event and one MODELED device event per call.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "cli_util.h"
#include "executor/modes/geared.h"
#include "executor/session.h"
#include "temp_dir.h"
#include "test_models.h"

namespace gearbox {
namespace {

using nlohmann::json;
using testing_models::fourOps;

// The trace-event format's rules, as the viewers apply them. Returns the parsed events.
json validateTrace(const std::string& text) {
  const json doc = json::parse(text);
  EXPECT_TRUE(doc.is_object());
  EXPECT_TRUE(doc.contains("traceEvents"));
  const json& events = doc["traceEvents"];
  EXPECT_TRUE(events.is_array());
  const std::set<std::string> known = {"X", "B", "E", "i", "I", "M", "C"};
  std::map<std::pair<int64_t, int64_t>, int> open;  // B minus E per (pid, tid)
  for (const json& e : events) {
    EXPECT_TRUE(e.contains("name") && e["name"].is_string()) << e.dump();
    EXPECT_TRUE(e.contains("ph") && e["ph"].is_string()) << e.dump();
    const std::string ph = e["ph"];
    EXPECT_TRUE(known.count(ph)) << e.dump();
    EXPECT_TRUE(e["pid"].is_number_integer()) << e.dump();
    EXPECT_TRUE(e["tid"].is_number_integer()) << e.dump();
    if (ph == "M") {
      EXPECT_TRUE(e["args"].is_object()) << e.dump();
      continue;
    }
    EXPECT_TRUE(e["ts"].is_number()) << e.dump();
    EXPECT_GE(e["ts"].get<double>(), 0.0) << e.dump();
    if (ph == "X") {
      EXPECT_TRUE(e["dur"].is_number()) << e.dump();
      EXPECT_GE(e["dur"].get<double>(), 0.0) << e.dump();
    }
    const auto key = std::pair{e["pid"].get<int64_t>(), e["tid"].get<int64_t>()};
    if (ph == "B") open[key]++;
    if (ph == "E") {
      EXPECT_GE(--open[key], 0) << "E without B on " << key.first;
    }
  }
  for (const auto& [key, n] : open) EXPECT_EQ(n, 0) << "unbalanced B/E on pid " << key.first;
  return events;
}

int64_t countCat(const json& events, const std::string& cat, int64_t pid = -1) {
  int64_t n = 0;
  for (const json& e : events)
    if (e.value("cat", "") == cat && (pid < 0 || e["pid"] == pid)) ++n;
  return n;
}

std::vector<InputSignature> fourOpsTrace() {
  std::vector<InputSignature> t;
  for (int64_t b : {1, 2, 2, 4, 3, 4, 8, 2, 1}) t.push_back({Shape{b, 4}, Shape{4, 3}});
  return t;
}

class TimelineModes : public ::testing::TestWithParam<Mode> {};

TEST_P(TimelineModes, OneEventPerCountedCompileAndCall) {
  Timeline tl;
  SessionOptions o;
  o.mode = GetParam();
  o.timeline = &tl;
  if (modeInfo(o.mode).needsGears) {
    gearOptions(o).json = R"({"x": {"0": [1, 2, 4, 8]}})";
    gearOptions(o).fallback = GearFallback::kPad;
  }
  Session s(fourOps(), o);
  const auto trace = fourOpsTrace();
  for (size_t i = 0; i < trace.size(); ++i) s.run(makeInputs(s.graph(), trace[i], i));
  const SessionStats& st = s.stats();
  const json events = validateTrace(tl.json());
  ASSERT_GT(st.kernelCompiles, 0);
  EXPECT_EQ(countCat(events, "graph_compile"), st.graphCompiles);
  EXPECT_EQ(countCat(events, "kernel_compile"), st.kernelCompiles);
  EXPECT_EQ(countCat(events, "call"), st.iterations);
  // One MODELED event per call, plus geared mode's up-front compiles.
  EXPECT_EQ(countCat(events, "modeled"), st.iterations + (modeInfo(o.mode).needsGears ? 1 : 0));
  // The modeled track lies end to end and sums to the session's modeled total.
  double modeledEnd = 0;
  for (const json& e : events)
    if (e.value("cat", "") == "modeled") {
      EXPECT_EQ(e["pid"], 2);
      EXPECT_NEAR(e["ts"].get<double>(), modeledEnd, 1e-6 * (1 + modeledEnd));
      modeledEnd += e["dur"].get<double>();
    }
  EXPECT_NEAR(modeledEnd, st.modeled.total(), 1e-6 * st.modeled.total());
  // Every counted launch has its event: a per-op launch on the op-by-op paths (eager,
  // dynamic plans, fallback) or a whole-graph run of a static plan.
  int64_t graphRuns = 0;
  for (const json& e : events)
    if (e.value("cat", "") == "run" &&
        e["name"].get<std::string>().find("graph launch") != std::string::npos)
      ++graphRuns;
  EXPECT_EQ(countCat(events, "launch") + graphRuns, st.launches);
  if (o.mode == Mode::kEager) {
    EXPECT_EQ(graphRuns, 0);
  }
  if (o.mode == Mode::kStatic || o.mode == Mode::kGeared) {
    EXPECT_EQ(countCat(events, "launch"), 0);
  }
  EXPECT_EQ(tl.dropped(), 0);
}

std::vector<Mode> everyMode() {
  std::vector<Mode> modes;
  for (const ModeInfo& m : modeTable()) modes.push_back(m.mode);
  return modes;
}

INSTANTIATE_TEST_SUITE_P(Modes, TimelineModes, ::testing::ValuesIn(everyMode()),
                         [](const auto& info) { return modeIdentifier(info.param); });

TEST(Timeline, KernelCompilesNestInsideTheirGraphCompile) {
  Timeline tl;
  SessionOptions o;
  o.timeline = &tl;
  Session s(fourOps(), o);
  for (int64_t b : {2, 3}) s.run(makeInputs(s.graph(), {Shape{b, 4}, Shape{4, 3}}, 1));
  const json events = validateTrace(tl.json());
  std::vector<json> graphs, kernels;
  for (const json& e : events) {
    if (e.value("cat", "") == "graph_compile") graphs.push_back(e);
    if (e.value("cat", "") == "kernel_compile") kernels.push_back(e);
  }
  ASSERT_EQ(graphs.size(), 2u);
  ASSERT_EQ(kernels.size(), static_cast<size_t>(s.stats().kernelCompiles));
  for (const json& k : kernels) {
    bool inside = false;
    for (const json& g : graphs)
      inside = inside || (k["tid"] == g["tid"] && k["ts"] >= g["ts"] &&
                          k["ts"].get<double>() + k["dur"].get<double>() <=
                              g["ts"].get<double>() + g["dur"].get<double>() + 1e-3);
    EXPECT_TRUE(inside) << k.dump();
  }
}

TEST(Timeline, GearsCompileOnTracksOfTheirOwn) {
  Timeline tl;
  SessionOptions o;
  o.mode = Mode::kGeared;
  o.timeline = &tl;
  gearOptions(o).json = R"({"x": {"0": [1, 2, 4, 8]}})";
  Session s(fourOps(), o);
  compileGears(s, {Shape{1, 4}, Shape{4, 3}});
  const json events = validateTrace(tl.json());
  std::set<int64_t> gearTids;
  std::map<int64_t, std::string> threadNames;
  for (const json& e : events) {
    if (e.value("cat", "") == "graph_compile") gearTids.insert(e["tid"].get<int64_t>());
    if (e["ph"] == "M" && e["name"] == "thread_name")
      threadNames[e["tid"].get<int64_t>()] = e["args"]["name"];
  }
  EXPECT_EQ(gearTids, (std::set<int64_t>{Timeline::kGearTidBase, Timeline::kGearTidBase + 1,
                                         Timeline::kGearTidBase + 2, Timeline::kGearTidBase + 3}));
  EXPECT_EQ(threadNames[Timeline::kGearTidBase + 2], "gear 2 compile");
  EXPECT_EQ(countCat(events, "graph_compile"), s.stats().graphCompiles);
  EXPECT_EQ(countCat(events, "kernel_compile"), s.stats().kernelCompiles);
  EXPECT_EQ(countCat(events, "prepare"), 1);
}

TEST(Timeline, IsBoundedAndSaysHowManyItDropped) {
  Timeline tl(5);
  SessionOptions o;
  o.mode = Mode::kEager;
  o.timeline = &tl;
  Session s(fourOps(), o);
  for (int i = 0; i < 3; ++i) s.run(makeInputs(s.graph(), {Shape{2, 4}, Shape{4, 3}}, i));
  EXPECT_EQ(tl.size(), 5u);
  EXPECT_GT(tl.dropped(), 0);
  const json doc = json::parse(tl.json());
  validateTrace(tl.json());
  EXPECT_EQ(doc["otherData"]["dropped_events"], tl.dropped());
  // Process and thread names are metadata and always kept.
  int meta = 0;
  for (const json& e : doc["traceEvents"]) meta += e["ph"] == "M";
  EXPECT_GT(meta, 0);
}

TEST(Timeline, EscapesNamesFromOutside) {
  Timeline tl;
  const int pid = tl.addSession("a\"b\\c\xff");  // a quote, a backslash, invalid UTF-8
  tl.complete(pid, 1, "x\ny", "call", 0, 1);
  validateTrace(tl.json());
}

// The acceptance check: the four_ops compare's timeline, from the CLI, has one compile event
// per counted compile in every mode (the JSON report's counters).
TEST(TimelineCli, FourOpsCompareHasOneCompileEventPerCountedCompile) {
  testing_util::TempDir dir;
  const std::string tlPath = dir.file("tl.json"), report = dir.file("r.json");
  const auto c = testing_util::runGearbox(
      "compare " + testing_util::example("four_ops.gbx") + " --trace " +
      testing_util::example("four_ops.trace.jsonl") +
      " --gears '{\"x\": {\"0\": [1, 2, 4, 8]}, \"y\": {\"0\": [1, 2, 4, 8]}}' --gear-fallback "
      "pad --repeat 2 --timeline " +
      tlPath + " --json " + report);
  ASSERT_EQ(c.exitCode, 0) << c.output;
  EXPECT_NE(c.output.find("timeline: " + tlPath), std::string::npos) << c.output;
  std::ifstream tf(tlPath), rf(report);
  const std::string text((std::istreambuf_iterator<char>(tf)), std::istreambuf_iterator<char>());
  const json events = validateTrace(text);
  const json rep = json::parse(rf);
  // Processes are named "<mode> host (measured)"; map each mode to its host pid.
  std::map<std::string, int64_t> pidOf;
  for (const json& e : events)
    if (e["ph"] == "M" && e["name"] == "process_name") {
      const std::string name = e["args"]["name"];
      const size_t at = name.find(" host (measured)");
      if (at != std::string::npos) pidOf[name.substr(0, at)] = e["pid"].get<int64_t>();
    }
  ASSERT_EQ(pidOf.size(), rep["modes"].size());
  for (const auto& [mode, pid] : pidOf) {
    SCOPED_TRACE(mode);
    const json& m = rep["modes"][mode];
    EXPECT_EQ(countCat(events, "graph_compile", pid), m["graph_compiles"].get<int64_t>());
    EXPECT_EQ(countCat(events, "kernel_compile", pid), m["kernel_compiles"].get<int64_t>());
    EXPECT_EQ(countCat(events, "call", pid), m["iterations"].get<int64_t>());
  }
}

TEST(TimelineCli, RunWritesATimelineAndChecksThePathFirst) {
  testing_util::TempDir dir;
  const std::string tlPath = dir.file("run.json");
  const std::string args = testing_util::example("seed001_add.gbx") + " --trace " +
                           testing_util::example("seed001_add.trace.jsonl");
  auto r = testing_util::runGearbox("run " + args + " --mode eager -q --timeline " + tlPath);
  ASSERT_EQ(r.exitCode, 0) << r.output;
  std::ifstream tf(tlPath);
  const std::string text((std::istreambuf_iterator<char>(tf)), std::istreambuf_iterator<char>());
  const json events = validateTrace(text);
  EXPECT_GT(countCat(events, "launch"), 0);
  // A directory that does not exist is bad input, found before the run; nothing is written.
  r = testing_util::runGearbox("run " + args + " --timeline " + dir.file("no/such/dir/t.json"));
  EXPECT_EQ(r.exitCode, 2) << r.output;
  EXPECT_NE(r.output.find("does not exist"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("iter"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace gearbox
