//! \file models/corpus.hpp
//! \brief Loading text for the reference n-gram model: named files, or the default corpus.
//!
//! Every Debian machine has English prose under /usr/share/common-licenses (docs/design.md, 'Models'), so the
//! reference language models train on it by default, with no download; any other files can be named.
#pragma once

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "specdec/errors.hpp"

namespace specdec {

//! The directory of the default corpus.
inline constexpr std::string_view default_corpus_directory = "/usr/share/common-licenses";

//! The whole content of the file at `path`, as bytes.
//! \throws specdec::error when the file does not exist, is not a regular file, or cannot be read.
inline std::string load_text_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw error("specdec::load_text_file: not a readable regular file: " + path.string());
  std::ifstream in(path, std::ios::binary);
  if (!in) throw error("specdec::load_text_file: cannot open " + path.string());
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) throw error("specdec::load_text_file: error while reading " + path.string());
  return std::move(buffer).str();
}

//! The contents of the files at `paths`, in the same order.
//! \throws specdec::error when one of them cannot be read (see `load_text_file`).
inline std::vector<std::string> load_text_files(std::span<const std::filesystem::path> paths) {
  std::vector<std::string> out;
  out.reserve(paths.size());
  for (const auto& p : paths) out.push_back(load_text_file(p));
  return out;
}

//! The files of the default corpus: every regular file under `directory` (recursively; symbolic links are
//! skipped, so a text linked under two names, like GPL -> GPL-3, counts once), sorted by path for
//! determinism. Files that cannot be opened are skipped; a missing directory gives an empty list.
inline std::vector<std::filesystem::path> default_corpus_paths(
    const std::filesystem::path& directory = std::filesystem::path(default_corpus_directory)) {
  namespace fs = std::filesystem;
  std::vector<fs::path> out;
  std::error_code ec;
  fs::recursive_directory_iterator it(directory, fs::directory_options::skip_permission_denied, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    std::error_code sec;
    const fs::file_status status = it->symlink_status(sec);
    if (sec || !fs::is_regular_file(status)) continue;
    std::ifstream probe(it->path(), std::ios::binary);
    if (probe) out.push_back(it->path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

//! The texts of `default_corpus_paths(directory)`.
//! \throws specdec::error when no readable file is found.
inline std::vector<std::string> load_default_corpus(
    const std::filesystem::path& directory = std::filesystem::path(default_corpus_directory)) {
  const auto paths = default_corpus_paths(directory);
  if (paths.empty()) throw error("specdec::load_default_corpus: no readable file under " + directory.string());
  return load_text_files(paths);
}

}  // namespace specdec
