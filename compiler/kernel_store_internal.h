#pragma once
// Helpers shared by the kernel-store files (kernel_store.cpp: descriptors; kernel_meta_store.cpp;
// op_info.cpp; kernel_bundle.cpp: bundles and precompile). Internal to the compiler library.

#include <chrono>
#include <ctime>
#include <filesystem>
#include <string>
#include <vector>

#include "compiler/json_fields.h"
#include "compiler/kernel_store.h"

namespace gearbox::store_detail {

std::tm toTm(std::chrono::system_clock::time_point t, bool utc);
int64_t microsOf(std::chrono::system_clock::time_point t);
std::string strftimeString(const std::tm& tm, const char* format);
// seed 003's compact local timestamp: 20240102030405[123456].
std::string compactTimestamp(std::chrono::system_clock::time_point t, bool withMicros);
// Throws Error(kIo) unless the spec's params fit its key (see kernel_store.h's trust model).
void checkSpecAgainstKey(const KernelSpec& s);
Json withoutHash(const Json& j);
void checkHash(const Json& j, const char* what);
void checkFormat(const Json& j, const char* format);
std::vector<std::filesystem::directory_entry> listDirectory(const std::filesystem::path& dir);
Json parseJsonText(const std::string& text, ErrorKind kind);

}  // namespace gearbox::store_detail
