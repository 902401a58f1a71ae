// `gearbox gears --shape x1=-1,2 --shape x2=-1,2 --gears '{"x1": {"0": [2, 4]}, ...}'
// [--merge zip|product] [--seen x=3,2]`, or `gearbox gears MODEL --gears G [--trace T]`:
// expands gear specs into the gear list and prints the GE options a TorchAir compile would log
// (ge.inputShape, ge.dynamicDims, ge.dynamicNodeType); with a trace, how the gears cover it.
// See docs/gears.md.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "driver/gear_suggest.h"
#include "driver/run_options.h"
#include "driver/trace.h"
#include "gears/gear_set.h"
#include "gears/gear_spec.h"
#include "gears/padding.h"
#include "graph/error.h"
#include "graph/file_io.h"
#include "graph/text.h"
#include "tools/commands.h"

namespace gearbox::cli {
namespace {

struct GearsOptions {
  std::string model, trace;
  std::vector<std::string> shapes;
  std::vector<std::string> seen;
  std::string gears;
  std::string merge = "zip";  // TorchAir's default dynamic_gears_merge_policy
};

// Coverage of a trace by a gear set: how many calls match a gear exactly, how many pad up to
// one, how many no gear covers, and the padding waste in input elements.
std::string coverage(const Graph& g, const GearSet& gears, const std::vector<InputSignature>& trace,
                     const std::string& tracePath) {
  int64_t exact = 0, padded = 0, outside = 0, real = 0, pad = 0;
  std::string firstOutside;
  std::optional<PaddingPlan> plan;
  std::string refused;
  try {
    plan = analyzePadding(g, gearedInputDims(gears));
  } catch (const Error& e) {
    refused = e.what();
  }
  for (size_t i = 0; i < trace.size(); ++i) {
    const InputSignature& sig = trace[i];
    if (gears.find(sig)) {
      ++exact;
      continue;
    }
    try {
      if (!refused.empty()) gears.match(sig);  // throws the explanatory message
      const size_t target = gears.padTarget(sig);
      checkRealSizes(g, *plan, sig);
      ++padded;
      for (size_t k = 0; k < sig.size(); ++k) {
        real += sig[k].numel();
        pad += gears.shapes(target)[k].numel();
      }
    } catch (const Error& e) {
      if (outside++ == 0) firstOutside = fmt::format("iteration {}: {}", i, e.what());
    }
  }
  std::string out = fmt::format("coverage of {} ({} calls): {} exact, {} padded, {} outside\n",
                                tracePath, trace.size(), exact, padded, outside);
  out += fmt::format(
      "padding waste: {:.1f}% ({} padded input elements for {} real, over the padded calls "
      "and all inputs, as run's padding_waste counts)\n",
      real > 0 ? 100.0 * static_cast<double>(pad - real) / static_cast<double>(real) : 0.0, pad,
      real);
  if (!refused.empty()) out += "padding is refused (only exact gears run): " + refused + "\n";
  if (outside > 0) out += "first call outside the gears: " + firstOutside + "\n";
  return out;
}

void runGears(const GearsOptions& opt) {
  // The policy is checked first, as TorchAir checks its config before expanding gears.
  const MergePolicy policy = parseMergePolicy(opt.merge);
  if (opt.model.empty() && opt.shapes.empty())
    fail(ErrorKind::kConfig, "gears needs a MODEL or the inputs as --shape NAME=DIMS");
  if (!opt.model.empty() && !opt.shapes.empty())
    fail(ErrorKind::kConfig, "give a MODEL or --shape, not both (the model declares the shapes)");
  if (opt.model.empty() && !opt.trace.empty()) fail(ErrorKind::kConfig, "--trace needs a MODEL");
  std::optional<Graph> graph;
  std::vector<InputDecl> inputs;
  if (!opt.model.empty()) {
    graph = loadGraph(opt.model);
    inputs = graphInputDecls(*graph);
  }
  for (const std::string& s : opt.shapes) inputs.push_back(parseShapeArg(s, "--shape"));
  GearConfig cfg(std::move(inputs));
  applyGearsJson(cfg, gearsText(opt.gears));
  std::vector<InputSignature> trace;
  if (!opt.trace.empty()) trace = loadTrace(opt.trace, *graph);
  FirstSeenShapes seen;
  for (const std::string& s : opt.seen) {
    InputDecl d = parseShapeArg(s, "--seen");
    if (!seen.emplace(d.name, d.shape).second)
      fail(ErrorKind::kConfig, "--seen gives input '{}' twice", d.name);
  }
  // With a trace, dims without gears take their sizes from its first call (as geared mode).
  if (!trace.empty())
    for (size_t i = 0; i < graph->inputs.size(); ++i)
      seen.emplace(graph->values[graph->inputs[i]].name, trace.front()[i]);
  const GearSet gears = GearSet::build(cfg, policy, seen);

  std::vector<size_t> byName(gears.inputs().size());
  for (size_t i = 0; i < byName.size(); ++i) byName[i] = i;
  std::sort(byName.begin(), byName.end(),
            [&](size_t a, size_t b) { return gears.inputs()[a].name < gears.inputs()[b].name; });
  std::string out;
  for (size_t g = 0; g < gears.size(); ++g) {
    out += "gear " + std::to_string(g) + ":";
    for (size_t i : byName)
      out += " " + gears.inputs()[i].name + "=" + gears.shapes(g)[i].toString();
    out += "\n";
  }
  out += "ge.inputShape = " + gears.inputShapeOption() + "\n";
  out += "ge.dynamicDims = " + gears.dynamicDimsOption() + "\n";
  out += "ge.dynamicNodeType = " + gears.dynamicNodeTypeOption() + "\n";
  for (const GearSlot& slot : gears.slots())
    if (slot.linkedTo >= 0)
      out += fmt::format("note: input '{}' dim {} follows '{}' dim {} (same symbol {})\n",
                         slot.input, slot.dim, slot.linkedInput, slot.linkedDim,
                         dimToString(gears.inputs()[slot.inputIndex].shape[slot.dim]));
  if (!trace.empty()) out += coverage(*graph, gears, trace, opt.trace);
  std::cout << out;
}

}  // namespace

// --gears takes the JSON itself or @path to a file holding it.
void registerGears(CLI::App& app) {
  auto opt = std::make_shared<GearsOptions>();
  CLI::App* cmd = app.add_subcommand(
      "gears", "Expand gear specs (TorchAir set_dim_gears) into the gear list and GE options");
  cmd->add_option("model", opt->model, "Model file (.gbx): its inputs replace --shape");
  cmd->add_option("--shape", opt->shapes,
                  "A graph input as NAME=DIMS (dims: size, -1 or a symbol; a scalar is NAME=); "
                  "repeat per input (without a MODEL)");
  cmd->add_option("--trace", opt->trace,
                  "With a MODEL: print how the gears cover this trace (exact / padded / outside "
                  "calls, padding waste)");
  cmd->add_option("--gears", opt->gears,
                  "Gears as JSON {\"x1\": {\"0\": [2, 4]}}, or @FILE to read it from a file")
      ->required();
  cmd->add_option("--merge", opt->merge, "dynamic_gears_merge_policy: zip (default) or product");
  cmd->add_option("--seen", opt->seen,
                  "First-seen shape NAME=DIMS, specialising dynamic dims that have no gears");
  cmd->callback([opt] { runGears(*opt); });
  registerSuggestGears(app);
}

}  // namespace gearbox::cli
