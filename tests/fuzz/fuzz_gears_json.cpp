// The gears JSON (gears/gear_spec.h) and its expansion (GearSet::build, zip and product).
#include "fuzz_common.h"
#include "gears/gear_set.h"
#include "gears/gear_spec.h"

GEARBOX_FUZZ_TARGET({
  using namespace gearbox;
  const std::vector<InputDecl> decls{{"x1", Shape{-1, 2}}, {"x2", Shape{-1, -1, 3}}};
  const GearConfig cfg = parseGearsJson(decls, input);
  FirstSeenShapes seen{{"x2", Shape{4, 5, 3}}};
  for (MergePolicy p : {MergePolicy::kZip, MergePolicy::kProduct}) {
    try {
      const GearSet set = GearSet::build(cfg, p, seen);
      (void)set.dynamicDimsOption();
    } catch (const Error&) {
    }
  }
})
