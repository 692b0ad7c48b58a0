// Runs a fuzz harness's LLVMFuzzerTestOneInput on every file named on the command line, or held
// directly in a directory named there, so that seed corpora and crash inputs replay as ordinary
// tests with any compiler (tests/fuzz/CMakeLists.txt). Arguments starting with '-' (libFuzzer
// options) are ignored. Fails when no input was found, so that a missing corpus does not pass.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

std::vector<std::uint8_t> read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  std::vector<fs::path> inputs;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.empty() || arg[0] == '-') continue;
    std::error_code ec;
    if (fs::is_directory(arg, ec)) {
      std::vector<fs::path> files;
      for (const auto& entry : fs::directory_iterator(arg, ec))
        if (entry.is_regular_file()) files.push_back(entry.path());
      std::sort(files.begin(), files.end());
      inputs.insert(inputs.end(), files.begin(), files.end());
    } else if (fs::is_regular_file(arg, ec)) {
      inputs.emplace_back(arg);
    } else {
      std::fprintf(stderr, "replay: no such file or directory: %s\n", arg.c_str());
      return 2;
    }
  }
  if (inputs.empty()) {
    std::fprintf(stderr, "replay: no input to run (give files or directories)\n");
    return 2;
  }
  for (const auto& path : inputs) {
    std::fprintf(stderr, "replay: %s\n", path.string().c_str());
    const std::vector<std::uint8_t> bytes = read_bytes(path);
    // A heap block of exactly the input's size, so that AddressSanitizer catches reads past its end.
    const std::unique_ptr<std::uint8_t[]> exact(new std::uint8_t[std::max<std::size_t>(bytes.size(), 1)]);
    std::copy(bytes.begin(), bytes.end(), exact.get());
    LLVMFuzzerTestOneInput(exact.get(), bytes.size());
  }
  std::printf("replay: %zu input(s) ran without a failure\n", inputs.size());
  return 0;
}
