// Gear specs, merge, matching and padding analysis. The expected messages are TorchAir's,
// character for character (docs/gears.md), or gearbox's documented additions.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "gears/gear_set.h"
#include "gears/gear_spec.h"
#include "gears/padding.h"
#include "graph/error.h"
#include "graph/graph.h"

namespace gearbox {
namespace {

// Runs `f`, expects an Error(kGear) and returns its message ("" and a failure otherwise).
template <typename F>
std::string gearError(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kGear) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "expected a gear error";
  return "";
}

std::vector<int64_t> iota(int64_t from, int64_t count) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < count; ++i) v.push_back(from + i);
  return v;
}

// The seed 001 example: x1 + x2 with both declared [-1, 2] and gears {0: [2, 4]} on each.
GearConfig seedConfig() {
  GearConfig cfg({{"x1", {kAnyDim, 2}}, {"x2", {kAnyDim, 2}}});
  cfg.setDimGears("x1", {{0, {2, 4}}});
  cfg.setDimGears("x2", {{0, {2, 4}}});
  return cfg;
}

std::vector<std::vector<int64_t>> allValues(const GearSet& s) {
  std::vector<std::vector<int64_t>> out;
  for (size_t g = 0; g < s.size(); ++g) out.emplace_back(s.values(g).begin(), s.values(g).end());
  return out;
}

// ---------------------------------------------------------------------------------------------
// set_dim_gears checks (C++ API)

TEST(GearSpec, StoresDimsAscendingAndKeepsRepeatedValues) {
  GearConfig cfg({{"x", {kAnyDim, kAnyDim}}});
  cfg.setDimGears("x", {{1, {10, 10, 20}}, {0, {2, 3, 2}}});
  const InputGears& g = cfg.gears().at("x");
  EXPECT_EQ(g.inputIndex, 0);
  ASSERT_EQ(g.dims.size(), 2u);
  EXPECT_EQ(g.dims.begin()->first, 0);
  EXPECT_EQ(g.dims.at(0), (std::vector<int64_t>{2, 3, 2}));
  EXPECT_EQ(g.dims.at(1), (std::vector<int64_t>{10, 10, 20}));
  EXPECT_TRUE(cfg.hasGearedDim());
}

TEST(GearSpec, SettingADifferentSpecAgainFails) {
  GearConfig cfg({{"x1", {kAnyDim, 2}}});
  cfg.setDimGears("x1", {{0, {2, 4}}});
  EXPECT_NO_THROW(cfg.setDimGears("x1", {{0, {2, 4}}}));  // identical: fine
  EXPECT_EQ(gearError([&] {
              cfg.setDimGears("x1", {{0, {2, 8}}});
            }),
            "Tensor x1 already has set dim gears, and it is not supported to set it again.");
  // The check comes first: an invalid second spec still reports "already set".
  EXPECT_EQ(gearError([&] {
              cfg.setDimGears("x1", {{7, {0}}});
            }),
            "Tensor x1 already has set dim gears, and it is not supported to set it again.");
  EXPECT_EQ(cfg.gears().at("x1").dims.at(0), (std::vector<int64_t>{2, 4}));
}

TEST(GearSpec, DimIndexOutOfRange) {
  GearConfig cfg({{"x", {kAnyDim, kAnyDim}}});
  EXPECT_EQ(gearError([&] {
              cfg.setDimGears("x", {{2, {2, 4}}});
            }),
            "Dim index in dim_gears must be in range [0, 1], but got 2.");
  // Negative dims are rejected, not wrapped.
  EXPECT_EQ(gearError([&] {
              cfg.setDimGears("x", {{-1, {2, 4}}});
            }),
            "Dim index in dim_gears must be in range [0, 1], but got -1.");
  GearConfig scalar({{"s", Shape::scalar()}});
  EXPECT_EQ(gearError([&] {
              scalar.setDimGears("s", {{0, {2, 4}}});
            }),
            "Dim index in dim_gears must be in range [0, -1], but got 0.");
  EXPECT_TRUE(cfg.gears().empty());  // a failed call stores nothing
}

TEST(GearSpec, ZeroValue) {
  GearConfig cfg({{"x", {kAnyDim}}});
  EXPECT_EQ(gearError([&] {
              cfg.setDimGears("x", {{0, {2, 0, 4}}});
            }),
            "Gear value at index 1 for dim index 0 must not be 0, but got 0.");
}

TEST(GearSpec, NegativeValueIsRejected) {
  GearConfig cfg({{"x", {kAnyDim}}});
  EXPECT_EQ(gearError([&] {
              cfg.setDimGears("x", {{0, {2, -4}}});
            }),
            "Gear value at index 1 for dim index 0 must be positive, but got -4.");
}

TEST(GearSpec, LengthMustBeInTwoToHundred) {
  GearConfig cfg({{"x", {kAnyDim, kAnyDim}}});
  EXPECT_EQ(gearError([&] {
              cfg.setDimGears("x", {{1, {4}}});
            }),
            "Length of gears for dim index 1 in dim_gears must be in range [2, 100], but got 1.");
  EXPECT_EQ(gearError([&] {
              cfg.setDimGears("x", {{0, {}}});
            }),
            "Length of gears for dim index 0 in dim_gears must be in range [2, 100], but got 0.");
  EXPECT_EQ(gearError([&] {
              cfg.setDimGears("x", {{0, iota(1, 101)}});
            }),
            "Length of gears for dim index 0 in dim_gears must be in range [2, 100], but got 101.");
  EXPECT_NO_THROW(cfg.setDimGears("x", {{0, iota(1, 100)}}));
}

TEST(GearSpec, ChecksRunPerKeyInTheGivenOrder) {
  GearConfig cfg({{"x", {kAnyDim, kAnyDim}}});
  // Key 1 comes first: its zero value is reported, not its length nor key 5's range.
  EXPECT_EQ(gearError([&] {
              cfg.setDimGears("x", {{1, {0}}, {5, {2, 4}}});
            }),
            "Gear value at index 0 for dim index 1 must not be 0, but got 0.");
  // A bad key after a good one.
  EXPECT_EQ(gearError([&] {
              cfg.setDimGears("x", {{0, {2, 4}}, {5, {0}}});
            }),
            "Dim index in dim_gears must be in range [0, 1], but got 5.");
  // Within one list: the element checks run before the length check.
  EXPECT_EQ(gearError([&] {
              cfg.setDimGears("x", {{0, {-3}}});
            }),
            "Gear value at index 0 for dim index 0 must be positive, but got -3.");
}

TEST(GearSpec, RepeatedKeyAndStaticDimAndUnknownInput) {
  GearConfig cfg({{"x1", {kAnyDim, 2}}, {"x2", {kAnyDim, 2}}});
  EXPECT_EQ(gearError([&] {
              cfg.setDimGears("x1", {{0, {2, 4}}, {0, {2, 8}}});
            }),
            "Dim index 0 appears more than once in dim_gears of input 'x1'.");
  EXPECT_EQ(gearError([&] {
              cfg.setDimGears("x1", {{1, {2, 4}}});
            }),
            "Dim index 1 of input 'x1' is declared static (size 2) in the graph [-1, 2]; only a "
            "dynamic dim (-1 or a symbol) can have gears.");
  EXPECT_EQ(gearError([&] {
              cfg.setDimGears("x3", {{0, {2, 4}}});
            }),
            "gears name input 'x3', but the graph has no such input (inputs: x1, x2)");
  // A symbolic dim is dynamic and may be geared.
  GearConfig sym({{"t", {symbolDim("B"), 2}}});
  EXPECT_NO_THROW(sym.setDimGears("t", {{0, {2, 4}}}));
}

