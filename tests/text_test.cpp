#include "graph/text.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "expect_error.h"
#include "graph/error.h"
#include "graph/file_io.h"
#include "graph/npy.h"
#include "tests/graph_equal.h"
#include "tests/temp_dir.h"

namespace gearbox {
namespace {

using testing_util::expectSameGraph;
using testing_util::TempDir;

constexpr const char* kExample = R"(# every op once
graph demo(%x: f32[B, 4], %w: f32[4, 3]) {
  %s = add(%x, %x)
  %m = matmul(%s, %w)
  %c = cat(%m, %s, dim=1)
  %p = const i64[7] [6, 5, 4, 3, 2, 1, 0]
  %o = index_select(%c, %p, dim=1)
  return %o
}
)";

using testing_util::errorOf;

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// Parses, prints, re-parses and re-prints: the two graphs must be identical and the two
// printouts byte-identical. Returns the first graph.
Graph roundTrip(const std::string& text, const std::string& file = "<string>") {
  Graph g = parseGraph(text, file);
  const std::string printed = printGraph(g);
  Graph again = parseGraph(printed, file);
  expectSameGraph(g, again);
  EXPECT_EQ(printGraph(again), printed);
  return g;
}

// ---------------------------------------------------------------------------------------------
// Accepted forms and round trips.

TEST(Text, VerbatimExamplePrintsBackWithoutTheComment) {
  const Graph g = roundTrip(kExample, "demo.gbx");
  const std::string text(kExample);
  EXPECT_EQ(printGraph(g), text.substr(text.find('\n') + 1));

  EXPECT_EQ(g.name, "demo");
  EXPECT_EQ(g.sourceFile, "demo.gbx");
  ASSERT_EQ(g.inputs.size(), 2u);
  EXPECT_EQ(g.value(g.inputs[0]).name, "x");
  const int64_t B = symbolDim("B");
  EXPECT_EQ(g.value(g.inputs[0]).type, (TensorType{DType::kF32, {B, 4}}));
  ASSERT_EQ(g.outputs.size(), 1u);
  EXPECT_EQ(g.value(g.outputs[0]).name, "o");
  EXPECT_EQ(g.value(g.outputs[0]).type, (TensorType{DType::kF32, {B, 7}}));
  EXPECT_EQ(g.value(g.findValue("c")).type, (TensorType{DType::kF32, {B, 7}}));

  ASSERT_EQ(g.nodes.size(), 5u);
  const OpKind kinds[] = {OpKind::kAdd, OpKind::kMatMul, OpKind::kCat, OpKind::kConst,
                          OpKind::kIndexSelect};
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(g.nodes[i].kind, kinds[i]);
    EXPECT_EQ(g.nodes[i].loc.file, "demo.gbx");
    EXPECT_EQ(g.nodes[i].loc.line, 3 + i) << "node " << i;
  }
  const Tensor& p = *g.nodes[3].constant;
  ASSERT_EQ(p.dtype(), DType::kI64);
  for (int i = 0; i < 7; ++i) EXPECT_EQ(p.as<int64_t>()[i], 6 - i);
  EXPECT_EQ(g.nodes[2].attrs.dim, 1);
}

TEST(Text, AnonymousDimsAndMultipleReturns) {
  const Graph g = roundTrip(R"(graph dyn(%a: f32[-1, 2], %b: f32[-1, 2]) {
  %s = add(%a, %b)
  %t = cat(%s, %a, dim=0)
  return %t, %s, %a
}
)");
  EXPECT_EQ(g.value(g.inputs[0]).type.shape, Shape({kAnyDim, 2}));
  ASSERT_EQ(g.outputs.size(), 3u);
  EXPECT_EQ(g.value(g.outputs[0]).name, "t");
  EXPECT_EQ(g.value(g.outputs[1]).name, "s");
  EXPECT_EQ(g.outputs[2], g.inputs[0]);
  EXPECT_TRUE(contains(printGraph(g), "  return %t, %s, %a\n"));
  EXPECT_TRUE(contains(printGraph(g), "(%a: f32[-1, 2], %b: f32[-1, 2])"));
}

