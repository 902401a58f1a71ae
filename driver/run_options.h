#pragma once
// Options shared by `gearbox run` and `gearbox compare`, and the report both print. The options
// are declared once, as rows of driver/run_options.def: the RunOptions members, the CLI11
// registration, the Python keywords and docs/cli.md's option list all come from there.

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "driver/reference_check.h"
#include "driver/run_report.h"
#include "driver/trace.h"
#include "executor/modes/gear_options.h"
#include "executor/session.h"

namespace gearbox::cli {

// Cache capacities above this are a typo, not a plan: 16M entries of kernel specs or plans is
// far more than any trace compiles, and it keeps the per-shard arithmetic far from overflow.
constexpr size_t kMaxCacheCapacity = size_t{1} << 24;

// Which command takes an option (the commands column of driver/run_options.def).
enum OptionCommands : unsigned { kRunOnly = 1, kCompareOnly = 2, kRunAndCompare = 3 };
// The flags column: kRequired (the CLI refuses to run without it), kShowDefault (--help prints
// the default), kRequiredByRun (run and sweep refuse to run without it; compare checks it
// itself: --trace or --sweep-dim).
enum OptionFlags : unsigned { kNoFlags = 0, kRequired = 1, kShowDefault = 2, kRequiredByRun = 4 };

// The check column: the allowed values (oneOf) or a CLI11 validator (within). The CLI hands
// the validator to CLI11; the Python binding applies the same one to the keyword's text.
struct OptionCheck {
  std::vector<std::string> choices;
  std::optional<CLI::Validator> validator;
};
inline OptionCheck noCheck() {
  return {};
}
inline OptionCheck oneOf(std::vector<std::string> choices) {
  OptionCheck c;
  c.validator = CLI::IsMember(choices);
  c.choices = std::move(choices);
  return c;
}
template <class... S>
OptionCheck oneOf(const S&... choices) {
  return oneOf(std::vector<std::string>{std::string(choices)...});
}
inline OptionCheck within(CLI::Validator v) {
  return {{}, std::move(v)};
}

// The python column: which Python calls take the option as a keyword (its long name with '_'
// for '-', in lower case, unless the row names another), under which older keyword too, and
// why a Session does not take it (command only) or why Python does not at all.
struct PythonUse {
  bool accepted = true;
  // Session(...) and compare(...)'s records take it too; false: only gearbox.run and
  // gearbox.compare_report, which do what `gearbox run` and `gearbox compare` do.
  bool session = true;
  std::string keyword;  // when the long name is no Python identifier ("asserts": assert is one)
  std::string alias;    // an older keyword still accepted ("kernel_bundles")
  std::string reason;   // why a Session does not take it, or why Python does not at all
};
inline PythonUse python() {
  return {};
}
inline PythonUse pythonAlso(std::string alias) {
  return {true, true, "", std::move(alias), ""};
}
inline PythonUse commandOnly(std::string why) {
  return {true, false, "", "", std::move(why)};
}
inline PythonUse commandOnlyAs(std::string keyword, std::string why) {
  return {true, false, std::move(keyword), "", std::move(why)};
}
inline PythonUse notInPython(std::string reason) {
  return {false, false, "", "", std::move(reason)};
}
// The reasons several command-only rows share.
inline const char* const kLogIsTheCommands =
    "a Session writes to the process's compile log as it is";
inline const char* const kPrintedByTheCommands =
    "a Session prints nothing; run and compare_report return the printed text";
inline const char* const kFilesOfTheCommands = "the files of a whole run over a trace";
inline const char* const kBoundsOfTheCommands =
    "bound Session.stats with Python's assert (`assert` is a Python keyword, hence asserts)";

// The help column; perCommand when run and compare word it apart.
struct OptionHelp {
  std::string run, compare;
  OptionHelp(std::string text) : run(text), compare(std::move(text)) {}
  OptionHelp(const char* text) : OptionHelp(std::string(text)) {}
  OptionHelp(std::string runText, std::string compareText)
      : run(std::move(runText)), compare(std::move(compareText)) {}
};
inline OptionHelp perCommand(std::string run, std::string compare) {
  return {std::move(run), std::move(compare)};
}

// The options of run and compare, one member per row of driver/run_options.def.
struct RunOptions {
#define GEARBOX_RUN_OPTION(field, type, def, ...) type field = def;
#include "driver/run_options.def"
#undef GEARBOX_RUN_OPTION
  ReferenceTolerance tolerance() const {
    return {rtol, atol};
  }
};

// One row of the table as data, for the Python binding, the docs and the tests.
struct OptionInfo {
  std::string names;  // CLI11 spelling: "MODEL", "--trace", "-q,--quiet"
  std::string name;   // the long name without dashes ("kernel-cache-capacity"), or "MODEL"
  std::string type;   // TEXT, INT, UINT, FLOAT, FLAG or LIST (repeatable TEXT)
  std::string defaultText;
  unsigned commands = kRunAndCompare, flags = kNoFlags;
  OptionCheck check;
  std::string config;  // key in the report's config block, "" if none
  PythonUse python;
  OptionHelp help = "";
  // Sets the member from text, converted as CLI11 converts the command line (one value, or
  // each value of a LIST). False when a value does not convert.
  std::function<bool(RunOptions&, const std::vector<std::string>&)> set;

