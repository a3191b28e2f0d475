#include <cstdio>

#include "mixq/error.hpp"

int main(int, char**) {
  std::fprintf(stderr, "mixq: the command-line tool is being built\n");
  return 2;
}
