// The libraries depend one way (docs/architecture.md): graph <- gears <- compiler <- executor
// <- driver <- tools, and the Python module sits on the driver, never on the CLI. Checked on
// every #include "folder/..." line of the sources, so a shortcut fails here, not in review.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>

namespace {

namespace fs = std::filesystem;

TEST(Layering, EveryIncludeGoesDownTheLibraryOrder) {
  const std::vector<std::string> order = {"graph",    "gears",  "compiler",
                                          "executor", "driver", "tools"};
  // What each folder may include besides itself: the folders below it.
  std::map<std::string, std::set<std::string>> allowed;
  for (size_t i = 0; i < order.size(); ++i)
    allowed[order[i]] = std::set<std::string>(order.begin(), order.begin() + i + 1);
  allowed["python"] = allowed["driver"];  // the binding is a front end beside tools/, not on it
  const fs::path root(GEARBOX_SOURCE_DIR);
  const std::regex include(R"re(^\s*#\s*include\s+"([a-z_]+)/)re");
  int checked = 0;
  for (const auto& [folder, ok] : allowed) {
    for (const auto& entry : fs::recursive_directory_iterator(root / folder)) {
      const std::string ext = entry.path().extension().string();
      if (!entry.is_regular_file() || (ext != ".cpp" && ext != ".h" && ext != ".def")) continue;
      std::ifstream f(entry.path());
      std::string line;
      for (int n = 1; std::getline(f, line); ++n) {
        std::smatch m;
        if (!std::regex_search(line, m, include)) continue;
        ++checked;
        const std::string target = m[1];
        // gearbox/version.h and gearbox/gearbox.h are generated or umbrella headers, not a layer.
        if (target == "gearbox" || ok.count(target)) continue;
        ADD_FAILURE() << entry.path().lexically_relative(root).string() << ":" << n << " includes "
                      << target << "/ from " << folder << "/: " << line;
      }
    }
  }
  EXPECT_GT(checked, 300);
}

}  // namespace
