#include "graph/error.h"

namespace gearbox {

const char* errorKindName(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kParse: return "parse error";
    case ErrorKind::kShape: return "shape error";
    case ErrorKind::kIndex: return "index error";
    case ErrorKind::kIo: return "I/O error";
    case ErrorKind::kGear: return "gear error";
    case ErrorKind::kConfig: return "config error";
    case ErrorKind::kLimit: return "recompile limit";
    case ErrorKind::kMemory: return "out of memory";
  }
  return "error";
}

}  // namespace gearbox
