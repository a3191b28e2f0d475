// MIXQ_LOG=plan: each call's plan (the kernel instantiation) printed on stderr, for finding out
// which kernel a program's calls run. The variable is read once per process.
#pragma once

#include <cstdint>
#include <string>

namespace mixq::cuda {

bool log_plans();
void print_plan(const char* op, int64_t M, const std::string& kernel);

}  // namespace mixq::cuda
