#include "base/file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "../support/temp_dir.h"

namespace fracgpu::base {
namespace {

using test_support::TempDir;

TEST(ReadFileTest, Table) {
  TempDir dir("fracgpu-base-");
  const std::string binary("a\0b\r\nc", 6);
  const std::string big(200 * 1024 + 7, 'x');  // several read chunks
  ASSERT_TRUE(dir.Write("empty", ""));
  ASSERT_TRUE(dir.Write("ten", "0123456789"));
  ASSERT_TRUE(dir.Write("binary", binary));
  ASSERT_TRUE(dir.Write("big", big));
  struct Case {
    std::string name;
    size_t max_bytes;
    StatusCode code;
    std::string want;  // the content, or the error message
  };
  const Case cases[] = {
      {"empty", 0, StatusCode::kOk, ""},
      {"empty", 10, StatusCode::kOk, ""},
      {"ten", 10, StatusCode::kOk, "0123456789"},  // exactly at the limit
      {"ten", 11, StatusCode::kOk, "0123456789"},
      {"ten", 9, StatusCode::kInvalidArgument, dir.Path("ten") + ": larger than 9 bytes"},
      {"ten", 0, StatusCode::kInvalidArgument, dir.Path("ten") + ": larger than 0 bytes"},
      {"binary", 6, StatusCode::kOk, binary},
      {"big", big.size(), StatusCode::kOk, big},
      {"big", big.size() - 1, StatusCode::kInvalidArgument,
       dir.Path("big") + ": larger than " + std::to_string(big.size() - 1) + " bytes"},
      {"big", SIZE_MAX, StatusCode::kOk, big},
      {"missing", 10, StatusCode::kNotFound,
       dir.Path("missing") + ": cannot open: No such file or directory"},
      {"missing/below", 10, StatusCode::kNotFound,
       dir.Path("missing/below") + ": cannot open: No such file or directory"},
      {"ten/below", 10, StatusCode::kUnavailable,
       dir.Path("ten/below") + ": cannot open: Not a directory"},
      // A directory opens but cannot be read.
      {"", 10, StatusCode::kUnavailable, dir.Path("") + ": read error: Is a directory"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name + " max " + std::to_string(c.max_bytes));
    Result<std::string> got = ReadFile(dir.Path(c.name), c.max_bytes);
    EXPECT_EQ(got.status().code(), c.code) << got.status().ToString();
    if (c.code == StatusCode::kOk) {
      ASSERT_TRUE(got.ok());
      EXPECT_EQ(*got, c.want);
    } else {
      EXPECT_EQ(got.status().message(), c.want);
    }
  }
}

TEST(ReadFileTest, ReadsFilesOfUnknownSize) {
  // /proc files report size 0 in stat; the read goes to end of file.
  Result<std::string> got = ReadFile("/proc/self/stat", 1 << 16);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->substr(0, std::to_string(::getpid()).size() + 1),
            std::to_string(::getpid()) + " ");
}

TEST(ReadFileTest, SymlinksFollowedUnlessRefused) {
  TempDir dir("fracgpu-base-");
  ASSERT_TRUE(dir.Write("target", "t"));
  ASSERT_EQ(::symlink(dir.Path("target").c_str(), dir.Path("link").c_str()), 0);
  Result<std::string> followed = ReadFile(dir.Path("link"), 10);
  ASSERT_TRUE(followed.ok()) << followed.status().ToString();
  EXPECT_EQ(*followed, "t");
  Result<std::string> refused = ReadFile(dir.Path("link"), 10, {.follow_symlinks = false});
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(refused.status().message(),
            dir.Path("link") + ": cannot open: Too many levels of symbolic links");
  Result<std::string> plain = ReadFile(dir.Path("target"), 10, {.follow_symlinks = false});
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ(*plain, "t");
}

TEST(ReadFileTest, NonblockingFifoWithoutWriterReadsEmpty) {
  TempDir dir("fracgpu-base-");
  ASSERT_EQ(::mkfifo(dir.Path("fifo").c_str(), 0600), 0);
  Result<std::string> got = ReadFile(dir.Path("fifo"), 10, {.nonblocking = true});
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, "");
}

TEST(ReadFileTest, UnreadableFileIsUnavailable) {
  if (::geteuid() == 0) GTEST_SKIP() << "root reads files whatever their mode";
  TempDir dir("fracgpu-base-");
  ASSERT_TRUE(dir.Write("secret", "s"));
  ASSERT_EQ(::chmod(dir.Path("secret").c_str(), 0), 0);
  Result<std::string> got = ReadFile(dir.Path("secret"), 10);
  EXPECT_EQ(got.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(got.status().message(), dir.Path("secret") + ": cannot open: Permission denied");
}

TEST(WriteFileAtomicallyTest, ReplacesWholeWithModeAndLeavesNoTemporary) {
  TempDir dir("fracgpu-base-");
  ASSERT_TRUE(dir.Write("f", "old content, longer than the new"));
  ASSERT_TRUE(WriteFileAtomically(dir.Path("f"), "new\n", 0444).ok());
  Result<std::string> got = ReadFile(dir.Path("f"), 100);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, "new\n");
  struct stat st {};
  ASSERT_EQ(::stat(dir.Path("f").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0444u);  // fchmod: the umask does not narrow it
  EXPECT_NE(::access(dir.Path("f.tmp").c_str(), F_OK), 0);
}

TEST(WriteFileAtomicallyTest, MissingDirectoryIsInternalNamingTheTemporary) {
  TempDir dir("fracgpu-base-");
  const std::string path = dir.Path("no-such-dir") + "/f";
  Status st = WriteFileAtomically(path, "x", 0644);
  EXPECT_EQ(st.code(), StatusCode::kInternal);
  EXPECT_EQ(st.message(), "cannot write " + path + ".tmp: No such file or directory");
}

}  // namespace
}  // namespace fracgpu::base
