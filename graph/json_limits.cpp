#include "graph/json_limits.h"

#include "graph/error.h"

namespace gearbox {

void checkJsonDepth(std::string_view text, std::string_view where, int maxDepth) {
  int depth = 0;
  bool inString = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (inString) {
      if (c == '\\') {
        ++i;  // the escaped character cannot end the string
      } else if (c == '"') {
        inString = false;
      }
      continue;
    }
    if (c == '"') {
      inString = true;
    } else if (c == '[' || c == '{') {
      if (++depth > maxDepth)
        fail(ErrorKind::kParse, "{}: JSON nested deeper than {} levels at byte {}", where, maxDepth,
             i);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
}

}  // namespace gearbox
