#pragma once
// NumPy .npy v1/v2/v3 load and save for float32, int32 and int64 in C order, little-endian.
// Anything else (wrong magic, Fortran order, other dtypes, truncated data) is an Error(kIo)
// naming the file. save() writes atomically (temp file + rename).

#include <string>

#include "graph/tensor.h"

namespace gearbox {

Tensor loadNpy(const std::string& path);
// Parses an in-memory .npy image; `name` is used in error messages.
Tensor parseNpy(const std::string& bytes, const std::string& name);
std::string serializeNpy(const Tensor& t);
void saveNpy(const std::string& path, const Tensor& t);

}  // namespace gearbox
