#include "compiler/specialize.h"

#include <fmt/format.h>

#include <unordered_map>

#include "graph/error.h"

namespace gearbox {

size_t SignatureHash::operator()(const InputSignature& s) const {
  size_t h = 0x9e3779b97f4a7c15ull;
  for (const Shape& sh : s) h ^= sh.hash() + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

std::string signatureToString(const Graph& g, const InputSignature& sig) {
  std::string s;
  for (size_t i = 0; i < sig.size(); ++i) {
    if (i) s += ", ";
    const std::string name = i < g.inputs.size() ? g.values[g.inputs[i]].name : "?";
    s += fmt::format("{}={}", name, sig[i].toString());
  }
  return s;
}

void checkSignature(const Graph& g, const InputSignature& sig) {
  if (sig.size() != g.inputs.size())
    fail(ErrorKind::kShape, "graph {} takes {} inputs, got {}", g.name, g.inputs.size(),
         sig.size());
  std::unordered_map<int64_t, std::pair<int64_t, std::string>> bound;  // symbol -> value, where
  for (size_t i = 0; i < sig.size(); ++i) {
    const Value& in = g.values[g.inputs[i]];
    const Shape& decl = in.type.shape;
    const Shape& act = sig[i];
    if (decl.rank() != act.rank())
      fail(ErrorKind::kShape, "input '{}': expected rank {} ({}), got rank {} ({})", in.name,
           decl.rank(), decl.toString(), act.rank(), act.toString());
    for (int d = 0; d < decl.rank(); ++d) {
      const int64_t want = decl[d], got = act[d];
      if (got < 0) continue;  // still dynamic (dynamic mode's symbolic signature)
      if (want >= 0 && want != got)
        fail(ErrorKind::kShape, "input '{}' dim {}: declared {}, got {}", in.name, d, want, got);
      if (isSymbolDim(want)) {
        const std::string where = fmt::format("input '{}' dim {}", in.name, d);
        auto [it, inserted] = bound.emplace(want, std::make_pair(got, where));
        if (!inserted && it->second.first != got)
          fail(ErrorKind::kShape, "{} is {} but {} is {}: both are symbol {}", where, got,
               it->second.second, it->second.first, symbolName(want));
      }
    }
  }
}

Graph specializeGraph(const Graph& g, const InputSignature& sig) {
  checkSignature(g, sig);
  Graph out = g;
  for (size_t i = 0; i < sig.size(); ++i) out.values[out.inputs[i]].type.shape = sig[i];
  // The structure was verified when the graph was built and after every pass; only the types
  // change with the input shapes.
  inferGraphTypes(out);
  return out;
}

static bool dimAccepts(int64_t cached, int64_t actual) {
  if (cached >= 0) return cached == actual;
  return actual >= 2;  // a dynamic dim assumes size >= 2, as Dynamo's does
}

bool signatureAccepts(const InputSignature& cached, const InputSignature& actual) {
  if (cached.size() != actual.size()) return false;
  for (size_t i = 0; i < cached.size(); ++i) {
    if (cached[i].rank() != actual[i].rank()) return false;
    for (int d = 0; d < cached[i].rank(); ++d)
      if (!dimAccepts(cached[i][d], actual[i][d])) return false;
  }
  return true;
}

std::vector<GuardFailure> guardFailures(const Graph& g, const InputSignature& cached,
                                        const InputSignature& actual) {
  std::vector<GuardFailure> out;
  for (size_t i = 0; i < cached.size() && i < actual.size(); ++i) {
    const std::string& name = g.values[g.inputs[i]].name;
    if (cached[i].rank() != actual[i].rank()) {
      out.push_back({static_cast<int>(i), -1, cached[i].rank(), actual[i].rank(),
                     fmt::format("input '{}' rank mismatch: expected {}, actual {}", name,
                                 cached[i].rank(), actual[i].rank())});
      continue;
    }
    for (int d = 0; d < cached[i].rank(); ++d) {
      const int64_t c = cached[i][d], a = actual[i][d];
      if (dimAccepts(c, a)) continue;
      std::string text =
          c >= 0 ? fmt::format("input '{}' size mismatch at dim {}: expected {}, actual {}", name,
                               d, c, a)
                 : fmt::format(
                       "input '{}' size mismatch at dim {}: expected a dynamic size >= 2 "
                       "(0 and 1 are specialised), actual {}",
                       name, d, a);
      out.push_back({static_cast<int>(i), d, c, a, std::move(text)});
    }
  }
  return out;
}

}  // namespace gearbox
