// Command-line helpers of specdec-sim (see cli.hpp).
#include "cli.hpp"

#include <bit>
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <sstream>

namespace specdec_sim {

option_parser::option_parser(std::string command, std::string description)
    : command_(std::move(command)), description_(std::move(description)) {}

void option_parser::flag(const std::string& name, const std::string& help) {
  specs_.push_back({name, "", "", help, true, false, ""});
}

void option_parser::value(const std::string& name, const std::string& metavar, const std::string& default_value,
                          const std::string& help) {
  specs_.push_back({name, metavar, default_value, help, false, false, ""});
}

void option_parser::common(std::uint64_t default_draws) {
  value("draws", "N", std::to_string(default_draws), "Monte-Carlo draws per point (0: theory only); one Philox stream per point");
  value("seed", "S", "1", "Monte-Carlo seed (same seed, same numbers)");
  value("policy", "P", "seq",
        "where the Monte-Carlo draws run: seq (this CPU) or cuda (the GPU: the same draws, the same numbers)");
  value("csv", "FILE", "", "write the CSV table to FILE instead of stdout");
  value("plot", "FILE.png", "", "also draw a PNG through gnuplot (needs gnuplot on PATH)");
  flag("quiet", "no progress messages on stderr");
  flag("help", "show this help and exit");
}

option_parser::spec* option_parser::lookup(std::string_view name) {
  for (auto& s : specs_)
    if (s.name == name) return &s;
  return nullptr;
}

const option_parser::spec& option_parser::find(const std::string& name) const {
  for (const auto& s : specs_)
    if (s.name == name) return s;
  throw std::logic_error("specdec-sim: option --" + name + " was never declared");
}

bool option_parser::parse(std::span<const std::string> args) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg.rfind("--", 0) != 0) throw usage_error(command_ + ": unexpected argument '" + arg + "'");
    std::string_view body = std::string_view(arg).substr(2);
    std::optional<std::string> inline_value;
    if (const auto eq = body.find('='); eq != std::string_view::npos) {
      inline_value = std::string(body.substr(eq + 1));
      body = body.substr(0, eq);
    }
    spec* s = lookup(body);
    if (s == nullptr) throw usage_error(command_ + ": unknown option --" + std::string(body));
    s->seen = true;
    if (s->is_flag) {
      if (inline_value) throw usage_error(command_ + ": --" + s->name + " takes no value");
      continue;
    }
    if (inline_value) {
      s->value = *inline_value;
    } else {
      if (i + 1 >= args.size()) throw usage_error(command_ + ": --" + s->name + " needs a value (" + s->metavar + ")");
      s->value = args[++i];
    }
  }
  if (flag_set("help")) {
    print_help(std::cout);
    return false;
  }
  return true;
}

void option_parser::print_help(std::ostream& out) const {
  out << "usage: " << command_ << " [options]\n\n" << description_ << "\n\noptions:\n";
  for (const auto& s : specs_) {
    std::string left = "  --" + s.name + (s.is_flag ? "" : " " + s.metavar);
    out << std::left << std::setw(26) << left << " " << s.help;
    if (!s.is_flag && !s.default_value.empty()) out << " (default " << s.default_value << ")";
    out << "\n";
  }
}

bool option_parser::given(const std::string& name) const { return find(name).seen; }
bool option_parser::flag_set(const std::string& name) const { return find(name).seen; }

std::string option_parser::text(const std::string& name) const {
  const spec& s = find(name);
  return s.seen ? s.value : s.default_value;
}

double option_parser::number(const std::string& name) const {
  const std::vector<double> v = parse_numbers(text(name), "--" + name);
  if (v.size() != 1) throw usage_error("--" + name + " takes one number, got '" + text(name) + "'");
  return v.front();
}

