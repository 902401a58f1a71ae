// gearbox print MODEL [--shapes '{"x": [2, 4]}'] [--types] [--passes] [--plan] [--dot FILE]
//
//   (default)  the IR text (specialised to --shapes when given);
//   --shapes   also every value's inferred type, as a comment after its line;
//   --passes   the graph before the passes, then per pass a diff of what it changed ('-' removed,
//              '+' added lines), then the final graph;
//   --plan     with --shapes: the static plan static mode compiles for them (after the default
//              passes): per step the kernel, its thread split (tasks) and work, and the
//              compile step's params (ISA, GEMM blocking, strides...); --threads caps the split;
//   --dot FILE the graph as Graphviz (written atomically; '-' for stdout).
#include <fmt/format.h>

#include <iostream>
#include <sstream>

#include "compiler/compiler.h"
#include "compiler/cpu_isa.h"
#include "compiler/kernel_cache.h"
#include "compiler/kernel_params_text.h"
#include "compiler/passes.h"
#include "compiler/specialize.h"
#include "driver/run_report.h"
#include "driver/trace.h"
#include "executor/device_memory.h"
#include "graph/error.h"
#include "graph/file_io.h"
#include "graph/text.h"
#include "tools/commands.h"

namespace gearbox::cli {

namespace {

std::vector<std::string> splitLines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// The value a printed IR line defines: "  %s = add(...)" -> "s"; "" for other lines.
std::string definedValue(const std::string& line) {
  const size_t pct = line.find('%');
  const size_t eq = line.find(" = ");
  if (pct == std::string::npos || eq == std::string::npos || pct > eq) return "";
  if (line.find_first_not_of(' ') != pct) return "";
  return line.substr(pct + 1, eq - pct - 1);
}

// IR text with every value's type after its line ("  # f32[2, 7]"): the inputs' types are in
// the signature line already. The annotation is a comment, so the text stays valid IR.
std::string printWithTypes(const Graph& g) {
  std::string out;
  for (const std::string& line : splitLines(printGraph(g))) {
    const std::string name = definedValue(line);
    out += line;
    if (!name.empty())
      for (const Value& v : g.values)
        if (v.name == name) {
          out += "  # " + v.type.toString();
          break;
        }
    out += "\n";
  }
  return out;
}

// A line diff (longest common subsequence; IR texts are small): "-" removed, "+" added, and
// unchanged lines left out, so a pass shows only what it changed.
std::string lineDiff(const std::string& before, const std::string& after) {
  const auto a = splitLines(before), b = splitLines(after);
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<int>> lcs(n + 1, std::vector<int>(m + 1, 0));
  for (size_t i = n; i-- > 0;)
    for (size_t j = m; j-- > 0;)
      lcs[i][j] = a[i] == b[j] ? lcs[i + 1][j + 1] + 1 : std::max(lcs[i + 1][j], lcs[i][j + 1]);
  std::string out;
  size_t i = 0, j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && a[i] == b[j]) {
      ++i;
      ++j;
    } else if (j < m && (i == n || lcs[i][j + 1] >= lcs[i + 1][j])) {
      out += "+" + b[j++] + "\n";
    } else {
      out += "-" + a[i++] + "\n";
    }
  }
  return out;
}

std::string dotEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

// Graphviz: inputs and outputs as ellipses, ops as boxes, every edge labelled with the type of
// the value it carries.
std::string toDot(const Graph& g) {
  std::string out = fmt::format(
      "digraph \"{}\" {{\n  rankdir=TB;\n  node [fontname=\"monospace\"];\n", dotEscape(g.name));
  for (ValueId v : g.inputs)
    out += fmt::format("  \"v{}\" [shape=ellipse, label=\"%{}\\n{}\"];\n", v,
                       dotEscape(g.values[v].name), dotEscape(g.values[v].type.toString()));
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    const Node& node = g.nodes[n];
    out += fmt::format("  \"n{}\" [shape=box, label=\"{}\"];\n", n,
                       dotEscape(std::string(opTextName(node.kind))));
    for (ValueId in : node.inputs) {
      const Value& v = g.values[in];
      const std::string from =
          v.producer == kNoNode ? fmt::format("v{}", in) : fmt::format("n{}", v.producer);
      out += fmt::format("  \"{}\" -> \"n{}\" [label=\"%{} {}\"];\n", from, n, dotEscape(v.name),
                         dotEscape(v.type.toString()));
    }
  }
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    const Value& v = g.values[g.outputs[i]];
    out +=
        fmt::format("  \"out{}\" [shape=ellipse, label=\"return %{}\"];\n", i, dotEscape(v.name));
    const std::string from =
        v.producer == kNoNode ? fmt::format("v{}", g.outputs[i]) : fmt::format("n{}", v.producer);
    out += fmt::format("  \"{}\" -> \"out{}\" [label=\"{}\"];\n", from, i,
                       dotEscape(v.type.toString()));
  }
  return out + "}\n";
}

