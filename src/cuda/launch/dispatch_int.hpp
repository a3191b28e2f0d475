// Compile-time dispatch of a runtime value over the values a kernel registry instantiated.
#pragma once

#include <type_traits>

namespace mixq::cuda {

template <int V>
using Int = std::integral_constant<int, V>;
template <class T>
struct TypeTag {
  using type = T;
};

// Calls f(Int<v>) for the v of `values` equal to x; false when none is.
template <int... V, class F>
bool dispatch_int(int x, F&& f) {
  return ((x == V ? (f(Int<V>{}), true) : false) || ...);
}

}  // namespace mixq::cuda
