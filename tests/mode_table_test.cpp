// The mode table (executor/modes/modes.def) and the rule that goes with it: no hand-written
// list of mode names anywhere else in the tree.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "executor/modes/geared.h"
#include "executor/session.h"
#include "graph/error.h"

namespace gearbox {
namespace {

TEST(ModeTable, NamesRoundTripAndAreUnique) {
  std::set<std::string_view> names;
  size_t i = 0;
  for (const ModeInfo& m : modeTable()) {
    EXPECT_EQ(static_cast<size_t>(m.mode), i++) << "the enum follows the table order";
    EXPECT_TRUE(names.insert(m.name).second) << m.name;
    EXPECT_EQ(parseMode(m.name), m.mode);
    EXPECT_EQ(std::string(modeName(m.mode)), m.name);
    EXPECT_EQ(&modeInfo(m.mode), &m);
    EXPECT_FALSE(m.summary.empty()) << m.name;
  }
  EXPECT_EQ(parseMode("bogus"), std::nullopt);
  EXPECT_EQ(parseMode(""), std::nullopt);
}

TEST(ModeTable, SetsAndJoinedNamesComeFromTheTable) {
  const auto all = modes(ModeSet::kAll);
  const auto plain = modes(ModeSet::kWithoutGears);
  EXPECT_EQ(all.size(), modeTable().size());
  size_t needGears = 0;
  for (const ModeInfo& m : modeTable()) needGears += m.needsGears ? 1 : 0;
  EXPECT_GT(needGears, 0u) << "geared needs gear specs";
  EXPECT_EQ(plain.size(), all.size() - needGears);
  for (Mode m : plain) EXPECT_FALSE(modeInfo(m).needsGears);
  const auto names = modeNames(ModeSet::kAll);
  ASSERT_EQ(names.size(), all.size());
  std::string expected;
  for (size_t k = 0; k < names.size(); ++k)
    expected += (k == 0 ? "" : k + 1 == names.size() ? " or " : ", ") + names[k];
  EXPECT_EQ(joinModeNames(ModeSet::kAll), expected);
  EXPECT_EQ(joinModeNames(ModeSet::kWithoutGears, ",", ",").find(' '), std::string::npos);
}

TEST(ModeTable, EveryModeRunsAndNamesItselfInItsStats) {
  GraphBuilder b("add");
  auto x = b.input("x", DType::kF32, {kAnyDim});
  b.output(b.add(x, x, "y"));
  const Graph g = b.build();
  for (Mode m : modes(ModeSet::kAll)) {
    SCOPED_TRACE(modeName(m));
    SessionOptions o;
    o.mode = m;
    Session s(g, o);
    if (modeInfo(m).needsGears) set_dim_gears(s, "x", {{0, {3, 5}}});
    const auto in = makeInputs(g, {Shape{3}}, 1);
    EXPECT_TRUE(s.run(in)[0].equals(referenceRun(g, in)[0]));
    EXPECT_EQ(s.stats().mode, m);
  }
}

TEST(ModeTable, GearApiOutsideAGearedModeIsAConfigError) {
  GraphBuilder b("add");
  auto x = b.input("x", DType::kF32, {kAnyDim});
  b.output(b.add(x, x, "y"));
  const Graph g = b.build();
  for (Mode m : modes(ModeSet::kWithoutGears)) {
    SCOPED_TRACE(modeName(m));
    SessionOptions o;
    o.mode = m;
    Session s(g, o);
    try {
      set_dim_gears(s, "x", {{0, {2, 4}}});
      ADD_FAILURE() << "expected Error(kConfig)";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kConfig);
      EXPECT_EQ(std::string(e.what()),
                std::string("set_dim_gears and compileGears need mode geared; this session runs ") +
                    modeName(m));
    }
    EXPECT_EQ(gearSet(s), nullptr);
    EXPECT_TRUE(gearOptionLines(s).empty());
  }
}

// Gear options are the geared mode's own (SessionOptions::modeConfig): a mode that takes none
// refuses them when the session is built, as it refuses an unknown mode option.
TEST(ModeTable, GearOptionsForAModeWithoutGearsAreAConfigError) {
  GraphBuilder b("add");
  auto x = b.input("x", DType::kF32, {kAnyDim});
  b.output(b.add(x, x, "y"));
  const Graph g = b.build();
  for (Mode m : modes(ModeSet::kWithoutGears)) {
    SCOPED_TRACE(modeName(m));
    SessionOptions o;
    o.mode = m;
    gearOptions(o).json = R"({"x": {"0": [2, 4]}})";
    try {
      Session s(g, o);
      ADD_FAILURE() << "expected Error(kConfig)";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kConfig);
      EXPECT_NE(std::string(e.what()).find(modeName(m)), std::string::npos) << e.what();
    }
  }
}

