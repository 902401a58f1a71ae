#include "graph/npy.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "expect_error.h"
#include "graph/error.h"
#include "graph/file_io.h"
#include "tests/temp_dir.h"

namespace gearbox {
namespace {

using testing_util::TempDir;

using testing_util::errorOf;

// A hand-built .npy image: magic, version, header length (u16 for v1, u32 otherwise), header
// text, then `data` verbatim.
std::string npyBytes(const std::string& header, int major = 1, const std::string& data = "",
                     int minor = 0) {
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += static_cast<char>(minor);
  const size_t n = header.size();
  const int lenBytes = major == 1 ? 2 : 4;
  for (int i = 0; i < lenBytes; ++i) out += static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + data;
}

std::string floats(std::vector<float> v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

// ---------------------------------------------------------------------------------------------
// Round trips over every dtype and rank 0..6.

struct RoundTripCase {
  DType dtype;
  int rank;
};

std::string caseName(const ::testing::TestParamInfo<RoundTripCase>& info) {
  return std::string(dtypeName(info.param.dtype)) + "_rank" + std::to_string(info.param.rank);
}

void PrintTo(const RoundTripCase& c, std::ostream* os) {
  *os << dtypeName(c.dtype) << " rank " << c.rank;
}

class NpyRoundTrip : public ::testing::TestWithParam<RoundTripCase> {};

Shape shapeOfRank(int rank) {
  static constexpr int64_t kDims[] = {2, 3, 1, 2, 1, 3};
  return Shape(kDims, kDims + rank);
}

TEST_P(NpyRoundTrip, SerializeParseAndSaveLoad) {
  const auto [dtype, rank] = GetParam();
  const Tensor t = randomTensor(dtype, shapeOfRank(rank), 17 + rank);
  const std::string bytes = serializeNpy(t);

  ASSERT_GE(bytes.size(), 10u);
  EXPECT_EQ(bytes.substr(0, 6), "\x93NUMPY");
  EXPECT_EQ(bytes[6], 1);
  EXPECT_EQ(bytes[7], 0);
  const size_t headerLen = static_cast<unsigned char>(bytes[8]) |
                           (static_cast<size_t>(static_cast<unsigned char>(bytes[9])) << 8);
  EXPECT_EQ((10 + headerLen) % 64, 0u) << "data must start on a 64-byte boundary";
  EXPECT_EQ(bytes[10 + headerLen - 1], '\n');
  EXPECT_EQ(bytes.size(), 10 + headerLen + t.bytes());

  EXPECT_TRUE(parseNpy(bytes, "mem").equals(t));

  TempDir dir;
  const std::string path = dir.file("t.npy");
  saveNpy(path, t);
  EXPECT_TRUE(loadNpy(path).equals(t));
  EXPECT_EQ(readFile(path), bytes);
}

std::vector<RoundTripCase> allCases() {
  std::vector<RoundTripCase> cases;
  for (DType d : {DType::kF32, DType::kI32, DType::kI64})
    for (int r = 0; r <= kMaxRank; ++r) cases.push_back({d, r});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(AllDTypesAndRanks, NpyRoundTrip, ::testing::ValuesIn(allCases()),
                         caseName);

TEST(Npy, HeaderIsTheNumpyDictLiteral) {
  const auto header = [](const Tensor& t) {
    const std::string b = serializeNpy(t);
    const std::string h = b.substr(10, b.find('}') + 1 - 10);
    return h;
  };
  EXPECT_EQ(header(Tensor(DType::kF32, {2, 3})),
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }");
  EXPECT_EQ(header(Tensor(DType::kI32, {5})),
            "{'descr': '<i4', 'fortran_order': False, 'shape': (5,), }");
  EXPECT_EQ(header(Tensor(DType::kI64, Shape::scalar())),
            "{'descr': '<i8', 'fortran_order': False, 'shape': (), }");
}

TEST(Npy, ZeroSizedArrayRoundTrips) {
  const Tensor t(DType::kF32, {0, 3});
  const Tensor back = parseNpy(serializeNpy(t), "mem");
  EXPECT_EQ(back.shape(), Shape({0, 3}));
  EXPECT_TRUE(back.equals(t));
}

// ---------------------------------------------------------------------------------------------
// Accepted variants that NumPy and other writers produce.

TEST(Npy, AcceptsVersions2And3) {
  const std::string h = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n";
  for (int major : {2, 3}) {
    const Tensor t = parseNpy(npyBytes(h, major, floats({1.5f, -2.0f})), "v");
    ASSERT_EQ(t.shape(), Shape({2}));
    EXPECT_EQ(t.as<float>()[0], 1.5f);
    EXPECT_EQ(t.as<float>()[1], -2.0f);
  }
}

TEST(Npy, AcceptsNativeOrderDoubleQuotesLongSuffixAndAnyKeyOrder) {
  const std::string h = "{\"shape\": (1L, 2L), \"fortran_order\": False, \"descr\": \"=i8\"}\n";
  const std::string data(16, '\0');
  const Tensor t = parseNpy(npyBytes(h, 1, data), "odd");
  EXPECT_EQ(t.dtype(), DType::kI64);
  EXPECT_EQ(t.shape(), Shape({1, 2}));
}

// ---------------------------------------------------------------------------------------------
// Every error path: each case is a byte image and the fragments its message must contain.

struct BadNpyCase {
  std::string name;
  std::string bytes;
  std::vector<std::string> fragments;
};

std::string hdr(const std::string& descr, const std::string& fortran, const std::string& shape) {
  return "{'descr': " + descr + ", 'fortran_order': " + fortran + ", 'shape': " + shape + ", }\n";
}

std::vector<BadNpyCase> badCases() {
  const std::string ok = hdr("'<f4'", "False", "(2, 3)");
  return {
      {"WrongMagic", "\x93NUMPX" + npyBytes(ok).substr(6), {"bad.npy", "bad magic", "NUMPX"}},
      {"NotNpyAtAll", "hello", {"bad.npy", "bad magic"}},
      {"VersionOnlyMissing", "\x93NUMPY", {"bad.npy", "no version"}},
      {"UnsupportedMajor", npyBytes(ok, 4), {"bad.npy", "unsupported .npy version 4.0"}},
      {"UnsupportedMinor", npyBytes(ok, 1, "", 1), {"unsupported .npy version 1.1"}},
      {"NoHeaderLength", npyBytes(ok).substr(0, 9), {"bad.npy", "no header length"}},
      {"TruncatedHeader", npyBytes(ok).substr(0, 30), {"bad.npy", "truncated .npy header"}},
      {"HeaderNotADict", npyBytes("['descr']\n"), {"malformed .npy header", "expected '{'"}},
      {"MissingShape",
       npyBytes("{'descr': '<f4', 'fortran_order': False}\n"),
       {"bad.npy", "missing key 'shape'"}},
      {"MissingDescr",
       npyBytes("{'fortran_order': False, 'shape': ()}\n"),
       {"missing key 'descr'"}},
      {"MissingFortranOrder",
       npyBytes("{'descr': '<f4', 'shape': ()}\n"),
       {"missing key 'fortran_order'"}},
      {"UnknownKey",
       npyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (), 'x': 1}\n"),
       {"unexpected key 'x'"}},
      {"BadBool", npyBytes(hdr("'<f4'", "0", "()")), {"must be True or False"}},
      {"ShapeNotATuple", npyBytes(hdr("'<f4'", "False", "[2]")), {"expected '('"}},
      {"NegativeDim", npyBytes(hdr("'<f4'", "False", "(-2,)")), {"expected a dim"}},
      {"HugeDim", npyBytes(hdr("'<f4'", "False", "(99999999999999999999,)")), {"too large"}},
      {"UnterminatedString", npyBytes("{'descr: '<f4'}\n"), {"malformed .npy header"}},
      {"TextAfterDict", npyBytes(ok + "x"), {"unexpected text after the dict"}},
      {"StructuredDescr",
       npyBytes(hdr("[('a', '<f4')]", "False", "()")),
       {"structured dtypes are not supported", "'<f4' (f32)"}},
      {"FortranOrder",
       npyBytes(hdr("'<f4'", "True", "(2, 3)"), 1, std::string(24, '\0')),
       {"bad.npy", "Fortran-order"}},
      {"Float64",
       npyBytes(hdr("'<f8'", "False", "(1,)"), 1, std::string(8, '\0')),
       {"bad.npy", "unsupported dtype '<f8'", "'<f4' (f32), '<i4' (i32), '<i8' (i64)"}},
      {"BigEndian",
       npyBytes(hdr("'>f4'", "False", "(1,)"), 1, std::string(4, '\0')),
       {"unsupported dtype '>f4'"}},
      {"NotApplicableOrder",
       npyBytes(hdr("'|i4'", "False", "(1,)"), 1, std::string(4, '\0')),
       {"unsupported dtype '|i4'"}},
      {"Bool",
       npyBytes(hdr("'|b1'", "False", "(1,)"), 1, std::string(1, '\0')),
       {"unsupported dtype '|b1'"}},
      {"RankSeven",
       npyBytes(hdr("'<f4'", "False", "(1, 1, 1, 1, 1, 1, 1)"), 1, floats({0})),
       {"bad.npy", "rank 7 exceeds the maximum of 6"}},
      {"TruncatedData",
       npyBytes(ok, 1, floats({1, 2, 3, 4, 5})),
       {"bad.npy", "truncated data", "needs 24 bytes, got 20"}},
      {"OverflowingShape",
       npyBytes(hdr("'<i8'", "False", "(4294967296, 4294967296, 4294967296)")),
       {"too large"}},
      {"TrailingBytes",
       npyBytes(ok, 1, floats({1, 2, 3, 4, 5, 6, 7})),
       {"bad.npy", "4 unexpected trailing bytes"}},
  };
}

// gtest prints parameters on failure; the name is enough to find the case.
void PrintTo(const BadNpyCase& c, std::ostream* os) {
  *os << c.name;
}

class NpyErrors : public ::testing::TestWithParam<BadNpyCase> {};

TEST_P(NpyErrors, ThrowIoErrorNamingTheFile) {
  const BadNpyCase& c = GetParam();
  const std::string msg = errorOf([&] { parseNpy(c.bytes, "bad.npy"); }, ErrorKind::kIo);
  EXPECT_EQ(msg.rfind("bad.npy: ", 0), 0u) << msg;
  for (const std::string& f : c.fragments) EXPECT_NE(msg.find(f), std::string::npos) << msg;
}

INSTANTIATE_TEST_SUITE_P(HandBuilt, NpyErrors, ::testing::ValuesIn(badCases()),
                         [](const auto& info) { return info.param.name; });

// ---------------------------------------------------------------------------------------------
// Files.

TEST(Npy, ReadFileNamesThePathAndReason) {
  TempDir dir;
  const std::string missing = dir.file("nope.npy");
  std::string msg = errorOf([&] { readFile(missing); }, ErrorKind::kIo);
  EXPECT_NE(msg.find(missing), std::string::npos) << msg;
  EXPECT_NE(msg.find("No such file or directory"), std::string::npos) << msg;

  msg = errorOf([&] { loadNpy(missing); }, ErrorKind::kIo);
  EXPECT_NE(msg.find(missing), std::string::npos) << msg;

  msg = errorOf([&] { readFile(dir.path().string()); }, ErrorKind::kIo);
  EXPECT_NE(msg.find("it is a directory, not a regular file"), std::string::npos) << msg;
}

TEST(Npy, LoadNpyNamesTheFileInFormatErrors) {
  TempDir dir;
  const std::string path = dir.file("junk.npy");
  std::ofstream(path) << "not numpy";
  const std::string msg = errorOf([&] { loadNpy(path); }, ErrorKind::kIo);
  EXPECT_EQ(msg.rfind(path + ": ", 0), 0u) << msg;
}

size_t entriesIn(const std::filesystem::path& dir) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) ++n;
  return n;
}

TEST(AtomicWrite, MissingDirectoryThrowsAndLeavesNoTempFile) {
  TempDir dir;
  const std::string path = dir.file("missing/out.npy");
  const std::string msg = errorOf([&] { saveNpy(path, Tensor(DType::kF32, {2})); }, ErrorKind::kIo);
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "missing"));
  EXPECT_EQ(entriesIn(dir.path()), 0u);
}

