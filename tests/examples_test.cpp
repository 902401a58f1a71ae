// The bundled models in examples/: each must load, round-trip through the printer, have the
// expected output type, and come with a trace whose every line binds each input to a shape
// that fits the declared type (static dims equal, a named symbol one size per line).
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "graph/text.h"
#include "tests/graph_equal.h"

namespace gearbox {
namespace {

struct ExampleCase {
  std::string name;        // examples/<name>.gbx and examples/<name>.trace.jsonl
  std::string outputType;  // printed type of the single output
  size_t traceLines;
};

std::string examplePath(const std::string& file) {
  return std::string(GEARBOX_SOURCE_DIR) + "/examples/" + file;
}

void PrintTo(const ExampleCase& c, std::ostream* os) {
  *os << c.name;
}

class Examples : public ::testing::TestWithParam<ExampleCase> {};

TEST_P(Examples, LoadAndRoundTrip) {
  const ExampleCase& c = GetParam();
  const std::string path = examplePath(c.name + ".gbx");
  const Graph g = loadGraph(path);
  EXPECT_EQ(g.sourceFile, path);
  ASSERT_EQ(g.outputs.size(), 1u);
  EXPECT_EQ(g.value(g.outputs[0]).type.toString(), c.outputType);

  const std::string printed = printGraph(g);
  const Graph again = parseGraph(printed, path);
  testing_util::expectSameGraph(g, again);
  EXPECT_EQ(printGraph(again), printed);
}

TEST_P(Examples, TraceMatchesTheInputs) {
  const ExampleCase& c = GetParam();
  const Graph g = loadGraph(examplePath(c.name + ".gbx"));
  std::ifstream trace(examplePath(c.name + ".trace.jsonl"));
  ASSERT_TRUE(trace) << "missing trace for " << c.name;
  std::string line;
  size_t lines = 0;
  while (std::getline(trace, line)) {
    ++lines;
    SCOPED_TRACE("trace line " + std::to_string(lines) + ": " + line);
    const auto j = nlohmann::json::parse(line);
    ASSERT_TRUE(j.is_object());
    EXPECT_EQ(j.size(), g.inputs.size());
    std::map<int64_t, int64_t> symbolSizes;
    for (ValueId in : g.inputs) {
      const Value& v = g.value(in);
      ASSERT_TRUE(j.contains(v.name)) << "no shape for %" << v.name;
      const auto dims = j[v.name].get<std::vector<int64_t>>();
      ASSERT_EQ(static_cast<int>(dims.size()), v.type.shape.rank()) << "%" << v.name;
      for (int k = 0; k < v.type.shape.rank(); ++k) {
        const int64_t declared = v.type.shape[k];
        EXPECT_GE(dims[k], 0);
        if (isStaticDim(declared)) {
          EXPECT_EQ(dims[k], declared) << "%" << v.name << " dim " << k;
        }
        if (isSymbolDim(declared)) {
          const auto [it, fresh] = symbolSizes.emplace(declared, dims[k]);
          EXPECT_EQ(it->second, dims[k]) << "symbol " << symbolName(declared);
        }
      }
    }
  }
  EXPECT_EQ(lines, c.traceLines);
}

INSTANTIATE_TEST_SUITE_P(Bundled, Examples,
                         ::testing::Values(ExampleCase{"seed001_add", "f32[-1, 2]", 7},
                                           ExampleCase{"four_ops", "f32[B, 7]", 8},
                                           ExampleCase{"shufflenet_unit", "f32[N, 16, 49]", 6},
                                           ExampleCase{"shufflenet_stage", "f32[N, 16, 49]", 7},
                                           ExampleCase{"shufflenet_body", "f32[N, 16, 49]", 7}),
                         [](const auto& info) { return info.param.name; });

TEST(Examples, ShuffleNetUsesAGroupsOfTwoChannelShuffle) {
  const Graph g = loadGraph(examplePath("shufflenet_unit.gbx"));
  const ValueId s = g.findValue("shuffle");
  ASSERT_GE(s, 0);
  const Tensor& perm = *g.node(g.value(s).producer).constant;
  ASSERT_EQ(perm.shape(), Shape({16}));
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(perm.as<int64_t>()[2 * i], i);
    EXPECT_EQ(perm.as<int64_t>()[2 * i + 1], i + 8);
  }
}

}  // namespace
}  // namespace gearbox
