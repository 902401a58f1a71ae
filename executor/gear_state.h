#pragma once
// Internal: what a Session keeps for geared mode.

#include <optional>

#include "executor/session.h"

namespace gearbox {

struct Session::GearState {
  GearConfig config;
  std::optional<GearSet> set;
  std::vector<std::shared_ptr<Plan>> plans;  // one per gear; null for an invalid gear
  std::vector<std::string> invalid;          // per gear: why it could not compile
  std::optional<PaddingPlan> padding;        // with the pad fallback
};

}  // namespace gearbox
