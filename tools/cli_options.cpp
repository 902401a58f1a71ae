// The CLI11 registration of run's and compare's options, from the one table
// (driver/run_options.def).
#include "tools/cli_options.h"

#include <fmt/format.h>

#include <type_traits>

#include "driver/sweep.h"

namespace gearbox::cli {

namespace {

template <class T>
void addOne(CLI::App* cmd, const std::string& names, T& field, const std::string& help,
            unsigned flags, const OptionCheck& check, bool required) {
  CLI::Option* opt;
  if constexpr (std::is_same_v<T, bool>)
    opt = cmd->add_flag(names, field, help);
  else
    opt = cmd->add_option(names, field, help);
  if (check.validator) opt->check(*check.validator);
  if (required) opt->required();
  if (flags & kShowDefault) opt->capture_default_str();
}

}  // namespace

void addRunOptions(CLI::App* cmd, RunOptions& o, OptionCommands command) {
  // Expanded per row rather than looped over runOptionTable(): CLI11 binds to the typed member.
#define GEARBOX_RUN_OPTION(field, type, def, names, commands, flags, check, config, py, help) \
  if ((commands)&command) {                                                                   \
    const OptionHelp h = help;                                                                \
    addOne(cmd, names, o.field, command == kRunOnly ? h.run : h.compare, flags, check,        \
           ((flags)&kRequired) || (((flags)&kRequiredByRun) && command == kRunOnly));         \
  }
#include "driver/run_options.def"
#undef GEARBOX_RUN_OPTION
}

void addSweepOptions(CLI::App* cmd, RunOptions& o) {
  // MODEL, --trace and every option a grid may vary, as the value every point shares.
  auto takes = [](const char* names) {
    for (const OptionInfo& r : runOptionTable())
      if (r.names == names) return r.name == "MODEL" || r.name == "trace" || sweepTakes(r);
    return false;
  };
#define GEARBOX_RUN_OPTION(field, type, def, names, commands, flags, check, config, py, help) \
  if (takes(names)) {                                                                         \
    const OptionHelp h = help;                                                                \
    addOne(cmd, names, o.field, h.run, flags, check,                                          \
           ((flags) & (kRequired | kRequiredByRun)) != 0);                                    \
  }
#include "driver/run_options.def"
#undef GEARBOX_RUN_OPTION
}

}  // namespace gearbox::cli
