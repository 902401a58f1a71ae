// Flat memory in `gearbox run` (issue 15, item 7): the trace is streamed (TraceReader) after a
// checking pass, the report's per-iteration records are spooled to a temp file and streamed
// into the report (writeFileAtomicStream), and the median run time comes from a histogram
// instead of every call's time. Each piece must give what the in-memory path gives.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "driver/run_report.h"
#include "driver/trace.h"
#include "expect_error.h"
#include "graph/error.h"
#include "graph/file_io.h"
#include "graph/text.h"
#include "temp_dir.h"

namespace gearbox {
namespace {

namespace fs = std::filesystem;
using testing_util::example;
using testing_util::runGearbox;
using testing_util::RunResult;
using testing_util::shellQuote;
using testing_util::TempDir;

// Expects fn to throw an Error of `kind` whose message contains `part`.
template <typename Fn>
void expectError(Fn&& fn, ErrorKind kind, const std::string& part) {
  const std::string what = testing_util::errorOf(std::forward<Fn>(fn), kind);
  EXPECT_NE(what.find(part), std::string::npos) << what;
}

void write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

std::vector<cli::TraceEntry> readAll(const std::string& path, const Graph& g) {
  cli::TraceReader reader(path, g);
  std::vector<cli::TraceEntry> out;
  cli::TraceEntry e;
  while (reader.next(e)) out.push_back(e);
  return out;
}

TEST(TraceReader, YieldsWhatLoadTraceReadsWithTheSameLines) {
  TempDir dir;
  const Graph g = loadGraph(example("seed001_add.gbx"));
  // Comments, blank lines, CRLF, trailing blanks and no newline at the end.
  const std::string path = dir.file("t.jsonl");
  write(path,
        "# a comment\n\n{\"x1\": [2, 2], \"x2\": [2, 2]}\r\n   \n"
        "{\"x1\": [3, 2], \"x2\": [1, 2]}  \t\n# another\n{\"x1\": [0, 2], \"x2\": [5, 2]}");
  std::vector<int> lines;
  const auto loaded = cli::loadTrace(path, g, &lines);
  const auto streamed = readAll(path, g);
  ASSERT_EQ(streamed.size(), 3u);
  ASSERT_EQ(loaded.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(streamed[i].sig, loaded[i]) << i;
    EXPECT_EQ(streamed[i].line, lines[i]) << i;
  }
  EXPECT_EQ(streamed[0].line, 3);
  EXPECT_EQ(streamed[2].line, 7);
  EXPECT_EQ(cli::checkTrace(path, g), 3);
}

TEST(TraceReader, LinesAcrossReadChunksAreWhole) {
  // Lines long enough (padded with spaces) that they straddle the reader's 64 KiB chunks.
  TempDir dir;
  const Graph g = loadGraph(example("seed001_add.gbx"));
  const std::string path = dir.file("t.jsonl");
  std::string text;
  for (int i = 0; i < 40; ++i)
    text += "{\"x1\": [" + std::to_string(i + 1) + ", 2]," + std::string(5000 + 37 * i, ' ') +
            "\"x2\": [1, 2]}\n";
  write(path, text);
  const auto streamed = readAll(path, g);
  ASSERT_EQ(streamed.size(), 40u);
  for (int i = 0; i < 40; ++i) {
    EXPECT_EQ(streamed[i].sig[0], (Shape{i + 1, 2})) << i;
    EXPECT_EQ(streamed[i].line, i + 1);
  }
}

TEST(TraceReader, BadLinesNameTheFileAndLine) {
  TempDir dir;
  const Graph g = loadGraph(example("seed001_add.gbx"));
  const std::string path = dir.file("t.jsonl");
  write(path, "{\"x1\": [2, 2], \"x2\": [2, 2]}\n{\"x1\": [2, 2], \"x3\": [2, 2]}\n");
  expectError([&] { cli::checkTrace(path, g); }, ErrorKind::kParse,
              path + ":2: graph seed001 has no input 'x3'");
  // A line over the limit is refused before it is held whole.
  write(path, "{\"x1\": [2, 2], \"x2\": [2, 2]}\n" +
                  std::string(cli::kMaxTraceLineBytes + 10, ' ') + "\n");
  expectError([&] { cli::checkTrace(path, g); }, ErrorKind::kParse, path + ":2: line longer than");
  write(path, "# only a comment\n\n");
  expectError([&] { cli::checkTrace(path, g); }, ErrorKind::kParse, "the trace has no iterations");
  expectError([&] { cli::checkTrace(dir.path().string(), g); }, ErrorKind::kIo, "a directory");
}

TEST(LogHistogram, MedianIsWithinHalfAPercent) {
  cli::LogHistogram h;
  EXPECT_EQ(h.median(), 0.0);
  // 1..1001 us, shuffled order does not matter: the median is 501 us.
  for (int i = 1001; i >= 1; --i) h.add(i * 1e-6);
  EXPECT_EQ(h.count(), 1001);
  EXPECT_NEAR(h.median(), 501e-6, 501e-6 * 0.005);
  // Out-of-range times land in the end buckets instead of out of bounds.
  cli::LogHistogram edges;
  edges.add(0.0);
  edges.add(-1.0);
  edges.add(1e9);
  EXPECT_EQ(edges.count(), 3);
  EXPECT_LT(edges.median(), 2e-9);
}

TEST(AtomicStream, AFailingProducerLeavesThePathAndNoTempFile) {
  TempDir dir;
  const std::string path = dir.file("out.json");
  write(path, "previous");
  expectError(
      [&] {
        writeFileAtomicStream(path, [](const ByteSink& sink) {
          sink("{\"half\": ");
          fail(ErrorKind::kIo, "the spool went away");
        });
      },
      ErrorKind::kIo, "the spool went away");
  EXPECT_EQ(readFile(path), "previous");
  size_t files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir.path())) ++files;
  EXPECT_EQ(files, 1u);
  writeFileAtomicStream(path, [](const ByteSink& sink) {
    sink("a");
    sink("");
    sink("bc");
  });
  EXPECT_EQ(readFile(path), "abc");
}

