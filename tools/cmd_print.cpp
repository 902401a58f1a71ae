// gearbox print MODEL [--shapes '{"x": [2, 4]}'] [--types] [--passes] [--dot FILE]
//
//   (default)  the IR text (specialised to --shapes when given);
//   --shapes   also every value's inferred type, as a comment after its line;
//   --passes   the graph before the passes, then per pass a diff of what it changed ('-' removed,
//              '+' added lines), then the final graph;
//   --dot FILE the graph as Graphviz (written atomically; '-' for stdout).
#include <fmt/format.h>

#include <iostream>
#include <sstream>

#include "compiler/passes.h"
#include "compiler/specialize.h"
#include "driver/run_report.h"
#include "driver/trace.h"
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

}  // namespace

void registerPrint(CLI::App& app) {
  struct Opts {
    std::string model, shapes, dot;
    bool passes = false;
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
                  "With --passes: leave this pass out (repeatable), as run's --disable-pass");
  cmd->add_option("--dot", o->dot, "Write the graph as Graphviz DOT to FILE ('-': stdout)");
  cmd->callback([o] {
    if (!o->dot.empty() && o->dot != "-") {
      checkOutputPath("--dot", o->dot);
      checkOutputsAreNotInputs({{"--dot", o->dot}}, {{"MODEL", o->model}});
    }
    if (!o->disabledPasses.empty() && !o->passes)
      fail(ErrorKind::kConfig, "--disable-pass needs --passes");
    // An unknown name fails before the model is read.
    PassPipeline pipeline = defaultPipeline(o->disabledPasses);
    Graph g = loadGraph(o->model);
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