TEST(Text, ScalarsAndScalarConstants) {
  const Graph g = roundTrip(R"(graph s(%x: f32[], %v: f32[3]) {
  %k = const f32[] [2.5]
  %y = add(%x, %k)
  %z = add(%v, %y)
  return %z
}
)");
  EXPECT_EQ(g.value(g.findValue("y")).type, (TensorType{DType::kF32, Shape::scalar()}));
  EXPECT_EQ(g.value(g.findValue("z")).type, (TensorType{DType::kF32, {3}}));
  EXPECT_EQ(g.nodes[0].constant->as<float>()[0], 2.5f);
  EXPECT_TRUE(contains(printGraph(g), "(%x: f32[], %v: f32[3])"));
  EXPECT_TRUE(contains(printGraph(g), "%k = const f32[] [2.5]\n"));
}

TEST(Text, NegativeDimAttributesAndCatGather) {
  const Graph g = roundTrip(R"(graph cg(%a: f32[2, 3], %b: f32[2, 5]) {
  %idx = const i32[4] [7, 0, 3, 3]
  %g = cat_gather(%a, %b, %idx, dim=-1)
  %h = index_select(%g, %idx, dim=-1)
  return %h
}
)");
  EXPECT_EQ(g.nodes[1].kind, OpKind::kCatGather);
  EXPECT_EQ(g.nodes[1].attrs.dim, -1);
  EXPECT_EQ(g.value(g.findValue("g")).type.shape, Shape({2, 4}));
  EXPECT_TRUE(contains(printGraph(g), "%g = cat_gather(%a, %b, %idx, dim=-1)\n"));
}

std::string body(const std::string& stmt);  // below: a one-statement model

TEST(Text, NewOpsAndTheirAttributesRoundTrip) {
  const Graph g = roundTrip(R"(graph v(%x: f32[N, 16, 49], %m: f32[N, 1, 1]) {
  %g = reshape(%x, shape=[N, 2, 8, 49])
  %t = transpose(%g, perm=[0, 2, 1, 3])
  %r = reshape(%t, shape=[N, -1, 49])
  %p = relu(%r)
  %y = mul(%p, %m)
  %v = const f32[49] [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]
  %s = matmul(%y, %v)
  return %s
}
)");
  const std::string text = printGraph(g);
  EXPECT_TRUE(contains(text, "%g = reshape(%x, shape=[N, 2, 8, 49])\n")) << text;
  EXPECT_TRUE(contains(text, "%t = transpose(%g, perm=[0, 2, 1, 3])\n")) << text;
  EXPECT_TRUE(contains(text, "%r = reshape(%t, shape=[N, -1, 49])\n")) << text;
  EXPECT_TRUE(contains(text, "%p = relu(%r)\n")) << text;
  EXPECT_TRUE(contains(text, "%y = mul(%p, %m)\n")) << text;
  const int64_t n = symbolDim("N");
  EXPECT_EQ(g.value(g.findValue("t")).type.shape, Shape({n, 8, 2, 49}));
  // The -1 cancels N against the input's N: 8 * 2 = 16 is known before any shape is.
  EXPECT_EQ(g.value(g.findValue("r")).type.shape, Shape({n, 16, 49}));
  EXPECT_EQ(g.value(g.findValue("s")).type.shape, Shape({n, 16}));  // [.., K] x [K]
}

TEST(Text, NewOpAttributeErrorsPointAtTheToken) {
  auto err = [](const std::string& stmt) {
    return errorOf([&] { parseGraph(body(stmt), "m.gbx"); }, ErrorKind::kParse);
  };
  EXPECT_TRUE(
      contains(err("%y = reshape(%x)"), "', shape=[<dims>]' (reshape needs attribute shape)"));
  EXPECT_TRUE(contains(err("%y = transpose(%x, dim=1)"),
                       "attribute 'perm' (transpose has no attribute 'dim')"));
  EXPECT_TRUE(contains(err("%y = transpose(%x, perm=[0, -1])"), "an input dim index >= 0"));
  EXPECT_TRUE(contains(err("%y = relu(%x, dim=0)"), "relu takes no attributes"));
  EXPECT_TRUE(
      contains(err("%y = reshape(%x, shape=[6], shape=[6])"), "attribute shape is already given"));
  EXPECT_EQ(err("%y = reshape(%x)").rfind("m.gbx:2:", 0), 0u);
}

