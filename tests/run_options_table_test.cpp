// The options table (driver/run_options.def) against what it drives: `gearbox run --help` and
// `gearbox compare --help`, the report's config block and the option list of docs/cli.md. The
// Python side (every keyword accepted with its default) is tests/python/test_bindings.py.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <vector>

#include "cli_util.h"
#include "driver/run_options.h"
#include "graph/error.h"
#include "temp_dir.h"

namespace gearbox::cli {
namespace {

using testing_util::example;
using testing_util::runGearbox;
using testing_util::shellQuote;
using testing_util::TempDir;

std::string helpOf(const std::string& command) {
  const auto r = runGearbox(command + " --help");
  EXPECT_EQ(r.exitCode, 0) << r.output;
  return r.output;
}

// The option names --help lists: the first word of each option line ("--trace", "-q,--quiet",
// "MODEL").
std::set<std::string> helpNames(const std::string& help) {
  std::set<std::string> names;
  std::istringstream in(help);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("  ", 0) != 0 || line.size() < 3 || line[2] == ' ') continue;
    names.insert(line.substr(2, line.find(' ', 2) - 2));
  }
  return names;
}

TEST(RunOptionsTable, NamesAreUniquePerCommandAndPythonKeywordsToo) {
  for (OptionCommands c : {kRunOnly, kCompareOnly}) {
    std::set<std::string> seen;
    for (const OptionInfo& r : runOptionTable())
      if (r.takes(c)) {
        EXPECT_TRUE(seen.insert(r.name).second) << r.name;
      }
  }
  std::set<std::string> keywords;
  for (const OptionInfo& r : runOptionTable()) {
    if (!r.python.accepted) {
      EXPECT_FALSE(r.python.reason.empty()) << r.name << ": say why Python does not take it";
      continue;
    }
    EXPECT_TRUE(keywords.insert(r.pythonName()).second) << r.pythonName();
    if (!r.python.alias.empty()) {
      EXPECT_TRUE(keywords.insert(r.python.alias).second);
    }
  }
}

// Issue 21: every option of run and compare is reachable from Python (gearbox.run and
// gearbox.compare_report take every row, Session the rows that make sense for one session).
TEST(RunOptionsTable, EveryRowIsAPythonKeyword) {
  for (const OptionInfo& r : runOptionTable()) {
    EXPECT_TRUE(r.python.accepted) << r.names << ": " << r.python.reason;
    if (!r.sessionTakes()) {
      EXPECT_FALSE(r.python.reason.empty()) << r.names << ": say why a Session does not take it";
    }
  }
}

TEST(RunOptionsTable, HelpListsExactlyTheRowsOfEachCommand) {
  for (auto [command, which] : {std::pair{"run", kRunOnly}, std::pair{"compare", kCompareOnly}}) {
    const std::string help = helpOf(command);
    std::set<std::string> expected = {"-h,--help", "--help-all"};
    for (const OptionInfo& r : runOptionTable()) {
      if (!r.takes(which)) continue;
      expected.insert(r.names);
      const std::string& text = which == kRunOnly ? r.help.run : r.help.compare;
      EXPECT_NE(help.find(text), std::string::npos) << command << " " << r.names << ": " << text;
    }
    EXPECT_EQ(helpNames(help), expected) << help;
  }
}

// The value of a dotted key ("gears.merge") in a config block, or nullptr.
const nlohmann::json* at(const nlohmann::json& config, const std::string& key) {
  const nlohmann::json* j = &config;
  std::istringstream parts(key);
  std::string part;
  while (std::getline(parts, part, '.')) {
    if (!j->is_object() || !j->contains(part)) return nullptr;
    j = &(*j)[part];
  }
  return j;
}

// The config block of the report `args` writes to `json`.
nlohmann::json configOf(const std::string& args, const std::string& json) {
  const auto r = runGearbox(args + " -q --json " + shellQuote(json));
  EXPECT_EQ(r.exitCode, 0) << args << "\n" << r.output;
  nlohmann::json report;
  std::ifstream(json) >> report;
  return report["config"];
}

