#include "graph/large_buffer.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <new>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace gearbox {

void adviseHugePages(void* p, size_t bytes) {
#if defined(MADV_HUGEPAGE)
  // madvise needs a page-aligned start; only whole huge pages inside the range can be huge.
  const auto begin = reinterpret_cast<uintptr_t>(p);
  const uintptr_t first = (begin + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  if (bytes < kHugePageBytes || first - begin > bytes - kHugePageBytes) return;
  const uintptr_t span = (bytes - (first - begin)) / kHugePageBytes * kHugePageBytes;
  ::madvise(reinterpret_cast<void*>(first), span, MADV_HUGEPAGE);
#else
  (void)p;
  (void)bytes;
#endif
}

void* allocateLargeBuffer(size_t bytes) {
  const size_t align = bytes >= kHugePageBytes ? kHugePageBytes : 64;
  if (bytes > SIZE_MAX - align) throw std::bad_alloc();
  // aligned_alloc needs a size that is a multiple of the alignment.
  const size_t size = (std::max<size_t>(bytes, 1) + align - 1) / align * align;
  void* p = std::aligned_alloc(align, size);
  if (!p) throw std::bad_alloc();
  if (align == kHugePageBytes) adviseHugePages(p, size);
  return p;
}

}  // namespace gearbox
