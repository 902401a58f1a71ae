#include "graph/text.h"

#include <fmt/format.h>

#include <charconv>
#include <filesystem>
#include <iterator>
#include <limits>
#include <unordered_map>
#include <vector>

#include "graph/error.h"
#include "graph/npy.h"

namespace gearbox {
namespace {

// The attribute an op takes (ops.def's attribute column), as written in the IR.
std::string_view attrName(OpAttr a) {
  switch (a) {
    case OpAttr::kNone: break;
    case OpAttr::kDim: return "dim";
    case OpAttr::kShape: return "shape";
    case OpAttr::kPerm: return "perm";
  }
  return "";
}

std::string_view attrSyntax(OpAttr a) {
  switch (a) {
    case OpAttr::kNone: break;
    case OpAttr::kDim: return "dim=<int>";
    case OpAttr::kShape: return "shape=[<dims>]";
    case OpAttr::kPerm: return "perm=[<ints>]";
  }
  return "";
}

bool hasAttr(const Attrs& a) {
  return a.dim || a.shape || a.perm;
}

// One dim list as the IR prints it: "[B, 8, -1]".
std::string dimList(const Shape& s) {
  return s.toString();
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
      } else if (std::string_view("(){}[],:=").find(c) != std::string_view::npos) {
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
    const Token& t = next();
    if (t.kind == Tok::kIdent) return symbolDim(t.text);
    int64_t v = 0;
    if (t.kind == Tok::kNumber) {
      const auto r = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
      if (r.ec == std::errc() && r.ptr == t.text.data() + t.text.size() && (v >= 0 || v == -1))
        return v;
    }
    expected(t, "a dim (a size >= 0, -1 or a symbol name like B)");
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
    const OpAttr attr = opAttr(kind);
    for (;;) {
      const Token& t = peek();
      if (isPunct(t, ')')) {
        if (attr != OpAttr::kNone && !hasAttr(attrs))
          expected(t, fmt::format("', {}' ({} needs attribute {})", attrSyntax(attr), opName,
                                  attrName(attr)));
        next();
        break;
      }
      expectPunct(',', "',' or ')'");
      const Token& arg = peek();
      if (arg.kind == Tok::kValue) {
        if (hasAttr(attrs)) expected(arg, "an attribute (values come before attributes)");
        inputs.push_back(useValue(next()));
        continue;
      }
      if (arg.kind != Tok::kIdent) expected(arg, "a value like %x or an attribute like dim=1");
      if (attr == OpAttr::kNone)
        expected(arg, fmt::format("a value like %x ({} takes no attributes)", opName));
      if (arg.text != attrName(attr))
        expected(arg, fmt::format("attribute '{}' ({} has no attribute '{}')", attrName(attr),
                                  opName, arg.text));
      if (hasAttr(attrs))
        expected(arg, fmt::format("')' (attribute {} is already given)", arg.text));
      next();
      expectPunct('=');
      if (attr == OpAttr::kDim) {
        const Token& v = next();
        int64_t dim = 0;
        const auto r = std::from_chars(v.text.data(), v.text.data() + v.text.size(), dim);
        if (v.kind != Tok::kNumber || r.ec != std::errc() || r.ptr != v.text.data() + v.text.size())
          expected(v, "an integer dim like 1 or -1");
        attrs.dim = dim;
      } else {
        // shape=[B, 8, -1] reads like a type's dims; perm=[0, 2, 1] takes plain integers.
        const Shape dims = parseDimList(attr == OpAttr::kPerm);
        if (attr == OpAttr::kShape) {
          attrs.shape = dims;
        } else {
          attrs.perm = dims;
        }
      }
    }
    return b_->op(kind, std::move(inputs), attrs, name.text, SourceLoc{file_, name.line});
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
    const std::string what = std::is_same_v<T, float>
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
      if (n.attrs.dim) out += fmt::format(", dim={}", *n.attrs.dim);
      if (n.attrs.shape) out += fmt::format(", shape={}", dimList(*n.attrs.shape));
      if (n.attrs.perm) out += fmt::format(", perm={}", dimList(*n.attrs.perm));
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
