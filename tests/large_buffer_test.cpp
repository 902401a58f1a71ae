// graph/large_buffer.h: the buffers kernels stream through on every call (packed conv weights)
// are 2 MiB-aligned and advised for transparent huge pages.
#include "graph/large_buffer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

namespace gearbox {
namespace {

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

bool thpAvailable() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string mode;
  return static_cast<bool>(std::getline(f, mode)) && mode.find("[never]") == std::string::npos;
}

// The VmFlags of the mapping in /proc/self/smaps that holds `p` ("" when none is found).
std::string vmFlags(const void* p) {
  std::ifstream f("/proc/self/smaps");
  const auto at = reinterpret_cast<uintptr_t>(p);
  std::string line;
  bool inside = false;
  while (std::getline(f, line)) {
    uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-' &&
        line.find(' ') != std::string::npos && line.find(':') > line.find(' ')) {
      inside = at >= lo && at < hi;
      continue;
    }
    if (inside && line.rfind("VmFlags:", 0) == 0) return line;
  }
  return "";
}

TEST(LargeBuffer, SmallBuffersAreCacheLineAligned) {
  for (size_t bytes : {size_t{1}, size_t{63}, size_t{4096}, kHugePageBytes - 1}) {
    std::unique_ptr<void, FreeDeleter> p(allocateLargeBuffer(bytes));
    ASSERT_NE(p.get(), nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p.get()) % 64, 0u) << bytes;
    std::memset(p.get(), 1, bytes);  // the whole size is usable (ASan checks the bound)
  }
}

TEST(LargeBuffer, LargeBuffersAreHugePageAlignedAndAdvised) {
  for (size_t bytes : {kHugePageBytes, kHugePageBytes + 1, 3 * kHugePageBytes + 4096}) {
    std::unique_ptr<void, FreeDeleter> p(allocateLargeBuffer(bytes));
    ASSERT_NE(p.get(), nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p.get()) % kHugePageBytes, 0u) << bytes;
    std::memset(p.get(), 1, bytes);
#if defined(__linux__) && !defined(GEARBOX_ASAN_BUILD)
    // MADV_HUGEPAGE shows as "hg" in the mapping's VmFlags (ASan's allocator maps memory its own
    // way; the flag is checked in the other builds).
    if (thpAvailable()) {
      EXPECT_NE(vmFlags(p.get()).find(" hg"), std::string::npos) << bytes;
    }
#endif
  }
}

TEST(LargeBuffer, AnImpossibleSizeThrowsBadAlloc) {
  EXPECT_THROW(allocateLargeBuffer(SIZE_MAX - 8), std::bad_alloc);
}

TEST(LargeBuffer, AdviceOnARangeWithoutAWholeHugePageIsANoOp) {
  std::unique_ptr<void, FreeDeleter> p(allocateLargeBuffer(kHugePageBytes));
  auto* b = static_cast<char*>(p.get());
  adviseHugePages(b + 64, kHugePageBytes - 128);  // no whole huge page inside
  adviseHugePages(b, 0);
  adviseHugePages(b + 1, kHugePageBytes);  // starts past the only aligned boundary
  b[0] = 1;
  EXPECT_EQ(b[0], 1);
}

}  // namespace
}  // namespace gearbox
