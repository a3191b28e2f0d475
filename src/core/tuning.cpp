#include "mixq/tuning.hpp"

#include <cstdlib>
#include <sstream>
#include <variant>
#include <vector>

#include "mixq/error.hpp"

namespace mixq {

namespace {

// One knob: its key, where it lives, and the values it accepts.
struct IntKnob {
  int Tuning::*field;
  int lo, hi;
  bool powers_of_two = false;  // 0 or a power of two only
};
struct ToggleKnob {
  Toggle Tuning::*field;
};
struct ScheduleKnob {
  Tuning::Schedule Tuning::*field;
};
struct ReduceKnob {
  Tuning::Reduce Tuning::*field;
};
struct CpuActKnob {
  Tuning::CpuActivations Tuning::*field;
};
using Knob = std::variant<IntKnob, ToggleKnob, ScheduleKnob, ReduceKnob, CpuActKnob>;

struct Entry {
  const char* key;
  Knob knob;
};

const std::vector<Entry>& knobs() {
  static const std::vector<Entry> table = {
      {"wo_token_tile", IntKnob{&Tuning::wo_token_tile, 0, 256}},
      {"wo_ctas_per_sm", IntKnob{&Tuning::wo_ctas_per_sm, 0, 2}},
      {"wo_stage_k", IntKnob{&Tuning::wo_stage_k, 0, 128}},
      {"wo_max_stages", IntKnob{&Tuning::wo_max_stages, 0, 64}},
      {"wo_group_n", IntKnob{&Tuning::wo_group_n, 0, 1 << 16}},
      {"wo_early_stages", IntKnob{&Tuning::wo_early_stages, -2, 64}},
      {"wo_y_rows", IntKnob{&Tuning::wo_y_rows, -1, 256}},
      {"wo_schedule", ScheduleKnob{&Tuning::wo_schedule}},
      {"wo_reduce", ReduceKnob{&Tuning::wo_reduce}},
      {"wo_k_split", IntKnob{&Tuning::wo_k_split, 0, 8, true}},
      {"wo_fold", ToggleKnob{&Tuning::wo_fold}},
      {"wo_fold_half", ToggleKnob{&Tuning::wo_fold_half}},
      {"wo_bf16_zero", ToggleKnob{&Tuning::wo_bf16_zero}},
      {"wo_wgmma_pdl", ToggleKnob{&Tuning::wo_wgmma_pdl}},
      {"wo_a8_shared_zero", ToggleKnob{&Tuning::wo_a8_shared_zero}},
      {"wo_ragged_tiles", ToggleKnob{&Tuning::wo_ragged_tiles}},
      {"wo_stream_blocks_per_sm", IntKnob{&Tuning::wo_stream_blocks_per_sm, 0, 16}},
      {"wo_stream_min_chunks", IntKnob{&Tuning::wo_stream_min_chunks, 0, 64}},
      {"wo_stream_cluster", ToggleKnob{&Tuning::wo_stream_cluster}},
      {"wo_stream_pdl", ToggleKnob{&Tuning::wo_stream_pdl}},
      {"wo_dequant_chunk_mb", IntKnob{&Tuning::wo_dequant_chunk_mb, 0, 1024}},
      {"conv_copies_pdl", ToggleKnob{&Tuning::conv_copies_pdl}},
      {"w8a8_group_n", IntKnob{&Tuning::w8a8_group_n, 0, 1 << 16}},
      {"w8a8_y_tma", ToggleKnob{&Tuning::w8a8_y_tma}},
      {"w8a8_skinny_pdl", ToggleKnob{&Tuning::w8a8_skinny_pdl}},
      {"act_quant_pieces", IntKnob{&Tuning::act_quant_pieces, 0, 2}},
      {"act_quant_ctas_per_sm", IntKnob{&Tuning::act_quant_ctas_per_sm, 0, 8}},
      {"act_quant_band", IntKnob{&Tuning::act_quant_band, -1, 3}},
      {"moe_wgmma_min_rows", IntKnob{&Tuning::moe_wgmma_min_rows, 0, 1 << 30}},
      {"moe_token_tile", IntKnob{&Tuning::moe_token_tile, 0, 256}},
      {"moe_block_splits", IntKnob{&Tuning::moe_block_splits, 0, 8}},
      {"moe_own_schedule", ToggleKnob{&Tuning::moe_own_schedule}},
      {"moe_expert_major", ToggleKnob{&Tuning::moe_expert_major}},
      {"cuda_ggml_native", ToggleKnob{&Tuning::cuda_ggml_native}},
      {"cuda_ggml_q8_max_rows", IntKnob{&Tuning::cuda_ggml_q8_max_rows, 0, 16}},
      {"cuda_ggml_mma_max_rows", IntKnob{&Tuning::cuda_ggml_mma_max_rows, 0, 1 << 30}},
      {"cuda_ggml_hmma_max_rows", IntKnob{&Tuning::cuda_ggml_hmma_max_rows, 0, 1 << 30}},
      {"cuda_ggml_stream_max_rows", IntKnob{&Tuning::cuda_ggml_stream_max_rows, -1, 8}},
      {"cuda_ggml_gemv_pairs", ToggleKnob{&Tuning::cuda_ggml_gemv_pairs}},
      {"cpu_ggml_native", ToggleKnob{&Tuning::cpu_ggml_native}},
      {"cpu_l1_prefetch", ToggleKnob{&Tuning::cpu_l1_prefetch}},
      {"cpu_avx2_single_row", ToggleKnob{&Tuning::cpu_avx2_single_row}},
      {"cpu_ggml_decode_min_rows", IntKnob{&Tuning::cpu_ggml_decode_min_rows, 0, 1 << 20}},
      {"cpu_activations", CpuActKnob{&Tuning::cpu_activations}},
  };
  return table;
}

std::string known_keys() {
  std::string s;
  for (const Entry& e : knobs()) s += (s.empty() ? "" : ", ") + std::string(e.key);
  return s;
}

int parse_int(const std::string& key, const std::string& v) {
  char* end = nullptr;
  const long x = std::strtol(v.c_str(), &end, 10);
  MIXQ_CHECK_ARG(!v.empty() && end && *end == '\0', "tuning: ", key, "=", v, " is not an integer");
  return int(x);
}

Toggle parse_toggle(const std::string& key, const std::string& v) {
  if (v == "on" || v == "1") return Toggle::On;
  if (v == "off" || v == "0") return Toggle::Off;
  if (v == "auto" || v == "-1") return Toggle::Auto;
  MIXQ_FAIL(ErrorCode::InvalidArgument, "tuning: ", key, "=", v, " must be on, off or auto");
}

const char* toggle_name(Toggle t) { return t == Toggle::On ? "on" : t == Toggle::Off ? "off" : "auto"; }

void set(Tuning& t, const Entry& e, const std::string& v) {
  const std::string key = e.key;
  if (const auto* k = std::get_if<IntKnob>(&e.knob)) {
    const int x = parse_int(key, v);
    MIXQ_CHECK_ARG(x >= k->lo && x <= k->hi, "tuning: ", key, "=", x, " is outside [", k->lo, ", ",
                   k->hi, "]");
    MIXQ_CHECK_ARG(!k->powers_of_two || (x & (x - 1)) == 0, "tuning: ", key, "=", x,
                   " must be 0 or a power of two");
    t.*(k->field) = x;
  } else if (const auto* k = std::get_if<ToggleKnob>(&e.knob)) {
    t.*(k->field) = parse_toggle(key, v);
  } else if (const auto* k = std::get_if<ScheduleKnob>(&e.knob)) {
    MIXQ_CHECK_ARG(v == "auto" || v == "whole_tiles" || v == "stream_k", "tuning: ", key, "=", v,
                   " must be auto, whole_tiles or stream_k");
    t.*(k->field) = v == "auto" ? Tuning::Schedule::Auto
                    : v == "whole_tiles" ? Tuning::Schedule::WholeTiles : Tuning::Schedule::StreamK;
  } else if (const auto* k = std::get_if<CpuActKnob>(&e.knob)) {
    MIXQ_CHECK_ARG(v == "auto" || v == "exact" || v == "int8", "tuning: ", key, "=", v,
                   " must be auto, exact or int8");
    t.*(k->field) = v == "auto" ? Tuning::CpuActivations::Auto
                    : v == "exact" ? Tuning::CpuActivations::Exact : Tuning::CpuActivations::Int8;
  } else if (const auto* k = std::get_if<ReduceKnob>(&e.knob)) {
    MIXQ_CHECK_ARG(v == "auto" || v == "inline" || v == "fixup", "tuning: ", key, "=", v,
                   " must be auto, inline or fixup");
    t.*(k->field) = v == "auto" ? Tuning::Reduce::Auto
                    : v == "inline" ? Tuning::Reduce::Inline : Tuning::Reduce::Fixup;
  }
}

std::string value_of(const Tuning& t, const Entry& e) {
  if (const auto* k = std::get_if<IntKnob>(&e.knob)) return std::to_string(t.*(k->field));
  if (const auto* k = std::get_if<ToggleKnob>(&e.knob)) return toggle_name(t.*(k->field));
  if (const auto* k = std::get_if<ScheduleKnob>(&e.knob)) {
    const auto s = t.*(k->field);
    return s == Tuning::Schedule::Auto ? "auto" : s == Tuning::Schedule::WholeTiles ? "whole_tiles" : "stream_k";
  }
  if (const auto* k = std::get_if<CpuActKnob>(&e.knob)) {
    const auto a = t.*(k->field);
    return a == Tuning::CpuActivations::Auto ? "auto"
           : a == Tuning::CpuActivations::Exact ? "exact" : "int8";
  }
  const auto r = t.*(std::get<ReduceKnob>(e.knob).field);
  return r == Tuning::Reduce::Auto ? "auto" : r == Tuning::Reduce::Inline ? "inline" : "fixup";
}

}  // namespace

Tuning Tuning::parse(const std::string& text) { return parse(text, Tuning()); }

Tuning Tuning::parse(const std::string& text, const Tuning& base) {
  Tuning t = base;
  std::istringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    MIXQ_CHECK_ARG(eq != std::string::npos && eq > 0, "tuning: '", item,
                   "' is not key=value (keys: ", known_keys(), ")");
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    const Entry* found = nullptr;
    for (const Entry& e : knobs())
      if (key == e.key) found = &e;
    MIXQ_CHECK_ARG(found != nullptr, "tuning: unknown key '", key, "' (keys: ", known_keys(), ")");
    set(t, *found, value);
  }
  return t;
}

std::string Tuning::to_string() const {
  const Tuning automatic;
  std::string s;
  for (const Entry& e : knobs()) {
    const std::string v = value_of(*this, e);
    if (v != value_of(automatic, e)) s += (s.empty() ? "" : ",") + std::string(e.key) + "=" + v;
  }
  return s;
}

const Tuning& default_tuning() {
  static const Tuning t = [] {
    const char* e = std::getenv("MIXQ_TUNE");
    return e ? Tuning::parse(e) : Tuning();
  }();
  return t;
}

}  // namespace mixq
