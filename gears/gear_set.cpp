#include "gears/gear_set.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <numeric>
#include <tuple>

#include "graph/checked.h"
#include "graph/error.h"

namespace gearbox {
namespace {

// Decimal product of small factors. A product over many 100-value lists overflows int64 long
// before it stops being a plausible typo, and the limit message must still print the count.
std::string bigProduct(const std::vector<size_t>& factors) {
  constexpr uint64_t kBase = 1000000000;  // base 1e9 limbs, least significant first
  std::vector<uint64_t> limbs{1};
  for (size_t f : factors) {
    uint64_t carry = 0;
    for (uint64_t& limb : limbs) {
      const uint64_t v = limb * f + carry;
      limb = v % kBase;
      carry = v / kBase;
    }
    while (carry) {
      limbs.push_back(carry % kBase);
      carry /= kBase;
    }
  }
  std::string out = std::to_string(limbs.back());
  for (size_t i = limbs.size() - 1; i-- > 0;) out += fmt::format("{:09d}", limbs[i]);
  return out;
}

std::vector<int64_t> distinct(const std::vector<int64_t>& values) {
  std::vector<int64_t> out;
  for (int64_t v : values)
    if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
  return out;
}

// splitmix64 finaliser: cheap and well mixed, so tuples that differ in one small value do not
// collide in the bucket index.
uint64_t mix(uint64_t h, int64_t v) {
  uint64_t x = h ^ (static_cast<uint64_t>(v) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2));
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::string describeShapes(const std::vector<InputDecl>& inputs, const std::vector<int>& byName,
                           std::span<const Shape> shapes) {
  std::vector<std::string> parts;
  for (int i : byName) parts.push_back(inputs[i].name + "=" + shapes[i].toString());
  return fmt::format("{}", fmt::join(parts, " "));
}

}  // namespace

MergePolicy parseMergePolicy(std::string_view text) {
  if (text == "zip") return MergePolicy::kZip;
  if (text == "product") return MergePolicy::kProduct;
  fail(ErrorKind::kGear, "dynamic_gears_merge_policy only support zip and product.");
}

std::string_view mergePolicyName(MergePolicy p) {
  return p == MergePolicy::kZip ? "zip" : "product";
}

GearSet GearSet::build(const GearConfig& cfg, MergePolicy policy,
                       const FirstSeenShapes& firstSeen) {
  if (!cfg.hasGearedDim()) fail(ErrorKind::kGear, "At least one dimension should have levels.");
  GearSet s;
  s.policy_ = policy;
  s.inputs_ = cfg.inputs();
  s.byName_.resize(s.inputs_.size());
  std::iota(s.byName_.begin(), s.byName_.end(), 0);
  std::sort(s.byName_.begin(), s.byName_.end(),
            [&](int a, int b) { return s.inputs_[a].name < s.inputs_[b].name; });

  std::vector<std::vector<int64_t>> lists;
  std::vector<int> sourceSlot;
  s.buildSlots(cfg, lists, sourceSlot);
  // A first-seen shape for an input the graph does not have is a typo, not something to skip.
  for (const auto& [name, shape] : firstSeen) (void)cfg.inputIndex(name);
  s.specialiseFixedDims(firstSeen);
  s.addDistinctGears(s.candidateTuples(lists, sourceSlot));
  s.buildGearShapes();
  return s;
}

void GearSet::buildSlots(const GearConfig& cfg, std::vector<std::vector<int64_t>>& lists,
                         std::vector<int>& sourceSlot) {
  const size_t inputCount = inputs_.size();
  // Slots: the geared dims, plus every dim that shares a symbol with a geared dim and has no
  // gears of its own. Such a dim can only ever equal its geared partner (specialisation binds
  // one value per symbol), so it follows the partner's slot: a gear on x's B applies to y's B.
  // Without this, y's B would be specialised to its first-seen size and every other gear
  // would be invalid. Linked slots appear in the GE options like geared ones (GE needs a -1
  // and a value per gear for every dim that varies).
  struct Entry {
    std::string name;
    int input;
    int dim;
    std::vector<int64_t> values;  // as given
    int source;                   // index into `entries` of the geared dim, or -1
  };
  std::vector<Entry> entries;
  std::vector<std::array<bool, kMaxRank>> taken(inputCount);
  for (auto& row : taken) row.fill(false);
  for (const auto& [name, ig] : cfg.gears())
    for (const auto& [dim, values] : ig.dims) {
      entries.push_back(Entry{name, ig.inputIndex, dim, values, -1});
      taken[ig.inputIndex][dim] = true;
    }
  const size_t explicitCount = entries.size();
  for (size_t e = 0; e < explicitCount; ++e) {
    const int64_t sym = inputs_[entries[e].input].shape[entries[e].dim];
    if (!isSymbolDim(sym)) continue;
    for (int i : byName_)
      for (int d = 0; d < inputs_[i].shape.rank(); ++d)
        if (inputs_[i].shape[d] == sym && !taken[i][d]) {
          taken[i][d] = true;
          entries.push_back(Entry{inputs_[i].name, i, d, entries[e].values, static_cast<int>(e)});
        }
  }
  // Gear-tuple order: input name, then dim.
  std::vector<size_t> order(entries.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::tie(entries[a].name, entries[a].dim) < std::tie(entries[b].name, entries[b].dim);
  });
  std::vector<int> slotOfEntry(entries.size());
  for (size_t k = 0; k < order.size(); ++k) slotOfEntry[order[k]] = static_cast<int>(k);
  slotOf_.assign(inputCount, {});
  for (auto& row : slotOf_) row.fill(-1);
  for (size_t k : order) {
    const Entry& e = entries[k];
    slotOf_[e.input][e.dim] = static_cast<int>(slots_.size());
    GearSlot slot{e.name, e.input, e.dim, distinct(e.values), -1, {}, -1};
    if (e.source >= 0) {
      slot.linkedTo = slotOfEntry[e.source];
      slot.linkedInput = entries[e.source].name;
      slot.linkedDim = entries[e.source].dim;
    }
    sourceSlot.push_back(slot.linkedTo);
    slots_.push_back(std::move(slot));
    lists.push_back(e.values);
  }
}