TEST(Text, CommentsBlankLinesAndFreeFormLayout) {
  const Graph g = roundTrip(R"(
# leading comment

graph c( # after the paren
    %x: f32[2], # one input
    %y: f32[2]) {   # trailing

  %s = add(%x,
           %y)  # a statement over two lines
  %k = const f32[2] [ # the literal
    1, 2]
  %t = add(%s, %k) return %t # return on the same line
}  # after the closing brace
# final comment without newline)");
  EXPECT_EQ(printGraph(g), R"(graph c(%x: f32[2], %y: f32[2]) {
  %s = add(%x, %y)
  %k = const f32[2] [1, 2]
  %t = add(%s, %k)
  return %t
}
)");
  EXPECT_EQ(g.nodes[0].loc.line, 8);
}

TEST(Text, InlineConstantsOfEveryDTypeReadBackExactly) {
  const Graph g = roundTrip(R"(graph k() {
  %f = const f32[2, 2, 3] [1.5, -2, 3e-2, 1e-45, 3.4028235e+38, -0, 0.1, 100, inf, -inf, 1e+16, 7]
  %i = const i32[2] [-2147483648, 2147483647]
  %l = const i64[3] [-9223372036854775808, 9223372036854775807, 0]
  return %f, %i, %l
}
)");
  const float* f = g.nodes[0].constant->as<float>();
  EXPECT_EQ(f[0], 1.5f);
  EXPECT_EQ(f[1], -2.0f);
  EXPECT_EQ(f[2], 3e-2f);
  EXPECT_EQ(f[3], std::numeric_limits<float>::denorm_min());
  EXPECT_EQ(f[4], std::numeric_limits<float>::max());
  EXPECT_TRUE(std::signbit(f[5]));
  EXPECT_EQ(f[8], std::numeric_limits<float>::infinity());
  EXPECT_EQ(f[9], -std::numeric_limits<float>::infinity());
  EXPECT_EQ(g.nodes[1].constant->as<int32_t>()[0], std::numeric_limits<int32_t>::min());
  EXPECT_EQ(g.nodes[2].constant->as<int64_t>()[1], std::numeric_limits<int64_t>::max());
  const std::string printed = printGraph(g);
  EXPECT_TRUE(contains(
      printed, "[1.5, -2, 0.03, 1e-45, 3.4028235e+38, -0, 0.1, 100, inf, -inf, 1e+16, 7]\n"))
      << printed;
  EXPECT_TRUE(contains(printed, "%i = const i32[2] [-2147483648, 2147483647]\n"));
}

TEST(Text, NanConstantsStayNan) {
  const Graph g = parseGraph("graph n() { %k = const f32[2] [nan, -nan] return %k }");
  EXPECT_TRUE(std::isnan(g.nodes[0].constant->as<float>()[0]));
  EXPECT_TRUE(std::isnan(g.nodes[0].constant->as<float>()[1]));
  const Graph again = parseGraph(printGraph(g));
  EXPECT_TRUE(std::isnan(again.nodes[0].constant->as<float>()[0]));
}

TEST(Text, BuilderGraphsPrintAndParseBack) {
  GraphBuilder b("built");
  const ValueId x = b.input("x", DType::kF32, {symbolDim("T"), 3});
  Tensor idx(DType::kI64, {2});
  idx.as<int64_t>()[0] = 2;
  const ValueId k = b.constant(idx);  // unnamed: the builder calls it %0
  const ValueId y = b.indexSelect(x, k, 1);
  b.output(y);
  const Graph g = b.build();
  const std::string printed = printGraph(g);
  EXPECT_EQ(printed, R"(graph built(%x: f32[T, 3]) {
  %0 = const i64[2] [2, 0]
  %1 = index_select(%x, %0, dim=1)
  return %1
}
)");
  expectSameGraph(g, parseGraph(printed));
}

