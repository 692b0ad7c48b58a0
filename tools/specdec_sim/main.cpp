// specdec-sim: theory and Monte-Carlo simulation of speculative decoding from the command line.
//
//   specdec-sim <subcommand> [options]        e.g. specdec-sim sprinter --plot sprinter.png
//   specdec-sim <subcommand> --help           the subcommand's options
//   specdec-sim --help                        the list of subcommands
//
// Subcommands register themselves (registry.hpp); each writes a CSV table to stdout or --csv FILE
// and, with --plot FILE.png, a figure drawn by gnuplot. Exit status: 0 success, 1 failure (a
// library error, a file that cannot be written, a plot that cannot be drawn), 2 usage error.
#include <algorithm>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "cli.hpp"
#include "registry.hpp"

namespace {

void print_usage(std::ostream& out) {
  auto all = specdec_sim::subcommands();
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  out << "usage: specdec-sim <subcommand> [options]\n\n"
         "Closed forms of speculative decoding (specdec/theory) with Monte-Carlo checks (specdec/simulate).\n"
         "Every subcommand writes CSV to stdout (or --csv FILE) and draws a PNG with --plot FILE.png.\n\n"
         "subcommands:\n";
  for (const auto& s : all)
    out << "  " << s.name << std::string(s.name.size() < 10 ? 10 - s.name.size() : 1, ' ') << s.summary << "\n";
  out << "\n'specdec-sim <subcommand> --help' lists a subcommand's options.\n";
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    print_usage(std::cerr);
    return 2;
  }
  if (args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    print_usage(std::cout);
    return 0;
  }
  const auto& all = specdec_sim::subcommands();
  const auto it = std::find_if(all.begin(), all.end(), [&](const auto& s) { return s.name == args[0]; });
  if (it == all.end()) {
    std::cerr << "specdec-sim: unknown subcommand '" << args[0] << "'\n\n";
    print_usage(std::cerr);
    return 2;
  }
  try {
    return it->run(std::span<const std::string>(args).subspan(1));
  } catch (const specdec_sim::usage_error& e) {
    std::cerr << e.what() << "\n(see 'specdec-sim " << it->name << " --help')\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "specdec-sim " << it->name << ": " << e.what() << "\n";
    return 1;
  }
}