// The geared mode's counters are its own, in SessionStats::modeCounters, placed where the
// report has always printed them (top-level keys), not in the mode_counters section.
TEST(ModeTable, GearedCountersAreTheModesOwn) {
  GraphBuilder b("add");
  auto x = b.input("x", DType::kF32, {kAnyDim});
  b.output(b.add(x, x, "y"));
  SessionOptions o;
  o.mode = Mode::kGeared;
  gearOptions(o).fallback = GearFallback::kPad;
  Session s(b.build(), o);
  set_dim_gears(s, "x", {{0, {2, 4}}});
  s.run(makeInputs(s.graph(), {Shape{3}}, 1));
  const SessionStats& st = s.stats();
  ASSERT_EQ(st.modeCounters.size(), 4u);
  for (const ModeCounter& c : st.modeCounters) EXPECT_EQ(c.place, ModeReportPlace::kTopLevel);
  EXPECT_EQ(st.modeCounter("gears"), 2);
  EXPECT_EQ(st.modeCounter("padded_calls"), 1);
  const GearedCounters gc = gearedCounters(st);
  EXPECT_EQ(gc.realElements, 3);
  EXPECT_EQ(gc.paddedElements, 4);
  EXPECT_DOUBLE_EQ(gc.paddingWaste(), 1.0 / 3.0);
  const GearedCall call = gearedCall(s.history().back());
  EXPECT_EQ(call.gear, 1);
  EXPECT_TRUE(call.padded);
}

// ---- No hand-written mode list outside the table ----

// A mention of a mode: `Mode::kStatic` or the literal "static".
struct Mention {
  size_t begin, end;
  std::string name;
};

std::vector<Mention> mentions(const std::string& text) {
  std::vector<Mention> out;
  for (const ModeInfo& m : modeTable()) {
    for (const std::string& token :
         {fmt::format("Mode::k{}", m.id), fmt::format("\"{}\"", m.name)}) {
      for (size_t at = text.find(token); at != std::string::npos; at = text.find(token, at + 1))
        out.push_back({at, at + token.size(), std::string(m.name)});
    }
  }
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.begin < b.begin; });
  return out;
}

// `text` with every // and /* */ comment blanked out (string literals kept): comments may
// describe the modes, code may not list them.
std::string withoutComments(const std::string& text) {
  std::string out = text;
  enum { kCode, kString, kChar, kLine, kBlock } state = kCode;
  for (size_t i = 0; i < out.size(); ++i) {
    const char c = text[i], next = i + 1 < text.size() ? text[i + 1] : '\0';
    switch (state) {
      case kCode:
        if (c == '"')
          state = kString;
        else if (c == '\'')
          state = kChar;
        else if (c == '/' && next == '/')
          state = kLine;
        else if (c == '/' && next == '*')
          state = kBlock;
        break;
      case kString:
      case kChar:
        if (c == '\\')
          ++i;
        else if (c == (state == kString ? '"' : '\''))
          state = kCode;
        break;
      case kLine:
        if (c == '\n') state = kCode;
        break;
      case kBlock:
        if (c == '*' && next == '/') {
          out[i] = out[i + 1] = ' ';
          ++i;
          state = kCode;
        }
        break;
    }
    if ((state == kLine || state == kBlock) && c != '\n') out[i] = ' ';
  }
  return out;
}

// The string literals of `text`, quotes included: what the ECMAScript pattern
// "(?:[^"\\\n]|\\.)*" finds scanning left to right: a backslash escapes the next character unless
// that is a line break or a carriage return (libstdc++'s ECMAScript "." matches neither), and
// where no literal closes, the scan goes on from the character after the opening quote.
std::vector<std::string> stringLiterals(const std::string& text) {
  std::vector<std::string> out;
  size_t i = text.find('"');
  while (i != std::string::npos) {
    size_t j = i + 1;
    while (j < text.size() && text[j] != '"' && text[j] != '\n') {
      if (text[j] != '\\') {
        ++j;
        continue;
      }
      // A backslash with nothing it can escape: no literal from this quote.
      if (j + 1 == text.size() || text[j + 1] == '\n' || text[j + 1] == '\r') break;
      j += 2;
    }
    if (j < text.size() && text[j] == '"') {
      out.push_back(text.substr(i, j - i + 1));
      i = text.find('"', j + 1);
    } else {
      i = text.find('"', i + 1);
    }
  }
  return out;
}

// Returns the hand-written lists of mode names in the code of `source`: two mentions separated
// only by a comma (casts and whitespace aside), or one string literal naming three modes or
// more (a comma-joined default set, a help text).
std::vector<std::string> modeLists(const std::string& source) {
  std::vector<std::string> found;
  const std::string text = withoutComments(source);
  const auto ms = mentions(text);
  static const std::regex noise(R"(static_cast<[a-z0-9_]+>|std::string|[\s()])");
  for (size_t k = 0; k + 1 < ms.size(); ++k) {
    if (ms[k].name == ms[k + 1].name || ms[k + 1].begin < ms[k].end) continue;
    const std::string gap =
        std::regex_replace(text.substr(ms[k].end, ms[k + 1].begin - ms[k].end), noise, "");
    if (gap == ",") found.push_back(text.substr(ms[k].begin, ms[k + 1].end - ms[k].begin));
  }
  // One regex per mode, built once, and the literals found by hand: building the regexes per
  // literal, then matching std::regex's literal pattern over every file, was the scan's time (47
  // and 20 s of the sanitized suite).
  static const std::vector<std::regex> names = [] {
    std::vector<std::regex> out;
    for (const ModeInfo& m : modeTable()) out.emplace_back(fmt::format("\\b{}\\b", m.name));
    return out;
  }();
  for (const std::string& lit : stringLiterals(text)) {
    int named = 0;
    for (const std::regex& name : names)
      if (std::regex_search(lit, name)) ++named;
    if (named >= 3) found.push_back(lit);
  }
  return found;
}

