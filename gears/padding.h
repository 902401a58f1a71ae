#pragma once
// Padding legality: may a shape that is not a gear be zero-padded up to a covering gear, run,
// and have its outputs sliced back, with the same result as the unpadded run?
//
// analyzePadding tags every padded (input, dim) and propagates the tags forward through the
// graph in node order. A tag carries the input dim it came from and what the padded positions
// hold: a known constant (the pad's zeros, folded through constants), a key mask (<= -10000
// from a 0/1 mask input's padding, or a causal triangle), masked scores (a key mask plus
// finite scores), finite values, or maybe inf/NaN. An op whose
// result at a real position could depend on a padded position is refused with an Error(kGear)
// naming the op, the padded input and dim, and why (docs/gears.md has the table):
//   add         a padded dim must meet a padded dim or a broadcast (size 1 / missing) dim;
//   matmul      M and N carry over; a padded K needs both operands padded there, one side's
//               padding zero and the other's finite (0 * x adds nothing); batch dims follow add;
//   index_select / cat_gather along a padded dim is refused (an index >= the real size would
//               read padding instead of failing); a padded index makes the output dim padded;
//   cat / cat_gather along a padded dim is refused (the padding would sit between real rows),
//               except a cat's last input after static-sized ones: the padding then ends the
//               output, whose real size is offset by theirs (PaddedOutputDim::offset); on other
//               dims all data inputs must be padded alike.
//   softmax     over a padded dim only when it holds masked scores (a 0/1 attention mask,
//               zero-padded, as (1 - mask) * -10000, or triu(-10000, 1)): their weights are 0;
//   layer_norm, mean over a padded dim is refused; reduce_sum only while the padding is zero;
//   trilu       with rows and columns padded alike, zeroes the padded part of real rows or
//               columns (lower k <= 0, upper k >= 0), which keeps an arange from ones legal;
//   gather      along a padded data dim is refused; padded index dims become padded output dims;
//   expand      pads a size-1 dim broadcast to a padded symbol (refused for S + 1 expressions).
// Padded dims that reach a graph output are fine: the plan says which, so they can be sliced.

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "graph/graph.h"
#include "graph/shape.h"

namespace gearbox {

class GearSet;

// A dim of a graph input (index into Graph::inputs).
struct InputDim {
  int input = 0;
  int dim = 0;
  bool operator==(const InputDim& o) const { return input == o.input && dim == o.dim; }
};

// An output dim that holds padding; its real size is the real size of `origin`.
struct PaddedOutputDim {
  int dim = 0;
  InputDim origin;
  int64_t offset = 0;  // real size = origin's real size + offset (a cat before the padded rows)
};

struct PaddingPlan {
  // Per graph output, in Graph::outputs order: the padded dims to slice back.
  std::vector<std::vector<PaddedOutputDim>> outputs;
  // Padded input dims whose padding meets in one op (add, matmul K, cat). The unpadded graph
  // needs their real sizes equal (a real size of 1 would broadcast, padding would not), so a
  // runner must check this before padding: see checkRealSizes.
  std::vector<std::pair<InputDim, InputDim>> sameRealSize;
};

// Propagates padding of `padded` through `g`. Throws Error(kGear) "<file:line>: op %c = cat:
// cannot pad input 'x' dim 0: ..." for the first op (in node order) where padding could reach
// a real output position, or when `padded` names a dim the graph does not have. `g` is
// re-verified first (verifyGraph), so a malformed graph throws Error(kShape).
PaddingPlan analyzePadding(const Graph& g, std::span<const InputDim> padded);

// The geared dims of `gears` as InputDims; a GearSet built from GearConfig(g) has g's input
// order, so these index g's inputs.
std::vector<InputDim> gearedInputDims(const GearSet& gears);

// Throws Error(kGear) when two input dims the plan ties together have different real sizes in
// `actual` (graph input order).
void checkRealSizes(const Graph& g, const PaddingPlan& plan, std::span<const Shape> actual);

// Wasted work of a padded run: (padded elements - real elements) / real elements, summed over
// all inputs; 0 for an exact gear, infinity when the real inputs are empty but the gear is not.
double paddingWaste(std::span<const Shape> padded, std::span<const Shape> actual);

}  // namespace gearbox