// The report without its measured (timing) figures, which differ between any two runs.
nlohmann::json withoutTimings(nlohmann::json j) {
  for (auto& it : j["per_iteration"]) {
    it.erase("measured_compile_seconds");
    it.erase("measured_run_seconds");
  }
  return j["per_iteration"];
}

TEST(StreamingRun, SpooledRecordsEqualTheInMemoryOnesInEveryDetail) {
  TempDir dir;
  const std::string run = "run " + shellQuote(example("four_ops.gbx")) + " --trace " +
                          shellQuote(example("four_ops.trace.jsonl")) + " -q";
  for (const char* detail : {"all", "compiles", "none"}) {
    const std::string spooled = dir.file(std::string("s_") + detail + ".json");
    const std::string held = dir.file(std::string("h_") + detail + ".json");
    // Without --history-limit the records are streamed; with a limit above the trace's
    // length they are built from the session's history in memory.
    RunResult r = runGearbox(run + " --iterations " + detail + " --json " + shellQuote(spooled));
    ASSERT_EQ(r.exitCode, 0) << r.output;
    r = runGearbox(run + " --iterations " + detail + " --history-limit 1000 --json " +
                   shellQuote(held));
    ASSERT_EQ(r.exitCode, 0) << r.output;
    const auto s = nlohmann::json::parse(readFile(spooled));
    const auto h = nlohmann::json::parse(readFile(held));
    EXPECT_EQ(s["config"]["history_limit"], 0);
    EXPECT_FALSE(s.contains("per_iteration_dropped"));
    EXPECT_EQ(withoutTimings(s), withoutTimings(h)) << detail;
    EXPECT_EQ(s["iterations"], 8);
    EXPECT_EQ(s["per_iteration"].size(), std::string(detail) == "all"    ? 8u
                                         : std::string(detail) == "none" ? 0u
                                                                         : 5u)
        << detail;
  }
}

TEST(StreamingRun, ABadLastLineOfALongTraceFailsBeforeTheFirstCall) {
  TempDir dir;
  const std::string trace = dir.file("long.jsonl");
  std::string text;
  for (int i = 0; i < 5000; ++i) text += "{\"x1\": [2, 2], \"x2\": [3, 2]}\n";
  text += "{\"x1\": [2, 2], \"x2\": [3, 2, 1]}\n";
  write(trace, text);
  const std::string json = dir.file("r.json");
  const RunResult r = runGearbox("run " + shellQuote(example("seed001_add.gbx")) + " --trace " +
                                 shellQuote(trace) + " --json " + shellQuote(json));
  EXPECT_EQ(r.exitCode, 2) << r.output;
  EXPECT_NE(r.output.find(trace + ":5001:"), std::string::npos) << r.output;
  // Nothing ran and nothing was written.
  EXPECT_EQ(r.output.find("iteration"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(json));
}

}  // namespace
}  // namespace gearbox
