// Tests for compiler/recompile_report.h and `gearbox recompile-report`.
//
// The oracle is the reference script itself, tests/golden/recompile/recompiled_op.py (verbatim
// from the seed document). Its output for every golden log is checked in as <log>.expected.txt;
// when python3 is installed the script is also re-run on each log and compared byte for byte
// with gearbox, so the checked-in files cannot silently drift from the script.
#include "compiler/recompile_report.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "graph/error.h"

namespace gearbox {
namespace {

namespace fs = std::filesystem;

const fs::path kGoldenDir = fs::path(GEARBOX_SOURCE_DIR) / "tests/golden/recompile";

std::string readBytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void writeBytes(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

// A fresh directory removed at scope exit.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "gearbox_recompile_XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// Single-quotes an argument for /bin/sh.
std::string shellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Runs a shell command line and returns its exit code (-1 if it did not exit normally).
int runShell(const std::string& command) {
  const int status = std::system(command.c_str());
  return (status != -1 && WIFEXITED(status)) ? WEXITSTATUS(status) : -1;
}

bool pythonAvailable() {
  static const bool available = runShell("python3 --version >/dev/null 2>&1") == 0;
  return available;
}

// Golden logs and the split flag each one is meant to be read with.
struct GoldenCase {
  std::string name;
  std::string splitFlag;
};

const std::vector<GoldenCase>& goldenCases() {
  static const std::vector<GoldenCase> cases = {
      {"normal", "=====iter"},
      {"noise", "=====iter"},
      {"crlf", "=====iter"},
      {"no_trailing_newline", "=====iter"},
      {"marker_at_eof", "=====iter"},
      {"empty_markers", "=====iter"},
      {"pre_marker", "=====iter"},
      {"no_markers", "=====iter"},
      {"duplicates", "=====iter"},
      {"flag_twice", "=====iter"},
      {"empty", "=====iter"},
      {"custom_flag", "### step"},
      {"empty_flag", ""},
  };
  return cases;
}

// Readable parameter in gtest failure messages instead of a byte dump.
void PrintTo(const GoldenCase& c, std::ostream* os) {
  *os << c.name << ".log with split flag '" << c.splitFlag << "'";
}

class RecompileGolden : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(RecompileGolden, InProcessMatchesScriptOutput) {
  const GoldenCase& c = GetParam();
  const std::string log = readBytes(kGoldenDir / (c.name + ".log"));
  const std::string expected = readBytes(kGoldenDir / (c.name + ".expected.txt"));
  EXPECT_EQ(formatRecompileOpList(parseCompileLog(log, c.splitFlag)), expected);
}

TEST_P(RecompileGolden, CliMatchesCheckedInFileAndLiveScript) {
  const GoldenCase& c = GetParam();
  const fs::path log = kGoldenDir / (c.name + ".log");
  TempDir dir;
  const fs::path out = dir.path() / "gearbox_list.txt";
  ASSERT_EQ(runShell(std::string(GEARBOX_BINARY) + " recompile-report " + shellQuote(log) +
                     " --split-flag " + shellQuote(c.splitFlag) + " -o " + shellQuote(out) +
                     " >/dev/null"),
            0);
  const std::string gearboxList = readBytes(out);
  EXPECT_EQ(gearboxList, readBytes(kGoldenDir / (c.name + ".expected.txt")));

  if (!pythonAvailable()) {
    std::cout << "python3 not found: compared with the checked-in script output only\n";
    return;
  }
  // The script writes ./recompile_op_list.txt, so it runs inside the temp dir. PYTHONUTF8
  // pins the text encoding gearbox assumes, whatever the test machine's locale.
  const fs::path script = kGoldenDir / "recompiled_op.py";
  ASSERT_EQ(
      runShell("cd " + shellQuote(dir.path()) + " && PYTHONUTF8=1 python3 " + shellQuote(script) +
               " --log_path " + shellQuote(log) + " --split_flag " + shellQuote(c.splitFlag)),
      0);
  EXPECT_EQ(gearboxList, readBytes(dir.path() / "recompile_op_list.txt"))
      << "gearbox and recompiled_op.py disagree on " << log;
}

INSTANTIATE_TEST_SUITE_P(RecompileReport, RecompileGolden, ::testing::ValuesIn(goldenCases()),
                         [](const ::testing::TestParamInfo<GoldenCase>& info) {
                           return info.param.name;
                         });

// ---- Parsing rules, spelled out independently of the golden files ------------------------

TEST(RecompileReport, MarkerCheckComesFirstAndStartsSections) {
  const RecompileReport r = parseCompileLog(
      "To compile op: A\n"
      "To compile op: B =====iter0\n"  // both flags: a marker only, B is not recorded
      "To compile op: C\n"
      "=====iter1 =====iter1\n"  // the flag twice on one line is still one marker
      "To compile op: D");
  ASSERT_EQ(r.sections.size(), 3u);
  EXPECT_EQ(r.sections[0], std::vector<std::string>{"A"});
  EXPECT_EQ(r.sections[1], std::vector<std::string>{"C"});
  EXPECT_EQ(r.sections[2], std::vector<std::string>{"D"});
}

TEST(RecompileReport, NameIsTextBetweenFirstAndSecondFlag) {
  const RecompileReport r = parseCompileLog(
      "To compile op: A To compile op: B\n"  // "A " keeps its space: strip ran before split
      "To compile op: To compile op: C\n"    // empty name
      "x To compile op:  D  \n"              // leading space of " D" survives
      "To compile op: \n");                  // stripped to "To compile op:": no flag left
  ASSERT_EQ(r.sections.size(), 1u);
  EXPECT_EQ(r.sections[0], (std::vector<std::string>{"A ", "", " D"}));
}

TEST(RecompileReport, UniversalNewlinesAndPythonWhitespace) {
  // "\r" alone is a line break too (Python's text mode); \x1c, \u00a0 and \u3000 are
  // whitespace for str.strip(); \u00a0 inside a name is kept.
  const RecompileReport r = parseCompileLog(
      "To compile op: A\rTo compile op: B\r\n=====iter\r"
      "To compile op: C\x1c\xc2\xa0\xe3\x80\x80\n"
      "To compile op: C\n"
      "To compile op: D\xc2\xa0"
      "E");
  ASSERT_EQ(r.sections.size(), 2u);
  EXPECT_EQ(r.sections[0], (std::vector<std::string>{"A", "B"}));
  EXPECT_EQ(r.sections[1], (std::vector<std::string>{"C",
                                                     "D\xc2\xa0"
                                                     "E"}));
}

TEST(RecompileReport, DuplicatesAreDroppedPerSectionOnly) {
  const RecompileReport r = parseCompileLog(
      "To compile op: A\nTo compile op: B\nTo compile op: A\n=====iter0\nTo compile op: A\n");
  ASSERT_EQ(r.sections.size(), 2u);
  EXPECT_EQ(r.sections[0], (std::vector<std::string>{"A", "B"}));
  EXPECT_EQ(r.sections[1], std::vector<std::string>{"A"});
  EXPECT_EQ(formatRecompileOpList(r), "iter: 0\nA,B\niter: 1\nA\n");
}

TEST(RecompileReport, EmptyTextIsOneEmptySection) {
  EXPECT_EQ(formatRecompileOpList(parseCompileLog("")), "iter: 0\n\n");
}

// ---- Kernel names -------------------------------------------------------------------------

TEST(RecompileReport, ParsesGearboxKernelNames) {
  auto mm = parseKernelName("MatMul_float_ND_64_128__128_32");
  ASSERT_TRUE(mm);
  EXPECT_EQ(mm->op, "MatMul");
  EXPECT_EQ(mm->dtype, "float");
  EXPECT_EQ(mm->format, "ND");
  EXPECT_EQ(mm->inputs, (std::vector<std::vector<int64_t>>{{64, 128}, {128, 32}}));
  EXPECT_FALSE(mm->dim);

  auto cat = parseKernelName("Cat_float_ND_2_3__2_5__dim1");
  ASSERT_TRUE(cat);
  EXPECT_EQ(cat->inputs, (std::vector<std::vector<int64_t>>{{2, 3}, {2, 5}}));
  EXPECT_EQ(cat->dim, 1);

  auto scalar = parseKernelName("Add_int64_ND_s__-1_4");
  ASSERT_TRUE(scalar);
  EXPECT_EQ(scalar->inputs, (std::vector<std::vector<int64_t>>{{}, {-1, 4}}));

  // Input 0 named "dim2" is dims, not the attribute: the attribute is only a trailing part.
  EXPECT_FALSE(parseKernelName("Add_float_ND__dim2"));
  for (const char* bad :
       {"", "Add", "Add_float_ND", "trans_TransData_fp16_NC1HWC0", "Add_float_ND_2__",
        "Add_float_ND_02", "Add_float_ND_-2", "Add_float_ND_2__dimx", "Add_float_ND_2 took 3 ms",
        "Add_float_ND_99999999999999999999"}) {
    EXPECT_FALSE(parseKernelName(bad)) << bad;
  }
}

// ---- Summary ------------------------------------------------------------------------------

TEST(RecompileReport, SummaryFlagsExactlyTheVaryingOpsAndDims) {
  const std::string log =
      "To compile op: MatMul_float_ND_8_16__16_4\n"  // only before step 3: never a suspect
      "To compile op: Add_float_ND_2_8__8\n"
      "=====iter0\n"
      "To compile op: MatMul_float_ND_9_16__16_4\n"
      "To compile op: Add_float_ND_2_8__2_8\n"
      "=====iter1\n"
      "=====iter2\n"
      "To compile op: Cat_float_ND_2_3__2_5__dim1\n"
      "=====iter3\n"
      // Section 4 on is after step 3. Add has two rank signatures, each compared with the
      // kernels of the same ranks from section 0 on; Cat's two kernels have different ranks,
      // so nothing can vary; the unparsable name is listed without analysis.
      "To compile op: Add_float_ND_2_9__2_9\n"
      "To compile op: Add_float_ND_2_7__7\n"
      "To compile op: trans_TransData_fp16_NC1HWC0\n"
      "=====iter4\n"
      "To compile op: Add_float_ND_2_8__2_8\n"
      "To compile op: Cat_float_ND_2_3__2_5__dim1\n"
      "To compile op: Cat_float_ND_2_3__2_5__2_6__dim1\n";
  const std::string expected =
      "recompile report: 6 sections (iter 0 = before the first marker), 9 distinct kernels, "
      "11 list entries\n"
      "kernels per section: iter 0: 2, iter 1: 2, iter 2: 0, iter 3: 1, iter 4: 3, iter 5: 3\n"
      "dynamic-shape suspects (compiled after iter 3): 6 kernels of 3 op types\n"
      "Add: 3 kernels compiled after iter 3 (ranks 2,1: input 0 dim 1 varies: 7, 8; input 1 dim 0 "
      "varies: 7, 8; "
      "ranks 2,2: input 0 dim 1 varies: 8, 9; input 1 dim 1 varies: 8, 9)\n"
      "  Add_float_ND_2_9__2_9 (iter 4)\n"
      "  Add_float_ND_2_7__7 (iter 4)\n"
      "  Add_float_ND_2_8__2_8 (iter 5; also before, in iter 1)\n"
      "Cat: 2 kernels compiled after iter 3 (ranks 2,2: no dim varies across its 1 kernel with "
      "these ranks; ranks 2,2,2: no dim varies across its 1 kernel with these ranks)\n"
      "  Cat_float_ND_2_3__2_5__dim1 (iter 5; also before, in iter 3)\n"
      "  Cat_float_ND_2_3__2_5__2_6__dim1 (iter 5)\n"
      "trans: 1 kernel compiled after iter 3 (1 name not in gearbox kernel-name format, no dim "
      "analysis)\n"
      "  trans_TransData_fp16_NC1HWC0 (iter 4)\n";
  EXPECT_EQ(summarize(parseCompileLog(log)), expected);
}

TEST(RecompileReport, SummaryStableStepsMovesTheCut) {
  const RecompileReport r = parseCompileLog(
      "To compile op: Add_float_ND_1__1\n=====iter0\nTo compile op: Add_float_ND_2__2\n");
  EXPECT_NE(summarize(r).find("compiled after iter 3): none\n"), std::string::npos);
  // With 0 stable steps every section after the warm-up section 0 is suspect, and the values
  // seen in section 0 still count for the variation.
  const std::string s = summarize(r, 0);
  EXPECT_NE(s.find("Add: 1 kernel compiled after iter 0 (input 0 dim 0 varies: 1, 2; input 1 "
                   "dim 0 varies: 1, 2)\n  Add_float_ND_2__2 (iter 1)\n"),
            std::string::npos)
      << s;
  EXPECT_THROW(summarize(r, -1), Error);
}

// ---- CLI ----------------------------------------------------------------------------------

TEST(RecompileReportCli, SummaryGoldenAndDefaultOutputPath) {
  TempDir dir;
  const fs::path stdoutPath = dir.path() / "stdout.txt";
  // Default -o is ./recompile_op_list.txt, like the script.
  ASSERT_EQ(
      runShell("cd " + shellQuote(dir.path()) + " && " + GEARBOX_BINARY + " recompile-report " +
               shellQuote(kGoldenDir / "normal.log") + " > " + shellQuote(stdoutPath)),
      0);
  EXPECT_EQ(readBytes(stdoutPath), readBytes(kGoldenDir / "normal.summary.txt"));
  EXPECT_EQ(readBytes(dir.path() / "recompile_op_list.txt"),
            readBytes(kGoldenDir / "normal.expected.txt"));
  // The atomic write leaves no temp file behind.
  size_t files = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(dir.path())) ++files;
  EXPECT_EQ(files, 2u);
}

TEST(RecompileReportCli, ReplacesAnExistingOutputFile) {
  TempDir dir;
  const fs::path out = dir.path() / "list.txt";
  writeBytes(out, "old contents that are longer than the new list\n");
  ASSERT_EQ(runShell(std::string(GEARBOX_BINARY) + " recompile-report " +
                     shellQuote(kGoldenDir / "pre_marker.log") + " -o " + shellQuote(out) +
                     " >/dev/null"),
            0);
  EXPECT_EQ(readBytes(out), readBytes(kGoldenDir / "pre_marker.expected.txt"));
}

TEST(RecompileReportCli, MissingLogExitsTwoAndWritesNothing) {
  TempDir dir;
  const fs::path missing = dir.path() / "no_such.log";
  const fs::path out = dir.path() / "list.txt";
  const fs::path stderrPath = dir.path() / "stderr.txt";
  EXPECT_EQ(runShell(std::string(GEARBOX_BINARY) + " recompile-report " + shellQuote(missing) +
                     " -o " + shellQuote(out) + " >/dev/null 2>" + shellQuote(stderrPath)),
            2);
  EXPECT_FALSE(fs::exists(out));
  const std::string err = readBytes(stderrPath);
  EXPECT_NE(err.find("I/O error"), std::string::npos) << err;
  EXPECT_NE(err.find(missing.string()), std::string::npos) << err;

  // A directory is not a log either, and an existing output file is left alone.
  writeBytes(out, "keep\n");
  EXPECT_EQ(runShell(std::string(GEARBOX_BINARY) + " recompile-report " + shellQuote(dir.path()) +
                     " -o " + shellQuote(out) + " >/dev/null 2>&1"),
            2);
  EXPECT_EQ(readBytes(out), "keep\n");
}

TEST(RecompileReportCli, UnwritableOutputExitsTwo) {
  TempDir dir;
  const fs::path out = dir.path() / "no_such_dir" / "list.txt";
  EXPECT_EQ(runShell(std::string(GEARBOX_BINARY) + " recompile-report " +
                     shellQuote(kGoldenDir / "normal.log") + " -o " + shellQuote(out) +
                     " >/dev/null 2>&1"),
            2);
  EXPECT_FALSE(fs::exists(out));
}

TEST(RecompileReportCli, NegativeStableStepsIsAUsageError) {
  TempDir dir;
  const fs::path out = dir.path() / "list.txt";
  EXPECT_EQ(runShell(std::string(GEARBOX_BINARY) + " recompile-report " +
                     shellQuote(kGoldenDir / "normal.log") + " --stable-steps -1 -o " +
                     shellQuote(out) + " >/dev/null 2>&1"),
            2);
  EXPECT_FALSE(fs::exists(out));
}

TEST(RecompileReportCli, WritesThroughSymlinksAndIntoDevices) {
  TempDir dir;
  const fs::path target = dir.path() / "target.txt";
  const fs::path link = dir.path() / "link.txt";
  writeBytes(target, "old\n");
  fs::create_symlink(target, link);
  const std::string log = shellQuote(kGoldenDir / "pre_marker.log");
  ASSERT_EQ(runShell(std::string(GEARBOX_BINARY) + " recompile-report " + log + " -o " +
                     shellQuote(link) + " >/dev/null"),
            0);
  // Like the script's open(): the link stays a link and its target gets the list.
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(readBytes(target), readBytes(kGoldenDir / "pre_marker.expected.txt"));
  // Something that is not a regular file (a FIFO here, /dev/null in real use) is written in
  // place: renaming a temp file over it would replace the device or pipe with a plain file.
  const fs::path fifo = dir.path() / "fifo";
  const fs::path drained = dir.path() / "drained.txt";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // The reader gives up after 10 s so a regression cannot hang the test.
  ASSERT_EQ(runShell("timeout 10 cat " + shellQuote(fifo) + " > " + shellQuote(drained) + " & " +
                     GEARBOX_BINARY + " recompile-report " + log + " -o " + shellQuote(fifo) +
                     " >/dev/null; status=$?; wait; exit $status"),
            0);
  EXPECT_TRUE(fs::is_fifo(fifo));
  EXPECT_EQ(readBytes(drained), readBytes(kGoldenDir / "pre_marker.expected.txt"));
}

}  // namespace
}  // namespace gearbox