// The unit of KernelSpec::work for an op: the GEMM-like kernels count FLOPs, pools window reads,
// the rest bytes moved (compiler/ops/<op>.cpp).
std::string workText(OpKind kind, double work) {
  const char* unit = nullptr;
  if (kind == OpKind::kMatMul || kind == OpKind::kConv2d || kind == OpKind::kAttention)
    unit = "FLOP";
  else if (kind == OpKind::kMaxPool2d || kind == OpKind::kAvgPool2d)
    unit = "reads";
  // Work is bounded by the plan's checked sizes; bytes read best in KiB/MiB.
  if (!unit) return humanBytes(static_cast<int64_t>(work));
  if (work >= 1e9) return fmt::format("{:.2f} G{}", work / 1e9, unit);
  if (work >= 1e6) return fmt::format("{:.2f} M{}", work / 1e6, unit);
  if (work >= 1e3) return fmt::format("{:.2f} K{}", work / 1e3, unit);
  return fmt::format("{:.0f} {}", work, unit);
}

// The static plan of `g` (passes already run) for `sig`: what static mode compiles for this
// shape, one line per step and its params below it.
std::string printPlan(const Graph& g, const InputSignature& sig, int threads) {
  for (const Shape& s : sig)
    if (!s.isStatic())
      fail(ErrorKind::kConfig,
           "--plan needs every dim of every input concrete; --shapes left {} ({})",
           signatureToString(g, sig), "name every dynamic dim of every input");
  KernelCache kernels(1024, threads);
  PlanCompileOptions options;
  options.allocateArena = false;
  options.id = 1;
  const std::shared_ptr<Plan> plan = compilePlan(g, sig, kernels, options);
  std::string out = fmt::format(
      "# static plan for {}: {} {}, arena {} ({} without reuse); ISA {}{}{}\n",
      signatureToString(g, sig), plan->steps.size(), plan->steps.size() == 1 ? "step" : "steps",
      humanBytes(plan->arenaBytes), humanBytes(plan->naiveBytes), isaName(activeIsa()),
      plan->blockedValues > 0 ? fmt::format("; {} {} in channel blocks", plan->blockedValues,
                                            plan->blockedValues == 1 ? "value" : "values")
                              : "",
      plan->batchTiles.empty()
          ? ""
          : fmt::format("; host arena {} in batch tiles", humanBytes(plan->hostArenaBytes)));
  out += fmt::format(
      "# tasks: the kernel's split into tasks on as many threads, decided at compile for this "
      "shape: 1 below twice the threshold (4 MFLOP, or 1 MiB moved; matmul: 0.25 MFLOP; conv2d: 2 "
      "MFLOP, depthwise FLOPs counted 8x), else one per threshold of work, at most {}\n",
      threads > 0 ? fmt::format("the thread cap {} (--threads)", threads)
                  : "the threads of this machine (no --threads cap)");
  for (const Plan::BatchTile& t : plan->batchTiles)
    out += fmt::format(
        "# batch tile: steps {}-{} run {} {} at a time, each tile through every step ({} tiles{}; "
        "the tasks below are the whole batch's)\n",
        t.first, t.end - 1, t.images, t.images == 1 ? "image" : "images", t.tiles,
        t.lanes > 1 ? fmt::format(", {} threads each taking the next tile on one task", t.lanes)
                    : "");
  std::vector<std::vector<std::string>> rows;
  rows.push_back({"step", "value", "op", "output", "tasks", "work", "kernel"});
  for (size_t i = 0; i < plan->steps.size(); ++i) {
    const PlanStep& st = plan->steps[i];
    const Node& node = plan->graph->node(st.node);
    const KernelSpec& k = *st.kernel;
    rows.push_back({std::to_string(i), "%" + plan->graph->value(st.out).name,
                    std::string(opTextName(node.kind)), plan->types[st.out].toString(),
                    std::to_string(k.tasks), workText(node.kind, k.work), k.name});
  }
  std::vector<size_t> width(rows[0].size(), 0);
  for (const auto& r : rows)
    for (size_t c = 0; c < r.size(); ++c) width[c] = std::max(width[c], r[c].size());
  for (size_t i = 0; i < rows.size(); ++i) {
    std::string line;
    for (size_t c = 0; c < rows[i].size(); ++c) {
      const bool right = c == 0 || c == 4;  // numbers
      const std::string& cell = rows[i][c];
      const std::string pad(width[c] - cell.size(), ' ');
      line +=
          (c ? "  " : "") + (right ? pad + cell : (c + 1 == rows[i].size() ? cell : cell + pad));
    }
    out += line + "\n";
    if (i == 0) continue;
    // Long offset lists (a batched matmul's) would bury the table: the first kMaxParams
    // characters, and how many more `--kernel-meta` writes in full.
    constexpr size_t kMaxParams = 400;
    const std::string params = kernelParamsJson(*plan->steps[i - 1].kernel);
    out += "      params " + params.substr(0, kMaxParams);
    if (params.size() > kMaxParams)
      out += fmt::format("... ({} more characters; run --kernel-meta DIR for all)",
                         params.size() - kMaxParams);
    out += "\n";
    // The plan's own layout decisions (compiler.cpp's blockActivations), not kernel params.
    if (const auto* cp = std::get_if<ConvParams>(&plan->steps[i - 1].kernel->params);
        cp && (cp->inBlocked || cp->outBlocked))
      out += fmt::format("      layout input {}, output {} (nChw16c: channel blocks of 16)\n",
                         cp->inBlocked ? "nChw16c" : "NCHW", cp->outBlocked ? "nChw16c" : "NCHW");
    if (const auto* mp = std::get_if<MatMulParams>(&plan->steps[i - 1].kernel->params);
        mp && mp->bPacked)
      out += fmt::format(
          "      weight B packed by the plan in strips of {} columns ([K][{}] each, a direct "
          "tile's width)\n",
          mp->bPacked, mp->bPacked);
  }
  return out;
}

}  // namespace

