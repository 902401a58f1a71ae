#include "graph/text.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <filesystem>
#include <iterator>
#include <limits>
#include <unordered_map>
#include <vector>

#include "graph/error.h"
#include "graph/file_io.h"
#include "graph/npy.h"

namespace gearbox {
namespace {

// How an attribute is written, for "expected" messages: "dim=<int>", "strides=[<ints>]".
std::string attrSyntax(const AttrDecl& d) {
  switch (d.type) {
    case AttrType::kDim:
    case AttrType::kInt: return fmt::format("{}=<int>", d.name);
    case AttrType::kShape: return fmt::format("{}=[<dims>]", d.name);
    case AttrType::kPerm:
    case AttrType::kInts: return fmt::format("{}=[<ints>]", d.name);
    case AttrType::kFloat: return fmt::format("{}=<number>", d.name);
  }
  return std::string(d.name);
}

// ---------------------------------------------------------------------------------------------
// Lexer. The format is free-form: newlines are whitespace, so a statement may span lines.

enum class Tok { kIdent, kValue, kNumber, kString, kPunct, kEof };

struct Token {
  Tok kind = Tok::kEof;
  std::string text;  // without '%' for values; unescaped contents for strings
  int line = 1;
  int col = 1;
};

bool isIdentStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool isDigit(char c) {
  return c >= '0' && c <= '9';
}
bool isIdentChar(char c) {
  return isIdentStart(c) || isDigit(c);
}
// Value names may also contain '.', and may start with a digit (builder-made names are "0").
bool isValueChar(char c) {
  return isIdentChar(c) || c == '.';
}

// One character as it appears in a "got ..." message.
std::string showChar(char c) {
  const auto u = static_cast<unsigned char>(c);
  if (u >= 0x20 && u < 0x7f) return fmt::format("'{}'", c);
  if (c == '\n') return "end of line";
  return fmt::format("byte 0x{:02x}", u);
}

// What a token looks like in a "got ..." message.
std::string showToken(const Token& t) {
  switch (t.kind) {
    case Tok::kEof: return "end of file";
    case Tok::kString: return fmt::format("string \"{}\"", t.text);
    case Tok::kValue: return fmt::format("'%{}'", t.text);
    default: return fmt::format("'{}'", t.text);
  }
}

class Lexer {
 public:
  Lexer(const std::string& text, const std::string& file) : s_(text), file_(file) {}

  std::vector<Token> run() {
    std::vector<Token> out;
    for (;;) {
      skipSpaceAndComments();
      Token t;
      t.line = line_;
      t.col = col_;
      if (pos_ >= s_.size()) {
        out.push_back(std::move(t));
        return out;
      }
      const char c = s_[pos_];
      if (isIdentStart(c)) {
        t.kind = Tok::kIdent;
        t.text = takeWhile(isIdentChar);
      } else if (c == '%') {
        advance();
        t.kind = Tok::kValue;
        t.text = takeWhile(isValueChar);
        if (t.text.empty())
          error(t.line, t.col + 1, "a value name after '%'",
                pos_ < s_.size() ? showChar(peek()) : "end of file");
      } else if (isDigit(c) || (c == '-' && pos_ + 1 < s_.size() && isValueChar(s_[pos_ + 1]))) {
        t.kind = Tok::kNumber;
        t.text = takeNumber();
      } else if (c == '"') {
        t.kind = Tok::kString;
        t.text = takeString();
      } else if (std::string_view("(){}[],:=+*/-").find(c) != std::string_view::npos) {
        // '+', '*', '/' and a '-' that starts no number are dim-expression operators.
        t.kind = Tok::kPunct;
        t.text = std::string(1, c);
        advance();
      } else {
        error(line_, col_, "a token", showChar(c));
      }
      out.push_back(std::move(t));
    }
  }

