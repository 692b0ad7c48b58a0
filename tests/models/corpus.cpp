// Corpus loading: named files, the default-corpus listing (sorted, regular files only), and errors.
// The case on the machine's default corpus is tagged [needs_corpus] and runs as the CTest test
// models/corpus:needs_corpus, which reports "Skipped" where there is none (support/skip.hpp).
// SPECDEC_TEST_SPLIT: needs_corpus
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <system_error>
#include <vector>

#include "specdec/models/corpus.hpp"
#include "support/skip.hpp"

namespace fs = std::filesystem;

namespace {
// A scratch directory removed at the end of the test.
struct scratch_dir {
  fs::path path;
  scratch_dir() {
    path = fs::temp_directory_path() / ("specdec_corpus_test_" + std::to_string(std::random_device{}()));
    fs::create_directories(path);
  }
  ~scratch_dir() {
    std::error_code ec;
    fs::permissions(path / "locked", fs::perms::owner_all, ec);
    fs::remove_all(path, ec);
  }
  void write(const fs::path& rel, const std::string& text) const {
    fs::create_directories((path / rel).parent_path());
    std::ofstream(path / rel, std::ios::binary) << text;
  }
};
}  // namespace

TEST_CASE("load_text_file(s) read named files byte for byte", "[models][corpus]") {
  scratch_dir dir;
  dir.write("a.txt", "Hello,\r\nworld.\n");
  dir.write("b.txt", "");
  CHECK(specdec::load_text_file(dir.path / "a.txt") == "Hello,\r\nworld.\n");
  const std::vector<fs::path> paths{dir.path / "b.txt", dir.path / "a.txt"};
  const auto texts = specdec::load_text_files(paths);
  REQUIRE(texts.size() == 2);
  CHECK(texts[0].empty());
  CHECK(texts[1] == "Hello,\r\nworld.\n");
}

TEST_CASE("missing files and directories are errors", "[models][corpus]") {
  scratch_dir dir;
  CHECK_THROWS_AS(specdec::load_text_file(dir.path / "missing.txt"), specdec::error);
  CHECK_THROWS_AS(specdec::load_text_file(dir.path), specdec::error);  // a directory is not a text file
  const std::vector<fs::path> paths{dir.path / "missing.txt"};
  CHECK_THROWS_AS(specdec::load_text_files(paths), specdec::error);
  CHECK(specdec::default_corpus_paths(dir.path / "no_such_dir").empty());
  CHECK_THROWS_AS(specdec::load_default_corpus(dir.path), specdec::error);  // no file at all
}

TEST_CASE("default_corpus_paths lists regular files, sorted, without symlinks", "[models][corpus]") {
  scratch_dir dir;
  dir.write("b", "bee");
  dir.write("a", "ay");
  dir.write("sub/c", "see");
  std::error_code ec;
  fs::create_symlink(dir.path / "a", dir.path / "link", ec);  // may fail on exotic file systems
  const auto paths = specdec::default_corpus_paths(dir.path);
  REQUIRE(paths.size() == 3);
  CHECK(paths[0] == dir.path / "a");
  CHECK(paths[1] == dir.path / "b");
  CHECK(paths[2] == dir.path / "sub" / "c");
  const auto texts = specdec::load_default_corpus(dir.path);
  CHECK(texts == std::vector<std::string>{"ay", "bee", "see"});

  // an unreadable file is skipped (unless the test runs with rights that read it anyway)
  dir.write("locked", "secret");
  fs::permissions(dir.path / "locked", fs::perms::none, ec);
  const bool readable = static_cast<bool>(std::ifstream(dir.path / "locked"));
  CHECK(specdec::default_corpus_paths(dir.path).size() == (readable ? 4u : 3u));
}

TEST_CASE("the default corpus exists on Debian and is sorted", "[models][corpus][needs_corpus]") {
  const auto paths = specdec::default_corpus_paths();
  if (paths.empty()) {
    SPECDEC_SKIP("no default corpus under " << specdec::default_corpus_directory);
    return;
  }
  CHECK(std::is_sorted(paths.begin(), paths.end()));
  for (const auto& p : paths) CHECK_FALSE(fs::is_symlink(p));
  const auto texts = specdec::load_default_corpus();
  CHECK(texts.size() == paths.size());
}
