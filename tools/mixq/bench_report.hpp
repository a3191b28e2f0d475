// Results of `mixq bench` and their two renderings: the console table and the JSON file.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace mixq::bench {

struct BenchRow {
  std::string scheme;  // bench scheme name, or "dense" for the baseline
  std::string act;     // "weight-only", "int8-block", "fp8-block", or the baseline's dtype
  int64_t K = 0, N = 0, M = 0;
  std::string kernel;
  double time_us = 0, min_us = 0;
  int reps = 0;
  int64_t weight_bytes = 0;   // bytes the kernel streams for W (codes + scales + zeros)
  int64_t moved_bytes = 0;    // weight + activation + output bytes
  double gb_per_s = 0, tflop_per_s = 0;
  double rel_err = 0, tol = 0;          // vs float64 on the activations given and dequantized W
  double emu_err = 0, emu_tol = 0;      // vs float64 on quantized-dequantized activations
  double speedup = 0;                   // baseline time / this time (same shape, same M)
  double solo_baseline_us = 0;          // the baseline timed on its own (speedup uses it)
  double paired_baseline_us = 0;        // the baseline timed alternately with this row (0: none)
  double read_us = 0;                   // M = 1: a plain read of weight_bytes (0: not measured)
  std::string sample;                   // which outputs the reference covers
  bool unsupported = false;
  std::string note;                     // why unsupported
  bool ok() const;                      // within both tolerances (unsupported rows are ok)
};

struct BenchReport {
  std::string command;   // the command line that produced it
  std::string backend, device, baseline;
  int threads = 0;
  int settle_ms = 0;     // untimed replays of each case before its timed ones (CUDA)
  std::vector<BenchRow> rows;
};

// The table is printed incrementally (one block per layer shape, as soon as it is measured):
// header, then rows, then the footer.
void print_table_header(FILE* out, const BenchReport& r);
void print_table_rows(FILE* out, const std::vector<BenchRow>& rows);
void print_table(FILE* out, const BenchReport& r);  // all three
void write_json(const std::string& path, const BenchReport& r);

}  // namespace mixq::bench