std::uint64_t option_parser::count(const std::string& name) const {
  const std::string t = text(name);
  std::size_t used = 0;
  unsigned long long v = 0;
  // Decimal digits only: std::stoull also reads blanks and a sign, and negates " -1" to 2^64 - 1
  // (found by tests/fuzz/specdec_sim_cli.cpp).
  try {
    if (!t.empty() && t.find_first_not_of("0123456789") == std::string::npos) v = std::stoull(t, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (t.empty() || used != t.size()) throw usage_error("--" + name + " takes a non-negative integer, got '" + t + "'");
  return static_cast<std::uint64_t>(v);
}

std::vector<double> option_parser::numbers(const std::string& name) const { return parse_numbers(text(name), "--" + name); }

std::vector<int> option_parser::integers(const std::string& name) const {
  std::vector<int> out;
  for (const double x : numbers(name)) {
    if (x != std::floor(x) || std::abs(x) > 1e9) throw usage_error("--" + name + " takes integers");
    out.push_back(static_cast<int>(x));
  }
  return out;
}

std::optional<std::string> option_parser::csv_path() const {
  if (!given("csv")) return std::nullopt;
  return text("csv");
}

std::optional<std::string> option_parser::plot_path() const {
  if (!given("plot")) return std::nullopt;
  return text("plot");
}

namespace {
double parse_one(std::string_view item, std::string_view what) {
  const std::string s(item);
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (s.empty() || used != s.size() || !std::isfinite(v))
    throw usage_error(std::string(what) + ": '" + s + "' is not a finite number");
  return v;
}
}  // namespace

std::vector<double> parse_numbers(std::string_view text, std::string_view what) {
  std::vector<double> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = text.find(',', start);
    const std::string_view item = text.substr(start, comma == std::string_view::npos ? text.npos : comma - start);
    if (const auto c1 = item.find(':'); c1 != std::string_view::npos) {
      const auto c2 = item.find(':', c1 + 1);
      if (c2 == std::string_view::npos) throw usage_error(std::string(what) + ": a range is start:stop:step");
      const double a = parse_one(item.substr(0, c1), what), b = parse_one(item.substr(c1 + 1, c2 - c1 - 1), what),
                   step = parse_one(item.substr(c2 + 1), what);
      if (!(step > 0) || b < a) throw usage_error(std::string(what) + ": a range needs start <= stop and step > 0");
      const double n = std::floor((b - a) / step + 1e-9);
      if (n > 1e6) throw usage_error(std::string(what) + ": the range has too many points");
      for (int i = 0; i <= static_cast<int>(n); ++i) {
        const double x = a + i * step;  // may round past a stop near the largest double (fuzz/specdec_sim_cli.cpp)
        if (!std::isfinite(x)) throw usage_error(std::string(what) + ": the range leaves the finite numbers");
        out.push_back(x);
      }
    } else {
      out.push_back(parse_one(item, what));
    }
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

std::uint32_t point_stream(std::initializer_list<double> coordinates) {
  std::uint64_t h = 0x243F6A8885A308D3ull;  // splitmix64 over the coordinates' bits
  for (const double x : coordinates) {
    h += std::bit_cast<std::uint64_t>(x) + 0x9E3779B97F4A7C15ull;
    h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9ull;
    h = (h ^ (h >> 27)) * 0x94D049BB133111EBull;
    h ^= h >> 31;
  }
  return static_cast<std::uint32_t>(h ^ (h >> 32));
}

progress::progress(std::string what, std::uint64_t total, bool quiet)
    : what_(std::move(what)), total_(total), quiet_(quiet), start_(clock::now()), last_(start_) {}

void progress::advance(std::uint64_t steps) {
  done_ += steps;
  if (quiet_) return;
  const auto now = clock::now();
  if (now - start_ < std::chrono::seconds(2) || now - last_ < std::chrono::seconds(2)) return;
  last_ = now;
  printed_ = true;
  const double s = std::chrono::duration<double>(now - start_).count();
  std::fprintf(stderr, "%s: %llu/%llu points (%.0f%%), %.1f s\n", what_.c_str(), static_cast<unsigned long long>(done_),
               static_cast<unsigned long long>(total_),
               total_ > 0 ? 100.0 * static_cast<double>(done_) / static_cast<double>(total_) : 100.0, s);
}

progress::~progress() {
  if (!printed_) return;
  const double s = std::chrono::duration<double>(clock::now() - start_).count();
  std::fprintf(stderr, "%s: done, %llu points in %.1f s\n", what_.c_str(), static_cast<unsigned long long>(done_), s);
}

}  // namespace specdec_sim
