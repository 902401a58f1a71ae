// The recompile report's compile-log parser (compiler/recompile_report.h).
#include "compiler/recompile_report.h"
#include "fuzz_common.h"

GEARBOX_FUZZ_TARGET({
  const gearbox::RecompileReport r = gearbox::parseCompileLog(input);
  (void)gearbox::formatRecompileOpList(r);
  (void)gearbox::summarize(r);
})
