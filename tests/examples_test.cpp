// The bundled models in examples/: each must load, round-trip through the printer, have the
// expected output type, and come with a trace whose every line binds each input to a shape
// that fits the declared type (static dims equal, a named symbol one size per line).
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "executor/session.h"
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
                                           ExampleCase{"shufflenet_body", "f32[N, 16, 49]", 7},
                                           ExampleCase{"shufflenet_view", "f32[N, 16, 49]", 6},
                                           ExampleCase{"seed002_masked_loss", "f32[B]", 8},
                                           ExampleCase{"transformer_block", "f32[B, S, 8]", 8}),
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

// Seed 004's two spellings of one channel shuffle -- cat + index_select and PyTorch's
// view/transpose/contiguous -- give the same tensor, element for element, in the reference
// executor and in static mode, for batch sizes 1, odd and even.
TEST(Examples, ShuffleViewEqualsCatIndexSelect) {
  const Graph gather = loadGraph(examplePath("shufflenet_unit.gbx"));
  const Graph view = loadGraph(examplePath("shufflenet_view.gbx"));
  SessionOptions o;
  o.mode = Mode::kStatic;
  Session s(view, o);
  for (int64_t n : {1, 3, 4}) {
    const InputSignature sig{Shape{n, 16, 49}};
    const std::vector<Tensor> in = makeInputs(gather, sig, 7 + n);
    const std::vector<Tensor> a = referenceRun(gather, in);
    const std::vector<Tensor> b = referenceRun(view, in);
    ASSERT_EQ(a.size(), 1u);
    ASSERT_EQ(b.size(), 1u);
    EXPECT_TRUE(a[0].equals(b[0])) << "batch " << n << ": max abs diff " << maxAbsDiff(a[0], b[0]);
    const std::vector<Tensor> c = s.run(in);
    EXPECT_TRUE(a[0].equals(c[0])) << "static, batch " << n;
  }
}

// Seed 002's mask really switches padded boxes off: with the mask 0 on boxes 10..19, changing
// their predictions does not change the loss.
TEST(Examples, MaskedLossIgnoresPaddedBoxes) {
  const Graph g = loadGraph(examplePath("seed002_masked_loss.gbx"));
  const InputSignature sig{Shape{2, 20, 4}, Shape{2, 20, 4}, Shape{2, 20, 1}};
  std::vector<Tensor> in = makeInputs(g, sig, 3);
  float* mask = in[2].as<float>();
  for (int64_t i = 0; i < 40; ++i) mask[i] = (i % 20) < 10 ? 1.0f : 0.0f;
  const std::vector<Tensor> before = referenceRun(g, in);
  float* pred = in[0].as<float>();
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t box = 10; box < 20; ++box)
      for (int64_t k = 0; k < 4; ++k) pred[(b * 20 + box) * 4 + k] += 100.0f;
  const std::vector<Tensor> after = referenceRun(g, in);
  EXPECT_EQ(before[0].shape(), Shape({2}));
  EXPECT_TRUE(before[0].equals(after[0]));
}

}  // namespace
}  // namespace gearbox
