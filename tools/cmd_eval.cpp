// gearbox eval MODEL --input NAME=FILE.npy ... --out DIR
#include <filesystem>
#include <iostream>

#include "executor/session.h"
#include "graph/error.h"
#include "graph/npy.h"
#include "graph/text.h"
#include "tools/commands.h"

namespace gearbox::cli {

void registerEval(CLI::App& app) {
  struct Opts {
    std::string model, out, mode = "static";
    std::vector<std::string> inputs;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand("eval",
                                     "Run a model once on .npy inputs and write each "
                                     "output as DIR/<name>.npy");
  cmd->add_option("MODEL", o->model, "Model file")->required();
  cmd->add_option("--input", o->inputs, "NAME=FILE.npy, one per graph input")->required();
  cmd->add_option("--out", o->out, "Output directory")->required();
  cmd->add_option("--mode", o->mode, "static, eager, dynamic or auto")
      ->check(CLI::IsMember({"static", "eager", "dynamic", "auto"}));
  cmd->callback([o] {
    Graph g = loadGraph(o->model);
    std::vector<Tensor> inputs(g.inputs.size());
    std::vector<bool> given(g.inputs.size(), false);
    for (const std::string& spec : o->inputs) {
      const size_t eq = spec.find('=');
      if (eq == std::string::npos || eq == 0)
        fail(ErrorKind::kConfig, "--input expects NAME=FILE.npy, got '{}'", spec);
      const std::string name = spec.substr(0, eq);
      const int i = g.findInput(name);
      if (i < 0)
        fail(ErrorKind::kConfig, "--input {}: graph {} has no input '{}'", spec, g.name, name);
      if (given[i]) fail(ErrorKind::kConfig, "--input {}: input '{}' given twice", spec, name);
      inputs[i] = loadNpy(spec.substr(eq + 1));
      given[i] = true;
    }
    for (size_t i = 0; i < given.size(); ++i)
      if (!given[i])
        fail(ErrorKind::kConfig, "missing --input for graph input '{}'",
             g.values[g.inputs[i]].name);
    SessionOptions so;
    so.mode = *parseMode(o->mode);
    Session session(g, so);
    // Everything is computed before anything is written: an error leaves no partial output.
    std::vector<Tensor> outputs = session.run(inputs);
    std::error_code ec;
    std::filesystem::create_directories(o->out, ec);
    if (ec) fail(ErrorKind::kIo, "cannot create output directory {}: {}", o->out, ec.message());
    for (size_t i = 0; i < outputs.size(); ++i) {
      const std::string path =
          (std::filesystem::path(o->out) / (g.values[g.outputs[i]].name + ".npy")).string();
      saveNpy(path, outputs[i]);
      std::cout << "wrote " << path << "\n";
    }
  });
}

}  // namespace gearbox::cli
