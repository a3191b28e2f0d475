// The host cost of the C++ call itself, for the front end's overhead benchmark
// (python -m mixq.bench_overhead): mixq::linear called `iters` times back to back on views made
// once, timed with a steady clock around the loop. On CUDA the calls only enqueue work on the
// stream; the caller synchronises between batches so the launch queue never fills and blocks.
#include <chrono>
#include <cstdint>

#include "bindings.hpp"
#include "mixq/error.hpp"
#include "placement.hpp"
#include "views.hpp"

namespace mixq_py {

void bind_host_timing(nb::module_& m) {
  m.def("host_time_linear", [](nb::handle x, const Prepared& w, nb::handle y, uintptr_t stream,
                               nb::handle workspace, int64_t iters) {
        MIXQ_CHECK_ARG(iters > 0, "iters (", iters, ") must be > 0");
        Borrowed bx = borrow(x, "x", Access::Read);
        Borrowed by = borrow(y, "out", Access::Write);
        Borrowed bw = borrow_optional(workspace, "workspace", Access::Write);
        const mixq::ExecContext ctx = exec_context(stream, bw, 0);
        nb::gil_scoped_release release;
        using clock = std::chrono::steady_clock;
        const auto t0 = clock::now();
        for (int64_t i = 0; i < iters; ++i) mixq::linear(bx.view, w.weight, by.view, {}, ctx);
        return std::chrono::duration<double>(clock::now() - t0).count();
      }, nb::arg("x"), nb::arg("w"), nb::arg("out"), nb::arg("stream"),
      nb::arg("workspace").none(), nb::arg("iters"),
      "Seconds of host time for `iters` mixq::linear calls on the same views.");
}

}  // namespace mixq_py
