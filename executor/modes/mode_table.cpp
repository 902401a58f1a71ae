#include "executor/modes/mode_table.h"

namespace gearbox {

namespace {

constexpr ModeInfo kModes[] = {
#define GEARBOX_MODE(e, name, factory, needsGears, summary) \
  {Mode::k##e, #e, name, needsGears, summary},
#include "executor/modes/modes.def"
#undef GEARBOX_MODE
};

bool inSet(const ModeInfo& m, ModeSet set) {
  return set == ModeSet::kAll || !m.needsGears;
}

}  // namespace

std::span<const ModeInfo> modeTable() {
  return kModes;
}

const ModeInfo& modeInfo(Mode m) {
  // The enum is generated from the same rows in the same order.
  return kModes[static_cast<size_t>(m)];
}

const char* modeName(Mode m) {
  const size_t i = static_cast<size_t>(m);
  // Names are literals from modes.def, so data() is NUL-terminated.
  return i < std::size(kModes) ? kModes[i].name.data() : "?";
}

std::string modeIdentifier(Mode m) {
  std::string id = modeName(m);
  for (char& c : id)
    if (c == '-') c = '_';
  return id;
}

std::optional<Mode> parseMode(std::string_view s) {
  for (const ModeInfo& m : kModes)
    if (m.name == s) return m.mode;
  return std::nullopt;
}

std::vector<Mode> modes(ModeSet set) {
  std::vector<Mode> out;
  for (const ModeInfo& m : kModes)
    if (inSet(m, set)) out.push_back(m.mode);
  return out;
}

std::vector<std::string> modeNames(ModeSet set) {
  std::vector<std::string> out;
  for (const ModeInfo& m : kModes)
    if (inSet(m, set)) out.emplace_back(m.name);
  return out;
}

std::string joinModeNames(ModeSet set, std::string_view sep, std::string_view last) {
  const std::vector<std::string> names = modeNames(set);
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += i + 1 == names.size() ? last : sep;
    out += names[i];
  }
  return out;
}

}  // namespace gearbox