TEST(Text, LargeInlineConstantsPrintInFull) {
  Tensor big = randomTensor(DType::kF32, {64, 33}, 5);
  GraphBuilder b("big");
  b.output(b.constant(big, "w"));
  const Graph g = b.build();
  const Graph back = roundTrip(printGraph(g));
  EXPECT_TRUE(back.nodes[0].constant->equals(big));
}

// ---------------------------------------------------------------------------------------------
// .npy constants, resolved relative to the model file.

TEST(Text, NpyConstantsAreReadRelativeToTheModel) {
  TempDir dir;
  std::filesystem::create_directory(dir.path() / "weights");
  const Tensor w = randomTensor(DType::kF32, {4, 3}, 1);
  const Tensor b = randomTensor(DType::kI32, {3}, 2);
  saveNpy(dir.file("weights/w.npy"), w);
  saveNpy(dir.file("b \"1\".npy"), b);
  const std::string model = dir.file("model.gbx");
  const std::string text = R"(graph npy(%x: f32[N, 4], %i: i32[3]) {
  %w = const f32[4, 3] "weights/w.npy"
  %b = const i32[3] "b \"1\".npy"
  %m = matmul(%x, %w)
  %j = add(%i, %b)
  return %m, %j
}
)";
  std::ofstream(model) << text;

  const Graph g = loadGraph(model);
  EXPECT_EQ(g.sourceFile, model);
  ASSERT_EQ(g.nodes.size(), 4u);
  EXPECT_EQ(g.nodes[0].constPath, "weights/w.npy");
  EXPECT_TRUE(g.nodes[0].constant->equals(w));
  EXPECT_EQ(g.nodes[1].constPath, "b \"1\".npy");
  EXPECT_TRUE(g.nodes[1].constant->equals(b));
  EXPECT_EQ(printGraph(g), text);
  // Re-parsing the printout against the same model path finds the same files.
  roundTrip(printGraph(g), model);
}

// The model for the npy error tests: %w is declared f32[4, 3] and read from w.npy.
constexpr const char* kNpyModel =
    "graph m(%x: f32[2, 4]) {\n  %w = const f32[4, 3] \"w.npy\"\n"
    "  return %w\n}\n";

struct NpyConstError {
  std::string name;
  std::string fileBytes;  // contents of w.npy; empty means: do not create it
  ErrorKind kind;
  std::vector<std::string> fragments;
};

void PrintTo(const NpyConstError& c, std::ostream* os) {
  *os << c.name;
}

class TextNpyErrors : public ::testing::TestWithParam<NpyConstError> {};

TEST_P(TextNpyErrors, NameTheModelLineAndTheFile) {
  const NpyConstError& c = GetParam();
  TempDir dir;
  if (!c.fileBytes.empty()) writeFileAtomic(dir.file("w.npy"), c.fileBytes);
  const std::string model = dir.file("m.gbx");
  writeFileAtomic(model, kNpyModel);
  const std::string msg = errorOf([&] { loadGraph(model); }, c.kind);
  // The "w.npy" string token sits on line 2, column 24.
  EXPECT_EQ(msg.rfind(model + ":2:24: ", 0), 0u) << msg;
  EXPECT_TRUE(contains(msg, "%w")) << msg;
  for (const std::string& f : c.fragments) EXPECT_TRUE(contains(msg, f)) << msg;
}

std::string withMagic(std::string bytes, char c) {
  bytes[5] = c;
  return bytes;
}

std::string fortranOrder(std::string bytes) {
  const size_t at = bytes.find("False");
  return bytes.replace(at, 5, "True ");
}

std::string withDescr(std::string bytes, const std::string& descr) {
  const size_t at = bytes.find("<f4");
  return bytes.replace(at, 3, descr);
}

