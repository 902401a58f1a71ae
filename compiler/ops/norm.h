#pragma once
// The compiler hooks shared by the ops on NormParams, softmax and layer_norm (x viewed as
// [outer, n, inner] lines; compiler/kernel_spec.h): the axis attribute read from a key, and the
// params' flat kernel_meta record.
#include "compiler/ops/window_params.h"

namespace gearbox::ops {

inline constexpr FieldList<NormParams, 5> kNormFields{{
    {"outer", &NormParams::outer},
    {"n", &NormParams::n},
    {"inner", &NormParams::inner},
    {"scale", &NormParams::scale},
    {"bias", &NormParams::bias},
}};

// The Int attribute `slot` of the key (an axis, possibly negative) wrapped against input 0's
// rank; inference has checked it is in range.
inline int keyAxis(const KernelKey& key, int slot) {
  const int r = key.inputs[0].shape.rank();
  const int64_t a = key.attrs.i(slot);
  return static_cast<int>(a < 0 ? a + r : a);
}

inline void normParamsToJson(const KernelSpec& spec, Json& j) {
  flatToJson(paramsAs<NormParams>(spec), kNormFields, j);
}
inline void normParamsFromJson(const Json& j, KernelSpec& spec) {
  spec.params = flatFromJson(j, kNormFields);
}

}  // namespace gearbox::ops
