// `mixq bench --op conv2d`: mixq's conv2d on quantized weights, timed per layer shape, with its
// error against the float64 reference conv where that is cheap enough to compute. The default
// layers are ResNet-50's distinct conv shapes and six of a YOLOv8-s backbone's (640 x 640 input)
// at batch 1, 8 and 32; --conv gives others.
// CUDA: per-call event timing on one stream, the L2 flushed (a memset of twice its size) before
// every timed call, median. CPU: wall clock, median. The cuDNN FP16 baseline is timed by
// `python -m mixq.bench_conv` (torch in the same process); this command has no baseline.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#if defined(MIXQ_WITH_CUDA)
#include <cuda_runtime.h>
#endif

#include "bench_options.hpp"
#include "cli.hpp"
#include "mixq/error.hpp"
#include "mixq/formats/output_file.hpp"
#include "mixq/numeric.hpp"
#include "mixq/ops.hpp"
#include "mixq/quantize.hpp"
#include "mixq/reference.hpp"

namespace mixq::cli {

namespace {

const char* kHelp =
    "usage: mixq bench --op conv2d [options]\n"
    "\n"
    "Times conv2d on quantized weights (KhKwCi order, blocks along Ci) per layer shape.\n"
    "  --conv N,Ci,H,W,Co,Kh,Kw,stride,pad   a layer (several: separated by ';'); default: the\n"
    "                       ResNet-50 conv shapes (3x3 64..512, 1x1 1024->256 and 2048->512, the\n"
    "                       7x7 stride-2 stem) and six of a YOLOv8-s backbone at 640 x 640 (the\n"
    "                       3x3/2 stem and downsamplers, 3x3 64 @80 and 256 @20, 1x1 512->256\n"
    "                       @20) at every --batch\n"
    "  --batch LIST         batches of the default layers (default 1,8,32)\n"
    "  --schemes LIST       default w4g128,w8g128; the block runs along Ci (a layer whose Ci it\n"
    "                       does not divide gets one block per output channel)\n"
    "  --backend NAME       auto (default), cuda, cpu, ref\n"
    "  --act f16|bf16|f32   activation and output dtype (default f16 on cuda, f32 otherwise)\n"
    "  --layout nhwc|nchw   default nhwc\n"
    "  --reps N, --warmup N timed and untimed calls per layer (default 20, 2)\n"
    "  --threads N          CPU threads (0: all)\n"
    "  --tune K=V,...       kernel tuning knobs (mixq/tuning.hpp keys, e.g. wo_token_tile=32),\n"
    "                       over MIXQ_TUNE\n"
    "  --check-macs N       compare with the float64 reference when B*Ho*Wo*Co*K <= N\n"
    "                       (default 2e8; 0: never)\n"
    "  --json FILE          write the rows\n"
    "  --quick              batch 1, 3 reps\n";

struct Layer {
  std::string name;
  int64_t B, Ci, H, W, Co, Kh, Kw, stride, pad;
};

struct Row {
  Layer l;
  std::string scheme, block, act, kernel;
  double us = 0, tflop_s = 0, weight_gb_s = 0, rel_err = -1, tol = 0;
  bool ok() const { return rel_err < 0 || rel_err <= tol; }
};

// ResNet-50's distinct conv shapes, then a modern detection backbone's (YOLOv8-s at 640 x 640:
// stride-2 3x3 downsamplers with few input channels, a C2f bottleneck's 3x3, the SPPF's 1x1).
std::vector<Layer> default_layers(const std::vector<int64_t>& batches) {
  struct S {
    const char* name;
    int64_t Ci, H, Co, K, s, p;
  };
  const S shapes[] = {{"3x3 64->64 @56", 64, 56, 64, 3, 1, 1},
                      {"3x3 128->128 @28", 128, 28, 128, 3, 1, 1},
                      {"3x3 256->256 @14", 256, 14, 256, 3, 1, 1},
                      {"3x3 512->512 @7", 512, 7, 512, 3, 1, 1},
                      {"1x1 1024->256 @14", 1024, 14, 256, 1, 1, 0},
                      {"1x1 2048->512 @7", 2048, 7, 512, 1, 1, 0},
                      {"7x7/2 stem 3->64 @224", 3, 224, 64, 7, 2, 3},
                      {"3x3/2 stem 3->32 @640", 3, 640, 32, 3, 2, 1},
                      {"3x3/2 32->64 @320", 32, 320, 64, 3, 2, 1},
                      {"3x3 64->64 @80", 64, 80, 64, 3, 1, 1},
                      {"3x3/2 128->256 @80", 128, 80, 256, 3, 2, 1},
                      {"3x3 256->256 @20", 256, 20, 256, 3, 1, 1},
                      {"1x1 512->256 @20", 512, 20, 256, 1, 1, 0}};
  std::vector<Layer> out;
  for (int64_t b : batches)
    for (const S& s : shapes) out.push_back({s.name, b, s.Ci, s.H, s.H, s.Co, s.K, s.K, s.s, s.p});
  return out;
}

Layer parse_conv(const std::string& spec) {
  std::vector<int64_t> v;
  for (const std::string& t : split(spec, ',')) {
    char* end = nullptr;
    const long long x = std::strtoll(t.c_str(), &end, 10);
    if (t.empty() || *end != '\0' || x < 0)
      usage_fail("bench", "--conv: '" + spec + "': expected N,Ci,H,W,Co,Kh,Kw,stride,pad (integers)");
    v.push_back(x);
  }
  if (v.size() != 9) usage_fail("bench", "--conv: '" + spec + "' has " + std::to_string(v.size()) +
                                             " values, expected N,Ci,H,W,Co,Kh,Kw,stride,pad");
  for (int i : {0, 1, 2, 3, 4, 5, 6, 7})
    if (v[i] < 1) usage_fail("bench", "--conv: '" + spec + "': N, Ci, H, W, Co, Kh, Kw, stride must be >= 1");
  return {spec, v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8]};
}

std::string json_esc(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += c;
  }
  return o + "\"";
}

