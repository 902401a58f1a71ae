#include "tools/commands.h"
namespace gearbox::cli {
void registerPrint(CLI::App&) {}
void registerRun(CLI::App&) {}
void registerEval(CLI::App&) {}
}  // namespace gearbox::cli