void GearSet::specialiseFixedDims(const FirstSeenShapes& firstSeen) {
  // Specialise every dim that is not geared.
  templates_.resize(inputs_.size());
  for (int i : byName_) {
    const InputDecl& decl = inputs_[i];
    Shape t = decl.shape;
    for (int d = 0; d < t.rank(); ++d) {
      if (slotOf_[i][d] >= 0) {
        t[d] = kAnyDim;
        continue;
      }
      if (!isStaticDim(t[d])) {
        auto seen = firstSeen.find(decl.name);
        if (seen == firstSeen.end())
          fail(ErrorKind::kGear,
               "input '{}' dim {} is dynamic ({}) and has no gears, so it is specialised to its "
               "first-seen size, but no first-seen shape was given for '{}'",
               decl.name, d, dimToString(decl.shape[d]), decl.name);
        if (seen->second.rank() != t.rank())
          fail(ErrorKind::kGear,
               "first-seen shape {} of input '{}' has rank {}, but {} is declared",
               seen->second.toString(), decl.name, seen->second.rank(), decl.shape.toString());
        if (!isStaticDim(seen->second[d]))
          fail(ErrorKind::kGear, "first-seen shape {} of input '{}' is not concrete at dim {}",
               seen->second.toString(), decl.name, d);
        t[d] = seen->second[d];
      }
      fixed_.push_back(FixedDim{i, d, t[d]});
    }
    templates_[i] = t;
  }
}

