// Command-line helpers shared by the specdec-sim subcommands: a small option parser with --help,
// number lists and ranges ("0.1,0.5" or "0:1:0.05"), the Monte-Carlo stream of a grid point, and a
// progress reporter on stderr.
#pragma once

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace specdec_sim {

//! A mistake on the command line: main prints it with a pointer to --help and exits with 2.
struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

//! The options of one subcommand: declared with flag()/value(), then parse()d.
class option_parser {
 public:
  //! `command` is "specdec-sim sd"; `description` is printed at the top of --help.
  option_parser(std::string command, std::string description);

  //! A boolean option --name.
  void flag(const std::string& name, const std::string& help);
  //! An option --name VALUE with a default (empty: no default) and its metavariable for --help.
  void value(const std::string& name, const std::string& metavar, const std::string& default_value, const std::string& help);
  //! The options every subcommand has: --csv, --plot, --seed, --draws, --policy, --quiet, --help.
  void common(std::uint64_t default_draws);

  //! Reads the arguments (--name VALUE or --name=VALUE). Returns false when --help was given
  //! (help is then printed to stdout). \throws usage_error on unknown options or missing values.
  bool parse(std::span<const std::string> args);

  void print_help(std::ostream& out) const;

  bool given(const std::string& name) const;  //!< the option was on the command line
  bool flag_set(const std::string& name) const;
  std::string text(const std::string& name) const;             //!< the value (or its default)
  double number(const std::string& name) const;                //!< a finite number
  std::uint64_t count(const std::string& name) const;          //!< a non-negative integer, in decimal digits
  std::vector<double> numbers(const std::string& name) const;  //!< a list/range of numbers
  std::vector<int> integers(const std::string& name) const;    //!< a list/range of integers

  // The common options, read.
  std::optional<std::string> csv_path() const;   //!< --csv FILE (nullopt: stdout)
  std::optional<std::string> plot_path() const;  //!< --plot FILE.png
  std::uint64_t seed() const { return count("seed"); }
  std::uint64_t draws() const { return count("draws"); }
  bool quiet() const { return flag_set("quiet"); }

 private:
  struct spec {
    std::string name, metavar, default_value, help;
    bool is_flag = false;
    bool seen = false;
    std::string value;
  };
  const spec& find(const std::string& name) const;
  spec* lookup(std::string_view name);

  std::string command_, description_;
  std::vector<spec> specs_;
};

//! Parses "a,b,c", "start:stop:step" (stop included within rounding) or a mix ("0.1,0.5:0.9:0.1");
//! every number is finite. \throws usage_error on anything else (what names the option).
std::vector<double> parse_numbers(std::string_view text, std::string_view what);

//! The Monte-Carlo stream number of a grid point: a hash of its coordinates, so a point draws the
//! same numbers whatever grid it is part of.
std::uint32_t point_stream(std::initializer_list<double> coordinates);

//! Progress of a long computation on stderr: a line every 2 s once the run has taken 2 s, and a
//! final line if any was printed. Silent when quiet.
class progress {
 public:
  progress(std::string what, std::uint64_t total, bool quiet);
  void advance(std::uint64_t steps = 1);
  ~progress();
  progress(const progress&) = delete;
  progress& operator=(const progress&) = delete;

 private:
  using clock = std::chrono::steady_clock;
  std::string what_;
  std::uint64_t total_, done_ = 0;
  bool quiet_, printed_ = false;
  clock::time_point start_, last_;
};

}  // namespace specdec_sim
