#pragma once
// The work one kernel does at the static shapes of its key: floating-point operations and
// bytes moved (read + written), the two axes of a roofline. The device model
// (executor/cost_model.h) turns them into a MODELED execution time; nothing here is timed.
// Each op states its own terms in compiler/ops/<op>.cpp (dispatch generated from ops.def).
//
// Counting rules (docs/cost-model.md): an add or mul is 1 flop per output element, relu 1 per
// element; a matmul is 2 flops per multiply-accumulate (2*M*N*K per batch, 1-D operands
// promoted as torch.matmul does); data-movement ops (IndexSelect, Cat, CatGather, Reshape,
// Transpose) do no flops. Bytes are every input element read once plus every output element
// written once, as STREAM counts them; a gather reads only the selected rows, plus its index.
// A dynamic dim (< 0) in the key counts as 1, so a shape-generic key gives the work of its
// smallest instance.

#include <string_view>

#include "compiler/kernel_spec.h"

namespace gearbox {

// FLOPs charged per element for the transcendental functions, counted from the vectorised
// implementations the optimized kernels run (Eigen 3.4's packet math, which GCC cannot replace
// with libm calls at -O3 without -ffast-math), counting a multiply-add as 2 and a min, max,
// compare, select, floor or division as 1 each. Integer bit tricks (exp's 2^m scaling) are not
// counted. The device model needs them only to tell compute-bound from bandwidth-bound; on the
// accelerator-class profile every op below stays bandwidth-bound (at most ~35 flops per 8
// bytes moved against a ridge point near 13 flops per byte).
namespace flops {
// pexp_float (Eigen/src/Core/arch/Default/GenericPacketMathFunctions.h): clamp (2), m = floor
// of a multiply-add (3), two multiply-adds of range reduction (4), r^2 and r^3 (2), six
// multiply-adds and an add of the polynomial (13), the final max (1).
constexpr double kExp = 25;
// generic_fast_erf_float (unsupported/Eigen/src/SpecialFunctions/SpecialFunctionsImpl.h): clamp
// (2), x^2 (1), a degree-13 odd numerator in x^2 (6 multiply-adds + 1 multiply), a degree-8
// even denominator (4 multiply-adds), one division.
constexpr double kErf = 25;
// generic_fast_tanh_float (Eigen/src/Core/MathFunctionsImpl.h): clamp (2), |x| and a compare
// (2), x^2 (1), numerator (6 multiply-adds + 1 multiply), denominator (3 multiply-adds), a
// division and a select.
constexpr double kTanh = 27;
// Square root and division: one instruction each (sqrtps, divps), counted as 1 like an add
// although their throughput is several times lower.
constexpr double kSqrt = 1;
// pow(x, y) = exp(y * log(x)): glibc's powf per element; plog_float has about as many terms as
// pexp_float, so log + multiply + exp.
constexpr double kPow = 2 * kExp + 1;
}  // namespace flops

struct KernelCost {
  double flops = 0;
  double bytes = 0;  // read + written
};

KernelCost kernelCost(const KernelKey& key);  // for the static shapes in key.inputs

// The MODELED compile cost of one kernel of an op on the built-in accelerator-class device: a
// base plus, where real compilers search tilings, a term per log2 of the kernel's FLOPs. Each op
// states its terms and where each figure comes from in compiler/ops/<op>.cpp, so an op without
// them does not link; a device profile may replace the whole table (executor/cost_model.h).
struct CompileCostTerms {
  double baseUs = 0;
  std::string_view baseSource = {};
  double perLog2FlopsUs = 0;  // 0: no size term
  std::string_view perLog2FlopsSource = {};
};

CompileCostTerms compileCostTerms(OpKind kind);

}  // namespace gearbox
