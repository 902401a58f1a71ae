#pragma once
// --check-reference, --rtol and --atol (driver/reference_check.h does the checking).

#include <CLI/CLI.hpp>

#include "driver/reference_check.h"

namespace gearbox::cli {

// Adds --check-reference, --rtol and --atol to a command (eval; run and compare take them from
// the options table).
void addReferenceOptions(CLI::App* cmd, bool& check, ReferenceTolerance& tol);

}  // namespace gearbox::cli
