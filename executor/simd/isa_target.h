#pragma once
// Per-ISA code regions (issue 23). The default build targets baseline x86-64; the hot kernels
// are compiled a second and third time for AVX2+FMA and AVX-512 and picked at run time
// (compiler/cpu_isa.h: activeIsa()).
//
// How, and why this way: per-ISA code must NOT come from translation units compiled with
// -mavx2 / -mavx512f. Inline functions and template instantiations are COMDAT: the linker keeps
// one copy for the whole program, so an std:: or Eigen template instantiated in an AVX2 file
// could be the copy a baseline caller ends up with, and crash an older CPU (SIGILL). Instead,
// as Highway and simdjson do, each ISA's code lives in its own namespace (isa_avx2, isa_avx512)
// whose functions are compiled under a target pragma:
//
//   GEARBOX_ISA_BEGIN_AVX2
//   namespace isa_avx2 { ... templates and functions: compiled for AVX2+FMA ... }
//   GEARBOX_ISA_END
//
// Every function and template DEFINED inside the region gets the target (checked with GCC 12
// and clang 14: a template defined in the region and instantiated later still gets it; a
// template defined outside, such as std::max, stays baseline even when called from inside, so
// its COMDAT copy is baseline code). The namespace is part of every mangled name, so no symbol
// is ever shared between ISAs. Callers select the namespace at run time from activeIsa(); code
// outside the regions stays baseline (tests/isa_test.cpp disassembles both to check).
//
// Rules for code inside a region: use no Eigen; call only std:: functions that are trivially
// inlined (min, max) or baseline-safe; never define a non-namespaced inline function or a
// template specialisation of an outside template there.

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define GEARBOX_HAVE_ISA_REGIONS 1
#include <immintrin.h>
// A _Pragma operand must stay one string literal, so these lines are not reflowed.
// clang-format off
#if defined(__clang__)
#define GEARBOX_ISA_BEGIN_AVX2 \
  _Pragma("clang attribute push(__attribute__((target(\"avx2,fma\"))), apply_to = function)")
#define GEARBOX_ISA_BEGIN_AVX512 \
  _Pragma("clang attribute push(__attribute__((target(\"avx512f,avx512bw,avx512vl,avx512dq,avx2,fma\"))), apply_to = function)")
#define GEARBOX_ISA_END _Pragma("clang attribute pop")
#else
#define GEARBOX_ISA_BEGIN_AVX2 _Pragma("GCC push_options") _Pragma("GCC target(\"avx2,fma\")")
#define GEARBOX_ISA_BEGIN_AVX512 \
  _Pragma("GCC push_options") _Pragma("GCC target(\"avx512f,avx512bw,avx512vl,avx512dq,avx2,fma\")")
#define GEARBOX_ISA_END _Pragma("GCC pop_options")
#endif
// clang-format on
#else
#define GEARBOX_HAVE_ISA_REGIONS 0
#endif
