#pragma once
// Runs fn, expects a gearbox::Error of `kind`, and returns its message for further checks.

#include <gtest/gtest.h>

#include <string>

#include "graph/error.h"

namespace gearbox::testing_util {

template <typename Fn>
std::string errorOf(Fn&& fn, ErrorKind kind) {
  try {
    fn();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "expected an Error, none was thrown";
  return "";
}

}  // namespace gearbox::testing_util
