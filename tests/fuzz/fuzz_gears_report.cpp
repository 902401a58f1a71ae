// The gears text in the report's config block (driver/run_options.h configJson): whatever the
// session was given, the report of a failed run must still be built and written. The text goes
// into the config block unchecked, as after a refused run; configJson must keep a document too
// deep for the JSON tree as a string (issue 22: a 1,000,000-deep --gears crashed here), and the
// report must dump without an exception.
#include "driver/run_options.h"
#include "executor/modes/gear_options.h"
#include "fuzz_common.h"

GEARBOX_FUZZ_TARGET({
  gearbox::SessionOptions s;
  s.mode = gearbox::Mode::kGeared;
  gearOptions(s).json = input;
  const auto c = gearbox::cli::configJson(s, nullptr);
  (void)gearbox::cli::dumpJson(c, 2);
})