 private:
  [[noreturn]] void error(int line, int col, std::string_view expected, std::string_view got) {
    fail(ErrorKind::kParse, "{}:{}:{}: expected {}, got {}", file_, line, col, expected, got);
  }
  char peek() const { return s_[pos_]; }
  void advance() {
    if (s_[pos_] == '\n') {
      ++line_;
      col_ = 1;
    } else {
      ++col_;
    }
    ++pos_;
  }
  void skipSpaceAndComments() {
    while (pos_ < s_.size()) {
      const char c = s_[pos_];
      if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
        advance();
      } else if (c == '#') {
        while (pos_ < s_.size() && s_[pos_] != '\n') advance();
      } else {
        break;
      }
    }
  }
  template <typename Pred>
  std::string takeWhile(Pred pred) {
    const size_t start = pos_;
    while (pos_ < s_.size() && pred(s_[pos_])) advance();
    return s_.substr(start, pos_ - start);
  }
  // A number-like word: an optional '-', then letters, digits, '.' and '_', with a sign allowed
  // right after an exponent 'e'. The whole word is validated later against what the context
  // expects (a dim, an attribute, an f32 or an integer), so "4x" is reported as a whole.
  std::string takeNumber() {
    const size_t start = pos_;
    if (peek() == '-') advance();
    const bool decimal = pos_ < s_.size() && isDigit(peek());
    while (pos_ < s_.size()) {
      const char c = peek();
      if (isValueChar(c)) {
        advance();
      } else if ((c == '+' || c == '-') && decimal &&
                 (s_[pos_ - 1] == 'e' || s_[pos_ - 1] == 'E')) {
        advance();
      } else {
        break;
      }
    }
    return s_.substr(start, pos_ - start);
  }
  std::string takeString() {
    advance();  // opening quote
    std::string out;
    for (;;) {
      if (pos_ >= s_.size() || peek() == '\n')
        error(line_, col_, "a closing '\"'", pos_ >= s_.size() ? "end of file" : "end of line");
      const char c = peek();
      if (c == '"') {
        advance();
        return out;
      }
      if (c == '\\') {
        const int line = line_, col = col_;
        advance();
        if (pos_ >= s_.size() || (peek() != '\\' && peek() != '"'))
          error(line, col, "an escape \\\\ or \\\"",
                pos_ >= s_.size() ? std::string("end of file")
                                  : "'\\" + std::string(1, peek()) + "'");
      }
      out += peek();
      advance();
    }
  }

  const std::string& s_;
  const std::string& file_;
  size_t pos_ = 0;
  int line_ = 1;
  int col_ = 1;
};

// ---------------------------------------------------------------------------------------------
// Parser: recursive descent over the token list, building through GraphBuilder so that every
// node is shape-inferred (and errors carry file:line) as soon as it is parsed.

class Parser {
 public:
  Parser(const std::string& text, const std::string& file)
      : file_(file), toks_(Lexer(text, file).run()) {}

  Graph parse() {
    expectKeyword("graph", "'graph'");
    const Token& name = next();
    if (name.kind != Tok::kIdent) expected(name, "a graph name");
    GraphBuilder b(name.text);
    b_ = &b;
    const int headerLine = name.line;
    expectPunct('(');
    if (!isPunct(peek(), ')')) {
      for (;;) {
        parseParam(headerLine);
        if (isPunct(peek(), ')')) break;
        expectPunct(',', "',' or ')'");
      }
    }
    expectPunct(')');
    expectPunct('{');
    for (;;) {
      const Token& t = peek();
      if (t.kind == Tok::kIdent && t.text == "return") break;
      if (t.kind != Tok::kValue) expected(t, "a statement (%name = ...) or 'return'");
      parseStatement();
    }
    next();  // return
    for (;;) {
      b.output(useValue(next()));
      if (!isPunct(peek(), ',')) break;
      next();
    }
    expectPunct('}', "',' or '}'");
    if (peek().kind != Tok::kEof) expected(peek(), "end of file");
    Graph g = b.build();
    g.sourceFile = file_;
    return g;
  }

 private:
  struct Def {
    ValueId id;
    int line;
  };

  // -- token helpers --
  const Token& peek() const { return toks_[pos_]; }
  const Token& next() {
    const Token& t = toks_[pos_];
    if (t.kind != Tok::kEof) ++pos_;
    return t;
  }
  static bool isPunct(const Token& t, char c) { return t.kind == Tok::kPunct && t.text[0] == c; }
  [[noreturn]] void expected(const Token& at, std::string_view what) const {
    fail(ErrorKind::kParse, "{}:{}:{}: expected {}, got {}", file_, at.line, at.col, what,
         showToken(at));
  }
  void expectPunct(char c, std::string_view what = {}) {
    const Token& t = next();
    if (!isPunct(t, c)) expected(t, what.empty() ? fmt::format("'{}'", c) : std::string(what));
  }
  void expectKeyword(std::string_view kw, std::string_view what) {
    const Token& t = next();
    if (t.kind != Tok::kIdent || t.text != kw) expected(t, what);
  }

