// gearbox._gearbox: the pybind11 extension behind the `gearbox` Python package
// (python/gearbox/__init__.py, docs/python.md).
//
// The binding reuses the CLI's option handling (driver/run_options.h: toSessionOptions,
// reportJson, runTrace, loadTrace), so a Session built from Python validates its options,
// counts and reports exactly as `gearbox run` does and raises the same messages; gearbox.run and
// gearbox.compare_report call the driver's runCommand and compareCommand, which are the CLI's
// `run` and `compare` themselves.
//
// Arrays: an input whose dtype matches the graph's and whose layout is C-contiguous is wrapped,
// not copied (the Tensor holds a reference to the array for as long as it lives); anything else
// is copied once, and the copy is counted (Session.input_copies). Outputs are fresh tensors that
// the returned arrays take over without a copy.
#include <fmt/format.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "compiler/compile_log.h"
#include "driver/compare.h"
#include "driver/gear_suggest.h"
#include "driver/run_command.h"
#include "driver/run_options.h"
#include "driver/sweep.h"
#include "driver/trace.h"
#include "executor/modes/geared.h"
#include "executor/session.h"
#include "gearbox/version.h"
#include "graph/error.h"
#include "graph/graph.h"
#include "graph/text.h"

namespace py = pybind11;

namespace gearbox::python {
namespace {

// The short, stable name of an error kind for code (e.kind == "gear"); the CLI's wording
// ("gear error") is e.label.
const char* errorKindId(ErrorKind k) {
  switch (k) {
    case ErrorKind::kParse: return "parse";
    case ErrorKind::kShape: return "shape";
    case ErrorKind::kIndex: return "index";
    case ErrorKind::kIo: return "io";
    case ErrorKind::kGear: return "gear";
    case ErrorKind::kConfig: return "config";
    case ErrorKind::kLimit: return "limit";
    case ErrorKind::kMemory: return "memory";
  }
  return "error";
}

// A failed guard as a dict: {"plan": 1, "input": "x1", "dim": 0, "expected": 2, "actual": 4,
// "text": ...} for the size guards ("plan #1: input 'x1' size mismatch at dim 0: expected 2,
// actual 4"); any other guard keeps its text only, so a new guard kind is never lost.
py::dict parseGuard(const std::string& text) {
  static const std::regex kSize(
      R"(plan #(\d+): input '([^']+)' size mismatch at dim (\d+): expected (-?\d+), actual (-?\d+))");
  py::dict d;
  std::smatch m;
  if (std::regex_search(text, m, kSize)) {
    d["plan"] = std::stoll(m[1].str());
    d["input"] = m[2].str();
    d["dim"] = std::stoll(m[3].str());
    d["expected"] = std::stoll(m[4].str());
    d["actual"] = std::stoll(m[5].str());
  }
  d["text"] = text;
  return d;
}

// ---- conversions ------------------------------------------------------------------------------

// Converts JSON to Python objects through the json module: the reports are small and this keeps
// their key order and types exactly as the CLI's --json writes them.
py::object toPython(const nlohmann::ordered_json& j) {
  // Invalid UTF-8 (a file name in another encoding) becomes U+FFFD instead of an exception.
  return py::module_::import("json").attr("loads")(cli::dumpJson(j));
}

py::object dimToPython(int64_t d) {
  if (isSymbolDim(d)) return py::str(symbolName(d));
  return py::int_(d);
}

py::list shapeToPython(const Shape& s) {
  py::list out;
  for (int64_t d : s) out.append(dimToPython(d));
  return out;
}

// [2, "B", -1] -> Shape; ints >= -1 and symbol names (IR identifiers) only.
Shape shapeFromPython(const py::handle& obj, const std::string& what) {
  Shape s;
  for (const py::handle& item : obj) {
    if (py::isinstance<py::str>(item)) {
      s.push(symbolDim(item.cast<std::string>()));
    } else {
      const int64_t d = item.cast<int64_t>();
      if (d < -1) fail(ErrorKind::kShape, "{}: dim {} must be >= -1 or a symbol name", what, d);
      s.push(d);
    }
  }
  return s;
}

DType dtypeFromPython(const std::string& name) {
  const auto t = parseDType(name);
  if (!t) fail(ErrorKind::kConfig, "unknown dtype '{}' (one of f32, i32, i64)", name);
  return *t;
}

py::dtype numpyDType(DType t) {
  switch (t) {
    case DType::kF32: return py::dtype::of<float>();
    case DType::kI32: return py::dtype::of<int32_t>();
    case DType::kI64: return py::dtype::of<int64_t>();
  }
  return py::dtype::of<float>();
}

// An array over the tensor's own storage: the capsule keeps the storage alive.
py::array toArray(Tensor t) {
  auto* keep = new Tensor(std::move(t));
  py::capsule owner(keep, [](void* p) { delete static_cast<Tensor*>(p); });
  std::vector<py::ssize_t> shape, strides;
  const auto st = contiguousStrides(keep->shape());
  const auto itemsize = static_cast<py::ssize_t>(dtypeSize(keep->dtype()));
  for (int i = 0; i < keep->shape().rank(); ++i) {
    shape.push_back(keep->shape()[i]);
    strides.push_back(st[i] * itemsize);
  }
  return py::array(numpyDType(keep->dtype()), shape, strides, keep->data(), owner);
}

// One graph input from a NumPy array (or anything np.asarray takes when it is not an array).
// Wraps the array's memory when the dtype matches and the layout is C-contiguous; otherwise
// copies and counts the copy.
Tensor tensorFromPython(const py::handle& obj, const Value& decl, int64_t& copies) {
  py::array arr = py::isinstance<py::array>(obj)
                      ? py::reinterpret_borrow<py::array>(obj)
                      : py::array(py::module_::import("numpy").attr("asarray")(
                            obj, numpyDType(decl.type.dtype)));
  if (!arr.dtype().equal(numpyDType(decl.type.dtype)))
    fail(ErrorKind::kShape, "input %{}: expected dtype {} (numpy {}), got numpy {}", decl.name,
         dtypeName(decl.type.dtype), py::str(numpyDType(decl.type.dtype)).cast<std::string>(),
         py::str(arr.dtype()).cast<std::string>());
  Shape shape;
  for (py::ssize_t i = 0; i < arr.ndim(); ++i) {
    if (i >= kMaxRank)
      fail(ErrorKind::kShape, "input %{}: rank {} exceeds the maximum rank {}", decl.name,
           arr.ndim(), kMaxRank);
    shape.push(arr.shape(i));
  }
  const bool contiguous =
      (arr.flags() & py::array::c_style) && (arr.flags() & py::detail::npy_api::NPY_ARRAY_ALIGNED_);
  if (contiguous && arr.size() > 0) {
    // The deleter drops the array reference, taking the GIL: the last Tensor copy may die on
    // any thread.
    PyObject* ref = arr.ptr();
    Py_INCREF(ref);
    std::shared_ptr<std::byte> data(static_cast<std::byte*>(const_cast<void*>(arr.data())),
                                    [ref](std::byte*) {
                                      py::gil_scoped_acquire gil;
                                      Py_DECREF(ref);
                                    });
    return Tensor::wrap(decl.type.dtype, shape, std::move(data));
  }
  Tensor t(decl.type.dtype, shape);
  if (arr.size() > 0) {
    ++copies;
    py::array c = py::array::ensure(arr, py::array::c_style);
    std::memcpy(t.data(), c.data(), t.bytes());
  }
  return t;
}

// ---- graph ------------------------------------------------------------------------------------

struct PyGraph {
  std::shared_ptr<const Graph> g;
};

py::list graphInputs(const Graph& g) {
  py::list out;
  for (ValueId id : g.inputs) {
    const Value& v = g.value(id);
    py::dict d;
    d["name"] = v.name;
    d["dtype"] = std::string(dtypeName(v.type.dtype));
    d["shape"] = shapeToPython(v.type.shape);
    out.append(d);
  }
  return out;
}

class PyBuilder {
 public:
  explicit PyBuilder(std::string name) : b_(std::move(name)) {}
  ValueId input(std::string name, const std::string& dtype, const py::handle& shape) {
    return b_.input(name, dtypeFromPython(dtype), shapeFromPython(shape, "input %" + name));
  }
  ValueId constant(const py::array& data, const std::string& name) {
    const std::string dt = py::str(data.dtype()).cast<std::string>();
    DType t = dt == "float32" ? DType::kF32
              : dt == "int32" ? DType::kI32
              : dt == "int64" ? DType::kI64
                              : (fail(ErrorKind::kConfig,
                                      "constant: dtype {} is not one of float32, int32, int64", dt),
                                 DType::kF32);
    Value decl;
    decl.name = name.empty() ? "const" : name;
    decl.type.dtype = t;
    int64_t copies = 0;
    Tensor wrapped = tensorFromPython(data, decl, copies);
    // The graph owns its constants: copy them out of the caller's array.
    Tensor owned(wrapped.dtype(), wrapped.shape());
    if (owned.bytes()) std::memcpy(owned.data(), wrapped.data(), owned.bytes());
    return b_.constant(std::move(owned), name);
  }
  ValueId op(const std::string& kind, const std::vector<ValueId>& inputs,
             std::optional<int64_t> dim, const std::string& name, const py::dict& attrs = {}) {
    const auto k = parseOpKind(kind);
    if (!k) fail(ErrorKind::kParse, "unknown op '{}'", kind);
    for (ValueId v : inputs) check(v);
    Attrs a;
    a.dim = dim;
    // Every attribute the op declares in graph/ops.def, by name and type.
    for (const auto& [key, value] : attrs) {
      const std::string attrName = py::str(key).cast<std::string>();
      const int slot = findAttr(*k, attrName);
      if (slot < 0) fail(ErrorKind::kConfig, "{}: no attribute '{}'", kind, attrName);
      const std::string what = fmt::format("{} attribute {}", kind, attrName);
      auto integer = [&](const py::handle& h) {
        if (!py::isinstance<py::int_>(h) || py::isinstance<py::bool_>(h))
          fail(ErrorKind::kConfig, "{}: expected an int", what);
        try {
          return h.cast<int64_t>();
        } catch (const py::cast_error&) {
          fail(ErrorKind::kConfig, "{}: integer out of range", what);
        }
      };
      auto integers = [&](const py::handle& h) {
        if (!py::isinstance<py::list>(h) && !py::isinstance<py::tuple>(h))
          fail(ErrorKind::kConfig, "{}: expected a list of ints", what);
        std::vector<int64_t> v;
        for (const py::handle& e : h) v.push_back(integer(e));
        if (v.size() > static_cast<size_t>(kMaxAttrInts))
          fail(ErrorKind::kConfig, "{}: at most {} entries", what, kMaxAttrInts);
        return v;
      };
      switch (opAttrDecls(*k)[slot].type) {
        case AttrType::kDim: a.dim = integer(value); break;
        case AttrType::kShape: a.shape = shapeFromPython(value, what); break;
        case AttrType::kPerm: {
          const std::vector<int64_t> v = integers(value);
          if (v.size() > static_cast<size_t>(kMaxRank))
            fail(ErrorKind::kConfig, "{}: at most {} entries", what, kMaxRank);
          a.perm = Shape(v.begin(), v.end());
          break;
        }
        case AttrType::kInt: a.setInt(slot, integer(value)); break;
        case AttrType::kInts: a.setInts(slot, integers(value)); break;
        case AttrType::kFloat:
          if (!py::isinstance<py::float_>(value) && !py::isinstance<py::int_>(value))
            fail(ErrorKind::kConfig, "{}: expected a number", what);
          a.setFloat(slot, value.cast<double>());
          break;
      }
    }
    return b_.op(*k, inputs, a, name);
  }
  void output(ValueId v) {
    check(v);
    b_.output(v);
  }
  py::list shape(ValueId v) const {
    check(v);
    return shapeToPython(b_.type(v).shape);
  }
  PyGraph build() { return PyGraph{std::make_shared<const Graph>(b_.build())}; }

