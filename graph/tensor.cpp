#include "graph/tensor.h"

#include <sys/mman.h>

#include <cmath>
#include <cstdlib>
#include <new>

#include "graph/checked.h"
#include "graph/error.h"

namespace gearbox {

namespace {
// From this size up a tensor's storage is fresh anonymous pages: zero without a memset and
// resident only once written.
constexpr size_t kMappedTensorBytes = size_t{1} << 20;
}  // namespace

void Tensor::Free::operator()(std::byte* p) const {
  std::free(p);
}

Tensor::Tensor(DType dtype, const Shape& shape) : dtype_(dtype), shape_(shape) {
  if (!shape.isStatic())
    fail(ErrorKind::kShape, "cannot allocate a tensor of non-static shape {}", shape.toString());
  bytes_ = static_cast<size_t>(checkedBytes(shape, dtype, "tensor"));
  // aligned_alloc needs a size that is a multiple of the alignment; 64 keeps cache lines whole.
  const size_t alloc = ((bytes_ + 63) / 64) * 64 + 64;
  if (alloc >= kMappedTensorBytes) {
    // Large: fresh anonymous pages, zero until written and not resident until then, so a
    // tensor nobody writes (a --model-only output, issue 22) costs no memory and no memset.
    void* m = ::mmap(nullptr, alloc, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) throw std::bad_alloc();
    data_ = std::shared_ptr<std::byte>(static_cast<std::byte*>(m),
                                       [alloc](std::byte* q) { ::munmap(q, alloc); });
    return;
  }
  auto* p = static_cast<std::byte*>(std::aligned_alloc(64, alloc));
  if (!p) throw std::bad_alloc();
  std::memset(p, 0, alloc);
  data_ = std::shared_ptr<std::byte>(p, Free{});
}

Tensor Tensor::wrap(DType dtype, const Shape& shape, std::shared_ptr<std::byte> data) {
  if (!shape.isStatic())
    fail(ErrorKind::kShape, "cannot wrap a tensor of non-static shape {}", shape.toString());
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = shape;
  t.bytes_ = static_cast<size_t>(shape.numel()) * dtypeSize(dtype);
  t.data_ = std::move(data);
  return t;
}

bool Tensor::equals(const Tensor& o) const {
  if (dtype_ != o.dtype_ || shape_ != o.shape_) return false;
  return bytes_ == 0 || std::memcmp(data(), o.data(), bytes_) == 0;
}

Tensor randomTensor(DType dtype, const Shape& shape, uint64_t seed) {
  Tensor t(dtype, shape);
  // splitmix64: deterministic across platforms and cheap.
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
  auto next = [&s]() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  const int64_t n = t.numel();
  dispatchDType(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* p = t.as<T>();
    for (int64_t i = 0; i < n; ++i) {
      if constexpr (std::is_same_v<T, float>) {
        // Multiples of 1/64 keep sums exact, so every mode's result is bit-identical.
        p[i] = static_cast<float>(static_cast<int64_t>(next() % 128) - 64) / 64.0f;
      } else {
        p[i] = static_cast<T>(next() % 100);
      }
    }
  });
  return t;
}

double maxAbsDiff(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return INFINITY;
  double m = 0;
  dispatchDType(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* pa = a.as<T>();
    const T* pb = b.as<T>();
    for (int64_t i = 0; i < a.numel(); ++i)
      m = std::max(m, std::fabs(static_cast<double>(pa[i]) - static_cast<double>(pb[i])));
  });
  return m;
}

}  // namespace gearbox
