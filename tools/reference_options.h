#pragma once
// --check-reference, --rtol and --atol (driver/reference_check.h does the checking).

#include <CLI/CLI.hpp>

#include "driver/reference_check.h"

namespace gearbox::cli {

// The help of --check-reference, --rtol and --atol (eval's and tools/run_options.def's).
inline constexpr const char* kCheckReferenceHelp =
    "Also run the reference executor on the same inputs and report the max abs/rel error per "
    "output; exit 1 when an element is outside |out - ref| <= atol + rtol * |ref|";
inline constexpr const char* kRtolHelp = "Relative tolerance of --check-reference";
inline constexpr const char* kAtolHelp = "Absolute tolerance of --check-reference";

// Adds --check-reference, --rtol and --atol to a command (eval; run and compare take them from
// the options table).
void addReferenceOptions(CLI::App* cmd, bool& check, ReferenceTolerance& tol);

}  // namespace gearbox::cli