 private:
  void check(ValueId v) const {
    if (v < 0 || static_cast<size_t>(v) >= b_.graph().values.size())
      fail(ErrorKind::kConfig, "GraphBuilder: no value with id {}", v);
  }
  // mutable: GraphBuilder only offers a non-const graph(), and check() only reads it.
  mutable GraphBuilder b_;
};

// ---- session ----------------------------------------------------------------------------------

Mode modeFromPython(const std::string& name) {
  const auto m = parseMode(name);
  if (!m)
    fail(ErrorKind::kConfig, "unknown mode '{}' (one of {})", name,
         joinModeNames(ModeSet::kAll, ", ", ", "));
  return *m;
}

// The option a Python keyword names: the table's keyword, an older one it keeps, or nullptr.
const cli::OptionInfo* optionForKeyword(const std::string& key) {
  for (const cli::OptionInfo& info : cli::runOptionTable())
    if (info.python.accepted && (key == info.pythonName() || key == info.python.alias))
      return &info;
  return nullptr;
}

// Every keyword Session(...) and compare(...) take, sorted (the "unknown option" message).
std::vector<std::string> pythonKeywords() {
  std::vector<std::string> names = {"passes"};  // the older spelling of no_passes, inverted
  for (const cli::OptionInfo& info : cli::runOptionTable()) {
    if (!info.sessionTakes()) continue;
    names.push_back(info.pythonName());
    if (!info.python.alias.empty()) names.push_back(info.python.alias);
  }
  std::sort(names.begin(), names.end());
  return names;
}

// A keyword's value as the CLI's text: a list for a repeatable option, a dict or list as its
// JSON (gears={"x1": {0: [2, 4]}}), a bool as true/false.
std::vector<std::string> optionText(const cli::OptionInfo& info, const std::string& key,
                                    const py::handle& v) {
  if (info.type == "LIST") {
    if (py::isinstance<py::str>(v)) return {v.cast<std::string>()};
    try {
      return v.cast<std::vector<std::string>>();
    } catch (const py::cast_error&) {
      fail(ErrorKind::kConfig, "{}: expected a list of strings", key);
    }
  }
  if (info.type == "FLAG") {
    if (!py::isinstance<py::bool_>(v)) fail(ErrorKind::kConfig, "{}: expected True or False", key);
    return {v.cast<bool>() ? "true" : "false"};
  }
  if ((info.type == "INT" || info.type == "UINT") &&
      (!py::isinstance<py::int_>(v) || py::isinstance<py::bool_>(v)))
    fail(ErrorKind::kConfig, "{}: expected an integer, got {}", key,
         py::repr(v).cast<std::string>());
  if (info.type == "TEXT" && (py::isinstance<py::dict>(v) || py::isinstance<py::list>(v)))
    return {py::module_::import("json").attr("dumps")(v).cast<std::string>()};
  return {py::str(v).cast<std::string>()};
}

// `passes`, the older spelling of no_passes (inverted), which every call still takes.
bool takeOlderPasses(cli::RunOptions& o, const std::string& key, const py::handle& value) {
  if (key != "passes") return false;
  if (!py::isinstance<py::bool_>(value)) fail(ErrorKind::kConfig, "passes: expected True or False");
  o.noPasses = !value.cast<bool>();
  return true;
}

// Session options from Python keywords: every option of driver/run_options.def that a Session
// takes, spelled as the CLI's long name with underscores and checked as the CLI checks it.
// None leaves an option at its default.
cli::RunOptions runOptionsFromKwargs(const py::kwargs& kw) {
  cli::RunOptions o;
  o.quiet = true;
  for (const auto& item : kw) {
    const std::string key = py::str(item.first).cast<std::string>();
    if (item.second.is_none() || takeOlderPasses(o, key, item.second)) continue;
    const cli::OptionInfo* info = optionForKeyword(key);
    if (info && !info->sessionTakes())
      fail(ErrorKind::kConfig,
           "{} is a keyword of gearbox.run and gearbox.compare_report, not of "
           "a Session or compare's records ({})",
           key, info->python.reason);
    if (!info)
      fail(ErrorKind::kConfig, "unknown option '{}' (one of: {})", key,
           fmt::join(pythonKeywords(), ", "));
    cli::setRunOption(o, *info, optionText(*info, key, item.second), key);
  }
  return o;
}

// The options of gearbox.run (kRunOnly) or gearbox.compare_report (kCompareOnly): every row
// that command takes, with the CLI's defaults (printing included; quiet=True is -q).
cli::RunOptions commandOptionsFromKwargs(const py::kwargs& kw, cli::OptionCommands command) {
  const char* self = command == cli::kRunOnly ? "run" : "compare_report";
  cli::RunOptions o;
  std::vector<std::string> known = {"passes"};
  for (const cli::OptionInfo& info : cli::runOptionTable())
    if (info.python.accepted && info.takes(command)) known.push_back(info.pythonName());
  std::sort(known.begin(), known.end());
  for (const auto& item : kw) {
    const std::string key = py::str(item.first).cast<std::string>();
    if (item.second.is_none() || takeOlderPasses(o, key, item.second)) continue;
    const cli::OptionInfo* info = optionForKeyword(key);
    if (info && !info->takes(command))
      fail(ErrorKind::kConfig, "{} is a keyword of gearbox.{}, not of gearbox.{}", key,
           command == cli::kRunOnly ? "compare_report" : "run", self);
    if (!info)
      fail(ErrorKind::kConfig, "gearbox.{}: unknown option '{}' (one of: {})", self, key,
           fmt::join(known, ", "));
    cli::setRunOption(o, *info, optionText(*info, key, item.second), key);
  }
  // The required rows (MODEL, --trace): CLI11 refuses to run without them. compare takes
  // sweep_dim instead of a trace, and says so itself.
  if (o.model.empty()) fail(ErrorKind::kConfig, "gearbox.{}: model is required", self);
  if (o.trace.empty() && command == cli::kRunOnly)
    fail(ErrorKind::kConfig, "gearbox.{}: trace is required", self);
  return o;
}

// The compile log as a Session uses it (warnings on stderr), put back when a command that
// pointed it at its own options (--log, warnings into the captured text) returns or throws.
struct DefaultLogAfter {
  ~DefaultLogAfter() {
    cli::warningLog().setOutput(nullptr);
    configureLogging(LogOptions{});
  }
};

// gearbox.run and gearbox.compare_report: the driver's runCommand or compareCommand, exactly
// what `gearbox run` and `gearbox compare` do with the same options. Returns
// {"exit_status": the CLI's exit code, "output": its stdout, "errors": its stderr,
//  "report": the --json report}; bad options, model or trace raise gearbox.Error.
py::dict runCommandPy(cli::OptionCommands command, const py::kwargs& kw) {
  cli::RunOptions o = commandOptionsFromKwargs(kw, command);
  std::ostringstream out, err;
  cli::CommandResult r;
  {
    // The GIL stays held: a command points the process's compile log and warning log at its
    // own options, which another thread's command or Session must not see change under it.
    DefaultLogAfter restore;
    r = command == cli::kRunOnly ? cli::runCommand(o, out, err) : cli::compareCommand(o, out, err);
  }
  py::dict d;
  d["exit_status"] = r.exitStatus;
  d["output"] = out.str();
  d["errors"] = err.str();
  d["report"] = toPython(r.report);
  return d;
}

// gearbox.sweep: the driver's sweepCommand, as `gearbox sweep` runs it. `grid` maps an option's
// keyword to its values (a list, or one value); the other keywords are the settings every point
// shares (those a sweep may vary: driver/sweep.h sweepTakes) and measured, json, html.
py::dict sweepPy(const py::kwargs& kw) {
  cli::SweepOptions so;
  for (const auto& item : kw) {
    const std::string key = py::str(item.first).cast<std::string>();
    const py::handle v = item.second;
    if (v.is_none() || takeOlderPasses(so.run, key, v)) continue;
    if (key == "measured") {
      if (!py::isinstance<py::bool_>(v))
        fail(ErrorKind::kConfig, "measured: expected True or False");
      so.measured = v.cast<bool>();
    } else if (key == "json" || key == "html") {
      (key == "json" ? so.json : so.html) = py::str(v).cast<std::string>();
    } else if (key == "grid") {
      if (!py::isinstance<py::dict>(v))
        fail(ErrorKind::kConfig, "grid: expected a dict, option keyword -> list of values");
      for (const auto& axis : v.cast<py::dict>()) {
        const std::string name = py::str(axis.first).cast<std::string>();
        const cli::OptionInfo* info = optionForKeyword(name);
        py::list values;
        if (py::isinstance<py::list>(axis.second) || py::isinstance<py::tuple>(axis.second))
          values = py::list(py::reinterpret_borrow<py::object>(axis.second));
        else
          values.append(axis.second);
        std::vector<std::string> texts;
        for (const py::handle& value : values) {
          // Each value as the CLI's text (a dict of gears as JSON), checked when the grid is.
          // A repeatable option's axis value is one item of it (parseGrid).
          const std::vector<std::string> t =
              info && !(info->type == "LIST" && py::isinstance<py::str>(value))
                  ? optionText(*info, name, value)
                  : std::vector<std::string>{py::str(value).cast<std::string>()};
          texts.insert(texts.end(), t.begin(), t.end());
        }
        // ';' separates values that may hold a ',' (parseGrid).
        so.grid.push_back(fmt::format("{}={}", name, fmt::join(texts, ";")));
      }
    } else {
      const cli::OptionInfo* info = optionForKeyword(key);
      if (!info || !(info->name == "MODEL" || info->name == "trace" || cli::sweepTakes(*info)))
        fail(ErrorKind::kConfig,
             "gearbox.sweep: unknown option '{}' (grid, measured, json, html, model, trace, or "
             "an option a sweep may vary)",
             key);
      cli::setRunOption(so.run, *info, optionText(*info, key, v), key);
    }
  }
  if (so.run.model.empty()) fail(ErrorKind::kConfig, "gearbox.sweep: model is required");
  if (so.run.trace.empty()) fail(ErrorKind::kConfig, "gearbox.sweep: trace is required");
  std::ostringstream out, err;
  cli::CommandResult r;
  {
    DefaultLogAfter restore;  // sweepCommand points the compile log at its own sink
    r = cli::sweepCommand(so, out, err);
  }
  py::dict d;
  d["exit_status"] = r.exitStatus;
  d["output"] = out.str();
  d["errors"] = err.str();
  d["report"] = toPython(r.report);
  return d;
}

// Geared sessions may get their gears from set_dim_gears after construction, so the options
// are built as for a static session and switched to geared here (the CLI requires --gears
// because it has no other way to set them).
SessionOptions sessionOptions(const cli::RunOptions& o, Mode mode) {
  if (!modeInfo(mode).needsGears || !o.gears.empty() || !o.padTo.empty())
    return cli::toSessionOptions(o, mode);
  SessionOptions s = cli::toSessionOptions(o, Mode::kStatic);
  s.mode = mode;
  GearOptions& gears = gearOptions(s);
  gears.merge = parseMergePolicy(o.merge);
  gears.fallback = parseGearFallback(o.gearFallback);
  gears.compile = parseGearCompile(o.gearCompile);
  gears.maxPadBytes = o.maxPadBytes;
  return s;
}

class PySession {
 public:
  PySession(const PyGraph& g, const std::string& mode, const py::kwargs& kw)
      : graph_(g.g), options_(runOptionsFromKwargs(kw)) {
    const Mode m = modeFromPython(mode);
    // As the CLI's run: gears given to a mode that takes none would be silently ignored.
    if (!options_.gears.empty() && !modeInfo(m).needsGears)
      fail(ErrorKind::kConfig, "gears= is for mode=\"geared\" (the {} mode ignores gears)", mode);
    session_ = std::make_unique<Session>(*graph_, sessionOptions(options_, m));
  }