std::vector<uint8_t> random_bytes(size_t n, DType t, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, scale);
  std::vector<uint8_t> b(n * size_t(dtype_bits(t) / 8));
  for (size_t i = 0; i < n; ++i) {
    const float v = d(rng);
    if (t == DType::F32) std::memcpy(b.data() + 4 * i, &v, 4);
    else {
      const uint16_t h = t == DType::F16 ? f32_to_f16(v) : f32_to_bf16(v);
      std::memcpy(b.data() + 2 * i, &h, 2);
    }
  }
  return b;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Device memory for the CUDA backend, host memory otherwise.
struct Buf {
  bool cuda = false;
  void* p = nullptr;
  std::vector<uint8_t> host;
  Buf(size_t bytes, bool on_cuda) : cuda(on_cuda) {
    bytes = std::max<size_t>(bytes, 16);
#if defined(MIXQ_WITH_CUDA)
    if (cuda) {
      MIXQ_CHECK(cudaMalloc(&p, bytes) == cudaSuccess, ErrorCode::Cuda, "bench: cudaMalloc of ", bytes, " bytes");
      return;
    }
#endif
    host.resize(bytes);
    p = host.data();
  }
  ~Buf() {
#if defined(MIXQ_WITH_CUDA)
    if (cuda && p) cudaFree(p);
#endif
  }
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;
  void upload(const std::vector<uint8_t>& src) {
#if defined(MIXQ_WITH_CUDA)
    if (cuda) {
      MIXQ_CHECK(cudaMemcpy(p, src.data(), src.size(), cudaMemcpyHostToDevice) == cudaSuccess,
                 ErrorCode::Cuda, "bench: upload");
      return;
    }
#endif
    std::memcpy(p, src.data(), src.size());
  }
  std::vector<uint8_t> download(size_t n) const {
    std::vector<uint8_t> out(n);
#if defined(MIXQ_WITH_CUDA)
    if (cuda) {
      MIXQ_CHECK(cudaMemcpy(out.data(), p, n, cudaMemcpyDeviceToHost) == cudaSuccess,
                 ErrorCode::Cuda, "bench: download");
      return out;
    }
#endif
    std::memcpy(out.data(), p, n);
    return out;
  }
};

