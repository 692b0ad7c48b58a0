// The subcommands of specdec-sim. Each subcommand is one .cpp file in this directory that
// registers itself at start-up:
//
//   namespace { int run(std::span<const std::string> args); const bool registered =
//       specdec_sim::add_subcommand({"name", "one-line summary", &run}); }
//
// tools/CMakeLists.txt compiles every .cpp here into the executable, so a new subcommand needs no
// other edit. `args` are the arguments after the subcommand's name; `run` returns the exit status.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace specdec_sim {

//! One subcommand: its name on the command line, a one-line summary for `specdec-sim --help`, and
//! its entry point.
struct subcommand {
  std::string_view name;
  std::string_view summary;
  int (*run)(std::span<const std::string> args);
};

//! Every registered subcommand, in registration order (main sorts them by name for --help).
inline std::vector<subcommand>& subcommands() {
  static std::vector<subcommand> all;  // a function-local static: safe during static initialisation
  return all;
}

//! Registers a subcommand; returns true so that it can initialise a namespace-scope constant.
inline bool add_subcommand(const subcommand& s) {
  subcommands().push_back(s);
  return true;
}

}  // namespace specdec_sim