  // run(x1, x2) in graph input order, or run(x1=..., x2=...), or run({"x1": ...}).
  py::list run(const py::args& args, const py::kwargs& kwargs) {
    const Graph& g = *graph_;
    std::vector<py::handle> slots(g.inputs.size());
    py::dict named = kwargs;
    if (args.size() == 1 && py::isinstance<py::dict>(args[0]) && g.inputs.size() >= 1) {
      named = py::reinterpret_borrow<py::dict>(args[0]);
    } else {
      if (args.size() > g.inputs.size())
        fail(ErrorKind::kConfig, "run: {} inputs given, the graph has {}", args.size(),
             g.inputs.size());
      for (size_t i = 0; i < args.size(); ++i) slots[i] = args[i];
    }
    for (const auto& item : named) {
      const std::string name = py::str(item.first).cast<std::string>();
      const int idx = g.findInput(name);
      if (idx < 0) fail(ErrorKind::kConfig, "run: the graph has no input %{}", name);
      if (slots[idx]) fail(ErrorKind::kConfig, "run: input %{} given twice", name);
      slots[idx] = item.second;
    }
    std::vector<Tensor> inputs;
    py::dict shapes;
    for (size_t i = 0; i < slots.size(); ++i) {
      const Value& decl = g.value(g.inputs[i]);
      if (!slots[i]) fail(ErrorKind::kConfig, "run: input %{} is missing", decl.name);
      inputs.push_back(tensorFromPython(slots[i], decl, inputCopies_));
      shapes[py::str(decl.name)] = shapeToPython(inputs.back().shape());
    }
    const size_t before = session_->history().size();
    std::vector<Tensor> out;
    try {
      out = session_->run(inputs);
    } catch (...) {
      noteShapes(before, shapes);
      throw;
    }
    noteShapes(before, shapes);
    py::list result;
    for (Tensor& t : out) result.append(toArray(std::move(t)));
    return result;
  }