std::vector<NpyConstError> npyConstErrors() {
  const std::string good = serializeNpy(Tensor(DType::kF32, {4, 3}));
  return {
      {"Missing", "", ErrorKind::kIo, {"w.npy", "No such file or directory"}},
      {"WrongMagic", withMagic(good, 'X'), ErrorKind::kIo, {"w.npy", "bad magic"}},
      {"FortranOrder", fortranOrder(good), ErrorKind::kIo, {"w.npy", "Fortran-order"}},
      {"Truncated",
       good.substr(0, good.size() - 4),
       ErrorKind::kIo,
       {"w.npy", "truncated data", "needs 48 bytes, got 44"}},
      {"UnsupportedDType",
       withDescr(good, "<f2"),
       ErrorKind::kIo,
       {"w.npy", "unsupported dtype '<f2'"}},
      {"DTypeMismatch",
       serializeNpy(Tensor(DType::kI32, {4, 3})),
       ErrorKind::kShape,
       {"declared f32[4, 3]", "\"w.npy\" holds i32[4, 3]"}},
      {"ShapeMismatch",
       serializeNpy(Tensor(DType::kF32, {3, 4})),
       ErrorKind::kShape,
       {"declared f32[4, 3]", "holds f32[3, 4]"}},
  };
}

INSTANTIATE_TEST_SUITE_P(BadFiles, TextNpyErrors, ::testing::ValuesIn(npyConstErrors()),
                         [](const auto& info) { return info.param.name; });

// ---------------------------------------------------------------------------------------------
// Parse errors: each case names the text, where the error must point (the first occurrence of
// `needle`, plus `offset` bytes; an empty needle means the end of the text) and a fragment of
// the "expected ..., got ..." message.

struct ParseErrorCase {
  std::string name;
  std::string text;
  std::string needle;
  std::string fragment;
  int offset = 0;
};

// A graph with inputs %x: f32[2, 3], %w: f32[3, 4], %i: i64[2] around one statement on line 2.
std::string body(const std::string& stmt) {
  return "graph g(%x: f32[2, 3], %w: f32[3, 4], %i: i64[2]) {\n  " + stmt + "\n  return %x\n}\n";
}

