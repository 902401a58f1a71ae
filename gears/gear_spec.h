#pragma once
// Gear specs: which dims of which graph inputs may take which sizes.
//
// This mirrors TorchAir's torchair.inference.set_dim_gears(tensor, {dim: [values...]}): the same
// checks, in the same order, with the same messages (docs/gears.md lists them). Because C++
// types are fixed, the "must be an integer" / "must be a list or tuple" checks can only fire
// when gears come from JSON text (parseGearsJson); their type names are Python's (str, float,
// dict, bool, NoneType, int) so a message reads exactly like TorchAir's.
//
// Every failure throws gearbox::Error(ErrorKind::kGear).

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "graph/graph.h"
#include "graph/shape.h"

namespace gearbox {

// One declared input: its name and the shape the graph declares for it (dims may be -1 or a
// symbol). The order of a GearConfig's inputs is the graph's input order.
struct InputDecl {
  std::string name;
  Shape shape;
  bool operator==(const InputDecl& o) const { return name == o.name && shape == o.shape; }
};

// The graph's inputs as InputDecls, in graph input order.
std::vector<InputDecl> graphInputDecls(const Graph& g);

// One entry of a dim_gears dict as the caller wrote it: dim index -> gear values. Kept as a
// list, not a map, because the checks run "for each dim key, in the order given" and the first
// failing key decides the message.
struct DimGearEntry {
  int64_t dim = 0;
  std::vector<int64_t> values;
};
using DimGearList = std::vector<DimGearEntry>;

// The validated gears of one input: geared dim -> values as given (a value may repeat: zip
// needs it, e.g. {0: [2, 3, 2, 3], 1: [10, 10, 20, 20]}). std::map keeps dims ascending, which
// is the order gears are merged in.
struct InputGears {
  std::string input;
  int inputIndex = -1;  // index into GearConfig::inputs()
  std::map<int, std::vector<int64_t>> dims;
};

// The gear settings of a whole graph: its declared inputs plus the gears set on some of them.
class GearConfig {
 public:
  GearConfig() = default;
  explicit GearConfig(std::vector<InputDecl> inputs);
  // A static function rather than a constructor: Graph is an aggregate, so a GearConfig(Graph)
  // overload would make GearConfig({{"x", {-1, 2}}}) ambiguous.
  static GearConfig fromGraph(const Graph& g) { return GearConfig(graphInputDecls(g)); }

  const std::vector<InputDecl>& inputs() const { return inputs_; }
  // Index of `name` in inputs(); throws Error(kGear) listing the inputs when absent.
  int inputIndex(std::string_view name) const;

  // set_dim_gears(tensor, dim_gears). Checks, in order: the input already has a different
  // spec; then per key in the given order: range, zero, negative (gearbox), length in
  // [2, 100], duplicate key and static-declared dim (gearbox). Setting the identical spec
  // again is a no-op.
  void setDimGears(std::string_view input, const DimGearList& dimGears);

  // The fixed-shape policy (seed 002, `--pad-to NAME=DIMS`): every dynamic dim of `input`
  // gets the single gear `shape[d]`, so every call pads up to one shape and one plan compiles.
  // Beyond TorchAir's rules (set_dim_gears needs 2..100 values; setDimGears keeps that check).
  // Static dims must equal their declared size. Throws Error(kGear) on a rank mismatch, a dim
  // < 1, a static dim that differs, or an input that already has gears.
  void setPadTo(std::string_view input, const Shape& shape);

  // Gears by input name (string order: the order gears are merged in).
  const std::map<std::string, InputGears, std::less<>>& gears() const { return gears_; }
  // Whether any input has at least one geared dim.
  bool hasGearedDim() const;

 private:
  friend void applyGearsJson(GearConfig& cfg, std::string_view jsonText);
  std::vector<InputDecl> inputs_;
  std::map<std::string, InputGears, std::less<>> gears_;
};

// set_dim_gears for a graph: `cfg` takes the graph's inputs when it has none yet; otherwise
// they must be the graph's (Error(kGear) when cfg was built for another graph).
void setDimGears(GearConfig& cfg, const Graph& g, std::string_view input,
                 const DimGearList& dimGears);

// Applies gears written as JSON text, e.g. {"x1": {"0": [2, 4]}, "x2": {"0": [2, 4]}}: one
// set_dim_gears per input, in the order written. Malformed JSON, a non-object document, an
// unknown input name and every set_dim_gears check throw Error(kGear).
void applyGearsJson(GearConfig& cfg, std::string_view jsonText);

// GearConfig(inputs) + applyGearsJson.
GearConfig parseGearsJson(std::vector<InputDecl> inputs, std::string_view jsonText);

// "[2, 4]": how gear value lists appear in messages.
std::string formatValues(const std::vector<int64_t>& values);

}  // namespace gearbox