TEST(ModeTable, TheListFinderFindsLists) {
  // Samples are built from the table, so this file holds no list itself.
  const auto t = modeTable();
  ASSERT_GE(t.size(), 3u);
  // fmt rather than string concatenation: GCC 12 warns falsely (-Wrestrict) on the latter.
  auto q = [](std::string_view s) { return fmt::format("\"{}\"", s); };
  auto e = [](const ModeInfo& m) { return fmt::format("Mode::k{}", m.id); };
  for (const std::string& list : {
           "{" + q(t[0].name) + ", " + q(t[1].name) + "}",
           "for (Mode m : {" + e(t[0]) + ",\n    " + e(t[1]) + "})",
           "{static_cast<int>(" + e(t[0]) + "), static_cast<int>(" + e(t[1]) + ")}",
           fmt::format("\"{},{},{}\"", t[0].name, t[1].name, t[2].name),
           fmt::format("\"{}, {} or {}\"", t[0].name, t[1].name, t[2].name),
       })
    EXPECT_EQ(modeLists(list).size(), 1u) << list;
  for (const std::string& notList : {
           "Expected{" + e(t[0]) + ", 5, 5}, Expected{" + e(t[1]) + ", 0, 5}",
           "s.generic ? " + q(t[0].name) + " : " + q(t[1].name),
           "o.mode = " + e(t[0]) + ";",
           fmt::format("\"a {} plan\"", t[0].name),
           fmt::format("// {}, {} or {}\n", t[0].name, t[1].name, t[2].name),
           "/* {" + q(t[0].name) + ", " + q(t[1].name) + "} */",
       })
    EXPECT_TRUE(modeLists(notList).empty()) << notList;
}

TEST(ModeTable, TheLiteralScanFindsWhatTheLiteralPatternFinds) {
  // Escaped quotes and backslashes, an empty literal, a line break inside quotes (no literal
  // there: the scan restarts after the opening quote), a backslash before a line break or a
  // carriage return (the same), a carriage return inside quotes (a literal), an unterminated last
  // quote; and a file of this tree.
  const std::regex literal(R"("(?:[^"\\\n]|\\.)*")");
  auto byPattern = [&](const std::string& text) {
    std::vector<std::string> out;
    for (auto it = std::sregex_iterator(text.begin(), text.end(), literal);
         it != std::sregex_iterator(); ++it)
      out.push_back(it->str());
    return out;
  };
  const std::string bs = "\\", q = "\"";
  for (const std::string& text : {
           "a(" + q + "x" + bs + q + "y" + q + ", " + q + q + ", " + q + bs + bs + q + ");",
           "s = " + q + "broken\n" + q + " ok " + q + "\nz" + q,
           q + "cont" + bs + "\n" + q + " " + q + "end" + bs + q,
           "'" + q + "' " + q + "tail" + bs,
           q + "x" + bs + "\ry" + q + " " + q + "a\rb" + q,
       })
    EXPECT_EQ(stringLiterals(text), byPattern(text)) << text;
  std::ifstream f(std::string(GEARBOX_SOURCE_DIR) + "/executor/modes/mode_table.cpp",
                  std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  ASSERT_FALSE(ss.str().empty());
  EXPECT_EQ(stringLiterals(ss.str()), byPattern(ss.str()));
}

TEST(ModeTable, NoHandWrittenModeListOutsideTheTable) {
  namespace fs = std::filesystem;
  const fs::path root(GEARBOX_SOURCE_DIR);
  const fs::path table = root / "executor" / "modes" / "modes.def";
  int scanned = 0;
  for (const char* dir : {"graph", "gears", "compiler", "executor", "driver", "tools", "tests",
                          "bench", "scripts", "python"}) {
    if (!fs::exists(root / dir)) continue;
    for (const auto& entry : fs::recursive_directory_iterator(root / dir)) {
      if (!entry.is_regular_file() || entry.path() == table) continue;
      const std::string ext = entry.path().extension().string();
      if (ext != ".cpp" && ext != ".h" && ext != ".def" && ext != ".py" && ext != ".sh" &&
          ext != ".txt")
        continue;
      std::ifstream f(entry.path(), std::ios::binary);
      std::stringstream ss;
      ss << f.rdbuf();
      ++scanned;
      for (const std::string& list : modeLists(ss.str()))
        ADD_FAILURE() << entry.path().lexically_relative(root).string()
                      << ": a hand-written list of mode names (" << list
                      << "); use the mode table (executor/modes/mode_table.h)";
    }
  }
  EXPECT_GT(scanned, 50);
}

}  // namespace
}  // namespace gearbox