  // -- names --
  ValueId useValue(const Token& t) {
    if (t.kind != Tok::kValue) expected(t, "a value like %x");
    const auto it = defs_.find(t.text);
    if (it == defs_.end())
      fail(ErrorKind::kParse,
           "{}:{}:{}: expected a graph input or a value defined above, got undefined '%{}'", file_,
           t.line, t.col, t.text);
    return it->second.id;
  }
  void checkNewName(const Token& t) {
    const auto it = defs_.find(t.text);
    if (it != defs_.end())
      fail(ErrorKind::kParse,
           "{}:{}:{}: expected a new value name, got '%{}' already defined at {}:{}", file_, t.line,
           t.col, t.text, file_, it->second.line);
  }

  // -- types --
  int64_t parseDim() {
    // An expression may start with a factor: `4*batch` (how the printer writes a * S).
    const bool factor =
        peek().kind == Tok::kNumber && pos_ + 1 < toks_.size() && isPunct(toks_[pos_ + 1], '*');
    if (peek().kind == Tok::kIdent || isPunct(peek(), '(') || factor) return parseDimExpression();
    const Token& t = next();
    int64_t v = 0;
    if (t.kind == Tok::kNumber) {
      const auto r = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
      if (r.ec == std::errc() && r.ptr == t.text.data() + t.text.size() && (v >= 0 || v == -1))
        return v;
    }
    expected(t, "a dim (a size >= 0, -1 or a symbol name like B)");
  }

  // A dim expression over one symbol (graph/shape.h DimExpr): `H`, `2*H + 1`,
  // `(H - 1) / 2 + 1`; '/' is floor division. Anything that is not of the form
  // floor((a * H + b) / c), a product of two symbols say, is refused at its token.
  struct DimTerm {
    bool isConst = true;
    int64_t value = 0;  // the constant, or the dim
  };

  int64_t parseDimExpression() {
    const Token& first = peek();
    const DimTerm t = parseDimSum();
    if (t.isConst) {
      if (t.value < 0) expected(first, "a dim expression whose value is >= 0");
      return t.value;
    }
    return t.value;
  }

  DimTerm combine(const Token& at, DimTerm x, DimTerm y, char op) {
    auto bad = [&](std::string_view why) {
      expected(at, fmt::format("a dim expression of one symbol ({})", why));
    };
    auto check = [&](int64_t d) {
      if (d == kAnyDim) bad("the result is not floor((a * S + b) / c)");
      return DimTerm{false, d};
    };
    int64_t r = 0;
    switch (op) {
      case '+':
      case '-': {
        if (op == '-' && !y.isConst) bad("a symbol can only be subtracted from nothing");
        if (x.isConst && y.isConst) {
          if (op == '+' ? __builtin_add_overflow(x.value, y.value, &r)
                        : __builtin_sub_overflow(x.value, y.value, &r))
            bad("overflow");
          return DimTerm{true, r};
        }
        if (!x.isConst && !y.isConst) bad("a sum of two symbols");
        const DimTerm& e = x.isConst ? y : x;
        const int64_t k = x.isConst ? x.value : (op == '-' ? -y.value : y.value);
        return check(dimAffine(e.value, 1, k));
      }
      case '*':
        if (x.isConst && y.isConst) {
          if (__builtin_mul_overflow(x.value, y.value, &r)) bad("overflow");
          return DimTerm{true, r};
        }
        if (!x.isConst && !y.isConst) bad("a product of two symbols");
        if ((x.isConst ? x.value : y.value) < 1) bad("a factor must be >= 1");
        return check(dimAffine(x.isConst ? y.value : x.value, x.isConst ? x.value : y.value, 0));
      default:  // '/'
        if (!y.isConst || y.value < 1) bad("a divisor must be an integer >= 1");
        if (x.isConst) {
          if (x.value < 0) bad("a negative quotient");
          return DimTerm{true, x.value / y.value};
        }
        return check(dimFloorDiv(x.value, y.value));
    }
  }

  DimTerm parseDimSum() {
    DimTerm v = parseDimProduct();
    for (;;) {
      const Token& t = peek();
      if (isPunct(t, '+') || isPunct(t, '-')) {
        next();
        v = combine(t, v, parseDimProduct(), t.text[0]);
      } else if (t.kind == Tok::kNumber && !t.text.empty() && t.text[0] == '-') {
        // "H-1" lexes as H and the number -1.
        next();
        v = combine(t, v, DimTerm{true, parseInteger(t, "an integer")}, '+');
      } else {
        return v;
      }
    }
  }

