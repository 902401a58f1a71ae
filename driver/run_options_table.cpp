// What driver/run_options.def drives here: the table as data (for the Python binding,
// docs/cli.md and the tests), the setter both front ends share, and the option list of
// docs/cli.md. The CLI11 registration of run and compare is tools/cli_options.cpp.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <type_traits>

#include "driver/run_options.h"
#include "graph/error.h"

namespace gearbox::cli {

namespace {

template <class T>
std::string typeName() {
  if constexpr (std::is_same_v<T, bool>)
    return "FLAG";
  else if constexpr (std::is_same_v<T, std::string>)
    return "TEXT";
  else if constexpr (std::is_same_v<T, std::vector<std::string>>)
    return "LIST";
  else if constexpr (std::is_floating_point_v<T>)
    return "FLOAT";
  else if constexpr (std::is_unsigned_v<T>)
    return "UINT";
  else
    return "INT";
}

template <class T>
std::string defaultText(const T& v) {
  if constexpr (std::is_same_v<T, bool>)
    return v ? "true" : "false";
  else if constexpr (std::is_same_v<T, std::string>)
    return v;
  else if constexpr (std::is_same_v<T, std::vector<std::string>>)
    return fmt::format("{}", fmt::join(v, ","));
  else
    return fmt::format("{}", v);
}

// "-q,--quiet" -> "quiet"; "MODEL" -> "MODEL".
std::string longName(const std::string& names) {
  const size_t at = names.rfind("--");
  return at == std::string::npos ? names : names.substr(at + 2);
}

// The row's setter: each text converted as CLI11 converts the command line.
template <class T, class Field>
std::function<bool(RunOptions&, const std::vector<std::string>&)> setter(Field field) {
  return [field](RunOptions& o, const std::vector<std::string>& values) {
    T& dst = field(o);
    if constexpr (std::is_same_v<T, std::vector<std::string>>) {
      dst = values;
      return true;
    } else {
      if (values.size() != 1) return false;
      T v{};
      if (!CLI::detail::lexical_cast(values[0], v)) return false;
      dst = v;
      return true;
    }
  };
}

std::vector<OptionInfo> buildTable() {
  std::vector<OptionInfo> rows;
  const RunOptions defaults;
#define GEARBOX_RUN_OPTION(field, type, def, names, commands, flags, check, config, py, help)      \
  rows.push_back(OptionInfo{names, longName(names), typeName<type>(), defaultText(defaults.field), \
                            commands, flags, check, config, py, help,                              \
                            setter<type>([](RunOptions& o) -> type& { return o.field; })});
#include "driver/run_options.def"
#undef GEARBOX_RUN_OPTION
  return rows;
}

std::string cell(std::string text) {
  // A '|' would end the markdown cell.
  for (size_t at = text.find('|'); at != std::string::npos; at = text.find('|', at + 2))
    text.replace(at, 1, "\\|");
  return text;
}

}  // namespace

std::string OptionInfo::pythonName() const {
  if (!python.accepted) return "";
  if (!python.keyword.empty()) return python.keyword;
  std::string n = name;
  std::replace(n.begin(), n.end(), '-', '_');
  // "MODEL" (positional on the command line) -> model.
  std::transform(n.begin(), n.end(), n.begin(), [](unsigned char ch) { return std::tolower(ch); });
  return n;
}

const std::vector<OptionInfo>& runOptionTable() {
  static const std::vector<OptionInfo> table = buildTable();
  return table;
}

void setRunOption(RunOptions& o, const OptionInfo& info, const std::vector<std::string>& values,
                  const std::string& spelling) {
  if (!info.check.choices.empty()) {
    for (const std::string& v : values)
      if (std::find(info.check.choices.begin(), info.check.choices.end(), v) ==
          info.check.choices.end()) {
        const auto& c = info.check.choices;
        const std::vector<std::string> head(c.begin(), c.end() - 1);
        fail(ErrorKind::kConfig, "{} '{}': expected {} or {}", spelling, v, fmt::join(head, ", "),
             c.back());
      }
  } else if (info.check.validator) {
    for (std::string v : values) {
      const std::string why = (*info.check.validator)(v);
      if (!why.empty()) fail(ErrorKind::kConfig, "{}: {}", spelling, why);
    }
  }
  if (!info.set(o, values))
    fail(ErrorKind::kConfig, "{}: '{}' is not a value of type {}", spelling, fmt::join(values, ","),
         info.type);
}

std::string runOptionsMarkdown() {
  std::string md =
      "| option | run | compare | default | Python keyword | help |\n"
      "|--------|-----|---------|---------|----------------|------|\n";
  for (const OptionInfo& r : runOptionTable()) {
    const std::string help = r.help.run == r.help.compare || !r.takes(kRunOnly) ? r.help.compare
                             : !r.takes(kCompareOnly)
                                 ? r.help.run
                                 : fmt::format("run: {}; compare: {}", r.help.run, r.help.compare);
    std::string py = !r.python.accepted ? "(" + r.python.reason + ")"
                     : r.sessionTakes() ? "`" + r.pythonName() + "`"
                                        : fmt::format("`{}` (run, compare_report; not Session: {})",
                                                      r.pythonName(), r.python.reason);
    if (!r.python.alias.empty()) py += " (also `" + r.python.alias + "`)";
    md += fmt::format("| `{}` {} | {} | {} | {} | {} | {} |\n", r.names, r.type,
                      r.takes(kRunOnly) ? "yes" : "", r.takes(kCompareOnly) ? "yes" : "",
                      r.defaultText.empty() ? "" : "`" + cell(r.defaultText) + "`", cell(py),
                      cell(help));
  }
  return md;
}

}  // namespace gearbox::cli