TEST(GearSpec, GraphOverloadTakesTheGraphsInputs) {
  GraphBuilder b("g");
  auto x1 = b.input("x1", DType::kF32, {kAnyDim, 2});
  auto x2 = b.input("x2", DType::kF32, {kAnyDim, 2});
  b.output(b.add(x1, x2));
  Graph g = b.build();
  GearConfig cfg;
  setDimGears(cfg, g, "x1", {{0, {2, 4}}});
  setDimGears(cfg, g, "x2", {{0, {2, 4}}});
  EXPECT_EQ(cfg.inputs().size(), 2u);
  EXPECT_EQ(cfg.inputs()[1].name, "x2");
  GraphBuilder b2("other");
  b2.output(b2.input("y", DType::kF32, {kAnyDim}));
  Graph other = b2.build();
  EXPECT_EQ(gearError([&] {
              setDimGears(cfg, other, "y", {{0, {2, 4}}});
            }),
            "the gear config was built for another graph than 'other'");
}

// ---------------------------------------------------------------------------------------------
// set_dim_gears checks reached through JSON (Python type names)

std::string jsonError(const std::string& json,
                      std::vector<InputDecl> inputs = {{"x1", {kAnyDim, kAnyDim}}}) {
  return gearError([&] { parseGearsJson(std::move(inputs), json); });
}

