// compare --html (driver/html_report.h): one self-contained page, one series per mode in every
// plot, every outside string escaped. The browser test is tests/python/test_html_report.py.
#include "driver/html_report.h"

#include <gtest/gtest.h>

#include <fstream>
#include <regex>

#include "cli_util.h"
#include "executor/modes/mode_table.h"
#include "temp_dir.h"

namespace gearbox::cli {
namespace {

int64_t occurrences(const std::string& text, const std::string& what) {
  int64_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Every <svg class="plot"> holds as many <g class="series"> as it declares.
void expectSeriesAsDeclared(const std::string& html) {
  const std::regex open(
      R"re(<svg class="plot" data-plot="([a-z-]+)" data-expected-series="(\d+)")re");
  int plots = 0;
  for (auto it = std::sregex_iterator(html.begin(), html.end(), open); it != std::sregex_iterator();
       ++it) {
    ++plots;
    const size_t start = static_cast<size_t>(it->position());
    const size_t end = html.find("</svg>", start);
    ASSERT_NE(end, std::string::npos);
    EXPECT_EQ(occurrences(html.substr(start, end - start), "<g class=\"series\""),
              std::stoi((*it)[2].str()))
        << (*it)[1].str();
  }
  EXPECT_GT(plots, 0);
}

TEST(HtmlReport, EscapesEveryStringFromOutside) {
  EXPECT_EQ(htmlEscape("<a href=\"x\">'&'</a>"),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;");
  HtmlReport r;
  r.model = "<script>alert(1)</script>.gbx";
  r.trace = "t\".jsonl";
  HtmlModeData m;
  m.mode = "static";
  m.failure = "failed at iteration 3: <b>bad</b>";
  r.modes.push_back(m);
  const std::string html = renderHtmlReport(r);
  EXPECT_EQ(html.find("<script>alert"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;alert(1)&lt;/script&gt;.gbx"), std::string::npos);
  EXPECT_EQ(html.find("<b>bad</b>"), std::string::npos);
  // The failed mode keeps its column and says why; plots have no series for it.
  EXPECT_NE(html.find("failed at iteration 3"), std::string::npos);
  expectSeriesAsDeclared(html);
}

TEST(HtmlReport, CompareWritesOneSelfContainedPageWithOneSeriesPerMode) {
  testing_util::TempDir dir;
  const std::string path = dir.file("report.html");
  const auto r = testing_util::runGearbox(
      "compare " + testing_util::example("four_ops.gbx") + " --trace " +
      testing_util::example("four_ops.trace.jsonl") +
      " --gears '{\"x\": {\"0\": [1, 2, 4, 8]}, \"y\": {\"0\": [1, 2, 4, 8]}}' --gear-fallback "
      "pad --repeat 2 --html " +
      path);
  ASSERT_EQ(r.exitCode, 0) << r.output;
  std::ifstream in(path);
  const std::string html((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(html.empty());
  expectSeriesAsDeclared(html);
  // Every mode runs (gears are given): every per-mode plot has one series per mode; padding
  // waste is the geared mode's alone.
  const std::string modes = std::to_string(modeTable().size());
  for (const char* plot : {"graph-compiles", "kernel-compiles", "measured-per-call",
                           "modeled-per-call", "modeled-breakdown"})
    EXPECT_NE(
        html.find(std::string("data-plot=\"") + plot + "\" data-expected-series=\"" + modes + "\""),
        std::string::npos)
        << plot;
  EXPECT_NE(html.find("data-plot=\"padding-waste\" data-expected-series=\"1\""), std::string::npos);
  for (const ModeInfo& m : modeTable())
    EXPECT_EQ(occurrences(html, std::string("<g class=\"series\" data-mode=\"") +
                                    std::string(m.name) + "\""),
              m.needsGears ? 6 : 5)
        << m.name;
  // Self-contained: nothing is fetched (no src or href attribute, no remote url).
  EXPECT_EQ(html.find(" src="), std::string::npos);
  EXPECT_EQ(html.find(" href="), std::string::npos);
  EXPECT_EQ(html.find("http://"), std::string::npos);
  EXPECT_EQ(html.find("https://"), std::string::npos);
  EXPECT_EQ(html.find("@import"), std::string::npos);
  EXPECT_NE(html.find("MODELED"), std::string::npos);
  EXPECT_NE(html.find("MEASURED"), std::string::npos);
}

TEST(HtmlReport, AnUnwritablePathFailsBeforeTheRun) {
  testing_util::TempDir dir;
  const auto r = testing_util::runGearbox(
      "compare " + testing_util::example("four_ops.gbx") + " --trace " +
      testing_util::example("four_ops.trace.jsonl") + " --html " + dir.file("none/r.html"));
  EXPECT_EQ(r.exitCode, 2) << r.output;
  EXPECT_NE(r.output.find("--html"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("graph compiles"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace gearbox::cli