// 1-based line:col of byte `pos` in `text`.
std::string lineCol(const std::string& text, size_t pos) {
  int line = 1, col = 1;
  for (size_t i = 0; i < pos; ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return std::to_string(line) + ":" + std::to_string(col);
}

std::vector<ParseErrorCase> parseErrorCases() {
  return {
      {"MissingGraphKeyword", "grap g() {}", "grap", "expected 'graph', got 'grap'"},
      {"EmptyText", "# nothing\n", "", "expected 'graph', got end of file"},
      {"MissingGraphName", "graph (%x: f32[1]) {}", "(", "expected a graph name, got '('"},
      {"InputWithoutPercent", "graph g(x: f32[1]) {}", "x", "expected an input like %x"},
      {"MissingColon", "graph g(%x f32[1]) {}", "f32", "expected ':', got 'f32'"},
      {"UnknownDType", "graph g(%x: f16[1]) {}", "f16",
       "expected a dtype (f32, i32 or i64), got 'f16'"},
      {"MissingShape", "graph g(%x: f32) {}", ")", "expected '[', got ')'"},
      {"NegativeDim", "graph g(%x: f32[-2]) {}", "-2", "expected a dim (a size >= 0, -1"},
      {"MalformedDim", "graph g(%x: f32[4x]) {}", "4x", "got '4x'"},
      {"DimSeparator", "graph g(%x: f32[2 3]) {}", "2 3", "expected ',' or ']', got '3'", 2},
      {"RankAboveSix", "graph g(%x: f32[1, 1, 1, 1, 1, 1, 7]) {}", "7",
       "expected ']' (rank is at most 6), got '7'"},
      {"InputSeparator", "graph g(%x: f32[1] %y: f32[1]) {}", "%y",
       "expected ',' or ')', got '%y'"},
      {"DuplicateInput", "graph g(%x: f32[1], %x: f32[1]) {}", "%x: f32[1]) {}",
       "expected a new value name, got '%x' already defined at m.gbx:1"},
      {"MissingBrace", "graph g(%x: f32[1]) return %x }", "return", "expected '{', got 'return'"},
      {"StatementWithoutName", body("add(%x, %x)"), "add",
       "expected a statement (%name = ...) or 'return', got 'add'"},
      {"MissingReturn", "graph g(%x: f32[1]) {\n}\n", "}",
       "expected a statement (%name = ...) or 'return', got '}'"},
      {"MissingEquals", body("%y add(%x, %x)"), "add", "expected '=', got 'add'"},
      {"UnknownOp", body("%y = frobnicate(%x, %x)"), "frobnicate",
       "expected an op name (const, add, matmul, index_select, cat, cat_gather, reshape, "
       "transpose, mul, relu, conv2d"},
      {"OpNotAName", body("%y = 3(%x)"), "3(", "expected an op name"},
      {"MissingParen", body("%y = add %x, %x"), "%x,", "expected '(', got '%x'"},
      {"NoOperands", body("%y = add()"), "()", "expected a value like %x, got ')'", 1},
      {"UnknownValue", body("%y = add(%x, %q)"), "%q",
       "expected a graph input or a value defined above, got undefined '%q'"},
      {"Redefinition", body("%y = add(%x, %x)\n  %y = add(%x, %x)"), "%y = add(%x, %x)\n  %y",
       "expected a new value name, got '%y' already defined at m.gbx:2", 19},
      {"RedefineInput", body("%w = add(%x, %x)"), "%w = add",
       "expected a new value name, got '%w' already defined at m.gbx:1"},
      {"OperandSeparator", body("%y = add(%x %x)"), "%x)", "expected ',' or ')', got '%x'"},
      {"AttrOnAdd", body("%y = add(%x, %x, dim=1)"), "dim",
       "expected a value like %x (add takes no attributes), got 'dim'"},
      {"MissingDimAttr", body("%y = cat(%x, %x)"), "%x)",
       "expected ', dim=<int>' (cat needs attribute dim), got ')'", 2},
      {"WrongAttrName", body("%y = cat(%x, axis=1)"), "axis",
       "expected attribute 'dim' (cat has no attribute 'axis'), got 'axis'"},
      {"DuplicateDim", body("%y = cat(%x, dim=1, dim=0)"), "dim=0",
       "expected ')' (attribute dim is already given), got 'dim'"},
      {"ValueAfterAttr", body("%y = cat(%x, dim=1, %x)"), "%x)",
       "expected an attribute (values come before attributes), got '%x'"},
      {"AttrMissingEquals", body("%y = cat(%x, dim 1)"), "1)", "expected '=', got '1'"},
      {"AttrNotAnInteger", body("%y = cat(%x, dim=1.5)"), "1.5",
       "expected an integer dim like 1 or -1, got '1.5'"},
      {"AttrIsAName", body("%y = cat(%x, dim=one)"), "one", "expected an integer dim"},
      {"AttrNotAName", body("%y = cat(%x, [1])"), "[1])",
       "expected a value like %x or an attribute"},
      {"ReturnNothing", "graph g(%x: f32[1]) {\n  return\n}\n", "}",
       "expected a value like %x, got '}'"},
      {"ReturnUnknown", "graph g(%x: f32[1]) {\n  return %x, %z\n}\n", "%z",
       "expected a graph input or a value defined above, got undefined '%z'"},
      {"ReturnSeparator", "graph g(%x: f32[1]) {\n  return %x %x\n}\n", "%x\n}", "got '%x'"},
      {"MissingCloseBrace", "graph g(%x: f32[1]) {\n  return %x\n", "",
       "expected ',' or '}', got end of file"},
      {"TextAfterGraph", "graph g(%x: f32[1]) { return %x }\ngraph h() {}\n", "graph h",
       "expected end of file, got 'graph'"},
      {"StrayCharacter", body("%y = add(%x, %x) @"), "@", "expected a token, got '@'"},
      {"NonAsciiByte", body("%y = add(%x, %x) \xc3\xa9"), "\xc3",
       "expected a token, got byte 0xc3"},
      {"LoneMinus", body("%y = add(%x, - %x)"), "- ",
       "expected a value like %x or an attribute like dim=1, got '-'"},
      {"EmptyValueName", body("% = add(%x, %x)"), "% =", "expected a value name after '%', got ' '",
       1},
      {"ConstViaCall", body("%y = const(%x)"), "(%x)",
       "expected a dtype (f32, i32 or i64), got '('"},
      {"ConstDynamicType", body("%y = const f32[B] [1]"), "f32[B]",
       "expected a static type for const (no -1 or symbols), got f32[B]"},
      {"ConstAnyDim", body("%y = const f32[-1] [1]"), "f32[-1]", "expected a static type"},
      {"ConstWithoutBody", body("%y = const f32[1] 5"), "5",
       "expected an inline literal [...] or a \"file.npy\" path, got '5'"},
      {"ConstTooFewValues", body("%y = const i64[3] [1, 2]"), "[1, 2]",
       "expected 3 values for const i64[3], got 2"},
      {"ConstTooManyValues", body("%y = const f32[2, 2] [1, 2, 3, 4, 5]"), "[1, 2, 3",
       "expected 4 values for const f32[2, 2], got 5"},
      {"ConstScalarEmpty", body("%y = const f32[] []"), "[]",
       "expected 1 values for const f32[], got 0", 3},
      {"ConstHugeType", body("%y = const f32[4294967296, 4294967296, 4294967296] [1]"), "[1]",
       "expected more values for const f32[4294967296, 4294967296, 4294967296], got 1"},
      {"ConstMissingComma", body("%y = const f32[2] [1 2]"), "1 2]", "expected ',' or ']', got '2'",
       2},
      {"ConstFloatGarbage", body("%y = const f32[1] [abc]"), "abc",
       "expected an f32 number, got 'abc'"},
      {"ConstFloatMalformed", body("%y = const f32[1] [1.5.2]"), "1.5.2",
       "expected an f32 number, got '1.5.2'"},
      {"ConstFloatOutOfRange", body("%y = const f32[1] [1e39]"), "1e39",
       "expected an f32 number in range, got '1e39'"},
      {"ConstIntFraction", body("%y = const i64[1] [1.5]"), "1.5",
       "expected an i64 integer, got '1.5'"},
      {"ConstI32OutOfRange", body("%y = const i32[2] [1, 3000000000]"), "3000000000",
       "expected an i32 integer in range, got '3000000000'"},
      {"ConstI64OutOfRange", body("%y = const i64[1] [9223372036854775808]"), "9223",
       "expected an i64 integer in range"},
      {"ConstValueIsAValue", body("%y = const i32[1] [%x]"), "%x]",
       "expected an i32 integer, got '%x'"},
      {"UnterminatedString", body("%y = const f32[1] \"w.npy"), "\n  return",
       "expected a closing '\"', got end of line"},
      {"UnterminatedStringAtEof", "graph g() {\n  %y = const f32[1] \"w.npy", "",
       "expected a closing '\"', got end of file"},
      {"BadEscape", body("%y = const f32[1] \"a\\n.npy\""), "\\n", "expected an escape"},
  };
}

// gtest prints parameters on failure; the name is enough to find the case.
void PrintTo(const ParseErrorCase& c, std::ostream* os) {
  *os << c.name;
}

class TextParseErrors : public ::testing::TestWithParam<ParseErrorCase> {};

TEST_P(TextParseErrors, PointAtTheOffendingToken) {
  const ParseErrorCase& c = GetParam();
  const size_t at = c.needle.empty() ? c.text.size() : c.text.find(c.needle);
  ASSERT_NE(at, std::string::npos) << "bad test: needle not in text";
  const std::string where = "m.gbx:" + lineCol(c.text, at + c.offset) + ": ";
  const std::string msg = errorOf([&] { parseGraph(c.text, "m.gbx"); }, ErrorKind::kParse);
  EXPECT_EQ(msg.rfind(where, 0), 0u) << msg << "\n(expected it to start with " << where << ")";
  EXPECT_TRUE(contains(msg, c.fragment)) << msg;
  EXPECT_TRUE(contains(msg, "expected")) << msg;
}

INSTANTIATE_TEST_SUITE_P(EveryPath, TextParseErrors, ::testing::ValuesIn(parseErrorCases()),
                         [](const auto& info) { return info.param.name; });

// ---------------------------------------------------------------------------------------------
// Shape errors come from inference and name the model line, the op and the input.

struct ShapeErrorCase {
  std::string name;
  std::string stmt;
  std::vector<std::string> fragments;
};

void PrintTo(const ShapeErrorCase& c, std::ostream* os) {
  *os << c.name;
}

class TextShapeErrors : public ::testing::TestWithParam<ShapeErrorCase> {};

TEST_P(TextShapeErrors, NameTheLineOpAndInput) {
  const ShapeErrorCase& c = GetParam();
  const std::string msg = errorOf([&] { parseGraph(body(c.stmt), "m.gbx"); }, ErrorKind::kShape);
  EXPECT_EQ(msg.rfind("m.gbx:2: op %y = ", 0), 0u) << msg;
  for (const std::string& f : c.fragments) EXPECT_TRUE(contains(msg, f)) << msg;
}

std::vector<ShapeErrorCase> shapeErrorCases() {
  return {
      {"MatMulContraction",
       "%y = matmul(%x, %x)",
       {"matmul", "input 0 (%x) dim 1 is 3", "input 1 (%x) dim 0 is 2"}},
      {"AddBroadcast", "%y = add(%x, %w)", {"add", "input 0 (%x)", "input 1 (%w)", "broadcast"}},
      {"AddDType", "%y = add(%x, %i)", {"add", "input 1 (%i) is i64"}},
      {"AddArity", "%y = add(%x)", {"add", "expects 2 inputs, got 1"}},
      {"IndexSelectDim",
       "%y = index_select(%x, %i, dim=2)",
       {"index_select", "dim 2 is out of range for rank 2", "input 0 (%x)"}},
      {"IndexSelectIndexDType",
       "%y = index_select(%x, %x, dim=0)",
       {"index_select", "input 1 (%x) must be i32 or i64"}},
      {"CatRank", "%y = cat(%x, %i, dim=0)", {"cat", "input 1 (%i)"}},
      {"CatMismatch", "%y = cat(%x, %w, dim=0)", {"cat", "input 1 (%w) dim 1 is 4"}},
      {"ReshapeCount",
       "%y = reshape(%x, shape=[4, 2])",
       {"reshape", "input 0 (%x) has 6 elements but shape [4, 2] holds 8"}},
      {"ReshapeInferredCount",
       "%y = reshape(%x, shape=[4, -1])",
       {"reshape", "input 0 (%x) has 6 elements", "shape [4, -1]", "hold 4 elements"}},
      {"ReshapeTwoMinusOnes",
       "%y = reshape(%x, shape=[-1, -1])",
       {"reshape", "more than one -1 (dims 0 and 1)"}},
      {"ReshapeNamedPastRank",
       "%y = reshape(%x, shape=[1, 1, B])",
       {"reshape", "dim 2 is named", "input 0 (%x)", "rank 2"}},
      {"TransposeRepeats",
       "%y = transpose(%x, perm=[1, 1])",
       {"transpose", "perm [1, 1] is not a permutation: 1 appears twice"}},
      {"TransposeOutOfRange",
       "%y = transpose(%x, perm=[0, 2])",
       {"transpose", "entry 1 is 2, out of range for input 0 (%x) of rank 2"}},
      {"TransposeLength",
       "%y = transpose(%x, perm=[0, 1, 2])",
       {"transpose", "has 3 entries but input 0 (%x) has rank 2"}},
      {"MulDType", "%y = mul(%x, %i)", {"mul", "input 1 (%i) is i64"}},
      {"ReluArity", "%y = relu(%x, %x)", {"relu", "expects 1 inputs, got 2"}},
  };
}

INSTANTIATE_TEST_SUITE_P(Inference, TextShapeErrors, ::testing::ValuesIn(shapeErrorCases()),
                         [](const auto& info) { return info.param.name; });

TEST(Text, LoadGraphNamesAMissingModel) {
  TempDir dir;
  const std::string path = dir.file("absent.gbx");
  const std::string msg = errorOf([&] { loadGraph(path); }, ErrorKind::kIo);
  EXPECT_TRUE(contains(msg, path)) << msg;
}

TEST(Text, LoadGraphReportsErrorsAgainstTheModelPath) {
  TempDir dir;
  const std::string path = dir.file("bad.gbx");
  writeFileAtomic(path, "graph g(%x: f32[1]) {\n  %y = nope(%x)\n  return %y\n}\n");
  const std::string msg = errorOf([&] { loadGraph(path); }, ErrorKind::kParse);
  EXPECT_EQ(msg.rfind(path + ":2:8: expected an op name", 0), 0u) << msg;
}

}  // namespace
}  // namespace gearbox