  // The CLI's --json report without its per-iteration records (those are `history`).
  py::dict stats() const {
    auto j = cli::reportJson(*session_, graph_->sourceFile, "");
    j.erase("model");
    j.erase("trace");
    j.erase("per_iteration");
    return toPython(j);
  }

  // The CLI's whole --json report (report v1, docs/report-schema.json), per_iteration included.
  py::dict report(const std::string& trace) const {
    return toPython(cli::reportJson(*session_, graph_->sourceFile, trace));
  }
  // Writes that report as `gearbox run --json` does: the path checked first, written atomically.
  void writeReport(const std::string& path, const std::string& trace) const {
    checkOutputPath("path", path);
    cli::writeReportFile(path, cli::reportJson(*session_, graph_->sourceFile, trace), nullptr);
  }

  // The CLI's per-iteration records, with the input shapes as {name: [dims]} and every failed
  // guard also as a dict (parseGuard).
  py::list history() const {
    const auto j = cli::reportJson(*session_, graph_->sourceFile, "");
    py::list out = toPython(j["per_iteration"]);
    for (size_t i = 0; i < out.size(); ++i) {
      py::dict rec = out[i];
      py::list guards;
      for (const py::handle& g : py::list(rec["guard_failures"]))
        guards.append(parseGuard(g.cast<std::string>()));
      rec["guards"] = guards;
      auto it = shapes_.find(i);
      rec["shapes"] = it == shapes_.end() ? py::object(py::none()) : py::object(it->second);
    }
    return out;
  }

