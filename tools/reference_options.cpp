#include "tools/reference_options.h"

namespace gearbox::cli {

void addReferenceOptions(CLI::App* cmd, bool& check, ReferenceTolerance& tol) {
  cmd->add_flag("--check-reference", check, kCheckReferenceHelp);
  cmd->add_option("--rtol", tol.rtol, kRtolHelp)
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--atol", tol.atol, kAtolHelp)
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
}

}  // namespace gearbox::cli
