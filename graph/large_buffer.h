#pragma once
// Buffers that kernels stream through on every call: packed conv weights, a plan's arena, large
// constants. At 2 MiB and above they are 2 MiB-aligned and advised for transparent huge pages
// (madvise(MADV_HUGEPAGE): Debian's default THP mode is `madvise`, so without the advice every
// such buffer is in 4 KiB pages).
//
// Why: ResNet-18's 47 MB of packed weights in 4 KiB pages are 11,500 pages, past the second-
// level TLB of the x86-64 cores this project runs on (Zen 4 and 5: 3,072-4,096 entries), and
// every call streams them all. In 2 MiB pages they are 24. Measured on Zen 5 (2 vCPUs),
// `gearbox run` on ResNet-18 at batch 1, old and new binaries interleaved, three rounds: 2
// threads 11.87 / 10.90 / 10.68 ms a call without the advice, 10.78 / 10.22 / 9.71 with it.

#include <cstddef>

namespace gearbox {

inline constexpr size_t kHugePageBytes = size_t{2} << 20;

// `bytes` (rounded up to a multiple of the alignment) aligned to 64 bytes, or to kHugePageBytes
// and advised for huge pages when at least kHugePageBytes. Free with std::free. Throws
// std::bad_alloc when the allocation fails; a refused advice (a kernel without THP) is ignored:
// the buffer is then in small pages, as before.
void* allocateLargeBuffer(size_t bytes);

// Advises [p, p + bytes) for huge pages where the range holds any whole huge page (an mmap'd
// range); a no-op elsewhere, and off Linux.
void adviseHugePages(void* p, size_t bytes);

}  // namespace gearbox