  DimTerm parseDimProduct() {
    DimTerm v = parseDimAtom();
    while (isPunct(peek(), '*') || isPunct(peek(), '/')) {
      const Token& op = next();
      v = combine(op, v, parseDimAtom(), op.text[0]);
    }
    return v;
  }

  DimTerm parseDimAtom() {
    const Token& t = next();
    if (t.kind == Tok::kIdent) return DimTerm{false, symbolDim(t.text)};
    if (isPunct(t, '(')) {
      const DimTerm v = parseDimSum();
      expectPunct(')');
      return v;
    }
    int64_t v = 0;
    const auto r = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
    if (t.kind != Tok::kNumber || r.ec != std::errc() || r.ptr != t.text.data() + t.text.size() ||
        v < 0)
      expected(t, "a symbol, an integer >= 0 or '('");
    return DimTerm{true, v};
  }

  // "[d0, d1, ...]" (up to kMaxRank dims); `integersOnly` refuses symbols and -1 (perm).
  Shape parseDimList(bool integersOnly) {
    expectPunct('[');
    Shape shape;
    if (!isPunct(peek(), ']')) {
      for (;;) {
        if (shape.rank() == kMaxRank)
          expected(peek(), fmt::format("']' (at most {} entries)", kMaxRank));
        if (integersOnly) {
          const Token& t = next();
          int64_t v = 0;
          const auto r = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
          if (t.kind != Tok::kNumber || r.ec != std::errc() ||
              r.ptr != t.text.data() + t.text.size() || v < 0)
            expected(t, "an input dim index >= 0");
          shape.push(v);
        } else {
          shape.push(parseDim());
        }
        if (isPunct(peek(), ']')) break;
        expectPunct(',', "',' or ']'");
      }
    }
    expectPunct(']');
    return shape;
  }

  TensorType parseType() {
    const Token& dt = next();
    const auto dtype = dt.kind == Tok::kIdent ? parseDType(dt.text) : std::nullopt;
    if (!dtype) expected(dt, "a dtype (f32, i32 or i64)");
    expectPunct('[');
    Shape shape;
    if (!isPunct(peek(), ']')) {
      for (;;) {
        if (shape.rank() == kMaxRank)
          expected(peek(), fmt::format("']' (rank is at most {})", kMaxRank));
        shape.push(parseDim());
        if (isPunct(peek(), ']')) break;
        expectPunct(',', "',' or ']'");
      }
    }
    expectPunct(']');
    return TensorType{*dtype, shape};
  }

  // -- statements --
  void parseParam(int headerLine) {
    const Token& name = next();
    if (name.kind != Tok::kValue) expected(name, "an input like %x: f32[4]");
    checkNewName(name);
    expectPunct(':');
    const TensorType type = parseType();
    defs_[name.text] = Def{b_->input(name.text, type.dtype, type.shape), headerLine};
  }

  void parseStatement() {
    const Token& name = next();
    checkNewName(name);
    expectPunct('=');
    const Token& op = next();
    // Parsed into a local first: with `defs_[n] = Def{parse...}` the builds did not agree on
    // whether the map entry exists while the right side is parsed, and where it did (Release)
    // `%y = relu(%y)` read its own empty entry instead of failing as undefined.
    if (op.kind == Tok::kIdent && op.text == "const") {
      const ValueId id = parseConst(name);
      defs_[name.text] = Def{id, name.line};
      return;
    }
    const auto kind = op.kind == Tok::kIdent ? parseOpKind(op.text) : std::nullopt;
    if (!kind || *kind == OpKind::kConst) expected(op, opListForMessage());
    const ValueId id = parseCall(name, *kind);
    defs_[name.text] = Def{id, name.line};
  }

  static std::string opListForMessage() {
    std::string s = "an op name (";
    for (int i = 0; i < kOpCount; ++i) {
      if (i) s += ", ";
      s += opTextName(static_cast<OpKind>(i));
    }
    return s + ")";
  }

