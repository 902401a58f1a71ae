#pragma once
// The execution modes, generated from executor/modes/modes.def: the Mode enum, names, and
// the lists every other place uses (CLI help and validation, compare's default set, test and
// bench parameters). Nothing else in the tree spells out a list of mode names; a test greps
// for one (tests/mode_table_test.cpp).

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace gearbox {

enum class Mode {
#define GEARBOX_MODE(e, name, factory, needsGears, summary) k##e,
#include "executor/modes/modes.def"
#undef GEARBOX_MODE
};

// One row of the mode table.
struct ModeInfo {
  Mode mode;
  std::string_view id;    // the enumerator without its k: "Static"
  std::string_view name;  // "static"
  bool needsGears;        // needs gear specs: not in eval, not in compare's default set
  std::string_view summary;
};

// Every mode, in table order.
std::span<const ModeInfo> modeTable();
const ModeInfo& modeInfo(Mode m);
const char* modeName(Mode m);
// The name as an identifier, '-' spelled '_' ("reduce_overhead"): test parameter names.
std::string modeIdentifier(Mode m);
std::optional<Mode> parseMode(std::string_view s);

// Which modes a list holds.
enum class ModeSet {
  kAll,          // every mode
  kWithoutGears  // the modes that run without gear specs (eval; compare's default set)
};
std::vector<Mode> modes(ModeSet set = ModeSet::kAll);
std::vector<std::string> modeNames(ModeSet set = ModeSet::kAll);
// "eager, static, dynamic, auto or geared" (help text) or with `last` = ", " a plain list.
std::string joinModeNames(ModeSet set, std::string_view sep = ", ", std::string_view last = " or ");

}  // namespace gearbox