  bool takes(OptionCommands c) const { return (commands & c) != 0; }
  // The Python keyword ("kernel_cache_capacity", "model"), empty when Python does not take it.
  std::string pythonName() const;
  // Whether a Session (and compare's records) take it, not only gearbox.run/compare_report.
  bool sessionTakes() const { return python.accepted && python.session; }
};

// Every row, in table (and --help) order.
const std::vector<OptionInfo>& runOptionTable();
// The option list of docs/cli.md, generated from the table (tests/run_options_table_test.cpp
// keeps the doc equal to it).
std::string runOptionsMarkdown();
// Sets the option `info` from a text as the CLI would, applying its check. Error(kConfig)
// naming `spelling` (how the caller named the option) when the value is refused.
void setRunOption(RunOptions& o, const OptionInfo& info, const std::vector<std::string>& values,
                  const std::string& spelling);

// --gears takes the JSON itself or @path to a file holding it (tools/cmd_gears.cpp).
std::string gearsText(const std::string& arg);
// --pad-to NAME=DIMS (tools/cmd_gears.cpp): "pred=8,20,4" -> {"pred", [8, 20, 4]}.
std::pair<std::string, Shape> parsePadTo(const std::string& arg);

// Creates the stores and hooks those options ask for.
void attachKernelStores(const RunOptions& o, SessionOptions& s);

SessionOptions toSessionOptions(const RunOptions& o, Mode mode);

// --threads N for a whole command (run, compare): while one lives, oneTBB runs on at most N
// threads in this process (a tbb::global_control), so the reference check and compare's
// warm-up stay within the cap too, not only the sessions (each of which also holds an arena of
// N, SessionOptions::threads). threads == 0 does nothing.
class ProcessThreadCap {
 public:
  explicit ProcessThreadCap(int threads);
  ~ProcessThreadCap();
  ProcessThreadCap(const ProcessThreadCap&) = delete;
  ProcessThreadCap& operator=(const ProcessThreadCap&) = delete;

 private:
  struct Control;  // the tbb::global_control (run_options.cpp)
  std::unique_ptr<Control> control_;
};
// The files a run reads (MODEL, --trace, --gears @FILE, a profile file) as (option, path), for
// checkOutputsAreNotInputs.
NamedPaths inputPaths(const RunOptions& o);
// Points the compile log where --log and --log-stdout say, and its warnings at `warnings`
// (printed once each, counted; not printed under -q).
void configureLogFromOptions(const RunOptions& o, std::ostream& warnings);

Verbosity verbosityOf(const RunOptions& o);  // Error(kConfig) for -q with -v

// Runs every trace iteration through the session with deterministic inputs (seed + i),
// printing what the output level asks for (through `tracker` when given; without one, one line
// per iteration unless quiet). `next` yields the iterations one at a time (a TraceReader
// streams a file; the vector form below wraps one in memory). An Error during a call is
// rethrown naming the mode, the iteration and the trace file:line (when the entry has one).
// Returns the outputs of every call when `keepOutputs` (compare checks the modes agree). With
// `check`, every call's outputs are compared with the reference executor's on the same inputs.
using TraceNext = std::function<bool(TraceEntry&)>;
std::vector<std::vector<Tensor>> runTrace(Session& session, const TraceNext& next,
                                          const RunOptions& o, std::ostream& os,
                                          bool keepOutputs = false, ReferenceCheck* check = nullptr,
                                          RunTracker* tracker = nullptr);
std::vector<std::vector<Tensor>> runTrace(Session& session,
                                          const std::vector<InputSignature>& trace,
                                          const RunOptions& o, std::ostream& os,
                                          bool keepOutputs = false, ReferenceCheck* check = nullptr,
                                          RunTracker* tracker = nullptr,
                                          const std::vector<int>* traceLines = nullptr);

}  // namespace gearbox::cli

// The JSON report, the summary and --assert over these options (driver/report_json.h).
#include "driver/report_json.h"  // IWYU pragma: export