void registerPrint(CLI::App& app) {
  struct Opts {
    std::string model, shapes, dot;
    bool passes = false, plan = false;
    int threads = 0;
    std::vector<std::string> disabledPasses;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand(
      "print", "Print a model's IR, specialised when shapes are given, with inferred types");
  cmd->add_option("MODEL", o->model, "Model file")->required();
  cmd->add_option("--shapes", o->shapes,
                  "Input shapes as JSON, e.g. '{\"x\": [2, 4]}': specialise the graph and show "
                  "every value's inferred type");
  cmd->add_flag("--passes", o->passes,
                "Run the default pass pipeline and print what each pass changed, as a diff "
                "(docs/passes.md)");
  cmd->add_option("--disable-pass", o->disabledPasses,
                  "With --passes or --plan: leave this pass out (repeatable), as run's "
                  "--disable-pass");
  cmd->add_flag("--plan", o->plan,
                "With --shapes: print the static plan compiled for them (after the default "
                "passes): per kernel its thread split (tasks), work and compile-time params");
  cmd->add_option("--threads", o->threads,
                  "With --plan: compile for this thread cap, as run's --threads (0: no cap)")
      ->check(CLI::Range(0, kMaxThreads));
  cmd->add_option("--dot", o->dot, "Write the graph as Graphviz DOT to FILE ('-': stdout)");
  cmd->callback([o] {
    if (!o->dot.empty() && o->dot != "-") {
      checkOutputPath("--dot", o->dot);
      checkOutputsAreNotInputs({{"--dot", o->dot}}, {{"MODEL", o->model}});
    }
    if (!o->disabledPasses.empty() && !o->passes && !o->plan)
      fail(ErrorKind::kConfig, "--disable-pass needs --passes or --plan");
    if (o->plan && o->shapes.empty()) fail(ErrorKind::kConfig, "--plan needs --shapes");
    if (o->plan && (o->passes || !o->dot.empty()))
      fail(ErrorKind::kConfig, "--plan prints the plan alone: leave out --passes and --dot");
    if (o->threads != 0 && !o->plan) fail(ErrorKind::kConfig, "--threads needs --plan");
    // An unknown name fails before the model is read.
    PassPipeline pipeline = defaultPipeline(o->disabledPasses);
    Graph g = loadGraph(o->model);
    if (o->plan) {
      // Compiled from the unspecialised graph, as a session does (passes, then the signature).
      const InputSignature sig = parseShapesJson(o->shapes, g, "--shapes");
      pipeline.run(g);
      std::cout << printPlan(g, sig, o->threads);
      return;
    }
    const bool typed = !o->shapes.empty();
    if (typed) g = specializeGraph(g, parseShapesJson(o->shapes, g, "--shapes"));
    auto text = [&](const Graph& x) { return typed ? printWithTypes(x) : printGraph(x); };
    if (!o->passes) {
      if (!o->dot.empty()) {
        if (o->dot == "-") {
          std::cout << toDot(g);
        } else {
          writeFileAtomic(o->dot, toDot(g));
          std::cout << fmt::format("wrote {} ({} ops)\n", o->dot, g.nodes.size());
        }
        return;
      }
      std::cout << text(g);
      return;
    }
    // The graph before the passes once, then per pass only the lines it changed.
    std::cout << "# before the passes:\n" << text(g);
    std::string previous = text(g);
    Graph last = g;
    const PassReport report = pipeline.run(g, [&](const PassRecord& r, const Graph& after) {
      std::cout << "\n# after " << r.name << ": " << (r.changed ? "changed" : "unchanged") << "\n";
      for (const std::string& d : r.details) std::cout << "#   " << d << "\n";
      const std::string now = text(after);
      if (r.changed) std::cout << lineDiff(previous, now);
      previous = now;
      last = after;
    });
    std::string fired;
    for (const std::string& name : report.fired()) fired += (fired.empty() ? "" : ", ") + name;
    // The result once more in full, so the last section is valid IR on its own.
    std::cout << "\n# after all passes:\n" << text(last);
    std::cout << "# passes that changed the graph: " << (fired.empty() ? "none" : fired) << "\n";
    if (!o->dot.empty()) {
      // With --passes, the DOT file shows the optimized graph.
      if (o->dot == "-")
        std::cout << toDot(last);
      else
        writeFileAtomic(o->dot, toDot(last));
    }
  });
}

}  // namespace gearbox::cli