TEST(GearSpecJson, ParsesTheSeedExample) {
  GearConfig cfg = parseGearsJson({{"x1", {kAnyDim, 2}}, {"x2", {kAnyDim, 2}}},
                                  R"({"x1": {"0": [2, 4]}, "x2": {"0": [2, 4]}})");
  EXPECT_EQ(cfg.gears().at("x1").dims.at(0), (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(cfg.gears().at("x2").dims.at(0), (std::vector<int64_t>{2, 4}));
}

TEST(GearSpecJson, KeyMustBeAnInteger) {
  EXPECT_EQ(jsonError(R"({"x1": {"a": [2, 4]}})"),
            "gears for input 'x1': Dim index in dim_gears must be an integer, but got str.");
  EXPECT_EQ(jsonError(R"({"x1": {"1.0": [2, 4]}})"),
            "gears for input 'x1': Dim index in dim_gears must be an integer, but got str.");
  EXPECT_EQ(jsonError(R"({"x1": {"-1": [2, 4]}})"),
            "gears for input 'x1': Dim index in dim_gears must be in range [0, 1], but got -1.");
  EXPECT_EQ(jsonError(R"({"x1": {"99999999999999999999": [2, 4]}})"),
            "gears for input 'x1': Dim index in dim_gears must be in range [0, 1], but got "
            "99999999999999999999.");
}

TEST(GearSpecJson, ValueMustBeAList) {
  const std::string prefix = "gears for input 'x1': Gears for dim index 0 in dim_gears must be ";
  EXPECT_EQ(jsonError(R"({"x1": {"0": 4}})"), prefix + "a list or tuple, but got int.");
  EXPECT_EQ(jsonError(R"({"x1": {"0": "2,4"}})"), prefix + "a list or tuple, but got str.");
  EXPECT_EQ(jsonError(R"({"x1": {"0": {"a": 1}}})"), prefix + "a list or tuple, but got dict.");
  EXPECT_EQ(jsonError(R"({"x1": {"0": null}})"), prefix + "a list or tuple, but got NoneType.");
  EXPECT_EQ(jsonError(R"({"x1": {"0": 2.5}})"), prefix + "a list or tuple, but got float.");
}

TEST(GearSpecJson, ElementsMustBeIntegers) {
  auto msg = [](int k, const char* type) {
    return std::string("gears for input 'x1': Element at index ") + std::to_string(k) +
           " of value for dim index 0 in dim_gears must be an integer, but got " + type + ".";
  };
  EXPECT_EQ(jsonError(R"({"x1": {"0": [2, 4.0]}})"), msg(1, "float"));
  EXPECT_EQ(jsonError(R"({"x1": {"0": ["2", 4]}})"), msg(0, "str"));
  EXPECT_EQ(jsonError(R"({"x1": {"0": [2, true]}})"), msg(1, "bool"));
  EXPECT_EQ(jsonError(R"({"x1": {"0": [2, null]}})"), msg(1, "NoneType"));
  EXPECT_EQ(jsonError(R"({"x1": {"0": [2, [4]]}})"), msg(1, "list"));
  EXPECT_EQ(jsonError(R"({"x1": {"0": [2, {}]}})"), msg(1, "dict"));
  // The element loop reports the first bad element, before the zero check of later ones.
  EXPECT_EQ(jsonError(R"({"x1": {"0": [0.5, 0]}})"), msg(0, "float"));
  EXPECT_EQ(
      jsonError(R"({"x1": {"0": [2, 0, "x"]}})"),
      "gears for input 'x1': Gear value at index 1 for dim index 0 must not be 0, but got 0.");
  EXPECT_EQ(jsonError(R"({"x1": {"0": [2, 18446744073709551615]}})"),
            "gears for input 'x1': Gear value at index 1 for dim index 0 is too large, got "
            "18446744073709551615.");
}

TEST(GearSpecJson, DocumentShapeErrors) {
  EXPECT_EQ(jsonError(R"([1, 2])"),
            "gears JSON must be an object mapping input names to {dim: [values]}, but got list.");
  EXPECT_EQ(jsonError(R"({"x1": [2, 4]})"),
            "gears for input 'x1': dim_gears must be a dict, but got list.");
  EXPECT_EQ(jsonError(R"({"nope": {"0": [2, 4]}})"),
            "gears name input 'nope', but the graph has no such input (inputs: x1)");
  const std::string malformed = jsonError(R"({"x1": {"0": [2, 4]})");
  EXPECT_EQ(malformed.rfind("gears JSON is malformed: ", 0), 0u) << malformed;
  EXPECT_EQ(jsonError("").rfind("gears JSON is malformed: ", 0), 0u);
  EXPECT_EQ(jsonError(R"({"x1": {"0": [2, 4], "0": [2, 8]}})"),
            "gears JSON repeats the key \"0\" in one object");
  EXPECT_EQ(jsonError(R"({"x1": {"0": [2, 4]}, "x1": {"1": [2, 8]}})"),
            "gears JSON repeats the key \"x1\" in one object");
  // "00" is the same dim as "0" but a different JSON key: the dim check catches it.
  EXPECT_EQ(jsonError(R"({"x1": {"0": [2, 4], "00": [2, 8]}})"),
            "gears for input 'x1': Dim index 0 appears more than once in dim_gears of input "
            "'x1'.");
  // Keys may repeat across different objects.
  EXPECT_NO_THROW(parseGearsJson({{"a", {kAnyDim}}, {"b", {kAnyDim}}},
                                 R"({"a": {"0": [2, 4]}, "b": {"0": [2, 4]}})"));
}

TEST(GearSpecJson, AlreadySetAcrossFrontEnds) {
  GearConfig cfg({{"x1", {kAnyDim, 2}}});
  cfg.setDimGears("x1", {{0, {2, 4}}});
  EXPECT_NO_THROW(applyGearsJson(cfg, R"({"x1": {"0": [2, 4]}})"));
  EXPECT_EQ(gearError([&] { applyGearsJson(cfg, R"({"x1": {"0": [2, 4, 8]}})"); }),
            "gears for input 'x1': Tensor x1 already has set dim gears, and it is not supported "
            "to set it again.");
  // Ill-typed differs from any stored spec: "already set" wins over the type error.
  EXPECT_EQ(gearError([&] { applyGearsJson(cfg, R"({"x1": {"a": 1}})"); }),
            "gears for input 'x1': Tensor x1 already has set dim gears, and it is not supported "
            "to set it again.");
}

// ---------------------------------------------------------------------------------------------
// Merge into a gear list

TEST(GearSetBuild, MergePolicyNames) {
  EXPECT_EQ(parseMergePolicy("zip"), MergePolicy::kZip);
  EXPECT_EQ(parseMergePolicy("product"), MergePolicy::kProduct);
  EXPECT_EQ(gearError([] { parseMergePolicy("Zip"); }),
            "dynamic_gears_merge_policy only support zip and product.");
  EXPECT_EQ(gearError([] { parseMergePolicy(""); }),
            "dynamic_gears_merge_policy only support zip and product.");
  EXPECT_EQ(mergePolicyName(MergePolicy::kProduct), "product");
}

TEST(GearSetBuild, NoGearedDim) {
  GearConfig cfg({{"x", {kAnyDim}}});
  EXPECT_EQ(gearError([&] { GearSet::build(cfg, MergePolicy::kZip); }),
            "At least one dimension should have levels.");
  cfg.setDimGears("x", {});  // an empty dict is accepted but gears nothing
  EXPECT_EQ(gearError([&] { GearSet::build(cfg, MergePolicy::kProduct); }),
            "At least one dimension should have levels.");
}

TEST(GearSetBuild, SeedZipGivesTwoGearsAndTheLoggedOptions) {
  GearSet s = GearSet::build(seedConfig(), MergePolicy::kZip);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(allValues(s), (std::vector<std::vector<int64_t>>{{2, 2}, {4, 4}}));
  EXPECT_EQ(s.shapes(1)[0], Shape({4, 2}));
  EXPECT_EQ(s.shapes(1)[1], Shape({4, 2}));
  EXPECT_EQ(s.inputShapeOption(), "x1:-1,2;x2:-1,2");
  EXPECT_EQ(s.dynamicDimsOption(), "2,2;4,4");
  EXPECT_EQ(s.dynamicNodeTypeOption(), "1");
  EXPECT_EQ(s.totalElements(0), 8);
  ASSERT_EQ(s.slots().size(), 2u);
  EXPECT_EQ(s.slots()[1].input, "x2");
}

TEST(GearSetBuild, SeedProductGivesFourGearsInLexicographicOrder) {
  GearSet s = GearSet::build(seedConfig(), MergePolicy::kProduct);
  EXPECT_EQ(allValues(s), (std::vector<std::vector<int64_t>>{{2, 2}, {2, 4}, {4, 2}, {4, 4}}));
  EXPECT_EQ(s.dynamicDimsOption(), "2,2;2,4;4,2;4,4");
  EXPECT_EQ(s.shapes(1)[0], Shape({2, 2}));
  EXPECT_EQ(s.shapes(1)[1], Shape({4, 2}));
}

TEST(GearSetBuild, ZipTwoDimsOfOneInputGivesSixGears) {
  GearConfig cfg({{"input3", {kAnyDim, kAnyDim}}});
  cfg.setDimGears("input3", {{0, {2, 3, 4, 2, 3, 4}}, {1, {10, 10, 10, 20, 20, 20}}});
  GearSet zip = GearSet::build(cfg, MergePolicy::kZip);
  const std::vector<std::vector<int64_t>> six{{2, 10}, {3, 10}, {4, 10}, {2, 20}, {3, 20}, {4, 20}};
  EXPECT_EQ(allValues(zip), six);
  EXPECT_EQ(zip.inputShapeOption(), "input3:-1,-1");
  EXPECT_EQ(zip.dynamicDimsOption(), "2,10;3,10;4,10;2,20;3,20;4,20");
  // The same six shapes with product, written the short way.
  GearConfig p({{"input3", {kAnyDim, kAnyDim}}});
  p.setDimGears("input3", {{0, {2, 3, 4}}, {1, {10, 20}}});
  GearSet product = GearSet::build(p, MergePolicy::kProduct);
  EXPECT_EQ(allValues(product), (std::vector<std::vector<int64_t>>{
                                    {2, 10}, {2, 20}, {3, 10}, {3, 20}, {4, 10}, {4, 20}}));
}

TEST(GearSetBuild, ZipLengthsMustMatch) {
  GearConfig cfg({{"x1", {kAnyDim, 2}}, {"x2", {kAnyDim, 2}}});
  cfg.setDimGears("x1", {{0, {2, 4}}});
  cfg.setDimGears("x2", {{0, {2, 4, 8}}});
  EXPECT_EQ(gearError([&] { GearSet::build(cfg, MergePolicy::kZip); }),
            "when dynamic_gears_merge_policy is zip, input gears len must same.");
  EXPECT_EQ(GearSet::build(cfg, MergePolicy::kProduct).size(), 6u);
}

TEST(GearSetBuild, InputsAreVisitedByNameThenDimsAscending) {
  // Declared out of name order; "x10" sorts before "x2" as a string.
  GearConfig cfg({{"x2", {kAnyDim, kAnyDim}}, {"x10", {kAnyDim}}, {"a", {3}}});
  cfg.setDimGears("x2", {{1, {5, 6}}, {0, {7, 8}}});
  cfg.setDimGears("x10", {{0, {1, 2}}});
  GearSet s = GearSet::build(cfg, MergePolicy::kZip);
  ASSERT_EQ(s.slots().size(), 3u);
  EXPECT_EQ(s.slots()[0].input, "x10");
  EXPECT_EQ(s.slots()[1].dim, 0);
  EXPECT_EQ(s.slots()[2].dim, 1);
  EXPECT_EQ(allValues(s), (std::vector<std::vector<int64_t>>{{1, 7, 5}, {2, 8, 6}}));
  EXPECT_EQ(s.inputShapeOption(), "a:3;x10:-1;x2:-1,-1");
  // shapes() stay in declared (graph input) order.
  EXPECT_EQ(s.shapes(0)[0], Shape({7, 5}));
  EXPECT_EQ(s.shapes(0)[1], Shape({1}));
  EXPECT_EQ(s.shapes(0)[2], Shape({3}));
}

TEST(GearSetBuild, DuplicateGearsAreRemovedKeepingTheFirst) {
  GearConfig cfg({{"x1", {kAnyDim}}, {"x2", {kAnyDim}}});
  cfg.setDimGears("x1", {{0, {4, 2, 4, 2, 8}}});
  cfg.setDimGears("x2", {{0, {3, 5, 3, 5, 3}}});
  GearSet zip = GearSet::build(cfg, MergePolicy::kZip);
  EXPECT_EQ(allValues(zip), (std::vector<std::vector<int64_t>>{{4, 3}, {2, 5}, {8, 3}}));
  GearSet product = GearSet::build(cfg, MergePolicy::kProduct);
  EXPECT_EQ(allValues(product),
            (std::vector<std::vector<int64_t>>{{4, 3}, {4, 5}, {2, 3}, {2, 5}, {8, 3}, {8, 5}}));
  EXPECT_EQ(product.slots()[0].values, (std::vector<int64_t>{4, 2, 8}));
}

TEST(GearSetBuild, AtMostOneHundredGears) {
  // The reference example: three [-1, 8] inputs with 9, 10 and 10 values -> 900 gears.
  GearConfig cfg({{"x1", {kAnyDim, 8}}, {"x2", {kAnyDim, 8}}, {"x3", {kAnyDim, 8}}});
  cfg.setDimGears("x1", {{0, iota(1, 9)}});
  cfg.setDimGears("x2", {{0, iota(1, 10)}});
  cfg.setDimGears("x3", {{0, iota(1, 10)}});
  EXPECT_EQ(gearError([&] { GearSet::build(cfg, MergePolicy::kProduct); }),
            "The total number of gears set cannot exceed 100, and the current number of gears "
            "is: 900");
  // Exactly 100 is fine; the count is taken after duplicates are removed.
  GearConfig ok({{"x1", {kAnyDim}}, {"x2", {kAnyDim}}});
  std::vector<int64_t> repeated = iota(1, 10);
  repeated.insert(repeated.end(), {1, 2, 3});
  ok.setDimGears("x1", {{0, repeated}});
  ok.setDimGears("x2", {{0, iota(1, 10)}});
  EXPECT_EQ(GearSet::build(ok, MergePolicy::kProduct).size(), 100u);
}

TEST(GearSetBuild, HugeProductCountIsPrintedExactly) {
  // Ten 100-value slots: 10^20 gears, beyond uint64, never materialised.
  GearConfig cfg({{"a", {-1, -1, -1, -1, -1}}, {"b", {-1, -1, -1, -1, -1}}});
  DimGearList dims;
  for (int d = 0; d < 5; ++d) dims.push_back({d, iota(1, 100)});
  cfg.setDimGears("a", dims);
  cfg.setDimGears("b", dims);
  EXPECT_EQ(gearError([&] { GearSet::build(cfg, MergePolicy::kProduct); }),
            "The total number of gears set cannot exceed 100, and the current number of gears "
            "is: 100000000000000000000");
}

TEST(GearSetBuild, ScalarInputAndStaticDimsInOptions) {
  GearConfig cfg({{"s", Shape::scalar()}, {"x", {kAnyDim, 3}}});
  cfg.setDimGears("x", {{0, {1, 2}}});
  GearSet s = GearSet::build(cfg, MergePolicy::kZip);
  EXPECT_EQ(s.inputShapeOption(), "s:;x:-1,3");
  EXPECT_EQ(s.dynamicDimsOption(), "1;2");
  EXPECT_EQ(s.shapes(1)[0], Shape::scalar());
}

TEST(GearSetBuild, DynamicDimsWithoutGearsUseTheFirstSeenShape) {
  const int64_t T = symbolDim("T");
  GearConfig cfg({{"x", {kAnyDim, T}}, {"y", {kAnyDim}}});
  cfg.setDimGears("x", {{0, {2, 4}}});
  EXPECT_EQ(gearError([&] { GearSet::build(cfg, MergePolicy::kZip); }),
            "input 'x' dim 1 is dynamic (T) and has no gears, so it is specialised to its "
            "first-seen size, but no first-seen shape was given for 'x'");
  EXPECT_EQ(gearError([&] {
              GearSet::build(cfg, MergePolicy::kZip, {{"x", {3, 7}}, {"y", {1, 1}}});
            }),
            "first-seen shape [1, 1] of input 'y' has rank 2, but [-1] is declared");
  EXPECT_EQ(gearError([&] {
              GearSet::build(cfg, MergePolicy::kZip, {{"x", {3, kAnyDim}}, {"y", {5}}});
            }),
            "first-seen shape [3, -1] of input 'x' is not concrete at dim 1");
  EXPECT_EQ(gearError([&] {
              GearSet::build(cfg, MergePolicy::kZip, {{"z", {1}}});
            }),
            "gears name input 'z', but the graph has no such input (inputs: x, y)");
  GearSet s = GearSet::build(cfg, MergePolicy::kZip, {{"x", {3, 7}}, {"y", {5}}});
  EXPECT_EQ(s.inputShapeOption(), "x:-1,7;y:5");
  EXPECT_EQ(s.shapes(1)[0], Shape({4, 7}));
  EXPECT_EQ(s.templateShapes()[0], Shape({kAnyDim, 7}));
}

// A gear on one input's dim applies to every dim with the same symbol (four_ops: x and y
// share B). Before, y's B was specialised to its first-seen size and 3 of 4 gears failed.
TEST(GearSetBuild, GearsFollowSharedSymbols) {
  const int64_t B = symbolDim("B");
  GearConfig cfg({{"x", {B, 4}}, {"y", {B, 4}}, {"z", {B, B}}});
  cfg.setDimGears("x", {{0, {1, 2, 4, 8}}});
  for (MergePolicy p : {MergePolicy::kZip, MergePolicy::kProduct}) {
    GearSet s = GearSet::build(cfg, p, {{"x", {1, 4}}, {"y", {1, 4}}, {"z", {1, 1}}});
    ASSERT_EQ(s.size(), 4u);
    ASSERT_EQ(s.slots().size(), 4u);  // x0, y0, z0, z1
    EXPECT_EQ(s.slots()[0].linkedTo, -1);
    EXPECT_EQ(s.slots()[1].input, "y");
    EXPECT_EQ(s.slots()[1].linkedTo, 0);
    EXPECT_EQ(s.slots()[1].linkedInput, "x");
    EXPECT_EQ(s.slots()[3].dim, 1);
    EXPECT_EQ(s.slots()[3].linkedTo, 0);
    EXPECT_EQ(s.inputShapeOption(), "x:-1,4;y:-1,4;z:-1,-1");
    EXPECT_EQ(s.dynamicDimsOption(), "1,1,1,1;2,2,2,2;4,4,4,4;8,8,8,8");
    const std::vector<Shape> four = {{4, 4}, {4, 4}, {4, 4}};
    EXPECT_EQ(s.find(four), std::optional<size_t>(2));
    const std::vector<Shape> three = {{3, 4}, {3, 4}, {3, 3}};
    EXPECT_EQ(s.padTarget(three), 2u);
    EXPECT_EQ(s.find(three), std::nullopt);
  }
  // Gears given explicitly on both inputs keep the old meaning (product pairs them).
  GearConfig both({{"x", {B, 4}}, {"y", {B, 4}}});
  both.setDimGears("x", {{0, {2, 4}}});
  both.setDimGears("y", {{0, {2, 4}}});
  GearSet p = GearSet::build(both, MergePolicy::kProduct);
  EXPECT_EQ(p.size(), 4u);
  EXPECT_EQ(p.slots()[1].linkedTo, -1);
}

// ---------------------------------------------------------------------------------------------
// Exact matching

TEST(GearMatch, FindsEveryGearAndExplainsMisses) {
  GearSet s = GearSet::build(seedConfig(), MergePolicy::kZip);
  const std::vector<Shape> g1{{4, 2}, {4, 2}};
  EXPECT_EQ(s.match(g1), 1u);
  EXPECT_EQ(s.find(g1), std::optional<size_t>(1));
  const std::vector<Shape> miss{{3, 2}, {3, 2}};
  EXPECT_EQ(s.find(miss), std::nullopt);
  EXPECT_EQ(gearError([&] { s.match(miss); }),
            "input 'x1' dim 0 = 3 is not in the gears [2, 4] (shape [3, 2] is not in the dynamic "
            "dimension list configured by dynamic_dims)");
  // x1 is fine, x2 is the first offender.
  EXPECT_EQ(gearError([&] {
              s.match(std::vector<Shape>{{2, 2}, {8, 2}});
            }),
            "input 'x2' dim 0 = 8 is not in the gears [2, 4] (shape [8, 2] is not in the dynamic "
            "dimension list configured by dynamic_dims)");
}

TEST(GearMatch, ZipCombinationThatIsNotAGear) {
  GearSet s = GearSet::build(seedConfig(), MergePolicy::kZip);
  const std::vector<Shape> mixed{{2, 2}, {4, 2}};
  EXPECT_EQ(s.find(mixed), std::nullopt);
  EXPECT_EQ(gearError([&] { s.match(mixed); }),
            "input shapes x1=[2, 2] x2=[4, 2] are not a gear: every geared dim is in its gears, "
            "but the combination (2, 4) of (x1 dim 0, x2 dim 0) is not one of the 2 gears (2, 2), "
            "(4, 4) (not in the dynamic dimension list configured by dynamic_dims)");
  // The same shapes are a gear under product.
  EXPECT_EQ(GearSet::build(seedConfig(), MergePolicy::kProduct).match(mixed), 1u);
}

TEST(GearMatch, SpecialisedDimsAreGuarded) {
  GearSet s = GearSet::build(seedConfig(), MergePolicy::kZip);
  const std::vector<Shape> wrong{{2, 3}, {2, 2}};
  EXPECT_EQ(s.find(wrong), std::nullopt);
  EXPECT_EQ(gearError([&] { s.match(wrong); }),
            "input 'x1' dim 1: expected 2, actual 3 (not a geared dim)");
}

TEST(GearMatch, ArityAndRankMismatch) {
  GearSet s = GearSet::build(seedConfig(), MergePolicy::kZip);
  EXPECT_EQ(s.find(std::vector<Shape>{{2, 2}}), std::nullopt);
  EXPECT_EQ(gearError([&] {
              s.match(std::vector<Shape>{{2, 2}});
            }),
            "expected 2 input shapes, got 1");
  EXPECT_EQ(s.find(std::vector<Shape>{{2, 2}, {2, 2, 1}}), std::nullopt);
  EXPECT_EQ(gearError([&] {
              s.match(std::vector<Shape>{{2, 2}, {2, 2, 1}});
            }),
            "input 'x2': expected rank 2 ([-1, 2]), actual rank 3 ([2, 2, 1])");
  EXPECT_EQ(gearError([&] {
              s.match(std::vector<Shape>{{2, 2}, {kAnyDim, 2}});
            }),
            "input 'x2': shape [-1, 2] is not concrete");
}

TEST(GearMatch, EveryOneOfOneHundredGearsMatchesItself) {
  GearConfig cfg({{"a", {kAnyDim, 16}}, {"b", {kAnyDim}}});
  cfg.setDimGears("a", {{0, iota(1, 10)}});
  cfg.setDimGears("b", {{0, iota(100, 10)}});
  GearSet s = GearSet::build(cfg, MergePolicy::kProduct);
  ASSERT_EQ(s.size(), 100u);
  for (size_t g = 0; g < s.size(); ++g) EXPECT_EQ(s.match(s.shapes(g)), g);
  EXPECT_EQ(s.find(std::vector<Shape>{{5, 16}, {109}}), std::optional<size_t>(49));
}

// ---------------------------------------------------------------------------------------------
// Padding target

TEST(GearPad, PicksTheSmallestCoveringGear) {
  GearSet zip = GearSet::build(seedConfig(), MergePolicy::kZip);
  EXPECT_EQ(zip.padTarget(std::vector<Shape>{{3, 2}, {3, 2}}), 1u);
  EXPECT_EQ(zip.padTarget(std::vector<Shape>{{1, 2}, {1, 2}}), 0u);
  EXPECT_EQ(zip.padTarget(std::vector<Shape>{{2, 2}, {2, 2}}), 0u);  // exact
  EXPECT_EQ(zip.padTarget(std::vector<Shape>{{1, 2}, {3, 2}}), 1u);
  GearSet product = GearSet::build(seedConfig(), MergePolicy::kProduct);
  // (4, 2) holds 12 elements, (4, 4) 16: the cheaper one wins.
  EXPECT_EQ(product.padTarget(std::vector<Shape>{{3, 2}, {1, 2}}), 2u);
  EXPECT_EQ(product.padTarget(std::vector<Shape>{{0, 2}, {0, 2}}), 0u);
}

TEST(GearPad, TiesGoToTheEarlierGear) {
  GearConfig cfg({{"x1", {kAnyDim, 1}}, {"x2", {kAnyDim, 1}}});
  cfg.setDimGears("x1", {{0, {2, 4}}});
  cfg.setDimGears("x2", {{0, {4, 2}}});
  GearSet s = GearSet::build(cfg, MergePolicy::kZip);
  EXPECT_EQ(s.totalElements(0), s.totalElements(1));
  EXPECT_EQ(s.padTarget(std::vector<Shape>{{1, 1}, {1, 1}}), 0u);
  EXPECT_EQ(s.padTarget(std::vector<Shape>{{3, 1}, {1, 1}}), 1u);
}

TEST(GearPad, ErrorsNameTheUncoveredDim) {
  GearSet s = GearSet::build(seedConfig(), MergePolicy::kZip);
  EXPECT_EQ(gearError([&] {
              s.padTarget(std::vector<Shape>{{5, 2}, {1, 2}});
            }),
            "cannot pad to a gear: input 'x1' dim 0 = 5 exceeds the largest gear value 4 (gears "
            "[2, 4])");
  EXPECT_EQ(gearError([&] {
              s.padTarget(std::vector<Shape>{{1, 3}, {1, 2}});
            }),
            "cannot pad to a gear: input 'x1' dim 1: expected 2, actual 3 (not a geared dim)");
  GearConfig cfg({{"x1", {kAnyDim}}, {"x2", {kAnyDim}}});
  cfg.setDimGears("x1", {{0, {2, 8}}});
  cfg.setDimGears("x2", {{0, {8, 2}}});
  GearSet crossed = GearSet::build(cfg, MergePolicy::kZip);
  EXPECT_EQ(gearError([&] {
              crossed.padTarget(std::vector<Shape>{{3}, {3}});
            }),
            "cannot pad to a gear: no gear covers input shapes x1=[3] x2=[3] (every geared dim "
            "must be >= the actual size; gears: (2, 8), (8, 2))");
}

// ---------------------------------------------------------------------------------------------
// Padding legality

// An i64 index constant of `n` entries; the analysis looks at shapes only, never at values.
Tensor indexTensor(int64_t n) {
  return Tensor(DType::kI64, {n});
}

TEST(PaddingAnalysis, AddOfTwoPaddedInputsAndBroadcasts) {
  GraphBuilder b("add");
  auto x1 = b.input("x1", DType::kF32, {kAnyDim, 4});
  auto x2 = b.input("x2", DType::kF32, {kAnyDim, 4});
  auto bias = b.input("bias", DType::kF32, {4});
  auto row = b.input("row", DType::kF32, {1, 4});
  auto s = b.add(b.add(x1, x2, "s0"), bias, "s");
  b.output(b.add(s, row, "t"));
  b.output(bias);
  Graph g = b.build();
  const std::vector<InputDim> padded{{0, 0}, {1, 0}};
  PaddingPlan plan = analyzePadding(g, padded);
  ASSERT_EQ(plan.outputs.size(), 2u);
  ASSERT_EQ(plan.outputs[0].size(), 1u);
  EXPECT_EQ(plan.outputs[0][0].dim, 0);
  EXPECT_EQ(plan.outputs[0][0].origin, (InputDim{0, 0}));
  EXPECT_TRUE(plan.outputs[1].empty());
  ASSERT_EQ(plan.sameRealSize.size(), 1u);
  EXPECT_EQ(plan.sameRealSize[0].first, (InputDim{0, 0}));
  EXPECT_EQ(plan.sameRealSize[0].second, (InputDim{1, 0}));
  checkRealSizes(g, plan, std::vector<Shape>{{3, 4}, {3, 4}, {4}, {1, 4}});
  // A real size of 1 would broadcast in the unpadded graph; padding would hide that.
  EXPECT_EQ(gearError([&] {
              checkRealSizes(g, plan, std::vector<Shape>{{1, 4}, {3, 4}, {4}, {1, 4}});
            }),
            "cannot pad: input 'x1' dim 0 is 1 but input 'x2' dim 0 is 3; padding both to one "
            "gear would hide that the graph needs them equal (or broadcasts a 1)");
}

TEST(PaddingAnalysis, AddAgainstARealDimIsRefused) {
  GraphBuilder b("add");
  auto x = b.input("x", DType::kF32, {kAnyDim, 4});
  auto w = b.input("w", DType::kF32, {4, 4});
  b.output(b.add(x, w, "s"));
  Graph g = b.build();
  const std::vector<InputDim> padded{{0, 0}};
  EXPECT_EQ(gearError([&] { analyzePadding(g, padded); }),
            "<builder>: op %s = add: cannot pad input 'x' dim 0: input 0 (%x) dim 0 is padded "
            "but it meets input 1 (%w) dim 0 (size 4), which is not; padded positions would "
            "combine with real ones");
}

TEST(PaddingAnalysis, MatMulMAndNCarryOverAndKPaddedOnBothSidesIsLegal) {
  GraphBuilder b("mm");
  auto a = b.input("a", DType::kF32, {kAnyDim, kAnyDim});
  auto w = b.input("w", DType::kF32, {kAnyDim, kAnyDim});
  auto m = b.matmul(a, w, "m");
  b.output(m);
  Graph g = b.build();
  // M (a dim 0), K (a dim 1 and w dim 0) and N (w dim 1) all padded.
  const std::vector<InputDim> padded{{0, 0}, {0, 1}, {1, 0}, {1, 1}};
  PaddingPlan plan = analyzePadding(g, padded);
  ASSERT_EQ(plan.outputs[0].size(), 2u);
  EXPECT_EQ(plan.outputs[0][0].origin, (InputDim{0, 0}));
  EXPECT_EQ(plan.outputs[0][1].origin, (InputDim{1, 1}));
  ASSERT_EQ(plan.sameRealSize.size(), 1u);  // K: a dim 1 ~ w dim 0
  EXPECT_EQ(plan.sameRealSize[0].first, (InputDim{0, 1}));
  EXPECT_EQ(plan.sameRealSize[0].second, (InputDim{1, 0}));
  // Only M: the output is padded on M alone.
  const std::vector<InputDim> onlyM{{0, 0}};
  PaddingPlan m1 = analyzePadding(g, onlyM);
  ASSERT_EQ(m1.outputs[0].size(), 1u);
  EXPECT_EQ(m1.outputs[0][0].dim, 0);
}

TEST(PaddingAnalysis, MatMulKPaddedOnOneSideIsRefused) {
  GraphBuilder b("mm");
  auto a = b.input("a", DType::kF32, {2, kAnyDim});
  auto w = b.input("w", DType::kF32, {4, 3});
  b.output(b.matmul(a, w, "m"));
  Graph g = b.build();
  const std::vector<InputDim> padded{{0, 1}};
  EXPECT_EQ(gearError([&] { analyzePadding(g, padded); }),
            "<builder>: op %m = matmul: cannot pad input 'a' dim 1: the contraction dim K is "
            "padded in input 0 (%a) but not in input 1 (%w); padded K would be multiplied by "
            "real values");
}

TEST(PaddingAnalysis, MatMulKWhosePaddingIsNoLongerZeroIsRefused) {
  GraphBuilder b("mm");
  auto a = b.input("a", DType::kF32, {2, kAnyDim});
  auto col = b.input("col", DType::kF32, {2, 1});
  auto w = b.input("w", DType::kF32, {kAnyDim, 3});
  auto row = b.input("row", DType::kF32, {1, 3});
  auto s = b.add(a, col, "s");  // broadcasts col over the padded K positions
  auto t = b.add(w, row, "t");  // and row over w's
  b.output(b.matmul(s, t, "m"));
  Graph g = b.build();
  const std::vector<InputDim> padded{{0, 1}, {2, 0}};
  EXPECT_EQ(gearError([&] { analyzePadding(g, padded); }),
            "<builder>: op %m = matmul: cannot pad input 'a' dim 1: the contraction dim K is "
            "padded in both inputs but neither's padding is zero against a finite other (input 0 "
            "(%s) holds finite values, input 1 (%t) holds finite values: a broadcast add or an "
            "index wrote into it), so it would add to the real sums");
  // One side's zeros are enough: s's padding times w's zeros adds nothing.
  GraphBuilder b1("mm1");
  auto a1 = b1.input("a", DType::kF32, {2, kAnyDim});
  auto col1 = b1.input("col", DType::kF32, {2, 1});
  auto w1 = b1.input("w", DType::kF32, {kAnyDim, 3});
  b1.output(b1.matmul(b1.add(a1, col1), w1, "m"));
  Graph g1 = b1.build();
  EXPECT_TRUE(analyzePadding(g1, padded).outputs[0].empty());
  // Without the broadcast the same K padding is legal.
  GraphBuilder b2("mm2");
  auto a2 = b2.input("a", DType::kF32, {2, kAnyDim});
  auto c2 = b2.input("c", DType::kF32, {2, kAnyDim});
  auto w2 = b2.input("w", DType::kF32, {kAnyDim, 3});
  b2.output(b2.matmul(b2.add(a2, c2), w2, "m"));
  Graph g2 = b2.build();
  const std::vector<InputDim> padded2{{0, 1}, {1, 1}, {2, 0}};
  PaddingPlan plan = analyzePadding(g2, padded2);
  EXPECT_TRUE(plan.outputs[0].empty());
  EXPECT_EQ(plan.sameRealSize.size(), 2u);
}

TEST(PaddingAnalysis, BatchedMatMulBatchDimsFollowBroadcasting) {
  GraphBuilder b("bmm");
  auto x = b.input("x", DType::kF32, {kAnyDim, 3, 4});
  auto w = b.input("w", DType::kF32, {4, 5});
  auto y = b.input("y", DType::kF32, {2, 4, 5});
  b.output(b.matmul(x, w, "m"));
  auto bad = b.matmul(x, y, "bad");
  (void)bad;
  b.output(bad);
  Graph g = b.build();
  const std::vector<InputDim> padded{{0, 0}};
  EXPECT_EQ(gearError([&] { analyzePadding(g, padded); }),
            "<builder>: op %bad = matmul: cannot pad input 'x' dim 0: input 0 (%x) dim 0 is "
            "padded but it meets input 1 (%y) dim 0 (size 2), which is not; padded positions "
            "would combine with real ones");
}

TEST(PaddingAnalysis, BatchedMatMulWithABroadcastOperandIsLegal) {
  GraphBuilder b("bmm");
  auto x = b.input("x", DType::kF32, {kAnyDim, 3, 4});
  auto w = b.input("w", DType::kF32, {1, 4, 5});
  b.output(b.matmul(x, w, "m"));
  Graph g = b.build();
  const std::vector<InputDim> padded{{0, 0}};
  PaddingPlan plan = analyzePadding(g, padded);
  ASSERT_EQ(plan.outputs[0].size(), 1u);
  EXPECT_EQ(plan.outputs[0][0].dim, 0);
}

TEST(PaddingAnalysis, IndexSelectOnAnotherDimPropagates) {
  GraphBuilder b("is");
  auto x = b.input("x", DType::kF32, {kAnyDim, 4});
  auto idx = b.constant(indexTensor(3), "idx");
  b.output(b.indexSelect(x, idx, 1, "o"));
  Graph g = b.build();
  const std::vector<InputDim> padded{{0, 0}};
  PaddingPlan plan = analyzePadding(g, padded);
  ASSERT_EQ(plan.outputs[0].size(), 1u);
  EXPECT_EQ(plan.outputs[0][0].dim, 0);
}

TEST(PaddingAnalysis, IndexSelectAlongAPaddedDimIsRefused) {
  GraphBuilder b("is");
  auto x = b.input("x", DType::kF32, {kAnyDim, 4});
  auto idx = b.constant(indexTensor(3), "idx");
  b.output(b.indexSelect(x, idx, -2, "o"));
  Graph g = b.build();
  const std::vector<InputDim> padded{{0, 0}};
  EXPECT_EQ(gearError([&] { analyzePadding(g, padded); }),
            "<builder>: op %o = index_select: cannot pad input 'x' dim 0: input 0 (%x) is read by "
            "index along dim 0, which is padded; an index >= the real size would read padding "
            "instead of failing");
}

TEST(PaddingAnalysis, APaddedIndexPadsTheOutputButNotWithZeros) {
  GraphBuilder b("is");
  auto table = b.input("table", DType::kF32, {10, 4});
  auto ids = b.input("ids", DType::kI64, {kAnyDim});
  auto w = b.input("w", DType::kF32, {kAnyDim, 3});
  auto rows = b.indexSelect(table, ids, 0, "rows");
  b.output(rows);
  Graph g = b.build();
  const std::vector<InputDim> padded{{1, 0}};
  PaddingPlan plan = analyzePadding(g, padded);
  ASSERT_EQ(plan.outputs[0].size(), 1u);
  EXPECT_EQ(plan.outputs[0][0].origin, (InputDim{1, 0}));
  // The gathered padding holds row 0, so it cannot be a padded K.
  GraphBuilder b2("is2");
  auto t2 = b2.input("table", DType::kF32, {4, 10});
  auto ids2 = b2.input("ids", DType::kI64, {kAnyDim});
  auto w2 = b2.input("w", DType::kF32, {kAnyDim, 3});
  auto half = b2.op(OpKind::kSigmoid, {w2}, {}, "half");  // sigmoid(0) = 0.5 on w's padding
  b2.output(b2.matmul(b2.indexSelect(t2, ids2, 1, "cols"), half, "m"));
  Graph g2 = b2.build();
  const std::vector<InputDim> padded2{{1, 0}, {2, 0}};
  const std::string msg = gearError([&] { analyzePadding(g2, padded2); });
  EXPECT_NE(msg.find("op %m = matmul: cannot pad input 'ids' dim 0"), std::string::npos) << msg;
  (void)w;
}

TEST(PaddingAnalysis, CatAlongAPaddedDimIsRefused) {
  GraphBuilder b("cat");
  auto x = b.input("x", DType::kF32, {kAnyDim, 2});
  auto y = b.input("y", DType::kF32, {3, 2});
  b.output(b.cat({x, y}, 0, "c"));
  Graph g = b.build();
  const std::vector<InputDim> padded{{0, 0}};
  EXPECT_EQ(gearError([&] { analyzePadding(g, padded); }),
            "<builder>: op %c = cat: cannot pad input 'x' dim 0: input 0 (%x) is padded along "
            "dim 0, and the cat along dim 0 would put padded rows between real rows (only a last "
            "input after static-sized ones may be padded there)");
}

TEST(PaddingAnalysis, CatWithThePaddedInputLastKeepsThePaddingAtTheEnd) {
  // [3 static rows; x]: the padding ends the output, whose real size is 3 + x's.
  GraphBuilder b("cat");
  auto x = b.input("x", DType::kF32, {kAnyDim, 2});
  auto y = b.input("y", DType::kF32, {3, 2});
  auto z = b.input("z", DType::kF32, {kAnyDim, 2});
  auto c = b.cat({y, x}, 0, "c");
  b.output(c);
  b.output(b.add(c, b.cat({y, z}, 0, "d"), "s"));  // same offset: tied, checked at run time
  Graph g = b.build();
  const std::vector<InputDim> padded{{0, 0}, {2, 0}};
  const PaddingPlan plan = analyzePadding(g, padded);
  ASSERT_EQ(plan.outputs[0].size(), 1u);
  EXPECT_EQ(plan.outputs[0][0].origin, (InputDim{0, 0}));
  EXPECT_EQ(plan.outputs[0][0].offset, 3);
  ASSERT_EQ(plan.sameRealSize.size(), 1u);
  // Different offsets cannot be tied: [y; x] + [x; y] would need x + 3 = 3 + x with the
  // padding in different places.
  GraphBuilder b2("cat2");
  auto x2 = b2.input("x", DType::kF32, {kAnyDim, 2});
  auto y2 = b2.input("y", DType::kF32, {3, 2});
  auto w2 = b2.input("w", DType::kF32, {kAnyDim, 2});
  auto one = b2.input("one", DType::kF32, {1, 2});
  b2.output(b2.add(b2.cat({y2, x2}, 0), b2.cat({one, w2}, 0), "s"));
  Graph g2 = b2.build();
  const std::vector<InputDim> padded2{{0, 0}, {2, 0}};
  EXPECT_NE(gearError([&] {
              analyzePadding(g2, padded2);
            }).find("padded dims of real sizes x+3 and w+1 meet here"),
            std::string::npos);
}

TEST(PaddingAnalysis, CatOnAnotherDimNeedsInputsPaddedAlike) {
  GraphBuilder b("cat");
  auto x = b.input("x", DType::kF32, {kAnyDim, 2});
  auto y = b.input("y", DType::kF32, {kAnyDim, 3});
  auto z = b.input("z", DType::kF32, {kAnyDim, 1});
  b.output(b.cat({x, y}, 1, "c"));
  b.output(b.cat({x, z}, 1, "d"));
  Graph g = b.build();
  const std::vector<InputDim> both{{0, 0}, {1, 0}, {2, 0}};
  PaddingPlan plan = analyzePadding(g, both);
  ASSERT_EQ(plan.outputs[0].size(), 1u);
  EXPECT_EQ(plan.outputs[0][0].origin, (InputDim{0, 0}));
  const std::vector<InputDim> mixed{{0, 0}, {1, 0}};
  EXPECT_EQ(gearError([&] { analyzePadding(g, mixed); }),
            "<builder>: op %d = cat: cannot pad input 'x' dim 0: input 0 (%x) dim 0 is padded but "
            "input 1 (%z) dim 0 is not; cat needs its inputs padded alike");
}

TEST(PaddingAnalysis, CatGatherIsCatPlusIndexSelect) {
  GraphBuilder b("cg");
  auto x = b.input("x", DType::kF32, {kAnyDim, 2});
  auto y = b.input("y", DType::kF32, {kAnyDim, 2});
  auto idx = b.constant(indexTensor(2), "idx");
  b.output(b.op(OpKind::kCatGather, {x, y, idx}, Attrs{1}, "g1"));
  Graph g = b.build();
  const std::vector<InputDim> rows{{0, 0}, {1, 0}};
  PaddingPlan plan = analyzePadding(g, rows);
  ASSERT_EQ(plan.outputs[0].size(), 1u);
  EXPECT_EQ(plan.outputs[0][0].dim, 0);

  GraphBuilder b2("cg0");
  auto x2 = b2.input("x", DType::kF32, {kAnyDim, 2});
  auto y2 = b2.input("y", DType::kF32, {kAnyDim, 2});
  auto idx2 = b2.constant(indexTensor(2), "idx");
  b2.output(b2.op(OpKind::kCatGather, {x2, y2, idx2}, Attrs{0}, "g0"));
  Graph g2 = b2.build();
  const std::vector<InputDim> second{{1, 0}};
  EXPECT_EQ(gearError([&] { analyzePadding(g2, second); }),
            "<builder>: op %g0 = cat_gather: cannot pad input 'y' dim 0: input 1 (%y) is read by "
            "index along dim 0, which is padded; an index >= the real size would read padding "
            "instead of failing");
}

TEST(PaddingAnalysis, RejectsDimsTheGraphDoesNotHave) {
  GraphBuilder b("g");
  auto x = b.input("x", DType::kF32, {kAnyDim});
  b.output(x);
  Graph g = b.build();
  const std::vector<InputDim> badDim{{0, 1}};
  EXPECT_EQ(gearError([&] { analyzePadding(g, badDim); }),
            "cannot pad input 'x' dim 1: it has rank 1");
  const std::vector<InputDim> badInput{{3, 0}};
  EXPECT_EQ(gearError([&] { analyzePadding(g, badInput); }), "graph g has no input 3 to pad");
  // A padded input returned as is: sliced back.
  const std::vector<InputDim> ok{{0, 0}};
  EXPECT_EQ(analyzePadding(g, ok).outputs[0].size(), 1u);
}

TEST(PaddingAnalysis, AGraphEditedIntoAnInvalidStateIsAShapeError) {
  GraphBuilder b("g");
  auto x = b.input("x", DType::kF32, {kAnyDim, 2});
  auto idx = b.constant(indexTensor(2), "idx");
  b.output(b.indexSelect(x, idx, 1, "o"));
  Graph g = b.build();
  g.nodes.back().attrs.dim.reset();
  const std::vector<InputDim> padded{{0, 0}};
  try {
    analyzePadding(g, padded);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kShape) << e.what();
    EXPECT_NE(std::string(e.what()).find("missing attribute dim"), std::string::npos) << e.what();
  }
}

TEST(PaddingAnalysis, GearSetToPlanEndToEnd) {
  GraphBuilder b("seed");
  auto x1 = b.input("x1", DType::kF32, {kAnyDim, 2});
  auto x2 = b.input("x2", DType::kF32, {kAnyDim, 2});
  b.output(b.add(x1, x2, "s"));
  Graph g = b.build();
  GearConfig cfg;
  setDimGears(cfg, g, "x1", {{0, {2, 4}}});
  setDimGears(cfg, g, "x2", {{0, {2, 4}}});
  GearSet gears = GearSet::build(cfg, MergePolicy::kZip);
  const std::vector<InputDim> dims = gearedInputDims(gears);
  EXPECT_EQ(dims, (std::vector<InputDim>{{0, 0}, {1, 0}}));
  PaddingPlan plan = analyzePadding(g, dims);
  const std::vector<Shape> actual{{3, 2}, {3, 2}};
  checkRealSizes(g, plan, actual);
  const size_t target = gears.padTarget(actual);
  EXPECT_EQ(target, 1u);
  EXPECT_DOUBLE_EQ(paddingWaste(gears.shapes(target), actual), 4.0 / 12.0);
}

TEST(PaddingAnalysis, WasteOfExactAndEmptyRuns) {
  const std::vector<Shape> a{{2, 2}};
  EXPECT_DOUBLE_EQ(paddingWaste(a, a), 0.0);
  const std::vector<Shape> empty{{0, 2}};
  EXPECT_TRUE(std::isinf(paddingWaste(a, empty)));
  EXPECT_DOUBLE_EQ(paddingWaste(empty, empty), 0.0);
}

}  // namespace
}  // namespace gearbox