  ValueId parseCall(const Token& name, OpKind kind) {
    const std::string_view opName = opTextName(kind);
    expectPunct('(');
    std::vector<ValueId> inputs{useValue(next())};
    Attrs attrs;
    const auto decls = opAttrDecls(kind);
    bool anyAttr = false;
    std::vector<bool> seen(decls.size(), false);
    for (;;) {
      const Token& t = peek();
      if (isPunct(t, ')')) {
        for (size_t s = 0; s < decls.size(); ++s)
          if (!seen[s] && decls[s].presence == AttrPresence::kRequired)
            expected(t, fmt::format("', {}' ({} needs attribute {})", attrSyntax(decls[s]), opName,
                                    decls[s].name));
        next();
        break;
      }
      expectPunct(',', "',' or ')'");
      const Token& arg = peek();
      if (arg.kind == Tok::kValue) {
        if (anyAttr) expected(arg, "an attribute (values come before attributes)");
        inputs.push_back(useValue(next()));
        continue;
      }
      if (arg.kind != Tok::kIdent) expected(arg, "a value like %x or an attribute like dim=1");
      if (decls.empty())
        expected(arg, fmt::format("a value like %x ({} takes no attributes)", opName));
      const int slot = findAttr(kind, arg.text);
      if (slot < 0) {
        std::string names;
        for (const AttrDecl& d : decls)
          names += (names.empty() ? "'" : "', '") + std::string(d.name);
        expected(arg,
                 fmt::format("attribute {}' ({} has no attribute '{}')", names, opName, arg.text));
      }
      if (seen[slot]) expected(arg, fmt::format("')' (attribute {} is already given)", arg.text));
      seen[slot] = true;
      anyAttr = true;
      next();
      expectPunct('=');
      parseAttrValue(decls[slot], slot, attrs);
    }
    return b_->op(kind, std::move(inputs), attrs, name.text, SourceLoc{file_, name.line});
  }

  int64_t parseInteger(const Token& v, std::string_view what) {
    int64_t x = 0;
    const auto r = std::from_chars(v.text.data(), v.text.data() + v.text.size(), x);
    if (v.kind != Tok::kNumber || r.ec != std::errc() || r.ptr != v.text.data() + v.text.size())
      expected(v, what);
    return x;
  }

  void parseAttrValue(const AttrDecl& d, int slot, Attrs& attrs) {
    switch (d.type) {
      case AttrType::kDim: attrs.dim = parseInteger(next(), "an integer dim like 1 or -1"); break;
      // shape=[B, 8, -1] reads like a type's dims; perm=[0, 2, 1] takes plain integers.
      case AttrType::kShape: attrs.shape = parseDimList(false); break;
      case AttrType::kPerm: attrs.perm = parseDimList(true); break;
      case AttrType::kInt: attrs.setInt(slot, parseInteger(next(), "an integer")); break;
      case AttrType::kFloat: {
        const Token& v = next();
        attrs.setFloat(slot, parseElement<double>(v, DType::kF32));
        if (std::isnan(attrs.f(slot))) expected(v, "a number (not nan)");
        break;
      }
      case AttrType::kInts: {
        expectPunct('[');
        std::vector<int64_t> v;
        if (!isPunct(peek(), ']')) {
          for (;;) {
            if (v.size() == static_cast<size_t>(kMaxAttrInts))
              expected(peek(), fmt::format("']' (at most {} entries)", kMaxAttrInts));
            v.push_back(parseInteger(next(), "an integer"));
            if (isPunct(peek(), ']')) break;
            expectPunct(',', "',' or ']'");
          }
        }
        expectPunct(']');
        attrs.setInts(slot, v);
        break;
      }
    }
  }

  ValueId parseConst(const Token& name) {
    const Token& typeTok = peek();
    const TensorType type = parseType();
    if (!type.shape.isStatic())
      fail(ErrorKind::kParse,
           "{}:{}:{}: expected a static type for const (no -1 or symbols), got {}", file_,
           typeTok.line, typeTok.col, type.toString());
    const Token& body = peek();
    Tensor data;
    std::string path;
    if (body.kind == Tok::kString) {
      next();
      path = body.text;
      data = loadConstFile(name, body, type);
    } else if (isPunct(body, '[')) {
      data = parseLiteral(type);
    } else {
      expected(body, "an inline literal [...] or a \"file.npy\" path");
    }
    const ValueId id = b_->constant(std::move(data), name.text, std::move(path));
    b_->graph().nodes.back().loc = SourceLoc{file_, name.line};
    return id;
  }

  Tensor loadConstFile(const Token& name, const Token& pathTok, const TensorType& declared) {
    // Relative paths are anchored at the model file so a model and its weights move together.
    const std::filesystem::path resolved =
        std::filesystem::path(file_).parent_path() / std::filesystem::path(pathTok.text);
    Tensor t;
    try {
      t = loadNpy(resolved.string());
    } catch (const Error& e) {
      throw Error(e.kind(), fmt::format("{}:{}:{}: const %{}: {}", file_, pathTok.line, pathTok.col,
                                        name.text, e.what()));
    }
    const TensorType actual{t.dtype(), t.shape()};
    if (!(actual == declared))
      fail(ErrorKind::kShape, "{}:{}:{}: const %{} is declared {} but \"{}\" holds {}", file_,
           pathTok.line, pathTok.col, name.text, declared.toString(), pathTok.text,
           actual.toString());
    return t;
  }