std::vector<int64_t> GearSet::candidateTuples(const std::vector<std::vector<int64_t>>& lists,
                                              const std::vector<int>& sourceSlot) const {
  // Candidate tuples in gear order, before de-duplication.
  const size_t width = slots_.size();
  std::vector<int64_t> tuples;
  if (policy_ == MergePolicy::kZip) {
    for (const auto& l : lists)
      if (l.size() != lists[0].size())
        fail(ErrorKind::kGear,
             "when dynamic_gears_merge_policy is zip, input gears len must same.");
    for (size_t k = 0; k < lists[0].size(); ++k)
      for (const auto& l : lists) tuples.push_back(l[k]);
  } else {
    // The de-duplicated product is the product of the de-duplicated lists, in the same
    // first-occurrence order, so count first and never materialise an oversized product.
    // A linked slot copies its source's value, so it does not multiply the count.
    std::vector<size_t> sizes;
    size_t count = 1;
    bool over = false;
    for (const GearSlot& slot : slots_) {
      if (slot.linkedTo >= 0) {
        sizes.push_back(1);
        continue;
      }
      sizes.push_back(slot.values.size());
      count *= slot.values.size();
      over = over || count > kMaxGears;
      if (over) count = kMaxGears + 1;  // saturate; bigProduct prints the exact figure
    }
    if (over)
      fail(ErrorKind::kGear,
           "The total number of gears set cannot exceed {}, and the current number of gears is: "
           "{}",
           kMaxGears, bigProduct(sizes));
    std::vector<size_t> digit(width, 0);
    for (size_t n = 0; n < count; ++n) {
      for (size_t k = 0; k < width; ++k) {
        const size_t from = sourceSlot[k] >= 0 ? static_cast<size_t>(sourceSlot[k]) : k;
        tuples.push_back(slots_[from].values[digit[from]]);
      }
      for (size_t k = width; k-- > 0;) {  // odometer: last slot varies fastest
        if (++digit[k] < sizes[k]) break;
        digit[k] = 0;
      }
    }
  }
  return tuples;
}

void GearSet::addDistinctGears(const std::vector<int64_t>& tuples) {
  const size_t width = slots_.size();
  // De-duplicate, keeping the first occurrence.
  const size_t candidates = width ? tuples.size() / width : 0;
  for (size_t c = 0; c < candidates; ++c) {
    std::span<const int64_t> t(tuples.data() + c * width, width);
    const uint64_t h = hashValues(t);
    bool dup = false;
    auto [lo, hi] = index_.equal_range(h);
    for (auto it = lo; it != hi && !dup; ++it) {
      auto existing = values(it->second);
      dup = std::equal(existing.begin(), existing.end(), t.begin());
    }
    if (dup) continue;
    index_.emplace(h, static_cast<uint32_t>(gearCount_));
    values_.insert(values_.end(), t.begin(), t.end());
    ++gearCount_;
  }
  if (gearCount_ > kMaxGears)
    fail(ErrorKind::kGear,
         "The total number of gears set cannot exceed {}, and the current number of gears is: {}",
         kMaxGears, gearCount_);
}

void GearSet::buildGearShapes() {
  const size_t width = slots_.size();
  const size_t inputCount = inputs_.size();
  for (size_t g = 0; g < gearCount_; ++g) {
    int64_t total = 0;
    for (size_t i = 0; i < inputCount; ++i) {
      Shape shape = templates_[i];
      for (int d = 0; d < shape.rank(); ++d)
        if (slotOf_[i][d] >= 0) shape[d] = values_[g * width + slotOf_[i][d]];
      // Gear values are user input: the element count and the per-gear total are checked so a
      // huge gear is a clear error here instead of a wrapped size later. The byte limit proper
      // (which needs the dtype) is checked when a gear's signature is compiled.
      int64_t n = 0;
      if (!checkedNumel(shape, &n) || n > kMaxTensorBytes)
        fail(ErrorKind::kGear,
             "gear {}: input '{}' shape {} has more than 2^40 elements (the limit on one tensor)",
             g, inputs_[i].name, shape.toString());
      if (!checkedAdd(total, n, &total) || total > kMaxTensorBytes)
        fail(ErrorKind::kGear,
             "gear {}: the inputs hold more than 2^40 elements together (input '{}' shape {})", g,
             inputs_[i].name, shape.toString());
      shapes_.push_back(shape);
    }
    totals_.push_back(total);
  }
}

