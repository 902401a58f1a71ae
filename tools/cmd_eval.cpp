// gearbox eval MODEL --input NAME=FILE.npy ... --out DIR [--mode M] [--check-reference]
#include <fmt/format.h>

#include <filesystem>
#include <iostream>

#include "driver/reference_check.h"
#include "executor/session.h"
#include "graph/error.h"
#include "graph/npy.h"
#include "graph/text.h"
#include "tools/commands.h"
#include "tools/reference_options.h"

namespace gearbox::cli {

void registerEval(CLI::App& app) {
  struct Opts {
    std::string model, out, mode = "static";
    std::vector<std::string> inputs;
    bool checkReference = false;
    ReferenceTolerance tolerance;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand("eval",
                                     "Run a model once on .npy inputs and write each "
                                     "output as DIR/<name>.npy");
  cmd->add_option("MODEL", o->model, "Model file")->required();
  cmd->add_option("--input", o->inputs, "NAME=FILE.npy, one per graph input")->required();
  cmd->add_option("--out", o->out, "Output directory")->required();
  // Modes that need gear specs are not offered: eval has no --gears.
  cmd->add_option("--mode", o->mode, joinModeNames(ModeSet::kWithoutGears))
      ->check(CLI::IsMember(modeNames(ModeSet::kWithoutGears)))
      ->capture_default_str();
  addReferenceOptions(cmd, o->checkReference, o->tolerance);
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
    std::vector<std::string> failures;
    if (o->checkReference) {
      // Against the graph as loaded: the session ran the optimized one.
      ReferenceCheck check(g, o->tolerance);
      check.check(inputs, outputs);
      std::cout << fmt::format("reference check (|out - ref| <= {} + {} * |ref|): {}\n",
                               o->tolerance.atol, o->tolerance.rtol,
                               check.ok() ? "agrees" : "DISAGREES");
      check.print(std::cout);
      failures = check.failures();
    }
    std::error_code ec;
    std::filesystem::create_directories(o->out, ec);
    if (ec) fail(ErrorKind::kIo, "cannot create output directory {}: {}", o->out, ec.message());
    for (size_t i = 0; i < outputs.size(); ++i) {
      const std::string path =
          (std::filesystem::path(o->out) / (g.values[g.outputs[i]].name + ".npy")).string();
      saveNpy(path, outputs[i]);
      std::cout << "wrote " << path << "\n";
    }
    // The outputs are written either way: they are what the user asked for, and a
    // disagreement is easier to study with them.
    for (const std::string& f : failures) std::cerr << "gearbox: " << f << "\n";
    if (!failures.empty()) gExitCode = 1;
  });
}

}  // namespace gearbox::cli