TEST(RunOptionsTable, ConfigKeysAreTheReportsAndEveryConfigKeyHasARow) {
  TempDir dir;
  const std::string model = shellQuote(example("seed001_add.gbx")) + " --trace " +
                            shellQuote(example("seed001_add.trace.jsonl"));
  const std::string gears =
      " --gears '{\"x1\": {\"0\": [4, 8]}, \"x2\": {\"0\": [4, 8]}}' "
      "--gear-fallback pad";
  // compare's config shows the first mode's mode options; disabled_passes shows only when a
  // pass is disabled.
  const std::string modeOption =
      " --mode-option reduce-overhead.capture_limit=4 --disable-pass fuse-attention";
  // Each key shows in one of these: the gear block in geared runs (pad_to only without gears),
  // mode_options in a run of the mode they belong to.
  const std::vector<nlohmann::json> runConfigs = {
      configOf("run " + model + gears + " --mode geared", dir.file("a.json")),
      configOf("run " + model + " --pad-to x1=8,2 --pad-to x2=8,2 --mode geared",
               dir.file("b.json")),
      configOf("run " + model + modeOption + " --mode reduce-overhead", dir.file("c.json"))};
  const nlohmann::json compareConfig = configOf(
      "compare " + model + gears + modeOption + " --modes reduce-overhead,static --repeat 1",
      dir.file("d.json"));
  std::set<std::string> claimedRun, claimedCompare;
  for (const OptionInfo& r : runOptionTable()) {
    if (r.config.empty()) continue;
    const std::string top = r.config.substr(0, r.config.find('.'));
    if (r.takes(kRunOnly)) {
      bool found = false;
      for (const nlohmann::json& c : runConfigs) found = found || at(c, r.config) != nullptr;
      EXPECT_TRUE(found) << "no run config has " << r.config;
      claimedRun.insert(top);
    }
    if (r.takes(kCompareOnly)) {
      // compare's config holds the gears as given (text), not a session's gear block.
      const std::string key = top == "gears" ? top : r.config;
      EXPECT_NE(at(compareConfig, key), nullptr) << "compare config has no " << key;
      claimedCompare.insert(top);
    }
  }
  for (const nlohmann::json& c : runConfigs)
    for (const auto& [key, value] : c.items())
      EXPECT_TRUE(claimedRun.count(key)) << "run config key '" << key << "' has no option row";
  for (const auto& [key, value] : compareConfig.items())
    EXPECT_TRUE(claimedCompare.count(key)) << "compare config key '" << key << "' has no row";
}

TEST(RunOptionsTable, DocsCliListsTheTable) {
  const std::string path = std::string(GEARBOX_SOURCE_DIR) + "/docs/cli.md";
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string doc = ss.str();
  const std::string begin = "<!-- options:begin -->\n", end = "<!-- options:end -->";
  const size_t b = doc.find(begin), e = doc.find(end);
  ASSERT_NE(b, std::string::npos);
  ASSERT_NE(e, std::string::npos);
  const std::string listed = doc.substr(b + begin.size(), e - b - begin.size());
  const std::string generated = runOptionsMarkdown();
  if (listed != generated && std::getenv("GEARBOX_UPDATE_DOCS")) {
    doc.replace(b + begin.size(), e - b - begin.size(), generated);
    std::ofstream(path) << doc;
    return;
  }
  EXPECT_EQ(listed, generated)
      << "docs/cli.md's option list is generated from driver/run_options.def: rerun this test "
         "with GEARBOX_UPDATE_DOCS=1";
}

TEST(RunOptionsTable, PythonKeywordsAreTheLongNamesAndCheckedAsTheCli) {
  const auto& table = runOptionTable();
  auto find = [&](const std::string& name) -> const OptionInfo& {
    for (const OptionInfo& r : table)
      if (r.name == name) return r;
    throw std::runtime_error("no row " + name);
  };
  EXPECT_EQ(find("kernel-cache-capacity").pythonName(), "kernel_cache_capacity");
  // The rows only gearbox.run and gearbox.compare_report take keep the same rule, but for
  // --assert (assert is a Python keyword) and MODEL (positional on the command line).
  EXPECT_EQ(find("json").pythonName(), "json");
  EXPECT_FALSE(find("json").sessionTakes());
  EXPECT_EQ(find("assert").pythonName(), "asserts");
  EXPECT_EQ(find("MODEL").pythonName(), "model");
  EXPECT_EQ(find("timeline-max-events").pythonName(), "timeline_max_events");
  EXPECT_TRUE(find("seed").sessionTakes());
  RunOptions o;
  setRunOption(o, find("kernel-cache-capacity"), {"12"}, "kernel_cache_capacity");
  EXPECT_EQ(o.kernelCacheCapacity, 12u);
  EXPECT_THROW(setRunOption(o, find("kernel-cache-capacity"), {"0"}, "kernel_cache_capacity"),
               Error);
  EXPECT_THROW(setRunOption(o, find("history-limit"), {"-1"}, "history_limit"), Error);
  try {
    setRunOption(o, find("device"), {"gpu"}, "device");
    ADD_FAILURE() << "device gpu taken";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "device 'gpu': expected inline or stream");
  }
  setRunOption(o, find("mode-option"), {"a.b=1", "c.d=2"}, "mode_option");
  EXPECT_EQ(o.modeOptions.size(), 2u);
  setRunOption(o, find("no-passes"), {"true"}, "no_passes");
  EXPECT_TRUE(o.noPasses);
}

// As mode_table_test bans hand-written mode lists: an option of run or compare registered or
// read by hand next to the table would be one the table, --help checks and Python miss.
TEST(RunOptionsTable, NoOptionIsDeclaredBesideTheTable) {
  for (const std::string file :
       {"tools/cmd_run.cpp", "tools/cmd_compare.cpp", "driver/run_command.cpp",
        "driver/compare_command.cpp", "driver/run_options.cpp", "python/gearbox_module.cpp"}) {
    std::ifstream in(std::string(GEARBOX_SOURCE_DIR) + "/" + file);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string text = ss.str();
    ASSERT_FALSE(text.empty()) << file;
    for (const std::string banned : {"add_option(", "add_flag(", "kw.contains(\"", "kw[\""})
      EXPECT_EQ(text.find(banned), std::string::npos) << file << " has " << banned;
  }
}

}  // namespace
}  // namespace gearbox::cli
