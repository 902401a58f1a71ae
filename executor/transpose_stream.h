#pragma once
// When the transpose kernel writes its output around the cache (non-temporal stores through a
// staging buffer; executor/kernels/transpose.cpp says why and what it measured): from an output
// of transposeStreamThresholdBytes() bytes, a quarter of the last-level cache. Tests lower it
// so that the streamed path runs on every shape of the differential table.

#include <cstdint>

namespace gearbox::kernels {

int64_t transposeStreamThresholdBytes();

// Sets the threshold until destroyed. Not for use while kernels run on other threads.
class ScopedTransposeStreamThreshold {
 public:
  explicit ScopedTransposeStreamThreshold(int64_t bytes);
  ~ScopedTransposeStreamThreshold();
  ScopedTransposeStreamThreshold(const ScopedTransposeStreamThreshold&) = delete;
  ScopedTransposeStreamThreshold& operator=(const ScopedTransposeStreamThreshold&) = delete;

 private:
  int64_t previous_;
};

}  // namespace gearbox::kernels
