#pragma once
// A fresh directory per test under the gtest temp root, removed when the test ends. Names carry
// the pid and a counter so parallel test processes (ctest -j) never share a directory.

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>

namespace gearbox::testing_util {

class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = "gearbox_";
    if (info) name += std::string(info->test_suite_name()) + "_" + info->name() + "_";
    for (char& c : name)
      if (c == '/') c = '_';
    name += std::to_string(::getpid()) + "_" + std::to_string(counter++);
    path_ = std::filesystem::path(::testing::TempDir()) / name;
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace gearbox::testing_util
