// CSV and gnuplot output of specdec-sim (see output.hpp).
#include "output.hpp"

#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <sstream>
#include <stdexcept>

namespace specdec_sim {

namespace {
std::string format(double x) {
  if (std::isnan(x)) return "";
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.10g", x);
  return buffer;
}

// The full path of gnuplot if it is on PATH.
std::optional<std::filesystem::path> find_gnuplot() {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return std::nullopt;
#ifdef _WIN32
  const char separator = ';';
  const char* names[] = {"gnuplot.exe"};
#else
  const char separator = ':';
  const char* names[] = {"gnuplot"};
#endif
  std::string_view rest(path);
  while (true) {
    const auto end = rest.find(separator);
    const std::string dir(rest.substr(0, end));
    for (const char* name : names) {
      std::error_code ec;
      const std::filesystem::path candidate = std::filesystem::path(dir.empty() ? "." : dir) / name;
      if (std::filesystem::is_regular_file(candidate, ec)) return candidate;
    }
    if (end == std::string_view::npos) break;
    rest.remove_prefix(end + 1);
  }
  return std::nullopt;
}

// A shell word: 'text' with embedded single quotes escaped (POSIX sh), or "text" on Windows.
std::string shell_word(const std::string& text) {
#ifdef _WIN32
  return "\"" + text + "\"";
#else
  std::string out = "'";
  for (const char c : text) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
#endif
}
}  // namespace

void write_csv(const table& t, const std::optional<std::string>& path) {
  std::ofstream file;
  if (path) {
    file.open(*path);
    if (!file) throw std::runtime_error("cannot write " + *path);
  }
  std::ostream& out = path ? static_cast<std::ostream&>(file) : std::cout;
  for (std::size_t c = 0; c < t.columns.size(); ++c) out << (c ? "," : "") << t.columns[c];
  out << "\n";
  for (const auto& row : t.rows) {
    for (std::size_t c = 0; c < row.size(); ++c) out << (c ? "," : "") << format(row[c]);
    out << "\n";
  }
  out.flush();
  if (!out) throw std::runtime_error(path ? "cannot write " + *path : std::string("cannot write to stdout"));
}

std::string short_number(double x) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%g", x);
  return buffer;
}

std::string datablock(const std::string& name, const table& t) {
  std::ostringstream out;
  out << "$" << name << " << EOD\n";
  for (const auto& row : t.rows) {
    for (std::size_t c = 0; c < row.size(); ++c) {
      const std::string f = format(row[c]);
      out << (c ? " " : "") << (f.empty() ? "NaN" : f);
    }
    out << "\n";
  }
  out << "EOD\n";
  return out.str();
}

std::string quoted(const std::string& text) {
  std::string out = "'";
  for (const char c : text) {
    out += c;
    if (c == '\'') out += '\'';
  }
  return out + "'";
}

std::string color(std::size_t i) {
  static const char* const palette[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2"};
  return std::string("rgb '") + palette[i % (sizeof palette / sizeof palette[0])] + "'";
}

std::string line_series(const std::string& block, int column, std::size_t color_index, const std::string& title) {
  return "$" + block + " using 1:" + std::to_string(column) + " with lines lw 2 lc " + color(color_index) +
         (title.empty() ? " notitle" : " title " + quoted(title));
}

std::string mc_series(const std::string& block, std::size_t color_index) {
  return "$" + block + " using 1:2:3 with yerrorbars pt 7 ps 0.6 lc " + color(color_index) + " notitle";
}

std::string mc_key(std::uint64_t draws) {
  return "NaN with points pt 7 ps 0.6 lc rgb '#444444' title " +
         quoted("Monte-Carlo (" + std::to_string(draws) + " draws), 95% CI");
}

int render_png(const std::string& png_path, int width, int height, const std::string& body, bool quiet) {
  const auto gnuplot = find_gnuplot();
  if (!gnuplot) {
    std::cerr << "specdec-sim: --plot needs gnuplot, which is not on PATH. Install it (Debian/Ubuntu: "
                 "apt-get install gnuplot-nox; scripts/install-deps.sh does it) or leave out --plot.\n";
    return 1;
  }
  std::error_code ec;
  const auto dir = std::filesystem::temp_directory_path(ec);
  if (ec) {
    std::cerr << "specdec-sim: no temporary directory for the gnuplot script: " << ec.message() << "\n";
    return 1;
  }
  // A unique script name: the output path's hash and the address of a local.
  const auto tag = std::hash<std::string>{}(png_path) ^ reinterpret_cast<std::uintptr_t>(&ec);
  const std::filesystem::path script = dir / ("specdec-sim-" + std::to_string(tag) + ".gp");
  {
    std::ofstream out(script);
    out << "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
        << "  set terminal pngcairo size " << width << "," << height << " enhanced font 'Sans,11' linewidth 1.5\n"
        << "} else {\n"
        << "  set terminal png size " << width << "," << height << "\n"
        << "}\n"
        << "set output " << quoted(png_path) << "\n"
        << body << "\nunset output\n";
    if (!out) {
      std::cerr << "specdec-sim: cannot write the gnuplot script " << script << "\n";
      return 1;
    }
  }
  const std::string command = shell_word(gnuplot->string()) + " " + shell_word(script.string());
  const int status = std::system(command.c_str());
  std::filesystem::remove(script, ec);
  if (status != 0) {
    std::cerr << "specdec-sim: gnuplot failed (status " << status << ") drawing " << png_path << "\n";
    return 1;
  }
  if (!quiet) std::cerr << "specdec-sim: wrote " << png_path << "\n";
  return 0;
}

}  // namespace specdec_sim
