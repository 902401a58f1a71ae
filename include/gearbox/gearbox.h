#pragma once
// The whole public C++ API in one include: #include <gearbox/gearbox.h>.
//
// Headers are installed with the source layout under <prefix>/include/gearbox/, so a consumer
// may also include one part, e.g. <gearbox/executor/session.h>. The headers include each other
// as "graph/graph.h" (their in-tree spelling), which is why gearbox::gearbox also puts
// <prefix>/include/gearbox on the include path (cmake/install.cmake).

#include "compiler/compiler.h"
#include "executor/cost_model.h"
#include "executor/device.h"
#include "executor/modes/geared.h"
#include "executor/session.h"
#include "gearbox/version.h"
#include "gears/gear_set.h"
#include "gears/gear_spec.h"
#include "graph/error.h"
#include "graph/file_io.h"
#include "graph/graph.h"
#include "graph/npy.h"
#include "graph/tensor.h"
#include "graph/text.h"