  void setDimGears(const std::string& input, const py::dict& gears) {
    DimGearList list;
    for (const auto& item : gears) {
      DimGearEntry e;
      e.dim = item.first.cast<int64_t>();
      e.values = item.second.cast<std::vector<int64_t>>();
      list.push_back(std::move(e));
    }
    set_dim_gears(*session_, input, list);
  }

  void compileGears() { gearbox::compileGears(*session_); }
  std::vector<std::string> gearOptions() const { return gearOptionLines(*session_); }
  int64_t inputCopies() const { return inputCopies_; }
  std::string mode() const { return modeName(session_->stats().mode); }
  PyGraph graph() const { return PyGraph{std::make_shared<const Graph>(session_->graph())}; }

 private:
  // Records the shapes of the call (or calls) the session added to its history.
  void noteShapes(size_t before, const py::dict& shapes) {
    for (size_t i = before; i < session_->history().size(); ++i) shapes_[i] = shapes;
  }

  std::shared_ptr<const Graph> graph_;
  cli::RunOptions options_;
  std::unique_ptr<Session> session_;
  std::map<size_t, py::dict> shapes_;
  int64_t inputCopies_ = 0;
};

// A trace from Python: a .jsonl path, or a list of {input: shape} dicts (one per call).
// Returns the signatures and the name errors use.
std::pair<std::vector<InputSignature>, std::string> traceFromPython(const py::object& trace,
                                                                    const Graph& g) {
  if (py::isinstance<py::str>(trace)) {
    const std::string path = trace.cast<std::string>();
    return {cli::loadTrace(path, g), path};
  }
  std::string text;
  for (const py::handle& it : trace)
    text += py::module_::import("json").attr("dumps")(it).cast<std::string>() + "\n";
  return {cli::parseTrace(text, "<trace>", g), "<trace>"};
}

// gearbox.suggest_gears(graph, trace, ...): `gearbox suggest-gears` (driver/gear_suggest.h)
// from Python. Returns its --json report; "gears" there is what Session(gears=...) takes.
py::dict suggestGearsPy(const PyGraph& g, const py::object& trace, int64_t maxGears,
                        const std::string& merge, bool references, bool passes,
                        const std::string& deviceProfile, const std::vector<std::string>& cost,
                        const std::string& maxMemory, double maxStartupUs,
                        const std::string& graphPool, const std::string& gearFallback) {
  // Signed and checked as the CLI checks --max-gears: -1 is not 2^64-1.
  if (maxGears < 0 || maxGears > static_cast<int64_t>(kMaxGears))
    fail(ErrorKind::kConfig, "max_gears {}: TorchAir needs 2 to {} gears per dim", maxGears,
         kMaxGears);
  CostModel model =
      loadDeviceProfile(deviceProfile.empty() ? std::string(kDefaultProfile) : deviceProfile);
  for (const std::string& a : cost) applyCostOverride(model, a);
  const auto [sigs, traceName] = traceFromPython(trace, *g.g);
  cli::SuggestOptions so;
  so.maxGears = static_cast<size_t>(maxGears);
  so.merge = parseMergePolicy(merge);
  so.references = references;
  so.runPasses = passes;
  // The budgets, checked as the CLI checks them (tools/cmd_suggest_gears.cpp).
  so.maxMemoryBytes =
      maxMemory.empty() ? model.memoryCapacityBytes : parseByteSize(maxMemory, "max_memory");
  if (!std::isfinite(maxStartupUs) || maxStartupUs < 0)
    fail(ErrorKind::kConfig, "max_startup_us {}: expected a finite number >= 0 (0: none)",
         maxStartupUs);
  so.maxStartupUs = maxStartupUs;
  const auto pool = parseGraphPool(graphPool);
  if (!pool) fail(ErrorKind::kConfig, "graph_pool '{}': expected shared or separate", graphPool);
  so.pool = *pool;
  const std::vector<std::string> fallbacks = gearFallbackNames();
  if (std::find(fallbacks.begin(), fallbacks.end(), gearFallback) == fallbacks.end())
    fail(ErrorKind::kConfig, "gear_fallback '{}': expected one of {}", gearFallback,
         fmt::join(fallbacks, ", "));
  so.fallback = parseGearFallback(gearFallback);
  const cli::GearSuggestion sug = cli::suggestGears(*g.g, sigs, model, so);
  nlohmann::ordered_json j = cli::suggestionJson(sug, model.name);
  j["model"] = g.g->sourceFile;
  j["trace"] = traceName;
  return toPython(j);
}

// gearbox.compare(graph, trace, modes, **options): one Session per mode over the same trace and
// the same deterministic data as `gearbox compare`; one record per mode, the CLI's --json report
// without per-iteration records, plus the largest difference from the reference executor.
py::list compare(const PyGraph& g, const py::object& trace, const std::vector<std::string>& modes,
                 const py::kwargs& kw) {
  cli::RunOptions o = runOptionsFromKwargs(kw);
  std::vector<InputSignature> sigs;
  std::string traceName;
  if (py::isinstance<py::str>(trace)) {
    traceName = trace.cast<std::string>();
    sigs = cli::loadTrace(traceName, *g.g);
  } else {
    traceName = "<trace>";
    std::string text;
    for (const py::handle& it : trace)
      text += py::module_::import("json").attr("dumps")(it).cast<std::string>() + "\n";
    sigs = cli::parseTrace(text, traceName, *g.g);
  }
  if (sigs.empty()) fail(ErrorKind::kParse, "{}: the trace has no iterations", traceName);
  py::list records;
  std::ostringstream quiet;
  for (const std::string& name : modes) {
    const Mode mode = modeFromPython(name);
    Session s(*g.g, sessionOptions(o, mode));
    const auto outs = cli::runTrace(s, sigs, o, quiet, /*keepOutputs=*/true);
    double diff = 0;
    for (size_t i = 0; i < sigs.size(); ++i) {
      const auto inputs = makeInputs(s.graph(), sigs[i], o.seed + i);
      const auto ref = referenceRun(*g.g, inputs);
      for (size_t k = 0; k < ref.size() && k < outs[i].size(); ++k)
        diff = std::max(diff, maxAbsDiff(ref[k], outs[i][k]));
    }
    auto j = cli::reportJson(s, g.g->sourceFile, traceName);
    j.erase("per_iteration");
    // The options are the caller's own kwargs; the nested config block has no flat column.
    j.erase("config");
    j["max_abs_diff_vs_reference"] = diff;
    // A DataFrame wants flat columns: nested objects (the modeled breakdown) become
    // "modeled_compute_us"-style keys.
    nlohmann::ordered_json flat;
    for (auto& [key, v] : j.items()) {
      if (!v.is_object()) {
        flat[key] = v;
        continue;
      }
      for (auto& [sub, sv] : v.items()) flat[key + "_" + sub] = sv;
    }
    records.append(toPython(flat));
  }
  return records;
}

}  // namespace
}  // namespace gearbox::python

