// Every reference in the repository resolves inside the repository: a clone is all a reader or
// CI has. Checked over every tracked-looking text file (build outputs, node_modules and .git
// skipped):
//  - no path that leaves the repository (`../shared/...`, `shared/design/...`, an absolute path
//    of a development machine such as `/work/...` or `/home/...`);
//  - the design documents are cited by their path in the repository, `docs/design/<NAME>.md`
//    (inside docs/design/ itself a bare name or a relative link is fine);
//  - every repository path a file mentions (`docs/…`, `src/…`, `tests/…`, `deploy/…`, `bench/…`,
//    `scripts/…`, `proto/…`, `data/…`, `web/…`) exists, and every relative Markdown link resolves.
// Hand-written scanning (no <regex>: banned in this code base for GCC 12 -O2 ASan warnings).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace {

namespace fs = std::filesystem;
const fs::path kSource = FRACGPU_SOURCE_DIR;

constexpr std::array<std::string_view, 6> kDesignDocs = {"CONTRACT.md",       "ARCHITECTURE.md",
                                                         "STYLE.md",          "wire-apis.md",
                                                         "hami-behaviour.md", "fgd-evaluation.md"};
constexpr std::array<std::string_view, 9> kRepoRoots = {
    "docs/", "src/", "tests/", "deploy/", "bench/", "scripts/", "proto/", "data/", "web/"};
constexpr std::string_view kContainerHome = "/home/jovyan";
constexpr std::array<std::string_view, 5> kOutside = {"../shared/", "shared/design/",
                                                      "shared/reference/", "/work/", "/home/"};

bool IsTextFile(const fs::path& p) {
  static constexpr std::array<std::string_view, 19> kExt = {
      ".cc",  ".h",  ".c",    ".md",  ".txt", ".sh",  ".yaml",  ".yml", ".json", ".proto",
      ".mjs", ".js", ".html", ".css", ".def", ".map", ".cmake", ".py",  ".in"};
  const std::string ext = p.extension().string();
  const std::string name = p.filename().string();
  if (name == "CMakeLists.txt" || name == "Makefile" || name == "Dockerfile" || name == "run")
    return true;
  if (name == "package-lock.json" || name == "SHA256SUMS") return false;
  return std::find(kExt.begin(), kExt.end(), ext) != kExt.end();
}

