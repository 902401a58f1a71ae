// Gelu(x, approximate=0): x * Phi(x) elementwise, f32 (torch.nn.functional.gelu, ONNX Gelu).
//   approximate=0  the exact form, 0.5 * x * (1 + erf(x / sqrt(2)))
//   approximate=1  the tanh form, 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))
//                  (torch's approximate="tanh", BERT's and GPT-2's original gelu)
#include "graph/ops/common.h"

namespace gearbox {

TensorType inferGelu(const InferContext& ctx) {
  if (const int64_t a = ctx.attrs.i(attr::Gelu::approximate); a != 0 && a != 1)
    fail(ErrorKind::kShape, "{}: attribute approximate is {}, expected 0 (erf) or 1 (tanh)",
         ctx.where(), a);
  return ops::floatUnaryType(ctx, "gelu");
}

}  // namespace gearbox
