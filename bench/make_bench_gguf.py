#!/usr/bin/env python3
"""Writes a synthetic GGUF file for timing: one 2-D weight per (ggml type, layer shape).

Each tensor is named `<type>.<K>x<N>.weight` (e.g. `q4_k.4096x14336.weight`; K = in features,
ne[0], N = out features), so that `mixq bench FILE --only` and bench/llamacpp_driver --only can
select a type or a shape. The blocks are random bytes (codes, 6-bit sub-scales, high bits) with
the float16 super-block scales (d, dmin) overwritten by finite normal values (weights of ~0.02
to 0.1 RMS): valid for every decoder, and a product's speed does not depend on the values.
K-quants and IQ4_XS have no encoder in gguf-py 0.19, which is why the blocks are made directly.

    python3 bench/make_bench_gguf.py -o bench.gguf
    python3 bench/make_bench_gguf.py -o small.gguf --types q4_0,q8_0 --shapes 256x512
"""
import argparse
import sys

import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFWriter

DEFAULT_TYPES = "q4_0,q4_k,q5_k,q6_k,q8_0,iq4_xs"
DEFAULT_SHAPES = "4096x4096,4096x14336,14336x4096,4096x6144"

# Byte offsets of the float16 scale fields inside one block (ggml-common.h), and the range each
# is drawn from (weights of ~0.02 RMS quantized by ggml give scales of about this size).
SCALE_FIELDS = {
    "Q4_0": [(0, 4e-3, 8e-3)],                        # d
    "Q8_0": [(0, 2e-4, 5e-4)],                        # d
    "Q4_K": [(0, 6.5e-5, 1.2e-4), (2, 6.5e-5, 1.2e-4)],  # d, dmin (times 6-bit sub-scales)
    "Q5_K": [(0, 6.5e-5, 1e-4), (2, 6.5e-5, 1.2e-4)],    # d, dmin
    "Q6_K": [(208, 6.5e-5, 1e-4)],                       # d (after ql, qh, int8 scales)
    "IQ4_XS": [(0, 6.5e-5, 1e-4)],                       # d (times 6-bit scales - 32)
}


def parse_shapes(text):
    shapes = []
    for item in text.split(","):
        k, sep, n = item.partition("x")
        if not sep or not k.isdigit() or not n.isdigit() or int(k) < 1 or int(n) < 1:
            raise SystemExit(f"make_bench_gguf: --shapes: '{item}' is not KxN")
        shapes.append((int(k), int(n)))
    return shapes


def random_blocks(qtype, K, N, rng):
    """Bytes of a [N][K] tensor of `qtype`: shape (N, K // block * block_bytes), uint8."""
    block, block_bytes = GGML_QUANT_SIZES[qtype]
    nb = K // block
    data = rng.integers(0, 256, size=(N, nb, block_bytes), dtype=np.uint8)
    for offset, lo, hi in SCALE_FIELDS[qtype.name]:
        d = rng.uniform(lo, hi, size=(N, nb)).astype(np.float16)
        data[:, :, offset:offset + 2] = d.view(np.uint8).reshape(N, nb, 2)
    return data.reshape(N, nb * block_bytes)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-o", "--output", required=True, help="GGUF file to write")
    ap.add_argument("--types", default=DEFAULT_TYPES, help=f"ggml types (default {DEFAULT_TYPES})")
    ap.add_argument("--shapes", default=DEFAULT_SHAPES, help=f"KxN list (default {DEFAULT_SHAPES})")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)

    qtypes = []
    for name in args.types.split(","):
        key = name.strip().upper()
        if key not in SCALE_FIELDS:
            raise SystemExit(f"make_bench_gguf: --types: '{name}' is not one of {', '.join(SCALE_FIELDS).lower()}")
        qtypes.append(GGMLQuantizationType[key])
    shapes = parse_shapes(args.shapes)
    for qtype in qtypes:  # every shape checked before anything is written
        for K, _ in shapes:
            if K % GGML_QUANT_SIZES[qtype][0]:
                raise SystemExit(f"make_bench_gguf: K = {K} is not a multiple of {qtype.name}'s block of "
                                 f"{GGML_QUANT_SIZES[qtype][0]}")

    rng = np.random.default_rng(args.seed)
    writer = GGUFWriter(args.output, "mixq-bench")
    writer.add_string("mixq.bench.note", "random blocks for timing; not a model")
    total = 0
    for qtype in qtypes:
        for K, N in shapes:
            data = random_blocks(qtype, K, N, rng)
            writer.add_tensor(f"{qtype.name.lower()}.{K}x{N}.weight", data, raw_dtype=qtype)
            total += data.nbytes
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    print(f"wrote {args.output}: {len(qtypes) * len(shapes)} tensors, {total / 2**20:.1f} MiB of weights",
          file=sys.stderr)


if __name__ == "__main__":
    main()