PYBIND11_MODULE(_gearbox, m) {
  using namespace gearbox;
  using namespace gearbox::python;
  m.doc() = "gearbox: compile a graph per shape and measure what shape changes cost";
  m.attr("__version__") = GEARBOX_VERSION;

  // gearbox.Error carries the CLI's message (str(e)), its kind for code (e.kind: "parse",
  // "shape", ...) and the CLI's wording of the kind (e.label: "parse error"): the CLI prints
  // the same failure as "gearbox: <label>: <message>".
  static py::exception<Error> error(m, "Error", PyExc_RuntimeError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      py::object inst = py::handle(error.ptr())(e.what());
      inst.attr("kind") = errorKindId(e.kind());
      inst.attr("label") = errorKindName(e.kind());
      PyErr_SetObject(error.ptr(), inst.ptr());
    } catch (const py::cast_error& e) {
      // An option value .cast<>() could not take: a str holding lone surrogates (bytes that
      // were not UTF-8, decoded with surrogateescape) or a value of the wrong type.
      py::object inst = py::handle(error.ptr())(
          std::string("an option value could not be converted (the wrong type, or text that is "
                      "not UTF-8): ") +
          e.what());
      inst.attr("kind") = errorKindId(ErrorKind::kConfig);
      inst.attr("label") = errorKindName(ErrorKind::kConfig);
      PyErr_SetObject(error.ptr(), inst.ptr());
    } catch (const py::builtin_exception&) {
      throw;  // pybind11's others (StopIteration, IndexError, ...) keep their Python types
    } catch (const py::error_already_set&) {
      throw;  // a Python exception raised inside a call passes through unchanged
    } catch (const std::bad_alloc&) {
      throw;  // MemoryError
    } catch (const std::exception& e) {
      // The one error boundary, as the CLI's main: any other C++ exception (a JSON type error,
      // a filesystem error) is a gearbox.Error, not a bare RuntimeError. Its kind is "config":
      // these come from values handed in, never from a broken invariant.
      py::object inst = py::handle(error.ptr())(e.what());
      inst.attr("kind") = errorKindId(ErrorKind::kConfig);
      inst.attr("label") = errorKindName(ErrorKind::kConfig);
      PyErr_SetObject(error.ptr(), inst.ptr());
    }
  });

  py::class_<PyGraph>(m, "Graph")
      .def_property_readonly("name", [](const PyGraph& g) { return g.g->name; })
      .def_property_readonly("inputs", [](const PyGraph& g) { return graphInputs(*g.g); })
      .def_property_readonly("outputs",
                             [](const PyGraph& g) {
                               std::vector<std::string> names;
                               for (ValueId v : g.g->outputs) names.push_back(g.g->value(v).name);
                               return names;
                             })
      .def_property_readonly("num_nodes", [](const PyGraph& g) { return g.g->nodes.size(); })
      .def("text", [](const PyGraph& g) { return printGraph(*g.g); })
      .def("__str__", [](const PyGraph& g) { return printGraph(*g.g); })
      .def("__repr__", [](const PyGraph& g) {
        return fmt::format("<gearbox.Graph {} with {} inputs, {} nodes>", g.g->name,
                           g.g->inputs.size(), g.g->nodes.size());
      });

  m.def(
      "op_names",
      [] {
        std::vector<std::string> names;
        for (int i = 0; i < kOpCount; ++i) names.emplace_back(opTextName(static_cast<OpKind>(i)));
        return names;
      },
      "The IR names of every op this build knows (graph/ops.def).");
  m.def(
      "load",
      [](const std::string& path) {
        return PyGraph{std::make_shared<const Graph>(loadGraph(path))};
      },
      py::arg("path"), "Loads a .gbx model (docs/IR.md).");
  m.def(
      "parse",
      [](const std::string& text, const std::string& file) {
        return PyGraph{std::make_shared<const Graph>(parseGraph(text, file))};
      },
      py::arg("text"), py::arg("file") = "<string>",
      "Parses IR text; `file` names it in errors and anchors relative .npy paths.");
  m.def(
      "reference_run",
      [](const PyGraph& g, const py::args& args) {
        std::vector<Tensor> inputs;
        int64_t copies = 0;
        if (args.size() != g.g->inputs.size())
          fail(ErrorKind::kConfig, "reference_run: {} inputs given, the graph has {}", args.size(),
               g.g->inputs.size());
        for (size_t i = 0; i < args.size(); ++i)
          inputs.push_back(tensorFromPython(args[i], g.g->value(g.g->inputs[i]), copies));
        py::list out;
        for (Tensor& t : referenceRun(*g.g, inputs)) out.append(toArray(std::move(t)));
        return out;
      },
      "Runs the graph with the reference executor (the oracle of the tests).");

  py::class_<PyBuilder>(m, "GraphBuilder")
      .def(py::init<std::string>(), py::arg("name") = "main")
      .def("input", &PyBuilder::input, py::arg("name"), py::arg("dtype"), py::arg("shape"))
      .def("constant", &PyBuilder::constant, py::arg("data"), py::arg("name") = "")
      .def("op", &PyBuilder::op, py::arg("kind"), py::arg("inputs"), py::arg("dim") = py::none(),
           py::arg("name") = "", py::arg("attrs") = py::dict(),
           "Any op of gearbox.op_names(); attrs maps attribute names to values as the op "
           "declares them (ints, int lists, floats; docs/IR.md), e.g. "
           "op('conv2d', [x, w], attrs={'strides': [2, 2]}).")
      .def(
          "add",
          [](PyBuilder& b, ValueId x, ValueId y, const std::string& name) {
            return b.op("add", {x, y}, std::nullopt, name);
          },
          py::arg("a"), py::arg("b"), py::arg("name") = "")
      .def(
          "matmul",
          [](PyBuilder& b, ValueId x, ValueId y, const std::string& name) {
            return b.op("matmul", {x, y}, std::nullopt, name);
          },
          py::arg("a"), py::arg("b"), py::arg("name") = "")
      .def(
          "index_select",
          [](PyBuilder& b, ValueId x, ValueId idx, int64_t dim, const std::string& name) {
            return b.op("index_select", {x, idx}, dim, name);
          },
          py::arg("x"), py::arg("index"), py::arg("dim"), py::arg("name") = "")
      .def(
          "cat",
          [](PyBuilder& b, const std::vector<ValueId>& xs, int64_t dim, const std::string& name) {
            return b.op("cat", xs, dim, name);
          },
          py::arg("inputs"), py::arg("dim"), py::arg("name") = "")
      .def("output", &PyBuilder::output)
      .def("shape", &PyBuilder::shape)
      .def("build", &PyBuilder::build);

  py::class_<PySession>(m, "Session")
      .def(py::init<const PyGraph&, const std::string&, const py::kwargs&>(), py::arg("graph"),
           py::arg("mode") = "static")
      .def("run", &PySession::run)
      .def_property_readonly("stats", &PySession::stats)
      .def_property_readonly("history", &PySession::history)
      .def_property_readonly("input_copies", &PySession::inputCopies)
      .def_property_readonly("mode", &PySession::mode)
      .def_property_readonly("graph", &PySession::graph)
      .def_property_readonly("gear_options", &PySession::gearOptions)
      .def("compile_gears", &PySession::compileGears)
      .def("set_dim_gears", &PySession::setDimGears, py::arg("input"), py::arg("dim_gears"))
      .def("report", &PySession::report, py::arg("trace") = "",
           "The CLI's --json report of the calls so far (docs/report-schema.json).")
      .def("write_report", &PySession::writeReport, py::arg("path"), py::arg("trace") = "",
           "Writes report() as `gearbox run --json` does (atomically).");

  m.def(
      "set_dim_gears",
      [](PySession& s, const std::string& input, const py::dict& gears) {
        s.setDimGears(input, gears);
      },
      py::arg("session"), py::arg("input"), py::arg("dim_gears"),
      "TorchAir's spelling: set_dim_gears(session, \"x1\", {0: [2, 4]}).");
  m.def("suggest_gears", &suggestGearsPy, py::arg("graph"), py::arg("trace"),
        py::arg("max_gears") = static_cast<int64_t>(kMaxGears), py::arg("merge") = "zip",
        py::arg("references") = true, py::arg("passes") = true, py::arg("device_profile") = "",
        py::arg("cost") = std::vector<std::string>{}, py::arg("max_memory") = "",
        py::arg("max_startup_us") = 0.0, py::arg("graph_pool") = "shared",
        py::arg("gear_fallback") = "pad",
        "`gearbox suggest-gears` (docs/gears.md): the gears that minimise geared mode's MODELED "
        "total over the trace (under gear_fallback), with the usual choices beside them.");
  m.def("compare", &compare, py::arg("graph"), py::arg("trace"),
        py::arg("modes") = modeNames(ModeSet::kWithoutGears));
  m.def(
      "run", [](const py::kwargs& kw) { return runCommandPy(cli::kRunOnly, kw); },
      "`gearbox run` (gearbox.run in python/gearbox/__init__.py wraps it).");
  m.def(
      "compare_report", [](const py::kwargs& kw) { return runCommandPy(cli::kCompareOnly, kw); },
      "`gearbox compare` (gearbox.compare_report in python/gearbox/__init__.py wraps it).");
  m.def("sweep", &sweepPy,
        "`gearbox sweep` (gearbox.sweep in python/gearbox/__init__.py wraps it).");
  m.def(
      "run_options",
      [] {
        py::list rows;
        for (const cli::OptionInfo& info : cli::runOptionTable()) {
          py::dict r;
          r["cli"] = info.names;
          r["name"] = info.name;
          r["python"] = info.pythonName().empty() ? py::object(py::none())
                                                  : py::object(py::str(info.pythonName()));
          r["alias"] = info.python.alias;
          r["session"] = info.sessionTakes();
          r["not_in_python"] = info.python.accepted ? "" : info.python.reason;
          r["not_in_session"] = info.sessionTakes() ? "" : info.python.reason;
          // A positional argument of gearbox.run and gearbox.compare_report (compare_report
          // takes trace=None with sweep_dim=).
          r["required"] = (info.flags & (cli::kRequired | cli::kRequiredByRun)) != 0;
          r["type"] = info.type;
          r["default"] = info.defaultText;
          r["run"] = info.takes(cli::kRunOnly);
          r["compare"] = info.takes(cli::kCompareOnly);
          r["choices"] = info.check.choices;
          r["config"] = info.config;
          r["help"] = info.help.run;
          rows.append(r);
        }
        return rows;
      },
      "The options table (driver/run_options.def): one dict per option of `gearbox run` and "
      "`gearbox compare`, with its Python keyword, and whether a Session takes it (or why not).");
  m.def(
      "mode_table",
      [] {
        py::list rows;
        for (const ModeInfo& mi : modeTable())
          rows.append(py::make_tuple(std::string(mi.name), mi.needsGears));
        return rows;
      },
      "The mode table (executor/modes/modes.def): (name, needs_gears) per mode, in order.");
}
