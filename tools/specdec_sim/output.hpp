// Output of specdec-sim: CSV tables (stdout or a file) and PNG plots drawn by gnuplot.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "specdec/simulate/tally.hpp"

namespace specdec_sim {

//! A table of numbers with named columns; NaN is written as an empty CSV field (no value).
struct table {
  std::vector<std::string> columns;
  std::vector<std::vector<double>> rows;
  void add(std::vector<double> row) { rows.push_back(std::move(row)); }
};

//! Stores a Monte-Carlo estimate in a table row: its mean at `column`, its standard error at column + 1.
inline void put_estimate(std::vector<double>& row, std::size_t column, const specdec::simulate::estimate& e) {
  row[column] = e.mean;
  row[column + 1] = e.std_error;
}

//! Writes the table as CSV to `path`, or to stdout when path is nullopt. Numbers with 10
//! significant digits. \throws std::runtime_error if the file cannot be written.
void write_csv(const table& t, const std::optional<std::string>& path);

//! A short text for a number in titles and keys ("%g").
std::string short_number(double x);

//! A gnuplot datablock named $name holding the rows of t (whitespace-separated; NaN as "NaN").
std::string datablock(const std::string& name, const table& t);

//! A gnuplot string literal: 'text' with embedded quotes doubled.
std::string quoted(const std::string& text);

//! The i-th colour of the plots' palette, as a gnuplot colour spec: rgb '#rrggbb'.
std::string color(std::size_t i);

//! A plot element: column `column` of datablock $block against column 1, as a line.
std::string line_series(const std::string& block, int column, std::size_t color_index, const std::string& title);

//! A plot element: Monte-Carlo points of datablock $block (columns x, mean, half-width of the 95%
//! interval) with error bars, left out of the key (see mc_key).
std::string mc_series(const std::string& block, std::size_t color_index);

//! A plot element that draws nothing and adds one key entry for every Monte-Carlo series:
//! "Monte-Carlo (<draws> draws), 95% CI" (draws per point).
std::string mc_key(std::uint64_t draws);

//! Draws a PNG of width x height pixels with gnuplot: sets a PNG terminal (pngcairo if gnuplot has
//! it, else png) and the output file, then runs `body` (datablocks, settings, plot commands).
//! Returns 0 on success. If gnuplot is not on PATH, prints a message that says how to install it
//! and returns 1; if gnuplot fails, prints its status and returns 1.
int render_png(const std::string& png_path, int width, int height, const std::string& body, bool quiet);

}  // namespace specdec_sim
