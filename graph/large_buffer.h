#pragma once
// Buffers that kernels stream through on every call: packed conv weights (compiler/
// weight_pack.cpp). At 2 MiB and above they are 2 MiB-aligned and advised for transparent huge
// pages (madvise(MADV_HUGEPAGE): Debian's default THP mode is `madvise`, so without the advice
// every such buffer is in 4 KiB pages).
//
// Why: ResNet-18's 47 MB of packed weights in 4 KiB pages are 11,500 pages, past the second-
// level TLB of the x86-64 cores this project runs on (Zen 4 and 5: 3,072-4,096 entries), and
// every call streams them all; in 2 MiB pages they are 24. Measured on Zen 5 (2 vCPUs),
// `gearbox run` on ResNet-18 at batch 1, old and new binaries interleaved: one thread 20.49 /
// 19.07 / 19.09 / 19.69 / 19.67 ms a call without the advice, 19.33 / 19.51 / 18.56 / 19.00 /
// 18.38 with it; two threads 11.87 / 10.90 / 10.68 against 10.78 / 10.22 / 9.71.
//
// What it costs: the pages are zeroed when first written, at compile. Where the host backs the
// memory, a huge page faults in faster than 512 small ones (this VM, back-to-back processes:
// 64 MiB in 4 ms, 16 GB/s, against 30 ms in 4 KiB pages). But a process whose huge pages the
// hypervisor has taken back (virtio-balloon's free page reporting returns freed 2 MiB blocks
// about 2 s after they are freed) faults them in at 0.4 GB/s. ResNet-18's host compile, 29-36
// ms without the advice, measured 15-42 ms with it where the pages were still backed and 89-150
// ms where not. Only the weight packs take the advice: they are packed once
// per process (WeightPackCache) and shared by every plan, where a plan's arena is new for
// every shape a static mode compiles (each would pay that first touch) and no call was faster
// with arenas or constants in huge pages (the MLP: 50 / 425 us a call at batch 1 / 32 either
// way).

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
