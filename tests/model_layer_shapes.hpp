// The linear layers (N x K, full size) of the models the tensor-parallel work serves: Llama-3
// 8B / 70B, Qwen2.5 7B / 72B, Mixtral-8x7B's experts and DeepSeek-V3's dense layers. Shared by
// the CPU shard tests and the GPU test that runs every split of them.
#pragma once

#include <cstdint>

namespace mixq::test {

struct LayerShape {
  const char* name;
  int64_t N, K;
};

inline constexpr LayerShape kModelLayers[] = {
    {"llama3-8b qkv", 6144, 4096},          {"llama3-8b o", 4096, 4096},
    {"llama3-8b gate_up", 28672, 4096},     {"llama3-8b down", 4096, 14336},
    {"llama3-70b qkv", 10240, 8192},        {"llama3-70b o", 8192, 8192},
    {"llama3-70b gate_up", 57344, 8192},    {"llama3-70b down", 8192, 28672},
    {"qwen2.5-7b qkv", 4608, 3584},         {"qwen2.5-7b o", 3584, 3584},
    {"qwen2.5-7b gate_up", 37888, 3584},    {"qwen2.5-7b down", 3584, 18944},
    {"qwen2.5-72b qkv", 10240, 8192},       {"qwen2.5-72b o", 8192, 8192},
    {"qwen2.5-72b gate_up", 59136, 8192},   {"qwen2.5-72b down", 8192, 29568},
    {"mixtral-8x7b w1/w3", 14336, 4096},    {"mixtral-8x7b w2", 4096, 14336},
    {"deepseek-v3 dense gate_up", 36864, 7168}, {"deepseek-v3 dense down", 7168, 18432},
    {"deepseek-v3 q_b", 24576, 1536},       {"deepseek-v3 kv_b", 32768, 512},
    {"deepseek-v3 o", 7168, 16384},
};

}  // namespace mixq::test
