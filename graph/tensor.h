#pragma once
// Tensors: an owning Tensor (constants, user inputs and outputs) and a non-owning TensorView
// (what kernels see). Storage is 64-byte aligned so vector loads never split a line at 0.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>

#include "graph/dtype.h"
#include "graph/shape.h"

namespace gearbox {

struct TensorView {
  void* data = nullptr;
  DType dtype = DType::kF32;
  Shape shape;

  template <typename T>
  T* as() const {
    return static_cast<T*>(data);
  }
  int64_t numel() const { return shape.numel(); }
  size_t bytes() const { return static_cast<size_t>(numel()) * dtypeSize(dtype); }
};

class Tensor {
 public:
  Tensor() = default;
  // Zero-initialised tensor of a static shape.
  Tensor(DType dtype, const Shape& shape);
  // A tensor over storage someone else owns (the Python binding wraps NumPy arrays this way);
  // `data`'s deleter releases it. It must hold shape.numel() elements of `dtype`, suitably
  // aligned for the element type (kernels use unaligned vector loads, so 64-byte alignment is
  // not required).
  static Tensor wrap(DType dtype, const Shape& shape, std::shared_ptr<std::byte> data);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t numel() const { return shape_.numel(); }
  size_t bytes() const { return bytes_; }
  void* data() { return data_.get(); }
  const void* data() const { return data_.get(); }
  template <typename T>
  T* as() {
    return static_cast<T*>(data());
  }
  template <typename T>
  const T* as() const {
    return static_cast<const T*>(data());
  }
  TensorView view() const { return TensorView{data_.get(), dtype_, shape_}; }
  bool empty() const { return !data_; }

  // Exact equality of dtype, shape and bytes.
  bool equals(const Tensor& o) const;

 private:
  struct Free {
    void operator()(std::byte* p) const;
  };
  DType dtype_ = DType::kF32;
  Shape shape_;
  size_t bytes_ = 0;
  std::shared_ptr<std::byte> data_;
};

// Deterministic pseudo-random contents from a seed (floats in [-1, 1), ints in [0, 100)).
Tensor randomTensor(DType dtype, const Shape& shape, uint64_t seed);
// Largest absolute difference between two f32 tensors of the same shape (exact compare for ints
// returns 0 or 1).
double maxAbsDiff(const Tensor& a, const Tensor& b);

}  // namespace gearbox
