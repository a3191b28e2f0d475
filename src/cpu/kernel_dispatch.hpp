// From a tile's run-time arguments to the micro-kernel instances of one ISA: the code kind and
// the tile height become template arguments here, so each ISA file only names its kernels.
// Everything is in an unnamed namespace: each ISA file is compiled with its own -m flags, and an
// inline function with external linkage built once with AVX-512 could be the copy the linker keeps
// for the AVX2 file too (a struct copy in zmm registers is enough to fault on an AVX2-only CPU).
#pragma once

#include <type_traits>

#include "cpu/kernels.hpp"

namespace mixq::cpu {
namespace {

template <CodeKind CK>
using CodeKindC = std::integral_constant<CodeKind, CK>;

// fn(CodeKindC<kind>{}) for every code kind a panel can hold.
template <class Fn>
void with_code_kind(CodeKind kind, Fn&& fn) {
  switch (kind) {
    case CodeKind::Int4:
      return fn(CodeKindC<CodeKind::Int4>{});
    case CodeKind::Int8:
      return fn(CodeKindC<CodeKind::Int8>{});
    case CodeKind::Uint8:
      return fn(CodeKindC<CodeKind::Uint8>{});
    case CodeKind::Fp8:
      return fn(CodeKindC<CodeKind::Fp8>{});
    case CodeKind::F16:
      return fn(CodeKindC<CodeKind::F16>{});
    case CodeKind::BF16:
      return fn(CodeKindC<CodeKind::BF16>{});
    case CodeKind::F32:
      return fn(CodeKindC<CodeKind::F32>{});
  }
}

// The integer path: only integer codes are routed to it (the backend checks at prepare time), and
// only they get integer-path kernel instances.
template <class Fn>
void with_int_code_kind(CodeKind kind, Fn&& fn) {
  with_code_kind(kind, [&](auto ck) {
    if constexpr (decltype(ck)::value == CodeKind::Int4 || decltype(ck)::value == CodeKind::Int8 ||
                  decltype(ck)::value == CodeKind::Uint8)
      fn(ck);
  });
}

// Rows first .. first + rows of a tile: its activation rows, their per-segment sums and its
// output rows (float and int32 outputs are both 4 bytes).
inline FloatTileArgs tile_rows(const FloatTileArgs& a, int first, int rows) {
  FloatTileArgs b = a;
  b.rows = rows;
  b.x = a.x + first * a.ldx;
  b.xsum = a.xsum + first * a.ldxs;
  b.c = a.c + first * a.ldc;
  return b;
}

inline IntTileArgs tile_rows(const IntTileArgs& a, int first, int rows) {
  IntTileArgs b = a;
  b.rows = rows;
  b.x = a.x + first * a.ldx;
  b.xs = a.xs + first * a.ldxs;
  b.c = static_cast<char*>(a.c) + first * a.ldc * 4;
  return b;
}

// tile(std::integral_constant<int, R>{}, args) at the instantiated heights R = 1, 2, 4, 8; a tile
// of 3, 5, 6 or 7 rows runs as pieces of 4, 2 and 1 (registers are sized per height, so the
// other heights would each be a whole kernel instance more per code kind).
template <class Args, class Tile>
void with_tile_height(const Args& a, Tile&& tile) {
  switch (a.rows) {
    case 1:
      return tile(std::integral_constant<int, 1>{}, a);
    case 2:
      return tile(std::integral_constant<int, 2>{}, a);
    case 4:
      return tile(std::integral_constant<int, 4>{}, a);
    case 8:
      return tile(std::integral_constant<int, 8>{}, a);
    default: {
      int done = 0;
      for (int step : {4, 2, 1})
        for (; a.rows - done >= step; done += step)
          with_tile_height(tile_rows(a, done, step), tile);
    }
  }
}

// The float path: tile(CodeKindC<kind>{}, height, piece) for each piece of the tile.
template <class Tile>
void dispatch_float_tile(const FloatTileArgs& a, Tile&& tile) {
  with_code_kind(a.w->kind, [&](auto ck) {
    with_tile_height(a, [&](auto rows, const FloatTileArgs& b) { tile(ck, rows, b); });
  });
}

// The integer path: tile(CodeKindC<kind>{}, height, std::bool_constant<int_mode>{}, piece).
template <class Tile>
void dispatch_int_tile(const IntTileArgs& a, Tile&& tile) {
  with_int_code_kind(a.w->kind, [&](auto ck) {
    with_tile_height(a, [&](auto rows, const IntTileArgs& b) {
      if (b.int_mode) tile(ck, rows, std::true_type{}, b);
      else tile(ck, rows, std::false_type{}, b);
    });
  });
}

}  // namespace
}  // namespace mixq::cpu