double elem(const std::vector<uint8_t>& y, DType t, size_t i) {
  if (t == DType::F32) {
    float f;
    std::memcpy(&f, y.data() + 4 * i, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, y.data() + 2 * i, 2);
  return t == DType::F16 ? f16_to_f32(h) : bf16_to_f32(h);
}

Row run_layer(const Layer& l, const std::string& scheme_name, BackendKind backend, DType act,
              Layout layout, int reps, int warmup, int threads, double check_macs, uint32_t seed,
              const Tuning& tuning) {
  Row r;
  r.l = l;
  r.scheme = scheme_name;
  r.act = dtype_name(act);
  const bool cuda = backend == BackendKind::CUDA;
  const bool nhwc = layout == Layout::NHWC;
  const int64_t K = l.Ci * l.Kh * l.Kw;
  QuantScheme s = parse_scheme(scheme_name);
  // the block runs along Ci (KhKwCi order); per output channel where it does not divide Ci
  if (s.block_k == 0 || l.Ci % s.block_k != 0) {
    s.block_k = 0;
    r.block = "pc";
  } else {
    r.block = "g" + std::to_string(s.block_k);
  }
  std::vector<uint8_t> wf = random_bytes(size_t(l.Co * K), DType::F32, seed, 0.05f);
  ConvWeight cw;
  cw.weight = quantize_weight(TensorView(wf.data(), DType::F32, {l.Co, K}), s);
  cw.Ci = l.Ci;
  cw.Kh = l.Kh;
  cw.Kw = l.Kw;
  cw.order = ConvKOrder::KhKwCi;
  PrepareOptions o;
  o.backend = backend;
  o.tuning = tuning;
  const PreparedWeight pw = prepare(cw, o);
  Conv2dParams p;
  p.stride_h = p.stride_w = l.stride;
  p.pad_h = p.pad_w = l.pad;
  p.layout = layout;
  int64_t Ho, Wo;
  conv2d_output_size(l.H, l.W, l.Kh, l.Kw, p, &Ho, &Wo);
  const int64_t pixels = l.B * Ho * Wo;
  r.kernel = pw.kernel_name(pixels, act);
  const Device dev = cuda ? Device::CUDA : Device::CPU;
  auto view4 = [&](void* d, DType t, int64_t C, int64_t h, int64_t w) {
    return nhwc ? TensorView(d, t, {l.B, h, w, C}, dev) : TensorView(d, t, {l.B, C, h, w}, dev);
  };
  const std::vector<uint8_t> xb = random_bytes(size_t(l.B * l.Ci * l.H * l.W), act, seed + 1, 1.f);
  const size_t yb = size_t(pixels * l.Co) * size_t(dtype_bits(act) / 8);
  Buf dx(xb.size(), cuda), dy(yb, cuda);
  dx.upload(xb);
  const TensorView xv = view4(dx.p, act, l.Ci, l.H, l.W), yv = view4(dy.p, act, l.Co, Ho, Wo);
  const size_t ws_bytes = conv2d_workspace_size(pw, xv, p);
  Buf ws(ws_bytes, cuda);
  ExecContext ctx;
  ctx.num_threads = threads;
  if (ws_bytes) {
    ctx.workspace = ws.p;
    ctx.workspace_bytes = ws_bytes;
  }
  std::vector<double> times;
#if defined(MIXQ_WITH_CUDA)
  if (cuda) {
    cudaStream_t stream;
    cudaEvent_t e0, e1;
    MIXQ_CHECK(cudaStreamCreate(&stream) == cudaSuccess, ErrorCode::Cuda, "bench: stream");
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    int l2 = 0;
    cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0);
    const size_t flush_bytes = size_t(std::max(l2, 1 << 20)) * 2;
    Buf flush(flush_bytes, true);
    ctx.stream = stream;
    for (int i = 0; i < warmup; ++i) conv2d(xv, pw, yv, p, {}, ctx);
    for (int i = 0; i < reps; ++i) {
      cudaMemsetAsync(flush.p, i & 0xFF, flush_bytes, stream);
      cudaEventRecord(e0, stream);
      conv2d(xv, pw, yv, p, {}, ctx);
      cudaEventRecord(e1, stream);
      MIXQ_CHECK(cudaEventSynchronize(e1) == cudaSuccess, ErrorCode::Cuda, "bench: conv2d failed");
      float ms = 0;
      cudaEventElapsedTime(&ms, e0, e1);
      times.push_back(ms * 1e3);
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cudaStreamDestroy(stream);
  }
#endif
  if (!cuda) {
    for (int i = 0; i < warmup; ++i) conv2d(xv, pw, yv, p, {}, ctx);
    for (int i = 0; i < reps; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      conv2d(xv, pw, yv, p, {}, ctx);
      times.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    }
  }
  r.us = median(times);
  const double macs = double(pixels) * double(l.Co) * double(K);
  r.tflop_s = r.us > 0 ? 2 * macs / (r.us * 1e-6) * 1e-12 : 0;
  r.weight_gb_s = r.us > 0 ? double(cw.weight.storage_bytes()) / (r.us * 1e-6) * 1e-9 : 0;
  if (check_macs > 0 && macs <= check_macs) {
    const std::vector<uint8_t> y = dy.download(yb);
    std::vector<double> ref(size_t(pixels * l.Co));
    ref::conv2d_weight_only(view4(const_cast<uint8_t*>(xb.data()), act, l.Ci, l.H, l.W), cw,
                            nhwc ? TensorView(ref.data(), DType::F64, {l.B, Ho, Wo, l.Co})
                                 : TensorView(ref.data(), DType::F64, {l.B, l.Co, Ho, Wo}),
                            p, {});
    double num = 0, den = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      const double a = elem(y, act, i);
      num += (a - ref[i]) * (a - ref[i]);
      den += ref[i] * ref[i];
    }
    r.rel_err = std::isfinite(num) ? std::sqrt(num / std::max(den, 1e-300)) : 1e30;
    r.tol = act == DType::BF16 ? 8e-3 : act == DType::F16 ? 1.5e-3 : 1e-4;
    if (!cuda) r.tol = std::max(r.tol, 1e-4);
  }
  return r;
}

}  // namespace