TEST(AtomicWrite, ADirectoryInThePathIsRefusedAndNothingIsLeft) {
  // A directory is refused before any temp file is made (writers never replace what is not a
  // regular file); the cleanup after a failed write is covered by
  // HostileCli.InjectedWriteFailureLosesNothing.
  TempDir dir;
  const std::string path = dir.file("target");
  std::filesystem::create_directory(path);
  const std::string msg = errorOf([&] { writeFileAtomic(path, "data"); }, ErrorKind::kIo);
  EXPECT_NE(msg.find("it is a directory"), std::string::npos) << msg;
  EXPECT_EQ(entriesIn(dir.path()), 1u);
  EXPECT_TRUE(std::filesystem::is_directory(path));
}

TEST(AtomicWrite, ReplacesExistingContentsWithoutLeftovers) {
  TempDir dir;
  const std::string path = dir.file("f.txt");
  writeFileAtomic(path, "first version, longer");
  writeFileAtomic(path, "second");
  EXPECT_EQ(readFile(path), "second");
  EXPECT_EQ(entriesIn(dir.path()), 1u);
  writeFileAtomic(path, "");
  EXPECT_EQ(readFile(path), "");
}

// The one output-path check (graph/file_io.h): a file must be writable where it lands; a tree
// must stay where it was named. Both kinds name the option and the path.
TEST(OutputPath, AFileMustLandInAWritableFolderAndNotOnADirectory) {
  TempDir dir;
  EXPECT_NO_THROW(checkOutputPath("--json", dir.file("r.json")));
  std::string msg =
      errorOf([&] { checkOutputPath("--json", dir.path().string()); }, ErrorKind::kIo);
  EXPECT_NE(msg.find("--json " + dir.path().string() + ": is a directory"), std::string::npos)
      << msg;
  msg = errorOf([&] { checkOutputPath("-o", dir.file("missing/r.json")); }, ErrorKind::kIo);
  EXPECT_NE(msg.find("-o " + dir.file("missing/r.json") + ": directory"), std::string::npos) << msg;
  EXPECT_NE(msg.find("does not exist"), std::string::npos) << msg;
  msg = errorOf([&] { checkOutputPath("--html", ""); }, ErrorKind::kIo);
  EXPECT_NE(msg.find("--html: the path is empty"), std::string::npos) << msg;
  msg = errorOf([&] { checkOutputPath("--json", std::string("a\0b", 3)); }, ErrorKind::kConfig);
  EXPECT_NE(msg.find("the path contains a NUL byte"), std::string::npos) << msg;
}

TEST(OutputPath, ATreeRefusesDotDotAndSymlinkedComponents) {
  TempDir dir;
  EXPECT_NO_THROW(checkOutputPath("--record-op-info", dir.file("new/deeper"), OutputKind::kTree));
  // A directory is what a tree is: no is-a-directory error here.
  EXPECT_NO_THROW(checkOutputPath("--record-op-info", dir.path().string(), OutputKind::kTree));
  std::string msg =
      errorOf([&] { checkOutputPath("--record-op-info", dir.file("a/../b"), OutputKind::kTree); },
              ErrorKind::kConfig);
  EXPECT_NE(msg.find("--record-op-info '" + dir.file("a/../b") + "': paths containing '..'"),
            std::string::npos)
      << msg;
  std::filesystem::create_directory_symlink(dir.path(), dir.file("link"));
  msg = errorOf([&] { checkOutputPath("--record-op-info", dir.file("link/x"), OutputKind::kTree); },
                ErrorKind::kConfig);
  EXPECT_NE(msg.find("component '" + dir.file("link") + "' is a symlink"), std::string::npos)
      << msg;
}

}  // namespace
}  // namespace gearbox
