// gearbox print MODEL [--shapes '{"x": [2, 4]}'] [--passes]
#include <iostream>

#include "compiler/passes.h"
#include "compiler/specialize.h"
#include "graph/text.h"
#include "tools/commands.h"
#include "tools/trace.h"

namespace gearbox::cli {

void registerPrint(CLI::App& app) {
  struct Opts {
    std::string model, shapes;
    bool passes = false;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd =
      app.add_subcommand("print", "Print a model's IR, specialised when shapes are given");
  cmd->add_option("MODEL", o->model, "Model file")->required();
  cmd->add_option("--shapes", o->shapes, "Input shapes as JSON, e.g. '{\"x\": [2, 4]}'");
  cmd->add_flag("--passes", o->passes,
                "Run the default pass pipeline and print the IR after each pass (docs/passes.md)");
  cmd->callback([o] {
    Graph g = loadGraph(o->model);
    if (!o->shapes.empty()) g = specializeGraph(g, parseShapesJson(o->shapes, g, "--shapes"));
    if (!o->passes) {
      std::cout << printGraph(g);
      return;
    }
    // Each section starts with a '#' line, so every section on its own is valid IR text.
    const PassReport report = defaultPipeline().run(g, [](const PassRecord& r, const Graph& after) {
      std::cout << "# after " << r.name << ": " << (r.changed ? "changed" : "unchanged") << "\n";
      for (const std::string& d : r.details) std::cout << "#   " << d << "\n";
      std::cout << printGraph(after) << "\n";
    });
    std::string fired;
    for (const std::string& name : report.fired()) fired += (fired.empty() ? "" : ", ") + name;
    std::cout << "# passes that changed the graph: " << (fired.empty() ? "none" : fired) << "\n";
  });
}

}  // namespace gearbox::cli
