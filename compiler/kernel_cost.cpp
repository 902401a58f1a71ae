#include "compiler/kernel_cost.h"
// A new OpKind must be added to the switch below: make a missing case an error, not a warning.
#pragma GCC diagnostic error "-Wswitch"

#include <algorithm>

namespace gearbox {

namespace {

double dimOf(int64_t d) {
  return d < 0 ? 1.0 : static_cast<double>(d);
}

double elements(const Shape& s) {
  double n = 1;
  for (int d = 0; d < s.rank(); ++d) n *= dimOf(s[d]);
  return n;
}

double bytesOf(const TensorType& t) {
  return elements(t.shape) * static_cast<double>(dtypeSize(t.dtype));
}

// Elements of the NumPy broadcast of two shapes (aligned from the right).
double broadcastElements(const Shape& a, const Shape& b) {
  const int r = std::max(a.rank(), b.rank());
  double n = 1;
  for (int i = 0; i < r; ++i) {
    const int da = a.rank() - r + i, db = b.rank() - r + i;
    const double x = da >= 0 ? dimOf(a[da]) : 1.0, y = db >= 0 ? dimOf(b[db]) : 1.0;
    n *= std::max(x, y);
  }
  return n;
}

}  // namespace

KernelCost kernelCost(const KernelKey& key) {
  const auto& in = key.inputs;
  const double es = static_cast<double>(dtypeSize(key.dtype));
  double readBytes = 0;
  for (const TensorType& t : in) readBytes += bytesOf(t);
  // Every case returns: a new OpKind is a compiler warning (-Wswitch) here, not a silent zero.
  switch (key.kind) {
    case OpKind::kConst: return {};
    case OpKind::kAdd: {
      if (in.size() < 2) return {};
      const double out = broadcastElements(in[0].shape, in[1].shape);
      return {out, readBytes + out * es};
    }
    case OpKind::kMatMul: {
      if (in.size() < 2 || in[0].shape.rank() < 2 || in[1].shape.rank() < 2) return {};
      const Shape& a = in[0].shape;
      const Shape& b = in[1].shape;
      const int ra = a.rank(), rb = b.rank();
      const double m = dimOf(a[ra - 2]), k = dimOf(a[ra - 1]), n = dimOf(b[rb - 1]);
      const Shape batchA(a.begin(), a.end() - 2), batchB(b.begin(), b.end() - 2);
      const double batch = broadcastElements(batchA, batchB);
      return {2 * batch * m * n * k, readBytes + batch * m * n * es};
    }
    case OpKind::kIndexSelect: {
      // Output: input 0 with the selected dim replaced by the index length.
      if (in.size() < 2 || !key.attrs.dim) return {};
      const Shape& s = in[0].shape;
      const double selected = elements(in[1].shape);
      const int d = static_cast<int>(*key.attrs.dim);
      const double rows = d >= 0 && d < s.rank() ? dimOf(s[d]) : 1.0;
      const double out = elements(s) / rows * selected;
      // Only the selected rows are read, plus the index.
      return {0, out * es + bytesOf(in[1]) + out * es};
    }
    case OpKind::kCat: {
      double out = 0;
      for (const TensorType& t : in) out += elements(t.shape);
      return {0, readBytes + out * es};
    }
    case OpKind::kCatGather: {
      // index_select(cat(inputs, dim), index, dim): reads only the gathered rows.
      if (in.size() < 2 || !key.attrs.dim) return {};
      const TensorType& index = in.back();
      double catElements = 0, catRows = 0;
      const int d = static_cast<int>(*key.attrs.dim);
      for (size_t i = 0; i + 1 < in.size(); ++i) {
        catElements += elements(in[i].shape);
        if (d >= 0 && d < in[i].shape.rank()) catRows += dimOf(in[i].shape[d]);
      }
      const double out = catRows > 0 ? catElements / catRows * elements(index.shape) : 0.0;
      return {0, out * es + bytesOf(index) + out * es};
    }
  }
  return {};
}

}  // namespace gearbox