std::span<const int64_t> GearSet::values(size_t gear) const {
  return {values_.data() + gear * slots_.size(), slots_.size()};
}

std::span<const Shape> GearSet::shapes(size_t gear) const {
  return {shapes_.data() + gear * inputs_.size(), inputs_.size()};
}

std::string GearSet::inputShapeOption() const {
  std::vector<std::string> parts;
  for (int i : byName_)
    parts.push_back(fmt::format("{}:{}", inputs_[i].name, fmt::join(templates_[i], ",")));
  return fmt::format("{}", fmt::join(parts, ";"));
}

std::string GearSet::dynamicDimsOption() const {
  std::vector<std::string> parts;
  for (size_t g = 0; g < gearCount_; ++g)
    parts.push_back(fmt::format("{}", fmt::join(values(g), ",")));
  return fmt::format("{}", fmt::join(parts, ";"));
}

uint64_t GearSet::hashValues(std::span<const int64_t> values) const {
  uint64_t h = 0;
  for (int64_t v : values) h = mix(h, v);
  return h;
}

uint64_t GearSet::hashShapes(std::span<const Shape> shapes) const {
  uint64_t h = 0;
  for (const GearSlot& slot : slots_) h = mix(h, shapes[slot.inputIndex][slot.dim]);
  return h;
}

std::optional<size_t> GearSet::find(std::span<const Shape> shapes) const {
  if (shapes.size() != inputs_.size()) return std::nullopt;
  for (size_t i = 0; i < shapes.size(); ++i)
    if (shapes[i].rank() != templates_[i].rank()) return std::nullopt;
  for (const FixedDim& f : fixed_)
    if (shapes[f.input][f.dim] != f.size) return std::nullopt;
  auto [lo, hi] = index_.equal_range(hashShapes(shapes));
  for (auto it = lo; it != hi; ++it) {
    auto v = values(it->second);
    bool same = true;
    for (size_t k = 0; k < slots_.size() && same; ++k)
      same = v[k] == shapes[slots_[k].inputIndex][slots_[k].dim];
    if (same) return it->second;
  }
  return std::nullopt;
}

void GearSet::checkArity(std::span<const Shape> shapes) const {
  if (shapes.size() != inputs_.size())
    fail(ErrorKind::kGear, "expected {} input shapes, got {}", inputs_.size(), shapes.size());
  for (int i : byName_) {
    if (shapes[i].rank() != templates_[i].rank())
      fail(ErrorKind::kGear, "input '{}': expected rank {} ({}), actual rank {} ({})",
           inputs_[i].name, templates_[i].rank(), inputs_[i].shape.toString(), shapes[i].rank(),
           shapes[i].toString());
    if (!shapes[i].isStatic())
      fail(ErrorKind::kGear, "input '{}': shape {} is not concrete", inputs_[i].name,
           shapes[i].toString());
  }
}

std::string GearSet::describeFixedMiss(std::span<const Shape> shapes) const {
  for (int i : byName_)
    for (int d = 0; d < templates_[i].rank(); ++d)
      if (slotOf_[i][d] < 0 && shapes[i][d] != templates_[i][d])
        return fmt::format("input '{}' dim {}: expected {}, actual {} (not a geared dim)",
                           inputs_[i].name, d, templates_[i][d], shapes[i][d]);
  return {};
}

