#pragma once
// Structural graph equality for round-trip tests: names, types, producers, ops, attrs, constant
// bytes and paths, inputs and outputs. Source locations are deliberately not compared, since a
// printed graph puts nodes on different lines than hand-written text.

#include <gtest/gtest.h>

#include "graph/graph.h"

namespace gearbox::testing_util {

inline void expectSameGraph(const Graph& a, const Graph& b) {
  EXPECT_EQ(a.name, b.name);
  ASSERT_EQ(a.values.size(), b.values.size());
  for (size_t i = 0; i < a.values.size(); ++i) {
    EXPECT_EQ(a.values[i].name, b.values[i].name) << "value " << i;
    EXPECT_EQ(a.values[i].type, b.values[i].type)
        << "value %" << a.values[i].name << ": " << a.values[i].type.toString() << " vs "
        << b.values[i].type.toString();
    EXPECT_EQ(a.values[i].producer, b.values[i].producer) << "value %" << a.values[i].name;
  }
  ASSERT_EQ(a.nodes.size(), b.nodes.size());
  for (size_t i = 0; i < a.nodes.size(); ++i) {
    const Node& x = a.nodes[i];
    const Node& y = b.nodes[i];
    EXPECT_EQ(x.kind, y.kind) << "node " << i;
    EXPECT_EQ(x.inputs, y.inputs) << "node " << i;
    EXPECT_EQ(x.output, y.output) << "node " << i;
    EXPECT_TRUE(x.attrs == y.attrs) << "node " << i;
    EXPECT_EQ(x.constPath, y.constPath) << "node " << i;
    ASSERT_EQ(x.constant != nullptr, y.constant != nullptr) << "node " << i;
    if (x.constant) {
      EXPECT_TRUE(x.constant->equals(*y.constant)) << "node " << i;
    }
  }
  EXPECT_EQ(a.inputs, b.inputs);
  EXPECT_EQ(a.outputs, b.outputs);
}

}  // namespace gearbox::testing_util
