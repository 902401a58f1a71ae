#include "tools/reference_options.h"

namespace gearbox::cli {

void addReferenceOptions(CLI::App* cmd, bool& check, ReferenceTolerance& tol) {
  cmd->add_flag("--check-reference", check,
                "Also run the reference executor on the same inputs and report the max abs/rel "
                "error per output; exit 1 when an element is outside |out - ref| <= atol + "
                "rtol * |ref|");
  cmd->add_option("--rtol", tol.rtol, "Relative tolerance of --check-reference")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--atol", tol.atol, "Absolute tolerance of --check-reference")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
}

}  // namespace gearbox::cli