  // Reads "[v, v, ...]" into a tensor of the declared static type; the values are the
  // elements in C order whatever the rank.
  Tensor parseLiteral(const TensorType& type) {
    const Token& open = next();
    return dispatchDType(type.dtype, [&](auto tag) {
      using T = decltype(tag);
      std::vector<T> vals;
      if (!isPunct(peek(), ']')) {
        for (;;) {
          vals.push_back(parseElement<T>(next(), type.dtype));
          if (isPunct(peek(), ']')) break;
          expectPunct(',', "',' or ']'");
        }
      }
      next();  // ']'
      // Multiply with overflow checks: the declared dims come from the user, and a product that
      // wraps could otherwise match the number of values given.
      uint64_t numel = 1;
      bool overflow = false;
      for (int64_t d : type.shape)
        overflow |= __builtin_mul_overflow(numel, static_cast<uint64_t>(d), &numel);
      if (overflow || vals.size() != numel)
        fail(ErrorKind::kParse, "{}:{}:{}: expected {} values for const {}, got {}", file_,
             open.line, open.col, overflow ? std::string("more") : std::to_string(numel),
             type.toString(), vals.size());
      Tensor t(type.dtype, type.shape);
      std::copy(vals.begin(), vals.end(), t.as<T>());
      return t;
    });
  }

  template <typename T>
  T parseElement(const Token& t, DType dtype) {
    const char* first = t.text.data();
    const char* last = first + t.text.size();
    const bool numeric =
        t.kind == Tok::kNumber || (t.kind == Tok::kIdent && (t.text == "inf" || t.text == "nan"));
    const std::string what = std::is_floating_point_v<T>
                                 ? std::string("an f32 number")
                                 : fmt::format("an {} integer", dtypeName(dtype));
    if (!numeric) expected(t, what);
    T v{};
    const auto r = std::from_chars(first, last, v);
    if (r.ec == std::errc::result_out_of_range && r.ptr == last)
      expected(t, fmt::format("{} in range", what));
    if (r.ec != std::errc() || r.ptr != last) expected(t, what);
    return v;
  }

  std::string file_;
  std::vector<Token> toks_;
  size_t pos_ = 0;
  GraphBuilder* b_ = nullptr;
  std::unordered_map<std::string, Def> defs_;
};

// ---------------------------------------------------------------------------------------------
// Printer.

std::string quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

void printLiteral(std::string& out, const Tensor& t) {
  out += '[';
  dispatchDType(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* p = t.as<T>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (i) out += ", ";
      // "{}" is the shortest representation that reads back to the same value.
      fmt::format_to(std::back_inserter(out), "{}", p[i]);
    }
  });
  out += ']';
}

}  // namespace

Graph parseGraph(const std::string& text, const std::string& file) {
  return Parser(text, file).parse();
}

Graph loadGraph(const std::string& path) {
  return parseGraph(readFile(path), path);
}

std::string printGraph(const Graph& g) {
  std::string out = fmt::format("graph {}(", g.name);
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const Value& v = g.values[g.inputs[i]];
    out += fmt::format("{}%{}: {}", i ? ", " : "", v.name, v.type.toString());
  }
  out += ") {\n";
  for (const Node& n : g.nodes) {
    out += fmt::format("  %{} = ", g.values[n.output].name);
    if (n.kind == OpKind::kConst) {
      out += fmt::format("const {} ", g.values[n.output].type.toString());
      if (!n.constPath.empty()) {
        out += quote(n.constPath);
      } else if (n.constant) {
        printLiteral(out, *n.constant);
      }
    } else {
      out += fmt::format("{}(", opTextName(n.kind));
      for (size_t i = 0; i < n.inputs.size(); ++i)
        out += fmt::format("{}%{}", i ? ", " : "", g.values[n.inputs[i]].name);
      out += formatAttrs(n.kind, n.attrs);
      out += ')';
    }
    out += '\n';
  }
  out += "  return ";
  for (size_t i = 0; i < g.outputs.size(); ++i)
    out += fmt::format("{}%{}", i ? ", " : "", g.values[g.outputs[i]].name);
  out += "\n}\n";
  return out;
}

}  // namespace gearbox
