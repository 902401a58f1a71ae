#include "tools/commands.h"

namespace gearbox::cli {
int gExitCode = 0;
}
