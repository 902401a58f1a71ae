// gearbox print MODEL [--shapes '{"x": [2, 4]}']
#include <iostream>

#include "compiler/specialize.h"
#include "graph/text.h"
#include "tools/commands.h"
#include "tools/trace.h"

namespace gearbox::cli {

void registerPrint(CLI::App& app) {
  struct Opts {
    std::string model, shapes;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand("print", "Print a model's IR, specialised when shapes are given");
  cmd->add_option("MODEL", o->model, "Model file")->required();
  cmd->add_option("--shapes", o->shapes, "Input shapes as JSON, e.g. '{\"x\": [2, 4]}'");
  cmd->callback([o] {
    Graph g = loadGraph(o->model);
    if (!o->shapes.empty()) g = specializeGraph(g, parseShapesJson(o->shapes, g, "--shapes"));
    std::cout << printGraph(g);
  });
}

}  // namespace gearbox::cli
