// docs/adding-an-op.md must stay exactly true: every file it says an op needs exists for every
// op in graph/ops.def, and every per-op file in the tree is one the page lists.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "compiler/kernel_cost.h"
#include "graph/op.h"

namespace gearbox {
namespace {

namespace fs = std::filesystem;

std::string readSource(const std::string& rel) {
  std::ifstream f(std::string(GEARBOX_SOURCE_DIR) + "/" + rel);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// "IndexSelect" -> "index_select": the file stem of every op's per-layer files is its text name.
std::set<std::string> opStems() {
  std::set<std::string> out;
  for (int i = 0; i < kOpCount; ++i) out.insert(std::string(opTextName(static_cast<OpKind>(i))));
  return out;
}

TEST(Docs, AddingAnOpListsTheFilesEveryOpHas) {
  const std::string page = readSource("docs/adding-an-op.md");
  ASSERT_FALSE(page.empty());
  // The per-op file patterns the page names, e.g. `graph/ops/foo.cpp`.
  std::set<std::string> dirs;
  const std::regex pattern(R"(`([a-z]+/[a-z]+)/foo\.cpp`)");
  for (auto it = std::sregex_iterator(page.begin(), page.end(), pattern);
       it != std::sregex_iterator(); ++it)
    dirs.insert((*it)[1]);
  EXPECT_EQ(dirs, (std::set<std::string>{"graph/ops", "compiler/ops", "executor/kernels"}));
  for (const std::string& dir : dirs)
    for (const std::string& stem : opStems())
      EXPECT_TRUE(fs::exists(std::string(GEARBOX_SOURCE_DIR) + "/" + dir + "/" + stem + ".cpp"))
          << dir << "/" << stem << ".cpp is missing, but docs/adding-an-op.md says every op has it";
  // The other files the page names exist.
  for (const char* f :
       {"graph/ops.def", "graph/op.h", "gears/padding.cpp", "tests/kernels_test.cpp",
        "tests/kernel_name_test.cpp", "compiler/kernel_spec.h", "compiler/ops/op_hooks.h",
        "executor/kernels/op_kernels.h", "graph/ops/window.h", "compiler/ops/window_params.h",
        "executor/kernels/gemm.h"}) {
    EXPECT_NE(page.find(f), std::string::npos) << f;
    EXPECT_TRUE(fs::exists(std::string(GEARBOX_SOURCE_DIR) + "/" + f)) << f;
  }
  // A missing padding case is a compile error (the page says so).
  const std::string padding = readSource("gears/padding.cpp");
  EXPECT_NE(padding.find("#pragma GCC diagnostic error \"-Wswitch\""), std::string::npos);
}

TEST(Docs, CostModelTableListsEveryOpsOwnCompileTerms) {
  const std::string page = readSource("docs/cost-model.md");
  ASSERT_FALSE(page.empty());
  // Rows "  | MatMul | 800 | 10 | source |" of the per-op compile table.
  std::map<std::string, std::pair<double, double>> rows;
  const std::regex row(R"(\n *\| ([A-Za-z0-9]+) \| ([0-9.]+) \| *([0-9.]*) *\|)");
  for (auto it = std::sregex_iterator(page.begin(), page.end(), row); it != std::sregex_iterator();
       ++it)
    rows[(*it)[1]] = {std::stod((*it)[2]), (*it)[3].length() ? std::stod((*it)[3]) : 0.0};
  for (int i = 0; i < kOpCount; ++i) {
    const auto kind = static_cast<OpKind>(i);
    const CompileCostTerms t = compileCostTerms(kind);
    const std::string name(opKernelName(kind));
    if (t.baseUs == 0) {  // no kernel (Const)
      EXPECT_FALSE(rows.contains(name)) << name;
      continue;
    }
    ASSERT_TRUE(rows.contains(name)) << name << " is missing from docs/cost-model.md's table";
    EXPECT_EQ(rows[name].first, t.baseUs) << name;
    EXPECT_EQ(rows[name].second, t.perLog2FlopsUs) << name;
    EXPECT_GT(t.baseSource.size(), 10u) << name;
    if (t.perLog2FlopsUs > 0) {
      EXPECT_GT(t.perLog2FlopsSource.size(), 10u) << name;
    }
  }
}

TEST(Docs, EveryPerOpFileBelongsToAnOp) {
  // A file in an op folder is an op's own file, or one of the shared helpers the page names.
  const std::set<std::string> shared = {
      "common",      "dispatch",      "broadcast",   "elementwise", "binary",        "gather",
      "ref_common",  "op_hooks",      "op_kernels",  "window",      "window_params", "pool2d",
      "gemm",        "copy",          "axes",        "reduce",      "unary",         "norm",
      "gemm_params", "channel_tiles", "gemm_avx512", "gemm_isa",    "winograd"};
  const std::set<std::string> stems = opStems();
  for (const char* dir : {"graph/ops", "compiler/ops", "executor/kernels"})
    for (const auto& e : fs::directory_iterator(std::string(GEARBOX_SOURCE_DIR) + "/" + dir)) {
      const std::string stem = e.path().stem().string();
      EXPECT_TRUE(stems.count(stem) || shared.count(stem))
          << dir << "/" << e.path().filename().string() << " is neither an op's file nor a shared "
          << "helper (docs/adding-an-op.md)";
    }
}

}  // namespace
}  // namespace gearbox
