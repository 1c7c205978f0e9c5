#pragma once
// One whole-file reader for the test suites (the suites kept six private copies). Tests read
// files they or the code under test wrote, and compare the text with what they expect, so a
// missing or unreadable file reads as "" and the comparison names the difference.

#include <fstream>
#include <sstream>
#include <string>

namespace fracgpu::test_support {

/// The bytes of `path` (binary mode; works on /proc files, whose size stat reports as 0), or ""
/// when it cannot be opened. Test code only: product code reads files with base/file.h
/// ReadFile, which bounds the size and reports errors.
inline std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

}  // namespace fracgpu::test_support
