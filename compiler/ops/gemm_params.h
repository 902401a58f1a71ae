#pragma once
// The descriptor fields matmul's and attention's params share: the ISA the kernel was compiled
// for and each GEMM's path and cache blocking ("kc", "mc", "nc"; attention writes two GEMMs,
// prefixed "qk_" and "pv_"). One writer and one reader, so both ops check a loaded descriptor's
// names the same way; checkParams then re-derives the values from the key.

#include <string>
#include <string_view>

#include "compiler/ops/op_hooks.h"

namespace gearbox::ops {

inline void isaToJson(Isa isa, Json& j) {
  j["isa"] = isaName(isa);
}

inline Isa isaFromJson(const Json& j) {
  const std::string isa = getString(j, "isa", "kernel.params", ErrorKind::kIo);
  const auto parsed = parseIsa(isa);
  if (!parsed) fail(ErrorKind::kIo, "field 'kernel.params.isa': unknown ISA '{}'", isa);
  return *parsed;
}

inline void gemmToJson(const GemmBlocking& g, std::string_view prefix, Json& j) {
  const std::string p(prefix);
  j[p + "gemm_path"] = gemmPathName(g.path);
  j[p + "kc"] = g.kc;
  j[p + "mc"] = g.mc;
  j[p + "nc"] = g.nc;
}

inline GemmBlocking gemmFromJson(const Json& j, std::string_view prefix) {
  const std::string p(prefix), where = "kernel.params";
  const ErrorKind io = ErrorKind::kIo;
  const std::string path = getString(j, (p + "gemm_path").c_str(), where, io);
  const auto parsed = parseGemmPath(path);
  if (!parsed) fail(io, "field '{}.{}gemm_path': unknown GEMM path '{}'", where, p, path);
  GemmBlocking g;
  g.path = *parsed;
  g.kc = getInt(j, (p + "kc").c_str(), where, io);
  g.mc = getInt(j, (p + "mc").c_str(), where, io);
  g.nc = getInt(j, (p + "nc").c_str(), where, io);
  return g;
}

}  // namespace gearbox::ops