std::string GearSet::describeMiss(std::span<const Shape> shapes) const {
  // First offending dim in gear order: inputs by name, dims ascending.
  for (int i : byName_) {
    for (int d = 0; d < templates_[i].rank(); ++d) {
      const int slot = slotOf_[i][d];
      const int64_t actual = shapes[i][d];
      if (slot < 0) {
        if (actual != templates_[i][d])
          return fmt::format("input '{}' dim {}: expected {}, actual {} (not a geared dim)",
                             inputs_[i].name, d, templates_[i][d], actual);
        continue;
      }
      const auto& vals = slots_[slot].values;
      if (std::find(vals.begin(), vals.end(), actual) == vals.end())
        return fmt::format(
            "input '{}' dim {} = {} is not in the gears {} (shape {} is not in the dynamic "
            "dimension list configured by dynamic_dims)",
            inputs_[i].name, d, actual, formatValues(vals), shapes[i].toString());
    }
  }
  std::vector<std::string> slotNames, actual, gears;
  for (const GearSlot& slot : slots_) {
    slotNames.push_back(fmt::format("{} dim {}", slot.input, slot.dim));
    actual.push_back(std::to_string(shapes[slot.inputIndex][slot.dim]));
  }
  for (size_t g = 0; g < gearCount_; ++g)
    gears.push_back(fmt::format("({})", fmt::join(values(g), ", ")));
  return fmt::format(
      "input shapes {} are not a gear: every geared dim is in its gears, but the combination "
      "({}) of ({}) is not one of the {} gears {} (not in the dynamic dimension list configured "
      "by dynamic_dims)",
      describeShapes(inputs_, byName_, shapes), fmt::join(actual, ", "), fmt::join(slotNames, ", "),
      gearCount_, fmt::join(gears, ", "));
}

size_t GearSet::match(std::span<const Shape> shapes) const {
  checkArity(shapes);
  if (auto g = find(shapes)) return *g;
  fail(ErrorKind::kGear, "{}", describeMiss(shapes));
}

std::optional<size_t> GearSet::coveringGear(std::span<const Shape> shapes) const {
  checkArity(shapes);
  for (int i : byName_)
    for (int d = 0; d < templates_[i].rank(); ++d)
      if (slotOf_[i][d] < 0 && shapes[i][d] != templates_[i][d]) return std::nullopt;
  std::optional<size_t> best;
  for (size_t g = 0; g < gearCount_; ++g) {
    auto v = values(g);
    bool covers = true;
    for (size_t k = 0; k < slots_.size() && covers; ++k)
      covers = v[k] >= shapes[slots_[k].inputIndex][slots_[k].dim];
    if (covers && (!best || totals_[g] < totals_[*best])) best = g;
  }
  return best;
}

size_t GearSet::padTarget(std::span<const Shape> shapes) const {
  checkArity(shapes);
  // A pad can only grow geared dims; every other dim must already be right.
  std::string fixedMiss = describeFixedMiss(shapes);
  if (!fixedMiss.empty()) fail(ErrorKind::kGear, "cannot pad to a gear: {}", fixedMiss);
  if (const std::optional<size_t> best = coveringGear(shapes)) return *best;
  for (const GearSlot& slot : slots_) {
    const int64_t actual = shapes[slot.inputIndex][slot.dim];
    const int64_t largest = *std::max_element(slot.values.begin(), slot.values.end());
    if (actual > largest)
      fail(ErrorKind::kGear,
           "cannot pad to a gear: input '{}' dim {} = {} exceeds the largest gear value {} (gears "
           "{})",
           slot.input, slot.dim, actual, largest, formatValues(slot.values));
  }
  std::vector<std::string> gears;
  for (size_t g = 0; g < gearCount_; ++g)
    gears.push_back(fmt::format("({})", fmt::join(values(g), ", ")));
  fail(ErrorKind::kGear,
       "cannot pad to a gear: no gear covers input shapes {} (every geared dim must be >= the "
       "actual size; gears: {})",
       describeShapes(inputs_, byName_, shapes), fmt::join(gears, ", "));
}

}  // namespace gearbox
