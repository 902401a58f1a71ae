// An out-of-tree gearbox user: builds seed 001's graph from IR text, runs it in static mode
// over three shapes and checks the exact counters CI would assert. Exit 0 on success.
#include <gearbox/executor/session.h>
#include <gearbox/gearbox.h>

#include <cstdio>
#include <vector>

int main() {
  const gearbox::Graph g = gearbox::parseGraph(
      "graph seed001(%x1: f32[-1, 2], %x2: f32[-1, 2]) {\n"
      "  %y = add(%x1, %x2)\n"
      "  return %y\n"
      "}\n");
  gearbox::Session session(g);  // static mode: a plan per input signature
  for (int64_t rows : {2, 4, 2}) {
    std::vector<gearbox::Tensor> inputs;
    for (int i = 0; i < 2; ++i) {
      gearbox::Tensor t(gearbox::DType::kF32, gearbox::Shape{rows, 2});
      for (int64_t k = 0; k < t.numel(); ++k) t.as<float>()[k] = static_cast<float>(k + i);
      inputs.push_back(std::move(t));
    }
    const auto out = session.run(inputs);
    // y[k] = k + (k + 1)
    if (out.size() != 1 || out[0].as<float>()[1] != 3.0f) {
      std::fprintf(stderr, "consumer: wrong result\n");
      return 1;
    }
  }
  const gearbox::SessionStats& st = session.stats();
  std::printf("gearbox %s: %lld graph compiles, %lld plan cache hits\n", GEARBOX_VERSION,
              static_cast<long long>(st.graphCompiles), static_cast<long long>(st.planCacheHits));
  // Shapes [2], [4], [2]: two plans compiled, the third call hits the first plan.
  return st.graphCompiles == 2 && st.planCacheHits == 1 ? 0 : 1;
}