int run_bench_conv(int argc, char** argv) {
  Args a("bench", argc, argv,
         {{"--op", "", true},
          {"--conv", "", true},
          {"--batch", "", true},
          {"--schemes", "", true},
          {"--backend", "", true},
          {"--act", "", true},
          {"--layout", "", true},
          {"--reps", "", true},
          {"--warmup", "", true},
          {"--threads", "", true},
          {"--check-macs", "", true},
          {"--json", "", true},
          {"--quick", "", false},
          {"--seed", "", true},
          {"--tune", "", true}});
  if (a.help()) return print_help(kHelp);
  a.expect_positionals(0, 0, "no positional arguments");
  if (a.has("--json")) check_outputs("bench", {{"--json", a.get("--json")}}, {});
  const bool quick = a.has("--quick");
  BackendKind backend = parse_backend(a.get("--backend", "auto"));
  if (backend == BackendKind::Auto) backend = cuda_available() ? BackendKind::CUDA : BackendKind::CPU;
  const std::string act_name = a.get("--act", backend == BackendKind::CUDA ? "f16" : "f32");
  DType act;
  if (act_name == "f16") act = DType::F16;
  else if (act_name == "bf16") act = DType::BF16;
  else if (act_name == "f32") act = DType::F32;
  else usage_fail("bench", "--act must be f16, bf16 or f32, got '" + act_name + "'");
  const std::string lay = a.get("--layout", "nhwc");
  if (lay != "nhwc" && lay != "nchw") usage_fail("bench", "--layout must be nhwc or nchw, got '" + lay + "'");
  const Layout layout = lay == "nhwc" ? Layout::NHWC : Layout::NCHW;
  std::vector<Layer> layers;
  if (a.has("--conv")) {
    for (const std::string& spec : split(a.get("--conv"), ';'))
      if (!spec.empty()) layers.push_back(parse_conv(spec));
  } else {
    layers = default_layers(
        parse_int_list("bench", "--batch", a.get("--batch", quick ? "1" : "1,8,32"), 1, 4096));
  }
  const std::vector<std::string> schemes = split(a.get("--schemes", "w4g128,w8g128"), ',');
  const int reps = int(a.get_int("--reps", quick ? 3 : 20, 1, 100000));
  const int warmup = int(a.get_int("--warmup", quick ? 1 : 2, 0, 100000));
  const int threads = int(a.get_int("--threads", 0, 0, 4096));
  const double check_macs = double(a.get_int("--check-macs", 200000000, 0, int64_t(1) << 50));
  const uint32_t seed = uint32_t(a.get_int("--seed", 1, 0, 1 << 30));
  const Tuning tuning = parse_tuning(a);

  std::printf("mixq bench --op conv2d: backend %s, act %s, layout %s, %d reps (median%s)\n\n",
              backend_name(backend), dtype_name(act), lay.c_str(), reps,
              backend == BackendKind::CUDA ? ", L2 flushed before each call" : "");
  std::printf("| layer | N | scheme | us | TFLOP/s | weight GB/s | rel err | kernel |\n");
  std::printf("|---|---:|---|---:|---:|---:|---:|---|\n");
  std::vector<Row> rows;
  for (const Layer& l : layers)
    for (const std::string& sc : schemes) {
      Row r =
          run_layer(l, sc, backend, act, layout, reps, warmup, threads, check_macs, seed, tuning);
      char err[32] = "-";
      if (r.rel_err >= 0) std::snprintf(err, sizeof err, "%.2e%s", r.rel_err, r.ok() ? "" : " FAIL");
      std::printf("| %s | %lld | %s %s | %.1f | %.2f | %.0f | %s | %s |\n", l.name.c_str(),
                  static_cast<long long>(l.B), sc.c_str(), r.block.c_str(), r.us, r.tflop_s,
                  r.weight_gb_s, err, r.kernel.c_str());
      std::fflush(stdout);
      rows.push_back(r);
    }
  if (a.has("--json")) {
    formats::OutputFile json(a.get("--json"));
    {
      std::ofstream f(json.temp_path());
      f << "{\n  \"op\": \"conv2d\",\n  \"backend\": " << json_esc(backend_name(backend))
        << ",\n  \"act\": " << json_esc(dtype_name(act)) << ",\n  \"layout\": " << json_esc(lay)
        << ",\n  \"rows\": [";
      for (size_t i = 0; i < rows.size(); ++i) {
        const Row& r = rows[i];
        f << (i ? ",\n" : "\n") << "    {\"layer\": " << json_esc(r.l.name) << ", \"N\": " << r.l.B
          << ", \"Ci\": " << r.l.Ci << ", \"H\": " << r.l.H << ", \"W\": " << r.l.W
          << ", \"Co\": " << r.l.Co << ", \"Kh\": " << r.l.Kh << ", \"Kw\": " << r.l.Kw
          << ", \"stride\": " << r.l.stride << ", \"pad\": " << r.l.pad
          << ", \"scheme\": " << json_esc(r.scheme) << ", \"block\": " << json_esc(r.block)
          << ", \"us\": " << r.us << ", \"tflop_per_s\": " << r.tflop_s
          << ", \"weight_gb_per_s\": " << r.weight_gb_s << ", \"rel_err\": " << r.rel_err
          << ", \"tol\": " << r.tol << ", \"ok\": " << (r.ok() ? "true" : "false")
          << ", \"kernel\": " << json_esc(r.kernel) << "}";
      }
      f << "\n  ]\n}\n";
      MIXQ_CHECK(f.good(), ErrorCode::Io, "bench: cannot write ", a.get("--json"));
    }
    json.commit();
  }
  int failed = 0;
  for (const Row& r : rows) failed += r.ok() ? 0 : 1;
  if (failed) {
    std::fprintf(stderr, "mixq bench: %d result(s) exceed their error tolerance (marked FAIL)\n", failed);
    return 1;
  }
  return 0;
}

}  // namespace mixq::cli
