#pragma once
// GearSet: the gear list a GearConfig expands to, the GE option strings that describe it, and
// the run-time lookups (exact match, smallest covering gear for padding).
//
// Gear order (what "gear k" means everywhere): the geared (input, dim) slots are ordered by
// input name (string order), then dim ascending; each gear is a tuple with one value per slot.
// zip: gear k takes the k-th value of every slot; product: the cartesian product with the first
// slot varying slowest (itertools.product order). Duplicate tuples are removed, keeping the
// first occurrence. A dim without gears that shares a symbol with a geared dim gets a linked
// slot taking the geared dim's value in every gear (a gear on x's B applies to y's B). Other
// dims that are not geared are specialised: the declared static size, or for a dynamic dim the
// size seen in the first call.

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gears/gear_spec.h"

namespace gearbox {

// TorchAir's dynamic_gears_merge_policy.
enum class MergePolicy { kZip, kProduct };

// "zip" / "product"; anything else throws Error(kGear)
// "dynamic_gears_merge_policy only support zip and product.".
MergePolicy parseMergePolicy(std::string_view text);
std::string_view mergePolicyName(MergePolicy p);

// At most this many gears after de-duplication (GE's limit).
constexpr size_t kMaxGears = 100;

// One geared (input, dim) slot: one position of every gear tuple.
struct GearSlot {
  std::string input;
  int inputIndex = -1;  // index into GearSet::inputs()
  int dim = 0;
  std::vector<int64_t> values;  // distinct values in first-seen order, for messages
  // A dim with no gears of its own that shares a symbol with a geared dim follows that dim:
  // the index of the geared slot it copies (and that slot's input and dim), or -1.
  int linkedTo = -1;
  std::string linkedInput;
  int linkedDim = -1;
};

// Shapes seen in the first call, by input name; they specialise dynamic dims without gears.
using FirstSeenShapes = std::map<std::string, Shape, std::less<>>;

class GearSet {
 public:
  // Expands `cfg` under `policy`. Throws Error(kGear): no geared dim ("At least one dimension
  // should have levels."), zip lengths differ, more than kMaxGears gears, or a dynamic dim
  // without gears whose size `firstSeen` does not give.
  static GearSet build(const GearConfig& cfg, MergePolicy policy,
                       const FirstSeenShapes& firstSeen = {});

  MergePolicy policy() const { return policy_; }
  // The declared inputs, in graph input order; shapes passed to match/padTarget follow it.
  const std::vector<InputDecl>& inputs() const { return inputs_; }
  // The geared slots in gear-tuple order.
  const std::vector<GearSlot>& slots() const { return slots_; }
  size_t size() const { return gearCount_; }

  // The slot values of gear `gear` (one per slot).
  std::span<const int64_t> values(size_t gear) const;
  // The concrete shape of every input (graph input order) under gear `gear`.
  std::span<const Shape> shapes(size_t gear) const;
  // Elements of all inputs under gear `gear`; what a padded run pays for.
  int64_t totalElements(size_t gear) const { return totals_[gear]; }
  // The shapes with geared dims as -1 and the rest specialised (the compiled graph's inputs).
  const std::vector<Shape>& templateShapes() const { return templates_; }

  // ge.inputShape: every input sorted by name, "name:d0,d1" with -1 for geared dims, joined by
  // ";"; a scalar is "name:". Example: "x1:-1,2;x2:-1,2".
  std::string inputShapeOption() const;
  // ge.dynamicDims: values of one gear joined by ",", gears joined by ";". Example: "2,2;4,4".
  std::string dynamicDimsOption() const;
  // ge.dynamicNodeType: always "1" (the dims are data-input dims).
  std::string dynamicNodeTypeOption() const { return "1"; }

  // The gear whose shapes equal `shapes` exactly (graph input order), or nullopt. Expected
  // O(1): one hash of the geared values plus the specialised-dim guard; never throws and
  // never allocates, so a runner can call it on every step.
  std::optional<size_t> find(std::span<const Shape> shapes) const;
  // find(), but a miss throws Error(kGear) explaining it: the first input/dim (inputs by
  // name, dims ascending) whose value is not in its gears or differs from its specialised
  // size, or, when every value is in its gears, the combination that is not a gear.
  size_t match(std::span<const Shape> shapes) const;
  // The gear with the fewest total elements (ties: lower index) whose every geared dim is >=
  // the actual size and every other dim equal, i.e. the gear to zero-pad `shapes` up to.
  // Throws Error(kGear) naming the first dim no gear covers.
  size_t padTarget(std::span<const Shape> shapes) const;
  // padTarget's gear, or nullopt (never throws) when no gear covers `shapes`: a geared dim above
  // every gear, or a non-geared dim that differs (--gear-fallback pad+dynamic|pad+eager sends
  // such a call to its fallback). Throws only as checkArity does.
  std::optional<size_t> coveringGear(std::span<const Shape> shapes) const;

 private:
  // Throws Error(kGear) when `shapes` has the wrong count, a wrong rank or a negative dim.
  void checkArity(std::span<const Shape> shapes) const;
  // The guard message for the first non-geared dim (inputs by name) that differs from its
  // specialised size, or "".
  std::string describeFixedMiss(std::span<const Shape> shapes) const;
  std::string describeMiss(std::span<const Shape> shapes) const;
  uint64_t hashValues(std::span<const int64_t> values) const;
  uint64_t hashShapes(std::span<const Shape> shapes) const;

  // build()'s steps, in order. The slots: the geared dims and the dims a shared symbol links
  // to them, in gear-tuple order; `lists` gets each slot's values as given, `sourceSlot` the
  // slot a linked slot copies (-1 for a geared one).
  void buildSlots(const GearConfig& cfg, std::vector<std::vector<int64_t>>& lists,
                  std::vector<int>& sourceSlot);
  // The template shapes: every dim that is not geared specialised to its static or first-seen
  // size (fixed_), -1 at geared dims.
  void specialiseFixedDims(const FirstSeenShapes& firstSeen);
  // The candidate gear tuples (zip or product of `lists`), flattened, before de-duplication.
  std::vector<int64_t> candidateTuples(const std::vector<std::vector<int64_t>>& lists,
                                       const std::vector<int>& sourceSlot) const;
  // Keeps the first occurrence of each tuple as a gear, indexed by hash.
  void addDistinctGears(const std::vector<int64_t>& tuples);
  // Every gear's input shapes and element total, checked against the tensor limits.
  void buildGearShapes();

  MergePolicy policy_ = MergePolicy::kZip;
  std::vector<InputDecl> inputs_;
  std::vector<Shape> templates_;  // per input: specialised dims, -1 at geared dims
  std::vector<GearSlot> slots_;
  size_t gearCount_ = 0;
  std::vector<int64_t> values_;  // gearCount_ x slots_.size()
  std::vector<Shape> shapes_;    // gearCount_ x inputs_.size()
  std::vector<int64_t> totals_;  // per gear
  // (input, dim) that are not geared, with their specialised size: the guard every gear shares.
  struct FixedDim {
    int input;
    int dim;
    int64_t size;
  };
  std::vector<FixedDim> fixed_;
  std::vector<int> byName_;  // input indices sorted by name
  // Per input and dim: the slot index, or -1 for a specialised dim.
  std::vector<std::array<int, kMaxRank>> slotOf_;
  // Hash of a gear's slot values -> gear index; several gears may share a hash.
  std::unordered_multimap<uint64_t, uint32_t> index_;
};

}  // namespace gearbox