/// Files of the repository, relative to its root, without build outputs and installed packages.
std::vector<fs::path> RepositoryFiles() {
  std::vector<fs::path> out;
  for (auto it = fs::recursive_directory_iterator(kSource);
       it != fs::recursive_directory_iterator(); ++it) {
    const fs::path rel = fs::relative(it->path(), kSource);
    const std::string first = rel.begin()->string();
    const std::string name = it->path().filename().string();
    if (it->is_directory()) {
      if (first == "build" || first == ".git" || first == "out" || first == "simulate-out" ||
          name == "node_modules" || name == ".cache" || name == "csv" ||
          name == "expected_results") {
        it.disable_recursion_pending();
      }
      continue;
    }
    if (it->is_regular_file() && IsTextFile(rel)) out.push_back(rel);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string Read(const fs::path& rel) {
  std::ifstream in(kSource / rel, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

bool PathChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.' || c == '/' || c == '+';
}

/// The path-like token that starts at `pos`, trailing punctuation dropped.
std::string TokenAt(const std::string& text, size_t pos) {
  size_t end = pos;
  while (end < text.size() && PathChar(text[end])) ++end;
  std::string t = text.substr(pos, end - pos);
  while (!t.empty() && (t.back() == '.' || t.back() == ',')) t.pop_back();
  return t;
}

int LineOf(const std::string& text, size_t pos) {
  return 1 +
         static_cast<int>(std::count(text.begin(), text.begin() + static_cast<long>(pos), '\n'));
}

/// A token that names a pattern, not one file: followed by a wildcard, a placeholder or a brace
/// list (`src/core/frag.{h,cc}`, `deploy/<file>`, `tests/*_test.cc`).
bool IsPattern(const std::string& text, size_t start) {
  size_t end = start;
  while (end < text.size() && PathChar(text[end])) ++end;
  return end < text.size() &&
         (text[end] == '*' || text[end] == '<' || text[end] == '{' || text[end] == '$');
}

/// `path` exists, or names files by their stem (`src/vgpu/sm_limiter` for sm_limiter.h/.cc,
/// `tests/vgpu/vgpu_app` for the program built from vgpu_app.cc), or names a program built in
/// that folder as `<prefix>_<stem>` (`tests/enforce/enforce_bypass_app` from bypass_app.cc).
bool ExistsOrNamesAStem(const fs::path& path) {
  if (fs::exists(kSource / path)) return true;
  const fs::path dir = kSource / path.parent_path();
  if (!fs::is_directory(dir)) return false;
  const std::string name = path.filename().string();
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string file = e.path().filename().string();
    const std::string stem = e.path().stem().string();
    if (file.rfind(name + ".", 0) == 0) return true;
    if (e.path().extension() == ".cc" && name.size() > stem.size() &&
        name.compare(name.size() - stem.size(), stem.size(), stem) == 0 &&
        name[name.size() - stem.size() - 1] == '_') {
      return true;
    }
  }
  return false;
}

std::string Where(const fs::path& rel, const std::string& text, size_t pos) {
  return rel.string() + ":" + std::to_string(LineOf(text, pos));
}

TEST(RepositoryReferences, NoPathLeavesTheRepository) {
  std::vector<std::string> bad;
  for (const fs::path& rel : RepositoryFiles()) {
    if (rel == "tests/repo/references_test.cc") continue;  // names the patterns it looks for
    const std::string text = Read(rel);
    for (std::string_view o : kOutside) {
      for (size_t pos = text.find(o); pos != std::string::npos; pos = text.find(o, pos + 1)) {
        // A path inside a container image, not of a machine: Kubeflow's notebook images' home
        // (its notebook controller sets workingDir to it), which the notebook fakes mirror.
        if (text.compare(pos, kContainerHome.size(), kContainerHome) == 0) continue;
        bad.push_back(Where(rel, text, pos) + ": " + TokenAt(text, pos));
      }
    }
  }
  EXPECT_TRUE(bad.empty()) << "references outside the repository:\n" << testing::PrintToString(bad);
}

TEST(RepositoryReferences, DesignDocumentsAreCitedByTheirPathInTheRepository) {
  std::vector<std::string> bad;
  for (const fs::path& rel : RepositoryFiles()) {
    if (rel == "tests/repo/references_test.cc") continue;
    const bool in_design = rel.parent_path() == "docs/design";
    const std::string text = Read(rel);
    for (std::string_view doc : kDesignDocs) {
      for (size_t pos = text.find(doc); pos != std::string::npos; pos = text.find(doc, pos + 1)) {
        if (pos > 0 && PathChar(text[pos - 1]) && text[pos - 1] != '/')
          continue;  // part of another name
        const std::string prefix = "docs/design/";
        const bool cited =
            pos >= prefix.size() && text.compare(pos - prefix.size(), prefix.size(), prefix) == 0;
        const bool relative_in_docs =
            rel.parent_path() == "docs" && pos >= 7 && text.compare(pos - 7, 7, "design/") == 0;
        if (!cited && !in_design && !relative_in_docs)
          bad.push_back(Where(rel, text, pos) + ": " + std::string(doc));
      }
    }
  }
  EXPECT_TRUE(bad.empty()) << "design documents cited without docs/design/:\n"
                           << testing::PrintToString(bad);
}

TEST(RepositoryReferences, EveryMentionedRepositoryPathExists) {
  std::vector<std::string> bad;
  for (const fs::path& rel : RepositoryFiles()) {
    // This test's own samples; HAMi's description names paths in HAMi's repositories; the trace's
    // README describes the layout of its own archive.
    // tests/repo/lint_test.py plants files in scratch trees.
    if (rel == "tests/repo/references_test.cc" || rel == "tests/repo/lint_test.py" ||
        rel == "docs/design/hami-behaviour.md" || rel.begin()->string() == "data") {
      continue;
    }
    const std::string text = Read(rel);
    for (std::string_view root : kRepoRoots) {
      for (size_t pos = text.find(root); pos != std::string::npos; pos = text.find(root, pos + 1)) {
        // Only a path that starts a token: not `build/release/tests/...`, not `/usr/src/...`.
        if (pos > 0 && (PathChar(text[pos - 1]) || text[pos - 1] == '/')) continue;
        const std::string token = TokenAt(text, pos);
        if (token.size() <= root.size() || IsPattern(text, pos)) continue;
        if (rel == "tests/deploy/install_doc_test.cc" && token == "deploy/typo/")
          continue;  // its negative sample
        if (!ExistsOrNamesAStem(token)) bad.push_back(Where(rel, text, pos) + ": " + token);
      }
    }
  }
  EXPECT_TRUE(bad.empty()) << "repository paths that do not exist:\n"
                           << testing::PrintToString(bad);
}

TEST(RepositoryReferences, RelativeMarkdownLinksResolve) {
  std::vector<std::string> bad;
  for (const fs::path& rel : RepositoryFiles()) {
    if (rel.extension() != ".md") continue;
    const std::string text = Read(rel);
    for (size_t pos = text.find("]("); pos != std::string::npos; pos = text.find("](", pos + 1)) {
      const size_t close = text.find(')', pos + 2);
      if (close == std::string::npos) break;
      std::string target = text.substr(pos + 2, close - pos - 2);
      if (target.empty() || target.find("://") != std::string::npos || target[0] == '#' ||
          target.rfind("mailto:", 0) == 0 || target.find(' ') != std::string::npos) {
        continue;
      }
      target = target.substr(0, target.find('#'));
      if (!fs::exists(kSource / rel.parent_path() / target))
        bad.push_back(Where(rel, text, pos) + ": " + target);
    }
  }
  EXPECT_TRUE(bad.empty()) << "Markdown links that do not resolve:\n"
                           << testing::PrintToString(bad);
}

// The checks above must be able to fail: each pattern is found in a sample text.
TEST(RepositoryReferences, TheScannerFindsWhatItLooksFor) {
  const std::string sample = "see ../shared/design/CONTRACT.md and docs/no-such-file.md.";
  EXPECT_NE(sample.find(kOutside[0]), std::string::npos);
  EXPECT_EQ(TokenAt(sample, sample.find("docs/")), "docs/no-such-file.md");
  EXPECT_FALSE(fs::exists(kSource / TokenAt(sample, sample.find("docs/"))));
  EXPECT_TRUE(fs::exists(kSource / "docs/design/CONTRACT.md"));
}

}  // namespace
